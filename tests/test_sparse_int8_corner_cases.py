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


def _run(name, mode, placement, device, pv_split=None, perturb=None, pipeline=None):
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
                                   pipeline=pipeline, _perturb=perturb)
    return out[:, 0, :].double().cpu(), answer


@pytest.mark.parametrize("pipeline", [False, True], ids=["prefetch-loop", "pipelined-loop"])
@pytest.mark.parametrize("placement", ["one-tile", "split-apart"])
@pytest.mark.parametrize("mode", ["prefill", "decode"])
@pytest.mark.parametrize("name", CASES)
def test_corner_case_to_one_bf16_ulp(name, mode, placement, pipeline, device):
    out, answer = _run(name, mode, placement, device, pipeline=pipeline)
    err = (out - answer).abs().max().item()
    assert err <= _bf16_ulp(answer), f"{name}: got {out[0, :2].tolist()}, want {answer} (ulp {_bf16_ulp(answer)})"
    if name == "tiny-value-scale":
        assert (out != 0).all()  # a bf16 subnormal, not 0


def test_without_the_probability_split_the_cancellation_is_lost(device):
    """The power of the cancellation check: one bf16 probability tile cancels 0.5 +- 2^-14."""
    out, answer = _run("signed-value-cancellation", "decode", "one-tile", device, pv_split=False)
    assert (out - answer).abs().max().item() > _bf16_ulp(answer)


@pytest.mark.parametrize("name", ["tiny-value-scale", "huge-value-scale-deep-candidate"])
def test_value_scale_before_accumulation_in_fp16_is_caught(name, device):
    out, answer = _run(name, "decode", "split-apart", device, perturb="value-scale-before-accumulation")
    assert not ((out - answer).abs().max().item() <= _bf16_ulp(answer))
