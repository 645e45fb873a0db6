"""attnkit in a serving step: one decode call of each family as an engine makes it, checked against the fp64 oracle.

  sparse_int8  an INT8 cache with per-channel scales (quantized here from bf16 keys and values), an indexer's
               top-k rows per token, the validated call, then the custom op captured in a CUDA graph.
  mqa_decode   the step's new latents written as fp8 records into the window cache and attended over it and an
               nvfp4 compressed cache (written by the same writer), 16 live heads of 64; the warm-up before
               capture, then the step's custom op captured in a CUDA graph.
  relbias      new tokens appended to a paged fp8 cache by the writer, then paged decode with the bias table.

On a GPU the shapes are model-sized and each family also replays a CUDA graph after its inputs change in place (the
graph's result must equal the eager call's bits); on a CPU (no GPU here) Triton's interpreter runs small shapes,
eagerly. Prints one line per family (relative RMS error against the oracle) and exits non-zero if any is off.

Usage: python examples/serving_layers.py
"""

import math
import os
import sys

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before attnkit (and its Triton kernels) is imported

import attnkit.ops  # noqa: E402,F401  (registers torch.ops.attnkit.*)
from attnkit.mqa_decode import mqa_decode_step, mqa_decode_warmup, mqa_write_records  # noqa: E402
from attnkit.reference import mqa_decode_ref, relbias_attention_paged_ref, sparse_int8_ref  # noqa: E402
from attnkit.relbias import relbias_attention, relbias_write_kv  # noqa: E402
from attnkit.sparse_int8 import sparse_int8_attention  # noqa: E402

GPU = torch.cuda.is_available()
DEV = "cuda" if GPU else "cpu"
BOUND = 1e-2  # relative RMS against fp64; these calls give 1.7e-3 to 3.1e-3 in the interpreter (bf16 outputs)


def rel_rms(out, ref) -> float:
    out, ref = out.double().cpu(), ref.double().cpu()
    return float(((out - ref) ** 2).mean().sqrt() / (ref ** 2).mean().sqrt())


def replayed(call, inputs_to_change):
    """The call captured in a CUDA graph, replayed after each tensor of inputs_to_change is rewritten in place: the
    replay's outputs must equal an eager call's on the new inputs, bit for bit. Returns True (no GPU: None)."""
    if not GPU:
        return None
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up on a side stream, as torch.cuda.graphs recommends
        call()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        outs = call()
    for t in inputs_to_change:
        t.copy_(t.roll(1, 0))
    g.replay()
    torch.cuda.synchronize()
    eager = call()
    return all(torch.equal(a, b) for a, b in zip(outs, eager))


def sparse_int8_decode(gen):
    T, Hq, Hkv, D, C, N = (4, 24, 2, 256, 8192, 2048) if GPU else (2, 8, 2, 64, 256, 64)
    k = torch.randn(Hkv, C, D, generator=gen)
    v = torch.randn(Hkv, C, D, generator=gen)
    key_scale = k.abs().amax(1) / 127  # per (KV head, channel)
    value_scale = v.abs().amax(1) / 127
    k_cache = (k / key_scale[:, None]).round().clamp(-127, 127).to(torch.int8).to(DEV)
    v_cache = (v / value_scale[:, None]).round().clamp(-127, 127).to(torch.int8).to(DEV)
    key_scale, value_scale = key_scale.to(DEV), value_scale.to(DEV)
    q = (torch.randn(T, Hq, D, generator=gen) * 1.4).to(torch.bfloat16).to(DEV)
    indices = torch.rand(T, C, generator=gen).topk(N, dim=1).indices.to(torch.int32)  # the indexer's pick
    indices[:, -3:] = -1  # empty slots are skipped
    indices = indices.to(DEV)
    out, lse = sparse_int8_attention(q, k_cache, v_cache, key_scale, value_scale, indices)  # validated
    ref, _ = sparse_int8_ref(q.cpu(), k_cache.cpu(), v_cache.cpu(), key_scale.cpu(), value_scale.cpu(),
                             indices.cpu())
    op = torch.ops.attnkit.sparse_int8  # no host checks: the form to capture
    graph = replayed(lambda: op(q, k_cache, v_cache, key_scale, value_scale, indices, 1 / math.sqrt(D), 0),
                     [q, indices])
    return rel_rms(out, ref), graph


def _cos_sin(max_pos):
    inv = 1.0 / (10000 ** (torch.arange(32, dtype=torch.float64) / 32))
    ang = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv
    return torch.cat([ang.cos(), ang.sin()], 1).float()  # [max_pos, 64]: 32 cos then 32 sin


def mqa_decode(gen):
    T, H, H_pad, W, K, page = (4, 16, 64, 128, 512, 64) if GPU else (2, 16, 64, 16, 48, 64)
    history = W + 8  # tokens already in the window cache
    cos_sin = _cos_sin(16 * K).to(DEV)  # covers the compressed records' positions (up to 16 K) and the step's
    swa_cache = torch.zeros(-(-(history + T) // page), page, 528, dtype=torch.uint8, device=DEV)  # fp8 records
    comp_cache = torch.zeros(-(-4 * K // page), page, 288, dtype=torch.uint8, device=DEV)  # nvfp4 records
    old = torch.randn(history, 512, generator=gen).to(torch.bfloat16).to(DEV)
    mqa_write_records(old, torch.arange(history, device=DEV), cos_sin, torch.arange(history, device=DEV),
                      swa_cache, "fp8")
    comp = torch.randn(4 * K, 512, generator=gen).to(torch.bfloat16).to(DEV)
    mqa_write_records(comp, torch.arange(4 * K, device=DEV) * 4, cos_sin, torch.arange(4 * K, device=DEV),
                      comp_cache, "nvfp4")
    # the step: T new tokens at positions history .. history + T - 1, their latents written into slots likewise
    positions = torch.arange(history, history + T, device=DEV)
    slots = positions.clone()
    latent = torch.randn(T, 512, generator=gen).to(torch.bfloat16).to(DEV)
    swa_idx = torch.stack([torch.arange(p - W + 1, p + 1) for p in positions.tolist()]).to(torch.int32).to(DEV)
    comp_idx = torch.stack([torch.randperm(4 * K, generator=gen)[:K] for _ in range(T)]).to(torch.int32).to(DEV)
    comp_idx[:, -5:] = -1
    q = torch.randn(T, H_pad, 512, generator=gen).to(torch.bfloat16).to(DEV)
    sink = torch.randn(H, generator=gen).to(DEV)
    scale = 1 / math.sqrt(512)
    args = (q, swa_cache, comp_cache, swa_idx, comp_idx, positions, cos_sin, sink, H, scale, "nvfp4")
    out, lse = mqa_decode_step(latent, slots, *args)
    ref, _ = mqa_decode_ref(*(a.cpu() if isinstance(a, torch.Tensor) else a for a in args))  # the cache as written
    graph = None
    if GPU:
        from attnkit._runtime import pdl_runs
        on = pdl_runs(q.device)
        mqa_decode_warmup(H, H_pad, "nvfp4", DEV, window=W, topk=K, max_tokens=T, page_size=page, pdl=on,
                          pdl_early_inputs=on)  # compiles every step size up to T before capture
        op = torch.ops.attnkit.mqa_decode_step
        graph = replayed(lambda: op(latent, slots, positions, *args, ""), [q, latent])
    return rel_rms(out, ref), graph


def relbias_decode(gen):
    B, Hq, Hkv, D, block, E = (8, 32, 8, 128, 16, 1024) if GPU else (2, 8, 2, 64, 16, 64)
    lens = [3000, 517] * (B // 2) if GPU else [40, 70]
    blocks_per_seq = -(-(max(lens) + 1) // block)
    k_cache = torch.zeros(B * blocks_per_seq, block, Hkv, D, dtype=torch.float8_e4m3fn, device=DEV)
    v_cache = torch.zeros_like(k_cache)
    block_table = torch.randperm(B * blocks_per_seq, generator=gen).view(B, blocks_per_seq).to(torch.int32).to(DEV)
    k_scale = torch.full((Hkv,), 0.02, device=DEV)
    v_scale = torch.full((Hkv,), 0.01, device=DEV)
    # prefill's keys and values, then this step's one new token per sequence, both through the writer
    for new in (lens, [1] * B):
        cu = torch.tensor([0] + torch.tensor(new).cumsum(0).tolist(), dtype=torch.int32, device=DEV)
        seqused = torch.tensor([0] * B if new is lens else lens, dtype=torch.int32, device=DEV)
        kn = torch.randn(sum(new), Hkv, D, generator=gen).to(torch.bfloat16).to(DEV)
        vn = torch.randn(sum(new), Hkv, D, generator=gen).to(torch.bfloat16).to(DEV)
        relbias_write_kv(kn, vn, cu, k_cache, v_cache, block_table, seqused, k_scale=k_scale, v_scale=v_scale)
    seqused_k = torch.tensor([n + 1 for n in lens], dtype=torch.int32, device=DEV)
    cu_q = torch.arange(B + 1, dtype=torch.int32, device=DEV)  # one query row per sequence
    q = torch.randn(B, Hq, D, generator=gen).to(torch.bfloat16).to(DEV)
    table = (torch.randn(Hq, E, generator=gen) * 0.5).to(DEV)
    kw = dict(table=table, beyond="zero", k_scale=k_scale, v_scale=v_scale)
    out, lse = relbias_attention(q, k_cache=k_cache, v_cache=v_cache, block_table=block_table, seqused_k=seqused_k,
                                 cu_seqlens_q=cu_q, **kw)
    ref, _ = relbias_attention_paged_ref(q.cpu(), k_cache.cpu(), v_cache.cpu(), block_table.cpu(), seqused_k.cpu(),
                                         cu_q.cpu(), table.cpu(), beyond="zero", k_scale=k_scale.cpu(),
                                         v_scale=v_scale.cpu())
    op = torch.ops.attnkit.relbias_paged
    graph = replayed(lambda: op(q, k_cache, v_cache, block_table, seqused_k, cu_q, table, 0, "zero", 1 / math.sqrt(D),
                                1, max(lens) + 1, k_scale, v_scale), [q])
    return rel_rms(out, ref), graph


def main() -> int:
    gen = torch.Generator().manual_seed(0)
    bad = 0
    for name, run in (("sparse_int8", sparse_int8_decode), ("mqa_decode", mqa_decode), ("relbias", relbias_decode)):
        err, graph = run(gen)
        ok = err <= BOUND and graph is not False
        bad += not ok
        print(f"{name:12s} relative RMS {err:.2e} (bound {BOUND:.0e})  graph replay "
              f"{'same bits' if graph else 'DIFFERS' if graph is False else 'not run (no GPU)'}  "
              f"{'ok' if ok else 'FAIL'}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
