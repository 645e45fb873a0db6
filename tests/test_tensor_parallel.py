"""Tensor parallelism: a rank holds a contiguous slice of the heads (sparse_int8 and relbias: whole KV heads
with their query heads; mqa_decode: a slice of the query heads over the shared latent). Running each shard on
its own and concatenating gives the same bits as the whole layer, so the kernels need no TP-specific path."""

import pytest
import torch

from attnkit.mqa_decode import mqa_decode_attention
from attnkit.relbias import relbias_attention
from attnkit.sparse_int8 import sparse_int8_attention
from attnkit.testing import shapes
from attnkit.testing.inputs import make_inputs


@pytest.mark.parametrize("ranks", [2])
def test_sparse_int8_kv_head_shards(ranks, device):
    inp = make_inputs(shapes.get("sparse_int8-decode-r3-g6-n509-perhead"), device, 4)  # Hq 12, Hkv 2, [T, Hkv, N]
    args = dict(scale=inp["scale"], tiles_per_split=2)
    full = sparse_int8_attention(inp["q"], inp["k_cache"], inp["v_cache"], inp["key_scale"], inp["value_scale"],
                                 inp["indices"], **args)
    Hq, Hkv = inp["q"].shape[1], inp["k_cache"].shape[0]
    outs, lses = [], []
    for r in range(ranks):
        kv = slice(r * Hkv // ranks, (r + 1) * Hkv // ranks)
        qh = slice(r * Hq // ranks, (r + 1) * Hq // ranks)
        o, l = sparse_int8_attention(inp["q"][:, qh], inp["k_cache"][kv], inp["v_cache"][kv],
                                     inp["key_scale"][kv].contiguous(), inp["value_scale"][kv].contiguous(),
                                     inp["indices"][:, kv].contiguous(), **args)
        outs.append(o)
        lses.append(l)
    assert torch.equal(torch.cat(outs, 1), full[0]) and torch.equal(torch.cat(lses, 1), full[1])


@pytest.mark.parametrize("kernel", ["headpad", "swapab"])
def test_mqa_decode_head_shards(kernel, device):
    """32 heads as two ranks of 16 (TP2 -> TP4), each rank's q padded to its own H_pad."""
    inp = make_inputs(shapes.get("mqa_decode-small-t2-h32-nvfp4"), device, 6)
    H = inp["num_heads"]
    common = (inp["swa_cache"], inp["comp_cache"], inp["swa_idx"], inp["comp_idx"], inp["positions"], inp["cos_sin"])
    full = mqa_decode_attention(inp["q"], *common, inp["sink"], H, inp["softmax_scale"], inp["comp_format"],
                                kernel=kernel, num_splits=2)
    outs, lses = [], []
    for r in range(2):
        hs = slice(r * H // 2, (r + 1) * H // 2)
        q = torch.zeros_like(inp["q"])  # the rank's own padded query buffer
        q[:, :H // 2] = inp["q"][:, hs]
        o, l = mqa_decode_attention(q, *common, inp["sink"][hs].contiguous(), H // 2, inp["softmax_scale"],
                                    inp["comp_format"], kernel=kernel, num_splits=2)
        outs.append(o)
        lses.append(l)
    if device == "cpu" and kernel == "swapab":
        # the interpreter's MMA is numpy's OpenBLAS sgemm, whose blocking depends on the head count (N): the Triton
        # swap-AB twin's scores round differently at 16 and 32 heads; compiled, each head's column is its own
        torch.testing.assert_close(torch.cat(outs, 1), full[0], rtol=2 ** -8, atol=2 ** -8)
        torch.testing.assert_close(torch.cat(lses, 1), full[1], rtol=1e-6, atol=1e-6)
    else:
        assert torch.equal(torch.cat(outs, 1), full[0]) and torch.equal(torch.cat(lses, 1), full[1])


def test_relbias_kv_head_shards(device):
    inp = make_inputs(shapes.get("relbias-decode-b3-k203"), device, 2)
    Hq, Hkv = inp["q"].shape[1], inp["k"].shape[1]
    kw = dict(cu_seqlens_q=inp["cu_seqlens_q"], cu_seqlens_k=inp["cu_seqlens_k"], window=inp["window"],
              beyond=inp["beyond"], softmax_scale=inp["softmax_scale"], num_splits=2)
    full = relbias_attention(inp["q"], inp["k"], inp["v"], table=inp["table"], **kw)
    outs, lses = [], []
    for r in range(2):
        kv = slice(r * Hkv // 2, (r + 1) * Hkv // 2)
        qh = slice(r * Hq // 2, (r + 1) * Hq // 2)
        o, l = relbias_attention(inp["q"][:, qh].contiguous(), inp["k"][:, kv].contiguous(),
                                 inp["v"][:, kv].contiguous(), table=inp["table"][qh].contiguous(), **kw)
        outs.append(o)
        lses.append(l)
    assert torch.equal(torch.cat(outs, 1), full[0]) and torch.equal(torch.cat(lses, 1), full[1])
