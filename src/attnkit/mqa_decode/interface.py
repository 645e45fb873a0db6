"""Host side of mqa_decode: the record writer (attention kernels: not implemented yet).
Records and semantics: docs/mqa_decode.md and attnkit.reference.mqa_decode."""

from __future__ import annotations

import torch

from .._runtime import check_device, require
from ..contract import FP8_RECORD_BYTES, MQA_DIM, MQA_ROPE_DIM, NVFP4_RECORD_BYTES

RECORD_BYTES = {"fp8": FP8_RECORD_BYTES, "nvfp4": NVFP4_RECORD_BYTES}


def mqa_write_records(latent, positions, cos_sin, slots, cache, fmt: str, *, validate: bool = True,
                      _perturb=None) -> None:
    """Quantize bf16 latents [n, 512] (RoPE dims rotated at their positions) into records at slot ids
    ``slots`` [n] (page * page_size + offset; -1 skips a row) of ``cache`` [num_pages, page_size, stride] uint8."""
    require(fmt in RECORD_BYTES, "fmt", f"must be one of {tuple(RECORD_BYTES)}, got {fmt!r}")
    require(isinstance(latent, torch.Tensor) and latent.dim() == 2 and latent.shape[1] == MQA_DIM
            and latent.dtype == torch.bfloat16, "latent", f"must be a bfloat16 [n, {MQA_DIM}] tensor")
    check_device("latent", latent)
    require(latent.stride(1) == 1, "latent", "last dimension must be contiguous")
    n = latent.shape[0]
    dev = latent.device
    require(isinstance(cache, torch.Tensor) and cache.dim() == 3 and cache.dtype == torch.uint8, "cache",
            "must be a uint8 [num_pages, page_size, record_stride] tensor")
    require(cache.device == dev and cache.is_contiguous(), "cache", f"must be contiguous on {dev}")
    stride = cache.shape[2]
    require(stride >= RECORD_BYTES[fmt] and stride % 16 == 0, "cache",
            f"record stride {stride} must be >= {RECORD_BYTES[fmt]} and a multiple of 16")
    for name, t, dts in (("positions", positions, (torch.int32, torch.int64)), ("slots", slots, (torch.int32, torch.int64))):
        require(isinstance(t, torch.Tensor) and t.dim() == 1 and t.numel() == n and t.dtype in dts, name,
                f"must be an int32/int64 [{n}] tensor")
        require(t.device == dev, name, f"must be on {dev}")
    require(isinstance(cos_sin, torch.Tensor) and cos_sin.dim() == 2 and cos_sin.shape[1] == MQA_ROPE_DIM
            and cos_sin.dtype == torch.float32 and cos_sin.is_contiguous() and cos_sin.device == dev, "cos_sin",
            f"must be a contiguous float32 [max_pos, {MQA_ROPE_DIM}] on {dev}")
    if validate and n:
        slots_total = cache.shape[0] * cache.shape[1]
        lo, hi = int(slots.min()), int(slots.max())
        require(lo >= -1 and hi < slots_total, "slots", f"must lie in [-1, {slots_total}), found [{lo}, {hi}]")
        plo, phi = int(positions.min()), int(positions.max())
        require(plo >= 0 and phi < cos_sin.shape[0], "positions", f"must lie in [0, {cos_sin.shape[0]})")
        require(bool(torch.isfinite(latent).all()), "latent", "holds a non-finite value")
        live = slots[slots >= 0]
        require(live.unique().numel() == live.numel(), "slots", "name a slot twice (the write order would decide)")
    if n == 0:
        return
    from .kernel_write import mqa_write_kernel
    mqa_write_kernel[(n,)](latent, positions, cos_sin, slots, cache, latent.stride(0), stride,
                           NVFP4=fmt == "nvfp4", ROPE_OFF=_perturb == "rope-not-applied", enable_fp_fusion=False)
