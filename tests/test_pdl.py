"""Programmatic dependent launch (the ``pdl`` option, ``ATTNKIT_PDL``): refused where it cannot run, and on an
sm_90+ GPU the same bits as the plain launches, eagerly and in a replayed CUDA graph after the inputs change."""

import pytest
import torch

import attnkit.ops  # noqa: F401
from attnkit._runtime import pdl_runs, resolve_pdl
from attnkit.gate.specs import mqa_headpad_call, relbias_kernel_call, sparse_int8_kernel_call
from attnkit.mqa_decode import mqa_write_records
from attnkit.mqa_decode.interface import LAUNCHED_KEYS, mqa_decode_warmup
from attnkit.relbias import relbias_write_kv
from attnkit.splitk import PDL, pdl_rule
from attnkit.testing import shapes
from attnkit.testing.inputs import distinct_window_slots, make_inputs


def test_pdl_option_grammar_and_default():
    assert PDL.resolve(None, {}) is None  # the rule (splitk.pdl_rule) decides
    assert pdl_rule("mqa_decode", "swapab") and pdl_rule("mqa_decode", "writer")
    assert not pdl_rule("mqa_decode", "headpad") and not pdl_rule("sparse_int8") and not pdl_rule("relbias")
    # head-padded attention: on at 1 and 2 tokens (faster there as attention alone), off from 3
    assert pdl_rule("mqa_decode", "headpad", 1) and pdl_rule("mqa_decode", "headpad", 2)
    assert not pdl_rule("mqa_decode", "headpad", 3) and not pdl_rule("mqa_decode", "headpad", 16)
    assert resolve_pdl(None, torch.device("cpu"), rule=True) is False  # the rule never asks where PDL cannot run
    assert PDL.resolve(None, {"ATTNKIT_PDL": "1"}) is True
    for bad in ("true", "01", " 1", "2"):
        with pytest.raises(ValueError, match="ATTNKIT_PDL"):
            PDL.resolve(None, {"ATTNKIT_PDL": bad})
    assert resolve_pdl(False, torch.device("cpu")) is False
    assert not pdl_runs(torch.device("cpu"))


def _calls(device):
    """(name, call(pdl) -> tensors) for every op that takes the option, on small inputs."""
    sp = make_inputs(shapes.get("sparse_int8-decode-r3-g6-n509-perhead"), device, 0)
    spd = make_inputs(shapes.get("sparse_int8-prefill-r140-g4-n20-direct"), device, 0)
    rb = make_inputs(shapes.get("relbias-decode-b3-k203"), device, 0)
    rbp = make_inputs(shapes.get("relbias-paged-bs16-decode"), device, 0)
    mq = make_inputs(shapes.get("mqa_decode-small-t1-h16-fp8"), device, 0)
    mq2 = make_inputs(shapes.get("mqa_decode-small-t2-h32-nvfp4"), device, 0)

    def write(pdl):
        cache = torch.zeros(4, 16, 528, dtype=torch.uint8, device=device)
        g = torch.Generator().manual_seed(1)
        lat = torch.randn(5, 512, generator=g).bfloat16().to(device)
        cs = torch.randn(64, 64, generator=g).to(device)
        mqa_write_records(lat, torch.arange(5, device=device), cs, torch.tensor([3, 9, 17, 40, 63], device=device),
                          cache, "fp8", pdl=pdl)
        return (cache,)

    return [
        ("sparse_int8", lambda pdl: sparse_int8_kernel_call(sp, pdl=pdl)),
        ("sparse_int8-direct", lambda pdl: sparse_int8_kernel_call(spd, pdl=pdl)),
        ("relbias-decode", lambda pdl: relbias_kernel_call(rb, pdl=pdl)),
        ("relbias-paged", lambda pdl: relbias_kernel_call(rbp, pdl=pdl)),
        ("mqa-headpad", lambda pdl: mqa_headpad_call(mq, pdl=pdl)),
        ("mqa-swapab", lambda pdl: mqa_headpad_call(mq2, kernel="swapab", pdl=pdl)),
        ("mqa-writer", write),
    ]


@pytest.mark.parametrize("which", range(7))
def test_pdl_is_refused_where_it_cannot_run(which):
    if torch.cuda.is_available() and pdl_runs(torch.device("cuda")):
        pytest.skip("this machine runs PDL; the refusal is checked on machines that cannot (not a pass)")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    name, call = _calls(device)[which]
    with pytest.raises(ValueError, match="pdl: programmatic dependent launch needs"):
        call(True)


def test_relbias_writer_refuses_pdl_where_it_cannot_run():
    if torch.cuda.is_available() and pdl_runs(torch.device("cuda")):
        pytest.skip("this machine runs PDL (not a pass)")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    kn = torch.zeros(1, 2, 64, dtype=torch.bfloat16, device=device)
    kc = torch.zeros(2, 16, 2, 64, dtype=torch.bfloat16, device=device)
    with pytest.raises(ValueError, match="pdl"):
        relbias_write_kv(kn, kn.clone(), torch.tensor([0, 1], dtype=torch.int32, device=device), kc, kc.clone(),
                         torch.zeros(1, 1, dtype=torch.int32, device=device),
                         torch.zeros(1, dtype=torch.int32, device=device), pdl=True)


def _pdl_gpu():
    if not (torch.cuda.is_available() and pdl_runs(torch.device("cuda"))):
        pytest.skip("PDL needs a CUDA sm_90+ GPU (not a pass)")


@pytest.mark.parametrize("which", range(7))
def test_pdl_gives_the_same_bits(which):
    _pdl_gpu()
    name, call = _calls("cuda")[which]
    plain = [t.clone() for t in call(False)]
    dep = call(True)
    for a, b in zip(plain, dep):
        assert torch.equal(a.view(torch.uint8) if a.dtype == torch.bfloat16 else a,
                           b.view(torch.uint8) if b.dtype == torch.bfloat16 else b), name


def test_pdl_step_in_a_cuda_graph_replays_after_the_inputs_change():
    """A decode step (record write, attention, merge) captured with every launch a programmatic dependent of the
    one before: replays give the plain eager launches' bits after q and the new records change in place."""
    _pdl_gpu()
    inp = make_inputs(shapes.get("mqa_decode-small-t1-h16-fp8"), "cuda", 0)
    g = torch.Generator().manual_seed(2)
    lat = torch.randn(1, 512, generator=g).bfloat16().cuda()
    slot = inp["swa_idx"][0, :1].clone().long()
    pos = inp["positions"].clone()

    def step(pdl):
        mqa_write_records(lat, pos, inp["cos_sin"], slot, inp["swa_cache"], "fp8", validate=False, pdl=pdl)
        return mqa_headpad_call(inp, kernel="swapab", pdl=pdl, validate=False)

    for _ in range(2):
        step(True)  # compile outside the capture
    _replays_match(lambda: step(True), lambda: step(False), inp["q"], lat)


def _replays_match(captured, plain, q, lat):
    """Capture `captured` (a step) in a CUDA graph; after q and the new latents change in place, each replay gives
    the bits of `plain` run eagerly."""
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out_g, lse_g = captured()
    for scale in (0.5, -1.5):
        q.mul_(scale)
        lat.mul_(scale)
        graph.replay()
        torch.cuda.synchronize()
        out_e, lse_e = plain()
        assert torch.equal(out_g.view(torch.uint8), out_e.view(torch.uint8)) and torch.equal(lse_g, lse_e)


@pytest.mark.parametrize("kernel", ["swapab", "headpad"])
@pytest.mark.parametrize("case", ["mqa_decode-small-t1-h16-fp8", "mqa_decode-model-t5-h32-nvfp4-partial"])
def test_pdl_early_inputs_step_gives_the_plain_bits_in_a_replayed_graph(case, kernel):
    """pdl_early_inputs: in a step (record write, attention reading the record just written, merge) the attention
    kernel prepares the query before it waits for the writer; eagerly and in replays of a captured step after q
    and the new records change in place, the output and LSE are the plain launches' bits."""
    _pdl_gpu()
    inp = make_inputs(shapes.get(case), "cuda", 0)
    T = inp["q"].shape[0]
    g = torch.Generator().manual_seed(3)
    lat = torch.randn(T, 512, generator=g).bfloat16().cuda()
    slot = distinct_window_slots(inp["swa_idx"])  # the attention reads what the writer has just written there
    pos = inp["positions"].clone()

    def step(early, pdl=True):
        mqa_write_records(lat, pos, inp["cos_sin"], slot, inp["swa_cache"], "fp8", validate=False, pdl=pdl)
        return mqa_headpad_call(inp, kernel=kernel, pdl=pdl, pdl_early_inputs=early, validate=False)

    n0 = len(LAUNCHED_KEYS)
    out, lse = (x.clone() for x in step(True))
    n1 = len(LAUNCHED_KEYS)
    assert "_early_inputs" in LAUNCHED_KEYS[n0][0]
    ref_out, ref_lse = step(False, pdl=False)
    assert "_early_inputs" not in LAUNCHED_KEYS[n1][0]
    assert torch.equal(out.view(torch.uint8), ref_out.view(torch.uint8)) and torch.equal(lse, ref_lse)
    _replays_match(lambda: step(True), lambda: step(False, pdl=False), inp["q"], lat)


def test_pdl_early_inputs_option(monkeypatch):
    """The option's grammar (a bad variable is a ValueError when the op is configured); without pdl it changes
    nothing (the launch key says so); with gluon_async it is refused."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    inp = make_inputs(shapes.get("mqa_decode-small-t1-h16-fp8"), device, 0)
    with pytest.raises(ValueError, match="pdl_early_inputs"):
        mqa_headpad_call(inp, kernel="headpad", pdl_early_inputs="yes")
    monkeypatch.setenv("ATTNKIT_MQA_PDL_EARLY_INPUTS", "true")
    with pytest.raises(ValueError, match="ATTNKIT_MQA_PDL_EARLY_INPUTS"):
        mqa_headpad_call(inp, kernel="headpad")
    monkeypatch.setenv("ATTNKIT_MQA_PDL_EARLY_INPUTS", "1")
    n0 = len(LAUNCHED_KEYS)
    mqa_headpad_call(inp, kernel="headpad", pdl=False)
    assert "_early_inputs" not in LAUNCHED_KEYS[n0][0]
    monkeypatch.delenv("ATTNKIT_MQA_PDL_EARLY_INPUTS")
    if device == "cuda" and pdl_runs(torch.device("cuda")):
        from attnkit._runtime import gluon_runs
        if gluon_runs(torch.device("cuda")):
            with pytest.raises(ValueError, match="pdl_early_inputs"):
                mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_async=True, pdl=True, pdl_early_inputs=True)


def test_pdl_is_in_the_warmup_key():
    _pdl_gpu()
    keys = mqa_decode_warmup(16, 64, "fp8", "cuda", window=16, topk=32, max_tokens=2, pdl=True)
    n0 = len(LAUNCHED_KEYS)
    inp = make_inputs(shapes.get("mqa_decode-small-t1-h16-fp8"), "cuda", 0)
    mqa_headpad_call(inp, kernel=None, pdl=True)
    assert LAUNCHED_KEYS[n0] in keys and LAUNCHED_KEYS[n0][0].endswith("_pdl")
    keys = mqa_decode_warmup(16, 64, "fp8", "cuda", window=16, topk=32, max_tokens=2, pdl=True, pdl_early_inputs=True)
    n0 = len(LAUNCHED_KEYS)
    mqa_headpad_call(inp, kernel=None, pdl=True, pdl_early_inputs=True)
    assert LAUNCHED_KEYS[n0] in keys and LAUNCHED_KEYS[n0][0].endswith("_pdl_early_inputs")
