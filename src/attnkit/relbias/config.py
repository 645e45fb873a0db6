"""Launch rules of the relbias kernels, as data: a pure function of shapes and device.

Evidence: none measured yet on a GPU for these kernels; the tiles below are FlashAttention-2's
Hopper defaults for Triton (64 x 64 for D <= 128, 64 x 32 for D = 256, 4 warps, 2 stages), the
starting point to tune from. Each change to this table must cite the artifact that justified it.
"""

from __future__ import annotations

from dataclasses import dataclass

SUPPORTED_HEAD_DIMS = (64, 128, 256)
SUPPORTED_GQA = (1, 2, 4, 8, 16)  # gated; any integer ratio Hq / Hkv is accepted (3 is gated in the smoke tier)
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


DECODE_MAX_Q = 16  # query tokens per sequence up to which the split-K decode kernel serves
DECODE_MAX_ROWS = 128  # packed rows (tokens x query heads per KV head) of one decode tile
SPLIT_TARGET_CTAS_PER_SM = 2  # split rule: about two resident CTAs per SM (one wave); not yet swept


@dataclass(frozen=True)
class DecodePlan:
    block_r: int
    block_n: int
    num_splits: int
    keys_per_split: int
    num_warps: int
    num_stages: int


def use_decode(max_seqlen_q: int, group: int) -> bool:
    """Decode / verify shapes go to the split-K decode kernel, the rest to the forward kernel."""
    return max_seqlen_q <= DECODE_MAX_Q and max_seqlen_q * group <= DECODE_MAX_ROWS


def decode_plan(batch: int, hkv: int, group: int, head_dim: int, max_seqlen_q: int, max_seqlen_k: int,
                sm_count: int, device_type: str, num_splits: int | None = None) -> DecodePlan:
    """Split plan of the decode kernel: a pure function of shapes and device, computed on the host
    (outside any CUDA graph). ``num_splits`` overrides the rule."""
    rows = max(16, 1 << (max(1, max_seqlen_q * group) - 1).bit_length())
    bn = 32 if (head_dim == 256 or device_type != "cuda") else 64
    tiles = max(1, -(-max_seqlen_k // bn))
    if num_splits is None:
        want = -(-(SPLIT_TARGET_CTAS_PER_SM * sm_count) // max(1, batch * hkv))
        num_splits = max(1, min(want, tiles))
    tiles_per_split = -(-tiles // num_splits)
    return DecodePlan(block_r=rows, block_n=bn, num_splits=num_splits, keys_per_split=tiles_per_split * bn,
                      num_warps=4, num_stages=2)
