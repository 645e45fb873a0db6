"""fp64 oracles, one module per family. Pure torch, any device; imports no triton.

Each oracle returns ``(out, lse)`` in fp64 with the conventions of ``attnkit.contract``.
"""

from .common import masked_attention, merge_partials, split_partials, even_bounds, tile_bounds
from .relbias import relbias_attention_ref, relbias_attention_paged_ref, relbias_partials_ref, bias_lookup
from .sparse_int8 import sparse_int8_ref, sparse_int8_partials_ref, sparse_int8_dense_ref
from .mqa_decode import (mqa_decode_ref, mqa_write_ref, decode_fp8_record, decode_nvfp4_record,
                         encode_fp8_record, encode_nvfp4_record, rope_rotate)

__all__ = [
    "masked_attention", "merge_partials", "split_partials", "even_bounds", "tile_bounds",
    "relbias_attention_ref", "relbias_attention_paged_ref", "relbias_partials_ref", "bias_lookup",
    "sparse_int8_ref", "sparse_int8_partials_ref", "sparse_int8_dense_ref",
    "mqa_decode_ref", "mqa_write_ref", "decode_fp8_record", "decode_nvfp4_record",
    "encode_fp8_record", "encode_nvfp4_record", "rope_rotate",
]
