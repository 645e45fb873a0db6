"""relbias kernels: the forward kernel against the oracle (the gate covers every smoke case; these add
bad input, custom ops, and closed-form checks)."""

import math

import pytest
import torch

import attnkit.ops  # noqa: F401
from attnkit import reference as R
from attnkit.gate.specs import relbias_kernel_call
from attnkit.relbias import relbias_attention
from attnkit.testing import compare, nan_rows, shapes, unwritten
from attnkit.testing.baselines import relbias_baseline
from attnkit.testing.inputs import make_inputs
from attnkit.testing.opcheck import check_custom_op
from attnkit.testing.oracles import relbias_oracle


def _inp(case_id, device, seed=0):
    return make_inputs(shapes.get(case_id), device, seed)


@pytest.mark.parametrize("case_id", ["relbias-decode-b3-k203", "relbias-paged-bs16-decode", "relbias-fp8-decode-b2"])
def test_forward_writes_every_element_and_matches(case_id, device):
    inp = _inp(case_id, device, seed=3)
    out, lse = relbias_kernel_call(inp)
    assert unwritten(out) == 0 and unwritten(lse) == 0
    ref, ref_lse = relbias_oracle(inp)
    base, base_lse = relbias_baseline(inp)
    c = compare(out, ref, base, lse=lse, lse_ref=ref_lse, lse_base=base_lse)
    assert c.ok, c.reason


def test_alibi_table_matches_dense_alibi(device):
    """ALiBi as a table (BLOOM's slopes): bias(h, d) = -slope_h * d, with the extent covering every distance."""
    Hq, L, D = 4, 40, 64
    slopes = torch.tensor([2 ** (-8 * (i + 1) / Hq) for i in range(Hq)])
    table = -slopes[:, None] * torch.arange(L, dtype=torch.float32)[None, :]
    g = torch.Generator().manual_seed(0)
    q = torch.randn(L, Hq, D, generator=g).bfloat16().to(device)
    k = torch.randn(L, Hq, D, generator=g).bfloat16().to(device)
    v = torch.randn(L, Hq, D, generator=g).bfloat16().to(device)
    cu = torch.tensor([0, L], dtype=torch.int32, device=device)
    out, _ = relbias_attention(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, table=table.to(device))
    # dense ALiBi in fp64: score - slope * (i - j), causal
    i = torch.arange(L)
    dist = (i[:, None] - i[None, :]).double()
    s = torch.einsum("qhd,khd->hqk", q.double().cpu(), k.double().cpu()) / math.sqrt(D) - slopes.double()[:, None, None] * dist
    s = s.masked_fill(dist < 0, float("-inf"))
    ref = torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), v.double().cpu())
    assert (out.double().cpu() - ref).abs().max() < 2e-2


def _bad(device):
    inp = _inp("relbias-chunked-q37-k203", device)
    return inp, dict(cu_seqlens_q=inp["cu_seqlens_q"], cu_seqlens_k=inp["cu_seqlens_k"], table=inp["table"])


@pytest.mark.parametrize("mutate, match", [
    (lambda i, kw: (i["q"].float(), i["k"], i["v"]), "q: must be bfloat16"),
    (lambda i, kw: (i["q"], i["k"][:, :1].expand(-1, 1, -1).contiguous()[:, :, :32], i["v"]), "k"),
    (lambda i, kw: (i["q"][:, :3], i["k"], i["v"]), "Hq=3 must be a multiple"),
    (lambda i, kw: (i["q"], i["k"], i["v"].half()), "v: must have k's dtype"),
])
def test_bad_tensors_raise_naming_the_argument(mutate, match, device):
    inp, kw = _bad(device)
    if "Hq=3" in match:
        kw["table"] = kw["table"][:3]
    with pytest.raises(ValueError, match=match):
        relbias_attention(*mutate(inp, kw), **kw)


def test_bad_metadata_raises(device):
    inp, kw = _bad(device)
    args = (inp["q"], inp["k"], inp["v"])
    bad = dict(kw, cu_seqlens_q=torch.tensor([0, 40, 37], dtype=torch.int32, device=device))
    with pytest.raises(ValueError, match="cu_seqlens_q"):
        relbias_attention(*args, **bad)
    with pytest.raises(ValueError, match="cu_seqlens_k"):
        relbias_attention(*args, **dict(kw, cu_seqlens_k=torch.tensor([0, 9999], dtype=torch.int32, device=device)))
    t = kw["table"].clone()
    t[0, 3] = float("inf")
    with pytest.raises(ValueError, match="table: holds a non-finite"):
        relbias_attention(*args, **dict(kw, table=t))
    with pytest.raises(ValueError, match="window"):
        relbias_attention(*args, **kw, window=0)
    with pytest.raises(ValueError, match="beyond"):
        relbias_attention(*args, **kw, beyond="wrap")
    with pytest.raises(ValueError, match="k_scale"):
        relbias_attention(*args, **kw, k_scale=torch.ones(2, device=device))


@pytest.mark.parametrize("case_id", ["relbias-varlen-mixed3", "relbias-decode-b3-k203", "relbias-paged-bs16-decode"])
def test_max_seqlens_below_the_batch_raise(case_id, device):
    """max_seqlen_q / max_seqlen_k below the batch's longest sequence would leave rows uncomputed (the forward grid)
    or keys unread (the decode split plan), silently: with validate they raise, naming the argument (shown
    returning a wrong answer without the check); an overestimate gives the oracle's answer."""
    inp = _inp(case_id, device)
    cu = inp["cu_seqlens_q"].cpu()
    lq = int((cu[1:] - cu[:-1]).max())
    ck = inp["cu_seqlens_k"].cpu()
    lk = int(inp["seqused_k"].max()) if "k_cache" in inp else int((ck[1:] - ck[:-1]).max())
    with pytest.raises(ValueError, match="max_seqlen_k: .* below the batch's longest key sequence"):
        relbias_kernel_call(inp, max_seqlen_k=lk - 1)
    if lq > 1:
        with pytest.raises(ValueError, match="max_seqlen_q: .* below the batch's longest query sequence"):
            relbias_kernel_call(inp, max_seqlen_q=lq - 1)
    for bad in (-1, 2.0, True, "8"):
        with pytest.raises(ValueError, match="max_seqlen_k: must be an int"):
            relbias_kernel_call(inp, max_seqlen_k=bad)
    out, lse = relbias_kernel_call(inp, max_seqlen_q=lq + 5, max_seqlen_k=lk + 300)
    ref, ref_lse = relbias_oracle(inp)
    base, base_lse = relbias_baseline(inp)
    c = compare(out, ref, base, lse=lse, lse_ref=ref_lse, lse_base=base_lse)
    assert c.ok, c.reason


def _strided(t):
    """t's values in a view of stride 2 (what a slice with a step gives)."""
    big = torch.zeros(t.numel() * 2, dtype=t.dtype, device=t.device)
    big[::2] = t
    return big[::2]


def test_strided_metadata_raises(device):
    """1-D metadata the kernels read at offset b (cu_seqlens_q / _k, seqused_k; the writer's seqused_k, block
    table and fp8 scales) must be contiguous: a strided view of the right values returned wrong answers before
    (cu_seqlens_q: rows unwritten; cu_seqlens_k 2.9 off, seqused_k 1.8 off, in the interpreter)."""
    from attnkit.relbias import relbias_write_kv
    inp = _inp("relbias-varlen-mixed3", device)
    for name in ("cu_seqlens_q", "cu_seqlens_k"):
        with pytest.raises(ValueError, match=f"{name}: must be contiguous"):
            relbias_kernel_call(dict(inp, **{name: _strided(inp[name])}))
    inp = _inp("relbias-paged-bs16-decode", device)
    with pytest.raises(ValueError, match="seqused_k: must be a contiguous"):
        relbias_kernel_call(dict(inp, seqused_k=_strided(inp["seqused_k"])))
    kc = torch.zeros_like(inp["k_cache"], dtype=torch.float8_e4m3fn)
    Hkv, D = kc.shape[2:]
    new = torch.randn(3, Hkv, D, device=device).bfloat16()
    cu = torch.tensor([0, 2, 3], dtype=torch.int32, device=device)
    scale = torch.ones(Hkv, device=device)
    ok = dict(k_scale=scale, v_scale=scale)
    bt, su = inp["block_table"], inp["seqused_k"] - 5
    relbias_write_kv(new, new, cu, kc, kc.clone(), bt, su, **ok)  # the contiguous call is taken
    for kw, match in ((dict(seqused_k=_strided(su)), "seqused_k: must be a contiguous"),
                      (dict(block_table=torch.cat([bt, bt], 1)[:, ::2]), "block_table: must be .* last dim contiguous"),
                      (dict(k_scale=_strided(scale)), "k_scale: an fp8 cache needs a contiguous"),
                      (dict(seqused_k=su - 100), "seqused_k: must be non-negative")):
        args = dict(block_table=bt, seqused_k=su, **ok)
        args.update(kw)
        with pytest.raises(ValueError, match=match):
            relbias_write_kv(new, new, cu, kc, kc.clone(), args.pop("block_table"), args.pop("seqused_k"), **args)


def test_paged_block_table_out_of_range_raises(device):
    inp = _inp("relbias-paged-bs16-decode", device)
    bt = inp["block_table"].clone()
    bt[0, 0] = inp["k_cache"].shape[0]
    with pytest.raises(ValueError, match="block_table"):
        relbias_attention(inp["q"], k_cache=inp["k_cache"], v_cache=inp["v_cache"], block_table=bt,
                          seqused_k=inp["seqused_k"], cu_seqlens_q=inp["cu_seqlens_q"], table=inp["table"])


def test_fp8_needs_scales(device):
    inp = _inp("relbias-fp8-decode-b2", device)
    with pytest.raises(ValueError, match="k_scale"):
        relbias_attention(inp["q"], inp["k"], inp["v"], cu_seqlens_q=inp["cu_seqlens_q"],
                          cu_seqlens_k=inp["cu_seqlens_k"], table=inp["table"])


def test_relbias_custom_ops(device):
    inp = _inp("relbias-varlen-mixed3", device, seed=1)
    args = [inp["q"], inp["k"], inp["v"], inp["cu_seqlens_q"], inp["cu_seqlens_k"], inp["table"], 0, "zero",
            inp["softmax_scale"], 37, int((inp["cu_seqlens_k"][1:] - inp["cu_seqlens_k"][:-1]).max())]

    def refresh(a):
        a[0].copy_(a[0] * 0.5)

    assert check_custom_op(torch.ops.attnkit.relbias_varlen, args, refresh=refresh)["opcheck"]
    p = _inp("relbias-paged-bs16-decode", device, seed=2)
    pargs = [p["q"], p["k_cache"], p["v_cache"], p["block_table"], p["seqused_k"], p["cu_seqlens_q"], p["table"],
             0, "zero", p["softmax_scale"], 1, int(p["seqused_k"].max())]
    assert check_custom_op(torch.ops.attnkit.relbias_paged, pargs)["opcheck"]


def test_dispatch_rule_is_a_pure_function_of_shapes():
    from attnkit.relbias.config import FwdConfig, decode_plan, fwd_config, use_decode
    assert use_decode(1, 8) and use_decode(16, 8) and use_decode(32, 8) and use_decode(16, 16)
    assert not use_decode(33, 1) and not use_decode(1, 129)
    v = decode_plan(1, 8, 8, 128, 32, 65536, 132, "cuda", extent=8192)  # 32 tokens x 8 heads: 2 blocks of 128 rows
    # 33 splits by the target, the last one empty: trimmed to 32
    assert v.block_r == 128 and v.token_blocks == 2 and v.num_splits == 32 and v.split_loops
    assert v.num_warps == 8 and v.num_stages == 3 and v.strip == 128 and v.strip_g == 8  # long splits (31 tiles)
    # 8K: the split target leaves short splits (17 of 8 tiles); one wave of 128-row programs (2 token blocks x 8 KV
    # heads x 8 splits = 128 <= 132 SMs) keeps 16 tiles a split: the verify one-wave rule
    vs = decode_plan(1, 8, 8, 128, 32, 8192, 132, "cuda", extent=8192)
    assert (vs.block_r, vs.token_blocks, vs.num_splits, vs.num_warps, vs.fast_interior) == (128, 2, 8, 8, True)
    assert decode_plan(1, 8, 8, 128, 32, 8192, 132, "cuda", extent=8192, num_splits=8) == vs  # forced: the same
    # fewer keys (4K: one wave would leave 8 tiles a split): short splits, 64-row tiles at 2 stages
    vs = decode_plan(1, 8, 8, 128, 32, 4096, 132, "cuda", extent=8192)
    assert (vs.block_r, vs.token_blocks, vs.num_splits, vs.num_warps, vs.num_stages) == (64, 4, 16, 4, 2)  # 17, trimmed
    # a forced split count or split target keeps the rule before it (the split target's tile)
    vs = decode_plan(1, 8, 8, 128, 32, 8192, 132, "cuda", extent=8192, ctas_per_sm=4)
    assert (vs.block_r, vs.token_blocks, vs.num_splits, vs.num_warps, vs.num_stages) == (64, 4, 16, 4, 2)  # 17, trimmed
    assert decode_plan(1, 8, 8, 128, 32, 8192, 132, "cuda", num_warps=4).block_r == 128  # an option: no verify rule
    assert decode_plan(1, 8, 8, 128, 32, 8192, 132, "cpu").block_r == 128  # the interpreter keeps one tile shape
    # the strip (a power of two >= tokens per tile + keys per tile): over contiguous caches; an explicit value wins
    assert decode_plan(32, 8, 8, 128, 1, 8192, 132, "cuda").strip == 128
    assert decode_plan(32, 8, 8, 128, 1, 8192, 132, "cuda", paged=True).strip == 0
    assert decode_plan(32, 8, 8, 128, 1, 8192, 132, "cuda", paged=True, bias_strip=True).strip == 256  # 128 keys
    assert decode_plan(32, 8, 8, 128, 1, 8192, 132, "cuda", fp8=True).strip == 128
    assert decode_plan(32, 8, 8, 128, 1, 8192, 132, "cuda", bias_strip=False).strip == 0
    assert decode_plan(1, 4, 3, 128, 16, 8192, 132, "cuda", block_n=32).strip_g == 4  # 3 heads: strips of 4 rows
    assert decode_plan(1, 8, 3, 128, 5, 100, 132, "cuda").token_blocks == 1  # 15 rows in one 16-row tile
    p = decode_plan(1, 8, 8, 128, 1, 65536, 132, "cuda")  # 4 programs per SM: 528 over 8 KV heads
    # 66 splits by the target, of 16 key tiles each: the last two were empty, trimmed to 64
    assert p.block_r == 16 and p.num_splits == 64 and p.keys_per_split * p.num_splits == 65536
    assert p.num_warps == 4 and p.num_stages == 3
    assert decode_plan(32, 8, 8, 128, 1, 65536, 132, "cuda").num_splits == 3
    pp = decode_plan(32, 8, 8, 128, 1, 8192, 132, "cuda", paged=True)  # paged: 2 per SM, 2 stages
    assert pp.num_splits == 2 and pp.num_stages == 2
    assert decode_plan(32, 8, 8, 128, 1, 8192, 132, "cuda", fp8=True).num_splits == 2  # fp8: 3 per SM
    assert decode_plan(32, 8, 8, 128, 1, 8192, 132, "cuda", ctas_per_sm=8).num_splits == 5  # the option wins
    from attnkit.relbias.config import fwd_config
    # from 33 query tokens: the branch-free loops and the strip; 128 x 64 tiles at 8 warps from 1024 tokens at
    # D >= 128, 64 x 64 at 4 warps otherwise
    assert fwd_config(128, 8192, "cuda") == fwd_config(128, 1024, "cuda") == FwdConfig(128, 64, 8, 2, True, False, True)
    assert fwd_config(128, 1023, "cuda") == fwd_config(128, 33, "cuda") == FwdConfig(64, 64, 4, 2, True, False, True)
    assert fwd_config(64, 8192, "cuda") == FwdConfig(64, 64, 4, 2, True, False, True)
    assert fwd_config(128, 32, "cuda").block_m == 32 and fwd_config(128, 16, "cuda").block_m == 16
    assert fwd_config(256, 8192, "cuda") == FwdConfig(128, 32, 8, 2, True, False, True)
    assert fwd_config(256, 8192, "cuda", bias_strip=False) == FwdConfig(64, 32, 8, 2, False, False, False)
    assert fwd_config(128, 8192, "cpu") == FwdConfig(64, 32, 4, 2, True, False, True)  # the interpreter: 64 rows
    assert fwd_config(128, 8192, "cuda", split_loops=False) == FwdConfig(64, 64, 4, 2, False, False, False)
    assert fwd_config(128, 8192, "cuda", bias_strip=False).block_m == 64
    assert decode_plan(1, 1, 1, 64, 1, 10, 132, "cuda").num_splits == 1  # never more splits than tiles
    assert decode_plan(1, 8, 8, 128, 1, 65536, 132, "cuda", num_splits=5).num_splits == 5
    # branch-free loops: decode past the extent or over a paged cache (then 128-key tiles at D <= 128),
    # forward tiles of at most 32 rows (then 3 stages); an explicit value wins
    assert decode_plan(1, 8, 8, 128, 1, 65536, 132, "cuda", extent=8192).split_loops
    assert not decode_plan(32, 8, 8, 128, 1, 8192, 132, "cuda", extent=8192).split_loops
    assert not decode_plan(32, 8, 8, 128, 1, 65536, 132, "cuda", extent=8192, split_loops=False).split_loops
    pp = decode_plan(32, 8, 8, 128, 1, 8192, 132, "cuda", paged=True, extent=8192)
    assert pp.split_loops and pp.block_n == 128
    assert decode_plan(32, 8, 8, 256, 1, 8192, 132, "cuda", paged=True, extent=8192).block_n == 32
    assert decode_plan(32, 8, 8, 128, 1, 8192, 132, "cuda", paged=True, split_loops=False).block_n == 64
    assert fwd_config(128, 32, "cuda").split_loops and fwd_config(128, 32, "cuda").num_stages == 3
    assert fwd_config(128, 33, "cuda").split_loops and fwd_config(128, 33, "cuda").num_stages == 2
    assert not fwd_config(128, 33, "cuda", bias_strip=False).split_loops
    assert fwd_config(128, 33, "cuda", split_loops=True).split_loops
    assert fwd_config(128, 32, "cuda", split_loops=False).num_stages == 2
    pf = fwd_config(128, 8192, "cuda", bias_prefetch=True)  # the prefetch runs in the branch-free loops
    assert pf.bias_prefetch and pf.split_loops and pf.num_stages == 2 and not pf.bias_strip and pf.block_m == 64
    with pytest.raises(ValueError, match="bias_prefetch"):
        fwd_config(128, 8192, "cuda", split_loops=False, bias_prefetch=True)
    assert fwd_config(128, 8192, "cuda", bias_strip=True).split_loops
    with pytest.raises(ValueError, match="bias_strip"):
        fwd_config(128, 8192, "cuda", bias_strip=True, bias_prefetch=True)
    assert fwd_config(128, 40, "cuda", kv_tma=True).split_loops  # TMA loads run in the branch-free loops
    with pytest.raises(ValueError, match="kv_tma"):
        fwd_config(128, 8192, "cuda", split_loops=False, kv_tma=True)


def test_merge_rule_spreads_few_rows_over_more_programs():
    from attnkit.splitk import MERGE_FEW_ROWS, merge_block_d_rule
    assert merge_block_d_rule(24, 256) == 64 and merge_block_d_rule(MERGE_FEW_ROWS, 128) == 64
    assert merge_block_d_rule(MERGE_FEW_ROWS + 1, 256) == 256 and merge_block_d_rule(2048, 128) == 128
    assert merge_block_d_rule(8, 32) == 32  # never wider than the row


@pytest.mark.parametrize("num_splits", [1, 2, 7, 40])  # 40 > tiles: trailing splits are empty
def test_decode_forced_split_counts_match_the_oracle(num_splits, device):
    inp = _inp("relbias-decode-b3-k203", device, seed=5)
    ref, ref_lse = relbias_oracle(inp)
    base, base_lse = relbias_baseline(inp)
    out, lse = relbias_attention(inp["q"], inp["k"], inp["v"], cu_seqlens_q=inp["cu_seqlens_q"],
                                 cu_seqlens_k=inp["cu_seqlens_k"], table=inp["table"], num_splits=num_splits)
    c = compare(out, ref, base, lse=lse, lse_ref=ref_lse, lse_base=base_lse)
    assert c.ok, c.reason


def test_decode_and_forward_agree(device):
    inp = _inp("relbias-verify-t4-k203", device, seed=6)
    a = relbias_kernel_call(inp, force="decode")
    b = relbias_kernel_call(inp, force="fwd")
    assert (a[0].float() - b[0].float()).abs().max() < 2e-2
    torch.testing.assert_close(a[1], b[1], rtol=1e-4, atol=1e-4)


def test_bad_num_splits(device):
    inp = _inp("relbias-decode-b3-k203", device)
    with pytest.raises(ValueError, match="num_splits"):
        relbias_attention(inp["q"], inp["k"], inp["v"], cu_seqlens_q=inp["cu_seqlens_q"],
                          cu_seqlens_k=inp["cu_seqlens_k"], table=inp["table"], num_splits=0)


@pytest.mark.parametrize("E,beyond,window", [(300, "zero", None), (100, "zero", None), (100, "clamp", None),
                                             (300, "zero", 150), (1, "clamp", None), (5000, "zero", 97)])
def test_fast_interior_tiles_give_the_same_bits(E, beyond, window, device):
    """The mask-free interior path computes exactly what the masked path does on interior tiles (every key
    visible, distances inside or beyond the table), and the strip (the rule here: interior and masked tiles)
    what the per-score lookup does: the same bits, on shapes where most tiles are interior."""
    g = torch.Generator().manual_seed(E)
    lq, lk = [256, 130], [256, 300]  # a full prefill and a chunk behind 170 earlier keys
    Hq, Hkv, D = 4, 2, 64
    q = torch.randn(sum(lq), Hq, D, generator=g).bfloat16().to(device)
    k = torch.randn(sum(lk), Hkv, D, generator=g).bfloat16().to(device)
    v = torch.randn(sum(lk), Hkv, D, generator=g).bfloat16().to(device)
    table = (torch.randn(Hq, E, generator=g) * 2).to(device)
    cq = torch.tensor([0, lq[0], sum(lq)], dtype=torch.int32, device=device)
    ck = torch.tensor([0, lk[0], sum(lk)], dtype=torch.int32, device=device)
    kw = dict(cu_seqlens_q=cq, cu_seqlens_k=ck, table=table, window=window, beyond=beyond, _force="fwd")
    a = relbias_attention(q, k, v, fast_interior=False, bias_strip=False, **kw)  # every tile masked, looked up
    for opts in (dict(fast_interior=True, bias_strip=False), dict(split_loops=True, bias_strip=False),
                 dict(split_loops=True, fast_interior=False, bias_strip=False), dict(bias_prefetch=True),
                 {}, dict(fast_interior=False), dict(_masked_strip=False), dict(bias_strip=True, block_m=32),
                 dict(kv_tma=True), dict(kv_tma=True, bias_strip=False)):
        b = relbias_attention(q, k, v, **opts, **kw)  # the same tiles in the same order, the same arithmetic
        ref = a
        if "block_m" in opts:  # against the reference at the same tile height: matmul row blocking may depend on it
            # (numpy's OpenBLAS sgemm, in the interpreter, rounds a row differently at 16 / 64 rows than at 32)
            ref = relbias_attention(q, k, v, fast_interior=False, bias_strip=False, block_m=opts["block_m"], **kw)
        if device == "cuda" and opts.get("split_loops", True) is not False:
            # compiled, the other loop structure may contract a multiply-add differently (H200: a few outputs
            # differ in the last bit); its parity with the fp64 oracle is the relbias/triton_*_split gates'
            torch.testing.assert_close(b[0], ref[0], rtol=2 ** -7, atol=2 ** -7, msg=str(opts))
            torch.testing.assert_close(b[1], ref[1], rtol=1e-5, atol=1e-5, msg=str(opts))
        else:
            assert torch.equal(ref[0], b[0]) and torch.equal(ref[1], b[1]), opts


@pytest.mark.parametrize("case_id,opts", [
    ("relbias-verify-t24-g16-blocks-w64", {}), ("relbias-verify-t32-g8-blocks-clamp", {}),
    ("relbias-verify-t4-k203", dict(decode_rows=16)), ("relbias-verify-t4-k203", dict(split_loops=True)),
    ("relbias-verify-t32-g8-blocks-clamp", dict(split_loops=True, block_n=16)),
    ("relbias-verify-t24-g16-blocks-w64", dict(decode_rows=64, split_loops=True)),
    ("relbias-decode-b3-k203", {}), ("relbias-paged-bs16-decode", {})])
def test_decode_strip_gives_the_same_bits(case_id, opts, device):
    """The decode kernel's bias built from per-head strips (bias_strip) is the bias looked up per score: the
    same bits in the interpreter, on token blocks, a window, a clamped extent shorter than the keys, both
    loop structures and paged caches (compiled, within bf16 tolerance: a multiply-add may contract
    differently)."""
    inp = _inp(case_id, device)
    a = relbias_kernel_call(inp, force="decode", bias_strip=False, **opts)
    b = relbias_kernel_call(inp, force="decode", bias_strip=True, **opts)
    if device == "cuda":
        torch.testing.assert_close(b[0], a[0], rtol=2 ** -7, atol=2 ** -7)
        torch.testing.assert_close(b[1], a[1], rtol=1e-5, atol=1e-5)
    else:
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.parametrize("opts", [dict(heavy_first=True), dict(block_m=32, block_n=16, num_warps=4, num_stages=3),
                                  dict(block_m=128, block_n=64, num_warps=8, heavy_first=True, fast_interior=True),
                                  dict(block_n=16, num_stages=1, ctas_per_sm=4, merge_block_d=16),
                                  dict(split_loops=True), dict(split_loops=True, fast_interior=False),
                                  dict(split_loops=True, block_m=32, block_n=16, heavy_first=False),
                                  dict(decode_rows=16, split_loops=False), dict(bias_prefetch=True),
                                  dict(bias_prefetch=True, block_m=16, block_n=16), dict(bias_strip=True),
                                  dict(bias_strip=True, block_m=16, block_n=32), dict(kv_tma=True)])
def test_tuning_options_give_the_oracles_answer(opts, device):
    """Every tile, warp, stage, split-target and launch-order setting the sweeps time computes the oracle's
    answer within the gate's bounds: the forward kernel on prefill, chunked and varlen batches, the decode
    kernel on decode, verify and paged shapes."""
    for case_id in ("relbias-prefill-s113", "relbias-chunked-q37-k203", "relbias-varlen-mixed3",
                    "relbias-decode-b3-k203", "relbias-verify-t4-k203", "relbias-paged-bs16-decode",
                    "relbias-extent-e-lt-window-clamp", "relbias-window-w1", "relbias-extent-e1",
                    "relbias-paged-bs16-one-page", "relbias-verify-t24-g16-blocks-w64"):
        inp = _inp(case_id, device)
        out, lse = relbias_kernel_call(inp, **opts)
        ref, ref_lse = relbias_oracle(inp)
        base, base_lse = relbias_baseline(inp)
        assert unwritten(out) == 0
        c = compare(out, ref, base, lse=lse, lse_ref=ref_lse, lse_base=base_lse)
        assert c.ok, (case_id, c.reason)


def test_kv_tma_needs_a_contiguous_aligned_cache(device):
    """kv_tma (TMA descriptors for K and V) names itself when the cache cannot take a descriptor."""
    p = _inp("relbias-paged-bs16-decode", device)
    with pytest.raises(ValueError, match="kv_tma"):
        relbias_kernel_call(p, force="fwd", kv_tma=True)
    inp = _inp("relbias-prefill-s113", device)

    def strided(t, rows=1, pad=0):  # t in a larger buffer: token stride of `rows` rows, `pad` elements ahead
        buf = torch.empty(t.shape[0] * rows, t.shape[1], t.shape[2] + pad, dtype=t.dtype, device=device)
        view = buf[::rows, :, pad:]
        view.copy_(t)
        return view

    ref = relbias_kernel_call(inp, force="fwd", kv_tma=False)
    wide = dict(inp, k=strided(inp["k"], rows=2), v=strided(inp["v"], rows=2))  # still 16-byte aligned: accepted
    out = relbias_kernel_call(wide, force="fwd", kv_tma=True)
    assert torch.equal(out[0], ref[0]) or device == "cuda"
    torch.testing.assert_close(out[0], ref[0], rtol=2 ** -7, atol=2 ** -7)
    odd = dict(inp, k=strided(inp["k"], pad=1), v=strided(inp["v"], pad=1))  # rows not 16-byte aligned
    with pytest.raises(ValueError, match="kv_tma"):
        relbias_kernel_call(odd, force="fwd", kv_tma=True)


def test_tuning_options_are_checked(device, monkeypatch):
    inp = _inp("relbias-decode-b3-k203", device)
    with pytest.raises(ValueError, match="block_n"):
        relbias_kernel_call(inp, block_n=48)
    with pytest.raises(ValueError, match="num_warps"):
        relbias_kernel_call(inp, num_warps=3)
    with pytest.raises(ValueError, match="num_warps"):
        relbias_kernel_call(inp, num_warps=16)
    with pytest.raises(ValueError, match="merge_block_d"):
        relbias_kernel_call(inp, merge_block_d=48)
    monkeypatch.setenv("ATTNKIT_RELBIAS_STAGES", "03")
    with pytest.raises(ValueError, match="ATTNKIT_RELBIAS_STAGES"):
        relbias_kernel_call(inp)
    monkeypatch.setenv("ATTNKIT_RELBIAS_STAGES", "3")
    relbias_kernel_call(inp)  # accepted


@pytest.mark.parametrize("case_id", ["relbias-decode-b3-k203", "relbias-decode-b2-clamp-window-tail",
                                     "relbias-paged-bs16-decode", "relbias-verify-t4-k203", "relbias-fp8-decode-b2"])
def test_split_loops_give_the_same_bits_in_decode(case_id, device):
    """The decode kernel's branch-free loops (tiles beyond the extent, then the rest) compute what its single
    loop does, tile for tile: the same bits."""
    inp = _inp(case_id, device, seed=3)
    # the Triton decode kernel in both calls (split_loops is its option; on sm_90 fp8 decode goes to Gluon by rule)
    a = relbias_kernel_call(inp, force="decode", num_splits=3, gluon_decode=False)
    b = relbias_kernel_call(inp, force="decode", num_splits=3, split_loops=True, gluon_decode=False)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.parametrize("force,option", [("decode", "fp8_f16_cvt"), ("fwd", "fp8_f16_cvt"),
                                          ("decode", "fp8_asm_cvt")])
def test_fp8_conversions_give_the_same_bits(force, option, device):
    """fp8_f16_cvt converts fp8 k, v through fp16 and fp32 (decode and forward kernel), fp8_asm_cvt by inline
    assembly on the codes as loaded (decode kernel), instead of by the direct cast: the same values, so the same
    output and LSE bits (fp8_asm_cvt: in the interpreter the direct cast itself; the assembly runs compiled, on a
    GPU, where this test passed at 686bfaa)."""
    inp = _inp("relbias-fp8-decode-b2", device, seed=4)
    # Triton kernels in both calls: the options are theirs (on sm_90 fp8 decode goes to the Gluon kernel by rule)
    a = relbias_kernel_call(inp, force=force, gluon_decode=False)
    b = relbias_kernel_call(inp, force=force, gluon_decode=False, **{option: True})
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    ref, ref_lse = relbias_oracle(inp)
    base, base_lse = relbias_baseline(inp)
    c = compare(b[0], ref, base, lse=b[1], lse_ref=ref_lse, lse_base=base_lse)
    assert c.ok, c.reason


@pytest.mark.parametrize("case_id,block_n", [("relbias-paged-bs16-decode", 16), ("relbias-paged-bs16-one-page", 16),
                                              ("relbias-paged-bs16-decode", 32),
                                              ("relbias-paged-bs64-chunked", 32)])
def test_page_tiles_give_the_per_key_answer(case_id, block_n, device):
    """page_tiles (one block-table entry per key tile) reads the same keys as the per-key block-table loads: the
    oracle's answer, and in the interpreter the per-key path's bits; a tile wider than a page is refused."""
    inp = _inp(case_id, device)
    if block_n > inp["k_cache"].shape[1]:
        with pytest.raises(ValueError, match="page_tiles"):
            relbias_kernel_call(inp, force="decode", page_tiles=True, block_n=block_n)
        return
    out, lse = relbias_kernel_call(inp, force="decode", page_tiles=True, block_n=block_n)
    ref, ref_lse = relbias_oracle(inp)
    base, base_lse = relbias_baseline(inp)
    c = compare(out, ref, base, lse=lse, lse_ref=ref_lse, lse_base=base_lse)
    assert c.ok, c.reason
    key = relbias_kernel_call(inp, force="decode", page_tiles=False, block_n=block_n)
    assert torch.equal(out, key[0]) or device == "cuda"


def test_page_tiles_plan():
    """The plan's page_tiles: refused without a paged cache or with a tile wider than a block."""
    from attnkit.relbias.config import decode_plan
    assert decode_plan(32, 8, 8, 128, 1, 8192, 132, "cuda", paged=True, page=64, page_tiles=True,
                       block_n=64).page_tiles
    assert not decode_plan(32, 8, 8, 128, 1, 8192, 132, "cuda", paged=True, page=64).page_tiles
    with pytest.raises(ValueError, match="page_tiles"):
        decode_plan(32, 8, 8, 128, 1, 8192, 132, "cuda", page_tiles=True)
    with pytest.raises(ValueError, match="page_tiles"):
        decode_plan(32, 8, 8, 128, 1, 8192, 132, "cuda", paged=True, page=16, page_tiles=True, block_n=64)


def test_paged_decode_rule_on_sm90():
    """The sm_90 paged rule (config.PAGE_TILE_BLOCK_N): blocks of 64+ keys take page tiles (64 keys, 5 stages, 2 per
    SM, the strip), smaller ones per-key loads at 128-key tiles, 5 stages, 1 per SM; fp8, D 256, verify tiles, the
    options and other devices keep the earlier rule."""
    from attnkit.relbias.config import decode_plan
    args = (32, 8, 8, 128, 1, 8192, 132, "cuda")
    p64 = decode_plan(*args, paged=True, extent=8192, page=64, sm90=True)
    assert (p64.page_tiles, p64.block_n, p64.num_stages, p64.strip > 0, p64.num_splits) == (True, 64, 5, True, 2)
    p256 = decode_plan(*args, paged=True, extent=8192, page=256, sm90=True)
    assert p256.page_tiles and p256.block_n == 64
    p16 = decode_plan(*args, paged=True, extent=8192, page=16, sm90=True)
    assert (p16.page_tiles, p16.block_n, p16.num_stages, p16.strip) == (False, 128, 5, 0)
    p1 = decode_plan(1, 8, 8, 128, 1, 8192, 132, "cuda", paged=True, extent=8192, page=16, sm90=True)
    assert p1.num_splits == 16  # 17 by the target, the last one empty: trimmed
    old = decode_plan(*args, paged=True, extent=8192, page=64)  # not sm_90: the earlier rule
    assert (old.page_tiles, old.block_n, old.num_stages, old.strip) == (False, 128, 2, 0)
    for kw in (dict(fp8=True), dict(page_tiles=False), dict(block_n=128), dict(num_stages=2)):
        p = decode_plan(*args, paged=True, extent=8192, page=64, sm90=True, **kw)
        assert not p.page_tiles or kw.get("num_stages") == 2, kw
    assert decode_plan(*args, paged=True, extent=8192, page=64, sm90=True, num_stages=2).num_stages == 2
    assert not decode_plan(*args[:3], 256, 1, 8192, 132, "cuda", paged=True, extent=8192, page=64, sm90=True).page_tiles
    verify = decode_plan(1, 8, 8, 128, 32, 8192, 132, "cuda", paged=True, extent=8192, page=64, sm90=True)
    assert not verify.page_tiles and verify.num_stages == 2  # the verify tiles' rule


# (every decode shape is also run against the oracle by the gate relbias/triton_decode_fast; these check the bits)
FAST_CASES = ("relbias-decode-b3-k203", "relbias-decode-b2-clamp-window-tail", "relbias-verify-t24-g16-blocks-w64",
              "relbias-paged-bs32-window", "relbias-extent-e1")


@pytest.mark.parametrize("case_id", FAST_CASES)
def test_decode_fast_interior_gives_the_masked_loops_answer(case_id, device):
    """decode_fast_interior (interior key tiles in a loop of their own, unmasked) on decode, verify, paged, window,
    clamp and extent shapes: the oracle's answer, and in the interpreter the masked loops' bits (the same tiles in the
    same order; only the rows past a block's tokens, never stored, differ)."""
    inp = _inp(case_id, device)
    out, lse = relbias_kernel_call(inp, force="decode", decode_fast_interior=True)
    ref, ref_lse = relbias_oracle(inp)
    base, base_lse = relbias_baseline(inp)
    c = compare(out, ref, base, lse=lse, lse_ref=ref_lse, lse_base=base_lse)
    assert c.ok, c.reason
    masked = relbias_kernel_call(inp, force="decode", decode_fast_interior=False)
    if device != "cuda":
        assert torch.equal(out, masked[0]) and torch.equal(lse, masked[1])



def test_decode_fast_interior_rule():
    """The interior loop by rule on the verify tile of 128 rows at 8 warps only (relbias-decode-fast sweep); the
    option wins both ways."""
    from attnkit.relbias.config import decode_plan
    v64k = decode_plan(1, 8, 8, 128, 32, 65536, 132, "cuda", extent=8192)
    assert (v64k.block_r, v64k.num_warps, v64k.fast_interior) == (128, 8, True)
    assert not decode_plan(1, 8, 8, 128, 32, 65536, 132, "cuda", extent=8192, fast_interior=False).fast_interior
    v8k = decode_plan(1, 8, 8, 128, 32, 8192, 132, "cuda", extent=8192)  # the one-wave rule: the 128-row tile
    assert (v8k.block_r, v8k.num_warps, v8k.fast_interior) == (128, 8, True)
    v4k = decode_plan(1, 8, 8, 128, 32, 4096, 132, "cuda", extent=8192)  # short splits: the 64-row tile
    assert v4k.block_r == 64 and not v4k.fast_interior
    assert decode_plan(1, 8, 8, 128, 32, 4096, 132, "cuda", extent=8192, fast_interior=True).fast_interior
    for kw in (dict(), dict(paged=True, page=64, sm90=True), dict(fp8=True)):
        assert not decode_plan(32, 8, 8, 128, 1, 8192, 132, "cuda", extent=8192, **kw).fast_interior, kw
    assert not decode_plan(1, 8, 8, 128, 32, 65536, 132, "cpu", extent=8192).fast_interior


def test_fp8_asm_and_f16_conversions_are_refused_together(device):
    """fp8_asm_cvt and fp8_f16_cvt are two ways of one conversion: asking for both is a ValueError naming the
    option, not one of them silently."""
    inp = _inp("relbias-fp8-decode-b2", device, seed=4)
    with pytest.raises(ValueError, match="fp8_asm_cvt"):
        relbias_kernel_call(inp, fp8_f16_cvt=True, fp8_asm_cvt=True)


def test_decode_plan_covers_every_key_and_token_and_the_one_wave_rule_keeps_its_promise():
    """decode_plan over many decode / verify shapes (CUDA, 132 SMs): its splits cover every key tile and its token
    blocks every token, each split holds keys; wherever the verify one-wave rule picks the 128-row tile over short
    splits, its programs fit one wave (one per SM) and each split keeps at least VERIFY_LONG_SPLIT_TILES tiles; its
    splits all hold keys."""
    import itertools

    from attnkit.relbias.config import VERIFY_LONG_SPLIT_TILES, decode_plan
    sms, one_wave = 132, 0
    for batch, hkv, group, q, k in itertools.product((1, 2, 4, 32), (1, 2, 8), (1, 4, 8, 16), (1, 4, 16, 32),
                                                    (64, 1000, 4096, 8192, 65536)):
        if group * hkv > 128:
            continue
        p = decode_plan(batch, hkv, group, 128, q, k, sms, "cuda", extent=8192, sm90=True)
        tiles = -(-k // p.block_n)
        # every key in some split, and no split past the keys (the rule's target need not divide the tiles; an
        # explicit num_splits may still ask for empty trailing splits, which write empty partials the merge skips)
        assert p.num_splits * p.keys_per_split >= k and p.keys_per_split % p.block_n == 0, (batch, q, k, p)
        assert (p.num_splits - 1) * p.keys_per_split < k, (batch, hkv, group, q, k, p)
        assert p.token_blocks * (p.block_r // group) >= q
        short = decode_plan(batch, hkv, group, 128, q, k, sms, "cuda", extent=8192, sm90=True, ctas_per_sm=4)
        if p.block_r == 128 and short.block_r == 64:  # the one-wave rule took it
            one_wave += 1
            assert batch * hkv * p.token_blocks * p.num_splits <= sms, (batch, hkv, group, q, k, p)
            assert -(-tiles // p.num_splits) >= VERIFY_LONG_SPLIT_TILES, (batch, hkv, group, q, k, p)
            assert (p.num_splits - 1) * p.keys_per_split < k, (batch, hkv, group, q, k, p)
    assert one_wave > 0  # the rule was exercised
    for (batch, group, q, k), (paged, fp8, page) in itertools.product(
            itertools.product((1, 3, 32), (1, 8), (1, 16), (1000, 8192, 65536)),
            ((False, True, 0), (True, False, 16), (True, False, 64), (True, True, 64))):
        p = decode_plan(batch, 8, group, 128, q, k, sms, "cuda", extent=8192, sm90=True, paged=paged, fp8=fp8,
                        page=page)
        assert p.num_splits * p.keys_per_split >= k > (p.num_splits - 1) * p.keys_per_split, (batch, q, k, p)


# (case, options): every route a varlen call can take; options a route cannot take on this device are skipped there
_PAST_END_ROUTES = [
    ("relbias-varlen-mixed3", {}), ("relbias-varlen-mixed3", {"gluon": False}),
    ("relbias-varlen-mixed5", {}), ("relbias-varlen-mixed5", {"gluon": False}),
    ("relbias-varlen-mixed5", {"gluon": True, "gluon_ws": False}), ("relbias-varlen-mixed5", {"gluon_ws": True}),
    ("relbias-varlen-mixed5", {"gluon": True, "gluon_ws": False, "gluon_pipe": False}),
    ("relbias-varlen-mixed5", {"gluon_ws": True, "gluon_persistent": True}),
    ("relbias-decode-b3-k203", {}), ("relbias-decode-b3-k203", {"_force": "forward"}),
    ("relbias-fp8-decode-b2", {}), ("relbias-fp8-decode-b2", {"gluon_decode": False}),
    ("relbias-fp8-decode-b2", {"gluon_decode": True}), ("relbias-fp8-decode-b2", {"_force": "forward"}),
]


@pytest.mark.parametrize("validate", [True, False])
@pytest.mark.parametrize("case_id, opts", _PAST_END_ROUTES, ids=[f"{c}-{o}" for c, o in _PAST_END_ROUTES])
def test_keys_past_the_last_sequence_never_reach_the_result(case_id, opts, validate, device):
    """k and v may run past cu_seqlens_k[-1] (a caller's preallocated buffer): rows there never reach the result,
    whatever they hold, with or without the value checks. Five rows appended past the last sequence, zero and then
    NaN keys and infinite values (float8: the NaN pattern 0x7F in both): the same bits, finite, on every route. The
    Gluon forward kernels' TMA copies read whole key tiles, also those rows: the kernels zero them in shared memory
    before the value product (without that, outputs NaN on those routes on an H200:
    benchmarks/experiments/relbias_past_rows.py shows it)."""
    inp = _inp(case_id, device)
    opts = dict(opts, validate=validate)

    def pad(t, x):
        if t.dtype == torch.float8_e4m3fn:
            rows = torch.full((5,) + t.shape[1:], 0x7F if x else 0, dtype=torch.uint8, device=t.device)
            return torch.cat([t.view(torch.uint8), rows]).view(torch.float8_e4m3fn)
        return torch.cat([t, torch.full((5,) + t.shape[1:], x, dtype=t.dtype, device=t.device)])
    try:
        zero = relbias_kernel_call(dict(inp, k=pad(inp["k"], 0.0), v=pad(inp["v"], 0.0)), **opts)
    except ValueError as e:  # a route this device cannot run (the Gluon kernels off sm_90), or not for this shape
        pytest.skip(f"not a route here: {e}")
    bad = relbias_kernel_call(dict(inp, k=pad(inp["k"], float("nan")), v=pad(inp["v"], float("inf"))), **opts)
    assert torch.isfinite(bad[0].float()).all()
    assert torch.equal(zero[0], bad[0]) and torch.equal(zero[1], bad[1])


@pytest.mark.parametrize("case_id, opts", _PAST_END_ROUTES, ids=[f"{c}-{o}" for c, o in _PAST_END_ROUTES])
def test_a_nan_key_makes_every_row_that_sees_it_nan(case_id, opts, device):
    """The value checks do not scan k and v (docs/relbias.md), so a NaN key inside a sequence reaches the kernels:
    every row that sees it comes out NaN (output and LSE), as the fp64 oracle says, and every other row keeps the
    bits of the call without it. Before, the rows that saw it came out as rows that saw no key (0 and LSE -inf):
    a plausible answer. The key is the second of the first sequence (seen by some of its rows, or all of them)."""
    inp = _inp(case_id, device)
    k = inp["k"].clone()
    if k.dtype == torch.float8_e4m3fn:
        if device == "cpu":
            pytest.skip("Triton's interpreter decodes the e4m3 NaN pattern 0x7F as 480 (the GPU as NaN)")
        k.view(torch.uint8)[1] = 0x7F
    else:
        k[1] = float("nan")
    try:
        clean = relbias_kernel_call(inp, **opts)
    except ValueError as e:  # a route this device cannot run (the Gluon kernels off sm_90), or not for this shape
        pytest.skip(f"not a route here: {e}")
    bad = relbias_kernel_call(dict(inp, k=k), **opts)
    want = nan_rows(*relbias_oracle(dict(inp, k=k)))
    got = nan_rows(*bad)
    assert want.any() and not want.all()
    assert torch.equal(got, want)
    keep = ~got
    assert torch.equal(bad[0].cpu()[keep], clean[0].cpu()[keep])
    assert torch.equal(bad[1].cpu()[keep], clean[1].cpu()[keep])
