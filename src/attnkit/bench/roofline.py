"""Physical floors: the fewest bytes and FLOPs a case needs, over ceilings measured on this GPU.

``measure_ceilings()`` times a large device-to-device copy (bytes read + written) and an
8192^3 bf16 matrix product on random data; each case's floor is ``max(bytes / copy_bw,
flops / matmul_rate)`` and every benchmark row shows its percentage of that floor.
"""

from __future__ import annotations

import torch

from ..contract import FP8_RECORD_BYTES, MQA_DIM, NVFP4_RECORD_BYTES
from ..testing.shapes import Case


def measure_ceilings(copy_bytes: int = 2 << 30, n: int = 8192, iters: int = 10) -> dict:
    dev = "cuda"
    x = torch.randn(copy_bytes // 4, device=dev)
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    s.record()
    for _ in range(iters):
        y.copy_(x)
    e.record()
    torch.cuda.synchronize()
    copy_bw = 2 * x.numel() * 4 * iters / (s.elapsed_time(e) * 1e-3)
    del x, y
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    s.record()
    for _ in range(iters):
        a @ b
    e.record()
    torch.cuda.synchronize()
    rate = 2 * n ** 3 * iters / (s.elapsed_time(e) * 1e-3)
    return {"copy_bytes_per_s": copy_bw, "bf16_matmul_flops_per_s": rate,
            "ceiling_method": f"copy of {copy_bytes >> 20} MiB fp32 (read+write) and {n}^3 bf16 matmul on random data, "
                              f"mean of {iters} after 3 warm-ups"}


def _visible_pairs(lq: int, lk: int, window) -> tuple[int, int]:
    """(visible (query, key) pairs, keys visible to at least one query) of one sequence."""
    pos = torch.arange(lk - lq, lk, dtype=torch.int64)
    pos = pos[pos >= 0]
    if pos.numel() == 0:
        return 0, 0
    cnt = pos + 1 if window is None else torch.clamp(pos + 1, max=window)
    first = 0 if window is None else max(0, int(pos[0]) - window + 1)
    return int(cnt.sum()), int(pos[-1]) + 1 - first


def relbias_work(case: Case) -> tuple[int, int]:
    p = case.params
    esz = 2
    kv_esz = 1 if p["kv"] == "fp8" else 2
    Hq, Hkv, D, E = p["Hq"], p["Hkv"], p["D"], p["E"]
    pairs = keys = maxdist = 0
    for lq, lk in zip(p["seqlens_q"], p["seqlens_k"]):
        a, b = _visible_pairs(lq, lk, p["window"])
        pairs += a
        keys += b
        maxdist = max(maxdist, lk if p["window"] is None else min(lk, p["window"]))
    tq = sum(p["seqlens_q"])
    nbytes = 2 * tq * Hq * D * esz + 2 * keys * Hkv * D * kv_esz + Hq * min(E, maxdist) * 4
    flops = 4 * pairs * Hq * D
    return nbytes, flops


def sparse_int8_work(case: Case) -> tuple[int, int]:
    p = case.params
    T, Hq, Hkv, D, N = p["T"], p["Hq"], p["Hkv"], p["D"], p["N"]
    valid = round(N * (1 - p["invalid"]))
    # each distinct selected cache row is read once: the expected number of distinct rows among T * valid
    # uniform draws from C (rows shared by many queries, as in prefill, come from L2 after the first read)
    C = p["C"]
    distinct = C * (1.0 - (1.0 - 1.0 / C) ** (T * valid)) if C else 0.0
    nbytes = int(2 * T * Hq * D * 2 + 2 * Hkv * distinct * D + 2 * Hkv * D * 4 + T * N * 4)
    return nbytes, 4 * T * Hq * valid * D


def mqa_decode_work(case: Case) -> tuple[int, int]:
    p = case.params
    T, H, W, K = p["T"], p["H"], p["W"], p["K"]
    rec = NVFP4_RECORD_BYTES if p["fmt"] == "nvfp4" else FP8_RECORD_BYTES
    slots = (W * FP8_RECORD_BYTES + K * rec) * (1 - p["partial"])
    nbytes = T * (int(slots) + 2 * H * MQA_DIM * 2 + (W + K) * 4)
    return nbytes, 4 * T * H * (W + K) * MQA_DIM


WORK = {"relbias": relbias_work, "sparse_int8": sparse_int8_work, "mqa_decode": mqa_decode_work}


def floor_us(case: Case, ceilings: dict) -> dict:
    nbytes, flops = WORK[case.family](case)
    t_bytes = nbytes / ceilings["copy_bytes_per_s"] * 1e6
    t_flops = flops / ceilings["bf16_matmul_flops_per_s"] * 1e6
    return {"bytes": nbytes, "flops": flops, "byte_floor_us": t_bytes, "flop_floor_us": t_flops,
            "floor_us": max(t_bytes, t_flops), "floor_bound": "bytes" if t_bytes >= t_flops else "flops"}
