"""What exists, per family: the kernel paths and whether they are implemented. ``attnkit report``
renders this into the README; keep it true (the tests check that an implemented path has a gate)."""

KERNEL_PATHS = {
    "sparse_int8": [
        ("prefill (many rows): Triton, at D = 256 over an int8 cache swap-AB tiles with integer-MMA scores (gated on "
         "the H200 at 5728b74 and, with every sparse_int8 gate at the full tier, at 6524388)", "implemented"),
        ("split-K decode (1-16 rows) + merge: Triton (gated on the H200 at 5728b74 and 6524388)", "implemented"),
        ("swap-AB integer-score tile in Gluon for sm_90 (key codes copied into shared memory for one integer warpgroup "
         "MMA against the query's four digits, the value codes loaded into registers and converted there for one MMA "
         "against both probability halves (gluon_v_regs, the rule since cb8f7d1; before, a bf16 value tile in shared "
         "memory); gated on the H200 at 512bdcb, 6524388, 08a7b5f and 572c472): dispatched at D = 256 on the direct "
         "path and on splits from 2 rows (from 8 rows at two programs per SM). 1.64x faster than the Triton kernels "
         "at 2048 prefill rows (1.25 against 2.05 ms, at 572c472), 1.34x at 8 decode rows; at 08a7b5f decode 8.8 / "
         "16.6 us at 1 / 8 rows (the Triton rule at 1 row), prefill 84.4 us / 1.24 ms / 4.81 ms at 128 / 2048 / 8192 "
         "rows: the 40 / 450 / 1400 us and 6 / 8 us targets are not met (each tile's score product issued before its "
         "value conversion, gluon_overlap, off: 1-4 % slower at 70ef5d5). Its one fallback (the split-bf16 query, "
         "one product against both halves since 572c472) forced on every program: 1.39x the time at 2048 rows. A "
         "kernel that only gathers the candidates' rows "
         "(gather_only, measured in the same run at ae19a12) takes 47 / 620 / 2334 us at 128 / 2048 / 8192 rows and "
         "7.8 us at 8 rows: the prefill targets (40 / 450 / 1400 us) and the 8-row one (8 us) lie at or below the "
         "time of the gathers alone", "implemented"),
    ],
    "mqa_decode": [
        ("head-padded (heads on M, padded to 64, any H; gated on the H200 at d72dcca and 6524388, launched with pdl at 1-2 "
         "tokens at 482fb9b, with its tile loop at one pipeline stage (3-11 % faster than Triton's default 3) at "
         "c6eeef9, with 256 output dims per program at 1-2 tokens (5-15 % faster there) at 58f7287, and with the merge's "
         "own inputs read before it waits (merge_early: 1-2 % faster at 1-2 tokens) at 7153661; its first slot ids "
         "loaded before the query (headpad_ids_early, off) no faster at d324854 (fp8 within 2 %, nvfp4 up to 10 % "
         "slower); dispatched for H other than 16 / 32, and for every H where the Gluon kernel cannot run)",
         "implemented"),
        ("swap-AB in Gluon for sm_90 (slots on M, the 16 / 32 live heads on N, each record value decoded once into "
         "shared memory, nvfp4 decoded from its bits, warpgroup MMAs, the step's kernels launched as programmatic "
         "dependents, the merge fused into each token's last program where a token has two splits, the first slot ids "
         "loaded before the query, its merge in programs of 256 output dims but from 9 to 31 tokens, the merge's own "
         "inputs read before it waits (merge_early, both kernels); gated on the H200 at "
         "d72dcca, d3eb8f4, f206dd4, a9a4b6f, d343e01, 7153661, 8dd0fc8 and 1c8d6cc; the dispatched path for 16 / 32 "
         "heads on the H200; at 16 heads x 1-4 and 16 tokens and 32 heads x 2-4 and 16 (and 1 for nvfp4) a token's "
         "splits run as one thread-block cluster that merges them after a cluster barrier (gluon_cluster, by rule; "
         "one launch, 1-14 % faster there at f8e405f, e96e89e and dddc490; gated on the H200 forced on every shape "
         "at f8e405f and e3e93c6 and as dispatched at c3dc11f, 0220708 and bd01a6b; every mqa_decode gate passed at 6524388); at 12-22 tokens (and 10 over "
         "nvfp4) 128-slot tiles (gluon_wide, by rule; 16 warps for fp8 records, gluon_warps) in clusters, 6-14 % "
         "faster at 16 tokens "
         "(9e87a2c, 32279f5), 4-39 % at 12 and 20 (cf97ec0), 27-38 % at 22 (648c302), slower at 1-8 and from 24 "
         "tokens (two waves of clusters); exact non-portable clusters of 10 at 16 heads over nvfp4 "
         "(gluon_cluster_exact, 2-4 % faster, 648c302); 4 warps re-timed slower (bce9b66): "
         "1.84-3.32x faster than head-padded for 1-16 tokens at bd01a6b (fp8 2.29-3.32 / 1.84-2.88 "
         "at 16 / 32 heads, nvfp4 2.11-2.89 / 1.85-2.43; 16 heads re-run at 648c302: nvfp4 2.14-2.90; the "
         "head-padded kernel tuned: one pipeline stage, 256 output "
         "dims at 1-2 tokens, pdl at 1-2 tokens), steps with the query prepared "
         "during the insert (pdl_early_inputs, both kernels) 1.75-3.25x, 16-token step 11.5-12.1 us: the 1.8x "
         "target is met on all 10 cases, the 2.2x one on 9 of 10 (not at 1 token nvfp4), the 10 us one not; 64 "
         "tokens 2.76-3.80x at f206dd4; half tiles (gluon_half, off) timed slower at f6c9ead; a cooperative merge "
         "spread over a token's programs timed slower at e9664db and, in a second form, at 94e4bfe, and removed; two programs per SM with registers "
         "capped (gluon_maxnreg, off) timed slower at a57b710; both slot lists in one loop (gluon_one_loop, off) no "
         "faster at 3d79a8e; a tile's record loads all before its first store (gluon_loads_first, on up to 47 "
         "tokens) 1-4 % faster at bc1461a; the query's loads and a one-tile split's records before the query's "
         "stores (gluon_prologue) 4-10 % faster at 1-8 tokens at 6f8c100; the cluster merge's partials through "
         "the cluster's shared memory 21-40 % slower at e96e89e, removed)", "implemented"),
        ("swap-AB in Triton (the Gluon kernel's interpreter twin and the path off sm_90; gated on the H200 at "
         "d72dcca and 6524388; at 6991d6b head-padded / Triton swap-AB 1.23-1.43 for fp8, 0.77-1.01 for nvfp4)", "implemented"),
        ("record writer (fp8 / nvfp4; byte-exact gate on the H200 at d72dcca and 6524388; in a step under pdl it "
         "can release the attention before it waits, writer_release_early: off by default, its safety resting on "
         "the kernel before the step, and where that holds steps took 0.84-1.00x the time at 2177957)",
         "implemented"),
    ],
    "relbias": [
        ("forward: prefill / chunked / varlen / paged / fp8, the bias built from its strip per tile (Triton; gated on "
         "the H200 at 45728cf, the relbias-tune family included, and with every relbias gate at the full tier at "
         "e540ca4-1eb2376; on sm_90 the path for D 256, paged and fp8 caches)",
         "implemented"),
        ("decode / verify, up to 32 query tokens: split-K with GQA packing in token blocks + Triton merge (gated on "
         "the H200 at b7c4fed, as dispatched at 911a31c; over paged caches of block size 64+ on sm_90 each key tile "
         "reads its one block-table entry, page_tiles: paged decode b32 x 8K 1.10x / 1.01x the byte floor at block "
         "size 16 / 64, from 1.29x / 1.34x; verify tiles whose split target left short splits take one wave of "
         "128-row programs, as dispatched at c0c83c9: verify 32 x 8K 59.4 us, 0.95x SDPA flash without bias, from "
         "1.17x)", "implemented"),
        ("fp8 decode in Gluon for sm_90 (swap-AB tiles: keys on the MMA's M side, the packed rows on N; code tiles by "
         "TMA, keys converted in registers into the score product's operand, values once into shared memory, the "
         "bias copied a ring ahead, fp16 products, the value codes read 8 per thread and the bias tile swizzled "
         "against shared-memory bank conflicts; dispatched by gluon_decode_rule for tiles of at most 8 packed rows "
         "over contiguous fp8 caches; gated on the H200 at 39f3a70 in eight configurations, every perturbation "
         "caught): fp8 decode b32 x 8K 135.8 us at 39f3a70, 1.90x faster than the Triton decode kernel (259.4) and "
         "0.53x the bf16 decode (257.0) in the same run (153.2 us, 0.60x, before the bank-conflict fix); fp8 b1 x 64K "
         "53.8 us (sweep at c57c966) against the Triton kernel's 70.6 (sweep at 64d11b8)",
         "implemented"),
        ("paged KV writer (fp8 quantizing; byte-exact in the interpreter and in its H200 test at b166879)",
         "implemented"),
        ("forward in Gluon for sm_90 (the dispatched prefill path there for contiguous bf16 / fp16 k, v at D 64 / 128, "
         "but where gluon_ws_rule picks the warp-specialized kernel; "
         "TMA key / value ring, one warpgroup of 64 rows, warpgroup MMAs, the value product overlapped with the next "
         "tile's softmax, the bias starting the score product; gated on the H200 at aac31d0 and c9db574): "
         "1.22-1.40x faster than the Triton kernel; window and varlen 0.86x / 0.89x FlexAttention without bias, "
         "2.5x / 3.3x faster than FlexAttention score_mod", "implemented"),
        ("forward in Gluon for sm_90, warp-specialized (a TMA producer warp, two consumer warpgroups sharing each "
         "key / value tile, key slots released after the score products, the consumers' turns an option; dispatched "
         "for global D 128 layers with long sequences by gluon_ws_rule; gated on the H200 at 64b9dc1, and "
         "stress-checked with processes sharing the GPU, which found wrong rows without the turns before the fix of "
         "its unused turn barriers, and none since; each tile's strip of table values loaded during the tile before, "
         "gluon_bias_ahead, since ee606a8, and one gather load per distinct distance a thread holds, "
         "gluon_bias_diag, since 728508d, each gated and stress-checked): prefill 8K 1962 / 1975 us, 1.125x / 1.14x "
         "cuDNN without bias in two runs (the 1.15x target met at the median, with little margin; 2091 us and "
         "1.19x with the strips ahead alone, 2143 us and 1.22x before), 3.0x faster than FlexAttention score_mod; "
         "8 chunks of 128 against 8K 514 us, 0.63x cuDNN", "implemented"),
    ],
    "merge": [
        ("Triton split-K merge (shared by the decode kernels)", "implemented"),
    ],
}
