"""The providers registry: our kernels and the peers users would pick instead, per family.

Each provider's ``prepare(inp)`` plans outside the timed region and returns ``run()``, the per-step
work that is captured in a CUDA graph and timed. A provider that cannot take a shape raises, and the
harness records the failure with its error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from .. import peers


@dataclass(frozen=True)
class Provider:
    name: str
    family: str
    kind: str  # "ours" | "peer" | "floor" (a kernel without the feature: the floor a feature can approach)
    what: str
    prepare: Callable
    applies: Callable | None = None  # case -> bool; None: every case of the family
    floor_bytes: Callable | None = None  # case -> bytes, for a provider that does part of a case (its own floor)

    def takes(self, case) -> bool:
        return self.applies is None or bool(self.applies(case))


PROVIDERS: dict[str, list[Provider]] = {
    "relbias": [
        Provider("attnkit_fwd", "relbias", "ours",
                 "attnkit.relbias.relbias_attention as dispatched (forward kernel: the Gluon kernel on sm_90 where "
                 "it takes the input, else Triton; split-K decode kernel + merge for up to 32 query tokens)",
                 lambda inp: _relbias_ours(inp)),
        Provider("attnkit_triton", "relbias", "ours",
                 "attnkit.relbias.relbias_attention with gluon=False, gluon_decode=False: the Triton kernels (what "
                 "runs off sm_90) on the cases where a Gluon kernel is dispatched (prefill; fp8 decode)",
                 lambda inp: _relbias_ours(inp, gluon=False, gluon_decode=False),
                 applies=lambda c: _gluon_fwd_case(c) or _gluon_decode_case(c)),
        Provider("flex_score_mod", "relbias", "peer",
                 "FlexAttention (torch.compile) with the bias as score_mod and causal/window/varlen as block_mask; "
                 "paged / fp8 KV gathered and dequantized per step",
                 lambda inp: peers.relbias_flex(inp, bias=True, compiled=True)),
        Provider("flex_nobias", "relbias", "floor", "FlexAttention (torch.compile), same masks, no bias",
                 lambda inp: peers.relbias_flex(inp, bias=False, compiled=True)),
        Provider("sdpa_cudnn_nobias", "relbias", "floor", "SDPA cuDNN backend, no bias (no window, no varlen)",
                 lambda inp: peers.relbias_sdpa(inp, backend="cudnn")),
        Provider("sdpa_flash_nobias", "relbias", "floor", "SDPA flash backend, no bias (no window, no varlen)",
                 lambda inp: peers.relbias_sdpa(inp, backend="flash")),
        Provider("sdpa_bias_mask", "relbias", "peer",
                 "SDPA (efficient backend) with the bias materialized per step as a bf16 mask [Hq, Lq, Lk] and the "
                 "KV heads expanded (the backend takes no GQA)",
                 lambda inp: peers.relbias_sdpa(inp, backend="efficient", bias=True)),
    ],
    "sparse_int8": [
        Provider("attnkit", "sparse_int8", "ours", "attnkit.sparse_int8.sparse_int8_attention as dispatched "
                 "(validation off in the timed call)", lambda inp: _sparse_ours(inp)),
        Provider("attnkit_triton", "sparse_int8", "ours", "attnkit.sparse_int8.sparse_int8_attention with gluon=False: "
                 "the Triton kernels (what runs off sm_90; on sm_90, what the Gluon kernel replaces)",
                 lambda inp: _sparse_ours(inp, gluon=False)),
        Provider("attnkit_bf16_cache", "sparse_int8", "floor", "the attnkit Triton kernels over a bf16 cache (the "
                 "int8 codes held in bf16; the Gluon kernel takes int8 caches only): what an INT8 cache buys the "
                 "Triton kernels", lambda inp: _sparse_ours(inp, bf16_cache=True)),
        Provider("torch_dequant_sdpa", "sparse_int8", "peer", "PyTorch gather + dequantize to bf16 + SDPA",
                 lambda inp: peers.sparse_int8_torch(inp)),
        Provider("gather_only", "sparse_int8", "floor", "the gather-only floor (attnkit.bench.gather_floor): the "
                 "candidates' key and value rows read once per (token, KV head) and folded into a checksum, no "
                 "arithmetic of the attention: what any kernel that gathers per token needs at least",
                 lambda inp: _sparse_gather(inp)),
    ],
    "mqa_decode": [
        Provider("attnkit_headpad", "mqa_decode", "ours", "attnkit head-padded decode (attention only)",
                 lambda inp: _mqa_ours(inp, "headpad")),
        Provider("attnkit_swapab", "mqa_decode", "ours", "attnkit swap-AB decode (attention only; H 16 / 32; the "
                 "Gluon kernel on sm_90, else Triton)",
                 lambda inp: _mqa_ours(inp, "swapab"), applies=lambda c: c["H"] in (16, 32)),
        Provider("attnkit_swapab_triton", "mqa_decode", "ours", "attnkit swap-AB decode, the Triton kernel "
                 "(attention only; H 16 / 32)",
                 lambda inp: _mqa_ours(inp, "swapab", gluon=False), applies=lambda c: c["H"] in (16, 32)),
        Provider("attnkit_insert", "mqa_decode", "ours", "attnkit record writer: the step's T new tokens into the "
                 "window cache (a step = this + attention)", lambda inp: _mqa_insert(inp),
                 floor_bytes=lambda c: c["T"] * (512 * 2 + 8 + 8 + 64 * 4 + 528)),
        Provider("attnkit_step_headpad", "mqa_decode", "ours", "a step: insert + head-padded attention, every "
                 "kernel a programmatic dependent of the one before and the query prepared during the insert (pdl, "
                 "pdl_early_inputs: its fastest step, sweep mqa-pdl-early; the launches mqa_decode_step makes)",
                 lambda inp: _mqa_step(inp, "headpad", pdl=True, pdl_early_inputs=True)),
        Provider("attnkit_step_swapab", "mqa_decode", "ours", "a step: insert + swap-AB attention (H 16 / 32), every "
                 "kernel a programmatic dependent of the one before and the query prepared during the insert (pdl, "
                 "pdl_early_inputs: its fastest step, sweep mqa-pdl-early; the launches mqa_decode_step makes)",
                 lambda inp: _mqa_step(inp, "swapab", pdl=True, pdl_early_inputs=True),
                 applies=lambda c: c["H"] in (16, 32)),
        Provider("torch_dequant_sdpa", "mqa_decode", "peer",
                 "PyTorch record gather + dequantize to bf16 + SDPA (sink as a zero-valued key)",
                 lambda inp: peers.mqa_decode_torch(inp)),
    ],
}


def _gluon_fwd_case(c) -> bool:
    """A prefill case (more than DECODE_MAX_Q query tokens) the Gluon forward kernel takes, on a GPU it runs on."""
    from .._runtime import gluon_runs
    from ..relbias.config import DECODE_MAX_Q, gluon_fwd_takes
    return (gluon_fwd_takes(c["block_size"] is not None, c["kv"] == "fp8", c["D"])
            and max(c["seqlens_q"]) > DECODE_MAX_Q and torch.cuda.is_available() and gluon_runs(torch.device("cuda")))


def _gluon_decode_case(c) -> bool:
    """A relbias case whose decode runs the Gluon fp8 decode kernel here (config.gluon_decode_rule, a contiguous
    cache)."""
    from .._runtime import gluon_runs
    from ..relbias.config import DECODE_MAX_Q, gluon_decode_rule
    max_q = max(c["seqlens_q"])
    return (max_q <= DECODE_MAX_Q and torch.cuda.is_available()
            and gluon_decode_rule(gluon_runs(torch.device("cuda")), c["kv"] == "fp8", c["D"], c["Hq"] // c["Hkv"],
                                  max_q, c["block_size"] is None, False))


def _relbias_ours(inp, **extra):
    """Plan outside the timing (max_seqlen_q, validation, output buffers), then launch only."""
    from ..relbias import relbias_attention
    lq = inp["cu_seqlens_q"][1:] - inp["cu_seqlens_q"][:-1]
    max_q = int(lq.max())
    lk = inp["seqused_k"] if "k_cache" in inp else inp["cu_seqlens_k"][1:] - inp["cu_seqlens_k"][:-1]
    max_k = int(lk.max())
    out = torch.empty_like(inp["q"])
    lse = torch.empty(inp["q"].shape[:2], dtype=torch.float32, device=inp["q"].device)
    kw = dict(cu_seqlens_q=inp["cu_seqlens_q"], table=inp["table"], window=inp["window"], beyond=inp["beyond"],
              softmax_scale=inp["softmax_scale"], k_scale=inp.get("k_scale"), v_scale=inp.get("v_scale"),
              max_seqlen_q=max_q, max_seqlen_k=max_k, out=out, lse=lse, **extra)
    if "k_cache" in inp:
        kw.update(k_cache=inp["k_cache"], v_cache=inp["v_cache"], block_table=inp["block_table"],
                  seqused_k=inp["seqused_k"])
        relbias_attention(inp["q"], **kw)  # validate once, here
        return lambda: relbias_attention(inp["q"], validate=False, **kw)
    relbias_attention(inp["q"], inp["k"], inp["v"], cu_seqlens_k=inp["cu_seqlens_k"], **kw)
    return lambda: relbias_attention(inp["q"], inp["k"], inp["v"], cu_seqlens_k=inp["cu_seqlens_k"], validate=False,
                                     **kw)


def _sparse_ours(inp, bf16_cache=False, **extra):
    from ..sparse_int8 import sparse_int8_attention
    kc, vc = inp["k_cache"], inp["v_cache"]
    if bf16_cache:
        kc, vc = kc.to(torch.bfloat16), vc.to(torch.bfloat16)
    args = (inp["q"], kc, vc, inp["key_scale"], inp["value_scale"], inp["indices"])
    out = torch.empty_like(inp["q"])
    lse = torch.empty(inp["q"].shape[:2], dtype=torch.float32, device=inp["q"].device)
    sparse_int8_attention(*args, scale=inp["scale"], out=out, lse=lse, **extra)  # validate once, here
    return lambda: sparse_int8_attention(*args, scale=inp["scale"], out=out, lse=lse, validate=False, **extra)


def _sparse_gather(inp):
    from .gather_floor import gather_floor
    sms = torch.cuda.get_device_properties(inp["q"].device).multi_processor_count
    return gather_floor(inp["k_cache"], inp["v_cache"], inp["indices"], sms)


def _mqa_ours(inp, kernel, **extra):
    from ..mqa_decode import mqa_decode_attention
    args = (inp["q"], inp["swa_cache"], inp["comp_cache"], inp["swa_idx"], inp["comp_idx"], inp["positions"],
            inp["cos_sin"], inp["sink"], inp["num_heads"], inp["softmax_scale"], inp["comp_format"])
    mqa_decode_attention(*args, kernel=kernel, **extra)  # validate once, here
    return lambda: mqa_decode_attention(*args, kernel=kernel, validate=False, **extra)


def _mqa_insert(inp, pdl=None, loads_first=None, release_early=None):
    from ..mqa_decode import mqa_write_records
    T = inp["q"].shape[0]
    lat = inp["q"][:, 0, :].contiguous()  # T new latents
    slots = inp["swa_idx"][:, 0].long().clamp(min=0)
    slots = torch.arange(T, device=lat.device) if slots.unique().numel() < T else slots
    mqa_write_records(lat, inp["positions"], inp["cos_sin"], slots, inp["swa_cache"], "fp8", pdl=pdl,
                      loads_first=loads_first, release_early=release_early)
    return lambda: mqa_write_records(lat, inp["positions"], inp["cos_sin"], slots, inp["swa_cache"], "fp8",
                                     validate=False, pdl=pdl, loads_first=loads_first, release_early=release_early)


def _mqa_step(inp, kernel, pdl=None, writer_loads_first=None, writer_release_early=None, **extra):
    insert = _mqa_insert(inp, pdl=pdl, loads_first=writer_loads_first, release_early=writer_release_early)
    attend = _mqa_ours(inp, kernel, pdl=pdl, **extra)

    def run():
        insert()
        return attend()
    return run



def providers(family: str, names=None) -> list[Provider]:
    ps = PROVIDERS[family]
    if names:
        unknown = set(names) - {p.name for p in ps}
        if unknown:
            raise ValueError(f"unknown provider(s) for {family}: {sorted(unknown)}; known: {[p.name for p in ps]}")
        ps = [p for p in ps if p.name in names]
    return ps
