"""The call cache (attnkit._callcache): a repeated call keeps its layout-dependent decisions and gives the same bits;
whatever is not in the key (tensor values, anything but a plain scalar) is never kept; the option environment,
argument types, layouts and alignments each select their own entry; bad input is never kept; no tensor is held."""

import gc
import weakref

import pytest
import torch

from attnkit import _callcache
from attnkit.mqa_decode import interface as mqa_if
from attnkit.mqa_decode import mqa_decode_attention
from attnkit.sparse_int8 import interface as si_if
from attnkit.sparse_int8 import sparse_int8_attention
from attnkit.testing.inputs import make_inputs
from attnkit.testing.shapes import get


def _sparse(device, case="sparse_int8-decode-r1-g4-n65"):
    s = make_inputs(get(case), device)
    return (s["q"], s["k_cache"], s["v_cache"], s["key_scale"], s["value_scale"], s["indices"]), s["scale"]


def _mqa(device, case="mqa_decode-small-t1-h16-fp8"):
    m = make_inputs(get(case), device)
    return [m[n] for n in ("q", "swa_cache", "comp_cache", "swa_idx", "comp_idx", "positions", "cos_sin", "sink",
                           "num_heads", "softmax_scale", "comp_format")]


def _same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


def _uncached(f):
    _callcache.set_call_cache(False)
    try:
        return f()
    finally:
        _callcache.set_call_cache(None)


@pytest.mark.parametrize("case", ["sparse_int8-decode-r1-g4-n65", "sparse_int8-prefill-r140-g4-n20-direct"])
def test_sparse_int8_repeat_hits_and_gives_the_same_bits(device, case):
    args, scale = _sparse(device, case)
    cache = si_if._CALLS
    ref = _uncached(lambda: sparse_int8_attention(*args, scale=scale))
    assert cache.hits == cache.misses == 0 and not cache.entries
    first = sparse_int8_attention(*args, scale=scale)
    second = sparse_int8_attention(*args, scale=scale)
    assert (cache.misses, cache.hits, len(cache.entries)) == (1, 1, 1)
    assert _same(ref, first) and _same(ref, second)


def test_mqa_decode_repeat_hits_and_gives_the_same_bits(device):
    args = _mqa(device)
    cache = mqa_if._CALLS
    ref = _uncached(lambda: mqa_decode_attention(*args))
    log = mqa_if.LAUNCHED_KEYS
    n0 = len(log)
    first = mqa_decode_attention(*args)
    n1 = len(log)
    second = mqa_decode_attention(*args)
    n2 = len(log)
    assert (cache.misses, cache.hits) == (1, 1)
    assert _same(ref, first) and _same(ref, second)
    # the launch-key log still records every launch of every call (the warm-up key tests read it)
    assert n2 - n1 == n1 - n0 > 0 and log[n0:n1] == log[n1:n2]


@pytest.mark.parametrize("case", ["relbias-decode-b3-k203", "relbias-paged-bs16-decode"])
def test_relbias_repeat_hits_and_keeps_plans_per_max_seqlen(device, case):
    """relbias keeps its layout's decisions once, its route per max_seqlen_q and its decode plan per (max_seqlen_q,
    max_seqlen_k): given, read by the value checks, or read from the device."""
    from attnkit.relbias import interface as rb_if
    from attnkit.relbias import relbias_attention
    i = make_inputs(get(case), device)
    kv = dict(k_cache=i["k_cache"], v_cache=i["v_cache"], block_table=i["block_table"], seqused_k=i["seqused_k"]) \
        if "k_cache" in i else dict(k=i["k"], v=i["v"], cu_seqlens_k=i["cu_seqlens_k"])
    kw = dict(cu_seqlens_q=i["cu_seqlens_q"], table=i["table"], window=i["window"], beyond=i["beyond"],
              softmax_scale=i["softmax_scale"], k_scale=i.get("k_scale"), v_scale=i.get("v_scale"), **kv)
    lens = i["seqused_k"] if "k_cache" in i else i["cu_seqlens_k"][1:] - i["cu_seqlens_k"][:-1]
    mk = int(lens.max())
    ref = _uncached(lambda: relbias_attention(i["q"], **kw))
    got = [relbias_attention(i["q"], **kw) for _ in range(2)]  # lengths from the value checks
    got += [relbias_attention(i["q"], validate=False, **kw) for _ in range(2)]  # read from the device
    got += [relbias_attention(i["q"], max_seqlen_q=1, max_seqlen_k=mk, **kw) for _ in range(2)]  # given
    cache = rb_if._CALLS
    assert (cache.misses, cache.hits) == (3, 3)
    assert all(_same(ref, g) for g in got)
    (c,) = [e for e in cache.entries.values() if not e.validate]
    assert set(c.routes.values()) == {"decode"} and set(c.plans) == {(1, mk)}
    # the same layout with shorter keys (lengths changed in place): a second decode plan in the same entry
    if "k_cache" in i:
        i["seqused_k"].copy_((i["seqused_k"] + 1) // 2)
    else:
        cu = i["cu_seqlens_k"]
        cu[1:].copy_(torch.cumsum((cu[1:] - cu[:-1] + 1) // 2, 0).to(cu.dtype))
    mk2 = int(lens.max()) if "k_cache" in i else int((i["cu_seqlens_k"][1:] - i["cu_seqlens_k"][:-1]).max())
    assert mk2 < mk
    short = relbias_attention(i["q"], validate=False, **kw)
    assert set(c.plans) == {(1, mk), (1, mk2)}
    assert _same(_uncached(lambda: relbias_attention(i["q"], **kw)), short)


def test_tensor_values_are_never_kept(device):
    """A scalar argument given as a tensor is read by value, which the key does not hold: such a call takes the
    full path every time, so a second value is not answered with the first's decisions."""
    args, _ = _sparse(device)
    a = sparse_int8_attention(*args, scale=torch.tensor(0.125))
    b = sparse_int8_attention(*args, scale=torch.tensor(0.5))
    assert not si_if._CALLS.entries
    assert _same(a, _uncached(lambda: sparse_int8_attention(*args, scale=0.125)))
    assert _same(b, _uncached(lambda: sparse_int8_attention(*args, scale=0.5)))
    assert not torch.equal(a[0], b[0])


def test_scalars_select_entries_by_value_and_type(device):
    args, _ = _sparse(device)
    a = sparse_int8_attention(*args, scale=0.125)
    b = sparse_int8_attention(*args, scale=0.5)
    assert len(si_if._CALLS.entries) == 2 and not torch.equal(a[0], b[0])
    sparse_int8_attention(*args, validate=True)
    with pytest.raises(ValueError, match="validate"):  # 1 == True, but only a bool or "0" / "1" is a switch
        sparse_int8_attention(*args, validate=1)


def test_the_option_environment_is_read_live(device, monkeypatch):
    args, scale = _sparse(device)
    sparse_int8_attention(*args, scale=scale)
    monkeypatch.setenv("ATTNKIT_SPARSE_INT8_VALIDATE", "2")
    with pytest.raises(ValueError, match="ATTNKIT_SPARSE_INT8_VALIDATE"):
        sparse_int8_attention(*args, scale=scale)
    monkeypatch.setenv("ATTNKIT_SPARSE_INT8_VALIDATE", "0")
    bad = args[5].clone()
    bad[0, 0] = args[1].shape[1]  # out of range: the value check catches it only when validation is on
    sparse_int8_attention(*args[:5], bad, scale=scale)
    monkeypatch.delenv("ATTNKIT_SPARSE_INT8_VALIDATE")
    with pytest.raises(ValueError, match="indices"):
        sparse_int8_attention(*args[:5], bad, scale=scale)


def test_bad_input_is_never_kept(device):
    args, scale = _sparse(device)
    q = args[0].float()
    for _ in range(2):
        with pytest.raises(ValueError, match="q"):
            sparse_int8_attention(q, *args[1:], scale=scale)
    assert not si_if._CALLS.entries
    with pytest.raises(ValueError, match="indices"):  # a list where a tensor belongs: the full path says so
        sparse_int8_attention(*args[:5], args[5].tolist(), scale=scale)


def test_a_non_tensor_q_is_a_value_error_naming_it(device):
    """A list where q belongs takes the full path (no key) and its checks name it, on every op (relbias resolved
    its pdl option from q's device before checking q, an AttributeError, until its checks came first)."""
    from attnkit.relbias import relbias_attention
    args, scale = _sparse(device)
    with pytest.raises(ValueError, match="q"):
        sparse_int8_attention(args[0].tolist(), *args[1:], scale=scale)
    margs = _mqa(device)
    with pytest.raises(ValueError, match="q"):
        mqa_decode_attention(margs[0].tolist(), *margs[1:])
    i = make_inputs(get("relbias-decode-b3-k203"), device)
    with pytest.raises(ValueError, match="q"):
        relbias_attention(i["q"].tolist(), i["k"], i["v"], cu_seqlens_q=i["cu_seqlens_q"],
                          cu_seqlens_k=i["cu_seqlens_k"], table=i["table"])


def test_layouts_and_alignments_select_entries(device):
    args, scale = _sparse(device)
    q, k, v = args[:3]
    sparse_int8_attention(*args, scale=scale)
    # the same values in a strided cache, and in one whose base is 8 bytes off a 16-byte boundary
    ks, vs = (torch.zeros(t.shape[0], t.shape[1], 2 * t.shape[2], dtype=t.dtype, device=device) for t in (k, v))
    ks[:, :, :k.shape[2]], vs[:, :, :v.shape[2]] = k, v
    ko, vo = (torch.zeros(t.numel() + 8, dtype=t.dtype, device=device) for t in (k, v))
    ko, vo = ko[8:].view(k.shape), vo[8:].view(v.shape)
    ko.copy_(k), vo.copy_(v)
    ref = _uncached(lambda: sparse_int8_attention(*args, scale=scale))
    for kk, vv in ((ks[:, :, :k.shape[2]], vs[:, :, :v.shape[2]]), (ko, vo)):
        assert _same(ref, sparse_int8_attention(q, kk, vv, *args[3:], scale=scale))
    assert len(si_if._CALLS.entries) == 3
    keys = list(si_if._CALLS.entries)
    assert keys[1][0][0][1][1] != keys[0][0][0][1][1]  # k_cache's strides
    assert keys[2][0][0][1][4] == 8 and keys[0][0][0][1][4] == 0  # k_cache's base address mod 16


def _tensors_in(x, seen=None):
    seen = set() if seen is None else seen
    if id(x) in seen:
        return []
    seen.add(id(x))
    if isinstance(x, torch.Tensor):
        return [x]
    found = []
    if isinstance(x, dict):
        for v in x.values():
            found += _tensors_in(v, seen)
    elif isinstance(x, (tuple, list)):
        for v in x:
            found += _tensors_in(v, seen)
    elif isinstance(x, _callcache.Launch):
        found += _tensors_in(x.kwargs, seen) + _tensors_in(x.tail, seen) + _tensors_in(x.extra, seen)
    return found


def test_entries_hold_no_tensor(device):
    args, scale = _sparse(device)
    q = args[0].clone()
    ref = weakref.ref(q)
    sparse_int8_attention(q, *args[1:], scale=scale)
    margs = _mqa(device)
    mqa_decode_attention(*margs)
    assert si_if._CALLS.entries and mqa_if._CALLS.entries
    for cache in _callcache._CACHES:  # every op's, the writers' too
        for entry in cache.entries.values():
            assert _tensors_in(tuple(entry)) == []
    del q
    gc.collect()
    assert ref() is None


def test_the_cache_is_bounded(device, monkeypatch):
    args, _ = _sparse(device)
    monkeypatch.setattr(_callcache, "MAX_ENTRIES", 3)
    for i in range(5):
        sparse_int8_attention(*args, scale=0.1 * (i + 1))
        assert len(si_if._CALLS.entries) <= 3


def test_the_switch_turns_it_off(device, monkeypatch):
    args, scale = _sparse(device)
    monkeypatch.setenv("ATTNKIT_CALL_CACHE", "0")
    sparse_int8_attention(*args, scale=scale)
    sparse_int8_attention(*args, scale=scale)
    assert not si_if._CALLS.entries and si_if._CALLS.hits == 0
    monkeypatch.setenv("ATTNKIT_CALL_CACHE", "yes")
    with pytest.raises(ValueError, match="ATTNKIT_CALL_CACHE"):
        sparse_int8_attention(*args, scale=scale)


def test_the_package_level_switch_and_clear(device):
    import attnkit
    args, scale = _sparse(device)
    try:
        attnkit.set_call_cache(False)
        sparse_int8_attention(*args, scale=scale)
        assert not si_if._CALLS.entries
        attnkit.set_call_cache(None)
        sparse_int8_attention(*args, scale=scale)
        assert len(si_if._CALLS.entries) == 1
        attnkit.clear_call_cache()
        assert not si_if._CALLS.entries
    finally:
        attnkit.set_call_cache(None)


@pytest.mark.cuda
def test_kept_launches_go_to_the_compiled_kernel_and_replay_in_graphs():
    """On a GPU a repeated call launches the kept compiled kernels directly: the same bits as Triton's dispatch,
    also captured in a CUDA graph and replayed after the inputs change in place."""
    args, scale = _sparse("cuda", "sparse_int8-decode-r3-g6-n509-perhead")
    ref = _uncached(lambda: sparse_int8_attention(*args, scale=scale))
    out, lse = torch.empty_like(ref[0]), torch.empty_like(ref[1])
    for _ in range(3):
        sparse_int8_attention(*args, scale=scale, validate=False, out=out, lse=lse)
    entry = next(iter(si_if._CALLS.entries.values()))
    assert entry.attn.compiled is not None and entry.merge.compiled is not None
    assert _same(ref, (out, lse))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        sparse_int8_attention(*args, scale=scale, validate=False, out=out, lse=lse)
    args[0].mul_(-1)
    g.replay()
    torch.cuda.synchronize()
    assert _same(_uncached(lambda: sparse_int8_attention(*args, scale=scale)), (out, lse))
    margs = _mqa("cuda", "mqa_decode-step-h16-t1-nvfp4")
    mref = _uncached(lambda: mqa_decode_attention(*margs))
    for _ in range(3):
        got = mqa_decode_attention(*margs)
    assert next(iter(mqa_if._CALLS.entries.values())).attn.compiled is not None
    assert _same(mref, got)
