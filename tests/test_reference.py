"""The fp64 oracles pinned to independent formulations."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st

from attnkit import reference as R
from attnkit.reference.mqa_decode import (E4M3_VALUES, decode_e4m3, encode_e2m1, encode_e4m3, gather_records,
                                          rope_rotate)
from attnkit.reference.relbias import gather_paged
from attnkit.testing import shapes
from attnkit.testing.inputs import make_inputs, rope_cos_sin

F64 = torch.float64


# ------------------------------------------------------------------------------------------ relbias


def dense_relbias(q, k, v, cu_q, cu_k, table, window, beyond, scale, k_scale=None, v_scale=None):
    """Independent: a materialized [Hq, Lq, Lk] bias built entry by entry, added as a float mask to
    fp64 SDPA."""
    Hq, E = table.shape
    Hkv = k.shape[1]
    kd, vd = k.to(F64), v.to(F64)
    if k_scale is not None:
        kd = kd * k_scale.to(F64)[None, :, None]
        vd = vd * v_scale.to(F64)[None, :, None]
    outs, lses = [], []
    for b in range(len(cu_q) - 1):
        qb = q[cu_q[b]:cu_q[b + 1]].to(F64)
        kb, vb = kd[cu_k[b]:cu_k[b + 1]], vd[cu_k[b]:cu_k[b + 1]]
        Lq, Lk = qb.shape[0], kb.shape[0]
        mask = torch.full((Hq, Lq, Lk), float("-inf"), dtype=F64)
        for i in range(Lq):
            for j in range(Lk):
                d = (Lk - Lq + i) - j
                if d < 0 or (window is not None and d >= window):
                    continue
                for h in range(Hq):
                    if d < E:
                        mask[h, i, j] = float(table[h, d])
                    else:
                        mask[h, i, j] = 0.0 if beyond == "zero" else float(table[h, E - 1])
        kx = kb.repeat_interleave(Hq // Hkv, dim=1).transpose(0, 1)
        vx = vb.repeat_interleave(Hq // Hkv, dim=1).transpose(0, 1)
        o = F.scaled_dot_product_attention(qb.transpose(0, 1), kx, vx, attn_mask=mask, scale=scale)
        s = torch.einsum("hqd,hkd->hqk", qb.transpose(0, 1), kx) * scale + mask
        outs.append(o.transpose(0, 1))
        lses.append(torch.logsumexp(s, dim=-1).transpose(0, 1))
    return torch.cat(outs), torch.cat(lses)


@pytest.mark.parametrize("case", shapes.cases("relbias", "smoke"), ids=lambda c: c.id)
def test_relbias_oracle_matches_dense_materialized_bias(case):
    inp = make_inputs(case, "cpu", seed=5)
    out, lse = R.relbias_attention_ref(inp["q"], inp["k"], inp["v"], inp["cu_seqlens_q"], inp["cu_seqlens_k"],
                                       inp["table"], window=inp["window"], beyond=inp["beyond"],
                                       softmax_scale=inp["softmax_scale"], k_scale=inp["k_scale"],
                                       v_scale=inp["v_scale"])
    ref, ref_lse = dense_relbias(inp["q"], inp["k"], inp["v"], inp["cu_seqlens_q"].tolist(),
                                 inp["cu_seqlens_k"].tolist(), inp["table"], inp["window"], inp["beyond"],
                                 inp["softmax_scale"], inp["k_scale"], inp["v_scale"])
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(lse, ref_lse, rtol=1e-10, atol=1e-10)
    if "k_cache" in inp:  # the paged oracle sees the same sequences through the shuffled block table
        po, pl = R.relbias_attention_paged_ref(inp["q"], inp["k_cache"], inp["v_cache"], inp["block_table"],
                                               inp["seqused_k"], inp["cu_seqlens_q"], inp["table"],
                                               window=inp["window"], beyond=inp["beyond"],
                                               softmax_scale=inp["softmax_scale"], k_scale=inp["k_scale"],
                                               v_scale=inp["v_scale"])
        assert torch.equal(po, out) and torch.equal(pl, lse)


@settings(max_examples=25, deadline=None)
@given(lq=st.integers(1, 9), extra=st.integers(0, 12), E=st.integers(1, 20), window=st.one_of(st.none(), st.integers(1, 15)),
       beyond=st.sampled_from(["zero", "clamp"]), group=st.sampled_from([1, 2, 4]), seed=st.integers(0, 2**20))
def test_relbias_oracle_random_shapes(lq, extra, E, window, beyond, group, seed):
    g = torch.Generator().manual_seed(seed)
    lk = lq + extra
    Hkv, D = 2, 8
    q = torch.randn(lq, Hkv * group, D, generator=g)
    k = torch.randn(lk, Hkv, D, generator=g)
    v = torch.randn(lk, Hkv, D, generator=g)
    table = torch.randn(Hkv * group, E, generator=g)
    cu_q, cu_k = torch.tensor([0, lq]), torch.tensor([0, lk])
    out, lse = R.relbias_attention_ref(q, k, v, cu_q, cu_k, table, window=window, beyond=beyond, softmax_scale=0.3)
    ref, ref_lse = dense_relbias(q, k, v, [0, lq], [0, lk], table, window, beyond, 0.3)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(lse, ref_lse, rtol=1e-10, atol=1e-10)


def test_relbias_empty_rows_return_zero_and_neg_inf():
    # 5 queries against 2 keys, bottom-right aligned: rows 0..2 sit at negative positions and see nothing
    q, k, v = torch.randn(5, 2, 8), torch.randn(2, 1, 8), torch.randn(2, 1, 8)
    out, lse = R.relbias_attention_ref(q, k, v, torch.tensor([0, 5]), torch.tensor([0, 2]), torch.randn(2, 4))
    assert torch.equal(out[:3], torch.zeros_like(out[:3]))
    assert torch.isneginf(lse[:3]).all() and torch.isfinite(lse[3:]).all()


def test_relbias_bias_lookup_modes():
    table = torch.tensor([[1.0, 2.0, 3.0]])
    d = torch.tensor([0, 2, 3, 100])
    assert R.bias_lookup(table, d, "zero").tolist() == [[1.0, 3.0, 0.0, 0.0]]
    assert R.bias_lookup(table, d, "clamp").tolist() == [[1.0, 3.0, 3.0, 3.0]]
    with pytest.raises(ValueError, match="beyond"):
        R.bias_lookup(table, d, "wrap")


# -------------------------------------------------------------------------------------- sparse_int8


@pytest.mark.parametrize("case", shapes.cases("sparse_int8", "smoke"), ids=lambda c: c.id)
def test_sparse_int8_oracle_matches_dense_masked_softmax(case):
    inp = make_inputs(case, "cpu", seed=9)
    a = R.sparse_int8_ref(inp["q"], inp["k_cache"], inp["v_cache"], inp["key_scale"], inp["value_scale"],
                          inp["indices"], scale=inp["scale"])
    b = R.sparse_int8_dense_ref(inp["q"], inp["k_cache"], inp["v_cache"], inp["key_scale"], inp["value_scale"],
                                inp["indices"], scale=inp["scale"])
    torch.testing.assert_close(a[0], b[0], rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(a[1], b[1], rtol=1e-10, atol=1e-10)


def test_sparse_int8_duplicates_count_separately():
    g = torch.Generator().manual_seed(3)
    q = torch.randn(1, 1, 4, generator=g).to(torch.bfloat16)
    kc = torch.randint(-3, 4, (1, 3, 4), dtype=torch.int8, generator=g)  # small logits: no slot dominates
    vc = torch.randint(-127, 127, (1, 3, 4), dtype=torch.int8, generator=g)
    ks, vs = torch.rand(1, 4, generator=g) + 0.1, torch.rand(1, 4, generator=g) + 0.1
    once = R.sparse_int8_ref(q, kc, vc, ks, vs, torch.tensor([[0, 1]], dtype=torch.int32))
    twice = R.sparse_int8_ref(q, kc, vc, ks, vs, torch.tensor([[0, 0, 1]], dtype=torch.int32))
    assert not torch.allclose(once[0], twice[0])
    # analytic: weights 2 e^{s0} and e^{s1}
    s = torch.einsum("d,cd->c", q[0, 0].double() * ks[0].double(), kc[0].double()) / 2.0
    w = torch.tensor([2 * math.exp(s[0]), math.exp(s[1])], dtype=F64)
    exp = (w[0] * vc[0, 0].double() + w[1] * vc[0, 1].double()) * vs[0].double() / w.sum()
    torch.testing.assert_close(twice[0][0, 0], exp, rtol=1e-12, atol=1e-12)


def test_sparse_int8_rejects_out_of_range_indices():
    q = torch.randn(1, 2, 4).to(torch.bfloat16)
    kc = torch.zeros(1, 3, 4, dtype=torch.int8)
    with pytest.raises(ValueError, match="indices"):
        R.sparse_int8_ref(q, kc, kc, torch.ones(1, 4), torch.ones(1, 4), torch.tensor([[3]]))
    with pytest.raises(ValueError, match="indices"):
        R.sparse_int8_ref(q, kc, kc, torch.ones(1, 4), torch.ones(1, 4), torch.tensor([[-2]]))


# ----------------------------------------------------------------------------- split partials + merge


@pytest.mark.parametrize("splits", [[(0, 0), (0, 7), (7, 7), (7, 20)], [(0, 20)], [(0, 3), (3, 20), (20, 20)]])
def test_merge_of_partials_equals_unsplit_sparse(splits):
    case = shapes.get("sparse_int8-decode-r3-g6-n509-perhead")
    inp = make_inputs(case, "cpu", seed=2)
    inp["indices"] = inp["indices"][..., :20]
    args = (inp["q"], inp["k_cache"], inp["v_cache"], inp["key_scale"], inp["value_scale"], inp["indices"])
    full = R.sparse_int8_ref(*args, scale=inp["scale"])
    m, l, acc = R.sparse_int8_partials_ref(*args, splits, scale=inp["scale"])
    merged = R.merge_partials(m, l, acc)
    torch.testing.assert_close(merged[0], full[0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(merged[1], full[1], rtol=1e-12, atol=1e-12)
    if len(splits) > 1:  # losing a non-empty split changes the answer: the partial oracle can localize it
        nonempty = [i for i, (a, b) in enumerate(splits) if b > a]
        keep = [i for i in range(len(splits)) if i != nonempty[-1]]
        lost = R.merge_partials(m[keep], l[keep], acc[keep])
        assert not torch.allclose(lost[0], full[0])


def test_merge_of_partials_equals_unsplit_relbias():
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(3, 4, 8, generator=g), torch.randn(40, 2, 8, generator=g), torch.randn(40, 2, 8, generator=g)
    table = torch.randn(4, 16, generator=g)
    full = R.relbias_attention_ref(q, k, v, torch.tensor([0, 3]), torch.tensor([0, 40]), table, window=30)
    m, l, acc = R.relbias_partials_ref(q, k, v, table, R.tile_bounds(40, 16, 1, num_splits=4), window=30)
    out, lse = R.merge_partials(m, l, acc)  # [Hq, Lq, D] -> compare as [Lq, Hq, D]
    torch.testing.assert_close(out.permute(1, 0, 2), full[0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(lse.permute(1, 0), full[1], rtol=1e-12, atol=1e-12)


def test_merge_all_empty_rows():
    m = torch.full((3, 2), float("-inf"))
    out, lse = R.merge_partials(m, torch.zeros(3, 2), torch.zeros(3, 2, 4))
    assert torch.equal(out, torch.zeros(2, 4, dtype=F64)) and torch.isneginf(lse).all()


def test_bounds_helpers():
    assert R.even_bounds(10, 3) == [(0, 4), (4, 8), (8, 10)]
    assert R.even_bounds(2, 4) == [(0, 1), (1, 2), (2, 2), (2, 2)]
    assert R.tile_bounds(130, 64, 1) == [(0, 64), (64, 128), (128, 130)]
    assert R.tile_bounds(10, 64, 1, num_splits=3) == [(0, 10), (10, 10), (10, 10)]


# ---------------------------------------------------------------------------------- mqa_decode records


def test_e4m3_table_matches_torch_float8():
    t = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).to(F64)
    assert torch.equal(torch.isnan(t), torch.isnan(E4M3_VALUES))
    fin = ~torch.isnan(t)
    assert torch.equal(t[fin], E4M3_VALUES[fin])


def test_e4m3_and_e2m1_encoders_round_to_nearest_even():
    # torch casts fp64 to e4m3 through fp32 (a double rounding): compare on fp32-exact inputs,
    # where torch's cast is a single round-to-nearest-even
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(20000, generator=g, dtype=torch.float32) * 60).to(F64)
    assert torch.equal(encode_e4m3(x), x.clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8))
    # just past a tie rounds away from it (torch's fp32 step would land on the tie and round to even)
    tie = 0.1640625  # halfway between e4m3 0.15625 (code 34) and 0.171875 (code 35)
    assert encode_e4m3(torch.tensor([tie, tie + 2.0**-30, tie - 2.0**-30], dtype=F64)).tolist() == [34, 35, 34]
    # e2m1 ties: 0.25 -> 0 (even), 0.75 -> 1.0 (code 2, even), 1.25 -> 1.0, 1.75 -> 2.0, 2.5 -> 2, 3.5 -> 4, 5 -> 4
    vals = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, -0.0, -5.0], dtype=F64)
    assert encode_e2m1(vals).tolist() == [0, 2, 2, 4, 4, 6, 6, 7, 8, 14]


def _fp8_record(values, scales):
    return torch.tensor(list(values) + list(scales), dtype=torch.uint8)


def test_fp8_record_decoder_hand_worked_bytes():
    vals = [0x38, 0x7E, 0x01, 0x80, 0xB8, 0x00] + [0x40] * 26  # block 0: 1, 448, 2^-9, -0, -1, 0, 2...
    vals += [0x38] * 32  # block 1: ones
    vals += [0x30] * (512 - 64)  # 0x30 = 0.5
    scales = [127, 130] + [127 - 3] * 14  # block 0 x1, block 1 x8, others x 2^-3
    rec = decode_fp8_record_bytes = R.decode_fp8_record(_fp8_record(vals, scales))
    assert rec[:6].tolist() == [1.0, 448.0, 2.0 ** -9, 0.0, -1.0, 0.0]
    assert torch.signbit(rec[3]) and rec[6] == 2.0
    assert rec[32:64].tolist() == [8.0] * 32
    assert rec[64:].tolist() == [0.5 / 8] * 448
    assert decode_fp8_record_bytes.dtype == F64


def test_nvfp4_record_decoder_hand_worked_bytes():
    packed = [0x71, 0xF8] + [0x22] * 6 + [0x00] * 248  # dims: 0.5, 6, -0(0x8), -6(0xF), then 1.0s
    scales = [0x38, 0x40] + [0x7E] * 30  # 1.0, 2.0, 448
    rec = torch.tensor(packed + scales, dtype=torch.uint8)
    x = R.decode_nvfp4_record(rec)
    assert x[:4].tolist() == [0.5, 6.0, -0.0, -6.0] and torch.signbit(x[2])
    assert x[4:16].tolist() == [1.0] * 12
    assert x[16:32].tolist() == [0.0] * 16  # block 1 (scale 2.0) holds zeros
    assert x[32:].abs().sum() == 0


def test_fp8_encoder_scale_rule_and_edges():
    x = torch.zeros(512, dtype=F64)
    x[0:32] = 448.0  # amax 448 -> scale 2^0
    x[32] = 449.0  # amax just above 448 -> scale 2^1
    x[64] = 448.0 * 2 ** 10  # -> 2^10
    x[96] = 2.0 ** -9 * 2 ** -20  # tiny: smallest power of two keeping 448 -> subnormal codes ok
    # block 4 (dims 128..159) all zeros -> scale byte 0 (2^-127), codes 0
    rec = R.encode_fp8_record(x)
    sc = rec[512:].tolist()
    assert sc[0] == 127 and sc[1] == 128 and sc[2] == 137 and sc[4] == 0
    assert rec[128:160].tolist() == [0] * 32
    back = R.decode_fp8_record(rec)
    assert back[0] == 448.0 and back[64] == 448.0 * 2 ** 10 and back[96] == x[96]
    assert abs(back[32] - 449.0) <= 449.0 * 2 ** -4


def test_nvfp4_encoder_scale_rule_and_edges():
    x = torch.zeros(512, dtype=F64)
    x[0:16] = torch.linspace(-6, 6, 16, dtype=F64)  # amax 6 -> scale 1.0 (0x38)
    x[16] = 6.0 * 448  # the largest scale (448, 0x7E)
    x[32] = 6.0 * 448 * 4  # beyond: saturates at 6 * 448
    rec = R.encode_nvfp4_record(x)
    assert rec[256] == 0x38 and rec[257] == 0x7E and rec[258] == 0x7E
    assert rec[259] == 0  # dims 48..63 are zeros: scale 0
    back = R.decode_nvfp4_record(rec)
    assert back[16] == 6.0 * 448 and back[32] == 6.0 * 448
    assert back[0] == -6.0 and back[15] == 6.0


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**20), mag=st.sampled_from([1e-3, 1.0, 300.0, 1e5]))
def test_record_round_trip_error_bounds(seed, mag):
    x = torch.randn(3, 512, generator=torch.Generator().manual_seed(seed), dtype=F64) * mag
    # Half the largest step of the element grid, times the block's scale: e4m3's top binade [256, 448]
    # has steps of 32 (half: 16); e2m1's top step is 4 -> 6 (half: 1).
    for fmt, enc, dec, blk, half_step in [("fp8", R.encode_fp8_record, R.decode_fp8_record, 32, 16.0),
                                          ("nvfp4", R.encode_nvfp4_record, R.decode_nvfp4_record, 16, 1.0)]:
        rec = enc(x)
        back = dec(rec)
        if fmt == "fp8":
            scale = torch.exp2(rec[..., 512:].double() - 127)
        else:
            scale = decode_e4m3(rec[..., 256:])
        err = (back - x).view(3, -1, blk).abs()
        amax = x.view(3, -1, blk).abs().amax(-1)
        vmax = 448.0 if fmt == "fp8" else 6.0
        inrange = amax <= vmax * (448.0 if fmt == "nvfp4" else 2.0 ** 127)  # beyond: saturation (tested above)
        assert (err <= half_step * scale.unsqueeze(-1))[inrange].all(), fmt
        # and the scale is large enough that the block's amax fits the element range
        assert (amax <= vmax * scale)[inrange].all(), fmt


def test_rope_rotate_inverse_and_complex_formulation():
    cs = rope_cos_sin(100)
    x = torch.randn(4, 3, 512, dtype=F64)
    pos = torch.tensor([0, 5, 17, 99])
    y = rope_rotate(x, pos, cs)
    assert torch.equal(y[..., :448], x[..., :448])
    torch.testing.assert_close(rope_rotate(y, pos, cs, inverse=True), x, rtol=1e-6, atol=1e-6)
    # independent: pairs as complex numbers times e^{i theta}
    z = torch.complex(x[..., 448::2], x[..., 449::2])
    ang = torch.atan2(cs[pos, 32:].double(), cs[pos, :32].double())
    zr = z * torch.exp(1j * ang)[:, None, :]
    torch.testing.assert_close(y[..., 448::2], zr.real, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(y[..., 449::2], zr.imag, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", shapes.cases("mqa_decode", "smoke"), ids=lambda c: c.id)
def test_mqa_decode_oracle_independent_loop(case):
    inp = make_inputs(case, "cpu", seed=4)
    out, lse = R.mqa_decode_ref(inp["q"], inp["swa_cache"], inp["comp_cache"], inp["swa_idx"], inp["comp_idx"],
                                inp["positions"], inp["cos_sin"], inp["sink"], inp["num_heads"],
                                inp["softmax_scale"], comp_format=inp["comp_format"])
    H = inp["num_heads"]
    for t in range(inp["q"].shape[0]):
        slots_w = [int(s) for s in inp["swa_idx"][t] if s >= 0]
        slots_c = [int(s) for s in inp["comp_idx"][t] if s >= 0]
        kv = torch.cat([gather_records(inp["swa_cache"], torch.tensor(slots_w, dtype=torch.long), "fp8"),
                        gather_records(inp["comp_cache"], torch.tensor(slots_c, dtype=torch.long), inp["comp_format"])])
        pos = inp["positions"][t:t + 1]
        qr = rope_rotate(inp["q"][t:t + 1, :H].double(), pos, inp["cos_sin"])[0]
        logits = torch.cat([qr @ kv.T * inp["softmax_scale"], inp["sink"].double()[:, None]], dim=1)
        p = torch.softmax(logits, dim=1)[:, :-1]
        o = rope_rotate((p @ kv)[None], pos, inp["cos_sin"], inverse=True)[0]
        torch.testing.assert_close(out[t], o, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(lse[t], torch.logsumexp(logits, dim=1), rtol=1e-10, atol=1e-10)
