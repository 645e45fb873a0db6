"""Seeded input builders shared by tests, gates and benchmarks.

Everything is drawn from a CPU ``torch.Generator`` seeded explicitly, then moved to the target
device, so a case id and a seed reproduce the same bytes on any machine. Never zeros: every builder
draws random data, and memory a kernel must not read (paged blocks past ``seqused_k``, unused pages,
record padding) is filled with NaN or garbage so that reading it shows.
"""

from __future__ import annotations

import math
import zlib

import torch

from ..contract import EMPTY_SLOT, E4M3_MAX
from ..reference.mqa_decode import RECORD_FORMATS, mqa_write_ref, pow2_block_exponent
from .shapes import Case

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def generator(seed: int, device="cpu") -> torch.Generator:
    """A seeded generator on ``device`` (large inputs are drawn where they will live)."""
    return torch.Generator(device=torch.device(device)).manual_seed(int(seed) & 0x7FFFFFFFFFFFFFFF)


def case_seed(case: Case, seed: int = 0) -> int:
    """A per-case seed: the run's seed mixed with a stable hash of the case id."""
    return (zlib.crc32(case.id.encode()) * 1000003 + int(seed)) & 0x7FFFFFFF


def randn(shape, gen, std=1.0, dtype=torch.float32):
    return (torch.randn(shape, generator=gen, device=gen.device) * std).to(dtype)


def cu_seqlens(lengths, device="cpu") -> torch.Tensor:
    out = [0]
    for n in lengths:
        out.append(out[-1] + int(n))
    return torch.tensor(out, dtype=torch.int32, device=device)


# ------------------------------------------------------------------------------------- quantizers


def int8_per_channel_quantize(x: torch.Tensor):
    """x [H, C, D] float -> (codes int8 [H, C, D], scale fp32 [H, D]) with x ~= codes * scale."""
    amax = x.abs().amax(dim=1).clamp(min=1e-12)
    scale = (amax / 127.0).float()
    codes = torch.round(x / scale.unsqueeze(1)).clamp(-127, 127).to(torch.int8)
    return codes, scale


def fp8_e4m3_quantize(x: torch.Tensor, head_dim_axis: int = -2):
    """Per-KV-head fp8 e4m3: x [..., Hkv, D] -> (codes float8_e4m3fn, scale fp32 [Hkv])."""
    dims = [d for d in range(x.dim()) if d != (head_dim_axis % x.dim())]
    amax = x.float().abs().amax(dim=dims).clamp(min=1e-12)
    scale = amax / E4M3_MAX
    shape = [1] * x.dim()
    shape[head_dim_axis] = -1
    codes = (x.float() / scale.view(shape)).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return codes, scale.float()


def ue8m0_block_scales(x: torch.Tensor, block: int, vmax: float = E4M3_MAX) -> torch.Tensor:
    """UE8M0 byte per block of the last axis: the smallest 2^e with amax / 2^e <= vmax."""
    xb = x.float().reshape(*x.shape[:-1], -1, block)
    return (pow2_block_exponent(xb.abs().amax(-1), vmax) + 127).to(torch.uint8)


def nvfp4_quantize(x: torch.Tensor) -> torch.Tensor:
    """[..., 512] -> nvfp4 records [..., 288] (e2m1 pairs + e4m3 block scales)."""
    return RECORD_FORMATS["nvfp4"][1](x)


def topk_indices(T: int, N: int, C: int, gen, invalid: float = 0.1, Hkv: int | None = None, device="cpu"):
    """Random candidates in [0, C) with duplicates allowed, a fraction ``invalid`` set to -1."""
    shape = (T, N) if Hkv is None else (T, Hkv, N)
    idx = torch.randint(0, max(C, 1), shape, generator=gen, device=gen.device, dtype=torch.int64)
    if invalid > 0 and idx.numel():
        drop = torch.rand(shape, generator=gen, device=gen.device) < invalid
        idx = torch.where(drop, torch.full_like(idx, EMPTY_SLOT), idx)
    return idx.to(torch.int32).to(device)


def paged_cache(k: torch.Tensor, v: torch.Tensor, seqlens_k, block_size: int, gen, spare_blocks: int = 3):
    """Scatter contiguous varlen k, v [total_k, Hkv, D] into a paged cache with a shuffled block table.

    Slots no sequence owns (block tails past seqused_k, spare blocks) hold NaN (float caches) or the
    fp8 NaN code, so a kernel that reads them produces NaN.
    """
    nblk = [-(-int(n) // block_size) for n in seqlens_k]
    total_blocks = sum(nblk) + spare_blocks
    cpu_gen = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen, device=gen.device)))
    perm = torch.randperm(total_blocks, generator=cpu_gen)
    shape = (total_blocks, block_size) + tuple(k.shape[1:])
    dev = k.device
    if k.dtype == torch.float8_e4m3fn:
        k_cache = torch.full(shape, 0x7F, dtype=torch.uint8, device=dev).view(torch.float8_e4m3fn)
        v_cache = k_cache.clone()
    else:
        k_cache = torch.full(shape, float("nan"), dtype=k.dtype, device=dev)
        v_cache = torch.full(shape, float("nan"), dtype=v.dtype, device=dev)
    max_blocks = max(nblk) if nblk else 1
    table = torch.zeros(len(nblk), max(max_blocks, 1), dtype=torch.int32)
    used = 0
    start = 0
    kf, vf = k.view(torch.uint8) if k.dtype == torch.float8_e4m3fn else k, v.view(torch.uint8) if v.dtype == torch.float8_e4m3fn else v
    kcf = k_cache.view(torch.uint8) if k.dtype == torch.float8_e4m3fn else k_cache
    vcf = v_cache.view(torch.uint8) if v.dtype == torch.float8_e4m3fn else v_cache
    for b, n in enumerate(seqlens_k):
        n = int(n)
        full = n // block_size
        blocks = perm[used:used + nblk[b]]
        table[b, :nblk[b]] = blocks.to(torch.int32)
        used += nblk[b]
        if full:
            bidx = blocks[:full].to(dev)
            kcf[bidx] = kf[start:start + full * block_size].reshape(full, block_size, *k.shape[1:])
            vcf[bidx] = vf[start:start + full * block_size].reshape(full, block_size, *v.shape[1:])
        rest = n - full * block_size
        if rest:
            blk = int(blocks[full])
            kcf[blk, :rest] = kf[start + full * block_size:start + n]
            vcf[blk, :rest] = vf[start + full * block_size:start + n]
        # entries past the sequence's blocks point at a spare block (never to be read)
        table[b, nblk[b]:] = int(perm[-1])
        start += n
    seqused = torch.tensor([int(n) for n in seqlens_k], dtype=torch.int32)
    return k_cache, v_cache, table.to(dev), seqused.to(dev)


def distinct_window_slots(swa_idx: torch.Tensor) -> torch.Tensor:
    """Per token (row of swa_idx) a valid slot of its own window list, no two tokens the same: where a step's writer
    can put each token's new record so that the attention reads it (int64 [T], on swa_idx's device)."""
    slots, seen = [], set()
    for row in swa_idx.tolist():
        slots.append(next(x for x in row if x >= 0 and x not in seen))
        seen.add(slots[-1])
    return torch.tensor(slots, dtype=torch.long, device=swa_idx.device)


def rope_cos_sin(max_pos: int, rope_dim: int = 64, theta: float = 10000.0) -> torch.Tensor:
    """[max_pos, rope_dim] fp32: rope_dim/2 cos then rope_dim/2 sin."""
    half = rope_dim // 2
    inv = 1.0 / (theta ** (torch.arange(half, dtype=torch.float64) * 2 / rope_dim))
    ang = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cat([torch.cos(ang), torch.sin(ang)], dim=1).float()


# ------------------------------------------------------------------------------------- per family


def make_relbias(case: Case, device="cpu", seed: int = 0) -> dict:
    p = case.params
    gen = generator(case_seed(case, seed), device)
    dt = DTYPES[p["dtype"]]
    tq, tk = sum(p["seqlens_q"]), sum(p["seqlens_k"])
    Hq, Hkv, D, E = p["Hq"], p["Hkv"], p["D"], p["E"]
    q = randn((tq, Hq, D), gen, dtype=dt)
    k = randn((tk, Hkv, D), gen, dtype=dt)
    v = randn((tk, Hkv, D), gen, dtype=dt)
    table = randn((Hq, E), gen, std=1.0)
    out = dict(q=q, table=table, cu_seqlens_q=cu_seqlens(p["seqlens_q"]), window=p["window"], beyond=p["beyond"],
               softmax_scale=1.0 / math.sqrt(D), k_scale=None, v_scale=None)
    if p["kv"] == "fp8":
        k, out["k_scale"] = fp8_e4m3_quantize(k.float() * 3.0)
        v, out["v_scale"] = fp8_e4m3_quantize(v.float() * 0.5)
    if p["block_size"]:
        kc, vc, bt, su = paged_cache(k, v, p["seqlens_k"], p["block_size"], gen)
        out.update(k_cache=kc, v_cache=vc, block_table=bt, seqused_k=su)
    out.update(k=k, v=v, cu_seqlens_k=cu_seqlens(p["seqlens_k"]))
    return {n: (t.to(device) if isinstance(t, torch.Tensor) else t) for n, t in out.items()}  # no-op but cu_seqlens


def make_sparse_int8(case: Case, device="cpu", seed: int = 0) -> dict:
    p = case.params
    gen = generator(case_seed(case, seed), device)
    T, Hq, Hkv, D, C, N = p["T"], p["Hq"], p["Hkv"], p["D"], p["C"], p["N"]
    q_std = (1.4 if p.get("model") else 1.0) * p.get("q_mult", 1.0)
    q = randn((T, Hq, D), gen, std=q_std, dtype=torch.bfloat16)

    def cache():
        codes = torch.round(torch.randn((Hkv, C, D), generator=gen, device=gen.device) * 40).clamp(-127, 127).to(torch.int8)
        if p["strided"]:  # a slice of a larger cache: every other head, offset rows, padded rows
            big = torch.randint(-128, 127, (2 * Hkv, C + 5, D + 16), generator=gen, device=gen.device, dtype=torch.int8)
            big[0::2, 5:, :D] = codes
            return big[0::2, 5:, :D]
        return codes

    k_cache, v_cache = cache(), cache()
    if p.get("cache_dtype") == "bf16":  # the same codes held in a bf16 cache (exact)
        k_cache, v_cache = k_cache.to(torch.bfloat16), v_cache.to(torch.bfloat16)
    # Model cases: scales up to 0.285 (ONNX Runtime's model data). Other cases: key scales that give
    # logits of standard deviation ~1, so that every candidate carries weight and a skipped one shows.
    hi = 0.285
    k_hi = hi if p.get("model") else 0.4 / math.sqrt(D)
    key_scale = (torch.rand((Hkv, D), generator=gen, device=gen.device) * (k_hi - 0.001) + 0.001).float()
    value_scale = (torch.rand((Hkv, D), generator=gen, device=gen.device) * (hi - 0.01) + 0.01).float()
    if p.get("vs_exp"):  # extreme value scales (exact powers of two apart from the random mantissa)
        value_scale = value_scale * 2.0 ** p["vs_exp"]
    if p.get("ks_sign"):  # negative key scales are legal
        key_scale = key_scale * torch.where(torch.rand((Hkv, D), generator=gen, device=gen.device) < 0.5, -1.0, 1.0)
    idx = topk_indices(T, N, C, gen, invalid=p["invalid"], Hkv=Hkv if p["layout"] == "per_head" else None)
    out = dict(q=q, k_cache=k_cache, v_cache=v_cache, key_scale=key_scale, value_scale=value_scale, indices=idx,
               scale=p.get("scale", 1.0 / math.sqrt(D)))
    return {n: (t.to(device) if isinstance(t, torch.Tensor) else t) for n, t in out.items()}  # no-op but cu_seqlens


def _record_stride(size: int) -> int:
    return (size + 15) // 16 * 16 + 16  # 16-byte aligned and larger than the record


def make_mqa_decode(case: Case, device="cpu", seed: int = 0) -> dict:
    p = case.params
    gen = generator(case_seed(case, seed), device)
    T, H, H_pad, fmt, ps, W, K = p["T"], p["H"], p["H_pad"], p["fmt"], p["page_size"], p["W"], p["K"]
    max_pos = 8192

    def make_cache(n_slots, rec_fmt):
        size = RECORD_FORMATS[rec_fmt][0]
        pages = -(-n_slots // ps) + 1
        stride = _record_stride(size)
        cache = torch.randint(0, 256, (pages, ps, stride), generator=gen, device=gen.device, dtype=torch.uint8)  # garbage padding
        lat = torch.randn((pages * ps, 512), generator=gen, device=gen.device).to(torch.bfloat16)
        pos = torch.randint(0, max_pos, (pages * ps,), generator=gen, device=gen.device)
        cache.view(-1, stride)[:, :size] = mqa_write_ref(lat, pos, cos_sin.to(lat.device), rec_fmt)
        return cache

    cos_sin = rope_cos_sin(max_pos).to(device)
    swa_slots = max(W * 2, ps)
    comp_slots = max(K * 4, ps)
    swa_cache = make_cache(swa_slots, "fp8")
    comp_cache = make_cache(comp_slots, fmt)

    def idx_list(n, space):
        rows = [torch.randperm(space, generator=gen, device=gen.device)[:n] for _ in range(T)]
        idx = torch.stack(rows).to(torch.int32)
        if p["partial"] > 0:
            drop = torch.rand(idx.shape, generator=gen, device=gen.device) < p["partial"]
            idx = torch.where(drop, torch.full_like(idx, EMPTY_SLOT), idx)
        return idx

    out = dict(q=randn((T, H_pad, 512), gen, dtype=torch.bfloat16), swa_cache=swa_cache, comp_cache=comp_cache,
               swa_idx=idx_list(W, swa_slots), comp_idx=idx_list(K, comp_slots),
               positions=torch.randint(0, max_pos, (T,), generator=gen, device=gen.device), cos_sin=cos_sin,
               sink=randn((H,), gen), num_heads=H, softmax_scale=512 ** -0.5, comp_format=fmt)
    return {n: (t.to(device) if isinstance(t, torch.Tensor) else t) for n, t in out.items()}  # no-op but cu_seqlens


def make_merge(case: Case, device="cpu", seed: int = 0) -> dict:
    p = case.params
    gen = generator(case_seed(case, seed), device)
    S, R, D = p["S"], p["rows"], p["D"]
    m = torch.randn((S, R), generator=gen, device=gen.device) * 3
    l = torch.rand((S, R), generator=gen, device=gen.device) * 50 + 1
    acc = torch.randn((S, R, D), generator=gen, device=gen.device) * l.unsqueeze(-1)
    empty = torch.rand((S, R), generator=gen, device=gen.device) < p["empty"]
    empty[:, : p["all_empty_rows"]] = True
    m = torch.where(empty, torch.full_like(m, float("-inf")), m)
    l = torch.where(empty, torch.zeros_like(l), l)
    acc = torch.where(empty.unsqueeze(-1), torch.zeros_like(acc), acc)
    return dict(m=m.to(device), l=l.to(device), acc=acc.to(device))


BUILDERS = {"relbias": make_relbias, "sparse_int8": make_sparse_int8, "mqa_decode": make_mqa_decode,
            "merge": make_merge}


def make_inputs(case: Case, device="cpu", seed: int = 0) -> dict:
    return BUILDERS[case.family](case, device, seed)
