"""relbias split-K decode kernel for Hopper (sm_90) in Gluon, over an fp8 (e4m3) KV cache: swap-AB tiles, the key
codes converted in registers into the score product's operand, the value codes once into shared memory.

Computes   the same partials as kernel_decode.relbias_decode_split_kernel (its interpreter twin: same arguments up to
           the tile constexprs, same partial layout, the same bias, masks and perturbations): per (split, sequence,
           KV head x token block), S^T [keys, rows] = K . Q^T over the split's BLOCK_N-key tiles, the online softmax
           down the columns, O^T [D, rows] += V^T . P^T, un-normalized (m in natural-log units, l, acc times the
           value scale). attnkit.splitk merges the splits in split order.
Why        the Triton decode kernel runs the fp8 cache no faster than bf16 (docs/relbias.md): its 16-row MMA tile
           reads each fp8 key tile into the MMA operand layout by narrow shared loads and converts it per code after
           them, with 4 warps per scheduler and little to hide the chain's latency. Here the packed rows (the query
           heads of one KV head times the block's tokens: 8 for the model's 8 heads per KV head and 1 token) sit on
           the MMA's N side, BLOCK_N (64 or 128) keys on M, so no MMA row is padding.
Schedule   per tile: the raw codes arrive STAGES - 1 tiles ahead (TMA over a contiguous cache, mbarrier-tracked; else
           cp.async, rows past the split zero-filled; with TMA such rows arrive as stored and their values are
           zeroed); KREG: the key codes are loaded as an 8-bit MMA operand (four consecutive codes per register),
           converted in place and renamed into the 16-bit operand layout (_key_operand; Q^T's dims permuted alike),
           else converted into a 16-bit key tile in shared memory; the score product runs asynchronously while the
           value codes are converted into a 16-bit tile in shared memory; BIAS_ASYNC: the tile's bias was copied
           into shared memory by cp.async with its codes (a proxy fence waits for a thread's global loads in flight,
           so table loads would hold it up), else loaded from the table a tile ahead; the column maxima, then P to
           shared memory and the value product (through a transposed view). Row sums stay per thread to the end.
           BANKS: the value codes read 8 per thread and the bias tile swizzled (shared-memory bank conflicts of the
           converted value stores and the bias reads, found by Nsight Compute: 2-way and 4-way).
Rows       ROWS (8 to 64, a power of two) packed rows: row r is token tb * (ROWS // GROUP) + r // GROUP of the
           sequence's step, query head g * GROUP + r % GROUP (as the twin's BLOCK_R rows).
CVT        how a code becomes an MMA operand (q bf16; an fp16 q always computes in fp16): 0, the direct cast to bf16;
           1, through fp16 and fp32 (one packed e4m3x2 conversion per two codes); 2, from its bits (a byte permute,
           a shift, two masks and one bf16x2 product by 2^120 per two codes; e4m3's NaN codes decode as +-480);
           3, the products in fp16: the codes by one packed conversion per two, the query scaled per row by a power
           of two that puts its largest magnitude in [2^14, 2^15) (exact: bf16 values within 2^-29 of the row's
           largest keep every bit; smaller ones round to fp16's subnormal step, relative to the row's largest
           below 2^-38) and P in fp16 (more bits than bf16).
Contract   as kernel_decode (K, V viewed as uint8; a contiguous varlen cache, or a paged one through BLOCK_TABLE with
           one table load per key; K_DESC, V_DESC with TMA: descriptors over the cache as [total_k, Hkv * D] in boxes
           of [BLOCK_N, D], raw_layout(D)); HEAD_DIM 64 or 128; the split's keys a multiple of BLOCK_N.
Numerics   scores and softmax in fp32 in the base-2 domain, P rounded to the operand dtype, fp32 accumulation; the
           key scale folded into the score scale, the value scale applied to acc: as the twin.
Dispatch   attnkit.relbias.interface (config.gluon_decode_rule, config.decode_plan with gluon=True).
Runs       CUDA sm_90 only (Gluon has no interpreter): the tests run the twin in the interpreter and this kernel on
           the GPU (gates "relbias/gluon_decode*", tests/test_relbias_gluon_decode.py).
PERTURB    as the twin: 1 bias dropped, 2 bias shifted by one KV block, 3 window off by one, 4 GQA group mixed up,
           5 every token block computes the first block's tokens.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (async_copy, fence_async_shared, mbarrier, tma,
                                                              warpgroup_mma, warpgroup_mma_wait)

from .._triton.pdl import pdl_entry

LOG2E: gl.constexpr = gl.constexpr(1.4426950408889634)
LN2: gl.constexpr = gl.constexpr(0.6931471805599453)


def raw_layout(head_dim: int):
    """The shared layout of a raw code tile [BLOCK_N, head_dim] (uint8), which the host's TMA descriptors carry."""
    return gl.NVMMASharedLayout(head_dim, 8, rank=2)

# four e4m3 codes ($2, one per byte) -> four bf16 ($0, $1): each code placed in the high byte of a 16-bit half, its
# exponent and mantissa shifted onto the bf16 exponent's four low bits and the mantissa's three high ones (the bf16
# equal to the code's value times 2^-120, e4m3 subnormals as bf16 subnormals), its sign kept at bit 15, then one
# bf16x2 product by 2^120 (exact)
E4M3_BF16_ASM: gl.constexpr = gl.constexpr("""{
    .reg .b32 a, b, t, u, c;
    mov.b32 c, 0x7B807B80;
    prmt.b32 a, $2, 0, 0x1404;
    prmt.b32 b, $2, 0, 0x3424;
    shr.u32 t, a, 4;
    and.b32 t, t, 0x07F007F0;
    and.b32 a, a, 0x80008000;
    or.b32 a, a, t;
    mul.rn.bf16x2 $0, a, c;
    shr.u32 u, b, 4;
    and.b32 u, u, 0x07F007F0;
    and.b32 b, b, 0x80008000;
    or.b32 b, b, u;
    mul.rn.bf16x2 $1, b, c;
    }""")


@gluon.jit
def _codes_to(x, DT: gl.constexpr, CVT: gl.constexpr):
    """e4m3 codes x (uint8) -> their values in DT (bf16 or fp16), exactly (CVT: the module docstring)."""
    if DT == gl.float16:
        return x.to(gl.float8e4nv, bitcast=True).to(gl.float16)
    elif CVT == 1:
        return x.to(gl.float8e4nv, bitcast=True).to(gl.float16).to(gl.float32).to(gl.bfloat16)
    elif CVT == 2:
        return gl.inline_asm_elementwise(E4M3_BF16_ASM, "=r,=r,r", [x], dtype=gl.bfloat16, is_pure=True, pack=4)
    else:
        return x.to(gl.float8e4nv, bitcast=True).to(gl.bfloat16)


@gluon.jit
def _issue(K, V, raw_k, raw_v, slot, n0, s_hi, b, k_start, g_kv, BLOCK_TABLE, stride_bt, stride_kb, stride_kt,
           stride_kh, PAGED: gl.constexpr, PAGE: gl.constexpr, HEAD_DIM: gl.constexpr, cp_l: gl.constexpr):
    """Start copying the key and value codes of keys n0 .. n0 + BLOCK_N - 1 (those from s_hi on zero-filled) into
    ring slot `slot`, and commit the group (also when every key is past s_hi: the group count stays one per tile)."""
    BLOCK_N: gl.constexpr = raw_k.shape[1]
    j = n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, cp_l))
    ok = j < s_hi
    if PAGED:
        page = gl.load(BLOCK_TABLE + b * stride_bt + j // PAGE, mask=ok, other=0)
        off = page.to(gl.int64) * stride_kb + (j % PAGE).to(gl.int64) * stride_kt
    else:
        off = (k_start + j).to(gl.int64) * stride_kt
    off = off + g_kv * stride_kh
    dcol = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, cp_l))
    ptr_off = off[:, None] + dcol[None, :]
    msk = ok[:, None] & (dcol[None, :] >= 0)
    async_copy.async_copy_global_to_shared(raw_k.index(slot), K + ptr_off, mask=msk)
    async_copy.async_copy_global_to_shared(raw_v.index(slot), V + ptr_off, mask=msk)
    async_copy.commit_group()


@gluon.jit
def _key_operand(raw, DT: gl.constexpr, CVT: gl.constexpr, s_l: gl.constexpr):
    """KREG: the key tile [BLOCK_N, D] as the score product's A operand in registers, straight from its raw codes: each
    thread loads them as an 8-bit operand holds them (four consecutive codes per register: one 32-bit shared load),
    converts them in place, and the tile is renamed, not moved, into the 16-bit operand layout: a k32 block's
    positions 16h + 4c + 2e1 + e0 (thread column c) become 16h + 8e1 + 2c + e0. Q^T's dims follow the same order
    (the caller), so every product q . k is unchanged."""
    BN: gl.constexpr = raw.shape[0]
    D: gl.constexpr = raw.shape[1]
    x = _codes_to(raw.load(gl.DotOperandLayout(operand_index=0, parent=s_l, k_width=4)), DT, CVT)
    x = gl.reshape(gl.permute(gl.reshape(x, [BN, D // 32, 2, 4, 2, 2]), (0, 1, 2, 4, 3, 5)), [BN, D])
    return gl.convert_layout(x, gl.DotOperandLayout(operand_index=0, parent=s_l, k_width=2), assert_trivial=True)


@gluon.jit
def _tma_issue(K_DESC, V_DESC, raw_k, raw_v, bars, slot, row, col, pred, HEAD_DIM: gl.constexpr):
    """TMA: start copying the key and value codes of rows row .. row + BLOCK_N - 1 (columns col .. col + HEAD_DIM) into
    ring slot `slot`, signalling its barrier with the bytes they bring (skipped when pred is false). Rows past the
    tensor's end arrive as zeros; rows past the split (the next sequence's keys) arrive as they are."""
    mbarrier.expect(bars.index(slot), 2 * raw_k.shape[1] * HEAD_DIM, pred=pred)
    tma.async_copy_global_to_shared(K_DESC, [row, col], bars.index(slot), raw_k.index(slot), pred=pred)
    tma.async_copy_global_to_shared(V_DESC, [row, col], bars.index(slot), raw_v.index(slot), pred=pred)


@gluon.jit
def _bias_issue(bias_slot, tab_row, pos, row_ok, n0, s_hi, E, win, shift, HAS_WINDOW: gl.constexpr,
                bl_l: gl.constexpr):
    """BIAS_ASYNC: start copying the bias of keys n0 .. n0 + BLOCK_N - 1 into bias_slot [rows, BLOCK_N] (fp32), one
    4-byte cp.async per visible (row, key) pair from the table at the index clamped into it, the others zero-filled
    (not committed: the caller's group). In shared memory the values cannot hold up a proxy fence, as table loads in
    flight do."""
    pr = gl.convert_layout(pos, gl.SliceLayout(1, bl_l))
    ok = gl.convert_layout(row_ok, gl.SliceLayout(1, bl_l))
    tr = gl.convert_layout(tab_row, gl.SliceLayout(1, bl_l))
    j = n0 + gl.arange(0, bias_slot.shape[1], layout=gl.SliceLayout(0, bl_l))
    d = pr[:, None] - j[None, :]
    vis = (d >= 0) & (j < s_hi)[None, :] & ok[:, None]
    if HAS_WINDOW:
        vis = vis & (d < win)
    async_copy.async_copy_global_to_shared(bias_slot, tr[:, None] + gl.minimum(gl.maximum(d + shift, 0), E - 1),
                                           mask=vis)


@gluon.jit
def _visible(pos, row_ok, n0, s_hi, win, HAS_WINDOW: gl.constexpr, s_l: gl.constexpr, BLOCK_N: gl.constexpr):
    """Keys n0 .. n0 + BLOCK_N - 1 against the rows (the score tile's layout): the distances and which pairs are
    visible (causal, inside the split, a live row, inside the window)."""
    j = n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, s_l))
    d = pos[None, :] - j[:, None]
    vis = (d >= 0) & (j < s_hi)[:, None] & row_ok[None, :]
    if HAS_WINDOW:
        vis = vis & (d < win)
    return d, vis


@gluon.jit
def _beyond(bias, dd, E, tail, CLAMP: gl.constexpr):
    """Past the extent (dd >= E) the constant tail (CLAMP) or 0, in the base-2 domain."""
    if CLAMP:
        return gl.where(dd < E, bias, tail[None, :])
    else:
        return gl.where(dd < E, bias, 0.0)


@gluon.jit
def _tile_bias(tab_row, tail, pos, row_ok, n0, s_hi, E, win, shift, HAS_WINDOW: gl.constexpr, CLAMP: gl.constexpr,
               PERTURB: gl.constexpr, s_l: gl.constexpr, BLOCK_N: gl.constexpr):
    """Keys n0 .. n0 + BLOCK_N - 1: which (key, row) pairs are visible, and their bias in the base-2 domain (0 with
    PERTURB 1), looked up in the table at the index clamped into it (visible pairs only; past the extent the tail
    or 0)."""
    d, vis = _visible(pos, row_ok, n0, s_hi, win, HAS_WINDOW, s_l, BLOCK_N)
    if PERTURB == 1:
        bias = gl.zeros([BLOCK_N, pos.shape[0]], gl.float32, layout=s_l)
    else:
        dd = d + shift
        bias = gl.load(tab_row[None, :] + gl.minimum(gl.maximum(dd, 0), E - 1), mask=vis, other=0.0) * LOG2E
        bias = _beyond(bias, dd, E, tail, CLAMP)
    return vis, bias


@gluon.jit
def relbias_decode_gluon_kernel(
    Q, K, V, TABLE, M_OUT, L_OUT, ACC_OUT,
    CU_Q, CU_K, SEQUSED_K, BLOCK_TABLE, K_SCALE, V_SCALE,
    sm_scale, E, window, keys_per_split,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_kb, stride_bt,
    stride_ms, stride_as,
    HQ: gl.constexpr, GROUP: gl.constexpr, HEAD_DIM: gl.constexpr, ROWS: gl.constexpr,
    PAGED: gl.constexpr, PAGE: gl.constexpr, HAS_WINDOW: gl.constexpr, CLAMP: gl.constexpr,
    PERTURB: gl.constexpr, STAGES: gl.constexpr, CVT: gl.constexpr, PDL: gl.constexpr = False,
    TMA: gl.constexpr = False, K_DESC=None, V_DESC=None, BIAS_ASYNC: gl.constexpr = False,
    KREG: gl.constexpr = False, BLOCK_N: gl.constexpr = 64, BANKS: gl.constexpr = False,
):
    pdl_entry(PDL)
    NW: gl.constexpr = gl.num_warps()
    gl.static_assert(NW == 4, "one warpgroup")
    gl.static_assert((HEAD_DIM == 64) or (HEAD_DIM == 128), "D 64 or 128")
    gl.static_assert(STAGES >= 2, "a ring of at least two tiles")
    gl.static_assert((BLOCK_N == 64) or (BLOCK_N == 128), "64 or 128 keys per tile: one or two warpgroup MMA M blocks")
    gl.static_assert(not (TMA and PAGED), "TMA reads a contiguous cache")
    if Q.dtype.element_ty == gl.float16:
        DT: gl.constexpr = gl.float16
    elif CVT == 3:
        DT: gl.constexpr = gl.float16
    else:
        DT: gl.constexpr = gl.bfloat16
    TPB: gl.constexpr = ROWS // GROUP  # tokens per block
    TPR: gl.constexpr = HEAD_DIM // 16  # threads per key row in the copies (16 codes each)
    cp_l: gl.constexpr = gl.BlockedLayout([1, 16], [32 // TPR, TPR], [NW, 1], [1, 0])
    s_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[NW, 1], instr_shape=[16, ROWS, 16])
    o_l: gl.constexpr = s_l  # O^T [D, ROWS]: the same instruction shape
    tile_sl: gl.constexpr = gl.NVMMASharedLayout(128, 16, rank=2)  # rows of 64 / 128 16-bit values
    if TMA:
        raw_sl: gl.constexpr = gl.NVMMASharedLayout(HEAD_DIM, 8, rank=2)  # as raw_layout(HEAD_DIM)
    else:
        raw_sl: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[1, 0])  # [slot,] key, code
    q_ld: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [NW, 1], [1, 0])
    cols_l: gl.constexpr = gl.SliceLayout(0, s_l)
    bl_l: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [NW, 1], [1, 0])  # the bias copies [rows, BLOCK_N]
    if BANKS:
        # the value codes 8 per thread (16 threads a key row at D 128): each 16-byte store of the converted tile then
        # fills the 128-byte swizzle's eight chunks once per two rows, where 16 codes per thread (two stores of
        # adjacent chunks) met each chunk twice; the bias tile's columns swizzled in fours by its row, so the score
        # tile's transposed reads (eight keys x four rows per load) hit 32 banks, not 8
        v_l: gl.constexpr = gl.BlockedLayout([1, 8], [256 // HEAD_DIM, HEAD_DIM // 8], [NW, 1], [1, 0])
        bias_sl: gl.constexpr = gl.SwizzledSharedLayout(4, 1, 8, order=[1, 0])
    else:
        v_l: gl.constexpr = cp_l
        bias_sl: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[1, 0])

    split = gl.program_id(0)
    b = gl.program_id(1)
    g = gl.program_id(2) % (HQ // GROUP)
    tb = gl.program_id(2) // (HQ // GROUP)
    if PERTURB == 4:
        g_kv = (g + 1) % (HQ // GROUP)
    else:
        g_kv = g
    q_start = gl.load(CU_Q + b)
    seqlen_q = gl.load(CU_Q + b + 1) - q_start
    if PAGED:
        k_start = 0
        seqlen_k = gl.load(SEQUSED_K + b)
    else:
        k_start = gl.load(CU_K + b)
        seqlen_k = gl.load(CU_K + b + 1) - k_start
    if PERTURB == 3:
        win = window + 1
    else:
        win = window
    # this split's key range, clipped to what the block's tokens can see (an empty block sees nothing)
    pos0 = seqlen_k - seqlen_q + tb * TPB
    hi = gl.where(tb * TPB < seqlen_q, seqlen_k - seqlen_q + gl.minimum(tb * TPB + TPB, seqlen_q), 0)
    lo = 0
    if HAS_WINDOW:
        lo = gl.maximum(0, pos0 - win + 1)
    s_lo = split * keys_per_split
    s_hi = gl.minimum(s_lo + keys_per_split, hi)
    s_lo = gl.maximum(s_lo, (lo // BLOCK_N) * BLOCK_N)
    n_tiles = gl.maximum(s_hi - s_lo + BLOCK_N - 1, 0) // BLOCK_N

    # the rows as the score tile's columns
    r = gl.arange(0, ROWS, layout=cols_l)
    if PERTURB == 5:
        tok = r // GROUP
    else:
        tok = tb * TPB + r // GROUP
    head = g * GROUP + r % GROUP
    row_ok = (r // GROUP < TPB) & (tok < seqlen_q)
    pos = seqlen_k - seqlen_q + tok
    tab_row = TABLE + head.to(gl.int64) * E
    if CLAMP:
        tail = gl.load(tab_row + E - 1) * LOG2E
    else:
        tail = gl.zeros([ROWS], gl.float32, layout=cols_l)
    shift = 0
    if PERTURB == 2:
        shift = BLOCK_N

    raw_k = gl.allocate_shared_memory(gl.uint8, [STAGES, BLOCK_N, HEAD_DIM], raw_sl)
    raw_v = gl.allocate_shared_memory(gl.uint8, [STAGES, BLOCK_N, HEAD_DIM], raw_sl)
    if BIAS_ASYNC:
        bias_smem = gl.allocate_shared_memory(gl.float32, [STAGES, ROWS, BLOCK_N], bias_sl)
    if TMA:
        bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(STAGES):
            mbarrier.init(bars.index(i), count=1)
        col = g_kv * HEAD_DIM
    for i in gl.static_range(STAGES - 1):  # the ring's first tiles fly while the query is prepared
        if BIAS_ASYNC and PERTURB != 1:
            _bias_issue(bias_smem.index(i), tab_row, pos, row_ok, s_lo + i * BLOCK_N, s_hi, E, win, shift,
                        HAS_WINDOW, bl_l)
            if TMA:
                async_copy.commit_group()
        if TMA:
            _tma_issue(K_DESC, V_DESC, raw_k, raw_v, bars, i, k_start + s_lo + i * BLOCK_N, col, i < n_tiles,
                       HEAD_DIM)
        else:
            _issue(K, V, raw_k, raw_v, i, s_lo + i * BLOCK_N, s_hi, b, k_start, g_kv, BLOCK_TABLE, stride_bt,
                   stride_kb, stride_kt, stride_kh, PAGED, PAGE, HEAD_DIM, cp_l)

    # the packed rows: the query [ROWS, D] into shared memory (the score product reads it transposed)
    rq = gl.arange(0, ROWS, layout=gl.SliceLayout(1, q_ld))
    if PERTURB == 5:
        tok_q = rq // GROUP
    else:
        tok_q = tb * TPB + rq // GROUP
    ok_q = (rq // GROUP < TPB) & (tok_q < seqlen_q)
    dq = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, q_ld))
    if KREG:  # Q^T's dims in the order the key codes reach the MMA (_key_operand): within each 16, bits
        # (e0, c0, c1, e1) of the position are bits (e0, e1, c0, c1) of the dim
        dq = (dq & ~15) | (((dq >> 1) & 3) << 2) | (((dq >> 3) & 1) << 1) | (dq & 1)
    q_row = (q_start.to(gl.int64) + tok_q) * stride_qt + (g * GROUP + rq % GROUP) * stride_qh
    q_ptrs = Q + q_row[:, None] + dq[None, :]
    q = gl.load(q_ptrs, mask=ok_q[:, None], other=0.0)
    qk_scale = sm_scale * LOG2E * gl.load(K_SCALE + g_kv)
    q_smem = gl.allocate_shared_memory(DT, [ROWS, HEAD_DIM], tile_sl)
    if (DT == gl.float16) and (Q.dtype.element_ty == gl.bfloat16):
        # fp16 products: each row scaled by the power of two 2^(14 - e), e its largest magnitude's exponent
        qf = q.to(gl.float32)
        amax = gl.max(gl.abs(qf), 1)
        e = ((amax.to(gl.int32, bitcast=True) >> 23) & 0xFF) - 127
        sexp = gl.minimum(14 - e, 100)
        qs = gl.where(amax > 0, ((sexp + 127) << 23).to(gl.float32, bitcast=True), 1.0)
        q_smem.store((qf * qs[:, None]).to(gl.float16))
        col_scale = qk_scale / gl.convert_layout(qs, cols_l)
    else:
        q_smem.store(q)
        col_scale = gl.full([ROWS], 1.0, gl.float32, layout=cols_l) * qk_scale
    q_t = q_smem.permute((1, 0))  # Q^T [D, ROWS]

    if not KREG:
        k_smem = gl.allocate_shared_memory(DT, [BLOCK_N, HEAD_DIM], tile_sl)
    v_smem = gl.allocate_shared_memory(DT, [BLOCK_N, HEAD_DIM], tile_sl)
    p_smem = gl.allocate_shared_memory(DT, [ROWS, BLOCK_N], tile_sl)  # P (the value product reads it as P^T)
    m_i = gl.full([ROWS], float("-inf"), gl.float32, layout=cols_l)
    l_part = gl.zeros([BLOCK_N, ROWS], gl.float32, layout=s_l)  # each thread's share of the row sums, summed at the end
    acc = gl.zeros([HEAD_DIM, ROWS], gl.float32, layout=o_l)  # O^T
    if not BIAS_ASYNC:
        vis, bias = _tile_bias(tab_row, tail, pos, row_ok, s_lo, s_hi, E, win, shift, HAS_WINDOW, CLAMP, PERTURB, s_l,
                               BLOCK_N)
    for it in range(0, n_tiles):
        n0 = s_lo + it * BLOCK_N
        slot = it % STAGES
        # the tile STAGES - 1 ahead into the slot that the previous tile freed
        if BIAS_ASYNC and PERTURB != 1:
            _bias_issue(bias_smem.index((it + STAGES - 1) % STAGES), tab_row, pos, row_ok,
                        n0 + (STAGES - 1) * BLOCK_N, s_hi, E, win, shift, HAS_WINDOW, bl_l)
            if TMA:
                async_copy.commit_group()
                async_copy.wait_group(STAGES - 1)  # this tile's bias (the barrier below makes it everyone's)
        if TMA:
            _tma_issue(K_DESC, V_DESC, raw_k, raw_v, bars, (it + STAGES - 1) % STAGES,
                       k_start + n0 + (STAGES - 1) * BLOCK_N, col, it + STAGES - 1 < n_tiles, HEAD_DIM)
            mbarrier.wait(bars.index(slot), (it // STAGES) & 1)  # this tile's codes have landed
        else:
            _issue(K, V, raw_k, raw_v, (it + STAGES - 1) % STAGES, n0 + (STAGES - 1) * BLOCK_N, s_hi, b, k_start,
                   g_kv, BLOCK_TABLE, stride_bt, stride_kb, stride_kt, stride_kh, PAGED, PAGE, HEAD_DIM, cp_l)
            async_copy.wait_group(STAGES - 1)  # this tile's codes have landed (this thread's copies)
            gl.thread_barrier()  # everyone's
        if KREG:
            s_tok = warpgroup_mma(_key_operand(raw_k.index(slot), DT, CVT, s_l), q_t,
                                  gl.zeros([BLOCK_N, ROWS], gl.float32, layout=s_l), use_acc=False, is_async=True)
        else:
            k_smem.store(_codes_to(raw_k.index(slot).load(cp_l), DT, CVT))
            fence_async_shared()
            gl.thread_barrier()  # the converted key tile visible to the MMA
            s_tok = warpgroup_mma(k_smem, q_t, gl.zeros([BLOCK_N, ROWS], gl.float32, layout=s_l), use_acc=False,
                                  is_async=True)
        v = _codes_to(raw_v.index(slot).load(v_l), DT, CVT)  # while the score product runs
        if TMA:
            if n0 + BLOCK_N > s_hi:  # keys past the split (another sequence's, any bytes): zero values, not NaN x 0
                jv = n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, v_l))
                v = gl.where((jv < s_hi)[:, None], v, 0.0)
        v_smem.store(v)
        s = warpgroup_mma_wait(0, deps=[s_tok])
        if BIAS_ASYNC:
            d, vis = _visible(pos, row_ok, n0, s_hi, win, HAS_WINDOW, s_l, BLOCK_N)
            if PERTURB == 1:
                bias = gl.zeros([BLOCK_N, ROWS], gl.float32, layout=s_l)
            else:
                bias = _beyond(bias_smem.index(slot).permute((1, 0)).load(s_l) * LOG2E, d + shift, E, tail, CLAMP)
        s = gl.where(vis, s * col_scale[None, :] + bias, float("-inf"))
        m_new = gl.maximum(m_i, gl.max(s, 0))
        m_safe = gl.where(m_new == float("-inf"), 0.0, m_new)
        p = gl.exp2(s - m_safe[None, :])
        alpha = gl.exp2(m_i - m_safe)
        l_part = l_part * alpha[None, :] + p
        m_i = m_new
        acc = acc * gl.convert_layout(alpha, gl.SliceLayout(0, o_l))[None, :]
        p_smem.store(gl.permute(p.to(DT), (1, 0)))
        fence_async_shared()
        gl.thread_barrier()  # P and the converted value tile visible to the MMA, the raw slot free
        # the next tile's masks and bias (table loads, L2-resident): in flight during the value product, the next
        # tile's wait and its key conversion (a proxy fence waits for this thread's loads)
        if not BIAS_ASYNC:
            vis, bias = _tile_bias(tab_row, tail, pos, row_ok, n0 + BLOCK_N, s_hi, E, win, shift, HAS_WINDOW, CLAMP,
                                   PERTURB, s_l, BLOCK_N)
        acc = warpgroup_mma(v_smem.permute((1, 0)), p_smem.permute((1, 0)), acc)
        gl.thread_barrier()  # every warp's products done before the next tile overwrites the shared tiles
    if TMA:
        for i in gl.static_range(STAGES):
            mbarrier.invalidate(bars.index(i))
    if BIAS_ASYNC or not TMA:
        async_copy.wait_group(0)  # no cp.async copy outlives the program (the bias ring's too, beside TMA)

    l_i = gl.sum(l_part, 0)
    acc = acc * gl.load(V_SCALE + g_kv)
    r_idx = (q_start.to(gl.int64) + tok) * HQ + head
    gl.store(M_OUT + split.to(gl.int64) * stride_ms + r_idx, m_i * LN2, mask=row_ok)
    gl.store(L_OUT + split.to(gl.int64) * stride_ms + r_idx, l_i, mask=row_ok)
    ro = gl.convert_layout(r_idx, gl.SliceLayout(0, o_l))
    oko = gl.convert_layout(row_ok, gl.SliceLayout(0, o_l))
    do = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(1, o_l))
    gl.store(ACC_OUT + split.to(gl.int64) * stride_as + ro[None, :] * HEAD_DIM + do[:, None], acc,
             mask=oko[None, :] & (do[:, None] >= 0))
