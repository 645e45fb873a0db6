"""A second CUDA device. Engines hold a layer's tensors on a device that need not be the current one (one process
driving several GPUs, or a rank whose current device is set late): every op must run on its tensors' device, with
that device's stream, and give the bits it gives on the first device; a tensor on another device than the rest is a
ValueError naming it. The two-device tests need two GPUs (skipped, not passed, elsewhere); the guard's own logic and
its place on every public op are tested on any machine."""

import pytest
import torch
from test_relbias_writer import _setup as _relbias_writer_inputs

from attnkit.gate.registry import gates
from attnkit.gate.runner import gate_cases
from attnkit.testing.inputs import make_inputs

TWO = torch.cuda.is_available() and torch.cuda.device_count() >= 2
two_gpus = [pytest.mark.cuda, pytest.mark.skipif(not TWO, reason="needs two CUDA devices (not a pass)")]

# The gates of what the dispatchers run by default, and the writers and the merge: every public entry point.
GATES = ("sparse_int8/gluon", "sparse_int8/triton", "mqa_decode/gluon_swapab", "mqa_decode/triton_headpad",
         "mqa_decode/triton_writer", "relbias/gluon_fwd_tree", "relbias/triton_fwd", "relbias/triton_decode",
         "relbias/gluon_decode", "merge/triton")
CASES_PER_GATE = 6


def test_every_public_op_makes_its_tensors_device_current():
    """Each public entry point runs under attnkit._runtime.on_device_of, keyed on the argument that sets the
    device of everything else the op checks."""
    from attnkit import mqa_decode, relbias, sparse_int8, splitk
    want = {sparse_int8.sparse_int8_attention: "q", mqa_decode.mqa_decode_attention: "q",
            mqa_decode.mqa_decode_step: "q", mqa_decode.mqa_write_records: "latent",
            mqa_decode.mqa_decode_warmup: "device", relbias.relbias_attention: "q", relbias.relbias_write_kv: "k_new",
            splitk.merge_partials: "m", splitk.merge_partials_into: "m"}
    for fn, arg in want.items():
        assert getattr(fn, "device_arg", None) == arg, fn.__name__
    public = {getattr(m, n) for m in (mqa_decode, relbias, sparse_int8) for n in m.__all__}
    assert public - set(want) == {mqa_decode.mqa_decode_workspace}  # allocates on the device it is given; no kernel


def test_the_device_guard_switches_only_to_another_cuda_device(monkeypatch):
    """The guard enters torch.cuda.device(i) when the argument's CUDA device i is not the current one, and leaves
    the current device alone otherwise (a CPU tensor under the interpreter, the current device, no device)."""
    from attnkit._runtime import on_device_of
    entered = []

    class Recorder:
        def __init__(self, i):
            self.i = i

        def __enter__(self):
            entered.append(self.i)

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device", Recorder)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)

    @on_device_of("x")
    def op(a, x, *, y=None):
        return a, x, y

    assert op(1, "cuda:1", y=2) == (1, "cuda:1", 2) and entered == [1]
    assert op(1, x=torch.device("cuda", 3)) == (1, torch.device("cuda", 3), None) and entered == [1, 3]
    for same in ("cuda:0", "cuda", torch.zeros(2), "cpu", None, 5):
        op(0, same)
    assert entered == [1, 3]


def test_the_device_guard_refuses_to_launch_outside_the_callers_graph_capture(monkeypatch):
    """While the caller's current device captures a CUDA graph, switching to another device whose current stream
    does not capture would launch the op there at once, outside the graph: a ValueError naming the argument. Where
    the other device captures too, the launch goes into its capture, and where no switch is needed, the caller's."""
    from attnkit._runtime import on_device_of
    state = {"current": 0, "capturing": set()}

    class Device:
        def __init__(self, i):
            self.i = i

        def __enter__(self):
            self.prev, state["current"] = state["current"], self.i

        def __exit__(self, *exc):
            state["current"] = self.prev
            return False

    monkeypatch.setattr(torch.cuda, "current_device", lambda: state["current"])
    monkeypatch.setattr(torch.cuda, "device", Device)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: state["current"] in state["capturing"])
    ran = []

    @on_device_of("x")
    def op(x):
        ran.append(state["current"])

    state["capturing"] = {0}
    with pytest.raises(ValueError, match=r"^x: on cuda:1, but a CUDA graph is being captured on cuda:0"):
        op("cuda:1")
    assert ran == [] and state["current"] == 0
    op("cuda:0")  # no switch: into the caller's capture
    state["capturing"] = {0, 1}
    op("cuda:1")  # the other device captures too
    state["capturing"] = {1}
    op("cuda:1")  # the caller does not capture
    assert ran == [0, 1, 1] and state["current"] == 0


def _to(x, device):
    """A deep copy of an input dictionary's tensors on `device` (other values as they are)."""
    if isinstance(x, torch.Tensor):
        return x.to(device, copy=True)
    if isinstance(x, dict):
        return {k: _to(v, device) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_to(v, device) for v in x)
    return x


def _cases():
    by_name = {g.name: g for g in gates()}
    out = []
    for name in GATES:
        gate = by_name[name]
        cs = gate_cases(gate, "smoke")
        step = max(1, len(cs) // CASES_PER_GATE)
        out += [pytest.param(gate, c, id=f"{name}-{c.id}") for c in cs[::step][:CASES_PER_GATE]]
    return out


def _outputs(res):
    return [t for t in (res if isinstance(res, (list, tuple)) else (res,)) if isinstance(t, torch.Tensor)]


def _bits(t):
    """The bytes of a tensor (NaN equals itself here; torch.equal would say a NaN differs)."""
    return t.detach().cpu().reshape(-1).view(torch.uint8)


def _sync():
    for d in range(2):
        torch.cuda.synchronize(d)


@two_gpus[0]
@two_gpus[1]
@pytest.mark.parametrize("gate,case", _cases() if TWO else [])
def test_an_op_runs_on_its_tensors_device_with_the_first_devices_bits(gate, case):
    """The same inputs on cuda:0 and on cuda:1, called with cuda:0 current and again with cuda:1 current: the
    outputs (and, for the writer, the records) are on cuda:1 and equal the cuda:0 call's bit for bit."""
    ok, why = gate.available("cuda")
    if not ok:
        pytest.skip(why)
    torch.cuda.set_device(0)
    inp0 = make_inputs(case, "cuda:0", 5)
    inp1, inp1b = _to(inp0, "cuda:1"), _to(inp0, "cuda:1")  # before the first call: a writer changes its cache
    want = _outputs(gate.call(inp0, None, case))
    _sync()
    got = _outputs(gate.call(inp1, None, case))  # cuda:0 current, tensors on cuda:1
    _sync()
    with torch.cuda.device(1):
        got_b = _outputs(gate.call(inp1b, None, case))
    _sync()
    assert len(got) == len(want) == len(got_b) > 0
    for w, g, gb in zip(want, got, got_b):
        assert g.device == gb.device == torch.device("cuda:1")
        assert torch.equal(_bits(g), _bits(w)) and torch.equal(_bits(gb), _bits(w))
    for k, v in inp0.items():  # what a call writes in place (a writer's cache) is written alike
        if isinstance(v, torch.Tensor):
            assert torch.equal(_bits(inp1[k]), _bits(v)) and torch.equal(_bits(inp1b[k]), _bits(v)), k


def _public_calls():
    """which -> (call(inputs) -> result, inputs on cuda:0, every tensor one the call reads) for each public op."""
    from attnkit.gate.specs import relbias_kernel_call
    from attnkit.mqa_decode import mqa_decode_attention, mqa_write_records
    from attnkit.relbias import relbias_write_kv
    from attnkit.sparse_int8 import sparse_int8_attention
    from attnkit.splitk import merge_partials
    from attnkit.testing import shapes

    def si(i):
        return sparse_int8_attention(i["q"], i["k_cache"], i["v_cache"], i["key_scale"], i["value_scale"],
                                     i["indices"], scale=i["scale"])

    def mq(i):
        return mqa_decode_attention(i["q"], i["swa_cache"], i["comp_cache"], i["swa_idx"], i["comp_idx"],
                                    i["positions"], i["cos_sin"], i["sink"], i["num_heads"], i["softmax_scale"],
                                    i["comp_format"])

    def wr(i):
        return mqa_write_records(i["latent"], i["positions"], i["cos_sin"], i["slots"], i["cache"], "fp8")

    def mg(i):
        return merge_partials(i["m"], i["l"], i["acc"])

    def rw(i):
        relbias_write_kv(**i)
        return i["k_cache"], i["v_cache"]

    mqa = make_inputs(shapes.get("mqa_decode-small-t2-h32-nvfp4"), "cuda:0", 6)
    w = dict(latent=mqa["q"][:, 0].contiguous(), positions=mqa["positions"], cos_sin=mqa["cos_sin"],
             slots=torch.arange(mqa["positions"].shape[0], dtype=torch.int64, device="cuda:0"),
             cache=mqa["swa_cache"].clone())  # the writer names it cache
    g = torch.Generator().manual_seed(3)
    part = dict(m=torch.randn(4, 3, generator=g).cuda(0), l=torch.rand(4, 3, generator=g).cuda(0) + 0.5,
                acc=torch.randn(4, 3, 64, generator=g).cuda(0))
    return {"sparse_int8": (si, make_inputs(shapes.get("sparse_int8-decode-r3-g6-n509-perhead"), "cuda:0", 4)),
            "mqa_decode": (mq, mqa),
            "mqa_writer": (wr, w),
            "relbias": (relbias_kernel_call, make_inputs(shapes.get("relbias-prefill-s1"), "cuda:0", 2)),
            "relbias_writer": (rw, _relbias_writer_inputs("cuda:0", fp8=True)),
            "merge": (mg, part)}


@two_gpus[0]
@two_gpus[1]
@pytest.mark.parametrize("which", ["sparse_int8", "mqa_decode", "mqa_writer", "relbias", "relbias_writer", "merge"])
def test_a_tensor_on_another_device_than_the_rest_is_a_value_error_naming_it(which):
    """Each tensor input, moved alone to cuda:1 (the rest on cuda:0, cuda:0 current): a ValueError naming an
    argument and a device, never a launch over pointers of two devices. Every tensor of these inputs is one the call
    reads."""
    torch.cuda.set_device(0)
    call, inp = _public_calls()[which]
    call(inp)  # the inputs as drawn are accepted
    torch.cuda.synchronize(0)
    for k, v in inp.items():
        if not isinstance(v, torch.Tensor):
            continue
        with pytest.raises(ValueError, match="device|cuda") as e:
            call(dict(inp, **{k: v.to("cuda:1")}))
        assert str(e.value).split(":")[0] in inp, (k, str(e.value))  # it names one of the call's arguments
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)


@two_gpus[0]
@two_gpus[1]
def test_a_graph_captured_on_another_device_than_the_tensors_is_refused_and_one_on_theirs_replays():
    """cuda:0 current and capturing, the tensors on cuda:1: a ValueError naming q (the launch would run on cuda:1
    at once, outside the graph). The graph captured on a stream of cuda:1 replays the eager call's bits."""
    from attnkit.sparse_int8 import sparse_int8_attention
    torch.cuda.set_device(0)
    _, inp = _public_calls()["sparse_int8"]
    i = _to(inp, "cuda:1")

    def call():
        return sparse_int8_attention(i["q"], i["k_cache"], i["v_cache"], i["key_scale"], i["value_scale"],
                                     i["indices"], scale=i["scale"], validate=False)

    want = call()  # eager, and compiled before any capture
    torch.cuda.synchronize(1)
    with pytest.raises(ValueError, match=r"^q: on cuda:1, but a CUDA graph is being captured on cuda:0"):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            call()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=torch.cuda.Stream(1)):
        got = call()
    assert torch.cuda.current_device() == 0
    g.replay()
    torch.cuda.synchronize(1)
    for w, o in zip(want, got):  # out and lse
        assert o.device == torch.device("cuda:1") and torch.equal(_bits(o), _bits(w))


def _elsewhere(device):
    """A device that is not `device` and holds no data a kernel could read: meta beside the CPU, the CPU beside a
    GPU."""
    return "meta" if device == "cpu" else "cpu"


def test_a_caller_buffer_on_another_device_is_a_value_error_naming_it(device):
    """out, lse (and mqa_decode's workspace and MXFP8 buffers, the merge's out and lse) on another device than q:
    a ValueError naming the buffer, before any launch (a kernel would write through a pointer of another device)."""
    from attnkit.mqa_decode import mqa_decode_attention, mqa_decode_workspace
    from attnkit.relbias import relbias_attention
    from attnkit.sparse_int8 import sparse_int8_attention
    from attnkit.splitk import merge_partials_into
    from attnkit.testing import shapes
    other = _elsewhere(device)

    def away(t):
        return torch.empty_like(t, device=other)

    si = make_inputs(shapes.get("sparse_int8-decode-r3-g6-n509-perhead"), device, 4)
    si_args = [si[n] for n in ("q", "k_cache", "v_cache", "key_scale", "value_scale", "indices")]
    o, lse = sparse_int8_attention(*si_args, scale=si["scale"])
    rb = make_inputs(shapes.get("relbias-prefill-s1"), device, 2)
    rb_kw = dict(cu_seqlens_q=rb["cu_seqlens_q"], cu_seqlens_k=rb["cu_seqlens_k"], table=rb["table"],
                 window=rb["window"], beyond=rb["beyond"], softmax_scale=rb["softmax_scale"])
    ro, rl = relbias_attention(rb["q"], rb["k"], rb["v"], **rb_kw)
    mq = make_inputs(shapes.get("mqa_decode-small-t2-h32-nvfp4"), device, 6)
    mq_args = [mq[n] for n in ("q", "swa_cache", "comp_cache", "swa_idx", "comp_idx", "positions", "cos_sin", "sink",
                               "num_heads", "softmax_scale", "comp_format")]
    mo, ml = mqa_decode_attention(*mq_args)
    T, H_pad = mq["q"].shape[:2]
    ws = mqa_decode_workspace(T, mq["num_heads"], device)
    fp8 = torch.empty((T, H_pad, 512), dtype=torch.float8_e4m3fn, device=device)
    sc = torch.empty((T, H_pad, 16), dtype=torch.uint8, device=device)
    m, l_, acc = torch.zeros(2, 3, device=device), torch.ones(2, 3, device=device), torch.zeros(2, 3, 64, device=device)
    mo2, ml2 = torch.empty(3, 64, device=device), torch.empty(3, device=device)
    cases = [
        ("out", lambda: sparse_int8_attention(*si_args, scale=si["scale"], out=away(o))),
        ("lse", lambda: sparse_int8_attention(*si_args, scale=si["scale"], out=torch.empty_like(o), lse=away(lse))),
        ("out", lambda: relbias_attention(rb["q"], rb["k"], rb["v"], **rb_kw, out=away(ro))),
        ("lse", lambda: relbias_attention(rb["q"], rb["k"], rb["v"], **rb_kw, lse=away(rl))),
        ("out", lambda: mqa_decode_attention(*mq_args, out=away(mo))),
        ("lse", lambda: mqa_decode_attention(*mq_args, lse=away(ml))),
        ("workspace", lambda: mqa_decode_attention(*mq_args, workspace=away(ws))),
        ("out_fp8", lambda: mqa_decode_attention(*mq_args, out_fp8=away(fp8), out_scale=sc)),
        ("out_scale", lambda: mqa_decode_attention(*mq_args, out_fp8=fp8, out_scale=away(sc))),
        ("out", lambda: merge_partials_into(m, l_, acc, away(mo2), ml2)),
        ("lse", lambda: merge_partials_into(m, l_, acc, mo2, away(ml2))),
    ]
    for name, call in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value).startswith(f"{name}:"), (name, str(e.value))
