"""Which slot list's programs set a one-token swap-AB attention's time: the window list's (fp8 records, 528 bytes) or
the compressed list's (fp8 or nvfp4 records).

At one token and the default lists (128 window + 512 compressed slots) the Gluon swap-AB kernel runs 10 programs of
one 64-slot tile each: 2 over window records, 8 over compressed ones, merged after one cluster barrier, so the call
waits for the slowest program. An empty slot (-1) loads no record (its loads are masked), so the same launch with
some slots emptied times what those records' loads cost the programs that own them (a timing decomposition only:
the outputs differ). Per case, in one bench run (attnkit.bench.harness.bench_case: CUDA-graph replay over rotated
input sets, providers alternating in shuffled order, paired ratios):
  rule            the attention as benched (kernel="swapab": the dispatched Gluon kernel)
  window-half     every window tile's last 32 slots emptied (each window program loads 32 records)
  window-none     every window slot emptied
  comp-half       every compressed tile's last 32 slots emptied
  comp-none       every compressed slot emptied
  headpad         the head-padded kernel, for the ratio the targets name
If window-half is faster than the rule by about what comp-half is not, the window programs set the time, and
window tiles of 32 slots (more programs over the window list) would shorten it.

Usage: python benchmarks/experiments/mqa_t1_lists.py OUT.json [case ...]
(default 16 heads x 1 token x nvfp4 / fp8 and 16 heads x 2 tokens x nvfp4). Prints a table last.
"""

import sys

import torch

from attnkit.bench.harness import bench_experiment
from attnkit.bench.providers import Provider, _mqa_ours


def _emptied(which, part):
    def prepare(inp):
        inp = dict(inp)
        key = "swa_idx" if which == "window" else "comp_idx"
        idx = inp[key].clone()
        if part == "none":
            idx.fill_(-1)
        else:  # the last 32 slots of every 64-slot tile
            n = idx.shape[-1]
            cols = torch.arange(n, device=idx.device)
            idx[:, (cols % 64) >= 32] = -1
        inp[key] = idx
        return _mqa_ours(inp, "swapab")
    return prepare


def providers():
    ps = [Provider("rule", "mqa_decode", "ours", "attention as benched", lambda inp: _mqa_ours(inp, "swapab"))]
    for which in ("window", "comp"):
        for part in ("half", "none"):
            ps.append(Provider(f"{which}-{part}", "mqa_decode", "ours", f"{which} list, {part} of each tile emptied",
                               _emptied(which, part)))
    ps.append(Provider("headpad", "mqa_decode", "ours", "head-padded attention", lambda inp: _mqa_ours(inp, "headpad")))
    return ps


def main():
    out_path = sys.argv[1]
    ids = sys.argv[2:] or ["mqa_decode-step-h16-t1-nvfp4", "mqa_decode-step-h16-t1-fp8",
                           "mqa_decode-step-h16-t2-nvfp4"]
    rows = bench_experiment(ids, providers, __doc__.split("\n")[0], out_path)
    short = [c.replace("mqa_decode-step-", "") for c in ids]
    print(f"{'setting':14s} " + " ".join(f"{c:>22s}" for c in short) + "   (median us; rule / setting, paired)")
    for p in providers():
        cells = []
        for cid in ids:
            r = next((r for r in rows if r["case"] == cid and r["provider"] == p.name), {})
            rule = next((r for r in rows if r["case"] == cid and r["provider"] == "rule"), {})
            q = rule.get("ratios", {}).get(p.name, {})
            ratio = f" {q['median']:.3f}" if q else "      "
            cells.append(f"{r['median_us']:14.2f}{ratio:>8s}" if r.get("status") == "ok" else f"{'-':>22s}")
        print(f"{p.name:14s} " + " ".join(cells))


if __name__ == "__main__":
    main()
