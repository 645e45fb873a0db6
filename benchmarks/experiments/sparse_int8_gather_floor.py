"""The gather floor of sparse_int8 prefill: how fast can a GPU only *read* the rows the attention reads?

Each program (token, KV head) loads its N candidate indices and gathers their key and value rows (D int8 bytes
each), folding them into a checksum so that nothing is dead code: no products, no softmax. Every (token, KV head)
reads its own rows, as the attention kernels do (no reuse of rows shared by several tokens). The time of the best
tile setting is a floor for any kernel of that structure; bytes gathered / time is the rate the memory system
delivers to such gathers (the cache, 2 x Hkv x C x D bytes, stays in L2 at C = 8192).

Usage: python benchmarks/experiments/sparse_int8_gather_floor.py OUT.json [case ...]
(case ids from attnkit.testing.shapes, default the three model prefill cases). Timed by CUDA-graph replay, median
of 7 samples per setting; the inputs are the bench's (attnkit.testing.inputs.make_inputs, seed 0).
"""

import json
import statistics
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def gather_kernel(KC, VC, IDX, OUT, N, C, stride_kh, stride_kc, stride_it, HKV: tl.constexpr, D: tl.constexpr,
                  BLOCK_N: tl.constexpr):
    t = tl.program_id(0)
    g = tl.program_id(1)
    offs_d = tl.arange(0, D)
    acc = tl.zeros([BLOCK_N, D], dtype=tl.int32)
    for n0 in range(0, N, BLOCK_N):
        n = n0 + tl.arange(0, BLOCK_N)
        idx = tl.load(IDX + t.to(tl.int64) * stride_it + n, mask=n < N, other=-1)
        ok = (idx >= 0) & (idx < C)
        row = g.to(tl.int64) * stride_kh + tl.where(ok, idx, 0).to(tl.int64) * stride_kc
        k = tl.load(KC + row[:, None] + offs_d[None, :], mask=ok[:, None], other=0)
        v = tl.load(VC + row[:, None] + offs_d[None, :], mask=ok[:, None], other=0)
        acc = acc ^ (k.to(tl.int32) + (v.to(tl.int32) << 8))
    tl.store(OUT + t * HKV + g, tl.reduce(tl.reduce(acc, 1, _xor), 0, _xor))


@triton.jit
def _xor(a, b):
    return a ^ b


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
                        gather_kernel[(T, Hkv)](kc, vc, idx, res, N, C, kc.stride(0), kc.stride(1), idx.stride(0),
                                                HKV=Hkv, D=D, BLOCK_N=bn, num_warps=warps, num_stages=stages)
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
