"""relbias: attention with a learned relative-position bias table. See docs/relbias.md."""

from .interface import relbias_attention

__all__ = ["relbias_attention"]
