"""Shared test machinery: named shape families, seeded inputs, oracles adapters, baselines, the
compare rule, and the custom-op checker."""

from . import shapes
from .compare import FACTOR, Comparison, compare, error_stats, nan_rows, poison_, unwritten
from .inputs import make_inputs

__all__ = ["shapes", "compare", "Comparison", "FACTOR", "error_stats", "nan_rows", "poison_", "unwritten", "make_inputs"]
