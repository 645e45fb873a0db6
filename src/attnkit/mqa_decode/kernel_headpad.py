"""mqa_decode head-padded kernel: heads on the MMA's M side, padded to 64 (the general path, any H).

Computes   per token t, split s (a range of list positions: the window list, then the compressed
           list), head block and output chunk of OUT_DC dims: scores S [64, slots] = Q_rot . KV^T over all
           512 dims, the softmax along rows, and O[:, chunk] += P . KV[:, chunk]: the un-normalized
           partials (m, l, acc[:, chunk]). With OUT_DC < 512 each output chunk's program recomputes the
           scores (an O tile of 64 x 512 fp32 does not fit the registers of one program): that recompute
           and the padded rows are what the swap-AB kernel removes.
Contract   as kernel_swapab.py (q unrotated, rotated here).
Numerics   as kernel_swapab.py.
Dispatch   attnkit.mqa_decode.interface.mqa_decode_attention (plan: attnkit.mqa_decode.config).
Oracle     attnkit.reference.mqa_decode.mqa_decode_ref; gate "mqa_decode/triton_headpad".
PERTURB    1: the first slot tile of every split lost; 2: each fp8 block reads its neighbour's scale.
"""

import triton
import triton.language as tl

from .._triton.pdl import pdl_entry, pdl_release, pdl_wait
from .kernel_common import LOG2E, dequant_rows, list_range, rope_q, tile_slots


@triton.jit
def _headpad_tile(CACHE, IDX_ROW, p0, p1, first, stride_rec, q, h_ok, m_i, l_i, acc, sm_scale, oc,
                  BLOCK_N: tl.constexpr, OUT_DC: tl.constexpr, NVFP4: tl.constexpr, PERTURB: tl.constexpr,
                  DOT_F32: tl.constexpr):
    slot, ok = tile_slots(IDX_ROW, p0, p1, first, BLOCK_N, PERTURB)
    return _headpad_tile_at(CACHE, slot, ok, stride_rec, q, h_ok, m_i, l_i, acc, sm_scale, oc, BLOCK_N, OUT_DC, NVFP4,
                            PERTURB, DOT_F32)


@triton.jit
def _headpad_list_early(CACHE, IDX_ROW, p_start, p_end, first, stride_rec, q, h_ok, m_i, l_i, acc, sm_scale, oc,
                        slot, ok, BLOCK_N: tl.constexpr, OUT_DC: tl.constexpr, NVFP4: tl.constexpr,
                        PERTURB: tl.constexpr, DOT_F32: tl.constexpr):
    """A list's tiles with IDS_EARLY: the first tile's slot ids (slot, ok) were loaded before the query; each next
    tile's are loaded before the current tile's records."""
    for p0 in range(p_start, p_end, BLOCK_N):
        slot_n, ok_n = tile_slots(IDX_ROW, p0 + BLOCK_N, p_end, first, BLOCK_N, PERTURB)
        m_i, l_i, acc = _headpad_tile_at(CACHE, slot, ok, stride_rec, q, h_ok, m_i, l_i, acc, sm_scale, oc, BLOCK_N,
                                         OUT_DC, NVFP4, PERTURB, DOT_F32)
        slot, ok = slot_n, ok_n
    return m_i, l_i, acc


@triton.jit
def _headpad_tile_at(CACHE, slot, ok, stride_rec, q, h_ok, m_i, l_i, acc, sm_scale, oc,
                     BLOCK_N: tl.constexpr, OUT_DC: tl.constexpr, NVFP4: tl.constexpr, PERTURB: tl.constexpr,
                     DOT_F32: tl.constexpr):
    kv = dequant_rows(CACHE, slot, ok, stride_rec, 0, 512, BLOCK_N, NVFP4, PERTURB)  # [BLOCK_N, 512]
    if DOT_F32:  # the interpreter multiplies bf16 bit patterns: widen the exact bf16 values
        s = tl.dot(q.to(tl.float32), tl.trans(kv.to(tl.float32)), input_precision="ieee")
    else:
        s = tl.dot(q, tl.trans(kv))  # [BLOCK_H, BLOCK_N]
    s = tl.where(ok[None, :] & h_ok[:, None], s * sm_scale, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.exp2((s - m_safe[:, None]) * LOG2E)
    alpha = tl.exp2((m_i - m_safe) * LOG2E)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    if OUT_DC == 512:
        v = kv
    else:
        v = dequant_rows(CACHE, slot, ok, stride_rec, oc * OUT_DC, OUT_DC, BLOCK_N, NVFP4, PERTURB)
    if DOT_F32:
        acc = tl.dot(p.to(tl.bfloat16).to(tl.float32), v.to(tl.float32), acc, input_precision="ieee")
    else:
        acc = tl.dot(p.to(tl.bfloat16), v, acc)
    return m_new, l_i, acc


@triton.jit
def mqa_headpad_kernel(
    Q, POS, COS_SIN, SWA, COMP, SWA_IDX, COMP_IDX, M_OUT, L_OUT, ACC_OUT,
    sm_scale, W, K, slots_per_split, H,
    stride_qt, stride_qh, stride_swa, stride_comp, stride_wt, stride_kt, stride_ms, stride_as,
    BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, OUT_DC: tl.constexpr,
    NVFP4: tl.constexpr, PERTURB: tl.constexpr, DOT_F32: tl.constexpr, PDL: tl.constexpr = False,
    PDL_EARLY: tl.constexpr = False, IDS_EARLY: tl.constexpr = False,
):
    # IDS_EARLY: the first tiles' slot ids of both lists loaded before the query (their round trip overlaps the
    # query's instead of following the query's layout barriers), each next tile's before the current tile's records;
    # the same tiles in the same order, the same bits
    # PDL_EARLY (with PDL): the query is loaded and rotated before the wait for the previous grid, which must not
    # write q, positions or cos_sin (in a step: the record writer, which writes only records); 2: no wait at all, a
    # diagnostics variant that is wrong by design (the stress check must catch it)
    if PDL_EARLY:
        pdl_release(PDL)
    else:
        pdl_entry(PDL)
    t = tl.program_id(0)
    split = tl.program_id(1)
    hc = tl.program_id(2)
    n_out: tl.constexpr = 512 // OUT_DC
    hb = hc // n_out
    oc = hc % n_out
    heads = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = heads < H
    if IDS_EARLY:
        e0 = split * slots_per_split
        ew0, ew1, ec0, ec1 = list_range(e0, tl.minimum(e0 + slots_per_split, W + K), W)
        slot_w, ok_w = tile_slots(SWA_IDX + t.to(tl.int64) * stride_wt, ew0, ew1, ew0, BLOCK_N, PERTURB)
        slot_c, ok_c = tile_slots(COMP_IDX + t.to(tl.int64) * stride_kt, ec0, ec1, tl.where(e0 >= W, ec0, -1),
                                  BLOCK_N, PERTURB)
    pos = tl.load(POS + t).to(tl.int64)
    q = rope_q(Q, COS_SIN, t, heads, h_ok, stride_qt, stride_qh, pos, True)  # [BLOCK_H, 512]
    if PDL_EARLY == 1:  # every record load and every global store comes after this wait
        pdl_wait(PDL)
    n0 = split * slots_per_split
    n1 = tl.minimum(n0 + slots_per_split, W + K)
    w0, w1, c0, c1 = list_range(n0, n1, W)
    m_i = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, OUT_DC], dtype=tl.float32)
    swa_row = SWA_IDX + t.to(tl.int64) * stride_wt
    if IDS_EARLY:
        comp_row = COMP_IDX + t.to(tl.int64) * stride_kt
        first_c = tl.where(n0 >= W, c0, -1)
        m_i, l_i, acc = _headpad_list_early(SWA, swa_row, w0, w1, w0, stride_swa, q, h_ok, m_i, l_i, acc, sm_scale,
                                            oc, slot_w, ok_w, BLOCK_N, OUT_DC, False, PERTURB, DOT_F32)
        m_i, l_i, acc = _headpad_list_early(COMP, comp_row, c0, c1, first_c, stride_comp, q, h_ok, m_i, l_i, acc,
                                            sm_scale, oc, slot_c, ok_c, BLOCK_N, OUT_DC, NVFP4, PERTURB, DOT_F32)
    else:
        for p0 in range(w0, w1, BLOCK_N):
            m_i, l_i, acc = _headpad_tile(SWA, swa_row, p0, w1, w0, stride_swa, q, h_ok, m_i, l_i, acc, sm_scale,
                                          oc, BLOCK_N, OUT_DC, False, PERTURB, DOT_F32)
        comp_row = COMP_IDX + t.to(tl.int64) * stride_kt
        first_c = tl.where(n0 >= W, c0, -1)
        for p0 in range(c0, c1, BLOCK_N):
            m_i, l_i, acc = _headpad_tile(COMP, comp_row, p0, c1, first_c, stride_comp, q, h_ok, m_i, l_i, acc,
                                          sm_scale, oc, BLOCK_N, OUT_DC, NVFP4, PERTURB, DOT_F32)
    r = t.to(tl.int64) * H + heads
    if oc == 0:
        tl.store(M_OUT + split.to(tl.int64) * stride_ms + r, m_i, mask=h_ok)
        tl.store(L_OUT + split.to(tl.int64) * stride_ms + r, l_i, mask=h_ok)
    tl.store(ACC_OUT + split.to(tl.int64) * stride_as + r[:, None] * 512 + oc * OUT_DC + tl.arange(0, OUT_DC)[None, :], acc,
             mask=h_ok[:, None])
