"""No int32 overflow in any address computation: every kernel, run on data that lies past 2^31 elements of its
cache, returns the bits it returns on the same data at the cache's start.

The far copies live in sparse files mapped into memory (`far`): only the pages a kernel touches are ever read or
written, so a 4-16 GB cache costs a few MB (the files are unlinked once mapped). Each far tensor starts 2^32
elements into its mapping, so an offset that wrapped at 32 bits lands in the mapping's zeros (a wrong answer, not a
crash). In the interpreter an int32 product wraps as on a GPU; the Gluon kernels (sm_90 only) run these tests on a
GPU, where CUDA tensors of the same sizes are allocated outright.
"""

import math
import os

import pytest
import torch

from attnkit.gate.specs import mqa_headpad_call, relbias_kernel_call, sparse_int8_kernel_call
from attnkit.testing import shapes
from attnkit.testing.inputs import make_inputs

WRAP = 1 << 32  # elements before each far tensor in its mapping
PAST = 1 << 31  # the far data's first element offset is at least this


def far(tmp_path, name, shape, dtype, device):
    """A zero tensor of `shape` whose storage starts WRAP elements into a sparse mapping (CPU), or a CUDA tensor of
    the same shape (allocated outright; no lead)."""
    n = math.prod(shape)
    if device != "cpu":
        return torch.zeros(shape, dtype=dtype, device=device)
    es = torch.empty(0, dtype=dtype).element_size()
    path = os.path.join(tmp_path, name)
    with open(path, "wb") as f:
        f.truncate((WRAP + n) * es)
    t = torch.from_file(path, shared=True, size=WRAP + n, dtype=dtype)
    os.unlink(path)  # the mapping stays; nothing is left on disk after the test
    return t[WRAP:].view(shape)


def _same(a, b):
    """The same bits (out, lse): -inf LSEs of empty rows compare equal, a NaN anywhere fails."""
    for x, y in zip(a, b, strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)


def _relocated_pages(inp, tmp_path, device):
    """The paged input with its cache pages moved past PAST elements (block table entries shifted alike)."""
    kc = inp["k_cache"]
    page_el = math.prod(kc.shape[1:])
    p0 = -(-PAST // page_el)
    shape = (p0 + kc.shape[0],) + tuple(kc.shape[1:])
    fk, fv = (far(tmp_path, n, shape, kc.dtype, device) for n in ("k", "v"))
    fk[p0:] = inp["k_cache"]
    fv[p0:] = inp["v_cache"]
    return dict(inp, k_cache=fk, v_cache=fv, block_table=inp["block_table"] + p0)


RELBIAS_PAGED = [
    ("relbias-paged-bs16-decode", {}),  # the decode kernel, a block-table load per key
    ("relbias-paged-bs32-window", dict(page_tiles=True, block_n=32)),  # one block-table entry per key tile
    ("relbias-paged-bs16-decode", dict(_force="fwd")),  # the forward kernel
    ("relbias-paged-bs16-one-page", {}),
]


@pytest.mark.parametrize("case_id,opts", RELBIAS_PAGED)
def test_relbias_paged_cache_past_2_31_elements(case_id, opts, tmp_path, device):
    inp = make_inputs(shapes.get(case_id), device, 0)
    opts = dict(opts)  # the parameter's dict is shared by every device's run: do not pop from it
    force = opts.pop("_force", None)
    near = relbias_kernel_call(inp, force=force, **opts)
    farr = relbias_kernel_call(_relocated_pages(inp, tmp_path, device), force=force, **opts)
    _same(near, farr)
    assert near[0].abs().sum() > 0


@pytest.mark.parametrize("fp8", [False, True])
@pytest.mark.parametrize("force", ["decode", "fwd"])
def test_relbias_varlen_keys_past_2_31_elements(fp8, force, tmp_path, device):
    """A varlen batch whose first sequence holds 2^31 / (Hkv x D) keys and no query: the second sequence's keys
    start past 2^31 elements (its queries, the bias and the merge are those of the batch without the first)."""
    case = "relbias-fp8-decode-b2" if fp8 else "relbias-decode-b3-k203"
    inp = make_inputs(shapes.get(case), device, 1)
    k, v, cu = inp["k"], inp["v"], inp["cu_seqlens_k"]
    row = math.prod(k.shape[1:])
    k0 = -(-PAST // row)
    fk, fv = (far(tmp_path, n, (k0 + k.shape[0],) + tuple(k.shape[1:]), k.dtype, device) for n in ("k", "v"))
    fk[k0:] = k
    fv[k0:] = v
    z = torch.zeros(1, dtype=torch.int32, device=device)
    farr_inp = dict(inp, k=fk, v=fv, cu_seqlens_k=torch.cat([z, cu + k0]),
                    cu_seqlens_q=torch.cat([z, inp["cu_seqlens_q"]]))
    splits = dict(num_splits=1) if force == "decode" else {}  # the rule's splits follow the longest sequence
    near = relbias_kernel_call(inp, force=force, **splits)
    farr = relbias_kernel_call(farr_inp, force=force, **splits)
    _same(near, farr)
    assert near[0].abs().sum() > 0


@pytest.mark.parametrize("fp8", [False, True])
def test_relbias_writer_past_2_31_elements(fp8, tmp_path, device):
    from attnkit.relbias import relbias_write_kv
    inp = make_inputs(shapes.get("relbias-paged-bs16-decode"), device, 2)
    g = torch.Generator(device=device).manual_seed(3)
    Hkv, D = inp["k_cache"].shape[2:]
    n_new = 5
    k_new, v_new = (torch.randn(2 * n_new, Hkv, D, generator=g, device=device).bfloat16() for _ in range(2))
    cu_new = torch.tensor([0, n_new, 2 * n_new], dtype=torch.int32, device=device)
    if fp8:
        inp["k_cache"], inp["v_cache"] = (torch.zeros_like(inp["k_cache"], dtype=torch.float8_e4m3fn)
                                          for _ in range(2))
        scales = dict(k_scale=torch.full((Hkv,), 0.03, device=device), v_scale=torch.full((Hkv,), 0.02, device=device))
    else:
        scales = {}
    seq = inp["seqused_k"].clone()
    farr = _relocated_pages(inp, tmp_path, device)
    p0 = int(farr["block_table"][0, 0] - inp["block_table"][0, 0])
    relbias_write_kv(k_new, v_new, cu_new, inp["k_cache"], inp["v_cache"], inp["block_table"], seq, **scales)
    relbias_write_kv(k_new, v_new, cu_new, farr["k_cache"], farr["v_cache"], farr["block_table"], seq.clone(),
                     **scales)
    for a, b in ((inp["k_cache"], farr["k_cache"][p0:]), (inp["v_cache"], farr["v_cache"][p0:])):
        assert torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    assert inp["k_cache"].view(torch.uint8).any()


SPARSE = [
    ("sparse_int8-decode-r3-g6-n509-perhead", {}),  # split-K decode + merge, per-head indices
    ("sparse_int8-decode-r1-g4-n65", dict(tiles_per_split=1)),
    ("sparse_int8-prefill-r140-g4-n20-direct", {}),  # the direct path
]


@pytest.mark.parametrize("case_id,opts", SPARSE)
def test_sparse_int8_cache_rows_past_2_31_elements(case_id, opts, tmp_path, device):
    """The cache's rows moved past 2^31 bytes of each KV head (so the second head starts past 2^32), the indices
    shifted alike (-1 stays -1)."""
    inp = make_inputs(shapes.get(case_id), device, 0)
    kc = inp["k_cache"]
    Hkv, C, D = kc.shape
    c0 = -(-PAST // D)
    fk, fv = (far(tmp_path, n, (Hkv, c0 + C, D), kc.dtype, device) for n in ("k", "v"))
    fk[:, c0:] = kc
    fv[:, c0:] = inp["v_cache"]
    idx = inp["indices"]
    farr = dict(inp, k_cache=fk, v_cache=fv, indices=torch.where(idx >= 0, idx + c0, idx))
    near = sparse_int8_kernel_call(inp, **opts)
    _same(near, sparse_int8_kernel_call(farr, **opts))
    assert near[0].abs().sum() > 0


@pytest.mark.parametrize("kernel", ["headpad", "swapab"])
@pytest.mark.parametrize("case_id", ["mqa_decode-small-t1-h16-fp8", "mqa_decode-small-t2-h32-nvfp4"])
def test_mqa_decode_records_past_2_31_bytes(kernel, case_id, tmp_path, device):
    """Both caches' pages moved past 2^31 bytes, the slot ids shifted alike, the records written there by the
    writer (the same latents and positions as the near copy's)."""
    from attnkit.mqa_decode import mqa_write_records
    from attnkit.mqa_decode.interface import RECORD_BYTES
    inp = make_inputs(shapes.get(case_id), device, 0)
    g = torch.Generator(device=device).manual_seed(1)
    out = dict(inp)
    for name, fmt, idx_name in (("swa_cache", "fp8", "swa_idx"), ("comp_cache", inp["comp_format"], "comp_idx")):
        c = inp[name]
        pages, psize, stride = c.shape
        p0 = -(-PAST // (psize * stride))
        fc = far(tmp_path, name, (p0 + pages, psize, stride), torch.uint8, device)
        # fresh records at the slots the step reads, through the writer, near and far
        idx = inp[idx_name]
        live = idx[idx >= 0].unique()
        lat = torch.randn(live.numel(), 512, generator=g, device=device).bfloat16()
        pos = torch.randint(0, inp["cos_sin"].shape[0], (live.numel(),), generator=g, device=device)
        mqa_write_records(lat, pos, inp["cos_sin"], live, c, fmt)
        mqa_write_records(lat, pos, inp["cos_sin"], live + p0 * psize, fc, fmt)
        rb = RECORD_BYTES[fmt]  # the bytes past a record (to the stride) are not the writer's
        assert torch.equal(fc[p0:].view(-1, stride)[live, :rb], c.view(-1, stride)[live, :rb])
        out[name] = fc
        out[idx_name] = torch.where(idx >= 0, idx + p0 * psize, idx)
    near = mqa_headpad_call(inp, kernel=kernel)
    _same(near, mqa_headpad_call(out, kernel=kernel))
    assert near[0].abs().sum() > 0
