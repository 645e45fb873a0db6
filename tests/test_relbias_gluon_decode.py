"""The Gluon fp8 decode kernel for sm_90 (option gluon_decode): its plan, its rule and its errors everywhere; on an
sm_90 GPU, the fp64 oracle on every shape it takes with each code conversion, bit for bit across the conversions
that give the same operands, repeatable, and inside a CUDA graph."""

import pytest
import torch

from attnkit import _callcache

import attnkit.ops  # noqa: F401
from attnkit.gate.specs import _gluon_decode_takes, relbias_kernel_call
from attnkit.relbias import relbias_attention
from attnkit.relbias.config import (GLUON_DECODE, GLUON_DECODE_CVT, GLUON_DECODE_CVT_RULE, GLUON_DECODE_KREG,
                                    decode_plan, gluon_decode_rule)
from attnkit.testing import compare, shapes, unwritten
from attnkit.testing.baselines import relbias_baseline
from attnkit.testing.inputs import make_inputs
from attnkit.testing.oracles import relbias_oracle


def _plan(group, max_q, max_k, batch=32, hkv=8, **kw):
    return decode_plan(batch, hkv, group, 128, max_q, max_k, 132, "cuda", fp8=True, gluon=True, **kw)


def test_gluon_decode_plan():
    # the timed decode (8 rows): 128-key tiles, a ring of 2, one program per (sequence, KV head) at b32 x 8 KV heads,
    # keys in registers, the products in fp16 (config.py's sweeps)
    p = _plan(8, 1, 8192)
    assert (p.gluon, p.block_r, p.block_n, p.num_warps, p.num_stages, p.cvt, p.kreg, p.num_splits) == (
        True, 8, 128, 4, 2, GLUON_DECODE_CVT_RULE, True, 1)
    # splits fill one wave of two programs per SM, rounded down: one 64K sequence at 8 KV heads takes 32 (the
    # relbias-gluon-decode-7 sweep: 58.4 us against 104.5 at 17 splits), b32 x 8K one (two would be two waves)
    assert _plan(8, 1, 65536, batch=1).num_splits == 32 and _plan(8, 1, 8192, ctas_per_sm=2).num_splits == 1
    assert p.token_blocks == 1 and p.keys_per_split % 128 == 0 and p.num_splits * p.keys_per_split >= 8192
    # more rows: 64-key tiles, a ring of 3; keys in registers up to 16 rows
    p = _plan(8, 2, 8192)
    assert (p.block_r, p.block_n, p.num_stages, p.kreg) == (16, 64, 3, True)
    assert not _plan(8, 4, 8192).kreg and _plan(8, 4, 8192, kreg=True).kreg and not _plan(8, 1, 100, kreg=False).kreg
    # rows: tokens x heads, a power of two from 8 (the MMA's smallest N) up to 64; more tokens take token blocks
    assert _plan(1, 1, 100).block_r == 8 and _plan(16, 1, 100).block_r == 16 and _plan(8, 3, 100).block_r == 32
    p = _plan(8, 32, 1000)
    assert (p.block_r, p.token_blocks) == (64, 4)
    p = _plan(16, 5, 1000)
    assert (p.block_r, p.token_blocks) == (64, 2)
    # splits: the rule's target over the programs, never more splits than key tiles; the override wins
    assert _plan(8, 1, 128 * 5, batch=1, hkv=1).num_splits == 5
    assert _plan(8, 1, 8192, num_splits=3).num_splits == 3
    assert _plan(8, 1, 8192, ctas_per_sm=4).num_splits >= _plan(8, 1, 8192).num_splits
    assert _plan(8, 1, 8192, num_stages=5, cvt=3).num_stages == 5
    assert _plan(8, 1, 8192, block_n=64).block_n == 64 and _plan(8, 1, 8192, block_n=64).keys_per_split % 64 == 0
    for kw, msg in ((dict(block_n=32), "block_n"), (dict(num_warps=8), "num_warps"), (dict(num_stages=1), "num_stages"),
                    (dict(num_stages=7), "num_stages")):
        with pytest.raises(ValueError, match=msg):
            _plan(8, 1, 8192, **kw)
    with pytest.raises(ValueError, match="gluon_decode: 128 query heads"):
        _plan(128, 1, 8192, hkv=1)


def test_every_key_is_in_one_split_of_the_gluon_plan():
    for group in (1, 2, 8, 16):
        for max_q in (1, 2, 7, 32):
            for max_k in (1, 63, 64, 65, 1000, 8192, 65536):
                for batch, hkv in ((1, 1), (4, 2), (32, 8)):
                    p = _plan(group, max_q, max_k, batch=batch, hkv=hkv)
                    assert p.num_splits * p.keys_per_split >= max_k
                    assert (p.num_splits - 1) * p.keys_per_split < max_k  # no split past the keys
                    assert p.token_blocks * (p.block_r // group) >= max_q


def test_gluon_decode_rule_and_options():
    assert GLUON_DECODE.resolve(None, {}) is None and GLUON_DECODE_CVT.resolve(None, {}) is None
    assert GLUON_DECODE_KREG.resolve(None, {}) is None
    assert gluon_decode_rule(True, True, 128, 8, 1, True, False)  # the timed decode: 8 rows
    assert gluon_decode_rule(True, True, 64, 4, 2, True, False)
    assert gluon_decode_rule(True, True, 128, 1, 5, True, False)
    assert not gluon_decode_rule(True, True, 128, 8, 2, True, False)  # 16 rows: not timed faster
    assert not gluon_decode_rule(True, True, 128, 16, 1, True, False)
    assert not gluon_decode_rule(False, True, 128, 8, 1, True, False)  # not sm_90 / the interpreter
    assert not gluon_decode_rule(True, False, 128, 8, 1, True, False)  # a bf16 / fp16 cache
    assert not gluon_decode_rule(True, True, 256, 8, 1, True, False)  # D 256
    assert not gluon_decode_rule(True, True, 128, 8, 1, False, False)  # paged, or rows TMA cannot read
    assert not gluon_decode_rule(True, True, 128, 8, 1, True, True)  # an option of the Triton kernel alone
    for bad in ("4", "-1", "01", "x", " 1"):
        with pytest.raises(ValueError, match="gluon_decode_cvt"):
            GLUON_DECODE_CVT.resolve(bad)
    assert GLUON_DECODE_CVT.resolve("3") == 3


class _Recorder:
    """Stands in for a kernel launch: records which kernel the dispatcher chose, launches nothing."""

    def __init__(self, calls, name):
        self.calls, self.name = calls, name

    def __getitem__(self, grid):
        return lambda *a, **k: self.calls.append(self.name)


def test_the_decode_rule_picks_gluon_only_where_it_can(monkeypatch, device):
    """The decode dispatch with the option unset, as if on an sm_90 GPU (launches recorded, not run): Gluon for an
    fp8 cache at D 64 / 128; Triton for a bf16 cache, an option of the Triton kernel alone, or gluon_decode=False."""
    import attnkit._runtime as rt
    import attnkit.splitk as splitk
    from attnkit.relbias import kernel_decode, kernel_decode_gluon
    calls = []
    monkeypatch.setattr(rt, "gluon_runs", lambda device: True)
    monkeypatch.setattr(kernel_decode_gluon, "relbias_decode_gluon_kernel", _Recorder(calls, "gluon"))
    monkeypatch.setattr(kernel_decode, "relbias_decode_split_kernel", _Recorder(calls, "triton"))
    monkeypatch.setattr(splitk, "merge_partials_into", lambda *a, **k: None)
    fp8 = make_inputs(shapes.get("relbias-fp8-decode-b2"), device, 0)
    picks = []
    for kw in (dict(), dict(gluon_decode=False), dict(decode_rows=16), dict(split_loops=True), dict(block_n=32),
               dict(fp8_f16_cvt=True), dict(decode_fast_interior=False), dict(num_warps=8), dict(num_stages=2),
               dict(ctas_per_sm=3)):
        relbias_kernel_call(fp8, force="decode", **kw)
        picks.append(calls.pop())
    assert picks == ["gluon", "triton", "triton", "triton", "triton", "triton", "triton", "triton", "gluon", "gluon"]
    relbias_kernel_call(make_inputs(shapes.get("relbias-decode-b3-k203"), device, 0), force="decode")
    assert calls.pop() == "triton"  # a bf16 cache
    # an 8-row decode over a paged fp8 cache (not timed at scale: Triton), and 3 tokens x 2 heads (8 rows: Gluon)
    paged8 = shapes.Case("relbias", "relbias-test", "paged-fp8-decode", dict(
        seqlens_q=[1, 1], seqlens_k=[300, 77], Hq=8, Hkv=1, D=64, E=64, window=None, beyond="zero", kv="fp8",
        block_size=64, dtype="bf16"))
    relbias_kernel_call(make_inputs(paged8, device, 0), force="decode")
    relbias_kernel_call(make_inputs(shapes.get("relbias-fp8-verify-window-clamp"), device, 0), force="decode")
    assert calls[-2:] == ["triton", "gluon"]
    relbias_kernel_call(make_inputs(shapes.get("relbias-fp8-paged-verify"), device, 0), force="decode")
    assert calls.pop() == "triton"  # 64 rows
    # no key row at all: no TMA descriptor can be made (Triton by the rule; forced, the Gluon kernel's cp.async copies)
    empty = make_inputs(shapes.get("relbias-fp8-decode-b2"), device, 0)
    empty = dict(empty, k=empty["k"][:0], v=empty["v"][:0], cu_seqlens_k=torch.zeros_like(empty["cu_seqlens_k"]))
    relbias_kernel_call(empty, force="decode")
    relbias_kernel_call(empty, force="decode", gluon_decode=True)
    assert calls[-2:] == ["triton", "gluon"]
    monkeypatch.setattr(rt, "gluon_runs", lambda device: False)  # off sm_90 / in the interpreter
    _callcache.clear()  # the decisions kept for these layouts were made as if on sm_90
    relbias_kernel_call(fp8, force="decode")
    assert calls.pop() == "triton"


def test_gluon_decode_is_refused_where_it_cannot_run(device):
    from attnkit._runtime import gluon_runs
    fp8 = make_inputs(shapes.get("relbias-fp8-decode-b2"), device, 0)
    if device == "cuda" and gluon_runs(torch.device("cuda")):
        bf16 = make_inputs(shapes.get("relbias-decode-b3-k203"), device, 0)
        with pytest.raises(ValueError, match="gluon_decode: .* fp8 cache"):
            relbias_kernel_call(bf16, force="decode", gluon_decode=True)
        return
    with pytest.raises(ValueError, match="gluon_decode: the Gluon decode kernel runs on CUDA sm_90"):
        relbias_kernel_call(fp8, force="decode", gluon_decode=True)


def test_gluon_decode_refuses_what_it_cannot_take(monkeypatch, device):
    """As if on an sm_90 GPU (nothing launched: every refusal comes before the launch): D 256, more query heads per KV
    head than its rows, TMA asked over a paged cache, a bad conversion or tile, each a ValueError naming the option."""
    import attnkit._runtime as rt
    monkeypatch.setattr(rt, "gluon_runs", lambda device: True)

    def case(**kw):
        p = dict(seqlens_q=[1], seqlens_k=[100], Hq=8, Hkv=1, D=64, E=64, window=None, beyond="zero", kv="fp8",
                 block_size=None, dtype="bf16")
        p.update(kw)
        return make_inputs(shapes.Case("relbias", "relbias-test", "refused", p), device, 0)
    with pytest.raises(ValueError, match="gluon_decode: .* D in"):
        relbias_kernel_call(case(D=256), force="decode", gluon_decode=True)
    with pytest.raises(ValueError, match="gluon_decode: 128 query heads per KV head"):
        relbias_kernel_call(case(Hq=128, D=64), force="decode", gluon_decode=True)
    with pytest.raises(ValueError, match="gluon_decode_tma: TMA reads a contiguous cache"):
        relbias_kernel_call(case(block_size=64), force="decode", gluon_decode=True, gluon_decode_tma=True)
    with pytest.raises(ValueError, match="gluon_decode_cvt"):
        relbias_kernel_call(case(), force="decode", gluon_decode=True, gluon_decode_cvt=4)
    with pytest.raises(ValueError, match="block_n: the Gluon decode kernel's key tiles"):
        relbias_kernel_call(case(), force="decode", gluon_decode=True, block_n=32)


_CASES = [c.id for c in shapes.cases("relbias", tier=shapes.FULL) if _gluon_decode_takes(c)]


def test_the_gluon_decode_cases_cover_the_timed_fp8_shape_and_the_edges():
    assert {"relbias-model-fp8-decode-b32-8k", "relbias-fp8-decode-b2", "relbias-fp8-verify-window-clamp",
            "relbias-fp8-paged-verify", "relbias-fp8-decode-fp16-gqa16", "relbias-fp8-verify-t32-g8-blocks-clamp",
            "relbias-fp8-paged-bs16-w1", "relbias-fp8-decode-k4096-e1"} <= set(_CASES)


def _gluon_gpu():
    from attnkit._runtime import gluon_runs
    if not (torch.cuda.is_available() and gluon_runs(torch.device("cuda"))):
        pytest.skip("the Gluon decode kernel needs an sm_90 GPU (not a pass)")


def _check(inp, out, lse):
    assert unwritten(out) == 0 and unwritten(lse) == 0
    ref, ref_lse = relbias_oracle(inp)
    base, base_lse = relbias_baseline(inp)
    c = compare(out, ref, base, lse=lse, lse_ref=ref_lse, lse_base=base_lse)
    assert c.ok, c.reason


_CONFIGS = [dict(), dict(gluon_decode_cvt=0), dict(gluon_decode_cvt=2, block_n=64),
            dict(gluon_decode_cvt=1, gluon_decode_kreg=False, gluon_decode_bias_async=False, gluon_decode_tma=False),
            dict(gluon_decode_kreg=True, block_n=64, gluon_decode_bias_async=False),
            dict(gluon_decode_kreg=False, block_n=128, num_stages=2, gluon_decode_cvt=3),
            dict(gluon_decode_banks=False),
            dict(gluon_decode_banks=False, gluon_decode_kreg=False, block_n=64, gluon_decode_tma=False)]


@pytest.mark.parametrize("case_id", [c for c in _CASES if "model" not in c])
@pytest.mark.parametrize("opts", _CONFIGS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()) or "defaults")
def test_gluon_decode_matches_the_oracle(case_id, opts):
    _gluon_gpu()
    inp = make_inputs(shapes.get(case_id), "cuda", 0)
    kw = dict(gluon_decode=True, **opts)
    out, lse = relbias_kernel_call(inp, force="decode", **kw)
    out2, lse2 = relbias_kernel_call(inp, force="decode", **kw)
    assert torch.equal(out, out2) and torch.equal(lse, lse2)  # repeatable bit for bit
    _check(inp, out, lse)


@pytest.mark.parametrize("case_id", ["relbias-fp8-verify-window-clamp", "relbias-fp8-decode-k4096-e1"])
def test_the_bf16_conversions_give_the_same_bits(case_id):
    """The direct cast, the fp16 route and the bits give the same bf16 operands, so the same results bit for bit."""
    _gluon_gpu()
    inp = make_inputs(shapes.get(case_id), "cuda", 0)
    res = [relbias_kernel_call(inp, force="decode", gluon_decode=True, gluon_decode_cvt=c, gluon_decode_kreg=kreg)
           for kreg in (False, True) for c in (0, 1, 2)]
    for o, l in res[1:3]:
        assert torch.equal(o, res[0][0]) and torch.equal(l, res[0][1])
    for o, l in res[4:]:
        assert torch.equal(o, res[3][0]) and torch.equal(l, res[3][1])


def test_the_bits_conversion_of_every_code():
    """Every e4m3 code but NaN through the Gluon kernel's bit conversion equals the direct cast: a one-key cache whose
    value row holds the codes, read back through the output (one key: p = 1, out = v exactly)."""
    _gluon_gpu()
    codes = torch.tensor([c for c in range(256) if c & 0x7F != 0x7F], dtype=torch.uint8, device="cuda")
    D = 128
    outs = {}
    for cvt in (0, 2):
        got = []
        for i in range(0, codes.numel(), D):
            row = torch.zeros(D, dtype=torch.uint8, device="cuda")
            chunk = codes[i:i + D]
            row[:chunk.numel()] = chunk
            k = torch.zeros((1, 1, D), dtype=torch.float8_e4m3fn, device="cuda")
            v = row.view(torch.float8_e4m3fn).view(1, 1, D)
            q = torch.zeros((1, 1, D), dtype=torch.bfloat16, device="cuda")
            one = torch.ones(1, dtype=torch.float32, device="cuda")
            cu = torch.tensor([0, 1], dtype=torch.int32, device="cuda")
            o, _ = relbias_attention(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu,
                                     table=torch.zeros((1, 1), device="cuda"), k_scale=one, v_scale=one,
                                     gluon_decode=True, gluon_decode_cvt=cvt, _force="decode")
            got.append(o.float().view(-1)[:chunk.numel()])
        outs[cvt] = torch.cat(got)
    expect = codes.view(torch.float8_e4m3fn).float()
    assert torch.equal(outs[0], expect) and torch.equal(outs[2], expect)


@pytest.mark.parametrize("opts", [dict(num_stages=2), dict(num_stages=5), dict(num_splits=1), dict(num_splits=7),
                                  dict(num_splits=40), dict(ctas_per_sm=1, gluon_decode_cvt=3),
                                  dict(gluon_decode_tma=False), dict(gluon_decode_tma=False, num_stages=4),
                                  dict(gluon_decode_bias_async=True),
                                  dict(gluon_decode_bias_async=True, gluon_decode_tma=False, num_splits=7),
                                  dict(gluon_decode_kreg=True, gluon_decode_tma=False, num_stages=2),
                                  dict(gluon_decode_kreg=True, gluon_decode_cvt=2, num_splits=40),
                                  dict(block_n=128, num_stages=2, gluon_decode_kreg=True, gluon_decode_bias_async=True),
                                  dict(block_n=128, num_stages=2, gluon_decode_tma=False, num_splits=5),
                                  dict(block_n=128, num_stages=3, gluon_decode_cvt=1),
                                  dict(block_n=64, num_stages=2, ctas_per_sm=4, gluon_decode_kreg=True,
                                       gluon_decode_maxnreg=128),
                                  dict(block_n=64, num_stages=3, ctas_per_sm=3, gluon_decode_kreg=True,
                                       gluon_decode_maxnreg=168, num_splits=40)],
                         ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_gluon_decode_options_match_the_oracle(opts):
    """Ring depths and forced split counts (40 splits over 4096 keys: many splits hold no key)."""
    _gluon_gpu()
    inp = make_inputs(shapes.get("relbias-fp8-decode-k4096-e1"), "cuda", 0)
    out, lse = relbias_kernel_call(inp, force="decode", gluon_decode=True, **opts)
    _check(inp, out, lse)


@pytest.mark.parametrize("tma", [True, False])
def test_keys_past_the_sequence_are_never_read_into_the_result(tma):
    """TMA copies whole 64-key tiles, also rows past a split's last key: cache rows past the sequence holding NaN
    codes (0x7F) must not reach the output (their values are zeroed, their scores masked): the same bits as with
    those rows zero, on both copy paths."""
    _gluon_gpu()
    inp = make_inputs(shapes.get("relbias-fp8-decode-k4096-e1"), "cuda", 0)
    res = []
    for fill in (0x00, 0x7F):
        def pad(t, fill=fill):  # 100 rows of `fill` bytes past the last sequence
            rows = torch.full((100,) + t.shape[1:], fill, dtype=torch.uint8, device="cuda")
            return torch.cat([t.view(torch.uint8), rows]).view(torch.float8_e4m3fn)
        res.append(relbias_kernel_call(dict(inp, k=pad(inp["k"]), v=pad(inp["v"])), force="decode", gluon_decode=True,
                                       gluon_decode_tma=tma))
    assert torch.equal(res[0][0], res[1][0]) and torch.equal(res[0][1], res[1][1])
    assert torch.isfinite(res[1][0].float()).all()
    _check(inp, *res[1])


def test_the_rule_runs_gluon_decode_on_sm90():
    """On an sm_90 GPU the default fp8 decode of 8 packed rows is the Gluon kernel's result, bit for bit; 64 rows and a
    paged cache stay on the Triton kernel."""
    _gluon_gpu()
    inp = make_inputs(shapes.get("relbias-fp8-decode-k4096-e1"), "cuda", 0)
    default, gl = relbias_kernel_call(inp, force="decode"), relbias_kernel_call(inp, force="decode", gluon_decode=True)
    assert torch.equal(default[0], gl[0]) and torch.equal(default[1], gl[1])
    for case in ("relbias-fp8-paged-verify", "relbias-fp8-paged-bs16-w1"):
        inp = make_inputs(shapes.get(case), "cuda", 0)
        default = relbias_kernel_call(inp, force="decode")
        tr = relbias_kernel_call(inp, force="decode", gluon_decode=False)
        assert torch.equal(default[0], tr[0]) and torch.equal(default[1], tr[1])


def test_gluon_decode_in_a_cuda_graph():
    """Captured once, replayed after q changes in place: the same bits as an eager call."""
    _gluon_gpu()
    inp = make_inputs(shapes.get("relbias-fp8-verify-window-clamp"), "cuda", 0)
    kw = dict(cu_seqlens_q=inp["cu_seqlens_q"], cu_seqlens_k=inp["cu_seqlens_k"], table=inp["table"],
              window=inp["window"], beyond=inp["beyond"], k_scale=inp["k_scale"], v_scale=inp["v_scale"],
              max_seqlen_q=3, max_seqlen_k=150, validate=False, gluon_decode=True, _force="decode")
    out = torch.empty_like(inp["q"])
    lse = torch.empty(inp["q"].shape[:2], dtype=torch.float32, device="cuda")
    relbias_attention(inp["q"], inp["k"], inp["v"], out=out, lse=lse, **kw)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        relbias_attention(inp["q"], inp["k"], inp["v"], out=out, lse=lse, **kw)
    inp["q"].mul_(-0.5)
    graph.replay()
    torch.cuda.synchronize()
    e_out, e_lse = relbias_attention(inp["q"], inp["k"], inp["v"], **kw)
    assert torch.equal(out, e_out) and torch.equal(lse, e_lse)
