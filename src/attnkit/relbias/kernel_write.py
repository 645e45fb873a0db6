"""relbias paged KV writer.

Computes   k_cache[page(b, p), p % PAGE, g, :] = k_new[i, g, :] (likewise v) for the i-th new token of
           sequence b, at position p = seqused_k[b] + (i - cu_new[b]), page(b, p) = block_table[b, p // PAGE].
Contract   k_new, v_new [total_new, Hkv, D] bf16/fp16; caches [num_blocks, PAGE, Hkv, D] of the same dtype,
           or float8_e4m3fn with per-KV-head fp32 scales (stored = value / scale).
Numerics   fp8: x / scale in fp32, clamped to +-448, rounded to nearest even e4m3 (torch's cast) by
           attnkit._triton.fp8.round_e4m3, identical in the interpreter and on a GPU; a NaN (written with
           validate=False) is the NaN code with its sign, as torch's cast gives.
Dispatch   attnkit.relbias.interface.relbias_write_kv, one program per new token and KV head.
Oracle     attnkit.reference.relbias.write_kv_ref; tests/test_relbias_writer.py (byte-exact).
"""

import triton
import triton.language as tl

from .._triton.fp8 import e4m3_nan_code, round_e4m3
from .._triton.pdl import pdl_entry
from .._triton.rounding import is_nan


@triton.jit
def relbias_write_kv_kernel(KN, VN, KC, VC, CU_NEW, SEQUSED, BLOCK_TABLE, K_SCALE, V_SCALE, B,
                            stride_nt, stride_nh, stride_cb, stride_ct, stride_ch, stride_bt,
                            HEAD_DIM: tl.constexpr, PAGE: tl.constexpr, FP8: tl.constexpr,
                            BSEARCH_STEPS: tl.constexpr, OFF_BY_ONE: tl.constexpr, PDL: tl.constexpr = False):
    pdl_entry(PDL)
    i = tl.program_id(0)
    g = tl.program_id(1)
    # the sequence of token i: the last b with cu_new[b] <= i (binary search over B + 1 offsets)
    lo = 0
    hi = B
    for _ in range(BSEARCH_STEPS):
        mid = (lo + hi + 1) // 2
        ok = tl.load(CU_NEW + mid) <= i
        lo = tl.where(ok & (mid <= hi), mid, lo)
        hi = tl.where(ok, hi, mid - 1)
    b = lo
    p = tl.load(SEQUSED + b) + (i - tl.load(CU_NEW + b)) + OFF_BY_ONE
    page = tl.load(BLOCK_TABLE + b * stride_bt + p // PAGE).to(tl.int64)
    dst = page * stride_cb + (p % PAGE).to(tl.int64) * stride_ct + g * stride_ch + tl.arange(0, HEAD_DIM)
    src = i.to(tl.int64) * stride_nt + g * stride_nh + tl.arange(0, HEAD_DIM)
    k = tl.load(KN + src)
    v = tl.load(VN + src)
    if FP8:
        kx = k.to(tl.float32)
        vx = v.to(tl.float32)
        kf = tl.minimum(tl.maximum(kx / tl.load(K_SCALE + g), -448.0), 448.0)
        vf = tl.minimum(tl.maximum(vx / tl.load(V_SCALE + g), -448.0), 448.0)
        kq = tl.where(is_nan(kx), e4m3_nan_code(kx), round_e4m3(kf).to(tl.float8e4nv).to(tl.uint8, bitcast=True))
        vq = tl.where(is_nan(vx), e4m3_nan_code(vx), round_e4m3(vf).to(tl.float8e4nv).to(tl.uint8, bitcast=True))
        tl.store(KC + dst, kq.to(KC.dtype.element_ty, bitcast=True))
        tl.store(VC + dst, vq.to(VC.dtype.element_ty, bitcast=True))
    else:
        tl.store(KC + dst, k)
        tl.store(VC + dst, v)
