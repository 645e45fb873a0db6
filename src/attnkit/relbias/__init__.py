"""relbias: attention with a learned relative-position bias table. See docs/relbias.md."""

from .interface import relbias_attention, relbias_write_kv

__all__ = ["relbias_attention", "relbias_write_kv"]
