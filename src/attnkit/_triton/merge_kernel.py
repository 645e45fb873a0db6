"""Split-K merge kernel.

Computes   out[r] = sum_s acc[s,r] * exp(m[s,r] - M) / sum_s l[s,r] * exp(m[s,r] - M),
           lse[r] = M + log(sum_s l[s,r] exp(m[s,r] - M)),  M = max_s m[s,r]
Contract   m, l: [S, R] fp32; acc: [S, R, D] fp32 (last dim contiguous); out: [R, D]; lse: [R] fp32.
Numerics   fp32 throughout, splits merged in index order (deterministic); an empty split
           (m = -inf, l = 0) contributes nothing; a row whose splits are all empty gives 0 / -inf.
           With HAS_E, m is in a scaled domain with a per-row power-of-two exponent (true max =
           m * 2^E[r], see the sparse_int8 kernel): differences are scaled by 2^E[r] after the maximum is
           subtracted, exactly as the kernel that wrote them did.
Dispatch   attnkit.splitk.merge_partials (one program per row and D block).
Oracle     attnkit.reference.merge_partials; tests/test_splitk.py, gate "merge/triton".
"""

import triton
import triton.language as tl

from .pow2 import ldexp
from .rounding import to_bf16


@triton.jit
def merge_partials_kernel(M, L, ACC, OUT, LSE, ROW_E, S, D,
                          stride_ms, stride_mr, stride_as, stride_ar, stride_or,
                          BLOCK_D: tl.constexpr, HAS_E: tl.constexpr):
    r = tl.program_id(0)
    db = tl.program_id(1)
    offs = db * BLOCK_D + tl.arange(0, BLOCK_D)
    dmask = offs < D
    r64 = r.to(tl.int64)
    big = tl.load(M + r64 * stride_mr)
    for s in range(1, S):
        big = tl.maximum(big, tl.load(M + s * stride_ms + r64 * stride_mr))
    big_safe = tl.where(big == float("-inf"), 0.0, big)
    if HAS_E:
        e = tl.load(ROW_E + r64)
    total = big_safe * 0.0
    o = tl.zeros([BLOCK_D], dtype=tl.float32)
    for s in range(0, S):
        m = tl.load(M + s * stride_ms + r64 * stride_mr)
        l = tl.load(L + s * stride_ms + r64 * stride_mr)
        if HAS_E:
            w = tl.where(m == float("-inf"), 0.0, tl.exp(ldexp(m - big_safe, e)))
        else:
            w = tl.where(m == float("-inf"), 0.0, tl.exp(m - big_safe))
        total += l * w
        a = tl.load(ACC + s * stride_as + r64 * stride_ar + offs, mask=dmask, other=0.0)
        o += a * w
    nonempty = total > 0
    denom = tl.where(nonempty, total, 1.0)
    res = tl.where(nonempty, o / denom, 0.0)
    if OUT.dtype.element_ty == tl.bfloat16:
        tl.store(OUT + r64 * stride_or + offs, to_bf16(res), mask=dmask)  # RNE in the interpreter too
    else:
        tl.store(OUT + r64 * stride_or + offs, res.to(OUT.dtype.element_ty), mask=dmask)
    if db == 0:
        if HAS_E:
            top = ldexp(big_safe, e)
        else:
            top = big_safe
        tl.store(LSE + r64, tl.where(nonempty, top + tl.log(denom), float("-inf")))
