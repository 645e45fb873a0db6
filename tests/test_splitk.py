"""The Triton split-K merge kernel (interpreter on a CPU, compiled on a GPU) against its oracle."""

import pytest
import torch

import attnkit.ops  # noqa: F401  (registers torch.ops.attnkit.*)
from attnkit import reference as R
from attnkit.splitk import merge_partials, merge_partials_into
from attnkit.testing import compare, poison_, shapes, unwritten
from attnkit.testing.baselines import merge_baseline
from attnkit.testing.inputs import make_inputs
from attnkit.testing.opcheck import check_custom_op


@pytest.mark.parametrize("case", shapes.cases("merge", "smoke"), ids=lambda c: c.id)
@pytest.mark.parametrize("out_dtype,block_s", [(torch.float32, None), (torch.bfloat16, None), (torch.float32, 2)])
def test_merge_matches_oracle(case, device, out_dtype, block_s):
    """block_s=2: the splits in several chunks, merged online (the path of long split lists)."""
    inp = make_inputs(case, device, seed=11)
    out = poison_(torch.empty(inp["acc"].shape[1:], dtype=out_dtype, device=device))
    lse = poison_(torch.empty(inp["acc"].shape[1], dtype=torch.float32, device=device))
    merge_partials_into(inp["m"], inp["l"], inp["acc"], out, lse, _block_s=block_s)
    assert unwritten(out) == 0 and unwritten(lse) == 0
    ref, ref_lse = R.merge_partials(inp["m"], inp["l"], inp["acc"])
    base, base_lse = merge_baseline(inp)
    c = compare(out, ref, base.to(out_dtype), lse=lse, lse_ref=ref_lse, lse_base=base_lse)
    assert c.ok, c.reason
    ae = case["all_empty_rows"]
    if ae:
        assert torch.equal(out[:ae].float(), torch.zeros_like(out[:ae].float())) and torch.isneginf(lse[:ae]).all()


def test_merge_is_deterministic(device):
    inp = make_inputs(shapes.get("merge-splitk-s7-r5-d256"), device, seed=1)
    a = merge_partials(inp["m"], inp["l"], inp["acc"])
    b = merge_partials(inp["m"], inp["l"], inp["acc"])
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_merge_power_check_lost_split_is_caught(device):
    inp = make_inputs(shapes.get("merge-splitk-s4-r17-d128-empty"), device, seed=2)
    ref, ref_lse = R.merge_partials(inp["m"], inp["l"], inp["acc"])
    base, base_lse = merge_baseline(inp)
    out, lse = merge_partials(inp["m"], inp["l"], inp["acc"], _lose_split=True)
    assert not compare(out, ref, base, lse=lse, lse_ref=ref_lse, lse_base=base_lse).ok


@pytest.mark.parametrize("bad, match", [
    (lambda m, l, a: (m.double(), l, a), "m: must be float32"),
    (lambda m, l, a: (m, l[:, :-1], a), "l: must match"),
    (lambda m, l, a: (m, l, a[..., :-1].transpose(1, 2).contiguous().transpose(1, 2)), "acc"),
    (lambda m, l, a: (m[:0], l[:0], a[:0]), "at least one split"),
    (lambda m, l, a: (m, l, a.transpose(1, 2)), "acc"),
])
def test_merge_rejects_bad_input(bad, match, device):
    inp = make_inputs(shapes.get("merge-splitk-s1-r3-d64"), device, seed=0)
    with pytest.raises(ValueError, match=match):
        merge_partials(*bad(inp["m"], inp["l"], inp["acc"]))


def test_merge_rejects_bad_out_dtype_and_buffers(device):
    inp = make_inputs(shapes.get("merge-splitk-s1-r3-d64"), device, seed=0)
    with pytest.raises(ValueError, match="out_dtype"):
        merge_partials(inp["m"], inp["l"], inp["acc"], torch.int32)
    with pytest.raises(ValueError, match="lse"):
        merge_partials_into(inp["m"], inp["l"], inp["acc"], torch.empty(3, 64, device=device),
                            torch.empty(3, dtype=torch.float64, device=device))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU error of a machine without a GPU")
def test_merge_on_cpu_without_interpreter_says_why(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    inp = make_inputs(shapes.get("merge-splitk-s1-r3-d64"), "cpu", seed=0)
    with pytest.raises(ValueError, match="m is on cpu"):
        merge_partials(inp["m"], inp["l"], inp["acc"])


def test_merge_custom_ops(device):
    inp = make_inputs(shapes.get("merge-splitk-s4-r17-d128-empty"), device, seed=3)

    def refresh(args):
        args[0].copy_(args[0] + 0.25)

    ran = check_custom_op(torch.ops.attnkit.merge_partials, [inp["m"], inp["l"], inp["acc"], torch.bfloat16],
                          refresh=refresh)
    assert ran["opcheck"] and ran["compile"]
    out = torch.empty(17, 128, device=device)
    lse = torch.empty(17, device=device)
    ran = check_custom_op(torch.ops.attnkit.merge_partials_out, [inp["m"], inp["l"], inp["acc"], out, lse],
                          mutated=(3, 4), refresh=refresh)
    assert ran["opcheck"]
    if device == "cuda":
        assert ran["cuda_graph"] is True
