"""Rounding that is the same in Triton's interpreter and on a GPU.

Triton 3.6's interpreter converts fp32 to bf16 by truncation (and mangles subnormals); the GPU
rounds to nearest even. A kernel that stores a bf16 output converts with ``to_bf16``, which rounds to
nearest even with integer operations on the bits and reinterprets the top half as bf16: the same bits
everywhere, subnormals included.
"""

import triton
import triton.language as tl


@triton.jit
def to_bf16(x):
    """fp32 x -> bf16, round to nearest even, by bits (identical in the interpreter and on a GPU)."""
    bits = x.to(tl.int32, bitcast=True)
    bits = bits + 0x7FFF + ((bits >> 16) & 1)
    return (bits >> 16).to(tl.int16).to(tl.bfloat16, bitcast=True)


@triton.jit
def bf16_to_f32(x):
    """bf16 -> fp32 by bits (exact; the interpreter mangles bf16 subnormals in a plain conversion)."""
    return (x.to(tl.int16, bitcast=True).to(tl.int32) << 16).to(tl.float32, bitcast=True)
