"""The registered gates. Each family's kernels add their gates here; the peers are gated too, so the
harness is proven on real code and a peer's numbers are only published when its answers are right."""

from __future__ import annotations

import torch

from .. import peers
from ..relbias.config import DECODE_MAX_Q as _DECODE_MAX_Q
from ..testing import shapes
from .registry import Gate, Perturbation, register

RELBIAS_GROUPS = tuple(g for g in shapes.groups("relbias"))


def _poisoned_outputs(q):
    """Output [T, Hq, D] in q's dtype and LSE [T, Hq] fp32, poisoned so an unwritten element shows."""
    from ..testing.compare import poison_
    return (poison_(torch.empty_like(q)),
            poison_(torch.empty(q.shape[:2], dtype=torch.float32, device=q.device)))


# ------------------------------------------------------------------------------------------ relbias


def _flex_subject(inp, perturb=None, case=None):
    # Compiled FlexAttention (what engines run and what `attnkit bench` times) on the benchmarked
    # shapes on a GPU; the unfused eager path elsewhere (each compile costs ~10 s per shape).
    compiled = inp["q"].is_cuda and case is not None and shapes.BENCH in case.tiers
    return peers.relbias_flex(inp, compiled=compiled, perturb=perturb)()


register(Gate(
    name="relbias/flex_score_mod",
    family="relbias",
    groups=RELBIAS_GROUPS,
    subject=_flex_subject,
    what="peer: FlexAttention with the bias table as score_mod and causal/window/varlen as block_mask "
         "(compiled on the benchmarked shapes on a GPU, eager elsewhere)",
    wants_case=True,
    kind="peer",
    perturbations=(
        Perturbation("bias-dropped", "score_mod left out"),
        Perturbation("bias-shifted-kv-block", f"bias read {peers.KV_BLOCK_SHIFT} distances (one KV block) off"),
        Perturbation("window-off-by-one", "window W treated as W + 1", lambda c: c["window"] is not None),
        Perturbation("gqa-mixed", "query head h reads KV head h // group + 1", lambda c: c["Hkv"] > 1),
    ),
))


def relbias_kernel_call(inp, perturb=None, fn=None, force=None, **extra):
    """Call attnkit.relbias.relbias_attention on an input dictionary of attnkit.testing.inputs."""
    from ..relbias import relbias_attention
    fn = fn or relbias_attention
    kw = dict(cu_seqlens_q=inp["cu_seqlens_q"], table=inp["table"], window=inp["window"], beyond=inp["beyond"],
              softmax_scale=inp["softmax_scale"], k_scale=inp.get("k_scale"), v_scale=inp.get("v_scale"), **extra)
    out, lse = _poisoned_outputs(inp["q"])
    if force is not None:
        kw["_force"] = force
    if "k_cache" in inp:
        return fn(inp["q"], k_cache=inp["k_cache"], v_cache=inp["v_cache"], block_table=inp["block_table"],
                  seqused_k=inp["seqused_k"], out=out, lse=lse, _perturb=perturb, **kw)
    return fn(inp["q"], inp["k"], inp["v"], cu_seqlens_k=inp["cu_seqlens_k"], out=out, lse=lse, _perturb=perturb, **kw)


def _other_loops(inp, kernel):
    """The split_loops value the launch rule (attnkit.relbias.config) does NOT pick for this input, so that the
    default gate and this one together run both loop structures on every shape."""
    from ..relbias.config import decode_plan, fwd_config
    q = inp["q"]
    cu = inp["cu_seqlens_q"].cpu()
    max_q = int((cu[1:] - cu[:-1]).max())
    if kernel == "fwd":
        return not fwd_config(q.shape[2], max_q, q.device.type).split_loops
    paged = "k_cache" in inp
    kv = inp["k_cache"] if paged else inp["k"]
    if paged:
        max_k = int(inp["seqused_k"].max())
    else:
        ck = inp["cu_seqlens_k"].cpu()
        max_k = int((ck[1:] - ck[:-1]).max())
    hkv = kv.shape[-2]
    plan = decode_plan(len(cu) - 1, hkv, q.shape[1] // hkv, q.shape[2], max_q, max(1, max_k), 132, q.device.type,
                       paged=paged, fp8=kv.dtype == torch.float8_e4m3fn, extent=inp["table"].shape[1])
    return not plan.split_loops


_RELBIAS_PERTURBATIONS = (
    Perturbation("bias-dropped", "the kernel adds no bias"),
    Perturbation("bias-shifted-kv-block", "the kernel reads the bias one KV block (BLOCK_N distances) off"),
    Perturbation("window-off-by-one", "the kernel's window is W + 1", lambda c: c["window"] is not None),
    Perturbation("gqa-mixed", "query head h reads KV head h // group + 1", lambda c: c["Hkv"] > 1),
)


register(Gate(
    name="relbias/triton_fwd",
    family="relbias",
    groups=RELBIAS_GROUPS,
    subject=lambda inp, perturb=None: relbias_kernel_call(inp, perturb, force="fwd", gluon=False),
    what="kernel: Triton forward kernel (gluon=False; what runs off sm_90, and on sm_90 for D 256, paged and fp8 "
         "caches) as launched by default (mask-free interior tiles), on every relbias shape (the dispatcher sends it "
         "sequences of more than 32 query tokens, and more than 128 query heads per KV head)",
    perturbations=_RELBIAS_PERTURBATIONS,
))

register(Gate(
    name="relbias/triton_fwd_masked",
    family="relbias",
    groups=RELBIAS_GROUPS,
    subject=lambda inp, perturb=None: relbias_kernel_call(inp, perturb, force="fwd", fast_interior=False,
                                                          gluon=False),
    what="kernel: the forward kernel with every tile masked (fast_interior=False; the default takes mask-free "
         "interior tiles, as timed), on every relbias shape",
    perturbations=_RELBIAS_PERTURBATIONS,
))

register(Gate(
    name="relbias/triton_fwd_split",
    family="relbias",
    groups=RELBIAS_GROUPS,
    subject=lambda inp, perturb=None: relbias_kernel_call(inp, perturb, force="fwd", gluon=False,
                                                          split_loops=_other_loops(inp, "fwd")),
    what="kernel: the forward kernel with the other loop structure (option split_loops: branch-free loops where "
         "the rule picks the per-tile branch, and the reverse), on every relbias shape",
    perturbations=_RELBIAS_PERTURBATIONS,
))

def _gluon_fwd_takes(c) -> bool:
    """The cases the Gluon forward kernel takes (attnkit.relbias.config.gluon_fwd_takes)."""
    from ..relbias.config import gluon_fwd_takes
    return gluon_fwd_takes(c["block_size"] is not None, c["kv"] == "fp8", c["D"])


for _name, _kw, _what in (
        ("relbias/gluon_fwd", {}, "kernel: the Gluon forward kernel for sm_90 (TMA key / value ring, warpgroup MMAs, "
         "the bias from each tile's strip starting the score product's accumulator, the value product overlapped "
         "with the next tile's softmax), on every contiguous bf16 / fp16 relbias shape at D 64 and 128 (dispatched "
         "by default on sm_90: gluon_fwd_rule)"),
        ("relbias/gluon_fwd_noacc", dict(gluon_bias_acc=False), "kernel: the Gluon forward kernel with the bias "
         "added to the scores in the softmax (gluon_bias_acc=False), on the same shapes"),
        ("relbias/gluon_fwd_nopipe", dict(gluon_pipe=False, gluon_bias_gather=False), "kernel: the Gluon forward "
         "kernel without the overlap (gluon_pipe=False: both products synchronous) and with one cached table load "
         "per score (gluon_bias_gather=False), on the same shapes"),
        ("relbias/gluon_fwd_ws", dict(gluon_ws=True, block_n=64, gluon_k_release=False), "kernel: the "
         "warp-specialized Gluon forward kernel (a TMA producer warp, two consumer warpgroups sharing each key / value "
         "tile; gluon_ws) over 64-key tiles, without turns, each key slot released with its value slot "
         "(gluon_k_release=False), on the same shapes"),
        ("relbias/gluon_fwd_ws_bn128", dict(gluon_ws=True), "kernel: the warp-specialized Gluon forward kernel with "
         "its defaults: 128-key tiles, its consumers not taking turns, its key slots released after the score "
         "products (as dispatched by gluon_ws_rule on sm_90 for long global sequences at D 128), on the same shapes"),
        ("relbias/gluon_fwd_ws_pairs", dict(gluon_ws=True, gluon_bias_pairs=True), "kernel: the warp-specialized "
         "Gluon forward kernel with its defaults (128-key tiles) and each tile's bias gathered from its strip in "
         "64-bit pairs (gluon_bias_pairs: one shared-memory load per two scores of a row), on the same shapes"),
        ("relbias/gluon_fwd_ws_ahead", dict(gluon_ws=True, gluon_bias_ahead=True), "kernel: the warp-specialized "
         "Gluon forward kernel with its defaults (128-key tiles) and each tile's strip of table values loaded during "
         "the tile before (gluon_bias_ahead), on the same shapes"),
        ("relbias/gluon_fwd_ws_diag", dict(gluon_ws=True, gluon_bias_diag=True), "kernel: the warp-specialized "
         "Gluon forward kernel with its defaults and each tile's bias gathered one load per distinct distance a "
         "thread holds (gluon_bias_diag), on the same shapes"),
        ("relbias/gluon_fwd_ws_unroll", dict(gluon_ws=True, gluon_bias_diag=True, gluon_ws_unroll=True), "kernel: "
         "the warp-specialized Gluon forward kernel with its defaults, the diag gather and its interior loop two "
         "tiles an iteration (gluon_ws_unroll), on the same shapes"),
        ("relbias/gluon_fwd_ws_persistent", dict(gluon_ws=True, gluon_persistent=True, gluon_k_release=False),
         "kernel: the warp-specialized Gluon forward kernel on a persistent grid (gluon_persistent: one program per "
         "SM walking the work items, the ring's phases carried across them), without turns, each key slot released "
         "with its value slot (gluon_k_release=False), on the same shapes"),
        ("relbias/gluon_fwd_k_early", dict(gluon_ws=False, gluon_k_early=True), "kernel: the one-warpgroup Gluon "
         "forward kernel with each key tile issued as soon as the score product two tiles back is done "
         "(gluon_k_early), on the same shapes"),
        ("relbias/gluon_fwd_ws_krel", dict(gluon_ws=True, gluon_k_release=True, gluon_persistent=True,
                                           gluon_pingpong=True), "kernel: the warp-specialized Gluon forward kernel "
         "with its key slots released after the score products (gluon_k_release) and its consumers taking turns "
         "(gluon_pingpong), on the persistent grid, on the same shapes"),
        ("relbias/gluon_fwd_tree", dict(gluon_tree_reduce=True), "kernel: the Gluon forward kernels as dispatched "
         "(the warp-specialized one where gluon_ws_rule picks it) with their row maxima and sums as trees "
         "(gluon_tree_reduce), on the same shapes"),
        ("relbias/gluon_fwd_ws_pingpong", dict(gluon_ws=True, gluon_pingpong=True, block_n=128, gluon_k_release=False),
         "kernel: the warp-specialized Gluon forward kernel with its consumers taking turns (gluon_pingpong) over "
         "128-key tiles, each key slot released with its value slot (gluon_k_release=False), on the same shapes"),
        ("relbias/gluon_fwd_acc_lazy", dict(gluon_bias_acc=True, gluon_lazy_rescale=True), "kernel: the Gluon "
         "forward kernel with the bias starting the score product's accumulator (gluon_bias_acc) and lazy rescaling "
         "(gluon_lazy_rescale), on the same shapes"),
        ("relbias/gluon_fwd_psmem_early", dict(gluon_p_smem=True, gluon_bias_early=True, gluon_lazy_rescale=True),
         "kernel: the Gluon forward kernel with P through shared memory (gluon_p_smem), each tile's bias built before "
         "its scores are waited for (gluon_bias_early) and lazy rescaling, on the same shapes")):
    register(Gate(
        name=_name,
        family="relbias",
        groups=RELBIAS_GROUPS,
        applies=_gluon_fwd_takes,
        subject=lambda inp, perturb=None, _kw=_kw: relbias_kernel_call(inp, perturb, force="fwd", gluon=True, **_kw),
        what=_what,
        needs="sm90",
        perturbations=_RELBIAS_PERTURBATIONS,
    ))

register(Gate(
    name="relbias/triton_decode",
    family="relbias",
    groups=RELBIAS_GROUPS,
    applies=lambda c: max(c["seqlens_q"]) <= _DECODE_MAX_Q,
    subject=lambda inp, perturb=None: relbias_kernel_call(inp, perturb, force="decode", gluon_decode=False),
    what="kernel: Triton split-K decode kernel (query heads of a KV head packed into one tile) + Triton "
         "merge, on every relbias shape with at most 32 query tokens per sequence",
    perturbations=_RELBIAS_PERTURBATIONS + (
        Perturbation("split-lost", "the last split left out of the merge", lambda c: max(c["seqlens_k"]) > 128),
        Perturbation("token-block-dropped", "every token block computes the first block's tokens",
                     lambda c: max(c["seqlens_q"]) * (c["Hq"] // c["Hkv"]) > 128),),
))

register(Gate(
    name="relbias/triton_decode_split",
    family="relbias",
    groups=RELBIAS_GROUPS,
    applies=lambda c: max(c["seqlens_q"]) <= _DECODE_MAX_Q,
    subject=lambda inp, perturb=None: relbias_kernel_call(inp, perturb, force="decode", gluon_decode=False,
                                                          split_loops=_other_loops(inp, "decode")),
    what="kernel: the split-K decode kernel with the other loop structure (option split_loops: branch-free loops "
         "where the rule picks the per-tile branch, and the reverse) + the merge, on every relbias shape with at "
         "most 32 query tokens per sequence",
    perturbations=_RELBIAS_PERTURBATIONS,
))

register(Gate(
    name="relbias/triton_decode_page_tiles",
    family="relbias",
    groups=RELBIAS_GROUPS,
    applies=lambda c: max(c["seqlens_q"]) <= _DECODE_MAX_Q and c["block_size"] is not None,
    subject=lambda inp, perturb=None: relbias_kernel_call(inp, perturb, force="decode", page_tiles=True,
                                                          block_n=min(64, inp["k_cache"].shape[1])),
    what="kernel: the split-K decode kernel over paged caches with one block-table entry per key tile "
         "(page_tiles, block_n = min(64, block size)) + the merge, on every paged relbias shape with at most 32 "
         "query tokens per sequence",
    perturbations=_RELBIAS_PERTURBATIONS,
))

register(Gate(
    name="relbias/triton_decode_fast",
    family="relbias",
    groups=RELBIAS_GROUPS,
    applies=lambda c: max(c["seqlens_q"]) <= _DECODE_MAX_Q,
    subject=lambda inp, perturb=None: relbias_kernel_call(inp, perturb, force="decode", gluon_decode=False, decode_fast_interior=True),
    what="kernel: the split-K decode kernel with its interior key tiles in a loop of their own, unmasked "
         "(decode_fast_interior) + the merge, on every relbias shape with at most 32 query tokens per sequence",
    perturbations=_RELBIAS_PERTURBATIONS,
))

register(Gate(
    name="relbias/triton_fp8_asm",
    family="relbias",
    groups=RELBIAS_GROUPS,
    applies=lambda c: c["kv"] == "fp8" and max(c["seqlens_q"]) <= _DECODE_MAX_Q,
    subject=lambda inp, perturb=None: relbias_kernel_call(inp, perturb, force="decode", fp8_asm_cvt=True),
    what="kernel: the split-K decode kernel with fp8 k, v converted by inline assembly on the codes as loaded "
         "(fp8_asm_cvt) + the merge, on every fp8 relbias shape with at most 32 query tokens per sequence; the "
         "interpreter runs the direct cast there (the same values), so only a compiled run tests the assembly",
    perturbations=_RELBIAS_PERTURBATIONS,
))



def _gluon_decode_takes(c) -> bool:
    """The cases the Gluon fp8 decode kernel takes: an fp8 cache at D 64 or 128, at most 32 query tokens."""
    from ..relbias.config import GLUON_DECODE_MAX_ROWS, GLUON_HEAD_DIMS
    return (c["kv"] == "fp8" and c["D"] in GLUON_HEAD_DIMS and max(c["seqlens_q"]) <= _DECODE_MAX_Q
            and c["Hq"] // c["Hkv"] <= GLUON_DECODE_MAX_ROWS)


for _name, _kw, _what in (
        ("relbias/gluon_decode", {}, "kernel: the Gluon fp8 decode kernel for sm_90 with its defaults (swap-AB tiles: "
         "keys on the MMA's M side, the packed rows on N; code tiles by TMA over contiguous caches, cp.async over "
         "paged ones; keys converted in registers into the score product's operand, values once into shared memory; "
         "the bias copied a ring ahead; products in fp16; 128-key tiles at 8 rows, as dispatched by "
         "gluon_decode_rule; the value codes read 8 per thread and the bias tile swizzled, gluon_decode_banks) + the "
         "merge, on every fp8 relbias shape at D 64 / 128 with at most 32 query tokens"),
        ("relbias/gluon_decode_cvt0", dict(gluon_decode_cvt=0), "kernel: the Gluon fp8 decode kernel with bf16 "
         "products, the codes converted by the direct cast (gluon_decode_cvt=0), on the same shapes"),
        ("relbias/gluon_decode_cvt2", dict(gluon_decode_cvt=2, block_n=64), "kernel: the Gluon fp8 decode kernel "
         "with bf16 products, the codes converted from their bits (gluon_decode_cvt=2), over 64-key tiles, on the "
         "same shapes"),
        ("relbias/gluon_decode_plain", dict(gluon_decode_cvt=1, gluon_decode_kreg=False, gluon_decode_bias_async=False,
                                            gluon_decode_tma=False, gluon_decode_banks=False),
         "kernel: the Gluon fp8 decode kernel without "
         "its options: codes by cp.async, the key tile converted into shared memory, the bias loaded into registers, "
         "bf16 products through fp16 conversions, on the same shapes"),
        ("relbias/gluon_decode_kreg_bn64", dict(gluon_decode_kreg=True, block_n=64, num_stages=4), "kernel: the "
         "Gluon fp8 decode kernel with keys in registers at every row count (gluon_decode_kreg=True) over 64-key "
         "tiles and a ring of 4, on the same shapes"),
        ("relbias/gluon_decode_r128", dict(block_n=64, num_stages=2, ctas_per_sm=4, gluon_decode_kreg=True,
                                           gluon_decode_maxnreg=128), "kernel: the Gluon fp8 decode kernel at 64-key "
         "tiles, a ring of two, registers capped at 128 (gluon_decode_maxnreg) so that four programs fit an SM, "
         "splits for one wave of four, on the same shapes"),
        ("relbias/gluon_decode_nobanks", dict(gluon_decode_banks=False), "kernel: the Gluon fp8 decode kernel with "
         "its value codes read 16 per thread and its bias tile unswizzled (gluon_decode_banks=False, the layout before "
         "c57c966), otherwise as dispatched, on the same shapes"),
        ("relbias/gluon_decode_s2", dict(num_stages=2, num_splits=3), "kernel: the Gluon fp8 decode kernel with a "
         "ring of two tiles and three splits forced (num_stages=2, num_splits=3), on the same shapes")):
    register(Gate(
        name=_name,
        family="relbias",
        groups=RELBIAS_GROUPS,
        applies=_gluon_decode_takes,
        subject=lambda inp, perturb=None, _kw=_kw: relbias_kernel_call(inp, perturb, force="decode",
                                                                       gluon_decode=True, **_kw),
        what=_what,
        needs="sm90",
        perturbations=_RELBIAS_PERTURBATIONS + (
            Perturbation("split-lost", "the last split left out of the merge", lambda c: max(c["seqlens_k"]) > 128),
            Perturbation("token-block-dropped", "every token block computes the first block's tokens",
                         lambda c: max(c["seqlens_q"]) * (c["Hq"] // c["Hkv"]) > 64),),
    ))

# -------------------------------------------------------------------------------------- sparse_int8


def _sparse_torch_subject(inp, perturb=None):
    return peers.sparse_int8_torch(inp, perturb=perturb)()


register(Gate(
    name="sparse_int8/torch_dequant_sdpa",
    family="sparse_int8",
    groups=tuple(shapes.groups("sparse_int8")),
    subject=_sparse_torch_subject,
    what="peer: PyTorch gather + dequantize to bf16 + SDPA",
    kind="peer",
    # the peer's answer at value scale 2^-135 (a bf16 subnormal output) is off by up to 1.4x the bound on a GPU
    # (benchmarks/checks/check-sparse_int8-h200-e3c66a8.jsonl): a known limit of that path, kept out of its gate
    applies=lambda c: c.get("vs_exp", 0) > -126,
    perturbations=(
        Perturbation("candidate-skipped", "the first valid candidate of every row dropped", lambda c: c["N"] > 0),
        Perturbation("key-scale-dropped", "key scales not folded into the query", lambda c: c["N"] > 0),
    ),
))


def sparse_int8_kernel_call(inp, perturb=None, tiles_per_split=None, pipeline=None, **opts):
    from ..sparse_int8 import sparse_int8_attention
    out, lse = _poisoned_outputs(inp["q"])
    return sparse_int8_attention(inp["q"], inp["k_cache"], inp["v_cache"], inp["key_scale"], inp["value_scale"],
                                 inp["indices"], scale=inp["scale"], tiles_per_split=tiles_per_split,
                                 pipeline=pipeline, out=out, lse=lse, _perturb=perturb, **opts)


_SPARSE_PERTURBATIONS = (
    Perturbation("candidate-skipped", "the first candidate of every split skipped", lambda c: c["N"] > 0),
    Perturbation("split-lost", "the last split left out of the merge", lambda c: c["T"] <= 16 and c["N"] > 64),
    Perturbation("value-scale-before-accumulation", "value scale applied to v in FP16 before the accumulation "
                 "(shows on the cases with extreme value scales)", lambda c: bool(c.get("vs_exp"))),
)


def _sparse_other_loop(inp, perturb=None):
    """The candidate loop the default (attnkit.sparse_int8.config.PIPELINE) does not pick, without swap-AB tiles,
    on every shape."""
    from ..sparse_int8.config import PIPELINE
    return sparse_int8_kernel_call(inp, perturb, pipeline=not PIPELINE.default, swap_ab=False, gluon=False)


register(Gate(
    name="sparse_int8/triton",
    family="sparse_int8",
    groups=tuple(shapes.groups("sparse_int8")),
    subject=lambda inp, perturb=None: sparse_int8_kernel_call(inp, perturb, gluon=False),
    what="kernel: Triton sparse INT8 attention as dispatched off sm_90, or with gluon=False (direct once the rows "
         "fill the GPU, split-K + merge for fewer)",
    perturbations=_SPARSE_PERTURBATIONS,
))

register(Gate(
    name="sparse_int8/triton_other_loop",
    family="sparse_int8",
    groups=tuple(shapes.groups("sparse_int8")),
    subject=_sparse_other_loop,
    what="kernel: Triton sparse INT8 attention with the candidate loop the default does not take (the plain loop "
         "pipelined by Triton, or the hand-written index prefetch), as dispatched otherwise",
    perturbations=(_SPARSE_PERTURBATIONS[0], _SPARSE_PERTURBATIONS[2]),  # one split per row here: none lost
))

register(Gate(
    name="sparse_int8/triton_swap_ab",
    family="sparse_int8",
    groups=tuple(shapes.groups("sparse_int8")),
    subject=lambda inp, perturb=None: sparse_int8_kernel_call(inp, perturb, swap_ab=True, qk_int8=True, gluon=False),
    what="kernel: Triton sparse INT8 attention with swap-AB tiles (candidates on M, heads on N) and the scores "
         "from integer MMAs of the codes against the query's int8 digits (the split-bf16 query where a row's "
         "digits miss the budget), as dispatched otherwise",
    perturbations=_SPARSE_PERTURBATIONS,
))


def _sparse_gluon_gate(name, what, **opts):
    """A gate of the sparse_int8 Gluon kernel (sm_90, int8 caches) forced on, with opts, on every shape family."""
    register(Gate(
        name=name,
        family="sparse_int8",
        groups=tuple(shapes.groups("sparse_int8")),
        applies=lambda c: c.get("cache_dtype", "int8") != "bf16",  # an int8 cache's kernel
        subject=lambda inp, perturb=None: sparse_int8_kernel_call(inp, perturb, gluon=True, **opts),
        what=what,
        needs="sm90",
        perturbations=_SPARSE_PERTURBATIONS,
    ))


_sparse_gluon_gate(
    "sparse_int8/gluon",
    "kernel: Gluon swap-AB integer-score tile for sm_90 (key codes copied straight into shared memory for one "
    "integer warpgroup MMA against the query's four digits, value codes loaded into registers and converted there "
    "for one MMA against both probability halves (gluon_v_regs, the rule); the split-bf16 query where a row's digits "
    "miss the budget), direct or split-K + merge as planned, on every shape (the path dispatched on sm_90 at D = 256 "
    "from 2 rows)")
_sparse_gluon_gate(
    "sparse_int8/gluon_overlap",
    "kernel: the Gluon kernel with gluon_overlap (each tile's score product issued before its value codes are "
    "converted, waited for after), direct or split-K + merge as planned, on every shape", gluon_overlap=True)
_sparse_gluon_gate(
    "sparse_int8/gluon_v_regs",
    "kernel: the Gluon kernel with gluon_v_regs (the value product's operand in registers, converted there from "
    "the raw codes), direct or split-K + merge as planned, on every shape", gluon_v_regs=True)
_sparse_gluon_gate(
    "sparse_int8/gluon_fallback",
    "kernel: the Gluon kernel with every program on its one fallback, the split-bf16 query (a zero budget: what a "
    "program whose query digits miss the budget runs), direct or split-K + merge as planned, on every shape",
    _qk_int8_budget=0.0)
_sparse_gluon_gate(
    "sparse_int8/gluon_value_tile",
    "kernel: the Gluon kernel with gluon_v_regs off (the value codes converted into a bf16 tile in shared memory, "
    "the rule's form before gluon_v_regs), direct or split-K + merge as planned, on every shape", gluon_v_regs=False)

register(Gate(
    name="sparse_int8/triton_split1",
    family="sparse_int8",
    groups=tuple(shapes.groups("sparse_int8")),
    subject=lambda inp, perturb=None: sparse_int8_kernel_call(inp, perturb, tiles_per_split=1, gluon=False),
    what="kernel: Triton sparse INT8 attention forced to one candidate tile per split (every split boundary "
         "exercised, trailing splits empty where N is not a multiple of the tile)",
    perturbations=(
        Perturbation("split-lost", "the last split left out of the merge", lambda c: c["N"] > 64),
    ),
))


# --------------------------------------------------------------------------------------- mqa_decode


def _mqa_torch_subject(inp, perturb=None):
    return peers.mqa_decode_torch(inp, perturb=perturb)()


register(Gate(
    name="mqa_decode/torch_dequant_sdpa",
    family="mqa_decode",
    groups=tuple(shapes.groups("mqa_decode")),
    subject=_mqa_torch_subject,
    what="peer: PyTorch record gather + dequantize to bf16 + SDPA with the sink as a zero-valued key",
    kind="peer",
    perturbations=(
        Perturbation("sink-dropped", "the attention sink left out of the denominator"),
        Perturbation("rope-not-undone", "output RoPE dims not rotated back"),
        Perturbation("scale-block-off-by-one", "each block reads its neighbour's scale"),
    ),
))


def mqa_headpad_call(inp, perturb=None, num_splits=None, kernel="headpad", **extra):
    from ..mqa_decode import mqa_decode_attention
    return mqa_decode_attention(inp["q"], inp["swa_cache"], inp["comp_cache"], inp["swa_idx"], inp["comp_idx"],
                                inp["positions"], inp["cos_sin"], inp["sink"], inp["num_heads"],
                                inp["softmax_scale"], inp["comp_format"], num_splits=num_splits, kernel=kernel,
                                _perturb=perturb, **extra)


_MQA_PERTURBATIONS = (
    Perturbation("sink-dropped", "the attention sink left out of the merge"),
    Perturbation("slot-tile-lost", "the first slot tile of every split skipped"),
    Perturbation("rope-not-undone", "the output's RoPE dims not rotated back"),
    Perturbation("scale-block-off-by-one", "each fp8 block reads its neighbour's scale"),
)

register(Gate(
    name="mqa_decode/triton_headpad",
    family="mqa_decode",
    groups=tuple(shapes.groups("mqa_decode")),
    subject=mqa_headpad_call,
    what="kernel: Triton head-padded decode (heads on M padded to 64, split over slot tiles; q rotated in the "
         "kernel; the finishing merge adds the sink and rotates the output back)",
    perturbations=_MQA_PERTURBATIONS,
))


register(Gate(
    name="mqa_decode/triton_swapab",
    family="mqa_decode",
    groups=tuple(shapes.groups("mqa_decode")),
    applies=lambda c: c["H"] in (16, 32),
    subject=lambda inp, perturb=None: mqa_headpad_call(inp, perturb, kernel="swapab", gluon=False),
    what="kernel: Triton swap-AB decode (slots on M, the 16 or 32 live heads on N), same merge and RoPE as "
         "the head-padded kernel",
    perturbations=_MQA_PERTURBATIONS,
))


register(Gate(
    name="mqa_decode/gluon_swapab",
    family="mqa_decode",
    groups=tuple(shapes.groups("mqa_decode")),
    applies=lambda c: c["H"] in (16, 32),
    subject=lambda inp, perturb=None: mqa_headpad_call(inp, perturb, kernel="swapab", gluon=True),
    what="kernel: Gluon swap-AB decode for sm_90 as dispatched (64-slot tiles, each record value decoded once into "
         "shared memory, nvfp4 codes from their bits, warpgroup MMAs), same partials, merge and RoPE as the Triton "
         "swap-AB kernel",
    needs="sm90",
    perturbations=_MQA_PERTURBATIONS,
))

# the Gluon swap-AB kernel with one option forced on every 16 / 32-head shape
for _name, _kw, _what in (
        ("mqa_decode/gluon_swapab_fused", dict(gluon_fused=True),
         "kernel: the Gluon swap-AB decode with each token's splits merged by its last program (gluon_fused; the "
         "rule where a token has at most two splits), sink and RoPE undone there, on every 16 / 32-head shape"),
        ("mqa_decode/gluon_swapab_early", dict(gluon_early=True),
         "kernel: the Gluon swap-AB decode with the first tiles' slot ids loaded before the query (gluon_early) + the "
         "finishing merge as dispatched, on every 16 / 32-head shape"),
        ("mqa_decode/gluon_swapab_half", dict(gluon_half=True),
         "kernel: the Gluon swap-AB decode with half tiles (gluon_half: 32 live slots in the 64-row MMA tile, the "
         "other rows zero; forced on every 16 / 32-head shape) + the finishing merge"),
        ("mqa_decode/gluon_swapab_banks", dict(gluon_banks=True),
         "kernel: the Gluon swap-AB decode with each warp's record loads over 8 slots x 4 blocks (gluon_banks; "
         "forced on every 16 / 32-head shape) + the finishing merge"),
        ("mqa_decode/gluon_swapab_one_loop", dict(gluon_one_loop=True),
         "kernel: the Gluon swap-AB decode with both slot lists' tiles in one loop (gluon_one_loop; forced on every "
         "16 / 32-head shape) + the finishing merge"),
        ("mqa_decode/gluon_swapab_loads_first", dict(gluon_loads_first=True),
         "kernel: the Gluon swap-AB decode with each tile's record loads issued before its first store "
         "(gluon_loads_first; forced on every 16 / 32-head shape) + the finishing merge"),
        ("mqa_decode/gluon_swapab_prologue2", dict(gluon_prologue=2),
         "kernel: the Gluon swap-AB decode with the query's loads and the split's first tile's record loads issued "
         "before the query is stored (gluon_prologue=2; forced on every 16 / 32-head shape) + the finishing merge"),
        ("mqa_decode/gluon_swapab_cluster", dict(gluon_cluster=True),
         "kernel: the Gluon swap-AB decode with each token's splits run as one thread-block cluster that merges them "
         "after a cluster barrier (gluon_cluster; one launch, forced on every 16 / 32-head shape)"),
        ("mqa_decode/gluon_swapab_cluster_exact", dict(gluon_cluster=True, gluon_cluster_exact=True),
         "kernel: the Gluon swap-AB decode's cluster merge with its clusters at their exact non-portable size "
         "(gluon_cluster, gluon_cluster_exact: 9-15 splits a token one CTA per split, 8 merging; forced on every "
         "16 / 32-head shape)"),
        ("mqa_decode/gluon_swapab_wide", dict(gluon_wide=True),
         "kernel: the Gluon swap-AB decode with 128-slot tiles (gluon_wide: each warpgroup's score product 64 of the "
         "slots, one softmax and one value product over the 128; forced on every 16 / 32-head shape) + its merge as "
         "dispatched"),
        ("mqa_decode/gluon_swapab_wide16", dict(gluon_wide=True, gluon_warps=16),
         "kernel: the Gluon swap-AB decode with 128-slot tiles at 16 warps (gluon_wide, gluon_warps=16: two "
         "warpgroups split the score product's slots, two its heads; forced on every 16 / 32-head shape) + its merge "
         "as dispatched"),
        ("mqa_decode/gluon_swapab_w4_cluster", dict(gluon_warps=4, gluon_cluster=True),
         "kernel: the Gluon swap-AB decode at 4 warps (one warpgroup, two programs per SM) with each token's splits "
         "run as one thread-block cluster that merges them (gluon_warps=4, gluon_cluster; forced on every 16 / "
         "32-head shape)"),
        ("mqa_decode/gluon_swapab_regs128", dict(gluon_maxnreg=128),
         "kernel: the Gluon swap-AB decode with its registers capped at 128 (gluon_maxnreg: two programs per SM, the "
         "split rule counting them; forced on every 16 / 32-head shape) + the finishing merge")):
    register(Gate(
        name=_name,
        family="mqa_decode",
        groups=tuple(shapes.groups("mqa_decode")),
        applies=lambda c: c["H"] in (16, 32),
        subject=lambda inp, perturb=None, _kw=_kw: mqa_headpad_call(inp, perturb, kernel="swapab", gluon=True, **_kw),
        what=_what,
        needs="sm90",
        perturbations=_MQA_PERTURBATIONS,
    ))

register(Gate(
    name="mqa_decode/gluon_swapab_e2m1_fp16",
    family="mqa_decode",
    groups=tuple(shapes.groups("mqa_decode")),
    applies=lambda c: c["H"] in (16, 32) and c["fmt"] == "nvfp4",
    subject=lambda inp, perturb=None: mqa_headpad_call(inp, perturb, kernel="swapab", gluon=True,
                                                       gluon_e2m1_bits=False),
    what="kernel: the Gluon swap-AB decode with nvfp4 codes decoded through fp16 and fp32 (gluon_e2m1_bits=False; "
         "the default decodes them from their bits), on the nvfp4 shapes",
    needs="sm90",
    perturbations=_MQA_PERTURBATIONS,
))


def _writer_latents(inp):
    lat = inp["q"].reshape(-1, inp["q"].shape[-1])[:48].contiguous()
    pos = (torch.arange(lat.shape[0], device=lat.device) * 37) % inp["cos_sin"].shape[0]
    return lat, pos


def _writer_subject(inp, perturb=None):
    from ..mqa_decode import mqa_write_records
    from ..mqa_decode.interface import RECORD_BYTES
    lat, pos = _writer_latents(inp)
    fmt = inp["comp_format"]
    cache = torch.zeros(1, 64, (RECORD_BYTES[fmt] + 15) // 16 * 16, dtype=torch.uint8, device=lat.device)
    slots = torch.randperm(64, generator=torch.Generator().manual_seed(0))[: lat.shape[0]].to(lat.device)
    mqa_write_records(lat, pos, inp["cos_sin"], slots, cache, fmt, _perturb=perturb)
    return cache.view(64, -1)[slots.long(), : RECORD_BYTES[fmt]], None


def _writer_oracle(inp):
    from ..reference.mqa_decode import mqa_write_ref
    lat, pos = _writer_latents(inp)
    return mqa_write_ref(lat.cpu(), pos.cpu(), inp["cos_sin"].cpu(), inp["comp_format"]).to(lat.device), None


register(Gate(
    name="mqa_decode/triton_writer",
    family="mqa_decode",
    groups=tuple(shapes.groups("mqa_decode")),
    subject=_writer_subject,
    oracle=_writer_oracle,
    exact=True,
    what="kernel: Triton record writer (fp8 / nvfp4), byte-exact against the reference writer on the case's "
         "query rows as latents",
    perturbations=(Perturbation("rope-not-applied", "RoPE dims stored unrotated"),),
))


# ----------------------------------------------------------------------------------- shared split-K


def _merge_subject(inp, perturb=None):
    from ..splitk import merge_partials
    return merge_partials(inp["m"], inp["l"], inp["acc"], torch.float32, _lose_split=perturb == "split-lost")


register(Gate(
    name="merge/triton",
    family="merge",
    groups=("merge-splitk",),
    subject=_merge_subject,
    what="kernel: Triton split-K merge (attnkit.splitk.merge_partials)",
    perturbations=(Perturbation("split-lost", "the last split left out of the merge", lambda c: c["S"] > 1),),
    out_dtype=torch.float32,
))
