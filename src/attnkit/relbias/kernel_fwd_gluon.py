"""relbias forward kernel for Hopper (sm_90) in Gluon: TMA-fed key / value tiles, warpgroup MMAs, the bias built
from each tile's strip of distances.

Computes   what kernel_fwd.relbias_fwd_kernel computes (its Triton twin for the semantics: same output, LSE, bias,
           masks and perturbations) for contiguous varlen k, v in q's dtype (bf16 or fp16): per (query block,
           sequence, query head), the online softmax over the visible key tiles, then out and LSE.
Why        Triton's plain loop on sm_90 runs prefill 8K at 1.6x cuDNN's time with or without a bias (docs/relbias.md:
           the loop, not the bias, is the gap). Here the schedule is explicit: key and value tiles arrive by TMA into
           a ring of STAGES shared buffers (mbarrier-tracked, issued STAGES - 1 tiles ahead), S = Q K^T and
           O += P V are warpgroup MMAs (Q and K, V from shared memory, P from registers), and with PIPE the value
           product of tile j - 1 runs while the softmax of tile j is computed (FlashAttention-3's intra-warpgroup
           overlap): S_j issued, O += P_{j-1} V_{j-1} issued, S_j waited, softmax, then O waited and rescaled.
Tiles      BLOCK_M = 16 x num_warps query rows (64 per warpgroup), BLOCK_N keys, HEAD_DIM in {64, 128}.
           Interior tiles (every key visible to every row of a full block) skip the masks; the others (the
           diagonal, the window's leading edge, a partial block) apply them.
Bias       each tile loads its BLOCK_M + BLOCK_N - 1 distances once (clamped into the table; beyond the extent 0 or
           table[E - 1] already in the strip) and builds the tile from them with gl.gather: no load per score.
Contract   q [total_q, Hq, D]; K_DESC / V_DESC: TMA descriptors over k, v [total_k, Hkv, D] viewed as
           [total_k, Hkv * D] in boxes of [BLOCK_N, D] (rows past a sequence's end are read and masked; past
           total_k the descriptor fills zeros); table [Hq, E] fp32; out [total_q, Hq, D]; lse [total_q, Hq] fp32.
Numerics   as the twin: scores and softmax in fp32 in the base-2 domain, P rounded to q's dtype for the value
           product, fp32 accumulation; a row that sees no key gets 0 and LSE -inf.
Runs       CUDA sm_90 only (Gluon has no interpreter): the tests and smoke gates run the twin on the CPU; this kernel
           runs on the GPU (gate "relbias/gluon_fwd", tests/test_relbias_gluon.py).
PERTURB    as the twin: 1 bias dropped, 2 bias shifted by one KV block, 3 window off by one, 4 GQA group mixed up.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)

from .._triton.pdl import pdl_entry

LOG2E: gl.constexpr = gl.constexpr(1.4426950408889634)
LN2: gl.constexpr = gl.constexpr(0.6931471805599453)
ACC_BIAS_MAX: gl.constexpr = gl.constexpr(1e37)  # BIAS_ACC: |table / softmax_scale| kept finite (q.k adds to it)
LAZY_LOG2: gl.constexpr = gl.constexpr(8.0)  # LAZY: the growth of a row's max (base 2) that forces a rescale
# the shared layout of the key / value tiles, which the host's TMA descriptors carry (rows of 64 or 128 bf16 / fp16:
# 128-byte swizzle)
KV_LAYOUT = gl.NVMMASharedLayout(128, 16, rank=2)


@gluon.jit
def _issue_kv(K_DESC, V_DESC, k_smem, v_smem, kbar, vbar, row, col, slot, pred, BLOCK_N: gl.constexpr,
              D: gl.constexpr):
    """TMA copies of one key tile and one value tile (rows row .. row + BLOCK_N, columns col .. col + D) into ring
    slot `slot`, each signalling its barrier with the bytes it brings (skipped when pred is false)."""
    nbytes: gl.constexpr = BLOCK_N * D * K_DESC.dtype.primitive_bitwidth // 8
    mbarrier.expect(kbar.index(slot), nbytes, pred=pred)
    tma.async_copy_global_to_shared(K_DESC, [row, col], kbar.index(slot), k_smem.index(slot), pred=pred)
    mbarrier.expect(vbar.index(slot), nbytes, pred=pred)
    tma.async_copy_global_to_shared(V_DESC, [row, col], vbar.index(slot), v_smem.index(slot), pred=pred)


@gluon.jit
def _issue_one(DESC, smem, bar, row, col, slot, pred, BLOCK_N: gl.constexpr, D: gl.constexpr):
    """A TMA copy of one tile (rows row .. row + BLOCK_N, columns col .. col + D) into ring slot `slot`, signalling
    its barrier with the bytes it brings (skipped when pred is false)."""
    nbytes: gl.constexpr = BLOCK_N * D * DESC.dtype.primitive_bitwidth // 8
    mbarrier.expect(bar.index(slot), nbytes, pred=pred)
    tma.async_copy_global_to_shared(DESC, [row, col], bar.index(slot), smem.index(slot), pred=pred)


@gluon.jit
def _keys_end(CU_K_LAST, n_rows):
    """cu_seqlens_k[-1] (read at CU_K_LAST) where the key / value buffer (n_rows rows: the TMA descriptor's) runs on
    past it, else 2^30, which no tile reaches: the TMA copies fill rows past the buffer's end with zeros themselves,
    so a buffer that ends with its last sequence (the usual case) leaves _zero_rows_past nothing to do."""
    k_end = gl.load(CU_K_LAST)
    if k_end >= n_rows:
        k_end = 1 << 30
    return k_end


@gluon.jit
def _zero_rows_past(tile, n_ok, BLOCK_N: gl.constexpr, D: gl.constexpr, NW: gl.constexpr):
    """Rows n_ok .. BLOCK_N - 1 of a value tile in shared memory set to zero, where n_ok < BLOCK_N (a uniform
    branch): the TMA copy brought whole BLOCK_N-row tiles, so a tile that crosses the end of the last sequence
    (cu_seqlens_k[-1]) holds whatever the caller's buffer holds past it, and a zero probability times inf or NaN is
    NaN in the value product. Read and written back 32 rows at a time (16 registers a thread), then fenced for the
    warpgroup MMA that reads the tile and synchronized across the calling warps (the partition's, where warp
    specialized). Where two warp-specialized consumers share the tile, both may run this at once: they write the
    same bits (each row's own values, or zeros past n_ok), so the order does not matter."""
    if n_ok < BLOCK_N:
        CH: gl.constexpr = 32
        ld: gl.constexpr = gl.BlockedLayout([1, 8], [32 * 8 // D, D // 8], [NW, 1], [1, 0])
        for c in gl.static_range(BLOCK_N // CH):
            if (c + 1) * CH > n_ok:
                part = tile.slice(c * CH, CH)
                x = part.load(ld)
                r = c * CH + gl.arange(0, CH, layout=gl.SliceLayout(1, ld))
                keep = (r < n_ok)[:, None] & (gl.arange(0, D, layout=gl.SliceLayout(0, ld)) >= 0)[None, :]
                part.store(gl.where(keep, x, gl.zeros([CH, D], x.dtype, layout=ld)))
        fence_async_shared()
        gl.thread_barrier()


@gluon.jit
def _tile_bias(tab, base, E, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CLAMP: gl.constexpr, s_l: gl.constexpr,
               strip_l: gl.constexpr, GATHER: gl.constexpr = True, ACC: gl.constexpr = False, bias_mul=None,
               PAIRS: gl.constexpr = False, raw=None, raw_prev=None, DIAG: gl.constexpr = False):
    """A tile's bias in the base-2 domain, in the scores' layout: built from the strip of BLOCK_M + BLOCK_N - 1
    distances base .. (base: the tile's smallest distance, the first row's to the last key) by a gather (GATHER), or
    one cached table load per score. Independent of the scores, so it may be built while their product runs.
    ACC: in the unscaled domain of q.k instead (table x bias_mul = table / softmax_scale, kept finite), to start the
    score product's accumulator. raw: the strip's table values as _strip_raw loaded them earlier (GATHER), so no load
    here; with PAIRS also raw_prev, the strip one distance back (_strip_raw at base - 1)."""
    rows = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_l))
    cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_l))
    if raw is not None:
        gl.static_assert(GATHER, "a strip loaded ahead is gathered")
    if GATHER and PAIRS:
        # a thread holds each row's scores in column pairs (c, c + 1), c even: their distances are the strip's
        # t and t - 1 at t = r - c + BLOCK_N - 1, so one 64-bit gather of (strip[t], strip[t - 1]) serves both
        S_LEN: gl.constexpr = 2 * BLOCK_M if BLOCK_M >= BLOCK_N else 2 * BLOCK_N
        t = gl.arange(0, S_LEN, layout=strip_l)
        here = _bias_at(tab, base + t, E, CLAMP, ACC, bias_mul, raw).to(gl.uint32, bitcast=True).to(gl.uint64)
        prev = _bias_at(tab, base + t - 1, E, CLAMP, ACC, bias_mul, raw_prev).to(gl.uint32, bitcast=True)
        prev = prev.to(gl.uint64)
        packed = here | (prev << 32)
        gidx = rows[:, None] - cols[None, :] + (BLOCK_N - 1)
        g_even, g_odd = gl.split(gl.reshape(gidx, [BLOCK_M, BLOCK_N // 2, 2]))
        got = gl.gather(packed, gl.reshape(g_even, [BLOCK_M * (BLOCK_N // 2)]), 0)
        got = gl.reshape(got, [BLOCK_M, BLOCK_N // 2])
        b_even = (got & 0xFFFFFFFF).to(gl.uint32).to(gl.float32, bitcast=True)
        b_odd = (got >> 32).to(gl.uint32).to(gl.float32, bitcast=True)
        bias = gl.reshape(gl.join(b_even, b_odd), [BLOCK_M, BLOCK_N])
        bias = gl.convert_layout(bias, s_l)
    elif GATHER:
        S_LEN: gl.constexpr = 2 * BLOCK_M if BLOCK_M >= BLOCK_N else 2 * BLOCK_N
        t = gl.arange(0, S_LEN, layout=strip_l)
        strip = _bias_at(tab, base + t, E, CLAMP, ACC, bias_mul, raw)
        # distance of (row r, key column c) = base + r - c + BLOCK_N - 1: a Toeplitz tile of the strip
        if DIAG:
            gidx = _toeplitz_idx(BLOCK_M, BLOCK_N, s_l)
        else:
            gidx = rows[:, None] - cols[None, :] + (BLOCK_N - 1)
        bias = gl.reshape(gl.gather(strip, gl.reshape(gidx, [BLOCK_M * BLOCK_N]), 0), [BLOCK_M, BLOCK_N])
        bias = gl.convert_layout(bias, s_l)
    else:
        bias = _bias_at(tab, base + (rows[:, None] - cols[None, :] + (BLOCK_N - 1)), E, CLAMP, ACC, bias_mul)
    return bias


@gluon.jit
def _toeplitz_idx(BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, s_l: gl.constexpr):
    """r - c + BLOCK_N - 1 for each score (r, c) of a warpgroup MMA accumulator tile in s_l (instruction tiles of 16
    rows, BLOCK_M // 16 of them over the warps; a thread's rows r and r + 8 and its columns 8 i + 2 q + e), computed
    over the tile viewed as [BLOCK_M // 16, 2, 8, BLOCK_N // 8, 4, 2] = (warp rows w, h, lane rows l, column block i,
    lane pair q, e): row 16 w + 8 h + l, column 8 i + 2 q + e. The register dims (h, i, e) enter as constants, so the
    scores at (r + 8, c + 8) and (r, c) get one and the same index value, and their gathers one load."""
    z6 = gl.reshape(gl.zeros([BLOCK_M, BLOCK_N], gl.int32, s_l), [BLOCK_M // 16, 2, 8, BLOCK_N // 8, 4, 2])
    L6: gl.constexpr = z6.type.layout
    w = gl.arange(0, BLOCK_M // 16, layout=gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(3, gl.SliceLayout(4, gl.SliceLayout(5, L6))))))
    w = gl.expand_dims(gl.expand_dims(gl.expand_dims(gl.expand_dims(gl.expand_dims(w, 1), 2), 3), 4), 5)
    h = gl.arange(0, 2, layout=gl.SliceLayout(0, gl.SliceLayout(2, gl.SliceLayout(3, gl.SliceLayout(4, gl.SliceLayout(5, L6))))))
    h = gl.expand_dims(gl.expand_dims(gl.expand_dims(gl.expand_dims(gl.expand_dims(h, 0), 2), 3), 4), 5)
    lr = gl.arange(0, 8, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(3, gl.SliceLayout(4, gl.SliceLayout(5, L6))))))
    lr = gl.expand_dims(gl.expand_dims(gl.expand_dims(gl.expand_dims(gl.expand_dims(lr, 0), 1), 3), 4), 5)
    i = gl.arange(0, BLOCK_N // 8, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(4, gl.SliceLayout(5, L6))))))
    i = gl.expand_dims(gl.expand_dims(gl.expand_dims(gl.expand_dims(gl.expand_dims(i, 0), 1), 2), 4), 5)
    q = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(3, gl.SliceLayout(5, L6))))))
    q = gl.expand_dims(gl.expand_dims(gl.expand_dims(gl.expand_dims(gl.expand_dims(q, 0), 1), 2), 3), 5)
    e = gl.arange(0, 2, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(3, gl.SliceLayout(4, L6))))))
    e = gl.expand_dims(gl.expand_dims(gl.expand_dims(gl.expand_dims(gl.expand_dims(e, 0), 1), 2), 3), 4)
    idx6 = (16 * w + lr - 2 * q + (BLOCK_N - 1)) + (8 * h - 8 * i - e)
    return gl.reshape(idx6, [BLOCK_M, BLOCK_N])


@gluon.jit
def _strip_raw(tab, base, E, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, strip_l: gl.constexpr):
    """The table values of a tile's strip (distances base .. base + S_LEN - 1, each clamped into the table) as
    loaded, for _tile_bias(raw=...) to finish: issued a tile ahead (the warp-specialized kernel's AHEAD), the load's
    latency is off the path to the score product it starts."""
    S_LEN: gl.constexpr = 2 * BLOCK_M if BLOCK_M >= BLOCK_N else 2 * BLOCK_N
    t = gl.arange(0, S_LEN, layout=strip_l)
    return gl.load(tab + gl.minimum(gl.maximum(base + t, 0), E - 1))


@gluon.jit
def _bias_at(tab, dist, E, CLAMP: gl.constexpr, ACC: gl.constexpr, bias_mul, raw=None):
    """The bias at distances `dist` (clamped into the table; beyond the extent table[E - 1] with CLAMP, else 0): in
    the base-2 domain, or with ACC over softmax_scale (times bias_mul) and kept within ACC_BIAS_MAX. raw: the table
    values at the clamped distances, already loaded (_strip_raw)."""
    if raw is None:
        raw = gl.load(tab + gl.minimum(gl.maximum(dist, 0), E - 1))
    if ACC:
        b = raw * bias_mul
        b = gl.minimum(gl.maximum(b, -ACC_BIAS_MAX), ACC_BIAS_MAX)
    else:
        b = raw * LOG2E
    if not CLAMP:
        b = gl.where(dist < E, b, 0.0)  # beyond the extent: no bias
    return b


@gluon.jit
def _tile_scores(s, tab, base, E, n0, first_pos, seqlen_k, win, full_rows, qk_scale, MASKED: gl.constexpr,
                 BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HAS_WINDOW: gl.constexpr, CLAMP: gl.constexpr,
                 PERTURB: gl.constexpr, s_l: gl.constexpr, strip_l: gl.constexpr, GATHER: gl.constexpr = True,
                 bias=None, ACC: gl.constexpr = False):
    """A tile's scores in the base-2 domain: q.k scaled, plus the bias (_tile_bias; given as `bias` when it was
    built ahead, else built here), masked (MASKED) unless the tile is interior. full_rows: which rows of the block
    are queries of this sequence. ACC: s already holds q.k + bias / softmax_scale (the bias started the product's
    accumulator): only the masks are applied, and the scale is the softmax's (_softmax with ACC)."""
    if not ACC:
        s = s * qk_scale
    rows = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_l))
    cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_l))
    if PERTURB != 1 and not ACC:
        if bias is None:
            bias = _tile_bias(tab, base, E, BLOCK_M, BLOCK_N, CLAMP, s_l, strip_l, GATHER)
        s = s + bias
    if MASKED:
        d = (first_pos + rows)[:, None] - (n0 + cols)[None, :]
        vis = (d >= 0) & ((n0 + cols) < seqlen_k)[None, :] & full_rows[:, None]
        if HAS_WINDOW:
            vis = vis & (d < win)
        s = gl.where(vis, s, float("-inf"))
    return s


@gluon.jit
def _program_block(CU_Q, CU_K, window, HQ: gl.constexpr, GROUP: gl.constexpr, PERTURB: gl.constexpr,
                   HEAVY_FIRST: gl.constexpr):
    """This program's query block, sequence and head: (block index, query head h, then what _sequence_head returns
    for sequence b and head h; written out here, as calling it reorders the SASS of some gated variants). HEAVY_FIRST
    launches the last query blocks (the most keys) first."""
    if HEAVY_FIRST:  # the last query blocks see the most keys: launched first (a shorter tail)
        pid_m = gl.num_programs(0) - 1 - gl.program_id(0)
    else:
        pid_m = gl.program_id(0)
    b = gl.program_id(1)
    h = gl.program_id(2)
    if PERTURB == 4:
        g = (h // GROUP + 1) % (HQ // GROUP)
    else:
        g = h // GROUP
    q_start = gl.load(CU_Q + b)
    seqlen_q = gl.load(CU_Q + b + 1) - q_start
    k_start = gl.load(CU_K + b)
    seqlen_k = gl.load(CU_K + b + 1) - k_start
    if PERTURB == 3:
        win = window + 1
    else:
        win = window
    return pid_m, h, g, q_start, seqlen_q, k_start, seqlen_k, win


@gluon.jit
def _sequence_head(b, h, CU_Q, CU_K, window, HQ: gl.constexpr, GROUP: gl.constexpr, PERTURB: gl.constexpr):
    """Sequence b and query head h: (its KV head g, the sequence's query start and length, key start and length,
    the window). PERTURB 4 mixes up the GQA group, 3 widens the window by one."""
    if PERTURB == 4:
        g = (h // GROUP + 1) % (HQ // GROUP)
    else:
        g = h // GROUP
    q_start = gl.load(CU_Q + b)
    seqlen_q = gl.load(CU_Q + b + 1) - q_start
    k_start = gl.load(CU_K + b)
    seqlen_k = gl.load(CU_K + b + 1) - k_start
    if PERTURB == 3:
        win = window + 1
    else:
        win = window
    return g, q_start, seqlen_q, k_start, seqlen_k, win


@gluon.jit
def _key_range(m0, seqlen_q, seqlen_k, win, ROWS: gl.constexpr, BLOCK_N: gl.constexpr, HAS_WINDOW: gl.constexpr):
    """The keys rows m0 .. m0 + ROWS - 1 of the sequence see: (first row's position, last row's, hi, lo rounded down
    to a key tile, key tiles from lo): the causal upper end, the window's lower end (none past the queries)."""
    first_pos = seqlen_k - seqlen_q + m0
    last_pos = first_pos + ROWS - 1
    hi = gl.minimum(seqlen_k, last_pos + 1)
    hi = gl.where(m0 < seqlen_q, hi, 0)
    lo = 0
    if HAS_WINDOW:
        lo = gl.maximum(0, first_pos - win + 1)
        lo = (lo // BLOCK_N) * BLOCK_N
    kt = gl.cdiv(gl.maximum(hi - lo, 0), BLOCK_N)
    return first_pos, last_pos, hi, lo, kt


@gluon.jit
def _write_out(acc, m_i, l_i, OUT, LSE, q_start, m0, seqlen_q, h, stride_ot, stride_oh, stride_lt,
               ROWS: gl.constexpr, D: gl.constexpr, o_l: gl.constexpr, s_l: gl.constexpr, q_ld: gl.constexpr):
    """The epilogue for rows m0 .. m0 + ROWS - 1: out = acc / l (0 for a row that saw no key), LSE in natural log."""
    rq = gl.arange(0, ROWS, layout=gl.SliceLayout(1, q_ld))
    dq = gl.arange(0, D, layout=gl.SliceLayout(0, q_ld))
    rq_ok = (m0 + rq) < seqlen_q
    rows_s = gl.arange(0, ROWS, layout=gl.SliceLayout(1, s_l))
    full_rows = (m0 + rows_s) < seqlen_q
    nonempty = l_i != 0  # NaN (a NaN key) stays NaN: not the empty row
    den = gl.where(nonempty, l_i, 1.0)
    o = acc / gl.convert_layout(den, gl.SliceLayout(1, o_l))[:, None]
    o = gl.where(gl.convert_layout(nonempty, gl.SliceLayout(1, o_l))[:, None], o, 0.0)
    o = gl.convert_layout(o.to(OUT.dtype.element_ty), q_ld)
    gl.store(OUT + (q_start.to(gl.int64) + m0 + rq)[:, None] * stride_ot + h * stride_oh + dq[None, :], o,
             mask=rq_ok[:, None] & (dq[None, :] >= 0))
    lse = gl.where(nonempty, (m_i + gl.log2(den)) * LN2, float("-inf"))
    gl.store(LSE + (q_start.to(gl.int64) + m0 + rows_s) * stride_lt + h, lse, mask=full_rows)


@gluon.jit
def _halve(x, IS_MAX: gl.constexpr):
    """x [R, N] -> [R, N / 2]: column c combined with column c + N / 2 (max or sum), elementwise."""
    R: gl.constexpr = x.shape[0]
    N: gl.constexpr = x.shape[1]
    y = gl.reshape(x, [R, 2, N // 2])
    if IS_MAX:
        return gl.max(y, 1)
    else:
        return gl.sum(y, 1)


@gluon.jit
def _row_tree(x, IS_MAX: gl.constexpr):
    """The max or sum of each row of x [R, N], the columns halved pairwise down to 8 first (a tree of independent
    operations; in the warpgroup MMA layout a thread holds both halves while more than 8 columns remain) instead of
    one dependent chain along a thread's columns."""
    if x.shape[1] > 64:
        x = _halve(x, IS_MAX)
    if x.shape[1] > 32:
        x = _halve(x, IS_MAX)
    if x.shape[1] > 16:
        x = _halve(x, IS_MAX)
    if x.shape[1] > 8:
        x = _halve(x, IS_MAX)
    if IS_MAX:
        return gl.max(x, 1)
    else:
        return gl.sum(x, 1)


@gluon.jit
def _softmax(s, m_i, l_i, LAZY: gl.constexpr = False, ACC: gl.constexpr = False, qk_scale=None,
             TREE: gl.constexpr = False):
    """The online-softmax step for a score tile: (new max, p, new l, the accumulator's rescale factor). LAZY: a row
    keeps its running max unless the tile's exceeds it by more than LAZY_LOG2 (so p <= 2^LAZY_LOG2: no overflow), and
    its factor is then exactly 1; the same softmax in exact arithmetic. ACC: s is unscaled (q.k + bias / softmax_scale,
    softmax_scale > 0): the scale is applied in the exponent's one fused multiply-add, and to the tile's max."""
    if TREE:
        m_tile = gl.convert_layout(_row_tree(s, True), m_i.type.layout)
    else:
        m_tile = gl.max(s, 1)
    if ACC:
        m_tile = m_tile * qk_scale
    if LAZY:
        m_new = gl.where(m_tile > m_i + LAZY_LOG2, m_tile, m_i)  # -inf rows stay -inf (nan compares false)
    else:
        m_new = gl.maximum(m_i, m_tile)
    m_safe = gl.where(m_new == float("-inf"), 0.0, m_new)
    if ACC:
        p = gl.exp2(s * qk_scale - m_safe[:, None])
    else:
        p = gl.exp2(s - m_safe[:, None])
    if LAZY:
        alpha = gl.where(m_new == m_i, 1.0, gl.exp2(m_i - m_safe))
    else:
        alpha = gl.exp2(m_i - m_safe)
    if TREE:
        return m_new, p, l_i * alpha + gl.convert_layout(_row_tree(p, False), m_i.type.layout), alpha
    return m_new, p, l_i * alpha + gl.sum(p, 1), alpha


@gluon.jit
def _step(j, q_smem, k_smem, v_smem, kbar, vbar, K_DESC, V_DESC, krow, col, kt, m_i, l_i, acc, tab, lo, shift, E,
          first_pos, seqlen_k, win, full_rows, qk_scale, MASKED: gl.constexpr, BLOCK_M: gl.constexpr,
          BLOCK_N: gl.constexpr, D: gl.constexpr, STAGES: gl.constexpr, HAS_WINDOW: gl.constexpr,
          CLAMP: gl.constexpr, PERTURB: gl.constexpr, s_l: gl.constexpr, o_l: gl.constexpr, p_l: gl.constexpr,
          strip_l: gl.constexpr, GATHER: gl.constexpr, kv_left=0, ZERO_PAST: gl.constexpr = False):
    """Key tile j, both products synchronous; then its ring slot refilled with tile j + STAGES. ZERO_PAST (masked
    tiles): kv_left rows of the buffer from krow hold keys, the rest of a tile crossing it zeroed (_zero_rows_past)."""
    slot = j % STAGES
    phase = (j // STAGES) & 1
    n0 = lo + j * BLOCK_N
    mbarrier.wait(kbar.index(slot), phase)
    s = warpgroup_mma(q_smem, k_smem.index(slot).permute((1, 0)),
                      gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=s_l), use_acc=False)
    s = _tile_scores(s, tab, first_pos - (n0 + BLOCK_N - 1) + shift, E, n0, first_pos, seqlen_k, win, full_rows,
                     qk_scale, MASKED, BLOCK_M, BLOCK_N, HAS_WINDOW, CLAMP, PERTURB, s_l, strip_l, GATHER)
    m_i, p, l_i, alpha = _softmax(s, m_i, l_i)
    acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_l))[:, None]
    mbarrier.wait(vbar.index(slot), phase)
    if ZERO_PAST and MASKED:
        _zero_rows_past(v_smem.index(slot), kv_left - j * BLOCK_N, BLOCK_N, D, BLOCK_M // 16)
    acc = warpgroup_mma(gl.convert_layout(p.to(q_smem.dtype), p_l), v_smem.index(slot), acc)
    # the slot is free once both warpgroups are past its products
    gl.thread_barrier()
    jn = j + STAGES
    _issue_kv(K_DESC, V_DESC, k_smem, v_smem, kbar, vbar, krow + jn * BLOCK_N, col, slot, jn < kt, BLOCK_N, D)
    return m_i, l_i, acc


@gluon.jit
def _pipe_step(j, q_smem, k_smem, v_smem, kbar, vbar, K_DESC, V_DESC, krow, col, kt, m_i, l_i, acc, p_prev, tab, lo,
               shift, E, first_pos, seqlen_k, win, full_rows, qk_scale, MASKED: gl.constexpr, BLOCK_M: gl.constexpr,
               BLOCK_N: gl.constexpr, D: gl.constexpr, STAGES: gl.constexpr, HAS_WINDOW: gl.constexpr,
               CLAMP: gl.constexpr, PERTURB: gl.constexpr, s_l: gl.constexpr, o_l: gl.constexpr, p_l: gl.constexpr,
               strip_l: gl.constexpr, GATHER: gl.constexpr, EARLY: gl.constexpr = False, p_smem=None,
               P_SMEM: gl.constexpr = False, LAZY: gl.constexpr = False, ACC: gl.constexpr = False, bias_mul=None,
               KEARLY: gl.constexpr = False, TREE: gl.constexpr = False):
    """Key tile j (j >= 1) with the overlap: S_j and then P_{j-1} V_{j-1} issued, S_j waited, its softmax computed
    while the value product runs; then the tile j - 1 slot refilled with tile j - 1 + STAGES. EARLY: tile j's bias
    built while both products run, before S_j is waited for (its strip's load latency and the gather off the path
    from S_j to the softmax). P_SMEM: P goes to the value product through shared memory (p_smem) instead of
    registers, so no register of the in-flight product is an operand the compiler could reuse: ptxas waits for a
    register-operand product before the softmax, undoing the overlap (sm_90 SASS: the wait for all groups lands
    before the exponentials). LAZY: running maxima kept unless they grow by more than 2^LAZY_LOG2, and the
    accumulator rescaled only when some row's factor is not 1 (a branch the whole program takes or skips). ACC: the
    tile's bias (over softmax_scale) starts the score product's accumulator, so the softmax takes one fused
    multiply-add per score where it took a multiply-add and an add. KEARLY: tile j's key slot takes key tile
    j + STAGES as soon as S_j is done (during the softmax), and the end of the step refills only the value slot."""
    slot = j % STAGES
    n0 = lo + j * BLOCK_N
    if ACC and PERTURB != 1:
        base = first_pos - (n0 + BLOCK_N - 1) + shift
        s0 = _tile_bias(tab, base, E, BLOCK_M, BLOCK_N, CLAMP, s_l, strip_l, GATHER, True, bias_mul)
        mbarrier.wait(kbar.index(slot), (j // STAGES) & 1)
        s_tok = warpgroup_mma(q_smem, k_smem.index(slot).permute((1, 0)), s0, use_acc=True, is_async=True)
    else:
        mbarrier.wait(kbar.index(slot), (j // STAGES) & 1)
        s_tok = warpgroup_mma(q_smem, k_smem.index(slot).permute((1, 0)),
                              gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=s_l), use_acc=False, is_async=True)
    pslot = (j - 1) % STAGES
    mbarrier.wait(vbar.index(pslot), ((j - 1) // STAGES) & 1)
    if P_SMEM:
        acc_tok = warpgroup_mma(p_smem, v_smem.index(pslot), acc, is_async=True)
    else:
        acc_tok = warpgroup_mma(p_prev, v_smem.index(pslot), acc, is_async=True)
    base = first_pos - (n0 + BLOCK_N - 1) + shift
    bias = None
    if EARLY and PERTURB != 1:
        bias = _tile_bias(tab, base, E, BLOCK_M, BLOCK_N, CLAMP, s_l, strip_l, GATHER)
    s = warpgroup_mma_wait(1, deps=[s_tok])  # S_j done (groups complete in order); P V may still run
    if KEARLY:
        if BLOCK_M > 64:
            gl.thread_barrier()  # both warpgroups past their score products
        _issue_one(K_DESC, k_smem, kbar, krow + (j + STAGES) * BLOCK_N, col, slot, j + STAGES < kt, BLOCK_N, D)
    s = _tile_scores(s, tab, base, E, n0, first_pos, seqlen_k, win, full_rows, qk_scale, MASKED, BLOCK_M, BLOCK_N,
                     HAS_WINDOW, CLAMP, PERTURB, s_l, strip_l, GATHER, bias, ACC)
    m_i, p, l_i, alpha = _softmax(s, m_i, l_i, LAZY, ACC, qk_scale, TREE)
    if LAZY:  # some row's max grew: the accumulator needs its rescale (a value uniform over the program)
        moved = gl.max(gl.where(alpha != 1.0, 1, 0), 0) > 0
    if P_SMEM:
        acc = warpgroup_mma_wait(0, deps=[acc_tok])
        if not LAZY:
            acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_l))[:, None]
        p_smem.store(p.to(q_smem.dtype))  # tile j - 1's product has read the buffer
        fence_async_shared()  # visible to the next step's product (after the barrier below)
    else:
        acc, p_prev = warpgroup_mma_wait(0, deps=[acc_tok, p_prev])
        if not LAZY:
            acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_l))[:, None]
        p_prev = gl.convert_layout(p.to(q_smem.dtype), p_l)
    if LAZY:
        if moved:
            acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_l))[:, None]
    # tile j - 1's slot is free once both warpgroups are past its value product: refill it
    gl.thread_barrier()
    jn = j - 1 + STAGES
    if KEARLY:  # its key tile was issued during step j - 1
        _issue_one(V_DESC, v_smem, vbar, krow + jn * BLOCK_N, col, pslot, jn < kt, BLOCK_N, D)
    else:
        _issue_kv(K_DESC, V_DESC, k_smem, v_smem, kbar, vbar, krow + jn * BLOCK_N, col, pslot, jn < kt, BLOCK_N, D)
    return m_i, l_i, acc, p_prev


@gluon.jit
def relbias_fwd_gluon_kernel(
    Q, K_DESC, V_DESC, TABLE, OUT, LSE, CU_Q, CU_K,
    sm_scale, E, window,
    stride_qt, stride_qh, stride_ot, stride_oh, stride_lt,
    HQ: gl.constexpr, GROUP: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
    HAS_WINDOW: gl.constexpr, CLAMP: gl.constexpr, PERTURB: gl.constexpr, HEAVY_FIRST: gl.constexpr = True,
    PIPE: gl.constexpr = False, GATHER: gl.constexpr = True, PDL: gl.constexpr = False, EARLY: gl.constexpr = False,
    P_SMEM: gl.constexpr = False, LAZY: gl.constexpr = False, ACC: gl.constexpr = False, KEARLY: gl.constexpr = False,
    TREE: gl.constexpr = False, ZERO_PAST: gl.constexpr = True,
):
    pdl_entry(PDL)
    NW: gl.constexpr = gl.num_warps()
    BLOCK_M: gl.constexpr = 16 * NW  # 64 rows per warpgroup
    D: gl.constexpr = HEAD_DIM
    gl.static_assert((NW == 4) or (NW == 8), "one or two warpgroups")
    gl.static_assert((D == 64) or (D == 128), "head dim 64 or 128")
    gl.static_assert(STAGES >= 2, "a ring of at least two tiles")
    dtype: gl.constexpr = Q.dtype.element_ty
    s_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[NW, 1], instr_shape=[16, BLOCK_N, 16])
    o_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[NW, 1], instr_shape=[16, D, 16])
    p_l: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_l, k_width=2)
    q_ld: gl.constexpr = gl.BlockedLayout([1, 8], [32 * 8 // D, D // 8], [NW, 1], [1, 0])
    strip_l: gl.constexpr = gl.BlockedLayout([1], [32], [NW], [0])
    q_sl: gl.constexpr = gl.NVMMASharedLayout(128 if D * 2 >= 128 else 64, 16, rank=2)
    kv_sl: gl.constexpr = K_DESC.layout

    pid_m, h, g, q_start, seqlen_q, k_start, seqlen_k, win = _program_block(CU_Q, CU_K, window, HQ, GROUP, PERTURB,
                                                                            HEAVY_FIRST)
    m0 = pid_m * BLOCK_M

    # ---- Q [BLOCK_M, D] into shared memory (rows past the sequence's queries are zeros)
    rq = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, q_ld))
    dq = gl.arange(0, D, layout=gl.SliceLayout(0, q_ld))
    rq_ok = (m0 + rq) < seqlen_q
    q = gl.load(Q + (q_start.to(gl.int64) + m0 + rq)[:, None] * stride_qt + h * stride_qh + dq[None, :],
                mask=rq_ok[:, None] & (dq[None, :] >= 0), other=0.0)
    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, D], q_sl)
    q_smem.store(q)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, D], kv_sl)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, D], kv_sl)
    kbar = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    vbar = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(kbar.index(i), count=1)
        mbarrier.init(vbar.index(i), count=1)
    fence_async_shared()
    gl.thread_barrier()

    # ---- the key range: causal upper end, window lower end (tiles outside both are never visited)
    first_pos, last_pos, hi, lo, kt = _key_range(m0, seqlen_q, seqlen_k, win, BLOCK_M, BLOCK_N, HAS_WINDOW)
    full = m0 + BLOCK_M <= seqlen_q  # every row of the block is a query of this sequence
    rows_s = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_l))
    full_rows = (m0 + rows_s) < seqlen_q
    tab = TABLE + h * E
    shift = 0
    if PERTURB == 2:
        shift = BLOCK_N
    qk_scale = sm_scale * LOG2E
    bias_mul = 1.0 / sm_scale  # ACC (the host passes softmax_scale > 0)
    col = g * D
    krow = k_start + lo
    kv_left = 0
    if ZERO_PAST:  # the rows of the buffer from krow that hold keys: past cu_seqlens_k[-1] (B = the grid's y) none
        kv_left = _keys_end(CU_K + gl.num_programs(1), V_DESC.shape[0]) - krow

    # three loops over the key tiles j = 0 .. kt - 1 (n0 = lo + j BLOCK_N), each of one kind: [0, ja) masked (the
    # window's leading edge), [ja, jb) interior (every key visible to every row: no mask), [jb, kt) masked (the
    # diagonal); a block with rows past the sequence's queries is masked throughout
    ja = 0
    if HAS_WINDOW:
        ja = gl.cdiv(gl.maximum(last_pos - win + 1 - lo, 0), BLOCK_N)
    jb = gl.where(first_pos - BLOCK_N + 1 - lo >= 0, (first_pos - BLOCK_N + 1 - lo) // BLOCK_N + 1, 0)
    ja = gl.where(full, gl.minimum(ja, kt), kt)
    jb = gl.where(full, gl.minimum(gl.maximum(jb, ja), kt), kt)

    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, layout=gl.SliceLayout(1, s_l))
    l_i = gl.zeros([BLOCK_M], gl.float32, layout=gl.SliceLayout(1, s_l))
    acc = gl.zeros([BLOCK_M, D], gl.float32, layout=o_l)
    if PIPE:
        # FlashAttention-3's intra-warpgroup overlap: P_{j-1} V_{j-1} runs while tile j's softmax is computed. The
        # ring starts full; tile j - 1's slot is refilled (with tile j - 1 + STAGES) once its values are used.
        for i in gl.static_range(STAGES):
            _issue_kv(K_DESC, V_DESC, k_smem, v_smem, kbar, vbar, krow + i * BLOCK_N, col, i, i < kt, BLOCK_N, D)
        p_prev = gl.zeros([BLOCK_M, BLOCK_N], dtype, layout=p_l)
        p_smem = None
        if P_SMEM:
            p_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, BLOCK_N], gl.NVMMASharedLayout(128, 16, rank=2))
        if kt > 0:  # tile 0: its scores and softmax (its value product runs in the next step)
            if ACC and PERTURB != 1:
                s0 = _tile_bias(tab, first_pos - (lo + BLOCK_N - 1) + shift, E, BLOCK_M, BLOCK_N, CLAMP, s_l, strip_l, GATHER, True, bias_mul)
                mbarrier.wait(kbar.index(0), 0)
                s = warpgroup_mma(q_smem, k_smem.index(0).permute((1, 0)), s0, use_acc=True)
            else:
                mbarrier.wait(kbar.index(0), 0)
                s = warpgroup_mma(q_smem, k_smem.index(0).permute((1, 0)),
                                  gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=s_l), use_acc=False)
            if KEARLY:  # key tile 0 read: its slot takes key tile STAGES
                if BLOCK_M > 64:
                    gl.thread_barrier()
                _issue_one(K_DESC, k_smem, kbar, krow + STAGES * BLOCK_N, col, 0, STAGES < kt, BLOCK_N, D)
            s = _tile_scores(s, tab, first_pos - (lo + BLOCK_N - 1) + shift, E, lo, first_pos, seqlen_k, win, full_rows, qk_scale, True, BLOCK_M,
                             BLOCK_N, HAS_WINDOW, CLAMP, PERTURB, s_l, strip_l, GATHER, None, ACC)
            m_i, p, l_i, alpha = _softmax(s, m_i, l_i, False, ACC, qk_scale, TREE)
            if P_SMEM:
                p_smem.store(p.to(dtype))
                fence_async_shared()
                gl.thread_barrier()  # every warp's P in place before the product reads it
            else:
                p_prev = gl.convert_layout(p.to(dtype), p_l)
        j1 = gl.maximum(ja, 1)
        j2 = gl.maximum(jb, 1)
        for j in range(1, j1):
            m_i, l_i, acc, p_prev = _pipe_step(j, q_smem, k_smem, v_smem, kbar, vbar, K_DESC, V_DESC, krow, col, kt,
                                               m_i, l_i, acc, p_prev, tab, lo, shift, E, first_pos, seqlen_k, win,
                                               full_rows, qk_scale, True, BLOCK_M, BLOCK_N, D, STAGES, HAS_WINDOW,
                                               CLAMP, PERTURB, s_l, o_l, p_l, strip_l, GATHER, EARLY, p_smem,
                                               P_SMEM, LAZY, ACC, bias_mul, KEARLY, TREE)
        for j in range(j1, j2):
            m_i, l_i, acc, p_prev = _pipe_step(j, q_smem, k_smem, v_smem, kbar, vbar, K_DESC, V_DESC, krow, col, kt,
                                               m_i, l_i, acc, p_prev, tab, lo, shift, E, first_pos, seqlen_k, win,
                                               full_rows, qk_scale, False, BLOCK_M, BLOCK_N, D, STAGES, HAS_WINDOW,
                                               CLAMP, PERTURB, s_l, o_l, p_l, strip_l, GATHER, EARLY, p_smem,
                                               P_SMEM, LAZY, ACC, bias_mul, KEARLY, TREE)
        for j in range(j2, kt):
            m_i, l_i, acc, p_prev = _pipe_step(j, q_smem, k_smem, v_smem, kbar, vbar, K_DESC, V_DESC, krow, col, kt,
                                               m_i, l_i, acc, p_prev, tab, lo, shift, E, first_pos, seqlen_k, win,
                                               full_rows, qk_scale, True, BLOCK_M, BLOCK_N, D, STAGES, HAS_WINDOW,
                                               CLAMP, PERTURB, s_l, o_l, p_l, strip_l, GATHER, EARLY, p_smem,
                                               P_SMEM, LAZY, ACC, bias_mul, KEARLY, TREE)
        if kt > 0:
            lslot = (kt - 1) % STAGES
            mbarrier.wait(vbar.index(lslot), ((kt - 1) // STAGES) & 1)
            if ZERO_PAST:
                _zero_rows_past(v_smem.index(lslot), kv_left - (kt - 1) * BLOCK_N, BLOCK_N, D, NW)
            if P_SMEM:
                acc = warpgroup_mma(p_smem, v_smem.index(lslot), acc)
            else:
                acc = warpgroup_mma(p_prev, v_smem.index(lslot), acc)
    else:
        for i in gl.static_range(STAGES):  # the ring's first tiles
            _issue_kv(K_DESC, V_DESC, k_smem, v_smem, kbar, vbar, krow + i * BLOCK_N, col, i, i < kt, BLOCK_N, D)
        for j in range(0, ja):
            m_i, l_i, acc = _step(j, q_smem, k_smem, v_smem, kbar, vbar, K_DESC, V_DESC, krow, col, kt, m_i, l_i, acc,
                                  tab, lo, shift, E, first_pos, seqlen_k, win, full_rows, qk_scale, True, BLOCK_M,
                                  BLOCK_N, D, STAGES, HAS_WINDOW, CLAMP, PERTURB, s_l, o_l, p_l, strip_l, GATHER,
                                  kv_left, ZERO_PAST)
        for j in range(ja, jb):
            m_i, l_i, acc = _step(j, q_smem, k_smem, v_smem, kbar, vbar, K_DESC, V_DESC, krow, col, kt, m_i, l_i, acc,
                                  tab, lo, shift, E, first_pos, seqlen_k, win, full_rows, qk_scale, False, BLOCK_M,
                                  BLOCK_N, D, STAGES, HAS_WINDOW, CLAMP, PERTURB, s_l, o_l, p_l, strip_l, GATHER)
        for j in range(jb, kt):
            m_i, l_i, acc = _step(j, q_smem, k_smem, v_smem, kbar, vbar, K_DESC, V_DESC, krow, col, kt, m_i, l_i, acc,
                                  tab, lo, shift, E, first_pos, seqlen_k, win, full_rows, qk_scale, True, BLOCK_M,
                                  BLOCK_N, D, STAGES, HAS_WINDOW, CLAMP, PERTURB, s_l, o_l, p_l, strip_l, GATHER,
                                  kv_left, ZERO_PAST)

    for i in gl.static_range(STAGES):
        mbarrier.invalidate(kbar.index(i))
        mbarrier.invalidate(vbar.index(i))

    _write_out(acc, m_i, l_i, OUT, LSE, q_start, m0, seqlen_q, h, stride_ot, stride_oh, stride_lt, BLOCK_M, D, o_l,
               s_l, q_ld)
