"""The gather-only floor of sparse_int8: a kernel that reads exactly the rows an attention kernel of our structure
reads, and nothing else.

Each program takes one (token, KV head) and a range of its candidates, loads their indices and gathers their key and
value rows (D int8 bytes each; -1 slots skipped), folding the bytes into a checksum so that no load is dead code: no
products, no softmax, no merge. Every (token, KV head) reads its own rows, as the attention kernels do (rows picked
by several tokens are read once per token). Its time is what any kernel of that structure needs at least; bytes
gathered over that time is the rate the memory system delivers to such gathers.

Tile rule (benchmarks/experiments/gather-floor-h200-686bfaa.json, H200, the model prefill cases, one program per
(token, KV head), medians over block_n 32 / 64 / 128 x 4 / 8 warps x 1-4 stages): 128 rows best at 64 candidates x 8
warps (41.9 us), 2048 and 8192 rows at 32 x 4 (563 / 2294 us; 64 x 8 570.6 / 2500); stages within 1 % but for 8
warps x 32 candidates. So 32 x 4 from 1024 (token, KV head) pairs, 64 x 8 below; fewer pairs than 8 programs per SM
(decode) also split their candidates, one tile per program at the fewest.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _xor(a, b):
    return a ^ b


@triton.jit
def gather_floor_kernel(KC, VC, IDX, OUT, N, C, per_split, stride_kh, stride_kc, stride_it, stride_ih,
                        HKV: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr):
    tg = tl.program_id(0)
    s = tl.program_id(1)
    t = tg // HKV
    g = tg % HKV
    offs_d = tl.arange(0, D)
    acc = tl.zeros([BLOCK_N, D], dtype=tl.int32)
    lo = s * per_split
    hi = tl.minimum(lo + per_split, N)
    for n0 in range(lo, hi, BLOCK_N):
        n = n0 + tl.arange(0, BLOCK_N)
        idx = tl.load(IDX + t.to(tl.int64) * stride_it + g * stride_ih + n, mask=n < hi, other=-1)
        ok = (idx >= 0) & (idx < C)
        row = g.to(tl.int64) * stride_kh + tl.where(ok, idx, 0).to(tl.int64) * stride_kc
        k = tl.load(KC + row[:, None] + offs_d[None, :], mask=ok[:, None], other=0)
        v = tl.load(VC + row[:, None] + offs_d[None, :], mask=ok[:, None], other=0)
        acc = acc ^ (k.to(tl.int32) + (v.to(tl.int32) << 8))
    tl.store(OUT + tg.to(tl.int64) * tl.num_programs(1) + s, tl.reduce(tl.reduce(acc, 1, _xor), 0, _xor))


MIN_PROGRAMS_PER_SM = 8
WIDE_PAIRS = 1024


def plan(T: int, hkv: int, n: int, sm_count: int) -> tuple[int, int, int, int]:
    """(block_n, num_warps, splits, candidates per split): the tile rule of the module's docstring."""
    pairs = T * hkv
    block_n, warps = (32, 4) if pairs >= WIDE_PAIRS else (64, 8)
    tiles = max(1, -(-n // block_n))
    splits = max(1, min(tiles, -(-(MIN_PROGRAMS_PER_SM * sm_count) // max(1, pairs))))
    per = -(-tiles // splits) * block_n
    return block_n, warps, -(-n // per) if n else 1, per


def gather_floor(k_cache, v_cache, indices, sm_count: int):
    """Returns run(): one gather-only pass over the candidates' key and value rows (the checksum written to a buffer
    allocated here, [T * Hkv, splits] int32)."""
    import torch
    hkv, C, D = k_cache.shape
    T, N = indices.shape[0], indices.shape[-1]
    if k_cache.stride() != v_cache.stride() or k_cache.stride(-1) != 1:
        raise ValueError("k_cache, v_cache: the gather floor takes caches of one layout with contiguous rows")
    stride_ih = indices.stride(1) if indices.dim() == 3 else 0
    block_n, warps, splits, per = plan(T, hkv, N, sm_count)
    out = torch.empty((T * hkv, splits), dtype=torch.int32, device=k_cache.device)

    def run():
        gather_floor_kernel[(T * hkv, splits)](k_cache, v_cache, indices, out, N, C, per, k_cache.stride(0),
                                                k_cache.stride(1), indices.stride(0), stride_ih, HKV=hkv, D=D,
                                                BLOCK_N=block_n, num_warps=warps, num_stages=2)
        return out
    return run
