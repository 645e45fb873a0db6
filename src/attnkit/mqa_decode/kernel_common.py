"""Pieces shared by the mqa_decode attention kernels: record dequantization, the query's RoPE, the slot
loop over one list.

Records (attnkit.contract, docs/mqa_decode.md): fp8 = 512 e4m3 bytes + 16 UE8M0 scales (32 dims each);
nvfp4 = 256 bytes of e2m1 pairs (even dim in the low nibble) + 32 e4m3 scales (16 dims each).
Dequantization is exact into bf16: an e4m3 value times a power of two, or an e2m1 value times an e4m3
scale, has at most 4 + 4 significant bits, and bf16 has fp32's exponent range (an fp8 block whose scale
pushes a value outside bf16's normal range is the only inexact case, and it is rounded once).
The whole 512-dim row of a tile is decoded once per tile (scales loaded per block and broadcast, not
per element) and feeds both the score product and the value product.
"""

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def dequant_rows(CACHE, slot, ok, stride_rec, d0, DC: tl.constexpr, BLOCK_N: tl.constexpr, NVFP4: tl.constexpr,
                 PERTURB: tl.constexpr):
    """Dims d0 .. d0 + DC of the records of `slot` [BLOCK_N] (rows masked by ok) -> bf16 [BLOCK_N, DC]
    (d0 a multiple of 32)."""
    rec = CACHE + tl.where(ok, slot, 0).to(tl.int64) * stride_rec  # [BLOCK_N]
    if NVFP4:
        blk = d0 // 16 + tl.arange(0, DC // 16)
        byt = tl.arange(0, 8)
        b = tl.load(rec[:, None, None] + (blk[None, :, None] * 8 + byt[None, None, :]), mask=ok[:, None, None],
                    other=0).to(tl.int32)  # [BLOCK_N, DC / 16, 8]
        sc = tl.load(rec[:, None] + 256 + blk[None, :], mask=ok[:, None], other=0)
        sc = sc.to(tl.float8e4nv, bitcast=True).to(tl.float32)[:, :, None]  # [BLOCK_N, DC / 16, 1]
        # dim 16 blk + 2 byt + (0: low nibble, 1: high nibble)
        x = tl.reshape(tl.join(_e2m1(b & 0xF) * sc, _e2m1(b >> 4) * sc), (BLOCK_N, DC))
    else:
        blk = d0 // 32 + tl.arange(0, DC // 32)
        i = tl.arange(0, 32)
        code = tl.load(rec[:, None, None] + (blk[None, :, None] * 32 + i[None, None, :]), mask=ok[:, None, None],
                       other=0).to(tl.float8e4nv, bitcast=True)  # [BLOCK_N, DC / 32, 32]
        sblk = blk
        if PERTURB == 2:  # the deliberately wrong variant: each block reads its neighbour's scale
            sblk = (blk + 1) % 16
        sb = tl.load(rec[:, None] + 512 + sblk[None, :], mask=ok[:, None], other=127).to(tl.int32)
        # 2^(byte - 127) from the bits; byte 0 is 2^-127, an fp32 subnormal
        scale = tl.where(sb == 0, 5.877471754111438e-39, (sb << 23).to(tl.float32, bitcast=True))
        x = tl.reshape(code.to(tl.float32) * scale[:, :, None], (BLOCK_N, DC))
    return x.to(tl.bfloat16)


@triton.jit
def _e2m1(nib):
    """e2m1 code (int32, 4 bits: sign, 2 exponent, 1 mantissa) -> fp32, built from its bits: magnitude code
    c >= 2 is (1 + (c & 1) / 2) 2^((c >> 1) - 1), c = 1 is 0.5, c = 0 is 0."""
    c = nib & 7
    bits = tl.where(c >= 2, (((c >> 1) + 126) << 23) | ((c & 1) << 22), tl.where(c == 1, 126 << 23, 0))
    return (bits | ((nib & 8) << 28)).to(tl.float32, bitcast=True)


@triton.jit
def rope_q(Q, COS_SIN, t, heads, h_ok, stride_qt, stride_qh, pos, HEADS_ON_ROWS: tl.constexpr):
    """The query of token t, its last 64 dims rotated in fp32 at `pos` (pairs (2i, 2i+1), cos_sin row = 32 cos
    then 32 sin), rounded to bf16: [len(heads), 512] if HEADS_ON_ROWS else [512, len(heads)]."""
    d = tl.arange(0, 512)
    if HEADS_ON_ROWS:
        dd = d[None, :]
        hh = heads[:, None]
        hm = h_ok[:, None]
    else:
        dd = d[:, None]
        hh = heads[None, :]
        hm = h_ok[None, :]
    base = Q + t.to(tl.int64) * stride_qt + hh * stride_qh
    x = tl.load(base + dd, mask=hm, other=0.0).to(tl.float32)
    rope = dd >= 448
    partner = tl.load(base + (dd ^ 1), mask=hm & rope, other=0.0).to(tl.float32)
    i = tl.where(rope, (dd - 448) // 2, 0)
    c = tl.load(COS_SIN + pos * 64 + i, mask=rope, other=1.0)
    s = tl.load(COS_SIN + pos * 64 + 32 + i, mask=rope, other=0.0)
    # even d: x c - x' s; odd d: x' s + x c (x' the pair's other member)
    rot = tl.where(rope, x * c + tl.where(dd % 2 == 0, -partner, partner) * s, x)
    return rot.to(tl.bfloat16)


@triton.jit
def list_range(n0_split, n1_split, W):
    """The part of the split's list positions [n0_split, n1_split) in the window list [0, W) and in the
    compressed list (as positions of that list): (w0, w1, c0, c1)."""
    w1 = tl.minimum(n1_split, W)
    c0 = tl.maximum(n0_split, W) - W
    c1 = n1_split - W
    return n0_split, w1, c0, c1


@triton.jit
def tile_slots(IDX_ROW, p0, p1, first, BLOCK_N: tl.constexpr, PERTURB: tl.constexpr):
    """Slot ids of list positions p0 .. p0 + BLOCK_N (bounded by p1) and their validity; PERTURB 1 (the
    deliberately wrong variant) drops the tile that starts at `first`."""
    n = p0 + tl.arange(0, BLOCK_N)
    in_range = n < p1
    if PERTURB == 1:
        in_range = in_range & (p0 != first)
    slot = tl.load(IDX_ROW + n, mask=in_range, other=-1)
    return slot, in_range & (slot >= 0)
