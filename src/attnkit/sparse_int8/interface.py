"""Host side of sparse_int8: options, validation, plan, launch. Kernel: kernel.py; rules: config.py;
semantics: docs/sparse_int8.md and attnkit.reference.sparse_int8. A call's layout-dependent decisions (_configure) are
kept per argument layout (attnkit._callcache); its value checks and launches run every call."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from .. import _runtime, splitk
from .._callcache import CallCache, Launch
from .._runtime import (check_device, forward_only, gluon_runs, index_span, interpreting, on_device_of, pdl_launch,
                        require, resolve_pdl, to_host)
from .config import (BLOCK_N_OPT, CTAS_OPT, GLUON, GLUON_OVERLAP, GLUON_V_REGS, IDS_EARLY, MAX_GROUP, PIPELINE,
                     PREFETCH, PV_SPLIT, QK_INT8, STAGES_OPT, SUPPORTED_HEAD_DIMS, SWAP_AB, TILES_PER_SPLIT, VALIDATE,
                     WARPS_OPT, plan)
from . import config as _config

_CALLS = CallCache("sparse_int8", _config, splitk, _runtime)  # the options of these modules key its entries

PERTURBATIONS = {None: 0, "candidate-skipped": 1, "split-lost": 0, "value-scale-before-accumulation": 3}


def _validate(q, k_cache, v_cache, key_scale, value_scale, indices, scale):
    require(isinstance(q, torch.Tensor) and q.dim() == 3 and q.dtype == torch.bfloat16, "q",
            "must be a bfloat16 [T, Hq, D] tensor")
    check_device("q", q)
    T, Hq, D = q.shape
    require(D in SUPPORTED_HEAD_DIMS, "q", f"head dim {D} not in {SUPPORTED_HEAD_DIMS}")
    require(q.stride(-1) == 1, "q", "last dimension must be contiguous")
    for n, c in (("k_cache", k_cache), ("v_cache", v_cache)):
        # bf16 caches are accepted too: the same kernel over a cache twice the size (a benchmark peer,
        # "what an INT8 cache buys"; the scales still apply)
        require(isinstance(c, torch.Tensor) and c.dim() == 3 and c.dtype in (torch.int8, torch.bfloat16), n,
                "must be an int8 (or bfloat16) [Hkv, C, D] tensor")
        require(c.device == q.device, n, f"must be on q's device {q.device}")
        require(c.shape[2] == D, n, f"head dim {c.shape[2]} differs from q's {D}")
        require(c.stride(-1) == 1, n, "last dimension must be contiguous (other strides may be anything)")
    require(v_cache.shape == k_cache.shape and v_cache.stride() == k_cache.stride() and v_cache.dtype == k_cache.dtype,
            "v_cache", "must have k_cache's shape, strides and dtype")
    Hkv, C = k_cache.shape[:2]
    require(Hkv > 0 and Hq % Hkv == 0 and Hq // Hkv <= MAX_GROUP, "k_cache",
            f"Hq={Hq} must be Hkv={Hkv} times 1 to {MAX_GROUP}")
    for n, s in (("key_scale", key_scale), ("value_scale", value_scale)):
        require(isinstance(s, torch.Tensor) and s.dtype == torch.float32 and tuple(s.shape) == (Hkv, D)
                and s.is_contiguous() and s.device == q.device, n, f"must be a contiguous float32 [{Hkv}, {D}] on {q.device}")
    require(isinstance(indices, torch.Tensor) and indices.dtype == torch.int32, "indices", "must be int32")
    require(indices.device == q.device, "indices", f"must be on {q.device}")
    require((indices.dim() == 2 and indices.shape[0] == T) or (indices.dim() == 3 and indices.shape[:2] == (T, Hkv)),
            "indices", f"must be [T={T}, N] or [T, Hkv={Hkv}, N], got {tuple(indices.shape)}")
    require(indices.stride(-1) == 1, "indices", "last dimension must be contiguous")
    if scale is not None:
        require(math.isfinite(float(scale)) and float(scale) >= 0, "scale", "must be finite and non-negative")


@on_device_of("q")
def sparse_int8_attention(q, k_cache, v_cache, key_scale, value_scale, indices, *, scale=None, tiles_per_split=None,
                          pv_split=None, prefetch=None, pipeline=None, swap_ab=None, qk_int8=None, block_n=None, num_warps=None, num_stages=None, ctas_per_sm=None, merge_block_d=None,
                          gluon=None, gluon_overlap=None, gluon_v_regs=None, ids_early=None, validate=None, pdl=None,
                          out=None, lse=None, _perturb=None, _qk_int8_budget=None):
    """Top-k sparse attention over an INT8 cache. Returns (out [T, Hq, D] bf16, lse [T, Hq] fp32).

    Options (keyword argument, else environment variable ``ATTNKIT_SPARSE_INT8_...``, else default):
    ``tiles_per_split`` (decode split size), ``pv_split`` (probability high/low split, default on),
    ``prefetch`` (gather the next tile's rows during the current one, default off: slower where measured),
    ``pipeline`` (the plain loop, its gathers pipelined by Triton through shared memory; default off, slower where
    timed), ``swap_ab`` (candidates on the MMA's M side, the heads of a KV head on N) and ``qk_int8`` (with swap_ab:
    scores from integer MMAs of the codes against int8 digits of the folded query), by default the rule: both on the
    direct path at D = 256 over an int8 cache,
    ``block_n`` / ``num_warps`` (the tile: candidates per tile and warps per program; default the plan's rule),
    ``num_stages`` (Triton's software-pipeline stages of the tile loop; default the plan's rule), ``ctas_per_sm`` (the split
    rule's target of programs per SM), ``merge_block_d`` (output dims per merge program, ``ATTNKIT_MERGE_BLOCK_D``),
    ``gluon`` (the swap-AB integer-score tile as the Gluon kernel for sm_90; default: the rule in config.py, wherever
    the kernel can run: a CUDA sm_90 GPU, int8 caches whose pointers and strides are multiples of 16 bytes; False:
    the Triton kernels),
    ``gluon_overlap`` (``ATTNKIT_SPARSE_INT8_GLUON_OVERLAP``: the Gluon kernel issues each tile's score product
    before converting its value codes and waits for it after; the same bits; default off, slower as timed; True
    where the Triton kernels run is refused),
    ``gluon_v_regs`` (``ATTNKIT_SPARSE_INT8_GLUON_V_REGS``: the Gluon kernel's value product takes the value tile from
    registers, converted there from the raw codes, instead of from a bf16 tile in shared memory; the same bits;
    default: on where the Gluon kernel runs, unless gluon_overlap is on; True where the Triton kernels run, or with
    gluon_overlap, is refused),
    ``ids_early`` (``ATTNKIT_SPARSE_INT8_IDS_EARLY``: the first two tiles' ids loaded before the query, in the plain
    loop and the Gluon kernel; the same bits; default on, where the loop takes it: not the Triton swap-AB or
    pipelined loop, where an explicit True is refused),
    ``validate`` (the value checks: indices in range, q and the scales finite; default on; one wait for the GPU;
    turn off under CUDA-graph capture),
    ``pdl`` (``ATTNKIT_PDL``: programmatic dependent launch of the kernels, CUDA sm_90+; default off: no faster in the pdl-sparse_int8 sweep).
    """
    forward_only(q=q, key_scale=key_scale, value_scale=value_scale)
    key = _CALLS.key((q, k_cache, v_cache, key_scale, value_scale, indices, out, lse), (scale, tiles_per_split,
                      pv_split, prefetch, pipeline, swap_ab, qk_int8, block_n, num_warps, num_stages, ctas_per_sm,
                      merge_block_d, gluon, gluon_overlap, gluon_v_regs, ids_early, validate, pdl, _perturb,
                      _qk_int8_budget))
    cfg = _CALLS.get(key)
    if cfg is None:
        cfg = _configure(q, k_cache, v_cache, key_scale, value_scale, indices, out, lse, scale, tiles_per_split,
                         pv_split, prefetch, pipeline, swap_ab, qk_int8, block_n, num_warps, num_stages, ctas_per_sm,
                         merge_block_d, gluon, gluon_overlap, gluon_v_regs, ids_early, validate, pdl, _perturb,
                         _qk_int8_budget)
        _CALLS.put(key, cfg)
    if cfg.validate:  # one wait for the GPU: the index range and q's finiteness on the device, the scales copied
        span, fin, ks, vs = to_host(index_span(indices), torch.isfinite(q).all(), key_scale, value_scale)
        lo, hi = span.tolist()
        require(lo >= -1 and hi < cfg.C, "indices", f"must lie in [-1, {cfg.C}), found [{lo}, {hi}]")
        # a NaN or infinite query element gives no score a softmax can take; unchecked, the Triton kernel returned
        # such a row as if it saw no slot (0 and LSE -inf, in the interpreter): a plausible answer
        require(bool(fin), "q", "holds a non-finite value")
        require(bool(torch.isfinite(ks).all()), "key_scale", "holds a non-finite value")
        require(bool(torch.isfinite(vs).all()), "value_scale", "holds a non-finite value")
    if out is None:
        out = torch.empty(q.shape, dtype=q.dtype, device=q.device)  # contiguous, whatever q's strides
    if lse is None:
        lse = torch.empty(cfg.lse_shape, dtype=torch.float32, device=q.device)
    if cfg.attn is None:  # no rows
        return out, lse
    if cfg.merge is None:  # direct: the kernel writes out and lse
        cfg.attn(q, k_cache, v_cache, key_scale, value_scale, indices, lse, lse, lse, lse, out, lse, *cfg.ints)
        return out, lse
    m = torch.empty(cfg.m_shape, dtype=torch.float32, device=q.device)
    l = torch.empty(cfg.m_shape, dtype=torch.float32, device=q.device)
    acc = torch.empty(cfg.acc_shape, dtype=torch.float32, device=q.device)
    e = torch.empty(cfg.m_shape[1:], dtype=torch.int32, device=q.device)
    cfg.attn(q, k_cache, v_cache, key_scale, value_scale, indices, m, l, acc, e, out, lse, *cfg.ints)
    cfg.merge(m, l, acc, out, lse, e, *cfg.merge_ints)  # out [T, Hq, D] and lse [T, Hq]: contiguous, [R, D] / [R]
    return out, lse


class _Config(NamedTuple):
    """What a call decides from its arguments' layouts (attnkit._callcache): kept per layout, never a tensor."""
    validate: bool
    C: int
    lse_shape: tuple
    attn: object  # Launch, or None where there is nothing to launch
    ints: tuple  # the attention kernel's arguments after its twelve tensors
    merge: object  # Launch, or None (the direct path)
    merge_ints: tuple
    m_shape: tuple
    acc_shape: tuple


def _configure(q, k_cache, v_cache, key_scale, value_scale, indices, out, lse, scale, tiles_per_split, pv_split,
               prefetch, pipeline, swap_ab, qk_int8, block_n, num_warps, num_stages, ctas_per_sm, merge_block_d,
               gluon, gluon_overlap, gluon_v_regs, ids_early, validate, pdl, _perturb, _qk_int8_budget) -> _Config:
    """Every check and decision of a call that its arguments' layouts fix (see sparse_int8_attention)."""
    tps = TILES_PER_SPLIT.resolve(tiles_per_split)
    pv = PV_SPLIT.resolve(pv_split)
    pf = PREFETCH.resolve(prefetch)
    pipe = PIPELINE.resolve(pipeline)
    require(not (pf and pipe), "pipeline", "replaces the hand-written prefetch; it cannot be combined with prefetch=True")
    swap = SWAP_AB.resolve(swap_ab)
    require(not (pf and swap), "swap_ab", "runs the plain loop; it cannot be combined with prefetch=True")
    require(not (pipe and swap), "swap_ab", "has its own loop; it cannot be combined with pipeline=True")
    qk8 = QK_INT8.resolve(qk_int8)
    bn_opt = BLOCK_N_OPT.resolve(block_n)
    warps_opt = WARPS_OPT.resolve(num_warps)
    stages = STAGES_OPT.resolve(num_stages)
    ctas = CTAS_OPT.resolve(ctas_per_sm)
    use_gluon = GLUON.resolve(gluon)
    ids_asked = IDS_EARLY.resolve(ids_early)
    overlap = GLUON_OVERLAP.resolve(gluon_overlap)
    v_regs = GLUON_V_REGS.resolve(gluon_v_regs)
    if v_regs is None:  # the rule: on, unless gluon_overlap needs the bf16 value tile
        v_regs = not overlap
    val = bool(VALIDATE.resolve(validate))
    _validate(q, k_cache, v_cache, key_scale, value_scale, indices, scale)
    use_pdl = resolve_pdl(pdl, q.device)
    T, Hq, D = q.shape
    Hkv, C = k_cache.shape[:2]
    N = indices.shape[-1]
    if out is not None:
        require(out.shape == q.shape and out.dtype == q.dtype and out.is_contiguous() and out.device == q.device,
                "out", f"must be a contiguous {tuple(q.shape)} bf16 tensor on {q.device}")
    if lse is not None:
        require(lse.shape == (T, Hq) and lse.dtype == torch.float32 and lse.is_contiguous() and lse.device == q.device,
                "lse", f"must be a contiguous float32 [{T}, {Hq}] tensor on {q.device}")
    none = _Config(val, C, (T, Hq), None, (), None, (), (), ())
    if T == 0:
        return none
    sc = 1.0 / math.sqrt(D) if scale is None else float(scale)
    mant, exp = math.frexp(sc)  # sc = mant * 2^exp, mant in [0.5, 1): pass mant * 2, exp - 1
    mant, exp = (2 * mant, exp - 1) if sc > 0 else (0.0, 0)
    sm = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 132
    if swap is None and (pf or pipe):  # an explicit loop choice keeps the rule's swap-AB tiles out
        swap = False
    gluon_ok = (gluon_runs(q.device) and k_cache.dtype == torch.int8
                and all(c.data_ptr() % 16 == 0 for c in (k_cache, v_cache))
                and k_cache.stride(0) % 16 == 0 and k_cache.stride(1) % 16 == 0)
    require(not (use_gluon and (pipe or pf)), "gluon", "is a swap-AB kernel with its own loop; it cannot be "
            "combined with pipeline=True or prefetch=True")
    require(not (use_gluon and not pv), "pv_split", "the Gluon kernel always splits the probability tile")
    p = plan(T, Hkv, Hq // Hkv, N, sm, tps, D, bn_opt, warps_opt, ctas, stages, swap, qk8,
             int8_cache=k_cache.dtype == torch.int8, gluon=use_gluon, gluon_ok=gluon_ok and pv)
    ids_loop = p.gluon or not (p.swap_ab or pipe)  # the loops that take it
    require(not (ids_early is not None and ids_asked and not ids_loop), "ids_early",
            "is the plain loop's and the Gluon kernel's; it cannot be combined with the Triton swap-AB or pipelined "
            "loop")
    ids_e = bool(ids_asked) and ids_loop
    require(not (gluon_overlap and not p.gluon), "gluon_overlap", "is the Gluon kernel's; the Triton kernels run here")
    require(not (gluon_v_regs and not p.gluon), "gluon_v_regs", "is the Gluon kernel's; the Triton kernels run here")
    require(not (p.gluon and v_regs and overlap), "gluon_v_regs", "leaves no value conversion for gluon_overlap to "
            "overlap; it cannot be combined with gluon_overlap=True")
    R = T * Hq
    m_shape, acc_shape = (p.num_splits, R), (p.num_splits, R, D)
    # the partials as allocated per call (contiguous): m / l [S, R], acc [S, R, D]
    ints = (mant, exp, C, N, p.cands_per_split,
            q.stride(0), q.stride(1), Hq * D, D, k_cache.stride(0), k_cache.stride(1),
            indices.stride(0), indices.stride(1) if indices.dim() == 3 else 0, 0 if p.direct else R,
            0 if p.direct else R * D)
    budget = {} if _qk_int8_budget is None else dict(QK_INT8_BUDGET=float(_qk_int8_budget))
    grid = (T, p.num_splits, Hkv)
    if p.gluon:
        from .kernel_gluon import sparse_int8_gluon_kernel
        attn = Launch(sparse_int8_gluon_kernel, grid, dict(
            HQ=Hq, GROUP=Hq // Hkv, HEAD_DIM=D, BLOCK_R=p.block_r, BLOCK_N=p.block_n, DIRECT=p.direct,
            PERTURB=PERTURBATIONS[_perturb], **budget, PDL=use_pdl, IDS_EARLY=ids_e, OVERLAP=bool(overlap),
            V_REGS=bool(v_regs), num_warps=p.num_warps, **pdl_launch(use_pdl)))
    else:
        from .kernel import sparse_int8_kernel
        attn = Launch(sparse_int8_kernel, grid, dict(
            HQ=Hq, GROUP=Hq // Hkv, HEAD_DIM=D, BLOCK_R=p.block_r, BLOCK_N=p.block_n, DIRECT=p.direct,
            PV_SPLIT=pv, PREFETCH=pf, PERTURB=PERTURBATIONS[_perturb], DOT_F32=interpreting(), PIPE=pipe,
            SWAP=p.swap_ab, QK_INT8=p.qk_int8, **budget, PDL=use_pdl, IDS_EARLY=ids_e, num_warps=p.num_warps,
            num_stages=p.num_stages, **pdl_launch(use_pdl)))
    if p.direct:
        return _Config(val, C, (T, Hq), attn, ints, None, (), m_shape, acc_shape)
    merge = splitk.merge_launch(p.num_splits, R, D, True, merge_block_d, use_pdl, _perturb == "split-lost")
    # the merge reads the partials as allocated (contiguous) and writes out as [R, D] rows of D
    merge_ints = (*merge.extra, R, 1, R * D, D, D)
    return _Config(val, C, (T, Hq), attn, ints, merge, merge_ints, m_shape, acc_shape)
