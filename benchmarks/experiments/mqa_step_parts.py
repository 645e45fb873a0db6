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

import sys

import torch

from attnkit.bench.harness import bench_experiment
from attnkit.bench.providers import Provider, _mqa_insert, _mqa_ours
from attnkit.mqa_decode import mqa_write_records


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
    rows = bench_experiment(ids, providers, __doc__.split("\n")[0], out_path)
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
