"""Launch-rule sweeps: named grids of option settings, each timed as its own provider in one run.

``attnkit bench --family F --sweep NAME`` times every setting of the grid on the grid's cases in the same
process, alternating, so the paired ratios between settings come from one run (the harness's method).
A provider is named ``attnkit[label]``; its ``what`` lists the keyword arguments it passes. The launch
rules in each family's ``config.py`` cite the artifacts these runs write.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..testing import shapes
from .providers import Provider, _mqa_ours, _mqa_step, _relbias_ours, _sparse_ours


@dataclass(frozen=True)
class Sweep:
    family: str
    what: str
    cases: tuple
    settings: tuple  # (label, kwargs)


_RB_FWD_CASES = ("relbias-model-prefill-8k-global", "relbias-model-prefill-8k-w1024", "relbias-model-varlen-mixed",
                 "relbias-model-verify32-64k")
_RB_DEC_CASES = ("relbias-model-decode-b1-64k", "relbias-model-decode-b32-8k", "relbias-model-decode-b32-64k",
                 "relbias-model-paged-decode-b32-8k-bs16", "relbias-model-paged-decode-b32-8k-bs64",
                 "relbias-model-fp8-decode-b32-8k")
_SP_CASES = ("sparse_int8-model-decode-r1-c32k", "sparse_int8-model-decode-r8-c32k", "sparse_int8-model-prefill-r128-c8k",
             "sparse_int8-model-prefill-r2048-c8k")
_SP_DEC_CASES = _SP_CASES[:2] + ("sparse_int8-model-decode-r2-c32k", "sparse_int8-model-decode-r4-c32k")
_FH = dict(fast_interior=True, heavy_first=True)


def _mqa_steps(heads, tokens) -> tuple:
    """The mqa_decode step cases for these head counts and token counts, fp8 first, then nvfp4."""
    return tuple(f"mqa_decode-step-h{h}-t{t}-{f}" for f in ("fp8", "nvfp4") for h in heads for t in tokens)


SWEEPS: dict[str, Sweep] = {
    "relbias-fwd": Sweep("relbias", "forward kernel: tile, warps, stages, interior tiles, launch order", _RB_FWD_CASES, (
        ("rule", {}),
        ("interior", dict(fast_interior=True)),
        ("interior+heavy", _FH),
        ("bm128", dict(block_m=128, **_FH)),
        ("bm128-s3", dict(block_m=128, num_stages=3, **_FH)),
        ("bm128-bn32-s3", dict(block_m=128, block_n=32, num_stages=3, **_FH)),
        ("bn128", dict(block_n=128, **_FH)),
        ("s3", dict(num_stages=3, **_FH)),
        ("w4-s3", dict(num_warps=4, num_stages=3, **_FH)),
    )),
    "relbias-fwd-w4": Sweep("relbias", "forward kernel, second round: 4 warps (the first artifacts' setting) against "
                            "the first round's best; diag-* settings compute wrong results by design (what the bias "
                            "costs)", _RB_FWD_CASES, (
        ("w4", dict(num_warps=4)),
        ("w4-interior", dict(num_warps=4, fast_interior=True)),
        ("w4-interior-heavy", dict(num_warps=4, **_FH)),
        ("w4-bn32", dict(num_warps=4, block_n=32, **_FH)),
        ("w4-bm32", dict(num_warps=4, block_m=32, **_FH)),
        ("bn128", dict(block_n=128, **_FH)),
        ("bn128-s3", dict(block_n=128, num_stages=3, **_FH)),
        ("diag-w4-nobias", dict(num_warps=4, _perturb="bias-dropped", **_FH)),
        ("diag-bn128-nobias", dict(block_n=128, _perturb="bias-dropped", **_FH)),
    )),
    "relbias-fwd-split": Sweep("relbias", "forward kernel: one branch-free loop per kind of key tile (split_loops) "
                               "against the rule; the diagnostic computes wrong results by design", _RB_FWD_CASES, (
        ("rule", {}),
        ("split", dict(split_loops=True)),
        ("split-generic", dict(split_loops=True, fast_interior=False)),
        ("split-w8", dict(split_loops=True, num_warps=8)),
        ("split-bn128-w8", dict(split_loops=True, num_warps=8, block_n=128)),
        ("split-bm128-w8", dict(split_loops=True, num_warps=8, block_m=128)),
        ("split-s3", dict(split_loops=True, num_stages=3)),
        ("diag-split-nobias", dict(split_loops=True, _perturb="bias-dropped")),
    )),
    "relbias-decode-split": Sweep("relbias", "decode kernel: branch-free loops (split_loops) against the rule",
                                  _RB_DEC_CASES, (
        ("rule", {}),
        ("split", dict(split_loops=True)),
        ("split-c8", dict(split_loops=True, ctas_per_sm=8)),
        ("split-md32", dict(split_loops=True, merge_block_d=32)),
        ("bn128-w4", dict(block_n=128, num_warps=4)),  # fewer, larger tiles (fp8 moves half the bytes per key)
        ("split-bn128-w4", dict(split_loops=True, block_n=128, num_warps=4)),
    )),
    "relbias-decode": Sweep("relbias", "split-K decode kernel: tile, warps, stages, split target", _RB_DEC_CASES, (
        ("rule", {}),
        ("w4", dict(num_warps=4)),
        ("w4-s3", dict(num_warps=4, num_stages=3)),
        ("w4-s4", dict(num_warps=4, num_stages=4)),
        ("w4-s3-c4", dict(num_warps=4, num_stages=3, ctas_per_sm=4)),
        ("w4-s3-c1", dict(num_warps=4, num_stages=3, ctas_per_sm=1)),
        ("s3", dict(num_stages=3)),
        ("bn128-s3", dict(block_n=128, num_stages=3)),
        ("bn32-w4-s4-c4", dict(block_n=32, num_warps=4, num_stages=4, ctas_per_sm=4)),
    )),
    "relbias-rules": Sweep("relbias", "the loop-structure rules against their alternatives, and the merge rule "
                           "against one program per row", ("relbias-model-verify32-64k", "relbias-model-verify32-8k")
                           + _RB_DEC_CASES, (
        ("rule", {}),
        ("branchy", dict(split_loops=False)),
        ("split", dict(split_loops=True)),
        ("md-row", dict(merge_block_d=256)),
    )),
    "relbias-fwd-prefetch": Sweep("relbias", "forward kernel: each interior tile's bias loaded one tile ahead "
                                  "(bias_prefetch) or built from its strip (bias_strip), in the branch-free loops, "
                                  "against the rule; the diagnostic computes wrong results by design",
                                  _RB_FWD_CASES[:3], (
        ("rule", {}),
        ("split", dict(split_loops=True)),
        ("prefetch", dict(bias_prefetch=True)),
        ("prefetch-s3", dict(bias_prefetch=True, num_stages=3)),
        ("prefetch-bn32", dict(bias_prefetch=True, block_n=32)),
        ("prefetch-bm128-w8", dict(bias_prefetch=True, block_m=128, num_warps=8)),
        ("strip", dict(bias_strip=True)),
        ("strip-bm128-w8", dict(bias_strip=True, block_m=128, num_warps=8)),
        ("diag-split-nobias", dict(split_loops=True, _perturb="bias-dropped")),
    )),
    "relbias-verify": Sweep("relbias", "17-32 query tokens: the decode kernel's rows per tile and warps, and the "
                            "forward kernel (the route before the decode kernel took these shapes)",
                            ("relbias-model-verify32-64k", "relbias-model-verify32-8k"), (
        ("rule", {}),
        ("rows64", dict(decode_rows=64)),
        ("rows64-w8", dict(decode_rows=64, num_warps=8)),
        ("rows128-w8", dict(num_warps=8)),
        ("rows32", dict(decode_rows=32)),
        ("rows64-s2", dict(decode_rows=64, num_stages=2)),
        ("fwd-kernel", dict(_force="fwd")),
    )),
    "relbias-fwd-strip": Sweep("relbias", "forward kernel, the strip rule (at least 65 query tokens: 128 x 64 tiles, 8 "
                               "warps, branch-free loops, each interior tile's bias from its strip) against the "
                               "previous rule and its neighbours; the diagnostic computes wrong results by design",
                               _RB_FWD_CASES[:3], (
        ("rule", {}),
        ("old-rule", dict(block_m=64, num_warps=4, split_loops=False, bias_strip=False)),
        ("s3", dict(num_stages=3)),
        ("bn128", dict(block_n=128)),
        ("bn32", dict(block_n=32)),
        ("bm64-w8", dict(block_m=64, num_warps=8)),
        ("nostrip", dict(block_m=128, num_warps=8, split_loops=True, bias_strip=False)),
        ("branchy", dict(block_m=128, num_warps=8, split_loops=False)),
        ("diag-nobias", dict(_perturb="bias-dropped")),
    )),
    "relbias-verify-2": Sweep("relbias", "decode kernel: the bias from per-head strips (bias_strip), warps and "
                              "stages, for 32 tokens and for 1", ("relbias-model-verify32-64k",
                                                                  "relbias-model-verify32-8k") + _RB_DEC_CASES[:2], (
        ("rule", {}),
        ("nostrip", dict(bias_strip=False)),
        ("w8", dict(num_warps=8)),
        ("w8-s2", dict(num_warps=8, num_stages=2)),
        ("rows64-s2", dict(decode_rows=64, num_stages=2)),
        ("rows64-w8-s2", dict(decode_rows=64, num_warps=8, num_stages=2)),
        ("nostrip-w8", dict(bias_strip=False, num_warps=8)),
        ("nostrip-rows64-s2", dict(bias_strip=False, decode_rows=64, num_stages=2)),
        ("strip", dict(bias_strip=True)),
    )),
    "relbias-strip-2": Sweep("relbias", "the strip in the forward kernel's masked tiles (diagonal, window edge, "
                             "extent) and in paged / fp8 decode (the rule of this grid) against the per-score "
                             "lookup there, and the split target of verify 32 x 8K",
                             _RB_FWD_CASES[:3] + _RB_DEC_CASES[3:] + ("relbias-model-verify32-8k",), (
        ("rule", {}),
        ("masked-lookup", dict(_masked_strip=False)),
        ("nostrip", dict(bias_strip=False)),
        ("strip", dict(bias_strip=True)),
        ("c8", dict(ctas_per_sm=8)),
        ("c2", dict(ctas_per_sm=2)),
        ("rows32-s2", dict(decode_rows=32, num_stages=2)),
    )),
    "relbias-fwd-strip-2": Sweep("relbias", "forward kernel with the strip in every tile (the rule): key tile, "
                                 "stages, launch order and TMA loads of K and V (kv_tma) on the model prefill rows",
                                 _RB_FWD_CASES[:3], (
        ("rule", {}),
        ("bn128", dict(block_n=128)),
        ("s3", dict(num_stages=3)),
        ("bn128-s3", dict(block_n=128, num_stages=3)),
        ("bn32", dict(block_n=32)),
        ("in-order", dict(heavy_first=False)),
        ("kv_tma", dict(kv_tma=True)),
        ("kv_tma-s3", dict(kv_tma=True, num_stages=3)),
    )),
    "relbias-verify-3": Sweep("relbias", "verify with short splits (32 tokens against 8K keys: 64-row tiles, 2 "
                              "stages, 1.17x flash without a bias): key tile and split target", (
                                  "relbias-model-verify32-8k",), (
        ("rule", {}),
        ("bn32", dict(block_n=32)),
        ("bn128", dict(block_n=128)),
        ("c3", dict(ctas_per_sm=3)),
        ("c5", dict(ctas_per_sm=5)),
        ("bn32-c6", dict(block_n=32, ctas_per_sm=6)),
        ("s3", dict(num_stages=3)),
    )),
    "relbias-verify-4": Sweep("relbias", "verify with short splits (32 tokens against 8K keys, 1.17x flash without a "
                              "bias): the split count around the rule's (17 by the split target, of which 16 hold "
                              "keys), programmatic dependent launch, and the 128- and 32-row tiles", (
                                  "relbias-model-verify32-8k",), (
        ("rule", {}),
        ("ns8", dict(num_splits=8)),
        ("ns12", dict(num_splits=12)),
        ("ns16", dict(num_splits=16)),
        ("ns24", dict(num_splits=24)),
        ("ns32", dict(num_splits=32)),
        ("pdl", dict(pdl=True)),
        ("ns16-pdl", dict(num_splits=16, pdl=True)),
        ("rows128-w8-fast", dict(decode_rows=128, num_warps=8, decode_fast_interior=True)),
        ("rows32", dict(decode_rows=32)),
    )),
    "relbias-verify-5": Sweep("relbias", "verify 32 tokens against 8K and 64K keys: the split count and the split "
                              "target (fewer splits write and merge fewer partials: 1 MB each here)", (
                                  "relbias-model-verify32-8k", "relbias-model-verify32-64k"), (
        ("rule", {}),
        ("ns4", dict(num_splits=4)),
        ("ns6", dict(num_splits=6)),
        ("ns7", dict(num_splits=7)),
        ("ns8", dict(num_splits=8)),
        ("ns9", dict(num_splits=9)),
        ("ns10", dict(num_splits=10)),
        ("ns16", dict(num_splits=16)),
        ("ns24", dict(num_splits=24)),
        ("c1", dict(ctas_per_sm=1)),
        ("c2", dict(ctas_per_sm=2)),
        ("c3", dict(ctas_per_sm=3)),
    )),
    "relbias-verify-wave": Sweep("relbias", "the verify one-wave rule (128-row tiles, one wave of programs, where "
                                 "the split target left short splits) against the short-split tile it replaces "
                                 "(64 rows at 2 stages by the split target), on the model's verify and three others",
                                 ("relbias-model-verify32-8k", "relbias-tune-verify32-b4-8k",
                                  "relbias-tune-verify16-16k", "relbias-tune-verify32-b2-4k"), (
        ("rule", {}),
        ("short-split", dict(decode_rows=64, num_stages=2)),
        ("long-c1", dict(decode_rows=128, num_warps=8, decode_fast_interior=True, ctas_per_sm=1)),
    )),
    "relbias-decode-splits": Sweep("relbias", "decode split count around the split target's: one token against 64K "
                                   "keys (b1, 1.12x cuDNN), and the fp8 decode b32 x 8K", (
                                       "relbias-model-decode-b1-64k", "relbias-model-fp8-decode-b32-8k"), (
        ("rule", {}),
        ("ns1", dict(num_splits=1)),
        ("ns4", dict(num_splits=4)),
        ("ns16", dict(num_splits=16)),
        ("ns33", dict(num_splits=33)),
        ("ns48", dict(num_splits=48)),
        ("ns99", dict(num_splits=99)),
        ("ns132", dict(num_splits=132)),
        ("c2", dict(ctas_per_sm=2)),
        ("c6", dict(ctas_per_sm=6)),
    )),
    "relbias-tune": Sweep("relbias", "forward kernel on shapes the rules were not timed on (D 64 and 256 prefill, "
                          "48- and 128-token chunks against 8K keys): the rule against the strip at other tiles",
                          ("relbias-tune-prefill-8k-d64", "relbias-tune-prefill-4k-d256", "relbias-tune-chunk48-b8-8k",
                           "relbias-tune-chunk128-b8-8k"), (
        ("rule", {}),
        ("strip-bm128-w8", dict(bias_strip=True, block_m=128, num_warps=8)),
        ("strip-bm64-w4", dict(bias_strip=True, block_m=64, num_warps=4)),
        ("strip-bm64-w8", dict(bias_strip=True, block_m=64, num_warps=8)),
        ("strip-bm128-bn32-w8", dict(bias_strip=True, block_m=128, block_n=32, num_warps=8)),
        ("nostrip", dict(bias_strip=False)),
    )),
    "relbias-fp8": Sweep("relbias", "fp8 decode (half the bf16 bytes, not yet half the time): split target, tile, "
                         "warps and stages, beside bf16", ("relbias-model-fp8-decode-b32-8k",
                                                           "relbias-model-decode-b32-8k"), (
        ("rule", {}),
        ("c4", dict(ctas_per_sm=4)),
        ("c6", dict(ctas_per_sm=6)),
        ("c8", dict(ctas_per_sm=8)),
        ("s4", dict(num_stages=4)),
        ("bn128", dict(block_n=128)),
        ("bn128-w8", dict(block_n=128, num_warps=8)),
        ("bn32-c6", dict(block_n=32, ctas_per_sm=6)),
    )),
    "relbias-merge": Sweep("relbias", "decode: output dims per merge program", _RB_DEC_CASES[:2], (
        ("rule", {}),
        ("md64", dict(merge_block_d=64)),
        ("md32", dict(merge_block_d=32)),
        ("c8-md32", dict(ctas_per_sm=8, merge_block_d=32)),
    )),
    "relbias-decode-w4": Sweep("relbias", "split-K decode kernel, second round: 4 warps, stages x split target",
                               _RB_DEC_CASES, (
        ("w4-s2-c2", dict(num_warps=4, num_stages=2, ctas_per_sm=2)),
        ("w4-s2-c4", dict(num_warps=4, num_stages=2, ctas_per_sm=4)),
        ("w4-s3-c2", dict(num_warps=4, num_stages=3, ctas_per_sm=2)),
        ("w4-s3-c3", dict(num_warps=4, num_stages=3, ctas_per_sm=3)),
        ("w4-s3-c4", dict(num_warps=4, num_stages=3, ctas_per_sm=4)),
        ("w4-s3-c8", dict(num_warps=4, num_stages=3, ctas_per_sm=8)),
        ("w4-s4-c3", dict(num_warps=4, num_stages=4, ctas_per_sm=3)),
        ("w4-s4-c4", dict(num_warps=4, num_stages=4, ctas_per_sm=4)),
    )),
    "sparse_int8-tile": Sweep("sparse_int8", "tile, warps, stages and the split target", _SP_CASES, (
        ("rule", {}),
        ("s1", dict(num_stages=1)),
        ("s3", dict(num_stages=3)),
        ("w4-bn16", dict(num_warps=4, block_n=16)),
        ("w4-bn16-s3", dict(num_warps=4, block_n=16, num_stages=3)),
        ("w4-bn16-c2", dict(num_warps=4, block_n=16, ctas_per_sm=2)),
        ("w4-bn16-s3-c3", dict(num_warps=4, block_n=16, num_stages=3, ctas_per_sm=3)),
        ("c2", dict(ctas_per_sm=2)),
    )),
    "sparse_int8-merge": Sweep("sparse_int8", "decode: output dims per merge program (more programs for few rows)",
                               _SP_DEC_CASES, (
        ("rule", {}),
        ("md128", dict(merge_block_d=128)),
        ("md64", dict(merge_block_d=64)),
        ("md32", dict(merge_block_d=32)),
        ("tps2-md64", dict(tiles_per_split=2, merge_block_d=64)),
    )),
    "sparse_int8-merge-2": Sweep("sparse_int8", "the merge rule against one program per row",
                                 _SP_DEC_CASES, (
        ("rule", {}),
        ("md-row", dict(merge_block_d=256)),
    )),
    "sparse_int8-tile-2": Sweep("sparse_int8", "second round: tiles of 16 and 32 candidates at 4 and 8 warps", _SP_CASES, (
        ("rule", {}),
        ("s3", dict(num_stages=3)),
        ("w4-bn16", dict(num_warps=4, block_n=16)),
        ("w4-bn16-s1", dict(num_warps=4, block_n=16, num_stages=1)),
        ("w4-bn32", dict(num_warps=4, block_n=32)),
        ("w4-bn32-s3", dict(num_warps=4, block_n=32, num_stages=3)),
        ("w8-bn16", dict(num_warps=8, block_n=16)),
        ("w8-bn16-s3", dict(num_warps=8, block_n=16, num_stages=3)),
    )),
    "sparse_int8-pipe": Sweep("sparse_int8", "the plain loop with Triton's pipelined gathers (pipeline) against the "
                              "hand-written index prefetch (the rule): stages, tile and warps", _SP_CASES, (
        ("rule", {}),
        ("pipe", dict(pipeline=True)),
        ("pipe-s3", dict(pipeline=True, num_stages=3)),
        ("pipe-s4", dict(pipeline=True, num_stages=4)),
        ("pipe-s3-w8-bn64", dict(pipeline=True, num_stages=3, num_warps=8, block_n=64)),
        ("pipe-s3-c2", dict(pipeline=True, num_stages=3, ctas_per_sm=2)),
        ("pipe-s3-bn16", dict(pipeline=True, num_stages=3, block_n=16)),
    )),
    "sparse_int8-swap": Sweep("sparse_int8", "swap-AB tiles (candidates on M: warpgroup MMAs) with the split-bf16 "
                              "query or the query's int8 digits (qk_int8: no key converted), tile and warps; and the "
                              "same over a bf16 cache (no conversion at all: what the conversions cost)",
                              _SP_CASES + ("sparse_int8-model-prefill-r2048-q8x",), (
        ("rule", {}),
        ("swap-bn64", dict(swap_ab=True, block_n=64)),
        ("swap-bn64-w8", dict(swap_ab=True, block_n=64, num_warps=8)),
        ("q8-bn64", dict(swap_ab=True, qk_int8=True, block_n=64)),
        ("q8-bn64-w8", dict(swap_ab=True, qk_int8=True, block_n=64, num_warps=8)),
        ("q8-bn64-s3", dict(swap_ab=True, qk_int8=True, block_n=64, num_stages=3)),
        ("bf16cache-rule", dict(bf16_cache=True)),
        ("bf16cache-swap-bn64", dict(bf16_cache=True, swap_ab=True, block_n=64)),
    )),
}

SWEEPS["sparse_int8-gluon"] = Sweep(
    "sparse_int8", "the swap-AB integer-score tile as a Gluon kernel for sm_90 (key codes copied into shared memory "
    "for the integer MMA, value codes converted once; two programs per SM) against the Triton kernels, on every model "
    "and adversarial case; the Gluon kernel also with the split target at two programs per SM",
    tuple(c.id for c in shapes.cases("sparse_int8", tier=shapes.BENCH, group="sparse_int8-model")),
    (("triton", dict(gluon=False)),
     ("gluon", dict(gluon=True)),
     ("gluon-c2", dict(gluon=True, ctas_per_sm=2))))

SWEEPS["sparse_int8-rows"] = Sweep(
    "sparse_int8", "decode at 3 and 16 rows (the rule's untimed row counts) and their neighbours: the Gluon kernel "
    "at one, two and three programs per SM against the Triton kernels",
    ("sparse_int8-model-decode-r2-c32k", "sparse_int8-model-decode-r3-c32k", "sparse_int8-model-decode-r4-c32k",
     "sparse_int8-model-decode-r8-c32k", "sparse_int8-model-decode-r16-c32k"),
    (("rule", {}),
     ("triton", dict(gluon=False)),
     ("gluon-c1", dict(gluon=True, ctas_per_sm=1)),
     ("gluon-c2", dict(gluon=True, ctas_per_sm=2)),
     ("gluon-c3", dict(gluon=True, ctas_per_sm=3))))

SWEEPS["sparse_int8-ids-early"] = Sweep(
    "sparse_int8", "the first two candidate tiles' ids loaded before the query (ids_early: their round trip overlaps "
    "the query's instead of waiting behind the query fold's barriers) against the rule, decode at 1-8 rows (the "
    "Triton plain loop at 1 row, the Gluon kernel's splits from 2) and prefill at 128 / 2048 rows (the Gluon kernel)",
    ("sparse_int8-model-decode-r1-c32k", "sparse_int8-model-decode-r1-c8k", "sparse_int8-model-decode-r2-c32k",
     "sparse_int8-model-decode-r4-c32k", "sparse_int8-model-decode-r8-c32k", "sparse_int8-model-prefill-r128-c8k",
     "sparse_int8-model-prefill-r2048-c8k"),
    (("rule", {}),
     ("ids-early", dict(ids_early=True))))

SWEEPS["sparse_int8-gluon-overlap"] = Sweep(
    "sparse_int8", "the Gluon kernel's score product issued before the value conversion and waited for after "
    "(gluon_overlap) against the rule, decode 1 / 2 / 4 / 8 rows and prefill 128 / 2048 rows, forced Gluon both",
    _SP_DEC_CASES + _SP_CASES[2:],
    (("rule", dict(gluon=True)), ("overlap", dict(gluon=True, gluon_overlap=True))))

SWEEPS["sparse_int8-gluon-v-regs"] = Sweep(
    "sparse_int8", "the Gluon kernel's value product fed from registers (gluon_v_regs: raw int8 value rows loaded "
    "into the MMA's A operand, no bf16 value tile in shared memory) against the rule, decode 1 / 2 / 4 / 8 rows and "
    "prefill 128 / 2048 rows, forced Gluon both; and both with every program on the split-bf16 fallback ('rule' and "
    "'fallback' are the option off: the rule when the grid first ran)",
    _SP_DEC_CASES + _SP_CASES[2:],
    (("rule", dict(gluon=True, gluon_v_regs=False)), ("v-regs", dict(gluon=True, gluon_v_regs=True)),
     ("fallback", dict(gluon=True, gluon_v_regs=False, _qk_int8_budget=0.0)),
     ("v-regs-fallback", dict(gluon=True, gluon_v_regs=True, _qk_int8_budget=0.0))))

SWEEPS["sparse_int8-gluon-fallback"] = Sweep(
    "sparse_int8", "the cost of the Gluon kernel's one fallback (the split-bf16 query, taken by a program whose query "
    "digits miss the budget): forced on every program by a zero budget, against the rule and the Triton kernels",
    ("sparse_int8-model-decode-r8-c32k", "sparse_int8-model-prefill-r2048-c8k"),
    (("triton", dict(gluon=False)),
     ("gluon", dict(gluon=True)),
     ("gluon-fallback", dict(gluon=True, _qk_int8_budget=0.0)),
     ("triton-fallback", dict(gluon=False, swap_ab=True, qk_int8=True, _qk_int8_budget=0.0))))

SWEEPS["mqa-gluon"] = Sweep(
    "mqa_decode", "swap-AB in Gluon (64-slot tiles, one warpgroup, each value decoded once) against the Triton "
    "swap-AB and head-padded kernels; the Gluon kernel with and without the next tile's slot ids prefetched",
    _mqa_steps((16, 32), (1, 2, 4, 8, 16, 32, 64)),
    (("headpad", dict(kernel="headpad")),
     ("triton", dict(kernel="swapab", gluon=False)),
     ("gluon-w4", dict(kernel="swapab", gluon=True, gluon_warps=4, gluon_fused=False)),
     ("gluon-w8", dict(kernel="swapab", gluon=True, gluon_warps=8, gluon_fused=False)),
     ("gluon-w4-fused", dict(kernel="swapab", gluon=True, gluon_warps=4, gluon_fused=True)),
     ("gluon-w8-fused", dict(kernel="swapab", gluon=True, gluon_warps=8, gluon_fused=True))))

SWEEPS["mqa-gluon-async"] = Sweep(
    "mqa_decode", "the Gluon swap-AB kernel with the raw records copied into shared memory by cp.async a tile ahead "
    "(the first while the query is prepared) against loads into registers at each tile; head-padded and Triton "
    "swap-AB for the ratios", SWEEPS["mqa-gluon"].cases,
    (("headpad", dict(kernel="headpad")),
     ("triton", dict(kernel="swapab", gluon=False)),
     ("gluon-w8", dict(kernel="swapab", gluon=True, gluon_warps=8, gluon_fused=False, gluon_async=False)),
     ("gluon-w8-async", dict(kernel="swapab", gluon=True, gluon_warps=8, gluon_fused=False, gluon_async=True)),
     ("gluon-w4-async", dict(kernel="swapab", gluon=True, gluon_warps=4, gluon_fused=False, gluon_async=True))))

SWEEPS["mqa-gluon-rule"] = Sweep(
    "mqa_decode", "the Gluon swap-AB kernel's options once its query is stored in 16-byte vectors: cp.async records, "
    "the fused merge, and 10 splits (one 64-slot tile per program) against the split rule; head-padded for the "
    "ratios", SWEEPS["mqa-gluon"].cases,
    (("headpad", dict(kernel="headpad")),
     ("gluon-w8", dict(kernel="swapab", gluon=True, gluon_warps=8, gluon_fused=False, gluon_async=False)),
     ("gluon-w8-async", dict(kernel="swapab", gluon=True, gluon_warps=8, gluon_fused=False, gluon_async=True)),
     ("gluon-w8-fused", dict(kernel="swapab", gluon=True, gluon_warps=8, gluon_fused=True, gluon_async=False)),
     ("gluon-w8-s10", dict(kernel="swapab", gluon=True, gluon_warps=8, gluon_fused=False, gluon_async=False,
                           num_splits=10))))

SWEEPS["mqa-gluon-fused-t"] = Sweep(
    "mqa_decode", "the Gluon swap-AB kernel's merge fused into each token's last program (gluon_fused) against the "
    "merge launched apart, from 16 tokens up (at 64 tokens the fused merge was faster in the ad3ed49 sweep, "
    "slower at 1-16)",
    _mqa_steps((16, 32), (16, 32, 64)),
    (("rule", dict(kernel="swapab", gluon=True)),
     ("fused", dict(kernel="swapab", gluon=True, gluon_fused=True)),
     ("step-rule", dict(kernel="swapab", gluon=True, step=True)),
     ("step-fused", dict(kernel="swapab", gluon=True, gluon_fused=True, step=True))))

SWEEPS["mqa-gluon-fused-splits"] = Sweep(
    "mqa_decode", "8 and 16 tokens: fewer splits per token with the merge fused (each program walks more 64-slot "
    "tiles, the last one merges few partials, one launch) against the rule (10 / 5 splits, the merge launched apart)",
    _mqa_steps((16, 32), (8, 16)),
    (("rule", dict(kernel="swapab", gluon=True)),
     ("s2-fused", dict(kernel="swapab", gluon=True, gluon_fused=True, num_splits=2)),
     ("s3-fused", dict(kernel="swapab", gluon=True, gluon_fused=True, num_splits=3)),
     ("s4-fused", dict(kernel="swapab", gluon=True, gluon_fused=True, num_splits=4)),
     ("s3", dict(kernel="swapab", gluon=True, gluon_fused=False, num_splits=3))))

SWEEPS["mqa-gluon-splits-small"] = Sweep(
    "mqa_decode", "1-4 tokens: fewer splits per token (each program walks 2-5 of the 10 64-slot tiles, fewer partials "
    "to merge), the merge launched apart or fused, against the rule (10 splits of one tile); head-padded for the "
    "ratio the targets name",
    _mqa_steps((16, 32), (1, 2, 4)),
    (("headpad", dict(kernel="headpad")),
     ("rule", dict(kernel="swapab", gluon=True)),
     ("s5", dict(kernel="swapab", gluon=True, num_splits=5)),
     ("s2", dict(kernel="swapab", gluon=True, num_splits=2)),
     ("s5-fused", dict(kernel="swapab", gluon=True, gluon_fused=True, num_splits=5)),
     ("s2-fused", dict(kernel="swapab", gluon=True, gluon_fused=True, num_splits=2))))

SWEEPS["mqa-gluon-early"] = Sweep(
    "mqa_decode", "1-16 tokens: the Gluon swap-AB kernel with the first tiles' slot ids loaded before the query "
    "(gluon_early: the two loads' latencies overlap) against the rule; head-padded for the ratio the targets name",
    _mqa_steps((16, 32), (1, 2, 4, 8, 16)),
    (("headpad", dict(kernel="headpad")),
     ("rule", dict(kernel="swapab", gluon=True)),
     ("early", dict(kernel="swapab", gluon=True, gluon_early=True))))

SWEEPS["mqa-merge-dc"] = Sweep(
    "mqa_decode", "the finishing merge in programs of merge_dc output dims (512: one program per token and head, "
    "the merge as measured before the option) for both kernels, attention with its merge",
    _mqa_steps((16, 32), (1, 4, 16)),
    (("swapab-dc512", dict(kernel="swapab", gluon=True, merge_dc=512)),
     ("swapab-dc256", dict(kernel="swapab", gluon=True, merge_dc=256)),
     ("swapab-dc128", dict(kernel="swapab", gluon=True, merge_dc=128)),
     ("swapab-dc64", dict(kernel="swapab", gluon=True, merge_dc=64)),
     ("headpad-dc512", dict(kernel="headpad", merge_dc=512)),
     ("headpad-dc128", dict(kernel="headpad", merge_dc=128))))

SWEEPS["mqa-gluon-half"] = Sweep(
    "mqa_decode", "1-16 tokens: the Gluon swap-AB kernel with half tiles (gluon_half: 32 live slots per 64-row MMA "
    "tile, twice the programs, each shorter) against the rule; head-padded for the ratio the targets name",
    _mqa_steps((16, 32), (1, 2, 4, 8, 16)),
    (("headpad", dict(kernel="headpad")),
     ("rule", dict(kernel="swapab", gluon=True)),
     ("half", dict(kernel="swapab", gluon=True, gluon_half=True))))

SWEEPS["mqa-pdl-early"] = Sweep(
    "mqa_decode", "whole steps (record insert, attention, merge) with pdl_early_inputs (the attention kernel prepares "
    "the query before it waits for the writer) against the rule, for both kernels (head-padded also with pdl on)",
    _mqa_steps((16, 32), (1, 2, 4, 8, 16)),
    (("headpad-step", dict(step=True, kernel="headpad")),
     ("headpad-step-pdl", dict(step=True, kernel="headpad", pdl=True)),
     ("headpad-step-pdl-early", dict(step=True, kernel="headpad", pdl=True, pdl_early_inputs=True)),
     ("swapab-step", dict(step=True, kernel="swapab")),
     ("swapab-step-early", dict(step=True, kernel="swapab", pdl_early_inputs=True))))

SWEEPS["mqa-headpad-pdl"] = Sweep(
    "mqa_decode", "attention alone (each call's kernels after the previous call's merge): the head-padded kernel with "
    "pdl and pdl_early_inputs against its rule (pdl off), beside swap-AB's rule (pdl on) and swap-AB with "
    "pdl_early_inputs: is the attention-only ratio a like-for-like comparison",
    _mqa_steps((16, 32), (1, 2, 4, 8, 16)),
    (("headpad", dict(kernel="headpad")),
     ("headpad-pdl", dict(kernel="headpad", pdl=True)),
     ("headpad-pdl-early", dict(kernel="headpad", pdl=True, pdl_early_inputs=True)),
     ("swapab", dict(kernel="swapab")),
     ("swapab-early", dict(kernel="swapab", pdl_early_inputs=True))))

SWEEPS["relbias-gluon-ws-pairs"] = Sweep(
    "relbias", "the warp-specialized Gluon forward kernel's bias gathered in 64-bit pairs (gluon_bias_pairs) against "
    "the dispatched kernel, on the cases gluon_ws_rule sends to it and a windowed one forced onto it",
    ("relbias-model-prefill-8k-global", "relbias-tune-chunk128-b8-8k", "relbias-model-prefill-8k-w1024"),
    (("rule", dict(gluon=None)),
     ("pairs", dict(gluon=None, gluon_bias_pairs=True)),
     ("ws", dict(gluon=True, gluon_ws=True)),
     ("ws-pairs", dict(gluon=True, gluon_ws=True, gluon_bias_pairs=True))))

SWEEPS["mqa-merge-dc-2"] = Sweep(
    "mqa_decode", "the swap-AB kernel's merge at 256 against 512 output dims per program at the token counts the "
    "mqa-merge-dc grid did not time (2 and 8 tokens), attention with its merge",
    _mqa_steps((16, 32), (2, 8)),
    (("swapab-dc512", dict(kernel="swapab", gluon=True, merge_dc=512)),
     ("swapab-dc256", dict(kernel="swapab", gluon=True, merge_dc=256))))

SWEEPS["relbias-gluon-ws-ahead"] = Sweep(
    "relbias", "the warp-specialized Gluon forward kernel's strips loaded a tile ahead (gluon_bias_ahead) against the "
    "dispatched kernel as it was, on the cases gluon_ws_rule sends to it and a windowed one forced onto it (the "
    "settings without it pin gluon_bias_ahead=False, the rule when it first ran)",
    ("relbias-model-prefill-8k-global", "relbias-tune-chunk128-b8-8k", "relbias-model-prefill-8k-w1024"),
    (("rule", dict(gluon=None, gluon_bias_ahead=False)),
     ("ahead", dict(gluon=None, gluon_bias_ahead=True)),
     ("ws", dict(gluon=True, gluon_ws=True, gluon_bias_ahead=False)),
     ("ws-ahead", dict(gluon=True, gluon_ws=True, gluon_bias_ahead=True))))

SWEEPS["relbias-gluon-ws-ahead-2"] = Sweep(
    "relbias", "with gluon_bias_ahead on by rule: the warp-specialized kernel's other schedule options re-timed on "
    "it (the consumers' turns, the persistent grid, the row reductions as trees) against the rule and the rule "
    "without the strips ahead, on the cases gluon_ws_rule sends to it; diag-* computes wrong results by design (no "
    "bias: what the bias still costs)",
    ("relbias-model-prefill-8k-global", "relbias-tune-chunk128-b8-8k"),
    (("rule", dict(gluon=None)),
     ("no-ahead", dict(gluon=None, gluon_bias_ahead=False)),
     ("pingpong", dict(gluon=None, gluon_pingpong=True)),
     ("persistent", dict(gluon=None, gluon_persistent=True)),
     ("tree", dict(gluon=None, gluon_tree_reduce=True)),
     ("diag-nobias", dict(gluon=None, _perturb="bias-dropped"))))

SWEEPS["relbias-gluon-ws-pairs-2"] = Sweep(
    "relbias", "with gluon_bias_ahead on by rule: the warp-specialized kernel's bias gathered in 64-bit pairs "
    "(gluon_bias_pairs, both of its strips loaded ahead: 575 SASS instructions a tile against 586, 31 LDS against "
    "63) against the rule, on the cases gluon_ws_rule sends to it",
    ("relbias-model-prefill-8k-global", "relbias-tune-chunk128-b8-8k"),
    (("rule", dict(gluon=None)),
     ("pairs", dict(gluon=None, gluon_bias_pairs=True))))

SWEEPS["relbias-gluon-ws-diag"] = Sweep(
    "relbias", "the warp-specialized kernel's bias gathered one load per distinct distance a thread holds "
    "(gluon_bias_diag: 34 LDS a tile instead of 63, the rest register copies), and with it the interior loop two "
    "tiles an iteration (gluon_ws_unroll), against the rule, on the cases "
    "gluon_ws_rule sends to it",
    ("relbias-model-prefill-8k-global", "relbias-tune-chunk128-b8-8k"),
    (("rule", dict(gluon=None)),
     ("diag", dict(gluon=None, gluon_bias_diag=True)),
     ("diag-unroll", dict(gluon=None, gluon_bias_diag=True, gluon_ws_unroll=True))))

SWEEPS["relbias-gluon"] = Sweep(
    "relbias", "the Gluon forward kernel for sm_90 (TMA key / value ring, warpgroup MMAs, the bias from each tile's "
    "strip) against the Triton rule on the prefill cases: with and without the value product overlapped with the "
    "next tile's softmax, ring depth, key tile, one warpgroup; diag-* computes wrong results by design (no bias: "
    "what the bias costs the Gluon loop)",
    ("relbias-model-prefill-8k-global", "relbias-model-prefill-8k-w1024", "relbias-model-varlen-mixed",
     "relbias-tune-prefill-8k-d64", "relbias-tune-chunk128-b8-8k"),
    (("triton", {}),
     ("gluon", dict(gluon=True, num_warps=8)),
     ("gluon-nopipe", dict(gluon=True, num_warps=8, gluon_pipe=False)),
     ("gluon-s2", dict(gluon=True, num_warps=8, num_stages=2)),
     ("gluon-s4", dict(gluon=True, num_warps=8, num_stages=4)),
     ("gluon-bn128-s2", dict(gluon=True, num_warps=8, block_n=128, num_stages=2)),
     ("gluon-w4", dict(gluon=True, num_warps=4)),
     ("gluon-bias-load", dict(gluon=True, num_warps=8, gluon_bias_gather=False)),
     ("diag-gluon-nobias", dict(gluon=True, num_warps=8, _perturb="bias-dropped"))))

SWEEPS["relbias-gluon-2"] = Sweep(
    "relbias", "the Gluon forward kernel at 4 warps (one warpgroup, 64 query rows: the winner of relbias-gluon) "
    "against its neighbours: ring depth, 128-key tiles, without the overlap, per-score table loads; the Triton rule "
    "and 8 warps at 128-key tiles for reference; diag-* computes wrong results by design (no bias)",
    SWEEPS["relbias-gluon"].cases + ("relbias-tune-chunk48-b8-8k",),
    (("triton", {}),
     ("rule", dict(gluon=None)),
     ("w4-s2", dict(gluon=True, num_warps=4, num_stages=2)),
     ("w4-s4", dict(gluon=True, num_warps=4, num_stages=4)),
     ("w4-bn128-s2", dict(gluon=True, num_warps=4, block_n=128, num_stages=2)),
     ("w4-nopipe", dict(gluon=True, num_warps=4, gluon_pipe=False)),
     ("w4-bias-load", dict(gluon=True, num_warps=4, gluon_bias_gather=False)),
     ("w8-bn128-s2", dict(gluon=True, num_warps=8, block_n=128, num_stages=2)),
     ("diag-w4-nobias", dict(gluon=True, num_warps=4, _perturb="bias-dropped"))))

SWEEPS["relbias-gluon-3"] = Sweep(
    "relbias", "the Gluon forward rule against P through shared memory (gluon_p_smem: the value product stays in "
    "flight during the softmax; in registers ptxas waits for it first) and the bias built before the scores are "
    "waited for (gluon_bias_early), each alone and together; 3 tiles with both; lazy rescaling (gluon_lazy_rescale) "
    "alone and with both; the bias starting the score product's accumulator (gluon_bias_acc) alone, with lazy "
    "rescaling, with P through shared memory, at 3 tiles; the Triton kernel for reference; "
    "diag-* computes wrong results by design (no bias)",
    SWEEPS["relbias-gluon-2"].cases,
    (("triton", {}),
     ("rule", dict(gluon=None)),
     ("early", dict(gluon=True, gluon_bias_early=True)),
     ("psmem", dict(gluon=True, gluon_p_smem=True)),
     ("psmem-early", dict(gluon=True, gluon_p_smem=True, gluon_bias_early=True)),
     ("psmem-early-s3", dict(gluon=True, gluon_p_smem=True, gluon_bias_early=True, num_stages=3)),
     ("lazy", dict(gluon=True, gluon_lazy_rescale=True)),
     ("acc", dict(gluon=True, gluon_bias_acc=True)),
     ("acc-lazy", dict(gluon=True, gluon_bias_acc=True, gluon_lazy_rescale=True)),
     ("acc-lazy-psmem", dict(gluon=True, gluon_bias_acc=True, gluon_lazy_rescale=True, gluon_p_smem=True)),
     ("acc-lazy-s3", dict(gluon=True, gluon_bias_acc=True, gluon_lazy_rescale=True, num_stages=3)),
     ("psmem-early-lazy", dict(gluon=True, gluon_p_smem=True, gluon_bias_early=True, gluon_lazy_rescale=True)),
     ("diag-psmem-nobias", dict(gluon=True, gluon_p_smem=True, _perturb="bias-dropped")),
     ("diag-acc-lazy-nobias", dict(gluon=True, gluon_bias_acc=True, gluon_lazy_rescale=True,
                                   _perturb="bias-dropped"))))

# The warp-specialized kernel's settings as they first ran: without turns and without the early key release (the
# defaults until 69133fe), written out so that a rerun does not silently time other defaults under the old names.
# The kernel without turns ran then with its unused turn barriers (fixed at a0d56b3, see relbias/config.py,
# GLUON_PINGPONG), so a rerun times the fixed kernel.
_NO_TURNS = dict(gluon_pingpong=False, gluon_k_release=False)
_AS_FIRST_RUN = " (settings as first run; the kernel without turns as fixed at a0d56b3)"

SWEEPS["relbias-gluon-ws"] = Sweep(
    "relbias", "the warp-specialized Gluon forward kernel (gluon_ws: a TMA producer warp, two consumer warpgroups "
    "of 64 rows sharing each key / value tile) against the rule (one warpgroup): 64- and 128-key tiles, with and "
    "without the consumers taking turns (gluon_pingpong), 3 tiles at 64 keys, without bias_acc; the Triton kernel "
    "for reference; diag-* computes wrong results by design (no bias)" + _AS_FIRST_RUN,
    SWEEPS["relbias-gluon-2"].cases,
    (("triton", {}),
     ("rule", dict(gluon=None)),
     ("ws-bn64", dict(gluon=True, gluon_ws=True, **_NO_TURNS)),
     ("ws-bn64-s3", dict(gluon=True, gluon_ws=True, num_stages=3, **_NO_TURNS)),
     ("ws-bn128", dict(gluon=True, gluon_ws=True, block_n=128, **_NO_TURNS)),
     ("ws-bn64-pp", dict(gluon=True, gluon_ws=True, gluon_pingpong=True, gluon_k_release=False)),
     ("ws-bn128-pp", dict(gluon=True, gluon_ws=True, gluon_pingpong=True, block_n=128, gluon_k_release=False)),
     ("ws-bn128-noacc", dict(gluon=True, gluon_ws=True, block_n=128, gluon_bias_acc=False, **_NO_TURNS)),
     ("diag-ws-bn128-nobias", dict(gluon=True, gluon_ws=True, block_n=128, _perturb="bias-dropped",
                                   **_NO_TURNS))))

SWEEPS["relbias-gluon-ws-2"] = Sweep(
    "relbias", "the warp-specialized Gluon forward kernel at 64- and 128-key tiles, and with its consumers' turns "
    "taken one per union tile (gluon_pingpong after its deadlock fix), against the rule, on the six prefill "
    "cases" + _AS_FIRST_RUN,
    SWEEPS["relbias-gluon-2"].cases,
    (("rule", dict(gluon=None)),
     ("ws-bn64", dict(gluon=True, gluon_ws=True, **_NO_TURNS)),
     ("ws-bn128", dict(gluon=True, gluon_ws=True, block_n=128, **_NO_TURNS)),
     ("ws-bn64-pp", dict(gluon=True, gluon_ws=True, gluon_pingpong=True, gluon_k_release=False)),
     ("ws-bn128-pp", dict(gluon=True, gluon_ws=True, gluon_pingpong=True, block_n=128, gluon_k_release=False))))

SWEEPS["relbias-gluon-ws-3"] = Sweep(
    "relbias", "the warp-specialized Gluon forward kernel on a persistent grid (gluon_persistent) against one "
    "program per work item, with and without turn-taking, and with its key slots released after the score products "
    "(gluon_k_release); the one-warpgroup kernel with and without its key tiles issued early (gluon_k_early); "
    "the rule (which picks the warp-specialized kernel at 8K global and on the chunks of 128) for reference"
    + _AS_FIRST_RUN,
    SWEEPS["relbias-gluon-2"].cases,
    (("rule", dict(gluon=None)),
     ("one-warpgroup", dict(gluon=True, gluon_ws=False)),
     ("ws", dict(gluon=True, gluon_ws=True, **_NO_TURNS)),
     ("ws-persistent", dict(gluon=True, gluon_ws=True, gluon_persistent=True, **_NO_TURNS)),
     ("ws-persistent-pp", dict(gluon=True, gluon_ws=True, gluon_persistent=True, gluon_pingpong=True,
                               gluon_k_release=False)),
     ("ws-krel", dict(gluon=True, gluon_ws=True, gluon_k_release=True, gluon_pingpong=False)),
     ("ws-persistent-krel", dict(gluon=True, gluon_ws=True, gluon_persistent=True, gluon_k_release=True,
                                 gluon_pingpong=False)),
     ("one-warpgroup-k-early", dict(gluon=True, gluon_ws=False, gluon_k_early=True))))

SWEEPS["relbias-gluon-ws-4"] = Sweep(
    "relbias", "the warp-specialized Gluon forward kernel without its consumers' turns since the fix of its turn "
    "barriers, with and without the key release, against the configuration dispatched when it ran (turns and key "
    "release), the persistent grid with turns, and the one-warpgroup kernel",
    SWEEPS["relbias-gluon-2"].cases,
    (("rule", dict(gluon=None)),
     ("one-warpgroup", dict(gluon=True, gluon_ws=False)),
     ("ws", dict(gluon=True, gluon_ws=True, gluon_pingpong=True)),
     ("ws-nokrel", dict(gluon=True, gluon_ws=True, gluon_pingpong=True, gluon_k_release=False)),
     ("ws-no-turns", dict(gluon=True, gluon_ws=True, gluon_pingpong=False)),
     ("ws-no-turns-nokrel", dict(gluon=True, gluon_ws=True, **_NO_TURNS)),
     ("ws-persistent", dict(gluon=True, gluon_ws=True, gluon_persistent=True, gluon_pingpong=True))))

SWEEPS["relbias-gluon-ws-5"] = Sweep(
    "relbias", "the Gluon forward kernels' row maxima and sums as trees (gluon_tree_reduce) against the dispatched "
    "configurations (the warp-specialized kernel without turns and with the key release at 8K global and on chunks "
    "of 128, the one-warpgroup kernel elsewhere), and the warp-specialized kernel with turns with and without them",
    SWEEPS["relbias-gluon-2"].cases,
    (("rule", dict(gluon=None)),
     ("tree", dict(gluon=None, gluon_tree_reduce=True)),
     ("ws-turns", dict(gluon=True, gluon_ws=True, gluon_pingpong=True)),
     ("ws-turns-tree", dict(gluon=True, gluon_ws=True, gluon_pingpong=True, gluon_tree_reduce=True))))

_PT = dict(page_tiles=True)
SWEEPS["relbias-paged-tiles"] = Sweep(
    "relbias", "the decode kernel over paged caches: one block-table entry per key tile (page_tiles, block_n <= the "
    "block size; 64-key tiles fail on block size 16 by design) in the contiguous cache's tile settings, against the "
    "rule (a block-table load per key, 128-key tiles, 2 stages, 2 programs per SM) and the per-key loads in those "
    "settings; the contiguous decode for the ratio",
    ("relbias-model-paged-decode-b32-8k-bs16", "relbias-model-paged-decode-b32-8k-bs64", "relbias-model-decode-b32-8k"),
    (("rule", {}),
     ("key-bn64-s3-c4", dict(block_n=64, num_stages=3, ctas_per_sm=4)),
     ("pt-bn64-s3-c4", dict(_PT, block_n=64, num_stages=3, ctas_per_sm=4)),
     ("pt-bn64-s3-c3", dict(_PT, block_n=64, num_stages=3, ctas_per_sm=3)),
     ("pt-bn64-s3-c4-strip", dict(_PT, block_n=64, num_stages=3, ctas_per_sm=4, bias_strip=True)),
     ("pt-bn64-s4-c3-strip", dict(_PT, block_n=64, num_stages=4, ctas_per_sm=3, bias_strip=True)),
     ("pt-bn64-s5-c2-strip", dict(_PT, block_n=64, num_stages=5, ctas_per_sm=2, bias_strip=True)),
     ("pt-bn16-s3-c4", dict(_PT, block_n=16, num_stages=3, ctas_per_sm=4)),
     ("pt-bn16-s4-c4-strip", dict(_PT, block_n=16, num_stages=4, ctas_per_sm=4, bias_strip=True))))

SWEEPS["relbias-paged-tiles-2"] = Sweep(
    "relbias", "paged decode, second round: the page-tile winner's neighbours at block size 64 (stages, strip, "
    "programs per SM) and deeper pipelines for the per-key block-table loads at block size 16",
    ("relbias-model-paged-decode-b32-8k-bs16", "relbias-model-paged-decode-b32-8k-bs64"),
    (("rule", {}),
     ("pt-bn64-s5-c2-strip", dict(_PT, block_n=64, num_stages=5, ctas_per_sm=2, bias_strip=True)),
     ("pt-bn64-s5-c2", dict(_PT, block_n=64, num_stages=5, ctas_per_sm=2, bias_strip=False)),
     ("pt-bn64-s6-c2-strip", dict(_PT, block_n=64, num_stages=6, ctas_per_sm=2, bias_strip=True)),
     ("pt-bn64-s5-c3-strip", dict(_PT, block_n=64, num_stages=5, ctas_per_sm=3, bias_strip=True)),
     ("key-bn64-s5-c2-strip", dict(block_n=64, num_stages=5, ctas_per_sm=2, bias_strip=True)),
     ("key-bn64-s6-c2", dict(block_n=64, num_stages=6, ctas_per_sm=2)),
     ("key-bn128-s3-c2", dict(block_n=128, num_stages=3, ctas_per_sm=2)),
     ("key-bn32-s6-c2-strip", dict(block_n=32, num_stages=6, ctas_per_sm=2, bias_strip=True)),
     ("key-bn32-s6-c4-strip", dict(block_n=32, num_stages=6, ctas_per_sm=4, bias_strip=True)),
     ("pt-bn16-s8-c2-strip", dict(_PT, block_n=16, num_stages=8, ctas_per_sm=2, bias_strip=True)),
     ("pt-bn16-s8-c6-strip", dict(_PT, block_n=16, num_stages=8, ctas_per_sm=6, bias_strip=True))))

SWEEPS["relbias-paged-tiles-3"] = Sweep(
    "relbias", "paged decode, third round: block size 16 around the per-key loads' best (128-key tiles, 3 stages, "
    "2 per SM), narrow page tiles with deep pipelines, and the block-size-64 winner for reference",
    ("relbias-model-paged-decode-b32-8k-bs16", "relbias-model-paged-decode-b32-8k-bs64"),
    (("rule", {}),
     ("key-bn128-s3-c2", dict(block_n=128, num_stages=3, ctas_per_sm=2)),
     ("key-bn128-s5-c1", dict(block_n=128, num_stages=5, ctas_per_sm=1)),
     ("key-bn32-s8-c3-strip", dict(block_n=32, num_stages=8, ctas_per_sm=3, bias_strip=True)),
     ("key-bn128-s3-c2-strip", dict(block_n=128, num_stages=3, ctas_per_sm=2, bias_strip=True)),
     ("key-bn64-s4-c3", dict(block_n=64, num_stages=4, ctas_per_sm=3)),
     ("key-bn32-s6-c4-strip", dict(block_n=32, num_stages=6, ctas_per_sm=4, bias_strip=True)),
     ("pt-bn16-s8-c6-strip", dict(_PT, block_n=16, num_stages=8, ctas_per_sm=6, bias_strip=True)),
     ("pt-bn64-s5-c2-strip", dict(_PT, block_n=64, num_stages=5, ctas_per_sm=2, bias_strip=True))))

SWEEPS["relbias-fp8-stages"] = Sweep(
    "relbias", "fp8 decode: deeper software pipelines (more key tiles in flight, what took the paged decode to its "
    "byte floor) and programs per SM around the rule (64-key tiles, 3 stages, 3 per SM); bf16 for the ratio",
    ("relbias-model-fp8-decode-b32-8k", "relbias-model-decode-b32-8k"),
    (("rule", {}),
     ("s4-c3", dict(num_stages=4, ctas_per_sm=3)),
     ("s5-c3", dict(num_stages=5, ctas_per_sm=3)),
     ("s6-c2", dict(num_stages=6, ctas_per_sm=2)),
     ("s4-c4", dict(num_stages=4, ctas_per_sm=4)),
     ("bn128-s3-c2", dict(block_n=128, num_stages=3, ctas_per_sm=2)),
     ("bn128-s4-c2", dict(block_n=128, num_stages=4, ctas_per_sm=2))))

SWEEPS["relbias-decode-fast"] = Sweep(
    "relbias", "the decode kernel's interior key tiles in a loop of their own, unmasked (decode_fast_interior), "
    "against the rule, on the verify, decode, paged and fp8 cases",
    ("relbias-model-verify32-8k", "relbias-model-verify32-64k", "relbias-model-decode-b1-64k",
     "relbias-model-decode-b32-8k", "relbias-model-paged-decode-b32-8k-bs16", "relbias-model-paged-decode-b32-8k-bs64",
     "relbias-model-fp8-decode-b32-8k"),
    (("rule", {}),
     ("fast", dict(decode_fast_interior=True))))

SWEEPS["mqa-gluon-e2m1"] = Sweep(
    "mqa_decode", "the Gluon swap-AB kernel's nvfp4 decode from bits (two bf16x2 products per two values, "
    "gluon_e2m1_bits) against the default (through fp16 and fp32); head-padded for the ratios",
    tuple(f"mqa_decode-step-h{h}-t{t}-nvfp4" for h in (16, 32) for t in (1, 2, 4, 8, 16, 32, 64)),
    (("headpad", dict(kernel="headpad")),
     ("gluon", dict(kernel="swapab", gluon=True)),
     ("gluon-e2m1-bits", dict(kernel="swapab", gluon=True, gluon_e2m1_bits=True))))

SWEEPS["relbias-fp8-cvt"] = Sweep(
    "relbias", "fp8 k, v converted through fp16 and fp32 (fp8_f16_cvt: a packed conversion per two codes and a "
    "full-rate widening) against the direct cast (a quarter-rate conversion per code on sm_90); bf16 for the ratio",
    ("relbias-model-fp8-decode-b32-8k", "relbias-model-decode-b32-8k"),
    (("rule", {}), ("fp8-f16-cvt", dict(fp8_f16_cvt=True))))

SWEEPS["relbias-fp8-asm"] = Sweep(
    "relbias", "fp8 k, v converted by inline assembly on the codes as loaded (fp8_asm_cvt: the tile reaches the MMA "
    "operand layout as bf16 by ldmatrix, not as fp8 by narrow shared loads) at the fp8 rule's tile and around it "
    "(stages, programs per SM, 8 warps); bf16 for the ratio",
    ("relbias-model-fp8-decode-b32-8k", "relbias-model-decode-b32-8k"),
    (("rule", {}),
     ("asm", dict(fp8_asm_cvt=True)),
     ("asm-s2-c4", dict(fp8_asm_cvt=True, num_stages=2, ctas_per_sm=4)),
     ("asm-s4", dict(fp8_asm_cvt=True, num_stages=4)),
     ("asm-s5-c2", dict(fp8_asm_cvt=True, num_stages=5, ctas_per_sm=2)),
     ("asm-w8-c2", dict(fp8_asm_cvt=True, num_warps=8, ctas_per_sm=2)),
     ("asm-w8-s4-c2", dict(fp8_asm_cvt=True, num_warps=8, num_stages=4, ctas_per_sm=2)),
     ("asm-w8-bn128-s4-c1", dict(fp8_asm_cvt=True, num_warps=8, block_n=128, num_stages=4, ctas_per_sm=1))))

SWEEPS["relbias-gluon-decode"] = Sweep(
    "relbias", "the Gluon fp8 decode kernel (swap-AB tiles, the codes converted once into shared memory) against the "
    "Triton decode kernel: its code conversions (gluon_decode_cvt 0-3), ring depths (num_stages) and split targets "
    "(ctas_per_sm); bf16 for the ratio",
    ("relbias-model-fp8-decode-b32-8k", "relbias-model-decode-b32-8k"),
    (("triton", dict(gluon_decode=False)),
     ("gluon-cvt0", dict(gluon_decode=True, gluon_decode_cvt=0)),
     ("gluon-cvt1", dict(gluon_decode=True, gluon_decode_cvt=1)),
     ("gluon-cvt2", dict(gluon_decode=True, gluon_decode_cvt=2)),
     ("gluon-cvt3", dict(gluon_decode=True, gluon_decode_cvt=3)),
     ("gluon-cvt3-s2", dict(gluon_decode=True, gluon_decode_cvt=3, num_stages=2)),
     ("gluon-cvt3-s4", dict(gluon_decode=True, gluon_decode_cvt=3, num_stages=4)),
     ("gluon-cvt3-c1", dict(gluon_decode=True, gluon_decode_cvt=3, ctas_per_sm=1)),
     ("gluon-cvt3-c3", dict(gluon_decode=True, gluon_decode_cvt=3, ctas_per_sm=3)),
     ("gluon-cvt3-s2-c3", dict(gluon_decode=True, gluon_decode_cvt=3, num_stages=2, ctas_per_sm=3))))

SWEEPS["relbias-gluon-decode-2"] = Sweep(
    "relbias", "the Gluon fp8 decode kernel with each tile's bias loaded before its codes are waited for and the "
    "value codes converted while the score product runs: conversions, split targets, ring depths, and a diagnostic "
    "without the bias (wrong results by design); bf16 for the ratio",
    ("relbias-model-fp8-decode-b32-8k", "relbias-model-decode-b32-8k"),
    (("triton", dict(gluon_decode=False)),
     ("gluon-cvt1", dict(gluon_decode=True, gluon_decode_cvt=1)),
     ("gluon-cvt3", dict(gluon_decode=True, gluon_decode_cvt=3)),
     ("gluon-cvt1-c1", dict(gluon_decode=True, gluon_decode_cvt=1, ctas_per_sm=1)),
     ("gluon-cvt3-c1", dict(gluon_decode=True, gluon_decode_cvt=3, ctas_per_sm=1)),
     ("gluon-cvt3-c1-s4", dict(gluon_decode=True, gluon_decode_cvt=3, ctas_per_sm=1, num_stages=4)),
     ("diag-cvt3-c1-nobias", dict(gluon_decode=True, gluon_decode_cvt=3, ctas_per_sm=1, _perturb="bias-dropped"))))

SWEEPS["relbias-gluon-decode-3"] = Sweep(
    "relbias", "the Gluon fp8 decode kernel with its code tiles copied by TMA (gluon_decode_tma) against cp.async (a "
    "proxy fence before each MMA waits for the thread's copies still in flight), the next tile's bias loaded during "
    "the value product: conversions, split targets, ring depths, and a diagnostic without the bias (wrong results "
    "by design); bf16 for the ratio",
    ("relbias-model-fp8-decode-b32-8k", "relbias-model-decode-b32-8k"),
    (("triton", dict(gluon_decode=False)),
     ("gluon-cvt3-cpasync-c1", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_tma=False, ctas_per_sm=1)),
     ("gluon-cvt3-tma", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_tma=True)),
     ("gluon-cvt3-tma-c1", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_tma=True, ctas_per_sm=1)),
     ("gluon-cvt1-tma-c1", dict(gluon_decode=True, gluon_decode_cvt=1, gluon_decode_tma=True, ctas_per_sm=1)),
     ("gluon-cvt3-tma-c1-s2", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_tma=True, ctas_per_sm=1,
                                   num_stages=2)),
     ("gluon-cvt3-tma-c1-s4", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_tma=True, ctas_per_sm=1,
                                   num_stages=4)),
     ("gluon-cvt3-tma-s2-c3", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_tma=True, ctas_per_sm=3,
                                   num_stages=2)),
     ("diag-cvt3-tma-c1-nobias", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_tma=True, ctas_per_sm=1,
                                      _perturb="bias-dropped"))))

SWEEPS["relbias-gluon-decode-4"] = Sweep(
    "relbias", "the Gluon fp8 decode kernel with each tile's bias copied into shared memory by cp.async a ring ahead "
    "(gluon_decode_bias_async) against table loads into registers, over TMA and cp.async code copies, ring depths "
    "and split targets, and a diagnostic without the bias (wrong results by design); bf16 for the ratio",
    ("relbias-model-fp8-decode-b32-8k", "relbias-model-decode-b32-8k"),
    (("triton", dict(gluon_decode=False)),
     ("gluon-tma-c1", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_tma=True, ctas_per_sm=1)),
     ("gluon-tma-c1-basync", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_tma=True, ctas_per_sm=1,
                                  gluon_decode_bias_async=True)),
     ("gluon-cpasync-c1-basync", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_tma=False, ctas_per_sm=1,
                                      gluon_decode_bias_async=True)),
     ("gluon-tma-c1-s4-basync", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_tma=True, ctas_per_sm=1,
                                     num_stages=4, gluon_decode_bias_async=True)),
     ("gluon-tma-c2-basync", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_tma=True, ctas_per_sm=2,
                                  gluon_decode_bias_async=True)),
     ("gluon-cvt1-tma-c1-basync", dict(gluon_decode=True, gluon_decode_cvt=1, gluon_decode_tma=True, ctas_per_sm=1,
                                       gluon_decode_bias_async=True)),
     ("diag-tma-c1-nobias", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_tma=True, ctas_per_sm=1,
                                 _perturb="bias-dropped"))))

SWEEPS["relbias-fp8-warps"] = Sweep(
    "relbias", "the Triton decode kernel over the fp8 cache with one or two warps per program (every reduction inside "
    "a warp, many programs per SM) against the rule's four; bf16 for the ratio",
    ("relbias-model-fp8-decode-b32-8k", "relbias-model-decode-b32-8k"),
    (("rule", dict(gluon_decode=False)),
     ("w2-c6", dict(gluon_decode=False, num_warps=2, ctas_per_sm=6)),
     ("w2-c8-s4", dict(gluon_decode=False, num_warps=2, ctas_per_sm=8, num_stages=4)),
     ("w1-c12", dict(gluon_decode=False, num_warps=1, ctas_per_sm=12)),
     ("w1-c16-s4", dict(gluon_decode=False, num_warps=1, ctas_per_sm=16, num_stages=4)),
     ("w1-bn32-c16", dict(gluon_decode=False, num_warps=1, block_n=32, ctas_per_sm=16)),
     ("w2-bn32-c8", dict(gluon_decode=False, num_warps=2, block_n=32, ctas_per_sm=8))))

SWEEPS["relbias-gluon-decode-5"] = Sweep(
    "relbias", "the Gluon fp8 decode kernel with the key codes converted in registers into the score product's operand "
    "(gluon_decode_kreg: no key tile in shared memory, three programs fit an SM) and each thread's share of the row "
    "sums kept to the end, against the same without kreg; split targets, ring depths, conversions, and a diagnostic "
    "without the bias (wrong results by design); bf16 for the ratio",
    ("relbias-model-fp8-decode-b32-8k", "relbias-model-decode-b32-8k"),
    (("triton", dict(gluon_decode=False)),
     ("basync-c1", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_bias_async=True, ctas_per_sm=1)),
     ("kreg-basync-c1", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_bias_async=True,
                             gluon_decode_kreg=True, ctas_per_sm=1)),
     ("kreg-basync-c2", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_bias_async=True,
                             gluon_decode_kreg=True, ctas_per_sm=2)),
     ("kreg-basync-c3", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_bias_async=True,
                             gluon_decode_kreg=True, ctas_per_sm=3)),
     ("kreg-basync-c3-s2", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_bias_async=True,
                                gluon_decode_kreg=True, ctas_per_sm=3, num_stages=2)),
     ("kreg-basync-cvt1-c3", dict(gluon_decode=True, gluon_decode_cvt=1, gluon_decode_bias_async=True,
                                  gluon_decode_kreg=True, ctas_per_sm=3)),
     ("kreg-c3", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_kreg=True, ctas_per_sm=3)),
     ("diag-kreg-c3-nobias", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_kreg=True, ctas_per_sm=3,
                                  _perturb="bias-dropped"))))

SWEEPS["relbias-gluon-decode-6"] = Sweep(
    "relbias", "the Gluon fp8 decode kernel with 128-key tiles (block_n=128: the per-tile fences, barriers and the "
    "column maxima shared by twice the keys) against 64-key tiles, both with gluon_decode_kreg and "
    "gluon_decode_bias_async, on the timed fp8 decode case and two small fp8 verify shapes; the Triton decode kernel "
    "for the ratio",
    ("relbias-model-fp8-decode-b32-8k", "relbias-fp8-paged-verify", "relbias-fp8-verify-t32-g8-blocks-clamp"),
    (("triton", dict(gluon_decode=False)),
     ("bn64-s3-c1", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_bias_async=True, gluon_decode_kreg=True,
                         ctas_per_sm=1)),
     ("bn64-s3", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_bias_async=True, gluon_decode_kreg=True)),
     ("bn128-s2-c1", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_bias_async=True, gluon_decode_kreg=True,
                          block_n=128, num_stages=2, ctas_per_sm=1)),
     ("bn128-s2-c2", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_bias_async=True, gluon_decode_kreg=True,
                          block_n=128, num_stages=2, ctas_per_sm=2)),
     ("bn128-s3-c1", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_bias_async=True, gluon_decode_kreg=True,
                          block_n=128, num_stages=3, ctas_per_sm=1)),
     ("bn128-s2-c1-cvt2", dict(gluon_decode=True, gluon_decode_cvt=2, gluon_decode_bias_async=True,
                               gluon_decode_kreg=True, block_n=128, num_stages=2, ctas_per_sm=1)),
     ("bn64-s4-c1", dict(gluon_decode=True, gluon_decode_cvt=3, gluon_decode_bias_async=True, gluon_decode_kreg=True,
                         num_stages=4, ctas_per_sm=1))))

SWEEPS["relbias-gluon-decode-7"] = Sweep(
    "relbias", "the Gluon fp8 decode rule (gluon_decode_rule's 128-key tiles, ring of 2, one program per SM) on one "
    "64K sequence at the model's heads, where the splits, not the batch, fill the GPU; around it two programs per SM "
    "and 64-key tiles; the Triton decode kernel for the ratio",
    ("relbias-deep-fp8-decode-b1-64k", "relbias-model-fp8-decode-b32-8k"),
    (("triton", dict(gluon_decode=False)),
     ("rule", {}),
     ("c2", dict(ctas_per_sm=2)),
     ("bn64", dict(gluon_decode=True, block_n=64, num_stages=3))))

_G64 = dict(gluon_decode=True, block_n=64, gluon_decode_kreg=True, gluon_decode_bias_async=True)
SWEEPS["relbias-gluon-decode-9"] = Sweep(
    "relbias", "the Gluon fp8 decode kernel at 64-key tiles with more programs resident per SM: registers capped "
    "(gluon_decode_maxnreg) so that four fit (128) or three (168), with the splits that fill one wave of them "
    "(ctas_per_sm), against the rule (128-key tiles, two per SM at 255 registers)",
    ("relbias-model-fp8-decode-b32-8k", "relbias-deep-fp8-decode-b1-64k"),
    (("rule", {}),
     ("bn64-s2-c4-r128", dict(_G64, num_stages=2, ctas_per_sm=4, gluon_decode_maxnreg=128)),
     ("bn64-s2-c4", dict(_G64, num_stages=2, ctas_per_sm=4)),
     ("bn64-s3-c3-r168", dict(_G64, num_stages=3, ctas_per_sm=3, gluon_decode_maxnreg=168)),
     ("bn64-s2-c3-r168", dict(_G64, num_stages=2, ctas_per_sm=3, gluon_decode_maxnreg=168)),
     ("bn64-s2-c8-r128", dict(_G64, num_stages=2, ctas_per_sm=8, gluon_decode_maxnreg=128))))

SWEEPS["relbias-gluon-decode-10"] = Sweep(
    "relbias", "the Gluon fp8 decode kernel with its value codes read 8 per thread and its bias tile swizzled "
    "(gluon_decode_banks: the shared-memory bank conflicts Nsight Compute found in the converted value stores and "
    "the bias reads) against the rule, on the timed fp8 decode and one 64K sequence",
    ("relbias-model-fp8-decode-b32-8k", "relbias-deep-fp8-decode-b1-64k"),
    (("rule", {}),
     ("banks", dict(gluon_decode_banks=True))))

SWEEPS["mqa-gluon-banks"] = Sweep(
    "mqa_decode", "the Gluon swap-AB kernel with each warp's record loads over 8 slots x 4 blocks (gluon_banks: the "
    "decoded tile's 16-byte stores without the 2-way bank conflicts Nsight Compute found) against the rule, "
    "attention with its merge, 16 / 32 heads x 1-16 tokens x fp8 / nvfp4",
    _mqa_steps((16, 32), (1, 2, 4, 8, 16)),
    (("headpad", dict(kernel="headpad")),
     ("rule", dict(kernel="swapab", gluon=True)),
     ("banks", dict(kernel="swapab", gluon=True, gluon_banks=True))))

SWEEPS["mqa-headpad-stages"] = Sweep(
    "mqa_decode", "the head-padded kernel's tile loop at 1 and 2 software-pipeline stages (headpad_stages; 1: the "
    "record codes loaded into registers, not staged in shared memory by cp.async, whose copies Nsight Compute showed "
    "up to 16-way bank-conflicted) against Triton's default 3, attention with its merge, 16 / 32 / 64 heads x 1-16 "
    "tokens x fp8 / nvfp4",
    _mqa_steps((16, 32, 64), (1, 2, 4, 8, 16)),
    (("rule", dict(kernel="headpad")),
     ("stages1", dict(kernel="headpad", headpad_stages=1)),
     ("stages2", dict(kernel="headpad", headpad_stages=2))))

SWEEPS["mqa-headpad-tile"] = Sweep(
    "mqa_decode", "the head-padded kernel's tile at one pipeline stage: 16 slots per tile, 256 output dims per "
    "program, and both, against the rule (32 slots, 512 dims), attention with its merge, 16 / 32 / 64 heads x 1-16 "
    "tokens x fp8 / nvfp4",
    _mqa_steps((16, 32, 64), (1, 2, 4, 8, 16)),
    (("rule", dict(kernel="headpad")),
     ("bn16", dict(kernel="headpad", headpad_block_n=16)),
     ("dc256", dict(kernel="headpad", out_dc=256)),
     ("bn16-dc256", dict(kernel="headpad", headpad_block_n=16, out_dc=256)),
     ("bn64-dc256", dict(kernel="headpad", headpad_block_n=64, out_dc=256))))

SWEEPS["pdl-sparse_int8"] = Sweep(
    "sparse_int8", "programmatic dependent launch (pdl): the split-K kernel and its merge (and the direct kernel) "
    "each launched as a dependent of the kernel before it, against plain launches; decode rows 1-8 and prefill 128",
    _SP_DEC_CASES + ("sparse_int8-model-prefill-r128-c8k",),
    (("rule", {}), ("pdl", dict(pdl=True))))

SWEEPS["pdl-relbias"] = Sweep(
    "relbias", "programmatic dependent launch (pdl): the decode kernel and its merge, against plain launches",
    _RB_DEC_CASES + ("relbias-model-verify32-8k",),
    (("rule", {}), ("pdl", dict(pdl=True))))

SWEEPS["pdl-mqa"] = Sweep(
    "mqa_decode", "programmatic dependent launch (pdl) over a whole step (record insert, attention, merge: each "
    "kernel a dependent of the one before), against plain launches, for both kernels",
    _mqa_steps((16, 32), (1, 2, 4, 16, 64)),
    (("headpad-step", dict(step=True, kernel="headpad")),
     ("headpad-step-pdl", dict(step=True, kernel="headpad", pdl=True)),
     ("swapab-step", dict(step=True, kernel="swapab")),
     ("swapab-step-pdl", dict(step=True, kernel="swapab", pdl=True))))

SWEEPS["mqa-gluon-regs"] = Sweep(
    "mqa_decode", "the Gluon swap-AB kernel with its registers capped at 128 (gluon_maxnreg: two 8-warp programs per "
    "SM, so 16 tokens take 10 splits of one tile instead of 5 of two, 32 tokens 5 of two instead of 4 of three, 64 "
    "tokens 4 of three instead of 2 of five fused) against the rule, attention with its merge and whole steps, 16 / 32 "
    "heads x 4-64 tokens x fp8 / nvfp4 (at 4 and 8 tokens the plan is unchanged: the cap's own cost); and with half "
    "tiles (gluon_half), whose 8-token launch of 160 programs then fits one wave",
    _mqa_steps((16, 32), (4, 8, 16, 32, 64)),
    (("rule", dict(kernel="swapab", gluon=True)),
     ("regs128", dict(kernel="swapab", gluon=True, gluon_maxnreg=128)),
     ("regs128-half", dict(kernel="swapab", gluon=True, gluon_maxnreg=128, gluon_half=True)),
     ("step-rule", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True)),
     ("step-regs128", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True, gluon_maxnreg=128))))

SWEEPS["mqa-merge-early"] = Sweep(
    "mqa_decode", "the finishing merge with merge_early (the sink, the token's position and its cos / sin read at "
    "entry, under pdl before the wait, instead of after the loop over the splits) against it off (the rule when "
    "the sweep ran at a307526; on by default since), for both "
    "kernels (attention with its merge) and the swap-AB step, 16 / 32 heads x 1-16 tokens x fp8 / nvfp4",
    _mqa_steps((16, 32), (1, 2, 4, 8, 16)),
    (("headpad", dict(kernel="headpad", merge_early=False)),
     ("headpad-early", dict(kernel="headpad", merge_early=True)),
     ("swapab", dict(kernel="swapab", gluon=True, merge_early=False)),
     ("swapab-early", dict(kernel="swapab", gluon=True, merge_early=True)),
     ("step-swapab", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True, merge_early=False)),
     ("step-swapab-early", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True, merge_early=True))))

SWEEPS["mqa-merge-dc-early"] = Sweep(
    "mqa_decode", "the swap-AB kernel's finishing merge in programs of 512 / 256 / 128 output dims, with merge_early "
    "(its own inputs read before the wait): does the rule's 256 up to 128 merged rows still hold, attention with its "
    "merge, 16 / 32 heads x 1-8 tokens x fp8 / nvfp4",
    _mqa_steps((16, 32), (1, 2, 4, 8)),
    (("dc512", dict(kernel="swapab", gluon=True, merge_dc=512)),
     ("dc256", dict(kernel="swapab", gluon=True, merge_dc=256)),
     ("dc128", dict(kernel="swapab", gluon=True, merge_dc=128))))

SWEEPS["mqa-merge-dc-early-2"] = Sweep(
    "mqa_decode", "the same at 16 and 32 tokens (256 to 1024 merged rows): the swap-AB kernel's merge in programs of "
    "512 / 256 output dims, with merge_early",
    _mqa_steps((16, 32), (16, 32)),
    (("dc512", dict(kernel="swapab", gluon=True, merge_dc=512)),
     ("dc256", dict(kernel="swapab", gluon=True, merge_dc=256))))


SWEEPS["mqa-gluon-one-loop"] = Sweep(
    "mqa_decode", "the Gluon swap-AB kernel with both slot lists' tiles in one loop (gluon_one_loop: the MMAs' "
    "descriptors kept in uniform registers, about 250 fewer instructions per compressed tile) against the rule, "
    "attention with its merge and whole steps, 16 / 32 heads x 1-64 tokens x fp8 / nvfp4; head-padded for the ratio "
    "the targets name",
    _mqa_steps((16, 32), (1, 2, 4, 8, 16, 32, 64)),
    (("headpad", dict(kernel="headpad")),
     ("rule", dict(kernel="swapab", gluon=True)),
     ("one-loop", dict(kernel="swapab", gluon=True, gluon_one_loop=True)),
     ("step-rule", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True)),
     ("step-one-loop", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True, gluon_one_loop=True))))


SWEEPS["mqa-gluon-loads-first"] = Sweep(
    "mqa_decode", "the Gluon swap-AB kernel with each tile's four chunks of record loads issued before its first "
    "store (gluon_loads_first: one round trip to memory per tile instead of two) against the rule, attention with "
    "its merge and whole steps, 16 / 32 heads x 1-64 tokens x fp8 / nvfp4; head-padded for the ratio the targets name",
    _mqa_steps((16, 32), (1, 2, 4, 8, 16, 32, 64)),
    (("headpad", dict(kernel="headpad")),
     ("rule", dict(kernel="swapab", gluon=True)),
     ("loads-first", dict(kernel="swapab", gluon=True, gluon_loads_first=True)),
     ("step-rule", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True)),
     ("step-loads-first", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True, gluon_loads_first=True))))


SWEEPS["mqa-gluon-prologue"] = Sweep(
    "mqa_decode", "the Gluon swap-AB kernel with a program's first loads issued before the query is stored "
    "(gluon_prologue 1: every query load before the first of the query's store barriers; 2: the split's first "
    "tile's records too) against the rule (0), attention with its merge and whole steps (there level 2 cannot run: "
    "pdl_early_inputs), 16 / 32 heads x 1-64 tokens x fp8 / nvfp4; head-padded for the ratio the targets name",
    _mqa_steps((16, 32), (1, 2, 4, 8, 16, 32, 64)),
    (("headpad", dict(kernel="headpad")),
     ("rule", dict(kernel="swapab", gluon=True)),
     ("prologue1", dict(kernel="swapab", gluon=True, gluon_prologue=1)),
     ("prologue2", dict(kernel="swapab", gluon=True, gluon_prologue=2)),
     ("step-rule", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True)),
     ("step-prologue1", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True, gluon_prologue=1))))


SWEEPS["mqa-merge-warps"] = Sweep(
    "mqa_decode", "the finishing merge's warps per program (merge_warps) against its rule (4 at the swap-AB kernel's 256 "
    "dims, 8 at the head-padded kernel's 512), both kernels, attention with its merge, 16 / 32 heads x 1-8 tokens x "
    "fp8 / nvfp4",
    _mqa_steps((16, 32), (1, 2, 4, 8)),
    (("headpad", dict(kernel="headpad")),
     ("headpad-mw4", dict(kernel="headpad", merge_warps=4)),
     ("headpad-mw16", dict(kernel="headpad", merge_warps=16)),
     ("rule", dict(kernel="swapab", gluon=True)),
     ("mw2", dict(kernel="swapab", gluon=True, merge_warps=2)),
     ("mw8", dict(kernel="swapab", gluon=True, merge_warps=8))))


SWEEPS["mqa-headpad-ids-early"] = Sweep(
    "mqa_decode", "the head-padded kernel with its first tiles' slot ids loaded before the query (headpad_ids_early) "
    "against its rule, attention with its merge and whole steps, 16 / 32 / 64 heads x 1-16 tokens x fp8 / nvfp4; "
    "swap-AB's rule for the ratio the targets name",
    _mqa_steps((16, 32), (1, 2, 4, 8, 16)) + tuple(f"mqa_decode-step-h64-t{t}-{f}" for f in ("fp8", "nvfp4")
                                                   for t in (1, 4, 16)),
    (("headpad", dict(kernel="headpad")),
     ("headpad-ids-early", dict(kernel="headpad", headpad_ids_early=True)),
     ("swapab", dict(kernel="swapab", gluon=True)),
     ("step-headpad", dict(step=True, kernel="headpad", pdl=True, pdl_early_inputs=True)),
     ("step-headpad-ids-early", dict(step=True, kernel="headpad", pdl=True, pdl_early_inputs=True,
                                     headpad_ids_early=True))))



# the cluster merge's grids: head-padded (the targets' ratio), the rule, and the cluster merge forced, attention and
# whole steps
_MQA_CLUSTER_SETTINGS = (
    ("headpad", dict(kernel="headpad")),
    ("rule", dict(kernel="swapab", gluon=True)),
    ("cluster", dict(kernel="swapab", gluon=True, gluon_cluster=True)),
    ("step-rule", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True)),
    ("step-cluster", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True, gluon_cluster=True)))


SWEEPS["mqa-gluon-cluster"] = Sweep(
    "mqa_decode", "the Gluon swap-AB kernel with each token's splits launched as one thread-block cluster that merges "
    "them after a cluster barrier (gluon_cluster: one launch, no merge kernel) against the rule, attention and whole "
    "steps, 16 / 32 heads x 1-16 tokens x fp8 / nvfp4; head-padded for the ratio the targets name",
    _mqa_steps((16, 32), (1, 2, 4, 8, 16)),
    _MQA_CLUSTER_SETTINGS)


SWEEPS["mqa-gluon-cluster-exact"] = Sweep(
    "mqa_decode", "the cluster merge with one CTA per split up to 8 splits (clusters of 5 for the 5 splits of 16 "
    "tokens, 4 of them merging, where clusters of 8 did not all fit at once) against the rule (the merge launched "
    "apart), attention and whole steps, 16 / 32 heads x 16 / 32 tokens x fp8 / nvfp4; head-padded for the ratio",
    _mqa_steps((16, 32), (16, 32)),
    _MQA_CLUSTER_SETTINGS)


SWEEPS["mqa-gluon-cluster-parts"] = Sweep(
    "mqa_decode", "where the cluster merge's time goes (diagnostics variants, wrong by design: _diag_parts): the rule's "
    "attention without its merge launch, the cluster launch without its barrier and merge, with its barrier but no "
    "merge, and whole, against the rule, 16 / 32 heads x 1 / 4 tokens x fp8 / nvfp4",
    _mqa_steps((16, 32), (1, 4)),
    (("rule", dict(kernel="swapab", gluon=True)),
     ("rule-no-merge", dict(kernel="swapab", gluon=True, _diag_parts=3)),
     ("cluster-launch-only", dict(kernel="swapab", gluon=True, gluon_cluster=True, _diag_parts=1)),
     ("cluster-barrier-only", dict(kernel="swapab", gluon=True, gluon_cluster=True, _diag_parts=2)),
     ("cluster", dict(kernel="swapab", gluon=True, gluon_cluster=True))))


SWEEPS["mqa-gluon-wide"] = Sweep(
    "mqa_decode", "the Gluon swap-AB kernel with 128-slot tiles (gluon_wide: each warpgroup's score product 64 slots, "
    "one softmax and one value product over the 128; a split walks half as many tiles) against the rule, with the "
    "rule's loads first and without, attention with its merge and whole steps, 16 / 32 heads x 1-32 tokens x fp8 / "
    "nvfp4",
    _mqa_steps((16, 32), (1, 2, 4, 8, 16, 32)),
    (("rule", dict(kernel="swapab", gluon=True)),
     ("wide", dict(kernel="swapab", gluon=True, gluon_wide=True)),
     ("wide-loads-apart", dict(kernel="swapab", gluon=True, gluon_wide=True, gluon_loads_first=False)),
     ("step-rule", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True)),
     ("step-wide", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True, gluon_wide=True))))


SWEEPS["mqa-gluon-wide-warps"] = Sweep(
    "mqa_decode", "the Gluon swap-AB kernel's wide tiles (gluon_wide) at 16 warps (four warpgroups: two split the "
    "score product's slots and two its heads, all four the value product and the decode) against 8 warps and the "
    "rule, attention with its merge and whole steps, 16 / 32 heads x 1-32 tokens x fp8 / nvfp4",
    _mqa_steps((16, 32), (1, 2, 4, 8, 16, 32)),
    (("rule", dict(kernel="swapab", gluon=True)),
     ("wide", dict(kernel="swapab", gluon=True, gluon_wide=True)),
     ("wide-w16", dict(kernel="swapab", gluon=True, gluon_wide=True, gluon_warps=16)),
     ("step-rule", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True)),
     ("step-wide-w16", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True, gluon_wide=True,
                            gluon_warps=16))))


SWEEPS["mqa-gluon-w4"] = Sweep(
    "mqa_decode", "the Gluon swap-AB kernel at 4 warps (one warpgroup, two programs per SM: 64-slot tiles, 10 splits a "
    "token in clusters of 16) against the rule (8 warps; 16 tokens: wide tiles, 16 warps over fp8), with the cluster "
    "merge by rule and forced, attention with its merge and whole steps, 16 / 32 heads x 4-16 tokens x fp8 / nvfp4",
    _mqa_steps((16, 32), (4, 8, 16)),
    (("rule", dict(kernel="swapab", gluon=True)),
     ("w4", dict(kernel="swapab", gluon=True, gluon_warps=4)),
     ("w4-cluster", dict(kernel="swapab", gluon=True, gluon_warps=4, gluon_cluster=True)),
     ("step-rule", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True)),
     ("step-w4-cluster", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True, gluon_warps=4,
                              gluon_cluster=True))))


SWEEPS["mqa-gluon-wide-tokens"] = Sweep(
    "mqa_decode", "the Gluon swap-AB kernel's wide tiles (gluon_wide, at 8 and 16 warps) against the rule at token "
    "counts between the benchmarked ones: 12 (64-slot splits of one tile fill one wave) and 20 (they hold two, as at "
    "16), with the merge launched apart and in clusters, 16 / 32 heads x fp8 / nvfp4, attention with its merge",
    _mqa_steps((16, 32), (12, 20)),
    (("rule", dict(kernel="swapab", gluon=True)),
     ("wide", dict(kernel="swapab", gluon=True, gluon_wide=True)),
     ("wide-w16", dict(kernel="swapab", gluon=True, gluon_wide=True, gluon_warps=16)),
     ("wide-cluster", dict(kernel="swapab", gluon=True, gluon_wide=True, gluon_cluster=True)),
     ("wide-w16-cluster", dict(kernel="swapab", gluon=True, gluon_wide=True, gluon_warps=16, gluon_cluster=True))))


SWEEPS["mqa-gluon-wide-cluster-t8"] = Sweep(
    "mqa_decode", "the Gluon swap-AB kernel's wide tiles merged in clusters (gluon_wide, gluon_cluster; at 8 and 16 "
    "warps) against the rule (64-slot tiles, 10 splits, the merge launched apart) at 8 tokens, 16 / 32 heads x fp8 / "
    "nvfp4, attention with its merge and whole steps",
    _mqa_steps((16, 32), (8,)),
    (("rule", dict(kernel="swapab", gluon=True)),
     ("wide-cluster", dict(kernel="swapab", gluon=True, gluon_wide=True, gluon_cluster=True)),
     ("wide-w16-cluster", dict(kernel="swapab", gluon=True, gluon_wide=True, gluon_warps=16, gluon_cluster=True)),
     ("step-rule", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True)),
     ("step-wide-cluster", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True, gluon_wide=True,
                                gluon_cluster=True))))


SWEEPS["mqa-gluon-wide-cutoff"] = Sweep(
    "mqa_decode", "the Gluon swap-AB kernel's wide tiles merged in clusters (gluon_wide, gluon_cluster; asked for, so "
    "8 warps over fp8 too) against the rule at the token counts around the wide-tile rule's 12-20: 10 (the rule: 10 "
    "splits of one 64-slot tile, the merge apart) and 22 / 24 / 26 (5 splits of two 64-slot tiles, the merge apart; "
    "wide: 110 / 120 / 130 CTAs in clusters of 5), 16 / 32 heads x fp8 / nvfp4, attention with its merge",
    _mqa_steps((16, 32), (10, 22, 24, 26)),
    (("rule", dict(kernel="swapab", gluon=True)),
     ("wide-cluster", dict(kernel="swapab", gluon=True, gluon_wide=True, gluon_cluster=True))))


SWEEPS["mqa-gluon-wide-22"] = Sweep(
    "mqa_decode", "the wide-tile rule as extended to 22 tokens (and to 10 over nvfp4 records): wide tiles in clusters "
    "of 5, 16 warps over fp8 by the rule, against 64-slot tiles with the merge apart (the rule before) and wide tiles "
    "at 8 warps, 16 / 32 heads x 22 tokens x fp8 / nvfp4 and 10 tokens x nvfp4, attention with its merge",
    _mqa_steps((16, 32), (22,)) + tuple(f"mqa_decode-step-h{h}-t10-nvfp4" for h in (16, 32)),
    (("rule", dict(kernel="swapab", gluon=True)),
     ("tiles64", dict(kernel="swapab", gluon=True, gluon_wide=False)),
     ("wide-w8", dict(kernel="swapab", gluon=True, gluon_wide=True, gluon_cluster=True))))


SWEEPS["mqa-gluon-cluster-exact-2"] = Sweep(
    "mqa_decode", "the cluster merge's clusters at their exact non-portable size (gluon_cluster_exact: 10 CTAs for "
    "the 10 splits a token of 1-4 tokens, 8 merging) against clusters of 16 (the rule's where it merges in clusters; "
    "6 CTAs a token without a tile), both forced on, attention with its merge and whole steps, 16 / 32 heads x "
    "1-4 tokens x fp8 / nvfp4",
    _mqa_steps((16, 32), (1, 2, 4)),
    (("cluster16", dict(kernel="swapab", gluon=True, gluon_cluster=True)),
     ("exact", dict(kernel="swapab", gluon=True, gluon_cluster=True, gluon_cluster_exact=True)),
     ("step-cluster16", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True, gluon_cluster=True)),
     ("step-exact", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True, gluon_cluster=True,
                         gluon_cluster_exact=True))))


SWEEPS["mqa-gluon-options-t1"] = Sweep(
    "mqa_decode", "the Gluon swap-AB kernel's options re-timed one by one against the rule at 16 heads x 1 token "
    "(the one attention case short of its 2.2x target, over nvfp4 records, and fp8 beside it), since exact "
    "clusters joined the rule: the prologue at levels 1 and 0 (the rule's 2), the record loads' layout with and "
    "without the bank-conflict one (gluon_banks; the rule: on over nvfp4), a tile's record loads chunk by chunk "
    "(gluon_loads_first off), both lists in one loop, the first slot ids not early, nvfp4 decoded through "
    "fp16, clusters of 16 and exact ones (the rule: exact over nvfp4); attention with its merge",
    ("mqa_decode-step-h16-t1-nvfp4", "mqa_decode-step-h16-t1-fp8"),
    (("rule", dict(kernel="swapab", gluon=True)),
     ("prologue1", dict(kernel="swapab", gluon=True, gluon_prologue=1)),
     ("prologue0", dict(kernel="swapab", gluon=True, gluon_prologue=0)),
     ("nobanks", dict(kernel="swapab", gluon=True, gluon_banks=False)),
     ("banks", dict(kernel="swapab", gluon=True, gluon_banks=True)),
     ("loads-apart", dict(kernel="swapab", gluon=True, gluon_loads_first=False)),
     ("one-loop", dict(kernel="swapab", gluon=True, gluon_one_loop=True)),
     ("not-early", dict(kernel="swapab", gluon=True, gluon_early=False)),
     ("e2m1-fp16", dict(kernel="swapab", gluon=True, gluon_e2m1_bits=False)),
     ("cluster16", dict(kernel="swapab", gluon=True, gluon_cluster_exact=False)),
     ("exact", dict(kernel="swapab", gluon=True, gluon_cluster_exact=True))))


SWEEPS["mqa-gluon-one-tile"] = Sweep(
    "mqa_decode", "the Gluon swap-AB kernel compiled without its list loops where every split is one tile of one "
    "list (gluon_one_tile: half the instructions, 177 / 135 registers where 226 / 226) against the rule, 16 / 32 "
    "heads x 1-8 tokens x fp8 / nvfp4 (one 64-slot tile a split at the default lists), attention with its merge and "
    "whole steps",
    _mqa_steps((16, 32), (1, 2, 4, 8)),
    (("rule", dict(kernel="swapab", gluon=True)),
     ("one-tile", dict(kernel="swapab", gluon=True, gluon_one_tile=True)),
     ("step-rule", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True)),
     ("step-one-tile", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True, gluon_one_tile=True))))


SWEEPS["mqa-gluon-t1-combos"] = Sweep(
    "mqa_decode", "the two Gluon swap-AB options that were each within 2 % at 16 heads x 1 token (a tile's record "
    "loads chunk by chunk, gluon_loads_first off: 1.016 over nvfp4; one tile per split compiled as such, "
    "gluon_one_tile: 1.004) together, against the rule and each alone, with the head-padded kernel in the same run "
    "for the paired ratio the 2.2x target is about; 16 heads x 1 / 2 tokens x nvfp4 / fp8, attention with its merge",
    ("mqa_decode-step-h16-t1-nvfp4", "mqa_decode-step-h16-t2-nvfp4", "mqa_decode-step-h16-t1-fp8"),
    (("rule", dict(kernel="swapab", gluon=True)),
     ("loads-apart", dict(kernel="swapab", gluon=True, gluon_loads_first=False)),
     ("one-tile", dict(kernel="swapab", gluon=True, gluon_one_tile=True)),
     ("loads-apart-one-tile", dict(kernel="swapab", gluon=True, gluon_loads_first=False, gluon_one_tile=True)),
     ("headpad", dict(kernel="headpad"))))


SWEEPS["mqa-gluon-two-per-sm-one-tile"] = Sweep(
    "mqa_decode", "two 8-warp programs per SM (registers capped at 128, gluon_maxnreg) now that one tile per split "
    "compiles without its list loops (gluon_one_tile: 135 / 177 registers uncapped over nvfp4 / fp8): at 16 tokens "
    "the split rule then takes 10 splits of one 64-slot tile (160 programs in one wave, prologue level 2) instead of "
    "5 wide tiles, merged in exact clusters of 10 or apart; against the rule (wide tiles in clusters of 5) and the "
    "same 10 one-tile splits at one program per SM (two waves), 16 heads x 12 / 16 tokens x fp8 / nvfp4, attention "
    "with its merge",
    _mqa_steps((16,), (12, 16)),
    (("rule", dict(kernel="swapab", gluon=True)),
     ("two-one-tile-cluster", dict(kernel="swapab", gluon=True, gluon_maxnreg=128, gluon_prologue=2,
                                   gluon_one_tile=True, gluon_cluster=True, gluon_cluster_exact=True)),
     ("two-one-tile-apart", dict(kernel="swapab", gluon=True, gluon_maxnreg=128, gluon_prologue=2,
                                 gluon_one_tile=True, gluon_cluster=False)),
     ("one-tile-10-cluster", dict(kernel="swapab", gluon=True, num_splits=10, gluon_prologue=2,
                                  gluon_one_tile=True, gluon_cluster=True, gluon_cluster_exact=True))))


SWEEPS["mqa-writer-loads-first"] = Sweep(
    "mqa_decode", "whole steps with the record writer's row loads together (writer_loads_first: the slot, position "
    "and latent at once, two dependent round trips instead of three) against the rule, both kernels as in the "
    "bench's step providers, 16 / 32 heads x 1-16 tokens x fp8 / nvfp4",
    _mqa_steps((16, 32), (1, 2, 4, 8, 16)),
    (("step-headpad", dict(step=True, kernel="headpad", pdl=True, pdl_early_inputs=True)),
     ("step-headpad-lf", dict(step=True, kernel="headpad", pdl=True, pdl_early_inputs=True, writer_loads_first=True)),
     ("step-swapab", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True)),
     ("step-swapab-lf", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True, writer_loads_first=True))))


SWEEPS["mqa-writer-release-early"] = Sweep(
    "mqa_decode", "whole steps with the record writer releasing the attention before it waits for the kernel before "
    "it (writer_release_early) against the rule, both kernels as in the bench's step providers, 16 / 32 heads x "
    "1-16 tokens x fp8 / nvfp4; -re: with the attention's early inputs (pdl_early_inputs) as the rule has them, "
    "-re-late: without them (the attention then reads nothing before its wait)",
    _mqa_steps((16, 32), (1, 2, 4, 8, 16)),
    (("step-headpad", dict(step=True, kernel="headpad", pdl=True, pdl_early_inputs=True)),
     ("step-headpad-re", dict(step=True, kernel="headpad", pdl=True, pdl_early_inputs=True,
                              writer_release_early=True)),
     ("step-headpad-re-late", dict(step=True, kernel="headpad", pdl=True, pdl_early_inputs=False,
                                   writer_release_early=True)),
     ("step-swapab", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True)),
     ("step-swapab-re", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=True,
                             writer_release_early=True)),
     ("step-swapab-re-late", dict(step=True, kernel="swapab", pdl=True, pdl_early_inputs=False,
                                  writer_release_early=True))))


def _mqa_call(inp, step=False, kernel=None, **kw):
    """A sweep setting's mqa_decode launch: the attention alone, or (step=True) a whole step (insert + attention)."""
    return _mqa_step(inp, kernel, **kw) if step else _mqa_ours(inp, kernel, **kw)


_CALL = {"relbias": _relbias_ours, "sparse_int8": _sparse_ours, "mqa_decode": _mqa_call}


def sweep_providers(name: str) -> list[Provider]:
    if name not in SWEEPS:
        raise ValueError(f"unknown sweep {name!r}; known: {sorted(SWEEPS)}")
    sw = SWEEPS[name]
    call = _CALL[sw.family]
    out = []
    for label, kw in sw.settings:
        if sw.family == "relbias" and "gluon" not in kw:
            # a relbias setting times the Triton kernels unless it names gluon (None: the rule)
            kw = dict(kw, gluon=False)
        what = "attnkit with " + (", ".join(f"{k}={v}" for k, v in kw.items()) or "the launch rules' defaults")
        out.append(Provider(f"attnkit[{label}]", sw.family, "ours", what, lambda inp, kw=kw: call(inp, **kw)))
    return out
