"""fp64 building blocks shared by the family oracles: masked softmax with LSE,
split-K partials and their merge. Pure torch, any device, no triton.
"""

from __future__ import annotations

import torch

F64 = torch.float64


def masked_attention(scores: torch.Tensor, valid: torch.Tensor, v: torch.Tensor,
                     weight: torch.Tensor | None = None, extra_logit: torch.Tensor | None = None):
    """Softmax over the last axis of ``scores`` restricted to ``valid``, applied to ``v``.

    scores: [..., N] fp64; valid: [..., N] bool; v: [..., N, D] fp64 (broadcastable).
    weight: optional [..., N] multiplicity of each slot (a dense formulation of duplicates).
    extra_logit: optional [...] logit of one virtual key with value zero (attention sink).
    Returns (out [..., D], lse [...]); an empty row gives 0 and -inf (or the sink's logit).
    """
    s = torch.where(valid, scores.to(F64), torch.full_like(scores, float("-inf"), dtype=F64))
    m = s.amax(dim=-1) if s.shape[-1] else torch.full(s.shape[:-1], float("-inf"), dtype=F64, device=s.device)
    if extra_logit is not None:
        m = torch.maximum(m, extra_logit.to(F64))
    m_safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    p = torch.exp(s - m_safe.unsqueeze(-1))
    if weight is not None:
        p = p * weight.to(F64)
    l = p.sum(dim=-1)
    if extra_logit is not None:
        l = l + torch.exp(extra_logit.to(F64) - m_safe)
    acc = torch.einsum("...n,...nd->...d", p, v.to(F64))
    nonempty = l != 0  # NaN (a NaN score or value) stays NaN: not the empty row
    out = torch.where(nonempty.unsqueeze(-1), acc / torch.where(nonempty, l, torch.ones_like(l)).unsqueeze(-1),
                      torch.zeros_like(acc))
    lse = torch.where(nonempty, m_safe + torch.log(torch.where(nonempty, l, torch.ones_like(l))),
                      torch.full_like(l, float("-inf")))
    return out, lse


def split_partials(scores: torch.Tensor, valid: torch.Tensor, v: torch.Tensor, bounds):
    """Un-normalized partials of each split of the last axis.

    bounds: list of (start, stop) candidate ranges, one per split (a range may be empty).
    Returns (m [S, ...], l [S, ...], acc [S, ..., D]) in fp64, following
    ``attnkit.contract``: an empty split has m=-inf, l=0, acc=0.
    """
    ms, ls, accs = [], [], []
    for start, stop in bounds:
        s = scores[..., start:stop].to(F64)
        ok = valid[..., start:stop]
        s = torch.where(ok, s, torch.full_like(s, float("-inf")))
        if s.shape[-1] == 0:
            m = torch.full(s.shape[:-1], float("-inf"), dtype=F64, device=s.device)
        else:
            m = s.amax(dim=-1)
        m_safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        p = torch.exp(s - m_safe.unsqueeze(-1))
        ms.append(m)
        ls.append(p.sum(dim=-1))
        accs.append(torch.einsum("...n,...nd->...d", p, v[..., start:stop, :].to(F64)))
    return torch.stack(ms), torch.stack(ls), torch.stack(accs)


def merge_partials(m: torch.Tensor, l: torch.Tensor, acc: torch.Tensor):
    """Merge un-normalized partials over the leading split axis (fp64).

    m, l: [S, ...]; acc: [S, ..., D]. Returns (out [..., D], lse [...]).
    """
    m = m.to(F64)
    l = l.to(F64)
    acc = acc.to(F64)
    big = m.amax(dim=0)
    big_safe = torch.where(torch.isfinite(big), big, torch.zeros_like(big))
    w = torch.where(torch.isfinite(m), torch.exp(m - big_safe), torch.zeros_like(m))
    total = (l * w).sum(dim=0)
    o = (acc * w.unsqueeze(-1)).sum(dim=0)
    nonempty = total != 0
    denom = torch.where(nonempty, total, torch.ones_like(total))
    out = torch.where(nonempty.unsqueeze(-1), o / denom.unsqueeze(-1), torch.zeros_like(o))
    lse = torch.where(nonempty, big_safe + torch.log(denom), torch.full_like(total, float("-inf")))
    return out, lse


def even_bounds(n: int, num_splits: int):
    """Split ``range(n)`` into ``num_splits`` contiguous ranges (later ones may be empty)."""
    per = -(-n // num_splits) if num_splits > 0 else n
    return [(min(i * per, n), min((i + 1) * per, n)) for i in range(num_splits)]


def tile_bounds(n: int, tile: int, tiles_per_split: int, num_splits: int | None = None):
    """Ranges of ``tiles_per_split`` tiles of ``tile`` candidates; extra splits are empty."""
    step = tile * tiles_per_split
    count = max(1, -(-n // step)) if num_splits is None else num_splits
    return [(min(i * step, n), min((i + 1) * step, n)) for i in range(count)]
