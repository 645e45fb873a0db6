"""mqa_decode swap-AB kernel for Hopper (sm_90) in Gluon: each record value decoded once, both products on
warpgroup MMAs reading the decoded tile from shared memory.

Computes   the same partials as kernel_swapab.mqa_swapab_kernel (its interpreter twin: same arguments, same
           partial layout, same numerics): per token t and split s, S^T [slots, H] = KV . Q_rot^T, the softmax
           down the columns and O^T [512, H] += KV^T . P^T, un-normalized (m, l, acc). With FUSED_MERGE the token's
           last program to finish also merges its splits (_merge_token: kernel_merge's arithmetic), so a step is
           one launch. With CLUSTER (log2 of the merging CTAs per thread-block cluster, 0: none) a token's splits
           are the CTAs of one cluster of CTAS (the split is the CTA's rank; ranks past the split count run no tile)
           and, after a cluster barrier, each of the first 2^CLUSTER CTAs merges 512 >> CLUSTER output dims of every
           head (_merge_slice): one launch.
Why        Triton loads and decodes the record tile once per MMA operand layout, and its mma v2 layout holds
           each value in two warps (docs/mqa_decode.md, the instruction census). Here the layouts are explicit:
           the raw record bytes of a 64-slot tile are loaded in a blocked layout (16 fp8 codes or 8 e2m1 pairs per
           thread per load), each value is decoded once, the bf16 tile is stored to shared memory, and both
           warpgroup MMAs read it there (the value product through a transposed view). The query is held as
           Q [H, 512] (16-byte stores) and read transposed by the score product.
Warps      4 (one warpgroup) or 8: two warpgroups split the heads of S^T and the 512 output rows of O^T, and the
           decode; with BLOCK_N = 128 (wide tiles) they split the slots of S^T instead, and at 16 warps (wide tiles
           only) two split its slots and two its heads. Options (config.py): PREFETCH loads the next tile's slot
           ids before the current tile's records; ASYNC copies the raw records into shared memory with cp.async a
           tile ahead (the first while the query is prepared; rows of invalid slots zero-filled).
Contract   as kernel_swapab (q [T, H_pad, 512] bf16 unrotated; caches [pages, page_size, stride] uint8;
           swa_idx [T, W], comp_idx [T, K] int32; partials m, l [S, T * H], acc [S, T * H, 512] fp32); plus, for
           the fused merge, COUNT [T] int32 arrival counters (zero before the launch, zero after), SINK, OUT, LSE,
           O32 as kernel_merge; BLOCK_N = 64 (or 128: wide tiles, whole), H in {16, 32}; strides of the caches
           multiples of 16. With CLUSTER: a 1-D grid of T clusters of CTAS CTAs (0: 2^CLUSTER), NSPLIT
           (constexpr) the splits per token (at most CTAS; the merge's loads of the ranks past it are compiled out);
           ranks 0 .. 2^CLUSTER - 1 merge 512 >> CLUSTER output dims each (2^CLUSTER <= CTAS).
Numerics   exact record decode into bf16 (e4m3 by the conversion instruction times the block's power of two built
           from its bits, byte 0 = 2^-127; e2m1 from its bits, as an fp16 of value x 2^-14, times the e4m3 scale
           x 2^14), fp32 accumulation, softmax in fp32 in the natural-log domain scaled by log2(e) after the
           maximum is subtracted: as the twin.
Runs       CUDA sm_90 only (Gluon has no interpreter): the tests run the twin in the interpreter and this kernel
           on the GPU (gate "mqa_decode/gluon_swapab", tests test_gluon_*).
PERTURB    1: the first slot tile of every split lost; 2: each fp8 block reads its neighbour's scale.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import async_copy, fence_async_shared, warpgroup_mma

from .._triton.pdl import pdl_entry, pdl_release, pdl_wait

LOG2E: gl.constexpr = gl.constexpr(1.4426950408889634)


def _e2m1_asm(mag_mask: int, sign_mask: int, mag_mul: int, sign_mul: int) -> str:
    """PTX for four e2m1 nibbles (one per byte of $2, at mag_mask / sign_mask within each byte pair) times their
    scales ($3, $4: bf16x2, the scale times 2^63) -> $0, $1 (bf16x2). The multiplies place a byte pair's two
    magnitudes at bf16 bits 6-8 and 22-24 and its two signs at 15 and 31 (the cross terms land on bits the masks
    clear); the bf16 with those bits is the e2m1 value times 2^-126."""
    pair = """
        and.b32 m, {w}, {mm:#06x};
        and.b32 g, {w}, {sm:#06x};
        mul.lo.u32 m, m, {mk:#x};
        mul.lo.u32 g, g, {sk:#x};
        and.b32 m, m, 0x01C001C0;
        and.b32 g, g, 0x80008000;
        or.b32 m, m, g;
        mul.rn.bf16x2 m, m, {s};
        mul.rn.bf16x2 {o}, m, c;"""
    f = dict(mm=mag_mask, sm=sign_mask, mk=mag_mul, sk=sign_mul)
    return ("{\n        .reg .b32 w, m, g, c;\n        mov.b32 c, 0x5F005F00;"
            + pair.format(w="$2", s="$3", o="$0", **f)
            + "\n        shr.u32 w, $2, 16;"
            + pair.format(w="w", s="$4", o="$1", **f) + "\n        }")


# the low nibbles (magnitudes at bits 0-2 / 8-10 of a byte pair, signs at 3 / 11) and the high ones (4-6 / 12-14,
# signs at 7 / 15); tests/test_mqa_decode.py runs these strings through a PTX emulator for every input
E2M1_LO_ASM = gl.constexpr(_e2m1_asm(0x0707, 0x0808, 0x4040, 0x00101000))
E2M1_HI_ASM = gl.constexpr(_e2m1_asm(0x7070, 0x8080, 0x0404, 0x00010100))


# every thread of every CTA of the cluster: the partial stores before it are visible to the loads after it in any
# CTA of the cluster (release / acquire at cluster scope); the operand is returned so that loads can depend on it
CLUSTER_BARRIER_ASM = gl.constexpr("barrier.cluster.arrive.release.aligned;\n"
                                   "barrier.cluster.wait.acquire.aligned;\n"
                                   "mov.u32 $0, $1;")


@gluon.jit
def _tile_slots(IDX_ROW, p0, p1, first, BLOCK_N: gl.constexpr, PERTURB: gl.constexpr, rows_l: gl.constexpr):
    """Slot ids of list positions p0 .. p0 + BLOCK_N (bounded by p1) and their validity; PERTURB 1 (the
    deliberately wrong variant) drops the tile that starts at `first`."""
    n = p0 + gl.arange(0, BLOCK_N, layout=rows_l)
    in_range = n < p1
    if PERTURB == 1:
        in_range = in_range & (p0 != first)
    slot = gl.load(IDX_ROW + n, mask=in_range, other=-1)
    return slot, in_range & (slot >= 0)


@gluon.jit
def _load_chunk(rec, ok, c: gl.constexpr, NVFP4: gl.constexpr, PERTURB: gl.constexpr, L3: gl.constexpr):
    """The raw bytes of dims 128 c .. 128 c + 127 of the tile's records (rec [BLOCK_N] record pointers, rows masked
    by ok): [BLOCK_N, 8, 16] fp8 codes (16 per thread, two groups per 32-dim block) or [BLOCK_N, 8, 8] e2m1 byte
    pairs (one 16-dim block per group), and one scale byte per group [BLOCK_N, 8]."""
    g = gl.arange(0, 8, layout=gl.SliceLayout(0, gl.SliceLayout(2, L3)))
    rp = rec[:, None, None]
    m3 = ok[:, None, None]
    m2 = ok[:, None]
    if NVFP4:
        e = gl.arange(0, 8, layout=gl.SliceLayout(0, gl.SliceLayout(1, L3)))
        b = gl.load(rp + (c * 64 + g[None, :, None] * 8 + e[None, None, :]), mask=m3, other=0)
        blk = c * 8 + g
        if PERTURB == 2:  # the deliberately wrong variant: each block reads its neighbour's scale
            blk = (blk + 1) % 32
        s = gl.load(rec[:, None] + 256 + blk[None, :], mask=m2, other=0)
    else:
        e = gl.arange(0, 16, layout=gl.SliceLayout(0, gl.SliceLayout(1, L3)))
        b = gl.load(rp + (c * 128 + g[None, :, None] * 16 + e[None, None, :]), mask=m3, other=0)
        blk = c * 4 + g // 2
        if PERTURB == 2:
            blk = (blk + 1) % 16
        s = gl.load(rec[:, None] + 512 + blk[None, :], mask=m2, other=0)
    return b, s


@gluon.jit
def _store_chunk(b, s, kv_smem, c: gl.constexpr, BLOCK_N: gl.constexpr, NVFP4: gl.constexpr):
    """Decode (exactly, into bf16) the raw bytes of _load_chunk and store them as dims 128 c .. 128 c + 127."""
    if NVFP4:
        x = _e2m1_block_values(b, s, BLOCK_N, NVFP4)
    else:
        sc = _ue8m0_scale(s)
        x = gl.reshape((b.to(gl.float8e4nv, bitcast=True).to(gl.float32) * sc[:, :, None]).to(gl.bfloat16),
                       [BLOCK_N, 128])
    kv_smem.slice(c * 128, 128, dim=1).store(x)


@gluon.jit
def _decode_chunk(rec, ok, kv_smem, c: gl.constexpr, BLOCK_N: gl.constexpr, NVFP4: gl.constexpr,
                  PERTURB: gl.constexpr, L3: gl.constexpr):
    """Load, decode and store dims 128 c .. 128 c + 127 of the tile's records (_load_chunk, _store_chunk)."""
    b, s = _load_chunk(rec, ok, c, NVFP4, PERTURB, L3)
    _store_chunk(b, s, kv_smem, c, BLOCK_N, NVFP4)


@gluon.jit
def _ue8m0_scale(s):
    """UE8M0 scale bytes -> 2^(byte - 127) in fp32, from the bits; byte 0 is 2^-127, an fp32 subnormal."""
    sb = s.to(gl.int32)
    return gl.where(sb == 0, 5.877471754111438e-39, (sb << 23).to(gl.float32, bitcast=True))


@gluon.jit
def _e2m1_block_values(b, s, BLOCK_N: gl.constexpr, NVFP4: gl.constexpr = 1):
    """e2m1 pairs b [BLOCK_N, 8 blocks, 8 bytes] (even dim in the low nibble) and the blocks' e4m3 scale bytes s
    [BLOCK_N, 8] -> the 128 values, exact in bf16 [BLOCK_N, 128]. NVFP4 1: each code through an fp16 and an fp32
    product; 2 (the option gluon_e2m1_bits): each code's bits as a bf16 and two bf16x2 products (_e2m1_x4_bf16)."""
    if NVFP4 == 2:
        sc = (s.to(gl.float8e4nv, bitcast=True).to(gl.float32) * 9.223372036854776e18).to(gl.bfloat16)  # x 2^63
        scb, _ = gl.broadcast(sc[:, :, None], b)
        lo = _e2m1_x4_bf16(b, scb, False)
        hi = _e2m1_x4_bf16(b, scb, True)
        return gl.reshape(gl.join(lo, hi), [BLOCK_N, 128])  # dim 2k: low nibble
    sc = (s.to(gl.float8e4nv, bitcast=True).to(gl.float32) * 16384.0)[:, :, None]  # e2m1 below is value x 2^-14
    bi = b.to(gl.int32)
    lo = _e2m1_f16_bits(bi & 0xF).to(gl.float16, bitcast=True).to(gl.float32) * sc
    hi = _e2m1_f16_bits(bi >> 4).to(gl.float16, bitcast=True).to(gl.float32) * sc
    return gl.reshape(gl.join(lo.to(gl.bfloat16), hi.to(gl.bfloat16)), [BLOCK_N, 128])  # dim 2k: low nibble


@gluon.jit
def _e2m1_x4_bf16(b, scb, HI: gl.constexpr):
    """The low (or HI: high) e2m1 nibbles of four bytes b (uint8) times their blocks' scales scb (bf16, the e4m3
    scale times 2^63) -> four bf16 values, exactly. Per two bytes: the two magnitudes' three bits land on the bf16
    exponent's two lowest bits and the mantissa's highest (one mask, one multiply spreading them, one mask: the
    bf16 equal to the value times 2^-126, the code 0.5 a bf16 subnormal), the two signs likewise; then two bf16x2
    products: by the scale times 2^63, then by 2^63. Every product is exact (at most 6 significant bits, inside the
    normal range after the first); checked for every code, byte pair and e4m3 scale by emulation
    (tests/test_mqa_decode.py::test_e2m1_bit_decode_is_exact)."""
    if HI:
        asm: gl.constexpr = E2M1_HI_ASM
    else:
        asm: gl.constexpr = E2M1_LO_ASM
    return gl.inline_asm_elementwise(asm, "=r,=r,r,r,r", [b, scb], dtype=gl.bfloat16, is_pure=True, pack=4)


@gluon.jit
def _e2m1_f16_bits(nib):
    """An e2m1 code (4 bits) as the int16 bits of an fp16 equal to its value times 2^-14: the magnitude's three
    bits land on the exponent's two lowest bits and the mantissa's highest (0.5 = the fp16 subnormal 2^-15)."""
    return (((nib & 7) << 9) | ((nib & 8) << 12)).to(gl.int16)


@gluon.jit
def _tile_step(CACHE, stride_rec, slot, ok, kv_smem, q_smem, p_smem, m_i, l_i, acc, sm_scale, BLOCK_N: gl.constexpr,
               NVFP4: gl.constexpr, PERTURB: gl.constexpr, L3: gl.constexpr, s_l: gl.constexpr, o_l: gl.constexpr,
               LIVE: gl.constexpr, ok_s, LOADS_FIRST: gl.constexpr = False):
    """One tile: its LIVE slots' records (slot, ok [LIVE]) decoded into the first LIVE rows of kv_smem, then the
    products over all BLOCK_N rows with ok_s [BLOCK_N] (rows past LIVE invalid; their shared rows hold zeros)."""
    _tile_decode(CACHE, stride_rec, slot, ok, kv_smem, BLOCK_N, NVFP4, PERTURB, L3, LIVE, LOADS_FIRST)
    return _tile_products(ok_s, kv_smem, q_smem, p_smem, m_i, l_i, acc, sm_scale, BLOCK_N, s_l, o_l)


@gluon.jit
def _tile_decode(CACHE, stride_rec, slot, ok, kv_smem, BLOCK_N: gl.constexpr, NVFP4: gl.constexpr,
                 PERTURB: gl.constexpr, L3: gl.constexpr, LIVE: gl.constexpr, LOADS_FIRST: gl.constexpr = False):
    """A tile's LIVE slots' records (slot, ok [LIVE]) decoded into the first LIVE rows of kv_smem, fenced for the
    warpgroup MMAs and visible to every warp. LOADS_FIRST: the four 128-dim chunks' loads all issued before the
    first chunk is decoded and stored (else chunk by chunk, and the barrier before each chunk's store keeps the
    next chunks' loads behind it: sm_90 SASS)."""
    if LOADS_FIRST:  # every chunk's loads issued before the first store (whose barrier would hold the later loads)
        b0, s0, b1, s1, b2, s2, b3, s3 = _load_tile(CACHE, stride_rec, slot, ok, NVFP4, PERTURB, L3)
        _store_tile(b0, s0, b1, s1, b2, s2, b3, s3, kv_smem, BLOCK_N, NVFP4, LIVE)
    else:
        rec = CACHE + gl.where(ok, slot, 0).to(gl.int64) * stride_rec
        if LIVE < BLOCK_N:
            kv_dst = kv_smem.slice(0, LIVE, dim=0)
        else:
            kv_dst = kv_smem
        _decode_chunk(rec, ok, kv_dst, 0, LIVE, NVFP4, PERTURB, L3)
        _decode_chunk(rec, ok, kv_dst, 1, LIVE, NVFP4, PERTURB, L3)
        _decode_chunk(rec, ok, kv_dst, 2, LIVE, NVFP4, PERTURB, L3)
        _decode_chunk(rec, ok, kv_dst, 3, LIVE, NVFP4, PERTURB, L3)
        fence_async_shared()
        gl.thread_barrier()


@gluon.jit
def _load_tile(CACHE, stride_rec, slot, ok, NVFP4: gl.constexpr, PERTURB: gl.constexpr, L3: gl.constexpr):
    """The raw bytes of a tile's records (slot, ok), its four 128-dim chunks (_load_chunk): loads only, so that
    nothing between them and their use holds them back."""
    rec = CACHE + gl.where(ok, slot, 0).to(gl.int64) * stride_rec
    b0, s0 = _load_chunk(rec, ok, 0, NVFP4, PERTURB, L3)
    b1, s1 = _load_chunk(rec, ok, 1, NVFP4, PERTURB, L3)
    b2, s2 = _load_chunk(rec, ok, 2, NVFP4, PERTURB, L3)
    b3, s3 = _load_chunk(rec, ok, 3, NVFP4, PERTURB, L3)
    return b0, s0, b1, s1, b2, s2, b3, s3


@gluon.jit
def _store_tile(b0, s0, b1, s1, b2, s2, b3, s3, kv_smem, BLOCK_N: gl.constexpr, NVFP4: gl.constexpr,
                LIVE: gl.constexpr):
    """A tile's raw records (_load_tile) decoded into the first LIVE rows of kv_smem, fenced for the warpgroup MMAs
    and visible to every warp."""
    if LIVE < BLOCK_N:
        kv_dst = kv_smem.slice(0, LIVE, dim=0)
    else:
        kv_dst = kv_smem
    _store_chunk(b0, s0, kv_dst, 0, LIVE, NVFP4)
    _store_chunk(b1, s1, kv_dst, 1, LIVE, NVFP4)
    _store_chunk(b2, s2, kv_dst, 2, LIVE, NVFP4)
    _store_chunk(b3, s3, kv_dst, 3, LIVE, NVFP4)
    fence_async_shared()
    gl.thread_barrier()


@gluon.jit
def _products_ok(IDX_ROW, p0, p_end, first, ok, BLOCK_N: gl.constexpr, LIVE: gl.constexpr, PERTURB: gl.constexpr,
                 s_l: gl.constexpr):
    """The products' slot validity [BLOCK_N]: the decode's own (ok) for whole tiles; for half tiles (LIVE <
    BLOCK_N) the LIVE slots' validity reloaded in the score layout, the rows past them invalid."""
    if LIVE < BLOCK_N:
        _, ok_s = _tile_slots(IDX_ROW, p0, gl.minimum(p_end, p0 + LIVE), first, BLOCK_N, PERTURB,
                              gl.SliceLayout(1, s_l))
    else:
        ok_s = ok
    return ok_s


@gluon.jit
def _list_loop(CACHE, IDX_ROW, p_start, p_end, first, stride_rec, kv_smem, q_smem, p_smem, m_i, l_i, acc, sm_scale,
               BLOCK_N: gl.constexpr, NVFP4: gl.constexpr, PERTURB: gl.constexpr, PREFETCH: gl.constexpr,
               L3: gl.constexpr, s_l: gl.constexpr, o_l: gl.constexpr, slot0=None, ok0=None, LIVE: gl.constexpr = 64,
               LOADS_FIRST: gl.constexpr = False):
    """The tiles of one list, LIVE slots each (BLOCK_N, or half of it: the tile's other rows stay zero). slot0, ok0
    (EARLY, with PREFETCH): the first tile's slot ids, loaded by the caller."""
    rows_l: gl.constexpr = gl.SliceLayout(1, gl.SliceLayout(2, L3))
    if PREFETCH:  # the next tile's slot ids are loaded before this tile's records (masked past the end)
        if slot0 is None:
            slot, ok = _tile_slots(IDX_ROW, p_start, p_end, first, LIVE, PERTURB, rows_l)
        else:
            slot = slot0
            ok = ok0
        for p0 in range(p_start, p_end, LIVE):
            slot_n, ok_n = _tile_slots(IDX_ROW, p0 + LIVE, p_end, first, LIVE, PERTURB, rows_l)
            ok_s = _products_ok(IDX_ROW, p0, p_end, first, ok, BLOCK_N, LIVE, PERTURB, s_l)
            m_i, l_i, acc = _tile_step(CACHE, stride_rec, slot, ok, kv_smem, q_smem, p_smem, m_i, l_i, acc, sm_scale,
                                       BLOCK_N, NVFP4, PERTURB, L3, s_l, o_l, LIVE, ok_s, LOADS_FIRST)
            slot = slot_n
            ok = ok_n
    else:
        for p0 in range(p_start, p_end, LIVE):
            slot, ok = _tile_slots(IDX_ROW, p0, p_end, first, LIVE, PERTURB, rows_l)
            ok_s = _products_ok(IDX_ROW, p0, p_end, first, ok, BLOCK_N, LIVE, PERTURB, s_l)
            m_i, l_i, acc = _tile_step(CACHE, stride_rec, slot, ok, kv_smem, q_smem, p_smem, m_i, l_i, acc, sm_scale,
                                       BLOCK_N, NVFP4, PERTURB, L3, s_l, o_l, LIVE, ok_s, LOADS_FIRST)
    return m_i, l_i, acc


@gluon.jit
def _first_slots(swa_row, comp_row, n0, w1, c0, c1, first_c, LIVE: gl.constexpr, PERTURB: gl.constexpr,
                 rows_l: gl.constexpr):
    """ONE_LOOP: the slot ids of a split's first tile: the window list's if the split starts in it, else the
    compressed list's."""
    is_w = n0 < w1
    return _tile_slots(gl.where(is_w, swa_row, comp_row), gl.where(is_w, n0, c0), gl.where(is_w, w1, c1),
                       gl.where(is_w, n0, first_c), LIVE, PERTURB, rows_l)


@gluon.jit
def _lists_loop(SWA, COMP, swa_row, comp_row, n0, w1, c0, c1, first_c, stride_swa, stride_comp, kv_smem, q_smem,
                p_smem, m_i, l_i, acc, sm_scale, BLOCK_N: gl.constexpr, NVFP4: gl.constexpr, PERTURB: gl.constexpr,
                L3w: gl.constexpr, L3c: gl.constexpr, s_l: gl.constexpr, o_l: gl.constexpr, LIVE: gl.constexpr = 64,
                slot0=None, ok0=None, LOADS_FIRST: gl.constexpr = False):
    """ONE_LOOP: the tiles of both lists (the window's, then the compressed list's) in one loop, each tile's list,
    cache and bounds selected by its index, the next tile's slot ids loaded before the current tile's records (as
    _list_loop with PREFETCH). The same tiles in the same order, so the same bits. One loop body: ptxas keeps the
    warpgroup MMAs' shared-memory descriptors in uniform registers (in the second of two list loops it rebuilt them
    per tile in ordinary registers: compile_check --census). slot0, ok0 (EARLY): the first tile's slot ids, loaded
    by the caller (_first_slots)."""
    rows_l: gl.constexpr = gl.SliceLayout(1, gl.SliceLayout(2, L3w))
    nt_w = (gl.maximum(w1 - n0, 0) + LIVE - 1) // LIVE
    nt_c = (gl.maximum(c1 - c0, 0) + LIVE - 1) // LIVE
    if slot0 is None:
        slot, ok = _first_slots(swa_row, comp_row, n0, w1, c0, c1, first_c, LIVE, PERTURB, rows_l)
    else:
        slot = slot0
        ok = ok0
    for i in range(0, nt_w + nt_c):
        j = i + 1
        nw = j < nt_w
        slot_n, ok_n = _tile_slots(gl.where(nw, swa_row, comp_row),
                                   gl.where(nw, n0 + j * LIVE, c0 + (j - nt_w) * LIVE), gl.where(nw, w1, c1),
                                   gl.where(nw, n0, first_c), LIVE, PERTURB, rows_l)
        is_w = i < nt_w
        idx_row = gl.where(is_w, swa_row, comp_row)
        p0 = gl.where(is_w, n0 + i * LIVE, c0 + (i - nt_w) * LIVE)
        p_end = gl.where(is_w, w1, c1)
        first = gl.where(is_w, n0, first_c)
        ok_s = _products_ok(idx_row, p0, p_end, first, ok, BLOCK_N, LIVE, PERTURB, s_l)
        # the decode branches by list (nvfp4 compressed records); the products are one copy for both lists
        if NVFP4:
            if is_w:
                _tile_decode(SWA, stride_swa, slot, ok, kv_smem, BLOCK_N, False, PERTURB, L3w, LIVE, LOADS_FIRST)
            else:
                rc_l: gl.constexpr = gl.SliceLayout(1, gl.SliceLayout(2, L3c))
                _tile_decode(COMP, stride_comp, gl.convert_layout(slot, rc_l), gl.convert_layout(ok, rc_l), kv_smem,
                             BLOCK_N, NVFP4, PERTURB, L3c, LIVE, LOADS_FIRST)
        else:
            _tile_decode(gl.where(is_w, SWA, COMP), gl.where(is_w, stride_swa, stride_comp), slot, ok, kv_smem,
                         BLOCK_N, False, PERTURB, L3w, LIVE, LOADS_FIRST)
        m_i, l_i, acc = _tile_products(ok_s, kv_smem, q_smem, p_smem, m_i, l_i, acc, sm_scale, BLOCK_N, s_l, o_l)
        slot = slot_n
        ok = ok_n
    return m_i, l_i, acc


@gluon.jit
def _issue_tile(CACHE, IDX_ROW, p0, p1, first, stride_rec, raw_codes, raw_scales, BLOCK_N: gl.constexpr,
                NVFP4: gl.constexpr, PERTURB: gl.constexpr, cp_l: gl.constexpr, sc_l: gl.constexpr):
    """ASYNC: start copying the raw records of the tile at list positions p0 .. p0 + BLOCK_N (bounded by p1) into
    shared memory (cp.async; rows of invalid slots are zero-filled) and commit the group: the codes into raw_codes
    [128-dim chunk, BLOCK_N, ...] in the layout the decode reads them with, the scale bytes [BLOCK_N, 16 | 32]
    into raw_scales (fp8 with PERTURB 2: the 16 scale bytes twice, so that a block can read its neighbour's, the
    deliberately wrong variant)."""
    if NVFP4:
        SB: gl.constexpr = 256
        SN: gl.constexpr = 32
    else:
        SB: gl.constexpr = 512
        SN: gl.constexpr = 16
    # per 128-dim chunk, in the layout the decode reads it with (each thread reads back the bytes it copied)
    if NVFP4:  # raw_codes [chunk, row, 16-dim block, 8 bytes]: 8 bytes per copy
        row_l: gl.constexpr = gl.SliceLayout(1, gl.SliceLayout(2, cp_l))
        slot, ok = _tile_slots(IDX_ROW, p0, p1, first, BLOCK_N, PERTURB, row_l)
        rec = CACHE + gl.where(ok, slot, 0).to(gl.int64) * stride_rec
        bk = gl.arange(0, 8, layout=gl.SliceLayout(0, gl.SliceLayout(2, cp_l)))
        by = gl.arange(0, 8, layout=gl.SliceLayout(0, gl.SliceLayout(1, cp_l)))
        off = bk[None, :, None] * 8 + by[None, None, :]
        ptr = rec[:, None, None] + off
        msk = ok[:, None, None] & (off >= 0)
        for c in gl.static_range(4):
            async_copy.async_copy_global_to_shared(raw_codes.index(c), ptr + c * 64, mask=msk)
    else:  # raw_codes [chunk, row, 32-dim block, half, 16 codes]: 16 bytes per copy
        row_l: gl.constexpr = gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(3, cp_l)))
        slot, ok = _tile_slots(IDX_ROW, p0, p1, first, BLOCK_N, PERTURB, row_l)
        rec = CACHE + gl.where(ok, slot, 0).to(gl.int64) * stride_rec
        bk = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(2, gl.SliceLayout(3, cp_l))))
        hf = gl.arange(0, 2, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(3, cp_l))))
        by = gl.arange(0, 16, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, cp_l))))
        off = (bk[None, :, None, None] * 32 + hf[None, None, :, None] * 16) + by[None, None, None, :]
        ptr = rec[:, None, None, None] + off
        msk = ok[:, None, None, None] & (off >= 0)
        for c in gl.static_range(4):
            async_copy.async_copy_global_to_shared(raw_codes.index(c), ptr + c * 128, mask=msk)
    slot2, ok2 = _tile_slots(IDX_ROW, p0, p1, first, BLOCK_N, PERTURB, gl.SliceLayout(1, sc_l))
    rec2 = CACHE + gl.where(ok2, slot2, 0).to(gl.int64) * stride_rec + SB
    sj = gl.arange(0, SN, layout=gl.SliceLayout(0, sc_l))
    m2 = ok2[:, None] & (sj[None, :] >= 0)
    async_copy.async_copy_global_to_shared(raw_scales.slice(0, SN, dim=1), rec2[:, None] + sj[None, :], mask=m2)
    if PERTURB == 2:
        if not NVFP4:
            async_copy.async_copy_global_to_shared(raw_scales.slice(16, 16, dim=1), rec2[:, None] + sj[None, :],
                                                   mask=m2)
    async_copy.commit_group()


@gluon.jit
def _decode_smem_chunk(raw_codes, raw_scales, kv_smem, c: gl.constexpr, BLOCK_N: gl.constexpr, NVFP4: gl.constexpr,
                       PERTURB: gl.constexpr, L3: gl.constexpr, L4: gl.constexpr):
    """ASYNC: decode dims 128 c .. 128 c + 127 of the tile from the raw records in shared memory (exactly, into
    bf16) and store them to the tile."""
    if NVFP4:
        b = raw_codes.index(c).load(L3)  # [rows, 16-dim block, 8 bytes]
        x = _e2m1_block_values(b, raw_scales.slice(c * 8, 8, dim=1).load(gl.SliceLayout(2, L3)), BLOCK_N, NVFP4)
    else:
        b = raw_codes.index(c).load(L4)  # [rows, 32-dim block, half, 16 codes]
        if PERTURB == 2:
            s = raw_scales.slice(c * 4 + 1, 4, dim=1).load(gl.SliceLayout(2, gl.SliceLayout(3, L4)))
        else:
            s = raw_scales.slice(c * 4, 4, dim=1).load(gl.SliceLayout(2, gl.SliceLayout(3, L4)))
        sc = _ue8m0_scale(s)
        x = gl.reshape((b.to(gl.float8e4nv, bitcast=True).to(gl.float32) * sc[:, :, None, None]).to(gl.bfloat16),
                       [BLOCK_N, 128])
    kv_smem.slice(c * 128, 128, dim=1).store(x)


@gluon.jit
def _tile_products(ok, kv_smem, q_smem, p_smem, m_i, l_i, acc, sm_scale, BLOCK_N: gl.constexpr,
                   s_l: gl.constexpr, o_l: gl.constexpr):
    """S^T = KV . Q^T, the online softmax down the columns, O^T += KV^T . P^T (kv_smem written and fenced; ok the
    slots' validity [BLOCK_N] in any layout)."""
    H: gl.constexpr = q_smem.shape[1]
    s = warpgroup_mma(kv_smem, q_smem, gl.zeros([BLOCK_N, H], gl.float32, layout=s_l))
    ok_s = gl.convert_layout(ok, gl.SliceLayout(1, s_l))
    s = gl.where(ok_s[:, None], s * sm_scale, float("-inf"))
    m_new = gl.maximum(m_i, gl.max(s, 0))
    m_safe = gl.where(m_new == float("-inf"), 0.0, m_new)
    p = gl.exp2((s - m_safe[None, :]) * LOG2E)
    alpha = gl.exp2((m_i - m_safe) * LOG2E)
    l_i = l_i * alpha + gl.sum(p, 0)
    acc = acc * gl.convert_layout(alpha, gl.SliceLayout(0, o_l))[None, :]
    p_smem.store(p.to(gl.bfloat16))
    fence_async_shared()
    gl.thread_barrier()
    acc = warpgroup_mma(kv_smem.permute((1, 0)), p_smem, acc)
    gl.thread_barrier()  # every warp's products are done before the next tile overwrites the shared tiles
    return m_new, l_i, acc


@gluon.jit
def _list_loop_async(CACHE, IDX_ROW, p_start, p_end, first, stride_rec, kv_smem, q_smem, p_smem, raw_codes,
                     raw_scales, m_i, l_i, acc, sm_scale, BLOCK_N: gl.constexpr, NVFP4: gl.constexpr,
                     PERTURB: gl.constexpr, L3: gl.constexpr, L4: gl.constexpr, cp_l: gl.constexpr,
                     sc_l: gl.constexpr, s_l: gl.constexpr, o_l: gl.constexpr, issued):
    """ASYNC: the tiles of one list. The first tile's copies were issued by the caller when `issued`; each next
    tile's copies are issued once the current tile is decoded, so they fly during its products."""
    if (not issued) and (p_start < p_end):
        _issue_tile(CACHE, IDX_ROW, p_start, p_end, first, stride_rec, raw_codes, raw_scales, BLOCK_N, NVFP4,
                    PERTURB, cp_l, sc_l)
    for p0 in range(p_start, p_end, BLOCK_N):
        slot, ok_s = _tile_slots(IDX_ROW, p0, p_end, first, BLOCK_N, PERTURB, gl.SliceLayout(1, s_l))
        async_copy.wait_group(0)
        gl.thread_barrier()
        _decode_smem_chunk(raw_codes, raw_scales, kv_smem, 0, BLOCK_N, NVFP4, PERTURB, L3, L4)
        _decode_smem_chunk(raw_codes, raw_scales, kv_smem, 1, BLOCK_N, NVFP4, PERTURB, L3, L4)
        _decode_smem_chunk(raw_codes, raw_scales, kv_smem, 2, BLOCK_N, NVFP4, PERTURB, L3, L4)
        _decode_smem_chunk(raw_codes, raw_scales, kv_smem, 3, BLOCK_N, NVFP4, PERTURB, L3, L4)
        fence_async_shared()
        gl.thread_barrier()  # the raw tile is consumed and the decoded one visible to the MMAs
        if p0 + BLOCK_N < p_end:
            _issue_tile(CACHE, IDX_ROW, p0 + BLOCK_N, p_end, first, stride_rec, raw_codes, raw_scales, BLOCK_N,
                        NVFP4, PERTURB, cp_l, sc_l)
        m_i, l_i, acc = _tile_products(ok_s, kv_smem, q_smem, p_smem, m_i, l_i, acc, sm_scale, BLOCK_N, s_l, o_l)
    return m_i, l_i, acc


@gluon.jit
def _q_cols(Q_ROW, stride_qh, lo: gl.constexpr, n: gl.constexpr, H: gl.constexpr, q_ld: gl.constexpr):
    """Query dims lo .. lo + n of the H heads of one token, [H, n] bf16 (8 dims a thread)."""
    h = gl.arange(0, H, layout=gl.SliceLayout(1, q_ld))[:, None]
    d = lo + gl.arange(0, n, layout=gl.SliceLayout(0, q_ld))[None, :]
    return gl.load(Q_ROW + h * stride_qh + d)


@gluon.jit
def _rope_loads(Q_ROW, stride_qh, COS_SIN, pos, H: gl.constexpr, q_ld: gl.constexpr):
    """The RoPE dims' inputs: x (dims 448-511) and each dim's pair partner [H, 64] bf16, cos and sin at pos."""
    h = gl.arange(0, H, layout=gl.SliceLayout(1, q_ld))[:, None]
    d = 448 + gl.arange(0, 64, layout=gl.SliceLayout(0, q_ld))[None, :]
    x = gl.load(Q_ROW + h * stride_qh + d)
    partner = gl.load(Q_ROW + h * stride_qh + (d ^ 1))
    i = (d - 448) // 2 + 0 * h
    c = gl.load(COS_SIN + pos * 64 + i)
    sn = gl.load(COS_SIN + pos * 64 + 32 + i)
    return x, partner, c, sn


@gluon.jit
def _rope(x, partner, c, sn, q_ld: gl.constexpr):
    """The RoPE dims rotated in fp32 (pairs (2i, 2i+1)): even d x c - x' s, odd d x' s + x c (x' the partner)."""
    d = 448 + gl.arange(0, 64, layout=gl.SliceLayout(0, q_ld))[None, :]
    xf = x.to(gl.float32)
    pf = partner.to(gl.float32)
    return (xf * c + gl.where(d % 2 == 0, -pf, pf) * sn).to(gl.bfloat16)


@gluon.jit
def _query_stores(q_smem, q0, q1, q2, x, partner, c, sn, q_ld: gl.constexpr):
    """The query's loads (_q_cols, _rope_loads) stored as Q [H, 512] (its RoPE dims rotated)."""
    q_smem.slice(0, 256, dim=1).store(q0)
    q_smem.slice(256, 128, dim=1).store(q1)
    q_smem.slice(384, 64, dim=1).store(q2)
    q_smem.slice(448, 64, dim=1).store(_rope(x, partner, c, sn, q_ld))


@gluon.jit
def _first_tile(CACHE, stride_rec, IDX_ROW, p0, p_end, first, slot, ok, q_smem, q_t, kv_smem, p_smem, m_i, l_i, acc,
                sm_scale, q0, q1, q2, x, partner, c, sn, BLOCK_N: gl.constexpr, NVFP4: gl.constexpr,
                PERTURB: gl.constexpr, L3: gl.constexpr, s_l: gl.constexpr, o_l: gl.constexpr, q_ld: gl.constexpr):
    """PROLOGUE 2: a split's first tile (list positions p0 .., slot ids slot, ok) with the query's stores: its
    records loaded before the query (already loaded: q0 .. sn) is stored, then the tile's products. Returns the
    next tile's slot ids (loaded before the products, as the list loop's prefetch) with m, l, acc."""
    rows_l: gl.constexpr = gl.SliceLayout(1, gl.SliceLayout(2, L3))
    b0, s0, b1, s1, b2, s2, b3, s3 = _load_tile(CACHE, stride_rec, slot, ok, NVFP4, PERTURB, L3)
    _query_stores(q_smem, q0, q1, q2, x, partner, c, sn, q_ld)
    slot_n, ok_n = _tile_slots(IDX_ROW, p0 + BLOCK_N, p_end, first, BLOCK_N, PERTURB, rows_l)
    _store_tile(b0, s0, b1, s1, b2, s2, b3, s3, kv_smem, BLOCK_N, NVFP4, BLOCK_N)
    m_i, l_i, acc = _tile_products(ok, kv_smem, q_t, p_smem, m_i, l_i, acc, sm_scale, BLOCK_N, s_l, o_l)
    return slot_n, ok_n, m_i, l_i, acc


@gluon.jit
def _merge_token(M_OUT, L_OUT, ACC_OUT, SINK, COS_SIN, OUT, LSE, O32, t, pos, stride_ms, stride_as, H: gl.constexpr,
                 SINK_ON: gl.constexpr, ROPE_UNDO: gl.constexpr, WRITE_F32: gl.constexpr, Lo: gl.constexpr):
    """The finishing merge of token t (kernel_merge's arithmetic), run by the token's last program to finish: the
    splits' partials in split order (deterministic whichever program runs it), the sink, the output's RoPE dims
    rotated back, bf16 output, LSE and (WRITE_F32) the fp32 output. Partials are read past L1 (.cg)."""
    S = gl.num_programs(1)
    hm = gl.arange(0, H, layout=gl.SliceLayout(1, Lo))
    dm = gl.arange(0, 512, layout=gl.SliceLayout(0, Lo))
    row0 = t.to(gl.int64) * H
    big = gl.full([H], float("-inf"), gl.float32, layout=gl.SliceLayout(1, Lo))
    for s in range(S):
        big = gl.maximum(big, gl.load(M_OUT + s * stride_ms + row0 + hm, cache_modifier=".cg"))
    if SINK_ON:
        sk = gl.load(SINK + hm)
        big = gl.maximum(big, sk)
    big_safe = gl.where(big == float("-inf"), 0.0, big)
    total = gl.zeros([H], gl.float32, layout=gl.SliceLayout(1, Lo))
    o = gl.zeros([H, 512], gl.float32, layout=Lo)
    offs = (row0 + hm)[:, None] * 512 + dm[None, :]
    a = gl.load(ACC_OUT + offs, cache_modifier=".cg")
    for s in range(S):  # split s + 1's accumulator is in flight while split s is added
        a_next = gl.load(ACC_OUT + (s + 1) * stride_as + offs, mask=(s + 1 < S) & (offs >= 0), other=0.0,
                         cache_modifier=".cg")
        ms = gl.load(M_OUT + s * stride_ms + row0 + hm, cache_modifier=".cg")
        ls = gl.load(L_OUT + s * stride_ms + row0 + hm, cache_modifier=".cg")
        w = gl.where(ms == float("-inf"), 0.0, gl.exp(ms - big_safe))
        total = total + ls * w
        o = o + a * w[:, None]
        a = a_next
    if SINK_ON:
        total += gl.where(sk == float("-inf"), 0.0, gl.exp(sk - big_safe))
    nonempty = total != 0  # NaN (a NaN record value) stays NaN: not the empty row
    den = gl.where(nonempty, total, 1.0)
    o = gl.where(nonempty[:, None], o / den[:, None], 0.0)
    if ROPE_UNDO:  # dims 448 + 2i, 449 + 2i rotated by minus the angle: even o c + o' s, odd o c - o' s
        dd = dm[None, :] + 0 * hm[:, None]
        rope = dd >= 448
        i = gl.where(rope, (dd - 448) // 2, 0)
        c = gl.load(COS_SIN + pos * 64 + i, mask=rope, other=1.0)
        sn = gl.load(COS_SIN + pos * 64 + 32 + i, mask=rope, other=0.0)
        ev, od = gl.split(gl.reshape(o, [H, 256, 2]))
        partner = gl.convert_layout(gl.reshape(gl.join(od, ev), [H, 512]), Lo, assert_trivial=True)
        o = o * c + gl.where(dd % 2 == 0, partner, -partner) * sn
    dst = (row0 + hm)[:, None] * 512 + dm[None, :]
    gl.store(OUT + dst, o.to(gl.bfloat16))
    if WRITE_F32:
        gl.store(O32 + dst, o)
    gl.store(LSE + row0 + hm, gl.where(nonempty, big_safe + gl.log(den), float("-inf")))


@gluon.constexpr_function
def _merge_splits(nsplit):
    """The cluster merge tile's splits dimension: the next power of two at or above the split count."""
    return 1 << max(0, (nsplit - 1).bit_length())


@gluon.constexpr_function
def _merge_layout(heads, log2_mergers, nsplit, warps):
    """The cluster merge's [splits, H, DPR] layout (DPR = 512 >> log2_mergers output dims a CTA merges; splits the
    next power of two at or above nsplit): every split of an element in one thread, 2 to 4 adjacent dims per thread
    (a RoPE pair, up to a 16-byte vector), the warps over the heads, so that the sums over the splits stay in the
    thread."""
    dpr = 512 >> log2_mergers
    spt = max(2, min(4, heads * dpr // (32 * warps)))
    tpw_d = min(32, dpr // spt)
    return gl.BlockedLayout([_merge_splits(nsplit), 1, spt], [1, 32 // tpw_d, tpw_d], [1, warps, 1], [2, 1, 0])


@gluon.jit
def _merge_slice(M_OUT, L_OUT, ACC_OUT, OUT, LSE, O32, t, split, S: gl.constexpr, dep, sk, c, sn, stride_ms,
                 stride_as, H: gl.constexpr, CLUSTER: gl.constexpr, SINK_ON: gl.constexpr, ROPE_UNDO: gl.constexpr,
                 WRITE_F32: gl.constexpr, L3: gl.constexpr):
    """The finishing merge of token t's output dims [split * DPR, (split + 1) * DPR) of every head (DPR = 512 >>
    CLUSTER), run by the CTA of rank `split` of the token's cluster after the cluster barrier (`dep`, its result,
    orders the partial loads after it; its acquire makes the other CTAs' partial stores visible to plain loads).
    kernel_merge's arithmetic over [splits (S, up to a power of two), H, DPR] tiles (L3, _merge_layout: each thread
    holds every split of its elements, so every partial load is issued at once and the sums over the splits stay in
    the thread, in split order: deterministic; S a constexpr, so the splits past it cost no code); m and l loaded
    once per (split, head); the sink (sk [H], loaded before the barrier); the RoPE dims rotated back with the cos /
    sin (c, sn [DPR], loaded before the barrier; a dim's partner d ^ 1 is in the same thread); bf16 output, LSE
    (rank 0) and (WRITE_F32) the fp32 output."""
    DPR: gl.constexpr = 512 >> CLUSTER
    NS: gl.constexpr = _merge_splits(S)
    Lsh: gl.constexpr = gl.SliceLayout(2, L3)  # [splits, H]
    Lhd: gl.constexpr = gl.SliceLayout(0, L3)  # [H, DPR]
    row0 = t.to(gl.int64) * H
    sp = gl.arange(0, NS, layout=gl.SliceLayout(1, Lsh))
    hs = gl.arange(0, H, layout=gl.SliceLayout(0, Lsh))
    ok = (sp < S)[:, None] & (hs >= 0)[None, :]
    ms = gl.load(M_OUT + (sp * stride_ms + dep)[:, None] + (row0 + hs)[None, :], mask=ok, other=float("-inf"))
    ls = gl.load(L_OUT + (sp * stride_ms + dep)[:, None] + (row0 + hs)[None, :], mask=ok, other=0.0)
    d3 = split * DPR + gl.arange(0, DPR, layout=gl.SliceLayout(0, Lhd))
    d3a = split * DPR + gl.arange(0, DPR, layout=gl.SliceLayout(0, gl.SliceLayout(1, L3)))  # d3 for [1, 1, DPR]
    a = gl.load(ACC_OUT + ((sp * stride_as + dep)[:, None] + (row0 + hs)[None, :] * 512)[:, :, None]
                + d3a[None, None, :], mask=ok[:, :, None] & (d3a >= 0)[None, None, :], other=0.0)
    big = gl.max(ms, axis=0)
    if SINK_ON:
        big = gl.maximum(big, sk)
    big_safe = gl.where(big == float("-inf"), 0.0, big)
    w = gl.where(ms == float("-inf"), 0.0, gl.exp(ms - big_safe[None, :]))
    total = gl.sum(ls * w, axis=0)
    o = gl.sum(a * w[:, :, None], axis=0)  # [H, DPR]
    if SINK_ON:
        total += gl.where(sk == float("-inf"), 0.0, gl.exp(sk - big_safe))
    nonempty = total != 0  # NaN (a NaN record value) stays NaN: not the empty row
    den = gl.where(nonempty, total, 1.0)
    den_o = gl.convert_layout(den, gl.SliceLayout(1, Lhd))
    o = gl.where(den_o[:, None] != 0, o / den_o[:, None], 0.0)
    o = gl.where(gl.convert_layout(nonempty, gl.SliceLayout(1, Lhd))[:, None], o, 0.0)
    if ROPE_UNDO:  # dims 448 + 2i, 449 + 2i rotated by minus the angle: even o c + o' s, odd o c - o' s
        ev, od = gl.split(gl.reshape(o, [H, DPR // 2, 2]))
        partner = gl.convert_layout(gl.reshape(gl.join(od, ev), [H, DPR]), Lhd, assert_trivial=True)
        dd = d3[None, :] + 0 * gl.arange(0, H, layout=gl.SliceLayout(1, Lhd))[:, None]
        o = gl.where(dd >= 448, o * c[None, :] + gl.where(dd % 2 == 0, partner, -partner) * sn[None, :], o)
    ho = gl.arange(0, H, layout=gl.SliceLayout(1, Lhd))
    dst = (row0 + ho)[:, None] * 512 + d3[None, :]
    gl.store(OUT + dst, o.to(gl.bfloat16))
    if WRITE_F32:
        gl.store(O32 + dst, o)
    gl.store(LSE + row0 + hs, gl.where(nonempty, big_safe + gl.log(den), float("-inf")), mask=(hs >= 0) & (split == 0))


@gluon.jit
def mqa_swapab_gluon_kernel(
    Q, POS, COS_SIN, SWA, COMP, SWA_IDX, COMP_IDX, M_OUT, L_OUT, ACC_OUT,
    sm_scale, W, K, slots_per_split,
    stride_qt, stride_qh, stride_swa, stride_comp, stride_wt, stride_kt, stride_ms, stride_as,
    COUNT, SINK, OUT, LSE, O32,
    H: gl.constexpr, BLOCK_N: gl.constexpr, NVFP4: gl.constexpr, PERTURB: gl.constexpr, PREFETCH: gl.constexpr,
    FUSED_MERGE: gl.constexpr, SINK_ON: gl.constexpr, ROPE_UNDO: gl.constexpr, WRITE_F32: gl.constexpr,
    ASYNC: gl.constexpr = False, PDL: gl.constexpr = False, EARLY: gl.constexpr = False, LIVE: gl.constexpr = 64,
    PDL_EARLY: gl.constexpr = False, BANKS: gl.constexpr = False, ONE_LOOP: gl.constexpr = False,
    LOADS_FIRST: gl.constexpr = False, PROLOGUE: gl.constexpr = 0, CLUSTER: gl.constexpr = 0,
    NSPLIT: gl.constexpr = 1, CLUSTER_DIAG: gl.constexpr = 0, CTAS: gl.constexpr = 0, ONE_TILE: gl.constexpr = False,
):
    # CLUSTER_DIAG (diagnostics variants, wrong by design): 1, the cluster launch without its barrier and merge; 2,
    # the barrier without the merge
    # PDL_EARLY (with PDL): the query, positions, cos_sin and slot ids are read and the query prepared before the
    # wait for the previous grid, which must not write them (in a step: the record writer, which writes only records);
    # 2: no wait at all, a diagnostics variant that is wrong by design (the stress check must catch it)
    if PDL_EARLY:
        gl.static_assert(not ASYNC, "PDL_EARLY waits before the list loops; ASYNC copies records before the query")
        pdl_release(PDL)
    else:
        pdl_entry(PDL)
    NW: gl.constexpr = gl.num_warps()
    WG: gl.constexpr = NW // 4  # warpgroups: 1 or 2
    gl.static_assert((BLOCK_N == 64) or ((BLOCK_N == 128) and (LIVE == 128) and not ASYNC and PROLOGUE < 2),
                     "64 slots per tile (one warpgroup MMA's M), or 128 (wide tiles: whole, not with ASYNC or "
                     "PROLOGUE 2)")
    gl.static_assert((LIVE == BLOCK_N) or ((LIVE == BLOCK_N // 2) and (BLOCK_N == 64) and not ASYNC),
                     "LIVE: a whole tile, or half of a 64-slot one (not with ASYNC)")
    gl.static_assert((NW == 4) or (NW == 8) or ((NW == 16) and (BLOCK_N == 128)),
                     "one or two warpgroups (four: wide tiles only)")
    gl.static_assert(not (BANKS and ASYNC), "BANKS: the register loads' layout (not the cp.async copies')")
    # BANKS: a warp over 8 slots x 4 blocks, so each decoded 16-byte store meets all 8 chunks of the 128-byte swizzle
    # 4 times (over 4 slots x 8 blocks two rows' stores land on the same chunks: 2-way bank conflicts)
    RPW: gl.constexpr = 8 if BANKS else 4  # slots per warp in the record loads
    L3w: gl.constexpr = gl.BlockedLayout([1, 1, 16], [RPW, 32 // RPW, 1], [NW, 1, 1], [2, 1, 0])
    if NVFP4:
        L3c: gl.constexpr = gl.BlockedLayout([1, 1, 8], [RPW, 32 // RPW, 1], [NW, 1, 1], [2, 1, 0])
    else:
        L3c: gl.constexpr = L3w
    if BLOCK_N == 128:  # wide tiles, S^T [128, H]: two warpgroups split the slots (a 64-row MMA each); four: and
        # the heads
        SWG: gl.constexpr = WG // 2 if WG > 2 else 1  # warpgroups along the heads
        s_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[NW // SWG, SWG],
                                                      instr_shape=[16, H // SWG, 16])
    else:  # S^T [64, H]: two warpgroups split the heads
        s_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, WG],
                                                      instr_shape=[16, H // WG, 16])
    # O^T [512, H]: the warpgroups split the 512 output dims
    o_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[NW, 1], instr_shape=[16, H, 16])
    kv_sl: gl.constexpr = gl.NVMMASharedLayout(128, 16, rank=2)
    p_sl: gl.constexpr = gl.NVMMASharedLayout(2 * H if H < 64 else 128, 16, rank=2)
    q_ld: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [NW, 1], [1, 0])  # [H, dims]: 8 dims per thread
    Lo: gl.constexpr = gl.BlockedLayout([1, 4], [1, 32], [NW, 1], [1, 0])  # the merge's [H, 512]
    # ASYNC: the raw records' copies [64, 512 | 256] and [64, 16 | 32] bytes, and the fp8 decode's
    # [rows, 32-dim block, half, 16 codes]
    L4: gl.constexpr = gl.BlockedLayout([1, 1, 1, 16], [4, 4, 2, 1], [NW, 1, 1, 1], [3, 2, 1, 0])
    cpw_l: gl.constexpr = L4
    scw_l: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [NW, 1], [1, 0])
    if NVFP4:
        cpc_l: gl.constexpr = L3c
        scc_l: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [NW, 1], [1, 0])
    else:
        cpc_l: gl.constexpr = cpw_l
        scc_l: gl.constexpr = scw_l
    raw_l: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[1, 0])
    raw_l5: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[3, 2, 1, 0])  # [chunk,] row, block, half, 16
    raw_l4: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[2, 1, 0])  # [chunk,] row, block, 8 bytes

    if CLUSTER:  # a 1-D grid of T clusters of CTAS CTAs, launched as such (interface._cluster_prepare)
        gl.static_assert(not FUSED_MERGE, "CLUSTER merges in the cluster; FUSED_MERGE in the last program")
        NCTA: gl.constexpr = CTAS if CTAS else 1 << CLUSTER
        gl.static_assert((NSPLIT <= NCTA) and ((1 << CLUSTER) <= NCTA), "NSPLIT and the merging CTAs fit the cluster")
        t = gl.program_id(0) // NCTA
        split = gl.program_id(0) % NCTA  # the CTA's rank in its cluster
    else:
        t = gl.program_id(0)
        split = gl.program_id(1)
    pos = gl.load(POS + t).to(gl.int64)
    n0 = split * slots_per_split
    n1 = gl.minimum(n0 + slots_per_split, W + K)
    w1 = gl.minimum(n1, W)
    c0 = gl.maximum(n0, W) - W
    c1 = n1 - W
    swa_row = SWA_IDX + t.to(gl.int64) * stride_wt
    comp_row = COMP_IDX + t.to(gl.int64) * stride_kt
    first_c = gl.where(n0 >= W, c0, -1)
    if ASYNC:  # the first tile's records are copied while the query is prepared
        raw_codes = gl.allocate_shared_memory(gl.uint8, [4, BLOCK_N, 4, 2, 16], raw_l5)  # window (fp8) records
        if NVFP4:
            raw_codes_c = gl.allocate_shared_memory(gl.uint8, [4, BLOCK_N, 8, 8], raw_l4)  # compressed (nvfp4)
        else:
            raw_codes_c = raw_codes
        raw_scales = gl.allocate_shared_memory(gl.uint8, [BLOCK_N, 32], raw_l)
        window_first = n0 < w1
        if window_first:
            _issue_tile(SWA, swa_row, n0, w1, n0, stride_swa, raw_codes, raw_scales, BLOCK_N, False, PERTURB,
                        cpw_l, scw_l)
        else:
            _issue_tile(COMP, comp_row, c0, c1, first_c, stride_comp, raw_codes_c, raw_scales, BLOCK_N, NVFP4,
                        PERTURB, cpc_l, scc_l)
    if EARLY and ONE_LOOP:  # the first tile's slot ids, loaded before the query (their latencies overlap)
        gl.static_assert(PREFETCH and not ASYNC, "EARLY hands the first slot ids to the PREFETCH list loop")
        slot_0, ok_0 = _first_slots(swa_row, comp_row, n0, w1, c0, c1, first_c, LIVE, PERTURB,
                                    gl.SliceLayout(1, gl.SliceLayout(2, L3w)))
    elif EARLY:  # both lists' first slot ids, loaded before the query so that the two loads' latencies overlap
        gl.static_assert(PREFETCH and not ASYNC, "EARLY hands the first slot ids to the PREFETCH list loop")
        slot_w, ok_w = _tile_slots(swa_row, n0, w1, n0, LIVE, PERTURB, gl.SliceLayout(1, gl.SliceLayout(2, L3w)))
        slot_c, ok_c = _tile_slots(comp_row, c0, c1, first_c, LIVE, PERTURB,
                                   gl.SliceLayout(1, gl.SliceLayout(2, L3c)))
    # the query of token t as Q [H, 512] bf16 in shared memory (the score product reads it transposed), its last
    # 64 dims rotated in fp32 at pos (pairs (2i, 2i+1), cos_sin row = 32 cos then 32 sin); 8 dims per thread, stored
    # in 16-byte vectors, in column blocks 0-255, 256-383, 384-447, 448-511 so that few values are live at once
    q_row = Q + t.to(gl.int64) * stride_qt
    q_smem = gl.allocate_shared_memory(gl.bfloat16, [H, 512], kv_sl)
    if PROLOGUE == 0:  # each block's loads issued after the previous block's store (and the barrier before it)
        q_smem.slice(0, 256, dim=1).store(_q_cols(q_row, stride_qh, 0, 256, H, q_ld))
        q_smem.slice(256, 128, dim=1).store(_q_cols(q_row, stride_qh, 256, 128, H, q_ld))
        q_smem.slice(384, 64, dim=1).store(_q_cols(q_row, stride_qh, 384, 64, H, q_ld))
        x, partner, c, sn = _rope_loads(q_row, stride_qh, COS_SIN, pos, H, q_ld)
        q_smem.slice(448, 64, dim=1).store(_rope(x, partner, c, sn, q_ld))
    else:  # every query load issued before the first store (PROLOGUE 2: the stores come with the first tile)
        q0 = _q_cols(q_row, stride_qh, 0, 256, H, q_ld)
        q1 = _q_cols(q_row, stride_qh, 256, 128, H, q_ld)
        q2 = _q_cols(q_row, stride_qh, 384, 64, H, q_ld)
        x, partner, c, sn = _rope_loads(q_row, stride_qh, COS_SIN, pos, H, q_ld)
        if PROLOGUE == 1:
            _query_stores(q_smem, q0, q1, q2, x, partner, c, sn, q_ld)
    q_t = q_smem.permute((1, 0))  # Q^T [512, H]
    kv_smem = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_N, 512], kv_sl)
    p_smem = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_N, H], p_sl)
    if LIVE < BLOCK_N:  # half tiles: the rows no slot fills hold zeros (their probabilities are 0, and 0 x NaN is NaN)
        kv_smem.slice(LIVE, BLOCK_N - LIVE, dim=0).store(gl.zeros([BLOCK_N - LIVE, 512], gl.bfloat16, layout=q_ld))
    if PDL_EARLY == 1:  # every record load and every global store comes after this wait
        pdl_wait(PDL)

    m_i = gl.full([H], float("-inf"), gl.float32, layout=gl.SliceLayout(0, s_l))
    l_i = gl.zeros([H], gl.float32, layout=gl.SliceLayout(0, s_l))
    acc = gl.zeros([512, H], gl.float32, layout=o_l)  # O^T
    gl.static_assert((PROLOGUE < 2) or (EARLY and PREFETCH and not ASYNC and not ONE_LOOP and LIVE == BLOCK_N
                                        and not PDL_EARLY),
                     "PROLOGUE 2 takes the EARLY slot ids of the two-loop PREFETCH kernel, whole tiles, no PDL_EARLY "
                     "(whose wait comes before every record load)")
    if ASYNC:
        m_i, l_i, acc = _list_loop_async(SWA, swa_row, n0, w1, n0, stride_swa, kv_smem, q_t, p_smem, raw_codes,
                                         raw_scales, m_i, l_i, acc, sm_scale, BLOCK_N, False, PERTURB, L3w, L4,
                                         cpw_l, scw_l, s_l, o_l, window_first)
        m_i, l_i, acc = _list_loop_async(COMP, comp_row, c0, c1, first_c, stride_comp, kv_smem, q_t, p_smem,
                                         raw_codes_c, raw_scales, m_i, l_i, acc, sm_scale, BLOCK_N, NVFP4, PERTURB,
                                         L3c, L4, cpc_l, scc_l, s_l, o_l, not window_first)
    elif ONE_LOOP:
        gl.static_assert(PREFETCH, "ONE_LOOP prefetches the next tile's slot ids")
        if EARLY:
            m_i, l_i, acc = _lists_loop(SWA, COMP, swa_row, comp_row, n0, w1, c0, c1, first_c, stride_swa,
                                        stride_comp, kv_smem, q_t, p_smem, m_i, l_i, acc, sm_scale, BLOCK_N, NVFP4,
                                        PERTURB, L3w, L3c, s_l, o_l, LIVE, slot_0, ok_0, LOADS_FIRST)
        else:
            m_i, l_i, acc = _lists_loop(SWA, COMP, swa_row, comp_row, n0, w1, c0, c1, first_c, stride_swa,
                                        stride_comp, kv_smem, q_t, p_smem, m_i, l_i, acc, sm_scale, BLOCK_N, NVFP4,
                                        PERTURB, L3w, L3c, s_l, o_l, LIVE, None, None, LOADS_FIRST)
    elif EARLY:
        w_start = n0
        c_start = c0
        if PROLOGUE == 2:
            # the split's first tile's records loaded before the query is stored, so that their round trip overlaps
            # the query's; the tile is the window list's when the split starts there, else the compressed list's
            # (a split without slots: an all-invalid tile, which changes nothing)
            if n0 < w1:
                slot_w, ok_w, m_i, l_i, acc = _first_tile(SWA, stride_swa, swa_row, n0, w1, n0, slot_w, ok_w, q_smem,
                                                          q_t, kv_smem, p_smem, m_i, l_i, acc, sm_scale, q0, q1, q2,
                                                          x, partner, c, sn, BLOCK_N, False, PERTURB, L3w, s_l, o_l,
                                                          q_ld)
                w_start = n0 + BLOCK_N
            else:
                slot_c, ok_c, m_i, l_i, acc = _first_tile(COMP, stride_comp, comp_row, c0, c1, first_c, slot_c, ok_c,
                                                          q_smem, q_t, kv_smem, p_smem, m_i, l_i, acc, sm_scale, q0,
                                                          q1, q2, x, partner, c, sn, BLOCK_N, NVFP4, PERTURB, L3c,
                                                          s_l, o_l, q_ld)
                c_start = c0 + BLOCK_N
        # ONE_TILE (PROLOGUE 2; the launcher's promise: every split is one tile of one list, slots_per_split ==
        # BLOCK_N and W a multiple of it): the first tile was the split's only one, so the list loops, which would
        # run no tile, are not compiled
        gl.static_assert((not ONE_TILE) or (PROLOGUE == 2), "ONE_TILE: the split's tile is PROLOGUE 2's first tile")
        if not ONE_TILE:
            m_i, l_i, acc = _list_loop(SWA, swa_row, w_start, w1, n0, stride_swa, kv_smem, q_t, p_smem, m_i, l_i,
                                       acc, sm_scale, BLOCK_N, False, PERTURB, PREFETCH, L3w, s_l, o_l, slot_w, ok_w,
                                       LIVE, LOADS_FIRST)
            m_i, l_i, acc = _list_loop(COMP, comp_row, c_start, c1, first_c, stride_comp, kv_smem, q_t, p_smem, m_i,
                                       l_i, acc, sm_scale, BLOCK_N, NVFP4, PERTURB, PREFETCH, L3c, s_l, o_l, slot_c,
                                       ok_c, LIVE, LOADS_FIRST)
    else:
        m_i, l_i, acc = _list_loop(SWA, swa_row, n0, w1, n0, stride_swa, kv_smem, q_t, p_smem, m_i, l_i, acc,
                                   sm_scale, BLOCK_N, False, PERTURB, PREFETCH, L3w, s_l, o_l, None, None,
                                   LIVE, LOADS_FIRST)
        m_i, l_i, acc = _list_loop(COMP, comp_row, c0, c1, first_c, stride_comp, kv_smem, q_t, p_smem, m_i, l_i,
                                   acc, sm_scale, BLOCK_N, NVFP4, PERTURB, PREFETCH, L3c, s_l, o_l, None, None,
                                   LIVE, LOADS_FIRST)
    hs = gl.arange(0, H, layout=gl.SliceLayout(0, s_l))
    row0 = t.to(gl.int64) * H
    ho = gl.arange(0, H, layout=gl.SliceLayout(0, o_l))
    do = gl.arange(0, 512, layout=gl.SliceLayout(1, o_l))
    if CLUSTER:
        # the merge's own inputs (the sink, the cos / sin of its RoPE dims) read before the barrier
        DPR: gl.constexpr = 512 >> CLUSTER
        L3: gl.constexpr = _merge_layout(H, CLUSTER, NSPLIT, NW)
        sk = 0.0
        if SINK_ON:
            sk = gl.load(SINK + gl.arange(0, H, layout=gl.SliceLayout(0, gl.SliceLayout(2, L3))))
        c = 1.0
        sn = 0.0
        if ROPE_UNDO:
            dm = split * DPR + gl.arange(0, DPR, layout=gl.SliceLayout(0, gl.SliceLayout(0, L3)))
            rope = (dm >= 448) & (split < (1 << CLUSTER))  # (ranks past the merging ones: none)
            i = gl.where(rope, (dm - 448) // 2, 0)
            c = gl.load(COS_SIN + pos * 64 + i, mask=rope, other=1.0)
            sn = gl.load(COS_SIN + pos * 64 + 32 + i, mask=rope, other=0.0)
        if split < NSPLIT:  # ranks past the split count ran no tile: no partial
            gl.store(M_OUT + split.to(gl.int64) * stride_ms + row0 + hs, m_i)
            gl.store(L_OUT + split.to(gl.int64) * stride_ms + row0 + hs, l_i)
            gl.store(ACC_OUT + split.to(gl.int64) * stride_as + row0 * 512 + (ho[None, :] * 512 + do[:, None]), acc)
        if CLUSTER_DIAG != 1:
            dep = gl.inline_asm_elementwise(CLUSTER_BARRIER_ASM, "=r,r", [split], dtype=gl.int32, is_pure=False,
                                            pack=1) * 0
        if CLUSTER_DIAG == 0:
            if split < (1 << CLUSTER):  # the merging ranks
                _merge_slice(M_OUT, L_OUT, ACC_OUT, OUT, LSE, O32, t, split, NSPLIT, dep, sk, c, sn, stride_ms,
                             stride_as, H, CLUSTER, SINK_ON, ROPE_UNDO, WRITE_F32, L3)
    else:
        gl.store(M_OUT + split.to(gl.int64) * stride_ms + row0 + hs, m_i)
        gl.store(L_OUT + split.to(gl.int64) * stride_ms + row0 + hs, l_i)
        gl.store(ACC_OUT + split.to(gl.int64) * stride_as + row0 * 512 + (ho[None, :] * 512 + do[:, None]), acc)
    if FUSED_MERGE:
        # one launch: the token's last program to finish merges its splits. Every thread's partial stores are
        # ordered before the arrival (barrier, then a release at GPU scope); the arrival's acquire orders the
        # merge's loads after every other program's stores. The last program also resets the counter to zero
        # for the next launch (CUDA-graph replays included).
        gl.thread_barrier()
        arrived = gl.atomic_add(COUNT + t, 1, sem="acq_rel", scope="gpu")
        if arrived == gl.num_programs(1) - 1:
            _merge_token(M_OUT, L_OUT, ACC_OUT, SINK, COS_SIN, OUT, LSE, O32, t, pos, stride_ms, stride_as, H,
                         SINK_ON, ROPE_UNDO, WRITE_F32, Lo)
            gl.store(COUNT + t, 0)
