"""sparse_int8: top-k sparse attention over an INT8 KV cache. See docs/sparse_int8.md."""

from .interface import sparse_int8_attention

__all__ = ["sparse_int8_attention"]
