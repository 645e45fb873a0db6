"""torch.library custom ops for every public kernel entry, each with a fake (meta) implementation,
so the kernels compose with torch.compile(fullgraph=True) and CUDA-graph capture.

Registered ops:
- ``attnkit::merge_partials(m, l, acc, out_dtype) -> (out, lse)``: the split-K merge.
- ``attnkit::merge_partials_out(m, l, acc, out!, lse!) -> ()``: the same into caller buffers
  (nothing allocated: the form to capture in a CUDA graph).
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import splitk


@torch.library.custom_op("attnkit::merge_partials", mutates_args=())
def merge_partials(m: Tensor, l: Tensor, acc: Tensor, out_dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    return splitk.merge_partials(m, l, acc, out_dtype)


@merge_partials.register_fake
def _merge_partials_fake(m, l, acc, out_dtype):
    S, R, D = acc.shape
    return acc.new_empty((R, D), dtype=out_dtype), acc.new_empty((R,), dtype=torch.float32)


@torch.library.custom_op("attnkit::merge_partials_out", mutates_args=("out", "lse"))
def merge_partials_out(m: Tensor, l: Tensor, acc: Tensor, out: Tensor, lse: Tensor) -> None:
    splitk.merge_partials_into(m, l, acc, out, lse)


@merge_partials_out.register_fake
def _merge_partials_out_fake(m, l, acc, out, lse):
    return None
