"""Launch rules of mqa_decode, as data, with the measurements that chose them (sweeps under
benchmarks/sweeps/)."""

from __future__ import annotations

from dataclasses import dataclass

from ..options import IntOption

SPLIT_TARGET_CTAS_PER_SM = 2
# 512: on the H200 (benchmarks/sweeps/mqa-headpad-dc{128,512}-h200-421a469.json against the 256 of the same
# commit's bench) 16 heads x 1 / 16 tokens fp8, 32 x 16 nvfp4, 64 x 64 fp8: 20.7 / 81.4 / 84.6 / 248.7 us at
# 128, 24.0 / 53.0 / 56.3 / 163.8 at 512; 256 lay between (23 / 58 / 60 / 168)
HEADPAD_OUT_DC = IntOption("out_dc", "ATTNKIT_MQA_HEADPAD_OUT_DC", 512, 128, 512,
                           "output dims per head-padded program (128, 256 or 512)")
DIAG_ABLATE = IntOption("_ablate", "ATTNKIT_DIAG_MQA_ABLATE", 0, 0, 4,
                        "diagnostics only, wrong results: the swap-AB kernel with one stage left out, for timing "
                        "where its time goes (1: no record loads, 2: no dequantization, 3: no value product, "
                        "4: no score product)")
SWAPAB_WARPS = IntOption("num_warps", "ATTNKIT_MQA_SWAPAB_WARPS", 8, 4, 8, "warps per swap-AB program (4 or 8)")
SWAPAB_BLOCK_N = IntOption("block_n", "ATTNKIT_MQA_SWAPAB_BLOCK_N", 32, 32, 64,
                           "slots per swap-AB tile (32 or 64)")


@dataclass(frozen=True)
class HeadpadPlan:
    block_h: int  # heads on M, padded to 64
    block_n: int  # slots per tile
    out_dc: int  # output dims per program (the scores are recomputed 512 / out_dc times)
    num_splits: int
    slots_per_split: int
    num_warps: int


def _splits(T: int, programs_per_split: int, tiles: int, sm_count: int, num_splits: int | None) -> tuple[int, int]:
    """(splits, tiles per split): enough splits to put SPLIT_TARGET_CTAS_PER_SM programs on every SM, never
    more than there are tiles; an explicit num_splits overrides the rule."""
    if num_splits is None:
        num_splits = -(-(SPLIT_TARGET_CTAS_PER_SM * sm_count) // max(1, T * programs_per_split))
    num_splits = max(1, min(tiles, num_splits))
    per = -(-tiles // num_splits)
    return -(-tiles // per), per


def headpad_plan(T: int, H: int, n_slots: int, sm_count: int, num_splits: int | None, device_type: str,
                 out_dc: int | None = None) -> HeadpadPlan:
    block_n = 32
    out_dc = HEADPAD_OUT_DC.resolve(out_dc)
    if out_dc not in (128, 256, 512):
        raise ValueError(f"out_dc: must be 128, 256 or 512, got {out_dc}")
    tiles = max(1, -(-n_slots // block_n))
    splits, per = _splits(T, -(-H // 64) * (512 // out_dc), tiles, sm_count, num_splits)
    return HeadpadPlan(block_h=64, block_n=block_n, out_dc=out_dc, num_splits=splits, slots_per_split=per * block_n,
                       num_warps=8 if device_type == "cuda" else 4)


SWAPAB_HEADS = (16, 32)
# The largest T at which swap-AB beats head-padded for both head counts and both formats. Measured on the H200
# at e3c66a8 (benchmarks/results/mqa_decode-h200-2026-11-30.json): head-padded / swap-AB paired ratios 0.74 to
# 0.95 at every H in {16, 32}, T in 1 .. 64 and both formats, i.e. swap-AB never wins, so there is no cutoff
# and the dispatch sends nothing to it (kernel="swapab" still selects it). At 421a469 (before the e4m3 bit
# decode and the 512-dim head-padded programs) it had won for fp8 by 1.1 to 1.7x and lost for nvfp4 at 32 heads.
SWAPAB_T_CUTOFF: int | None = None


def use_swapab(T: int, H: int, cutoff: int | None = SWAPAB_T_CUTOFF) -> bool:
    """The dispatch rule: a pure function of shapes (and the measured cutoff)."""
    return H in SWAPAB_HEADS and cutoff is not None and T <= cutoff


@dataclass(frozen=True)
class SwapabPlan:
    block_n: int  # slots per tile (the MMA's M)
    num_splits: int
    slots_per_split: int
    num_warps: int


def swapab_plan(T: int, H: int, n_slots: int, sm_count: int, num_splits: int | None, device_type: str,
                block_n: int | None = None) -> SwapabPlan:
    """Tiles of 32 slots by default: with 64 the sm_90 cubins spill 1.6 KB (fp8) / 3 KB (nvfp4) per thread, with
    32 none (fp8) / 0.9 KB (nvfp4) (compile_check)."""
    block_n = SWAPAB_BLOCK_N.resolve(block_n)
    if block_n not in (32, 64):
        raise ValueError(f"block_n: must be 32 or 64, got {block_n}")
    tiles = max(1, -(-n_slots // block_n))
    splits, per = _splits(T, 1, tiles, sm_count, num_splits)
    warps = SWAPAB_WARPS.resolve()
    if warps not in (4, 8):
        raise ValueError(f"num_warps: must be 4 or 8, got {warps}")
    return SwapabPlan(block_n=block_n, num_splits=splits, slots_per_split=per * block_n,
                      num_warps=warps if device_type == "cuda" else 4)
