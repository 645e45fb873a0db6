"""fp64 oracle for relbias: attention with a learned relative-position bias table.

score(h, i, j) = softmax_scale * q_i . k_j + bias(h, pos_i - j), visible keys only, where
pos_i = seqlen_k - seqlen_q + i (bottom-right), visible means 0 <= d (and d < window),
bias(h, d) = table[h, d] for d < E, else 0 ("zero") or table[h, E-1] ("clamp").
GQA: query head h reads KV head h // (Hq // Hkv). FP8 caches are dequantized as
stored value x per-KV-head scale.
"""

from __future__ import annotations

import torch

from ..contract import BIAS_BEYOND_MODES, default_scale, visible
from .common import F64, masked_attention, merge_partials, split_partials


def bias_lookup(table: torch.Tensor, dist: torch.Tensor, beyond: str) -> torch.Tensor:
    """bias[h, ...] for integer distances ``dist`` (any shape, d >= 0 where used). fp64."""
    if beyond not in BIAS_BEYOND_MODES:
        raise ValueError(f"beyond must be one of {BIAS_BEYOND_MODES}, got {beyond!r}")
    t = table.to(F64)
    E = t.shape[1]
    d = dist.clamp(min=0)
    inside = d < E
    vals = t[:, d.clamp(max=E - 1)]  # [H, *dist.shape]
    if beyond == "zero":
        vals = torch.where(inside, vals, torch.zeros_like(vals))
    return vals


def _dequant(x: torch.Tensor, scale: torch.Tensor | None) -> torch.Tensor:
    x = x.to(F64)
    if scale is not None:
        x = x * scale.to(F64).view(1, -1, 1)
    return x


def _seq_scores(qb, kb, table, window, beyond, softmax_scale, q_offset=0, seqlen_q=None):
    """scores [Hq, Lq, Lk] fp64 and visibility [Lq, Lk] of one sequence (or of rows
    ``q_offset ..`` of a sequence with ``seqlen_q`` queries)."""
    Lq, Hq, D = qb.shape
    Lk, Hkv, _ = kb.shape
    seqlen_q = Lq if seqlen_q is None else seqlen_q
    group = Hq // Hkv
    kx = kb.repeat_interleave(group, dim=1)  # [Lk, Hq, D]
    s = torch.einsum("qhd,khd->hqk", qb, kx) * softmax_scale
    pos = torch.arange(Lq, device=qb.device) + (Lk - seqlen_q) + q_offset
    dist = pos[:, None] - torch.arange(Lk, device=qb.device)[None, :]
    vis = visible(dist, window)
    s = s + bias_lookup(table, dist, beyond)
    return s, vis


def relbias_attention_ref(q, k, v, cu_seqlens_q, cu_seqlens_k, table, *, window=None, beyond="zero",
                          softmax_scale=None, k_scale=None, v_scale=None):
    """Varlen oracle. q [total_q, Hq, D]; k, v [total_k, Hkv, D]; cu_seqlens [B+1].

    Returns (out [total_q, Hq, D] fp64, lse [total_q, Hq] fp64).
    """
    total_q, Hq, D = q.shape
    Hkv = k.shape[1]
    if Hq % Hkv:
        raise ValueError(f"Hq={Hq} is not a multiple of Hkv={Hkv}")
    scale = default_scale(D) if softmax_scale is None else float(softmax_scale)
    qd = q.to(F64)
    kd = _dequant(k, k_scale)
    vd = _dequant(v, v_scale)
    group = Hq // Hkv
    out = torch.zeros(total_q, Hq, D, dtype=F64, device=q.device)
    lse = torch.full((total_q, Hq), float("-inf"), dtype=F64, device=q.device)
    cq = [int(x) for x in cu_seqlens_q.tolist()]
    ck = [int(x) for x in cu_seqlens_k.tolist()]
    for b in range(len(cq) - 1):
        qb = qd[cq[b]:cq[b + 1]]
        kb = kd[ck[b]:ck[b + 1]]
        vb = vd[ck[b]:ck[b + 1]]
        Lq, Lk = qb.shape[0], kb.shape[0]
        if Lq == 0:
            continue
        vx = vb.repeat_interleave(group, dim=1).permute(1, 0, 2)  # [Hq, Lk, D]
        # Row chunks keep the fp64 score block near 2^24 elements on long sequences.
        step = max(1, (1 << 24) // max(1, Hq * Lk))
        for r0 in range(0, Lq, step):
            r1 = min(Lq, r0 + step)
            s, vis = _seq_scores(qb[r0:r1], kb, table, window, beyond, scale, q_offset=r0, seqlen_q=Lq)
            o, l = masked_attention(s, vis.unsqueeze(0).expand_as(s), vx.unsqueeze(1))
            out[cq[b] + r0:cq[b] + r1] = o.permute(1, 0, 2)
            lse[cq[b] + r0:cq[b] + r1] = l.permute(1, 0)
    return out, lse


def gather_paged(k_cache, v_cache, block_table, seqused_k):
    """Contiguous varlen k, v [total_k, Hkv, D] and cu_seqlens_k from a paged cache."""
    bs = k_cache.shape[1]
    ks, vs, cu = [], [], [0]
    for b in range(block_table.shape[0]):
        n = int(seqused_k[b])
        nblk = -(-n // bs)
        blocks = block_table[b, :nblk].long()
        ks.append(k_cache[blocks].reshape(-1, *k_cache.shape[2:])[:n])
        vs.append(v_cache[blocks].reshape(-1, *v_cache.shape[2:])[:n])
        cu.append(cu[-1] + n)
    cu_t = torch.tensor(cu, dtype=torch.int32, device=k_cache.device)
    return torch.cat(ks), torch.cat(vs), cu_t


def relbias_attention_paged_ref(q, k_cache, v_cache, block_table, seqused_k, cu_seqlens_q, table, **kw):
    """Paged oracle: k_cache, v_cache [num_blocks, block_size, Hkv, D]."""
    k, v, cu_k = gather_paged(k_cache, v_cache, block_table, seqused_k)
    return relbias_attention_ref(q, k, v, cu_seqlens_q, cu_k, table, **kw)


def relbias_partials_ref(q, k, v, table, bounds, *, window=None, beyond="zero", softmax_scale=None,
                         k_scale=None, v_scale=None):
    """Split-K partials of ONE sequence (q [Lq, Hq, D], k/v [Lk, Hkv, D]) over key ranges ``bounds``.

    Returns (m [S, Hq, Lq], l [S, Hq, Lq], acc [S, Hq, Lq, D]) fp64.
    """
    Lq, Hq, D = q.shape
    Hkv = k.shape[1]
    scale = default_scale(D) if softmax_scale is None else float(softmax_scale)
    kd = _dequant(k, k_scale)
    vd = _dequant(v, v_scale)
    s, vis = _seq_scores(q.to(F64), kd, table, window, beyond, scale)
    vx = vd.repeat_interleave(Hq // Hkv, dim=1).permute(1, 0, 2).unsqueeze(1)  # [Hq, 1, Lk, D]
    vx = vx.expand(Hq, Lq, *vx.shape[2:])
    return split_partials(s, vis.unsqueeze(0).expand_as(s), vx, bounds)


__all__ = ["bias_lookup", "relbias_attention_ref", "relbias_attention_paged_ref", "relbias_partials_ref",
           "gather_paged", "merge_partials"]


def write_kv_ref(k_new, v_new, cu_seqlens_new, k_cache, v_cache, block_table, seqused_k, k_scale=None, v_scale=None):
    """The paged KV writer's oracle: returns updated copies of k_cache, v_cache. Token i of sequence b
    goes to position seqused_k[b] + i; an fp8 cache stores value / scale, clamped to +-448 and rounded
    to nearest even (torch's cast)."""
    kc, vc = k_cache.clone(), v_cache.clone()
    bs = kc.shape[1]
    cu = [int(x) for x in cu_seqlens_new.tolist()]
    for b in range(len(cu) - 1):
        for i in range(cu[b], cu[b + 1]):
            p = int(seqused_k[b]) + i - cu[b]
            page, off = int(block_table[b, p // bs]), p % bs
            for cache, new, sc in ((kc, k_new, k_scale), (vc, v_new, v_scale)):
                x = new[i]
                if cache.dtype == torch.float8_e4m3fn:
                    x = (x.float() / sc.view(-1, 1)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
                cache[page, off] = x
    return kc, vc
