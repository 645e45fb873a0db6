"""Launch rules of mqa_decode, as data. Evidence: none measured on a GPU yet (the head-padded kernel has
only run in Triton's interpreter); the tiles are starting points for the sweep."""

from __future__ import annotations

from dataclasses import dataclass

SPLIT_TARGET_CTAS_PER_SM = 2


@dataclass(frozen=True)
class HeadpadPlan:
    block_h: int  # heads on M, padded to 64
    block_n: int  # slots per tile
    dc: int  # dims per chunk of the score product
    out_dc: int  # output dims per program
    num_splits: int
    slots_per_split: int
    num_warps: int


def headpad_plan(T: int, H: int, n_slots: int, sm_count: int, num_splits: int | None, device_type: str) -> HeadpadPlan:
    block_n = 32
    tiles = max(1, -(-n_slots // block_n))
    programs = T * (-(-H // 64)) * 4
    if num_splits is None:
        num_splits = max(1, min(tiles, -(-(SPLIT_TARGET_CTAS_PER_SM * sm_count) // programs)))
    per = -(-tiles // num_splits)
    return HeadpadPlan(block_h=64, block_n=block_n, dc=64, out_dc=128, num_splits=-(-tiles // per),
                       slots_per_split=per * block_n, num_warps=8 if device_type == "cuda" else 4)


SWAPAB_HEADS = (16, 32)
# The largest T at which swap-AB beats head-padded for both head counts and both formats: not measured
# yet, so the automatic dispatch sends nothing to swap-AB (kernel="swapab" selects it explicitly).
SWAPAB_T_CUTOFF: int | None = None


def use_swapab(T: int, H: int, cutoff: int | None = SWAPAB_T_CUTOFF) -> bool:
    """The dispatch rule: a pure function of shapes (and the measured cutoff)."""
    return H in SWAPAB_HEADS and cutoff is not None and T <= cutoff


@dataclass(frozen=True)
class SwapabPlan:
    block_n: int  # slots per tile (the MMA's M)
    dc: int
    out_dc: int
    num_splits: int
    slots_per_split: int
    num_warps: int


def swapab_plan(T: int, H: int, n_slots: int, sm_count: int, num_splits: int | None, device_type: str) -> SwapabPlan:
    block_n = 64
    # 128 output dims per program: the sm_90 cubins spill 472 / 2800 bytes per thread (fp8 / nvfp4, H = 16)
    # with all 512, 320 with 256, none with 128 (compile_check; not yet timed)
    out_dc = 128
    tiles = max(1, -(-n_slots // block_n))
    programs = T * (512 // out_dc)  # noqa: E501
    if num_splits is None:
        num_splits = max(1, min(tiles, -(-(SPLIT_TARGET_CTAS_PER_SM * sm_count) // programs)))
    per = -(-tiles // num_splits)
    return SwapabPlan(block_n=block_n, dc=64, out_dc=out_dc, num_splits=-(-tiles // per), slots_per_split=per * block_n,
                      num_warps=8 if device_type == "cuda" else 4)
