"""Compile every kernel, in the constexpr variants its dispatcher launches, for sm_90 (Hopper) without a
GPU: Triton lowers to PTX and its bundled ptxas assembles a cubin. This catches what Triton's
interpreter lets through (non-constexpr globals, unsupported conversions, type mismatches) on any
machine. It must run with TRITON_INTERPRET unset (the interpreter replaces the kernels).

``python -m attnkit.testing.compile_check [--census] [NAME...]`` compiles them all (or those whose name contains a
NAME) and prints registers / spills; with ``--census``, also each loop's SASS instruction count and commonest
opcodes (nvdisasm), a prediction of what a tile costs before any GPU time is spent.
"""

from __future__ import annotations

import collections
import inspect
import os
import re
import sys
import time

FLOATS = {"sm_scale", "scale_mant", "softmax_scale"}


def _variants():
    from ..mqa_decode.kernel_headpad import mqa_headpad_kernel
    from ..mqa_decode.kernel_merge import mqa_merge_kernel
    from ..mqa_decode.kernel_mxfp8 import mxfp8_out_kernel
    from ..mqa_decode.kernel_swapab import mqa_swapab_kernel
    from ..mqa_decode.kernel_write import mqa_write_kernel
    from ..relbias.kernel_decode import relbias_decode_split_kernel
    from ..relbias.kernel_fwd import relbias_fwd_kernel
    from ..relbias.kernel_write import relbias_write_kv_kernel
    from ..sparse_int8.kernel import sparse_int8_kernel
    from .._triton.merge_kernel import merge_partials_kernel

    out = []
    for has_e, dt in ((False, "bf16"), (True, "bf16"), (False, "fp32")):
        out.append(("merge", merge_partials_kernel,
                    dict(M="*fp32", L="*fp32", ACC="*fp32", OUT=f"*{dt}", LSE="*fp32", ROW_E="*i32"),
                    dict(BLOCK_D=256, BLOCK_S=32, HAS_E=has_e), {}))
    rb_ptr = lambda kv: dict(Q="*bf16", K=f"*{kv}", V=f"*{kv}", TABLE="*fp32", OUT="*bf16", LSE="*fp32",  # noqa: E731
                             CU_Q="*i32", CU_K="*i32", SEQUSED_K="*i32", BLOCK_TABLE="*i32", K_SCALE="*fp32",
                             V_SCALE="*fp32")
    from ..relbias.config import decode_plan, fwd_config
    from ..sparse_int8.config import plan as sparse_plan
    # the tiles the launch rules pick (relbias.config, sparse_int8.config), so the registers are the launched ones
    for D, paged, fp8, win, clamp, max_q, fast in ((128, False, False, False, False, 8192, True),
                                                   (128, False, False, False, False, 8192, False),
                                                   (128, True, False, True, False, 8192, True),
                                                   (128, False, False, False, False, 32, True),
                                                   (64, False, True, False, True, 16, True),
                                                   (256, True, True, True, True, 8192, True)):
        cfg = fwd_config(D, max_q, "cuda")
        for split in ((cfg.split_loops, not cfg.split_loops) if fast and D == 128 else (cfg.split_loops,)):
            # the rule's loops first, then (D 128) the other structure, at the stages the rule gives it
            cfg = fwd_config(D, max_q, "cuda", split_loops=split)
            out.append((f"relbias_fwd D{D} paged{int(paged)} fp8{int(fp8)} bm{cfg.block_m} w{cfg.num_warps}"
                        + ("" if fast else " masked") + (" split" if split else "")
                        + (" strip" if cfg.bias_strip else ""),
                        relbias_fwd_kernel, rb_ptr("fp8e4nv" if fp8 else "bf16"),
                        dict(HQ=64, GROUP=8, HEAD_DIM=D, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, PAGED=paged,
                             PAGE=64 if paged else 1, FP8=fp8, HAS_WINDOW=win, CLAMP=clamp, PERTURB=0, DOT_F32=False,
                             FAST_INTERIOR=fast, HEAVY_FIRST=True, SPLIT_LOOPS=split,
                             BIAS_STRIP=cfg.bias_strip and fast),
                        dict(num_warps=cfg.num_warps, num_stages=cfg.num_stages)))
        for opt, kw in ((("prefetch", dict(bias_prefetch=True)), ("nostrip", dict(split_loops=True, bias_strip=False)),
                         ("kv_tma", dict(kv_tma=True)))
                        if fast and D == 128 and not paged else ()):
            # the options bias_prefetch, (branch-free loops) bias_strip=False and kv_tma
            cfg = fwd_config(D, max_q, "cuda", **kw)
            kv = "fp8e4nv" if fp8 else "bf16"
            desc = f"tensordesc<{kv}[{cfg.block_n}, {D}]>"
            descs = dict(K_DESC=desc, V_DESC=desc) if cfg.kv_tma else {}
            out.append((f"relbias_fwd D{D} paged0 fp8{int(fp8)} bm{cfg.block_m} w{cfg.num_warps} split {opt}",
                        relbias_fwd_kernel, dict(rb_ptr(kv), **descs),
                        dict(HQ=64, GROUP=8, HEAD_DIM=D, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, PAGED=False,
                             PAGE=1, FP8=fp8, HAS_WINDOW=win, CLAMP=clamp, PERTURB=0, DOT_F32=False,
                             FAST_INTERIOR=True, HEAVY_FIRST=True, SPLIT_LOOPS=True,
                             BIAS_PREFETCH=cfg.bias_prefetch, BIAS_STRIP=cfg.bias_strip, KV_TMA=cfg.kv_tma),
                        dict(num_warps=cfg.num_warps, num_stages=cfg.num_stages)))
    dec_ptr = lambda kv: dict(Q="*bf16", K=f"*{kv}", V=f"*{kv}", TABLE="*fp32", M_OUT="*fp32", L_OUT="*fp32",  # noqa: E731
                              ACC_OUT="*fp32", CU_Q="*i32", CU_K="*i32", SEQUSED_K="*i32", BLOCK_TABLE="*i32",
                              K_SCALE="*fp32", V_SCALE="*fp32")
    for D, group, paged, fp8, max_k, max_q, sm90 in ((128, 8, False, False, 8192, 1, False),
                                                     (128, 8, False, False, 65536, 1, False),
                                                     (128, 8, True, False, 8192, 1, False),
                                                     (128, 8, False, True, 8192, 1, False),
                                                     (256, 16, False, False, 8192, 1, False),
                                                     (128, 8, False, False, 65536, 32, False),
                                                     (128, 8, 64, False, 8192, 1, True),  # paged on sm_90: page tiles
                                                     (128, 8, 16, False, 8192, 1, True)):  # and a load per key
        page = 64 if paged is True else int(paged)
        dp = decode_plan(32, 8, group, D, max_q, max_k, 132, "cuda", paged=bool(paged), fp8=fp8, extent=8192,
                         page=page if paged else 0, sm90=sm90)
        out.append((f"relbias_decode D{D} g{group} paged{int(bool(paged))} fp8{int(fp8)} r{dp.block_r} bn{dp.block_n}"
                    f" w{dp.num_warps} s{dp.num_stages}" + (" split" if dp.split_loops else "")
                    + (" strip" if dp.strip else "") + (f" sm90 page{page}" if sm90 else "")
                    + (" page-tiles" if dp.page_tiles else "") + (" fast-interior" if dp.fast_interior else ""),
                    relbias_decode_split_kernel,
                    dec_ptr("fp8e4nv" if fp8 else "bf16"),
                    dict(HQ=64, GROUP=group, HEAD_DIM=D, BLOCK_R=dp.block_r, BLOCK_N=dp.block_n,
                         PAGED=bool(paged), PAGE=page if paged else 1, FP8=fp8, HAS_WINDOW=True, CLAMP=False,
                         PERTURB=0, DOT_F32=False, SPLIT_LOOPS=dp.split_loops, STRIP=dp.strip, STRIP_G=dp.strip_g,
                         **(dict(PAGE_TILES=True) if dp.page_tiles else {}),
                         **(dict(DEC_FAST=True) if dp.fast_interior else {})),
                    dict(num_warps=dp.num_warps, num_stages=dp.num_stages)))
    for max_q, max_k in ((32, 8192), (1, 8192), (1, 65536)):  # the option decode_fast_interior
        dp = decode_plan(1 if max_q > 1 else 32, 8, 8, 128, max_q, max_k, 132, "cuda", extent=8192, fast_interior=True)
        out.append((f"relbias_decode D128 g8 paged0 fp80 r{dp.block_r} bn{dp.block_n} w{dp.num_warps} s{dp.num_stages}"
                    + (" split" if dp.split_loops else "") + (" strip" if dp.strip else "") + " fast-interior",
                    relbias_decode_split_kernel, dec_ptr("bf16"),
                    dict(HQ=64, GROUP=8, HEAD_DIM=128, BLOCK_R=dp.block_r, BLOCK_N=dp.block_n, PAGED=False, PAGE=1,
                         FP8=False, HAS_WINDOW=False, CLAMP=False, PERTURB=0, DOT_F32=False,
                         SPLIT_LOOPS=dp.split_loops, STRIP=dp.strip, STRIP_G=dp.strip_g, DEC_FAST=True),
                    dict(num_warps=dp.num_warps, num_stages=dp.num_stages)))
    dp = decode_plan(32, 8, 8, 128, 1, 8192, 132, "cuda", fp8=True, extent=8192)
    for kind in (2, 3):  # the options fp8_f16_cvt, fp8_asm_cvt
        out.append((f"relbias_decode D128 g8 paged0 fp8{kind} r{dp.block_r} bn{dp.block_n} w{dp.num_warps} "
                    f"s{dp.num_stages}" + (" split" if dp.split_loops else "") + (" strip" if dp.strip else ""),
                    relbias_decode_split_kernel, dec_ptr("fp8e4nv"),
                    dict(HQ=64, GROUP=8, HEAD_DIM=128, BLOCK_R=dp.block_r, BLOCK_N=dp.block_n, PAGED=False, PAGE=1,
                         FP8=kind, HAS_WINDOW=True, CLAMP=False, PERTURB=0, DOT_F32=False, SPLIT_LOOPS=dp.split_loops,
                         STRIP=dp.strip, STRIP_G=dp.strip_g),
                    dict(num_warps=dp.num_warps, num_stages=dp.num_stages)))
    for fp8 in (False, True):
        out.append((f"relbias_write fp8{int(fp8)}", relbias_write_kv_kernel,
                    dict(KN="*bf16", VN="*bf16", KC="*fp8e4nv" if fp8 else "*bf16", VC="*fp8e4nv" if fp8 else "*bf16",
                         CU_NEW="*i32", SEQUSED="*i32", BLOCK_TABLE="*i32", K_SCALE="*fp32", V_SCALE="*fp32"),
                    dict(HEAD_DIM=128, PAGE=64, FP8=fp8, BSEARCH_STEPS=7, OFF_BY_ONE=0), {}))
    sparse_ptr = lambda cdt: dict(Q="*bf16", KC=f"*{cdt}", VC=f"*{cdt}", KS="*fp32", VS="*fp32", IDX="*i32",  # noqa: E731
                                  M_OUT="*fp32", L_OUT="*fp32", ACC_OUT="*fp32", E_OUT="*i32", OUT="*bf16", LSE="*fp32")
    for D, T, pv, cdt in ((256, 2048, True, "i8"), (256, 1, True, "i8"), (256, 8, True, "i8"), (64, 1, False, "i8"),
                          (128, 2048, True, "i8"), (256, 1, True, "bf16")):
        sp = sparse_plan(T, 2, 12, 2048, 132, None, D, int8_cache=cdt == "i8")
        out.append((f"sparse_int8 D{D} direct{int(sp.direct)} {cdt} bn{sp.block_n} w{sp.num_warps} s{sp.num_stages}"
                    + (" swap_ab" if sp.swap_ab else "") + (" qk_int8" if sp.qk_int8 else ""),
                    sparse_int8_kernel,
                    sparse_ptr(cdt),
                    dict(HQ=24, GROUP=12, HEAD_DIM=D, BLOCK_R=sp.block_r, BLOCK_N=sp.block_n, DIRECT=sp.direct,
                         PV_SPLIT=pv, PREFETCH=False, PERTURB=0, DOT_F32=False, SWAP=sp.swap_ab,
                         QK_INT8=sp.qk_int8), dict(num_warps=sp.num_warps, num_stages=sp.num_stages)))
    for T, q8 in ((2048, False), (1, True)):  # the swap_ab / qk_int8 options off the rule (64-candidate tiles)
        sp = sparse_plan(T, 2, 12, 2048, 132, None, 256, swap_ab=True, qk_int8=q8)
        out.append((f"sparse_int8 D256 direct{int(sp.direct)} i8 bn64 w{sp.num_warps} swap_ab" + (" qk_int8" if q8 else ""),
                    sparse_int8_kernel,
                    sparse_ptr("i8"),
                    dict(HQ=24, GROUP=12, HEAD_DIM=256, BLOCK_R=sp.block_r, BLOCK_N=64, DIRECT=sp.direct,
                         PV_SPLIT=True, PREFETCH=False, PERTURB=0, DOT_F32=False, SWAP=True, QK_INT8=q8),
                    dict(num_warps=sp.num_warps, num_stages=sp.num_stages)))
    from ..sparse_int8.kernel_gluon import sparse_int8_gluon_kernel
    for D, direct in ((256, True), (256, False), (128, False), (64, False)):
        out.append((f"sparse_int8_gluon D{D} direct{int(direct)}", sparse_int8_gluon_kernel, sparse_ptr("i8"),
                    dict(HQ=24, GROUP=12, HEAD_DIM=D, BLOCK_R=16, BLOCK_N=64, DIRECT=direct, PERTURB=0),
                    dict(num_warps=4)))
    # the option ids_early (the first two tiles' ids before the query): the 1-row decode's plain loop and the Gluon
    # kernel's splits
    sp = sparse_plan(1, 2, 12, 2048, 132, None, 256)
    out.append((f"sparse_int8 D256 direct0 i8 bn{sp.block_n} w{sp.num_warps} s{sp.num_stages} ids_early",
                sparse_int8_kernel, sparse_ptr("i8"),
                dict(HQ=24, GROUP=12, HEAD_DIM=256, BLOCK_R=sp.block_r, BLOCK_N=sp.block_n, DIRECT=False, PV_SPLIT=True,
                     PREFETCH=False, PERTURB=0, DOT_F32=False, SWAP=False, QK_INT8=False, IDS_EARLY=True),
                dict(num_warps=sp.num_warps, num_stages=sp.num_stages)))
    out.append(("sparse_int8_gluon D256 direct0 ids_early", sparse_int8_gluon_kernel, sparse_ptr("i8"),
                dict(HQ=24, GROUP=12, HEAD_DIM=256, BLOCK_R=16, BLOCK_N=64, DIRECT=False, PERTURB=0, IDS_EARLY=True),
                dict(num_warps=4)))
    # the option gluon_overlap (the score product in flight during the value conversion), on both paths, with
    # ids_early as the rule runs it
    for direct in (True, False):
        out.append((f"sparse_int8_gluon D256 direct{int(direct)} ids_early overlap", sparse_int8_gluon_kernel,
                    sparse_ptr("i8"), dict(HQ=24, GROUP=12, HEAD_DIM=256, BLOCK_R=16, BLOCK_N=64, DIRECT=direct,
                                           PERTURB=0, IDS_EARLY=True, OVERLAP=True), dict(num_warps=4)))
    # the option gluon_v_regs (the value product's operand in registers), both paths at D = 256, ids_early as the rule
    # runs it, and the split path at D = 128 and 64
    for D, direct in ((256, True), (256, False), (128, False), (64, False)):
        out.append((f"sparse_int8_gluon D{D} direct{int(direct)} ids_early v_regs", sparse_int8_gluon_kernel,
                    sparse_ptr("i8"), dict(HQ=24, GROUP=12, HEAD_DIM=D, BLOCK_R=16, BLOCK_N=64, DIRECT=direct,
                                           PERTURB=0, IDS_EARLY=True, V_REGS=True), dict(num_warps=4)))
    from ..relbias.config import gluon_fwd_config
    from ..relbias.kernel_fwd_gluon import KV_LAYOUT, relbias_fwd_gluon_kernel
    for D, pipe, win, clamp, gather, early, psm, lazy, bacc in (
            (128, True, False, False, True, False, False, False, False),
            (128, False, True, False, True, False, False, False, False),
            (64, True, True, True, True, False, False, False, False),
            (128, True, False, False, False, False, False, False, False),
            (128, True, False, False, True, True, False, False, False),
            (128, True, False, False, True, False, True, False, False),
            (64, True, True, True, True, True, True, False, False),
            (128, True, False, False, True, False, False, True, False),
            (128, True, True, True, True, True, True, True, False),
            (128, True, False, False, True, False, False, False, True),
            (128, True, False, False, True, False, False, True, True),
            (64, True, True, True, True, False, True, True, True),
            (128, True, False, False, False, False, False, True, True)):
        gc = gluon_fwd_config(D, pipe=pipe, bias_gather=gather, bias_early=early, p_smem=psm, lazy_rescale=lazy,
                              bias_acc=bacc)
        desc = f"tensordesc<bf16[{gc.block_n}, {D}],{KV_LAYOUT!r}>"
        out.append((f"relbias_fwd_gluon D{D} bn{gc.block_n} w{gc.num_warps} s{gc.stages} pipe{int(pipe)}"
                    + ("" if gather else " load") + (" early" if early else "") + (" psmem" if psm else "")
                    + (" lazy" if lazy else "") + (" acc" if bacc else "")
                    + (" window clamp" if win and (early or bacc) and lazy else ""),
                    relbias_fwd_gluon_kernel,
                    dict(Q="*bf16", K_DESC=desc, V_DESC=desc, TABLE="*fp32", OUT="*bf16", LSE="*fp32", CU_Q="*i32",
                         CU_K="*i32"),
                    dict(HQ=64, GROUP=8, HEAD_DIM=D, BLOCK_N=gc.block_n, STAGES=gc.stages, HAS_WINDOW=win,
                         CLAMP=clamp, PERTURB=0, PIPE=pipe, GATHER=gather, EARLY=gc.bias_early, P_SMEM=gc.p_smem,
                         LAZY=gc.lazy_rescale, ACC=gc.bias_acc),
                    dict(num_warps=gc.num_warps)))
    for D, w, win in ((128, 4, False), (128, 8, True)):
        gc = gluon_fwd_config(D, num_warps=w, k_early=True)
        desc = f"tensordesc<bf16[{gc.block_n}, {D}],{KV_LAYOUT!r}>"
        out.append((f"relbias_fwd_gluon D{D} bn{gc.block_n} w{w} s{gc.stages} pipe1 acc k_early"
                    + (" window" if win else ""), relbias_fwd_gluon_kernel,
                    dict(Q="*bf16", K_DESC=desc, V_DESC=desc, TABLE="*fp32", OUT="*bf16", LSE="*fp32", CU_Q="*i32",
                         CU_K="*i32"),
                    dict(HQ=64, GROUP=8, HEAD_DIM=D, BLOCK_N=gc.block_n, STAGES=gc.stages, HAS_WINDOW=win,
                         CLAMP=False, PERTURB=0, PIPE=True, GATHER=True, ACC=gc.bias_acc, KEARLY=True),
                    dict(num_warps=w)))
    gc = gluon_fwd_config(128, tree=True)  # the rule's tile, its row reductions as trees
    desc = f"tensordesc<bf16[{gc.block_n}, 128],{KV_LAYOUT!r}>"
    out.append((f"relbias_fwd_gluon D128 bn{gc.block_n} w4 s{gc.stages} pipe1 acc tree", relbias_fwd_gluon_kernel,
                dict(Q="*bf16", K_DESC=desc, V_DESC=desc, TABLE="*fp32", OUT="*bf16", LSE="*fp32", CU_Q="*i32",
                     CU_K="*i32"),
                dict(HQ=64, GROUP=8, HEAD_DIM=128, BLOCK_N=gc.block_n, STAGES=gc.stages, HAS_WINDOW=False,
                     CLAMP=False, PERTURB=0, PIPE=True, GATHER=True, ACC=gc.bias_acc, TREE=True),
                dict(num_warps=4)))
    from ..relbias.config import GLUON_WS_MAXNREG
    from ..relbias.kernel_fwd_gluon_ws import relbias_fwd_gluon_ws_kernel, relbias_fwd_gluon_ws_persistent_kernel
    for D, bn, win, clamp, pp, bacc, krel in ((128, 64, False, False, False, True, False),
                                              (128, 128, False, False, False, True, False),
                                              (128, 128, False, False, True, True, False),
                                              (64, 128, True, True, True, False, False),
                                              (128, 64, True, False, True, True, False),
                                              (128, 128, False, False, False, True, True),  # dispatched, less AHEAD
                                              (128, 128, False, False, True, True, True),
                                              (128, 128, True, True, True, True, True),
                                              (128, 128, False, False, None, True, False)):  # None: the bug below
        # pp None: without turns, with the turn barriers made but not used, as before their fix (the stress check's
        # failing variant; mbarrier_reuse flags it)
        bug = pp is None
        pp = bool(pp)
        gc = gluon_fwd_config(D, block_n=bn, bias_acc=bacc, ws=True, pingpong=pp, k_release=krel)
        desc = f"tensordesc<bf16[{gc.block_n}, {D}],{KV_LAYOUT!r}>"
        out.append((f"relbias_fwd_gluon_ws D{D} bn{bn} s{gc.stages}" + (" pingpong" if pp else "")
                    + (" acc" if bacc else "") + (" window" if win else "") + (" clamp" if clamp else "")
                    + (" krel" if krel else "") + (" unused-turns (the fixed bug)" if bug else ""),
                    relbias_fwd_gluon_ws_kernel,
                    dict(Q="*bf16", K_DESC=desc, V_DESC=desc, TABLE="*fp32", OUT="*bf16", LSE="*fp32", CU_Q="*i32",
                         CU_K="*i32"),
                    dict(HQ=64, GROUP=8, HEAD_DIM=D, BLOCK_N=bn, STAGES=gc.stages, HAS_WINDOW=win, CLAMP=clamp,
                         PERTURB=0, GATHER=True, ACC=gc.bias_acc, PINGPONG=pp, KREL=gc.k_release,
                         **(dict(UNUSED_TURNS=True) if bug else {})),
                    dict(num_warps=4, maxnreg=GLUON_WS_MAXNREG)))
    for D, bn, win, clamp in ((128, 128, False, False), (128, 128, True, True), (64, 64, True, False)):
        desc = f"tensordesc<bf16[{bn}, {D}],{KV_LAYOUT!r}>"  # the bias gathered in 64-bit pairs (gluon_bias_pairs)
        out.append((f"relbias_fwd_gluon_ws D{D} bn{bn} s2 acc krel pairs" + (" window" if win else "")
                    + (" clamp" if clamp else ""), relbias_fwd_gluon_ws_kernel,
                    dict(Q="*bf16", K_DESC=desc, V_DESC=desc, TABLE="*fp32", OUT="*bf16", LSE="*fp32", CU_Q="*i32",
                         CU_K="*i32"),
                    dict(HQ=64, GROUP=8, HEAD_DIM=D, BLOCK_N=bn, STAGES=2, HAS_WINDOW=win, CLAMP=clamp, PERTURB=0,
                         GATHER=True, ACC=True, PINGPONG=False, KREL=True, PAIRS=True),
                    dict(num_warps=4, maxnreg=GLUON_WS_MAXNREG)))
    for D, bn, win, clamp, pers, pairs in ((128, 128, False, False, False, False), (128, 128, True, True, False, False),
                                           (64, 64, True, False, False, False), (128, 128, False, False, True, False),
                                           (128, 128, False, False, False, True), (128, 128, True, True, False, True)):
        desc = f"tensordesc<bf16[{bn}, {D}],{KV_LAYOUT!r}>"  # strips a tile ahead (gluon_bias_ahead): the first dispatched
        out.append((f"relbias_fwd_gluon_ws{'_persistent' if pers else ''} D{D} bn{bn} s2 acc krel ahead"
                    + (" pairs" if pairs else "") + (" window" if win else "") + (" clamp" if clamp else ""),
                    relbias_fwd_gluon_ws_persistent_kernel if pers else relbias_fwd_gluon_ws_kernel,
                    dict(Q="*bf16", K_DESC=desc, V_DESC=desc, TABLE="*fp32", OUT="*bf16", LSE="*fp32", CU_Q="*i32",
                         CU_K="*i32"),
                    dict(HQ=64, GROUP=8, HEAD_DIM=D, BLOCK_N=bn, STAGES=2, HAS_WINDOW=win, CLAMP=clamp, PERTURB=0,
                         GATHER=True, ACC=True, PINGPONG=False, KREL=True, AHEAD=True, PAIRS=pairs),
                    dict(num_warps=4, maxnreg=GLUON_WS_MAXNREG)))
    for D, bn, win in ((128, 128, False), (64, 64, True)):  # one gather load per distinct distance (gluon_bias_diag)
        desc = f"tensordesc<bf16[{bn}, {D}],{KV_LAYOUT!r}>"
        out.append((f"relbias_fwd_gluon_ws D{D} bn{bn} s2 acc krel ahead diag" + (" window" if win else ""),
                    relbias_fwd_gluon_ws_kernel,
                    dict(Q="*bf16", K_DESC=desc, V_DESC=desc, TABLE="*fp32", OUT="*bf16", LSE="*fp32", CU_Q="*i32",
                         CU_K="*i32"),
                    dict(HQ=64, GROUP=8, HEAD_DIM=D, BLOCK_N=bn, STAGES=2, HAS_WINDOW=win, CLAMP=False, PERTURB=0,
                         GATHER=True, ACC=True, PINGPONG=False, KREL=True, AHEAD=True, DIAG=True),
                    dict(num_warps=4, maxnreg=GLUON_WS_MAXNREG)))
    desc = f"tensordesc<bf16[128, 128],{KV_LAYOUT!r}>"
    out.append(("relbias_fwd_gluon_ws D128 bn128 s2 acc krel ahead diag unroll2", relbias_fwd_gluon_ws_kernel,
                dict(Q="*bf16", K_DESC=desc, V_DESC=desc, TABLE="*fp32", OUT="*bf16", LSE="*fp32", CU_Q="*i32",
                     CU_K="*i32"),
                dict(HQ=64, GROUP=8, HEAD_DIM=128, BLOCK_N=128, STAGES=2, HAS_WINDOW=False, CLAMP=False, PERTURB=0,
                     GATHER=True, ACC=True, PINGPONG=False, KREL=True, AHEAD=True, DIAG=True, UNROLL2=True),
                dict(num_warps=4, maxnreg=GLUON_WS_MAXNREG)))
    desc = f"tensordesc<bf16[128, 128],{KV_LAYOUT!r}>"  # as dispatched, with the row reductions as trees
    out.append(("relbias_fwd_gluon_ws D128 bn128 s2 acc krel tree", relbias_fwd_gluon_ws_kernel,
                dict(Q="*bf16", K_DESC=desc, V_DESC=desc, TABLE="*fp32", OUT="*bf16", LSE="*fp32", CU_Q="*i32",
                     CU_K="*i32"),
                dict(HQ=64, GROUP=8, HEAD_DIM=128, BLOCK_N=128, STAGES=2, HAS_WINDOW=False, CLAMP=False, PERTURB=0,
                     GATHER=True, ACC=True, PINGPONG=False, KREL=True, TREE=True),
                dict(num_warps=4, maxnreg=GLUON_WS_MAXNREG)))
    for D, win, pp, krel in ((128, False, False, False), (64, True, True, False), (128, False, False, True),
                             (128, True, True, True)):
        desc = f"tensordesc<bf16[128, {D}],{KV_LAYOUT!r}>"
        out.append((f"relbias_fwd_gluon_ws_persistent D{D} bn128 s2 acc" + (" pingpong" if pp else "")
                    + (" window" if win else "") + (" krel" if krel else ""), relbias_fwd_gluon_ws_persistent_kernel,
                    dict(Q="*bf16", K_DESC=desc, V_DESC=desc, TABLE="*fp32", OUT="*bf16", LSE="*fp32", CU_Q="*i32",
                         CU_K="*i32"),
                    dict(HQ=64, GROUP=8, HEAD_DIM=D, BLOCK_N=128, STAGES=2, HAS_WINDOW=win, CLAMP=False, PERTURB=0,
                         GATHER=True, ACC=True, PINGPONG=pp, KREL=krel),
                    dict(num_warps=4, maxnreg=GLUON_WS_MAXNREG)))
    for nv in (False, True):
        for lf in (False, True):  # the option writer_loads_first
            out.append((f"mqa_write nvfp4{int(nv)}" + (" loads_first" if lf else ""), mqa_write_kernel,
                        dict(LAT="*bf16", POS="*i64", COS_SIN="*fp32", SLOTS="*i64", CACHE="*u8"),
                        dict(NVFP4=nv, ROPE_OFF=False, LOADS_FIRST=lf), dict(enable_fp_fusion=False)))
    out.append(("mqa_write nvfp40 release_early", mqa_write_kernel,  # the option writer_release_early (with PDL)
                dict(LAT="*bf16", POS="*i64", COS_SIN="*fp32", SLOTS="*i64", CACHE="*u8"),
                dict(NVFP4=False, ROPE_OFF=False, RELEASE_EARLY=True), dict(enable_fp_fusion=False)))
    out.append(("mqa_write nvfp40 slow", mqa_write_kernel,  # the stress check's slow writer (diagnostics)
                dict(LAT="*bf16", POS="*i64", COS_SIN="*fp32", SLOTS="*i64", CACHE="*u8"),
                dict(NVFP4=False, ROPE_OFF=False, DIAG_DELAY_NS=20000), dict(enable_fp_fusion=False)))
    mqa_ptr = dict(Q="*bf16", POS="*i64", COS_SIN="*fp32", SWA="*u8", COMP="*u8", SWA_IDX="*i32", COMP_IDX="*i32",
                   M_OUT="*fp32", L_OUT="*fp32", ACC_OUT="*fp32")
    for nv in (False, True):
        for odc in (128, 256, 512):
            out.append((f"mqa_headpad out_dc{odc} nvfp4{int(nv)}", mqa_headpad_kernel, mqa_ptr,
                        dict(BLOCK_H=64, BLOCK_N=32, OUT_DC=odc, NVFP4=nv, PERTURB=0, DOT_F32=False),
                        dict(num_warps=8, num_stages=1)))  # as launched (config.HEADPAD_STAGES)
        for odc in (256, 512):  # the option headpad_ids_early
            out.append((f"mqa_headpad out_dc{odc} nvfp4{int(nv)} ids_early", mqa_headpad_kernel, mqa_ptr,
                        dict(BLOCK_H=64, BLOCK_N=32, OUT_DC=odc, NVFP4=nv, PERTURB=0, DOT_F32=False, IDS_EARLY=True),
                        dict(num_warps=8, num_stages=1)))
        for H, bn, w in ((16, 64, 8), (32, 64, 8), (16, 32, 8), (32, 32, 8), (16, 32, 4), (32, 32, 4)):
            out.append((f"mqa_swapab H{H} block_n{bn} warps{w} nvfp4{int(nv)}", mqa_swapab_kernel, mqa_ptr,
                        dict(H=H, BLOCK_N=bn, NVFP4=nv, PERTURB=0, DOT_F32=False), dict(num_warps=w)))
    from ..relbias.kernel_decode_gluon import relbias_decode_gluon_kernel
    rbd_ptr = dict(Q="*bf16", K="*u8", V="*u8", TABLE="*fp32", M_OUT="*fp32", L_OUT="*fp32", ACC_OUT="*fp32",
                   CU_Q="*i32", CU_K="*i32", SEQUSED_K="*i32", BLOCK_TABLE="*i32", K_SCALE="*fp32", V_SCALE="*fp32")
    from ..relbias.kernel_decode_gluon import raw_layout
    # the first schedule (the key tile converted into shared memory), each option alone and with the bias copies
    plain = [(128, 8, 1, False, False, False, 3, True), (128, 8, 0, False, False, False, 3, True),
             (128, 8, 2, False, False, False, 3, True), (128, 8, 3, False, False, False, 3, True),
             (128, 64, 1, False, True, True, 3, True), (64, 16, 1, True, True, False, 2, False),
             (128, 8, 3, False, False, False, 4, True), (128, 8, 3, False, False, False, 3, False)]
    with_bias = [v for v in plain if (v[0], v[1], v[2], v[6]) in ((128, 8, 3, 3), (64, 16, 1, 2), (128, 64, 1, 3))]
    for (D, rows, cvt, paged, win, clamp, stages, tma), basync in [(v, False) for v in plain] + [(v, True) for v in
                                                                                               with_bias]:
        ptrs = dict(rbd_ptr)
        if tma:
            ptrs.update(K_DESC=f"tensordesc<u8[64, {D}],{raw_layout(D)!r}>",
                        V_DESC=f"tensordesc<u8[64, {D}],{raw_layout(D)!r}>")
        out.append((f"relbias_decode_gluon D{D} rows{rows} cvt{cvt} s{stages}" + (" tma" if tma else "")
                    + (" paged" if paged else "") + (" window" if win else "") + (" clamp" if clamp else "")
                    + (" bias_async" if basync else ""),
                    relbias_decode_gluon_kernel, ptrs,
                    dict(HQ=64, GROUP=8, HEAD_DIM=D, ROWS=rows, PAGED=paged, PAGE=64 if paged else 1, HAS_WINDOW=win,
                         CLAMP=clamp, PERTURB=0, STAGES=stages, CVT=cvt, TMA=tma, BIAS_ASYNC=basync),
                    dict(num_warps=4)))
    # with the key operand in registers (kreg); (128, 8, 3, TMA, bias copies, 128 keys, ring of 2, banks) is the
    # rule's: the value codes 8 per thread and the bias tile swizzled (gluon_decode_banks, on by default)
    for D, rows, cvt, tma, basync, bn, st, banks in (
            (128, 8, 3, True, True, 64, 3, False), (128, 8, 1, True, True, 64, 3, False),
            (64, 16, 2, False, False, 64, 3, False), (128, 64, 3, True, False, 64, 3, False),
            (128, 8, 3, True, True, 128, 2, False), (64, 32, 2, False, True, 128, 2, False),
            (128, 8, 3, True, True, 128, 2, True), (64, 16, 3, False, True, 64, 3, True)):
        ptrs = dict(rbd_ptr)
        if tma:
            ptrs.update(K_DESC=f"tensordesc<u8[{bn}, {D}],{raw_layout(D)!r}>",
                        V_DESC=f"tensordesc<u8[{bn}, {D}],{raw_layout(D)!r}>")
        out.append((f"relbias_decode_gluon D{D} rows{rows} cvt{cvt} s{st}" + (" tma" if tma else "")
                    + (" bias_async" if basync else "") + " kreg" + (f" bn{bn}" if bn != 64 else "")
                    + (" banks" if banks else ""),
                    relbias_decode_gluon_kernel, ptrs,
                    dict(HQ=64, GROUP=8, HEAD_DIM=D, ROWS=rows, PAGED=False, PAGE=1, HAS_WINDOW=True, CLAMP=False,
                         PERTURB=0, STAGES=st, CVT=cvt, TMA=tma, BIAS_ASYNC=basync, KREG=True, BLOCK_N=bn,
                         BANKS=banks),
                    dict(num_warps=4)))
    from ..mqa_decode.kernel_swapab_gluon import mqa_swapab_gluon_kernel
    for nv in (False, True):
        for H in (16, 32):
            for w, fused, asy in ((4, False, False), (8, False, False), (8, True, False), (8, False, True), (4, False, True)):
                out.append((f"mqa_swapab_gluon H{H} nvfp4{int(nv)} warps{w} fused{int(fused)} async{int(asy)}",
                            mqa_swapab_gluon_kernel,
                            dict(mqa_ptr, COUNT="*i32", SINK="*fp32", OUT="*bf16", LSE="*fp32", O32="*fp32"),
                            dict(H=H, BLOCK_N=64, NVFP4=nv, PERTURB=0, PREFETCH=True, FUSED_MERGE=fused, SINK_ON=True,
                                 ROPE_UNDO=True, WRITE_F32=False, ASYNC=asy), dict(num_warps=w)))
    # the option gluon_early (the first slot ids loaded before the query), and with it gluon_banks (the record
    # loads over 8 slots x 4 blocks per warp; the rule's for nvfp4)
    for H, nv, banks in ((16, False, False), (32, 2, False),
                         (16, False, True), (16, 2, True), (32, False, True), (32, 2, True)):
        out.append((f"mqa_swapab_gluon H{H} nvfp4{int(nv)} warps8 fused0 async0 early" + (" banks" if banks else ""),
                    mqa_swapab_gluon_kernel,
                    dict(mqa_ptr, COUNT="*i32", SINK="*fp32", OUT="*bf16", LSE="*fp32", O32="*fp32"),
                    dict(H=H, BLOCK_N=64, NVFP4=nv, PERTURB=0, PREFETCH=True, FUSED_MERGE=False, SINK_ON=True,
                         ROPE_UNDO=True, WRITE_F32=False, ASYNC=False, EARLY=True, BANKS=banks), dict(num_warps=8)))
    for H, nv in ((16, False), (16, 2), (32, False), (32, 2)):  # the option gluon_maxnreg at 128 (two programs per
        # SM), as the rule's early loops and banks (nvfp4) compile
        out.append((f"mqa_swapab_gluon H{H} nvfp4{int(nv)} warps8 fused0 async0 early" + (" banks" if nv else "")
                    + " maxnreg128", mqa_swapab_gluon_kernel,
                    dict(mqa_ptr, COUNT="*i32", SINK="*fp32", OUT="*bf16", LSE="*fp32", O32="*fp32"),
                    dict(H=H, BLOCK_N=64, NVFP4=nv, PERTURB=0, PREFETCH=True, FUSED_MERGE=False, SINK_ON=True,
                         ROPE_UNDO=True, WRITE_F32=False, ASYNC=False, EARLY=True, BANKS=bool(nv)),
                    dict(num_warps=8, maxnreg=128)))
    # the options gluon_one_loop (both lists in one loop), gluon_loads_first (a tile's record loads before its first
    # store; the rule's since 6e0675b, so its variants are the launched ones) and gluon_prologue (1: the query's loads
    # all before its first store; 2: the split's first tile's records too; with loads first), as the rule's early
    # loads and banks (nvfp4) compile
    for opt, flags in (("one_loop", dict(ONE_LOOP=True)), ("loads_first", dict(LOADS_FIRST=True)),
                       ("loads_first prologue1", dict(LOADS_FIRST=True, PROLOGUE=1)),
                       ("loads_first prologue2", dict(LOADS_FIRST=True, PROLOGUE=2))):
        for H, nv in ((16, False), (16, 2), (32, False), (32, 2)):
            out.append((f"mqa_swapab_gluon H{H} nvfp4{int(nv)} warps8 fused0 async0 early" + (" banks" if nv else "")
                        + f" {opt}", mqa_swapab_gluon_kernel,
                        dict(mqa_ptr, COUNT="*i32", SINK="*fp32", OUT="*bf16", LSE="*fp32", O32="*fp32"),
                        dict(H=H, BLOCK_N=64, NVFP4=nv, PERTURB=0, PREFETCH=True, FUSED_MERGE=False, SINK_ON=True,
                             ROPE_UNDO=True, WRITE_F32=False, ASYNC=False, EARLY=True, BANKS=bool(nv), **flags),
                        dict(num_warps=8)))
    for H, nv in ((16, False), (16, 2), (32, False), (32, 2)):  # the option gluon_cluster (a token's splits one
        # thread-block cluster of 16 CTAs, merged in it), as the rule compiles it at one tile per split (10 splits)
        out.append((f"mqa_swapab_gluon H{H} nvfp4{int(nv)} warps8 fused0 async0 early" + (" banks" if nv else "")
                    + " loads_first prologue2 cluster16", mqa_swapab_gluon_kernel,
                    dict(mqa_ptr, COUNT="*i32", SINK="*fp32", OUT="*bf16", LSE="*fp32", O32="*fp32"),
                    dict(H=H, BLOCK_N=64, NVFP4=nv, PERTURB=0, PREFETCH=True, FUSED_MERGE=False, SINK_ON=True,
                         ROPE_UNDO=True, WRITE_F32=False, ASYNC=False, EARLY=True, BANKS=bool(nv), LOADS_FIRST=True,
                         PROLOGUE=2, CLUSTER=4, NSPLIT=10),
                    dict(num_warps=8)))
        # and the same with the list loops compiled out (gluon_one_tile: every split one tile of one list)
        out.append((f"mqa_swapab_gluon H{H} nvfp4{int(nv)} warps8 fused0 async0 early" + (" banks" if nv else "")
                    + " loads_first prologue2 cluster16 one_tile", mqa_swapab_gluon_kernel,
                    dict(mqa_ptr, COUNT="*i32", SINK="*fp32", OUT="*bf16", LSE="*fp32", O32="*fp32"),
                    dict(H=H, BLOCK_N=64, NVFP4=nv, PERTURB=0, PREFETCH=True, FUSED_MERGE=False, SINK_ON=True,
                         ROPE_UNDO=True, WRITE_F32=False, ASYNC=False, EARLY=True, BANKS=bool(nv), LOADS_FIRST=True,
                         PROLOGUE=2, CLUSTER=4, NSPLIT=10, ONE_TILE=True),
                    dict(num_warps=8)))
        # and at 16 tokens: 5 splits of two tiles, a cluster of 5 CTAs, the first 4 merging 128 dims each
        out.append((f"mqa_swapab_gluon H{H} nvfp4{int(nv)} warps8 fused0 async0 early" + (" banks" if nv else "")
                    + " loads_first prologue1 cluster5", mqa_swapab_gluon_kernel,
                    dict(mqa_ptr, COUNT="*i32", SINK="*fp32", OUT="*bf16", LSE="*fp32", O32="*fp32"),
                    dict(H=H, BLOCK_N=64, NVFP4=nv, PERTURB=0, PREFETCH=True, FUSED_MERGE=False, SINK_ON=True,
                         ROPE_UNDO=True, WRITE_F32=False, ASYNC=False, EARLY=True, BANKS=bool(nv), LOADS_FIRST=True,
                         PROLOGUE=1, CLUSTER=2, NSPLIT=5, CTAS=5),
                    dict(num_warps=8)))
    for H, nv in ((16, False), (16, 2), (32, False), (32, 2)):  # the option gluon_wide (128-slot tiles), as it
        # compiles at 16 tokens: 5 splits of one wide tile, a cluster of 5 CTAs, the first 4 merging 128 dims each;
        # at 8 warps and at 16 (gluon_warps=16, the rule's for fp8 records)
        for w in (8, 16):
            out.append((f"mqa_swapab_gluon H{H} nvfp4{int(nv)} warps{w} fused0 async0 early" + (" banks" if nv else "")
                        + " loads_first prologue1 cluster5 wide", mqa_swapab_gluon_kernel,
                        dict(mqa_ptr, COUNT="*i32", SINK="*fp32", OUT="*bf16", LSE="*fp32", O32="*fp32"),
                        dict(H=H, BLOCK_N=128, LIVE=128, NVFP4=nv, PERTURB=0, PREFETCH=True, FUSED_MERGE=False,
                             SINK_ON=True, ROPE_UNDO=True, WRITE_F32=False, ASYNC=False, EARLY=True, BANKS=bool(nv),
                             LOADS_FIRST=True, PROLOGUE=1, CLUSTER=2, NSPLIT=5, CTAS=5),
                        dict(num_warps=w)))
    for H, nv in ((16, False), (16, 2), (32, False), (32, 2)):  # the option gluon_half (32-slot half tiles), early
        out.append((f"mqa_swapab_gluon H{H} nvfp4{int(nv)} warps8 fused0 async0 early half", mqa_swapab_gluon_kernel,
                    dict(mqa_ptr, COUNT="*i32", SINK="*fp32", OUT="*bf16", LSE="*fp32", O32="*fp32"),
                    dict(H=H, BLOCK_N=64, NVFP4=nv, PERTURB=0, PREFETCH=True, FUSED_MERGE=False, SINK_ON=True,
                         ROPE_UNDO=True, WRITE_F32=False, ASYNC=False, EARLY=True, LIVE=32), dict(num_warps=8)))
    for H in (16, 32):  # the option gluon_e2m1_bits (nvfp4 codes decoded from their bits into bf16)
        out.append((f"mqa_swapab_gluon H{H} nvfp42 warps8 fused0 async0", mqa_swapab_gluon_kernel,
                    dict(mqa_ptr, COUNT="*i32", SINK="*fp32", OUT="*bf16", LSE="*fp32", O32="*fp32"),
                    dict(H=H, BLOCK_N=64, NVFP4=2, PERTURB=0, PREFETCH=True, FUSED_MERGE=False, SINK_ON=True,
                         ROPE_UNDO=True, WRITE_F32=False, ASYNC=False), dict(num_warps=8)))
    out.append(("mqa_merge", mqa_merge_kernel,
                dict(M="*fp32", L="*fp32", ACC="*fp32", SINK="*fp32", POS="*i64", COS_SIN="*fp32", OUT="*bf16",
                     LSE="*fp32", O32="*fp32"),
                dict(BLOCK_S=32, SINK_ON=True, ROPE_UNDO=True, WRITE_F32=False, EARLY=True),  # as launched (merge_early)
                dict(num_warps=8)))
    out.append(("mqa_mxfp8_out", mxfp8_out_kernel, dict(X="*fp32", OUT_Q="*u8", OUT_S="*u8"), {}, {}))
    return out


_SMEM_BASE = re.compile(r"mov\.[bu]32\s+(%r\d+), global_smem;")
_SMEM_ADD = re.compile(r"add\.s32\s+(%r\d+), (%r\d+), (\d+);")
_MBAR_INIT = re.compile(r"mbarrier\.init\.shared(?:::cta)?\.b64\s+\[(%r\d+|global_smem\+\d+)\]")
_MBAR_INVAL = re.compile(r"mbarrier\.inval\.shared(?:::cta)?\.b64\s+\[(%r\d+|global_smem\+\d+)\]")
_SMEM_ACCESS = re.compile(r"\b(?:st|ld)\.shared|ldmatrix|stmatrix|cp\.async(?!\.bulk)")


def mbarrier_reuse(ptx: str) -> dict:
    """The shared-memory offsets of the mbarriers a kernel initializes (``barriers``) and those of them, never
    invalidated, that another shared-memory access also uses as its base offset (``reused``): memory the compiler's
    allocator handed to another buffer (captured arguments of warp-specialized partitions, layout-conversion
    scratch) while an initialized mbarrier lived there, which the PTX ISA leaves undefined before ``mbarrier.inval``
    (on the H200 the relbias warp-specialized kernel's unused turn barriers, reused so, gave wrong rows and faults
    under concurrent load; Triton's own pipelined TMA loops invalidate theirs before reusing the memory). A
    necessary check, not a sufficient one: a buffer that starts below a barrier and covers it is not seen, nor is
    the order of an invalidation and the reuse."""
    bases = set(_SMEM_BASE.findall(ptx))
    offset = {r: int(n) for r, b, n in _SMEM_ADD.findall(ptx) if b in bases}

    def offsets(found):
        return {int(a.split("+")[1]) if a.startswith("global_smem") else offset.get(a, -1) for a in found}

    barriers, invalidated = offsets(_MBAR_INIT.findall(ptx)), offsets(_MBAR_INVAL.findall(ptx))
    used = set()
    for line in ptx.splitlines():
        if "mbarrier" not in line and _SMEM_ACCESS.search(line):
            used |= {int(n) for n in re.findall(r"\+(\d+)\]", line)}
    return dict(barriers=sorted(barriers), reused=sorted((barriers & used) - invalidated))


def resource_usage(cubin: bytes) -> dict:
    """Registers and stack bytes (spills) per thread, from the cuobjdump that Triton's package carries."""
    import re
    import subprocess
    import tempfile

    import triton
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        txt = subprocess.run([tool, "-res-usage", f.name], capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"REG:(\d+) STACK:(\d+)", txt)
    return {"regs": int(m.group(1)), "stack_bytes": int(m.group(2))} if m else {}


def _sass_lines(cubin: bytes) -> list[str]:
    """A cubin's SASS, one line per instruction or label (nvdisasm, from Triton's package)."""
    import subprocess
    import tempfile

    import triton
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([tool, "-c", f.name], capture_output=True, text=True, timeout=120).stdout.splitlines()


# an instruction line's opcode (its guard predicate skipped)
_OPCODE = re.compile(r"\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)")


def _loop_bodies(cubin: bytes) -> list[list[str]]:
    """The loops of a cubin's SASS (a label and the backward branch to it), each as its instruction lines."""
    lines = _sass_lines(cubin)
    labels = {ln.strip()[:-1]: i for i, ln in enumerate(lines) if re.match(r"\.L_x_\d+:", ln.strip())}
    bodies = []
    for i, ln in enumerate(lines):
        m = re.search(r"BRA `\((\.L_x_\d+)\)", ln)
        if m and labels.get(m.group(1), i) < i:
            bodies.append([b for b in lines[labels[m.group(1)]:i + 1] if _OPCODE.match(b)])
    return bodies


def sass_loops(cubin: bytes, min_len: int = 100) -> list[dict]:
    """The loops of a cubin's SASS (at least min_len instructions), each with its instruction count and its ten
    commonest opcodes: what a tile costs per warp, before any timing."""
    import collections
    loops = []
    for body in _loop_bodies(cubin):
        ops = collections.Counter(_OPCODE.match(b).group(1).split(".")[0] for b in body)
        if len(body) >= min_len:
            loops.append(dict(instructions=len(body), top=ops.most_common(10)))
    return loops


def compile_variant(fn, ptrs, constexprs, options, arch: int = 90):
    """One variant (as _variants lists them) compiled for sm_<arch>, as its launcher would compile it."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig = {}
    constexprs = dict(constexprs)
    for prm in fn.params:  # a constexpr parameter left to its default is compiled with that default, as a
        # launch that omits it would be (not as a runtime integer with every branch kept)
        if prm.is_constexpr and prm.name not in constexprs and prm.default is not inspect.Parameter.empty:
            constexprs[prm.name] = prm.default
    for a in fn.arg_names:
        if a in constexprs:
            sig[a] = "constexpr"
        elif a in ptrs:
            sig[a] = ptrs[a]
        else:
            sig[a] = "fp32" if a in FLOATS else "i32"
    # what the launcher specializes at run time: 16-byte-aligned pointers and strides that are multiples
    # of 16 carry tt.divisibility = 16 (without it loads do not vectorize and the software pipeliner
    # does not issue async copies, so registers, spills and shared memory would not be the launched ones)
    attrs = {(i,): [["tt.divisibility", 16]] for i, a in enumerate(fn.arg_names)
             if a not in constexprs and (a in ptrs or a.startswith("stride"))}
    source = ASTSource
    if getattr(fn, "is_gluon", lambda: False)():  # a Gluon kernel compiles from its own AST source
        from triton.experimental.gluon._runtime import GluonASTSource as source
    return triton.compile(source(fn=fn, signature=sig, constexprs=constexprs, attrs=attrs),
                          target=GPUTarget("cuda", arch, 32), options=options)


def _variant(name: str):
    """The first variant called `name` in _variants: (fn, ptrs, constexprs, options)."""
    for n, *rest in _variants():
        if n == name:
            return rest
    raise KeyError(name)


def compile_named(name: str, arch: int = 90):
    """(the compiled kernel, its launch options) of the variant called `name` in _variants."""
    fn, ptrs, constexprs, options = _variant(name)
    return compile_variant(fn, ptrs, constexprs, options, arch), options


def _sass_opcodes(cubin: bytes) -> list[str]:
    """The opcodes of a cubin's SASS in program order (guards dropped)."""
    return [m.group(1) for m in map(_OPCODE.match, _sass_lines(cubin)) if m]


# SASS opcodes that touch global memory (loads, stores, async copies to shared memory, atomics, reductions, TMA)
_GLOBAL_MEM = ("LDG", "STG", "LDGSTS", "ATOMG", "RED", "UTMALDG", "UTMASTG", "UBLKCP")


def _mma_loops(name: str, arch: int = 90) -> list[list[str]]:
    """The opcodes of each loop of the variant `name` (compiled as launched) that issues warpgroup MMAs (HGMMA)."""
    cubin = compile_named(name, arch)[0].asm["cubin"]
    loops = ([_OPCODE.match(b).group(1) for b in body] for body in _loop_bodies(cubin))
    return [ops for ops in loops if any(o.startswith("HGMMA") for o in ops)]


def mma_descriptor_moves(name: str, arch: int = 90) -> list[dict]:
    """Per loop of the variant `name` that issues warpgroup MMAs: its instruction count, its MMAs (HGMMA) and its
    register-to-uniform moves (R2UR): an MMA whose shared-memory descriptors are built in ordinary registers takes
    two R2UR (and two UMOV) more each time, where descriptors kept in uniform registers take none."""
    import collections
    out = []
    for ops in _mma_loops(name, arch):
        n = collections.Counter(o.split(".")[0] for o in ops)
        out.append(dict(instructions=len(ops), hgmma=n["HGMMA"], r2ur=n["R2UR"], umov=n["UMOV"]))
    return out


def loads_before_first_barrier(name: str, arch: int = 90) -> list[dict]:
    """Per loop of the variant `name` that issues warpgroup MMAs: how many of its 64- and 128-bit global loads (the
    record codes: 16 fp8 codes or 8 e2m1 byte pairs a load) come before its first barrier, and how many after it."""
    out = []
    for ops in _mma_loops(name, arch):
        bar = next(i for i, o in enumerate(ops) if o.startswith("BAR"))
        wide = [i for i, o in enumerate(ops) if o.startswith("LDG") and (".128" in o or ".64" in o)]
        out.append(dict(before=sum(i < bar for i in wide), after=sum(i > bar for i in wide)))
    return out


def cluster_barrier_order(name: str, arch: int = 90) -> dict:
    """The variant `name`'s thread-block cluster barrier in its sm_90 SASS (UCGABAR_ARV, then UCGABAR_WAIT): how many
    arrivals and waits, the global stores before the arrival and after the wait, whether a GPU-scope memory barrier
    (MEMBAR.ALL.GPU: the release) precedes the arrival, whether L1 is invalidated right after the wait (CCTL.IVALL:
    the acquire, so plain loads after it see the other CTAs' stores), the global loads after the wait, and how many
    instructions after the wait the first exponential (MUFU) comes and the last load: the merge's loads all issued
    before its arithmetic."""
    ops = _sass_opcodes(compile_named(name, arch)[0].asm["cubin"])
    arv = [i for i, o in enumerate(ops) if o.startswith("UCGABAR_ARV")]
    wait = [i for i, o in enumerate(ops) if o.startswith("UCGABAR_WAIT")]
    out = dict(arrivals=len(arv), waits=len(wait))
    if arv and wait:
        a, w = arv[0], wait[-1]
        tail = ops[w:]
        loads = [i for i, o in enumerate(tail) if o.startswith("LDG")]
        out.update(stores_before=sum(o.startswith("STG") for o in ops[:a]),
                   stores_after=sum(o.startswith("STG") for o in tail),
                   release=any(o.startswith("MEMBAR") and ".GPU" in o for o in ops[max(0, a - 4):a]),
                   l1_invalidated=any(o.startswith("CCTL.IVALL") for o in tail[:3]),
                   loads_after=len(loads), last_load=max(loads, default=-1),
                   first_exp=next((i for i, o in enumerate(tail) if o.startswith("MUFU.EX2")), -1))
    return out


def loads_by_barrier(name: str, arch: int = 90) -> list[int]:
    """The variant `name`'s global loads (LDG, and LDGSTS: copies into shared memory) from its start to its first
    MMA (HGMMA, HMMA or IMMA), counted per stretch between barriers: element 0 the loads before the first barrier,
    element i those between barriers i and i + 1. A load behind a barrier waits for every warp to reach it, so each
    nonempty stretch is a round trip to memory."""
    ops = _sass_opcodes(compile_named(name, arch)[0].asm["cubin"])
    end = next(i for i, o in enumerate(ops) if o.split(".")[0] in ("HGMMA", "HMMA", "IMMA"))
    edges = [-1] + [i for i, o in enumerate(ops[:end]) if o.startswith("BAR")] + [end]
    ldg = [i for i, o in enumerate(ops[:end]) if o.startswith("LDG")]
    return [sum(a < i < b for i in ldg) for a, b in zip(edges, edges[1:])]


def pdl_entry_order(name: str, pdl: bool = True, arch: int = 90) -> dict:
    """The variant `name` compiled with PDL (as launched with launch_pdl): the SASS positions of the grid-dependency
    wait (ACQBULK, griddepcontrol.wait), of the release of the next grid (PREEXIT, griddepcontrol.launch_dependents)
    and of the first global memory instruction. The PDL rule (attnkit._triton.pdl) holds when the wait comes first."""
    fn, ptrs, constexprs, options = _variant(name)
    opts = dict(options, launch_pdl=True) if pdl else options
    ops = _sass_opcodes(compile_variant(fn, ptrs, dict(constexprs, PDL=pdl), opts, arch).asm["cubin"])
    first = lambda pred: next((i for i, o in enumerate(ops) if pred(o)), None)  # noqa: E731
    return dict(wait=first(lambda o: o == "ACQBULK"), release=first(lambda o: o == "PREEXIT"),
                first_global=first(lambda o: o.split(".")[0] in _GLOBAL_MEM))


def pdl_early_order(name: str, arch: int = 90, flag: str = "PDL_EARLY") -> dict:
    """The variant `name` compiled with PDL and PDL_EARLY (the mqa_decode option pdl_early_inputs), as launched with
    launch_pdl: the SASS positions (instruction indices in program order) of the release of the next grid
    (PREEXIT), of the grid-dependency wait (ACQBULK), of the first global load, of the first global store (stores,
    atomics, reductions), of the first instruction of the first loop (the slot tiles, where the records are loaded),
    and how many global loads come before the wait. The option's rule holds when the release comes first, some
    loads (the query's) come before the wait, and the wait comes before every loop and every store. flag: the
    kernel's constexpr for the early reads (the mqa_decode merge's is EARLY, the option merge_early)."""
    fn, ptrs, constexprs, options = _variant(name)
    cubin = compile_variant(fn, ptrs, dict(constexprs, PDL=True, **{flag: True}), dict(options, launch_pdl=True),
                            arch).asm["cubin"]
    lines = _sass_lines(cubin)
    ops, loop_starts, labels = [], [], {}
    for ln in lines:
        lab = re.match(r"(\.L_x_\d+):", ln.strip())
        if lab:
            labels[lab.group(1)] = len(ops)
            continue
        m = _OPCODE.match(ln)
        if not m:
            continue
        br = re.search(r"BRA `\((\.L_x_\d+)\)", ln)
        if br and br.group(1) in labels:  # a backward branch: its target starts a loop
            loop_starts.append(labels[br.group(1)])
        ops.append(m.group(1).split(".")[0])
    first = lambda pred: next((i for i, o in enumerate(ops) if pred(o)), None)  # noqa: E731
    wait = first(lambda o: o == "ACQBULK")
    return dict(release=first(lambda o: o == "PREEXIT"), wait=wait, first_load=first(lambda o: o == "LDG"),
                first_store=first(lambda o: o in ("STG", "ATOMG", "RED", "UTMASTG")),
                first_loop=min(loop_starts) if loop_starts else None,
                loads_before_wait=sum(1 for o in ops[:wait] if o == "LDG") if wait is not None else None)


def compile_all(arch: int = 90, names=None, log=print, census: bool = False):
    if os.environ.get("TRITON_INTERPRET", "0") == "1":
        raise RuntimeError("compile_check needs TRITON_INTERPRET unset (the interpreter replaces the kernels)")
    results = []
    for name, fn, ptrs, constexprs, options in _variants():
        if names and not any(n in name for n in names):
            continue
        t0 = time.time()
        k = compile_variant(fn, ptrs, constexprs, options, arch)
        md = k.metadata
        rec = dict(name=name, seconds=round(time.time() - t0, 1), num_warps=md.num_warps,
                   shared=getattr(md, "shared", None), cubin_bytes=len(k.asm.get("cubin", b"")),
                   **resource_usage(k.asm["cubin"]), mbarriers_reused=mbarrier_reuse(k.asm["ptx"])["reused"])
        if census:
            rec["loops"] = sass_loops(k.asm["cubin"])
        results.append(rec)
        log(f"{name:32s} ok  {rec['seconds']:5.1f}s  warps={rec['num_warps']}  shared={rec['shared']}  "
            f"regs={rec.get('regs')}  stack={rec.get('stack_bytes')}")
        for lp in rec.get("loops", ()):
            log(f"    loop of {lp['instructions']} instructions: "
                + ", ".join(f"{o} {n}" for o, n in lp["top"]))
    return results



def wgmma_wait_order(name: str, arch: int = 90) -> dict:
    """In the SASS of a Gluon attention variant's interior loop (the shortest loop holding both warpgroup MMAs and
    exponentials): its length, the positions of its first and last EX2, and of each warpgroup-MMA wait with the
    number of groups it leaves in flight. An overlapped value product (FlashAttention-3's intra-warpgroup overlap)
    shows as the wait that leaves 0 groups coming after the first exponential."""
    k, _ = compile_named(name, arch)

    def has(body, op):
        return any(_OPCODE.match(b).group(1).startswith(op) for b in body)

    both = [b for b in _loop_bodies(k.asm["cubin"]) if has(b, "HGMMA") and has(b, "MUFU.EX2")]
    if not both:
        return {}
    best = min(both, key=len)
    ops = [_OPCODE.match(b).group(1) for b in best]
    ex2 = [j for j, o in enumerate(ops) if o.startswith("MUFU.EX2")]
    waits = [(j, int(re.search(r"0x([0-9a-f]+)", b.split("DEPBAR")[1]).group(1), 16))
             for j, b in enumerate(best) if "WARPGROUP.DEPBAR" in b]
    return dict(instructions=len(best), first_ex2=ex2[0], last_ex2=ex2[-1], waits=waits)


def timer_spin_order(name: str, arch: int = 90) -> dict:
    """The variant `name`'s global-timer spin in its sm_90 SASS: how many timer reads (CS2R of SR_GLOBALTIMER),
    the first one's position, the first global memory instruction's, and whether a branch before that instruction
    jumps back to a timer read (the spin is a loop that ends before the kernel touches memory)."""
    lines = [ln for ln in _sass_lines(compile_named(name, arch)[0].asm["cubin"]) if _OPCODE.match(ln)
             or re.match(r"\s*\.L_x_\d+:", ln)]
    labels = {ln.strip()[:-1]: i for i, ln in enumerate(lines) if re.match(r"\s*\.L_x_\d+:", ln)}
    ins = [i for i, ln in enumerate(lines) if _OPCODE.match(ln)]
    timer = [i for i in ins if "SR_GLOBALTIMER" in lines[i]]
    first_mem = next((i for i in ins if _OPCODE.match(lines[i]).group(1).startswith(_GLOBAL_MEM)), -1)
    loops_back = False
    for i in ins:
        m = re.search(r"BRA `\((\.L_x_\d+)\)", lines[i])
        if m and (first_mem < 0 or i < first_mem) and labels.get(m.group(1), i) < i:
            loops_back = loops_back or any(labels[m.group(1)] < t < i for t in timer)
    return dict(timer_reads=len(timer), first_timer=timer[0] if timer else -1, first_global=first_mem,
                loops_back=loops_back)


def load_round_trips(name: str, arch: int = 90) -> int:
    """The dependent global-load round trips of a straight-line kernel's SASS (the record writer), under in-order
    issue: an instruction that reads a register written by a global load issued in round r waits for it, so loads
    issued after it start round r + 1. The count is the rounds in which loads are issued (a wide load's destination
    holds 2 or 4 registers; predicates are registers too)."""
    k, _ = compile_named(name, arch)
    ready, cur, rounds = {}, 0, set()  # register -> the round its loaded value arrives in
    for line in _sass_lines(k.asm["cubin"]):
        m = _OPCODE.match(line)
        if not m:
            continue
        op = m.group(1)
        body = line.split(op, 1)[1].split(";")[0]
        regs = re.findall(r"\b([RP]\d+)\b", body)
        if not regs:
            continue
        dest, srcs = (regs[0], regs[1:]) if not op.startswith(("ST", "EXIT", "BRA")) else (None, regs)
        guard = re.match(r"\s*@!?(P\d+)", line.split("*/", 1)[-1])
        if guard:
            srcs = srcs + [guard.group(1)]
        for r in srcs:
            cur = max(cur, ready.get(r, 0))
        if op.startswith("LDG"):
            rounds.add(cur)
            width = 4 if ".128" in op else 2 if ".64" in op else 1
            n0 = int(dest[1:])
            for j in range(width):
                ready[f"R{n0 + j}"] = cur + 1
        elif dest is not None:
            ready[dest] = max([ready.get(r, 0) for r in srcs] + [0])
    return len(rounds)


def score_mma_vs_conversion(name: str, arch: int = 90) -> dict:
    """In the SASS of the sparse_int8 Gluon kernel's query-digit loop (the loop holding its integer warpgroup MMAs):
    its length, the position of the first IGMMA and of the first shared-memory store (the value conversion's), and
    the barriers between the loop's start and that IGMMA. With gluon_overlap the score product is issued before the
    conversion stores anything; without it, after the conversion and its barriers."""
    k, _ = compile_named(name, arch)
    for body in _loop_bodies(k.asm["cubin"]):
        ops = [_OPCODE.match(b).group(1) for b in body]
        if any(o.startswith("IGMMA") for o in ops):
            first = next(j for j, o in enumerate(ops) if o.startswith("IGMMA"))
            sts = next(j for j, o in enumerate(ops) if o.startswith("STS"))
            return dict(instructions=len(body), igmma=first, first_sts=sts,
                        barriers_before=sum(o.startswith("BAR") for o in ops[:first]))
    return {}


def digit_loop_shared_ops(name: str, arch: int = 90) -> dict:
    """The shared-memory instructions (LDS*, STS*, LDSM, STSM), barriers (BAR) and length of the sparse_int8 Gluon
    kernel's query-digit loop (the loop holding its integer warpgroup MMAs), by opcode."""
    k, _ = compile_named(name, arch)
    for body in _loop_bodies(k.asm["cubin"]):
        ops = [_OPCODE.match(b).group(1) for b in body]
        if any(o.startswith("IGMMA") for o in ops):
            out = {"instructions": len(ops)}
            for o in ops:
                if o.startswith(("LDS", "STS", "BAR")):
                    key = "BAR" if o.startswith("BAR") else o
                    out[key] = out.get(key, 0) + 1
            return out
    return {}


def fallback_loop_mmas(name: str, arch: int = 90) -> dict:
    """The warpgroup MMA instructions of the sparse_int8 Gluon kernel's split-bf16 loop (the fallback: the loop
    holding bf16 warpgroup MMAs and no integer one), by opcode with its shape (e.g. HGMMA.64x32x16.F32.BF16)."""
    k, _ = compile_named(name, arch)
    for body in _loop_bodies(k.asm["cubin"]):
        ops = [re.search(r"\b([A-Z]GMMA\.[0-9A-Za-z.]+)", b) for b in body]
        ops = [m.group(1) for m in ops if m]
        if any(o.startswith("HGMMA") for o in ops) and not any(o.startswith("IGMMA") for o in ops):
            return dict(collections.Counter(ops))
    return {}


def softmax_overlap(name: str, arch: int = 90) -> list[dict]:
    """Each loop of a Gluon attention variant's sm_90 SASS that holds warpgroup MMAs and exponentials: its length and
    the exponentials issued between the wait that leaves one MMA group in flight (the score product done, the value
    product still running) and the wait that leaves none. Zero there: the value product does not overlap the
    softmax in that loop."""
    k, _ = compile_named(name, arch)
    out = []
    for body in _loop_bodies(k.asm["cubin"]):
        ops = [_OPCODE.match(b).group(1) for b in body]
        if not any(o.startswith("HGMMA") for o in ops) or not any(o.startswith("MUFU.EX2") for o in ops):
            continue
        ex2, armed, between = 0, False, []
        for b, o in zip(body, ops):
            if "WARPGROUP.DEPBAR" in b:
                left = int(re.search(r"0x([0-9a-f]+)", b.split("DEPBAR")[1]).group(1), 16)
                if left == 1:
                    armed, ex2 = True, 0
                elif left == 0 and armed:
                    between.append(ex2)
                    armed = False
            elif o.startswith("MUFU.EX2") and armed:
                ex2 += 1
        out.append(dict(instructions=len(body), ex2_in_flight=between))
    return out


if __name__ == "__main__":
    _census = "--census" in sys.argv[1:]
    compile_all(names=[a for a in sys.argv[1:] if a != "--census"] or None, census=_census)
