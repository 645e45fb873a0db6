"""Split-K merge kernel.

Computes   out[r] = sum_s acc[s,r] * exp(m[s,r] - M) / sum_s l[s,r] * exp(m[s,r] - M),
           lse[r] = M + log(sum_s l[s,r] exp(m[s,r] - M)),  M = max_s m[s,r]
Contract   m, l: [S, R] fp32; acc: [S, R, D] fp32 (last dim contiguous); out: [R, D]; lse: [R] fp32.
Numerics   fp32 throughout, splits merged in index order (deterministic); an empty split
           (m = -inf, l = 0) contributes nothing; a row whose splits are all empty gives 0 / -inf.
Dispatch   attnkit.splitk.merge_partials (one program per row and D block).
Oracle     attnkit.reference.merge_partials; tests/test_splitk.py, gate "merge/triton".
"""

import triton
import triton.language as tl


@triton.jit
def merge_partials_kernel(M, L, ACC, OUT, LSE, S, D,
                          stride_ms, stride_mr, stride_as, stride_ar, stride_or,
                          BLOCK_D: tl.constexpr):
    r = tl.program_id(0)
    db = tl.program_id(1)
    offs = db * BLOCK_D + tl.arange(0, BLOCK_D)
    dmask = offs < D
    r64 = r.to(tl.int64)
    big = tl.load(M + r64 * stride_mr)
    for s in range(1, S):
        big = tl.maximum(big, tl.load(M + s * stride_ms + r64 * stride_mr))
    big_safe = tl.where(big == float("-inf"), 0.0, big)
    total = big_safe * 0.0
    o = tl.zeros([BLOCK_D], dtype=tl.float32)
    for s in range(0, S):
        m = tl.load(M + s * stride_ms + r64 * stride_mr)
        l = tl.load(L + s * stride_ms + r64 * stride_mr)
        w = tl.where(m == float("-inf"), 0.0, tl.exp(m - big_safe))
        total += l * w
        a = tl.load(ACC + s * stride_as + r64 * stride_ar + offs, mask=dmask, other=0.0)
        o += a * w
    nonempty = total > 0
    denom = tl.where(nonempty, total, 1.0)
    res = tl.where(nonempty, o / denom, 0.0)
    tl.store(OUT + r64 * stride_or + offs, res.to(OUT.dtype.element_ty), mask=dmask)
    if db == 0:
        tl.store(LSE + r64, tl.where(nonempty, big_safe + tl.log(denom), float("-inf")))
