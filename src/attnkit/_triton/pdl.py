"""Programmatic dependent launch (PDL, sm_90+): a kernel launched with ``launch_pdl=True`` may start while the
kernel before it in the stream is still running, and overlaps its own launch and block scheduling with that
kernel's tail. Correctness rests on one rule: a kernel built with ``PDL`` waits (``griddepcontrol.wait``: the
previous grid has completed and its memory is visible) before it reads or writes anything in global memory, and
then lets the next kernel launch (``griddepcontrol.launch_dependents``). Used at kernel entry by every kernel of
a decode step (attention, merge, record writer) when the ``pdl`` option is on, Triton and Gluon kernels alike;
never in the interpreter, which has no such instructions (the option is refused there: attnkit._runtime.pdl_runs).
"""

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait


@triton.jit
def pdl_entry(PDL: tl.constexpr):
    """Kernel entry under PDL: wait for the previous grid, then release the next one (no-op when PDL is off)."""
    if PDL:
        gdc_wait()
        gdc_launch_dependents()


@triton.jit
def pdl_release(PDL: tl.constexpr):
    """Let the next grid launch (no wait yet): the first half of an entry that reads, before pdl_wait, only inputs
    the kernel launched just before does not write (the mqa_decode option pdl_early_inputs)."""
    if PDL:
        gdc_launch_dependents()


@triton.jit
def pdl_wait(PDL: tl.constexpr):
    """Wait for the previous grid (completed, its memory visible): after pdl_release, before the first access to
    anything that grid may write."""
    if PDL:
        gdc_wait()

