"""FP8 e4m3 rounding that is the same in Triton's interpreter and on a GPU.

Triton 3.6's interpreter converts fp32 to fp8e4nv rounding halves away from zero; the GPU's
cvt.rn.satfinite rounds to nearest even (torch's cast). ``round_e4m3`` first rounds to the e4m3 grid
with round-to-nearest-even by the fp32 magic-number addition, so the final conversion is exact
everywhere.
"""

import triton
import triton.language as tl


@triton.jit
def round_e4m3(x):
    """x (fp32, already clamped to [-448, 448]) rounded to nearest even on the e4m3 grid (fp32 result).

    The grid step of |x| in binade 2^e is 2^(max(e, -6) - 3); adding and subtracting c = 1.5 * 2^(k + 23)
    with k the step's exponent rounds x to a multiple of 2^k with IEEE round-to-nearest-even.
    """
    bits = x.to(tl.int32, bitcast=True)
    e = ((bits >> 23) & 0xFF) - 127
    k = tl.maximum(e, -6) - 3
    c = (((k + 23 + 127) << 23) | (1 << 22)).to(tl.float32, bitcast=True)
    r = (x + c) - c
    # keep x's sign (a negative value that rounds to zero is -0, as torch's cast gives)
    sign = bits & -2147483648
    return (r.to(tl.int32, bitcast=True) | sign).to(tl.float32, bitcast=True)


@triton.jit
def e4m3_nan_code(x):
    """The e4m3fn NaN code with fp32 x's sign (torch's cast of a NaN): 0xFF for a negative sign bit, else 0x7F
    (uint8)."""
    return tl.where(x.to(tl.int32, bitcast=True) < 0, 0xFF, 0x7F).to(tl.uint8)
