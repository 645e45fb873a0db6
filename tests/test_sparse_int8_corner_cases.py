"""The review's corner cases (ONNX Runtime's sparse INT8 attention), each for prefill (direct) and
decode (split-K, one tile per split), with the two live candidates once in one tile and once in the
first and last of three tiles. Each result is checked to one bf16 ulp of its analytic answer."""

import math

import pytest
import torch

from attnkit.sparse_int8 import sparse_int8_attention

D, C, N = 64, 200, 192  # three candidate tiles of 64


def _bf16_ulp(x: float) -> float:
    if x == 0:
        return 2.0 ** -133
    e = max(math.floor(math.log2(abs(x))), -126)
    return 2.0 ** (e - 7)


def _case(name):
    """Returns (q[D] fp32 exactly bf16, key_scale[D], value_scale[D], kA, kB, vA, vB int8 rows, scale, answer)."""
    q = torch.zeros(D)
    ks = torch.ones(D)
    vs = torch.ones(D)
    kA, kB, vA, vB = (torch.zeros(D, dtype=torch.int8) for _ in range(4))
    if name == "folded-query-rounding":  # q' = (32768, -32766); s_A = 8 * 2 = 16, s_B = 0; answer ~1
        q[0], q[1] = 1.0, -1.0
        ks[0], ks[1] = 32768.0, 32766.0
        kA[0] = kA[1] = 8
        vA[:] = 1
        scale, sA, sB, va, vb = 1.0, 16.0, 0.0, 1.0, 0.0
    elif name == "signed-value-cancellation":  # p = 0.5 +- 2^-14, values +-4064: answer 4064 * tanh(d / 2)
        d = math.log((1 + 2 ** -13) / (1 - 2 ** -13))
        q[0] = 1.0
        ks[0] = d  # fp32; the analytic answer uses the fp32 value
        kA[0] = 1
        vA[:], vB[:] = 127, -127
        vs[:] = 32.0
        scale, sA, sB, va, vb = 1.0, float(torch.tensor(d, dtype=torch.float32)), 0.0, 4064.0, -4064.0
    elif name == "large-common-logit":  # s = 8290560.5 and 8290560 at scale 1: answer sigmoid(0.5)
        q[0], q[1] = 1.0, 0.5
        ks[0] = 8290560.0  # fp32-exact; q' = (8290560, 0.5)
        kA[0], kA[1], kB[0] = 1, 1, 1
        vA[:] = 1
        scale, sA, sB, va, vb = 1.0, 8290560.5, 8290560.0, 1.0, 0.0
    elif name == "tiny-value-scale":  # value scale 2^-135: the answer 127 * 2^-135 is a bf16 subnormal
        q[0] = 1.0
        vA[:] = vB[:] = 127
        vs[:] = 2.0 ** -135
        scale, sA, sB, va, vb = 1.0, 0.0, 0.0, 127 * 2.0 ** -135, 127 * 2.0 ** -135
    elif name == "huge-value-scale-deep-candidate":  # value scale 2^60, p = e^-30: answer ~107886.05
        q[0] = 480.0
        kA[0] = 1
        vB[:] = 1
        vs[:] = 2.0 ** 60
        scale, sA, sB, va, vb = 1.0 / 16, 30.0, 0.0, 0.0, 2.0 ** 60
    else:
        raise KeyError(name)
    m = max(sA, sB)
    wa, wb = math.exp(sA - m), math.exp(sB - m)
    answer = (wa * va + wb * vb) / (wa + wb)
    return q, ks, vs, kA, kB, vA, vB, scale, answer


CASES = ["folded-query-rounding", "signed-value-cancellation", "large-common-logit", "tiny-value-scale",
         "huge-value-scale-deep-candidate"]


LOOPS = {"rule": {}, "pipelined-loop": dict(pipeline=True), "swap-ab": dict(swap_ab=True),
         "swap-ab-qk-int8": dict(swap_ab=True, qk_int8=True), "gluon": dict(gluon=True)}


def _needs(opts, device):
    """The Gluon kernel runs on sm_90 GPUs only: elsewhere its cases are skipped (not passed)."""
    from attnkit._runtime import gluon_runs
    if opts.get("gluon") and not gluon_runs(torch.device(device)):
        pytest.skip("the Gluon kernel needs an sm_90 GPU")


def _run(name, mode, placement, device, pv_split=None, perturb=None, **opts):
    q1, ks, vs, kA, kB, vA, vB, scale, answer = _case(name)
    T = 1 if mode == "decode" else 17  # decode: split-K path; prefill: more than 16 rows, direct path
    g = torch.Generator().manual_seed(0)
    kc = torch.randint(-127, 128, (1, C, D), generator=g, dtype=torch.int8)  # noise rows never selected
    vc = torch.randint(-127, 128, (1, C, D), generator=g, dtype=torch.int8)
    a, b = 11, 150
    kc[0, a], kc[0, b], vc[0, a], vc[0, b] = kA, kB, vA, vB
    idx = torch.full((T, N), -1, dtype=torch.int32)
    pa, pb = (0, 1) if placement == "one-tile" else (0, N - 1)
    idx[:, pa], idx[:, pb] = a, b
    q = q1.to(torch.bfloat16).view(1, 1, D).expand(T, 1, D).contiguous()
    assert torch.equal(q[0, 0].float(), q1)  # the case's query is exact in bf16
    out, _ = sparse_int8_attention(q.to(device), kc.to(device), vc.to(device), ks.view(1, D).to(device),
                                   vs.view(1, D).to(device), idx.to(device), scale=scale,
                                   tiles_per_split=1 if mode == "decode" else None, pv_split=pv_split,
                                   _perturb=perturb, **opts)
    return out[:, 0, :].double().cpu(), answer


@pytest.mark.parametrize("loop", list(LOOPS))
@pytest.mark.parametrize("placement", ["one-tile", "split-apart"])
@pytest.mark.parametrize("mode", ["prefill", "decode"])
@pytest.mark.parametrize("name", CASES)
def test_corner_case_to_one_bf16_ulp(name, mode, placement, loop, device):
    _needs(LOOPS[loop], device)
    out, answer = _run(name, mode, placement, device, **LOOPS[loop])
    err = (out - answer).abs().max().item()
    assert err <= _bf16_ulp(answer), f"{name}: got {out[0, :2].tolist()}, want {answer} (ulp {_bf16_ulp(answer)})"
    if name == "tiny-value-scale":
        assert (out != 0).all()  # a bf16 subnormal, not 0


def test_without_the_probability_split_the_cancellation_is_lost(device):
    """The power of the cancellation check: one bf16 probability tile cancels 0.5 +- 2^-14."""
    out, answer = _run("signed-value-cancellation", "decode", "one-tile", device, pv_split=False)
    assert (out - answer).abs().max().item() > _bf16_ulp(answer)


@pytest.mark.parametrize("loop", ["rule", "gluon"])
@pytest.mark.parametrize("name", ["tiny-value-scale", "huge-value-scale-deep-candidate"])
def test_value_scale_before_accumulation_in_fp16_is_caught(name, loop, device):
    _needs(LOOPS[loop], device)
    out, answer = _run(name, "decode", "split-apart", device, perturb="value-scale-before-accumulation",
                       **LOOPS[loop])
    assert not ((out - answer).abs().max().item() <= _bf16_ulp(answer))


def _tiny_differential(mode, device, **opts):
    """A gap that comes from an element 2^-32 of its row's largest, the largest itself meeting only zero codes:
    q' = (8290560, 0.5 / 127), kA = (0, 127), kB = (0, 0): s_A - s_B = 127 * fp32(0.5 / 127) ~ 0.5, far above
    the fp32 resolution of the scores, yet below the int8 digits' resolution of q''. Returns (out, answer)."""
    T = 1 if mode == "decode" else 17
    q = torch.zeros(T, 1, D, dtype=torch.bfloat16)
    q[:, 0, 0], q[:, 0, 1] = 1.0, 1.0
    ks = torch.ones(1, D)
    ks[0, 0], ks[0, 1] = 8290560.0, 0.5 / 127
    gap = 127 * float(ks[0, 1])
    kc = torch.zeros(1, C, D, dtype=torch.int8)
    vc = torch.zeros(1, C, D, dtype=torch.int8)
    kc[0, 11, 1] = 127
    vc[0, 11] = 1
    idx = torch.full((T, N), -1, dtype=torch.int32)
    idx[:, 0], idx[:, 1] = 11, 150
    out, _ = sparse_int8_attention(q.to(device), kc.to(device), vc.to(device), ks.to(device),
                                   torch.ones(1, D, device=device), idx.to(device), scale=1.0,
                                   tiles_per_split=1 if mode == "decode" else None, **opts)
    return out[:, 0, :].double().cpu(), 1.0 / (1.0 + math.exp(-gap))


@pytest.mark.parametrize("loop", ["swap-ab-qk-int8", "gluon"])
@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_qk_int8_budget_sends_a_tiny_differential_to_the_split_bf16_query(mode, loop, device):
    """The int8 digits of q'' hold it to 2^-27 of its row's largest element, so an element 2^-32 of it is lost; the
    budget must send that program to the split-bf16 query. With the budget lifted the answer is wrong (0.5, not
    sigmoid(0.5): the check can fail); with it, within one bf16 ulp. A query whose digits are exact
    (folded-query-rounding) is right with the budget lifted."""
    _needs(LOOPS[loop], device)
    opts = LOOPS[loop]
    out, answer = _tiny_differential(mode, device, **opts, _qk_int8_budget=float("inf"))
    assert (out - 0.5).abs().max().item() <= _bf16_ulp(0.5)
    out, answer = _tiny_differential(mode, device, **opts)
    assert (out - answer).abs().max().item() <= _bf16_ulp(answer)
    out, answer = _run("folded-query-rounding", mode, "split-apart", device, **opts, _qk_int8_budget=float("inf"))
    assert (out - answer).abs().max().item() <= _bf16_ulp(answer)
