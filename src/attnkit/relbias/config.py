"""Launch rules of the relbias kernels, as data: a pure function of shapes and device.

Evidence (H200, model shapes Hq 64, Hkv 8, D 128, E 8192; medians in us, one run per artifact, every
setting of a grid timed alternating in that run):
- Forward kernel, `benchmarks/sweeps/h200-3c4a162/sweep-relbias-fwd.json` and
  `benchmarks/sweeps/h200-fc58304/sweep-relbias-fwd-w4.json`. Prefill 8K global / 8K window 1024 / varlen
  mixed / 32 tokens against 64K:
    8 warps 64 x 64 (the previous rule, never timed before):  10938 / 2897 / 4335 / 2731
    4 warps 64 x 64:                                           6646 / 1668 / 2681 / 2310
    4 warps 64 x 64, interior tiles, heavy first:              5851 / 1551 / 2426 / 2745  (the rule, 33-64 tokens)
    4 warps 32 x 64, interior tiles, heavy first:              8566 / 2299 / 3456 / 1882  (the rule up to 32 rows)
    4 warps 64 x 32 / 8 warps 64 x 128 (2 or 3 stages) / 8 warps 128 x 64: slower on the prefill rows (all with
    the per-score lookup; from 65 tokens the strip rule below replaces these).
  The bias-free diagnostic (wrong results by design) of the 4-warp rule runs 2631 / 734 / 1207: the bias
  lookups cost more than half of the prefill time. D = 64 and 256 were not swept (4 and 8 warps kept).
- Decode kernel, `benchmarks/sweeps/h200-3c4a162/sweep-relbias-decode.json` and
  `benchmarks/sweeps/h200-fc58304/sweep-relbias-decode-w4.json`. Decode b1 64K / b32 8K / b32 64K / paged
  bs16 / paged bs64 / fp8 b32 8K:
    8 warps, 2 stages, 2 programs per SM (the previous rule):  137.5 / 515 / 2798 / 475 / 467 / 413
    4 warps, 3 stages, 4 per SM (the contiguous bf16 rule):    95.0 / 263 / 2071 / 395 / 389 / 299
    4 warps, 2 stages, 2 per SM (the paged rule):              102.4 / 407 / 2583 / 339 / 336 / 295
    4 warps, 3 stages, 3 per SM (the fp8 rule):                 88.1 / 331 / 2328 / 350 / 348 / 286
  (b1 x 64K's best, 88.1 at 3 per SM and 86.9 at 8, is left: one rule serves the contiguous bf16 rows, and
  4 per SM is the best at b32 x 8K and within 2 % at b32 x 64K).
- Loop structure (``split_loops``: one branch-free loop per kind of key tile, against one loop with a branch
  per tile), `benchmarks/sweeps/h200-67ecdb2/sweep-relbias-fwd-split.json`, `sweep-relbias-decode-split.json`,
  then the rules below against their alternative in `sweep-relbias-rules.json` (and
  `benchmarks/sweeps/h200-b166879/sweep-relbias-rules-2.json`). Rule / the other structure:
    forward, 32 query tokens against 64K / 8K keys (32-row tiles, 3 stages):  1200 / 1881,  219 / 288
    forward, prefill 8K global / window 1024 / varlen mixed (64-row tiles):   5879 / 6002, 1563 / 2262,
                                                                              2447 / 4729 (the branch is kept)
    decode b1 x 64K, b32 x 64K (keys beyond the extent):                      82.1 / 92.5, 1972 / 2057
    decode b32 x 8K (every key inside the extent; the branch is kept):        262.9 / 272.0
    paged decode b32 x 8K, block size 16 / 64 (128-key tiles):                317.3 / 338.8, 315.9 / 335.7
    fp8 decode b32 x 8K:                                                      286.8 / 285.8 (a tie; the branch)
  The paged gain is measured with our settings alternating; alternating with the peers in `attnkit bench`
  the paged rows read 337-341 us (`benchmarks/sweeps/h200-b166879/paged-vs-*.json`: 317 beside cuDNN,
  325 beside the 16 ms bias-mask SDPA).
- Route of 17 to 32 query tokens: the decode kernel (token blocks of packed rows, split-K) instead of the forward
  kernel (one program per query head and 32-row block). 32 tokens against 64K / 8K keys: 1192.9 / 218.0 us by
  the forward kernel, 986.5 / 219.1 by the decode kernel at 128 rows and 4 warps
  (`benchmarks/sweeps/h200-6d682fb/sweep-relbias-verify.json`), and 301.8 / 74.1 by the decode rule below.
- The bias from strips (``bias_strip``): a tile's scores at distances d_min .. d_min + rows + keys - 2 read that
  strip once and build the tile from it, instead of one gathered load per score.
    Forward (`benchmarks/sweeps/h200-6d682fb/sweep-relbias-fwd-prefetch.json`, then the rule against its
    neighbours in `benchmarks/sweeps/h200-51880b5/sweep-relbias-fwd-strip.json`). Prefill 8K global / window
    1024 / varlen mixed:
      64 x 64, 4 warps, per-tile branch (the previous rule):            5865 / 1558 / 2426
      128 x 64, 8 warps, branch-free loops, the strip (the rule):      3256 / 1396 / 2380
      the same with 3 stages / 128-key tiles / 32-key tiles:           3449 / 1535 / 3032, 3170 / 1537 / 2990,
                                                                       4567 / 1625 / 2531
      128 x 64 without the strip / 64 x 64 with it (4 warps):          6073 / 2033 / 3509, 3497 / 1669 / 3656
      bias loaded one tile ahead (bias_prefetch, 64 x 64):             4513 / 1855 / 4097
      the bias-free diagnostic of the rule (wrong results by design):  2765 / 886 / 1496
    Then the masked tiles (diagonal, window edge, extent) from their strip too, clamped per entry
    (`benchmarks/sweeps/h200-18926a2/sweep-relbias-strip-2.json`; with the per-score lookup left there): 2894 /
    985 / 1585 (3226 / 1392 / 2369). The rule's tile holds 255 registers with no spill on sm_90
    (`benchmarks/experiments/compile-sm90-relbias-18926a2.json`);
    Shapes the rule above was not timed on (`benchmarks/sweeps/h200-93774c7/sweep-relbias-tune.json`; D 64: Hq 64,
    8K; D 256: Hq 32, 4K; D 128: 8 chunks of 48 or 128 tokens against 8K keys). Prefill D 64 / prefill D 256 /
    chunk 48 / chunk 128:
      the previous rule (128 x 64 at 8 warps with the strip from 65 tokens at D <= 128; 64-row tiles without it
      below, and at D 256 with 8 warps):                                 2607 / 2347 / 971 / 852
      the strip, 128 x 64 at 8 warps:                                    2619 /  893 / 1201 / 852
      the strip, 64 x 64 at 4 warps:                                     2115 /  914 / 558 / 746
      the strip, 64 x 64 at 8 warps / 128 x 32 at 8 warps:               4817 / 1819 / 1255 / 1845,
                                                                         3536 /  892 / 1567 / 1285
    So the strip from 33 query tokens at every D; 128 x 64 at 8 warps only where D >= 128 and the longest
    sequence has at least 1024 tokens (8K at D 128: 3256 against 3497 for 64 x 64 with the strip, above; the
    varlen batch, longest 4096: 2380 against 3656), 64 x 64 at 4 warps otherwise. The threshold lies somewhere
    between the 128-token chunks and 4K; 1024 is not timed.
    A second look at the 128 x 64 rule (`benchmarks/sweeps/h200-93774c7/sweep-relbias-fwd-strip-2.json`), prefill
    8K global / window 1024 / varlen mixed: the rule 2884 / 985 / 1580; 128-key tiles 3097 / 1138 / 1942; 3 stages
    2895 / 1032 / 1760; 32-key tiles 4119 / 1258 / 1976; in launch order (no heavy-first) 2919 / 975 / 1597; K and V
    through TMA (kv_tma) 3688 / 1181 / 1938, at 3 stages 3329 / 1158 / 1926. The rule stays.
    Decode (`benchmarks/sweeps/h200-51880b5/sweep-relbias-verify-2.json`). 32 tokens against 64K / 8K, then one
    token at b1 x 64K / b32 x 8K:
      per-score lookup (128 rows, 4 warps, 3 stages):      988.1 / 219.7 / 83.5 / 265.2
      strips, same tile:                                   948.9 / 196.4 / 76.3 / 258.5
      strips, 128 rows at 8 warps:                         301.8 /  88.6
      strips, 64 rows at 2 stages:                         408.4 /  74.1
    Paged bs16 / fp8 b32 x 8K (`benchmarks/sweeps/h200-18926a2/sweep-relbias-strip-2.json`), per-score lookup
    against strips: 318.0 / 396.6 against 339.4 / 263.5. So: strips over contiguous caches (bf16 and fp8), the
    per-score lookup over paged ones. Verify (more than 64 packed rows): splits of at least
    VERIFY_LONG_SPLIT_TILES key tiles take 128 rows at 8 warps (64K: 31 tiles per split), shorter ones 64 rows at
    2 stages (8K: 4 tiles). Two points, both at 32 tokens: 17 to 31 tokens follow the same rule untimed.
    Its neighbours at 32 tokens against 8K (`benchmarks/sweeps/h200-93774c7/sweep-relbias-verify-3.json`): the rule
    73.9; 32-key tiles 98.8, 128-key 149.8; 3 / 5 / 6 programs per SM 81.1 / 88.8 / 105.6 (the last with 32-key
    tiles); 3 stages 195.7. The rule stayed then.
    The split count (`benchmarks/sweeps/h200-b184c23/sweep-relbias-verify-4.json`,
    `benchmarks/sweeps/h200-e0f0eb0/sweep-relbias-verify-5.json`, 7 rounds, medians in us, 8K / 64K): the rule then
    73.1 / 290.9 (8K: 17 splits of 8 tiles, so 64-row tiles; 64K: 33 splits of 31 tiles at 128 rows, 528
    programs, four waves of one 128-row program per SM); 4 / 6 / 7 / 8 / 9 / 10 / 16 / 24 splits 100.1 / 73.5 /
    66.0 / 59.5 / 78.1 / 91.8 / 70.5 / 84.6 at 8K and 501.0 / 379.0 / 341.7 / 321.2 / 454.2 / 405.9 / 333.7 /
    301.0 at 64K; 1 / 2 / 3 programs per SM 83.2 / 78.2 / 79.9 and 452.0 / 354.2 / 317.1. At 8K, 8 splits is
    16 tiles a split, so the 128-row tile at 8 warps: 2 token blocks x 8 KV heads x 8 splits = 128 programs, one
    wave at one per SM (its registers allow one); 9 splits (144 programs, two waves) and 7 (112, SMs idle) lose,
    at 64K too. So where the split target leaves short splits, a verify tile first tries VERIFY_ONE_WAVE: the
    128-row tile with as many splits as one wave holds (sm_count // programs per split), taken when each split
    then has at least VERIFY_LONG_SPLIT_TILES tiles (8K: 59.5 against 73.1 us, 0.81x); 64K keeps the split
    target (four whole waves, its beyond-extent tiles spread over many splits; one wave of 8 splits is 321.2).
    The rule beside three other verify shapes (`benchmarks/sweeps/h200-c0c83c9/sweep-relbias-verify-wave.json`, 7
    rounds, medians in us, rule / the short-split tile it replaces / the 128-row tile by a split target of one per SM,
    which overflows one wave): b1 x 32 tokens x 8K 59.9 / 73.8 / 83.5; b4 x 32 x 8K 189.4 / 270.2 / 256.7; b1 x 16 x
    16K 52.8 / 71.3 / 58.2; b2 x 32 x 4K 64.6 / 77.6 / 93.4 (paired rule / short split 0.70-0.83).
- fp8 decode against bf16 (`benchmarks/sweeps/h200-93774c7/sweep-relbias-fp8.json`, b32 x 8K): fp8 263.9 us at
  3 programs per SM (the rule), 265-273 at 4 / 6 / 8, 269 at 4 stages, 291-426 with other tiles; bf16 262.1 in
  the same run. Half the bytes did not halve the time. Suspecting the conversions (each fp8 pair takes one native
  e4m3 -> f16x2 conversion and two f16 -> bf16 ones on sm_90), a variant computed in fp16 instead (q rows scaled
  by powers of two into fp16, P as fp16(P * 2^15), one conversion per pair): 299.9 us against bf16's 262.8 in
  `benchmarks/experiments/relbias-fp8-as-fp16-h200-45728cf.json`, slower, so it was not kept. Nsight Compute
  (`benchmarks/experiments/ncu-h200-b7735aa/`): the bf16 decode runs at 82 % of DRAM bandwidth, the fp8 one at 34 %
  with its issue slots half busy and 4 warps per scheduler (registers and shared memory), in 0.97 waves: issue- and
  latency-bound, not bound by bytes. The conversion through fp16 (fp8_f16_cvt: no quarter-rate F2F) is slower
  still: 308.3 against 261.3 us (`benchmarks/sweeps/h200-cc494b2/sweep-relbias-fp8-cvt.json`), so it stays off.
  Deeper pipelines (`benchmarks/sweeps/h200-a4a09d7/sweep-relbias-fp8-stages.json`): the rule 261.7, 4 stages 265.0
  (4 per SM 273.8), 5 stages 3 per SM 338.8, 6 stages 2 per SM 333.7, 128-key tiles 295.5-297.2. The rule stays.
- The Gluon forward kernel (gluon_fwd_rule, gluon_fwd_config). Prefill 8K global / window 1024 / varlen mixed /
  D 64 8K / 8 chunks of 128 against 8K (`benchmarks/sweeps/h200-cc494b2/sweep-relbias-gluon.json`):
    the Triton rule:                                          2918 / 990 / 1582 / 2105 / 753
    Gluon, 8 warps (128 rows), 64-key tiles, 3-tile ring:     3010 / 926 / 1486 / 2188 / 830
      the same at 2 / 4 tiles, 128-key tiles at 2:            2935 / 894 / 1446 / 2241 / 812,  2957 / 917 / 1495 /
                                                              2191 / 809,  2723 / 881 / 1415 / 2034 / 688
      without the overlap (gluon_pipe) / per-score loads:     3041 / 949 / 1488 / 2489 / 842,  3446 / 1046 / 1685 /
                                                              2606 / 842
    Gluon, 4 warps (64 rows on one warpgroup):                2575 / 739 / 1218 / 1642 / 667
  Then around 4 warps (`benchmarks/sweeps/h200-d3eb8f4/sweep-relbias-gluon-2.json`, + 8 chunks of 48):
    3-tile ring / 2 tiles (the rule) / 4 tiles:  2633 / 738 / 1227 / 1669 / 671 / 465,  2633 / 724 / 1207 / 1671 /
                                                 662 / 464,  3887 / 1154 / 1922 / 1679 / 1099 / 766
    128-key tiles, 2 tiles / without the overlap / per-score loads:  3251 / 1113 / 1807 / 1696 / 881 / 693,
                                                 2812 / 784 / 1279 / 1737 / 738 / 522,  2818 / 796 / 1345 / 2180 / 692 / 493
    the Triton rule in the same run:             2986 / 986 / 1590 / 2135 / 754 / 570
  So on sm_90 the forward path takes the Gluon kernel at 4 warps, 64-key tiles, a 2-tile ring, with the overlap and
  the gather, wherever it runs and takes the input; the Triton kernel elsewhere (D 256, paged, fp8, the interpreter).
  Then the softmax's schedule (`benchmarks/sweeps/h200-37e8ea1/sweep-relbias-gluon-3.json`, the same six cases):
    the rule then (P in registers, the bias added in the softmax):  2604 / 730 / 1201 / 1677 / 649 / 457
    the bias starting the score product's accumulator (bias_acc):  2569 / 710 / 1184 / 1617 / 685 / 424
    bias_acc with lazy rescaling / also with 3 tiles:               2821 / 758 / 1262 / 1844 / 714 / 434,
                                                                    2740 / 761 / 1274 / 1829 / 691 / 445
    lazy rescaling alone / bias built early (bias_early):           3176 / 839 / 1381 / 1976 / 848 / 557,
                                                                    2617 / 726 / 1204 / 1711 / 653 / 446
    P through shared memory (p_smem) / with bias_early:             3053 / 813 / 1354 / 1949 / 819 / 537,
                                                                    3081 / 814 / 1362 / 1979 / 833 / 506
    the Triton rule in the same run:                                3002 / 994 / 1580 / 2146 / 742 / 558
  The SASS census (`benchmarks/experiments/sass-census-sm90-relbias-gluon-4b08d4a.json`) predicted the opposite
  for lazy rescaling and p_smem (the value product kept in flight during the exponentials); timed, both lose 8-30 %:
  the overlap they buy costs more than it saves, for reasons not yet found. So bias_acc is the rule (gluon_fwd_config
  with bias_acc unset), with the regression at chunks of 128 tokens noted; the others stay off. The bias-free
  diagnostic of the P-through-shared-memory schedule runs 2513 us at 8K global: without any bias this kernel
  is still about 1.45x cuDNN's 1734 us (the gap is the loop, not the bias).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..options import IntOption, Switch

SUPPORTED_HEAD_DIMS = (64, 128, 256)
SUPPORTED_GQA = (1, 2, 4, 8, 16)  # gated; any integer ratio Hq / Hkv is accepted (3 is gated in the smoke tier)
BLOCK_SIZES = (16, 32, 64, 128, 256)
MAX_EXTENT = 131072

FAST_INTERIOR = Switch("fast_interior", "ATTNKIT_RELBIAS_FAST_INTERIOR", True,
                       "forward kernel: interior tiles (all keys visible, distances inside or beyond the table) "
                       "skip the masks and the clamp")

HEAVY_FIRST = Switch("heavy_first", "ATTNKIT_RELBIAS_HEAVY_FIRST", True,
                     "forward kernel: each sequence's last query blocks (the most keys under a causal mask) are "
                     "launched first")
SPLIT_LOOPS = Switch("split_loops", "ATTNKIT_RELBIAS_SPLIT_LOOPS", None,
                     "one loop per kind of key tile (any / beyond the extent / inside it) with no branch in a loop "
                     "body; default: the rule (forward: up to 32 query rows; decode: keys beyond the extent, or "
                     "a paged cache)")
BIAS_PREFETCH = Switch("bias_prefetch", "ATTNKIT_RELBIAS_BIAS_PREFETCH", False,
                       "forward kernel: each tile inside the extent loads its bias one tile ahead, so the load's "
                       "latency overlaps the previous tile's MMAs (takes the branch-free loops, instead of the "
                       "strip); off: slower than the strip where timed")
BIAS_STRIP = Switch("bias_strip", "ATTNKIT_RELBIAS_BIAS_STRIP", None,
                    "a tile builds its bias from its strip of distances (forward: BLOCK_M + BLOCK_N - 1, in the "
                    "branch-free loops; decode: tokens per tile + BLOCK_N - 1 per query head), loaded once (clamped "
                    "into the table where a tile crosses a mask or the extent) and gathered, instead of one load per "
                    "score; default: the rule "
                    "(forward: at least 65 query tokens and D <= 128; decode: contiguous caches)")
PAGE_TILES = Switch("page_tiles", "ATTNKIT_RELBIAS_PAGE_TILES", None,
                    "decode kernel over a paged cache whose block size is at least the key tile's: each tile reads "
                    "its one block-table entry once (a scalar load) and addresses its keys as over a contiguous "
                    "cache, instead of one block-table load per key; needs block_n <= the block size; default: "
                    "the rule (decode_plan: on sm_90 for bf16 / fp16 caches of block size >= 64 at D <= 128, "
                    "relbias-paged-tiles sweeps)")
# The decode kernel's interior key tiles (every key seen by every row of the tile's block, every distance inside
# the table and the window) in a loop of their own with no mask, clamp or select. sm_90 SASS (compile_check, loop
# instructions per warp per tile): the short-split verify tile (64 rows, 64 keys, 4 warps) 815 -> 611 in the interior
# loop, at 255 registers with 16 bytes spilled (248 and none without); the 16-row decode tile 489 -> 433 but 210
# registers instead of 128 (half the programs per SM); with the branch-free loops (paged, past the extent) 503 -> 426
# at the same 168 registers. Timed at 34112fa (`benchmarks/sweeps/h200-34112fa/sweep-relbias-decode-fast.json`,
# medians in us, rule / interior loop): verify 32 x 64K (the long-split tile, 128 rows at 8 warps) 302.3 / 292.0;
# verify 32 x 8K (short splits) 73.0 / 79.8; decode b1 x 64K 77.6 / 80.6, b32 x 8K 260.4 / 267.9; paged block 16 /
# 64 279.3 / 317.1, 260.3 / 264.8; fp8 257.6 / 295.6. So the rule: on for the verify long-split tile only.
DECODE_FAST_INTERIOR = Switch("decode_fast_interior", "ATTNKIT_RELBIAS_DECODE_FAST_INTERIOR", None,
                              "decode kernel: its interior key tiles (all keys seen by every row of the block, all "
                              "distances inside the table and the window) in a loop of their own with no mask, "
                              "clamp or select; default: the rule (decode_plan: the verify tile of 128 rows at 8 "
                              "warps, relbias-decode-fast sweep)")
KV_TMA = Switch("kv_tma", "ATTNKIT_RELBIAS_KV_TMA", False,
                "forward kernel: interior key tiles of a contiguous cache load K and V through TMA tensor descriptors "
                "(takes the branch-free loops); off: slower where timed (prefill 8K 3688 against 2884 us, "
                "relbias-fwd-strip-2)")
FP8_F16_CVT = Switch("fp8_f16_cvt", "ATTNKIT_RELBIAS_FP8_F16_CVT", False,
                     "fp8 k, v converted to q's dtype through fp16 and fp32 (one packed conversion per two codes, "
                     "full-rate widening) instead of the direct cast (one quarter-rate conversion per code on sm_90); "
                     "the same values; off: 18% slower on the fp8 decode case (relbias-fp8-cvt sweep)")
FP8_ASM_CVT = Switch("fp8_asm_cvt", "ATTNKIT_RELBIAS_FP8_ASM_CVT", False,
                     "decode kernel: fp8 k, v converted to q's dtype by inline assembly (packed e4m3 -> f16 "
                     "conversions, for bf16 then f32 widenings and packed bf16 roundings) on the codes as loaded, "
                     "before the tile moves to the MMA operand layout through shared memory (ldmatrix), instead of "
                     "after it (narrow shared loads); the same values; compiled kernels only (the interpreter runs "
                     "the direct cast); off: 374 against 259 us on the fp8 decode case (relbias-fp8-asm sweep)")
GLUON_DECODE = Switch("gluon_decode", "ATTNKIT_RELBIAS_GLUON_DECODE", None,
                      "decode kernel over an fp8 cache: the Gluon kernel for sm_90 (swap-AB tiles, keys on the MMA's M "
                      "side and the packed rows on N, each code converted once) at D 64 or 128; default: the rule "
                      "(gluon_decode_rule: tiles of at most 8 packed rows over a contiguous cache)")
GLUON_DECODE_TMA = Switch("gluon_decode_tma", "ATTNKIT_RELBIAS_GLUON_DECODE_TMA", None,
                          "Gluon fp8 decode kernel: the code tiles copied by TMA (mbarrier-tracked) instead of "
                          "cp.async; default: TMA over a contiguous cache with packed [Hkv, D] rows, cp.async "
                          "otherwise (265.1 against 274.7 us on the fp8 decode case, relbias-gluon-decode-3)")
GLUON_DECODE_BIAS_ASYNC = Switch("gluon_decode_bias_async", "ATTNKIT_RELBIAS_GLUON_DECODE_BIAS_ASYNC", True,
                                 "Gluon fp8 decode kernel: each tile's bias copied into shared memory by cp.async "
                                 "with its codes, a ring ahead, instead of table loads into registers (a proxy fence "
                                 "before each MMA waits for a thread's loads in flight); off: 264 against 251 us on "
                                 "the fp8 decode case (relbias-gluon-decode-4)")
GLUON_DECODE_KREG = Switch("gluon_decode_kreg", "ATTNKIT_RELBIAS_GLUON_DECODE_KREG", None,
                           "Gluon fp8 decode kernel: the key codes loaded as an 8-bit MMA operand, converted in "
                           "registers and renamed into the 16-bit operand layout (the query's dims permuted alike), "
                           "so the score product reads keys from registers: no converted key tile in shared memory, "
                           "its store, fence and barrier; default: up to GLUON_DECODE_KREG_ROWS packed rows (234 -> "
                           "186 us on the fp8 decode case, relbias-gluon-decode-5)")
GLUON_DECODE_BANKS = Switch("gluon_decode_banks", "ATTNKIT_RELBIAS_GLUON_DECODE_BANKS", True,
                            "Gluon fp8 decode kernel: the value codes read 8 per thread and the bias tile swizzled, "
                            "against the shared-memory bank conflicts of the converted value stores (2-way) and the "
                            "bias reads (4-way) that Nsight Compute found; on: fp8 decode b32 x 8K 154.5 -> 137.8 us "
                            "(sweep relbias-gluon-decode-10)")
GLUON_DECODE_MAXNREG = IntOption("gluon_decode_maxnreg", "ATTNKIT_RELBIAS_GLUON_DECODE_MAXNREG", None, 64, 255,
                                 "Gluon fp8 decode kernel: registers per thread at most (ptxas maxnreg), so that "
                                 "more programs fit an SM (65536 / (128 x programs)); default: the compiler's "
                                 "choice (sweep relbias-gluon-decode-9)")
GLUON_DECODE_CVT = IntOption("gluon_decode_cvt", "ATTNKIT_RELBIAS_GLUON_DECODE_CVT", None, 0, 3,
                             "Gluon fp8 decode kernel, bf16 q: how a code becomes an MMA operand (0 the direct cast, "
                             "1 through fp16, 2 from its bits, 3 the products in fp16 with the query scaled per row "
                             "by a power of two; kernel_decode_gluon.py); default: GLUON_DECODE_CVT_RULE (3)")
GLUON = Switch("gluon", "ATTNKIT_RELBIAS_GLUON", None,
               "forward kernel: the Gluon kernel for sm_90 (TMA key / value ring, warpgroup MMAs, the bias from each "
               "tile's strip) over contiguous bf16 / fp16 k, v at D 64 or 128; default: the rule (gluon_fwd_rule)")
GLUON_PIPE = Switch("gluon_pipe", "ATTNKIT_RELBIAS_GLUON_PIPE", True,
                    "Gluon forward kernel: tile j - 1's value product runs during tile j's softmax "
                    "(FlashAttention-3's intra-warpgroup overlap; 0-14% faster at 8 warps, relbias-gluon sweep)")
GLUON_BIAS_GATHER = Switch("gluon_bias_gather", "ATTNKIT_RELBIAS_GLUON_BIAS_GATHER", True,
                           "Gluon forward kernel: each tile builds its bias from its strip by a shared-memory gather "
                           "(two CTA barriers a tile); off: each score loads its table entry (cached loads; 2-19% "
                           "slower, relbias-gluon sweep)")
GLUON_BIAS_EARLY = Switch("gluon_bias_early", "ATTNKIT_RELBIAS_GLUON_BIAS_EARLY", False,
                          "Gluon forward kernel (with gluon_pipe): each tile's bias built while its score product and "
                          "the previous value product run, before the scores are waited for; off: "
                          "no faster, 1-2 % slower on 3 of 6 prefill cases (relbias-gluon-3 sweep)")
GLUON_P_SMEM = Switch("gluon_p_smem", "ATTNKIT_RELBIAS_GLUON_P_SMEM", False,
                      "Gluon forward kernel (with gluon_pipe): P passed to the value product through shared memory "
                      "instead of registers; in the sm_90 SASS the register-operand product is waited for before the "
                      "softmax's exponentials (no overlap left), the shared-memory one during them; off: 11-26 "
                      "% slower on every prefill case all the same (relbias-gluon-3 sweep)")
GLUON_LAZY_RESCALE = Switch("gluon_lazy_rescale", "ATTNKIT_RELBIAS_GLUON_LAZY_RESCALE", False,
                            "Gluon forward kernel (with gluon_pipe): a row keeps its running max until a tile's "
                            "exceeds it by more than 2^8, and the accumulator is rescaled only when some row's max "
                            "moved (a branch over the program): 64 multiplies a tile skipped at D 128; off: "
                            "15-31 % slower (relbias-gluon-3 sweep)")
GLUON_BIAS_ACC = Switch("gluon_bias_acc", "ATTNKIT_RELBIAS_GLUON_BIAS_ACC", None,
                        "Gluon forward kernel (with gluon_pipe): each tile's bias, over softmax_scale, starts the score "
                        "product's accumulator, so the softmax takes one fused multiply-add per score instead of a "
                        "multiply-add and an add (when softmax_scale > 0; else the bias is added as usual); default: "
                        "on with gluon_pipe and without gluon_bias_early (1-7 % faster on 5 of the 6 prefill cases, "
                        "5 % slower on chunks of 128: relbias-gluon-3 sweep)")
GLUON_WS = Switch("gluon_ws", "ATTNKIT_RELBIAS_GLUON_WS", None,
                  "Gluon forward kernel, warp-specialized (kernel_fwd_gluon_ws.py): a TMA producer warp and two "
                  "consumer warpgroups of 64 query rows sharing each key / value tile (128 rows a program, as cuDNN "
                  "and FlashAttention-3 on sm_90); with gluon_pipe, without gluon_p_smem, gluon_bias_early and "
                  "gluon_lazy_rescale; default: the rule gluon_ws_rule (long global key ranges at D 128)")
# Off (the rule, with gluon_ws): without the turns the kernel is faster and, since the fix below, right under load.
# The bug: without the turns the kernel returned wrong rows when other processes kept the GPU busy. Five processes
# calling kernels side by side on one H200 (benchmarks/experiments/stress_under_load.py;
# benchmarks/experiments/relbias-ws-stress-h200-c9db574.json): prefill 8K global without the turns (and without
# gluon_k_release) had wrong rows in 737 of 1635 calls (the first rows of a consumer's 64, in the last heads launched;
# some NaN or infinite), while with them 0 of 1836 (prefill 8K) and 0 of 2132 (chunks of 128), the decode-shaped case
# (one query row against 64K keys) 0 of 671. The exploratory runs at 69133fe
# (benchmarks/experiments/relbias-ws-stress-h200-69133fe/) found it: the decode-shaped case faulted with an illegal
# memory access after 5 calls. Alone on the GPU both passed every gate. The cause, found in the PTX
# (compile_check.mbarrier_reuse): without PINGPONG the kernel initialized its two turn barriers and never used them,
# so the compiler's allocator gave their bytes to the partitions' captured arguments (the second consumer's sequence
# bounds: the fault) and to the first consumer's layout scratch (its first rows: the wrong rows); reusing an
# mbarrier's memory before mbarrier.inval is undefined. _ws_buffers now makes the turn barriers only with PINGPONG,
# and every compiled variant is checked for such reuse on the CPU (tests/test_compile_sm90.py).
# The fix on the H200 at 9e5c820 (benchmarks/experiments/stress-h200-9e5c820.json, six processes for 45 s): without
# the turns 0 wrong of 1700 calls at prefill 8K (without the key release) and 0 of 722 on the decode-shaped case
# (with it), while the kernel as it was before the fix, in the same run, had wrong rows in 537 of 1400.
# Speed (benchmarks/sweeps/h200-9e5c820/sweep-relbias-gluon-ws-4.json, paired ratios against the turns, 5 rounds):
# without the turns, with the key release, 1.7 % faster at prefill 8K global (1.017 [1.016-1.018]) and 4 % on 8
# chunks of 128 rows against 8K keys (585 against 610 us); without the key release too, about as fast as the turns.
# As dispatched since (64b9dc1): stress benchmarks/experiments/stress-h200-64b9dc1.json (seven processes, 45 s) 0
# wrong of 1955 calls at 8K, 0 of 2383 on chunks of 128, 0 of 858 decode-shaped (with the turns 0 of 1538; the pre-fix
# kernel 536 of 1335); gates benchmarks/checks/check-relbias-gluon_fwd_ws*-h200-64b9dc1.jsonl; bench
# benchmarks/results/relbias-h200-2026-12-01-64b9dc1-prefill.json: 8K global 2143 us (2142 with the turns at c9db574),
# chunks of 128 578 us (612).
GLUON_PINGPONG = Switch("gluon_pingpong", "ATTNKIT_RELBIAS_GLUON_PINGPONG", None,
                        "warp-specialized Gluon forward kernel (gluon_ws): the two consumer warpgroups take turns "
                        "issuing their products (FlashAttention-3's warp-scheduler barrier, here an mbarrier pair), "
                        "so one's softmax runs under the other's products; default: off (without them the kernel is "
                        "2-4 % faster, relbias-gluon-ws-4 sweep)")
# Off: at 0da00a4 (benchmarks/sweeps/h200-0da00a4/sweep-relbias-gluon-ws-3.json, paired against the rule) the
# persistent grid with the early key release was 3 % faster than the early key release alone on 8 chunks of 128 rows
# against 8K keys (564 against 583 us) and 5 % slower at prefill 8K global (2360 against 2251); without the early
# release it was slower at 8K global (2428 against 2299) and faster on the chunks (602 against 618).
GLUON_PERSISTENT = Switch("gluon_persistent", "ATTNKIT_RELBIAS_GLUON_PERSISTENT", False,
                          "warp-specialized Gluon forward kernel (gluon_ws) on a persistent grid: one program per SM "
                          "walking the work items (query blocks from the last), so one item's prologue and epilogue "
                          "overlap its neighbours' work; off: 5 % slower at prefill 8K global, 3 % faster on chunks of "
                          "128 rows (relbias-gluon-ws-3 sweep)")
# Off: at 0da00a4 (same sweep) no faster than the one-warpgroup rule: 8K global 2672 against 2641 us, window 1024
# 692 against 701, varlen 1177 against 1192, D 64 1595 against 1599, chunks of 128 / 48 677 / 431 against 693 / 427.
GLUON_K_EARLY = Switch("gluon_k_early", "ATTNKIT_RELBIAS_GLUON_K_EARLY", False,
                       "one-warpgroup Gluon forward kernel (with gluon_pipe): tile j's key slot takes key tile j + "
                       "num_stages as soon as S_j is done, during the softmax, instead of with the value slot after "
                       "P_{j-1} V_{j-1} (which leaves the next key tile's copy latency exposed when the ring is 2 "
                       "deep); off: within 2 % either way on the six prefill cases (relbias-gluon-ws-3 sweep)")
# On with gluon_ws: at 0da00a4 (same sweep, paired ratios of the rule's time, which released the key slots with the
# value slots) 2 % faster at prefill 8K global (1.020 [1.020-1.035]: 2251 against 2299 us) and 6 % faster on 8 chunks
# of 128 rows against 8K keys (1.064: 583 against 618); the cases the rule sends to the one-warpgroup kernel are not
# affected.
GLUON_K_RELEASE = Switch("gluon_k_release", "ATTNKIT_RELBIAS_GLUON_K_RELEASE", None,
                         "warp-specialized Gluon forward kernel (gluon_ws): each key slot released to the producer as "
                         "soon as both consumers' score products read it (its own empty barriers), instead of with its "
                         "value slot after the value product, so key tile j + 1 is loaded during tile j's softmax and "
                         "not after it; default: on with gluon_ws (2-6 % faster, relbias-gluon-ws-3 sweep)")
# Off: no faster. In the sm_90 SASS of the dispatched configuration (compile_check) the row maxima become a tree
# of independent FMNMX instead of a chain of 32 dependent ones per row, and the row sums likewise; the loop keeps its
# 581 instructions, and with the option off every compiled variant's SASS is unchanged. Timed at 6dd7d55
# (`benchmarks/sweeps/h200-6dd7d55/sweep-relbias-gluon-ws-5.json`, 5 rounds, medians in us, rule / tree): prefill 8K
# global 2240 / 2228 (p20-p80 2105-2241 / 2124-2263: within the spread), window 1024 702 / 719, varlen 1181 / 1195,
# D 64 1588 / 1602, chunks of 128 582 / 592, chunks of 48 423 / 430; with turns 2263 / 2285 at 8K. The chains were
# not what holds the loop back (gated all the same: relbias/gluon_fwd_tree, every perturbation caught).
GLUON_TREE_REDUCE = Switch("gluon_tree_reduce", "ATTNKIT_RELBIAS_GLUON_TREE_REDUCE", False,
                           "Gluon forward kernels, overlapped schedule (gluon_pipe): each tile's row maxima and row "
                           "sums as trees (column halves combined elementwise) instead of one dependent chain along a "
                           "thread's columns; the sums' order changes, so the last bits may; off: no faster "
                           "(relbias-gluon-ws-5 sweep)")
# Pairs: in the warpgroup MMA's accumulator a thread holds each row's scores in column pairs (c, c + 1), whose
# distances are the strip's t and t - 1; one 64-bit gather of (strip[t], strip[t - 1]) serves both. In the sm_90 SASS
# of the dispatched warp-specialized kernel (compile_check --census) the interior loop's LDS go from 63 to 31 and the
# loop from 581 to 572 instructions (the second strip load and the packing take most of the rest). Timed at 84fd186
# (`benchmarks/sweeps/h200-84fd186/sweep-relbias-gluon-ws-pairs.json`, 5 rounds, paired pairs / without): prefill 8K
# global 0.998 [0.990-1.009] (the rule's kernel; within the spread), chunks of 128 against 8K 0.994 [0.987-0.998],
# window 1024 on the warp-specialized kernel 0.923 [0.920-0.924] (717 against 777 us) but not faster than the
# one-warpgroup kernel the rule sends it to (708). With it on, prefill 8K beside cuDNN: 2200 against 1755 us, 1.25x
# (`benchmarks/experiments/relbias-pairs-prefill-8k-h200-84fd186.json`). Halving the strip's loads does not move the
# 8K loop: off (gated all the same, relbias/gluon_fwd_ws_pairs, every perturbation caught). Re-timed at 2793d2e with
# gluon_bias_ahead (both strips loaded a tile ahead; 575 SASS instructions a tile against 586, 31 LDS against 63;
# benchmarks/sweeps/h200-2793d2e/sweep-relbias-gluon-ws-pairs-2.json, 7 rounds, paired pairs / rule): 8K global 0.996
# [0.995-0.998], chunks of 128 1.017 [1.015-1.019]: still off (its gate passed there, every perturbation caught).
GLUON_BIAS_PAIRS = Switch("gluon_bias_pairs", "ATTNKIT_RELBIAS_GLUON_BIAS_PAIRS", False,
                          "warp-specialized Gluon forward kernel (gluon_ws): each tile's bias gathered from its strip "
                          "in 64-bit pairs (one shared-memory load per two scores of a row) instead of one load per "
                          "score; the same values; off: no faster at 8K global, the relbias-gluon-ws-pairs sweep)")
# Ahead: in the warp-specialized kernel's step the strip's table values were loaded at the start of the tile's own
# step, and the score product, which starts from the bias (gluon_bias_acc), could not issue before that load came
# back (a round trip to L2: each tile's strip reaches BLOCK_N distances past the previous tile's, so its lines are
# new to L1), nor the value product of the tile before, issued after it. With the option each tile's strip is loaded
# during the step before (issued with its products, two registers a thread), so only the strip's shared-memory gather
# precedes the product. The same values (the same bits). In the sm_90 SASS of the interior loop (compile_check) the
# two LDG now follow the first warpgroup MMA, and ptxas also moves the value product's wait after the exponentials:
# all 64 of a thread's run while it is in flight (0 without the option), at 586 instructions a tile against 581.
# Timed on the H200 at 163b812 (benchmarks/sweeps/h200-163b812/sweep-relbias-gluon-ws-ahead.json, 5 rounds, paired
# ahead / without): prefill 8K global 0.975 [0.975-0.976] (2208 against 2264 us in that run), 8 chunks of 128 rows
# against 8K keys 0.918 [0.909-0.921] (575 against 623); on the window-1024 case forced onto the warp-specialized
# kernel 1.004 (the rule keeps that case on the one-warpgroup kernel). Beside cuDNN on the same machine
# (benchmarks/experiments/relbias-ahead-prefill-8k-h200-163b812.json, 7 rounds): 8K global 2058 against 1739 us,
# paired 1.184 [1.181-1.186] (1.22 without it). Gate relbias/gluon_fwd_ws_ahead passed there, every perturbation
# caught; the same-bits GPU tests passed. So the rule: on wherever the warp-specialized kernel runs with the bias
# starting the score product (with gluon_bias_pairs, both of its strips are loaded ahead). As dispatched at ee606a8
# (benchmarks/results/relbias-h200-2026-12-03-ee606a8-prefill-ahead.json, 7 rounds, every peer): 8K global 2091 us,
# 1.19 [1.18-1.20] cuDNN (1746), 0.35 FlexAttention score_mod; chunks of 128 against 8K 541 us, 0.67 cuDNN. Stress:
# benchmarks/experiments/stress-h200-2793d2e-ahead.json, two processes for 30 s, 0 wrong of 4752 calls at 8K global
# and of 5903 on the chunks. Its gate as dispatched (relbias/gluon_fwd_ws_bn128) passed at ee606a8.
GLUON_BIAS_AHEAD = Switch("gluon_bias_ahead", "ATTNKIT_RELBIAS_GLUON_BIAS_AHEAD", None,
                          "warp-specialized Gluon forward kernel (gluon_ws, with gluon_bias_acc): each tile's strip "
                          "of table values loaded during the previous tile's step, so the load's latency is off the "
                          "path to the score product it starts; the same values; default: on with gluon_ws (2.5 % "
                          "faster at prefill 8K global, 8 % on chunks of 128 rows, relbias-gluon-ws-ahead sweep)")
# Diag: the gather's index for each score computed over the accumulator tile viewed as (warp rows, h, lane rows,
# column block i, lane pair, e), so the register dims h, i, e enter as constants and a thread's scores (r + 8, c + 8)
# and (r, c), which read the same distance, get one index value: in the sm_90 SASS of the dispatched kernel's interior
# loop the gather's LDS fall from 63 to 34, the other 30 values copied between registers (IMAD.MOV), 584 instructions
# a tile against 586, no local-memory loads left in the loop (2 before). The same values (the same-bits GPU test, 30
# cases, passed on the H200 at a445d84). Timed there (benchmarks/sweeps/h200-a445d84/sweep-relbias-gluon-ws-diag.json,
# 7 rounds, paired diag / rule): prefill 8K global 0.951 [0.940-0.952] (2068 against 2207 us), 8 chunks of 128 rows
# against 8K keys 0.942 [0.939-0.944] (519 against 551). Gate relbias/gluon_fwd_ws_diag passed there, every
# perturbation caught. So the rule: on wherever it applies (the warp-specialized kernel's gather of the bias that
# starts the score product, one score at a time: not with gluon_bias_pairs). As dispatched at 728508d
# (benchmarks/results/relbias-h200-2026-12-03-728508d-prefill-diag.json, 7 rounds, every peer): 8K global 1962 us,
# 1.125 [1.122-1.143] cuDNN without the bias (1747), 0.34 FlexAttention score_mod; chunks of 128 514 us, 0.63 cuDNN.
# Its gate as dispatched (relbias/gluon_fwd_ws_bn128) passed at 728508d; under load
# (benchmarks/experiments/stress-h200-728508d-diag.json, two processes for 30 s) 0 wrong of 4966 calls at 8K global
# and of 6291 on the chunks.
GLUON_BIAS_DIAG = Switch("gluon_bias_diag", "ATTNKIT_RELBIAS_GLUON_BIAS_DIAG", None,
                         "warp-specialized Gluon forward kernel (gluon_ws): each tile's bias gathered with one "
                         "shared-memory load per distinct distance a thread holds (34 of its 64 scores), the rest "
                         "copied between registers; the same values; default: on wherever it applies (5-6 % faster at "
                         "prefill 8K global and on chunks of 128 rows, relbias-gluon-ws-diag sweep)")
# Unroll: the interior loop two tiles an iteration, so P alternates between two register sets instead of being copied
# into the value product's operand registers each tile (32 IMAD.MOV a tile). With gluon_bias_diag (which frees the
# gather's hoisted address registers) the sm_90 SASS of the interior loop is 1118 instructions per two tiles against
# 584 a tile, with 10 local-memory loads and stores per two tiles; the first of the two tiles waits for its value
# product before its exponentials (all 64 overlap in the second). Without diag it spilled (70 local loads per two
# tiles). Timed with diag at a445d84 (the sweep above, paired diag with unroll / diag): 8K global 1.130
# [1.129-1.142] (2368 against 2068 us), chunks of 128 1.117 [1.110-1.133]: slower, so off. Fewer instructions per
# tile did not make it faster: the first of the two tiles loses the value product's overlap (above). Its gate
# (relbias/gluon_fwd_ws_unroll) and the same-bits test passed there.
GLUON_WS_UNROLL = Switch("gluon_ws_unroll", "ATTNKIT_RELBIAS_GLUON_WS_UNROLL", False,
                         "warp-specialized Gluon forward kernel (gluon_ws, with gluon_bias_ahead): its interior loop "
                         "two tiles an iteration, so P is not copied between register sets each tile; off: 12-13 % "
                         "slower, relbias-gluon-ws-diag sweep")
BLOCK_M_OPT = IntOption("block_m", "ATTNKIT_RELBIAS_BLOCK_M", None, 16, 128,
                        "forward kernel: query rows per tile (16, 32, 64 or 128); default: the rule")
BLOCK_N_OPT = IntOption("block_n", "ATTNKIT_RELBIAS_BLOCK_N", None, 16, 128,
                        "keys per tile of the kernel that runs (16, 32, 64 or 128); default: the rule")
WARPS_OPT = IntOption("num_warps", "ATTNKIT_RELBIAS_WARPS", None, 1, 8,
                      "warps per program of the kernel that runs (forward kernels 4 or 8; the Triton decode kernel "
                      "1, 2, 4 or 8); default: the rule")
STAGES_OPT = IntOption("num_stages", "ATTNKIT_RELBIAS_STAGES", None, 1, 8,
                       "software-pipeline stages of the kernel that runs (1 to 8); default: the rule")
DECODE_ROWS_OPT = IntOption("decode_rows", "ATTNKIT_RELBIAS_DECODE_ROWS", None, 16, 128,
                            "decode kernel: most packed rows (tokens x query heads of a KV head) per tile (16, 32, "
                            "64 or 128, at least the heads per KV head); default: DECODE_MAX_ROWS")
CTAS_OPT = IntOption("ctas_per_sm", "ATTNKIT_RELBIAS_CTAS_PER_SM", None, 1, 16,
                     "decode split rule: programs per SM the splits aim for; default: SPLIT_TARGET_CTAS_PER_SM")


def _pow2(name: str, v: int | None, allowed) -> int | None:
    if v is not None and v not in allowed:
        raise ValueError(f"{name}: must be one of {tuple(allowed)}, got {v}")
    return v


@dataclass(frozen=True)
class FwdConfig:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    split_loops: bool = False
    bias_prefetch: bool = False
    bias_strip: bool = False
    kv_tma: bool = False


FWD_SPLIT_MAX_BLOCK_M = 32  # the forward kernel's branch-free loops, 3 stages, up to this tile height (see above)
FWD_STRIP_MIN_Q = 33  # from this many query tokens: the strip, in the branch-free loops (see above)
FWD_BM128_MIN_Q = 1024  # and from this many at D >= 128: 128 x 64 tiles at 8 warps (64 x 64 at 4 below; see above)


def fwd_config(head_dim: int, max_seqlen_q: int, device_type: str, block_m: int | None = None,
               block_n: int | None = None, num_warps: int | None = None, num_stages: int | None = None,
               split_loops: bool | None = None, bias_prefetch: bool = False,
               bias_strip: bool | None = None, kv_tma: bool = False) -> FwdConfig:
    """Tile shape of the forward kernel. Short query blocks (decode, verify) take BLOCK_M = 16, the
    smallest tile tl.dot accepts, instead of padding one token to 64 rows; those short tiles run the
    branch-free loops at 3 stages. Longer ones (at least FWD_STRIP_MIN_Q tokens) build each tile's bias from
    its strip, in the branch-free loops: 128 x 64 tiles at 8 warps where D >= 128 and the longest sequence has
    at least FWD_BM128_MIN_Q tokens, 64 x 64 at 4 warps otherwise (on the CPU the interpreter keeps 64-row
    tiles: the same loops, faster there). Explicit values (the options) beat the rule."""
    strip_rule = max_seqlen_q >= FWD_STRIP_MIN_Q
    if bias_strip is None:
        bias_strip = strip_rule and split_loops is not False and not bias_prefetch
    gpu_strip = (bias_strip and strip_rule and device_type == "cuda" and head_dim >= 128
                 and max_seqlen_q >= FWD_BM128_MIN_Q)
    bm = _pow2("block_m", block_m, (16, 32, 64, 128)) or (16 if max_seqlen_q <= 16 else 32 if max_seqlen_q <= 32
                                                          else 128 if gpu_strip else 64)
    short = bm <= FWD_SPLIT_MAX_BLOCK_M
    split = short if split_loops is None else split_loops
    for name, on in (("bias_prefetch", bias_prefetch), ("bias_strip", bias_strip), ("kv_tma", kv_tma)):
        if on:
            if split_loops is False:
                raise ValueError(f"{name}: needs the branch-free loops; it cannot be combined with split_loops=False")
            split = True
    if bias_prefetch and bias_strip:
        raise ValueError("bias_strip: builds the bias from the strip; it cannot be combined with bias_prefetch")
    bn = _pow2("block_n", block_n, (16, 32, 64, 128))
    if bn is None:
        bn = 32 if head_dim == 256 else 64
        if device_type != "cuda":  # the interpreter: smaller tiles run faster on a CPU
            bn = min(bn, 32)
    w = _pow2("num_warps", num_warps, (4, 8)) or (8 if bm >= 128 or (head_dim >= 256 and not bias_strip) else 4)
    stages = num_stages or (3 if short and split else 2)
    return FwdConfig(block_m=bm, block_n=bn, num_warps=w, num_stages=stages, split_loops=split,
                     bias_prefetch=bias_prefetch, bias_strip=bias_strip, kv_tma=kv_tma)


@dataclass(frozen=True)
class GluonFwdConfig:
    num_warps: int  # query rows per program: 16 x num_warps (64 per warpgroup)
    block_n: int
    stages: int  # key / value tiles in the TMA ring
    pipe: bool
    bias_gather: bool = True
    bias_early: bool = False  # each tile's bias built while its score product runs (gluon_bias_early)
    p_smem: bool = False  # P to the value product through shared memory (gluon_p_smem)
    lazy_rescale: bool = False  # running maxima kept until they grow by 2^8 (gluon_lazy_rescale)
    bias_acc: bool = False  # the bias starts the score product's accumulator (gluon_bias_acc)
    ws: bool = False  # warp-specialized: a producer warp, two consumer warpgroups (gluon_ws)
    pingpong: bool = False  # the consumers take turns issuing their products (gluon_pingpong)
    persistent: bool = False  # one program per SM walking the work items (gluon_persistent)
    k_release: bool = False  # key slots released after the score products (gluon_k_release)
    k_early: bool = False  # one-warpgroup kernel: key tiles issued after the score products (gluon_k_early)
    tree: bool = False  # the overlapped schedule's row maxima and sums as trees (gluon_tree_reduce)
    bias_pairs: bool = False  # warp-specialized: the bias gathered in 64-bit pairs (gluon_bias_pairs)
    bias_ahead: bool = False  # warp-specialized: each tile's strip loaded a tile ahead (gluon_bias_ahead)
    bias_diag: bool = False  # warp-specialized: one gather load per distinct distance a thread holds (gluon_bias_diag)
    unroll: bool = False  # warp-specialized: the interior loop two tiles an iteration (gluon_ws_unroll)

    @property
    def block_m(self) -> int:
        return 2 * 64 if self.ws else 16 * self.num_warps


GLUON_HEAD_DIMS = (64, 128)


def gluon_fwd_takes(paged: bool, fp8: bool, head_dim: int) -> bool:
    """The inputs the Gluon forward kernel takes: contiguous k, v in q's dtype (not paged, not fp8), D 64 or 128."""
    return not paged and not fp8 and head_dim in GLUON_HEAD_DIMS


def gluon_fwd_rule(runs: bool, takes: bool, layout_ok: bool, triton_options: bool) -> bool:
    """The forward path's kernel when the option ``gluon`` is unset: the Gluon kernel where it runs (an sm_90 GPU),
    takes the input (gluon_fwd_takes, k and v in q's dtype) and can read k, v through TMA (rows packed, 16-byte
    aligned: layout_ok), unless the caller set an option of the Triton forward kernel alone (block_m, split_loops,
    bias_prefetch, bias_strip, kv_tma, fast_interior off) or a tile the Gluon kernel cannot run
    (gluon_fwd_tile_ok): then the Triton kernel those options tune.
    Evidence: the relbias-gluon sweeps (module docstring): the Gluon kernel at 4 warps beats the Triton rule on
    every prefill case timed."""
    return runs and takes and layout_ok and not triton_options


GLUON_SMEM_LIMIT = 220 * 1024  # of the 227 KB an sm_90 program may use, room for the bias gather's scratch
GLUON_FWD_WARPS, GLUON_FWD_BLOCK_N, GLUON_FWD_STAGES = 4, 64, 2  # the tile rule (module docstring)


GLUON_WS_BLOCK_N = 128  # the warp-specialized kernel's key tile (relbias-gluon-ws sweeps: 13 % faster than 64 at 8K)
GLUON_WS_MIN_ROWS = 128  # gluon_ws_rule: the longest query sequence fills both consumer warpgroups
GLUON_WS_MIN_MEAN_KEYS = 4096  # gluon_ws_rule: keys per sequence (total_k / B), between the timed 1128 and 8192


def gluon_ws_rule(head_dim: int, window, max_seqlen_q: int, mean_seqlen_k: float) -> bool:
    """The warp-specialized Gluon kernel (gluon_ws unset) for global layers at D 128 whose sequences are long in
    both directions: max_seqlen_q >= GLUON_WS_MIN_ROWS and total_k / B >= GLUON_WS_MIN_MEAN_KEYS. Evidence (H200,
    `benchmarks/sweeps/h200-5911c34/sweep-relbias-gluon-ws.json` and `h200-9c5b237/sweep-relbias-gluon-ws-2.json`,
    128-key tiles against the one-warpgroup rule): faster on prefill 8K global (2209 / 2557, 2241 / 2589 us) and on
    8 chunks of 128 against 8K (615 / 687); slower with a window of 1024 (789 / 710), on the varlen batch whose
    sequences average 1128 keys (1474 / 1193), at D 64 (1718 / 1596) and on chunks of 48 rows (659 / 427)."""
    return (head_dim == 128 and window is None and max_seqlen_q >= GLUON_WS_MIN_ROWS
            and mean_seqlen_k >= GLUON_WS_MIN_MEAN_KEYS)


GLUON_WS_MAXNREG = 168  # registers a thread at the warp-specialized kernel's entry: 12 warps x 32 x 168 fit 64K

# Tried at 2f13cba and removed (gluon_ws_mask_interior): in the sm_90 SASS of the dispatched warp-specialized kernel
# (compile_check.softmax_overlap) ptxas waits for the value product P_{j-1} V_{j-1} before the softmax's exponentials in
# the interior loop alone (582 instructions a tile), while in the two masked loops around it (1206) the wait follows
# them and the product overlaps the softmax. Giving the interior tiles the causal mask all the same (a select per
# score, true on each: 1041 instructions, overlapped in both consumers) or running them through the masked step (no
# interior loop: 1167, overlapped) gave the same bits (GPU test, 8 cases) and passed the gate
# (benchmarks/checks/check-relbias-gluon_fwd_ws_mask_interior-h200-2f13cba.jsonl, every perturbation caught), and was
# much slower (benchmarks/sweeps/h200-2f13cba/sweep-relbias-gluon-ws-mask.json, 5 rounds, paired / the rule): prefill 8K
# global 1.39 [1.38-1.40] and 1.45, chunks of 128 against 8K 1.34 and 1.36. So the overlap the interior loop lacks is
# not what holds the kernel at 1.22x cuDNN: a consumer's step is bound by its instructions (79 % more of them, 39 %
# longer), and what could shorten it is fewer instructions a tile, not more overlap.


def gluon_fwd_tile_ok(head_dim: int, block_n: int | None, num_warps: int | None, num_stages: int | None,
                      ws: bool = False) -> bool:
    """Whether the tile options (block_n, num_warps, num_stages, shared with the Triton kernels) fit the Gluon
    forward kernel (ws: the warp-specialized one): the rule leaves a tile it cannot run (block_n 16, one stage, ...)
    to the Triton kernel."""
    try:
        gluon_fwd_config(head_dim, block_n, num_warps, num_stages, ws=ws)
    except ValueError:
        return False
    return True


def gluon_fwd_config(head_dim: int, block_n: int | None = None, num_warps: int | None = None,
                     num_stages: int | None = None, pipe: bool = True, bias_gather: bool = True,
                     bias_early: bool = False, p_smem: bool = False, lazy_rescale: bool = False,
                     bias_acc: bool | None = None, ws: bool = False, pingpong: bool | None = None,
                     persistent: bool = False, k_release: bool | None = None,
                     k_early: bool = False, tree: bool = False, bias_pairs: bool = False,
                     bias_ahead: bool | None = None, bias_diag: bool | None = None,
                     unroll: bool = False) -> GluonFwdConfig:
    """Tile of the Gluon forward kernel (kernel_fwd_gluon.py): 16 x num_warps query rows (64 per warpgroup), block_n
    keys per tile, a ring of num_stages key / value tiles. The rule: GLUON_FWD_WARPS, GLUON_FWD_BLOCK_N,
    GLUON_FWD_STAGES, from the relbias-gluon sweeps (module docstring). Explicit values (the options block_n,
    num_warps, num_stages) beat it. bias_acc None: the rule, on in the overlapped schedule unless bias_early is set
    (relbias-gluon-3, module docstring). ws: the warp-specialized kernel (num_warps is its consumer warpgroup's 4,
    128 query rows a program); pingpong: its consumers take turns (None: the rule, off, see GLUON_PINGPONG);
    persistent: on a persistent grid; k_release: its key slots released after the score products (None: the rule,
    on with ws); k_early: the one-warpgroup kernel's key tiles issued after the score products; tree: the row
    reductions of the overlapped schedule (both kernels) as trees; bias_pairs: the warp-specialized kernel's bias
    gathered in 64-bit pairs; bias_ahead: its strips loaded a tile ahead (None: the rule, on with ws where the bias
    starts the score product from a gathered strip); bias_diag: its gather one load per distinct distance (None: the
    rule, on wherever it applies); unroll:
    its interior loop two tiles an iteration."""
    if head_dim not in GLUON_HEAD_DIMS:
        raise ValueError(f"gluon: the Gluon forward kernel takes D in {GLUON_HEAD_DIMS}, got {head_dim}")
    bn = _pow2("block_n", block_n, (64, 128)) or (GLUON_WS_BLOCK_N if ws else GLUON_FWD_BLOCK_N)
    w = _pow2("num_warps", num_warps, (4, 8)) or GLUON_FWD_WARPS
    stages = num_stages or GLUON_FWD_STAGES
    if stages < 2:
        raise ValueError(f"num_stages: the Gluon forward kernel's ring needs at least 2 tiles, got {stages}")
    if pingpong and not ws:
        raise ValueError("gluon_pingpong: the turns of the warp-specialized kernel's two consumers (gluon_ws)")
    if persistent and not ws:
        raise ValueError("gluon_persistent: the persistent grid of the warp-specialized kernel (gluon_ws)")
    if k_release and not ws:
        raise ValueError("gluon_k_release: the key slots of the warp-specialized kernel's ring (gluon_ws)")
    if tree and not pipe:
        raise ValueError("gluon_tree_reduce: in the overlapped schedule only (gluon_pipe)")
    if bias_pairs and not ws:
        raise ValueError("gluon_bias_pairs: the warp-specialized kernel's bias gather (gluon_ws)")
    if bias_pairs and not bias_gather:
        raise ValueError("gluon_bias_pairs: pairs of the strip's gather; not with gluon_bias_gather=False")
    if k_release is None:  # the rule (GLUON_K_RELEASE)
        k_release = ws
    pingpong = bool(pingpong)  # None: the rule, off (GLUON_PINGPONG)
    if k_early and (ws or not pipe):
        raise ValueError("gluon_k_early: the one-warpgroup kernel's overlapped schedule only (gluon_pipe, not "
                         "gluon_ws; the warp-specialized kernel has gluon_k_release)")
    if ws:
        if w != 4:
            raise ValueError(f"num_warps: the warp-specialized Gluon kernel (gluon_ws) runs consumer warpgroups of 4 "
                             f"warps, got {w}")
        for flag, name in ((not pipe, "gluon_pipe=False"), (p_smem, "gluon_p_smem"), (bias_early, "gluon_bias_early"),
                           (lazy_rescale, "gluon_lazy_rescale")):
            if flag:
                raise ValueError(f"gluon_ws: the warp-specialized kernel runs the overlapped schedule only; {name} "
                                 "is not available with it")
    rows = 128 if ws else 16 * w
    smem = 2 * head_dim * (rows + 2 * stages * bn) + (2 * 16 * w * bn if p_smem else 0)  # Q, the ring (and P)
    if smem > GLUON_SMEM_LIMIT:
        raise ValueError(f"num_stages: {stages} tiles of {bn} keys at D {head_dim} need {smem // 1024} KB of shared "
                         f"memory, over the {GLUON_SMEM_LIMIT // 1024} KB a Hopper program may use")
    if bias_early and not pipe:
        raise ValueError("gluon_bias_early: the bias is built ahead in the overlapped schedule only (gluon_pipe)")
    if p_smem and not pipe:
        raise ValueError("gluon_p_smem: P goes through shared memory in the overlapped schedule only (gluon_pipe)")
    if lazy_rescale and not pipe:
        raise ValueError("gluon_lazy_rescale: in the overlapped schedule only (gluon_pipe)")
    if bias_acc is None:
        bias_acc = pipe and not bias_early
    if bias_acc and not pipe:
        raise ValueError("gluon_bias_acc: in the overlapped schedule only (gluon_pipe)")
    if bias_acc and bias_early:
        raise ValueError("gluon_bias_acc: builds each tile's bias before its score product, so gluon_bias_early "
                         "(before the scores are waited for) does not apply; set one of the two")
    if bias_pairs and not bias_acc:
        raise ValueError("gluon_bias_pairs: gathers the bias that starts the score product (gluon_bias_acc); not "
                         "with gluon_bias_acc=False")
    if bias_ahead is None:  # the rule (GLUON_BIAS_AHEAD)
        bias_ahead = ws and bias_acc and bias_gather
    if bias_ahead and not ws:
        raise ValueError("gluon_bias_ahead: the warp-specialized kernel's strips (gluon_ws)")
    if bias_ahead and not bias_gather:
        raise ValueError("gluon_bias_ahead: loads the strip the gather reads; not with gluon_bias_gather=False")
    if bias_ahead and not bias_acc:
        raise ValueError("gluon_bias_ahead: loads the strip of the bias that starts the score product "
                         "(gluon_bias_acc); not with gluon_bias_acc=False")
    if bias_diag is None:  # the rule (GLUON_BIAS_DIAG)
        bias_diag = ws and bias_acc and bias_gather and not bias_pairs
    if bias_diag and not (ws and bias_acc and bias_gather and not bias_pairs):
        raise ValueError("gluon_bias_diag: the warp-specialized kernel's gather of the bias that starts the score "
                         "product (gluon_ws with gluon_bias_acc and gluon_bias_gather), one score at a time (not with "
                         "gluon_bias_pairs)")
    if unroll and not (ws and bias_ahead):
        raise ValueError("gluon_ws_unroll: the warp-specialized kernel's interior loop with its strips loaded ahead "
                         "(gluon_ws with gluon_bias_ahead)")
    return GluonFwdConfig(num_warps=w, block_n=bn, stages=stages, pipe=pipe, bias_gather=bias_gather,
                          bias_early=bias_early, p_smem=p_smem, lazy_rescale=lazy_rescale, bias_acc=bias_acc,
                          ws=ws, pingpong=pingpong, persistent=persistent, k_release=k_release, k_early=k_early,
                          tree=bool(tree), bias_pairs=bool(bias_pairs), bias_ahead=bool(bias_ahead),
                          bias_diag=bool(bias_diag), unroll=bool(unroll))


DECODE_MAX_Q = 32  # query tokens per sequence up to which the split-K decode kernel serves (see above)
DECODE_MAX_ROWS = 128  # packed rows (tokens x query heads per KV head) of one decode tile; more take token blocks
# The split target re-timed on two decode cases (`benchmarks/sweeps/h200-3434306/
# sweep-relbias-decode-splits.json`, 7 rounds, medians in us): b1 x 64K, the rule (66 splits) 76.6, 33 splits or 2 per
# SM 75.5, 16 / 48 / 99 / 132 splits 87.1 / 87.4 / 80.4 / 83.1, 6 per SM 80.3; fp8 b32 x 8K, the rule (2 splits) 262.5,
# 1 / 4 / 16 / 33 splits 329.7 / 263.5 / 265.3 / 282.6, 2 or 6 per SM 262.8 / 262.1. Within 1.5 % of the best: kept.
# Since then the rule drops the trailing splits that its target leaves without keys (b1 x 64K: 66 -> 64 splits of
# 16 tiles; 32 tokens against 64K: 33 -> 32): the same wave and the same work per program, so no slower was the
# prediction. Re-timed on the H200 at 2711a5c (`benchmarks/results/relbias-h200-2026-12-01-2711a5c-decode-plan.json`,
# 7 rounds, beside SDPA): b1 x 64K 78.1 us, paired 1.116 x cuDNN (at 595ba6f, 66 splits: 78.5 us, 1.12); 32 tokens
# against 64K 290.5 us, 0.669 x flash; b32 x 64K 1983.6 us, 1.034 x cuDNN: no slower, as predicted.
SPLIT_TARGET_CTAS_PER_SM = 4  # split rule: programs per SM the splits aim for (contiguous bf16 / fp16 caches)
PAGED_CTAS_PER_SM, FP8_CTAS_PER_SM = 2, 3  # paged caches; contiguous fp8 caches (the sweeps above)


@dataclass(frozen=True)
class DecodePlan:
    block_r: int
    block_n: int
    num_splits: int
    token_blocks: int
    keys_per_split: int
    num_warps: int
    num_stages: int
    split_loops: bool = False
    strip: int = 0  # > 0: looked-up tiles build their bias from per-head strips of this many distances
    strip_g: int = 1  # query heads per KV head rounded up to a power of two (the strips' rows)
    page_tiles: bool = False  # paged: one block-table entry per key tile (block_n <= the block size)
    fast_interior: bool = False  # interior key tiles in a loop of their own, unmasked (decode_fast_interior)
    gluon: bool = False  # the Gluon fp8 decode kernel (kernel_decode_gluon.py): block_r rows on N
    cvt: int = 0  # its code conversion (gluon_decode_cvt)
    kreg: bool = False  # its key operand in registers (gluon_decode_kreg)


# The Gluon fp8 decode kernel (kernel_decode_gluon.py). H200 evidence, fp8 decode b32 x 8K (Hq 64, Hkv 8, D 128: 8
# packed rows), medians in us, the Triton decode kernel 257.9-262.3 in each run (bf16 257.5-262.6):
#   `benchmarks/sweeps/h200-7ba00c9/` (first kernel: cp.async ring of 3, 64-key tiles, 2 programs per SM): conversions
#     direct 333.4, via fp16 284.3, bits 284.8, fp16 products 283.6; 1 program per SM 275.9, ring of 2 345.3, of 4
#     288.7;
#   `h200-e22d075/` (bias loaded before the wait, value codes converted during the score product): 255.9 at 1 per SM;
#     without the bias (diagnostic) 232.9;
#   `h200-75da712/` (TMA copies, bias loads after the value tile's fence): 265.1, cp.async 274.7: a proxy fence waits
#     for the thread's table loads in flight (Nsight Compute, `benchmarks/experiments/ncu-h200-75da712/`);
#   `h200-70f724a/` (bias copied into shared memory by cp.async a ring ahead, gluon_decode_bias_async): 251.1;
#   `h200-8ff6900/` (row sums per thread to the end; keys converted in registers into the MMA operand,
#     gluon_decode_kreg, which frees the key tile's shared memory, store, fence and barrier): 233.7 -> 186.0 with kreg
#     at 1 per SM, 213.1 / 213.7 at 2 / 3 per SM; via fp16 224.6 (3 per SM);
#   `h200-690dbff/` (128-key tiles, block_n=128): ring of 2, 1 per SM 155.4, 2 per SM 160.1, ring of 3 219.4 (one
#     program per SM fits), bits 202.6; 64-key tiles 187.8 (ring of 3), 184.7 (ring of 4). On two small fp8 verify
#     shapes (64 packed rows) the Gluon kernel was 19.6-21.8 against Triton's 22.3 (paged, 8 tokens) and 23.3-28.6
#     against 13.5 (32 tokens, two token blocks), and at 32 / 64 rows the register operand spills (compile_check);
#   `h200-64d11b8/` (one 64K sequence at the model's heads, fp8 b1 x 64K): Triton 70.6; the split target of one program
#     per SM (17 splits, 136 programs) 104.5, two per SM (33 -> 32 splits, 256 programs) 58.4; b32 x 8K 155.5 / 160.0
#     (1 / 2 splits: the 2-split plan is two waves).
#   `h200-e852d80/` (64-key tiles with registers capped, gluon_decode_maxnreg, so that more programs fit an SM):
#     b32 x 8K rule 154.7; four per SM at 128 registers 163.5 (uncapped, three resident, 211.6), three per SM at 168
#     184.0-192.2; b1 x 64K rule 58.9, capped 61.1-64.0.
#   `h200-c57c966/` (gluon_decode_banks: the value codes read 8 per thread and the bias tile swizzled, after the
#     Nsight Compute source view at a1fa184, `benchmarks/experiments/ncu-h200-a1fa184/`, showed the converted value
#     stores 2-way and the bias reads 4-way bank-conflicted, MIO throttle 22 % of the stall samples): b32 x 8K 154.5
#     -> 137.8, paired 0.892 [0.890-0.894]; b1 x 64K 58.3 -> 53.8, 0.921; every shared access then at its ideal
#     wavefronts, MIO 11.8 % (`benchmarks/experiments/ncu-h200-c57c966/`). On by default since.
# Two 110 KB programs fit an SM, so the split rule fills one wave of them: splits = floor(2 x SMs / programs without
# splits) (b32 x 8K: 1, 155.5 us; b1 x 64K: 32, 58.4 us: the settings timed above), where the Triton kernel's rule
# rounds up. So the rule: the Gluon kernel where a tile holds at most GLUON_DECODE_RULE_ROWS packed rows (the timed
# decode) over a contiguous cache (TMA; paged fp8 caches, cp.async, not timed at scale), at 128-key tiles, a ring of
# 2, one wave of two programs per SM, the products in fp16, keys in registers and the bias copied a ring ahead; the
# Triton kernel elsewhere. Forced (gluon_decode=True) on more rows: 64-key tiles, a ring of 3, keys in registers up to
# 16 rows.
GLUON_DECODE_RULE_ROWS = 8
GLUON_DECODE_BLOCK_N = {True: 128, False: 64}  # by rows <= GLUON_DECODE_RULE_ROWS
GLUON_DECODE_STAGES = {True: 2, False: 3}
GLUON_DECODE_KREG_ROWS = 16  # the key operand in registers up to this many rows (more spill at D 128)
GLUON_DECODE_CTAS_PER_SM = 2  # resident programs per SM that one wave of splits fills (rounded down)
GLUON_DECODE_CVT_RULE = 3
GLUON_DECODE_MAX_ROWS = 64  # packed rows on the MMA's N side; more take token blocks


def gluon_decode_rows(group: int, max_seqlen_q: int) -> int:
    """Packed rows of a Gluon decode tile: tokens x heads of a KV head, a power of two from 8 (the MMA's smallest N)
    up to GLUON_DECODE_MAX_ROWS."""
    return min(GLUON_DECODE_MAX_ROWS, max(8, 1 << (max(1, max_seqlen_q * group) - 1).bit_length()))


def gluon_decode_rule(runs: bool, fp8: bool, head_dim: int, group: int, max_seqlen_q: int, tma_ok: bool,
                      triton_options: bool) -> bool:
    """The decode path's kernel when the option ``gluon_decode`` is unset: the Gluon fp8 decode kernel where it runs
    (an sm_90 GPU), over a contiguous fp8 cache its TMA copies can read (tma_ok) at D 64 or 128, where a tile holds at
    most GLUON_DECODE_RULE_ROWS packed rows, unless the caller set an option of the Triton decode kernel alone
    (decode_rows, split_loops, bias_strip, page_tiles, decode_fast_interior, fp8_f16_cvt, fp8_asm_cvt, block_n or
    num_warps). Evidence: the sweeps above."""
    return (runs and fp8 and tma_ok and head_dim in GLUON_HEAD_DIMS
            and gluon_decode_rows(group, max_seqlen_q) <= GLUON_DECODE_RULE_ROWS and not triton_options)


VERIFY_SHORT_ROWS = 64  # verify (more packed rows than this): short splits take 64-row tiles at 2 stages,
VERIFY_LONG_SPLIT_TILES = 16  # splits of at least this many key tiles 128-row tiles at 8 warps (see above)
VERIFY_ONE_WAVE = True  # short splits by the target: one wave of 128-row programs if their splits stay long (above)
PAGED_SPLIT_BLOCK_N = 128  # paged caches, D <= 128: keys per tile of the branch-free loops (see above)
# Paged caches on sm_90 (bf16 / fp16, D <= 128, at most 64 packed rows: decode, not the verify tiles). H200 evidence,
# b32 x 8K decode, every setting alternating in one run, medians in us (byte floor 253.5):
#   `benchmarks/sweeps/h200-74cd6e5/sweep-relbias-paged-tiles.json` (block size 64; the rule then: a block-table
#   load per key, 128-key tiles, 2 stages, 2 per SM): rule 312.6; page tiles, 64-key tiles, 5 stages, 2 per SM,
#   strip 254.1; the same at 3 stages 4 per SM 277.2 (294.7 without the strip), 3 per SM 380.8, 4 stages 3 per SM
#   368.6; per-key loads at 64-key tiles, 3 stages, 4 per SM 366.9; 16-key page tiles 404-414.
#   `benchmarks/sweeps/h200-9492678/sweep-relbias-paged-tiles-2.json`: block size 64: rule 315.5, page tiles 5
#   stages 2 per SM strip 260.4 (275.8 without the strip, 260.3 at 3 per SM); block size 16: rule 314.6, 128-key
#   tiles at 3 stages 294.1, 64-key tiles 5 stages strip 337.7.
#   `benchmarks/sweeps/h200-822a7e1/sweep-relbias-paged-tiles-3.json`: block size 16: rule 313.5, 128-key tiles at 5
#   stages 1 per SM 279.3 (3 stages 2 per SM 292.4, with the strip 286.4), 32-key tiles 362-462, 16-key page tiles
#   400.9; block size 64: page tiles 257.3 (128-key per-key tiles at 5 stages 285.0).
# So block sizes from 64: page tiles (one block-table entry per tile), 64-key tiles, 5 stages, 2 per SM, the strip;
# smaller blocks: a block-table load per key, 128-key tiles, 5 stages, 1 per SM. fp8 paged caches, D 256 and the
# verify tiles keep the rule above (not timed so); the sm_90 settings need its 228 KB of shared memory per SM.
PAGE_TILE_BLOCK_N, PAGE_TILE_STAGES, PAGE_TILE_CTAS_PER_SM = 64, 5, 2
PAGED_SM90_STAGES, PAGED_SM90_CTAS_PER_SM = 5, 1  # blocks smaller than PAGE_TILE_BLOCK_N


def use_decode(max_seqlen_q: int, group: int) -> bool:
    """Decode / verify shapes go to the split-K decode kernel, the rest to the forward kernel."""
    return max_seqlen_q <= DECODE_MAX_Q and group <= DECODE_MAX_ROWS


def decode_plan(batch: int, hkv: int, group: int, head_dim: int, max_seqlen_q: int, max_seqlen_k: int,
                sm_count: int, device_type: str, num_splits: int | None = None, block_n: int | None = None,
                num_warps: int | None = None, num_stages: int | None = None,
                ctas_per_sm: int | None = None, paged: bool = False, fp8: bool = False, extent: int | None = None,
                split_loops: bool | None = None, decode_rows: int | None = None,
                bias_strip: bool | None = None, page: int = 0, page_tiles: bool | None = None,
                sm90: bool = False, fast_interior: bool | None = None, gluon: bool = False,
                cvt: int | None = None, kreg: bool | None = None) -> DecodePlan:
    """Split plan of the decode kernel: a pure function of shapes and device, computed on the host
    (outside any CUDA graph). ``num_splits`` overrides the rule; explicit tile values (the options) beat it.
    ``extent`` is the bias table's E: keys beyond it (max_seqlen_k > E) or a paged cache select the
    branch-free loops, and a paged cache with D <= 128 then takes 128-key tiles. Over a contiguous cache the
    tiles build their bias from per-head strips (``bias_strip``). ``page`` is a paged cache's block size;
    ``page_tiles`` (paged, block_n <= page) addresses each key tile through its one block-table entry. ``sm90``: the
    device is sm_90 (the paged settings timed there). ``fast_interior``: interior key tiles in a loop of their own,
    unmasked (the rule: the verify tile of 128 rows at 8 warps, DECODE_FAST_INTERIOR). ``gluon``: the plan of the
    Gluon fp8 decode kernel (8 to 64 packed rows, 4 warps, 64- or 128-key tiles, a ring of num_stages tiles, the split
    target GLUON_DECODE_CTAS_PER_SM, the code conversion ``cvt``, the key operand in registers ``kreg``)."""
    if gluon:
        return _gluon_decode_plan(batch, hkv, group, max_seqlen_q, max_seqlen_k, sm_count, num_splits, block_n,
                                  num_warps, num_stages, ctas_per_sm, cvt, kreg)
    cap = _pow2("decode_rows", decode_rows, (16, 32, 64, 128)) or DECODE_MAX_ROWS
    split = (paged or (extent is not None and max_seqlen_k > extent)) if split_loops is None else split_loops
    bn = _pow2("block_n", block_n, (16, 32, 64, 128))
    def tile_rows(rows_cap):  # packed rows of the decode tile: the tokens x heads, a power of two from 16, capped
        return min(rows_cap, max(16, 1 << (max(1, max_seqlen_q * group) - 1).bit_length()))

    rows0 = tile_rows(cap)
    # paged on sm_90 (see PAGE_TILE_BLOCK_N): decode tiles of a bf16 / fp16 cache at D <= 128
    sm90_paged = (paged and split and sm90 and device_type == "cuda" and not fp8 and head_dim <= 128
                  and rows0 <= VERIFY_SHORT_ROWS and decode_rows is None)
    if bn is None:
        bn = 32 if (head_dim == 256 or device_type != "cuda") else 64
        if paged and split and head_dim <= 128 and device_type == "cuda":
            bn = PAGED_SPLIT_BLOCK_N
            if sm90_paged and page >= PAGE_TILE_BLOCK_N and page_tiles is not False:
                bn = PAGE_TILE_BLOCK_N
    if page_tiles is None:
        page_tiles = sm90_paged and page >= bn
    tiles = max(1, -(-max_seqlen_k // bn))
    if sm90_paged:
        target = ctas_per_sm or (PAGE_TILE_CTAS_PER_SM if page_tiles else PAGED_SM90_CTAS_PER_SM)
    else:
        target = ctas_per_sm or (PAGED_CTAS_PER_SM if paged else FP8_CTAS_PER_SM if fp8 else SPLIT_TARGET_CTAS_PER_SM)
    forced = num_splits  # the override; layout() returns the split count it gives or the rule's

    def layout(rows_cap):
        rows = tile_rows(rows_cap)
        tpb = rows // group
        if tpb < 1:
            raise ValueError(f"decode_rows: {group} query heads per KV head exceed the decode tile's {rows} rows")
        blocks = -(-max(1, max_seqlen_q) // tpb)
        ns = forced or max(1, min(-(-(target * sm_count) // max(1, batch * hkv * blocks)), tiles))
        tps = -(-tiles // ns)
        if not forced:  # no split past the keys: the target need not divide the tiles (b1 x 64K: 66 -> 64 splits)
            ns = -(-tiles // tps)
        return rows, tpb, blocks, ns, tps

    rows, tokens_per_block, token_blocks, num_splits, tiles_per_split = layout(cap)
    w, stages = num_warps, num_stages
    if rows > VERIFY_SHORT_ROWS and decode_rows is None and w is None and stages is None and device_type == "cuda":
        # verify: long splits take the 128-row tile at 8 warps; short ones 64 rows at 2 stages (see above)
        # short splits by the split target: one wave of 128-row programs where each split keeps long (see above)
        one_wave = sm_count // max(1, batch * hkv * token_blocks)
        if (tiles_per_split < VERIFY_LONG_SPLIT_TILES and VERIFY_ONE_WAVE and forced is None and ctas_per_sm is None
                and one_wave >= 1 and -(-tiles // one_wave) >= VERIFY_LONG_SPLIT_TILES):
            tiles_per_split = -(-tiles // one_wave)
            num_splits = -(-tiles // tiles_per_split)  # no split past the keys (one_wave need not divide tiles)
        if tiles_per_split >= VERIFY_LONG_SPLIT_TILES:
            w = 8
            if fast_interior is None:  # the interior loop (see DECODE_FAST_INTERIOR)
                fast_interior = True
        else:
            rows, tokens_per_block, token_blocks, num_splits, tiles_per_split = layout(VERIFY_SHORT_ROWS)
            stages = 2
    w = _pow2("num_warps", w, (1, 2, 4, 8)) or (8 if head_dim >= 256 else 4)
    if page_tiles and not paged:
        raise ValueError("page_tiles: needs a paged cache")
    if page_tiles and bn > page:
        raise ValueError(f"page_tiles: needs block_n ({bn}) <= the cache's block size ({page})")
    page_tiles = bool(page_tiles)
    if bias_strip is None:  # paged: the per-score lookup (see above), but the sm_90 page tiles take the strip
        bias_strip = not paged or (sm90_paged and page_tiles)
    if stages is None and sm90_paged:
        stages = PAGE_TILE_STAGES if page_tiles else PAGED_SM90_STAGES
    strip = 1 << (tokens_per_block + bn - 1).bit_length() if bias_strip else 0  # a power of two >= TPB + bn
    return DecodePlan(block_r=rows, block_n=bn, num_splits=num_splits, token_blocks=token_blocks,
                      keys_per_split=tiles_per_split * bn,
                      num_warps=w, num_stages=stages or (2 if paged else 3), split_loops=split,
                      strip=strip, strip_g=1 << (group - 1).bit_length() if bias_strip else 1, page_tiles=page_tiles,
                      fast_interior=bool(fast_interior))


def _gluon_decode_plan(batch, hkv, group, max_seqlen_q, max_seqlen_k, sm_count, num_splits, block_n, num_warps,
                       num_stages, ctas_per_sm, cvt, kreg) -> DecodePlan:
    """decode_plan for the Gluon fp8 decode kernel: rows a power of two from 8 (the MMA's smallest N) holding the
    tokens x heads, capped at GLUON_DECODE_MAX_ROWS; tiles, ring and key operand by rows (the sweeps above); splits
    fill one wave of GLUON_DECODE_CTAS_PER_SM programs per SM (ctas_per_sm), rounded down, at least one."""
    if block_n not in (None, 64, 128):
        raise ValueError(f"block_n: the Gluon decode kernel's key tiles are 64 or 128 keys, got {block_n}")
    rows = gluon_decode_rows(group, max_seqlen_q)
    few = rows <= GLUON_DECODE_RULE_ROWS
    bn = block_n or GLUON_DECODE_BLOCK_N[few]
    if num_warps not in (None, 4):
        raise ValueError(f"num_warps: the Gluon decode kernel runs one warpgroup (4 warps), got {num_warps}")
    if group > GLUON_DECODE_MAX_ROWS:
        raise ValueError(f"gluon_decode: {group} query heads per KV head exceed the kernel's "
                         f"{GLUON_DECODE_MAX_ROWS} rows")
    stages = GLUON_DECODE_STAGES[few] if num_stages is None else num_stages
    if not 2 <= stages <= 6:
        raise ValueError(f"num_stages: the Gluon decode kernel's ring holds 2 to 6 tiles, got {stages}")
    tpb = rows // group
    blocks = -(-max(1, max_seqlen_q) // tpb)
    tiles = max(1, -(-max_seqlen_k // bn))
    target = ctas_per_sm or GLUON_DECODE_CTAS_PER_SM
    ns = num_splits or max(1, min((target * sm_count) // max(1, batch * hkv * blocks), tiles))
    tps = -(-tiles // ns)
    if not num_splits:
        ns = -(-tiles // tps)  # no split past the keys (the target need not divide the tiles)
    return DecodePlan(block_r=rows, block_n=bn, num_splits=ns, token_blocks=blocks, keys_per_split=tps * bn,
                      num_warps=4, num_stages=stages, gluon=True,
                      cvt=GLUON_DECODE_CVT_RULE if cvt is None else cvt,
                      kreg=rows <= GLUON_DECODE_KREG_ROWS if kreg is None else kreg)
