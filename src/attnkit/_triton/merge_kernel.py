"""Split-K merge kernel.

Computes   out[r] = sum_s acc[s,r] * exp(m[s,r] - M) / sum_s l[s,r] * exp(m[s,r] - M),
           lse[r] = M + log(sum_s l[s,r] exp(m[s,r] - M)),  M = max_s m[s,r]
Contract   m, l: [S, R] fp32; acc: [S, R, D] fp32 (last dim contiguous); out: [R, D]; lse: [R] fp32.
Numerics   fp32 throughout, one pass over the splits, BLOCK_S at a time in a fixed order (deterministic;
           rescaled online when S > BLOCK_S); an empty
           split (m = -inf, l = 0) contributes nothing; a row whose splits are all empty gives 0 / -inf.
           With HAS_E, m is in a scaled domain with a per-row power-of-two exponent (true max =
           m * 2^E[r], see the sparse_int8 kernel): differences are scaled by 2^E[r] after the maximum is
           subtracted, exactly as the kernel that wrote them did.
PDL        with PDL, the kernel waits for the kernel that wrote the partials at entry (attnkit._triton.pdl).
Dispatch   attnkit.splitk.merge_partials (one program per row and D block; the splits are read as
           [BLOCK_S, BLOCK_D] tiles, so a row costs ceil(S / BLOCK_S) dependent loads, not S).
Oracle     attnkit.reference.merge_partials; tests/test_splitk.py, gate "merge/triton".
"""

import triton
import triton.language as tl

from .pdl import pdl_entry
from .pow2 import ldexp
from .rounding import to_bf16


@triton.jit
def merge_partials_kernel(M, L, ACC, OUT, LSE, ROW_E, S, D,
                          stride_ms, stride_mr, stride_as, stride_ar, stride_or,
                          BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr, HAS_E: tl.constexpr,
                          PDL: tl.constexpr = False):
    pdl_entry(PDL)
    r = tl.program_id(0)
    db = tl.program_id(1)
    offs = db * BLOCK_D + tl.arange(0, BLOCK_D)
    dmask = offs < D
    r64 = r.to(tl.int64)
    offs_s = tl.arange(0, BLOCK_S)
    if HAS_E:
        e = tl.load(ROW_E + r64)
    # one pass, online over chunks of BLOCK_S splits (one chunk when S <= BLOCK_S: every load issued at once)
    big = tl.max(tl.full([BLOCK_S], float("-inf"), dtype=tl.float32), 0)
    total = tl.sum(tl.zeros([BLOCK_S], dtype=tl.float32), 0)
    o = tl.zeros([BLOCK_D], dtype=tl.float32)
    for s0 in range(0, S, BLOCK_S):
        ss = (s0 + offs_s).to(tl.int64)
        sok = ss < S
        ms = tl.load(M + ss * stride_ms + r64 * stride_mr, mask=sok, other=float("-inf"))
        ls = tl.load(L + ss * stride_ms + r64 * stride_mr, mask=sok, other=0.0)
        a = tl.load(ACC + ss[:, None] * stride_as + r64 * stride_ar + offs[None, :],
                    mask=sok[:, None] & dmask[None, :], other=0.0)
        new_big = tl.maximum(big, tl.max(ms, 0))
        nb_safe = tl.where(new_big == float("-inf"), 0.0, new_big)
        ob_safe = tl.where(big == float("-inf"), 0.0, big)
        if HAS_E:
            scale_old = tl.where(big == float("-inf"), 0.0, tl.exp(ldexp(ob_safe - nb_safe, e)))
            w = tl.where(ms == float("-inf"), 0.0, tl.exp(ldexp(ms - nb_safe, e)))
        else:
            scale_old = tl.where(big == float("-inf"), 0.0, tl.exp(ob_safe - nb_safe))
            w = tl.where(ms == float("-inf"), 0.0, tl.exp(ms - nb_safe))
        total = total * scale_old + tl.sum(ls * w, 0)
        o = o * scale_old + tl.sum(a * w[:, None], 0)
        big = new_big
    big_safe = tl.where(big == float("-inf"), 0.0, big)
    nonempty = total != 0  # a NaN total (a NaN score or value) stays NaN: not the empty row
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
