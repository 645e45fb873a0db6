"""relbias forward kernel for Hopper (sm_90) in Gluon, warp-specialized: a TMA producer warp and two consumer
warpgroups that share every key / value tile.

Computes   what kernel_fwd_gluon.relbias_fwd_gluon_kernel computes (and its Triton twin kernel_fwd.relbias_fwd_kernel:
           same output, LSE, bias, masks and perturbations) for contiguous varlen k, v in q's dtype (bf16 or fp16).
Why        the one-warpgroup Gluon kernel leaves the SM's tensor pipe 46 % busy at prefill 8K where cuDNN keeps it 70 %
           busy (benchmarks/experiments/ncu-h200-aac31d0/): each 64-row program re-reads every key and value tile
           (L2 throughput 66 %) and one warpgroup's softmax and bias gather stall its own products. cuDNN's and
           FlashAttention-3's schedule: one producer warp issues the TMA loads, two consumer warpgroups of 64 query
           rows each read the same tiles from a ring, and the warp scheduler runs one warpgroup's softmax while the
           other's products run.
Schedule   program = 128 query rows of one (sequence, query head): consumer c takes rows 64c .. 64c + 63. The
           producer walks the union of the two consumers' key ranges (tiles lo .. lo + kt BLOCK_N), each tile into a
           ring slot of STAGES, and waits for a slot's "empty" barrier (both consumers arrive) before refilling it.
           Each consumer runs the overlapped step of the one-warpgroup kernel (tile j's scores and softmax while
           P_{j-1} V_{j-1} runs; the bias from each tile's strip, ACC: starting the score product's accumulator) over
           its own tiles, and on the tiles of the union it does not need (the other warpgroup's diagonal or window
           edge) waits for them and releases them unread. PINGPONG: the two consumers take turns issuing their
           products (an mbarrier pair; FlashAttention-3's warp-scheduler barrier), so one's softmax runs under the
           other's products: one turn per union tile for each consumer, in tile order, taken also on the tiles it
           releases unread (turns counted per consumer's own tiles deadlock once one consumer skips more tiles than
           the ring holds, as a block whose second half has no query rows does).
AHEAD      each tile's strip of table values loaded a tile ahead (issued with the previous tile's products, kept
           in two registers a thread) instead of at the start of its own step, where the load's round trip to L2
           (each tile's strip reaches 128 distances past the last one's) came before the score product it starts
           (the option gluon_bias_ahead); the same values, so the same bits.
DIAG       each tile's bias gathered with its index computed over the tile viewed by its accumulator registers, so
           that the scores (r + 8, c + 8) and (r, c) of a thread share one index and one shared-memory load (34 loads
           a thread instead of 63; the other values copied between registers); the option gluon_bias_diag.
UNROLL2    (with AHEAD) the interior loop runs two tiles an iteration, so that P alternates between two register sets
           instead of being copied into the value product's operand registers each tile (the option gluon_ws_unroll).
TREE       each tile's row maxima and sums as trees (column halves combined elementwise down to 8 columns, then
           across the quad) instead of one dependent chain per row along a thread's 32 columns (the option
           gluon_tree_reduce); the sums' order differs from the chain's, so the results may differ in the last bits.
Registers  the producer warp 24, the second consumer warpgroup 240, the first what is left of maxnreg x 12 warps
           (the launcher passes maxnreg 168: 168 x 3 warpgroups - 240 - 24 = 240).
Persistent relbias_fwd_gluon_ws_persistent_kernel: the same partitions on a grid of one program per SM, each
           walking work items (query blocks from the last) with the ring's tile count carried across them.
Contract   as kernel_fwd_gluon (the same descriptors, table, out, LSE); HEAD_DIM 64 or 128; BLOCK_N 64 or 128.
Runs       CUDA sm_90 only (Gluon has no interpreter): gate "relbias/gluon_fwd_ws", tests/test_relbias_gluon.py.
PERTURB    as the twin: 1 bias dropped, 2 bias shifted by one KV block, 3 window off by one, 4 GQA group mixed up.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)

from .kernel_fwd_gluon import (LOG2E, _key_range, _keys_end, _program_block, _sequence_head, _softmax, _strip_raw,
                               _tile_bias, _tile_scores, _write_out, _zero_rows_past)

WG_ROWS: gl.constexpr = gl.constexpr(64)  # query rows per consumer warpgroup
WG_WARPS: gl.constexpr = gl.constexpr(4)


@gluon.jit
def _ws_producer(K_DESC, V_DESC, k_smem, v_smem, kbar, vbar, empty, kempty, krow, col, kt, it, BLOCK_N: gl.constexpr,
                 D: gl.constexpr, STAGES: gl.constexpr, KREL: gl.constexpr = False):
    """The producer warp: tile j of the union (the ring's tile it + j: it counts the tiles of the program's earlier
    work) into slot (it + j) % STAGES, once both consumers released the slot's last tile (a fresh barrier counts as
    released: the wait on the opposite parity passes). KREL: the key slot has its own barrier (kempty), released
    once the consumers' score products read it, so the next key tile is loaded during the softmax."""
    nbytes: gl.constexpr = BLOCK_N * D * K_DESC.dtype.primitive_bitwidth // 8
    for j in range(kt):
        slot = (it + j) % STAGES
        if KREL:
            mbarrier.wait(kempty.index(slot), (((it + j) // STAGES) & 1) ^ 1)
        else:
            mbarrier.wait(empty.index(slot), (((it + j) // STAGES) & 1) ^ 1)
        row = krow + j * BLOCK_N
        mbarrier.expect(kbar.index(slot), nbytes)
        tma.async_copy_global_to_shared(K_DESC, [row, col], kbar.index(slot), k_smem.index(slot))
        if KREL:
            mbarrier.wait(empty.index(slot), (((it + j) // STAGES) & 1) ^ 1)
        mbarrier.expect(vbar.index(slot), nbytes)
        tma.async_copy_global_to_shared(V_DESC, [row, col], vbar.index(slot), v_smem.index(slot))


@gluon.jit
def _ws_release(j0, j1, it, kbar, vbar, empty, kempty, turn, c: gl.constexpr, STAGES: gl.constexpr,
                PINGPONG: gl.constexpr, KREL: gl.constexpr = False):
    """Tiles j0 .. j1 - 1 of the union, which this consumer does not need: waited for (so a slot is never refilled
    while its copy runs) and released unread; with PINGPONG each still takes its turn (tile j is every consumer's
    turn j, so neither waits for a turn behind a tile the other has not released: no deadlock)."""
    for j in range(j0, j1):
        slot = (it + j) % STAGES
        phase = ((it + j) // STAGES) & 1
        mbarrier.wait(kbar.index(slot), phase)
        mbarrier.wait(vbar.index(slot), phase)
        _ws_turn(turn, c, it + j, PINGPONG)
        if KREL:
            mbarrier.arrive(kempty.index(slot), count=1)
        mbarrier.arrive(empty.index(slot), count=1)
        _ws_pass(turn, c, PINGPONG)


@gluon.jit
def _ws_turn(turn, c: gl.constexpr, i, PINGPONG: gl.constexpr):
    """PINGPONG: wait for this consumer's turn i (union tile i) to issue its products (consumer 0 first). Both
    consumers take one turn per union tile, in tile order, computed or released unread."""
    if PINGPONG:
        mbarrier.wait(turn.index(c), i & 1)


@gluon.jit
def _ws_pass(turn, c: gl.constexpr, PINGPONG: gl.constexpr):
    """PINGPONG: hand the turn to the other consumer."""
    if PINGPONG:
        mbarrier.arrive(turn.index(1 - c), count=1)


@gluon.jit
def _ws_step(j, it, q_smem, k_smem, v_smem, kbar, vbar, empty, kempty, turn, m_i, l_i, acc, p_prev, tab, lo, shift, E,
             first_pos, seqlen_k, win, full_rows, qk_scale, bias_mul, c: gl.constexpr, MASKED: gl.constexpr,
             BLOCK_N: gl.constexpr, STAGES: gl.constexpr, HAS_WINDOW: gl.constexpr, CLAMP: gl.constexpr,
             PERTURB: gl.constexpr, s_l: gl.constexpr, o_l: gl.constexpr, p_l: gl.constexpr, strip_l: gl.constexpr,
             GATHER: gl.constexpr, ACC: gl.constexpr, PINGPONG: gl.constexpr, KREL: gl.constexpr = False,
             TREE: gl.constexpr = False, PAIRS: gl.constexpr = False, raw=None, raw_prev=None,
             AHEAD: gl.constexpr = False, DIAG: gl.constexpr = False):
    """Union tile j (the ring's tile it + j, this consumer's turn it + j; not its first tile): S_j and P_{j-1} V_{j-1}
    issued, S_j waited, its softmax while the value product runs; then tile j - 1's slot released to the producer.
    AHEAD: raw is tile j's strip as loaded during the step before (with PAIRS also raw_prev, the strip one distance
    back), and tile j + 1's are loaded once the products are issued (the fifth and sixth values returned; else
    placeholders)."""
    slot = (it + j) % STAGES
    n0 = lo + j * BLOCK_N
    base = first_pos - (n0 + BLOCK_N - 1) + shift
    if ACC and PERTURB != 1:
        if AHEAD:
            s0 = _tile_bias(tab, base, E, WG_ROWS, BLOCK_N, CLAMP, s_l, strip_l, GATHER, True, bias_mul, PAIRS, raw,
                            raw_prev, DIAG)
        else:
            s0 = _tile_bias(tab, base, E, WG_ROWS, BLOCK_N, CLAMP, s_l, strip_l, GATHER, True, bias_mul, PAIRS,
                            DIAG=DIAG)
    else:
        s0 = gl.zeros([WG_ROWS, BLOCK_N], gl.float32, layout=s_l)
    pslot = (it + j - 1) % STAGES
    mbarrier.wait(kbar.index(slot), ((it + j) // STAGES) & 1)
    mbarrier.wait(vbar.index(pslot), ((it + j - 1) // STAGES) & 1)
    _ws_turn(turn, c, it + j, PINGPONG)
    s_tok = warpgroup_mma(q_smem, k_smem.index(slot).permute((1, 0)), s0, use_acc=ACC and PERTURB != 1,
                          is_async=True)
    acc_tok = warpgroup_mma(p_prev, v_smem.index(pslot), acc, is_async=True)
    _ws_pass(turn, c, PINGPONG)
    if AHEAD:  # tile j + 1's strip (a tile's smallest distance falls by BLOCK_N a tile), in flight during this step
        raw = _strip_raw(tab, base - BLOCK_N, E, WG_ROWS, BLOCK_N, strip_l)
        if PAIRS:
            raw_prev = _strip_raw(tab, base - BLOCK_N - 1, E, WG_ROWS, BLOCK_N, strip_l)
        else:
            raw_prev = 0
    else:
        raw = 0  # placeholders the caller drops (one return statement, so one type)
        raw_prev = 0
    s = warpgroup_mma_wait(1, deps=[s_tok])  # S_j done (groups complete in order); P V may still run
    if KREL:
        mbarrier.arrive(kempty.index(slot), count=1)  # key tile j read: the producer may refill its slot
    s = _tile_scores(s, tab, base, E, n0, first_pos, seqlen_k, win, full_rows, qk_scale, MASKED, WG_ROWS, BLOCK_N,
                     HAS_WINDOW, CLAMP, PERTURB, s_l, strip_l, GATHER, None, ACC)
    m_i, p, l_i, alpha = _softmax(s, m_i, l_i, False, ACC, qk_scale, TREE)
    acc, p_prev = warpgroup_mma_wait(0, deps=[acc_tok, p_prev])
    mbarrier.arrive(empty.index(pslot), count=1)  # tile j - 1 read by both products (KREL: its value tile)
    acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_l))[:, None]
    p_prev = gl.convert_layout(p.to(q_smem.dtype), p_l)
    return m_i, l_i, acc, p_prev, raw, raw_prev


@gluon.jit
def _ws_consumer(c: gl.constexpr, Q, OUT, LSE, TABLE, q_all, k_smem, v_smem, kbar, vbar, empty, kempty, turn, q_start,
                 seqlen_q, k_start, seqlen_k, m_base, lo, kt, it, h, win, sm_scale, E,
                 stride_qt, stride_qh, stride_ot, stride_oh, stride_lt,
                 HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, HAS_WINDOW: gl.constexpr,
                 CLAMP: gl.constexpr, PERTURB: gl.constexpr, GATHER: gl.constexpr, ACC: gl.constexpr,
                 PINGPONG: gl.constexpr, KREL: gl.constexpr = False, TREE: gl.constexpr = False,
                 PAIRS: gl.constexpr = False, AHEAD: gl.constexpr = False, DIAG: gl.constexpr = False,
                 UNROLL2: gl.constexpr = False, k_end=0, ZERO_PAST: gl.constexpr = False):
    """Consumer warpgroup c: query rows m_base + 64c .. + 63 over its tiles of the union (the ring's tiles it ..
    it + kt - 1), then out and LSE. ZERO_PAST: value rows past k_end (cu_seqlens_k[-1]) in its last tile zeroed
    before its product reads them (_zero_rows_past)."""
    D: gl.constexpr = HEAD_DIM
    dtype: gl.constexpr = Q.dtype.element_ty
    s_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WG_WARPS, 1],
                                                  instr_shape=[16, BLOCK_N, 16])
    o_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WG_WARPS, 1], instr_shape=[16, D, 16])
    p_l: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_l, k_width=2)
    q_ld: gl.constexpr = gl.BlockedLayout([1, 8], [32 * 8 // D, D // 8], [WG_WARPS, 1], [1, 0])
    strip_l: gl.constexpr = gl.BlockedLayout([1], [32], [WG_WARPS], [0])
    m0 = m_base + c * WG_ROWS

    # ---- this warpgroup's Q [64, D] into its shared buffer (rows past the sequence's queries are zeros)
    rq = gl.arange(0, WG_ROWS, layout=gl.SliceLayout(1, q_ld))
    dq = gl.arange(0, D, layout=gl.SliceLayout(0, q_ld))
    rq_ok = (m0 + rq) < seqlen_q
    q = gl.load(Q + (q_start.to(gl.int64) + m0 + rq)[:, None] * stride_qt + h * stride_qh + dq[None, :],
                mask=rq_ok[:, None] & (dq[None, :] >= 0), other=0.0)
    q_smem = q_all.index(c)
    q_smem.store(q)
    fence_async_shared()
    gl.thread_barrier()  # this partition's warps: every row of Q in place before the products read it

    # ---- this warpgroup's tiles of the union: [js, je); masked [js, ja), interior [ja, jb), masked [jb, je)
    first_pos = seqlen_k - seqlen_q + m0
    last_pos = first_pos + WG_ROWS - 1
    hi = gl.minimum(seqlen_k, last_pos + 1)
    hi = gl.where(m0 < seqlen_q, hi, 0)
    my_lo = lo
    if HAS_WINDOW:
        my_lo = gl.maximum(lo, first_pos - win + 1)
    js = gl.minimum((my_lo - lo) // BLOCK_N, kt)
    je = gl.minimum(gl.maximum(gl.cdiv(gl.maximum(hi - lo, 0), BLOCK_N), js), kt)
    full = m0 + WG_ROWS <= seqlen_q
    ja = js
    if HAS_WINDOW:
        ja = gl.cdiv(gl.maximum(last_pos - win + 1 - lo, 0), BLOCK_N)
    jb = gl.where(first_pos - BLOCK_N + 1 - lo >= 0, (first_pos - BLOCK_N + 1 - lo) // BLOCK_N + 1, 0)
    ja = gl.where(full, gl.minimum(gl.maximum(ja, js), je), je)
    jb = gl.where(full, gl.minimum(gl.maximum(jb, ja), je), je)
    rows_s = gl.arange(0, WG_ROWS, layout=gl.SliceLayout(1, s_l))
    full_rows = (m0 + rows_s) < seqlen_q
    tab = TABLE + h * E
    shift = 0
    if PERTURB == 2:
        shift = BLOCK_N
    qk_scale = sm_scale * LOG2E
    bias_mul = 1.0 / sm_scale  # ACC (the host passes softmax_scale > 0)

    _ws_release(0, js, it, kbar, vbar, empty, kempty, turn, c, STAGES, PINGPONG, KREL)
    m_i = gl.full([WG_ROWS], float("-inf"), gl.float32, layout=gl.SliceLayout(1, s_l))
    l_i = gl.zeros([WG_ROWS], gl.float32, layout=gl.SliceLayout(1, s_l))
    acc = gl.zeros([WG_ROWS, D], gl.float32, layout=o_l)
    p_prev = gl.zeros([WG_ROWS, BLOCK_N], dtype, layout=p_l)
    AHEAD_ON: gl.constexpr = AHEAD and ACC and PERTURB != 1  # a strip loaded ahead only where one starts the product
    if AHEAD_ON:  # tile js + 1's strip, loaded during tile js (tile js's own with it, just below)
        raw = _strip_raw(tab, first_pos - (lo + js * BLOCK_N + 2 * BLOCK_N - 1) + shift, E, WG_ROWS, BLOCK_N, strip_l)
        if PAIRS:
            raw_prev = _strip_raw(tab, first_pos - (lo + js * BLOCK_N + 2 * BLOCK_N) + shift, E, WG_ROWS, BLOCK_N,
                                  strip_l)
        else:
            raw_prev = 0
    if je > js:  # tile js: its scores and softmax (its value product runs in the next step)
        base = first_pos - (lo + js * BLOCK_N + BLOCK_N - 1) + shift
        if ACC and PERTURB != 1:
            s0 = _tile_bias(tab, base, E, WG_ROWS, BLOCK_N, CLAMP, s_l, strip_l, GATHER, True, bias_mul, PAIRS,
                            DIAG=DIAG)
        else:
            s0 = gl.zeros([WG_ROWS, BLOCK_N], gl.float32, layout=s_l)
        mbarrier.wait(kbar.index((it + js) % STAGES), ((it + js) // STAGES) & 1)
        _ws_turn(turn, c, it + js, PINGPONG)
        s = warpgroup_mma(q_smem, k_smem.index((it + js) % STAGES).permute((1, 0)), s0, use_acc=ACC and PERTURB != 1)
        _ws_pass(turn, c, PINGPONG)
        if KREL:
            mbarrier.arrive(kempty.index((it + js) % STAGES), count=1)
        s = _tile_scores(s, tab, base, E, lo + js * BLOCK_N, first_pos, seqlen_k, win, full_rows, qk_scale, True,
                         WG_ROWS, BLOCK_N, HAS_WINDOW, CLAMP, PERTURB, s_l, strip_l, GATHER, None, ACC)
        m_i, p, l_i, alpha = _softmax(s, m_i, l_i, False, ACC, qk_scale, TREE)
        p_prev = gl.convert_layout(p.to(dtype), p_l)
    j1 = gl.maximum(ja, js + 1)
    j2 = gl.maximum(jb, js + 1)
    for j in range(js + 1, j1):
        if AHEAD_ON:
            m_i, l_i, acc, p_prev, raw, raw_prev = _ws_step(
                    j, it, q_smem, k_smem, v_smem, kbar, vbar, empty, kempty, turn, m_i, l_i, acc,
                    p_prev, tab, lo, shift, E, first_pos, seqlen_k, win, full_rows, qk_scale, bias_mul, c, True,
                    BLOCK_N, STAGES, HAS_WINDOW, CLAMP, PERTURB, s_l, o_l, p_l, strip_l, GATHER, ACC, PINGPONG, KREL,
                    TREE, PAIRS, raw, raw_prev, True, DIAG)
        else:
            m_i, l_i, acc, p_prev, _, _ = _ws_step(
                    j, it, q_smem, k_smem, v_smem, kbar, vbar, empty, kempty, turn, m_i, l_i, acc,
                    p_prev, tab, lo, shift, E, first_pos, seqlen_k, win, full_rows, qk_scale, bias_mul, c, True,
                    BLOCK_N, STAGES, HAS_WINDOW, CLAMP, PERTURB, s_l, o_l, p_l, strip_l, GATHER, ACC, PINGPONG, KREL,
                    TREE, PAIRS, DIAG=DIAG)
    if UNROLL2 and AHEAD_ON:  # the interior tiles two a loop iteration (the odd one after)
        jm = j1 + ((j2 - j1) // 2) * 2
        for j in range(j1, jm, 2):
            m_i, l_i, acc, p_prev, raw, raw_prev = _ws_step(
                    j, it, q_smem, k_smem, v_smem, kbar, vbar, empty, kempty, turn, m_i, l_i, acc,
                    p_prev, tab, lo, shift, E, first_pos, seqlen_k, win, full_rows, qk_scale, bias_mul, c, False,
                    BLOCK_N, STAGES, HAS_WINDOW, CLAMP, PERTURB, s_l, o_l, p_l, strip_l, GATHER, ACC, PINGPONG, KREL,
                    TREE, PAIRS, raw, raw_prev, True, DIAG)
            m_i, l_i, acc, p_prev, raw, raw_prev = _ws_step(
                    j + 1, it, q_smem, k_smem, v_smem, kbar, vbar, empty, kempty, turn, m_i, l_i, acc,
                    p_prev, tab, lo, shift, E, first_pos, seqlen_k, win, full_rows, qk_scale, bias_mul, c, False,
                    BLOCK_N, STAGES, HAS_WINDOW, CLAMP, PERTURB, s_l, o_l, p_l, strip_l, GATHER, ACC, PINGPONG, KREL,
                    TREE, PAIRS, raw, raw_prev, True, DIAG)
        for j in range(jm, j2):
            m_i, l_i, acc, p_prev, raw, raw_prev = _ws_step(
                    j, it, q_smem, k_smem, v_smem, kbar, vbar, empty, kempty, turn, m_i, l_i, acc,
                    p_prev, tab, lo, shift, E, first_pos, seqlen_k, win, full_rows, qk_scale, bias_mul, c, False,
                    BLOCK_N, STAGES, HAS_WINDOW, CLAMP, PERTURB, s_l, o_l, p_l, strip_l, GATHER, ACC, PINGPONG, KREL,
                    TREE, PAIRS, raw, raw_prev, True, DIAG)
    else:
        for j in range(j1, j2):
            if AHEAD_ON:
                m_i, l_i, acc, p_prev, raw, raw_prev = _ws_step(
                        j, it, q_smem, k_smem, v_smem, kbar, vbar, empty, kempty, turn, m_i, l_i, acc,
                        p_prev, tab, lo, shift, E, first_pos, seqlen_k, win, full_rows, qk_scale, bias_mul, c, False,
                        BLOCK_N, STAGES, HAS_WINDOW, CLAMP, PERTURB, s_l, o_l, p_l, strip_l, GATHER, ACC, PINGPONG, KREL,
                        TREE, PAIRS, raw, raw_prev, True, DIAG)
            else:
                m_i, l_i, acc, p_prev, _, _ = _ws_step(
                        j, it, q_smem, k_smem, v_smem, kbar, vbar, empty, kempty, turn, m_i, l_i, acc,
                        p_prev, tab, lo, shift, E, first_pos, seqlen_k, win, full_rows, qk_scale, bias_mul, c, False,
                        BLOCK_N, STAGES, HAS_WINDOW, CLAMP, PERTURB, s_l, o_l, p_l, strip_l, GATHER, ACC, PINGPONG, KREL,
                        TREE, PAIRS, DIAG=DIAG)
    for j in range(j2, je):
        if AHEAD_ON:
            m_i, l_i, acc, p_prev, raw, raw_prev = _ws_step(
                    j, it, q_smem, k_smem, v_smem, kbar, vbar, empty, kempty, turn, m_i, l_i, acc,
                    p_prev, tab, lo, shift, E, first_pos, seqlen_k, win, full_rows, qk_scale, bias_mul, c, True,
                    BLOCK_N, STAGES, HAS_WINDOW, CLAMP, PERTURB, s_l, o_l, p_l, strip_l, GATHER, ACC, PINGPONG, KREL,
                    TREE, PAIRS, raw, raw_prev, True, DIAG)
        else:
            m_i, l_i, acc, p_prev, _, _ = _ws_step(
                    j, it, q_smem, k_smem, v_smem, kbar, vbar, empty, kempty, turn, m_i, l_i, acc,
                    p_prev, tab, lo, shift, E, first_pos, seqlen_k, win, full_rows, qk_scale, bias_mul, c, True,
                    BLOCK_N, STAGES, HAS_WINDOW, CLAMP, PERTURB, s_l, o_l, p_l, strip_l, GATHER, ACC, PINGPONG, KREL,
                    TREE, PAIRS, DIAG=DIAG)
    if je > js:  # the last tile's value product, then its slot released
        lslot = (it + je - 1) % STAGES
        mbarrier.wait(vbar.index(lslot), ((it + je - 1) // STAGES) & 1)
        if ZERO_PAST:
            _zero_rows_past(v_smem.index(lslot), k_end - (k_start + lo + (je - 1) * BLOCK_N), BLOCK_N, D, WG_WARPS)
        acc = warpgroup_mma(p_prev, v_smem.index(lslot), acc)
        mbarrier.arrive(empty.index(lslot), count=1)
    _ws_release(je, kt, it, kbar, vbar, empty, kempty, turn, c, STAGES, PINGPONG, KREL)

    _write_out(acc, m_i, l_i, OUT, LSE, q_start, m0, seqlen_q, h, stride_ot, stride_oh, stride_lt, WG_ROWS, D, o_l,
               s_l, q_ld)


@gluon.jit
def _ws_buffers(Q, K_DESC, D: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, PINGPONG: gl.constexpr,
                KREL: gl.constexpr, UNUSED_TURNS: gl.constexpr = False):
    """The warp-specialized kernels' shared memory, set up before the partitions fork: both warpgroups' Q, the key /
    value ring and its barriers (full: kbar, vbar; empty: both consumers release each slot; kempty: KREL's key slots,
    else empty itself) and, with PINGPONG, the turn pair (consumer 0 holds the first turn; else turn is empty, unused)."""
    dtype: gl.constexpr = Q.dtype.element_ty
    q_sl: gl.constexpr = gl.NVMMASharedLayout(128 if D * 2 >= 128 else 64, 16, rank=2)
    kv_sl: gl.constexpr = K_DESC.layout
    q_all = gl.allocate_shared_memory(dtype, [2, WG_ROWS, D], q_sl)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, D], kv_sl)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, D], kv_sl)
    kbar = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    vbar = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    # without PINGPONG no turn barriers are made: an initialized mbarrier left unused is dead to the compiler's
    # allocator, which hands its bytes to other buffers (the partitions' captured arguments, a consumer's layout
    # scratch), and using an mbarrier's memory for anything else before mbarrier.inval is undefined (PTX ISA): on the
    # H200 that was wrong rows and faults when other processes shared the GPU (config.GLUON_PINGPONG)
    turn = empty
    if PINGPONG or UNUSED_TURNS:
        turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(kbar.index(i), count=1)
        mbarrier.init(vbar.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)  # both consumers release each tile
    kempty = empty
    if KREL:  # the key slots released apart from the value slots
        kempty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(STAGES):
            mbarrier.init(kempty.index(i), count=2)
    if PINGPONG or UNUSED_TURNS:
        mbarrier.init(turn.index(0), count=1)
        mbarrier.init(turn.index(1), count=1)
    if PINGPONG:
        mbarrier.arrive(turn.index(0), count=1)  # consumer 0 takes the first turn
    fence_async_shared()
    return q_all, k_smem, v_smem, kbar, vbar, empty, kempty, turn


@gluon.jit
def relbias_fwd_gluon_ws_kernel(
    Q, K_DESC, V_DESC, TABLE, OUT, LSE, CU_Q, CU_K,
    sm_scale, E, window,
    stride_qt, stride_qh, stride_ot, stride_oh, stride_lt,
    HQ: gl.constexpr, GROUP: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
    HAS_WINDOW: gl.constexpr, CLAMP: gl.constexpr, PERTURB: gl.constexpr, HEAVY_FIRST: gl.constexpr = True,
    GATHER: gl.constexpr = True, ACC: gl.constexpr = False, PINGPONG: gl.constexpr = False, KREL: gl.constexpr = False,
    UNUSED_TURNS: gl.constexpr = False, TREE: gl.constexpr = False, PAIRS: gl.constexpr = False,
    AHEAD: gl.constexpr = False, DIAG: gl.constexpr = False, UNROLL2: gl.constexpr = False,
    ZERO_PAST: gl.constexpr = True,
):
    BLOCK_M: gl.constexpr = 2 * WG_ROWS
    D: gl.constexpr = HEAD_DIM
    gl.static_assert(gl.num_warps() == WG_WARPS, "launched with num_warps 4 (the first consumer warpgroup)")
    gl.static_assert((D == 64) or (D == 128), "head dim 64 or 128")
    gl.static_assert(STAGES >= 2, "a ring of at least two tiles")
    pid_m, h, g, q_start, seqlen_q, k_start, seqlen_k, win = _program_block(CU_Q, CU_K, window, HQ, GROUP, PERTURB,
                                                                            HEAVY_FIRST)
    m0 = pid_m * BLOCK_M

    # ---- the union of the two warpgroups' key ranges: causal upper end of the block, window lower end of its first
    # row (tiles outside both are never loaded); _key_range's arithmetic, written out here because calling it
    # reorders the SASS of the gated windowed variants
    first_pos = seqlen_k - seqlen_q + m0
    last_pos = first_pos + BLOCK_M - 1
    hi = gl.minimum(seqlen_k, last_pos + 1)
    hi = gl.where(m0 < seqlen_q, hi, 0)
    lo = 0
    if HAS_WINDOW:
        lo = gl.maximum(0, first_pos - win + 1)
        lo = (lo // BLOCK_N) * BLOCK_N
    kt = gl.cdiv(gl.maximum(hi - lo, 0), BLOCK_N)
    k_end = 0
    if ZERO_PAST:  # cu_seqlens_k[-1] (B = the grid's y): the buffer's rows past it are no sequence's keys
        k_end = _keys_end(CU_K + gl.num_programs(1), V_DESC.shape[0])

    q_all, k_smem, v_smem, kbar, vbar, empty, kempty, turn = _ws_buffers(Q, K_DESC, HEAD_DIM, BLOCK_N, STAGES,
                                                                           PINGPONG, KREL, UNUSED_TURNS)

    gl.warp_specialize([
        (_ws_consumer, (0, Q, OUT, LSE, TABLE, q_all, k_smem, v_smem, kbar, vbar, empty, kempty, turn, q_start,
                        seqlen_q,
                        k_start, seqlen_k, m0, lo, kt, 0, h, win, sm_scale, E, stride_qt, stride_qh, stride_ot,
                        stride_oh, stride_lt, HEAD_DIM, BLOCK_N, STAGES, HAS_WINDOW, CLAMP, PERTURB, GATHER, ACC,
                        PINGPONG, KREL, TREE, PAIRS, AHEAD, DIAG, UNROLL2, k_end, ZERO_PAST)),
        (_ws_consumer, (1, Q, OUT, LSE, TABLE, q_all, k_smem, v_smem, kbar, vbar, empty, kempty, turn, q_start,
                        seqlen_q,
                        k_start, seqlen_k, m0, lo, kt, 0, h, win, sm_scale, E, stride_qt, stride_qh, stride_ot,
                        stride_oh, stride_lt, HEAD_DIM, BLOCK_N, STAGES, HAS_WINDOW, CLAMP, PERTURB, GATHER, ACC,
                        PINGPONG, KREL, TREE, PAIRS, AHEAD, DIAG, UNROLL2, k_end, ZERO_PAST)),
        (_ws_producer, (K_DESC, V_DESC, k_smem, v_smem, kbar, vbar, empty, kempty, k_start + lo, g * D, kt, 0,
                        BLOCK_N, D, STAGES, KREL)),
    ], [4, 1], [240, 24])


@gluon.jit
def _ws_work(t, n_m, n_bh, CU_Q, CU_K, window, HQ: gl.constexpr, GROUP: gl.constexpr, PERTURB: gl.constexpr,
             BLOCK_N: gl.constexpr, HAS_WINDOW: gl.constexpr):
    """Work item t of the persistent grid: t // n_bh counts query blocks from the last (the most keys first), t %
    n_bh is sequence x query head. Returns its first row, head, KV head, the sequence's query start and length, key
    start and length, the window and the union of its two warpgroups' key ranges (lo, kt)."""
    pid_m = n_m - 1 - t // n_bh
    rest = t % n_bh
    h = rest % HQ
    g, q_start, seqlen_q, k_start, seqlen_k, win = _sequence_head(rest // HQ, h, CU_Q, CU_K, window, HQ, GROUP,
                                                                  PERTURB)
    m0 = pid_m * (2 * WG_ROWS)
    first_pos, last_pos, hi, lo, kt = _key_range(m0, seqlen_q, seqlen_k, win, 2 * WG_ROWS, BLOCK_N, HAS_WINDOW)
    return m0, h, g, q_start, seqlen_q, k_start, seqlen_k, win, lo, kt


@gluon.jit
def _ws_producer_loop(K_DESC, V_DESC, k_smem, v_smem, kbar, vbar, empty, kempty, CU_Q, CU_K, window, n_m, n_bh,
                      HQ: gl.constexpr, GROUP: gl.constexpr, PERTURB: gl.constexpr, BLOCK_N: gl.constexpr,
                      D: gl.constexpr, STAGES: gl.constexpr, HAS_WINDOW: gl.constexpr, KREL: gl.constexpr):
    """The persistent producer: this program's work items in turn, the ring's tile count carried across them."""
    it = 0
    for t in range(gl.program_id(0), n_m * n_bh, gl.num_programs(0)):
        m0, h, g, q_start, seqlen_q, k_start, seqlen_k, win, lo, kt = _ws_work(
            t, n_m, n_bh, CU_Q, CU_K, window, HQ, GROUP, PERTURB, BLOCK_N, HAS_WINDOW)
        _ws_producer(K_DESC, V_DESC, k_smem, v_smem, kbar, vbar, empty, kempty, k_start + lo, g * D, kt, it, BLOCK_N,
                     D, STAGES, KREL)
        it += kt


@gluon.jit
def _ws_consumer_loop(c: gl.constexpr, Q, OUT, LSE, TABLE, CU_Q, CU_K, q_all, k_smem, v_smem, kbar, vbar, empty,
                      kempty, turn, window, n_m, n_bh, sm_scale, E, stride_qt, stride_qh, stride_ot, stride_oh,
                      stride_lt, k_end,
                      HQ: gl.constexpr, GROUP: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr,
                      STAGES: gl.constexpr, HAS_WINDOW: gl.constexpr, CLAMP: gl.constexpr, PERTURB: gl.constexpr,
                      GATHER: gl.constexpr, ACC: gl.constexpr, PINGPONG: gl.constexpr, KREL: gl.constexpr,
                      TREE: gl.constexpr = False, PAIRS: gl.constexpr = False, AHEAD: gl.constexpr = False,
                      DIAG: gl.constexpr = False, UNROLL2: gl.constexpr = False, ZERO_PAST: gl.constexpr = False):
    """A persistent consumer: the same work items as the producer, in the same order (its Q reloaded for each once
    its last products are waited for), the ring's tile count carried across them."""
    it = 0
    for t in range(gl.program_id(0), n_m * n_bh, gl.num_programs(0)):
        m0, h, g, q_start, seqlen_q, k_start, seqlen_k, win, lo, kt = _ws_work(
            t, n_m, n_bh, CU_Q, CU_K, window, HQ, GROUP, PERTURB, BLOCK_N, HAS_WINDOW)
        _ws_consumer(c, Q, OUT, LSE, TABLE, q_all, k_smem, v_smem, kbar, vbar, empty, kempty, turn, q_start, seqlen_q,
                     k_start, seqlen_k, m0, lo, kt, it, h, win, sm_scale, E, stride_qt, stride_qh, stride_ot,
                     stride_oh, stride_lt, HEAD_DIM, BLOCK_N, STAGES, HAS_WINDOW, CLAMP, PERTURB, GATHER, ACC,
                     PINGPONG, KREL, TREE, PAIRS, AHEAD, DIAG, UNROLL2, k_end, ZERO_PAST)
        it += kt


@gluon.jit
def relbias_fwd_gluon_ws_persistent_kernel(
    Q, K_DESC, V_DESC, TABLE, OUT, LSE, CU_Q, CU_K,
    sm_scale, E, window, n_m, n_bh,
    stride_qt, stride_qh, stride_ot, stride_oh, stride_lt,
    HQ: gl.constexpr, GROUP: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
    HAS_WINDOW: gl.constexpr, CLAMP: gl.constexpr, PERTURB: gl.constexpr,
    GATHER: gl.constexpr = True, ACC: gl.constexpr = False, PINGPONG: gl.constexpr = False, KREL: gl.constexpr = False,
    UNUSED_TURNS: gl.constexpr = False, TREE: gl.constexpr = False, PAIRS: gl.constexpr = False,
    AHEAD: gl.constexpr = False, DIAG: gl.constexpr = False, UNROLL2: gl.constexpr = False,
    ZERO_PAST: gl.constexpr = True,
):
    """relbias_fwd_gluon_ws_kernel on a persistent grid (one program per SM, launched with at most as many programs
    as work items): each program walks the work items t = program_id, program_id + num_programs, ... (query blocks
    from the last, so the heaviest first; n_m query blocks of 128 rows, n_bh = sequences x query heads), its
    producer refilling the ring for the next item while the consumers finish the last, so one item's prologue
    (Q load, the ring's first tiles) and epilogue overlap its neighbours' work instead of leaving the SM idle."""
    D: gl.constexpr = HEAD_DIM
    gl.static_assert(gl.num_warps() == WG_WARPS, "launched with num_warps 4 (the first consumer warpgroup)")
    gl.static_assert((D == 64) or (D == 128), "head dim 64 or 128")
    gl.static_assert(STAGES >= 2, "a ring of at least two tiles")
    k_end = 0
    if ZERO_PAST:  # cu_seqlens_k[-1] (B = n_bh / HQ sequences)
        k_end = _keys_end(CU_K + n_bh // HQ, V_DESC.shape[0])
    q_all, k_smem, v_smem, kbar, vbar, empty, kempty, turn = _ws_buffers(Q, K_DESC, HEAD_DIM, BLOCK_N, STAGES,
                                                                           PINGPONG, KREL, UNUSED_TURNS)

    gl.warp_specialize([
        (_ws_consumer_loop, (0, Q, OUT, LSE, TABLE, CU_Q, CU_K, q_all, k_smem, v_smem, kbar, vbar, empty, kempty, turn,
                             window,
                             n_m, n_bh, sm_scale, E, stride_qt, stride_qh, stride_ot, stride_oh, stride_lt, k_end, HQ,
                             GROUP,
                             HEAD_DIM, BLOCK_N, STAGES, HAS_WINDOW, CLAMP, PERTURB, GATHER, ACC, PINGPONG,
                             KREL, TREE, PAIRS, AHEAD, DIAG, UNROLL2, ZERO_PAST)),
        (_ws_consumer_loop, (1, Q, OUT, LSE, TABLE, CU_Q, CU_K, q_all, k_smem, v_smem, kbar, vbar, empty, kempty, turn,
                             window,
                             n_m, n_bh, sm_scale, E, stride_qt, stride_qh, stride_ot, stride_oh, stride_lt, k_end, HQ,
                             GROUP,
                             HEAD_DIM, BLOCK_N, STAGES, HAS_WINDOW, CLAMP, PERTURB, GATHER, ACC, PINGPONG,
                             KREL, TREE, PAIRS, AHEAD, DIAG, UNROLL2, ZERO_PAST)),
        (_ws_producer_loop, (K_DESC, V_DESC, k_smem, v_smem, kbar, vbar, empty, kempty, CU_Q, CU_K, window, n_m,
                             n_bh, HQ, GROUP, PERTURB, BLOCK_N, D, STAGES, HAS_WINDOW, KREL)),
    ], [4, 1], [240, 24])
