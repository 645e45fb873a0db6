"""Tensor parallelism: a rank holds a contiguous slice of the heads (sparse_int8 and relbias: whole KV heads
with their query heads; mqa_decode: a slice of the query heads over the shared latent). Running each shard on
its own and concatenating gives the same bits as the whole layer, so the kernels need no TP-specific path. The
last test runs the ranks as processes of a torch.distributed group (gloo over the interpreter on a CPU, NCCL with
one GPU per rank where there are two) and gathers their outputs."""

import json
import os

import pytest
import torch

from attnkit.mqa_decode import mqa_decode_attention
from attnkit.relbias import relbias_attention
from attnkit.sparse_int8 import sparse_int8_attention
from attnkit.testing import shapes
from attnkit.testing.inputs import make_inputs

# family -> (case, seed) of the shard tests
CASES = {"sparse_int8": ("sparse_int8-decode-r3-g6-n509-perhead", 4),  # Hq 12, Hkv 2, indices [T, Hkv, N]
         "mqa_decode": ("mqa_decode-small-t2-h32-nvfp4", 6),
         "relbias": ("relbias-decode-b3-k203", 2)}


def _inputs(family, device):
    case, seed = CASES[family]
    return make_inputs(shapes.get(case), device, seed)


def sparse_int8_rank(inp, r=None, ranks=2):
    """Rank r's (out, lse) of the KV heads r * Hkv / ranks .. with their query heads; r None: the whole layer."""
    args = dict(scale=inp["scale"], tiles_per_split=2)
    q, kc, vc, ks, vs, ix = (inp[n] for n in ("q", "k_cache", "v_cache", "key_scale", "value_scale", "indices"))
    if r is None:
        return sparse_int8_attention(q, kc, vc, ks, vs, ix, **args)
    Hq, Hkv = q.shape[1], kc.shape[0]
    kv = slice(r * Hkv // ranks, (r + 1) * Hkv // ranks)
    qh = slice(r * Hq // ranks, (r + 1) * Hq // ranks)
    return sparse_int8_attention(q[:, qh], kc[kv], vc[kv], ks[kv].contiguous(), vs[kv].contiguous(),
                                 ix[:, kv].contiguous(), **args)


def mqa_decode_rank(inp, r=None, ranks=2, kernel="headpad"):
    """Rank r's heads r * H / ranks .. in the rank's own padded query buffer; r None: all H heads."""
    H = inp["num_heads"]
    common = (inp["swa_cache"], inp["comp_cache"], inp["swa_idx"], inp["comp_idx"], inp["positions"], inp["cos_sin"])
    if r is None:
        return mqa_decode_attention(inp["q"], *common, inp["sink"], H, inp["softmax_scale"], inp["comp_format"],
                                    kernel=kernel, num_splits=2)
    hs = slice(r * H // ranks, (r + 1) * H // ranks)
    q = torch.zeros_like(inp["q"])  # the rank's own padded query buffer
    q[:, :H // ranks] = inp["q"][:, hs]
    return mqa_decode_attention(q, *common, inp["sink"][hs].contiguous(), H // ranks, inp["softmax_scale"],
                                inp["comp_format"], kernel=kernel, num_splits=2)


def relbias_rank(inp, r=None, ranks=2):
    """Rank r's KV heads with their query heads and their rows of the bias table; r None: the whole layer."""
    kw = dict(cu_seqlens_q=inp["cu_seqlens_q"], cu_seqlens_k=inp["cu_seqlens_k"], window=inp["window"],
              beyond=inp["beyond"], softmax_scale=inp["softmax_scale"], num_splits=2)
    if r is None:
        return relbias_attention(inp["q"], inp["k"], inp["v"], table=inp["table"], **kw)
    Hq, Hkv = inp["q"].shape[1], inp["k"].shape[1]
    kv = slice(r * Hkv // ranks, (r + 1) * Hkv // ranks)
    qh = slice(r * Hq // ranks, (r + 1) * Hq // ranks)
    return relbias_attention(inp["q"][:, qh].contiguous(), inp["k"][:, kv].contiguous(), inp["v"][:, kv].contiguous(),
                             table=inp["table"][qh].contiguous(), **kw)


RANK_CALLS = {"sparse_int8": sparse_int8_rank, "mqa_decode": mqa_decode_rank, "relbias": relbias_rank}


def _same(shards, full):
    outs, lses = zip(*shards)
    return torch.equal(torch.cat(outs, 1), full[0]) and torch.equal(torch.cat(lses, 1), full[1])


@pytest.mark.parametrize("ranks", [2])
def test_sparse_int8_kv_head_shards(ranks, device):
    inp = _inputs("sparse_int8", device)
    assert _same([sparse_int8_rank(inp, r, ranks) for r in range(ranks)], sparse_int8_rank(inp))


@pytest.mark.parametrize("kernel", ["headpad", "swapab"])
def test_mqa_decode_head_shards(kernel, device):
    """32 heads as two ranks of 16 (TP2 -> TP4), each rank's q padded to its own H_pad."""
    inp = _inputs("mqa_decode", device)
    full = mqa_decode_rank(inp, kernel=kernel)
    shards = [mqa_decode_rank(inp, r, 2, kernel) for r in range(2)]
    if device == "cpu" and kernel == "swapab":
        # the interpreter's MMA is numpy's OpenBLAS sgemm, whose blocking depends on the head count (N): the Triton
        # swap-AB twin's scores round differently at 16 and 32 heads; compiled, each head's column is its own
        outs, lses = zip(*shards)
        torch.testing.assert_close(torch.cat(outs, 1), full[0], rtol=2 ** -8, atol=2 ** -8)
        torch.testing.assert_close(torch.cat(lses, 1), full[1], rtol=1e-6, atol=1e-6)
    else:
        assert _same(shards, full)


def test_relbias_kv_head_shards(device):
    inp = _inputs("relbias", device)
    assert _same([relbias_rank(inp, r) for r in range(2)], relbias_rank(inp))


def _gather(dist, t, ranks):
    """all_gather of t's bytes (gloo gathers no bfloat16): the ranks' tensors, each with t's dtype and shape."""
    b = t.contiguous().reshape(-1).view(torch.uint8)
    parts = [torch.empty_like(b) for _ in range(ranks)]
    dist.all_gather(parts, b)
    return [p.view(t.dtype).reshape(t.shape) for p in parts]


def _rank_process(rank, ranks, init_file, out_dir, nccl):
    """One rank of the group: its shard of each family's layer, the outputs gathered, and on every rank the gathered
    layer against the whole layer computed here (a JSON file per rank says which matched)."""
    import torch.distributed as dist
    if nccl:
        torch.cuda.set_device(rank)
    device = f"cuda:{rank}" if nccl else "cpu"
    dist.init_process_group("nccl" if nccl else "gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=ranks)
    try:
        same = {}
        for family, call in RANK_CALLS.items():
            inp = _inputs(family, device)
            o, lse = call(inp, rank, ranks)
            outs, lses = _gather(dist, o, ranks), _gather(dist, lse, ranks)
            same[family] = _same(list(zip(outs, lses)), call(inp))
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
            json.dump(same, f)
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(torch.cuda.device_count() == 1, reason="one GPU: its ranks need a device each (not a pass)")
def test_ranks_as_processes_gather_the_whole_layers_bits(tmp_path):
    """Two processes in a torch.distributed group, each computing its rank's shard of a sparse_int8, an mqa_decode
    and a relbias layer on its own device (NCCL, one GPU each) or on the CPU in the interpreter (gloo); the
    all-gathered shards give every rank the whole layer's bits."""
    import torch.multiprocessing as mp
    ranks = 2
    nccl = torch.cuda.device_count() >= ranks
    mp.spawn(_rank_process, args=(ranks, str(tmp_path / "init"), str(tmp_path), nccl), nprocs=ranks, join=True)
    for r in range(ranks):
        got = json.loads((tmp_path / f"rank{r}.json").read_text())
        assert got == {f: True for f in RANK_CALLS}, (r, got)
