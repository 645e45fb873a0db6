"""sparse_int8 kernel: interface, options, determinism, custom op (the gate covers the shape families)."""

import pytest
import torch

import attnkit.ops  # noqa: F401
from attnkit.gate.specs import sparse_int8_kernel_call
from attnkit.reference import sparse_int8_ref
from attnkit.sparse_int8 import sparse_int8_attention
from attnkit.sparse_int8.config import BLOCK_N, plan
from attnkit.testing import compare, shapes, unwritten
from attnkit.testing.baselines import sparse_int8_baseline
from attnkit.testing.inputs import make_inputs
from attnkit.testing.opcheck import check_custom_op


def _inp(device, case="sparse_int8-decode-r3-g6-n509-perhead", seed=0):
    return make_inputs(shapes.get(case), device, seed)


def _args(i):
    return i["q"], i["k_cache"], i["v_cache"], i["key_scale"], i["value_scale"], i["indices"]


def test_split_plan_is_a_pure_function():
    p = plan(1, 2, 12, 2048, 132, None, 128)
    assert not p.direct and p.num_splits * p.cands_per_split >= 2048 and p.num_splits <= 2048 // BLOCK_N
    assert plan(128, 2, 12, 2048, 132, None, 128).direct
    assert plan(8, 2, 12, 8192, 132, 1, 128).num_splits == 128  # the override: one 64-candidate tile per split
    assert plan(8, 2, 12, 8192, 132, 1, 256).num_splits == 256  # D = 256 tiles hold 32 candidates
    assert plan(1, 1, 1, 0, 132, None, 64).num_splits == 1
    # a short prefill chunk (32 rows x 2 KV heads = 64 programs) still splits to fill the GPU; 66 rows do not
    assert not plan(32, 2, 12, 2048, 132, None, 256).direct and plan(32, 2, 12, 2048, 132, None, 256).num_splits == 3
    assert plan(66, 2, 12, 2048, 132, None, 256).direct
    assert plan(8, 2, 12, 2048, 132, None, 256, 16, 4).block_n == 16 and plan(8, 2, 12, 2048, 132, None, 256, 16, 4).num_warps == 4
    with pytest.raises(ValueError, match="block_n"):
        plan(8, 2, 12, 2048, 132, None, 256, 48)
    # the timed D = 256 tile rule: prefill 4 warps, decode 8 warps below 8 rows, 4 warps and 3 stages from 8
    assert plan(2048, 2, 12, 2048, 132, None, 256).num_warps == 4 and plan(2048, 2, 12, 2048, 132, None, 256).direct
    assert (plan(1, 2, 12, 2048, 132, None, 256).num_warps, plan(1, 2, 12, 2048, 132, None, 256).num_stages) == (8, 2)
    assert (plan(8, 2, 12, 2048, 132, None, 256).num_warps, plan(8, 2, 12, 2048, 132, None, 256).num_stages) == (4, 3)
    assert plan(8, 2, 12, 2048, 132, None, 256, num_warps=8, num_stages=1).num_stages == 1  # options win
    # the split target: two programs per SM double the decode splits, and a 66-row chunk splits again
    assert plan(1, 2, 12, 2048, 132, None, 256, ctas_per_sm=2).num_splits == 64  # capped at the tile count
    assert plan(1, 2, 12, 8192, 132, None, 256, ctas_per_sm=2).num_splits == 128  # 256 tiles, 2 per split
    assert plan(1, 2, 12, 8192, 132, None, 256).num_splits == 64  # one program per SM: 4 per split
    assert not plan(66, 2, 12, 2048, 132, None, 256, ctas_per_sm=2).direct
    # swap-AB tiles with integer scores: the direct path at D = 256 over an int8 cache (64 candidates, 4 warps)
    p = plan(2048, 2, 12, 2048, 132, None, 256)
    assert (p.swap_ab, p.qk_int8, p.block_n, p.num_warps) == (True, True, 64, 4)
    assert not plan(2048, 2, 12, 2048, 132, None, 256, int8_cache=False).swap_ab  # bf16 caches: the rule above
    assert not plan(8, 2, 12, 2048, 132, None, 256).swap_ab and not plan(2048, 2, 12, 2048, 132, None, 128).swap_ab
    p = plan(2048, 2, 12, 2048, 132, None, 256, swap_ab=False)
    assert (p.swap_ab, p.qk_int8, p.block_n) == (False, False, 32)
    p = plan(8, 2, 12, 2048, 132, None, 256, swap_ab=True)  # forced: the split-bf16 query unless asked
    assert (p.swap_ab, p.qk_int8, p.block_n) == (True, False, 64)
    assert plan(8, 2, 12, 2048, 132, None, 256, swap_ab=True, qk_int8=True).qk_int8
    with pytest.raises(ValueError, match="qk_int8"):
        plan(2048, 2, 12, 2048, 132, None, 256, swap_ab=False, qk_int8=True)


@pytest.mark.parametrize("tps,prefetch,bn,warps,extra", [
    (1, True, None, None, {}), (2, True, None, None, {}), (3, True, None, None, {}), (64, True, None, None, {}),
    (3, False, None, None, {}), (64, False, None, None, {}), (None, False, 16, 4, {}), (2, False, 16, 8, {}),
    (None, False, 16, 4, dict(num_stages=3, ctas_per_sm=3)), (None, False, None, None, dict(num_stages=1)),
    (2, False, None, None, dict(merge_block_d=16))])
def test_forced_tiles_per_split_with_empty_splits(tps, prefetch, bn, warps, extra, device):
    i = _inp(device)
    out, lse = sparse_int8_attention(*_args(i), scale=i["scale"], tiles_per_split=tps, prefetch=prefetch, block_n=bn,
                                     num_warps=warps, **extra)
    ref, ref_lse = sparse_int8_ref(*_args(i), scale=i["scale"])
    base, base_lse = sparse_int8_baseline(i)
    assert unwritten(out) == 0
    c = compare(out, ref, base, lse=lse, lse_ref=ref_lse, lse_base=base_lse)
    assert c.ok, c.reason


def test_deterministic_run_to_run(device):
    i = _inp(device)
    a = sparse_int8_kernel_call(i)
    b = sparse_int8_kernel_call(i)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_out_of_range_index_is_an_error_and_never_read(device):
    i = _inp(device, "sparse_int8-decode-r1-g4-n65")
    bad = i["indices"].clone()
    bad[0, 3] = i["k_cache"].shape[1] + 5
    with pytest.raises(ValueError, match="indices: must lie in"):
        sparse_int8_attention(*_args(dict(i, indices=bad)), scale=i["scale"])
    # without validation the entry is skipped like -1 (never read)
    skipped = i["indices"].clone()
    skipped[0, 3] = -1
    a, _ = sparse_int8_attention(*_args(dict(i, indices=bad)), scale=i["scale"], validate=False)
    b, _ = sparse_int8_attention(*_args(dict(i, indices=skipped)), scale=i["scale"])
    assert torch.equal(a, b)


@pytest.mark.parametrize("prefill", [False, True])
def test_an_empty_cache_gives_empty_rows(device, prefill):
    """A cache of no rows (C = 0) with every slot -1: the oracle and the kernel give the empty row (0, LSE -inf)."""
    i = _inp(device, "sparse_int8-prefill-r140-g4-n20-direct" if prefill else "sparse_int8-decode-r3-g6-n509-perhead")
    empty = dict(i, k_cache=i["k_cache"][:, :0], v_cache=i["v_cache"][:, :0], indices=torch.full_like(i["indices"], -1))
    ref_out, ref_lse = sparse_int8_ref(*_args(empty), scale=i["scale"])
    assert not ref_out.any() and bool((ref_lse == float("-inf")).all())
    out, lse = sparse_int8_attention(*_args(empty), scale=i["scale"])
    assert not out.any() and bool((lse == float("-inf")).all())


def test_bad_input_raises_naming_the_argument(device):
    i = _inp(device, "sparse_int8-decode-r1-g4-n65")
    q, kc, vc, ks, vs, idx = _args(i)
    for args, match in [((q.half(), kc, vc, ks, vs, idx), "q:"), ((q, kc.float(), vc, ks, vs, idx), "k_cache:"),
                        ((q, kc, vc, ks[:, :3], vs, idx), "key_scale:"), ((q, kc, vc, ks, vs, idx.long()), "indices:"),
                        ((q[..., :32].contiguous(), kc, vc, ks, vs, idx), "q:")]:
        with pytest.raises(ValueError, match=match):
            sparse_int8_attention(*args)
    with pytest.raises(ValueError, match="scale"):
        sparse_int8_attention(q, kc, vc, ks, vs, idx, scale=float("nan"))
    inf_vs = vs.clone()
    inf_vs[0, 0] = float("inf")
    with pytest.raises(ValueError, match="value_scale"):
        sparse_int8_attention(q, kc, vc, ks, inf_vs, idx)


def test_options_from_the_environment(device, monkeypatch):
    i = _inp(device, "sparse_int8-decode-r1-g4-n65")
    monkeypatch.setenv("ATTNKIT_SPARSE_INT8_TILES_PER_SPLIT", "01")
    with pytest.raises(ValueError, match="ATTNKIT_SPARSE_INT8_TILES_PER_SPLIT"):
        sparse_int8_attention(*_args(i))
    monkeypatch.setenv("ATTNKIT_SPARSE_INT8_TILES_PER_SPLIT", "1")
    sparse_int8_attention(*_args(i))  # accepted
    sparse_int8_attention(*_args(i), tiles_per_split=2)  # the argument wins
    monkeypatch.setenv("ATTNKIT_SPARSE_INT8_STAGES", "5")
    with pytest.raises(ValueError, match="ATTNKIT_SPARSE_INT8_STAGES"):
        sparse_int8_attention(*_args(i))
    monkeypatch.delenv("ATTNKIT_SPARSE_INT8_STAGES")
    monkeypatch.setenv("ATTNKIT_SPARSE_INT8_PV_SPLIT", "true")
    with pytest.raises(ValueError, match="ATTNKIT_SPARSE_INT8_PV_SPLIT"):
        sparse_int8_attention(*_args(i))


def test_sparse_int8_custom_op(device):
    i = _inp(device, "sparse_int8-decode-r1-g4-n65", seed=2)
    args = [*_args(i), float(i["scale"]), 0]

    def refresh(a):
        a[0].copy_(a[0] * 0.5)

    assert check_custom_op(torch.ops.attnkit.sparse_int8, args, refresh=refresh)["opcheck"]


@pytest.mark.parametrize("case", ["sparse_int8-decode-r16-g16-n8192-strided", "sparse_int8-prefill-r128-g12-n2048"])
def test_sparse_int8_custom_op_where_the_rule_picks_gluon(device, case):
    """The op as an engine captures it, at D = 256 with 4+ rows (split-K and direct), where the rule runs the Gluon
    kernel on an sm_90 GPU: opcheck, torch.compile, CUDA-graph capture and replay after the inputs change."""
    if device != "cuda":
        pytest.skip("D = 256 with 2048+ candidates is too slow for the interpreter (not a pass)")
    from attnkit._runtime import gluon_runs
    i = _inp(device, case, seed=1)
    if gluon_runs(torch.device("cuda")):  # the op took the Gluon kernel: the same bits as asking for it
        op_out, op_lse = torch.ops.attnkit.sparse_int8(*_args(i), float(i["scale"]), 0)
        g_out, g_lse = sparse_int8_attention(*_args(i), scale=float(i["scale"]), gluon=True)
        assert torch.equal(op_out, g_out) and torch.equal(op_lse, g_lse)
    args = [*_args(i), float(i["scale"]), 0]

    def refresh(a):
        a[0].copy_(a[0] * 0.5)

    ran = check_custom_op(torch.ops.attnkit.sparse_int8, args, refresh=refresh)
    assert ran["opcheck"] and ran["cuda_graph"] is True


def test_heads_must_be_a_multiple(device):
    i = _inp(device)  # Hq = 12, Hkv = 2
    with pytest.raises(ValueError, match="k_cache: Hq=3"):
        sparse_int8_attention(i["q"][:, :3].contiguous(), *_args(i)[1:])


def test_gluon_rule_and_its_errors(device):
    """The Gluon kernel is the rule's swap-AB integer-score tile wherever it can run (gluon_ok), and only there;
    asking for it where it cannot run, or with an option it does not take, is a ValueError naming the option."""
    p = plan(2048, 2, 12, 2048, 132, None, 256, gluon_ok=True)
    assert p.gluon and (p.swap_ab, p.qk_int8, p.block_n, p.num_warps) == (True, True, 64, 4)
    assert not plan(2048, 2, 12, 2048, 132, None, 256).gluon  # cannot run: the Triton tile
    assert plan(8, 2, 12, 2048, 132, None, 256, gluon_ok=True).gluon  # splits from 2 rows
    assert plan(4, 2, 12, 2048, 132, None, 256, gluon_ok=True).gluon
    assert plan(2, 2, 12, 2048, 132, None, 256, gluon_ok=True).gluon
    assert not plan(1, 2, 12, 2048, 132, None, 256, gluon_ok=True).gluon  # 1 row: the Triton rule
    # the split target: two programs per SM for the Gluon kernel's decode splits from 8 rows, one elsewhere (and on
    # the Triton kernel); an explicit ctas_per_sm beats it
    splits = lambda T, **kw: plan(T, 2, 12, 2048, 132, None, 256, **kw).num_splits  # noqa: E731
    # (32 tiles of 64 candidates, split into about target x 132 / (T x 2) parts of whole tiles)
    assert splits(8, gluon_ok=True) == 16 and splits(16, gluon_ok=True) == 8
    assert splits(4, gluon_ok=True) == 16 and splits(8, gluon_ok=True, ctas_per_sm=1) == 8
    assert splits(8, gluon_ok=True, gluon=False) == 8 and splits(8) == 8
    assert not plan(2048, 2, 12, 2048, 132, None, 128, gluon_ok=True).gluon  # D < 256: not timed
    assert not plan(2048, 2, 12, 2048, 132, None, 256, gluon_ok=True, int8_cache=False).gluon
    assert not plan(2048, 2, 12, 2048, 132, None, 256, gluon_ok=True, num_warps=8).gluon  # an option it cannot take
    assert not plan(2048, 2, 12, 2048, 132, None, 256, gluon_ok=True, swap_ab=False).gluon
    assert not plan(2048, 2, 12, 2048, 132, None, 256, gluon_ok=True, gluon=False).gluon
    p = plan(8, 2, 12, 2048, 132, None, 64, gluon_ok=True, gluon=True)  # forced: the tile it is, any D, split-K
    assert p.gluon and (p.swap_ab, p.qk_int8, p.block_n, p.num_warps, p.direct) == (True, True, 64, 4, False)
    for kw, match in ((dict(), "sm_90"), (dict(gluon_ok=True, swap_ab=False), "swap_ab"),
                      (dict(gluon_ok=True, qk_int8=False), "qk_int8"), (dict(gluon_ok=True, block_n=32), "64"),
                      (dict(gluon_ok=True, num_warps=8), "4 warps")):
        with pytest.raises(ValueError, match="gluon: .*" + match):
            plan(8, 2, 12, 2048, 132, None, 256, gluon=True, **kw)
    i = _inp(device, "sparse_int8-decode-r1-g4-n65")
    with pytest.raises(ValueError, match="gluon"):
        sparse_int8_attention(*_args(i), gluon=True, pipeline=True)
    with pytest.raises(ValueError, match="pv_split"):
        sparse_int8_attention(*_args(i), gluon=True, pv_split=False)
    from attnkit._runtime import gluon_runs
    if not gluon_runs(torch.device(device)):
        with pytest.raises(ValueError, match="gluon: the Gluon kernel runs on CUDA sm_90"):
            sparse_int8_attention(*_args(i), gluon=True)


@pytest.mark.cuda
@pytest.mark.parametrize("case", ["sparse_int8-decode-r3-g6-n509-perhead", "sparse_int8-prefill-r140-g4-n20-direct",
                                  "sparse_int8-decode-r16-g16-n8192-strided", "sparse_int8-prefill-r128-g12-n2048",
                                  "sparse_int8-edge-n0", "sparse_int8-edge-all-invalid-rows",
                                  "sparse_int8-model-prefill-r2048-q8x", "sparse_int8-matrix-g12-n2112-r128"])
@pytest.mark.parametrize("tps", [None, 1])
def test_gluon_matches_the_triton_twin(case, tps):
    """The Gluon kernel against its Triton twin (the same swap-AB integer-score tile): the same program plan, the
    same integer scores and softmax; only the fp32 sums inside the bf16 MMAs may add in another order. Also
    repeatable bit for bit run to run."""
    from attnkit._runtime import gluon_runs
    if not gluon_runs(torch.device("cuda")):
        pytest.skip("the Gluon kernel needs an sm_90 GPU (not a pass)")
    i = _inp("cuda", case)
    kw = dict(tiles_per_split=tps, swap_ab=True, qk_int8=True)
    ref, ref_lse = sparse_int8_ref(*_args(i), scale=i["scale"])
    g, g_lse = sparse_int8_kernel_call(i, None, gluon=True, **kw)  # into poisoned outputs
    g2, g2_lse = sparse_int8_kernel_call(i, None, gluon=True, **kw)
    t, t_lse = sparse_int8_kernel_call(i, None, gluon=False, **kw)
    assert torch.equal(g, g2) and torch.equal(g_lse, g2_lse)
    assert unwritten(g) == 0 and unwritten(g_lse) == 0
    base, base_lse = sparse_int8_baseline(i)
    c = compare(g, ref, base, lse=g_lse, lse_ref=ref_lse, lse_base=base_lse)
    assert c.ok, c.reason
    # within a few bf16 ulps of the twin everywhere, and equal LSEs to fp32 rounding of the sums
    diff = (g.float() - t.float()).abs()
    assert (diff <= 4 * 2.0 ** -8 * t.float().abs() + 1e-30).float().mean() > 0.999, diff.max()
    fin = torch.isfinite(t_lse)
    assert torch.equal(fin, torch.isfinite(g_lse)) and torch.allclose(g_lse[fin], t_lse[fin], rtol=1e-5, atol=1e-5)



@pytest.mark.parametrize("case,tps", [("sparse_int8-decode-r3-g6-n509-perhead", None),
                                      ("sparse_int8-decode-r3-g6-n509-perhead", 1),
                                      ("sparse_int8-edge-n0", None), ("sparse_int8-prefill-r140-g4-n20-direct", None)])
def test_ids_early_gives_the_same_bits(case, tps, device):
    """ids_early (on by default) loads the first two tiles' ids before the query: the same ids, the same tiles, so
    the same output and LSE bits as without it (splits of one tile: the second id tile is past the split; no
    candidates: both masked); an explicit True refused with the Triton swap-AB and pipelined loops, which the
    default leaves alone; the grammar of its keyword."""
    i = _inp(device, case)
    kw = dict(tiles_per_split=tps, gluon=False, swap_ab=False)
    a = sparse_int8_attention(*_args(i), scale=i["scale"], ids_early=False, **kw)
    b = sparse_int8_attention(*_args(i), scale=i["scale"], ids_early=True, **kw)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    for bad in (dict(swap_ab=True, gluon=False), dict(pipeline=True, gluon=False)):
        with pytest.raises(ValueError, match="ids_early"):
            sparse_int8_attention(*_args(i), scale=i["scale"], ids_early=True, **bad)
        sparse_int8_attention(*_args(i), scale=i["scale"], **bad)  # the default (on) leaves those loops alone
    with pytest.raises(ValueError, match="ids_early"):
        sparse_int8_attention(*_args(i), scale=i["scale"], ids_early="yes")


@pytest.mark.parametrize("option", ["gluon_overlap", "gluon_v_regs"])
def test_gluon_only_option(option, monkeypatch, device):
    """gluon_overlap and gluon_v_regs are the Gluon kernel's: asked for where the Triton kernels run (gluon=False,
    or any CPU), a ValueError naming it; its environment variable takes exactly "0" / "1" (a bad value raises).
    gluon_overlap is off by default (slower as timed); gluon_v_regs is decided by a rule (the next test)."""
    from attnkit.sparse_int8 import config
    env = f"ATTNKIT_SPARSE_INT8_{option.upper()}"
    assert getattr(config, option.upper()).default is {"gluon_overlap": False, "gluon_v_regs": None}[option]
    i = _inp(device, "sparse_int8-decode-r3-g6-n509-perhead")
    with pytest.raises(ValueError, match=option):
        sparse_int8_attention(*_args(i), scale=i["scale"], gluon=False, **{option: True})
    a = sparse_int8_attention(*_args(i), scale=i["scale"], gluon=False, **{option: False})
    monkeypatch.setenv(env, "1")  # the environment's choice, not asked by keyword
    b = sparse_int8_attention(*_args(i), scale=i["scale"], gluon=False)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    for bad in ("true", "2", " 1", "yes"):
        monkeypatch.setenv(env, bad)
        with pytest.raises(ValueError, match=env):
            sparse_int8_attention(*_args(i), scale=i["scale"], gluon=False)


def test_gluon_v_regs_refuses_gluon_overlap_where_the_gluon_kernel_runs(monkeypatch, device):
    """Where the Gluon kernel would run (gluon_runs forced true, so any machine configures what an sm_90 GPU would),
    gluon_v_regs with gluon_overlap raises a ValueError naming gluon_v_regs; each alone configures the Gluon launch
    with its switch set (so the refusal is the pair's, not either option's). The rule for gluon_v_regs unasked: on,
    and off when gluon_overlap is on (by keyword or environment), which needs the bf16 value tile."""
    import inspect

    from attnkit.sparse_int8 import interface
    from attnkit.sparse_int8.kernel_gluon import sparse_int8_gluon_kernel
    monkeypatch.setattr(interface, "gluon_runs", lambda device: True)
    i = _inp(device, "sparse_int8-decode-r8-g12-n2112")
    rest = list(inspect.signature(interface._configure).parameters)[6:]

    def configure(**kw):
        return interface._configure(*_args(i), **{**dict.fromkeys(rest), "scale": i["scale"], "gluon": True, **kw})
    with pytest.raises(ValueError, match="gluon_v_regs"):
        configure(gluon_v_regs=True, gluon_overlap=True)
    monkeypatch.setenv("ATTNKIT_SPARSE_INT8_GLUON_OVERLAP", "1")  # the environment's overlap counts as well
    with pytest.raises(ValueError, match="gluon_v_regs"):
        configure(gluon_v_regs=True)
    monkeypatch.delenv("ATTNKIT_SPARSE_INT8_GLUON_OVERLAP")
    for v_regs, overlap in ((True, False), (False, True), (False, False), (None, None), (None, False), (None, True)):
        cfg = configure(gluon_v_regs=v_regs, gluon_overlap=overlap)
        assert cfg.attn.kernel is sparse_int8_gluon_kernel
        want = (not overlap if v_regs is None else v_regs, bool(overlap))
        assert (cfg.attn.kwargs["V_REGS"], cfg.attn.kwargs["OVERLAP"]) == want, (v_regs, overlap)
    monkeypatch.setenv("ATTNKIT_SPARSE_INT8_GLUON_OVERLAP", "1")
    assert configure().attn.kwargs["V_REGS"] is False  # the rule yields to the environment's overlap


@pytest.mark.cuda
@pytest.mark.parametrize("case", ["sparse_int8-decode-r3-g6-n509-perhead", "sparse_int8-decode-r16-g16-n8192-strided",
                                  "sparse_int8-prefill-r128-g12-n2048", "sparse_int8-edge-n0",
                                  "sparse_int8-model-prefill-r2048-q8x", "sparse_int8-decode-r8-g12-n2112",
                                  "sparse_int8-matrix-g1-n65-r128"])
@pytest.mark.parametrize("tps", [None, 1])
def test_gluon_v_regs_gives_the_same_bits(case, tps):
    """The Gluon kernel with gluon_v_regs (the value product's operand in registers, its rows a permutation of the
    output dims): the same bits as without, repeatably, at D = 256, 128 and 64, the query-digit and split-bf16
    programs alike (the latter forced by a zero budget), and a perturbed call differs (the comparison can fail)."""
    from attnkit._runtime import gluon_runs
    if not gluon_runs(torch.device("cuda")):
        pytest.skip("the Gluon kernel needs an sm_90 GPU (not a pass)")
    i = _inp("cuda", case)
    for budget in (None, 0.0):
        kw = dict(scale=i["scale"], tiles_per_split=tps, gluon=True, _qk_int8_budget=budget)
        a = sparse_int8_attention(*_args(i), gluon_v_regs=False, **kw)
        b = sparse_int8_attention(*_args(i), gluon_v_regs=True, **kw)
        c = sparse_int8_attention(*_args(i), gluon_v_regs=True, **kw)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), (case, budget)
        assert torch.equal(b[0], c[0]) and torch.equal(b[1], c[1]), (case, budget)
        if i["indices"].shape[-1]:
            for pert in ("candidate-skipped", "value-scale-before-accumulation"):
                d = sparse_int8_attention(*_args(i), gluon_v_regs=True, _perturb=pert, **kw)
                assert not torch.equal(a[0], d[0]), (case, budget, pert)


@pytest.mark.cuda
@pytest.mark.parametrize("case", ["sparse_int8-decode-r3-g6-n509-perhead", "sparse_int8-decode-r16-g16-n8192-strided",
                                  "sparse_int8-prefill-r128-g12-n2048", "sparse_int8-edge-n0",
                                  "sparse_int8-model-prefill-r2048-q8x"])
@pytest.mark.parametrize("tps", [None, 1])
def test_gluon_overlap_gives_the_same_bits(case, tps):
    """The Gluon kernel with gluon_overlap (the score product issued before the value conversion): the same bits as
    without, repeatably (the query-digit and split-bf16 programs alike; the latter run the loop unchanged), and a
    perturbed call differs (the comparison can fail)."""
    from attnkit._runtime import gluon_runs
    if not gluon_runs(torch.device("cuda")):
        pytest.skip("the Gluon kernel needs an sm_90 GPU (not a pass)")
    i = _inp("cuda", case)
    kw = dict(scale=i["scale"], tiles_per_split=tps, gluon=True)
    a = sparse_int8_attention(*_args(i), gluon_overlap=False, **kw)
    b = sparse_int8_attention(*_args(i), gluon_overlap=True, **kw)
    c = sparse_int8_attention(*_args(i), gluon_overlap=True, **kw)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert torch.equal(b[0], c[0]) and torch.equal(b[1], c[1])
    if i["indices"].shape[-1]:
        d = sparse_int8_attention(*_args(i), gluon_overlap=True, _perturb="candidate-skipped", **kw)
        assert not torch.equal(a[0], d[0])


@pytest.mark.cuda
@pytest.mark.parametrize("case", ["sparse_int8-decode-r3-g6-n509-perhead", "sparse_int8-decode-r16-g16-n8192-strided",
                                  "sparse_int8-prefill-r128-g12-n2048", "sparse_int8-edge-n0",
                                  "sparse_int8-model-prefill-r2048-q8x"])
@pytest.mark.parametrize("tps", [None, 1])
def test_gluon_ids_early_gives_the_same_bits(case, tps):
    """The Gluon kernel with ids_early: the same bits as without (the query-digit and split-bf16 programs alike)."""
    from attnkit._runtime import gluon_runs
    if not gluon_runs(torch.device("cuda")):
        pytest.skip("the Gluon kernel needs an sm_90 GPU (not a pass)")
    i = _inp("cuda", case)
    a = sparse_int8_attention(*_args(i), scale=i["scale"], tiles_per_split=tps, gluon=True, ids_early=False)
    b = sparse_int8_attention(*_args(i), scale=i["scale"], tiles_per_split=tps, gluon=True, ids_early=True)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
