"""Random shapes the dispatchers accept, drawn by hypothesis, against the fp64 oracles (interpreter on a
CPU, compiled on a GPU): odd lengths, odd GQA ratios, windows, extents, empty lists."""

import math

import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from attnkit.reference import relbias_attention_ref, sparse_int8_ref
from attnkit.relbias import relbias_attention
from attnkit.sparse_int8 import sparse_int8_attention
from attnkit.testing import compare
from attnkit.testing.baselines import relbias_baseline, sparse_int8_baseline

DEV = "cuda" if torch.cuda.is_available() else "cpu"
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(T=st.integers(1, 20), hkv=st.sampled_from([1, 2]), group=st.sampled_from([1, 3, 5, 12, 16]),
       n=st.integers(0, 130), invalid=st.sampled_from([0.0, 0.3, 1.0]), per_head=st.booleans(),
       tps=st.sampled_from([None, 1, 2]), seed=st.integers(0, 2 ** 20))
def test_sparse_int8_random_shapes(T, hkv, group, n, invalid, per_head, tps, seed):
    g = torch.Generator().manual_seed(seed)
    D, C = 64, 97
    q = torch.randn(T, hkv * group, D, generator=g).bfloat16()
    kc = torch.randint(-127, 128, (hkv, C, D), generator=g, dtype=torch.int8)
    vc = torch.randint(-127, 128, (hkv, C, D), generator=g, dtype=torch.int8)
    ks = torch.rand(hkv, D, generator=g) * 0.05 + 0.001
    vs = torch.rand(hkv, D, generator=g) * 0.3 - 0.15
    shape = (T, hkv, n) if per_head else (T, n)
    idx = torch.randint(0, C, shape, generator=g, dtype=torch.int32)
    idx[torch.rand(shape, generator=g) < invalid] = -1
    inp = dict(q=q, k_cache=kc, v_cache=vc, key_scale=ks, value_scale=vs, indices=idx, scale=1 / math.sqrt(D))
    inp = {k: (v.to(DEV) if isinstance(v, torch.Tensor) else v) for k, v in inp.items()}
    args = (inp["q"], inp["k_cache"], inp["v_cache"], inp["key_scale"], inp["value_scale"], inp["indices"])
    out, lse = sparse_int8_attention(*args, scale=inp["scale"], tiles_per_split=tps)
    ref, ref_lse = sparse_int8_ref(*args, scale=inp["scale"])
    base, base_lse = sparse_int8_baseline(inp)
    c = compare(out, ref, base, lse=lse, lse_ref=ref_lse, lse_base=base_lse)
    assert c.ok, c.reason


@SETTINGS
@given(lens=st.lists(st.tuples(st.integers(1, 40), st.integers(0, 90)), min_size=1, max_size=3),
       hkv=st.sampled_from([1, 2]), group=st.sampled_from([1, 3, 4, 16]), E=st.integers(1, 150),
       window=st.one_of(st.none(), st.integers(1, 60)), beyond=st.sampled_from(["zero", "clamp"]),
       force=st.sampled_from([None, "fwd", "decode"]), seed=st.integers(0, 2 ** 20))
def test_relbias_random_shapes(lens, hkv, group, E, window, beyond, force, seed):
    g = torch.Generator().manual_seed(seed)
    D = 64
    lq = [a for a, _ in lens]
    lk = [a + b for a, b in lens]  # seqlen_k >= seqlen_q
    if force == "decode":
        lq = [min(x, 32) for x in lq]  # up to the decode kernel's 32 tokens (group 16: several token blocks)
        lk = [max(k, q) for q, k in zip(lq, lk)]
    Hq = hkv * group
    q = torch.randn(sum(lq), Hq, D, generator=g).bfloat16().to(DEV)
    k = torch.randn(sum(lk), hkv, D, generator=g).bfloat16().to(DEV)
    v = torch.randn(sum(lk), hkv, D, generator=g).bfloat16().to(DEV)
    table = torch.randn(Hq, E, generator=g).to(DEV)
    cq = torch.tensor([0] + list(torch.tensor(lq).cumsum(0)), dtype=torch.int32, device=DEV)
    ck = torch.tensor([0] + list(torch.tensor(lk).cumsum(0)), dtype=torch.int32, device=DEV)
    kw = dict(window=window, beyond=beyond, softmax_scale=1 / math.sqrt(D))
    out, lse = relbias_attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, table=table, _force=force, **kw)
    ref, ref_lse = relbias_attention_ref(q, k, v, cq, ck, table, **kw)
    base, base_lse = relbias_baseline(dict(q=q, k=k, v=v, cu_seqlens_q=cq, cu_seqlens_k=ck, table=table, **kw))
    c = compare(out, ref, base, lse=lse, lse_ref=ref_lse, lse_base=base_lse)
    assert c.ok, c.reason
    # the other loop structure: the same tiles in the same order, so the same bits in the interpreter (compiled,
    # a multiply-add may contract differently: then the oracle's gate); with 16 x 16 tiles more tiles fall in each
    # range (beyond the extent, inside it, straddling, window edge, diagonal)
    for split in (False, True):
        same = relbias_attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, table=table, _force=force,
                                 split_loops=split, **kw)
        if DEV == "cpu":
            assert torch.equal(same[0], out) and torch.equal(same[1], lse)
        else:
            c = compare(same[0], ref, base, lse=same[1], lse_ref=ref_lse, lse_base=base_lse)
            assert c.ok, c.reason
    small = relbias_attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, table=table, _force=force,
                              split_loops=True, block_m=16, block_n=16, **kw)
    c = compare(small[0], ref, base, lse=small[1], lse_ref=ref_lse, lse_base=base_lse)
    assert c.ok, c.reason


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(T=st.integers(1, 3), H=st.sampled_from([8, 16, 32, 64]), wide=st.booleans(), fmt=st.sampled_from(["fp8", "nvfp4"]),
       page=st.sampled_from([16, 64]), W=st.integers(0, 40), K=st.integers(0, 70),
       partial=st.sampled_from([0.0, 0.3, 1.0]), swapab=st.booleans(), splits=st.sampled_from([None, 1, 3]),
       out_dc=st.sampled_from([None, 128]), seed=st.integers(0, 2 ** 20))
def test_mqa_decode_random_shapes(T, H, wide, fmt, page, W, K, partial, swapab, splits, out_dc, seed):
    """Odd list lengths (empty lists too), lists that end inside a tile, splits that straddle the two lists,
    padding heads (H_pad 64 or 128), both kernels, against the fp64 oracle."""
    from attnkit.mqa_decode import mqa_decode_attention
    from attnkit.testing.baselines import mqa_decode_baseline
    from attnkit.testing.inputs import make_inputs
    from attnkit.testing.oracles import mqa_decode_oracle
    from attnkit.testing.shapes import FULL, Case
    case = Case("mqa_decode", "mqa_decode-property", "drawn", dict(T=T, H=H, H_pad=128 if wide else 64, fmt=fmt,
                                                                 page_size=page, W=W, K=K, partial=partial), (FULL,))
    inp = make_inputs(case, DEV, seed)
    kernel = "swapab" if swapab and H in (16, 32) else "headpad"
    out, lse = mqa_decode_attention(inp["q"], inp["swa_cache"], inp["comp_cache"], inp["swa_idx"], inp["comp_idx"],
                                    inp["positions"], inp["cos_sin"], inp["sink"], H, inp["softmax_scale"], fmt,
                                    kernel=kernel, num_splits=splits, out_dc=out_dc)
    ref, ref_lse = mqa_decode_oracle(inp)
    base, base_lse = mqa_decode_baseline(inp)
    c = compare(out, ref, base, lse=lse, lse_ref=ref_lse, lse_base=base_lse)
    assert c.ok, c.reason
