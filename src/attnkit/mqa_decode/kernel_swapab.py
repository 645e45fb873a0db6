"""mqa_decode swap-AB kernel (H = 16 or 32): KV slots on the MMA's M side, the live heads on N.

Computes   the same partials as kernel_headpad.py, transposed: S^T [slots, H] = KV [slots, 512] . Q^T, the
           softmax runs down the columns (per head), and O^T [512, H] += V^T [512, slots] . P^T, so no
           MMA row is spent on padding heads.
Contract   as kernel_headpad.py (partials written back head-major: acc[split, t * H + h, d]).
Numerics   as kernel_headpad.py.
Dispatch   attnkit.mqa_decode.config.use_swapab (H in {16, 32} and T at most the measured cutoff).
Oracle     attnkit.reference.mqa_decode.mqa_decode_ref; gate "mqa_decode/triton_swapab".
PERTURB    as kernel_headpad.py.
"""

import triton
import triton.language as tl

from .kernel_headpad import _dequant, slot_tile

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def mqa_swapab_kernel(
    QR, SWA, COMP, SWA_IDX, COMP_IDX, M_OUT, L_OUT, ACC_OUT,
    sm_scale, W, K, slots_per_split,
    stride_qt, stride_qh, stride_swa, stride_comp, stride_wt, stride_kt, stride_ms, stride_as,
    H: tl.constexpr, BLOCK_N: tl.constexpr, DC: tl.constexpr, OUT_DC: tl.constexpr,
    NVFP4: tl.constexpr, PERTURB: tl.constexpr, DOT_F32: tl.constexpr,
):
    split = tl.program_id(0)
    t = tl.program_id(1)
    oc = tl.program_id(2)
    heads = tl.arange(0, H)
    total = W + K
    n0_split = split * slots_per_split
    n1_split = tl.minimum(n0_split + slots_per_split, total)
    m_i = tl.full([H], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([H], dtype=tl.float32)
    acc = tl.zeros([OUT_DC, H], dtype=tl.float32)  # O^T chunk
    qbase = QR + t.to(tl.int64) * stride_qt + heads[None, :] * stride_qh
    for n0 in range(n0_split, n1_split, BLOCK_N):
        sw, sc_, ok_w, ok_c, ok = slot_tile(SWA_IDX, COMP_IDX, t, n0, n0_split, n1_split, W, stride_wt, stride_kt,
                                            BLOCK_N, PERTURB)
        s = tl.zeros([BLOCK_N, H], dtype=tl.float32)  # S^T: slots on M, heads on N
        for d0 in range(0, 512, DC):
            qT = tl.load(qbase + d0 + tl.arange(0, DC)[:, None])  # [DC, H]
            kw = _dequant(SWA, sw, ok_w, d0, stride_swa, DC, False, PERTURB)
            kc = _dequant(COMP, sc_, ok_c, d0, stride_comp, DC, NVFP4, PERTURB)
            kv = tl.where(ok_w[:, None], kw, kc)  # [BLOCK_N, DC]
            if DOT_F32:
                s = tl.dot(kv.to(tl.float32), qT.to(tl.float32), s, input_precision="ieee")
            else:
                s = tl.dot(kv, qT, s)
        s = tl.where(ok[:, None], s * sm_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 0))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2((s - m_safe[None, :]) * LOG2E)  # P^T [BLOCK_N, H]
        alpha = tl.exp2((m_i - m_safe) * LOG2E)
        l_i = l_i * alpha + tl.sum(p, 0)
        acc = acc * alpha[None, :]
        vw = _dequant(SWA, sw, ok_w, oc * OUT_DC, stride_swa, OUT_DC, False, PERTURB)
        vc = _dequant(COMP, sc_, ok_c, oc * OUT_DC, stride_comp, OUT_DC, NVFP4, PERTURB)
        v = tl.where(ok_w[:, None], vw, vc)  # [BLOCK_N, OUT_DC]
        if DOT_F32:
            acc = tl.dot(tl.trans(v.to(tl.float32)), p.to(tl.bfloat16).to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(tl.trans(v), p.to(tl.bfloat16), acc)
        m_i = m_new
    r = t.to(tl.int64) * H + heads
    if oc == 0:
        tl.store(M_OUT + split * stride_ms + r, m_i)
        tl.store(L_OUT + split * stride_ms + r, l_i)
    offs_d = oc * OUT_DC + tl.arange(0, OUT_DC)
    tl.store(ACC_OUT + split * stride_as + r[None, :] * 512 + offs_d[:, None], acc)
