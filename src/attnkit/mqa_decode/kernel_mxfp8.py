"""mqa_decode MXFP8 output: fp32 rows [T * H, 512] -> e4m3 values and UE8M0 block scales in caller buffers
[T, H_pad, 512] / [T, H_pad, 16], live heads only (padding heads' bytes are never touched).

Rounding rule: the fp8 record writer's (kernel_write.quant_fp8_pairs): per 32-dim block the smallest
power of two keeping amax within 448, values rounded to nearest even; a NaN value is the e4m3 NaN code (sign kept)
and does not count in its block's amax. Oracle: the reference encoder
attnkit.reference.mqa_decode.encode_fp8_record applied to the output rows; tests/test_mqa_decode.py.
"""

import triton
import triton.language as tl

from .._triton.pdl import pdl_entry
from .kernel_write import quant_fp8_pairs


@triton.jit
def mxfp8_out_kernel(X, OUT_Q, OUT_S, H, H_pad, PDL: tl.constexpr = False):
    pdl_entry(PDL)
    r = tl.program_id(0)  # row t * H + h
    t = r // H
    h = r % H
    p = tl.arange(0, 256)
    a = tl.load(X + r.to(tl.int64) * 512 + 2 * p)
    b = tl.load(X + r.to(tl.int64) * 512 + 2 * p + 1)
    qa, qb, e = quant_fp8_pairs(a, b)
    dst = (t.to(tl.int64) * H_pad + h)
    tl.store(OUT_Q + dst * 512 + 2 * p, qa)
    tl.store(OUT_Q + dst * 512 + 2 * p + 1, qb)
    tl.store(OUT_S + dst * 16 + tl.arange(0, 16), (e + 127).to(tl.uint8))
