"""torch.library custom ops for every public kernel entry, each with a fake (meta) implementation,
so the kernels compose with torch.compile(fullgraph=True) and CUDA-graph capture.

Registered ops:
- ``attnkit::merge_partials(m, l, acc, out_dtype) -> (out, lse)``: the split-K merge.
- ``attnkit::merge_partials_out(m, l, acc, out!, lse!) -> ()``: the same into caller buffers
  (nothing allocated: the form to capture in a CUDA graph).
- ``attnkit::relbias_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, table, window, beyond, softmax_scale,
  max_seqlen_q, max_seqlen_k) -> (out, lse)`` and ``attnkit::relbias_paged(q, k_cache, v_cache, block_table,
  seqused_k, cu_seqlens_q, table, window, beyond, softmax_scale, max_seqlen_q, max_seqlen_k, k_scale?,
  v_scale?) -> (out, lse)``: relbias attention (no host sync: ``max_seqlen_q`` and ``max_seqlen_k`` are
  given, so the split plan is computed outside a CUDA graph; validation is the caller's ``attnkit`` call's
  business). ``window = 0`` means a global layer.
- ``attnkit::sparse_int8(q, k_cache, v_cache, key_scale, value_scale, indices, scale, tiles_per_split)
  -> (out, lse)``: sparse INT8 attention without host checks (``tiles_per_split = 0``: the split rule).
- ``attnkit::mqa_decode(q, swa_cache, comp_cache, swa_idx, comp_idx, positions, cos_sin, sink, num_heads,
  softmax_scale, comp_format, kernel) -> (out, lse)`` (``kernel = ""``: the dispatch rule) and
  ``attnkit::mqa_write_records(latent, positions, cos_sin, slots, cache!, fmt) -> ()``.
- ``attnkit::mqa_decode_step(latent, slots, new_positions, q, swa_cache!, comp_cache, swa_idx, comp_idx, positions,
  cos_sin, sink, num_heads, softmax_scale, comp_format, kernel) -> (out, lse)``: a whole step (the new records
  written, then the attention; with programmatic dependent launch where it runs).
- ``attnkit::relbias_write_kv(k_new, v_new, cu_seqlens_new, k_cache!, v_cache!, block_table, seqused_k,
  k_scale?, v_scale?) -> ()``: append new tokens into the paged cache (fp8-quantizing).
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


@torch.library.custom_op("attnkit::relbias_varlen", mutates_args=())
def relbias_varlen(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor, table: Tensor,
                   window: int, beyond: str, softmax_scale: float, max_seqlen_q: int, max_seqlen_k: int,
                   k_scale: Tensor | None = None, v_scale: Tensor | None = None) -> tuple[Tensor, Tensor]:
    from .relbias import relbias_attention
    return relbias_attention(q, k, v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, table=table,
                             window=window or None, beyond=beyond, softmax_scale=softmax_scale,
                             k_scale=k_scale, v_scale=v_scale, max_seqlen_q=max_seqlen_q,
                             max_seqlen_k=max_seqlen_k, validate=False)


@relbias_varlen.register_fake
def _relbias_varlen_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, table, window, beyond, softmax_scale, max_seqlen_q,
                         max_seqlen_k, k_scale=None, v_scale=None):
    return torch.empty_like(q), q.new_empty(q.shape[:2], dtype=torch.float32)


@torch.library.custom_op("attnkit::relbias_paged", mutates_args=())
def relbias_paged(q: Tensor, k_cache: Tensor, v_cache: Tensor, block_table: Tensor, seqused_k: Tensor,
                  cu_seqlens_q: Tensor, table: Tensor, window: int, beyond: str, softmax_scale: float,
                  max_seqlen_q: int, max_seqlen_k: int, k_scale: Tensor | None = None,
                  v_scale: Tensor | None = None) -> tuple[Tensor, Tensor]:
    from .relbias import relbias_attention
    return relbias_attention(q, k_cache=k_cache, v_cache=v_cache, block_table=block_table, seqused_k=seqused_k,
                             cu_seqlens_q=cu_seqlens_q, table=table, window=window or None, beyond=beyond,
                             softmax_scale=softmax_scale, k_scale=k_scale, v_scale=v_scale,
                             max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, validate=False)


@relbias_paged.register_fake
def _relbias_paged_fake(q, k_cache, v_cache, block_table, seqused_k, cu_seqlens_q, table, window, beyond,
                        softmax_scale, max_seqlen_q, max_seqlen_k, k_scale=None, v_scale=None):
    return torch.empty_like(q), q.new_empty(q.shape[:2], dtype=torch.float32)


@torch.library.custom_op("attnkit::relbias_write_kv", mutates_args=("k_cache", "v_cache"))
def relbias_write_kv(k_new: Tensor, v_new: Tensor, cu_seqlens_new: Tensor, k_cache: Tensor, v_cache: Tensor,
                     block_table: Tensor, seqused_k: Tensor, k_scale: Tensor | None = None,
                     v_scale: Tensor | None = None) -> None:
    from .relbias import relbias_write_kv as write
    write(k_new, v_new, cu_seqlens_new, k_cache, v_cache, block_table, seqused_k, k_scale=k_scale, v_scale=v_scale,
          validate=False)


@relbias_write_kv.register_fake
def _relbias_write_kv_fake(k_new, v_new, cu_seqlens_new, k_cache, v_cache, block_table, seqused_k, k_scale=None,
                           v_scale=None):
    return None


@torch.library.custom_op("attnkit::sparse_int8", mutates_args=())
def sparse_int8(q: Tensor, k_cache: Tensor, v_cache: Tensor, key_scale: Tensor, value_scale: Tensor, indices: Tensor,
                scale: float, tiles_per_split: int) -> tuple[Tensor, Tensor]:
    from .sparse_int8 import sparse_int8_attention
    return sparse_int8_attention(q, k_cache, v_cache, key_scale, value_scale, indices, scale=scale,
                                 tiles_per_split=tiles_per_split or None, validate=False)


@sparse_int8.register_fake
def _sparse_int8_fake(q, k_cache, v_cache, key_scale, value_scale, indices, scale, tiles_per_split):
    return torch.empty_like(q), q.new_empty(q.shape[:2], dtype=torch.float32)


@torch.library.custom_op("attnkit::mqa_decode", mutates_args=())
def mqa_decode(q: Tensor, swa_cache: Tensor, comp_cache: Tensor, swa_idx: Tensor, comp_idx: Tensor, positions: Tensor,
               cos_sin: Tensor, sink: Tensor, num_heads: int, softmax_scale: float, comp_format: str,
               kernel: str) -> tuple[Tensor, Tensor]:
    from .mqa_decode import mqa_decode_attention
    return mqa_decode_attention(q, swa_cache, comp_cache, swa_idx, comp_idx, positions, cos_sin, sink, num_heads,
                                softmax_scale, comp_format, kernel=kernel or None, validate=False)


@mqa_decode.register_fake
def _mqa_decode_fake(q, swa_cache, comp_cache, swa_idx, comp_idx, positions, cos_sin, sink, num_heads, softmax_scale,
                     comp_format, kernel):
    T = q.shape[0]
    return q.new_empty((T, num_heads, q.shape[2])), q.new_empty((T, num_heads), dtype=torch.float32)


@torch.library.custom_op("attnkit::mqa_write_records", mutates_args=("cache",))
def mqa_write_records(latent: Tensor, positions: Tensor, cos_sin: Tensor, slots: Tensor, cache: Tensor,
                      fmt: str) -> None:
    from .mqa_decode import mqa_write_records as write
    write(latent, positions, cos_sin, slots, cache, fmt, validate=False)


@mqa_write_records.register_fake
def _mqa_write_records_fake(latent, positions, cos_sin, slots, cache, fmt):
    return None


@torch.library.custom_op("attnkit::mqa_decode_step", mutates_args=("swa_cache",))
def mqa_decode_step(latent: Tensor, slots: Tensor, new_positions: Tensor, q: Tensor, swa_cache: Tensor,
                    comp_cache: Tensor, swa_idx: Tensor, comp_idx: Tensor, positions: Tensor, cos_sin: Tensor,
                    sink: Tensor, num_heads: int, softmax_scale: float, comp_format: str,
                    kernel: str) -> tuple[Tensor, Tensor]:
    from .mqa_decode import mqa_decode_step as step
    return step(latent, slots, q, swa_cache, comp_cache, swa_idx, comp_idx, positions, cos_sin, sink, num_heads,
                softmax_scale, comp_format, new_positions=new_positions, validate=False, kernel=kernel or None)


@mqa_decode_step.register_fake
def _mqa_decode_step_fake(latent, slots, new_positions, q, swa_cache, comp_cache, swa_idx, comp_idx, positions,
                          cos_sin, sink, num_heads, softmax_scale, comp_format, kernel):
    T = q.shape[0]
    return q.new_empty((T, num_heads, q.shape[2])), q.new_empty((T, num_heads), dtype=torch.float32)
