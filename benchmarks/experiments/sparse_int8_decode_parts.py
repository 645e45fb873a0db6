"""Where a sparse_int8 decode call's time goes: the attention kernel, the merge, and the launches themselves.

Per decode case, in one bench run (attnkit.bench.harness.bench_case: CUDA-graph replay over rotated input sets,
providers alternating in shuffled order, paired ratios), settings:
  rule                 the call as dispatched (attention kernel + split-K merge)
  rule-nomerge         the same call with the merge launch left out (its output is then not the answer: a timing
                       decomposition only)
  rule-mergeonly       the merge alone, over the partials the dispatched kernel wrote (real data)
  tps{k}[-nomerge|-mergeonly]  the Triton kernels with k tiles of 32 candidates per split (fewer, longer splits:
                       a smaller merge), the same three ways
  gtps{k}[-nomerge|-mergeonly] the Gluon kernel (sm_90) with k tiles of 64 candidates per split, the same three
                       ways (k = 2 at 1 row: 16 splits per KV head, what one thread-block cluster of 16 CTAs holds)
  empty1 / empty2      one / two launches of a kernel of 128 programs that stores one word each: the graph-replay
                       cost of a launch with no work, the floor under any call of one or two kernels

Usage: python benchmarks/experiments/sparse_int8_decode_parts.py OUT.json [case ...]
(default the ONNX Runtime model decode cases at 1, 2, 4 and 8 rows, 32K cache). Prints a table last.
"""

import sys

import torch
import triton
import triton.language as tl

from attnkit import splitk
from attnkit.bench.harness import bench_experiment
from attnkit.bench.providers import Provider, _sparse_ours


@triton.jit
def _touch_kernel(X):
    tl.store(X + tl.program_id(0), 1.0)


def _empty(n):
    def prepare(inp):
        x = torch.empty(128, device=inp["q"].device)

        def run():
            for _ in range(n):
                _touch_kernel[(128,)](x)
        return run
    return prepare


def _nomerge(**kw):
    def prepare(inp):
        fn = _sparse_ours(inp, **kw)

        def run():
            orig = splitk.merge_partials_into
            splitk.merge_partials_into = lambda *a, **k: None
            try:
                fn()
            finally:
                splitk.merge_partials_into = orig
        return run
    return prepare


def _mergeonly(**kw):
    def prepare(inp):
        seen = {}
        orig = splitk.merge_partials_into

        def spy(*a, **k):
            seen["a"], seen["k"] = a, k
            return orig(*a, **k)
        splitk.merge_partials_into = spy
        try:
            _sparse_ours(inp, **kw)()
        finally:
            splitk.merge_partials_into = orig
        if "a" not in seen:
            raise RuntimeError("this setting runs direct: no merge")
        torch.cuda.synchronize()
        return lambda: orig(*seen["a"], **seen["k"])
    return prepare


def providers():
    ps = [Provider("rule", "sparse_int8", "ours", "as dispatched", lambda inp: _sparse_ours(inp)),
          Provider("rule-nomerge", "sparse_int8", "ours", "as dispatched, merge left out", _nomerge()),
          Provider("rule-mergeonly", "sparse_int8", "ours", "the dispatched call's merge alone", _mergeonly())]
    settings = [("tps", "Triton", False, k) for k in (1, 2, 4, 8)] + [("gtps", "Gluon", True, k) for k in (1, 2, 4)]
    for tag, name, gl, k in settings:
        kw = dict(gluon=gl, tiles_per_split=k)
        ps += [Provider(f"{tag}{k}", "sparse_int8", "ours", f"{name}, {k} tiles per split",
                        lambda inp, kw=kw: _sparse_ours(inp, **kw)),
               Provider(f"{tag}{k}-nomerge", "sparse_int8", "ours", f"{name}, {k} tiles per split, no merge",
                        _nomerge(**kw)),
               Provider(f"{tag}{k}-mergeonly", "sparse_int8", "ours", f"{name}, {k} tiles per split: its merge",
                        _mergeonly(**kw))]
    ps += [Provider("empty1", "sparse_int8", "floor", "one launch of 128 programs storing a word", _empty(1)),
           Provider("empty2", "sparse_int8", "floor", "two such launches", _empty(2))]
    return ps


def main():
    out_path = sys.argv[1]
    ids = sys.argv[2:] or [f"sparse_int8-model-decode-r{r}-c32k" for r in (1, 2, 4, 8)]
    rows = bench_experiment(ids, providers, __doc__.split("\n")[0], out_path)
    print(f"{'setting':18s} " + " ".join(f"{c.split('-')[-2]:>8s}" for c in ids) + "   (median us)")
    for p in providers():
        cells = []
        for cid in ids:
            r = next((r for r in rows if r["case"] == cid and r["provider"] == p.name), {})
            cells.append(f"{r['median_us']:8.2f}" if r.get("status") == "ok" else f"{'-':>8s}")
        print(f"{p.name:18s} " + " ".join(cells))


if __name__ == "__main__":
    main()
