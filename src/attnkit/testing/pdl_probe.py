"""A probe kernel for the stress check of programmatic dependent launch (benchmarks/experiments/stress_under_load.py):
a kernel before a decode step that rewrites one of the step's inputs late, so that a step which reads that input
before its wait shows wrong results. GPU only (the global timer); imported only by the jobs that use it."""

import triton
import triton.language as tl

from .._triton.pdl import pdl_entry
from .._triton.timer import spin_ns


@triton.jit
def q_writer_kernel(SRC, DST, n, PDL: tl.constexpr, DELAY_NS: tl.constexpr, BLOCK: tl.constexpr):
    """Copies SRC to DST (n elements) after spinning DELAY_NS on the global timer; with PDL it waits for the grid
    before it and then lets the next grid launch, before it writes (as every PDL kernel of the library does at
    entry): a kernel after which an attention that reads q before its wait must not run. One program (a grid of
    many spinning programs would hold the SMs a step's thread-block clusters need, and delay their launch)."""
    pdl_entry(PDL)
    spin_ns(DELAY_NS)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        tl.store(DST + offs, tl.load(SRC + offs, mask=offs < n), mask=offs < n)
