"""The Gluon forward kernel for sm_90 (option gluon): its tile rule and its errors everywhere; on an sm_90 GPU, the
fp64 oracle on every shape it takes, with and without the overlap, repeatable bit for bit."""

import pytest
import torch

from attnkit import _callcache

import attnkit.ops  # noqa: F401
from attnkit.gate.specs import _gluon_fwd_takes, relbias_kernel_call
from attnkit.relbias import relbias_attention
from attnkit.relbias.config import GLUON, gluon_fwd_config, gluon_fwd_rule
from attnkit.testing import compare, shapes, unwritten
from attnkit.testing.baselines import relbias_baseline
from attnkit.testing.inputs import make_inputs
from attnkit.testing.oracles import relbias_oracle


def test_gluon_tile_rule_and_its_errors():
    assert GLUON.resolve(None, {}) is None  # the rule decides
    c = gluon_fwd_config(128)
    assert (c.block_m, c.block_n, c.num_warps, c.stages, c.pipe) == (64, 64, 4, 2, True)  # the relbias-gluon sweeps
    assert gluon_fwd_config(128, num_warps=8).block_m == 128
    assert gluon_fwd_config(64, block_n=128, num_warps=4, num_stages=2, pipe=False).block_m == 64
    with pytest.raises(ValueError, match="gluon: .* D in"):
        gluon_fwd_config(256)
    with pytest.raises(ValueError, match="block_n"):
        gluon_fwd_config(128, block_n=32)
    with pytest.raises(ValueError, match="num_stages: .* at least 2"):
        gluon_fwd_config(128, num_stages=1)
    with pytest.raises(ValueError, match="num_stages: .* shared memory"):
        gluon_fwd_config(128, block_n=128, num_stages=4)
    assert gluon_fwd_config(128, p_smem=True, bias_early=True).p_smem
    for kw, name in ((dict(p_smem=True), "gluon_p_smem"), (dict(bias_early=True), "gluon_bias_early"),
                     (dict(lazy_rescale=True), "gluon_lazy_rescale"), (dict(bias_acc=True), "gluon_bias_acc")):
        with pytest.raises(ValueError, match=name):
            gluon_fwd_config(128, pipe=False, **kw)
    with pytest.raises(ValueError, match="gluon_bias_acc: .* gluon_bias_early"):
        gluon_fwd_config(128, bias_acc=True, bias_early=True)
    # the warp-specialized kernel: 128 rows a program, consumer warpgroups of 4 warps, the overlapped schedule only
    assert gluon_fwd_config(128, ws=True).block_m == 128 and gluon_fwd_config(64, ws=True, pingpong=True).pingpong
    with pytest.raises(ValueError, match=r"num_warps: .* \(gluon_ws\)"):
        gluon_fwd_config(128, num_warps=8, ws=True)
    for kw in (dict(pipe=False), dict(p_smem=True), dict(bias_early=True), dict(lazy_rescale=True)):
        with pytest.raises(ValueError, match="gluon_ws: .* overlapped schedule only"):
            gluon_fwd_config(128, ws=True, **kw)
    with pytest.raises(ValueError, match="gluon_pingpong"):
        gluon_fwd_config(128, pingpong=True)
    with pytest.raises(ValueError, match="gluon_persistent"):
        gluon_fwd_config(128, persistent=True)
    assert gluon_fwd_config(128, ws=True, persistent=True).persistent
    with pytest.raises(ValueError, match="gluon_k_release"):
        gluon_fwd_config(128, k_release=True)
    # the key-release rule: on with the warp-specialized kernel, off (and refused) without it
    assert gluon_fwd_config(128, ws=True).k_release and not gluon_fwd_config(128, ws=True, k_release=False).k_release
    assert not gluon_fwd_config(128).k_release
    # the turns: off by default (the rule, GLUON_PINGPONG), on when asked, with the warp-specialized kernel only
    assert not gluon_fwd_config(128, ws=True).pingpong and not gluon_fwd_config(128).pingpong
    assert gluon_fwd_config(128, ws=True, pingpong=True).pingpong
    assert not gluon_fwd_config(128, ws=True, pingpong=False).pingpong
    # the row reductions as trees: off by default, in the overlapped schedule of either kernel only
    assert not gluon_fwd_config(128, ws=True).tree and gluon_fwd_config(128, ws=True, tree=True).tree
    assert not gluon_fwd_config(128).tree and gluon_fwd_config(128, tree=True).tree
    with pytest.raises(ValueError, match="gluon_tree_reduce"):
        gluon_fwd_config(128, tree=True, pipe=False)
    for kw in (dict(ws=True), dict(pipe=False)):
        with pytest.raises(ValueError, match="gluon_k_early"):
            gluon_fwd_config(128, k_early=True, **kw)
    with pytest.raises(ValueError, match="num_stages: .* shared memory"):
        gluon_fwd_config(128, block_n=128, num_stages=3, ws=True)
    # bias_acc unset: the rule (relbias-gluon-3): on in the overlapped schedule, off without it or with bias_early
    assert c.bias_acc and not gluon_fwd_config(128, pipe=False).bias_acc
    assert not gluon_fwd_config(128, bias_early=True).bias_acc and not gluon_fwd_config(128, bias_acc=False).bias_acc


def test_gluon_rule():
    assert gluon_fwd_rule(True, True, True, False)
    for args in ((False, True, True, False), (True, False, True, False), (True, True, False, False),
                 (True, True, True, True)):
        assert not gluon_fwd_rule(*args), args


class _Recorder:
    """Stands in for a kernel launch: records which kernel the dispatcher chose, launches nothing."""

    def __init__(self, calls, name):
        self.calls, self.name = calls, name

    def __getitem__(self, grid):
        return lambda *a, **k: self.calls.append(self.name)

    def __call__(self, *a, **k):
        self.calls.append(self.name)


def test_the_rule_picks_gluon_only_where_it_can(monkeypatch, device):
    """The dispatch decision with the option unset, as if on an sm_90 GPU (launches recorded, not run): Gluon for a
    prefill input it takes; Triton for D 256, a strided k, a Triton-only option, a tile Gluon cannot run, or
    gluon=False; the decision never raises."""
    import attnkit._runtime as rt
    from attnkit.relbias import interface, kernel_fwd
    calls = []
    monkeypatch.setattr(rt, "gluon_runs", lambda device: True)
    monkeypatch.setattr(interface, "_gluon_fwd", _Recorder(calls, "gluon"))
    monkeypatch.setattr(kernel_fwd, "relbias_fwd_kernel", _Recorder(calls, "triton"))
    inp = make_inputs(shapes.get("relbias-prefill-s203-w64"), device, 0)
    picks = []
    for kw in (dict(), dict(gluon=False), dict(block_m=64), dict(block_n=16), dict(num_stages=1),
               dict(split_loops=True), dict(kv_tma=True), dict(fast_interior=False), dict(num_warps=8)):
        relbias_kernel_call(inp, force="fwd", **kw)
        picks.append(calls.pop())
    assert picks == ["gluon", "triton", "triton", "triton", "triton", "triton", "triton", "triton", "gluon"]
    apart = lambda t: torch.cat([t, t], dim=2)[:, :, :t.shape[2]]  # noqa: E731  [Hkv, D] rows not packed
    strided = dict(inp, k=apart(inp["k"]), v=apart(inp["v"]))
    relbias_kernel_call(strided, force="fwd")
    relbias_kernel_call(make_inputs(shapes.get("relbias-headdim-d256"), device, 0), force="fwd")
    assert calls == ["triton", "triton"]
    monkeypatch.setattr(rt, "gluon_runs", lambda device: False)  # off sm_90 / in the interpreter
    _callcache.clear()  # the decisions kept for these layouts were made as if on sm_90
    relbias_kernel_call(inp, force="fwd")
    assert calls[-1] == "triton"


def test_the_warp_specialized_rule():
    """gluon_ws_rule: D 128, no window, at least 128 query rows, at least 4096 keys per sequence on average (the
    relbias-gluon-ws sweeps); and as dispatched (launch configs recorded, not run): the rule's choice, an explicit
    gluon_ws either way, and the one-warpgroup kernel where an option the warp-specialized one lacks is set."""
    from attnkit.relbias.config import gluon_ws_rule
    assert gluon_ws_rule(128, None, 8192, 8192) and gluon_ws_rule(128, None, 128, 8192)
    assert not gluon_ws_rule(128, 1024, 8192, 8192) and not gluon_ws_rule(64, None, 8192, 8192)
    assert not gluon_ws_rule(128, None, 48, 8192) and not gluon_ws_rule(128, None, 4096, 1128)


def test_the_warp_specialized_kernel_is_dispatched_by_the_rule(monkeypatch, device):
    import attnkit._runtime as rt
    from attnkit.relbias import config, interface
    cfgs = []
    monkeypatch.setattr(rt, "gluon_runs", lambda device: True)
    monkeypatch.setattr(interface, "_gluon_fwd", lambda *a, **kw: cfgs.append(a[-2]))
    monkeypatch.setattr(config, "GLUON_WS_MIN_MEAN_KEYS", 64)  # the small test shape counts as long
    inp = make_inputs(shapes.get("relbias-prefill-s1023"), device, 0)
    for kw, ws in ((dict(), True), (dict(gluon_ws=False), False), (dict(gluon_p_smem=True), False),
                   (dict(num_warps=8), False), (dict(gluon_pingpong=True), True),
                   (dict(gluon_persistent=True), True), (dict(gluon_k_release=True), True),
                   (dict(gluon_k_early=True), False), (dict(gluon_pingpong=False), True),
                   (dict(gluon_tree_reduce=True), True)):
        relbias_kernel_call(inp, force="fwd", **kw)
        assert cfgs.pop().ws == ws, kw
    assert cfgs == []
    relbias_kernel_call(inp, force="fwd")
    c = cfgs.pop()
    assert c.block_n == 128 and not c.pingpong and c.k_release and not c.tree  # its tile, no turns, key release
    relbias_kernel_call(inp, force="fwd", gluon_pingpong=True)  # an option of the warp-specialized kernel alone
    c = cfgs.pop()
    assert c.ws and c.pingpong and c.k_release
    # the stress check's diagnostic reaches the launch: the kernel without turns as it was before its barrier fix
    got = []
    monkeypatch.setattr(interface, "_gluon_fwd", lambda *a, **kw: got.append((a[-2], kw)))
    relbias_kernel_call(inp, force="fwd", gluon_ws=True, _ws_unused_turns=True)
    c, kw = got.pop()
    assert c.ws and not c.pingpong and kw == dict(unused_turns=True)


def test_the_rule_runs_gluon_on_sm90():
    """On an sm_90 GPU the default prefill is the Gluon kernel's result, bit for bit."""
    from attnkit._runtime import gluon_runs
    if not (torch.cuda.is_available() and gluon_runs(torch.device("cuda"))):
        pytest.skip("needs an sm_90 GPU (not a pass)")
    inp = make_inputs(shapes.get("relbias-prefill-s203-w64"), "cuda", 0)
    default, gl = relbias_kernel_call(inp, force="fwd"), relbias_kernel_call(inp, force="fwd", gluon=True)
    assert torch.equal(default[0], gl[0]) and torch.equal(default[1], gl[1])


def test_gluon_is_refused_where_it_cannot_run(device):
    from attnkit._runtime import gluon_runs
    inp = make_inputs(shapes.get("relbias-prefill-s113"), device, 0)
    if device == "cuda" and gluon_runs(torch.device("cuda")):
        # it runs here: the refusals are of inputs it does not take
        paged = make_inputs(shapes.get("relbias-paged-bs16-decode"), device, 0)
        with pytest.raises(ValueError, match="gluon: .* paged"):
            relbias_kernel_call(paged, force="fwd", gluon=True)
        fp8 = make_inputs(shapes.get("relbias-fp8-decode-b2"), device, 0)
        with pytest.raises(ValueError, match="gluon: .* q's dtype"):
            relbias_kernel_call(fp8, force="fwd", gluon=True)
        return
    with pytest.raises(ValueError, match="gluon: the Gluon forward kernel runs on CUDA sm_90"):
        relbias_kernel_call(inp, force="fwd", gluon=True)
    # the environment variable asks the same
    import os
    os.environ["ATTNKIT_RELBIAS_GLUON"] = "1"
    try:
        with pytest.raises(ValueError, match="gluon"):
            relbias_attention(inp["q"], inp["k"], inp["v"], cu_seqlens_q=inp["cu_seqlens_q"],
                              cu_seqlens_k=inp["cu_seqlens_k"], table=inp["table"])
    finally:
        del os.environ["ATTNKIT_RELBIAS_GLUON"]


_CASES = [c.id for c in shapes.cases("relbias", tier=shapes.FULL) if _gluon_fwd_takes(c)]


def test_the_gluon_cases_cover_the_timed_prefill_shapes():
    assert {"relbias-model-prefill-8k-global", "relbias-model-prefill-8k-w1024", "relbias-model-varlen-mixed",
            "relbias-prefill-s1", "relbias-window-w1", "relbias-extent-e1", "relbias-headdim-d128"} <= set(_CASES)


def _gluon_gpu():
    from attnkit._runtime import gluon_runs
    if not (torch.cuda.is_available() and gluon_runs(torch.device("cuda"))):
        pytest.skip("the Gluon kernel needs an sm_90 GPU (not a pass)")


@pytest.mark.parametrize("case_id", [c for c in _CASES if "model" not in c])
@pytest.mark.parametrize("pipe", [True, False])
def test_gluon_forward_matches_the_oracle(case_id, pipe):
    _gluon_gpu()
    inp = make_inputs(shapes.get(case_id), "cuda", 0)
    out, lse = relbias_kernel_call(inp, force="fwd", gluon=True, gluon_pipe=pipe)
    out2, lse2 = relbias_kernel_call(inp, force="fwd", gluon=True, gluon_pipe=pipe)
    assert torch.equal(out, out2) and torch.equal(lse, lse2)  # repeatable bit for bit
    assert unwritten(out) == 0 and unwritten(lse) == 0
    ref, ref_lse = relbias_oracle(inp)
    base, base_lse = relbias_baseline(inp)
    c = compare(out, ref, base, lse=lse, lse_ref=ref_lse, lse_base=base_lse)
    assert c.ok, c.reason


TILE_OPTIONS = [dict(block_n=128, num_stages=2), dict(num_warps=8), dict(num_stages=3),
                dict(gluon_bias_gather=False), dict(gluon_p_smem=True), dict(gluon_bias_early=True),
                dict(gluon_p_smem=True, gluon_bias_early=True, num_stages=3),
                dict(gluon_lazy_rescale=True),
                dict(gluon_lazy_rescale=True, gluon_p_smem=True, gluon_bias_early=True),
                dict(gluon_bias_acc=True), dict(gluon_bias_acc=True, gluon_lazy_rescale=True),
                dict(gluon_bias_acc=True, gluon_bias_gather=False, gluon_lazy_rescale=True),
                dict(gluon_ws=True), dict(gluon_ws=True, block_n=64),
                dict(gluon_ws=True, gluon_k_release=False),
                dict(gluon_ws=True, gluon_pingpong=True, block_n=128, gluon_bias_acc=False),
                dict(gluon_ws=True, block_n=64, num_stages=3, gluon_bias_gather=False),
                dict(gluon_ws=True, gluon_persistent=True),
                dict(gluon_ws=True, gluon_persistent=True, gluon_pingpong=True, block_n=64),
                dict(gluon_ws=True, gluon_k_release=True, block_n=64),
                dict(gluon_ws=True, gluon_k_release=True, gluon_persistent=True, gluon_pingpong=True),
                dict(gluon_ws=False, gluon_k_early=True),
                dict(gluon_ws=False, gluon_k_early=True, num_warps=8, num_stages=3),
                dict(gluon_ws=True, gluon_tree_reduce=True), dict(gluon_ws=False, gluon_tree_reduce=True),
                dict(gluon_ws=False, gluon_tree_reduce=True, num_warps=8, gluon_lazy_rescale=True),
                dict(gluon_ws=True, gluon_tree_reduce=True, gluon_pingpong=True, block_n=64, gluon_bias_acc=False),
                dict(gluon_ws=True, gluon_bias_pairs=True),
                dict(gluon_ws=True, gluon_bias_pairs=True, block_n=64, gluon_persistent=True, gluon_pingpong=True),
                dict(gluon_ws=True, gluon_bias_ahead=True),
                dict(gluon_ws=True, gluon_bias_ahead=True, block_n=64, gluon_persistent=True, gluon_pingpong=True),
                dict(gluon_ws=True, gluon_bias_diag=True), dict(gluon_ws=True, gluon_bias_diag=True, block_n=64),
                dict(gluon_ws=True, gluon_bias_diag=False), dict(gluon_ws=True, gluon_bias_diag=False, block_n=64)]


@pytest.mark.parametrize("case_id", ["relbias-prefill-s1023", "relbias-extent-e1", "relbias-window-w1",
                                     "relbias-model-prefill-8k-global"])
@pytest.mark.parametrize("block_n", [64, 128])
def test_bias_pairs_give_the_same_bits(case_id, block_n):
    """gluon_bias_pairs gathers the same bias values two scores at a time: the same output and LSE bits as the
    gather of one score at a time, on interior, masked, windowed and beyond-the-extent tiles."""
    _gluon_gpu()
    inp = make_inputs(shapes.get(case_id), "cuda", 2)
    a = relbias_kernel_call(inp, force="fwd", gluon=True, gluon_ws=True, block_n=block_n)
    b = relbias_kernel_call(inp, force="fwd", gluon=True, gluon_ws=True, block_n=block_n, gluon_bias_pairs=True)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.parametrize("case_id", ["relbias-prefill-s1023", "relbias-extent-e1", "relbias-window-w1",
                                     "relbias-model-prefill-8k-global", "relbias-tune-chunk128-b8-8k"])
@pytest.mark.parametrize("opts", [dict(block_n=128), dict(block_n=64), dict(block_n=128, gluon_persistent=True),
                                  dict(block_n=64, gluon_pingpong=True), dict(block_n=128, gluon_bias_pairs=True),
                                  dict(block_n=64, gluon_bias_pairs=True)],
                         ids=lambda o: "-".join(map(str, o.values())))
def test_bias_ahead_gives_the_same_bits(case_id, opts):
    """gluon_bias_ahead loads each tile's strip a tile earlier and builds the same bias from it: the same output and
    LSE bits as the strip loaded in its own step, on interior, masked, windowed and beyond-the-extent tiles."""
    _gluon_gpu()
    inp = make_inputs(shapes.get(case_id), "cuda", 3)
    a = relbias_kernel_call(inp, force="fwd", gluon=True, gluon_ws=True, gluon_bias_ahead=False, **opts)
    b = relbias_kernel_call(inp, force="fwd", gluon=True, gluon_ws=True, gluon_bias_ahead=True, **opts)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.parametrize("case_id", ["relbias-prefill-s1023", "relbias-extent-e1", "relbias-window-w1",
                                     "relbias-model-prefill-8k-global", "relbias-tune-prefill-8k-d64"])
@pytest.mark.parametrize("opts", [dict(block_n=128), dict(block_n=64), dict(block_n=128, gluon_bias_ahead=False),
                                  dict(block_n=64, gluon_persistent=True, gluon_pingpong=True),
                                  dict(block_n=128, gluon_ws_unroll=True), dict(block_n=64, gluon_ws_unroll=True)],
                         ids=lambda o: "-".join(map(str, o.values())))
def test_bias_diag_gives_the_same_bits(case_id, opts):
    """gluon_bias_diag gathers the same bias values (one load per distinct distance, the rest copied): the same
    output and LSE bits as the gather of one load per score."""
    _gluon_gpu()
    inp = make_inputs(shapes.get(case_id), "cuda", 4)
    a = relbias_kernel_call(inp, force="fwd", gluon=True, gluon_ws=True, gluon_bias_diag=False,
                            **{k: v for k, v in opts.items() if k != "gluon_ws_unroll"})
    b = relbias_kernel_call(inp, force="fwd", gluon=True, gluon_ws=True, gluon_bias_diag=True, **opts)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_bias_diag_refused_where_it_does_not_apply():
    from attnkit.relbias.config import gluon_fwd_config
    for kw in (dict(), dict(ws=True, bias_acc=False), dict(ws=True, bias_gather=False), dict(ws=True, bias_pairs=True)):
        with pytest.raises(ValueError, match="gluon_bias_diag"):
            gluon_fwd_config(128, bias_diag=True, **kw)
    assert gluon_fwd_config(128, ws=True, bias_diag=True).bias_diag and gluon_fwd_config(128, ws=True).bias_diag
    assert not gluon_fwd_config(128, ws=True, bias_diag=False).bias_diag  # the rule: on wherever it applies
    assert not gluon_fwd_config(128, ws=True, bias_pairs=True).bias_diag and not gluon_fwd_config(128).bias_diag
    with pytest.raises(ValueError, match="gluon_ws_unroll"):
        gluon_fwd_config(128, ws=True, bias_ahead=False, unroll=True)
    assert gluon_fwd_config(128, ws=True, unroll=True).unroll


def test_bias_ahead_refused_where_it_does_not_apply():
    from attnkit.relbias.config import gluon_fwd_config
    for kw in (dict(), dict(ws=True, bias_acc=False), dict(ws=True, bias_gather=False)):
        with pytest.raises(ValueError, match="gluon_bias_ahead"):
            gluon_fwd_config(128, bias_ahead=True, **kw)
    assert gluon_fwd_config(128, ws=True, bias_ahead=True).bias_ahead
    # the rule: on with the warp-specialized kernel where its bias starts the score product from a one-score gather
    assert gluon_fwd_config(128, ws=True).bias_ahead and gluon_fwd_config(64, block_n=64, ws=True).bias_ahead
    assert not gluon_fwd_config(128).bias_ahead
    for kw in (dict(bias_acc=False), dict(bias_gather=False)):
        assert not gluon_fwd_config(128, ws=True, **kw).bias_ahead, kw
    assert gluon_fwd_config(128, ws=True, bias_pairs=True).bias_ahead  # both of its strips loaded ahead


def test_bias_pairs_refused_where_they_do_not_apply():
    from attnkit.relbias.config import gluon_fwd_config
    with pytest.raises(ValueError, match="gluon_bias_pairs"):
        gluon_fwd_config(128, bias_pairs=True)  # the one-warpgroup kernel
    with pytest.raises(ValueError, match="gluon_bias_pairs"):
        gluon_fwd_config(128, ws=True, bias_acc=False, bias_pairs=True)
    with pytest.raises(ValueError, match="gluon_bias_pairs"):
        gluon_fwd_config(128, ws=True, bias_gather=False, bias_pairs=True)
    assert gluon_fwd_config(128, ws=True, bias_pairs=True).bias_pairs


@pytest.mark.parametrize("opts", TILE_OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_gluon_tile_options_match_the_oracle(opts):
    _gluon_gpu()
    inp = make_inputs(shapes.get("relbias-prefill-s1023"), "cuda", 0)
    out, lse = relbias_kernel_call(inp, force="fwd", gluon=True, **opts)
    ref, ref_lse = relbias_oracle(inp)
    base, base_lse = relbias_baseline(inp)
    c = compare(out, ref, base, lse=lse, lse_ref=ref_lse, lse_base=base_lse)
    assert c.ok, c.reason


_CONFIG_ARGS = {"block_n": "block_n", "num_warps": "num_warps", "num_stages": "num_stages", "gluon_pipe": "pipe",
                "gluon_bias_gather": "bias_gather", "gluon_bias_early": "bias_early", "gluon_p_smem": "p_smem",
                "gluon_lazy_rescale": "lazy_rescale", "gluon_bias_acc": "bias_acc", "gluon_ws": "ws",
                "gluon_pingpong": "pingpong", "gluon_persistent": "persistent", "gluon_k_release": "k_release",
                "gluon_k_early": "k_early", "gluon_tree_reduce": "tree", "gluon_bias_pairs": "bias_pairs",
                "gluon_bias_ahead": "bias_ahead", "gluon_bias_diag": "bias_diag", "gluon_ws_unroll": "unroll"}


@pytest.mark.parametrize("opts", TILE_OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_every_tile_option_set_is_a_valid_config(opts):
    """On the CPU: each option set of the GPU test above is a tile the Gluon kernels can run (so the GPU test
    checks the kernel, not a configuration error)."""
    kw = {_CONFIG_ARGS[k]: v for k, v in opts.items()}
    kw["ws"] = bool(kw.get("ws"))
    gluon_fwd_config(128, **kw)


def test_gluon_forward_in_a_cuda_graph():
    """Captured once, replayed after q changes in place: the same bits as an eager call."""
    _gluon_gpu()
    inp = make_inputs(shapes.get("relbias-chunked-q113-k1023-w256"), "cuda", 0)
    kw = dict(cu_seqlens_q=inp["cu_seqlens_q"], cu_seqlens_k=inp["cu_seqlens_k"], table=inp["table"],
              window=inp["window"], beyond=inp["beyond"], max_seqlen_q=113, max_seqlen_k=1023, validate=False,
              gluon=True, _force="fwd")
    out = torch.empty_like(inp["q"])
    lse = torch.empty(inp["q"].shape[:2], dtype=torch.float32, device="cuda")
    relbias_attention(inp["q"], inp["k"], inp["v"], out=out, lse=lse, **kw)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        relbias_attention(inp["q"], inp["k"], inp["v"], out=out, lse=lse, **kw)
    inp["q"].mul_(-0.5)
    graph.replay()
    torch.cuda.synchronize()
    e_out, e_lse = relbias_attention(inp["q"], inp["k"], inp["v"], **kw)
    assert torch.equal(out, e_out) and torch.equal(lse, e_lse)
