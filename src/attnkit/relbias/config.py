"""Launch rules of the relbias kernels, as data: a pure function of shapes and device.

Evidence so far:
- Timing (H200): the first artifacts (`benchmarks/results/relbias-h200-2026-11-29-fwd.json`,
  `-decode.json`) ran 64 x 64 tiles (64 x 32 for D = 256) with 4 warps and 2 stages.
- Registers (sm_90 cubins from `python -m attnkit.testing.compile_check`, ptxas, no GPU): with 4 warps the
  forward kernel spills 968 bytes per thread at D = 128 (the bias tile's addresses and masks are live
  next to the accumulator) and the paged fp8 decode kernel 1248; with 8 warps 24 and 0. So 8 warps
  from D = 128 up; predicted to help the prefill rows most (they ran at 21% of the FLOP floor),
  not yet timed. Left for the timed sweep: the paged forward kernel at D = 128 still spills 272 bytes
  (0 with BLOCK_N = 32), and D = 256 864 (232 with BLOCK_M = 32); each further change to this table
  must cite the artifact that justified it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..options import IntOption, Switch

SUPPORTED_HEAD_DIMS = (64, 128, 256)
SUPPORTED_GQA = (1, 2, 4, 8, 16)  # gated; any integer ratio Hq / Hkv is accepted (3 is gated in the smoke tier)
BLOCK_SIZES = (16, 32, 64, 128, 256)
MAX_EXTENT = 131072

FAST_INTERIOR = Switch("fast_interior", "ATTNKIT_RELBIAS_FAST_INTERIOR", False,
                       "forward kernel: interior tiles (all keys visible, distances inside or beyond the table) "
                       "skip the masks and the clamp; off until timed")

HEAVY_FIRST = Switch("heavy_first", "ATTNKIT_RELBIAS_HEAVY_FIRST", False,
                     "forward kernel: each sequence's last query blocks (the most keys under a causal mask) are "
                     "launched first; off until timed")
BLOCK_M_OPT = IntOption("block_m", "ATTNKIT_RELBIAS_BLOCK_M", None, 16, 128,
                        "forward kernel: query rows per tile (16, 32, 64 or 128); default: the rule")
BLOCK_N_OPT = IntOption("block_n", "ATTNKIT_RELBIAS_BLOCK_N", None, 16, 128,
                        "keys per tile of the kernel that runs (16, 32, 64 or 128); default: the rule")
WARPS_OPT = IntOption("num_warps", "ATTNKIT_RELBIAS_WARPS", None, 4, 8,
                      "warps per program of the kernel that runs (4 or 8); default: the rule")
STAGES_OPT = IntOption("num_stages", "ATTNKIT_RELBIAS_STAGES", None, 1, 5,
                       "software-pipeline stages of the kernel that runs (1 to 5); default: the rule")
CTAS_OPT = IntOption("ctas_per_sm", "ATTNKIT_RELBIAS_CTAS_PER_SM", None, 1, 16,
                     "decode split rule: programs per SM the splits aim for; default: SPLIT_TARGET_CTAS_PER_SM")


def _pow2(name: str, v: int | None, allowed) -> int | None:
    if v is not None and v not in allowed:
        raise ValueError(f"{name}: must be one of {tuple(allowed)}, got {v}")
    return v


@dataclass(frozen=True)
class FwdConfig:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int


def fwd_config(head_dim: int, max_seqlen_q: int, device_type: str, block_m: int | None = None,
               block_n: int | None = None, num_warps: int | None = None, num_stages: int | None = None) -> FwdConfig:
    """Tile shape of the forward kernel. Short query blocks (decode, verify) take BLOCK_M = 16, the
    smallest tile tl.dot accepts, instead of padding one token to 64 rows. Explicit values (the options)
    beat the rule."""
    bm = _pow2("block_m", block_m, (16, 32, 64, 128)) or (16 if max_seqlen_q <= 16 else 64)
    bn = _pow2("block_n", block_n, (16, 32, 64, 128))
    if bn is None:
        bn = 32 if head_dim == 256 else 64
        if device_type != "cuda":  # the interpreter: smaller tiles run faster on a CPU
            bn = min(bn, 32)
    w = _pow2("num_warps", num_warps, (4, 8)) or (8 if head_dim >= 128 else 4)
    return FwdConfig(block_m=bm, block_n=bn, num_warps=w, num_stages=num_stages or 2)


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
                sm_count: int, device_type: str, num_splits: int | None = None, block_n: int | None = None,
                num_warps: int | None = None, num_stages: int | None = None,
                ctas_per_sm: int | None = None) -> DecodePlan:
    """Split plan of the decode kernel: a pure function of shapes and device, computed on the host
    (outside any CUDA graph). ``num_splits`` overrides the rule; explicit tile values (the options) beat it."""
    rows = max(16, 1 << (max(1, max_seqlen_q * group) - 1).bit_length())
    bn = _pow2("block_n", block_n, (16, 32, 64, 128)) or (32 if (head_dim == 256 or device_type != "cuda") else 64)
    tiles = max(1, -(-max_seqlen_k // bn))
    if num_splits is None:
        want = -(-((ctas_per_sm or SPLIT_TARGET_CTAS_PER_SM) * sm_count) // max(1, batch * hkv))
        num_splits = max(1, min(want, tiles))
    tiles_per_split = -(-tiles // num_splits)
    w = _pow2("num_warps", num_warps, (4, 8)) or (8 if head_dim >= 128 else 4)
    return DecodePlan(block_r=rows, block_n=bn, num_splits=num_splits, keys_per_split=tiles_per_split * bn,
                      num_warps=w, num_stages=num_stages or 2)
