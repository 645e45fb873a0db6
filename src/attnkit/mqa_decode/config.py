"""Launch rules of mqa_decode, as data, with the measurements that chose them (sweeps under
benchmarks/sweeps/)."""

from __future__ import annotations

from dataclasses import dataclass

from ..options import IntOption, Switch

# 512: on the H200 (benchmarks/sweeps/mqa-headpad-dc{128,512}-h200-421a469.json against the 256 of the same
# commit's bench) 16 heads x 1 / 16 tokens fp8, 32 x 16 nvfp4, 64 x 64 fp8: 20.7 / 81.4 / 84.6 / 248.7 us at
# 128, 24.0 / 53.0 / 56.3 / 163.8 at 512; 256 lay between (23 / 58 / 60 / 168)
# At one pipeline stage (HEADPAD_STAGES) the balance moved at 1-2 tokens: sweep mqa-headpad-tile at c9f9de3
# (benchmarks/sweeps/h200-c9f9de3/sweep-mqa-headpad-tile.json, 5 rounds, attention with its merge, paired 256 ÷ 512
# dims): 1 token 0.855-0.873 (fp8, 16 / 32 / 64 heads) and 0.947-0.954 (nvfp4); 2 tokens 0.871-0.935 (fp8) and
# 0.982 / 1.051 / 0.969 (nvfp4, 16 / 32 / 64 heads); from 4 tokens 0.994-1.435 (slower on 16 of 18, 0.994 on two).
# 16 slots per tile were slower everywhere (1.056-1.281), 64 with 256 dims too (1.003-1.514). So 256 at one token, and at two for fp8.
HEADPAD_OUT_DC = IntOption("out_dc", "ATTNKIT_MQA_HEADPAD_OUT_DC", None, 128, 512,
                           "output dims per head-padded program (128, 256 or 512); default: the rule "
                           "(config.headpad_out_dc_rule: 256 at one token and at two for fp8, else 512)")


def headpad_out_dc_rule(T: int, comp_format: str = "fp8") -> int:
    """Output dims per head-padded program by default (HEADPAD_OUT_DC's sweep): 256 at one token, and at two tokens
    for fp8 compressed records; 512 otherwise."""
    return 256 if T == 1 or (T == 2 and comp_format == "fp8") else 512


# The head-padded tile loop's software pipelining (Triton's num_stages for the kernel). Triton's default, 3, stages
# each tile's record codes in shared memory by cp.async, in a layout whose copies and reads Nsight Compute showed up
# to 16-way bank-conflicted (benchmarks/experiments/ncu-h200-63a3f30/); 1 loads them into registers instead (no
# LDGSTS in the sm_90 SASS; 255 registers either way). Sweep mqa-headpad-stages at 358355d
# (benchmarks/sweeps/h200-358355d/sweep-mqa-headpad-stages.json, 5 rounds, attention with its merge, paired ÷ 3
# stages): 1 stage 0.892-0.965 on all 30 cases (16 / 32 / 64 heads x 1-16 tokens x fp8 / nvfp4; nvfp4 16 heads x 1
# token 17.6 -> 15.7 us, fp8 64 heads x 16 tokens 48.8 -> 47.0), 2 stages 0.975-1.001. So 1.
HEADPAD_STAGES = IntOption("headpad_stages", "ATTNKIT_MQA_HEADPAD_STAGES", 1, 1, 4,
                           "software-pipeline stages of the head-padded tile loop (Triton num_stages; 1: no cp.async "
                           "staging of the record codes)")
# The head-padded kernel's slots per tile (the MMA's N of the score product, K of the value product): 32 since the
# first kernel, its registers full at 8 warps (255, 872 / 256 bytes of spill for fp8 / nvfp4 at 512 output dims; at
# 16 slots 792 / 160, at 256 dims 672 / 56; compile_check).
HEADPAD_BLOCK_N = IntOption("headpad_block_n", "ATTNKIT_MQA_HEADPAD_BLOCK_N", 32, 16, 64,
                            "slots per head-padded tile (16, 32 or 64)")
# The head-padded kernel's first tiles' slot ids (headpad_ids_early). In the sm_90 SASS (compile_check.
# loads_by_barrier, tests/test_compile_sm90.py) its 17 loads before the first barrier are the query's and its RoPE
# inputs'; the first tile's slot ids wait behind the query's 15 layout barriers (the 16 loads of stretch 15: ids
# and records), so the program's first records follow two round trips to memory (the query's, then the ids'). With
# the option both lists' first slot ids are loaded before the query, and each next tile's before the current tile's
# records (the Gluon kernel's gluon_early and gluon_prefetch): the same tiles in the same order, the same bits. In the
# SASS both lists' first ids then load before the first barrier (39 loads there against 17; 704 bytes of stack against
# 672 at 256 output dims, fp8). Timed at d324854 (benchmarks/sweeps/h200-d324854/sweep-mqa-headpad-ids-early.json, 5
# rounds, paired ÷ rule, 16 / 32 / 64 heads x 1-16 tokens): fp8 0.996-1.019, nvfp4 0.999-1.102 (1.029-1.102 from 2
# tokens), whole steps alike. Off: the baseline loses nothing by its load order (so the swap-AB ratios are not those
# of a baseline held back there). With the option off the kernel compiles to the sm_90 SASS it had before the option
# (6e1d5ca; nvdisasm text hashed, 256 and 512 output dims), so its gates stand.
HEADPAD_IDS_EARLY = Switch("headpad_ids_early", "ATTNKIT_MQA_HEADPAD_IDS_EARLY", False,
                           "head-padded kernel: the first tiles' slot ids loaded before the query, each next tile's "
                           "before the current tile's records (the same bits); default off (fp8 within 2 %, nvfp4 "
                           "up to 10 % slower, sweep mqa-headpad-ids-early)")
DIAG_ABLATE = IntOption("_ablate", "ATTNKIT_DIAG_MQA_ABLATE", 0, 0, 4,
                        "diagnostics only, wrong results: the swap-AB kernel with one stage left out, for timing "
                        "where its time goes (1: no record loads, 2: no dequantization, 3: no value product, "
                        "4: no score product)")
# The finishing merge's programs: one per (token, head) and merge_dc output dims. Sweep mqa-merge-dc
# (benchmarks/sweeps/h200-870bea3/sweep-mqa-merge-dc.json, 5 rounds, attention with its merge, paired medians):
# the Gluon swap-AB kernel's merge at 256 against 512 dims: 1 token 0.938 / 0.952 (fp8, 16 / 32 heads) and
# 0.946 / 0.958 (nvfp4), 4 tokens 0.998 / 0.977 and 0.995 / 0.977, 16 tokens 1.015 / 0.992 and 0.989 / 0.994;
# 128 and 64 dims slower than 256 on every case. The head-padded kernel's merge at 128 dims: slower than at 512
# on every case (by 1-6 %). At 2 and 8 tokens (benchmarks/sweeps/h200-5a1f4f2/sweep-mqa-merge-dc-2.json, 7 rounds):
# 2 tokens 0.952 / 0.998 (fp8, 16 / 32 heads) and 0.949 / 0.998 (nvfp4), 8 tokens 0.978 / 1.024 and 0.980 / 0.998.
# Up to 128 merged rows (tokens x heads) 0.938-0.998, never slower; above, mixed (16 heads x 16 tokens
# 1.015 / 0.989, 32 x 8 1.024 / 0.998, 32 x 16 0.992 / 0.994). So 256 for the swap-AB kernel up to 128 rows, else 512.
# Re-timed with merge_early (the merge's own inputs read before its wait), 5 rounds, paired 256 / 512 dims:
# benchmarks/sweeps/h200-d39ab48/sweep-mqa-merge-dc-early.json: 1 token 0.961-0.975, 2 tokens 0.976-1.000, 4 tokens
# 0.965-0.994, 8 tokens 0.912-0.957 (32 heads x 8 tokens, 256 rows, 0.943 / 0.946 fp8 / nvfp4: now faster there),
# 128 dims slower than 256 on all 16 cases; sweep-mqa-merge-dc-early-2.json: 16 tokens 1.011-1.045 (512 faster), 32
# tokens 0.953-0.974 (256 faster). Not a function of the rows alone: by token count, 256 dims but from 9 to 31 tokens
# (16 measured; 9-15 and 17-31 follow it), 512 there. From 48 tokens the merge is fused (GLUON_FUSED_MAX_SPLITS).
MERGE_DC = IntOption("merge_dc", "ATTNKIT_MQA_MERGE_DC", None, 64, 512,
                     "output dims per program of the finishing merge (64, 128, 256 or 512); default: the rule "
                     "(256 for the swap-AB kernel but from 9 to 31 tokens, else 512)")
MERGE_DC_SWAPAB = 256
MERGE_DC_SWAPAB_512_TOKENS = range(9, 32)  # the token counts where the swap-AB kernel's merge takes 512 dims


# The merge's inputs that the attention kernel launched just before it does not write (the sink, the token's
# position, its cos / sin) read at entry, before the partials (under PDL between the release and the wait), instead
# of after the merge loop, where the position and then its cos / sin were two more dependent round trips. Timed at
# a307526 (benchmarks/sweeps/h200-a307526/sweep-mqa-merge-early.json, 5 rounds, attention with its merge, paired
# early / rule, 16 / 32 heads x 1-16 tokens x fp8 / nvfp4): swap-AB 0.907-0.984 on all 20 cases (16 heads x 8
# tokens nvfp4 11.6 -> 10.5 us, x 1 token fp8 8.7 -> 8.3), its whole steps 0.915-0.993; head-padded 0.978-0.994 at
# 1-2 tokens (pdl on there), 0.990-1.007 from 4. So on for both kernels (the baseline's merge is the same kernel).
MERGE_EARLY = Switch("merge_early", "ATTNKIT_MQA_MERGE_EARLY", True,
                     "the finishing merge reads the sink, the token's position and its cos / sin at entry (under "
                     "PDL before it waits for the attention kernel, which writes none of them), so that their round "
                     "trips overlap the partials' loads; the same bits; on: swap-AB steps 0.7-8.5 % faster (sweep "
                     "mqa-merge-early)")


def merge_dc_rule(kernel: str, T: int, H: int) -> int:
    """Output dims per merge program: a pure function of the kernel and the step's token count (evidence above; H
    is kept for callers, the measured rule does not depend on it)."""
    return MERGE_DC_SWAPAB if kernel == "swapab" and T not in MERGE_DC_SWAPAB_512_TOKENS else 512


def merge_warps(merge_dc: int, warps: int | None = None) -> int:
    """Warps per merge program: 8 at 512 dims (the merge as measured before the option), 4 / 2 / 2 below; an
    explicit MERGE_WARPS (``warps``) overrides it."""
    return warps or max(2, min(8, merge_dc // 64))


# Timed at d324854 (benchmarks/sweeps/h200-d324854/sweep-mqa-merge-warps.json, 5 rounds, paired ÷ rule, 16 / 32 heads x
# 1-8 tokens, attention with its merge): swap-AB's merge at 2 warps 1.011-1.059 at 1-2 tokens, 0.996-1.029 at 4,
# 0.958-0.979 at 8; at 8 warps 0.994-1.293; head-padded's at 4 warps 1.118-1.199 at 1-4 tokens, 0.982-0.998 at 8; at
# 16 warps 1.023-1.087. The rule stays (a gain at 8 tokens alone).
MERGE_WARPS = IntOption("merge_warps", "ATTNKIT_MQA_MERGE_WARPS", None, 1, 16,
                        "warps per program of the finishing merge (1, 2, 4, 8 or 16); default: the rule "
                        "(config.merge_warps: 8 at 512 dims, 4 at 256, 2 below)")


SWAPAB_WARPS = IntOption("num_warps", "ATTNKIT_MQA_SWAPAB_WARPS", 8, 4, 8, "warps per swap-AB program (4 or 8)")
SWAPAB_BLOCK_N = IntOption("block_n", "ATTNKIT_MQA_SWAPAB_BLOCK_N", 32, 32, 64,
                           "slots per swap-AB tile (32 or 64)")


@dataclass(frozen=True)
class HeadpadPlan:
    block_h: int  # heads on M, padded to 64
    block_n: int  # slots per tile
    out_dc: int  # output dims per program (the scores are recomputed 512 / out_dc times)
    num_splits: int
    slots_per_split: int
    num_warps: int
    num_stages: int = 1  # Triton num_stages of the tile loop (HEADPAD_STAGES)
    ids_early: bool = False  # the first tiles' slot ids loaded before the query (HEADPAD_IDS_EARLY)


# One program per SM is resident (255 registers x 256 threads, compile_check), so a launch of
# more programs than SMs runs in whole extra waves. Time model fitted to every head-padded and swap-AB series of
# benchmarks/results/mqa_decode-h200-2026-11-30.json (H 16/32/64 x fp8/nvfp4, T 1..64; 3 parameters per
# series, largest residual 4.7 us): t = c0 + waves * (p + tiles_per_program * u), with p of 3 to 14 us and u of
# 7 to 13 us per 32-slot tile. The rule below minimizes waves * (PROLOGUE_TILES + tiles per program) and
# predicts 15-30 % less time than the e3c66a8 rule (two programs per SM assumed) from 8 tokens up and the same
# below. Timed at 69dcc17 (benchmarks/results/mqa_decode-h200-2026-11-30-69dcc17.json): head-padded 16 heads x
# 16 tokens 53.7 -> 39.5 us (fp8), 47.3 -> 34.4 (nvfp4), 1-4 tokens within a few us of e3c66a8.
# The Gluon kernel at 1-4 tokens (`benchmarks/sweeps/h200-5a8c79f/sweep-mqa-gluon-splits-small.json`, 5 rounds,
# attention with its merge, medians in us, rule (10 splits of one 64-slot tile) / 5 splits / 2 splits / 5 fused /
# 2 fused): 16 heads fp8 1 token 9.0 / 12.1 / 25.3 / 15.9 / 25.3, 4 tokens 10.7 / 14.2 / 29.6 / 18.4 / 28.5; 32 heads
# nvfp4 4 tokens 12.7 / 16.4 / 32.7 / 22.1 / 31.8 (all twelve cases alike): each tile a program walks adds 3-4 us, more
# than the partials it saves the merge; the rule stays.
RESIDENT_PROGRAMS_PER_SM = 1
PROLOGUE_TILES = 1


def _splits(T: int, programs_per_split: int, tiles: int, sm_count: int, num_splits: int | None,
            resident: int = RESIDENT_PROGRAMS_PER_SM) -> tuple[int, int]:
    """(splits, tiles per split): the split count whose launch takes the fewest program-waves of work (ties:
    fewer splits, so less to merge); an explicit num_splits overrides the rule."""
    if num_splits is None:
        slots = max(1, resident * sm_count)
        best = None
        for s in range(1, tiles + 1):
            per = -(-tiles // s)
            eff = -(-tiles // per)
            waves = -(-(T * programs_per_split * eff) // slots)
            key = (waves * (PROLOGUE_TILES + per), eff)
            if best is None or key < best:
                best = key
        num_splits = best[1]
    num_splits = max(1, min(tiles, num_splits))
    per = -(-tiles // num_splits)
    return -(-tiles // per), per


def headpad_plan(T: int, H: int, n_slots: int, sm_count: int, num_splits: int | None, device_type: str,
                 out_dc: int | None = None, stages: int | None = None, block_n: int | None = None,
                 comp_format: str = "fp8", ids_early: bool | None = None) -> HeadpadPlan:
    block_n = HEADPAD_BLOCK_N.resolve(block_n)
    if block_n not in (16, 32, 64):
        raise ValueError(f"headpad_block_n: must be 16, 32 or 64, got {block_n}")
    stages = HEADPAD_STAGES.resolve(stages)
    out_dc = HEADPAD_OUT_DC.resolve(out_dc)
    if out_dc is None:
        out_dc = headpad_out_dc_rule(T, comp_format)
    if out_dc not in (128, 256, 512):
        raise ValueError(f"out_dc: must be 128, 256 or 512, got {out_dc}")
    tiles = max(1, -(-n_slots // block_n))
    splits, per = _splits(T, -(-H // 64) * (512 // out_dc), tiles, sm_count, num_splits)
    return HeadpadPlan(block_h=64, block_n=block_n, out_dc=out_dc, num_splits=splits, slots_per_split=per * block_n,
                       num_warps=8 if device_type == "cuda" else 4, num_stages=stages,
                       ids_early=bool(HEADPAD_IDS_EARLY.resolve(ids_early)))


SWAPAB_HEADS = (16, 32)
# Cutoffs per compressed-record format: the largest T at which swap-AB beats head-padded for both head counts
# (None: it wins at no T). Measured on the H200 at fc58304 (benchmarks/sweeps/h200-fc58304/
# mqa_decode-headpad-swapab.json, paired ratios head-padded / swap-AB, attention only, T 1..64) and again in
# the 69dcc17 bench (benchmarks/results/mqa_decode-h200-2026-11-30-69dcc17.json):
#   fp8:   16 heads 1.30 to 1.49, 32 heads 1.22 to 1.38 at every T: swap-AB wins everywhere -> 64;
#   nvfp4: 32 heads 0.77 to 0.92 at every T (it loses already at T = 1), 16 heads 0.99 to 1.03 at
#          T = 1 / 2 / 4 (a tie; 0.94 as a whole step) and 0.82 to 0.95 above -> None.
SWAPAB_T_CUTOFF_BY_FORMAT: dict[str, int | None] = {"fp8": 64, "nvfp4": None}
# The dispatch rule's cutoff as specified: the largest T at which swap-AB wins for both head counts and both
# formats. nvfp4 at 32 heads loses from T = 1, so there is none and the default sends every step to
# head-padded.
SWAPAB_T_CUTOFF: int | None = None
SWAPAB_PER_FORMAT = Switch("swapab_per_format", "ATTNKIT_MQA_SWAPAB_PER_FORMAT", False,
                           "dispatch by the cutoff of the step's record format (SWAPAB_T_CUTOFF_BY_FORMAT: swap-AB "
                           "for fp8 at 16 / 32 heads, 1.2-1.5x faster as measured) instead of the single cutoff over "
                           "both formats (none)")


# The Gluon swap-AB kernel (sm_90) against head-padded, measured on the H200 at eac7955
# (benchmarks/sweeps/h200-eac7955/sweep-mqa-gluon.json, paired ratios head-padded / Gluon at 8 warps, attention
# only, T 1..64): fp8 16 heads 1.45 to 3.11, 32 heads 1.13 to 2.41; nvfp4 16 heads 1.33 to 2.43, 32 heads 1.00
# to 1.88 (T = 1: 1.005, p20-p80 1.000-1.007; T = 2: 1.010; T = 4: 1.019). It wins at every measured T for both
# head counts and both formats: the cutoff is the largest T measured. With the query's 16-byte stores (6991d6b,
# benchmarks/results/mqa_decode-h200-2026-11-30-6991d6b.json) the smallest ratio is 1.60 (32 heads, 4 tokens,
# nvfp4). Against the head-padded kernel as tuned since (one pipeline stage, 256 output dims at 1-2 tokens): 1.65
# (32 heads, 2 tokens, nvfp4) at 1-16 tokens (benchmarks/results/mqa_decode-h200-2026-12-02-58f7287-headpad-dc.json)
# and 2.04-3.73 at 32 and 64 tokens (mqa_decode-h200-2026-12-02-700beaa-t32-64.json): still every measured T.
# Re-timed with the merge as it now is (merge_early, its dims rule) in the rule column of the mqa-gluon-one-loop
# sweep at 3d79a8e (benchmarks/sweeps/h200-3d79a8e/sweep-mqa-gluon-one-loop.json, 5 rounds, head-padded / rule,
# attention): 32 tokens 2.18-2.99, 64 tokens 2.68-3.70 (both head counts and formats), 1.67-2.57 at 1-16: the cutoff
# stays the largest T measured.
SWAPAB_T_CUTOFF_GLUON: int | None = 64


def use_swapab(T: int, H: int, comp_format: str = "fp8", per_format: bool = False,
               cutoff: int | None = None, by_format: dict | None = None, gluon: bool = False) -> bool:
    """The dispatch rule: a pure function of shapes and of the swap-AB implementation the device runs (Gluon on
    sm_90, else Triton); with ``per_format``, also of the record format (the Triton kernel's per-format cutoffs)."""
    if gluon:
        c = SWAPAB_T_CUTOFF_GLUON if cutoff is None else cutoff
    elif per_format:
        c = (SWAPAB_T_CUTOFF_BY_FORMAT if by_format is None else by_format).get(comp_format)
    else:
        c = SWAPAB_T_CUTOFF if cutoff is None else cutoff
    return H in SWAPAB_HEADS and c is not None and T <= c


@dataclass(frozen=True)
class SwapabPlan:
    block_n: int  # slots per tile (the MMA's M)
    num_splits: int
    slots_per_split: int
    num_warps: int
    gluon: bool = False  # the Gluon kernel (kernel_swapab_gluon) instead of the Triton one
    fused_merge: bool = False  # Gluon: the token's last program merges the splits (no merge launch)
    gluon_async: bool = False  # Gluon: records copied into shared memory by cp.async, a tile ahead
    gluon_early: bool = False  # Gluon: the first tiles' slot ids loaded before the query (gluon_early)
    live: int = 64  # Gluon: slots per tile (64; 128: wide tiles, gluon_wide; 32: half tiles, the MMA's other 32 rows
    # zero, gluon_half)
    gluon_banks: bool = False  # Gluon: each warp's record loads over 8 slots x 4 blocks (gluon_banks)
    maxnreg: int | None = None  # Gluon: registers per thread at most (gluon_maxnreg; None: the compiler's choice)
    one_loop: bool = False  # Gluon: both lists' tiles in one loop (gluon_one_loop)
    loads_first: bool = False  # Gluon: a tile's record loads all before its first store (gluon_loads_first)
    prologue: int = 0  # Gluon: how much of a program's first loads come before the query's stores (gluon_prologue)
    cluster: int = 0  # Gluon: log2 of the CTAs of a token's thread-block cluster that merge it (gluon_cluster); 0 off
    cluster_ctas: int = 0  # Gluon: the CTAs of that cluster (cluster_size)


# The swap-AB kernel in Gluon (kernel_swapab_gluon): one warpgroup, 64-slot tiles, each record value decoded once.
# It runs on sm_90 only (warpgroup MMAs; Gluon has no interpreter). Default (None): used wherever it runs.
SWAPAB_GLUON = Switch("gluon", "ATTNKIT_MQA_GLUON", None,
                      "the swap-AB kernel in Gluon (sm_90 GPUs only) instead of the Triton kernel; default: Gluon "
                      "wherever it runs")
GLUON_PREFETCH = Switch("gluon_prefetch", "ATTNKIT_MQA_GLUON_PREFETCH", True,
                        "Gluon swap-AB kernel: load the next tile's slot ids before the current tile's records")
# 8: at eac7955 (same sweep) 4 warps took 1.15 to 1.5x the time of 8 (16 heads x 16 tokens fp8: 25.9 against 19.5 us)
# and again at bce9b66 (benchmarks/sweeps/h200-bce9b66/sweep-mqa-gluon-w4.json, 5 rounds, two programs per SM, clusters
# of 16 by rule and forced): paired rule ÷ 4 warps 0.94-0.99 at 4 tokens, 0.83-0.98 at 8, 0.56-0.65 at 16.
# 16 (four warpgroups) with wide tiles only: two split the 128 slots of the score product and two its heads, all four
# the value product's output dims and the decode; 106-128 registers, 0-8 bytes of spill, where 8 warps take 255 and
# spill up to 168 bytes (compile_check: benchmarks/experiments/sass-wide-tiles-sm90-cf1786d.json). Sweep
# mqa-gluon-wide-warps at 32279f5 (benchmarks/sweeps/h200-32279f5/, 5 rounds,
# paired rule (8 warps) ÷ 16 warps, wide tiles, attention with its merge) at 16 tokens: fp8 1.105 [1.102-1.107] /
# 1.016 [1.015-1.019] at 16 / 32 heads (16 heads 12.7 -> 11.5 us; steps 1.113 / 1.038), nvfp4 0.957 / 0.970 (slower);
# at 1-8 and 32 tokens wide tiles lose at either count. So the rule (swapab_plan): 16 warps where the wide-tile rule
# takes wide tiles over fp8 compressed records, else 8.
GLUON_WIDE16_FORMATS = ("fp8",)
GLUON_WARPS = IntOption("gluon_warps", "ATTNKIT_MQA_GLUON_WARPS", None, 4, 16,
                        "warps per Gluon swap-AB program: 4 (one warpgroup), 8 (two: they split the heads of the "
                        "score product and the output dims of the value product, and the decode) or 16 (four, wide "
                        "tiles only: gluon_wide); default: 8, but 16 where the rule takes wide tiles over fp8 "
                        "compressed records (gluon_wide_rule, GLUON_WIDE16_FORMATS)")
# The token's last program merges all its splits alone, after its own tile: slower where a token has many splits,
# faster where it has two (one launch fewer, little to merge). At eac7955 (benchmarks/sweeps/h200-eac7955/
# sweep-mqa-gluon.json): at 8 warps 16 heads x 1 / 16 / 64 tokens fp8 18.2 / 21.4 / 30.6 us fused, 14.0 / 19.5 /
# 33.4 with the merge launched apart; 32 heads x 1 token nvfp4 26.3 against 20.0. At 2bada50
# (benchmarks/sweeps/h200-2bada50/sweep-mqa-gluon-fused-t.json, attention / whole step, apart -> fused, us):
#   64 tokens (2 splits per token): h16 fp8 28.8 -> 27.4 / 30.8 -> 29.9, h32 fp8 36.5 -> 32.2 / 38.7 -> 35.5,
#                                   h16 nvfp4 29.5 -> 27.1 / 31.4 -> 29.5, h32 nvfp4 36.8 -> 32.6 / 39.0 -> 35.9;
#   32 tokens (4 splits): 19.9 -> 21.0, 25.2 -> 25.5, 20.2 -> 21.0, 25.2 -> 26.0 (attention; slower);
#   16 tokens (5 splits): 15.8 -> 18.1, 18.7 -> 21.6, 15.8 -> 17.7, 18.2 -> 21.9 (slower).
# So fused at most GLUON_FUSED_MAX_SPLITS splits per token (the split rule gives 2 from 48 tokens at 640 slots;
# 48 tokens not timed). Forcing fewer splits at 8 / 16 tokens to make the fused merge cheap loses far more than the
# launch it saves (benchmarks/sweeps/h200-c92fae9/sweep-mqa-gluon-fused-splits.json, 16 heads fp8 x 16 tokens: the
# rule 15.6 us, 2 / 3 / 4 splits fused 28.5 / 25.0 / 21.1, 3 splits apart 23.1; the same order on all 8 cases): a
# program walks its tiles one after another, so the split rule's spread is what keeps the step short.
GLUON_FUSED_MAX_SPLITS = 2
# Tried at 94e4bfe-be9299f and removed (gluon_coop_merge; the second form of e9664db's gluon_coop, docs/mqa_decode.md):
# the fused merge spread over a token's programs instead of its last one. Each program arrived on a per-token counter
# after its partial stores (barrier, then an atomic add with release at GPU scope); the token's first CHUNKS programs
# (up to 8) polled it and each merged 512 / CHUNKS output
# dims of every head, up to 16 splits' partials a load (a program that polled too long abandoned its chunk to the last
# arrival by a compare-and-swap on the same word, so nothing waited on a program not started). Right on the H200
# (GPU tests against the merge kernel and the fp64 oracle, graph replays, the abandon path forced). Predicted: the
# merge launch replaced by about two round trips to L2. Measured slower (benchmarks/sweeps/h200-94e4bfe/
# sweep-mqa-gluon-coop.json, 5 rounds, paired ÷ rule, 16 / 32 heads x 1-64 tokens x fp8 / nvfp4): 1.33-1.45 at 1-4
# tokens, 1.13-1.24 at 8-16, 1.01-1.08 at 32, 0.985-1.023 at 64; whole steps 1.00-1.47. Where the time goes
# (h200-be9299f/sweep-mqa-gluon-coop-parts.json, diagnostics variants, medians in us, 16 heads x 1 token fp8 / 32
# heads x 16 tokens nvfp4): the attention with no merge 5.40 / 12.62, the arrivals alone (barrier, release atomic,
# no merge) 7.68 / 15.46, each chunk merged at once without any counter 8.47 / 18.18, the rule (the merge kernel
# launched apart with PDL) 7.61 / 17.03. So the in-kernel arrival alone costs what the whole merge launch does, and
# the merge's loads inside the kernel (8 programs, 40-80 KB each, after their own partial stores) cost more than the
# merge kernel's (32-512 programs): no in-kernel merge can win here. With the counter zeroed by the last arrival
# and one load of all splits (h200-15308ae/sweep-mqa-gluon-coop-2.json) the same: 1.26-1.45 at 1-4 tokens; the
# last-program merge there 1.51-1.84 at 1-4 tokens and 1.16-1.22 at 16.
GLUON_FUSED = Switch("gluon_fused", "ATTNKIT_MQA_GLUON_FUSED", None,
                     "the Gluon swap-AB kernel merges each token's splits in its last program to finish (one launch); "
                     "default: the rule, where a token has at most GLUON_FUSED_MAX_SPLITS (2) splits")
# Off: at 4f341ac (benchmarks/sweeps/h200-4f341ac/sweep-mqa-gluon-async.json, 8 warps) the copies changed the
# attention time by -3 % to +4 % for fp8 and 0 to +10 % for nvfp4 (16 heads x 16 tokens: fp8 19.5 -> 19.3 us,
# nvfp4 19.6 -> 20.6): the first tile's records and the tile-to-tile gathers are not what sets the time.
GLUON_ASYNC = Switch("gluon_async", "ATTNKIT_MQA_GLUON_ASYNC", False,
                     "Gluon swap-AB kernel: copy each tile's raw records into shared memory with cp.async, the first "
                     "while the query is prepared and each next one during the current tile's products")
# A program's first global loads: the query (its prologue) and then, in the list loop, the first tile's slot ids, whose
# records can only be loaded after them: two dependent round trips before the first record load. With gluon_early
# the first tiles' slot ids (both lists') are loaded before the query, so the two loads' latencies overlap (in the
# sm_90 SASS the slot ids' loads issue among the query's; compile_check). The same bits. Timed at a9a4b6f
# (`benchmarks/sweeps/h200-a9a4b6f/sweep-mqa-gluon-early.json`, 5 rounds, attention with its merge, paired early /
# rule): faster on 18 of the 20 step cases of 16 / 32 heads x 1-16 tokens x fp8 / nvfp4, by 0.3-2.8 % (32 heads x 4
# tokens fp8 13.2 -> 12.9 us, 16 heads x 8 tokens nvfp4 12.4 -> 12.0), even at 16 heads x 2 tokens fp8 (1.000), 1.2 %
# slower at 16 heads x 1 token fp8 (9.1 us both as medians). So on by rule, but with gluon_async (which copies the
# first tile itself).
GLUON_EARLY = Switch("gluon_early", "ATTNKIT_MQA_GLUON_EARLY", None,
                     "Gluon swap-AB kernel: load the first tiles' slot ids before the query (their latencies overlap) "
                     "instead of after its prologue; needs gluon_prefetch, not gluon_async; default: the rule, on "
                     "with gluon_prefetch and without gluon_async (0.3-2.8 % faster on 18 of 20 step cases, "
                     "mqa-gluon-early sweep)")
# The same values (exact either way; checked for every code and scale by emulation), fewer instructions
# (compile_check --census, the nvfp4 list loop at 16 heads, 8 warps: see docs/mqa_decode.md), and faster on all
# 14 nvfp4 step cases (16 / 32 heads, 1 to 64 tokens), by 1 to 4 % (h32 t64: 40.1 -> 38.5 us; h16 t1: 10.2 ->
# 10.1): `benchmarks/sweeps/h200-cc494b2/sweep-mqa-gluon-e2m1.json`. So on.
GLUON_E2M1_BITS = Switch("gluon_e2m1_bits", "ATTNKIT_MQA_GLUON_E2M1_BITS", True,
                         "Gluon swap-AB kernel, nvfp4 records: each e2m1 code's bits placed as a bf16 and multiplied "
                         "by its block's scale in two bf16x2 products, instead of through an fp16 and an fp32 product")
# One tile per split compiled as such (gluon_one_tile): where every split is one tile of one list (the split rule's
# 64 slots per split, the window list a multiple of 64 long) and the split's tile is the prologue's first (level 2),
# the list loops after it would run no tile; the option compiles them out (sm_90 SASS at 16 heads x 10 splits, the
# cluster merge: 5920 -> 2928 instructions over nvfp4, 5656 -> 2776 over fp8; registers 226 -> 177 / 135).
# Prediction: a shorter instruction stream (a one-token program's code is fetched cold) 0-4 % faster at 1-2 tokens.
# Sweep mqa-gluon-one-tile at 99987ed (benchmarks/sweeps/h200-99987ed/, 5 rounds, paired rule / option): attention
# at 8 tokens 1.061 / 1.066 fp8 / nvfp4 at 16 heads (10.2 -> 9.6 us), 1.017 / 1.015 at 32; 32 heads x 1-4 tokens
# 1.006-1.035; 16 heads x 1-4 tokens nvfp4 0.992-1.004 (the 2.2x case, 1 token: 1.004), fp8 0.963-0.971 (slower);
# whole steps 0.992-1.005 on all 16 cases. No step faster and the one case short of its target unchanged: off.
GLUON_ONE_TILE = Switch("gluon_one_tile", "ATTNKIT_MQA_GLUON_ONE_TILE", False,
                        "Gluon swap-AB kernel: where every split is one tile of one list (prologue level 2), the "
                        "list loops after the split's first tile are not compiled")
# Half tiles (gluon_half): each program gathers and decodes 32 slots into the first 32 rows of its 64-row MMA tile (the
# other rows zero, their scores masked), so a step has twice the programs, each with about 30 % fewer instructions
# per tile (benchmarks/experiments/sass-census-sm90-mqa-half-aab7888.json, 8 warps, the early list loops, 16 heads:
# window loop 840 -> 588, compressed loop fp8 1099 -> 847, nvfp4 1291 -> 943; 32 heads: window loop 952 -> 704,
# compressed loop fp8 1209 -> 958, nvfp4 1402 -> 1056) and
# the same prologue (the query) and partial stores. At 1-4 tokens a program runs one tile and most SMs idle
# (10 programs per token at the default lists), so shorter programs should shorten the step while the half-tile
# launch still fits one wave. The rule: half tiles where T x (the slots / 32) programs fit one wave of resident
# programs, if GLUON_HALF_BY_RULE. Timed at f6c9ead (benchmarks/sweeps/h200-f6c9ead/sweep-mqa-gluon-half.json, 5 rounds,
# attention with its merge, paired half / rule): slower on all 20 step cases of 16 / 32 heads x 1-16 tokens x fp8 /
# nvfp4: 1.026-1.081 at 1 token (16 heads fp8 9.2 against 8.7 us), 1.028-1.186 at 2-4 tokens, 1.126-1.224 at 8-16.
# The shorter programs do not shorten the step (docs/mqa_decode.md): the rule stays off.
GLUON_HALF_BY_RULE = False
GLUON_HALF = Switch("gluon_half", "ATTNKIT_MQA_GLUON_HALF", None,
                    "Gluon swap-AB kernel: tiles of 32 live slots (half the MMA's 64 rows; twice the programs, each "
                    "shorter) instead of 64; default: the rule (config.gluon_half_rule)")


# gluon_banks, timed at 98ce351 (benchmarks/sweeps/h200-98ce351/sweep-mqa-gluon-banks.json, 5 rounds, attention
# with its merge, paired banks / rule, 16 / 32 heads x 1-16 tokens): nvfp4 0.982-0.993 on 8 of 10 cases, 0.996 and
# 1.000 on the other two; fp8 0.997-1.007 (no gain: there the window and compressed tiles' loads already hide the
# stores). So on for nvfp4 compressed records, off for fp8.
GLUON_BANKS = Switch("gluon_banks", "ATTNKIT_MQA_GLUON_BANKS", None,
                     "Gluon swap-AB kernel: each warp's record loads (and the decoded tile's 16-byte stores) over 8 "
                     "slots x 4 blocks instead of 4 x 8, so that the stores meet every chunk of the 128-byte swizzle "
                     "(Nsight Compute: 4 x 8 stores 2-way bank-conflicted); not with gluon_async; default: on for "
                     "nvfp4 compressed records (1-2 % faster), off for fp8 (sweep mqa-gluon-banks)")
GLUON_BANKS_FORMATS = ("nvfp4",)


def gluon_half_rule(T: int, n_slots: int, sm_count: int, resident: int) -> bool:
    """Half tiles where the launch of one half tile per program fits one wave (and the rule is on)."""
    return GLUON_HALF_BY_RULE and T * -(-n_slots // 32) <= resident * sm_count


# Early inputs under programmatic dependent launch (pdl_early_inputs): a kernel launched with PDL waits for the grid
# before it at entry (attnkit._triton.pdl), so in a step (record writer, then attention) the attention's whole chain
# starts only when the writer has finished, although its first part (the query's loads and RoPE, the slot ids;
# the query into shared memory for the Gluon kernel) reads nothing the writer writes. With this option the attention
# kernels release the next grid at entry, prepare the query, then wait, so that part overlaps the writer. Only
# where the kernel launched just before the attention writes none of q, positions, cos_sin, the slot lists and the
# sink (the attention releases the merge before it waits, and with merge_early the merge reads the sink, positions
# and cos_sin before its own wait; the record writer writes only its cache): off by default, on in the bench's step providers, which launch the writer
# just before; no effect without pdl. Sweep mqa-pdl-early (benchmarks/sweeps/h200-0787b50/sweep-mqa-pdl-early.json,
# 5 rounds, whole steps, paired medians): swap-AB with the option / its rule 0.895-0.965 on all 20 cases of 16 / 32
# heads x 1-16 tokens x fp8 / nvfp4 (16 heads x 16 tokens fp8 17.5 -> 16.5 us); head-padded with pdl and the option /
# its rule (pdl off) 0.882-0.994 on all 20 (with pdl alone 0.905-1.030, 18 of 20 faster).
# The record writer's loads (writer_loads_first): the slot, the position and the latent row loaded together, the stores
# masked by the slot, instead of the row branching on its slot before loading the rest. In the sm_90 SASS the row's
# loads were three dependent round trips (the slot; then the position; then the latent with cos / sin at the
# position), now two (the slot with the position; then the latent with cos / sin); with the option off the writer
# compiles to the same SASS as before it existed (nvdisasm). The same bytes (CPU tests; on the H200 at 36edea3
# tests/test_mqa_writer.py: 9 passed). Sweep mqa-writer-loads-first at 36edea3 (benchmarks/sweeps/h200-36edea3/,
# 5 rounds, whole steps as the bench's step providers launch them, paired with / without): swap-AB steps 0.986-1.002
# at 16 heads (8 of 10 below 1), 0.989-1.012 at 32, head-padded 0.996-1.005: within about 1 %. The prediction (one
# round trip, 0.4-0.5 us, off every step) was wrong: the writer's load chain is not what a step waits for (its
# inputs sit in L2 in a step, and the attention's own chain after its wait sets the step). Off.
WRITER_LOADS_FIRST = Switch("writer_loads_first", "ATTNKIT_MQA_WRITER_LOADS_FIRST", False,
                            "the record writer loads a row's slot, position and latent together and masks its stores "
                            "by the slot (two dependent round trips instead of three; the same bytes); default off: "
                            "within 1 % either way in the sweep mqa-writer-loads-first")
# The writer's early release (writer_release_early): in a step under PDL the writer, launched as a dependent of the
# kernel before it, waited for that kernel and only then released the attention, so the attention's launch and its
# query prologue (pdl_early_inputs) waited for the previous kernel to finish. benchmarks/experiments/
# mqa_step_parts.py at 41875dd (benchmarks/experiments/mqa-step-parts-h200-41875dd.json): the writer's own work adds
# nothing to a step (a step whose writer stores nothing takes the same time, within 0.3 us), while the second kernel
# in the chain adds 1.6-2.3 us to swap-AB (16 heads x 1 token fp8: attention with pdl_early_inputs alone 6.58 us,
# the step 8.58) and 2.2-4.6 us to head-padded steps. With the option the writer releases at entry, then waits.
# Sweep mqa-writer-release-early at 2177957 (benchmarks/sweeps/h200-2177957/, 5 rounds, whole steps as the bench's
# step providers launch them, paired option / rule): faster on all 40 cases, swap-AB 0.900-0.997 (16 heads x 1 token
# fp8 8.39 -> 7.75 us, 32 heads x 1 token nvfp4 9.77 -> 8.80), head-padded 0.842-0.989 (16 heads x 1 token nvfp4
# 15.52 -> 12.99). Without the attention's early inputs (so that nothing is read before a wait, whatever the kernel
# before the step does) it is slower: 0.967-1.077 swap-AB, 1.019-1.127 head-padded; the gain is the attention's
# prologue overlapping the kernel before the writer. Stress (benchmarks/experiments/stress_under_load.py, six
# processes side by side for 30 s, each call's bits against the plain step's: benchmarks/experiments/
# stress-h200-2177957-release-early.json): 0 wrong calls of 13098-15186 per release-early job; but the wrong-by-design
# job (the attention never waiting) showed none either in that run, so it did not show that the check can fail.
# With a slow writer (stress-h200-5c40b98-slow-writer.json) that job is wrong on 15878 of 16701 calls and the
# release-early step on none; and the contract itself under load (stress-h200-73b3b4d-release-early-contract.json: a
# kernel before the step that rewrites q after a 20 us spin): released early under PDL, 92.5-99.9 % of the option's
# calls read the old q; launched plainly, 0; the default writer after the early-releasing kernel, 0.
# Not safe in every stream (the attention's early reads may then overlap the kernel before the writer: the contract
# in mqa_decode_step), so off by default: an opt-in for callers whose kernel before the step lets no dependent launch
# early.
WRITER_RELEASE_EARLY = Switch("writer_release_early", "ATTNKIT_MQA_WRITER_RELEASE_EARLY", False,
                              "with pdl, the record writer releases the next kernel (a step's attention) before it "
                              "waits for the kernel before it (mqa_decode_step's contract: that kernel must not let "
                              "dependents launch before it has written q, positions, cos_sin, the slot lists and "
                              "the sink); default off (0.84-1.00x the step's time where that holds, sweep "
                              "mqa-writer-release-early)")
PDL_EARLY_INPUTS = Switch("pdl_early_inputs", "ATTNKIT_MQA_PDL_EARLY_INPUTS", False,
                          "with pdl: the attention kernels read q, positions, cos_sin and the slot lists before waiting "
                          "for the kernel launched just before them, which must not write those nor the sink (the "
                          "merge, released early, reads it with merge_early; in a step that kernel is the record "
                          "writer); no effect without pdl")


# Resident programs per SM (compile_check, sm_90), by (warps, async): 4 warps: 255 registers x 128 threads and
# 84 / 103 KB of shared memory (16 / 32 heads): two, but with the cp.async buffers (119-154 KB) one; 8 warps:
# 180-255 registers x 256 threads: one; 16 warps (wide tiles, 152-173 KB of shared memory): one
GLUON_RESIDENT = {(4, False): 2, (4, True): 1, (8, False): 1, (8, True): 1, (16, False): 1}
# Registers capped (ptxas maxnreg) so that two 8-warp programs fit an SM: 65536 registers / (2 x 256 threads). At
# 128 the sm_90 cubins spill little (compile_check, 8 warps, early, the rule's banks: 16 heads fp8 186 -> 128
# registers, 144 bytes of stack, 18 spill instructions in the compressed-list loop of 1141 (1099 uncapped); nvfp4
# 162 -> 128, 56 bytes, 10 of 1292; 32 heads fp8 220 -> 128, 168 bytes, 24 of 1234; nvfp4 194 -> 128, 160 bytes,
# 22 of 1426) and the shared memory (84 / 103 KB at 16 / 32 heads) holds two, but not with the cp.async buffers.
# Then the split rule counts two resident programs per SM: at 640 slots, 16 tokens take 10 splits of one tile
# (160 programs, one wave) instead of 5 of two, 32 tokens 5 of two instead of 4 of three, 64 tokens 4 of three
# instead of 2 of five (fused). Predicted: 16 tokens near the one-tile time. Measured slower (sweep mqa-gluon-regs,
# benchmarks/sweeps/h200-a57b710/sweep-mqa-gluon-regs.json, 5 rounds, paired rule / capped, attention with its
# merge): 0.908-0.933 at 16 tokens (16 heads fp8 15.6 -> 17.1 us), 0.870-0.956 at 32, 0.733-0.892 at 64; the cap
# alone, where the plan is unchanged, 0.886-0.962 at 4 tokens and 0.990-1.026 at 8; whole steps the same way
# (0.800-0.958 from 16 tokens). With half tiles besides (gluon_half, 160 programs in one wave at 8 tokens):
# 0.711-0.790 at 8 tokens. Two programs sharing an SM take longer each than the tile they save. So off.
GLUON_TWO_PER_SM_REGS = 128
GLUON_MAXNREG = IntOption("gluon_maxnreg", "ATTNKIT_MQA_GLUON_MAXNREG", None, 64, 255,
                          "Gluon swap-AB kernel: registers per thread at most (ptxas maxnreg); at 128 or fewer two "
                          "8-warp programs fit an SM and the split rule counts them (not with gluon_async); default: "
                          "the compiler's choice (capped at 128: 7-36 % slower from 16 tokens, sweep mqa-gluon-regs)")


# Both lists in one loop (gluon_one_loop). With a loop per list, the sm_90 SASS of the second loop (the compressed
# list's: 8 of the 10 tiles at the default lists) rebuilds the warpgroup MMAs' shared-memory descriptors per MMA in
# ordinary registers and moves them to uniform ones (6 instructions per MMA: IADD3, IMAD.X, two R2UR, two UMOV)
# where the first loop keeps them in uniform registers (UIADD3.64, one or two per MMA); compile_check --census,
# 8 warps, early, the rule's banks: the compressed loop 1099 instructions against the window loop's 840 (16 heads
# fp8; R2UR 143, UMOV 119 against 11 and 9), 1190 / 933 at 32 heads, nvfp4 1267 / 1380 at 16 / 32 heads. In one loop
# (each tile's list, cache and bounds selected by its index; for nvfp4 compressed records the decode branches by
# list, the products are one copy) the descriptors stay uniform: 852 instructions a tile at 16 heads fp8, 948 at 32
# (nvfp4: both decodes in one body of 1520 / 1634). The same tiles in the same order, the same bits.
# Predicted: a compressed tile about a fifth shorter. Measured no faster (sweep mqa-gluon-one-loop at 3d79a8e,
# benchmarks/sweeps/h200-3d79a8e/sweep-mqa-gluon-one-loop.json, 5 rounds, paired one loop / rule, attention with its
# merge, 16 / 32 heads x 1-64 tokens x fp8 / nvfp4): 0.984-0.998 at 32 heads x 2-8 tokens fp8 and at 1 token nvfp4
# (32 heads x 8 tokens fp8 13.8 us either way within 0.2), 1.003-1.042 from 16 tokens (16 heads x 64 tokens nvfp4 26.6
# -> 27.7 us), 1.017-1.019 at 16 heads x 1-2 tokens fp8; whole steps 0.984-1.029. Like the half tiles' 30 % fewer
# instructions (GLUON_HALF_BY_RULE), the ~250 instructions saved per tile do not set the tile's time. Off (gated all
# the same: mqa_decode/gluon_swapab_one_loop at 3d79a8e, every perturbation caught).
GLUON_ONE_LOOP = Switch("gluon_one_loop", "ATTNKIT_MQA_GLUON_ONE_LOOP", None,
                        "Gluon swap-AB kernel: both slot lists' tiles in one loop (ptxas then keeps the MMAs' "
                        "descriptors in uniform registers; about 250 fewer instructions per compressed tile); needs "
                        "gluon_prefetch, not gluon_async; default: the rule (off: within -1.6 / +4.2 % of two loops, "
                        "slower from 16 tokens, sweep mqa-gluon-one-loop)")
GLUON_ONE_LOOP_BY_RULE = False
# A tile's record loads all issued before its first decoded chunk is stored (gluon_loads_first). The decode runs in
# four 128-dim chunks, each loaded, decoded and stored to the shared tile; Gluon puts a barrier before each chunk's
# store (the chunks are slices of one buffer), and a global load is not moved across a barrier, so in the sm_90 SASS
# (compile_check, 8 warps, the rule's variants) chunk 2's loads issue after chunk 0's store barrier and chunk 3's after
# chunk 1's: two round trips to memory per tile where one would do. With the option every chunk's loads come before
# the first barrier (16 / 32 heads, fp8 / nvfp4, both list loops; 174-228 registers, no spill). The same bits.
# Timed at bc1461a (benchmarks/sweeps/h200-bc1461a/sweep-mqa-gluon-loads-first.json, 5 rounds, paired loads first /
# before, attention with its merge, 16 / 32 heads x 1-64 tokens x fp8 / nvfp4): fp8 0.961-0.976 at 2-32 tokens (16
# heads x 16 tokens 14.8 -> 14.4 us), 0.999 / 0.989 at 1 token (16 / 32 heads, p20-p80 0.97-1.03), 1.085 / 1.026 at 64
# tokens (the fused merge, five tiles a program); nvfp4 0.977-0.994 at 2-64 tokens, 1.013 / 1.001 at 1 token; whole
# steps 0.967-0.996 at 1-32 tokens (all 24), 1.076 / 1.028 at 64 tokens fp8, 0.993 / 0.994 nvfp4. So on where the
# merge is launched apart (up to 47 tokens at the default lists), off where it is fused.
GLUON_LOADS_FIRST = Switch("gluon_loads_first", "ATTNKIT_MQA_GLUON_LOADS_FIRST", None,
                           "Gluon swap-AB kernel: a tile's four 128-dim chunks of records all loaded before the first "
                           "is decoded and stored (else chunk by chunk, the later chunks' loads held behind the first "
                           "chunks' store barriers); not with gluon_async; default: the rule, on where the merge is "
                           "launched apart (steps 0.4-3.3 % faster at 1-32 tokens, sweep mqa-gluon-loads-first)")
GLUON_LOADS_FIRST_BY_RULE = True
# A program's first loads (gluon_prologue). The query is stored to shared memory in four column blocks (dims 0-255,
# 256-383, 384-447 and the rotated 448-511), and as with the record chunks (gluon_loads_first) Gluon puts a barrier
# before each block's store, which no later load passes: in the sm_90 SASS (compile_check, 8 warps, the rule's
# variants) the loads of the third and fourth blocks and of the RoPE inputs issue after the first two barriers, and
# the first tile's record loads after the third: about four round trips to memory before the first product. Level
# 1: every query load before the first store (two round trips: the query's, then the records'); level 2: the
# split's first tile's records too (loaded from the early slot ids before the query is stored: the two round trips
# overlap; that tile is the window list's where the split starts there, else the compressed list's). The same bits.
# Level 2 needs gluon_early and whole tiles, and not pdl_early_inputs (whose wait must come before every record
# load). In the SASS (compile_check.loads_by_barrier, tests/test_compile_sm90.py) the loads up to the first MMA fall
# in 4 stretches between barriers at level 0 (16 heads fp8: 9 / 2 / 26 / 18 loads), 2 at level 1 (37 / 18), 1 at
# level 2 (53; two more, the next tile's slot ids, after it). Level 2 holds more registers (16 heads 186 -> 226, 32
# heads 228 -> 255 with 48-88 bytes of spill; level 1 unchanged). Timed at 6f8c100
# (benchmarks/sweeps/h200-6f8c100/sweep-mqa-gluon-prologue.json, 5 rounds, attention with its merge, paired ÷ level
# 0, 16 / 32 heads x 1-64 tokens x fp8 / nvfp4): level 2 0.900-0.963 at 1-8 tokens (16 heads x 2 tokens fp8 9.17 ->
# 8.25 us) but 0.990 at 16 heads x 8 tokens nvfp4, where a program runs one tile; 0.983-1.049 from 16 tokens (two or
# more tiles a program; 1.017-1.049 at 16 tokens but 32 heads nvfp4). Level 1 0.974-0.996 on 26 of 28 (1.008 at 32
# heads x 1 token fp8, p20-p80 0.987-1.041; 1.029 at 16 heads x 8 tokens nvfp4); as whole steps (pdl_early_inputs,
# where level 2 cannot run) 0.966-0.990 on 25 of 28, 1.000 at 1 token fp8 (both head counts), 1.023 at 16 heads x 8
# tokens nvfp4. So: level 2 where each split is one tile (and it can run), else level 1 (gluon_prologue_rule).
GLUON_PROLOGUE = IntOption("gluon_prologue", "ATTNKIT_MQA_GLUON_PROLOGUE", None, 0, 2,
                           "Gluon swap-AB kernel: 0, each query block's loads after the previous block's store; 1, "
                           "every query load before the first store; 2, the split's first tile's record loads too "
                           "(needs gluon_early, whole tiles, not with gluon_async, gluon_one_loop or "
                           "pdl_early_inputs); default: the rule (config.gluon_prologue_rule: 2 where each split is "
                           "one tile, else 1; 4-10 % faster at 1-8 tokens, sweep mqa-gluon-prologue)")


# A token's splits launched as one thread-block cluster (the next power of two of CTAs at or above the split count, at
# most 16: CLUSTER_MAX_CTAS; ranks past the split count run no tile) that merges them itself: each CTA stores its
# partial to global memory as before, all meet at a cluster barrier (release / acquire at cluster scope), then each
# merges 512 / CTAs output dims of every head from the partials (kernel_swapab_gluon._merge_slice). One launch, and
# no program waits on one that may not have started (the cluster's CTAs are co-scheduled). Predicted from the
# sync-cost experiment (benchmarks/experiments/sync-cost-h200-0d0157c.json: a cluster barrier after 32 KB partial
# stores +0.30 us a launch, against the merge launch's 2.2-4.4 us). Measured (sweep mqa-gluon-cluster, 5 rounds,
# paired cluster / rule, attention with its merge; 16 / 32 heads x 1-16 tokens x fp8 / nvfp4):
#   first form (ac26a85, benchmarks/sweeps/h200-ac26a85/): slower everywhere, 1.13-1.20 at 16 heads x 1-4 tokens,
#     1.46-1.54 at 32 heads, 1.71-2.30 at 8-16 tokens. Its parts (benchmarks/sweeps/h200-d3fc3a6/
#     sweep-mqa-gluon-cluster-parts.json, diagnostics variants, 16 heads x 1 token fp8, us): the attention without a
#     merge 5.3, the cluster launch without barrier or merge 5.6, with the barrier 5.9, whole 8.8 (32 heads: 6.9 /
#     7.0 / 7.4 / 14.4): the launch and the barrier cost 0.6 us, the merge after it 2.9-8.1 us, its partial loads
#     (read past L1, an online loop over the splits) issued split after split, each after the last one's sums.
#   second form (f8e405f, benchmarks/sweeps/h200-f8e405f/): the merge over [splits, H, dims] tiles, every partial load
#     issued at once, plain loads after the acquire: 0.879-0.950 at 16 heads x 1-4 tokens, 0.937-0.955 at 32 heads x
#     2-4 tokens, 1.003 / 0.991 at 32 heads x 1 token (fp8 / nvfp4; whole steps 1.028 / 0.982), 1.42-1.63 at 8-16
#     tokens, where the 128 CTAs in clusters of 16 or 8 do not all fit at once (a cluster's CTAs share one GPC, one
#     program of this kernel per SM). Parts at f8e405f (same grid file name there): whole 7.0 us at 16 heads x 1 token
#     fp8 against the rule's 7.6 and 5.3 without a merge.
#   the same at e96e89e (benchmarks/sweeps/h200-e96e89e/sweep-mqa-gluon-dsmem.json, 5 rounds, 16 / 32 heads x 1-4
#     tokens): at 32 heads x 1 token fp8 1.009 [0.985-1.018] (step 1.029), nvfp4 0.987 [0.986-0.987] (step 0.968).
#   with one CTA per split up to 8 splits (cluster_size; at dddc490, benchmarks/sweeps/h200-dddc490/
#     sweep-mqa-gluon-cluster-exact.json, 5 rounds): at 16 tokens (5 splits of two tiles, clusters of 5, 4 merging;
#     80 CTAs) 0.997 / 0.930 fp8 and 0.863 / 0.879 nvfp4 at 16 / 32 heads (steps 0.991 / 0.935 and 0.860 / 0.880);
#     at 32 tokens (4 splits of three tiles, 128 CTAs in clusters of 4) 1.54-1.60 (steps 1.50-1.57): they do not all
#     fit at once. 9-13 tokens (10 splits, clusters of 16) and 14-26 tokens other than 16 (5 splits) not measured.
# So the rule: on at GLUON_CLUSTER_TOKENS (per head count and record format, the token counts where it won, attention
# and step: at 32 heads x 1 token nvfp4 in both runs, fp8 in neither; at 16 tokens everywhere, 16 heads fp8 by
# 0.3-0.9 %), off elsewhere; and since 569b8dd wherever the wide-tile rule takes wide tiles (12-22 tokens: 5 splits,
# clusters of 5; sweep mqa-gluon-wide-tokens, see GLUON_WIDE_TOKENS).
GLUON_CLUSTER = Switch("gluon_cluster", "ATTNKIT_MQA_GLUON_CLUSTER", None,
                       "Gluon swap-AB kernel: each token's splits run as one thread-block cluster of up to 16 CTAs "
                       "that merges them after a cluster barrier (one launch, no merge kernel); needs at most 16 "
                       "splits per token, not with gluon_fused; default: the rule (config.gluon_cluster_rule)")
GLUON_CLUSTER_TOKENS = {(16, "fp8"): (1, 2, 3, 4, 16), (16, "nvfp4"): (1, 2, 3, 4, 16),  # the sweeps above
                        (32, "fp8"): (2, 3, 4, 16), (32, "nvfp4"): (1, 2, 3, 4, 16)}  # (f8e405f, e96e89e, dddc490)


def gluon_cluster_rule(T: int, H: int, splits: int, fused: bool | None, comp_format: str = "fp8",
                       wide: bool = False) -> bool:
    """gluon_cluster's default: on where its sweeps won (GLUON_CLUSTER_TOKENS, per head count and compressed record
    format, and wherever the wide-tile rule's wide tiles run: their sweep timed them with the cluster merge), a
    token's splits fit one cluster and the fused merge is not asked for."""
    listed = T in GLUON_CLUSTER_TOKENS.get((H, comp_format), ()) or (wide and gluon_wide_rule(T, H, comp_format))
    return listed and splits <= CLUSTER_MAX_CTAS and not fused


# Wide tiles: 128 slots a tile, the two warpgroups' score products 64 slots each (all heads on N), one softmax over
# the 128 and one value product of K = 128, instead of a program's tiles of 64 walked one after another (each with
# its own chain of slot ids, record loads, decode, barriers, products and cross-warp softmax). Half tiles (32 slots,
# gluon_half) were no shorter than whole ones: a tile's time is its chain, not its issue count; so two tiles' work in
# one chain should cost less than two chains. Where a split of 64-slot tiles holds two or more (16 tokens at the
# default lists: 5 splits of two), the same split holds half as many wide tiles. 128 KB of shared memory for the
# tile (152 / 173 KB in all at 16 / 32 heads), 255 registers and up to 168 bytes of spill with the loads first
# (compile_check: benchmarks/experiments/sass-wide-tiles-sm90-cf1786d.json).
# Sweep mqa-gluon-wide at 9e87a2c (benchmarks/sweeps/h200-9e87a2c/sweep-mqa-gluon-wide.json, 5 rounds, paired rule ÷
# wide, attention with its merge): at 16 tokens wide is faster, 1.136 / 1.087 fp8 and 1.126 / 1.060 nvfp4 at 16 / 32
# heads (16 heads fp8 14.1 -> 12.5 us, nvfp4 12.2 -> 10.8; whole steps 1.06-1.12); everywhere else slower: 0.60-0.77
# at 1-4 tokens (a split of one 64-slot tile becomes one of 128: 16 heads x 1 token fp8 6.8 -> 11.1 us), 0.75-0.90
# at 8, 0.87-1.00 at 32 (3 splits of two wide tiles against 4 of three 64-slot ones). So a wide tile costs about 1.8x
# a 64-slot one: the prediction (two tiles' work in one chain at little more than one tile's time) was half right.
# With the record loads chunk by chunk instead of first: 1.061-1.110 at 16 tokens (1.099 at 32 heads fp8, where
# loads first spill). On at 16 tokens (d419a31; other token counts were not measured then).
# Sweep mqa-gluon-wide-tokens at cf97ec0 (benchmarks/sweeps/h200-cf97ec0/sweep-mqa-gluon-wide-tokens.json, 5 rounds,
# paired rule ÷ setting, attention with its merge) at 12 and 20 tokens, where the rule then ran 64-slot tiles with
# the merge launched apart (12: 10 splits of one tile; 20: 5 splits of two): wide tiles in the cluster merge's
# clusters of 5 (16 warps over fp8, GLUON_WIDE16_FORMATS) 1.065 / 1.336 fp8 and 1.118 / 1.386 nvfp4 at 16 heads x 12
# / 20 tokens, 1.049 / 1.202 and 1.038 / 1.207 at 32 heads (16 heads x 20 tokens fp8 14.95 -> 11.2 us, nvfp4 14.79 ->
# 10.7); wide tiles with the merge apart 0.835-1.112, so the cluster merge is part of the gain. 8 warps over fp8 /
# 16 over nvfp4 0.958-1.212 / 1.017-1.322 (the format split of 16 tokens holds). So wide tiles, merged in clusters
# (gluon_cluster_rule), from 12 to 20 tokens: measured at 12, 16 and 20; in between the plan is the same (5 splits a
# token of one wide tile, clusters of 5, at most 100 CTAs). At 8 tokens (benchmarks/sweeps/h200-732f54b/
# sweep-mqa-gluon-wide-cluster-t8.json) wide tiles in clusters lose: rule ÷ them 0.871-0.949.
# Where it stops (sweep mqa-gluon-wide-cutoff at 7dfeeac, benchmarks/sweeps/h200-7dfeeac/, 5 rounds, paired rule ÷
# wide tiles in clusters, attention with its merge; the wide tiles forced, so 8 warps over fp8 too): at 22 tokens
# 1.219 / 1.258 fp8 and 1.387 / 1.280 nvfp4 at 16 / 32 heads (16 heads x 22 tokens nvfp4 15.1 -> 10.9 us); at 24 and
# 26 tokens 0.70-0.75. The cause: at most 22 clusters of 5 wide programs are resident at once on the H200
# (cuOccupancyMaxActiveClusters with the kernel's block and shared memory, benchmarks/experiments/
# mqa-cluster-occupancy-h200-7dfeeac.json), so from 23 tokens a step's clusters run in two waves. At 10 tokens (the
# rule: 10 splits of one 64-slot tile, the merge apart) 1.100 / 1.020 nvfp4, 0.936 / 0.980 fp8 at 16 / 32 heads. So
# the rule: 12 to 22 tokens (21 not measured: the plan of 20 and 22, 5 splits of one wide tile in clusters of 5, at
# most 110 CTAs), and 10 over nvfp4 records; 9 and 11 not measured, off. Confirmed as dispatched at 648c302
# (benchmarks/sweeps/h200-648c302/sweep-mqa-gluon-wide-22.json, paired the rule before ÷ the rule): 1.339 / 1.268 fp8
# (16 warps) and 1.381 / 1.281 nvfp4 at 16 / 32 heads x 22 tokens, 1.100 / 1.020 at 10 tokens over nvfp4.
GLUON_WIDE = Switch("gluon_wide", "ATTNKIT_MQA_GLUON_WIDE", None,
                    "Gluon swap-AB kernel: tiles of 128 slots (the two warpgroups' score products 64 slots each, one "
                    "softmax and one value product over the 128) instead of 64; not with gluon_async, gluon_half, "
                    "gluon_one_loop or gluon_prologue 2 (where one of those is asked for, the rule takes 64); "
                    "default: the rule (config.gluon_wide_rule)")
GLUON_WIDE_TOKENS = {(H, f): (10,) * (f == "nvfp4") + tuple(range(12, 23))
                     for H in (16, 32) for f in ("fp8", "nvfp4")}


def gluon_wide_rule(T: int, H: int, comp_format: str = "fp8") -> bool:
    """gluon_wide's default: on at the token counts of GLUON_WIDE_TOKENS (per head count and compressed format)."""
    return T in GLUON_WIDE_TOKENS.get((H, comp_format), ())


CLUSTER_MAX_CTAS = 16  # the H200's largest (non-portable) cluster
CLUSTER_PORTABLE_CTAS = 8  # the largest portable cluster; Triton's launcher allows a non-portable size of 16 only


# Exact non-portable clusters (gluon_cluster_exact): 9 to 15 splits a cluster of one CTA per split (the launcher sets
# the kernel's non-portable cluster size attribute, interface._cluster_prepare), 8 of them merging, instead of a
# cluster of 16 whose ranks past the splits only merge (1-4 tokens at the default lists: 10 splits, 6 CTAs without a
# tile per token). Sweep mqa-gluon-cluster-exact-2 at 7dfeeac (benchmarks/sweeps/h200-7dfeeac/, 5 rounds, paired
# clusters of 16 ÷ exact, both forced on, 1 / 2 / 4 tokens): attention at 16 heads 1.019 / 1.020 / 1.030 fp8 and
# 1.024 / 1.040 / 1.043 nvfp4 (16 heads x 1 token nvfp4 7.02 -> 6.88 us), at 32 heads 0.959-0.975 fp8 and
# 0.957-0.981 nvfp4 (slower); whole steps at 16 heads nvfp4 1.021 / 1.029 / 1.022, but 16 heads fp8 0.911-0.922 and 32
# heads nvfp4 0.958-0.967 (slower; 32 heads fp8 1.014-1.024). So the rule: exact clusters at 16 heads over nvfp4
# records (GLUON_CLUSTER_EXACT_BY), where attention and steps both won; elsewhere clusters of 16.
GLUON_CLUSTER_EXACT = Switch("gluon_cluster_exact", "ATTNKIT_MQA_GLUON_CLUSTER_EXACT", None,
                             "with the cluster merge (gluon_cluster): 9 to 15 splits a token run as a non-portable "
                             "cluster of one CTA per split, 8 of them merging, instead of a cluster of 16; default: "
                             "the rule (16 heads over nvfp4 records: GLUON_CLUSTER_EXACT_BY)")
GLUON_CLUSTER_EXACT_BY = ((16, "nvfp4"),)


def cluster_size(splits: int, exact: bool = False) -> tuple[int, int]:
    """A token's cluster for the cluster merge: (CTAs, log2 of the CTAs that merge). Up to 8 splits one CTA per split
    (at least 2), so that the grid holds no CTA without a tile (at 16 tokens the 5 splits' clusters of 8 did not all
    fit at once: benchmarks/sweeps/h200-f8e405f/), and the merging CTAs the largest power of two among them (each
    merges 512 / 2^k output dims); 9 to 16 splits a cluster of 16, every CTA merging (exact: 9 to 15 splits one
    CTA per split, a non-portable size, 8 merging)."""
    if splits > CLUSTER_MAX_CTAS:
        raise ValueError(f"gluon_cluster: a token's splits must fit one cluster of at most {CLUSTER_MAX_CTAS} CTAs; "
                         f"this step has {splits} (num_splits or the split rule)")
    if splits > CLUSTER_PORTABLE_CTAS:
        if exact and splits < CLUSTER_MAX_CTAS:
            return splits, CLUSTER_PORTABLE_CTAS.bit_length() - 1
        return CLUSTER_MAX_CTAS, CLUSTER_MAX_CTAS.bit_length() - 1
    ctas = max(2, splits)
    return ctas, ctas.bit_length() - 1


# Tried at e96e89e and removed (gluon_dsmem): the cluster merge's partials exchanged through the cluster's shared memory
# (each CTA's acc, m, l stored to its own shared memory and read by the others with ld.shared::cluster after the
# barrier; a second barrier before exit). The same bits; predicted 0.5-1 us less (no L2 round trips), measured slower
# (benchmarks/sweeps/h200-e96e89e/sweep-mqa-gluon-dsmem.json, paired ÷ the global form 1.21-1.27 at 16 heads x 1-4
# tokens, 1.36-1.40 at 32 heads): bound by the SM-to-SM network's throughput, about 18 KB per us per CTA.
# Tried again at 44e5467 with the partial stores' bank conflicts padded away (rows 516 words apart), vector reads and a
# relaxed exit barrier: still slower on an H100 (benchmarks/sweeps/h100-44e5467/sweep-mqa-gluon-dsmem.json, paired
# rule ÷ dsmem 0.888-0.931 at 16 heads x 1-4 tokens, 0.949 / 1.014 at 16 tokens fp8 / nvfp4); removed again.


# Tried at 4ea6223 and removed (gluon_ahead): each next tile's records loaded into registers before the current tile
# was stored, their slot ids two tiles ahead, so that a program walking several tiles (16 tokens and more at the
# default lists) would overlap each tile's record round trip with the previous tile's decode and products. Two
# tiles' raw records lived at once: in the sm_90 cubins (loads first, prologue level 1) nvfp4 16 heads 178 -> 231
# registers, 32 heads 216 -> 255 with 16 bytes of stack; fp8 186 / 228 -> 255 with 184 / 224 bytes of stack. The same
# bits (GPU test, 30 cases). Predicted: about a round trip less per extra tile. Measured slower everywhere
# (benchmarks/sweeps/h200-4ea6223/sweep-mqa-gluon-ahead.json, 5 rounds, paired ahead / rule, 16 / 32 heads x 8-64
# tokens): fp8 1.063-1.179 (the spills), nvfp4 1.049-1.083 (no spill at 16 heads: 1.062 / 1.082 / 1.070 / 1.050 at 8 /
# 16 / 32 / 64 tokens), whole steps 1.056-1.190. Like gluon_async (cp.async a tile ahead, 4f341ac), overlapping the
# next tile's record loads does not shorten a program that walks several tiles.


def gluon_prologue_rule(tiles_per_split: int, two_ok: bool) -> int:
    """gluon_prologue's default (its sweep above): level 2 where each split is one tile and level 2 can run, else
    level 1."""
    return 2 if tiles_per_split == 1 and two_ok else 1


def gluon_resident(warps: int, use_async: bool, maxnreg: int | None) -> int:
    """Resident Gluon programs per SM: GLUON_RESIDENT, or two 8-warp programs without the cp.async buffers where
    the registers are capped at GLUON_TWO_PER_SM_REGS."""
    if warps == 8 and not use_async and maxnreg is not None and maxnreg <= GLUON_TWO_PER_SM_REGS:
        return 2
    return GLUON_RESIDENT[(warps, use_async)]


def swapab_plan(T: int, H: int, n_slots: int, sm_count: int, num_splits: int | None, device_type: str,
                block_n: int | None = None, gluon: bool = False, gluon_warps: int | None = None,
                fused_merge: bool | None = None, gluon_async: bool | None = None,
                gluon_early: bool | None = None, gluon_prefetch: bool = True,
                gluon_half: bool | None = None, gluon_banks: bool | None = None,
                comp_format: str = "fp8", gluon_maxnreg: int | None = None,
                gluon_one_loop: bool | None = None, gluon_loads_first: bool | None = None,
                gluon_prologue: int | None = None, pdl_early: bool = False,
                gluon_cluster: bool | None = None, gluon_wide: bool | None = None,
                gluon_cluster_exact: bool | None = None) -> SwapabPlan:
    """Triton: tiles of 32 slots by default: 64 was slower where timed (benchmarks/sweeps/h200-58d0089.json); with
    64 the sm_90 cubins spill 1.4 KB (fp8) / 1.4 KB (nvfp4) per thread, with 32 none / 48 bytes (compile_check).
    Gluon: 64-slot tiles (one warpgroup's MMA M), or 128 (gluon_wide: the rule at 12-22 tokens, and 10 over nvfp4),
    GLUON_WARPS warps."""
    if gluon:
        warps = GLUON_WARPS.resolve(gluon_warps)
        warps_by_rule = warps is None
        if warps_by_rule:
            warps = 8
        if warps not in (4, 8, 16):
            raise ValueError(f"gluon_warps: must be 4, 8 or 16, got {warps}")
        use_async = GLUON_ASYNC.resolve(gluon_async)
        if warps == 16 and use_async:  # (before GLUON_RESIDENT, which has no 16-warp cp.async entry)
            raise ValueError("gluon_warps: 16 warps run wide tiles (gluon_wide) only, which cannot be combined with "
                             "gluon_async")
        maxnreg = GLUON_MAXNREG.resolve(gluon_maxnreg)
        resident = gluon_resident(warps, use_async, maxnreg)
        half = GLUON_HALF.resolve(gluon_half)
        if half is None:
            half = not use_async and gluon_half_rule(T, n_slots, sm_count, resident)
        if half and use_async:
            raise ValueError("gluon_half: half tiles are decoded from registers; they cannot be combined with "
                             "gluon_async")
        if warps == 16 and half:
            raise ValueError("gluon_warps: 16 warps run wide tiles (gluon_wide) only, which cannot be combined with "
                             "gluon_half")
        wide_asked = wide = GLUON_WIDE.resolve(gluon_wide)
        one_asked = GLUON_ONE_LOOP.resolve(gluon_one_loop)
        # options defined over 64-slot tiles: the rule steps aside where one is asked for (wide tiles refuse them)
        tiles64 = one_asked or GLUON_PROLOGUE.resolve(gluon_prologue) == 2
        if wide is None:  # the rule (see GLUON_WIDE; timed at 8 warps, one program per SM); 16 warps: wide only
            wide = warps == 16 or (not use_async and not half and not tiles64 and warps == 8 and resident == 1
                                   and gluon_wide_rule(T, H, comp_format))
        if wide and one_asked:
            raise ValueError("gluon_wide: 128-slot tiles run the two-loop kernel; they cannot be combined with "
                             "gluon_one_loop (not timed or tested on wide tiles)")
        if warps == 16 and not wide:
            raise ValueError("gluon_warps: 16 warps run wide tiles only; gluon_wide=False asks for 64-slot tiles")
        if warps_by_rule and wide and wide_asked is None and comp_format in GLUON_WIDE16_FORMATS:
            warps = 16  # the rule's wide tiles over fp8 records (see GLUON_WARPS)
        if wide and (use_async or half):
            raise ValueError("gluon_wide: 128-slot tiles are decoded whole from registers; they cannot be combined "
                             "with gluon_async or gluon_half")
        if wide:  # a wide program's shared memory (152-173 KB) leaves room for no second one on an SM
            resident = 1
        live = 128 if wide else 32 if half else 64
        tiles = max(1, -(-n_slots // live))
        splits, per = _splits(T, 1, tiles, sm_count, num_splits, resident)
        fused = GLUON_FUSED.resolve(fused_merge)
        early = GLUON_EARLY.resolve(gluon_early)
        if early is None:  # the rule (see GLUON_EARLY)
            early = gluon_prefetch and not use_async
        if early and use_async:
            raise ValueError("gluon_early: hands the first slot ids to the list loop without cp.async; it cannot be "
                             "combined with gluon_async")
        if early and not gluon_prefetch:
            raise ValueError("gluon_early: hands the first slot ids to the prefetching list loop; it needs "
                             "gluon_prefetch")
        banks = GLUON_BANKS.resolve(gluon_banks)
        if banks is None:  # the rule (see GLUON_BANKS)
            banks = comp_format in GLUON_BANKS_FORMATS and not use_async
        if banks and use_async:
            raise ValueError("gluon_banks: sets the layout of the record loads into registers; it cannot be combined "
                             "with gluon_async")
        one = one_asked
        if one is None:  # the rule (see GLUON_ONE_LOOP)
            one = GLUON_ONE_LOOP_BY_RULE and gluon_prefetch and not use_async
        if one and use_async:
            raise ValueError("gluon_one_loop: runs the register-decoding list loop; it cannot be combined with "
                             "gluon_async")
        if one and not gluon_prefetch:
            raise ValueError("gluon_one_loop: its loop prefetches the next tile's slot ids; it needs gluon_prefetch")
        cluster = GLUON_CLUSTER.resolve(gluon_cluster)
        if cluster is None:  # the rule (see GLUON_CLUSTER)
            cluster = gluon_cluster_rule(T, H, splits, fused, comp_format, wide)
        if cluster and fused:
            raise ValueError("gluon_cluster: the cluster merges each token; it cannot be combined with gluon_fused")
        exact = GLUON_CLUSTER_EXACT.resolve(gluon_cluster_exact)
        if exact is None:  # the rule (see GLUON_CLUSTER_EXACT)
            exact = bool(cluster) and (H, comp_format) in GLUON_CLUSTER_EXACT_BY
        if exact and not cluster:
            raise ValueError("gluon_cluster_exact: sizes the cluster merge's clusters; it needs gluon_cluster (by "
                             "the rule or asked for)")
        ctas, log2_mergers = cluster_size(splits, bool(exact)) if cluster else (0, 0)
        fused_m = False if cluster else (splits <= GLUON_FUSED_MAX_SPLITS if fused is None else bool(fused))
        lf = GLUON_LOADS_FIRST.resolve(gluon_loads_first)
        if lf is None:  # the rule (see GLUON_LOADS_FIRST): where the merge is launched apart
            lf = GLUON_LOADS_FIRST_BY_RULE and not use_async and not fused_m
        if lf and use_async:
            raise ValueError("gluon_loads_first: orders the register loads of the records; it cannot be combined "
                             "with gluon_async")
        pro = GLUON_PROLOGUE.resolve(gluon_prologue)
        two_ok = bool(early) and live == 64 and not use_async and not one and not pdl_early
        if pro is None:  # the rule (see GLUON_PROLOGUE)
            pro = gluon_prologue_rule(per, two_ok)
        if pro == 2 and not two_ok:
            raise ValueError("gluon_prologue: level 2 loads the first tile's records from the early slot ids of the "
                             "two-loop kernel before the query is stored; it needs gluon_early and whole tiles, and "
                             "cannot be combined with gluon_async, gluon_one_loop, gluon_half, gluon_wide or "
                             "pdl_early_inputs")
        return SwapabPlan(block_n=128 if wide else 64, num_splits=splits, slots_per_split=per * live, num_warps=warps,
                          gluon=True,
                          fused_merge=fused_m, cluster=log2_mergers, cluster_ctas=ctas,
                          gluon_async=use_async, gluon_early=bool(early), live=live, gluon_banks=bool(banks),
                          maxnreg=maxnreg, one_loop=bool(one), loads_first=bool(lf), prologue=int(pro))
    # the Triton swap-AB kernel has none of the Gluon kernel's options: a bad value (keyword or environment) raises
    # here as it would there, and one asked for by keyword (a switch True, any count) is refused instead of being
    # ignored; a switch given as False asks for nothing the Triton kernel does not do (merge apart, no half tiles)
    gluon_only = (("gluon_warps", GLUON_WARPS, gluon_warps), ("gluon_fused", GLUON_FUSED, fused_merge),
                  ("gluon_async", GLUON_ASYNC, gluon_async), ("gluon_early", GLUON_EARLY, gluon_early),
                  ("gluon_half", GLUON_HALF, gluon_half), ("gluon_banks", GLUON_BANKS, gluon_banks),
                  ("gluon_maxnreg", GLUON_MAXNREG, gluon_maxnreg), ("gluon_one_loop", GLUON_ONE_LOOP, gluon_one_loop),
                  ("gluon_loads_first", GLUON_LOADS_FIRST, gluon_loads_first),
                  ("gluon_prologue", GLUON_PROLOGUE, gluon_prologue), ("gluon_wide", GLUON_WIDE, gluon_wide),
                  ("gluon_cluster_exact", GLUON_CLUSTER_EXACT, gluon_cluster_exact))
    for name, opt, value in gluon_only:
        got = opt.resolve(value)
        if value is not None and (got is True or isinstance(opt, IntOption)):
            raise ValueError(f"{name}: is an option of the Gluon swap-AB kernel; the Triton swap-AB kernel runs here "
                             "(gluon off, or a machine where the Gluon kernel cannot run)")
    block_n = SWAPAB_BLOCK_N.resolve(block_n)
    if block_n not in (32, 64):
        raise ValueError(f"block_n: must be 32 or 64, got {block_n}")
    tiles = max(1, -(-n_slots // block_n))
    splits, per = _splits(T, 1, tiles, sm_count, num_splits)
    warps = SWAPAB_WARPS.resolve()
    if warps not in (4, 8):
        raise ValueError(f"num_warps: must be 4 or 8, got {warps}")
    return SwapabPlan(block_n=block_n, num_splits=splits, slots_per_split=per * block_n,
                      num_warps=warps if device_type == "cuda" else 4)
