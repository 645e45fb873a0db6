"""attnkit: Triton attention kernels for LLM serving.

Families: ``sparse_int8`` (top-k sparse attention over an INT8 KV cache), ``mqa_decode``
(small-head decode over packed FP8 / NVFP4 records) and ``relbias`` (attention with a learned
relative-position bias table). ``attnkit.reference`` holds their fp64 oracles.
"""

__version__ = "0.1.0"
FAMILIES = ("sparse_int8", "mqa_decode", "relbias")
