"""Launch rules and options of sparse_int8, as data.

Split rule (decode, 1 to 16 rows): one CTA per SM (the kernel's register count allows one resident
CTA per SM), never more splits than candidate tiles; an explicit tiles-per-split overrides it.
Evidence (H200, model shapes: 24 heads, 2 KV heads, D = 256, 2048 candidates; median us over forced
tiles-per-split 1 / 2 / 4 / 8, benchmarks/sweeps/h200-58d0089.json, prefetch off):
1 row 11.1 / 11.2 / 14.9 / 22.9, 8 rows 48.0 / 35.2 / 29.0 / 25.6. The rule picks 1 tile per split at
1 row (64 splits) and 8 at 8 rows (8 splits): the best of each column; at 4 rows it picks 4.
Tile (D = 256; benchmarks/sweeps/h200-3c4a162/sweep-sparse_int8-tile.json and
benchmarks/sweeps/h200-fc58304/sweep-sparse_int8-tile-2.json, medians in us, decode 1 / 8 rows, prefill 128 /
2048 rows): 8 warps x 32 candidates, 2 stages (the previous rule) 11.2 / 26.0 / 254 / 3954; 4 warps x 32,
2 stages 11.6 / 25.7 / 150 / 2334; 4 warps x 32, 3 stages 11.9 / 23.2 / 153 / 2379; 4 warps x 16 11.5 / 37.6 /
227 / 3193; 8 warps x 16 12.1 / 56.0 / 431 / 6714. So: the direct path (prefill) takes 4 warps x 32, the split
path 4 warps x 32 with 3 stages from 8 rows and the previous 8 warps x 32 below (only 1 and 8 rows were
timed; D = 64 and 128 were not swept and keep the previous rule).
Swap-AB and integer scores (benchmarks/sweeps/h200-7baf63f/sweep-sparse_int8-swap.json, medians in us, decode 1 / 8
rows, prefill 128 / 2048 rows, 2048 rows with queries 8x larger): the rule then 8.9 / 22.3 / 148.3 / 2283 / 2285;
swap-AB tiles of 64 candidates at 4 warps (split-bf16 query) 11.2 / 26.7 / 159.1 / 2401 / 2395; the same with the
scores from the query's int8 digits (qk_int8) 11.4 / 24.3 / 136.5 / 2050 / 2047 (3 stages: 11.7 / 24.4 / 137.7 /
2092 / 2091); at 8 warps 11.1-27.6 / 242.6-268.7 / 3835-4234; 128-candidate tiles at 8 warps were refused by the
block_n check of that commit (not timed). Over a bf16 cache (no conversion at all): the rule 8.8 / 21.8 / 144.5 /
1911 / 1905, swap-AB 10.4 / 23.0 / 167.4 / 2619 / 2616. So the direct path (prefill) at D = 256 over an int8 cache
takes swap-AB tiles with integer scores (8-10 % faster); decode and bf16 caches keep the rule. A program whose
rows' int8 digits miss the budget runs the swap-AB split-bf16 loop, the row above (5 % slower than the previous
rule, 17 % slower than the digits): the cliff of that fallback is bounded by it.
Prefetch (K and V gathered a tile ahead): off by default, slower in the same sweep (prefill 128 rows
317 vs 250 us, 2048 rows 5109 vs 3914 us; it raises the register count and spills in the split
variant).
Pipelined loop (the plain loop, its gathers pipelined by Triton; benchmarks/sweeps/h200-45728cf/
sweep-sparse_int8-pipe.json, the same four columns): the rule 8.9 / 22.4 / 148.9 / 2280; pipelined at 2 / 3 / 4
stages 9.0-9.1 / 24.7-24.8 / 176.8-185.6 / 2577-2706; at 3 stages with 2 programs per SM 9.1 / 20.5 / 193.4 / 2705,
with 8 warps x 64 candidates 9.5 / 20.8 / 187.3 / 2929. Off: slower except at 8 decode rows (8 %), which one point
does not make a rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..options import IntOption, Switch

SUPPORTED_HEAD_DIMS = (64, 128, 256)
# Gluon kernel rule (kernel_gluon.py, sm_90), from runs on the H200 (model shapes, medians in us, Triton / Gluon):
# benchmarks/sweeps/h200-a590028/sweep-sparse_int8-gluon-3.json (the kernel's final form, two wide products a tile):
# prefill 128 rows 135.0 / 100.9, 2048 rows 2038 / 1515, 8192 rows 7935 / 5893; decode 1 row 8.9 / 10.0, 8 rows
# 22.5 / 18.8; benchmarks/sweeps/h200-406d46d/sweep-sparse_int8-gluon.json (its first form, six products a tile,
# slower than the final one wherever both ran): decode 2 rows 11.2 / 11.4, 4 rows 16.6 / 14.6; the bench at 5728b74
# (benchmarks/results/sparse_int8-h200-2026-11-30-5728b74.json, the rule as below): 4 rows 16.5 / 13.8. So: the
# direct path and splits from 4 rows; 1 row kept the Triton rule, and 2 and 3 rows too (not shown to win then; see below). At 8 warps
# (two warpgroups splitting the heads, each reading the whole key tile) the first form took 1.7x as long at 2048 rows
# (benchmarks/sweeps/h200-83d3f17/sweep-sparse_int8-gluon-2.json); issuing a tile's products back to back with one
# wait gained nothing (same sweep). Neither is an option.
# Re-timed at 64b9dc1 (benchmarks/sweeps/h200-64b9dc1/sweep-sparse_int8-gluon.json, 5 rounds, paired ratios Gluon /
# Triton): 1 row 10.2 / 8.8 us (1.16 [1.16-1.16]), 2 rows 10.8 / 11.1 (0.97 [0.97-0.97]), 4 rows 13.7 / 16.5, 8 rows
# 18.7 / 22.3. So splits from 2 rows; 1 row keeps the Triton rule. 3 rows, timed since
# (`benchmarks/sweeps/h200-a356a5d/sweep-sparse_int8-rows.json`): the rule 12.9, Triton 14.3 us.
# The split target with the Gluon kernel (same sweep, gluon-c2: two programs per SM against one): 8 rows 17.8
# against 18.7 us (Gluon at one / two per SM 1.050 [1.050-1.052]; the same on the adversarial 8-row cases, 1.052 and
# 1.055), 4 rows 14.2 against 13.7 (0.964), 1 and 2 rows within 1 %, prefill 128 rows 11 % slower (two per SM moves it
# off the direct path). So two per SM for the Gluon kernel's decode splits from 8 rows (16 rows, timed since in
# `h200-a356a5d/sweep-sparse_int8-rows.json`: the rule 23.8, one / three per SM 31.0 / 32.5, Triton 40.5 us), one
# elsewhere.
GLUON_MIN_SPLIT_ROWS = 2
GLUON_SPLIT_CTAS_PER_SM, GLUON_SPLIT_CTAS_MIN_ROWS = 2, 8
MAX_GROUP = 16
DECODE_MAX_ROWS = 16
BLOCK_N = 64  # candidates per tile; 32 at D = 256 (see plan)
SPLIT_TARGET_CTAS_PER_SM = 1

TILES_PER_SPLIT = IntOption("tiles_per_split", "ATTNKIT_SPARSE_INT8_TILES_PER_SPLIT", None, 1, 1 << 20,
                            "candidate tiles (64 candidates, 32 at D = 256) per split in decode; default: the split rule")
PV_SPLIT = Switch("pv_split", "ATTNKIT_SPARSE_INT8_PV_SPLIT", True,
                  "probability tile as a bf16 high part plus a residual (needed for exact cancellation)")
PREFETCH = Switch("prefetch", "ATTNKIT_SPARSE_INT8_PREFETCH", False,
                  "gather the next candidate tile's K and V rows while the current one is computed")
BLOCK_N_OPT = IntOption("block_n", "ATTNKIT_SPARSE_INT8_BLOCK_N", None, 16, 64,
                        "candidates per tile (16, 32 or 64); default: the plan's rule (64, 32 at D = 256)")
WARPS_OPT = IntOption("num_warps", "ATTNKIT_SPARSE_INT8_WARPS", None, 4, 8,
                      "warps per program (4 or 8); default: the plan's rule (8 from D = 128 up)")
CTAS_OPT = IntOption("ctas_per_sm", "ATTNKIT_SPARSE_INT8_CTAS_PER_SM", None, 1, 16,
                     "split rule: programs per SM the splits aim for; default: SPLIT_TARGET_CTAS_PER_SM (the Gluon "
                     "kernel's decode splits from 8 rows: GLUON_SPLIT_CTAS_PER_SM)")
STAGES_OPT = IntOption("num_stages", "ATTNKIT_SPARSE_INT8_STAGES", None, 1, 4,
                       "software-pipeline stages of the candidate-tile loop (Triton's num_stages); default: the rule")
PIPELINE = Switch("pipeline", "ATTNKIT_SPARSE_INT8_PIPELINE", False,
                  "the plain candidate loop: index loads and the K / V gathers left to Triton's software pipeliner "
                  "(asynchronous copies into shared memory, num_stages deep) instead of the hand-written prefetch of "
                  "the indices; off: slower where timed but at 8 decode rows")
SWAP_AB = Switch("swap_ab", "ATTNKIT_SPARSE_INT8_SWAP_AB", None,
                 "swap-AB tiles: the candidates on the MMA's M side and the query heads of a KV head on N (warpgroup "
                 "MMAs on sm_90 from 64 candidates per tile), in the plain loop; default: the rule (the direct "
                 "path at D = 256 over an int8 cache, with qk_int8)")
QK_INT8 = Switch("qk_int8", "ATTNKIT_SPARSE_INT8_QK_INT8", None,
                 "with swap_ab: scores from integer MMAs of the int8 codes against four int8 digits of the folded "
                 "query (2^-27 of its row's largest element; a program whose rows' digits could move a score by "
                 "more than 2^-10 nats takes the split-bf16 query), so no key is converted; default: with the "
                 "swap_ab rule")
GLUON = Switch("gluon", "ATTNKIT_SPARSE_INT8_GLUON", None,
               "the swap-AB integer-score tile as a Gluon kernel for sm_90 (key codes copied straight into shared "
               "memory for one integer MMA against the query's four digits, value codes converted once into a bf16 "
               "tile for one MMA against both probability halves); default: the rule (D = 256 over an int8 cache, "
               "the direct path and splits from 2 rows) wherever the kernel can run (a CUDA sm_90 GPU, int8 caches "
               "whose pointers and strides are multiples of 16 bytes)")
# The first two candidate tiles' ids loaded before the query (ids_early). In the sm_90 SASS (compile_check.
# loads_by_barrier) the ids of the first tile waited behind the query fold's barriers (the 1-row decode's plain loop:
# after its 5th, the Gluon kernel: after its 8th), so their round trip followed the query's; with the option they are
# requested with the query. The same bits (CPU test in the interpreter, Gluon GPU test). Sweep sparse_int8-ids-early at
# 4ea6223 (benchmarks/sweeps/h200-4ea6223/sweep-sparse_int8-ids-early.json, 5 rounds, paired ids early / before):
# decode 1 row 0.997 (c32k) / 0.982 (c8k), 2 and 4 rows 1.000, 8 rows 0.957 [0.956-0.959] (18.1 -> 17.3 us), prefill
# 128 / 2048 rows 0.989 / 0.990: never slower, so on. (Gathering the first tile before the fold as well, tried
# earlier as early_gather, was slower: docs/sparse_int8.md.)
IDS_EARLY = Switch("ids_early", "ATTNKIT_SPARSE_INT8_IDS_EARLY", True,
                   "the first two candidate tiles' ids loaded before the query (the plain loop and the Gluon kernel), "
                   "so that their round trip overlaps the query's instead of waiting behind the query fold's "
                   "barriers (sm_90 SASS); the same bits; default on (0.4-4.3 % faster, sweep sparse_int8-ids-early)")
# The Gluon kernel's score product issued before the value conversion (gluon_overlap). In the sm_90 SASS of the
# query-digit loop (tests/test_compile_sm90.py) the integer MMA otherwise waits behind the conversion's shared-memory
# round trip and its barriers, and the conversion behind nothing the MMA writes: they read and write different
# tiles. With the option the MMA is issued right after the tile's copies land and waited for once the next tile's
# copies are issued. The same bits (GPU test, at 70ef5d5). Sweep sparse_int8-gluon-overlap at 70ef5d5
# (benchmarks/sweeps/h200-70ef5d5/sweep-sparse_int8-gluon-overlap.json, 5 rounds, the Gluon kernel forced both ways,
# paired overlap / rule): slower on all six cases, 1.031 / 1.007 / 1.027 / 1.013 at 1 / 2 / 4 / 8 decode rows,
# 1.044 / 1.043 at 128 / 2048 prefill rows (1515 -> 1582 us). The prediction (the conversion hidden behind the
# integer MMA) was wrong: both use the shared-memory pipe, which Nsight Compute had the busiest unit of this loop
# (docs/sparse_int8.md), and two programs per SM already overlap one program's MMA with the other's conversion. Off.
GLUON_OVERLAP = Switch("gluon_overlap", "ATTNKIT_SPARSE_INT8_GLUON_OVERLAP", False,
                       "the Gluon kernel issues each tile's score product before converting its value codes and "
                       "waits for it after, so the tensor cores and the conversion run at once (the query-digit "
                       "programs; the same bits); default off: 0.7-4.4 % slower in the sweep "
                       "sparse_int8-gluon-overlap")
# The Gluon kernel's value product with its A operand in registers (gluon_v_regs): the value codes copied a tile
# ahead into one of two raw buffers and read at the value product straight into the MMA's register operand (a
# thread's 2 D / 64 consecutive dims of each of its candidates in one shared load, candidate pairs packed and
# converted by bits, the operand's rows a permutation of the output dims undone once in the epilogue), instead of
# converted into a bf16 tile in shared memory and read back by the MMA. In the sm_90 SASS of the query-digit loop at
# D = 256 (tests/test_compile_sm90.py): 16 8-byte shared loads where there were 8 16-byte loads, 16 16-byte stores
# and 4 more barriers; 956-957 instructions against 980-984; 86 KB of shared memory against 100 (the split-bf16 query's
# bf16 key tile over the two key buffers; benchmarks/experiments/sass-sparse-int8-v-regs-sm90-615a1f8.json). Aimed at
# the shared-memory pipe, the loop's busiest unit (docs/sparse_int8.md). The rule: on wherever the Gluon kernel runs,
# unless gluon_overlap is on (which needs the bf16 value tile). Sweep sparse_int8-gluon-v-regs on an H100 80GB HBM3
# (benchmarks/sweeps/h100-926309e/, 5 rounds, paired rule as it was / option, the Gluon kernel forced): prefill 1.205 /
# 1.218 at 128 / 2048 rows, decode 1.022 / 1.038 / 1.058 at 2 / 4 / 8 rows, 1.001 at 1 row (where the rule runs the
# Triton plain loop); every program on the split-bf16 fallback 1.03-1.07 in decode, 1.18 in prefill.
GLUON_V_REGS = Switch("gluon_v_regs", "ATTNKIT_SPARSE_INT8_GLUON_V_REGS", None,
                      "the Gluon kernel's value product takes its value tile from registers, loaded from the raw "
                      "codes and converted there, instead of from a bf16 tile in shared memory; the same bits; "
                      "default: on where the Gluon kernel runs, off with gluon_overlap (sweep "
                      "sparse_int8-gluon-v-regs: prefill 17-18 % faster, decode 0-6 %)")
VALIDATE = Switch("validate", "ATTNKIT_SPARSE_INT8_VALIDATE", True,
                  "the value checks: every index in [-1, C), q and the scales finite (one wait for the GPU; turn off "
                  "for CUDA-graph capture)")


@dataclass(frozen=True)
class Plan:
    num_splits: int
    cands_per_split: int
    block_r: int
    block_n: int
    direct: bool  # one split: the kernel writes the output itself
    num_warps: int = 4
    num_stages: int = 2
    swap_ab: bool = False
    qk_int8: bool = False
    gluon: bool = False  # the swap-AB integer-score tiles run as kernel_gluon's (sm_90)


def plan(T: int, hkv: int, group: int, n: int, sm_count: int, tiles_per_split: int | None, head_dim: int = 256,
         block_n: int | None = None, num_warps: int | None = None, ctas_per_sm: int | None = None,
         num_stages: int | None = None, swap_ab: bool | None = None, qk_int8: bool | None = None,
         int8_cache: bool = True, gluon: bool | None = None, gluon_ok: bool = False) -> Plan:
    """A pure function of shapes and device (the tile rule and its evidence: the module's docstring). gluon_ok:
    the Gluon kernel can run here (sm_90, aligned int8 caches); gluon: the option (None: the rule, True: the Gluon
    kernel, which is the swap-AB integer-score tile, False: the Triton kernels).
    Registers (sm_90 cubins, compile_check with the launcher's alignment specialization): D = 256, 8 warps x 32
    candidates 174 / 164 (direct / split), 4 warps x 32 203 / 192, no spills."""
    target = ctas_per_sm or SPLIT_TARGET_CTAS_PER_SM
    direct = tiles_per_split is None and T > DECODE_MAX_ROWS and T * hkv >= target * sm_count
    # (with the Gluon kernel, decode splits from GLUON_SPLIT_CTAS_MIN_ROWS rows aim for GLUON_SPLIT_CTAS_PER_SM: below)
    if head_dim >= 256:  # the timed rule
        warps = num_warps or (4 if direct or T >= 8 else 8)
        stages = num_stages or (3 if not direct and T >= 8 else 2)
    else:
        warps = num_warps or (8 if head_dim >= 128 else 4)
        stages = num_stages or 2
    if warps not in (4, 8):
        raise ValueError(f"num_warps: must be 4 or 8, got {warps}")
    # the direct path at D = 256 over an int8 cache: swap-AB tiles of 64 candidates at 4 warps, scores from the
    # query's int8 digits (the sweep in the module's docstring); elsewhere not timed, so the rule below
    swap_rule = direct and head_dim >= 256 and int8_cache
    swap = swap_rule if swap_ab is None else swap_ab
    qk8 = (swap and swap_rule) if qk_int8 is None else qk_int8
    if qk8 and not swap:
        raise ValueError("qk_int8: is a swap-AB tile's; it needs swap_ab=True")
    qk8 = qk8 and int8_cache
    # the Gluon kernel (sm_90): the same swap-AB integer-score tile, 64 candidates at 4 warps; the rule where it was
    # timed faster (the evidence above GLUON_MIN_SPLIT_ROWS): D = 256 over an int8 cache, the direct path and splits from 2 rows
    gluon_rule = (gluon_ok and int8_cache and head_dim >= 256 and (direct or T >= GLUON_MIN_SPLIT_ROWS)
                  and swap_ab is not False and qk_int8 is not False and block_n in (None, 64)
                  and num_warps in (None, 4))
    use_gluon = gluon_rule if gluon is None else bool(gluon)
    if use_gluon:
        if not gluon_ok:
            raise ValueError("gluon: the Gluon kernel runs on CUDA sm_90 GPUs over int8 caches whose pointers and "
                             "strides are multiples of 16 bytes")
        if swap_ab is False or qk_int8 is False:
            raise ValueError("gluon: the Gluon kernel is the swap-AB integer-score tile; it cannot be combined with "
                             "swap_ab=False or qk_int8=False")
        if block_n not in (None, 64) or num_warps not in (None, 4):
            raise ValueError("gluon: the Gluon kernel's tile is 64 candidates at 4 warps")
        swap, qk8 = True, True
        if ctas_per_sm is None and not direct and GLUON_SPLIT_CTAS_MIN_ROWS <= T <= DECODE_MAX_ROWS:
            target = GLUON_SPLIT_CTAS_PER_SM
    if swap and num_warps is None:
        warps = 4
    # D = 256 takes 32-candidate tiles: with 64 the sm_90 cubins spill 112 / 224 bytes per thread
    # (direct / split), with 32 none (compile_check). A "tile" of tiles_per_split is this size.
    # Swap-AB tiles take 64 (a warpgroup MMA's M).
    block_n = block_n or (64 if swap else 32 if head_dim >= 256 else BLOCK_N)
    if block_n not in (16, 32, 64):
        raise ValueError(f"block_n: must be 16, 32 or 64, got {block_n}")
    block_r = 16 if group <= 16 else 32
    tiles = max(1, -(-n // block_n))
    # direct (one split, the kernel writes the output) once the rows alone fill the GPU; fewer rows than that
    # (decode, and short prefill chunks) split their candidates so that the programs do
    if direct:
        return Plan(1, tiles * block_n, block_r, block_n, True, warps, stages, swap, qk8, use_gluon)
    if tiles_per_split is None:
        want = -(-(target * sm_count) // max(1, T * hkv))
        splits = max(1, min(want, tiles))
        tiles_per_split = -(-tiles // splits)
    splits = -(-tiles // tiles_per_split)
    return Plan(splits, tiles_per_split * block_n, block_r, block_n, False, warps, stages, swap, qk8, use_gluon)
