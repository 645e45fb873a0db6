"""The paths users would pick instead of attnkit, written once and shared by gates and benchmarks.

Every peer has two stages, as an engine would run it: ``prepare(inp, ...)`` does the per-step
planning outside the timed region (FlexAttention's block mask, index tensors) and returns a callable
``run()`` that does the per-step work (gathering, dequantizing, attending). Peers return
``(out, lse)``; ``lse`` is None where the peer has none.

A ``perturb`` argument builds a deliberately wrong variant for the gates' power checks.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F

from .contract import EMPTY_SLOT
from .reference.mqa_decode import E2M1_VALUES, E4M3_VALUES, rope_rotate
from .reference.relbias import gather_paged

KV_BLOCK_SHIFT = 128  # "bias shifted by one KV block": the distance moves by one 128-key tile

# ------------------------------------------------------------------------------------ FlexAttention

_FLEX_COMPILED = None


def _flex(compiled: bool):
    global _FLEX_COMPILED
    from torch.nn.attention.flex_attention import flex_attention
    if not compiled:  # eager (CPU gates): an unfused reference path, slow but exact in its dtype
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        warnings.filterwarnings("ignore", message="return_lse is deprecated")
        return flex_attention
    if _FLEX_COMPILED is None:
        # Every shape and score_mod closure is a recompile; past dynamo's default limit (8) it would
        # silently run the unfused eager path and time that instead. Raise the limits.
        import torch._dynamo.config as dcfg
        for knob in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                     "accumulated_recompile_limit"):
            if hasattr(dcfg, knob):
                setattr(dcfg, knob, max(getattr(dcfg, knob), 4096))
        _FLEX_COMPILED = torch.compile(flex_attention, dynamic=False)
    return _FLEX_COMPILED


def _flex_call(fn, q, k, v, score_mod, block_mask, scale):
    try:
        from torch.nn.attention.flex_attention import AuxRequest
        o, aux = fn(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale, enable_gqa=True,
                    return_aux=AuxRequest(lse=True))
        return o, aux.lse
    except ImportError:
        return fn(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale, enable_gqa=True, return_lse=True)


def _kv_plan(inp):
    """Plan (host, outside the timing) and return ``get_kv()``: the per-step work a user pays to get
    contiguous k, v in q's dtype. A paged cache is gathered with one index op over slot ids computed
    here from the block table; an fp8 cache is dequantized in q's dtype (fp8 -> bf16 is exact, then
    one rounding of the product with the per-head scale)."""
    dt = inp["q"].dtype
    if "k_cache" in inp:
        kc, vc = inp["k_cache"], inp["v_cache"]
        bs = kc.shape[1]
        slots = []
        bt = inp["block_table"].long().cpu()
        for b, n in enumerate(inp["seqused_k"].tolist()):
            j = torch.arange(n)
            slots.append(bt[b, j // bs] * bs + j % bs)
        slots = torch.cat(slots).to(kc.device)
        kflat, vflat = kc.view(-1, *kc.shape[2:]), vc.view(-1, *vc.shape[2:])

        def raw():
            return kflat[slots], vflat[slots]
    else:
        def raw():
            return inp["k"], inp["v"]
    if inp.get("k_scale") is not None:
        def get_kv():  # fp8 -> bf16 is exact; the per-head scales are folded into q and the output
            k, v = raw()
            return k.to(dt), v.to(dt)
        return get_kv
    return raw


def _head_scales(inp):
    """Per query head fp32 (k_scale, v_scale) of an fp8 cache, or (None, None). A user folds the key
    scale into q (one rounding of q) and applies the value scale to the output (one rounding), which is
    cheaper and more accurate than rounding every dequantized key to bf16."""
    if inp.get("k_scale") is None:
        return None, None
    Hq = inp["q"].shape[1]
    Hkv = inp["k_scale"].shape[0]
    return (inp["k_scale"].float().repeat_interleave(Hq // Hkv).view(1, Hq, 1),
            inp["v_scale"].float().repeat_interleave(Hq // Hkv).view(1, Hq, 1))


def _fold_q(q, ks):
    return q if ks is None else (q.float() * ks).to(q.dtype)


def _unfold_out(o, vs):
    return o if vs is None else (o.float() * vs).to(o.dtype)


def _relbias_contiguous(inp):
    """(k, v) contiguous in q's dtype, fp8 scales applied (planning and work in one call)."""
    k, v = _kv_plan(inp)()
    if inp.get("k_scale") is not None:
        k = (k.float() * inp["k_scale"].view(1, -1, 1)).to(k.dtype)
        v = (v.float() * inp["v_scale"].view(1, -1, 1)).to(v.dtype)
    return k, v


def relbias_flex(inp: dict, *, bias: bool = True, compiled: bool = True, perturb: str | None = None):
    """FlexAttention with the bias as ``score_mod`` and causal/window/varlen as ``block_mask``.

    Sequences of equal lengths form a plain batch (positions from the tile indices); a varlen batch is
    packed into one row with document ids (vLLM's FlexAttention layout). Paged and fp8 caches are
    gathered and dequantized inside ``run`` (per-step work a user pays).
    perturb: None | "bias-dropped" | "bias-shifted-kv-block" | "window-off-by-one" | "gqa-mixed".
    """
    from torch.nn.attention.flex_attention import create_block_mask

    q = inp["q"]
    dev = q.device
    Hq, D = q.shape[1], q.shape[2]
    cq = inp["cu_seqlens_q"].to(dev).long()
    ck_host = None
    if "k_cache" in inp:
        su = inp["seqused_k"].long()
        ck = torch.cat([torch.zeros(1, dtype=torch.long, device=dev), torch.cumsum(su, 0)])
    else:
        ck = inp["cu_seqlens_k"].to(dev).long()
    lq, lk = cq[1:] - cq[:-1], ck[1:] - ck[:-1]
    total_q, total_k = int(cq[-1]), int(ck[-1])
    q_doc = torch.repeat_interleave(torch.arange(len(lq), device=dev), lq)
    k_doc = torch.repeat_interleave(torch.arange(len(lk), device=dev), lk)
    q_pos = torch.arange(total_q, device=dev) - cq[q_doc] + (lk - lq)[q_doc]
    k_pos = torch.arange(total_k, device=dev) - ck[k_doc]
    window = inp["window"]
    if perturb == "window-off-by-one" and window is not None:
        window = window + 1
    table = inp["table"].to(torch.float32)
    E = table.shape[1]
    beyond = inp["beyond"]
    shift = KV_BLOCK_SHIFT if perturb == "bias-shifted-kv-block" else 0

    lq_l, lk_l = lq.tolist(), lk.tolist()
    batched = len(set(lq_l)) == 1 and len(set(lk_l)) == 1  # equal lengths: a plain batch, no document ids
    off = lk_l[0] - lq_l[0] if batched else 0

    if batched:  # the simplest form a user writes: positions from the tile indices and one constant
        def mask_mod(b, h, qi, ki):
            d = qi + off - ki
            ok = d >= 0
            if window is not None:
                ok = ok & (d < window)
            return ok

        def distance(qi, ki):
            return qi + off - ki
    else:
        def mask_mod(b, h, qi, ki):
            d = q_pos[qi] - k_pos[ki]
            ok = (q_doc[qi] == k_doc[ki]) & (d >= 0)
            if window is not None:
                ok = ok & (d < window)
            return ok

        def distance(qi, ki):
            return q_pos[qi] - k_pos[ki]

    # Where every visible distance lies inside the extent, "beyond" never applies and the score_mod is
    # one clamped gather (the clamp keeps masked-out scores of partial tiles in bounds).
    max_dist = max(lk_l) if window is None else min(max(lk_l), window)
    needs_beyond = beyond == "zero" and max_dist > E

    def score_mod(score, b, h, qi, ki):
        d = distance(qi, ki) + shift
        val = table[h, d.clamp(0, E - 1)]
        if needs_beyond or shift:
            val = torch.where(d < E, val, torch.zeros_like(val))
        return score + val

    use_bias = bias and perturb != "bias-dropped"
    B = len(lq_l) if batched else 1
    Lq_, Lk_ = (lq_l[0], lk_l[0]) if batched else (total_q, total_k)
    # the block mask is planning (outside the timing) and the same either way: built eagerly, since compiling it hung
    # in Triton's LLVM step on the 8-document varlen-mixed mask (torch 2.11, Triton 3.6, on the H200: over 70 s there)
    bm = create_block_mask(mask_mod, B, None, Lq_, Lk_, device=dev, _compile=False)
    fn = _flex(compiled)
    scale = float(inp["softmax_scale"])
    Hkv_perm = None
    if perturb == "gqa-mixed":
        Hkv = (inp["k_cache"] if "k_cache" in inp else inp["k"]).shape[-2]
        Hkv_perm = torch.roll(torch.arange(Hkv, device=dev), 1)

    get_kv = _kv_plan(inp)
    ks, vs = _head_scales(inp)

    def run():
        k, v = get_kv()
        if Hkv_perm is not None:
            k, v = k[:, Hkv_perm], v[:, Hkv_perm]
        qq = _fold_q(q, ks).view(B, Lq_, Hq, D).transpose(1, 2)
        kk = k.view(B, Lk_, k.shape[1], D).transpose(1, 2)
        vv = v.view(B, Lk_, v.shape[1], D).transpose(1, 2)
        o, lse = _flex_call(fn, qq, kk, vv, score_mod if use_bias else None, bm, scale)
        return _unfold_out(o.transpose(1, 2).reshape(-1, Hq, D), vs), lse.transpose(1, 2).reshape(-1, Hq)

    return run


def relbias_sdpa(inp: dict, *, backend: str, bias: bool = False):
    """SDPA without bias (the floor a bias kernel can approach), one call for equal-length batches.

    backend: "cudnn" | "flash" | "efficient" | "math". With ``bias=True`` the bias is materialized as a
    float mask ([Hq, Lq, Lk]) and added by SDPA (the gather + materialize path).
    Raises NotImplementedError for shapes SDPA cannot express (varlen batches, sliding windows).
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = inp["q"]
    lq = (inp["cu_seqlens_q"][1:] - inp["cu_seqlens_q"][:-1]).tolist()
    lk = inp["seqused_k"].tolist() if "k_cache" in inp else (inp["cu_seqlens_k"][1:] - inp["cu_seqlens_k"][:-1]).tolist()
    if len(set(lq)) != 1 or len(set(lk)) != 1:
        raise NotImplementedError("SDPA takes no varlen batch (sequences of different lengths)")
    if inp["window"] is not None and not bias:
        raise NotImplementedError("SDPA has no sliding-window mask")
    B, Lq, Lk = len(lq), lq[0], lk[0]
    Hq, D = q.shape[1], q.shape[2]
    be = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
          "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}[backend]
    mask = None
    causal = Lq > 1
    if bias:
        from .reference.relbias import bias_lookup
        pos = torch.arange(Lq, device=q.device) + (Lk - Lq)
        dist = pos[:, None] - torch.arange(Lk, device=q.device)[None, :]
        vis = dist >= 0
        if inp["window"] is not None:
            vis = vis & (dist < inp["window"])
        mask = torch.where(vis, bias_lookup(inp["table"], dist, inp["beyond"]).to(q.dtype),
                           torch.tensor(float("-inf"), dtype=q.dtype, device=q.device)).unsqueeze(0)
        causal = False
    elif causal and Lq != Lk:
        from torch.nn.attention.bias import causal_lower_right
        mask = causal_lower_right(Lq, Lk)
        causal = False
    scale = float(inp["softmax_scale"])
    get_kv = _kv_plan(inp)
    ks, vs = _head_scales(inp)

    def run():
        k, v = get_kv()
        qq = _fold_q(q, ks).view(B, Lq, Hq, D).transpose(1, 2)
        kk = k.view(B, Lk, -1, D).transpose(1, 2)
        vv = v.view(B, Lk, -1, D).transpose(1, 2)
        if bias and kk.shape[1] != Hq:  # the efficient backend takes no GQA: expand the KV heads
            kk = kk.repeat_interleave(Hq // kk.shape[1], dim=1)
            vv = vv.repeat_interleave(Hq // vv.shape[1], dim=1)
        with sdpa_kernel([be]), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            o = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask, is_causal=causal, scale=scale,
                                               enable_gqa=kk.shape[1] != Hq)
        return _unfold_out(o.transpose(1, 2).reshape(B * Lq, Hq, D), vs), None

    return run


# ------------------------------------------------------------------------------------ sparse_int8


def sparse_int8_torch(inp: dict, *, perturb: str | None = None):
    """PyTorch gather + dequantize (to bf16) + SDPA, one query row per (token, KV head).

    perturb: None | "candidate-skipped" (the first valid candidate of every row is dropped) |
    "key-scale-dropped".
    """
    from .reference.sparse_int8 import normalize_indices

    q, kc, vc = inp["q"], inp["k_cache"], inp["v_cache"]
    T, Hq, D = q.shape
    Hkv = kc.shape[0]
    group = Hq // Hkv
    idx = normalize_indices(inp["indices"], Hkv)
    if perturb == "candidate-skipped" and idx.shape[-1]:
        idx = idx.clone()
        first = (idx != EMPTY_SLOT).float().argmax(-1, keepdim=True)
        idx.scatter_(-1, first, EMPTY_SLOT)
    valid = idx != EMPTY_SLOT
    safe = torch.where(valid, idx, torch.zeros_like(idx)).long()
    g = torch.arange(Hkv, device=q.device).view(1, Hkv, 1).expand_as(safe)
    ks = torch.ones_like(inp["key_scale"]) if perturb == "key-scale-dropped" else inp["key_scale"]
    mask = valid.view(T * Hkv, 1, 1, -1)
    any_valid = valid.any(-1).view(T * Hkv, 1, 1, 1)
    scale = float(inp["scale"])

    def run():
        kd = (kc[g, safe].to(torch.float32) * ks.view(1, Hkv, 1, D)).to(q.dtype)  # [T, Hkv, N, D]
        vd = (vc[g, safe].to(torch.float32) * inp["value_scale"].view(1, Hkv, 1, D)).to(q.dtype)
        qq = q.view(T * Hkv, 1, group, D)
        o = F.scaled_dot_product_attention(qq, kd.view(T * Hkv, 1, -1, D), vd.view(T * Hkv, 1, -1, D),
                                           attn_mask=mask, scale=scale)
        # rows with no valid candidate: SDPA gives NaN on a CPU and an arbitrary row on a GPU
        # (seen on an H200, torch 2.11); the contract says 0
        o = torch.where(any_valid, o, torch.zeros((), dtype=o.dtype, device=o.device))
        return o.view(T, Hq, D), None

    return run


# ------------------------------------------------------------------------------------ mqa_decode


def _decode_records_bf16(cache, slots, fmt, perturb):
    """Gather + dequantize records to bf16 with table lookups (what a PyTorch user writes)."""
    flat = cache.reshape(-1, cache.shape[-1])
    rec = flat[slots.long().clamp(min=0)]
    shift = 1 if perturb == "scale-block-off-by-one" else 0
    if fmt == "fp8":
        vals = rec[..., :512].view(torch.float8_e4m3fn).to(torch.float32)
        sc = torch.exp2(rec[..., 512:528].to(torch.float32) - 127)
        sc = torch.roll(sc, shift, dims=-1).repeat_interleave(32, dim=-1)
    else:
        packed = rec[..., :256].long()
        e2 = E2M1_VALUES.to(torch.float32).to(cache.device)
        vals = torch.stack([e2[packed & 0xF], e2[packed >> 4]], dim=-1).flatten(-2)
        sc = rec[..., 256:288].view(torch.float8_e4m3fn).to(torch.float32)
        sc = torch.roll(sc, shift, dims=-1).repeat_interleave(16, dim=-1)
    return (vals * sc).to(torch.bfloat16)


def mqa_decode_torch(inp: dict, *, perturb: str | None = None):
    """PyTorch gather + dequantize + SDPA, with the sink as an extra key of value zero.

    perturb: None | "sink-dropped" | "rope-not-undone" | "scale-block-off-by-one".
    """
    q = inp["q"]
    H = inp["num_heads"]
    T = q.shape[0]
    valid = torch.cat([inp["swa_idx"] != EMPTY_SLOT, inp["comp_idx"] != EMPTY_SLOT], dim=1)
    sink = inp["sink"].to(torch.float32)
    scale = float(inp["softmax_scale"])
    # the sink as one more key with value 0: its score must equal sink[h], so put the logit in the mask
    sink_col = torch.full((T, H, 1), 0.0, device=q.device) if perturb == "sink-dropped" else None

    def run():
        qr = rope_rotate(q[:, :H].float(), inp["positions"], inp["cos_sin"]).to(torch.bfloat16)
        kv = torch.cat([_decode_records_bf16(inp["swa_cache"], inp["swa_idx"], "fp8", perturb),
                        _decode_records_bf16(inp["comp_cache"], inp["comp_idx"], inp["comp_format"], perturb)], dim=1)
        kv = torch.cat([kv, torch.zeros_like(kv[:, :1])], dim=1)  # the sink's key (its value is 0)
        m = torch.where(valid, 0.0, float("-inf")).unsqueeze(1).expand(T, H, -1)
        sink_logit = sink.view(1, H, 1).expand(T, H, 1) if sink_col is None else torch.full((T, H, 1), float("-inf"),
                                                                                            device=q.device)
        mask = torch.cat([m, sink_logit], dim=-1).to(torch.bfloat16).unsqueeze(2)  # [T, H, 1, N+1]
        o = F.scaled_dot_product_attention(qr.unsqueeze(2), kv.unsqueeze(1), kv.unsqueeze(1), attn_mask=mask,
                                           scale=scale)[:, :, 0]
        o = o.float()
        if perturb != "rope-not-undone":
            o = rope_rotate(o, inp["positions"], inp["cos_sin"], inverse=True)
        return o.to(torch.bfloat16), None

    return run
