"""sparse_int8 kernel: top-k sparse attention over an INT8 KV cache, prefill (one split per row, direct
output) and split-K decode (partials merged by attnkit._triton.merge_kernel).

Computes   per token t and KV head g, for the GROUP query heads of g packed as tile rows:
           s_j = scale * sum_d q[t,h,d] key_scale[g,d] k[g, idx_j, d] over valid candidates,
           o = value_scale[g] * sum_j softmax(s)_j v[g, idx_j].
Contract   q [T, Hq, D] bf16; caches [Hkv, C, D] int8 (strided); scales [Hkv, D] fp32; indices [T, N] or
           [T, Hkv, N] int32 (-1 empty; anything outside [-1, C) is skipped, never read).
Numerics   The folded query q' = q * key_scale * scale is formed from power-of-two-normalized factors and
           renormalized per row (q' = q'' * 2^E_r, max|q''| in [1, 2)), exactly; q'' enters the MMA as a
           bf16 high part plus a bf16 residual (16 bits of precision; int8 k is exact in bf16). Scores
           stay in the scaled domain s'' with the row's exponent E_r; the maximum is subtracted there and
           only the difference is scaled, in the natural-log domain, by 2^E_r and log2(e). The probability
           tile enters the second MMA as a bf16 high part plus a residual (PV_SPLIT), so 0.5 +- 2^-14
           survive; bf16 has fp32's exponent range, so no probability underflows the tile. The value
           scale multiplies the fp32 accumulator after the accumulation.
           QK_INT8 (swap-AB tiles only): the scores come instead from integer MMAs of the int8 codes against
           four int8 digits of q'' (truncated toward zero; q'' to within 2^-27 of its row's largest element),
           exact int32 sums scaled by powers of two; a program in which some row's digits could move a score
           by more than QK_INT8_BUDGET nats (2^E_r * 128 * 2^-27 * sum of the remainders) runs the split-bf16
           loop instead (the one fallback, chosen per program).
           The LSE is returned in fp32 and saturates to +-inf where the true one lies outside fp32.
Loops      the hand-written prefetch (indices two tiles ahead, with IDS_EARLY the first two before the query; the
           rule except below), PIPE (the plain loop,
           Triton's pipeliner), SWAP (swap-AB: candidates on the MMA's M side, the heads on N, O^T accumulated
           and transposed once; the rule on the direct path at D = 256 over an int8 cache, with QK_INT8).
Dispatch   attnkit.sparse_int8.interface (split rule: attnkit.sparse_int8.config). On sm_90 the swap-AB integer-score
           tile runs as kernel_gluon's Gluon kernel where the rule says so; this loop is its interpreter twin.
Oracle     attnkit.reference.sparse_int8 (partials: sparse_int8_partials_ref); gates "sparse_int8/triton",
           "sparse_int8/triton_other_loop", "sparse_int8/triton_swap_ab", "sparse_int8/triton_split1".
PERTURB    1: the first candidate of every split skipped; 3: value scale applied to v before the
           accumulation, in FP16 (overflow above 65504, flush below 2^-24). (2, a split lost, is the
           merge's.)
"""

import triton
import triton.language as tl

from .._triton.pdl import pdl_entry
from .._triton.pow2 import frexp_exp, ldexp
from .._triton.rounding import int8_to_bf16, to_bf16

LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def _mma(a, b, acc, DOT_F32: tl.constexpr):
    if DOT_F32:  # Triton's interpreter multiplies bf16 bit patterns: widen exact bf16 values to fp32
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    else:
        return tl.dot(a, b, acc)


@triton.jit
def _value_tile(v, vs_row, PERTURB: tl.constexpr):
    """A tile's value rows [BLOCK_N, HEAD_DIM] as bf16 (int8 codes exactly, by bits); PERTURB 3, the broken
    variant, applies the value scale first, in FP16."""
    if PERTURB == 3:
        vb = (v.to(tl.float32) * vs_row[None, :]).to(tl.float16).to(tl.float32).to(tl.bfloat16)
    elif v.dtype == tl.int8:
        vb = int8_to_bf16(v)
    else:
        vb = v
    return vb


@triton.jit
def _attend_tile(q_hi, q_lo, k, v, valid, row_ok, m_i, l_i, acc, E, vs_row, PV_SPLIT: tl.constexpr,
                 PERTURB: tl.constexpr, DOT_F32: tl.constexpr):
    """One candidate tile: scores from the split query, the online softmax in the scaled domain, P . V."""
    if k.dtype == tl.int8:
        kb = int8_to_bf16(k)  # exact, by bits (also right in the interpreter, which reinterprets int8 as bf16)
    else:
        kb = k  # a bf16 cache (the benchmark's "what an INT8 cache buys" peer)
    s = _mma(q_hi, kb, tl.zeros([q_hi.shape[0], k.shape[1]], dtype=tl.float32), DOT_F32)
    s = _mma(q_lo, kb, s, DOT_F32)
    s = tl.where(valid[None, :] & row_ok[:, None], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    # natural-log differences, scaled by 2^E_r only after the maximum is subtracted
    alpha = tl.exp2(ldexp(m_i - m_safe, E) * LOG2E)
    p = tl.exp2(ldexp(s - m_safe[:, None], E[:, None]) * LOG2E)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    vb = _value_tile(v, vs_row, PERTURB)
    p_hi = p.to(tl.bfloat16)
    acc = _mma(p_hi, vb, acc, DOT_F32)
    if PV_SPLIT:
        acc = _mma((p - p_hi.to(tl.float32)).to(tl.bfloat16), vb, acc, DOT_F32)
    return m_new, l_i, acc


@triton.jit
def _imma(a, b, DOT_F32: tl.constexpr):
    """int8 x int8 -> exact int32 sums, as fp32 (|sum| <= 256 * 127 * 128 < 2^24: exact in fp32 too)."""
    if DOT_F32:  # the interpreter: the same sums in fp32, exact
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    else:
        return tl.dot(a, b, out_dtype=tl.int32).to(tl.float32)


@triton.jit
def fold_query(q, ks, scale_mant, scale_exp):
    """The folded query q' = q * key_scale * scale (scale = scale_mant * 2^scale_exp), exactly, as q'' * 2^E_r with
    max|q''| in [1, 2) per row: q [rows, D] fp32, ks [D]; returns (q'', E [rows] int32). Also the Gluon kernel's."""
    e_q = frexp_exp(tl.max(tl.abs(q), 1))
    e_k = frexp_exp(tl.max(tl.abs(ks), 0))
    qf = ldexp(q, -e_q[:, None]) * ldexp(ks, -e_k)[None, :] * scale_mant
    e_2 = frexp_exp(tl.max(tl.abs(qf), 1))
    return ldexp(qf, -e_2[:, None]), e_q + e_k + scale_exp + e_2


@triton.jit
def _int8_digits(qn):
    """qn (|qn| < 2) as four int8 digits, qn = (h + (m + (l + (l2 + f) / 128) / 128) / 128) / 64 with |f| < 1, each
    digit truncated toward zero (so |digit| <= 127), and the remainder f (every step exact in fp32)."""
    a = qn * 64.0
    h = a.to(tl.int32)
    r = (a - h.to(tl.float32)) * 128.0
    m = r.to(tl.int32)
    r = (r - m.to(tl.float32)) * 128.0
    l = r.to(tl.int32)
    r = (r - l.to(tl.float32)) * 128.0
    l2 = r.to(tl.int32)
    return h.to(tl.int8), m.to(tl.int8), l.to(tl.int8), l2.to(tl.int8), r - l2.to(tl.float32)


@triton.jit
def _attend_tile_swap(q_hiT, q_loT, q_l2T, q_l3T, k, v, valid, row_ok, m_i, l_i, accT, E, vs_row, PV_SPLIT: tl.constexpr,
                      PERTURB: tl.constexpr, DOT_F32: tl.constexpr, QK_INT8: tl.constexpr):
    """One candidate tile with the candidates on the MMA's M side (swap-AB): S^T = K . Q^T [BLOCK_N, rows], the
    softmax down the columns, O^T += V^T . P^T [HEAD_DIM, rows]; k and v are [BLOCK_N, HEAD_DIM]. The same
    numerics as _attend_tile (the same products, the same splits), transposed; with QK_INT8 the scores come from
    the int8 codes and the query's int8 digits (q_hiT .. q_l3T, _int8_digits: q'' to within 2^-27) in exact
    integer MMAs, so no key is converted."""
    if QK_INT8:
        # the codes straight into integer MMAs against the query's four int8 digits (exact int32 sums, scaled
        # by powers of two)
        s = _imma(k, q_hiT, DOT_F32) * 0.015625
        s += _imma(k, q_loT, DOT_F32) * 0.0001220703125
        s += _imma(k, q_l2T, DOT_F32) * 9.5367431640625e-07
        s += _imma(k, q_l3T, DOT_F32) * 7.450580596923828e-09
    else:
        if k.dtype == tl.int8:
            kb = int8_to_bf16(k)
        else:
            kb = k
        s = _mma(kb, q_hiT, tl.zeros([k.shape[0], q_hiT.shape[1]], dtype=tl.float32), DOT_F32)
        s = _mma(kb, q_loT, s, DOT_F32)
    s = tl.where(valid[:, None] & row_ok[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 0))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(ldexp(m_i - m_safe, E) * LOG2E)
    p = tl.exp2(ldexp(s - m_safe[None, :], E[None, :]) * LOG2E)
    l_i = l_i * alpha + tl.sum(p, 0)
    accT = accT * alpha[None, :]
    vb = _value_tile(v, vs_row, PERTURB)
    vbT = tl.trans(vb)
    p_hi = p.to(tl.bfloat16)
    accT = _mma(vbT, p_hi, accT, DOT_F32)
    if PV_SPLIT:
        accT = _mma(vbT, (p - p_hi.to(tl.float32)).to(tl.bfloat16), accT, DOT_F32)
    return m_new, l_i, accT


@triton.jit
def _swap_loop(q_hiT, q_loT, q_l2T, q_l3T, KC, VC, kv_base, stride_kc, idx_base, c0, c1, C, offs_d, row_ok, m_i, l_i,
               accT, E, vs_row, BLOCK_N: tl.constexpr, PV_SPLIT: tl.constexpr, PERTURB: tl.constexpr,
               DOT_F32: tl.constexpr, QK_INT8: tl.constexpr):
    """The swap-AB candidate loop (the plain loop: indices, then K and V rows [BLOCK_N, HEAD_DIM] per tile)."""
    for j0 in range(c0, c1, BLOCK_N):
        offs_j = j0 + tl.arange(0, BLOCK_N)
        idx = tl.load(idx_base + offs_j, mask=offs_j < c1, other=-1)
        ok = (idx >= 0) & (idx < C)
        safe = tl.where(ok, idx, 0).to(tl.int64)
        k = tl.load(KC + kv_base + safe[:, None] * stride_kc + offs_d[None, :], mask=ok[:, None], other=0)
        v = tl.load(VC + kv_base + safe[:, None] * stride_kc + offs_d[None, :], mask=ok[:, None], other=0)
        valid = ok
        if PERTURB == 1:
            valid = valid & (offs_j != c0)
        m_i, l_i, accT = _attend_tile_swap(q_hiT, q_loT, q_l2T, q_l3T, k, v, valid, row_ok, m_i, l_i, accT, E,
                                           vs_row, PV_SPLIT, PERTURB, DOT_F32, QK_INT8)
    return m_i, l_i, accT


@triton.jit
def sparse_int8_kernel(
    Q, KC, VC, KS, VS, IDX, M_OUT, L_OUT, ACC_OUT, E_OUT, OUT, LSE,
    scale_mant, scale_exp, C, N, cands_per_split,
    stride_qt, stride_qh, stride_ot, stride_oh, stride_kh, stride_kc, stride_it, stride_ih, stride_ms, stride_as,
    HQ: tl.constexpr, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr,
    DIRECT: tl.constexpr, PV_SPLIT: tl.constexpr, PREFETCH: tl.constexpr, PERTURB: tl.constexpr,
    DOT_F32: tl.constexpr, PIPE: tl.constexpr = False, SWAP: tl.constexpr = False,
    QK_INT8: tl.constexpr = False, QK_INT8_BUDGET: tl.constexpr = 0.0009765625, PDL: tl.constexpr = False,
    IDS_EARLY: tl.constexpr = False,
):
    pdl_entry(PDL)
    t = tl.program_id(0)
    split = tl.program_id(1)
    g = tl.program_id(2)
    rows = tl.arange(0, BLOCK_R)
    row_ok = rows < GROUP
    head = g * GROUP + rows
    offs_d = tl.arange(0, HEAD_DIM)
    c0 = split * cands_per_split
    c1 = tl.minimum(c0 + cands_per_split, N)
    idx_base = IDX + t.to(tl.int64) * stride_it + g * stride_ih
    if IDS_EARLY:  # (the plain loop) the first two tiles' ids requested before the query, so that their round trip
        # overlaps the query's instead of waiting behind the fold's barriers (sm_90 SASS)
        idx_e = tl.load(idx_base + c0 + tl.arange(0, BLOCK_N), mask=c0 + tl.arange(0, BLOCK_N) < c1, other=-1)
        idx_e1 = tl.load(idx_base + c0 + BLOCK_N + tl.arange(0, BLOCK_N),
                         mask=c0 + BLOCK_N + tl.arange(0, BLOCK_N) < c1, other=-1)

    # ---- the folded query, exactly normalized: q' = q'' * 2^E_r
    q = tl.load(Q + t.to(tl.int64) * stride_qt + head[:, None] * stride_qh + offs_d[None, :],
                mask=row_ok[:, None], other=0.0).to(tl.float32)
    ks = tl.load(KS + g * HEAD_DIM + offs_d)
    qn, E = fold_query(q, ks, scale_mant, scale_exp)  # E [BLOCK_R] int32
    q_hi = qn.to(tl.bfloat16)
    q_lo = (qn - q_hi.to(tl.float32)).to(tl.bfloat16)

    m_i = tl.full([BLOCK_R], float("-inf"), dtype=tl.float32)  # scaled domain
    l_i = tl.zeros([BLOCK_R], dtype=tl.float32)
    acc = tl.zeros([BLOCK_R, HEAD_DIM], dtype=tl.float32)
    vs_row = tl.load(VS + g * HEAD_DIM + offs_d)  # used in the loop only by PERTURB 3
    # latency (one CTA per SM at these register counts, so nothing else hides it): indices are loaded two
    # tiles ahead; with PREFETCH a tile's K and V rows are gathered one tile ahead too, so the gathers of
    # tile j + 1 are in flight while tile j is computed (more registers)
    kv_base = g * stride_kh
    if SWAP:
        # swap-AB: candidates on the MMA's M side (BLOCK_N of them fill a 64-row warpgroup MMA), the query heads of
        # this KV head on N (BLOCK_R), instead of padding 12 or 16 heads to the M side; the plain loop
        # QK_INT8: the int8 digits of q'' serve a program whose worst-case score error from them (2^E_r * 128 *
        # 2^-27 * sum_d |f_d| per row) stays within QK_INT8_BUDGET nats (2^-10) on every row; otherwise the program takes
        # the split-bf16 query (exact where q'' has at most 16 significant bits): one branch per program
        accT = tl.zeros([HEAD_DIM, BLOCK_R], dtype=tl.float32)
        use_int = False
        if QK_INT8:  # (the launcher sets it only over an int8 cache)
            d_h, d_m, d_l, d_l2, frac = _int8_digits(qn)
            int_err = ldexp(tl.sum(tl.abs(frac), 1), E - 20)
            use_int = tl.max(int_err, 0) <= QK_INT8_BUDGET
            if use_int:
                m_i, l_i, accT = _swap_loop(tl.trans(d_h), tl.trans(d_m), tl.trans(d_l), tl.trans(d_l2), KC, VC,
                                            kv_base, stride_kc, idx_base, c0, c1, C, offs_d, row_ok, m_i, l_i, accT,
                                            E, vs_row, BLOCK_N, PV_SPLIT, PERTURB, DOT_F32, True)
        if not use_int:
            m_i, l_i, accT = _swap_loop(tl.trans(q_hi), tl.trans(q_lo), tl.trans(q_lo), tl.trans(q_lo), KC, VC,
                                        kv_base, stride_kc, idx_base, c0, c1, C, offs_d, row_ok, m_i, l_i, accT, E,
                                        vs_row, BLOCK_N, PV_SPLIT, PERTURB, DOT_F32, False)
        acc = tl.trans(accT)
    elif PIPE:
        # the plain loop: the index load and the two gathers that depend on it are left to Triton's software
        # pipeliner (num_stages), which issues them as asynchronous copies into shared memory stages ahead
        for j0 in range(c0, c1, BLOCK_N):
            offs_j = j0 + tl.arange(0, BLOCK_N)
            idx = tl.load(idx_base + offs_j, mask=offs_j < c1, other=-1)
            ok = (idx >= 0) & (idx < C)
            safe = tl.where(ok, idx, 0).to(tl.int64)
            k = tl.load(KC + kv_base + safe[None, :] * stride_kc + offs_d[:, None], mask=ok[None, :], other=0)
            v = tl.load(VC + kv_base + safe[:, None] * stride_kc + offs_d[None, :], mask=ok[:, None], other=0)
            valid = ok
            if PERTURB == 1:
                valid = valid & (offs_j != c0)
            m_i, l_i, acc = _attend_tile(q_hi, q_lo, k, v, valid, row_ok, m_i, l_i, acc, E, vs_row, PV_SPLIT,
                                         PERTURB, DOT_F32)
    else:
        offs_j = c0 + tl.arange(0, BLOCK_N)
        if IDS_EARLY:
            idx = idx_e
        else:
            idx = tl.load(idx_base + offs_j, mask=offs_j < c1, other=-1)
        ok = (idx >= 0) & (idx < C)  # out-of-range entries are skipped, never read
        safe = tl.where(ok, idx, 0).to(tl.int64)
        k = tl.load(KC + kv_base + safe[None, :] * stride_kc + offs_d[:, None], mask=ok[None, :], other=0)
        v = tl.load(VC + kv_base + safe[:, None] * stride_kc + offs_d[None, :], mask=ok[:, None], other=0)
        offs_1 = offs_j + BLOCK_N
        if IDS_EARLY:
            idx_1 = idx_e1
        else:
            idx_1 = tl.load(idx_base + offs_1, mask=offs_1 < c1, other=-1)
        for j0 in range(c0, c1, BLOCK_N):
            offs_j = j0 + tl.arange(0, BLOCK_N)
            valid = ok
            if PERTURB == 1:
                valid = valid & (offs_j != c0)
            if not PREFETCH:
                k = tl.load(KC + kv_base + safe[None, :] * stride_kc + offs_d[:, None], mask=ok[None, :], other=0)
                v = tl.load(VC + kv_base + safe[:, None] * stride_kc + offs_d[None, :], mask=ok[:, None], other=0)
            ok_n = (idx_1 >= 0) & (idx_1 < C)
            safe_n = tl.where(ok_n, idx_1, 0).to(tl.int64)
            if PREFETCH:
                k_n = tl.load(KC + kv_base + safe_n[None, :] * stride_kc + offs_d[:, None], mask=ok_n[None, :],
                              other=0)
                v_n = tl.load(VC + kv_base + safe_n[:, None] * stride_kc + offs_d[None, :], mask=ok_n[:, None],
                              other=0)
            else:
                k_n = k
                v_n = v
            offs_2 = offs_j + 2 * BLOCK_N
            idx_1 = tl.load(idx_base + offs_2, mask=offs_2 < c1, other=-1)
            m_i, l_i, acc = _attend_tile(q_hi, q_lo, k, v, valid, row_ok, m_i, l_i, acc, E, vs_row, PV_SPLIT,
                                         PERTURB, DOT_F32)
            ok = ok_n
            safe = safe_n
            k = k_n
            v = v_n

    if PERTURB != 3:
        acc = acc * vs_row[None, :]
    r_idx = t.to(tl.int64) * HQ + head
    if DIRECT:
        nonempty = l_i != 0  # NaN stays NaN: not the empty row
        den = tl.where(nonempty, l_i, 1.0)
        o = tl.where(nonempty[:, None], acc / den[:, None], 0.0)
        tl.store(OUT + t.to(tl.int64) * stride_ot + head[:, None] * stride_oh + offs_d[None, :],
                 to_bf16(o), mask=row_ok[:, None])
        lse = tl.where(nonempty, ldexp(m_i, E) + tl.log(den), float("-inf"))
        tl.store(LSE + r_idx, lse, mask=row_ok)
    else:
        tl.store(M_OUT + split.to(tl.int64) * stride_ms + r_idx, m_i, mask=row_ok)
        tl.store(L_OUT + split.to(tl.int64) * stride_ms + r_idx, l_i, mask=row_ok)
        tl.store(ACC_OUT + split.to(tl.int64) * stride_as + r_idx[:, None] * HEAD_DIM + offs_d[None, :], acc,
                 mask=row_ok[:, None])
        if split == 0:
            tl.store(E_OUT + r_idx, E, mask=row_ok)
