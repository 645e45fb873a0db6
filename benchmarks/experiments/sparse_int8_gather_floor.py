"""The gather floor of sparse_int8 prefill: how fast can a GPU only *read* the rows the attention reads?

Each program (token, KV head) loads its N candidate indices and gathers their key and value rows (D int8 bytes
each), folding them into a checksum so that nothing is dead code: no products, no softmax. Every (token, KV head)
reads its own rows, as the attention kernels do (no reuse of rows shared by several tokens). The time of the best
tile setting is a floor for any kernel of that structure; bytes gathered / time is the rate the memory system
delivers to such gathers (the cache, 2 x Hkv x C x D bytes, stays in L2 at C = 8192).

Usage: python benchmarks/experiments/sparse_int8_gather_floor.py OUT.json [case ...]
(case ids from attnkit.testing.shapes, default the three model prefill cases). Timed by CUDA-graph replay, median
of 7 samples per setting; the inputs are the bench's (attnkit.testing.inputs.make_inputs, seed 0). The kernel is the
bench provider's (attnkit.bench.gather_floor) with one split; gather-floor-h200-686bfaa.json was written by a copy of
it that this script held then (the same loads, without the split bounds).
"""

import json
import statistics
import sys

import torch
import triton

from attnkit.bench.gather_floor import gather_floor_kernel  # one program per (token, KV head) here: no split


def time_graph(fn, samples=7):
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    g.replay()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    g.replay()
    e.record()
    torch.cuda.synchronize()
    reps = max(1, min(1000, int(0.02 / max(s.elapsed_time(e) * 1e-3, 1e-7))))
    out = []
    for _ in range(samples):
        s.record()
        for _ in range(reps):
            g.replay()
        e.record()
        torch.cuda.synchronize()
        out.append(s.elapsed_time(e) * 1e3 / reps)
    return statistics.median(out), min(out), max(out)


def main():
    from attnkit.bench.harness import require_cuda
    require_cuda()
    from attnkit.testing.inputs import make_inputs
    from attnkit.testing.shapes import get as get_case

    out_path = sys.argv[1]
    ids = sys.argv[2:] or [f"sparse_int8-model-prefill-r{t}-c8k" for t in (128, 2048, 8192)]
    rows = []
    for cid in ids:
        inp = make_inputs(get_case(cid), "cuda")
        kc, vc, idx = inp["k_cache"], inp["v_cache"], inp["indices"]
        Hkv, C, D = kc.shape
        T, N = idx.shape[0], idx.shape[-1]
        assert idx.dim() == 2 and kc.stride() == vc.stride() and kc.stride(-1) == 1
        res = torch.empty(T * Hkv, dtype=torch.int32, device="cuda")
        gathered = T * Hkv * N * 2 * D
        best = None
        for bn in (32, 64, 128):
            for warps in (4, 8):
                for stages in (1, 2, 3, 4):
                    def run(bn=bn, warps=warps, stages=stages):
                        gather_floor_kernel[(T * Hkv, 1)](kc, vc, idx, res, N, C, N, kc.stride(0), kc.stride(1),
                                                          idx.stride(0), 0, HKV=Hkv, D=D, BLOCK_N=bn,
                                                          num_warps=warps, num_stages=stages)
                    try:
                        med, lo, hi = time_graph(run)
                    except Exception as e:  # noqa: BLE001  (a setting that does not compile or fit)
                        rows.append(dict(case=cid, block_n=bn, warps=warps, stages=stages, error=str(e)[:200]))
                        continue
                    r = dict(case=cid, block_n=bn, warps=warps, stages=stages, us=round(med, 2), us_min=round(lo, 2),
                             us_max=round(hi, 2), bytes_gathered=gathered, tb_per_s=round(gathered / med / 1e6, 3))
                    rows.append(r)
                    if best is None or med < best["us"]:
                        best = r
                    print(f"{cid:40s} bn{bn:<4d} w{warps} s{stages}  {med:9.1f} us  {r['tb_per_s']:6.2f} TB/s",
                          flush=True)
        print(f"BEST {cid}: {best}", flush=True)
    env = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__)
    with open(out_path, "w") as f:
        json.dump(dict(env=env, what=__doc__.strip().splitlines()[0], rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
