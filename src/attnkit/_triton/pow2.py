"""Exact power-of-two scaling helpers (bit manipulation, no rounding), shared by kernels that keep
intermediates in range on any finite input."""

import triton
import triton.language as tl


@triton.jit
def exp2i(e):
    """2^e as fp32 for an int32 e in [-126, 127] (built from its bits: exact)."""
    return ((e + 127) << 23).to(tl.float32, bitcast=True)


@triton.jit
def ldexp(x, e):
    """x * 2^e for an int32 e of any size, in three exact steps (the result overflows to +-inf or
    underflows towards 0 only where x * 2^e itself lies outside fp32)."""
    e1 = tl.minimum(tl.maximum(e, -126), 127)
    r = e - e1
    e2 = tl.minimum(tl.maximum(r, -126), 127)
    e3 = tl.minimum(tl.maximum(r - e2, -126), 127)
    return x * exp2i(e1) * exp2i(e2) * exp2i(e3)


@triton.jit
def frexp_exp(m):
    """The exponent e of a non-negative fp32 m, with 2^e <= m < 2^(e+1) (0 for m == 0); subnormals
    are normalized first by an exact multiplication by 2^64."""
    sub = m < 1.1754943508222875e-38
    mm = tl.where(sub, m * 18446744073709551616.0, m)
    field = (mm.to(tl.int32, bitcast=True) >> 23) & 0xFF
    e = field - 127 - tl.where(sub, 64, 0)
    return tl.where(m > 0, e, 0)
