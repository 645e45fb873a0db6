"""sparse_int8 swap-AB kernel for Hopper (sm_90) in Gluon: the key codes copied straight into shared memory and
multiplied there by one integer warpgroup MMA against the query's four digits, the value codes converted once into a
bf16 tile for one MMA against both halves of the probability tile.

Computes   what kernel.sparse_int8_kernel computes with SWAP and QK_INT8 (its Triton twin: the same arguments,
           outputs, partial layout and numerics), per (token t, split, KV head g): S^T [64 candidates, rows] from the
           int8 codes against the four int8 digits of the folded query (exact int32 sums scaled by powers of two;
           a program whose digits miss the budget takes the split-bf16 query instead, over the codes converted to
           bf16), the online softmax down the columns in the scaled domain, O^T [D, rows] += V^T . P^T with the
           probability tile as a bf16 high part plus a residual; then the output and LSE (DIRECT) or the
           un-normalized partials (m, l, acc, E) for attnkit.splitk's merge.
Why        The Triton swap-AB loop issues 1738 SASS instructions per warp per 64 candidates (compile_check --census):
           its gathers go through registers into layouts of its own choosing and its int8 operands are re-laid out
           for each MMA. Here the layouts are explicit (980 per warp): each tile's key rows go from the gather
           straight into the MMA's shared layout (cp.async, 16 bytes a copy, a tile ahead, two buffers), the value
           rows into a raw buffer, converted once (by bits) into the bf16 tile; and each shared tile is read once a
           tile: the four digits are the 4 R columns of one integer MMA (a first form with six products, one per
           digit and per probability half, kept the shared-memory pipe 73 % busy re-reading its operands:
           docs/sparse_int8.md).
Warps      4 (one warpgroup); 255 registers and 100 KB of shared memory: two programs per SM.
Contract   as kernel.sparse_int8_kernel; int8 caches whose pointers and strides are multiples of 16 bytes, BLOCK_N =
           64, BLOCK_R = 16 (at most 16 query heads per KV head), HEAD_DIM in {64, 128, 256}.
Numerics   those of the twin: the same folded query and exponent, the same digits and budget, the scores summed
           digit by digit in the twin's order (integer sums, exact), the same softmax and splits. Two fp32 sums may
           differ: the MMAs add the bf16 products in their own order, and the high and residual halves of the
           probability tile accumulate in separate columns, added once at the end (the twin adds both into one).
Runs       CUDA sm_90 only (Gluon has no interpreter): the tests run the twin in the interpreter and this kernel
           on the GPU (gate "sparse_int8/gluon", tests test_gluon_*, the corner cases' "gluon" loop).
PERTURB    1: the first candidate of every split skipped; 3: the value scale applied to v before the accumulation,
           in FP16.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (async_copy, fence_async_shared, warpgroup_mma,
                                                               warpgroup_mma_wait)

from .._triton.pdl import pdl_entry
from .._triton.pow2 import ldexp
from .._triton.rounding import int8_to_bf16
from .kernel import _int8_digits, fold_query

LOG2E: gl.constexpr = gl.constexpr(1.4426950408889634)


@gluon.jit
def _tile_rows(IDX_ROW, j0, c1, C, BLOCK_N: gl.constexpr, rows_l: gl.constexpr):
    """Candidate ids of list positions j0 .. j0 + BLOCK_N (bounded by c1) and whether each may be read (in
    [0, C): anything else is skipped, never read)."""
    offs = j0 + gl.arange(0, BLOCK_N, layout=rows_l)
    idx = gl.load(IDX_ROW + offs, mask=offs < c1, other=-1)
    return idx, (idx >= 0) & (idx < C)


@gluon.jit
def _gather(KC, VC, kv_base, stride_kc, idx, ok, k_buf, v_raw, HEAD_DIM: gl.constexpr, ld: gl.constexpr):
    """Start a tile: its key rows copied into k_buf and its value rows into v_raw (cp.async, 16 bytes a copy,
    committed as one group; invalid rows zero-filled, nothing read for them)."""
    d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, ld))
    off = (kv_base + gl.where(ok, idx, 0).to(gl.int64) * stride_kc)[:, None] + d[None, :]
    msk = ok[:, None] & (d[None, :] >= 0)
    async_copy.async_copy_global_to_shared(k_buf, KC + off, mask=msk)
    async_copy.async_copy_global_to_shared(v_raw, VC + off, mask=msk)
    async_copy.commit_group()


@gluon.jit
def _i8x4_to_bf16(v):
    """int8 codes -> bf16, exactly, four per 32-bit word: each code c's low 7 bits under the exponent of 128
    (the bf16 128 + (c & 127)), minus 128 or 256 as c's sign bit says (0x4300 | (c & 0x80)); the difference is
    c, exact in bf16. Two byte permutes, four logic operations and two bf16x2 subtractions (sm_90) per four codes."""
    return gl.inline_asm_elementwise(
        """{
        .reg .b32 t0, t1, x0, x1, y0, y1;
        prmt.b32 t0, $2, 0, 0x4140;
        prmt.b32 t1, $2, 0, 0x4342;
        lop3.b32 x0, t0, 0x007F007F, 0x43004300, 0xEA;
        lop3.b32 y0, t0, 0x00800080, 0x43004300, 0xEA;
        lop3.b32 x1, t1, 0x007F007F, 0x43004300, 0xEA;
        lop3.b32 y1, t1, 0x00800080, 0x43004300, 0xEA;
        sub.rn.bf16x2 $0, x0, y0;
        sub.rn.bf16x2 $1, x1, y1;
        }""",
        "=r,=r,r",
        [v], dtype=gl.bfloat16, is_pure=True, pack=4)


@gluon.jit
def _values_bf16(v, vs_row, PERTURB: gl.constexpr):
    """Value codes [BLOCK_N, D] as bf16, exactly; PERTURB 3, the broken variant, applies the value scale first,
    in FP16."""
    if PERTURB == 3:
        return (v.to(gl.float32) * vs_row[None, :]).to(gl.float16).to(gl.float32).to(gl.bfloat16)
    else:
        return _i8x4_to_bf16(v)


@gluon.jit
def _convert_tile(src, dst, vs_row, PERTURB: gl.constexpr, ld: gl.constexpr):
    """int8 codes [BLOCK_N, D] in shared memory -> bf16 into dst (_values_bf16), 16 rows at a time (few registers
    live; each warp reads whole rows, so the 16-byte reads hit every bank once)."""
    for r in gl.static_range(src.shape[0] // 16):
        dst.slice(r * 16, 16, dim=0).store(_values_bf16(src.slice(r * 16, 16, dim=0).load(ld), vs_row, PERTURB))


# The value product's A operand (V^T [D, BLOCK_N]) in registers (V_REGS). With NB = D / 64 blocks of 64 MMA rows,
# row m = 64 b + 16 w + 8 h + g (block b, warp w, row half h, lane row g) holds output dim
# pi(m) = 2 NB (8 w + g) + 2 b + h, so a thread's rows are 2 NB consecutive dims: one shared load of 2 NB bytes per
# candidate. The accumulator's rows are put back in dim order once, in the epilogue (_dims_in_order).
@gluon.constexpr_function
def _value_layouts(D, BN):
    """The [D, BN] value codes' layouts for _value_operand: as loaded (a thread's 2 NB dims of one candidate in
    consecutive registers) and as the operand orders its registers (candidates c and c + 1 of one dim, then the next
    dim); the same threads hold the same elements in both."""
    nb = D // 64
    b_bits = [[2 << i, 0] for i in range(nb.bit_length() - 1)]
    c_bits = [[0, 8 << i] for i in range((BN // 8).bit_length() - 1)]
    lanes = [[0, 2], [0, 4], [2 * nb, 0], [4 * nb, 0], [8 * nb, 0]]
    warps = [[16 * nb, 0], [32 * nb, 0]]
    loaded = gl.DistributedLinearLayout(reg_bases=[[1, 0]] + b_bits + [[0, 1]] + c_bits, lane_bases=lanes,
                                        warp_bases=warps, block_bases=[], shape=[D, BN])
    operand = gl.DistributedLinearLayout(reg_bases=[[0, 1], [1, 0]] + c_bits + b_bits, lane_bases=lanes,
                                         warp_bases=warps, block_bases=[], shape=[D, BN])
    return loaded, operand


@gluon.jit
def _value_operand(v_raw, VS_ROW, PERTURB: gl.constexpr, o_l: gl.constexpr):
    """The value codes v_raw [BLOCK_N, D] (int8, shared) as V^T [D, BLOCK_N] bf16 in the value product's A operand
    layout, rows in the order pi above: loaded 2 NB bytes a candidate, the bytes of candidates c and c + 1 paired
    (the operand packs them in one register), converted exactly (as _values_bf16), and renamed, not moved, into the
    operand layout."""
    BN: gl.constexpr = v_raw.shape[0]
    D: gl.constexpr = v_raw.shape[1]
    NB: gl.constexpr = D // 64
    ld_l: gl.constexpr = _value_layouts(D, BN)[0]
    op_l: gl.constexpr = _value_layouts(D, BN)[1]
    v = gl.convert_layout(v_raw.permute((1, 0)).load(ld_l), op_l)
    if PERTURB == 3:
        vs_col = gl.load(VS_ROW + gl.arange(0, D, layout=gl.SliceLayout(1, op_l)))
        x = (v.to(gl.float32) * vs_col[:, None]).to(gl.float16).to(gl.float32).to(gl.bfloat16)
    else:
        x = _i8x4_to_bf16(v)
    # [D, BN] with D = (w, g, b, h) -> [(b, w, h, g), BN]
    x = gl.reshape(gl.permute(gl.reshape(x, [4, 8, NB, 2, BN]), (2, 0, 3, 1, 4)), [D, BN])
    return gl.convert_layout(x, gl.DotOperandLayout(operand_index=0, parent=o_l, k_width=2), assert_trivial=True)


@gluon.jit
def _dims_in_order(acc):
    """O^T [D, C] accumulated with rows in _value_operand's order pi -> rows in dim order."""
    D: gl.constexpr = acc.shape[0]
    C: gl.constexpr = acc.shape[1]
    return gl.reshape(gl.permute(gl.reshape(acc, [D // 64, 4, 2, 8, C]), (1, 3, 0, 2, 4)), [D, C])


@gluon.jit
def _v_buf(v_raw, i, V_REGS: gl.constexpr):
    """The value rows' buffer a tile is copied into: one (converted before the next tile's copies are issued), or
    with V_REGS one of two (read by the value product, a tile after the copies into the other)."""
    if V_REGS:
        return v_raw.index(i)
    else:
        return v_raw


@gluon.jit
def _loop(KC, VC, kv_base, stride_kc, IDX_ROW, c0, c1, C, qd_smem, qb_smem, k_bufs, v_raw, v_smem, p_smem, m_i, l_i,
          acc, E_s, row_ok_s, vs_row, QK_INT8: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
          PERTURB: gl.constexpr, ld: gl.constexpr, s_l: gl.constexpr, si_l: gl.constexpr, o_l: gl.constexpr,
          ids0=None, OVERLAP: gl.constexpr = False, V_REGS: gl.constexpr = False, VS_ROW=None):
    """The candidate tiles of positions c0 .. c1. Tile i's rows were copied one tile ahead (key rows into
    k_bufs[i % 2], value rows into v_raw), so tile i + 1's copies fly while tile i's products run; the ids are
    loaded two tiles ahead. Two products a tile, each shared tile read once: the four query digits as the 4 R columns
    of one integer MMA, the probability tile's high and residual halves as the 2 R columns of one bf16 MMA.
    OVERLAP (the query-digit programs only): the score product is issued before the value codes are converted and
    waited for after the next tile's copies are issued, so the tensor cores and the conversion run at once (they
    touch different shared tiles). The same products on the same tiles: the same bits. (Keeping the value product
    in flight across the loop's back-edge as well made ptxas serialize every warpgroup MMA of the loop, each
    followed by its own wait, in the sm_90 SASS: not kept.)
    V_REGS: v_raw holds two tiles' value rows (copied a tile ahead like the key rows), read at the value product
    straight into the MMA's register operand (_value_operand): no bf16 value tile in shared memory."""
    rows_l: gl.constexpr = gl.SliceLayout(1, ld)
    R: gl.constexpr = qd_smem.shape[0] // 4
    if ids0 is None:
        idx, ok = _tile_rows(IDX_ROW, c0, c1, C, BLOCK_N, rows_l)
        _gather(KC, VC, kv_base, stride_kc, idx, ok, k_bufs.index(0), _v_buf(v_raw, 0, V_REGS), HEAD_DIM, ld)
        idx_n, ok_n = _tile_rows(IDX_ROW, c0 + BLOCK_N, c1, C, BLOCK_N, rows_l)
    else:  # IDS_EARLY: the first two tiles' ids, loaded by the caller before the query
        idx, ok, idx_n, ok_n = ids0
        _gather(KC, VC, kv_base, stride_kc, idx, ok, k_bufs.index(0), _v_buf(v_raw, 0, V_REGS), HEAD_DIM, ld)
    i = 0
    for j0 in range(c0, c1, BLOCK_N):
        stage = i % 2
        k_smem = k_bufs.index(stage)
        valid = _tile_rows(IDX_ROW, j0, c1, C, BLOCK_N, gl.SliceLayout(1, s_l))[1]
        if PERTURB == 1:  # the deliberately wrong variant: the split's first candidate skipped
            valid = valid & (j0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, s_l)) != c0)
        async_copy.wait_group(0)  # this tile's rows have landed
        if OVERLAP and QK_INT8:  # the copied key rows visible to the score product issued next (async proxy)
            fence_async_shared()
        gl.thread_barrier()
        if QK_INT8:
            if OVERLAP:  # S4 [BLOCK_N, 4 R] issued first: it reads k_smem and the digits during the conversion
                s4_tok = warpgroup_mma(k_smem, qd_smem.permute((1, 0)),
                                       gl.zeros([BLOCK_N, 4 * R], gl.int32, layout=si_l), is_async=True)
            if not V_REGS:
                _convert_tile(v_raw, v_smem, vs_row, PERTURB, ld)
                fence_async_shared()
                gl.thread_barrier()  # v_raw consumed, v_smem visible to the MMAs
            # the next tile's copies (masked off past the end: nothing read) fly during this tile's products
            _gather(KC, VC, kv_base, stride_kc, idx_n, ok_n, k_bufs.index(1 - stage), _v_buf(v_raw, 1 - stage, V_REGS),
                    HEAD_DIM, ld)
            idx_n, ok_n = _tile_rows(IDX_ROW, j0 + 2 * BLOCK_N, c1, C, BLOCK_N, rows_l)
            if OVERLAP:
                s4 = warpgroup_mma_wait(0, deps=[s4_tok])
            else:
                # S4 [BLOCK_N, 4 R], column 16 i + h: digit i of head h; each thread holds a column's four digits
                s4 = warpgroup_mma(k_smem, qd_smem.permute((1, 0)),
                                   gl.zeros([BLOCK_N, 4 * R], gl.int32, layout=si_l))
            s4 = gl.reshape(gl.permute(gl.reshape(s4, [BLOCK_N, 4, R]), (0, 2, 1)), [BLOCK_N, R, 2, 2])
            s_even, s_odd = gl.split(s4)  # digits (0, 2) and (1, 3)
            s0, s2 = gl.split(s_even)
            s1, s3 = gl.split(s_odd)
            # exact int32 sums scaled by powers of two, added in the twin's order
            s = s0.to(gl.float32) * 0.015625
            s += s1.to(gl.float32) * 0.0001220703125
            s += s2.to(gl.float32) * 9.5367431640625e-07
            s += s3.to(gl.float32) * 7.450580596923828e-09
            s = gl.convert_layout(s, s_l)
        else:
            # the split-bf16 query against the codes converted to bf16 (in v_smem, before the values; with V_REGS,
            # where v_smem is both key buffers' bytes, every code read before the first bf16 store)
            if V_REGS:
                x = k_smem.load(ld)
                gl.thread_barrier()
                v_smem.store(_values_bf16(x, vs_row, 0))
            else:
                _convert_tile(k_smem, v_smem, vs_row, 0, ld)
            fence_async_shared()
            gl.thread_barrier()
            # one product against both halves as 2 R columns (the key tile read once), their sums added after
            s2 = warpgroup_mma(v_smem, qb_smem.permute((1, 0)), gl.zeros([BLOCK_N, 2 * R], gl.float32, layout=o_l))
            s_hi, s_lo = gl.split(gl.permute(gl.reshape(s2, [BLOCK_N, 2, R]), (0, 2, 1)))
            s = gl.convert_layout(s_hi + s_lo, s_l)
            gl.thread_barrier()  # every warp's score products are done before the values overwrite the tile
            if not V_REGS:
                _convert_tile(v_raw, v_smem, vs_row, PERTURB, ld)
                gl.thread_barrier()
            _gather(KC, VC, kv_base, stride_kc, idx_n, ok_n, k_bufs.index(1 - stage), _v_buf(v_raw, 1 - stage, V_REGS),
                    HEAD_DIM, ld)
            idx_n, ok_n = _tile_rows(IDX_ROW, j0 + 2 * BLOCK_N, c1, C, BLOCK_N, rows_l)
        s = gl.where(valid[:, None] & row_ok_s[None, :], s, float("-inf"))
        m_new = gl.maximum(m_i, gl.max(s, 0))
        m_safe = gl.where(m_new == float("-inf"), 0.0, m_new)
        # natural-log differences, scaled by 2^E_r only after the maximum is subtracted
        alpha = gl.exp2(ldexp(m_i - m_safe, E_s) * LOG2E)
        p = gl.exp2(ldexp(s - m_safe[None, :], E_s[None, :]) * LOG2E)
        l_i = l_i * alpha + gl.sum(p, 0)
        # O^T [D, 2 R]: columns h (the high half's products) and R + h (the residual's), both scaled by alpha_h
        alpha2 = gl.reshape(gl.permute(gl.join(alpha, alpha), (1, 0)), [2 * R])
        acc = acc * gl.convert_layout(alpha2, gl.SliceLayout(0, o_l))[None, :]
        p_hi = p.to(gl.bfloat16)
        p_lo = (p - p_hi.to(gl.float32)).to(gl.bfloat16)
        p_smem.store(gl.reshape(gl.permute(gl.join(p_hi, p_lo), (0, 2, 1)), [BLOCK_N, 2 * R]))  # P^T (high | residual)
        fence_async_shared()
        gl.thread_barrier()
        if V_REGS:
            acc = warpgroup_mma(_value_operand(v_raw.index(stage), VS_ROW, PERTURB, o_l), p_smem, acc)
        else:
            acc = warpgroup_mma(v_smem.permute((1, 0)), p_smem, acc)  # V^T [D, BLOCK_N] . P^T
        gl.thread_barrier()  # every warp's products are done before the next tile overwrites the shared tiles
        m_i = m_new
        i += 1
    async_copy.wait_group(0)  # the trailing (masked, zero-filling) group retires before the program ends
    return m_i, l_i, acc


@gluon.jit
def sparse_int8_gluon_kernel(
    Q, KC, VC, KS, VS, IDX, M_OUT, L_OUT, ACC_OUT, E_OUT, OUT, LSE,
    scale_mant, scale_exp, C, N, cands_per_split,
    stride_qt, stride_qh, stride_ot, stride_oh, stride_kh, stride_kc, stride_it, stride_ih, stride_ms, stride_as,
    HQ: gl.constexpr, GROUP: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_R: gl.constexpr, BLOCK_N: gl.constexpr,
    DIRECT: gl.constexpr, PERTURB: gl.constexpr, QK_INT8_BUDGET: gl.constexpr = 0.0009765625,
    PDL: gl.constexpr = False, IDS_EARLY: gl.constexpr = False, OVERLAP: gl.constexpr = False,
    V_REGS: gl.constexpr = False,
):
    pdl_entry(PDL)
    NW: gl.constexpr = gl.num_warps()
    gl.static_assert(NW == 4, "one warpgroup")
    gl.static_assert(BLOCK_N == 64, "64 candidates per tile: one warpgroup MMA's M")
    gl.static_assert(BLOCK_R == 16, "the query heads of a KV head on N, padded to 16")
    D: gl.constexpr = HEAD_DIM
    R: gl.constexpr = BLOCK_R
    # [BLOCK_N, D] int8 rows: 16 bytes a thread
    ld: gl.constexpr = gl.BlockedLayout([1, 16], [32 * 16 // D, D // 16], [NW, 1], [1, 0])
    # [R, D] query: 8 dims a thread
    q_ld: gl.constexpr = gl.BlockedLayout([1, 8], [32 * 8 // D, D // 8], [NW, 1], [1, 0])
    # [D, R] output, d-contiguous: 8 dims a thread
    st_l: gl.constexpr = gl.BlockedLayout([8, 1], [D // 8, 32 * 8 // D], [1, NW], [0, 1])
    s_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[NW, 1], instr_shape=[16, R, 16])
    # the four digits' scores in one product [BLOCK_N, 4 R]; O^T [D, 2 R] (high | residual columns)
    si_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[NW, 1], instr_shape=[16, 4 * R, 32])
    o_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[NW, 1], instr_shape=[16, 2 * R, 16])
    SW8: gl.constexpr = 128 if D >= 128 else 64  # swizzle of an int8 row of D bytes
    k_sl: gl.constexpr = gl.NVMMASharedLayout(SW8, 8, rank=2)
    qd_sl: gl.constexpr = gl.NVMMASharedLayout(SW8, 8, rank=2)
    qb_sl: gl.constexpr = gl.NVMMASharedLayout(128, 16, rank=2)
    v_sl: gl.constexpr = gl.NVMMASharedLayout(128, 16, rank=2)
    p_sl: gl.constexpr = gl.NVMMASharedLayout(4 * R, 16, rank=2)

    t = gl.program_id(0)
    split = gl.program_id(1)
    g = gl.program_id(2)
    c0 = split * cands_per_split
    c1 = gl.minimum(c0 + cands_per_split, N)
    idx_row = IDX + t.to(gl.int64) * stride_it + g * stride_ih
    if IDS_EARLY:  # the first two tiles' ids requested before the query: their round trip overlaps the query's
        # instead of waiting behind the fold's and the digits' barriers (sm_90 SASS)
        rows_l: gl.constexpr = gl.SliceLayout(1, ld)
        idx_0, ok_0 = _tile_rows(idx_row, c0, c1, C, BLOCK_N, rows_l)
        idx_1, ok_1 = _tile_rows(idx_row, c0 + BLOCK_N, c1, C, BLOCK_N, rows_l)
        ids0 = (idx_0, ok_0, idx_1, ok_1)
    else:
        ids0 = None

    # ---- the folded query, exactly normalized: q' = q'' * 2^E_r (kernel.sparse_int8_kernel's arithmetic)
    rq = gl.arange(0, R, layout=gl.SliceLayout(1, q_ld))
    dq = gl.arange(0, D, layout=gl.SliceLayout(0, q_ld))
    rq_ok = rq < GROUP
    q = gl.load(Q + t.to(gl.int64) * stride_qt + (g * GROUP + rq)[:, None] * stride_qh + dq[None, :],
                mask=rq_ok[:, None] & (dq[None, :] >= 0), other=0.0).to(gl.float32)
    ks = gl.load(KS + g * D + dq)
    qn, E = fold_query(q, ks, scale_mant, scale_exp)  # E [R] int32
    d_h, d_m, d_l, d_l2, frac = _int8_digits(qn)
    int_err = ldexp(gl.sum(gl.abs(frac), 1), E - 20)
    use_int = gl.max(int_err, 0) <= QK_INT8_BUDGET
    # the digits as Q_digits [4 R, D] (row 16 i + h: digit i of head h); an NVMMA tile of 4 R rows is not four
    # tiles of R rows laid end to end (its 128-byte column blocks span all rows), so it is allocated as one
    qd_smem = gl.allocate_shared_memory(gl.int8, [4 * R, D], qd_sl)
    # the split-bf16 query in the same bytes, for the programs that take it: Q_b [2 R, D], the high part's rows
    # then the residual's (one NVMMA tile, like the digits')
    qb_smem = qd_smem._reinterpret(gl.bfloat16, [2 * R, D], qb_sl)
    if use_int:
        qd_smem.slice(0 * R, R, dim=0).store(d_h)
        qd_smem.slice(1 * R, R, dim=0).store(d_m)
        qd_smem.slice(2 * R, R, dim=0).store(d_l)
        qd_smem.slice(3 * R, R, dim=0).store(d_l2)
    else:
        q_hi = qn.to(gl.bfloat16)
        qb_smem.slice(0, R, dim=0).store(q_hi)
        qb_smem.slice(R, R, dim=0).store((qn - q_hi.to(gl.float32)).to(gl.bfloat16))
    k_bufs = gl.allocate_shared_memory(gl.int8, [2, BLOCK_N, D], k_sl)
    if V_REGS:  # two tiles' value rows, D / 4-byte units swizzled by candidate bits 1-2: a warp's reads
        # (_value_operand: 8 lanes' D / 4 contiguous bytes for candidates c, c + 2, c + 4, c + 6) fall in different banks
        v_raw = gl.allocate_shared_memory(gl.int8, [2, BLOCK_N, D], gl.SwizzledSharedLayout(D // 4, 2, 4, order=[1, 0]))
        # the bf16 tile only the split-bf16 query's programs use, over the key buffers (_loop)
        v_smem = k_bufs._reinterpret(gl.bfloat16, [BLOCK_N, D], v_sl)
    else:
        v_raw = gl.allocate_shared_memory(gl.int8, [BLOCK_N, D], gl.SwizzledSharedLayout(1, 1, 1, order=[1, 0]))
        v_smem = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_N, D], v_sl)
    p_smem = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_N, 2 * R], p_sl)
    fence_async_shared()
    gl.thread_barrier()

    E_s = gl.convert_layout(E, gl.SliceLayout(0, s_l))
    row_ok_s = gl.arange(0, R, layout=gl.SliceLayout(0, s_l)) < GROUP
    dv = gl.arange(0, D, layout=gl.SliceLayout(0, ld))
    vs_row = gl.load(VS + g * D + dv)  # used in the loop only by PERTURB 3
    m_i = gl.full([R], float("-inf"), gl.float32, layout=gl.SliceLayout(0, s_l))  # scaled domain
    l_i = gl.zeros([R], gl.float32, layout=gl.SliceLayout(0, s_l))
    acc = gl.zeros([D, 2 * R], gl.float32, layout=o_l)  # O^T, the high and residual halves' sums
    kv_base = g.to(gl.int64) * stride_kh
    # one branch per program: the query's int8 digits where they keep every score within the budget, else the
    # split-bf16 query (the twin's rule)
    if use_int:
        m_i, l_i, acc = _loop(KC, VC, kv_base, stride_kc, idx_row, c0, c1, C, qd_smem, qb_smem, k_bufs, v_raw, v_smem,
                              p_smem, m_i, l_i, acc, E_s, row_ok_s, vs_row, True, BLOCK_N, D, PERTURB, ld, s_l, si_l,
                              o_l, ids0, OVERLAP, V_REGS, VS + g * D)
    else:
        m_i, l_i, acc = _loop(KC, VC, kv_base, stride_kc, idx_row, c0, c1, C, qd_smem, qb_smem, k_bufs, v_raw, v_smem,
                              p_smem, m_i, l_i, acc, E_s, row_ok_s, vs_row, False, BLOCK_N, D, PERTURB, ld, s_l, si_l,
                              o_l, ids0, False, V_REGS, VS + g * D)

    # ---- epilogue: O^T [D, R] d-contiguous (8 dims a thread), the value scale after the accumulation
    if V_REGS:
        acc = _dims_in_order(acc)
    o_hi, o_lo = gl.split(gl.permute(gl.reshape(acc, [D, 2, R]), (0, 2, 1)))  # the halves' sums added
    acc = o_hi + o_lo
    o = gl.convert_layout(acc, st_l)
    do = gl.arange(0, D, layout=gl.SliceLayout(1, st_l))
    ho = gl.arange(0, R, layout=gl.SliceLayout(0, st_l))
    if PERTURB != 3:
        o = o * gl.load(VS + g * D + do)[:, None]
    hs = gl.arange(0, R, layout=gl.SliceLayout(0, s_l))
    r_s = t.to(gl.int64) * HQ + g * GROUP + hs
    r_o = t.to(gl.int64) * HQ + g * GROUP + ho
    ho_ok = (ho < GROUP)[None, :] & (do[:, None] >= 0)
    if DIRECT:
        nonempty = l_i != 0  # NaN stays NaN: not the empty row
        den = gl.where(nonempty, l_i, 1.0)
        den_o = gl.convert_layout(den, gl.SliceLayout(0, st_l))
        ne_o = gl.convert_layout(nonempty, gl.SliceLayout(0, st_l))
        o = gl.where(ne_o[None, :], o / den_o[None, :], 0.0)
        gl.store(OUT + t.to(gl.int64) * stride_ot + (g * GROUP + ho)[None, :] * stride_oh + do[:, None],
                 o.to(gl.bfloat16), mask=ho_ok)
        lse = gl.where(nonempty, ldexp(m_i, E_s) + gl.log(den), float("-inf"))
        gl.store(LSE + r_s, lse, mask=row_ok_s)
    else:
        gl.store(M_OUT + split.to(gl.int64) * stride_ms + r_s, m_i, mask=row_ok_s)
        gl.store(L_OUT + split.to(gl.int64) * stride_ms + r_s, l_i, mask=row_ok_s)
        gl.store(ACC_OUT + split.to(gl.int64) * stride_as + r_o[None, :] * D + do[:, None], o, mask=ho_ok)
        if split == 0:
            gl.store(E_OUT + r_s, E_s, mask=row_ok_s)
