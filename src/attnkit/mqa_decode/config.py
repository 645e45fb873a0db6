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
