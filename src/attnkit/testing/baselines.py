"""The same computations done by PyTorch in the input precision: the error yardstick of the compare
rule. Operands stay in the input dtype (bf16 / fp16; fp8 and int8 are dequantized to it), matrix
products accumulate in fp32 and round to the input dtype as PyTorch's bf16 matmul does, the softmax
runs in fp32 and its probabilities are rounded to the input dtype before the second product.
"""

from __future__ import annotations

import torch

from ..contract import EMPTY_SLOT
from ..reference.mqa_decode import gather_records, rope_rotate
from ..reference.relbias import bias_lookup, gather_paged
from ..reference.sparse_int8 import normalize_indices


def _softmax_lse(s: torch.Tensor, valid: torch.Tensor, extra: torch.Tensor | None = None):
    s = torch.where(valid, s, torch.full_like(s, float("-inf")))
    m = s.amax(-1) if s.shape[-1] else torch.full(s.shape[:-1], float("-inf"), dtype=s.dtype, device=s.device)
    if extra is not None:
        m = torch.maximum(m, extra)
    ms = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    p = torch.exp(s - ms.unsqueeze(-1))
    l = p.sum(-1)
    if extra is not None:
        l = l + torch.exp(extra - ms)
    ok = l != 0
    p = p / torch.where(ok, l, torch.ones_like(l)).unsqueeze(-1)
    lse = torch.where(ok, ms + torch.log(torch.where(ok, l, torch.ones_like(l))), torch.full_like(l, float("-inf")))
    return p, lse


def relbias_baseline(inp: dict):
    q = inp["q"]
    dt = q.dtype
    if "k_cache" in inp:
        k, v, cu_k = gather_paged(inp["k_cache"], inp["v_cache"], inp["block_table"], inp["seqused_k"])
    else:
        k, v, cu_k = inp["k"], inp["v"], inp["cu_seqlens_k"]
    if inp.get("k_scale") is not None:
        k = (k.float() * inp["k_scale"].view(1, -1, 1)).to(dt)
        v = (v.float() * inp["v_scale"].view(1, -1, 1)).to(dt)
    total_q, Hq, D = q.shape
    Hkv = k.shape[1]
    group = Hq // Hkv
    out = torch.zeros_like(q)
    lse = torch.full((total_q, Hq), float("-inf"), dtype=torch.float32, device=q.device)
    cq = inp["cu_seqlens_q"].tolist()
    ck = cu_k.tolist()
    for b in range(len(cq) - 1):
        Lq, Lk = cq[b + 1] - cq[b], ck[b + 1] - ck[b]
        if Lq == 0:
            continue
        kb = k[ck[b]:ck[b + 1]].repeat_interleave(group, dim=1).permute(1, 2, 0)  # [Hq, D, Lk]
        vb = v[ck[b]:ck[b + 1]].repeat_interleave(group, dim=1).permute(1, 0, 2)  # [Hq, Lk, D]
        step = max(1, (1 << 26) // max(1, Hq * Lk))
        for r0 in range(0, Lq, step):
            r1 = min(Lq, r0 + step)
            qb = q[cq[b] + r0:cq[b] + r1].permute(1, 0, 2)  # [Hq, r, D]
            s = torch.matmul(qb, kb).float() * inp["softmax_scale"]
            pos = torch.arange(r0, r1, device=q.device) + (Lk - Lq)
            dist = pos[:, None] - torch.arange(Lk, device=q.device)[None, :]
            vis = dist >= 0
            if inp["window"] is not None:
                vis = vis & (dist < inp["window"])
            s = s + bias_lookup(inp["table"], dist, inp["beyond"]).float()
            p, l = _softmax_lse(s, vis.unsqueeze(0).expand_as(s))
            out[cq[b] + r0:cq[b] + r1] = torch.matmul(p.to(dt), vb).permute(1, 0, 2)
            lse[cq[b] + r0:cq[b] + r1] = l.permute(1, 0)
    return out, lse


def sparse_int8_baseline(inp: dict):
    q = inp["q"]
    dt = q.dtype
    T, Hq, D = q.shape
    kc, vc = inp["k_cache"], inp["v_cache"]
    Hkv = kc.shape[0]
    group = Hq // Hkv
    idx = normalize_indices(inp["indices"], Hkv)
    N = idx.shape[-1]
    out = torch.zeros_like(q)
    lse = torch.full((T, Hq), float("-inf"), dtype=torch.float32, device=q.device)
    step = max(1, (1 << 25) // max(1, Hkv * max(N, 1) * D))
    g = torch.arange(Hkv, device=q.device).view(1, Hkv, 1)
    for t0 in range(0, T, step):
        t1 = min(T, t0 + step)
        ix = idx[t0:t1]
        valid = ix != EMPTY_SLOT
        safe = torch.where(valid, ix, torch.zeros_like(ix)).long()
        gg = g.expand_as(safe)
        kd = (kc[gg, safe].float() * inp["key_scale"].view(1, Hkv, 1, D)).to(dt)  # [t, Hkv, N, D]
        vd = (vc[gg, safe].float() * inp["value_scale"].view(1, Hkv, 1, D)).to(dt)
        qb = q[t0:t1].view(t1 - t0, Hkv, group, D)
        s = torch.matmul(qb, kd.transpose(-1, -2)).float() * inp["scale"]  # [t, Hkv, group, N]
        p, l = _softmax_lse(s, valid.unsqueeze(2).expand_as(s))
        o = torch.matmul(p.to(dt), vd)  # [t, Hkv, group, D]
        out[t0:t1] = o.reshape(t1 - t0, Hq, D)
        lse[t0:t1] = l.reshape(t1 - t0, Hq)
    return out, lse


def mqa_decode_baseline(inp: dict):
    q = inp["q"]
    H = inp["num_heads"]
    dt = q.dtype
    qr = rope_rotate(q[:, :H].float(), inp["positions"], inp["cos_sin"]).to(dt)
    kv = torch.cat([gather_records(inp["swa_cache"], inp["swa_idx"], "fp8"),
                    gather_records(inp["comp_cache"], inp["comp_idx"], inp["comp_format"])], dim=1).to(dt)
    valid = torch.cat([inp["swa_idx"] != EMPTY_SLOT, inp["comp_idx"] != EMPTY_SLOT], dim=1)
    s = torch.matmul(qr, kv.transpose(-1, -2)).float() * inp["softmax_scale"]  # [T, H, N]
    sink = inp["sink"].float().view(1, H).expand(q.shape[0], H)
    p, lse = _softmax_lse(s, valid.unsqueeze(1).expand_as(s), extra=sink)
    o = torch.matmul(p.to(dt), kv).float()
    o = rope_rotate(o, inp["positions"], inp["cos_sin"], inverse=True).to(dt)
    return o, lse


def merge_baseline(inp: dict):
    """The merge in fp32 by PyTorch."""
    m, l, acc = inp["m"].float(), inp["l"].float(), inp["acc"].float()
    big = m.amax(0)
    bs = torch.where(torch.isfinite(big), big, torch.zeros_like(big))
    w = torch.where(torch.isfinite(m), torch.exp(m - bs), torch.zeros_like(m))
    tot = (l * w).sum(0)
    o = (acc * w.unsqueeze(-1)).sum(0)
    ok = tot != 0
    out = torch.where(ok.unsqueeze(-1), o / torch.where(ok, tot, torch.ones_like(tot)).unsqueeze(-1), torch.zeros_like(o))
    lse = torch.where(ok, bs + torch.log(torch.where(ok, tot, torch.ones_like(tot))), torch.full_like(tot, float("-inf")))
    return out, lse


BASELINES = {"relbias": relbias_baseline, "sparse_int8": sparse_int8_baseline, "mqa_decode": mqa_decode_baseline,
             "merge": merge_baseline}
