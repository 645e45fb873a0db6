"""benchmarks/experiments/stress_under_load.py, the check of the GPU kernels under concurrent load: its job grammar
and both of its comparisons, run on small cases where the kernels run (the interpreter on a CPU, else the GPU), each
shown failing on a changed result. The load itself needs a GPU."""

import importlib.util
import pathlib

import pytest
from attnkit.testing import inputs, shapes

_PATH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "experiments" / "stress_under_load.py"


@pytest.fixture(scope="module")
def stress():
    spec = importlib.util.spec_from_file_location("stress_under_load", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_jobs_are_checked_before_any_process_starts(stress):
    assert all(stress._check_job(j) is None for j in stress.DEFAULT_JOBS)
    assert "VARIANT" in stress._check_job("relbias:nope@relbias-prefill-s1")
    assert "gate name" in stress._check_job("sparse_int8/nope@sparse_int8-edge-n0")
    assert "shape id" in stress._check_job("sparse_int8/triton@nope")
    assert stress._check_job("sparse_int8/triton") == "SUBJECT@CASE"


def test_gate_subject_compares_bytes_with_its_first_call(stress, device):
    case, call, check = stress._subject("sparse_int8/triton@sparse_int8-decode-r1-g4-n65")
    inp = inputs.make_inputs(case, device=device, seed=1)
    assert check(call(inp)) == (0, None)  # the first call is the reference
    assert check(call(inp)) == (0, None)  # deterministic
    out, lse = call(inp)
    out.view(-1)[0] += 1  # one element changed: seen
    n, ex = check((out, lse))
    assert n > 0 and ex["bytes_differing"][0] > 0


def test_relbias_subject_compares_with_the_triton_kernel(stress, monkeypatch, device):
    monkeypatch.setitem(stress.RELBIAS_VARIANTS, "triton", dict(gluon=False))  # no Gluon on a CPU
    case, call, check = stress._subject("relbias:triton@relbias-prefill-s113")
    inp = inputs.make_inputs(case, device=device, seed=1)
    o, lse = call(inp)
    assert check((o, lse)) == (0, None)
    o = o.clone()
    o[3, 0, 0] += 1.0  # one row wrong
    n, ex = check((o, lse))
    assert n == 1 and ex["first"] == [[3, 0]]
    lse = lse.clone()
    lse[5, 1] = float("-inf")  # an empty row where the reference has keys
    assert check((o, lse))[0] == 2


def test_the_script_runs_its_processes_and_writes_its_record(tmp_path, device):
    """The whole path (spawned processes, the queue, the JSON record), in Triton's interpreter on a CPU (else on the
    GPU): a gate job and a relbias job for a second each, every call agreeing."""
    import json
    import subprocess
    import sys
    out = tmp_path / "stress.json"
    jobs = ["sparse_int8/triton@sparse_int8-decode-r1-g4-n65", "relbias/triton_fwd@relbias-prefill-s1"]
    r = subprocess.run([sys.executable, str(_PATH), str(out), *jobs, "--seconds", "1", "--device", device],
                       capture_output=True, text=True, timeout=600)  # as a script: spawned processes import it so
    assert r.returncode == 0, r.stderr[-3000:]
    assert all(j in r.stdout for j in jobs), r.stdout
    rec = json.loads(out.read_text())
    assert [r["job"] for r in rec["results"]] == jobs
    assert all(r["fault"] is None and r["calls"] >= 1 and r["wrong_calls"] == 0 for r in rec["results"]), rec


def test_mqa_step_subject_grammar(stress):
    assert stress._check_job("mqa-step:swapab@mqa_decode-small-t1-h16-fp8") is None
    assert "VARIANT" in stress._check_job("mqa-step:nope@mqa_decode-small-t1-h16-fp8")


def test_mqa_step_subject_compares_with_the_plain_step():
    """The mqa-step subject (a step under PDL with early inputs, latents alternating) against the plain launches'
    step for the same latents: equal as run, a changed byte seen. Needs a GPU that runs PDL."""
    import torch
    from attnkit._runtime import pdl_runs
    if not (torch.cuda.is_available() and pdl_runs(torch.device("cuda"))):
        pytest.skip("PDL needs a CUDA sm_90+ GPU (not a pass)")
    stress = importlib.util.module_from_spec(importlib.util.spec_from_file_location("stress_under_load", _PATH))
    stress.__spec__.loader.exec_module(stress)
    for variant in ("swapab", "headpad"):
        case, call, check = stress._subject(f"mqa-step:{variant}@mqa_decode-model-t5-h32-nvfp4-partial")
        inp = inputs.make_inputs(case, device="cuda", seed=1)
        for _ in range(4):
            assert check(call(inp)) == (0, None), variant
        k, (out, lse) = call(inp)
        out = out.clone()
        out.view(-1)[5] += 1
        n, ex = check((k, (out, lse)))
        assert n > 0 and ex["latents"] == k


def _stress_on_a_pdl_gpu():
    """The stress script as a module, or a skip where PDL does not run (no CUDA sm_90+ GPU)."""
    import torch
    from attnkit._runtime import pdl_runs
    if not (torch.cuda.is_available() and pdl_runs(torch.device("cuda"))):
        pytest.skip("PDL needs a CUDA sm_90+ GPU (not a pass)")
    stress = importlib.util.module_from_spec(importlib.util.spec_from_file_location("stress_under_load", _PATH))
    stress.__spec__.loader.exec_module(stress)
    return stress


def _wrong_calls(stress, variant, calls=8, **extra):
    """How many of `calls` steps of the mqa-step job `variant` (with `extra` keys) at 16 heads x 1 token fp8 the
    check finds wrong, the GPU kept busy several ms ahead of each call so that the step's kernels launch back to back
    as under load, not each after its host-side launch overhead."""
    import torch
    stress.MQA_STEP_VARIANTS[variant + "-x"] = dict(stress.MQA_STEP_VARIANTS[variant], **extra)
    case, call, check = stress._subject(f"mqa-step:{variant}-x@mqa_decode-step-h16-t1-fp8")
    inp = inputs.make_inputs(case, device="cuda", seed=1)
    n = 0
    for _ in range(calls):
        torch.cuda._sleep(10_000_000)
        n += check(call(inp))[0] > 0
    return n


def test_mqa_step_slow_writer_shows_a_reader_that_does_not_wait():
    """The mqa-step check can fail: with a writer that spins (200 us) before it writes, the attention that never waits
    for it reads the window records before they are written and the check sees wrong calls (on most calls; without
    the spin only now and then); the dispatched attention, which waits, still shows none. Needs a GPU that runs
    PDL."""
    stress = _stress_on_a_pdl_gpu()
    # a 200 us spin (the stress jobs' 20 us was missed on 3 of 8 calls with the whole suite running beside it)
    wrong = {v: _wrong_calls(stress, v, _writer_delay_ns=200000)
             for v in ("swapab-nowait-slow-writer", "swapab-slow-writer")}
    assert wrong["swapab-nowait-slow-writer"] >= 6 and wrong["swapab-slow-writer"] == 0, wrong


def test_mqa_step_writer_release_early_contract():
    """writer_release_early's contract under the stress check: after a kernel that lets its dependents launch before
    it writes q (a PDL kernel releasing at entry, then spinning, here 200 us, before it copies q), the step whose
    writer releases early reads q before it is written (wrong calls); after the same kernel launched plainly, none;
    the default writer, which waits before it releases the attention, none after either. Needs a GPU that runs
    PDL."""
    stress = _stress_on_a_pdl_gpu()
    wrong = {v: _wrong_calls(stress, v, _q_delay_ns=200000)
             for v in ("swapab-release-early-after-pdl-q-writer", "swapab-release-early-after-plain-q-writer",
                       "swapab-after-pdl-q-writer")}
    assert wrong["swapab-release-early-after-pdl-q-writer"] >= 6, wrong
    assert wrong["swapab-release-early-after-plain-q-writer"] == 0 and wrong["swapab-after-pdl-q-writer"] == 0, wrong


def test_wrong_by_design_names_variants_that_exist(stress):
    for subject in stress.WRONG_BY_DESIGN:
        kind, variant = subject.split(":", 1)
        assert variant in {"relbias": stress.RELBIAS_VARIANTS, "mqa-step": stress.MQA_STEP_VARIANTS}[kind], subject


def test_failures_are_faults_runs_without_calls_and_wrong_calls_not_by_design(stress):
    def job(name, calls=5, wrong=0, fault=None, by_design=False):
        return dict(job=name, calls=calls, wrong_calls=wrong, fault=fault, wrong_by_design=by_design)
    by_design = [job("b", wrong=3, by_design=True), job("c", wrong=0, by_design=True),
                 job("e", calls=0, fault="AcceleratorError: illegal memory access", by_design=True)]
    assert stress.failures([job("a")] + by_design) == []
    assert stress.shown_failing([job("a")] + by_design) == {"b": True, "c": False, "e": True}
    got = stress.failures([job("a", fault="RuntimeError: x", calls=2), job("b", calls=0), job("c", wrong=1),
                           job("d", wrong=2, by_design=True)])
    assert [f.split(":")[0] for f in got] == ["a", "b", "c"]
    assert "fault after 2 calls" in got[0] and "no call" in got[1] and "1 of 5 calls wrong" in got[2]


def test_the_script_fails_a_run_that_made_no_call(tmp_path, device):
    """A job that made no call (here: no time given) is a failed run, exit status 1, not a quiet success."""
    import json
    import subprocess
    import sys
    out = tmp_path / "stress.json"
    job = "sparse_int8/triton@sparse_int8-decode-r1-g4-n65"
    r = subprocess.run([sys.executable, str(_PATH), str(out), job, "--seconds", "0", "--device", device],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 1, (r.stdout, r.stderr[-3000:])
    assert "1 failed" in r.stdout and "no call made" in r.stdout
    assert json.loads(out.read_text())["failed"] == [f"{job}: no call made in the time given"]


def test_the_script_refuses_cuda_where_there_is_none(tmp_path):
    import subprocess
    import sys

    import torch
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is here")
    r = subprocess.run([sys.executable, str(_PATH), str(tmp_path / "s.json"), "--device", "cuda"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 2 and "--device cuda: no CUDA device here" in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "s.json").exists()
