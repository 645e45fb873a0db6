"""mqa_decode head-padded kernel: heads on the MMA's M side, padded to 64 (the general path, any H).

Computes   per token t, split s and output chunk c of 128 dims: for the slots of the split (window list
           then compressed list, -1 skipped), scores s = scale * q_rot . kv over all 512 dims, and the
           un-normalized partials (m, l, acc[:, chunk c]); the sink enters the merge as one more partial
           (m = sink, l = 1, acc = 0), so the merge is the shared split-K merge.
Contract   q_rot [T, H_pad, 512] bf16 (RoPE already applied by the host); caches [pages, page_size, stride]
           uint8 of fp8 / nvfp4 records; swa_idx [T, W], comp_idx [T, K] int32 slot ids (-1 empty);
           partials m, l [S + 1, T * H], acc [S + 1, T * H, 512] fp32.
Numerics   records are dequantized exactly into bf16 (e4m3 x 2^k, e2m1 x e4m3 scale) and multiplied with
           fp32 accumulation; softmax in fp32 in the natural-log domain scaled by log2(e) after the
           maximum is subtracted.
Dispatch   attnkit.mqa_decode.interface.mqa_decode_attention (config: attnkit.mqa_decode.config).
Oracle     attnkit.reference.mqa_decode.mqa_decode_ref; gate "mqa_decode/triton_headpad".
PERTURB    1: the first slot tile of every split lost; 2: each fp8 block reads its neighbour's scale.
"""

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _dequant(CACHE, slot, ok, d0, stride_rec, DC: tl.constexpr, NVFP4: tl.constexpr, PERTURB: tl.constexpr):
    """Records of `slot` [BLOCK_N] (masked by ok) -> bf16 tile [BLOCK_N, DC] of dims d0 .. d0 + DC."""
    offs = d0 + tl.arange(0, DC)
    rec = CACHE + tl.where(ok, slot, 0).to(tl.int64)[:, None] * stride_rec
    if NVFP4:
        byte = tl.load(rec + offs[None, :] // 2, mask=ok[:, None], other=0).to(tl.int32)
        nib = tl.where((offs % 2 == 0)[None, :], byte & 0xF, byte >> 4)
        mag_code = nib & 7
        # e2m1 magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 from the code bits (exponent e = code >> 1, mantissa code & 1)
        e = mag_code >> 1
        mag = tl.where(e == 0, (mag_code & 1).to(tl.float32) * 0.5,
                       (1.0 + (mag_code & 1).to(tl.float32) * 0.5) * (1 << tl.maximum(e - 1, 0)).to(tl.float32))
        val = tl.where(nib >= 8, -mag, mag)
        sc = tl.load(rec + 256 + offs[None, :] // 16, mask=ok[:, None], other=0).to(tl.float8e4nv, bitcast=True)
        x = val * sc.to(tl.float32)
    else:
        code = tl.load(rec + offs[None, :], mask=ok[:, None], other=0).to(tl.float8e4nv, bitcast=True)
        blk = offs // 32
        if PERTURB == 2:
            blk = (blk + 1) % 16
        sb = tl.load(rec + 512 + blk[None, :], mask=ok[:, None], other=127).to(tl.int32)
        # 2^(byte - 127) from the bits; byte 0 is 2^-127, an fp32 subnormal
        scale = tl.where(sb == 0, 5.877471754111438e-39, (sb << 23).to(tl.float32, bitcast=True))
        x = code.to(tl.float32) * scale
    return x.to(tl.bfloat16)


@triton.jit
def slot_tile(SWA_IDX, COMP_IDX, t, n0, n0_split, n1_split, W, stride_wt, stride_kt, BLOCK_N: tl.constexpr,
              PERTURB: tl.constexpr):
    """Slot ids of list positions n0 .. n0 + BLOCK_N of token t (the window list, then the compressed list):
    returns (window slots, compressed slots, valid window, valid compressed, valid)."""
    n = n0 + tl.arange(0, BLOCK_N)
    in_range = n < n1_split
    if PERTURB == 1:  # the deliberately wrong variant: the first tile of every split lost
        in_range = in_range & (n0 != n0_split)
    is_w = n < W
    sw = tl.load(SWA_IDX + t.to(tl.int64) * stride_wt + n, mask=in_range & is_w, other=-1)
    sc_ = tl.load(COMP_IDX + t.to(tl.int64) * stride_kt + (n - W), mask=in_range & (n >= W), other=-1)
    ok_w = in_range & is_w & (sw >= 0)
    ok_c = in_range & (n >= W) & (sc_ >= 0)
    return sw, sc_, ok_w, ok_c, ok_w | ok_c


@triton.jit
def mqa_headpad_kernel(
    QR, SWA, COMP, SWA_IDX, COMP_IDX, M_OUT, L_OUT, ACC_OUT,
    sm_scale, W, K, slots_per_split, H,
    stride_qt, stride_qh, stride_swa, stride_comp, stride_wt, stride_kt, stride_ms, stride_as,
    BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, DC: tl.constexpr, OUT_DC: tl.constexpr,
    NVFP4: tl.constexpr, PERTURB: tl.constexpr, DOT_F32: tl.constexpr,
):
    split = tl.program_id(0)
    t = tl.program_id(1)
    hc = tl.program_id(2)
    n_out = 512 // OUT_DC
    hb = hc // n_out
    oc = hc % n_out
    heads = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = heads < H
    total = W + K
    n0_split = split * slots_per_split
    n1_split = tl.minimum(n0_split + slots_per_split, total)
    m_i = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, OUT_DC], dtype=tl.float32)
    qbase = QR + t.to(tl.int64) * stride_qt + heads[:, None] * stride_qh
    for n0 in range(n0_split, n1_split, BLOCK_N):
        sw, sc_, ok_w, ok_c, ok = slot_tile(SWA_IDX, COMP_IDX, t, n0, n0_split, n1_split, W, stride_wt, stride_kt,
                                            BLOCK_N, PERTURB)
        s = tl.zeros([BLOCK_H, BLOCK_N], dtype=tl.float32)
        for d0 in range(0, 512, DC):
            q = tl.load(qbase + d0 + tl.arange(0, DC)[None, :], mask=h_ok[:, None], other=0.0)
            kw = _dequant(SWA, sw, ok_w, d0, stride_swa, DC, False, PERTURB)
            kc = _dequant(COMP, sc_, ok_c, d0, stride_comp, DC, NVFP4, PERTURB)
            kv = tl.where(ok_w[:, None], kw, kc)
            if DOT_F32:
                s = tl.dot(q.to(tl.float32), tl.trans(kv.to(tl.float32)), s, input_precision="ieee")
            else:
                s = tl.dot(q, tl.trans(kv), s)
        s = tl.where(ok[None, :] & h_ok[:, None], s * sm_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2((s - m_safe[:, None]) * LOG2E)
        alpha = tl.exp2((m_i - m_safe) * LOG2E)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        vw = _dequant(SWA, sw, ok_w, oc * OUT_DC, stride_swa, OUT_DC, False, PERTURB)
        vc = _dequant(COMP, sc_, ok_c, oc * OUT_DC, stride_comp, OUT_DC, NVFP4, PERTURB)
        v = tl.where(ok_w[:, None], vw, vc)
        if DOT_F32:
            acc = tl.dot(p.to(tl.bfloat16).to(tl.float32), v.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(p.to(tl.bfloat16), v, acc)
        m_i = m_new
    r = t.to(tl.int64) * H + heads
    if oc == 0:
        tl.store(M_OUT + split * stride_ms + r, m_i, mask=h_ok)
        tl.store(L_OUT + split * stride_ms + r, l_i, mask=h_ok)
    tl.store(ACC_OUT + split * stride_as + r[:, None] * 512 + oc * OUT_DC + tl.arange(0, OUT_DC)[None, :], acc,
             mask=h_ok[:, None])
