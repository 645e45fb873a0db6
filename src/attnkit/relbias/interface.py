"""Host side of relbias: validation, dispatch and launch. Kernels: kernel_fwd.py; launch rules:
config.py; semantics: docs/relbias.md and attnkit.reference.relbias. A call's layout-dependent decisions
(_configure, _configure_write) are kept per argument layout (attnkit._callcache), its route per max_seqlen_q and its
decode launches per (max_seqlen_q, max_seqlen_k); value checks and launches run every call."""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import torch
import triton

from .. import _runtime, splitk
from ..splitk import PDL as PDL_OPT
from .._callcache import CallCache, Launch
from .._runtime import (_cuda_capability, check_device, forward_only, interpreting, on_device_of, pdl_launch, require,
                        resolve_pdl, to_host)
from ..contract import BIAS_BEYOND_MODES
from .config import (BLOCK_M_OPT, BLOCK_N_OPT, BLOCK_SIZES, CTAS_OPT, FAST_INTERIOR, HEAVY_FIRST, MAX_EXTENT,
                     SPLIT_LOOPS, STAGES_OPT, SUPPORTED_HEAD_DIMS, WARPS_OPT, DECODE_MAX_Q, DECODE_MAX_ROWS,
                     DECODE_ROWS_OPT, BIAS_PREFETCH, BIAS_STRIP, PAGE_TILES, DECODE_FAST_INTERIOR, FP8_ASM_CVT,
                     FP8_F16_CVT, GLUON, GLUON_BIAS_ACC, GLUON_DECODE, GLUON_DECODE_BIAS_ASYNC, GLUON_DECODE_CVT,
                     GLUON_DECODE_BANKS, GLUON_DECODE_MAXNREG,
                     GLUON_DECODE_KREG, GLUON_DECODE_TMA, gluon_decode_rule, GLUON_BIAS_EARLY,
                     GLUON_BIAS_GATHER, GLUON_LAZY_RESCALE, GLUON_P_SMEM, GLUON_PERSISTENT, GLUON_PINGPONG, GLUON_WS,
                     GLUON_BIAS_AHEAD, GLUON_BIAS_DIAG, GLUON_BIAS_PAIRS, GLUON_WS_UNROLL, GLUON_K_EARLY,
                     GLUON_K_RELEASE, GLUON_TREE_REDUCE,
                     GLUON_HEAD_DIMS, GLUON_PIPE, GLUON_WS_MAXNREG, KV_TMA, decode_plan, fwd_config, gluon_fwd_config,
                     gluon_fwd_rule, gluon_ws_rule,
                     gluon_fwd_takes, gluon_fwd_tile_ok, use_decode)
from . import config as _config

PERTURBATIONS = {None: 0, "bias-dropped": 1, "bias-shifted-kv-block": 2, "window-off-by-one": 3, "gqa-mixed": 4,
                 "split-lost": 0, "token-block-dropped": 5}
_KV_DTYPES = (torch.bfloat16, torch.float16, torch.float8_e4m3fn)
_CALLS = CallCache("relbias", _config, splitk, _runtime)  # the options of these modules key its entries
_WRITES = CallCache("relbias_write_kv", _config, splitk, _runtime)


def _check_cu(name, cu, device):
    require(isinstance(cu, torch.Tensor) and cu.dtype == torch.int32 and cu.dim() == 1 and cu.numel() >= 2,
            name, "must be an int32 tensor [B+1]")
    require(cu.device == device, name, f"must be on {device}, got {cu.device}")
    require(cu.is_contiguous(), name, "must be contiguous (the kernels read entry b at offset b)")


def _validate(q, k, v, cu_seqlens_q, cu_seqlens_k, k_cache, v_cache, block_table, seqused_k, table, window, beyond,
              softmax_scale, k_scale, v_scale, max_seqlen_q=None, max_seqlen_k=None):
    """The checks the arguments' layouts and scalars decide (kept per layout: attnkit._callcache); the value
    checks are _check_values'."""
    require(isinstance(q, torch.Tensor) and q.dim() == 3, "q", "must be [total_q, Hq, D]")
    require(q.dtype in (torch.bfloat16, torch.float16), "q", f"must be bfloat16 or float16, got {q.dtype}")
    check_device("q", q)
    dev = q.device
    total_q, Hq, D = q.shape
    require(D in SUPPORTED_HEAD_DIMS, "q", f"head dim {D} not in {SUPPORTED_HEAD_DIMS}")
    require(q.stride(-1) == 1, "q", "last dimension must be contiguous")
    paged = k_cache is not None
    if paged:
        require(k is None and v is None and cu_seqlens_k is None, "k_cache",
                "give either k, v, cu_seqlens_k (varlen) or k_cache, v_cache, block_table, seqused_k (paged)")
        kk, vv = k_cache, v_cache
        require(isinstance(kk, torch.Tensor) and kk.dim() == 4, "k_cache", "must be [num_blocks, block_size, Hkv, D]")
        require(kk.shape[1] in BLOCK_SIZES, "k_cache", f"block size {kk.shape[1]} not in {BLOCK_SIZES}")
        require(isinstance(block_table, torch.Tensor) and block_table.dtype == torch.int32 and block_table.dim() == 2,
                "block_table", "must be an int32 tensor [B, max_blocks]")
        require(isinstance(seqused_k, torch.Tensor) and seqused_k.dtype == torch.int32 and seqused_k.dim() == 1
                and seqused_k.is_contiguous(), "seqused_k", "must be a contiguous int32 tensor [B]")
        require(block_table.device == dev, "block_table", f"must be on q's device {dev}, got {block_table.device}")
        require(seqused_k.device == dev, "seqused_k", f"must be on q's device {dev}, got {seqused_k.device}")
        require(block_table.stride(-1) == 1, "block_table", "last dimension must be contiguous")
    else:
        require(k is not None and v is not None and cu_seqlens_k is not None, "k",
                "give k, v, cu_seqlens_k (varlen) or k_cache, v_cache, block_table, seqused_k (paged)")
        kk, vv = k, v
        require(isinstance(kk, torch.Tensor) and kk.dim() == 3, "k", "must be [total_k, Hkv, D]")
        _check_cu("cu_seqlens_k", cu_seqlens_k, dev)
    kname = "k_cache" if paged else "k"
    vname = "v_cache" if paged else "v"
    require(kk.dtype in _KV_DTYPES, kname, f"must be bfloat16, float16 or float8_e4m3fn, got {kk.dtype}")
    require(vv.dtype == kk.dtype, vname, f"must have {kname}'s dtype {kk.dtype}, got {vv.dtype}")
    require(vv.shape == kk.shape, vname, f"must have {kname}'s shape {tuple(kk.shape)}, got {tuple(vv.shape)}")
    require(vv.stride() == kk.stride(), vname, f"must have {kname}'s strides")
    require(kk.stride(-1) == 1, kname, "last dimension must be contiguous")
    require(kk.device == dev, kname, f"must be on q's device {dev}, got {kk.device}")
    require(vv.device == dev, vname, f"must be on q's device {dev}, got {vv.device}")
    require(kk.dtype == torch.float8_e4m3fn or kk.dtype == q.dtype, kname,
            f"a bf16/fp16 cache must have q's dtype {q.dtype}, got {kk.dtype}")
    Hkv = kk.shape[-2]
    require(kk.shape[-1] == D, kname, f"head dim {kk.shape[-1]} differs from q's {D}")
    require(Hkv > 0 and Hq % Hkv == 0, kname, f"Hq={Hq} must be a multiple of Hkv={Hkv}")
    fp8 = kk.dtype == torch.float8_e4m3fn
    if fp8:
        for n, s in (("k_scale", k_scale), ("v_scale", v_scale)):
            require(isinstance(s, torch.Tensor) and s.dtype == torch.float32 and tuple(s.shape) == (Hkv,), n,
                    f"an fp8 cache needs a float32 [{Hkv}] per-KV-head scale")
            require(s.device == dev and s.is_contiguous(), n, f"must be contiguous on {dev}")
    else:
        require(k_scale is None and v_scale is None, "k_scale", "scales apply to an fp8 cache only")
    _check_cu("cu_seqlens_q", cu_seqlens_q, dev)
    B = cu_seqlens_q.numel() - 1
    if paged:
        require(block_table.shape[0] == B and seqused_k.numel() == B, "block_table",
                f"must have B={B} rows (cu_seqlens_q has B+1 entries)")
    else:
        require(cu_seqlens_k.numel() == B + 1, "cu_seqlens_k", f"must have B+1={B + 1} entries like cu_seqlens_q")
    require(isinstance(table, torch.Tensor) and table.dim() == 2 and table.shape[0] == Hq, "table",
            f"must be [Hq={Hq}, E]")
    require(table.dtype in (torch.float32, torch.bfloat16), "table", f"must be float32 or bfloat16, got {table.dtype}")
    require(table.device == dev, "table", f"must be on {dev}")
    E = table.shape[1]
    require(1 <= E <= MAX_EXTENT, "table", f"extent E={E} must lie in [1, {MAX_EXTENT}]")
    require(beyond in BIAS_BEYOND_MODES, "beyond", f"must be one of {BIAS_BEYOND_MODES}, got {beyond!r}")
    require(window is None or (isinstance(window, int) and window >= 1), "window", "must be None or an int >= 1")
    if softmax_scale is not None:
        require(math.isfinite(float(softmax_scale)), "softmax_scale", "must be finite")
    # caller-given max_seqlen_q / max_seqlen_k size the grid and the split plan: one below the batch's longest
    # sequence would leave query rows uncomputed or keys unread. Ints >= 0 always; with validate each at least the
    # batch's longest (from the host copies below); without it (CUDA-graph capture, the custom ops) the caller's promise
    for name, val in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if val is not None:
            require(isinstance(val, numbers.Integral) and not isinstance(val, bool) and val >= 0, name,
                    f"must be an int >= 0 (a host value), got {val!r}")
    return paged, fp8, Hkv, B


def _check_values(q, kk, cu_seqlens_q, cu_seqlens_k, block_table, seqused_k, table, k_scale, v_scale, paged, fp8,
                  B, max_seqlen_q, max_seqlen_k):
    """The value checks of ``validate`` (every call; skip them under CUDA-graph capture with validate=False), one
    wait for the GPU: the sequence offsets and the block table copied, the finiteness of q, the table and the scales
    reduced on the device. k and v are not scanned: that would read every key again, as much as a decode call
    reads (docs/relbias.md has the measured cost); relbias_write_kv checks what enters a paged cache. kk: k, or
    k_cache when paged. Returns the batch's longest query and key sequences (None, None when B = 0)."""
    total_q = q.shape[0]
    longest_q = longest_k = None
    # a NaN or infinite q element gives no score a softmax can take: unchecked, the Triton kernel returned its row as
    # if it saw no key (0 and LSE -inf, in the interpreter), a plausible answer
    named = [("q", q), ("table", table)] + ([("k_scale", k_scale), ("v_scale", v_scale)] if fp8 else [])
    cq, *rest, finite = to_host(cu_seqlens_q, *((seqused_k, block_table) if paged else (cu_seqlens_k,)),
                                torch.stack([torch.isfinite(t).all() for _, t in named]))
    require(int(cq[0]) == 0 and bool((cq[1:] >= cq[:-1]).all()) and int(cq[-1]) == total_q, "cu_seqlens_q",
            f"must start at 0, be non-decreasing and end at total_q={total_q}")
    if paged:
        su, bt = rest
        require(bool((su >= 0).all()), "seqused_k", "must be non-negative")
        nb = -(-su.long() // kk.shape[1])
        require(int(nb.max()) <= block_table.shape[1] if B else True, "block_table",
                "has fewer columns than seqused_k needs")
        _check_block_ids(bt, torch.zeros_like(nb), nb, kk.shape[0])
        lk = su
    else:
        (ck,) = rest
        require(int(ck[0]) == 0 and bool((ck[1:] >= ck[:-1]).all()) and int(ck[-1]) <= kk.shape[0],
                "cu_seqlens_k", f"must start at 0, be non-decreasing and end at most at total_k={kk.shape[0]}")
        lk = ck[1:] - ck[:-1]
    if B:
        longest_q, longest_k = int((cq[1:] - cq[:-1]).max()), int(lk.max())
    if B and max_seqlen_q is not None:
        require(max_seqlen_q >= longest_q, "max_seqlen_q", f"{max_seqlen_q} is below the batch's longest query "
                f"sequence ({longest_q}): its rows past {max_seqlen_q} would not be computed")
    if B and max_seqlen_k is not None:
        require(max_seqlen_k >= longest_k, "max_seqlen_k", f"{max_seqlen_k} is below the batch's longest key "
                f"sequence ({longest_k}): the decode split plan would leave its keys past {max_seqlen_k} unread")
    for (n, _), ok in zip(named, finite.tolist()):
        require(bool(ok), n, "holds a non-finite value")
    return longest_q, longest_k


def _check_block_ids(bt, lo, hi, num_blocks):
    """Host block table bt [B, max_blocks]: the ids each row b uses, columns lo[b] to hi[b] (exclusive), must lie in
    [0, num_blocks); the first row that holds one outside is named."""
    cols = torch.arange(bt.shape[1])
    used = (cols[None, :] >= lo[:, None]) & (cols[None, :] < hi[:, None])
    bad = (used & ((bt < 0) | (bt >= num_blocks))).any(dim=1)
    if bool(bad.any()):
        b = int(bad.nonzero()[0, 0])
        require(False, "block_table", f"row {b} holds a block id outside [0, {num_blocks})")


@on_device_of("q")
def relbias_attention(q, k=None, v=None, *, cu_seqlens_q, cu_seqlens_k=None, k_cache=None, v_cache=None,
                      block_table=None, seqused_k=None, table, window=None, beyond="zero", softmax_scale=None,
                      k_scale=None, v_scale=None, max_seqlen_q=None, max_seqlen_k=None, num_splits=None,
                      validate=True, out=None, lse=None, fast_interior=None, heavy_first=None, block_m=None,
                      block_n=None, num_warps=None, num_stages=None, ctas_per_sm=None, merge_block_d=None,
                      split_loops=None, decode_rows=None, bias_prefetch=None, bias_strip=None, page_tiles=None,
                      decode_fast_interior=None, kv_tma=None,
                      pdl=None, gluon=None, gluon_pipe=None, gluon_bias_gather=None, gluon_bias_early=None,
                      gluon_p_smem=None, gluon_lazy_rescale=None, gluon_bias_acc=None, gluon_ws=None,
                      gluon_pingpong=None, gluon_persistent=None, gluon_k_release=None, gluon_k_early=None,
                      gluon_tree_reduce=None, gluon_bias_pairs=None, gluon_bias_ahead=None, gluon_bias_diag=None,
                      gluon_ws_unroll=None, fp8_f16_cvt=None,
                      fp8_asm_cvt=None, gluon_decode=None,
                      gluon_decode_cvt=None, gluon_decode_tma=None,
                      gluon_decode_bias_async=None, gluon_decode_kreg=None, gluon_decode_maxnreg=None,
                      gluon_decode_banks=None,
                      _perturb=None, _force=None, _masked_strip=True, _ws_unused_turns=False):
    """Attention with a relative-position bias table. Returns (out [total_q, Hq, D], lse [total_q, Hq]).

    Dispatch (``config.use_decode``): up to 32 query tokens per sequence go to the split-K decode kernel
    (query heads of one KV head packed into tiles of tokens), longer ones to the forward kernel.
    ``max_seqlen_q`` / ``max_seqlen_k`` size the grid and the split plan, each at least the batch's longest query /
    key sequence (checked with ``validate``; a smaller value is a ``ValueError``); give them (host ints) to avoid
    a device sync, e.g. under CUDA-graph capture together with ``validate=False`` and caller-owned
    ``out`` / ``lse``. ``num_splits`` overrides the decode kernel's split rule. ``fast_interior`` (else
    ``ATTNKIT_RELBIAS_FAST_INTERIOR``): the forward kernel's mask-free interior tiles (default on, as timed).
    Tuning options (each also an ``ATTNKIT_RELBIAS_...`` variable; default: the rules in
    ``attnkit.relbias.config``): ``heavy_first``, ``block_m``, ``block_n``, ``num_warps``, ``num_stages``,
    ``ctas_per_sm`` (the decode split rule's target), ``split_loops`` (branch-free loops, one per kind of key
    tile; the rule: forward tiles of at most 32 query rows, decode past the extent or over a paged cache),
    ``merge_block_d`` (output dims per merge program, ``ATTNKIT_MERGE_BLOCK_D``), ``decode_rows`` (the decode
    kernel's most packed rows per tile), ``bias_prefetch`` (the forward kernel loads each interior tile's bias
    one tile ahead; off: slower than the strip), ``bias_strip`` (a tile builds its bias from its strip of
    distances, loaded once, instead of one load per score; the rule: forward from 33 query tokens,
    decode over contiguous caches), ``page_tiles`` (the decode kernel over a paged cache whose block size is
    at least its key tile reads one block-table entry per tile, not one per key; the rule: on sm_90 from block size
    64, the relbias-paged-tiles sweeps), ``decode_fast_interior`` (the decode kernel's interior key tiles in a loop
    of their own with no mask, clamp or select; the rule: the verify tile of 128 rows at 8 warps, the
    relbias-decode-fast sweep), ``kv_tma`` (the forward kernel's interior tiles of a contiguous cache load K
    and V through TMA tensor descriptors; off: slower, the relbias-fwd-strip-2 sweep), ``pdl`` (``ATTNKIT_PDL``: the decode kernel and its
    merge launched as programmatic dependents, CUDA sm_90+; off: no faster, the pdl-relbias sweep), ``gluon``
    (``ATTNKIT_RELBIAS_GLUON``: prefill and chunks of more than 32 query tokens on the Gluon forward kernel for
    sm_90, over contiguous bf16 / fp16 k, v at D 64 or 128; default: the rule ``config.gluon_fwd_rule``, the Gluon
    kernel wherever it runs and takes the input and no option of the Triton forward kernel alone is set; False:
    the Triton kernel) with ``gluon_pipe`` (its value product overlapped with
    the next tile's softmax, default on), ``gluon_bias_gather`` (the bias built from the tile's strip by a gather,
    default on; off: one cached load per score), ``gluon_bias_early`` (each tile's bias built before its scores are
    waited for; off: no faster), ``gluon_p_smem`` (P to the value product through shared memory, so the product
    stays in flight during the softmax; off: slower), ``gluon_lazy_rescale`` (running maxima kept until they
    grow by 2^8, the accumulator rescaled only when one moved; off: slower), ``gluon_bias_acc`` (each tile's bias
    over softmax_scale starts the score product's accumulator, one fused multiply-add per score in the softmax; used
    when softmax_scale > 0; default: on with gluon_pipe unless gluon_bias_early is set, the relbias-gluon-3 sweep),
    ``gluon_ws`` (the warp-specialized Gluon kernel: a TMA producer warp, two consumer warpgroups of 64 rows sharing
    each key / value tile; default: the rule ``config.gluon_ws_rule``) with ``gluon_pingpong`` (its consumers take
    turns issuing their products; off: 2-4 % slower, the relbias-gluon-ws-4 sweep) and ``gluon_persistent`` (on a persistent grid, one program per SM
    walking the work items; off: slower at prefill 8K) and ``gluon_k_release`` (its key slots released after the
    score products, so the next key tile loads during the softmax; default: on with gluon_ws, 2-6 % faster; both
    timed by the relbias-gluon-ws-3 sweep); ``gluon_tree_reduce`` (both Gluon kernels' row maxima and sums as trees
    instead of dependent chains, in the overlapped schedule; off: no faster, the relbias-gluon-ws-5 sweep);
    ``gluon_bias_pairs`` (the warp-specialized kernel's bias gathered in 64-bit pairs, one shared-memory load per two
    scores of a row, the same values; off: no faster at 8K global, the relbias-gluon-ws-pairs sweep);
    ``gluon_bias_ahead`` (the warp-specialized kernel's strip of table values for each tile loaded during the tile
    before, so the score product it starts does not wait for the load; the same values; default: on with
    gluon_ws, 2.5 % faster at prefill 8K global and 8 % on chunks of 128 rows, the relbias-gluon-ws-ahead sweep);
    ``gluon_bias_diag`` (the warp-specialized kernel's gather one shared-memory load per distinct distance a thread
    holds, 34 of its 64 scores, the rest copied between registers; the same values; default: on wherever it
    applies, 5-6 % faster at prefill 8K global and on chunks of 128 rows, the relbias-gluon-ws-diag sweep);
    ``gluon_ws_unroll`` (the warp-specialized kernel's interior loop two tiles an iteration, with gluon_bias_ahead;
    off: 12-13 % slower than without it, the same sweep);
    ``gluon_k_early`` (the one-warpgroup kernel's key tile j + num_stages
    issued once S_j is done; off: no faster) and the tile options ``block_n``,
    ``num_warps``, ``num_stages``;
    ``fp8_f16_cvt`` (``ATTNKIT_RELBIAS_FP8_F16_CVT``: fp8 k, v converted through fp16 and fp32 instead of by the
    direct cast, the same values; off: slower, the relbias-fp8-cvt sweep); ``fp8_asm_cvt``
    (``ATTNKIT_RELBIAS_FP8_ASM_CVT``: the decode kernel's fp8 k, v converted by inline assembly on the codes as
    loaded, before the move to the MMA operand layout; the same values; compiled kernels only, the interpreter runs
    the direct cast; off: 1.44x slower, the relbias-fp8-asm sweep). ``gluon_decode``
    (``ATTNKIT_RELBIAS_GLUON_DECODE``: the decode path over an fp8 cache on the Gluon kernel for sm_90, swap-AB tiles
    with each code converted once, at D 64 or 128; default: the rule ``config.gluon_decode_rule``, the Gluon kernel
    for tiles of at most 8 packed rows over a contiguous cache;
    its ring depth is ``num_stages``, its split target ``ctas_per_sm``) with ``gluon_decode_cvt`` (how it converts a
    code, 0-3, ``kernel_decode_gluon.py``) and ``gluon_decode_tma`` (its code tiles copied by TMA; default: over a
    contiguous cache with packed rows) and ``gluon_decode_bias_async`` (each tile's bias copied into shared memory
    a ring ahead) and ``gluon_decode_kreg`` (the key codes converted in registers into the score product's operand)
    and ``gluon_decode_maxnreg`` (its registers per thread at most, so that more programs fit an SM) and
    ``gluon_decode_banks`` (its value codes read 8 per thread and its bias tile swizzled: fewer bank conflicts).
    ``_masked_strip=False`` (a diagnostic for the sweeps) keeps the
    per-score lookup in the forward kernel's masked tiles; ``_ws_unused_turns=True`` (a diagnostic for
    benchmarks/experiments/stress_under_load.py) runs the warp-specialized kernel without turns as it was before the
    fix of its turn barriers (made but not used), which returns wrong rows under concurrent GPU load.
    """
    tensors = (q, k, v, cu_seqlens_q, cu_seqlens_k, k_cache, v_cache, block_table, seqused_k, table, k_scale, v_scale,
               out, lse)
    scalars = (window, beyond, softmax_scale, max_seqlen_q, max_seqlen_k, num_splits, validate, fast_interior,
               heavy_first, block_m, block_n, num_warps, num_stages, ctas_per_sm, merge_block_d, split_loops,
               decode_rows, bias_prefetch, bias_strip, page_tiles, decode_fast_interior, kv_tma, pdl, gluon,
               gluon_pipe, gluon_bias_gather, gluon_bias_early, gluon_p_smem, gluon_lazy_rescale, gluon_bias_acc,
               gluon_ws, gluon_pingpong, gluon_persistent, gluon_k_release, gluon_k_early, gluon_tree_reduce,
               gluon_bias_pairs, gluon_bias_ahead, gluon_bias_diag, gluon_ws_unroll, fp8_f16_cvt, fp8_asm_cvt,
               gluon_decode, gluon_decode_cvt, gluon_decode_tma, gluon_decode_bias_async, gluon_decode_kreg,
               gluon_decode_maxnreg, gluon_decode_banks, _perturb, _force, _masked_strip, _ws_unused_turns)
    forward_only(q=q, k=k, v=v, k_cache=k_cache, v_cache=v_cache, table=table, k_scale=k_scale, v_scale=v_scale)
    key = _CALLS.key(tensors, scalars)
    c = _CALLS.get(key)
    if c is None:
        c = _configure(*tensors, *scalars)
        _CALLS.put(key, c)
    paged, B = c.paged, c.B
    kk, vv = (k_cache, v_cache) if paged else (k, v)
    longest_q = longest_k = None
    if c.validate:
        longest_q, longest_k = _check_values(q, kk, cu_seqlens_q, cu_seqlens_k, block_table, seqused_k,
                                                      table, k_scale, v_scale, paged, c.fp8, B, max_seqlen_q,
                                                      max_seqlen_k)
    if max_seqlen_q is None and longest_q is not None:  # from the validation's host copy
        max_seqlen_q = longest_q
    elif max_seqlen_q is None:
        max_seqlen_q = int((cu_seqlens_q[1:] - cu_seqlens_q[:-1]).max()) if B else 0
    if out is None:
        out = torch.empty_like(q)
    if lse is None:
        lse = torch.empty(q.shape[:2], dtype=torch.float32, device=q.device)
    if c.empty:
        return out, lse
    tab = table.float().contiguous() if table.dtype != torch.float32 or not table.is_contiguous() else table
    route = c.routes.get(max_seqlen_q)
    if route is None:
        if len(c.routes) >= _MAX_PLANS:
            c.routes.clear()
        route = c.routes[max_seqlen_q] = _route(c, q, kk, max_seqlen_q)
    if route == "decode":
        if max_seqlen_k is None and longest_k is not None:
            max_seqlen_k = longest_k
        elif max_seqlen_k is None:
            lens = seqused_k if paged else cu_seqlens_k[1:] - cu_seqlens_k[:-1]
            max_seqlen_k = int(lens.max())
        plan = c.plans.get((max_seqlen_q, max_seqlen_k))
        if plan is None:
            if len(c.plans) >= _MAX_PLANS:
                c.plans.clear()
            plan = c.plans[(max_seqlen_q, max_seqlen_k)] = _decode_plan(c, q, kk, vv, block_table, tab.shape[1],
                                                                       max_seqlen_q, max_seqlen_k)
        plan(q, kk, vv, tab, out, lse, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table, k_scale, v_scale)
        return out, lse
    o = c.opts
    if route is not False:  # the Gluon forward kernel, with its configuration for this max_seqlen_q
        _gluon_fwd(q, kk, vv, tab, out, lse, cu_seqlens_q, cu_seqlens_k, c.scale, window,
                   beyond, c.Hkv, B, max_seqlen_q, _perturb, route, o["heavy"], unused_turns=_ws_unused_turns)
        return out, lse
    total_q, Hq, D = q.shape
    fp8, fp8_kind = c.fp8, c.fp8_kind
    cfg = fwd_config(D, max_seqlen_q, q.device.type, block_m=o["bm_opt"], split_loops=o["split"],
                     bias_prefetch=o["prefetch"], bias_strip=o["strip"], kv_tma=o["tma"], **o["tune"])
    k_desc, v_desc = kk, vv
    if cfg.kv_tma:
        k_desc, v_desc = (_kv_descriptor(t, cfg.block_n, paged) for t in (kk, vv))
    from .kernel_fwd import relbias_fwd_kernel
    grid = (triton.cdiv(max(max_seqlen_q, 1), cfg.block_m), B, Hq)
    dummy = cu_seqlens_q
    relbias_fwd_kernel[grid](
        q, kk, vv, tab, out, lse,
        cu_seqlens_q, dummy if paged else cu_seqlens_k, seqused_k if paged else dummy,
        block_table if paged else dummy, k_scale if fp8 else tab, v_scale if fp8 else tab, k_desc, v_desc,
        c.scale, tab.shape[1], window or 0,
        q.stride(0), q.stride(1), kk.stride(-3), kk.stride(-2), out.stride(0), out.stride(1), lse.stride(0),
        kk.stride(0) if paged else 0, block_table.stride(0) if paged else 0,
        HQ=Hq, GROUP=Hq // c.Hkv, HEAD_DIM=D, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
        PAGED=paged, PAGE=kk.shape[1] if paged else 1, FP8=1 if fp8_kind == 3 else fp8_kind,  # fp8_asm_cvt: decode
        HAS_WINDOW=window is not None, CLAMP=beyond == "clamp", PERTURB=PERTURBATIONS[_perturb],
        DOT_F32=interpreting(), FAST_INTERIOR=o["fast"], HEAVY_FIRST=o["heavy"], SPLIT_LOOPS=cfg.split_loops,
        BIAS_PREFETCH=cfg.bias_prefetch, BIAS_STRIP=cfg.bias_strip, MASKED_STRIP=_masked_strip, KV_TMA=cfg.kv_tma,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return out, lse


# routes / decode plans kept per layout (per max_seqlen_q / (max_seqlen_q, max_seqlen_k)); emptied past it
_MAX_PLANS = 256


class _Config(NamedTuple):
    """What a call decides from its arguments' layouts and scalars (attnkit._callcache), never a tensor; the
    decisions that depend on max_seqlen_q / max_seqlen_k (read from the device where the caller gives none) are
    kept beside, per value: `routes` (max_seqlen_q -> "decode", a Gluon forward configuration, or False: the
    Triton forward kernel) and `plans` ((max_seqlen_q, max_seqlen_k) -> a decode launch)."""
    validate: bool
    paged: bool
    fp8: bool
    fp8_kind: int
    Hkv: int
    B: int
    empty: bool  # no query row or no sequence: nothing to launch
    scale: float
    decode_ok: bool  # out and lse contiguous, few enough query heads per KV head
    use_gluon: bool | None
    opts: dict  # the resolved options
    routes: dict
    plans: dict


def _configure(q, k, v, cu_seqlens_q, cu_seqlens_k, k_cache, v_cache, block_table, seqused_k, table, k_scale, v_scale,
               out, lse, window, beyond, softmax_scale, max_seqlen_q, max_seqlen_k, num_splits, validate,
               fast_interior, heavy_first, block_m, block_n, num_warps, num_stages, ctas_per_sm, merge_block_d,
               split_loops, decode_rows, bias_prefetch, bias_strip, page_tiles, decode_fast_interior, kv_tma, pdl,
               gluon, gluon_pipe, gluon_bias_gather, gluon_bias_early, gluon_p_smem, gluon_lazy_rescale,
               gluon_bias_acc, gluon_ws, gluon_pingpong, gluon_persistent, gluon_k_release, gluon_k_early,
               gluon_tree_reduce, gluon_bias_pairs, gluon_bias_ahead, gluon_bias_diag, gluon_ws_unroll, fp8_f16_cvt,
               fp8_asm_cvt, gluon_decode, gluon_decode_cvt, gluon_decode_tma, gluon_decode_bias_async,
               gluon_decode_kreg, gluon_decode_maxnreg, gluon_decode_banks, _perturb, _force, _masked_strip,
               _ws_unused_turns) -> _Config:
    """Every check and decision of a call that its arguments' layouts and scalars fix (see relbias_attention)."""
    tune = dict(block_n=BLOCK_N_OPT.resolve(block_n), num_warps=WARPS_OPT.resolve(num_warps),
                num_stages=STAGES_OPT.resolve(num_stages))
    o = dict(tune=tune, bm_opt=BLOCK_M_OPT.resolve(block_m), ctas_opt=CTAS_OPT.resolve(ctas_per_sm),
             rows_opt=DECODE_ROWS_OPT.resolve(decode_rows), prefetch=BIAS_PREFETCH.resolve(bias_prefetch),
             strip=BIAS_STRIP.resolve(bias_strip), page_tiles=PAGE_TILES.resolve(page_tiles),
             dec_fast=DECODE_FAST_INTERIOR.resolve(decode_fast_interior), tma=KV_TMA.resolve(kv_tma),
             fast=FAST_INTERIOR.resolve(fast_interior), heavy=HEAVY_FIRST.resolve(heavy_first),
             split=SPLIT_LOOPS.resolve(split_loops), pdl=PDL_OPT.resolve(pdl),
             gpipe=GLUON_PIPE.resolve(gluon_pipe), ggather=GLUON_BIAS_GATHER.resolve(gluon_bias_gather),
             gearly=GLUON_BIAS_EARLY.resolve(gluon_bias_early), gpsmem=GLUON_P_SMEM.resolve(gluon_p_smem),
             glazy=GLUON_LAZY_RESCALE.resolve(gluon_lazy_rescale), gacc=GLUON_BIAS_ACC.resolve(gluon_bias_acc),
             gws=GLUON_WS.resolve(gluon_ws), gpp=GLUON_PINGPONG.resolve(gluon_pingpong),
             gpers=GLUON_PERSISTENT.resolve(gluon_persistent), gkrel=GLUON_K_RELEASE.resolve(gluon_k_release),
             gkearly=GLUON_K_EARLY.resolve(gluon_k_early), gtree=GLUON_TREE_REDUCE.resolve(gluon_tree_reduce),
             gpairs=GLUON_BIAS_PAIRS.resolve(gluon_bias_pairs), gahead=GLUON_BIAS_AHEAD.resolve(gluon_bias_ahead),
             gdiag=GLUON_BIAS_DIAG.resolve(gluon_bias_diag), gunroll=GLUON_WS_UNROLL.resolve(gluon_ws_unroll),
             f16_cvt=FP8_F16_CVT.resolve(fp8_f16_cvt), asm_cvt=FP8_ASM_CVT.resolve(fp8_asm_cvt),
             gdec=GLUON_DECODE.resolve(gluon_decode), gdec_cvt=GLUON_DECODE_CVT.resolve(gluon_decode_cvt),
             gdec_tma=GLUON_DECODE_TMA.resolve(gluon_decode_tma),
             gdec_bias=GLUON_DECODE_BIAS_ASYNC.resolve(gluon_decode_bias_async),
             gdec_kreg=GLUON_DECODE_KREG.resolve(gluon_decode_kreg),
             gdec_maxnreg=GLUON_DECODE_MAXNREG.resolve(gluon_decode_maxnreg),
             gdec_banks=GLUON_DECODE_BANKS.resolve(gluon_decode_banks), num_splits=num_splits,
             merge_block_d=merge_block_d, window=window, beyond=beyond, perturb=_perturb, force=_force)
    use_gluon = GLUON.resolve(gluon)
    paged, fp8, Hkv, B = _validate(
        q, k, v, cu_seqlens_q, cu_seqlens_k, k_cache, v_cache, block_table, seqused_k, table, window, beyond,
        softmax_scale, k_scale, v_scale, max_seqlen_q, max_seqlen_k)
    o["use_pdl"] = resolve_pdl(pdl, q.device)  # q checked first: a non-tensor q is a ValueError naming it
    total_q, Hq, D = q.shape
    f16_cvt, asm_cvt = o["f16_cvt"], o["asm_cvt"]
    require(not (f16_cvt and asm_cvt), "fp8_asm_cvt", "cannot be combined with fp8_f16_cvt (two conversions)")
    # the kernels' FP8: 2 converts through fp16 (fp8_f16_cvt), 3 by inline assembly (fp8_asm_cvt; the interpreter,
    # which cannot run it, takes the direct cast: the same values)
    fp8_kind = 2 if fp8 and f16_cvt else 3 if fp8 and asm_cvt and not interpreting() else int(fp8)
    kv = (k_cache, v_cache) if paged else (k, v)
    if use_gluon:
        _gluon_check(q, kv[0], kv[1], paged, fp8)
    elif use_gluon is None:  # the rule (config.gluon_fwd_rule)
        from .._runtime import gluon_runs
        tune = o["tune"]
        triton_options = (o["bm_opt"] is not None or o["split"] is not None or o["prefetch"] or o["strip"] is not None
                          or o["tma"] or not o["fast"] or not _masked_strip
                          or not gluon_fwd_tile_ok(D, tune["block_n"], tune["num_warps"], tune["num_stages"],
                                                   bool(o["gws"])))
        use_gluon = gluon_fwd_rule(gluon_runs(q.device), gluon_fwd_takes(paged, fp8, D) and kv[0].dtype == q.dtype,
                                   all(_gluon_layout_ok(t, D) for t in kv), triton_options)
    if out is not None:
        require(out.shape == q.shape and out.dtype == q.dtype and out.stride(-1) == 1 and out.device == q.device,
                "out", f"must be {tuple(q.shape)} {q.dtype} with a contiguous last dim, on {q.device}")
    if lse is not None:
        require(lse.shape == (total_q, Hq) and lse.dtype == torch.float32 and lse.stride(-1) == 1
                and lse.device == q.device, "lse",
                f"must be float32 [{total_q}, {Hq}] with a contiguous last dim, on {q.device}")
    empty = total_q == 0 or B == 0
    if num_splits is not None and not empty:
        require(isinstance(num_splits, int) and num_splits >= 1, "num_splits", "must be an int >= 1")
    scale = 1.0 / math.sqrt(D) if softmax_scale is None else float(softmax_scale)
    # out / lse allocated per call are contiguous
    decode_ok = ((out is None or out.is_contiguous()) and (lse is None or lse.is_contiguous())
                 and Hq // Hkv <= DECODE_MAX_ROWS)
    return _Config(bool(validate), paged, fp8, fp8_kind, Hkv, B, empty, scale, decode_ok, use_gluon, o, {}, {})


def _route(c, q, kk, max_seqlen_q):
    """Where a call of this layout with this max_seqlen_q goes: "decode", a Gluon forward configuration, or False
    (the Triton forward kernel)."""
    o, (total_q, Hq, D) = c.opts, q.shape
    force = o["force"]
    want_decode = use_decode(max_seqlen_q, Hq // c.Hkv) if force is None else force == "decode"
    if want_decode and c.decode_ok and max_seqlen_q <= DECODE_MAX_Q:
        return "decode"
    if not c.use_gluon:
        return False
    # options of the warp-specialized kernel alone
    gws, tune = o["gws"], o["tune"]
    if gws is None and (o["gpp"] or o["gpers"] or o["gkrel"] or o["gpairs"] or o["gahead"] or o["gdiag"]
                        or o["gunroll"]):
        gws = True
    if gws is None:  # the rule (config.gluon_ws_rule), where the tile and schedule options allow the kernel
        gws = (gluon_ws_rule(D, o["window"], max_seqlen_q, kk.shape[0] / max(c.B, 1))
               and o["gpipe"] and not (o["gpsmem"] or o["gearly"] or o["glazy"] or o["gkearly"])
               and gluon_fwd_tile_ok(D, tune["block_n"], tune["num_warps"], tune["num_stages"], True))
    return gluon_fwd_config(D, tune["block_n"], tune["num_warps"], tune["num_stages"], o["gpipe"], o["ggather"],
                            o["gearly"], o["gpsmem"], o["glazy"], o["gacc"], gws, o["gpp"], o["gpers"], o["gkrel"],
                            o["gkearly"], o["gtree"], o["gpairs"], o["gahead"], o["gdiag"], o["gunroll"])


def _gluon_check(q, k, v, paged, fp8):
    """Where the Gluon forward kernel (kernel_fwd_gluon.py) can run: an sm_90 GPU, contiguous bf16 / fp16 k, v in q's
    dtype with [Hkv, D] rows packed, 16-byte aligned, D 64 or 128. Checked whenever the option is on."""
    from .._runtime import gluon_runs
    D = q.shape[2]
    require(gluon_runs(q.device), "gluon", "the Gluon forward kernel runs on CUDA sm_90 GPUs only (not in the "
            "interpreter)")
    require(not paged, "gluon", "the Gluon forward kernel reads contiguous varlen k, v, not a paged cache")
    require(not fp8 and k.dtype == q.dtype, "gluon", f"the Gluon forward kernel reads k, v in q's dtype ({q.dtype})")
    require(D in GLUON_HEAD_DIMS, "gluon", f"the Gluon forward kernel takes D in {GLUON_HEAD_DIMS}, got {D}")
    for n, t in (("k", k), ("v", v)):
        require(_gluon_layout_ok(t, D), n, "the Gluon forward kernel needs [Hkv, D] rows packed, a 16-byte aligned "
                "start and a token stride of a multiple of 16 bytes")


def _gluon_decode_check(q, k, v, fp8, group):
    """Where the Gluon fp8 decode kernel (kernel_decode_gluon.py) can run: an sm_90 GPU, an fp8 cache (contiguous or
    paged) at D 64 or 128 whose key rows start on 16-byte boundaries, at most GLUON_DECODE_MAX_ROWS query heads per
    KV head. Checked whenever the option is on."""
    from .._runtime import gluon_runs
    from .config import GLUON_DECODE_MAX_ROWS
    D = q.shape[2]
    require(gluon_runs(q.device), "gluon_decode", "the Gluon decode kernel runs on CUDA sm_90 GPUs only (not in the "
            "interpreter)")
    require(fp8, "gluon_decode", f"the Gluon decode kernel reads an fp8 cache, got {k.dtype}")
    require(D in GLUON_HEAD_DIMS, "gluon_decode", f"the Gluon decode kernel takes D in {GLUON_HEAD_DIMS}, got {D}")
    require(group <= GLUON_DECODE_MAX_ROWS, "gluon_decode",
            f"{group} query heads per KV head exceed the Gluon decode kernel's {GLUON_DECODE_MAX_ROWS} rows")
    for n, t in (("k", k), ("v", v)):
        require(_gluon_decode_layout_ok(t), n, "the Gluon decode kernel needs a 16-byte aligned start and token, head "
                "and block strides of multiples of 16 bytes")


def _decode_tma_ok(t, D, paged) -> bool:
    """Whether the Gluon decode kernel's TMA descriptors can read the cache t: contiguous (not paged), at least one
    key row, [Hkv, D] rows packed and 16-byte aligned (_gluon_layout_ok)."""
    return not paged and t.shape[0] > 0 and _gluon_layout_ok(t, D)


def _gluon_decode_layout_ok(t) -> bool:
    """Whether the Gluon decode kernel's 16-byte copies can read the fp8 cache t (every key row 16-byte aligned)."""
    return t.data_ptr() % 16 == 0 and all(st % 16 == 0 for st in t.stride()[:-1])


def _gluon_layout_ok(t, D) -> bool:
    """Whether the Gluon forward kernel's TMA descriptors can read t [total_k, Hkv, D]."""
    return (t.stride(2) == 1 and t.stride(1) == D and t.data_ptr() % 16 == 0
            and (t.stride(0) * t.element_size()) % 16 == 0)


# The Gluon forward kernels zero, in shared memory, the value rows a TMA copy brought from past cu_seqlens_k[-1] (the
# caller's buffer may run on with anything there, and 0 x NaN is NaN). False only in
# benchmarks/experiments/relbias_past_rows.py, which shows the wrong outputs without it and times what it costs.
_ZERO_PAST_ROWS = True


def _gluon_fwd(q, k, v, tab, out, lse, cu_q, cu_k, scale, window, beyond, Hkv, B, max_seqlen_q, perturb, cfg, heavy,
               unused_turns=False):
    """The Gluon forward kernel over TMA descriptors of k, v viewed as [total_k, Hkv * D] (_gluon_check passed): the
    whole buffers, also rows past cu_seqlens_k[-1] (read by a sequence's last tile, zeroed before they reach the
    value product: ZERO_PAST)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from .kernel_fwd_gluon import KV_LAYOUT, relbias_fwd_gluon_kernel
    total_q, Hq, D = q.shape
    k_desc, v_desc = (TensorDescriptor(t, [t.shape[0], Hkv * D], [t.stride(0), 1], [cfg.block_n, D], KV_LAYOUT)
                      for t in (k, v))
    grid = (triton.cdiv(max(max_seqlen_q, 1), cfg.block_m), B, Hq)
    if cfg.ws:  # the warp-specialized kernel: on one program per (query block, sequence, head), or persistent
        from .kernel_fwd_gluon_ws import relbias_fwd_gluon_ws_kernel, relbias_fwd_gluon_ws_persistent_kernel
        meta = dict(HQ=Hq, GROUP=Hq // Hkv, HEAD_DIM=D, BLOCK_N=cfg.block_n, STAGES=cfg.stages,
                    HAS_WINDOW=window is not None, CLAMP=beyond == "clamp", PERTURB=PERTURBATIONS[perturb],
                    GATHER=cfg.bias_gather, ACC=cfg.bias_acc and scale > 0, PINGPONG=cfg.pingpong,
                    KREL=cfg.k_release, TREE=cfg.tree, PAIRS=cfg.bias_pairs, AHEAD=cfg.bias_ahead, DIAG=cfg.bias_diag,
                    UNROLL2=cfg.unroll, ZERO_PAST=_ZERO_PAST_ROWS,
                    num_warps=4,
                    maxnreg=GLUON_WS_MAXNREG)
        if unused_turns:  # the diagnostic: the kernel as it was before its turn barriers' fix
            meta["UNUSED_TURNS"] = True
        strides = (q.stride(0), q.stride(1), out.stride(0), out.stride(1), lse.stride(0))
        head = (q, k_desc, v_desc, tab, out, lse, cu_q, cu_k, scale, tab.shape[1], window or 0)
        if cfg.persistent:
            n_m, n_bh = grid[0], B * Hq
            sm = torch.cuda.get_device_properties(q.device).multi_processor_count
            relbias_fwd_gluon_ws_persistent_kernel[(min(n_m * n_bh, sm),)](*head, n_m, n_bh, *strides, **meta)
        else:
            relbias_fwd_gluon_ws_kernel[grid](*head, *strides, HEAVY_FIRST=heavy, **meta)
        return
    relbias_fwd_gluon_kernel[grid](
        q, k_desc, v_desc, tab, out, lse, cu_q, cu_k, scale, tab.shape[1], window or 0,
        q.stride(0), q.stride(1), out.stride(0), out.stride(1), lse.stride(0),
        HQ=Hq, GROUP=Hq // Hkv, HEAD_DIM=D, BLOCK_N=cfg.block_n, STAGES=cfg.stages, HAS_WINDOW=window is not None,
        CLAMP=beyond == "clamp", PERTURB=PERTURBATIONS[perturb], HEAVY_FIRST=heavy, PIPE=cfg.pipe,
        GATHER=cfg.bias_gather, EARLY=cfg.bias_early, P_SMEM=cfg.p_smem,
        LAZY=cfg.lazy_rescale, ACC=cfg.bias_acc and scale > 0, KEARLY=cfg.k_early, TREE=cfg.tree,
        ZERO_PAST=_ZERO_PAST_ROWS, num_warps=cfg.num_warps,
    )


def _kv_descriptor(t, block_n, paged):
    """A TMA tensor descriptor over a contiguous cache [total_k, Hkv, D] viewed as [total_k, Hkv * D], in boxes of
    block_n keys x D (the option kv_tma)."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    require(not paged, "kv_tma", "needs a contiguous k / v (a paged cache's key tile may span pages)")
    n, hkv, d = t.shape
    aligned = t.data_ptr() % 16 == 0 and (t.stride(0) * t.element_size()) % 16 == 0
    require(t.stride(2) == 1 and t.stride(1) == d and aligned, "kv_tma",
            "needs k / v with contiguous [Hkv, D] rows, a 16-byte aligned start and a 16-byte multiple token stride")
    return TensorDescriptor(t, [n, hkv * d], [t.stride(0), 1], [block_n, d])


def _decode_plan(c, q, kk, vv, block_table, extent, max_seqlen_q, max_seqlen_k):
    """The decode path's launches for this layout at (max_seqlen_q, max_seqlen_k): the split plan, the attention
    kernel (Triton, or the Gluon fp8 kernel by its option or rule) and the merge, as one callable taking the call's
    tensors."""
    from .. import splitk
    from .kernel_decode import relbias_decode_split_kernel
    o, paged, fp8, Hkv, B = c.opts, c.paged, c.fp8, c.Hkv, c.B
    total_q, Hq, D = q.shape
    tune = o["tune"]
    gdec = o["gdec"]
    if gdec:
        _gluon_decode_check(q, kk, vv, fp8, Hq // Hkv)
    elif gdec is None:  # the rule (config.gluon_decode_rule)
        from .._runtime import gluon_runs
        triton_options = (o["rows_opt"] is not None or o["split"] is not None or o["strip"] is not None
                          or o["page_tiles"] is not None or o["dec_fast"] is not None or o["f16_cvt"] or o["asm_cvt"]
                          or tune["block_n"] is not None or tune["num_warps"] is not None)
        gdec = gluon_decode_rule(gluon_runs(q.device), fp8, D, Hq // Hkv, max_seqlen_q,
                                 _decode_tma_ok(kk, D, paged), triton_options)
    sm = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 132
    plan = decode_plan(B, Hkv, Hq // Hkv, D, max_seqlen_q, max(1, max_seqlen_k), sm, q.device.type, o["num_splits"],
                       paged=paged, fp8=fp8, extent=extent, split_loops=o["split"],
                       page=kk.shape[1] if paged else 0, sm90=_cuda_capability(q.device) == (9, 0),
                       **dict(tune, ctas_per_sm=o["ctas_opt"], decode_rows=o["rows_opt"], bias_strip=o["strip"],
                              page_tiles=o["page_tiles"], fast_interior=o["dec_fast"], gluon=bool(gdec),
                              cvt=o["gdec_cvt"], kreg=o["gdec_kreg"]))
    R, S = total_q * Hq, plan.num_splits
    use_pdl, perturb, window, beyond = o["use_pdl"], o["perturb"], o["window"], o["beyond"]
    merge = splitk.merge_launch(S, R, D, False, o["merge_block_d"], use_pdl, perturb == "split-lost")
    merge_ints = (*merge.extra, R, 1, R * D, D, D)  # partials allocated contiguous; out [R, D] rows of D
    grid = (S, B, Hkv * plan.token_blocks)
    # after the tensors: the scalars and strides; the partials allocated per call as [S, R] and [S, R, D]
    ints = (c.scale, extent, window or 0, plan.keys_per_split, q.stride(0), q.stride(1), kk.stride(-3),
            kk.stride(-2), kk.stride(0) if paged else 0, block_table.stride(0) if paged else 0, R, R * D)
    common = dict(HQ=Hq, GROUP=Hq // Hkv, HEAD_DIM=D, PAGED=paged, PAGE=kk.shape[1] if paged else 1,
                  HAS_WINDOW=window is not None, CLAMP=beyond == "clamp", PERTURB=PERTURBATIONS[perturb], PDL=use_pdl)
    descs = None
    if plan.gluon:
        from .kernel_decode_gluon import raw_layout, relbias_decode_gluon_kernel
        tma_ok = _decode_tma_ok(kk.view(torch.uint8), D, paged)
        if o["gdec_tma"]:
            require(tma_ok, "gluon_decode_tma", "TMA reads a contiguous cache with packed [Hkv, D] rows, a 16-byte "
                    "aligned start and a 16-byte multiple token stride")
        use_tma = tma_ok if o["gdec_tma"] is None else o["gdec_tma"]
        kw = dict(common, ROWS=plan.block_r, STAGES=plan.num_stages, CVT=plan.cvt, num_warps=4,
                  BIAS_ASYNC=o["gdec_bias"],
                  KREG=plan.kreg, BLOCK_N=plan.block_n, BANKS=bool(o["gdec_banks"]),
                  **({"maxnreg": o["gdec_maxnreg"]} if o["gdec_maxnreg"] else {}), **pdl_launch(use_pdl))
        if use_tma:  # descriptors of the call's cache, made per call: launched through Triton's dispatch
            descs, layout, block_n = relbias_decode_gluon_kernel, raw_layout(D), plan.block_n
            attn = None
        else:
            attn = Launch(relbias_decode_gluon_kernel, grid, kw)
    else:
        attn = Launch(relbias_decode_split_kernel, grid, dict(
            common, BLOCK_R=plan.block_r, BLOCK_N=plan.block_n, FP8=c.fp8_kind, DOT_F32=interpreting(),
            SPLIT_LOOPS=plan.split_loops, STRIP=plan.strip, STRIP_G=plan.strip_g, PAGE_TILES=plan.page_tiles,
            DEC_FAST=plan.fast_interior, num_warps=plan.num_warps, num_stages=plan.num_stages,
            **pdl_launch(use_pdl)))

    def run(q, kk, vv, tab, out, lse, cu_q, cu_k, seqused_k, block_table, k_scale, v_scale):
        m = torch.empty((S, R), dtype=torch.float32, device=q.device)
        l = torch.empty((S, R), dtype=torch.float32, device=q.device)
        acc = torch.empty((S, R, D), dtype=torch.float32, device=q.device)
        dummy = cu_q
        if plan.gluon:
            kk, vv = kk.view(torch.uint8), vv.view(torch.uint8)
        else:
            k_scale, v_scale = (k_scale, v_scale) if fp8 else (tab, tab)
        args = (q, kk, vv, tab, m, l, acc, cu_q, dummy if paged else cu_k, seqused_k if paged else dummy,
                block_table if paged else dummy, k_scale, v_scale, *ints)
        if descs is not None:
            from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
            d = {n: TensorDescriptor(t, [t.shape[0], Hkv * D], [t.stride(0), 1], [block_n, D], layout)
                 for n, t in (("K_DESC", kk), ("V_DESC", vv))}
            descs[grid](*args, TMA=True, **d, **kw)
        else:
            attn(*args)
        merge(m, l, acc, out, lse, lse, *merge_ints)  # out [total_q, Hq, D] and lse contiguous: [R, D] / [R]
    return run


@on_device_of("k_new")
def relbias_write_kv(k_new, v_new, cu_seqlens_new, k_cache, v_cache, block_table, seqused_k, *, k_scale=None,
                     v_scale=None, validate=True, pdl=None, _off_by_one=False):
    """Append new tokens' k, v [total_new, Hkv, D] into a paged cache at positions seqused_k[b] + i
    (quantizing to fp8 when the cache is fp8). The caller advances seqused_k afterwards. ``pdl``
    (``ATTNKIT_PDL``): launched as a programmatic dependent (CUDA sm_90+; off, not timed)."""
    forward_only(k_new=k_new, v_new=v_new, k_scale=k_scale, v_scale=v_scale)
    key = _WRITES.key((k_new, v_new, cu_seqlens_new, k_cache, v_cache, block_table, seqused_k, k_scale, v_scale),
                      (validate, pdl, _off_by_one))
    w = _WRITES.get(key)
    if w is None:
        w = _configure_write(k_new, v_new, cu_seqlens_new, k_cache, v_cache, block_table, seqused_k, k_scale, v_scale,
                             validate, pdl, _off_by_one)
        _WRITES.put(key, w)
    fp8 = w.fp8
    if w.validate:  # one wait for the GPU: the offsets, lengths, block table and scales copied, k_new and v_new's
        # finiteness reduced on the device (what enters the cache: the attention scans no keys or values)
        cu, su, bt, fin, *scales = to_host(cu_seqlens_new, seqused_k, block_table,
                                           torch.stack([torch.isfinite(k_new).all(), torch.isfinite(v_new).all()]),
                                           *((k_scale, v_scale) if fp8 else ()))
        require(int(cu[0]) == 0 and bool((cu[1:] >= cu[:-1]).all()) and int(cu[-1]) == k_new.shape[0],
                "cu_seqlens_new", f"must start at 0, be non-decreasing and end at total_new={k_new.shape[0]}")
        su = su.long()
        require(bool((su >= 0).all()), "seqused_k", "must be non-negative")
        end = su + (cu[1:] - cu[:-1]).long()
        bs = k_cache.shape[1]
        require(bool((end <= block_table.shape[1] * bs).all()), "block_table",
                "has too few columns for the new tokens")
        _check_block_ids(bt, su // bs, -(-end // bs), k_cache.shape[0])
        for n, s in zip(("k_scale", "v_scale"), scales):
            require(bool((torch.isfinite(s) & (s > 0)).all()), n, "must be finite and positive")
        for n, ok in zip(("k_new", "v_new"), fin.tolist()):
            require(bool(ok), n, "holds a non-finite value")
    if w.launch is not None:
        w.launch(k_new, v_new, k_cache, v_cache, cu_seqlens_new, seqused_k, block_table,
                 k_scale if fp8 else k_new, v_scale if fp8 else k_new, *w.ints)


class _Write(NamedTuple):
    """What a relbias_write_kv call decides from its arguments' layouts (attnkit._callcache)."""
    validate: bool
    fp8: bool
    launch: object  # Launch, or None (no new token)
    ints: tuple


def _configure_write(k_new, v_new, cu_seqlens_new, k_cache, v_cache, block_table, seqused_k, k_scale, v_scale,
                     validate, pdl, _off_by_one) -> _Write:
    """Every check and decision of a relbias_write_kv call that its arguments' layouts fix."""
    for n, t in (("k_new", k_new), ("v_new", v_new)):
        require(isinstance(t, torch.Tensor) and t.dim() == 3 and t.dtype in (torch.bfloat16, torch.float16), n,
                "must be a bfloat16 / float16 [total_new, Hkv, D] tensor")
        check_device(n, t)
        require(t.stride(-1) == 1, n, "last dimension must be contiguous")
    require(v_new.shape == k_new.shape and v_new.stride() == k_new.stride(), "v_new", "must match k_new")
    require(v_new.device == k_new.device, "v_new", f"must be on k_new's device {k_new.device}, got {v_new.device}")
    require(isinstance(k_cache, torch.Tensor) and k_cache.dim() == 4, "k_cache", "must be [num_blocks, block_size, Hkv, D]")
    require(v_cache.shape == k_cache.shape and v_cache.stride() == k_cache.stride() and v_cache.dtype == k_cache.dtype,
            "v_cache", "must match k_cache")
    require(k_cache.shape[1] in BLOCK_SIZES, "k_cache", f"block size {k_cache.shape[1]} not in {BLOCK_SIZES}")
    require(k_cache.shape[2:] == k_new.shape[1:], "k_cache", f"[Hkv, D] {tuple(k_cache.shape[2:])} differs from k_new's")
    require(k_cache.stride(-1) == 1, "k_cache", "last dimension must be contiguous")
    fp8 = k_cache.dtype == torch.float8_e4m3fn
    use_pdl = resolve_pdl(pdl, k_new.device)
    require(fp8 or k_cache.dtype == k_new.dtype, "k_cache", f"must be {k_new.dtype} or float8_e4m3fn")
    Hkv, D = k_new.shape[1:]
    if fp8:
        for n, s in (("k_scale", k_scale), ("v_scale", v_scale)):
            require(isinstance(s, torch.Tensor) and s.dtype == torch.float32 and tuple(s.shape) == (Hkv,)
                    and s.device == k_new.device and s.is_contiguous(), n,
                    f"an fp8 cache needs a contiguous float32 [{Hkv}] scale on {k_new.device}")
    require(k_cache.device == k_new.device, "k_cache", f"must be on k_new's device {k_new.device}")
    require(v_cache.device == k_new.device, "v_cache", f"must be on k_new's device {k_new.device}")
    _check_cu("cu_seqlens_new", cu_seqlens_new, k_new.device)
    B = cu_seqlens_new.numel() - 1
    require(isinstance(block_table, torch.Tensor) and block_table.dtype == torch.int32 and block_table.dim() == 2
            and block_table.shape[0] == B and block_table.stride(-1) == 1 and block_table.device == k_new.device,
            "block_table", f"must be an int32 [B={B}, max_blocks] tensor on {k_new.device}, its last dim contiguous")
    require(isinstance(seqused_k, torch.Tensor) and seqused_k.dtype == torch.int32 and seqused_k.dim() == 1
            and seqused_k.numel() == B and seqused_k.is_contiguous() and seqused_k.device == k_new.device,
            "seqused_k", f"must be a contiguous int32 [B={B}] tensor on {k_new.device}")
    if k_new.shape[0] == 0:
        return _Write(bool(validate), fp8, None, ())
    from .kernel_write import relbias_write_kv_kernel
    launch = Launch(relbias_write_kv_kernel, (k_new.shape[0], Hkv), dict(
        HEAD_DIM=D, PAGE=k_cache.shape[1], FP8=fp8, BSEARCH_STEPS=max(1, (B + 1).bit_length() + 1),
        OFF_BY_ONE=1 if _off_by_one else 0, PDL=use_pdl, **pdl_launch(use_pdl)))
    return _Write(bool(validate), fp8, launch, (B, k_new.stride(0), k_new.stride(1), k_cache.stride(0),
                                                k_cache.stride(1), k_cache.stride(2), block_table.stride(0)))
