"""The gate runner: every registered gate passes at the smoke tier here and each of its power checks
is caught; and the runner fails a gate that is wrong or blind."""

import dataclasses

import pytest
import torch

from attnkit.gate.registry import Gate, Perturbation, gates
from attnkit.gate.runner import format_table, run_gate, write_jsonl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.skipif(torch.cuda.is_available(),
                    reason="on a GPU the gates run at full tier through `attnkit check --tier full` instead")
@pytest.mark.parametrize("gate", gates(), ids=lambda g: g.name)
def test_registered_gate_passes_and_catches_its_perturbations(gate):
    ok, why = gate.available(DEVICE)
    if not ok:  # a Gluon kernel's gate: its interpreter twin's gate runs here instead
        pytest.skip(f"{gate.name}: {why} (not a pass)")
    res = run_gate(gate, DEVICE, "smoke", seed=1234)
    assert res.status == "pass", res.reason
    assert res.cases, "a gate with no case at the smoke tier proves nothing here"
    for name, st in res.power.items():
        assert st["caught"], f"power check {name} not caught"


def _merge_gate():
    return next(g for g in gates("merge") if g.name == "merge/triton")


def test_runner_fails_a_wrong_subject():
    g = _merge_gate()
    wrong = dataclasses.replace(g, name="merge/wrong", subject=lambda inp, p=None: g.subject(inp, "split-lost"))
    res = run_gate(wrong, DEVICE, "smoke", seed=1)
    assert res.status == "fail" and "failed" in res.reason


def test_runner_fails_a_blind_gate():
    g = _merge_gate()
    blind = dataclasses.replace(g, name="merge/blind", perturbations=(
        Perturbation("no-op", "a perturbation that changes nothing"),))
    blind = dataclasses.replace(blind, subject=lambda inp, p=None: g.subject(inp, None))
    res = run_gate(blind, DEVICE, "smoke", seed=1)
    assert res.status == "fail" and "not caught" in res.reason


def test_power_check_draws_a_case_anew_before_calling_a_perturbation_blind():
    """A perturbation missed on a case's first inputs is tried on fresh draws of the same case (other seeds, up to
    POWER_DRAWS in all) before the next case: here one that shows only from its second call is caught on the first
    case's second draw, whose inputs differ from the first's; a no-op is tried POWER_DRAWS times a case and stays
    not caught."""
    from attnkit.gate.runner import POWER_CASES_MAX, POWER_DRAWS
    g = _merge_gate()
    seen = []

    def late(inp, p=None):
        if p == "late":
            seen.append(inp["acc"].clone())
            out, lse = g.subject(inp, None)
            return (out + 1.0, lse) if len(seen) >= 2 else (out, lse)
        return g.subject(inp, p)
    gl = dataclasses.replace(g, name="merge/late", subject=late, perturbations=(
        Perturbation("late", "a fault that shows from its second call"),))
    res = run_gate(gl, DEVICE, "smoke", seed=1)
    st = res.power["late"]
    assert res.status == "pass" and st["caught"] and st["tried"] == 1 and st["draws"] == 2, st
    assert len(seen) == 2 and not torch.equal(seen[0], seen[1])  # a fresh draw, not the same inputs again
    blind = dataclasses.replace(g, name="merge/blind", subject=lambda inp, p=None: g.subject(inp, None),
                                perturbations=(Perturbation("no-op", "a perturbation that changes nothing"),))
    res = run_gate(blind, DEVICE, "smoke", seed=1)
    st = res.power["no-op"]
    assert res.status == "fail" and not st["caught"] and st["draws"] == st["tried"] * POWER_DRAWS, st
    assert 1 <= st["tried"] <= POWER_CASES_MAX


def test_a_fresh_draw_that_fails_is_recorded_and_neither_stops_the_gate_nor_counts_as_a_catch(monkeypatch):
    """The power check's fresh draws run outside the case's own guard: one that raises ends that case's draws with
    the error recorded, the gate runs on through its other cases, and the blind perturbation stays not caught."""
    import attnkit.gate.runner as runner
    g = _merge_gate()
    blind = dataclasses.replace(g, name="merge/blind", subject=lambda inp, p=None: g.subject(inp, None),
                                perturbations=(Perturbation("no-op", "a perturbation that changes nothing"),))
    real = runner._draw

    def draw(gate, case, device, seed):
        if seed != 1:  # every fresh draw (the cases' own draws use the run's seed)
            raise torch.cuda.OutOfMemoryError("no room for a fresh draw")
        return real(gate, case, device, seed)
    monkeypatch.setattr(runner, "_draw", draw)
    res = run_gate(blind, DEVICE, "smoke", seed=1)
    st = res.power["no-op"]
    assert len(res.cases) == len(runner.gate_cases(blind, "smoke")) > 1
    assert all(c["status"] == "pass" for c in res.cases), res.cases
    assert res.status == "fail" and not st["caught"] and st["draws"] == st["tried"] == st["draw_errors"], st
    assert "OutOfMemoryError" in st["draw_error"] and "draw 1" in st["draw_error"], st
    assert f"NOT CAUGHT ({st['draw_errors']} fresh draw(s) failed" in runner.format_table([res])


def test_runner_records_a_crash_as_failure():
    def boom(inp, p=None):
        raise RuntimeError("kernel exploded")
    g = dataclasses.replace(_merge_gate(), name="merge/crash", subject=boom)
    res = run_gate(g, DEVICE, "smoke", seed=1)
    assert res.status == "fail" and all("kernel exploded" in c["reason"] for c in res.cases)


def test_runner_skips_cuda_gates_without_gpu_and_says_so(tmp_path):
    g = dataclasses.replace(_merge_gate(), name="merge/cuda-only", needs="cuda")
    res = run_gate(g, "cpu", "smoke", seed=1)
    assert res.status == "skipped" and "CUDA" in res.reason
    table = format_table([res])
    assert "SKIPPED" in table
    write_jsonl(tmp_path / "r.jsonl", {"device": "cpu"}, [res], {"tier": "smoke"})
    assert '"status": "skipped"' in (tmp_path / "r.jsonl").read_text()


def test_runner_records_a_peer_that_cannot_take_a_shape_as_unsupported():
    def cannot(inp, p=None):
        raise NotImplementedError("this peer has no such layout")
    g = dataclasses.replace(_merge_gate(), name="merge/peer-unsupported", subject=cannot, kind="peer")
    res = run_gate(g, DEVICE, "smoke", seed=1)
    assert all(c["status"] == "unsupported" for c in res.cases)
    assert res.status == "skipped" and "none of the cases" in res.reason
