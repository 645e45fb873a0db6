"""attnkit: Triton attention kernels for LLM serving.

Families: ``sparse_int8`` (top-k sparse attention over an INT8 KV cache), ``mqa_decode``
(small-head decode over packed FP8 / NVFP4 records) and ``relbias`` (attention with a learned
relative-position bias table). ``attnkit.reference`` holds their fp64 oracles.
"""

__version__ = "0.1.0"
FAMILIES = ("sparse_int8", "mqa_decode", "relbias")


def set_call_cache(on):
    """Keep each op's layout-dependent decisions per argument layout (True), or decide them on every call (False);
    None: back to ``ATTNKIT_CALL_CACHE`` (default on). See attnkit._callcache."""
    from ._callcache import set_call_cache as _set
    _set(on)


def clear_call_cache():
    """Forget every kept decision (after patching a rule, a kernel or a module constant). See attnkit._callcache."""
    from ._callcache import clear
    clear()
