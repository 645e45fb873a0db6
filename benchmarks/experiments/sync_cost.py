"""What a program's arrival costs at the end of a split-K kernel: a global release atomic against a thread-block
cluster barrier.

Each program stores a 32 KB fp32 partial (16 rows x 512, as the mqa_decode swap-AB kernel's at 16 heads) and exits;
the variants add, after the stores, (1) a barrier and an acquire-release atomic add at GPU scope (the arrival of an
in-kernel merge through global memory) or (2) a cluster barrier with release / acquire semantics (the arrival of a
merge through distributed shared memory). Clusters of 2 and 8 CTAs (Triton's num_ctas; a program is then a cluster,
its 16 x num_ctas rows split over the CTAs, so each CTA still stores 32 KB), each against the same launch without the
barrier. 10 and 16 CTAs in all (a 1-token step's splits). Timed by CUDA-graph replay of 100 launches, variants
alternating over rounds; medians in us per launch.

Usage: python benchmarks/experiments/sync_cost.py OUT.json
"""

import json
import statistics
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def _partial_kernel(OUT, CNT, ROWS: tl.constexpr, SYNC: tl.constexpr):
    pid = tl.program_id(0)
    r = tl.arange(0, ROWS)
    d = tl.arange(0, 512)
    x = (pid * 1.0 + r[:, None] * 0.5 + d[None, :]).to(tl.float32)
    tl.store(OUT + pid.to(tl.int64) * ROWS * 512 + r[:, None] * 512 + d[None, :], x)
    if SYNC == 1:  # the arrival through global memory
        tl.debug_barrier()
        tl.atomic_add(CNT + pid * 0, 1, sem="acq_rel", scope="gpu")
    if SYNC == 2:  # the arrival through the cluster barrier
        z = tl.inline_asm_elementwise("barrier.cluster.arrive.release.aligned;\n barrier.cluster.wait.acquire.aligned;\n"
                                      " mov.u32 $0, $1;", "=r,r", [pid], dtype=tl.int32, is_pure=False, pack=1)
        tl.store(CNT + 1 + pid * 0 + z * 0, z, mask=z < 0)  # never stored; keeps the barrier


VARIANTS = (("global-none", 1, 10, 0), ("global-atomic", 1, 10, 1), ("cluster2-none", 2, 5, 0),
            ("cluster2-barrier", 2, 5, 2), ("cluster8-none", 8, 2, 0), ("cluster8-barrier", 8, 2, 2))


def main(path):
    from attnkit.bench.harness import require_cuda
    require_cuda()
    out = torch.empty(16 * 16 * 512, dtype=torch.float32, device="cuda")
    cnt = torch.zeros(4, dtype=torch.int32, device="cuda")
    graphs = {}
    for name, nc, grid, sync in VARIANTS:
        launch = lambda nc=nc, grid=grid, sync=sync: _partial_kernel[(grid,)](out, cnt, ROWS=16 * nc, SYNC=sync,  # noqa: E731
                                                                            num_warps=8, num_ctas=nc)
        launch()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(100):
                launch()
        graphs[name] = g
    times = {name: [] for name in graphs}
    for _ in range(7):
        for name, g in graphs.items():
            g.replay()
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(5):
                g.replay()
            b.record()
            torch.cuda.synchronize()
            times[name].append(a.elapsed_time(b) * 1e3 / 500)
    res = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
               us_per_launch={n: dict(median=statistics.median(v), samples=v) for n, v in times.items()})
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    for n, v in times.items():
        print(f"{n:20s} {statistics.median(v):7.2f} us  [{min(v):.2f}-{max(v):.2f}]")


if __name__ == "__main__":
    main(sys.argv[1])
