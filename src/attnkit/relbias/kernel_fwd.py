"""relbias forward kernel.

Computes   o[i] = sum_j softmax_j(scale * q_i . k_j + bias(h, d_ij)) v_j over visible keys, with
           d_ij = (seqlen_k - seqlen_q + i) - j, visible when 0 <= d (< window), and
           bias(h, d) = table[h, min(d, E-1)] for d < E, else 0 ("zero") or table[h, E-1] ("clamp").
Contract   q [total_q, Hq, D]; k, v [total_k, Hkv, D] varlen (cu_seqlens_k) or paged
           [num_blocks, block_size, Hkv, D] (block_table, seqused_k); table [Hq, E] fp32;
           out [total_q, Hq, D] in q's dtype; lse [total_q, Hq] fp32.
Numerics   scores and softmax in fp32 in the base-2 domain (scale and bias pre-multiplied by
           log2(e)); fp8 k and v are converted to q's dtype exactly and their per-head scales applied
           in fp32 (k's to the scores, v's to the output); P is rounded to q's dtype for the second
           product; LSE returned in natural log; a row that sees no key gets 0 and -inf.
Bias       a tile touches only its strip of BLOCK_M + BLOCK_N - 1 table entries. With BIAS_STRIP (the rule
           from 33 query tokens, in the branch-free loops) it loads that strip once and builds itself from it
           (tl.gather; a tile that crosses a mask or the extent reads each entry at its index clamped into
           the table, unless MASKED_STRIP is off); otherwise one cached load per score at its distance,
           issued one tile ahead for interior tiles with BIAS_PREFETCH (an option). A tile lying wholly
           beyond the extent takes the constant tail without any lookup; tiles outside the causal / window
           masks are never visited. FAST_INTERIOR: an interior tile (every key visible to every row,
           distances all inside the table or all beyond)
           skips the masks and the clamp. HEAVY_FIRST: the grid's first programs take each sequence's
           last query blocks (scheduling only; the same bits).
Dispatch   attnkit.relbias.interface.relbias_attention (config: attnkit.relbias.config.fwd_config).
Oracle     attnkit.reference.relbias; gate "relbias/triton_fwd", tests/test_relbias.py.
DOT_F32    set under Triton's interpreter, whose tl.dot multiplies bf16 operands' raw bit patterns
           (Triton 3.6): the operands, already rounded to q's dtype, are widened to fp32 and multiplied
           in IEEE fp32, the same products the tensor cores form exactly, accumulated in fp32.
PERTURB    0 in production. 1..4 are the deliberately wrong variants the gate must catch: bias
           dropped, bias shifted by one KV block, window off by one, GQA group mixed up (5, a token block
           dropped, is the decode kernel's).
"""

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def kv_offsets(offs_n, col_ok, b, k_start, BLOCK_TABLE, stride_bt, stride_kb, stride_kt, PAGED: tl.constexpr,
               PAGE: tl.constexpr):
    """Element offsets (int64) of keys offs_n of sequence b: through the block table when PAGED, else from
    the sequence's start in the varlen buffer (shared by the forward and the decode kernel)."""
    if PAGED:
        page = tl.load(BLOCK_TABLE + b * stride_bt + offs_n // PAGE, mask=col_ok, other=0)
        return page.to(tl.int64) * stride_kb + (offs_n % PAGE).to(tl.int64) * stride_kt
    else:
        return (k_start.to(tl.int64) + offs_n) * stride_kt


# e4m3 -> q's dtype, four codes a 32-bit register, as inline assembly: two packed e4m3 -> f16 conversions (fp16 q:
# that is all), for bf16 q then four widenings to f32 and two packed roundings to bf16. All exact (every e4m3 is an
# f16 and a bf16; NaN stays NaN). Inline assembly marked impure is opaque to Triton's layout passes, which otherwise
# move a conversion feeding a tl.dot past the change to the MMA operand layout (the fp8 codes go through shared
# memory and come back by narrow loads, LDS, then are converted): here the codes are converted as loaded (blocked,
# 16 a load) and the bf16 / fp16 tile goes through shared memory to the MMA operand layout by ldmatrix.
E4M3_F16_ASM = tl.constexpr("""{
    .reg .b16 lo, hi;
    mov.b32 {lo, hi}, $2;
    cvt.rn.f16x2.e4m3x2 $0, lo;
    cvt.rn.f16x2.e4m3x2 $1, hi;
}""")
E4M3_BF16_ASM = tl.constexpr("""{
    .reg .b16 lo, hi;
    .reg .b32 h0, h1;
    .reg .f16 x0, x1, x2, x3;
    .reg .f32 a, b, c, d;
    mov.b32 {lo, hi}, $2;
    cvt.rn.f16x2.e4m3x2 h0, lo;
    cvt.rn.f16x2.e4m3x2 h1, hi;
    mov.b32 {x0, x1}, h0;
    mov.b32 {x2, x3}, h1;
    cvt.f32.f16 a, x0;
    cvt.f32.f16 b, x1;
    cvt.f32.f16 c, x2;
    cvt.f32.f16 d, x3;
    cvt.rn.bf16x2.f32 $0, b, a;
    cvt.rn.bf16x2.f32 $1, d, c;
}""")


@triton.jit
def fp8_to(x, dtype: tl.constexpr, FP8: tl.constexpr):
    """fp8 e4m3 codes x converted exactly to dtype (bf16 or fp16). FP8 2 (the option fp8_f16_cvt): through fp16
    and fp32; 3 (the option fp8_asm_cvt, compiled kernels only: the interpreter runs 1, the same values): the inline
    assembly above, on the codes' loaded layout; otherwise the direct cast."""
    if FP8 == 3:
        if dtype == tl.bfloat16:
            return tl.inline_asm_elementwise(E4M3_BF16_ASM, "=r,=r,r", [x.to(tl.uint8, bitcast=True)],
                                             dtype=tl.bfloat16, is_pure=False, pack=4)
        else:
            return tl.inline_asm_elementwise(E4M3_F16_ASM, "=r,=r,r", [x.to(tl.uint8, bitcast=True)],
                                             dtype=tl.float16, is_pure=False, pack=4)
    elif FP8 == 2:
        return x.to(tl.float16).to(tl.float32).to(dtype)
    else:
        return x.to(dtype)


@triton.jit
def qk_scores(q, k, qk_scale, FP8: tl.constexpr, DOT_F32: tl.constexpr):
    """A tile's scores in the base-2 domain: q . k (fp8 k converted to q's dtype exactly) times qk_scale
    (shared by the forward and the decode kernel). FP8 2 (the option fp8_f16_cvt): the conversion goes through
    fp16 and fp32, one packed conversion per two codes and full-rate widening, instead of the one quarter-rate
    conversion per code that the direct cast compiles to on sm_90 (F2F: 128 per warp per decode tile)."""
    if FP8:
        k = fp8_to(k, q.dtype, FP8)
    if DOT_F32:
        return tl.dot(q.to(tl.float32), k.to(tl.float32), input_precision="ieee") * qk_scale
    else:
        return tl.dot(q, k) * qk_scale


@triton.jit
def softmax_step(m_i, l_i, acc, s):
    """The online-softmax update for a score tile s: (new running max, p, rescaled l_i and acc)."""
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.exp2(s - m_safe[:, None])
    alpha = tl.exp2(m_i - m_safe)
    return m_new, p, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None]


@triton.jit
def pv_accumulate(acc, p, v, q, FP8: tl.constexpr, DOT_F32: tl.constexpr):
    """acc += p . v, with p rounded to q's dtype (fp8 v converted exactly, as in qk_scores)."""
    if FP8:
        v = fp8_to(v, q.dtype, FP8)
    if DOT_F32:
        return tl.dot(p.to(q.dtype).to(tl.float32), v.to(tl.float32), acc, input_precision="ieee")
    else:
        return tl.dot(p.to(q.dtype), v, acc)


@triton.jit
def _masked_bias(s, tab, d, shift, d_lo, tail, E, win, col_ok, row_ok, HAS_WINDOW: tl.constexpr, CLAMP: tl.constexpr,
                 PERTURB: tl.constexpr):
    """Scores of a tile that may cross a mask or the extent: bias added where visible, -inf elsewhere."""
    vis = (d >= 0) & col_ok[None, :] & row_ok[:, None]
    if HAS_WINDOW:
        vis = vis & (d < win)
    if PERTURB != 1:
        dd = d + shift
        if d_lo >= E:  # the whole tile lies beyond the extent: the constant tail
            s = s + tail
        else:
            # the strip of BLOCK_M + BLOCK_N - 1 distances this tile touches, clamped to the table
            bias = tl.load(tab + tl.minimum(tl.maximum(dd, 0), E - 1), mask=vis, other=0.0) * LOG2E
            if not CLAMP:
                bias = tl.where(dd < E, bias, 0.0)
            s = s + bias
    return tl.where(vis, s, float("-inf"))


@triton.jit
def _interior_bias(s, tab, dd, d_lo, tail, E, CLAMP: tl.constexpr, PERTURB: tl.constexpr):
    """Scores of an interior tile (every key visible to every row; distances dd all inside [0, E) or all at
    or beyond the extent): no mask, no clamp."""
    if CLAMP:
        beyond = d_lo >= E - 1
    else:
        beyond = d_lo >= E
    if PERTURB != 1:
        if beyond:
            s = s + tail
        else:
            s = s + tl.load(tab + dd) * LOG2E
    return s


@triton.jit
def _strip_bias(tab, first_pos, n0, shift, E, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CLAMPED: tl.constexpr):
    """The bias of a tile from its strip: distance d(i, j) = pos_i - (n0 + j) + shift = base + (i - j + BLOCK_N - 1)
    with base the tile's smallest distance, so the tile reads the BLOCK_M + BLOCK_N - 1 table entries base ..
    base + BLOCK_M + BLOCK_N - 2, once, and builds itself from them. CLAMPED (a tile that may cross a mask or the
    extent): each entry read at its index clamped into the table, as the per-score lookup reads it."""
    if BLOCK_M >= BLOCK_N:  # S: a power of two covering the BLOCK_M + BLOCK_N - 1 entries
        S: tl.constexpr = 2 * BLOCK_M
    else:
        S: tl.constexpr = 2 * BLOCK_N
    base = first_pos - (n0 + BLOCK_N - 1) + shift  # the first row's distance to the tile's last key
    t = tl.arange(0, S)
    if CLAMPED:
        strip = tl.load(tab + tl.minimum(tl.maximum(base + t, 0), E - 1))
    else:
        strip = tl.load(tab + base + t, mask=t < BLOCK_M + BLOCK_N - 1, other=0.0)
    idx = tl.arange(0, BLOCK_M)[:, None] - tl.arange(0, BLOCK_N)[None, :] + (BLOCK_N - 1)
    return tl.reshape(tl.gather(strip, tl.reshape(idx, [BLOCK_M * BLOCK_N]), 0), [BLOCK_M, BLOCK_N])


@triton.jit
def _tiles(m_i, l_i, acc, q, qk_scale, K, V, K_DESC, V_DESC, tab, tail, E, win, shift, pos, row_ok, offs_d, n_lo, n_hi,
           seqlen_k,
           first_pos, last_pos, b, k_start, g, BLOCK_TABLE, stride_bt, stride_kb, stride_kt, stride_kh,
           BLOCK_N: tl.constexpr, PAGED: tl.constexpr, PAGE: tl.constexpr, FP8: tl.constexpr,
           HAS_WINDOW: tl.constexpr, CLAMP: tl.constexpr, PERTURB: tl.constexpr, DOT_F32: tl.constexpr,
           FAST_INTERIOR: tl.constexpr, MODE: tl.constexpr, MASKED_STRIP: tl.constexpr = False,
           KV_TMA: tl.constexpr = False):
    """The online-softmax update over the key tiles n_lo, n_lo + BLOCK_N, ... < n_hi.
    MODE 3 (the rule below 65 query rows): one loop for every tile, its bias and masks chosen per tile by branches.
    MODE 0-2 (SPLIT_LOOPS): one kind of tile per loop, with no branch inside the loop body (on sm_90 an scf.if
    around the bias left the softmax computed twice, once in the MMA layout and once in the load's). 0: any
    tile (masks; bias looked up at the index clamped into the table, a tile beyond the extent reading one
    entry); 1: interior tile wholly beyond the extent (the constant tail, no lookup, no mask); 2: interior tile
    wholly inside the extent (lookup, no clamp, no mask); 4: as 2, each tile's bias loaded one tile ahead
    (BIAS_PREFETCH: the load's latency overlaps the previous tile's MMAs instead of stalling its own); 5: as 2,
    the bias built from the tile's strip of BLOCK_M + BLOCK_N - 1 distances, loaded once (contiguous) and
    gathered in the tile's layout (BIAS_STRIP: no load per score). MASKED_STRIP: MODE 0 tiles build their bias
    from their strip too, each entry at its clamped index (with BIAS_STRIP: the diagonal, window-edge and
    extent-straddling tiles). KV_TMA: interior tiles (MODE 1, 2, 4, 5) of a contiguous cache load K and V through
    TMA tensor descriptors (K_DESC, V_DESC over [total_k, Hkv * D], boxes of BLOCK_N keys x D)."""
    if MODE == 4:
        offs_b = n_lo + tl.arange(0, BLOCK_N)
        bias_next = tl.load(tab + (pos[:, None] - offs_b[None, :] + shift), mask=n_lo < n_hi, other=0.0)
    for n0 in range(n_lo, n_hi, BLOCK_N):
        if MODE == 4:
            bias_cur = bias_next
            offs_b = n0 + BLOCK_N + tl.arange(0, BLOCK_N)
            # the next tile's bias (masked off past the last tile, where its distances may leave the table)
            bias_next = tl.load(tab + (pos[:, None] - offs_b[None, :] + shift), mask=n0 + BLOCK_N < n_hi, other=0.0)
        offs_n = n0 + tl.arange(0, BLOCK_N)
        col_ok = offs_n < seqlen_k
        kv_off = kv_offsets(offs_n, col_ok, b, k_start, BLOCK_TABLE, stride_bt, stride_kb, stride_kt, PAGED, PAGE)
        if (MODE == 1 or MODE == 2 or MODE == 4 or MODE == 5) and KV_TMA:
            k = K_DESC.load([k_start + n0, g * q.shape[1]]).T
        elif MODE == 1 or MODE == 2 or MODE == 4 or MODE == 5:
            k = tl.load(K + kv_off[None, :] + g * stride_kh + offs_d[:, None])
        else:
            k = tl.load(K + kv_off[None, :] + g * stride_kh + offs_d[:, None], mask=col_ok[None, :], other=0.0)
        s = qk_scores(q, k, qk_scale, FP8, DOT_F32)
        if MODE == 1:
            if PERTURB != 1:
                s = s + tail
        elif MODE == 2:
            if PERTURB != 1:
                s = s + tl.load(tab + (pos[:, None] - offs_n[None, :] + shift)) * LOG2E
        elif MODE == 4:
            if PERTURB != 1:
                s = s + bias_cur * LOG2E
        elif MODE == 5:
            if PERTURB != 1:
                s = s + _strip_bias(tab, first_pos, n0, shift, E, s.shape[0], BLOCK_N, False) * LOG2E
        elif MODE == 0:
            d = pos[:, None] - offs_n[None, :]
            vis = (d >= 0) & col_ok[None, :] & row_ok[:, None]
            if HAS_WINDOW:
                vis = vis & (d < win)
            if PERTURB != 1:
                dd = d + shift
                # no load mask: the clamped index always lies in the table (a mask would tie the visibility
                # test to the load's layout); with MASKED_STRIP from the tile's strip, clamped the same way
                if MASKED_STRIP:
                    bias = _strip_bias(tab, first_pos, n0, shift, E, s.shape[0], BLOCK_N, True) * LOG2E
                else:
                    bias = tl.load(tab + tl.minimum(tl.maximum(dd, 0), E - 1)) * LOG2E
                if not CLAMP:
                    bias = tl.where(dd < E, bias, 0.0)
                s = s + bias
            s = tl.where(vis, s, float("-inf"))
        else:
            d = pos[:, None] - offs_n[None, :]  # distances of this tile
            d_lo = first_pos - (n0 + BLOCK_N - 1) + shift  # the tile's smallest (shifted) distance
            if FAST_INTERIOR:
                # an interior tile: every key in range and visible to every row of a full row block, and the
                # tile's distances all inside the table or all beyond it: no mask and no clamp
                d_hi = last_pos - n0 + shift
                interior = (n0 + BLOCK_N <= seqlen_k) & (n0 + BLOCK_N - 1 <= first_pos) & (last_pos < seqlen_k)
                if HAS_WINDOW:
                    interior = interior & (last_pos - n0 < win)
                if CLAMP:
                    interior = interior & ((d_hi < E) | (d_lo >= E - 1))
                else:
                    interior = interior & ((d_hi < E) | (d_lo >= E))
                if interior:
                    s = _interior_bias(s, tab, d + shift, d_lo, tail, E, CLAMP, PERTURB)
                else:
                    s = _masked_bias(s, tab, d, shift, d_lo, tail, E, win, col_ok, row_ok, HAS_WINDOW, CLAMP, PERTURB)
            else:
                s = _masked_bias(s, tab, d, shift, d_lo, tail, E, win, col_ok, row_ok, HAS_WINDOW, CLAMP, PERTURB)
        m_i, p, l_i, acc = softmax_step(m_i, l_i, acc, s)
        if (MODE == 1 or MODE == 2 or MODE == 4 or MODE == 5) and KV_TMA:
            v = V_DESC.load([k_start + n0, g * q.shape[1]])
        elif MODE == 1 or MODE == 2 or MODE == 4 or MODE == 5:
            v = tl.load(V + kv_off[:, None] + g * stride_kh + offs_d[None, :])
        else:
            v = tl.load(V + kv_off[:, None] + g * stride_kh + offs_d[None, :], mask=col_ok[:, None], other=0.0)
        acc = pv_accumulate(acc, p, v, q, FP8, DOT_F32)
    return m_i, l_i, acc


@triton.jit
def relbias_fwd_kernel(
    Q, K, V, TABLE, OUT, LSE,
    CU_Q, CU_K, SEQUSED_K, BLOCK_TABLE, K_SCALE, V_SCALE, K_DESC, V_DESC,
    sm_scale, E, window,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_ot, stride_oh, stride_lt,
    stride_kb, stride_bt,
    HQ: tl.constexpr, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    PAGED: tl.constexpr, PAGE: tl.constexpr, FP8: tl.constexpr, HAS_WINDOW: tl.constexpr,
    CLAMP: tl.constexpr, PERTURB: tl.constexpr, DOT_F32: tl.constexpr, FAST_INTERIOR: tl.constexpr = False,
    HEAVY_FIRST: tl.constexpr = False, SPLIT_LOOPS: tl.constexpr = False, BIAS_PREFETCH: tl.constexpr = False,
    BIAS_STRIP: tl.constexpr = False, MASKED_STRIP: tl.constexpr = True, KV_TMA: tl.constexpr = False,
):
    if HEAVY_FIRST:  # the last query blocks see the most keys: launch them first (a shorter tail)
        pid_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        pid_m = tl.program_id(0)
    b = tl.program_id(1)
    h = tl.program_id(2)
    if PERTURB == 4:
        g = (h // GROUP + 1) % (HQ // GROUP)
    else:
        g = h // GROUP
    q_start = tl.load(CU_Q + b)
    seqlen_q = tl.load(CU_Q + b + 1) - q_start
    m0 = pid_m * BLOCK_M
    if PAGED:
        k_start = 0
        seqlen_k = tl.load(SEQUSED_K + b)
    else:
        k_start = tl.load(CU_K + b)
        seqlen_k = tl.load(CU_K + b + 1) - k_start
    if PERTURB == 3:
        win = window + 1
    else:
        win = window

    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < seqlen_q
    pos = seqlen_k - seqlen_q + offs_m  # bottom-right positions
    q_ptrs = Q + (q_start.to(tl.int64) + offs_m)[:, None] * stride_qt + h * stride_qh + offs_d[None, :]
    q = tl.load(q_ptrs, mask=row_ok[:, None], other=0.0)

    qk_scale = sm_scale * LOG2E
    if FP8:
        qk_scale = qk_scale * tl.load(K_SCALE + g)

    # key range: causal upper end, window lower end (whole tiles outside both are never visited)
    first_pos = seqlen_k - seqlen_q + m0
    last_pos = first_pos + BLOCK_M - 1
    hi = tl.minimum(seqlen_k, last_pos + 1)
    hi = tl.where(m0 < seqlen_q, hi, 0)  # a block past this sequence's queries visits no key
    lo = 0
    if HAS_WINDOW:
        lo = tl.maximum(0, first_pos - win + 1)
        lo = (lo // BLOCK_N) * BLOCK_N

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    tab = TABLE + h * E
    if CLAMP:
        tail = tl.load(tab + E - 1) * LOG2E
    else:
        tail = 0.0
    shift = 0
    if PERTURB == 2:
        shift = BLOCK_N

    if SPLIT_LOOPS:
        # the key tiles n0 = lo + k * BLOCK_N, k < kt, in five ranges of one kind each (ascending n0, as a single loop
        # would visit them): G1 [0, s0) any; B [s0, s1) interior and beyond the extent; G2 [s1, s2) any (straddling
        # the extent); I [s2, s3) interior and inside the extent; G3 [s3, kt) any (the diagonal, the sequence end).
        # Interior: every key visible to every row of a full row block. Without FAST_INTERIOR every tile is G1.
        if FAST_INTERIOR:
            kt = tl.cdiv(tl.maximum(hi - lo, 0), BLOCK_N)
            s0 = kt
            s1 = kt
            s2 = kt
            s3 = kt
            if last_pos < seqlen_k:  # every row of the block is a query of this sequence
                k_is = 0
                if HAS_WINDOW:  # the first tile inside every row's window: n0 >= last_pos - win + 1
                    k_is = tl.cdiv(tl.maximum(last_pos - win + 1 - lo, 0), BLOCK_N)
                lim = tl.minimum(first_pos, seqlen_k - 1) - BLOCK_N + 1  # the last n0 below the diagonal
                k_ie = tl.minimum(tl.maximum(lim - lo + BLOCK_N, 0) // BLOCK_N, kt)
                k_is = tl.minimum(k_is, k_ie)
                if CLAMP:
                    e_beyond = E - 1  # from E - 1 on every distance reads table[E - 1]
                else:
                    e_beyond = E
                # beyond: the tile's smallest (shifted) distance first_pos - (n0 + BLOCK_N - 1) + shift >= e_beyond
                k_be = tl.maximum(first_pos + shift - e_beyond - BLOCK_N + 1 - lo + BLOCK_N, 0) // BLOCK_N
                # inside: its largest (shifted) distance last_pos - n0 + shift < E
                k_in = tl.cdiv(tl.maximum(last_pos + shift - E + 1 - lo, 0), BLOCK_N)
                s0 = k_is
                s3 = k_ie
                s1 = tl.minimum(tl.maximum(k_be, s0), s3)
                s2 = tl.minimum(tl.maximum(k_in, s1), s3)
        if FAST_INTERIOR:
            bounds = (lo + s0 * BLOCK_N, lo + s1 * BLOCK_N, lo + s2 * BLOCK_N, lo + s3 * BLOCK_N, hi)
        else:
            bounds = (hi, hi, hi, hi, hi)
        starts = (lo, bounds[0], bounds[1], bounds[2], bounds[3])
        for r in tl.static_range(5 if FAST_INTERIOR else 1):  # G1, B, G2, I, G3
            m_i, l_i, acc = _tiles(m_i, l_i, acc, q, qk_scale, K, V, K_DESC, V_DESC, tab, tail, E, win, shift, pos,
                                   row_ok, offs_d, starts[r], bounds[r], seqlen_k, first_pos, last_pos, b, k_start, g,
                                   BLOCK_TABLE, stride_bt, stride_kb, stride_kt, stride_kh, BLOCK_N, PAGED, PAGE, FP8, HAS_WINDOW,
                                   CLAMP, PERTURB, DOT_F32, FAST_INTERIOR,
                                   (0, 1, 0, 5 if BIAS_STRIP else 4 if BIAS_PREFETCH else 2, 0)[r],
                                   BIAS_STRIP and MASKED_STRIP, KV_TMA)
    else:  # one loop, the bias and the masks chosen per tile by branches
        m_i, l_i, acc = _tiles(m_i, l_i, acc, q, qk_scale, K, V, K_DESC, V_DESC, tab, tail, E, win, shift, pos, row_ok,
                               offs_d, lo, hi, seqlen_k, first_pos, last_pos, b, k_start, g, BLOCK_TABLE, stride_bt,
                               stride_kb, stride_kt, stride_kh, BLOCK_N, PAGED, PAGE, FP8, HAS_WINDOW, CLAMP, PERTURB, DOT_F32,
                               FAST_INTERIOR, 3)

    nonempty = l_i != 0  # NaN (a NaN key) stays NaN: not the empty row
    denom = tl.where(nonempty, l_i, 1.0)
    out = acc / denom[:, None]
    if FP8:
        out = out * tl.load(V_SCALE + g)
    out = tl.where(nonempty[:, None], out, 0.0)
    o_ptrs = OUT + (q_start.to(tl.int64) + offs_m)[:, None] * stride_ot + h * stride_oh + offs_d[None, :]
    tl.store(o_ptrs, out.to(OUT.dtype.element_ty), mask=row_ok[:, None])
    lse = tl.where(nonempty, (m_i + tl.log2(denom)) * LN2, float("-inf"))
    tl.store(LSE + (q_start.to(tl.int64) + offs_m) * stride_lt + h, lse, mask=row_ok)
