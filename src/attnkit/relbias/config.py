"""Launch rules of the relbias kernels, as data: a pure function of shapes and device.

Evidence: none measured yet on a GPU for these kernels; the tiles below are FlashAttention-2's
Hopper defaults for Triton (64 x 64 for D <= 128, 64 x 32 for D = 256, 4 warps, 2 stages), the
starting point to tune from. Each change to this table must cite the artifact that justified it.
"""

from __future__ import annotations

from dataclasses import dataclass

SUPPORTED_HEAD_DIMS = (64, 128, 256)
SUPPORTED_GQA = (1, 2, 4, 8, 16)
BLOCK_SIZES = (16, 32, 64, 128, 256)
MAX_EXTENT = 131072


@dataclass(frozen=True)
class FwdConfig:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int


def fwd_config(head_dim: int, max_seqlen_q: int, device_type: str) -> FwdConfig:
    """Tile shape of the forward kernel. Short query blocks (decode, verify) take BLOCK_M = 16, the
    smallest tile tl.dot accepts, instead of padding one token to 64 rows."""
    bm = 16 if max_seqlen_q <= 16 else 64
    bn = 32 if head_dim == 256 else 64
    if device_type != "cuda":  # the interpreter: smaller tiles run faster on a CPU
        bn = min(bn, 32)
    return FwdConfig(block_m=bm, block_n=bn, num_warps=4, num_stages=2)
