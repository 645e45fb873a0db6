"""mqa_decode swap-AB kernel (H = 16 or 32): KV slots on the MMA's M side, the live heads on N.

Computes   per token t and split s (a range of list positions: the window list, then the compressed
           list), S^T [slots, H] = KV [slots, 512] . Q_rot^T, the softmax down the columns (per head),
           and O^T [512, H] += KV^T [512, slots] . P^T: the un-normalized partials (m, l, acc). No MMA row
           is spent on padding heads, and the whole 512-dim output fits one program (O^T is 512 x H
           fp32), so each record is read and decoded once.
Contract   q [T, H_pad, 512] bf16 unrotated (rotated here, kernel_common.rope_q); caches [pages,
           page_size, stride] uint8; swa_idx [T, W], comp_idx [T, K] int32 slot ids (-1 empty);
           partials m, l [S, T * H], acc [S, T * H, 512] fp32 (head-major rows).
Numerics   exact record decode into bf16, fp32 accumulation; softmax in fp32, natural-log domain
           scaled by log2(e) after the maximum is subtracted.
Dispatch   attnkit.mqa_decode.config.use_swapab (H in {16, 32} and T at most the measured cutoff); on sm_90 GPUs the
           Gluon kernel (kernel_swapab_gluon) runs instead unless gluon=False: this kernel is its interpreter twin.
Oracle     attnkit.reference.mqa_decode.mqa_decode_ref; gate "mqa_decode/triton_swapab".
PERTURB    1: the first slot tile of every split lost; 2: each fp8 block reads its neighbour's scale.
"""

import triton
import triton.language as tl

from .._triton.pdl import pdl_entry
from .kernel_common import LOG2E, dequant_rows, list_range, rope_q, tile_slots


@triton.jit
def _swapab_tile(CACHE, IDX_ROW, p0, p1, first, stride_rec, qT, m_i, l_i, acc, sm_scale,
                 BLOCK_N: tl.constexpr, NVFP4: tl.constexpr, PERTURB: tl.constexpr, DOT_F32: tl.constexpr,
                 ABLATE: tl.constexpr):
    slot, ok = tile_slots(IDX_ROW, p0, p1, first, BLOCK_N, PERTURB)
    if ABLATE == 1:  # diagnostics: no record loads
        kv = (slot[:, None] + tl.arange(0, 512)[None, :]).to(tl.bfloat16)
    elif ABLATE == 2:  # diagnostics: bytes loaded, not decoded
        kv = tl.load(CACHE + tl.where(ok, slot, 0).to(tl.int64)[:, None] * stride_rec + tl.arange(0, 512)[None, :],
                     mask=ok[:, None], other=0).to(tl.bfloat16)
    else:
        kv = dequant_rows(CACHE, slot, ok, stride_rec, 0, 512, BLOCK_N, NVFP4, PERTURB)  # [BLOCK_N, 512]
    if ABLATE == 4:  # diagnostics: no score product
        s = kv.to(tl.float32).reshape(BLOCK_N, 512 // qT.shape[1], qT.shape[1]).sum(1)
    elif DOT_F32:  # the interpreter multiplies bf16 bit patterns: widen the exact bf16 values
        s = tl.dot(kv.to(tl.float32), qT.to(tl.float32), input_precision="ieee")
    else:
        s = tl.dot(kv, qT)  # S^T [BLOCK_N, H]
    s = tl.where(ok[:, None], s * sm_scale, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 0))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.exp2((s - m_safe[None, :]) * LOG2E)  # P^T
    alpha = tl.exp2((m_i - m_safe) * LOG2E)
    l_i = l_i * alpha + tl.sum(p, 0)
    acc = acc * alpha[None, :]
    if ABLATE == 3:  # diagnostics: no value product
        acc = acc + tl.sum(p, 0)[None, :]
    elif DOT_F32:
        acc = tl.dot(tl.trans(kv.to(tl.float32)), p.to(tl.bfloat16).to(tl.float32), acc, input_precision="ieee")
    else:
        acc = tl.dot(tl.trans(kv), p.to(tl.bfloat16), acc)
    return m_new, l_i, acc


@triton.jit
def mqa_swapab_kernel(
    Q, POS, COS_SIN, SWA, COMP, SWA_IDX, COMP_IDX, M_OUT, L_OUT, ACC_OUT,
    sm_scale, W, K, slots_per_split,
    stride_qt, stride_qh, stride_swa, stride_comp, stride_wt, stride_kt, stride_ms, stride_as,
    H: tl.constexpr, BLOCK_N: tl.constexpr, NVFP4: tl.constexpr, PERTURB: tl.constexpr, DOT_F32: tl.constexpr,
    ABLATE: tl.constexpr = 0, PDL: tl.constexpr = False,
):
    pdl_entry(PDL)
    t = tl.program_id(0)
    split = tl.program_id(1)
    heads = tl.arange(0, H)
    pos = tl.load(POS + t).to(tl.int64)
    qT = rope_q(Q, COS_SIN, t, heads, heads < H, stride_qt, stride_qh, pos, False)  # [512, H]
    n0 = split * slots_per_split
    n1 = tl.minimum(n0 + slots_per_split, W + K)
    w0, w1, c0, c1 = list_range(n0, n1, W)
    m_i = tl.full([H], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([H], dtype=tl.float32)
    acc = tl.zeros([512, H], dtype=tl.float32)  # O^T
    swa_row = SWA_IDX + t.to(tl.int64) * stride_wt
    for p0 in range(w0, w1, BLOCK_N):
        m_i, l_i, acc = _swapab_tile(SWA, swa_row, p0, w1, w0, stride_swa, qT, m_i, l_i, acc, sm_scale,
                                     BLOCK_N, False, PERTURB, DOT_F32, ABLATE)
    comp_row = COMP_IDX + t.to(tl.int64) * stride_kt
    first_c = tl.where(n0 >= W, c0, -1)
    for p0 in range(c0, c1, BLOCK_N):
        m_i, l_i, acc = _swapab_tile(COMP, comp_row, p0, c1, first_c, stride_comp, qT, m_i, l_i, acc, sm_scale,
                                     BLOCK_N, NVFP4, PERTURB, DOT_F32, ABLATE)
    r = t.to(tl.int64) * H + heads
    tl.store(M_OUT + split.to(tl.int64) * stride_ms + r, m_i)
    tl.store(L_OUT + split.to(tl.int64) * stride_ms + r, l_i)
    tl.store(ACC_OUT + split.to(tl.int64) * stride_as + r[None, :] * 512 + tl.arange(0, 512)[:, None], acc)
