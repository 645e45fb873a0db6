"""Host side of mqa_decode: the record writer and the decode (head-padded and swap-AB kernels, one finishing merge).
Records and semantics: docs/mqa_decode.md and attnkit.reference.mqa_decode. A call's layout-dependent decisions
(_configure, _configure_write) are kept per argument layout (attnkit._callcache); value checks and launches run every
call."""

from __future__ import annotations

import collections
import math
import numbers
from typing import NamedTuple

import torch

from .. import _runtime, splitk
from .._callcache import CallCache, Launch
from .._runtime import (check_device, forward_only, index_span, on_device_of, pdl_launch, require, resolve_pdl,
                        to_host)
from ..splitk import pdl_rule
from ..contract import FP8_RECORD_BYTES, MQA_DIM, MQA_ROPE_DIM, NVFP4_RECORD_BYTES

from . import config as _config

RECORD_BYTES = {"fp8": FP8_RECORD_BYTES, "nvfp4": NVFP4_RECORD_BYTES}
_CALLS = CallCache("mqa_decode", _config, splitk, _runtime)  # the options of these modules key its entries
_WRITES = CallCache("mqa_write_records", _config, splitk, _runtime)


def _rows_finite(cos_sin, positions):
    """Whether the rows of cos_sin at positions are all finite, reduced on the device (a 0-d bool tensor, for
    to_host): the rows a call rotates by, not the whole table (which may hold every position of a long context).
    Positions are clamped into the table for the gather: a position outside it is the positions check's error.
    A NaN or infinite entry there would rotate q or a record's RoPE dims into non-finite values (unchecked, the
    writer stored such a record's bytes without complaint)."""
    if positions.numel() == 0:
        return torch.ones((), dtype=torch.bool, device=cos_sin.device)
    return torch.isfinite(cos_sin[positions.clamp(0, cos_sin.shape[0] - 1)]).all()


@on_device_of("latent")
def mqa_write_records(latent, positions, cos_sin, slots, cache, fmt: str, *, validate: bool = True, pdl=None,
                      loads_first=None, release_early=None, _perturb=None, _diag_delay_ns=0) -> None:
    """Quantize bf16 latents [n, 512] (RoPE dims rotated at their positions) into records at slot ids
    ``slots`` [n] (page * page_size + offset; -1 skips a row) of ``cache`` [num_pages, page_size, stride] uint8.
    ``pdl`` (else ``ATTNKIT_PDL``, else on where it runs: splitk.pdl_rule): launched as a programmatic dependent
    (CUDA sm_90+). ``loads_first`` (else ``ATTNKIT_MQA_WRITER_LOADS_FIRST``, default: config.WRITER_LOADS_FIRST):
    a row's slot, position and latent loaded together, its stores masked by the slot (the same bytes).
    ``release_early`` (else ``ATTNKIT_MQA_WRITER_RELEASE_EARLY``, default off; no effect without pdl): the next
    kernel released before the writer waits for the kernel before it (mqa_decode_step's writer_release_early).
    ``_diag_delay_ns`` (diagnostics, compiled GPU kernels only): each program spins that many nanoseconds before its
    loads and stores (the stress check's slow writer, which an attention that does not wait must read stale)."""
    forward_only(latent=latent, cos_sin=cos_sin)
    key = _WRITES.key((latent, positions, cos_sin, slots, cache),
                      (fmt, validate, pdl, loads_first, release_early, _perturb, _diag_delay_ns))
    w = _WRITES.get(key)
    if w is None:
        w = _configure_write(latent, positions, cos_sin, slots, cache, fmt, validate, pdl, loads_first,
                             release_early, _perturb, _diag_delay_ns)
        _WRITES.put(key, w)
    if w.validate:  # one wait for the GPU: the slots and positions ([n]) copied, the latents and the rows of cos_sin
        # they rotate by reduced there
        sl, pos, fin, cs_fin = to_host(slots, positions, torch.isfinite(latent).all(), _rows_finite(cos_sin, positions))
        lo, hi = int(sl.min()), int(sl.max())
        require(lo >= -1 and hi < w.slots_total, "slots", f"must lie in [-1, {w.slots_total}), found [{lo}, {hi}]")
        plo, phi = int(pos.min()), int(pos.max())
        require(plo >= 0 and phi < cos_sin.shape[0], "positions", f"must lie in [0, {cos_sin.shape[0]})")
        require(bool(fin), "latent", "holds a non-finite value")
        require(bool(cs_fin), "cos_sin", "holds a non-finite value at a row of positions")
        live = sl[sl >= 0]
        require(live.unique().numel() == live.numel(), "slots", "name a slot twice (the write order would decide)")
    if w.launch is not None:
        w.launch(latent, positions, cos_sin, slots, cache, *w.ints)


class _Write(NamedTuple):
    """What a writer call decides from its arguments' layouts (attnkit._callcache): kept per layout."""
    validate: bool
    slots_total: int
    launch: object  # Launch, or None (no rows)
    ints: tuple


def _configure_write(latent, positions, cos_sin, slots, cache, fmt, validate, pdl, loads_first, release_early,
                     _perturb, _diag_delay_ns) -> _Write:
    """Every check and decision of a writer call that its arguments' layouts fix (see mqa_write_records)."""


    from .config import WRITER_LOADS_FIRST, WRITER_RELEASE_EARLY
    lf = WRITER_LOADS_FIRST.resolve(loads_first)
    early = WRITER_RELEASE_EARLY.resolve(release_early)
    require(fmt in RECORD_BYTES, "fmt", f"must be one of {tuple(RECORD_BYTES)}, got {fmt!r}")
    require(isinstance(latent, torch.Tensor) and latent.dim() == 2 and latent.shape[1] == MQA_DIM
            and latent.dtype == torch.bfloat16, "latent", f"must be a bfloat16 [n, {MQA_DIM}] tensor")
    check_device("latent", latent)
    require(latent.stride(1) == 1, "latent", "last dimension must be contiguous")
    n = latent.shape[0]
    dev = latent.device
    use_pdl = resolve_pdl(pdl, dev, pdl_rule("mqa_decode", "writer"))
    require(isinstance(cache, torch.Tensor) and cache.dim() == 3 and cache.dtype == torch.uint8, "cache",
            "must be a uint8 [num_pages, page_size, record_stride] tensor")
    require(cache.device == dev and cache.is_contiguous(), "cache", f"must be contiguous on {dev}")
    stride = cache.shape[2]
    require(stride >= RECORD_BYTES[fmt] and stride % 16 == 0, "cache",
            f"record stride {stride} must be >= {RECORD_BYTES[fmt]} and a multiple of 16")
    for name, t, dts in (("positions", positions, (torch.int32, torch.int64)), ("slots", slots, (torch.int32, torch.int64))):
        require(isinstance(t, torch.Tensor) and t.dim() == 1 and t.numel() == n and t.dtype in dts
                and t.is_contiguous(), name, f"must be a contiguous int32/int64 [{n}] tensor")
        require(t.device == dev, name, f"must be on {dev}")
    require(isinstance(cos_sin, torch.Tensor) and cos_sin.dim() == 2 and cos_sin.shape[1] == MQA_ROPE_DIM
            and cos_sin.dtype == torch.float32 and cos_sin.is_contiguous() and cos_sin.device == dev, "cos_sin",
            f"must be a contiguous float32 [max_pos, {MQA_ROPE_DIM}] on {dev}")
    require(isinstance(_diag_delay_ns, int) and 0 <= _diag_delay_ns <= 10**7, "_diag_delay_ns",
            "must be an int in [0, 10**7]")
    if _diag_delay_ns:
        from .._runtime import interpreting
        require(dev.type == "cuda" and not interpreting(), "_diag_delay_ns",
                "needs a compiled GPU kernel (the global timer)")
    slots_total = cache.shape[0] * cache.shape[1]
    if n == 0:
        return _Write(False, slots_total, None, ())
    from .kernel_write import mqa_write_kernel
    launch = Launch(mqa_write_kernel, (n,), dict(
        NVFP4=fmt == "nvfp4", ROPE_OFF=_perturb == "rope-not-applied", PDL=use_pdl, LOADS_FIRST=bool(lf),
        RELEASE_EARLY=bool(early) and use_pdl, DIAG_DELAY_NS=_diag_delay_ns, enable_fp_fusion=False,
        **pdl_launch(use_pdl)))
    return _Write(bool(validate), slots_total, launch, (latent.stride(0), stride))




class _LaunchLog:
    """The compile keys of the attention and merge launches in launch order (the warm-up collects its keys here;
    tests read them): indexed by launch number since import, len() counting every launch, but holding only the
    last KEEP keys, so that an engine calling eagerly for days keeps no growing history. Reading a key that has
    been dropped is an IndexError."""

    KEEP = 4096

    def __init__(self):
        self._keys: collections.deque = collections.deque(maxlen=self.KEEP)
        self._n = 0

    def append(self, key) -> None:
        self._keys.append(key)
        self._n += 1

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        first = self._n - len(self._keys)
        if isinstance(i, slice):
            start, stop, step = i.indices(self._n)
            if start < first and start < stop:
                raise IndexError(f"launch keys before launch {first} have been dropped (asked from {start})")
            return [self._keys[j - first] for j in range(start, stop, step)]
        j = i + self._n if i < 0 else i
        if not first <= j < self._n:
            raise IndexError(f"launch key {i} is not held (launches {first} to {self._n - 1} are)")
        return self._keys[j - first]


LAUNCHED_KEYS = _LaunchLog()


def _key(kernel: str, H: int, plan, fmt: str, pdl: bool = False, e2m1_bits: bool = False, early: bool = False,
         one_tile: bool = False) -> tuple:
    """What a launch compiles: the kernel and its constexpr values (the shapes that vary per step, T and
    the slot counts, are runtime arguments)."""
    gl = (("_gluon" + ("_fused" if plan.fused_merge else "") + ("_async" if plan.gluon_async else "")
           + ("_early" if plan.gluon_early else "") + ("_half" if plan.live < plan.block_n else "")
           + ("_banks" if plan.gluon_banks else "")
           + (f"_maxnreg{plan.maxnreg}" if plan.maxnreg else "") + ("_oneloop" if plan.one_loop else "")
           + ("_loadsfirst" if plan.loads_first else "") + (f"_prologue{plan.prologue}" if plan.prologue else "")
           + (f"_cluster{plan.cluster_ctas}s{plan.num_splits}" if getattr(plan, "cluster", 0) else ""))
          if getattr(plan, "gluon", False) else "")
    gl += "_idsearly" if getattr(plan, "ids_early", False) else ""
    gl += "_onetile" if one_tile else ""
    return (kernel + gl + ("_e2m1bits" if e2m1_bits else "") + ("_pdl" if pdl else "") + ("_early_inputs" if early else ""),
            H, plan.block_n,
            getattr(plan, "out_dc", 512), plan.num_warps, fmt) + (
        (plan.num_stages,) if hasattr(plan, "num_stages") else ())  # the head-padded kernel's pipeline stages


def _cluster_prepare(compiled, ctas: int) -> None:
    """Make `compiled` launch as thread-block clusters of `ctas` CTAs along x (a 1-D grid of clusters x ctas CTAs;
    cluster c holds CTAs c * ctas .. c * ctas + ctas - 1). The kernel is compiled as a plain one-CTA kernel (its
    layouts need no cluster form: the CTAs share nothing but global memory and the cluster barrier); Triton's
    launcher makes a cluster launch from the compiled kernel's num_ctas, which is set here on the compiled kernel
    this launch's constexpr values select (a kernel compiled for cluster launches only: CLUSTER in its key). Run
    once per compiled kernel before its launches (attnkit._callcache.Launch's prepare)."""
    nw, nc, shared = compiled.packed_metadata
    require(nc in (1, ctas), "gluon_cluster", f"the compiled kernel launches clusters of {nc} CTAs, not {ctas}")
    compiled.packed_metadata = (nw, ctas, shared)
    from .config import CLUSTER_MAX_CTAS, CLUSTER_PORTABLE_CTAS
    if CLUSTER_PORTABLE_CTAS < ctas < CLUSTER_MAX_CTAS:  # Triton's launcher allows a non-portable size of 16 only
        _allow_non_portable_cluster(compiled)


_NON_PORTABLE_SET: set = set()  # CUfunction handles whose non-portable cluster size attribute is set


def _allow_non_portable_cluster(compiled) -> None:
    """Sets CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED (14 in cuda.h) on a compiled kernel, once: clusters
    of 9 to 15 CTAs (gluon_cluster_exact) need it, and Triton's launcher sets it for 16 only."""
    if getattr(compiled, "function", None) is None:
        compiled._init_handles()
    fn = compiled.function
    if fn in _NON_PORTABLE_SET:
        return
    import ctypes
    rc = ctypes.CDLL("libcuda.so.1").cuFuncSetAttribute(ctypes.c_void_p(fn), ctypes.c_int(14), ctypes.c_int(1))
    require(rc == 0, "gluon_cluster_exact", f"cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED) failed: CUresult "
            f"{rc} (a GPU without non-portable cluster sizes)")
    _NON_PORTABLE_SET.add(fn)


PERTURBATIONS = {None: 0, "slot-tile-lost": 1, "scale-block-off-by-one": 2, "sink-dropped": 0, "rope-not-undone": 0}


@on_device_of("q")
def mqa_decode_attention(q, swa_cache, comp_cache, swa_idx, comp_idx, positions, cos_sin, sink, num_heads,
                         softmax_scale, comp_format="fp8", *, num_splits=None, kernel=None, out_dc=None,
                         validate=True, out=None, lse=None, workspace=None, out_fp8=None, out_scale=None,
                         swapab_per_format=None, gluon=None, gluon_prefetch=None, gluon_warps=None, gluon_fused=None,
                         gluon_async=None, gluon_e2m1_bits=None, gluon_early=None, gluon_half=None, gluon_banks=None,
                         gluon_maxnreg=None, gluon_one_loop=None, gluon_loads_first=None, gluon_prologue=None,
                         gluon_cluster=None, gluon_wide=None, gluon_cluster_exact=None, gluon_one_tile=None,
                         merge_dc=None, merge_warps=None,
                         merge_early=None, headpad_stages=None,
                         headpad_block_n=None, headpad_ids_early=None,
                         pdl=None, pdl_early_inputs=None,
                         _perturb=None, _pdl_skip_wait=False, _diag_parts=0,
                         _return_fp32=False,
                         _merge_block_s=None):
    """MQA decode over fp8 / nvfp4 records. Returns (out [T, H, 512] bf16, lse [T, H] fp32).

    kernel: None (the dispatch rule, ``config.use_swapab``), "headpad" (heads on M padded to 64, any H) or
    "swapab" (slots on M, H in {16, 32}). gluon (else ``ATTNKIT_MQA_GLUON``): the swap-AB kernel in Gluon
    (sm_90 GPUs; each record value decoded once) instead of Triton; default: Gluon wherever it runs. The
    gluon_* options below are the Gluon kernel's: where the Triton swap-AB kernel runs, one asked for by keyword (a
    switch True, any count) is a ValueError, not ignored, and a bad value in the environment raises as it would for
    the Gluon kernel.
    gluon_prefetch (else ``ATTNKIT_MQA_GLUON_PREFETCH``, default on): the Gluon kernel loads the next tile's slot
    ids before the current tile's records. gluon_warps (else ``ATTNKIT_MQA_GLUON_WARPS``): 4, 8 or 16 warps per Gluon
    program (one, two or four warpgroups; 16 with wide tiles only); default: 8, but 16 where the rule takes wide tiles
    over fp8 compressed records. gluon_fused (else ``ATTNKIT_MQA_GLUON_FUSED``): the Gluon kernel merges
    each token's splits itself (its last program to finish), so the step is one launch; default: the rule, where a
    token has at most two splits (from 48 tokens at the default list lengths). gluon_async (else
    ``ATTNKIT_MQA_GLUON_ASYNC``): the Gluon kernel copies the raw records into shared memory with cp.async, a tile
    ahead (the first tile's while the query is prepared). gluon_early (else ``ATTNKIT_MQA_GLUON_EARLY``): the Gluon
    kernel loads the first tiles' slot ids before the query, so the two loads' latencies overlap (the same bits;
    needs gluon_prefetch, not gluon_async; default: the rule, on unless gluon_async is set or gluon_prefetch is
    off, 0.3-2.8 % faster in the mqa-gluon-early sweep). gluon_half (else ``ATTNKIT_MQA_GLUON_HALF``): the Gluon
    kernel's tiles hold 32 live slots instead of 64 (twice the programs, each shorter; not with gluon_async);
    default: the rule ``config.gluon_half_rule``. gluon_e2m1_bits (else ``ATTNKIT_MQA_GLUON_E2M1_BITS``,
    default on, 1-4 % faster in the mqa-gluon-e2m1 sweep): the Gluon kernel decodes nvfp4 codes from their bits
    into bf16 with two bf16x2 products (the same values). gluon_maxnreg (else ``ATTNKIT_MQA_GLUON_MAXNREG``): the
    Gluon kernel's registers per thread at most; at 128 or fewer two programs fit an SM and the split rule counts
    them (more splits where a step has more tiles than one program per SM takes in one wave); default: the
    compiler's choice. gluon_one_loop (else ``ATTNKIT_MQA_GLUON_ONE_LOOP``): the Gluon kernel walks both slot lists'
    tiles in one loop instead of one loop per list (the same tiles in the same order, the same bits; in the second
    of two loops ptxas rebuilds the MMAs' descriptors per MMA; needs gluon_prefetch, not gluon_async); default: the
    rule. gluon_loads_first (else ``ATTNKIT_MQA_GLUON_LOADS_FIRST``): the Gluon kernel issues a tile's record loads
    all before its first decoded chunk is stored (the same bits; not with gluon_async); default: the rule.
    gluon_prologue (else ``ATTNKIT_MQA_GLUON_PROLOGUE``, 0 / 1 / 2): how many of a Gluon program's first loads are
    issued before the query is stored to shared memory: 0, each query block's after the previous block's store; 1,
    all of the query's; 2, the split's first tile's records too (the same bits; level 2 needs gluon_early and whole
    tiles, not with gluon_async, gluon_one_loop or pdl_early_inputs); default: the rule. gluon_cluster (else
    ``ATTNKIT_MQA_GLUON_CLUSTER``): each token's splits run as one thread-block cluster of up to 16 CTAs that merges
    them itself after a cluster barrier, so the step is one launch (at most 16 splits per token; not with
    gluon_fused); default: the rule ``config.gluon_cluster_rule`` (16 heads x 1-4 tokens, 32 heads x 2-4 and x 1
    token for nvfp4 compressed records, and where the rule's wide tiles run). gluon_wide (else
    ``ATTNKIT_MQA_GLUON_WIDE``): the Gluon kernel's tiles hold 128 slots (each warpgroup's score product 64 of
    them, one softmax and one value product over the 128) instead of 64, so a split walks half as many tiles (not
    with gluon_async, gluon_half, gluon_one_loop or gluon_prologue level 2); default: the rule
    ``config.gluon_wide_rule`` (12 to 22 tokens, and 10 over nvfp4 records; it takes 64-slot tiles where one of those
    is asked for).
    gluon_cluster_exact (else ``ATTNKIT_MQA_GLUON_CLUSTER_EXACT``): with the cluster merge, 9 to 15 splits a token
    run as a non-portable cluster of one CTA per split (8 of them merging) instead of one of 16; default: the rule
    (16 heads over nvfp4 records, ``config.GLUON_CLUSTER_EXACT_BY``).
    gluon_one_tile (else ``ATTNKIT_MQA_GLUON_ONE_TILE``, default off): where every split is one tile of one list
    (64 slots per split, the window list a multiple of 64 long, prologue level 2), the kernel is compiled without
    the list loops that would run no tile (the same bits); elsewhere it changes nothing.
    Defaults and their measurements: ``config.py``.
    swapab_per_format (else ``ATTNKIT_MQA_SWAPAB_PER_FORMAT``, default off): with the Triton swap-AB kernel, the
    rule uses the cutoff of the step's record format (swap-AB for fp8) instead of the single cutoff over both
    formats. num_splits: slot-list splits per token (default: the split rule);
    out_dc: output dims per head-padded program (default ``ATTNKIT_MQA_HEADPAD_OUT_DC`` or the rule
    ``config.headpad_out_dc_rule``: 256 at one token and at two for fp8, else 512).
    headpad_stages: software-pipeline stages of the head-padded tile loop (Triton num_stages, 1 to 4; default
    ``ATTNKIT_MQA_HEADPAD_STAGES`` or 1: the record codes loaded into registers, 3-11 % faster than Triton's
    default 3 in the mqa-headpad-stages sweep). headpad_block_n: slots per head-padded tile, 16 / 32 / 64 (default
    ``ATTNKIT_MQA_HEADPAD_BLOCK_N`` or 32). headpad_ids_early (else ``ATTNKIT_MQA_HEADPAD_IDS_EARLY``, default off):
    the head-padded kernel loads the first tiles' slot ids before the query and each next tile's before the current
    tile's records (the same bits).
    merge_dc: output dims per program of the finishing merge, 64 / 128 / 256 / 512 (default
    ``ATTNKIT_MQA_MERGE_DC`` or the rule ``config.merge_dc_rule``: 256 for the swap-AB kernel but from 9 to 31
    tokens, else 512).
    merge_warps: warps per merge program, 1 / 2 / 4 / 8 / 16 (default ``ATTNKIT_MQA_MERGE_WARPS`` or the rule
    ``config.merge_warps``: 8 at 512 dims, 4 at 256, 2 below).
    merge_early (else ``ATTNKIT_MQA_MERGE_EARLY``): the merge reads the sink, the token's position and its cos /
    sin at entry (under pdl before it waits for the attention kernel, which writes none of them) instead of after
    its loop over the splits; the same bits.
    out_fp8, out_scale: optional MXFP8 output buffers [T, H_pad, 512] float8_e4m3fn and [T, H_pad, 16] uint8
    (UE8M0); when given, the live heads' rows are written there (the padding heads' bytes are never
    touched) and the bf16 output is still returned.
    out [T, H, 512] bf16, lse [T, H] fp32, workspace (``mqa_decode_workspace``): optional caller-owned
    buffers; with all three given and validate=False a call allocates nothing and syncs nothing (the
    workspace is sized for the largest step; a step of fewer tokens uses its front; its last elements are the
    fused merge's arrival counters, which must be zero before a call and are zero after one:
    ``mqa_decode_workspace`` returns them zeroed).
    Launches: the attention kernel and the finishing merge (one launch with the fused merge; plus the MXFP8
    quantizer when asked). pdl (else ``ATTNKIT_PDL``; default: splitk.pdl_rule, on for the swap-AB kernel where it
    runs, for the head-padded one at 1 and 2 tokens only): each launched as a programmatic dependent of the kernel
    before it (CUDA sm_90+), so a launch overlaps the previous kernel's tail. pdl_early_inputs (else
    ``ATTNKIT_MQA_PDL_EARLY_INPUTS``, default off; no effect without pdl): the attention kernel reads q, positions,
    cos_sin and the slot lists and prepares the query before it waits for the kernel launched just before it, which
    must write none of them nor the sink (the merge, released before that wait, reads the sink, positions and
    cos_sin early with merge_early). In a step, ``mqa_write_records`` writes only its cache, so the query's
    preparation overlaps the writer. Not with gluon_async.
    """
    forward_only(q=q, cos_sin=cos_sin, sink=sink)
    tensors = (q, swa_cache, comp_cache, swa_idx, comp_idx, positions, cos_sin, sink, out, lse, workspace, out_fp8,
               out_scale)
    scalars = (num_heads, softmax_scale, comp_format, num_splits, kernel, out_dc, validate, swapab_per_format, gluon,
               gluon_prefetch, gluon_warps, gluon_fused, gluon_async, gluon_e2m1_bits, gluon_early, gluon_half,
               gluon_banks, gluon_maxnreg, gluon_one_loop, gluon_loads_first, gluon_prologue, gluon_cluster,
               gluon_wide, gluon_cluster_exact, gluon_one_tile, merge_dc, merge_warps, merge_early, headpad_stages,
               headpad_block_n, headpad_ids_early, pdl, pdl_early_inputs, _perturb, _return_fp32, _merge_block_s)
    # the diagnostics variants warn on every call: never kept
    key = None if (_diag_parts or _pdl_skip_wait) else _CALLS.key(tensors, scalars)
    cfg = _CALLS.get(key)
    if cfg is None:
        cfg = _configure(*tensors, *scalars, _pdl_skip_wait, _diag_parts)
        _CALLS.put(key, cfg)
    T, H, R, S = cfg.T, cfg.H, cfg.R, cfg.S
    dev = q.device
    if cfg.validate:  # one wait for the GPU: reductions of the slot lists and q on the device, the small rest copied
        # q's live heads only: the padding heads are never read, and may hold anything
        flags = torch.cat([index_span(swa_idx), index_span(comp_idx),
                           torch.isfinite(q[:, :H]).all().to(torch.int32).view(1),
                           _rows_finite(cos_sin, positions).to(torch.int32).view(1)])
        flags, pos, snk = to_host(flags, positions, sink)
        flags = flags.tolist()
        for i, (n, total) in enumerate((("swa_idx", cfg.swa_slots), ("comp_idx", cfg.comp_slots))):
            lo, hi = flags[2 * i: 2 * i + 2]
            require(lo >= -1 and hi < total, n, f"must lie in [-1, {total})")
        require(int(pos.min()) >= 0 and int(pos.max()) < cos_sin.shape[0], "positions",
                f"must lie in [0, {cos_sin.shape[0]})")
        require(bool(flags[4]), "q", "holds a non-finite value")
        require(bool(flags[5]), "cos_sin", "holds a non-finite value at a row of positions")
        require(not bool(torch.isnan(snk).any()), "sink", "holds a NaN")
    if out is None:
        out = torch.empty((T, H, MQA_DIM), dtype=torch.bfloat16, device=dev)
    if lse is None:
        lse = torch.empty((T, H), dtype=torch.float32, device=dev)
    o32 = torch.empty((T, H, MQA_DIM), dtype=torch.float32, device=dev) if cfg.want32 else lse
    if cfg.attn is None:  # no tokens
        return (out, lse, o32) if _return_fp32 else (out, lse)
    if workspace is None:
        m = torch.empty((S, R), dtype=torch.float32, device=dev)
        l = torch.empty((S, R), dtype=torch.float32, device=dev)
        acc = torch.empty((S, R, MQA_DIM), dtype=torch.float32, device=dev)
        count = torch.zeros(T, dtype=torch.int32, device=dev) if cfg.fused else m
    else:
        a0, need = cfg.ws_offsets
        m = workspace[:S * R].view(S, R)
        l = workspace[S * R:2 * S * R].view(S, R)
        acc = workspace[a0:need].view(S, R, MQA_DIM)
        # the fused merge's arrival counters: the last T elements, zero between calls (each call resets them)
        count = workspace[workspace.numel() - T:].view(torch.int32)
    for k in cfg.keys:
        LAUNCHED_KEYS.append(k)
    sc = float(softmax_scale)
    if cfg.kind == "gluon":
        cfg.attn(q, positions, cos_sin, swa_cache, comp_cache, swa_idx, comp_idx, m, l, acc, sc, *cfg.ints, count,
                 sink, out, lse, o32)
    elif cfg.kind == "swapab":
        cfg.attn(q, positions, cos_sin, swa_cache, comp_cache, swa_idx, comp_idx, m, l, acc, sc, *cfg.ints)
    else:
        cfg.attn(q, positions, cos_sin, swa_cache, comp_cache, swa_idx, comp_idx, m, l, acc, sc, *cfg.ints[:3], H,
                 *cfg.ints[3:])
    if cfg.merge is not None:
        cfg.merge(m, l, acc, sink, positions, cos_sin, out, lse, o32, S, H, R, R * MQA_DIM)
    if cfg.mxfp8 is not None:
        cfg.mxfp8(o32, out_fp8.view(torch.uint8), out_scale, H, q.shape[1])
    if _return_fp32:  # tests: the fp32 output the bf16 and MXFP8 outputs are rounded from
        return out, lse, o32
    return out, lse


class _Config(NamedTuple):
    """What an attention call decides from its arguments' layouts (attnkit._callcache): kept per layout, never a
    tensor."""
    validate: bool
    T: int
    H: int
    R: int
    S: int
    swa_slots: int
    comp_slots: int
    want32: bool
    fused: bool
    ws_offsets: tuple  # (start of the accumulator, end) in a caller's workspace
    keys: tuple  # LAUNCHED_KEYS entries of a call
    kind: str  # "gluon", "swapab" (Triton) or "headpad"
    attn: object  # Launch, or None where there is nothing to launch
    ints: tuple  # the attention kernel's arguments after the softmax scale (headpad: H goes after the third)
    merge: object  # Launch or None
    mxfp8: object  # Launch or None


def _configure(q, swa_cache, comp_cache, swa_idx, comp_idx, positions, cos_sin, sink, out, lse, workspace, out_fp8,
               out_scale, num_heads, softmax_scale, comp_format, num_splits, kernel, out_dc, validate,
               swapab_per_format, gluon, gluon_prefetch, gluon_warps, gluon_fused, gluon_async, gluon_e2m1_bits,
               gluon_early, gluon_half, gluon_banks, gluon_maxnreg, gluon_one_loop, gluon_loads_first,
               gluon_prologue, gluon_cluster, gluon_wide, gluon_cluster_exact, gluon_one_tile, merge_dc,
               merge_warps, merge_early, headpad_stages, headpad_block_n, headpad_ids_early, pdl, pdl_early_inputs,
               _perturb, _return_fp32, _merge_block_s, _pdl_skip_wait, _diag_parts) -> _Config:
    """Every check and decision of an attention call that its arguments' layouts fix (see mqa_decode_attention)."""
    require(comp_format in RECORD_BYTES, "comp_format", f"must be one of {tuple(RECORD_BYTES)}")
    require(isinstance(q, torch.Tensor) and q.dim() == 3 and q.shape[2] == MQA_DIM and q.dtype == torch.bfloat16,
            "q", f"must be a bfloat16 [T, H_pad, {MQA_DIM}] tensor")
    check_device("q", q)
    require(q.stride(2) == 1, "q", "last dimension must be contiguous")
    T, H_pad, _ = q.shape
    require(isinstance(num_heads, numbers.Integral) and not isinstance(num_heads, bool), "num_heads",
            f"must be an int, got {num_heads!r}")
    H = int(num_heads)
    require(1 <= H <= H_pad, "num_heads", f"must lie in [1, H_pad={H_pad}]")
    dev = q.device
    for n, c, size in (("swa_cache", swa_cache, RECORD_BYTES["fp8"]), ("comp_cache", comp_cache, RECORD_BYTES[comp_format])):
        require(isinstance(c, torch.Tensor) and c.dim() == 3 and c.dtype == torch.uint8 and c.is_contiguous()
                and c.device == dev, n, f"must be a contiguous uint8 [pages, page_size, stride] on {dev}")
        require(c.shape[2] >= size and c.shape[2] % 16 == 0, n, f"record stride must be >= {size} and a multiple of 16")
    for n, ix in (("swa_idx", swa_idx), ("comp_idx", comp_idx)):
        require(isinstance(ix, torch.Tensor) and ix.dim() == 2 and ix.shape[0] == T and ix.dtype == torch.int32
                and ix.stride(1) == 1 and ix.device == dev, n, f"must be an int32 [T={T}, n] tensor on {dev}")
    require(isinstance(positions, torch.Tensor) and positions.shape == (T,) and positions.dtype in (torch.int32, torch.int64)
            and positions.device == dev and positions.is_contiguous(), "positions",
            f"must be a contiguous int32/int64 [{T}] tensor on {dev}")
    require(isinstance(cos_sin, torch.Tensor) and cos_sin.dim() == 2 and cos_sin.shape[1] == MQA_ROPE_DIM
            and cos_sin.dtype == torch.float32 and cos_sin.is_contiguous() and cos_sin.device == dev, "cos_sin",
            f"must be a contiguous float32 [max_pos, {MQA_ROPE_DIM}] on {dev}")
    require(isinstance(sink, torch.Tensor) and sink.shape == (H,) and sink.dtype == torch.float32 and sink.device == dev
            and sink.is_contiguous(), "sink", f"must be a contiguous float32 [{H}] tensor on {dev}")
    require(math.isfinite(float(softmax_scale)), "softmax_scale", "must be finite")
    W, K = swa_idx.shape[1], comp_idx.shape[1]
    from .._runtime import gluon_runs, interpreting
    from .config import (DIAG_ABLATE, GLUON_CLUSTER, GLUON_E2M1_BITS, GLUON_ONE_TILE, GLUON_PREFETCH, MERGE_DC,
                         MERGE_EARLY, MERGE_WARPS, PDL_EARLY_INPUTS,
                         SWAPAB_GLUON,
                         SWAPAB_HEADS, SWAPAB_PER_FORMAT,
                         headpad_plan, merge_dc_rule, merge_warps as merge_warps_rule, swapab_plan,
                         use_swapab)
    require(kernel in (None, "headpad", "swapab"), "kernel", f"must be None, 'headpad' or 'swapab', got {kernel!r}")
    use_gluon = SWAPAB_GLUON.resolve(gluon)
    prefetch = GLUON_PREFETCH.resolve(gluon_prefetch)
    m_early = MERGE_EARLY.resolve(merge_early)  # a bad value raises here, also where the merge is fused
    mw_opt = MERGE_WARPS.resolve(merge_warps)
    require(mw_opt in (None, 1, 2, 4, 8, 16), "merge_warps", f"must be 1, 2, 4, 8 or 16, got {mw_opt}")
    e2m1_bits = GLUON_E2M1_BITS.resolve(gluon_e2m1_bits) and comp_format == "nvfp4"
    one_tile_opt = GLUON_ONE_TILE.resolve(gluon_one_tile)  # a bad value raises here, on every path
    runs = gluon_runs(dev)
    require(not use_gluon or runs, "gluon", "the Gluon swap-AB kernel runs on CUDA sm_90 GPUs only (not in the "
            "interpreter)")
    use_gluon = runs if use_gluon is None else use_gluon
    if kernel is None:
        kernel = "swapab" if use_swapab(T, H, comp_format, SWAPAB_PER_FORMAT.resolve(swapab_per_format),
                                        gluon=use_gluon) else "headpad"
    require(kernel != "swapab" or H in SWAPAB_HEADS, "kernel", f"swapab takes H in {SWAPAB_HEADS}, got H={H}")
    cluster_asked = GLUON_CLUSTER.resolve(gluon_cluster)  # a bad value raises here, whichever kernel runs
    require(not (cluster_asked and kernel == "swapab" and not use_gluon), "gluon_cluster",
            "merges in the clusters of the Gluon swap-AB kernel; the Triton swap-AB kernel (gluon off, or where Gluon "
            "cannot run) launches its merge apart")
    use_pdl = resolve_pdl(pdl, dev, pdl_rule("mqa_decode", kernel, T))
    pl = pdl_launch(use_pdl)
    early_asked = bool(PDL_EARLY_INPUTS.resolve(pdl_early_inputs))  # a bad value raises here, with or without pdl
    sm = torch.cuda.get_device_properties(dev).multi_processor_count if q.is_cuda else 132
    R = T * H
    if out is not None:
        require(isinstance(out, torch.Tensor) and out.shape == (T, H, MQA_DIM) and out.dtype == torch.bfloat16
                and out.is_contiguous() and out.device == dev, "out",
                f"must be a contiguous bfloat16 [{T}, {H}, 512] on {dev}")
    if lse is not None:
        require(isinstance(lse, torch.Tensor) and lse.shape == (T, H) and lse.dtype == torch.float32
                and lse.is_contiguous() and lse.device == dev, "lse",
                f"must be a contiguous float32 [{T}, {H}] on {dev}")
    want32 = _return_fp32 or out_fp8 is not None or out_scale is not None
    swa_slots, comp_slots = swa_cache.shape[0] * swa_cache.shape[1], comp_cache.shape[0] * comp_cache.shape[1]
    val = bool(validate and T)
    if T == 0:
        return _Config(val, T, H, R, 0, swa_slots, comp_slots, want32, False, (), (), "", None, (), None, None)
    common = dict(NVFP4=comp_format == "nvfp4", PERTURB=PERTURBATIONS[_perturb], DOT_F32=interpreting())
    if kernel == "swapab":
        plan = swapab_plan(T, H, W + K, sm, num_splits, dev.type, gluon=use_gluon,
                           gluon_warps=gluon_warps, fused_merge=gluon_fused, gluon_async=gluon_async,
                           gluon_early=gluon_early, gluon_prefetch=prefetch, gluon_half=gluon_half,
                           gluon_banks=gluon_banks, comp_format=comp_format, gluon_maxnreg=gluon_maxnreg,
                           gluon_one_loop=gluon_one_loop, gluon_loads_first=gluon_loads_first,
                           gluon_prologue=gluon_prologue, pdl_early=early_asked and use_pdl,
                           gluon_cluster=cluster_asked, gluon_wide=gluon_wide,
                           gluon_cluster_exact=gluon_cluster_exact)
    else:
        plan = headpad_plan(T, H, W + K, sm, num_splits, dev.type, out_dc, headpad_stages, headpad_block_n,
                            comp_format, headpad_ids_early)
    S = plan.num_splits
    fused = kernel == "swapab" and plan.gluon and plan.fused_merge
    clustered = kernel == "swapab" and plan.gluon and plan.cluster > 0  # the cluster merges: no merge launch
    a0 = -(-2 * S * R // 4) * 4  # the accumulator starts 16-byte aligned (the kernels' vectorized stores)
    need = a0 + S * R * MQA_DIM
    if workspace is not None:
        require(isinstance(workspace, torch.Tensor) and workspace.dtype == torch.float32 and workspace.dim() == 1
                and workspace.is_contiguous() and workspace.device == dev and workspace.numel() >= need + T
                and workspace.data_ptr() % 16 == 0, "workspace",
                f"must be a 16-byte aligned contiguous float32 vector on {dev} of at least {need + T} elements for "
                "this step (mqa_decode_workspace sizes it)")
    # the partials as allocated or viewed per call: m / l [S, R], acc [S, R, 512], all contiguous
    strides = (q.stride(0), q.stride(1), swa_cache.shape[2], comp_cache.shape[2], swa_idx.stride(0),
               comp_idx.stride(0), R, R * MQA_DIM)
    ints = (W, K, plan.slots_per_split, *strides)
    gluon_path = kernel == "swapab" and plan.gluon
    # the Triton swap-AB kernel waits at entry; PDL_EARLY 2 (the diagnostics variant) never waits
    pdl_early = early_asked and use_pdl and (gluon_path or kernel == "headpad")
    pdl_early_mode = (2 if _pdl_skip_wait else 1) if pdl_early else 0
    require(_diag_parts in (0, 1, 2, 3), "_diag_parts", "must be 0, 1, 2 or 3")
    if _diag_parts:
        import warnings
        warnings.warn(f"_diag_parts={_diag_parts}: a diagnostics variant with a stage left out (1: the cluster launch "
                      "without its barrier and merge; 2: without its merge; 3: no merge at all); its results are "
                      "wrong by design", RuntimeWarning, stacklevel=3)
    if _pdl_skip_wait and pdl_early:
        import warnings
        warnings.warn("_pdl_skip_wait: a diagnostics variant that never waits for the grid before it; its results "
                      "are wrong by design", RuntimeWarning, stacklevel=3)
    require(not (pdl_early and gluon_path and plan.gluon_async), "pdl_early_inputs",
            "waits before the list loops; gluon_async copies the first records before the query")
    one_tile = (gluon_path and one_tile_opt and plan.prologue == 2
                and plan.slots_per_split == plan.block_n == plan.live and W % plan.block_n == 0)
    keys = [_key(kernel, H, plan, comp_format, use_pdl, e2m1_bits and gluon_path, pdl_early, one_tile)]
    if gluon_path:
        from .kernel_swapab_gluon import mqa_swapab_gluon_kernel
        kw = dict(H=H, BLOCK_N=plan.block_n, NVFP4=2 if e2m1_bits else common["NVFP4"], PERTURB=common["PERTURB"],
                  PREFETCH=prefetch, FUSED_MERGE=fused, SINK_ON=_perturb != "sink-dropped",
                  ROPE_UNDO=_perturb != "rope-not-undone", WRITE_F32=want32, ASYNC=plan.gluon_async, PDL=use_pdl,
                  EARLY=plan.gluon_early, LIVE=plan.live, PDL_EARLY=pdl_early_mode, BANKS=plan.gluon_banks,
                  ONE_LOOP=plan.one_loop, LOADS_FIRST=plan.loads_first, PROLOGUE=plan.prologue,
                  **({"ONE_TILE": True} if one_tile else {}), num_warps=plan.num_warps,
                  **({"maxnreg": plan.maxnreg} if plan.maxnreg else {}), **pl)
        if clustered:
            ctas = plan.cluster_ctas
            attn = Launch(mqa_swapab_gluon_kernel, (T,), dict(kw, CLUSTER=plan.cluster, NSPLIT=S, CTAS=ctas,
                                                               CLUSTER_DIAG=_diag_parts),
                          prepare=lambda compiled: _cluster_prepare(compiled, ctas))
        else:
            attn = Launch(mqa_swapab_gluon_kernel, (T, S), kw)
        kind = "gluon"
    elif kernel == "swapab":
        from .kernel_swapab import mqa_swapab_kernel
        ablate = DIAG_ABLATE.resolve()
        if ablate:
            import warnings
            warnings.warn(f"{DIAG_ABLATE.env}={ablate}: a diagnostics variant with a stage left out; its results "
                          "are wrong by design", RuntimeWarning, stacklevel=3)
        attn = Launch(mqa_swapab_kernel, (T, S), dict(H=H, BLOCK_N=plan.block_n, num_warps=plan.num_warps,
                                                      ABLATE=ablate, PDL=use_pdl, **common, **pl))
        kind = "swapab"
    else:
        from .kernel_headpad import mqa_headpad_kernel
        n_hb = -(-H // plan.block_h)
        attn = Launch(mqa_headpad_kernel, (T, S, n_hb * (MQA_DIM // plan.out_dc)), dict(
            BLOCK_H=plan.block_h, BLOCK_N=plan.block_n, OUT_DC=plan.out_dc,
            num_warps=plan.num_warps, num_stages=plan.num_stages, PDL=use_pdl, PDL_EARLY=pdl_early_mode,
            IDS_EARLY=plan.ids_early, **common, **pl))
        kind = "headpad"
    merge = None
    if not fused and not clustered and _diag_parts != 3:
        from .kernel_merge import mqa_merge_kernel
        mdc = MERGE_DC.resolve(merge_dc) or merge_dc_rule(kernel, T, H)
        mw = merge_warps_rule(mdc, mw_opt)
        require(mdc in (64, 128, 256, 512), "merge_dc", f"must be 64, 128, 256 or 512, got {mdc}")
        keys.append(("merge" + ("_early" if m_early else "") + ("_pdl" if use_pdl else ""), mdc, mw, want32))
        merge = Launch(mqa_merge_kernel, (R, MQA_DIM // mdc), dict(
            BLOCK_S=_merge_block_s or min(32, 1 << max(0, (S - 1).bit_length())), SINK_ON=_perturb != "sink-dropped",
            ROPE_UNDO=_perturb != "rope-not-undone", WRITE_F32=want32, PDL=use_pdl, BLOCK_D=mdc, EARLY=m_early,
            num_warps=mw, **pl))
    mxfp8 = None
    if out_fp8 is not None or out_scale is not None:
        require(isinstance(out_fp8, torch.Tensor) and out_fp8.shape == (T, H_pad, MQA_DIM)
                and out_fp8.dtype == torch.float8_e4m3fn and out_fp8.is_contiguous() and out_fp8.device == dev,
                "out_fp8", f"must be a contiguous float8_e4m3fn [{T}, {H_pad}, {MQA_DIM}] on {dev}")
        require(isinstance(out_scale, torch.Tensor) and out_scale.shape == (T, H_pad, MQA_DIM // 32)
                and out_scale.dtype == torch.uint8 and out_scale.is_contiguous() and out_scale.device == dev,
                "out_scale", f"must be a contiguous uint8 [{T}, {H_pad}, {MQA_DIM // 32}] on {dev}")
        from .kernel_mxfp8 import mxfp8_out_kernel
        mxfp8 = Launch(mxfp8_out_kernel, (R,), dict(PDL=use_pdl, **pl))
    return _Config(val, T, H, R, S, swa_slots, comp_slots, want32, fused, (a0, need), tuple(keys), kind, attn,
                   ints, merge, mxfp8)


@on_device_of("q")
def mqa_decode_step(latent, slots, q, swa_cache, comp_cache, swa_idx, comp_idx, positions, cos_sin, sink, num_heads,
                    softmax_scale, comp_format="fp8", *, new_positions=None, validate=True, pdl=None, **options):
    """One decode step: the step's new latents [n, 512] bf16 written as fp8 records into ``swa_cache`` at slot ids
    ``slots`` [n] (their RoPE dims rotated at ``new_positions``, default ``positions`` when n == T), then the
    attention over both lists (``mqa_decode_attention``'s arguments and keyword options). Returns (out, lse).

    pdl (else ``ATTNKIT_PDL``; default: on where it runs, both kernels): the attention and its merge launched as
    programmatic dependents of the kernel before them, and the attention's query prepared while the writer runs
    (``pdl_early_inputs``, safe here: the kernel launched just before the attention is this step's writer, which
    writes only the window cache). Sweep mqa-pdl-early (``benchmarks/sweeps/h200-0787b50/``): the fastest step for
    both kernels on all 20 cases timed (docs/mqa_decode.md). Before CUDA-graph capture, warm up with
    ``mqa_decode_warmup(..., pdl=on, pdl_early_inputs=on)`` (on: whether PDL runs on the device), which compiles the
    attention and merge launches of such steps. writer_loads_first (else ``ATTNKIT_MQA_WRITER_LOADS_FIRST``):
    ``mqa_write_records``'s loads_first. writer_release_early (else ``ATTNKIT_MQA_WRITER_RELEASE_EARLY``, default
    off; with pdl): the writer releases the attention before it waits for the kernel launched before the step, so
    the attention's launch and query prologue overlap that kernel too. Safe only if that kernel does not let its
    dependents launch early (griddepcontrol.launch_dependents) before it has written q, positions, cos_sin,
    swa_idx, comp_idx and the sink: a kernel without PDL, or one of this library's (none writes them). Where that
    holds, steps took 0.84-1.00x the time (sweep mqa-writer-release-early, config.WRITER_RELEASE_EARLY); where it
    does not, most steps read the old inputs (stress-h200-73b3b4d-release-early-contract.json)."""
    from .._runtime import pdl_runs
    require(isinstance(q, torch.Tensor) and q.dim() == 3, "q", "must be a [T, H_pad, 512] tensor")
    if new_positions is None:
        require(isinstance(latent, torch.Tensor) and latent.dim() == 2 and latent.shape[0] == q.shape[0],
                "new_positions", "needed when the step writes a number of latents other than its T tokens")
        new_positions = positions
    require("pdl_early_inputs" not in options, "pdl_early_inputs", "is set by the step (on with pdl)")
    use_pdl = resolve_pdl(pdl, q.device, pdl_runs(q.device))
    writer_lf = options.pop("writer_loads_first", None)
    writer_early = options.pop("writer_release_early", None)
    mqa_write_records(latent, new_positions, cos_sin, slots, swa_cache, "fp8", validate=validate, pdl=use_pdl,
                      loads_first=writer_lf, release_early=writer_early)
    return mqa_decode_attention(q, swa_cache, comp_cache, swa_idx, comp_idx, positions, cos_sin, sink, num_heads,
                                softmax_scale, comp_format, validate=validate, pdl=use_pdl, pdl_early_inputs=use_pdl,
                                **options)


def mqa_decode_workspace(max_tokens: int, num_heads: int, device, *, window: int = 128, topk: int = 512,
                         kernel=None, comp_format: str = "fp8", swapab_per_format=None, gluon=None,
                         gluon_warps=None, gluon_async=None, gluon_half=None, gluon_maxnreg=None) -> torch.Tensor:
    """The split partials buffer for steps of up to ``max_tokens`` tokens of a layer (fixed H, list lengths),
    to pass as ``workspace=`` so that a step allocates nothing (e.g. before CUDA-graph capture); the options that
    change the split count must be the step's. Zeroed: its last elements are the fused merge's counters."""
    from .._runtime import gluon_runs
    from .config import SWAPAB_GLUON, SWAPAB_PER_FORMAT, headpad_plan, swapab_plan, use_swapab
    dev = torch.device(device)
    use_gluon = SWAPAB_GLUON.resolve(gluon)
    use_gluon = gluon_runs(dev) if use_gluon is None else use_gluon
    sm = torch.cuda.get_device_properties(dev).multi_processor_count if dev.type == "cuda" else 132
    need = 0
    for T in range(1, max_tokens + 1):
        k = kernel or ("swapab" if use_swapab(T, num_heads, comp_format, SWAPAB_PER_FORMAT.resolve(swapab_per_format),
                                              gluon=use_gluon) else "headpad")
        if k == "swapab":
            plan = swapab_plan(T, num_heads, window + topk, sm, None, dev.type, gluon=use_gluon,
                               gluon_warps=gluon_warps, gluon_async=gluon_async, gluon_half=gluon_half,
                               gluon_maxnreg=gluon_maxnreg)
        else:
            plan = headpad_plan(T, num_heads, window + topk, sm, None, dev.type, comp_format=comp_format)
        sr = plan.num_splits * T * num_heads
        need = max(need, -(-2 * sr // 4) * 4 + sr * MQA_DIM)
    # + the fused merge's arrival counters (one per token, zero between calls)
    return torch.zeros(need + max_tokens, dtype=torch.float32, device=dev)


@on_device_of("device")
def mqa_decode_warmup(num_heads: int, h_pad: int, comp_format: str, device, *, window: int = 128, topk: int = 512,
                      max_tokens: int = 16, kernel=None, page_size: int = 64, swapab_per_format=None,
                      gluon=None, gluon_e2m1_bits=None, gluon_half=None, pdl=None, pdl_early_inputs=None,
                      headpad_stages=None, headpad_block_n=None, gluon_maxnreg=None, merge_early=None, merge_warps=None,
                      headpad_ids_early=None,
                      gluon_one_loop=None, gluon_loads_first=None, gluon_prologue=None, gluon_cluster=None,
                      gluon_wide=None, gluon_cluster_exact=None, gluon_one_tile=None) -> set:
    """Compile the attention and merge kernels a layer's steps will launch (fixed H, format, list lengths) before
    CUDA-graph capture, by running each step size 1 .. max_tokens once on small random data. Returns the
    set of compile keys launched."""
    from ..reference.mqa_decode import RECORD_FORMATS
    g = torch.Generator().manual_seed(0)
    keys = set()
    for T in range(1, max_tokens + 1):
        pages = -(-(window + topk) // page_size) + 1
        mk = lambda fmt: torch.zeros(pages, page_size, (RECORD_FORMATS[fmt][0] + 15) // 16 * 16,  # noqa: E731
                                     dtype=torch.uint8, device=device)
        q = torch.randn(T, h_pad, MQA_DIM, generator=g).to(torch.bfloat16).to(device)
        idx_w = torch.arange(window, dtype=torch.int32, device=device).repeat(T, 1)
        idx_c = torch.arange(topk, dtype=torch.int32, device=device).repeat(T, 1)
        cs = torch.zeros(1, MQA_ROPE_DIM, device=device)
        cs[:, :32] = 1.0
        n0 = len(LAUNCHED_KEYS)
        mqa_decode_attention(q, mk("fp8"), mk(comp_format), idx_w, idx_c, torch.zeros(T, dtype=torch.long, device=device),
                             cs, torch.zeros(num_heads, device=device), num_heads, 0.05, comp_format, kernel=kernel,
                             validate=False, swapab_per_format=swapab_per_format, gluon=gluon,
                             gluon_e2m1_bits=gluon_e2m1_bits, gluon_half=gluon_half, pdl=pdl,
                             pdl_early_inputs=pdl_early_inputs, headpad_stages=headpad_stages,
                             headpad_block_n=headpad_block_n, gluon_maxnreg=gluon_maxnreg, merge_early=merge_early,
                             merge_warps=merge_warps, headpad_ids_early=headpad_ids_early,
                             gluon_one_loop=gluon_one_loop, gluon_loads_first=gluon_loads_first,
                             gluon_prologue=gluon_prologue, gluon_cluster=gluon_cluster, gluon_wide=gluon_wide,
                             gluon_cluster_exact=gluon_cluster_exact, gluon_one_tile=gluon_one_tile)
        keys.update(LAUNCHED_KEYS[n0:])
    return keys
