"""Rounding that is the same in Triton's interpreter and on a GPU.

Triton 3.6's interpreter converts fp32 to bf16 by truncation (and mangles subnormals); the GPU
rounds to nearest even. A kernel that stores a bf16 output converts with ``to_bf16``, which rounds to
nearest even with integer operations on the bits and reinterprets the top half as bf16: the same bits
everywhere, subnormals included. A NaN stays a NaN (its sign kept, quieted): the carry of the rounding add would
turn the GPU's NaN 0x7FFFFFFF into -0.0 and a NaN of small payload into infinity.
"""

import triton
import triton.language as tl


@triton.jit
def is_nan(x):
    """fp32 NaN test on the bits (a float compare x != x could be folded away). On a GPU a min / max returns the
    other operand of a NaN, so a clamp alone turns a NaN into a finite bound: an encoder keeps NaN by this test."""
    return (x.to(tl.int32, bitcast=True) & 0x7FFFFFFF) > 0x7F800000


@triton.jit
def to_bf16(x):
    """fp32 x -> bf16, round to nearest even, by bits (identical in the interpreter and on a GPU); NaN -> NaN."""
    bits = x.to(tl.int32, bitcast=True)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    top = tl.where(is_nan(x), (bits >> 16) | 0x40, rounded)
    return top.to(tl.int16).to(tl.bfloat16, bitcast=True)


@triton.jit
def bf16_to_f32(x):
    """bf16 -> fp32 by bits (exact; the interpreter mangles bf16 subnormals in a plain conversion)."""
    return (x.to(tl.int16, bitcast=True).to(tl.int32) << 16).to(tl.float32, bitcast=True)


@triton.jit
def int8_to_bf16(x):
    """int8 x -> bf16 exactly, with integer and one fp32 add instead of two conversions (int to float and
    float to bf16 both run at a quarter of the ALU rate): the bits 0x4B000080 + x are the fp32 2^23 + 128 + x,
    minus 2^23 + 128 is x, and an integer of at most 8 significant bits is its own bf16 truncation."""
    f = (x.to(tl.int32) + 0x4B000080).to(tl.float32, bitcast=True) - 8388736.0
    return (f.to(tl.int32, bitcast=True) >> 16).to(tl.int16).to(tl.bfloat16, bitcast=True)
