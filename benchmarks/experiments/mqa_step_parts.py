"""Where an mqa_decode step's time goes beyond its attention: the record writer's work, or the kernel boundary.

Per step case, in one bench run (attnkit.bench.harness.bench_case: CUDA-graph replay over rotated input sets,
providers alternating in shuffled order, paired ratios), for each kernel K in {swapab, headpad}:
  K-attn           the attention alone, as the bench's attention providers launch it
  K-attn-early     the attention alone with pdl and pdl_early_inputs (as in a step, but after the previous
                   step's attention instead of a writer)
  K-step           a step as the bench's step providers launch it: the writer (pdl), then the attention (pdl,
                   pdl_early_inputs)
  K-step-nowrite   the same two launches with every slot -1: the writer loads its rows and stores nothing, so the
                   attention waits on a writer that does no work (a timing decomposition only: the window cache
                   then holds last step's records)
  writer           the record writer alone (pdl), as in a step
So K-step - K-step-nowrite is what the writer's own work adds, and K-step-nowrite - K-attn-early what a second
kernel in the chain adds by itself.

Usage: python benchmarks/experiments/mqa_step_parts.py OUT.json [case ...]
(default 16 / 32 heads x 1 / 2 tokens x fp8 / nvfp4). Prints a table last.
"""

import json
import sys
import time

import torch

from attnkit import env as envmod
from attnkit.bench.harness import bench_case
from attnkit.bench.providers import Provider, _mqa_insert, _mqa_ours
from attnkit.bench.roofline import measure_ceilings
from attnkit.mqa_decode import mqa_write_records
from attnkit.testing.shapes import get as get_case


def _step(kernel, write=True):
    def prepare(inp):
        T = inp["q"].shape[0]
        lat = inp["q"][:, 0, :].contiguous()
        if write:
            insert = _mqa_insert(inp, pdl=True)
        else:
            none = torch.full((T,), -1, dtype=torch.long, device=lat.device)

            def insert():
                mqa_write_records(lat, inp["positions"], inp["cos_sin"], none, inp["swa_cache"], "fp8",
                                  validate=False, pdl=True)
        attend = _mqa_ours(inp, kernel, pdl=True, pdl_early_inputs=True)

        def run():
            insert()
            return attend()
        return run
    return prepare


def providers():
    ps = []
    for k in ("swapab", "headpad"):
        applies = (lambda c: c["H"] in (16, 32)) if k == "swapab" else None
        ps += [Provider(f"{k}-attn", "mqa_decode", "ours", "attention alone, as benched",
                        lambda inp, k=k: _mqa_ours(inp, k), applies=applies),
               Provider(f"{k}-attn-early", "mqa_decode", "ours", "attention alone, pdl + pdl_early_inputs",
                        lambda inp, k=k: _mqa_ours(inp, k, pdl=True, pdl_early_inputs=True), applies=applies),
               Provider(f"{k}-step", "mqa_decode", "ours", "writer + attention, as benched", _step(k),
                        applies=applies),
               Provider(f"{k}-step-nowrite", "mqa_decode", "ours", "writer storing nothing + attention",
                        _step(k, write=False), applies=applies)]
    ps.append(Provider("writer", "mqa_decode", "ours", "the record writer alone (pdl)",
                       lambda inp: _mqa_insert(inp, pdl=True)))
    return ps


def main():
    out_path = sys.argv[1]
    ids = sys.argv[2:] or [f"mqa_decode-step-h{h}-t{t}-{f}" for f in ("fp8", "nvfp4") for h in (16, 32)
                           for t in (1, 2)]
    env = envmod.record()
    ceil = measure_ceilings()
    env.update(ceil)
    l2 = env.get("l2_bytes") or (50 << 20)
    rows = []
    t0 = time.time()
    for cid in ids:
        print(f"{cid} ({time.time() - t0:.0f}s)", flush=True)
        rows += bench_case(get_case(cid), providers(), rounds=5, warm_l2=False, ceilings=ceil, l2_bytes=l2)
    doc = {"what": __doc__.split("\n")[0], "env": env, "rows": rows}
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
    short = [c.replace("mqa_decode-step-", "") for c in ids]
    print(f"{'setting':20s} " + " ".join(f"{c:>13s}" for c in short) + "   (median us)")
    for p in providers():
        cells = []
        for cid in ids:
            r = next((r for r in rows if r["case"] == cid and r["provider"] == p.name), {})
            cells.append(f"{r['median_us']:13.2f}" if r.get("status") == "ok" else f"{'-':>13s}")
        print(f"{p.name:20s} " + " ".join(cells))


if __name__ == "__main__":
    main()
