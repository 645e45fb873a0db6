"""The host's floor for one kernel launch on this machine, beside one call of each op: where an eager call's host
time goes.

Per item, CPU us per call (perf_counter over N calls issued back to back, no synchronization inside; median of
ROUNDS rounds, the items alternating): an empty Triton kernel of 32 arguments (8 pointers, 8 ints, 8 floats,
8 constexprs, like this library's kernels) launched through Triton's JIT dispatch (``kernel[grid](...)``), the same
compiled kernel launched through its CompiledKernel runner, and through its launcher with the stream and handles
looked up once; ``torch.empty`` of a small CUDA tensor; ``torch.cuda.current_stream()``; and each op's call with
validation off and caller buffers (as benched), with the call cache (attnkit._callcache) on and off. On a CPU-only
machine it exits with a message.

Usage: python benchmarks/experiments/launch_floor.py OUT.json
"""

import json
import statistics
import sys
import time

import torch
import triton
import triton.language as tl

from attnkit import env as envmod

N = 400
ROUNDS = 5


@triton.jit
def _empty(p0, p1, p2, p3, p4, p5, p6, p7, i0, i1, i2, i3, i4, i5, i6, i7, f0, f1, f2, f3, f4, f5, f6, f7,
           C0: tl.constexpr, C1: tl.constexpr, C2: tl.constexpr, C3: tl.constexpr, C4: tl.constexpr,
           C5: tl.constexpr, C6: tl.constexpr, C7: tl.constexpr):
    if i0 < 0:  # never: keeps the arguments live without touching memory
        tl.store(p0 + i1, f0 + C0)


def _ops():
    from attnkit.mqa_decode import mqa_decode_attention
    from attnkit.relbias import relbias_attention
    from attnkit.sparse_int8 import sparse_int8_attention
    from attnkit.testing.inputs import make_inputs
    from attnkit.testing.shapes import get
    s = make_inputs(get("sparse_int8-model-decode-r1-c32k"), "cuda")
    sa = (s["q"], s["k_cache"], s["v_cache"], s["key_scale"], s["value_scale"], s["indices"])
    so, sl = torch.empty_like(s["q"]), torch.empty(s["q"].shape[:2], device="cuda")
    m = make_inputs(get("mqa_decode-step-h16-t1-fp8"), "cuda")
    ma = [m[n] for n in ("q", "swa_cache", "comp_cache", "swa_idx", "comp_idx", "positions", "cos_sin", "sink",
                         "num_heads", "softmax_scale", "comp_format")]
    r = make_inputs(get("relbias-model-decode-b32-8k"), "cuda")
    kw = dict(cu_seqlens_q=r["cu_seqlens_q"], table=r["table"], window=r["window"], beyond=r["beyond"],
              softmax_scale=r["softmax_scale"], k_scale=r.get("k_scale"), v_scale=r.get("v_scale"))
    ro, rl = torch.empty_like(r["q"]), torch.empty(r["q"].shape[:2], device="cuda")
    mxk = int((r["cu_seqlens_k"][1:] - r["cu_seqlens_k"][:-1]).max())
    calls = {
        "sparse_int8 decode 1 row (validate off)": lambda: sparse_int8_attention(
            *sa, scale=s["scale"], validate=False, out=so, lse=sl),
        "mqa_decode 16 heads x 1 token fp8, swap-AB (validate off)": lambda: mqa_decode_attention(
            *ma, validate=False, kernel="swapab"),
        "mqa_decode 16 heads x 1 token fp8, head-padded (validate off)": lambda: mqa_decode_attention(
            *ma, validate=False, kernel="headpad"),
        "relbias decode 32 x 8K (validate off)": lambda: relbias_attention(
            r["q"], r["k"], r["v"], cu_seqlens_k=r["cu_seqlens_k"], validate=False, max_seqlen_q=1,
            max_seqlen_k=mxk, out=ro, lse=rl, **kw),
    }
    out = {}
    for name, f in calls.items():
        out[name + ", cache on"] = _with_cache(f, True)
        out[name + ", cache off"] = _with_cache(f, False)
    return out


def _with_cache(f, on):
    from attnkit import _callcache

    def g():
        _callcache.set_call_cache(on)
        f()
    return g


def main():
    if not torch.cuda.is_available():
        sys.exit("launch_floor: no CUDA device here (the launch floor is a GPU host's)")
    x = torch.zeros(16, device="cuda")
    args = (x,) * 8 + tuple(range(1, 9)) + tuple(float(i) for i in range(8))
    cx = dict(C0=1, C1=2, C2=3, C3=4, C4=5, C5=6, C6=7, C7=8)
    _empty[(1,)](*args, **cx)
    compiled = _empty.warmup(*args, grid=(1,), **cx)
    runner = compiled[(1, 1, 1)]
    compiled._init_handles()
    stream = torch.cuda.current_stream().cuda_stream
    run, fn, meta = compiled.run, compiled.function, compiled.packed_metadata
    full = args + tuple(cx.values())
    items = {
        "triton JIT dispatch, empty kernel, 32 args": lambda: _empty[(1,)](*args, **cx),
        "CompiledKernel runner, same kernel": lambda: runner(*full),
        "launcher, stream and handles looked up once": lambda: run(1, 1, 1, stream, fn, meta, None, None, None,
                                                                    *full),
        "torch.empty(256) on cuda": lambda: torch.empty(256, device="cuda"),
        "torch.cuda.current_stream()": torch.cuda.current_stream,
    }
    items.update(_ops())
    for f in items.values():
        for _ in range(20):
            f()
    torch.cuda.synchronize()
    samples = {k: [] for k in items}
    for _ in range(ROUNDS):
        for k, f in items.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(N):
                f()
            samples[k].append((time.perf_counter() - t0) / N * 1e6)
        torch.cuda.synchronize()
    res = {k: {"median_us": round(statistics.median(v), 2), "samples_us": [round(s, 2) for s in v]}
           for k, v in samples.items()}
    with open(sys.argv[1], "w") as f:
        json.dump({"schema": 1, "env": envmod.record(), "n_calls": N, "rounds": ROUNDS, "host_us": res}, f, indent=1)
    for k, v in res.items():
        print(f"{k:66s} {v['median_us']:8.2f} us  {v['samples_us']}")


if __name__ == "__main__":
    main()
