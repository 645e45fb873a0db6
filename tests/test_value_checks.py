"""The value checks of every public entry (validate on): each bad value raises a ValueError naming its argument, and
the checks read the device once per call (attnkit._runtime.to_host: one wait for the GPU, not one per value)."""

import pytest
import torch

import attnkit.mqa_decode.interface as mqa_if
import attnkit.relbias.interface as rb_if
import attnkit.sparse_int8.interface as sp_if
from attnkit.mqa_decode import mqa_decode_attention, mqa_write_records
from attnkit.relbias import relbias_attention, relbias_write_kv
from attnkit.sparse_int8 import sparse_int8_attention
from attnkit.testing.inputs import cu_seqlens, make_inputs, rope_cos_sin
from attnkit.testing.shapes import get as get_case


def _set(t, index, value):
    t = t.clone()
    t[index] = value
    return t


def _sparse(device):
    i = make_inputs(get_case("sparse_int8-decode-r1-g4-n65"), device)
    return lambda **kw: sparse_int8_attention(**{**dict(q=i["q"], k_cache=i["k_cache"], v_cache=i["v_cache"],
                                                        key_scale=i["key_scale"], value_scale=i["value_scale"],
                                                        indices=i["indices"], scale=i["scale"]), **kw}), i


SPARSE_BAD = [
    ("index C", lambda i: dict(indices=_set(i["indices"], (0, 7), i["k_cache"].shape[1])),
     r"indices: must lie in \[-1, 300\), found \[-?\d+, 300\]"),
    ("index -2", lambda i: dict(indices=_set(i["indices"], (0, 64), -2)),
     r"indices: must lie in \[-1, 300\), found \[-2,"),
    ("key scale inf", lambda i: dict(key_scale=_set(i["key_scale"], (0, 3), float("inf"))),
     "key_scale: holds a non-finite value"),
    ("value scale nan", lambda i: dict(value_scale=_set(i["value_scale"], (0, 63), float("nan"))),
     "value_scale: holds a non-finite value"),
    ("q nan", lambda i: dict(q=_set(i["q"], (0, 3, 5), float("nan"))), "q: holds a non-finite value"),
    ("q -inf", lambda i: dict(q=_set(i["q"], (0, 0, 63), float("-inf"))), "q: holds a non-finite value"),
]


@pytest.mark.parametrize("what, mutate, match", SPARSE_BAD, ids=[b[0] for b in SPARSE_BAD])
def test_sparse_int8_bad_values_raise(what, mutate, match, device):
    call, i = _sparse(device)
    with pytest.raises(ValueError, match=match):
        call(**mutate(i))


def _mqa(device):
    i = make_inputs(get_case("mqa_decode-small-t1-h16-fp8"), device)
    names = ("q", "swa_cache", "comp_cache", "swa_idx", "comp_idx", "positions", "cos_sin", "sink", "num_heads",
             "softmax_scale", "comp_format")
    return lambda **kw: mqa_decode_attention(**{**{n: i[n] for n in names}, **kw}), i


MQA_BAD = [
    ("swa slot past the cache", lambda i: dict(swa_idx=_set(i["swa_idx"], (0, 3), 128)),
     r"swa_idx: must lie in \[-1, 128\)"),
    ("comp slot -2", lambda i: dict(comp_idx=_set(i["comp_idx"], (0, 31), -2)),
     r"comp_idx: must lie in \[-1, 192\)"),
    ("position past cos_sin", lambda i: dict(positions=_set(i["positions"], 0, 8192)),
     r"positions: must lie in \[0, 8192\)"),
    ("position -1", lambda i: dict(positions=_set(i["positions"], 0, -1)), "positions: must lie in"),
    ("q inf", lambda i: dict(q=_set(i["q"], (0, 2, 5), float("inf"))), "q: holds a non-finite value"),
    ("sink nan", lambda i: dict(sink=_set(i["sink"], 15, float("nan"))), "sink: holds a NaN"),
    ("cos_sin nan at the position", lambda i: dict(cos_sin=_set(i["cos_sin"], (int(i["positions"][0]), 40),
                                                                float("nan"))),
     "cos_sin: holds a non-finite value at a row of positions"),
]


@pytest.mark.parametrize("what, mutate, match", MQA_BAD, ids=[b[0] for b in MQA_BAD])
def test_mqa_decode_bad_values_raise(what, mutate, match, device):
    call, i = _mqa(device)
    with pytest.raises(ValueError, match=match):
        call(**mutate(i))


def _writer(device):
    a = dict(latent=torch.randn(3, 512, device=device).bfloat16(), positions=torch.tensor([0, 1, 2], device=device),
             cos_sin=rope_cos_sin(16).to(device), slots=torch.tensor([4, -1, 9], device=device),
             cache=torch.zeros(2, 8, 528, dtype=torch.uint8, device=device), fmt="fp8")
    return lambda **kw: mqa_write_records(**{**a, **kw}), a


WRITER_BAD = [
    ("slot past the cache", lambda a: dict(slots=_set(a["slots"], 2, 16)),
     r"slots: must lie in \[-1, 16\), found \[-1, 16\]"),
    ("slot twice", lambda a: dict(slots=_set(a["slots"], 1, 4)), "slots: name a slot twice"),
    ("position past cos_sin", lambda a: dict(positions=_set(a["positions"], 1, 16)),
     r"positions: must lie in \[0, 16\)"),
    ("latent nan", lambda a: dict(latent=_set(a["latent"], (2, 500), float("nan"))), "latent: holds a non-finite"),
    ("cos_sin inf at a position", lambda a: dict(cos_sin=_set(a["cos_sin"], (2, 3), float("inf"))),
     "cos_sin: holds a non-finite value at a row of positions"),
]


@pytest.mark.parametrize("what, mutate, match", WRITER_BAD, ids=[b[0] for b in WRITER_BAD])
def test_mqa_writer_bad_values_raise(what, mutate, match, device):
    call, a = _writer(device)
    with pytest.raises(ValueError, match=match):
        call(**mutate(a))


def _relbias(device, case_id):
    i = make_inputs(get_case(case_id), device)
    kw = dict(cu_seqlens_q=i["cu_seqlens_q"], table=i["table"], window=i["window"], beyond=i["beyond"],
              softmax_scale=i["softmax_scale"], k_scale=i["k_scale"], v_scale=i["v_scale"])
    if "k_cache" in i:
        kw.update(k_cache=i["k_cache"], v_cache=i["v_cache"], block_table=i["block_table"], seqused_k=i["seqused_k"])
    else:
        kw.update(k=i["k"], v=i["v"], cu_seqlens_k=i["cu_seqlens_k"])

    def call(**over):
        q = over.pop("q", i["q"])
        return relbias_attention(q, **{**kw, **over})
    return call, i


def _bad_block_in_row(i, row, used):
    """A block id past the cache in row `row` of the block table, in a column the row uses (used) or past them."""
    nb = -(-int(i["seqused_k"][row]) // i["k_cache"].shape[1])
    col = nb - 1 if used else nb
    return dict(block_table=_set(i["block_table"], (row, col), i["k_cache"].shape[0]))


RELBIAS_BAD = [
    ("relbias-varlen-mixed3", "cu_seqlens_q decreasing", lambda i: dict(cu_seqlens_q=_set(i["cu_seqlens_q"], 1, 50)),
     "cu_seqlens_q: must start at 0, be non-decreasing"),
    ("relbias-varlen-mixed3", "cu_seqlens_k past k", lambda i: dict(cu_seqlens_k=_set(i["cu_seqlens_k"], 3, 135)),
     "cu_seqlens_k: must start at 0"),
    ("relbias-varlen-mixed3", "table nan", lambda i: dict(table=_set(i["table"], (3, 10), float("nan"))),
     "table: holds a non-finite value"),
    ("relbias-varlen-mixed3", "max_seqlen_k short", lambda i: dict(max_seqlen_k=1),
     "max_seqlen_k: 1 is below the batch's longest key sequence"),
    ("relbias-fp8-decode-b2", "v_scale inf", lambda i: dict(v_scale=_set(i["v_scale"], 1, float("inf"))),
     "v_scale: holds a non-finite value"),
    ("relbias-fp8-decode-b2", "k_scale nan", lambda i: dict(k_scale=_set(i["k_scale"], 0, float("nan"))),
     "k_scale: holds a non-finite value"),
    ("relbias-varlen-mixed3", "q nan", lambda i: dict(q=_set(i["q"], (2, 1, 5), float("nan"))),
     "q: holds a non-finite value"),
    ("relbias-paged-bs16-decode", "paged q inf", lambda i: dict(q=_set(i["q"], (0, 0, 0), float("inf"))),
     "q: holds a non-finite value"),
    ("relbias-paged-bs16-decode", "seqused_k negative", lambda i: dict(seqused_k=_set(i["seqused_k"], 0, -1)),
     "seqused_k: must be non-negative"),
    ("relbias-paged-bs16-decode", "seqused_k past the table", lambda i: dict(seqused_k=_set(i["seqused_k"], 1, 10**6)),
     "block_table: has fewer columns than seqused_k needs"),
    ("relbias-paged-bs16-decode", "block id past the cache, row 1", lambda i: _bad_block_in_row(i, 1, True),
     r"block_table: row 1 holds a block id outside \[0, 19\)"),
    ("relbias-paged-bs16-decode", "block id -1, row 0", lambda i: dict(block_table=_set(i["block_table"], (0, 0), -1)),
     r"block_table: row 0 holds a block id outside \[0, 19\)"),
]


@pytest.mark.parametrize("case_id, what, mutate, match", RELBIAS_BAD, ids=[b[1] for b in RELBIAS_BAD])
def test_relbias_bad_values_raise(case_id, what, mutate, match, device):
    call, i = _relbias(device, case_id)
    with pytest.raises(ValueError, match=match):
        call(**mutate(i))


def test_relbias_block_ids_past_a_rows_length_are_not_read(device, monkeypatch):
    """A block id in a column past what its row's seqused_k needs is never read, so it is not an error: the check
    stops there (its validation passes: shown by the call reaching the kernel, here stopped before it runs)."""
    call, i = _relbias(device, "relbias-paged-bs16-decode")
    nb = -(-int(i["seqused_k"][1]) // i["k_cache"].shape[1])
    assert nb < i["block_table"].shape[1]  # the case leaves unused columns
    bad = _bad_block_in_row(i, 1, False)

    class Reached(Exception):
        pass

    def stop(*a, **k):
        raise Reached
    monkeypatch.setattr(rb_if, "_decode_plan", stop)
    with pytest.raises(Reached):
        call(**bad)


def _writer_kv(device):
    g = torch.Generator().manual_seed(0)
    Hkv, D, bs = 2, 64, 16
    old, new = [5, 20], [3, 1]
    k_new = torch.randn(sum(new), Hkv, D, generator=g).bfloat16().to(device)
    cache = torch.zeros(6, bs, Hkv, D, dtype=torch.float8_e4m3fn, device=device)
    bt = torch.tensor([[0, 1, 5], [2, 3, 4]], dtype=torch.int32, device=device)
    a = dict(k_new=k_new, v_new=k_new.clone(), cu_seqlens_new=cu_seqlens(new).to(device), k_cache=cache,
             v_cache=cache.clone(), block_table=bt, seqused_k=torch.tensor(old, dtype=torch.int32, device=device),
             k_scale=torch.tensor([0.5, 0.25], device=device), v_scale=torch.tensor([1.0, 2.0], device=device))
    return lambda **kw: relbias_write_kv(**{**a, **kw}), a


WRITE_KV_BAD = [
    ("cu_seqlens_new decreasing", lambda a: dict(cu_seqlens_new=_set(a["cu_seqlens_new"], 1, 5)),
     "cu_seqlens_new: must"),
    ("seqused_k negative", lambda a: dict(seqused_k=_set(a["seqused_k"], 1, -3)), "seqused_k: must be non-negative"),
    ("past the table", lambda a: dict(seqused_k=_set(a["seqused_k"], 1, 48)), "block_table: has too few columns"),
    ("block id past the cache", lambda a: dict(block_table=_set(a["block_table"], (1, 1), 6)),
     r"block_table: row 1 holds a block id outside \[0, 6\)"),
    ("k_scale zero", lambda a: dict(k_scale=_set(a["k_scale"], 1, 0.0)), "k_scale: must be finite and positive"),
    ("v_scale inf", lambda a: dict(v_scale=_set(a["v_scale"], 0, float("inf"))),
     "v_scale: must be finite and positive"),
    ("k_new nan", lambda a: dict(k_new=_set(a["k_new"], (2, 1, 7), float("nan"))), "k_new: holds a non-finite value"),
    ("v_new -inf", lambda a: dict(v_new=_set(a["v_new"], (0, 0, 0), float("-inf"))),
     "v_new: holds a non-finite value"),
]


@pytest.mark.parametrize("what, mutate, match", WRITE_KV_BAD, ids=[b[0] for b in WRITE_KV_BAD])
def test_relbias_write_kv_bad_values_raise(what, mutate, match, device):
    call, a = _writer_kv(device)
    with pytest.raises(ValueError, match=match):
        call(**mutate(a))


def test_relbias_write_kv_unused_columns_are_not_checked(device):
    """Row 0's new tokens (positions 5-7, block size 16) go to column 0 of its block table row: an id past the cache
    in its column 2 is never read, so it is not an error and the write goes through."""
    call, a = _writer_kv(device)
    call(block_table=_set(a["block_table"], (0, 2), 99))


class _Counted:
    def __init__(self, fn):
        self.fn, self.n = fn, 0

    def __call__(self, *ts):
        self.n += 1
        return self.fn(*ts)


@pytest.mark.parametrize("entry", ["sparse_int8", "mqa_decode", "mqa_writer", "relbias", "relbias_paged",
                                   "relbias_write_kv"])
def test_a_validated_call_reads_the_device_once(entry, device, monkeypatch):
    """Every value check of a call comes from one attnkit._runtime.to_host (one wait for the GPU): shown on a call
    whose last check fails, so that every check ran and no kernel was launched."""
    mod = {"sparse_int8": sp_if, "mqa_decode": mqa_if, "mqa_writer": mqa_if}.get(entry, rb_if)
    counted = _Counted(mod.to_host)
    monkeypatch.setattr(mod, "to_host", counted)
    if entry == "sparse_int8":
        call, i = _sparse(device)
        bad, match = dict(value_scale=_set(i["value_scale"], (0, 0), float("inf"))), "value_scale"
    elif entry == "mqa_decode":
        call, i = _mqa(device)
        bad, match = dict(sink=_set(i["sink"], 0, float("nan"))), "sink"
    elif entry == "mqa_writer":
        call, i = _writer(device)
        bad, match = dict(slots=_set(i["slots"], 1, 4)), "slots"
    elif entry == "relbias":
        call, i = _relbias(device, "relbias-fp8-decode-b2")
        bad, match = dict(v_scale=_set(i["v_scale"], 0, float("nan"))), "v_scale"
    elif entry == "relbias_paged":
        call, i = _relbias(device, "relbias-paged-bs16-decode")
        bad, match = dict(table=_set(i["table"], (0, 0), float("inf"))), "table"
    else:
        call, i = _writer_kv(device)
        bad, match = dict(v_scale=_set(i["v_scale"], 1, -1.0)), "v_scale"
    with pytest.raises(ValueError, match=match):
        call(**bad)
    assert counted.n == 1


def _longest(i) -> dict:
    """A relbias input's max_seqlen_q / max_seqlen_k, read on the host."""
    cq = i["cu_seqlens_q"].cpu()
    lk = i["seqused_k"].cpu() if "k_cache" in i else i["cu_seqlens_k"].cpu().diff()
    return dict(max_seqlen_q=int(cq.diff().max()), max_seqlen_k=int(lk.max()))


def _syncs(fn) -> int:
    """How many synchronizing CUDA operations fn makes, by torch.cuda.set_sync_debug_mode("warn")."""
    import warnings
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    # (not the mode's own warning that it is a prototype, which also speaks of synchronizing operations)
    return sum(str(w.message).startswith("called a synchronizing CUDA operation") for w in seen)


@pytest.mark.cuda
def test_validated_calls_wait_for_the_gpu_once():
    """On a GPU a validated call of each entry makes exactly one synchronizing CUDA operation (to_host's stream
    synchronization; no .item(), no blocking copy), counted by torch.cuda.set_sync_debug_mode("warn"), which is
    shown counting a scalar read added to the call; with validate=False, none."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (not a pass)")
    dev = "cuda"
    (rb, i), (rbp, ip) = _relbias(dev, "relbias-varlen-mixed3"), _relbias(dev, "relbias-paged-bs16-decode")
    calls = {"sparse_int8": _sparse(dev)[0], "mqa_decode": _mqa(dev)[0], "mqa_writer": _writer(dev)[0],
             "relbias": rb, "relbias_paged": rbp, "relbias_write_kv": _writer_kv(dev)[0]}
    lengths = {"relbias": _longest(i), "relbias_paged": _longest(ip)}  # without validation, the caller's promise
    for c in calls.values():  # compile outside the count
        c()
    counts = {n: _syncs(c) for n, c in calls.items()}
    assert counts == {n: 1 for n in calls}, counts
    assert _syncs(lambda: (calls["sparse_int8"](), int(torch.ones(1, device=dev).sum()))) == 2
    unvalidated = {n: _syncs(lambda c=c, n=n: c(validate=False, **lengths.get(n, {}))) for n, c in calls.items()}
    assert unvalidated == {n: 0 for n in unvalidated}, unvalidated


def test_rows_a_call_never_reads_are_not_checked(device):
    """What a call never reads may hold anything: relbias varlen k / v rows past the last sequence (cu_seqlens_k[-1]
    may end before k does; see also tests/test_relbias.py::test_keys_past_the_last_sequence_never_reach_the_result)
    and mqa_decode's padding heads of q (past num_heads): NaN there gives the same bits as zeros, and no error.
    Shown failing with mqa_decode's q check over every head."""
    call, i = _relbias(device, "relbias-varlen-mixed3")
    pad = lambda t, x: torch.cat([t, torch.full((5,) + t.shape[1:], x, dtype=t.dtype, device=t.device)])  # noqa: E731
    a = call(k=pad(i["k"], 0.0), v=pad(i["v"], 0.0))
    b = call(k=pad(i["k"], float("nan")), v=pad(i["v"], float("inf")))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    mcall, m = _mqa(device)
    H = m["num_heads"]
    assert m["q"].shape[1] > H  # the case has padding heads
    a = mcall()
    b = mcall(q=_set(m["q"], (slice(None), slice(H, None)), float("nan")))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_cos_sin_rows_outside_positions_are_not_read(device):
    """The cos_sin check reads the rows at positions only (the table may hold a long context's every position): a
    NaN in a row no token of the call sits at is not an error, for the attention and for the writer."""
    call, i = _mqa(device)
    row = (int(i["positions"][0]) + 1) % i["cos_sin"].shape[0]
    call(cos_sin=_set(i["cos_sin"], (row, 3), float("nan")))
    wcall, a = _writer(device)
    wcall(cos_sin=_set(a["cos_sin"], (9, 3), float("nan")))


def _grad(t):
    return t.detach().clone().requires_grad_()


@pytest.mark.parametrize("entry", ["sparse_int8", "mqa_decode", "mqa_writer", "relbias", "relbias_write_kv", "merge"])
def test_inputs_that_require_grad_are_refused_with_grad_mode_on(entry, device):
    """The kernels have no backward: an input that requires grad would get a result cut off from autograd (its
    gradient silently missing), so with grad mode on it is a ValueError naming it; under torch.no_grad() the same
    call runs. Shown failing without the check (the call returned a result that does not require grad)."""
    from attnkit.splitk import merge_partials
    if entry == "sparse_int8":
        call, i = _sparse(device)
        kw, name = dict(q=_grad(i["q"])), "q"
    elif entry == "mqa_decode":
        call, i = _mqa(device)
        kw, name = dict(sink=_grad(i["sink"])), "sink"
    elif entry == "mqa_writer":
        call, i = _writer(device)
        kw, name = dict(latent=_grad(i["latent"])), "latent"
    elif entry == "relbias":
        call, i = _relbias(device, "relbias-varlen-mixed3")
        kw, name = dict(table=_grad(i["table"])), "table"
    elif entry == "relbias_write_kv":
        call, i = _writer_kv(device)
        kw, name = dict(v_new=_grad(i["v_new"])), "v_new"
    else:
        m = torch.zeros(2, 3, device=device)
        call = lambda **kw: merge_partials(**{**dict(m=m, l=torch.ones(2, 3, device=device),  # noqa: E731
                                                    acc=torch.zeros(2, 3, 8, device=device)), **kw})
        kw, name = dict(acc=_grad(torch.ones(2, 3, 8, device=device))), "acc"
    with pytest.raises(ValueError, match=f"{name}: requires grad, but attnkit's kernels are forward-only"):
        call(**kw)
    with torch.no_grad():
        call(**kw)
