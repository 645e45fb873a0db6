"""relbias split-K decode kernel (decode and speculative verify: 1 to 32 query tokens per sequence).

Computes   per (sequence, KV head, split): the un-normalized partials (m, l, acc) of the relbias scores
           of the split's key range, for the GROUP query heads of that KV head times the sequence's
           query tokens, packed into tiles of rows (row r of token block tb = token tb * (BLOCK_R // GROUP) +
           r // GROUP, head g*GROUP + r % GROUP; more tokens than one tile holds take more token blocks).
           attnkit.splitk merges the partials in split order (deterministic).
Contract   as kernel_fwd.py; partials m, l [S, total_q * Hq] fp32 (natural-log units), acc
           [S, total_q * Hq, D] fp32, row index = token * Hq + head. An empty split writes m = -inf,
           l = 0, acc = 0.
Numerics   as kernel_fwd.py; the bias is looked up per row's own query head and position, so packing the
           heads changes what a row means but not which bias it gets; fp8's value scale is applied to acc
           (the merge is linear in acc).
Bias       STRIP > 0 (the rule over contiguous caches): a tile loads, per query head of its KV head, the
           STRIP distances it touches once (clamped into the table) and builds its packed rows from them
           (tl.gather); otherwise one load per score (paged caches).
Interior   DEC_FAST: the tiles every row of the block sees whole, inside the table and the window, run in a loop of
           their own (MODE 3) with no mask, clamp or select; the tiles before and after them in the usual loops.
Paging     PAGE_TILES (block_n <= the block size): one block-table entry per key tile, the keys then addressed as
           over a contiguous cache; otherwise one block-table load per key (kernel_fwd.kv_offsets).
Dispatch   attnkit.relbias.interface (config.use_decode); split count, token blocks: attnkit.relbias.config.
Oracle     attnkit.reference.relbias (partials: relbias_partials_ref); gates "relbias/triton_decode",
           "relbias/triton_decode_split".
"""

import triton
import triton.language as tl

from .._triton.pdl import pdl_entry
from .kernel_fwd import kv_offsets, pv_accumulate, qk_scores, softmax_step

LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def _strip_rows(tab_g, d_min, E, GROUP: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr,
                STRIP: tl.constexpr, STRIP_G: tl.constexpr):
    """A tile's bias (clamped into the table) from its strips: packed row r (token r // GROUP of the block, head
    r % GROUP of the KV head) at key column c has distance d_min + r // GROUP + BLOCK_N - 1 - c, so the tile
    reads, per query head, the STRIP (a power of two >= tokens per block + BLOCK_N) entries from d_min on once
    (tab_g: the KV head's first query head's table row; STRIP_G: GROUP rounded up to a power of two) and builds
    itself from them (tl.gather)."""
    f = tl.arange(0, STRIP_G * STRIP)
    hh = f // STRIP
    strip = tl.load(tab_g + hh * E + tl.minimum(tl.maximum(d_min + f % STRIP, 0), E - 1), mask=hh < GROUP, other=0.0)
    rows = tl.arange(0, BLOCK_R)
    idx = ((rows % GROUP) * STRIP + rows // GROUP + (BLOCK_N - 1))[:, None] - tl.arange(0, BLOCK_N)[None, :]
    return tl.reshape(tl.gather(strip, tl.reshape(idx, [BLOCK_R * BLOCK_N]), 0), [BLOCK_R, BLOCK_N])


@triton.jit
def _looked_up_bias(tab_g, tab_row, d_min, dd, vis, tail, E, GROUP: tl.constexpr, BLOCK_R: tl.constexpr,
                    BLOCK_N: tl.constexpr, STRIP: tl.constexpr, STRIP_G: tl.constexpr, CLAMP: tl.constexpr,
                    MASKED: tl.constexpr):
    """A looked-up tile's bias in the base-2 domain at distances dd (d_min the smallest): from the strips (STRIP > 0)
    or one load per score at the index clamped into the table (MASKED: only where vis), and past the extent the
    constant tail (CLAMP) or 0."""
    if STRIP > 0:
        bias = _strip_rows(tab_g, d_min, E, GROUP, BLOCK_R, BLOCK_N, STRIP, STRIP_G)
    elif MASKED:
        bias = tl.load(tab_row[:, None] + tl.minimum(tl.maximum(dd, 0), E - 1), mask=vis, other=0.0)
    else:
        bias = tl.load(tab_row[:, None] + tl.minimum(tl.maximum(dd, 0), E - 1))
    bias = bias * LOG2E
    if CLAMP:
        return tl.where(dd < E, bias, tail[:, None])
    else:
        return tl.where(dd < E, bias, 0.0)


@triton.jit
def _page_tile_offsets(n0, b, BLOCK_TABLE, stride_bt, stride_kb, stride_kt, PAGE: tl.constexpr,
                       BLOCK_N: tl.constexpr):
    """Element offsets (int64) of the keys n0 .. n0 + BLOCK_N - 1 of sequence b in a paged cache, the tile's page
    read once (n0 a multiple of BLOCK_N, so with PAGE >= BLOCK_N the tile lies in one page: one scalar load, and
    the keys' offsets step by stride_kt as over a contiguous cache) instead of one block-table load per key. Keys from
    s_hi on (in the tile's page) are masked by the caller. (Smaller pages, as a [pages, PAGE] tile reshaped, compiled
    to per-element loads and spills on sm_90: not offered.)"""
    tl.static_assert(PAGE >= BLOCK_N, "page tiles need BLOCK_N <= PAGE")
    page = tl.load(BLOCK_TABLE + b * stride_bt + n0 // PAGE)  # n0 < s_hi: an entry of the sequence
    return page.to(tl.int64) * stride_kb + ((n0 % PAGE) + tl.arange(0, BLOCK_N)).to(tl.int64) * stride_kt


@triton.jit
def _dec_tiles(m_i, l_i, acc, q, qk_scale, K, V, tab_row, tab_g, tail, E, win, shift, pos, row_ok, offs_d, n_lo, n_hi,
               s_hi, pos0, b, k_start, g_kv, BLOCK_TABLE, stride_bt, stride_kb, stride_kt, stride_kh,
               GROUP: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr,
               PAGED: tl.constexpr, PAGE: tl.constexpr, FP8: tl.constexpr, HAS_WINDOW: tl.constexpr,
               CLAMP: tl.constexpr, PERTURB: tl.constexpr, DOT_F32: tl.constexpr, MODE: tl.constexpr,
               STRIP: tl.constexpr, STRIP_G: tl.constexpr, PAGE_TILES: tl.constexpr = False):
    """The split's key tiles n_lo, n_lo + BLOCK_N, ... < n_hi. MODE 2: every tile, the constant tail or the
    lookup chosen per tile by a branch (pos0: the block's first token's position). With SPLIT_LOOPS one kind per
    loop, no branch in the loop body (see kernel_fwd._tiles): MODE 0, tiles wholly beyond the extent (the
    constant tail, no lookup); 1, the rest (the bias looked up at the index clamped into the table). STRIP > 0:
    a looked-up tile reads its per-head strips of STRIP distances once instead of one load per score. MODE 3:
    interior tiles (the caller's range, DEC_FAST), the bias added with no mask, clamp or select."""
    for n0 in range(n_lo, n_hi, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        col_ok = offs_n < s_hi
        if PAGED and PAGE_TILES:
            kv_off = _page_tile_offsets(n0, b, BLOCK_TABLE, stride_bt, stride_kb, stride_kt, PAGE, BLOCK_N)
        else:
            kv_off = kv_offsets(offs_n, col_ok, b, k_start, BLOCK_TABLE, stride_bt, stride_kb, stride_kt, PAGED,
                                PAGE)
        k = tl.load(K + kv_off[None, :] + g_kv * stride_kh + offs_d[:, None], mask=col_ok[None, :], other=0.0)
        s = qk_scores(q, k, qk_scale, FP8, DOT_F32)
        if MODE == 3:
            # an interior tile (the caller's range): every key seen by every row of the block, every distance inside
            # the table (rows past the block's tokens included: their results are never stored): no masks, no clamp
            if PERTURB != 1:
                if STRIP > 0:
                    bias = _strip_rows(tab_g, pos0 - (n0 + BLOCK_N - 1) + shift, E, GROUP, BLOCK_R, BLOCK_N, STRIP,
                                       STRIP_G)
                else:
                    bias = tl.load(tab_row[:, None] + (pos[:, None] - offs_n[None, :] + shift))
                s = s + bias * LOG2E
        else:
            d = pos[:, None] - offs_n[None, :]
            vis = (d >= 0) & col_ok[None, :] & row_ok[:, None]
            if HAS_WINDOW:
                vis = vis & (d < win)
            if PERTURB != 1:
                if MODE == 1:
                    s = s + _looked_up_bias(tab_g, tab_row, pos0 - (n0 + BLOCK_N - 1) + shift, d + shift, vis, tail,
                                            E, GROUP, BLOCK_R, BLOCK_N, STRIP, STRIP_G, CLAMP, False)
                elif MODE == 0:
                    if CLAMP:
                        s = s + tail[:, None]
                else:
                    dd = d + shift
                    d_min = pos0 - (n0 + BLOCK_N - 1) + shift  # smallest distance in this tile
                    if d_min >= E:  # the whole tile lies beyond the extent: the constant tail, no lookup
                        if CLAMP:
                            s = s + tail[:, None]
                    else:
                        s = s + _looked_up_bias(tab_g, tab_row, d_min, dd, vis, tail, E, GROUP, BLOCK_R, BLOCK_N,
                                                STRIP, STRIP_G, CLAMP, True)
            s = tl.where(vis, s, float("-inf"))
        m_i, p, l_i, acc = softmax_step(m_i, l_i, acc, s)
        v = tl.load(V + kv_off[:, None] + g_kv * stride_kh + offs_d[None, :], mask=col_ok[:, None], other=0.0)
        acc = pv_accumulate(acc, p, v, q, FP8, DOT_F32)
    return m_i, l_i, acc


@triton.jit
def relbias_decode_split_kernel(
    Q, K, V, TABLE, M_OUT, L_OUT, ACC_OUT,
    CU_Q, CU_K, SEQUSED_K, BLOCK_TABLE, K_SCALE, V_SCALE,
    sm_scale, E, window, keys_per_split,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_kb, stride_bt,
    stride_ms, stride_as,
    HQ: tl.constexpr, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr,
    PAGED: tl.constexpr, PAGE: tl.constexpr, FP8: tl.constexpr, HAS_WINDOW: tl.constexpr,
    CLAMP: tl.constexpr, PERTURB: tl.constexpr, DOT_F32: tl.constexpr, SPLIT_LOOPS: tl.constexpr = False,
    STRIP: tl.constexpr = 0, STRIP_G: tl.constexpr = 1, PDL: tl.constexpr = False, PAGE_TILES: tl.constexpr = False,
    DEC_FAST: tl.constexpr = False,
):
    pdl_entry(PDL)
    split = tl.program_id(0)
    b = tl.program_id(1)
    g = tl.program_id(2) % (HQ // GROUP)
    tb = tl.program_id(2) // (HQ // GROUP)  # token block: tokens tb * TPB .. tb * TPB + TPB - 1
    TPB = BLOCK_R // GROUP  # tokens per block (constexpr)
    if PERTURB == 4:
        g_kv = (g + 1) % (HQ // GROUP)
    else:
        g_kv = g
    q_start = tl.load(CU_Q + b)
    seqlen_q = tl.load(CU_Q + b + 1) - q_start
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

    rows = tl.arange(0, BLOCK_R)
    if PERTURB == 5:  # the deliberately broken variant: every token block computes the first block's tokens
        tok = rows // GROUP
    else:
        tok = tb * TPB + rows // GROUP
    head = g * GROUP + rows % GROUP
    row_ok = (rows // GROUP < TPB) & (tok < seqlen_q)
    pos = seqlen_k - seqlen_q + tok
    offs_d = tl.arange(0, HEAD_DIM)
    q_ptrs = Q + (q_start.to(tl.int64) + tok)[:, None] * stride_qt + head[:, None] * stride_qh + offs_d[None, :]
    q = tl.load(q_ptrs, mask=row_ok[:, None], other=0.0)
    qk_scale = sm_scale * LOG2E
    if FP8:
        qk_scale = qk_scale * tl.load(K_SCALE + g_kv)

    # this split's key range, clipped to what the block's queries can see (an empty block sees nothing)
    pos0 = seqlen_k - seqlen_q + tb * TPB  # the block's first token
    hi = tl.where(tb * TPB < seqlen_q, seqlen_k - seqlen_q + tl.minimum(tb * TPB + TPB, seqlen_q), 0)
    lo = 0
    if HAS_WINDOW:
        lo = tl.maximum(0, pos0 - win + 1)
    s_lo = split * keys_per_split
    s_hi = tl.minimum(s_lo + keys_per_split, hi)
    s_lo = tl.maximum(s_lo, (lo // BLOCK_N) * BLOCK_N)

    m_i = tl.full([BLOCK_R], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_R], dtype=tl.float32)
    acc = tl.zeros([BLOCK_R, HEAD_DIM], dtype=tl.float32)
    tab_row = TABLE + head * E  # per-row table pointer: each packed row reads its own head's bias
    tab_g = TABLE + (g * GROUP).to(tl.int64) * E  # the KV head's first query head's row (the strips)
    if CLAMP:
        tail = tl.load(tab_row + E - 1) * LOG2E
    shift = 0
    if PERTURB == 2:
        shift = BLOCK_N

    if CLAMP:
        tail_v = tail
    else:
        tail_v = tl.zeros([BLOCK_R], dtype=tl.float32)
    if SPLIT_LOOPS:
        # tiles wholly beyond the extent first (their smallest distance, the first token's to the tile's last key,
        # is >= E), then the rest: branch-free loops
        lb = pos0 + shift - E - BLOCK_N + 1  # the last beyond tile start
        n_b = tl.minimum(s_lo + (tl.maximum(lb - s_lo + BLOCK_N, 0) // BLOCK_N) * BLOCK_N, tl.maximum(s_hi, s_lo))
    if DEC_FAST:
        # the interior tiles [f_a, f_b): every key seen by every row of the block (the block's first token sees the
        # tile's last key, no key past s_hi), every distance inside the table and the window (the largest position any
        # row takes, p_hi, against the tile's first key); they run in a loop of their own (MODE 3), the tiles before
        # and after in the rule's loops. Tile starts are multiples of BLOCK_N (s_lo is).
        p_hi = pos0 + (BLOCK_R - 1) // GROUP
        lo_f = tl.maximum(s_lo, p_hi + shift - E + 1)
        if HAS_WINDOW:
            lo_f = tl.maximum(lo_f, p_hi - win + 1)
        f_a = tl.minimum(((lo_f + BLOCK_N - 1) // BLOCK_N) * BLOCK_N, tl.maximum(s_hi, s_lo))
        last = tl.minimum(pos0 - BLOCK_N + 1, s_hi - BLOCK_N)  # the last start of a wholly visible, unmasked tile
        f_b = tl.maximum(tl.where(last >= 0, (tl.maximum(last, 0) // BLOCK_N) * BLOCK_N + BLOCK_N, 0), f_a)
        if SPLIT_LOOPS:
            f_a2 = tl.minimum(tl.maximum(f_a, n_b), tl.maximum(s_hi, s_lo))
            f_b2 = tl.maximum(f_b, f_a2)
            for r in tl.static_range(4):
                m_i, l_i, acc = _dec_tiles(m_i, l_i, acc, q, qk_scale, K, V, tab_row, tab_g, tail_v, E, win, shift,
                                           pos, row_ok, offs_d, (s_lo, n_b, f_a2, f_b2)[r], (n_b, f_a2, f_b2, s_hi)[r],
                                           s_hi, pos0, b, k_start, g_kv, BLOCK_TABLE, stride_bt, stride_kb, stride_kt,
                                           stride_kh, GROUP, BLOCK_R, BLOCK_N, PAGED, PAGE, FP8, HAS_WINDOW, CLAMP,
                                           PERTURB, DOT_F32, (0, 1, 3, 1)[r], STRIP, STRIP_G, PAGE_TILES)
        else:
            for r in tl.static_range(3):
                m_i, l_i, acc = _dec_tiles(m_i, l_i, acc, q, qk_scale, K, V, tab_row, tab_g, tail_v, E, win, shift,
                                           pos, row_ok, offs_d, (s_lo, f_a, f_b)[r], (f_a, f_b, s_hi)[r], s_hi, pos0,
                                           b, k_start, g_kv, BLOCK_TABLE, stride_bt, stride_kb, stride_kt, stride_kh,
                                           GROUP, BLOCK_R, BLOCK_N, PAGED, PAGE, FP8, HAS_WINDOW, CLAMP, PERTURB,
                                           DOT_F32, (2, 3, 2)[r], STRIP, STRIP_G, PAGE_TILES)
    elif SPLIT_LOOPS:
        for r in tl.static_range(2):
            m_i, l_i, acc = _dec_tiles(m_i, l_i, acc, q, qk_scale, K, V, tab_row, tab_g, tail_v, E, win, shift, pos,
                                       row_ok, offs_d, (s_lo, n_b)[r], (n_b, s_hi)[r], s_hi, pos0, b, k_start, g_kv,
                                       BLOCK_TABLE, stride_bt, stride_kb, stride_kt, stride_kh, GROUP, BLOCK_R,
                                       BLOCK_N, PAGED, PAGE, FP8, HAS_WINDOW, CLAMP, PERTURB, DOT_F32, r, STRIP,
                                       STRIP_G, PAGE_TILES)
    else:
        m_i, l_i, acc = _dec_tiles(m_i, l_i, acc, q, qk_scale, K, V, tab_row, tab_g, tail_v, E, win, shift, pos,
                                   row_ok, offs_d, s_lo, s_hi, s_hi, pos0, b, k_start, g_kv, BLOCK_TABLE, stride_bt,
                                   stride_kb, stride_kt, stride_kh, GROUP, BLOCK_R, BLOCK_N, PAGED, PAGE, FP8,
                                   HAS_WINDOW, CLAMP, PERTURB, DOT_F32, 2, STRIP, STRIP_G, PAGE_TILES)

    if FP8:
        acc = acc * tl.load(V_SCALE + g_kv)
    r_idx = (q_start.to(tl.int64) + tok) * HQ + head
    tl.store(M_OUT + split.to(tl.int64) * stride_ms + r_idx, m_i * LN2, mask=row_ok)
    tl.store(L_OUT + split.to(tl.int64) * stride_ms + r_idx, l_i, mask=row_ok)
    tl.store(ACC_OUT + split.to(tl.int64) * stride_as + r_idx[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=row_ok[:, None])
