"""A spin on the GPU's global timer, for diagnostics kernels that must be slow on purpose (the stress check's slow
record writer and its probe kernel). GPU only: the interpreter has no global timer."""

import triton
import triton.language as tl
from triton.language.extra.cuda import globaltimer


@triton.jit
def spin_ns(DELAY_NS: tl.constexpr):
    """Spin until DELAY_NS nanoseconds of the global timer have passed; returns the nanoseconds that did."""
    t0 = globaltimer()
    elapsed = globaltimer() - t0
    while elapsed < DELAY_NS:
        elapsed = globaltimer() - t0
    return elapsed
