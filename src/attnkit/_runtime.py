"""Where Triton kernels can run here, and the errors that say why not."""

from __future__ import annotations

import os

import torch


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def check_device(name: str, t: torch.Tensor) -> None:
    """A tensor handed to a Triton kernel must be on a CUDA device, or on the CPU under the interpreter."""
    if t.device.type == "cuda":
        return
    if t.device.type == "cpu" and interpreting():
        return
    raise ValueError(f"{name} is on {t.device}; attnkit kernels run on CUDA devices "
                     f"(or on the CPU with TRITON_INTERPRET=1 set before attnkit is imported)")


def require(cond: bool, name: str, msg: str) -> None:
    if not cond:
        raise ValueError(f"{name}: {msg}")
