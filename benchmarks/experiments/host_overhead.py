"""The host's share of an eager call: how long the CPU takes to issue one call of each op, beside the peers'.

Inside a CUDA graph the host's work is gone; an engine that runs a layer eagerly (prefill, chunked prefill, a
debugging run) pays it on every call, and where it exceeds the GPU time the GPU waits. Per case and provider:

  host_us   CPU time to issue one call (perf_counter over N calls issued back to back, no synchronization
            inside: what the Python wrapper, its checks and the kernel launches cost the host)
  wall_us   the same N calls until the GPU has finished them, per call (max of host and GPU time when the
            launches pipeline)
  graph_us  one call replayed from a CUDA graph (the GPU time alone; the bench's figure)

Providers: the bench's providers of the family (ours with validation off and caller buffers, as benched, and the
peers), plus ``ours-default``: our public call as a user writes it (validation on, outputs allocated). Rounds
alternate the providers; medians over rounds. A cProfile of ``ours-default`` per case lists where the host's time
goes (top entries by cumulative time).

Usage: python benchmarks/experiments/host_overhead.py OUT.json [case ...]. Prints a table last.
"""

import cProfile
import io
import json
import pstats
import statistics
import sys
import time

import torch

from attnkit import env as envmod
from attnkit.bench.harness import require_cuda
from attnkit.bench.providers import Provider, providers
from attnkit.testing.inputs import make_inputs
from attnkit.testing.shapes import get as get_case

DEFAULT_CASES = ["sparse_int8-model-decode-r1-c32k", "sparse_int8-model-prefill-r128-c8k",
                 "mqa_decode-step-h16-t1-fp8", "mqa_decode-step-h64-t1-fp8",
                 "relbias-model-decode-b32-8k", "relbias-model-prefill-8k-global"]
N_CALLS = 50
ROUNDS = 5


def _default_call(family):
    """Our public call as a user writes it: validation on, outputs allocated per call."""
    if family == "sparse_int8":
        def prep(inp):
            from attnkit.sparse_int8 import sparse_int8_attention
            return lambda: sparse_int8_attention(inp["q"], inp["k_cache"], inp["v_cache"], inp["key_scale"],
                                                 inp["value_scale"], inp["indices"], scale=inp["scale"])
        return prep
    if family == "mqa_decode":
        def prep(inp):
            from attnkit.mqa_decode import mqa_decode_attention
            args = (inp["q"], inp["swa_cache"], inp["comp_cache"], inp["swa_idx"], inp["comp_idx"],
                    inp["positions"], inp["cos_sin"], inp["sink"], inp["num_heads"], inp["softmax_scale"],
                    inp["comp_format"])
            return lambda: mqa_decode_attention(*args)
        return prep

    def prep(inp):
        from attnkit.relbias import relbias_attention
        kw = dict(cu_seqlens_q=inp["cu_seqlens_q"], table=inp["table"], window=inp["window"],
                  beyond=inp["beyond"], softmax_scale=inp["softmax_scale"], k_scale=inp.get("k_scale"),
                  v_scale=inp.get("v_scale"))
        if "k_cache" in inp:
            return lambda: relbias_attention(inp["q"], k_cache=inp["k_cache"], v_cache=inp["v_cache"],
                                             block_table=inp["block_table"], seqused_k=inp["seqused_k"], **kw)
        return lambda: relbias_attention(inp["q"], inp["k"], inp["v"], cu_seqlens_k=inp["cu_seqlens_k"], **kw)
    return prep


def _time(run, n):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        run()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return (t1 - t0) * 1e6 / n, (t2 - t0) * 1e6 / n


def _graph_us(run, n=20):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        run()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        run()
    g.replay()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n):
        g.replay()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) * 1e3 / n


def _profile(run, n=20):
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(n):
        run()
    pr.disable()
    torch.cuda.synchronize()
    buf = io.StringIO()
    pstats.Stats(pr, stream=buf).sort_stats("cumulative").print_stats(25)
    return buf.getvalue()


def main():
    require_cuda()
    out_path = sys.argv[1]
    ids = sys.argv[2:] or DEFAULT_CASES
    env = envmod.record()
    rows, profiles = [], {}
    for cid in ids:
        case = get_case(cid)
        inp = make_inputs(case, "cuda", 0)
        provs = [Provider("ours-default", case.family, "ours", "our public call, validation on, outputs allocated",
                          _default_call(case.family))]
        provs += [p for p in providers(case.family) if p.takes(case) and p.kind != "floor"]
        runs = {}
        for p in provs:
            try:
                r = p.prepare(inp)
                for _ in range(3):
                    r()
                torch.cuda.synchronize()
                runs[p.name] = r
            except Exception as e:  # noqa: BLE001  (recorded)
                torch.cuda.synchronize()
                rows.append({"case": cid, "provider": p.name, "status": "failed",
                             "error": f"{type(e).__name__}: {e}"[:300]})
        samples = {k: [] for k in runs}
        for rnd in range(ROUNDS):
            order = list(runs)
            order = order[rnd % len(order):] + order[:rnd % len(order)]
            for k in order:
                samples[k].append(_time(runs[k], N_CALLS))
        for k, r in runs.items():
            try:
                g = _graph_us(r)
            except Exception:  # noqa: BLE001  (a provider that cannot be captured: no graph time)
                torch.cuda.synchronize()
                g = None
            host = statistics.median(s[0] for s in samples[k])
            wall = statistics.median(s[1] for s in samples[k])
            rows.append({"case": cid, "provider": k, "status": "ok", "host_us": round(host, 2),
                         "wall_us": round(wall, 2), "graph_us": None if g is None else round(g, 2),
                         "host_samples_us": [round(s[0], 2) for s in samples[k]]})
            print(f"{cid:40s} {k:24s} host {host:8.1f} wall {wall:8.1f} graph {g if g is None else round(g, 1)}",
                  file=sys.stderr, flush=True)
        profiles[cid] = _profile(runs["ours-default"]) if "ours-default" in runs else ""
        del inp, runs
        torch.cuda.empty_cache()
    art = {"schema": 1, "env": env, "n_calls": N_CALLS, "rounds": ROUNDS, "rows": rows, "profiles": profiles}
    with open(out_path, "w") as f:
        json.dump(art, f, indent=1)
    print(f"{'case':40s} {'provider':24s} {'host us':>8s} {'wall us':>8s} {'graph us':>8s}")
    for r in rows:
        if r["status"] == "ok":
            print(f"{r['case']:40s} {r['provider']:24s} {r['host_us']:8.1f} {r['wall_us']:8.1f} "
                  f"{r['graph_us'] if r['graph_us'] is not None else '-':>8}")
        else:
            print(f"{r['case']:40s} {r['provider']:24s} FAILED {r['error'][:80]}")


if __name__ == "__main__":
    main()
