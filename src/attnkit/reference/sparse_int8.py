"""fp64 oracle for sparse_int8: top-k sparse attention over an INT8 KV cache.

s_j = scale * sum_d q[t,h,d] * key_scale[g,d] * k[g, idx_j, d],   g = h // (Hq // Hkv)
p = softmax_j(s) over valid slots (idx != -1; duplicates count separately)
o[t,h,d] = value_scale[g,d] * sum_j p_j * v[g, idx_j, d]
A row with no valid slot returns 0 and LSE -inf.
"""

from __future__ import annotations

import torch

from ..contract import EMPTY_SLOT, default_scale
from .common import F64, masked_attention, merge_partials, split_partials


def normalize_indices(indices: torch.Tensor, Hkv: int) -> torch.Tensor:
    """[T, N] (shared by KV heads) or [T, Hkv, N] -> [T, Hkv, N]."""
    if indices.dim() == 2:
        return indices.unsqueeze(1).expand(indices.shape[0], Hkv, indices.shape[1])
    if indices.dim() == 3 and indices.shape[1] == Hkv:
        return indices
    raise ValueError(f"indices must be [T, N] or [T, {Hkv}, N], got {tuple(indices.shape)}")


def _gathered(q, k_cache, v_cache, key_scale, value_scale, idx, scale):
    """scores [T, Hq, N], valid [T, Hq, N], values [T, Hq, N, D] (value scale applied), fp64."""
    T, Hq, D = q.shape
    Hkv, C, _ = k_cache.shape
    group = Hq // Hkv
    valid = idx != EMPTY_SLOT
    safe = torch.where(valid, idx, torch.zeros_like(idx)).long()  # [T, Hkv, N]
    if C == 0:  # an empty cache (every slot -1): gather the masked slots from a zero row
        k_cache = v_cache = k_cache.new_zeros(Hkv, 1, D)
    g = torch.arange(Hkv, device=q.device).view(1, Hkv, 1).expand_as(safe)
    kg = k_cache[g, safe].to(F64)  # [T, Hkv, N, D]
    vg = v_cache[g, safe].to(F64)
    qf = q.to(F64).view(T, Hkv, group, D) * key_scale.to(F64).view(1, Hkv, 1, D)
    s = torch.einsum("tgrd,tgnd->tgrn", qf, kg) * scale  # [T, Hkv, group, N]
    vs = vg * value_scale.to(F64).view(1, Hkv, 1, D)
    N = idx.shape[-1]
    s = s.reshape(T, Hq, N)
    valid = valid.unsqueeze(2).expand(T, Hkv, group, N).reshape(T, Hq, N)
    vs = vs.unsqueeze(2).expand(T, Hkv, group, N, D).reshape(T, Hq, N, D)
    return s, valid, vs


def _check(q, k_cache, indices, scale):
    T, Hq, D = q.shape
    Hkv = k_cache.shape[0]
    if Hq % Hkv:
        raise ValueError(f"Hq={Hq} is not a multiple of Hkv={Hkv}")
    idx = normalize_indices(indices, Hkv)
    C = k_cache.shape[1]
    if idx.numel() and (int(idx.min()) < EMPTY_SLOT or int(idx.max()) >= C):
        raise ValueError(f"indices must lie in [-1, {C})")
    return idx, default_scale(D) if scale is None else float(scale)


def _row_chunks(T, Hq, N, D):
    return max(1, (1 << 25) // max(1, Hq * max(N, 1) * D))


def sparse_int8_ref(q, k_cache, v_cache, key_scale, value_scale, indices, scale=None):
    """Returns (out [T, Hq, D] fp64, lse [T, Hq] fp64)."""
    idx, sc = _check(q, k_cache, indices, scale)
    T, Hq, D = q.shape
    out = torch.zeros(T, Hq, D, dtype=F64, device=q.device)
    lse = torch.full((T, Hq), float("-inf"), dtype=F64, device=q.device)
    step = _row_chunks(T, Hq, idx.shape[-1], D)
    for t0 in range(0, T, step):
        t1 = min(T, t0 + step)
        s, valid, vs = _gathered(q[t0:t1], k_cache, v_cache, key_scale, value_scale, idx[t0:t1], sc)
        out[t0:t1], lse[t0:t1] = masked_attention(s, valid, vs)
    return out, lse


def sparse_int8_partials_ref(q, k_cache, v_cache, key_scale, value_scale, indices, bounds, scale=None):
    """Un-normalized partials over candidate ranges ``bounds`` (value scale applied to acc).

    Returns (m [S, T, Hq], l [S, T, Hq], acc [S, T, Hq, D]) fp64.
    """
    idx, sc = _check(q, k_cache, indices, scale)
    s, valid, vs = _gathered(q, k_cache, v_cache, key_scale, value_scale, idx, sc)
    return split_partials(s, valid, vs, bounds)


def sparse_int8_dense_ref(q, k_cache, v_cache, key_scale, value_scale, indices, scale=None):
    """Independent formulation: a softmax over the WHOLE cache, weighted by how many times each
    cache row is selected (so duplicates count separately), masked where it is never selected."""
    idx, sc = _check(q, k_cache, indices, scale)
    T, Hq, D = q.shape
    Hkv, C, _ = k_cache.shape
    group = Hq // Hkv
    counts = torch.zeros(T, Hkv, C + 1, dtype=F64, device=q.device)
    shifted = (idx.long() + 1).clamp(min=0)  # -1 -> bucket 0, dropped below
    counts.scatter_add_(2, shifted, torch.ones_like(shifted, dtype=F64))
    counts = counts[..., 1:]  # [T, Hkv, C]
    kf = k_cache.to(F64) * key_scale.to(F64).unsqueeze(1)  # [Hkv, C, D]
    vf = v_cache.to(F64) * value_scale.to(F64).unsqueeze(1)
    qd = q.to(F64).view(T, Hkv, group, D)
    s = torch.einsum("tgrd,gcd->tgrc", qd, kf) * sc
    w = counts.unsqueeze(2).expand(T, Hkv, group, C)
    out, lse = masked_attention(s, w > 0, vf.unsqueeze(0).unsqueeze(2), weight=w)
    return out.reshape(T, Hq, D), lse.reshape(T, Hq)


__all__ = ["sparse_int8_ref", "sparse_int8_partials_ref", "sparse_int8_dense_ref", "normalize_indices",
           "merge_partials"]
