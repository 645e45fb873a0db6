"""Stress check of the relbias Gluon forward kernels under concurrent GPU load (CUDA sm_90).

Usage: python benchmarks/experiments/relbias_ws_stress.py OUT.json [--seconds S] [JOB ...]
  JOB = VARIANT:CASE, VARIANT one of the keys of VARIANTS below, CASE a shape id of attnkit.testing.shapes;
  default: the dispatched warp-specialized kernel, the refused one without turns since its fix, the same as it was
  before the fix (which must show wrong rows, so this check can fail) and the one-warpgroup kernel, side by side.

Every job runs in its own process at the same time as the others (so the GPU is shared the way a serving host with
several engines shares it), calls the kernel in a loop for S seconds and compares each result with the Triton
forward kernel's (gated against the fp64 oracle) on the same inputs: a row is wrong when its largest absolute
difference exceeds 0.01, when it holds a NaN, or when its LSE is not finite. A process that faults is recorded
with the number of calls it made. Writes OUT.json (the environment, the jobs, per job: calls, calls with a wrong
row, examples of wrong rows [token, head]) and prints one line per job.
"""

import argparse
import json
import multiprocessing as mp
import sys
import time

VARIANTS = {
    "dispatched": dict(gluon=True),  # the rule: on long global D 128 sequences the warp-specialized kernel
    "ws": dict(gluon=True, gluon_ws=True),  # the warp-specialized kernel with its defaults (turns, key release)
    "ws-nokrel": dict(gluon=True, gluon_ws=True, gluon_k_release=False),
    # without the consumers' turns (refused by the library; reached here by a diagnostic argument): since the fix of
    # the turn barriers (made only with the turns), and, "-unused-turns", as before it (made and not used: the
    # memory the compiler then hands to other buffers), which must show wrong rows. At c9db574, before the fix,
    # "ws-no-turns*" ran the kernel as it then was, that is as "-unused-turns" does now.
    "ws-no-turns": dict(gluon=True, gluon_ws=True, _ws_no_turns=True, gluon_pingpong=False),
    "ws-no-turns-nokrel": dict(gluon=True, gluon_ws=True, _ws_no_turns=True, gluon_pingpong=False,
                               gluon_k_release=False),
    "ws-no-turns-nokrel-unused-turns": dict(gluon=True, gluon_ws=True, _ws_no_turns=True, gluon_pingpong=False,
                                            gluon_k_release=False, _ws_unused_turns=True),
    "one-warpgroup": dict(gluon=True, gluon_ws=False),
}
DEFAULT_JOBS = ("dispatched:relbias-model-prefill-8k-global", "ws:relbias-model-decode-b32-64k",
                "ws-no-turns-nokrel:relbias-model-prefill-8k-global",
                "ws-no-turns-nokrel-unused-turns:relbias-model-prefill-8k-global",
                "ws-no-turns:relbias-model-decode-b32-64k", "one-warpgroup:relbias-model-varlen-mixed")


def _job(spec: str, seed: int, seconds: float, queue) -> None:
    import torch

    from attnkit.gate.specs import relbias_kernel_call
    from attnkit.testing import inputs, shapes
    variant, case_id = spec.split(":", 1)
    res = dict(job=spec, seed=seed, calls=0, wrong_calls=0, examples=[], fault=None)
    try:
        inp = inputs.make_inputs(shapes.get(case_id), device="cuda", seed=seed)
        ref, _ = relbias_kernel_call(inp, force="fwd", gluon=False)
        torch.cuda.synchronize()
        t0 = time.time()
        while time.time() - t0 < seconds:
            o, lse = relbias_kernel_call(inp, force="fwd", **VARIANTS[variant])
            d = (o.float() - ref.float()).abs().amax(-1)
            wrong = (d > 0.01) | torch.isnan(d) | ~torch.isfinite(lse)
            n = int(wrong.sum())
            res["calls"] += 1
            if n:
                res["wrong_calls"] += 1
                if len(res["examples"]) < 4:
                    res["examples"].append(dict(rows=n, first=wrong.nonzero()[:6].tolist(),
                                                max_abs=float(torch.nan_to_num(d, nan=float("inf")).max())))
    except Exception as e:  # a fault (illegal memory access) is a result, with the calls made before it
        res["fault"] = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    queue.put(res)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("jobs", nargs="*", default=list(DEFAULT_JOBS))
    ap.add_argument("--seconds", type=float, default=45.0)
    a = ap.parse_args(argv)
    for spec in a.jobs:
        v = spec.split(":", 1)[0]
        if v not in VARIANTS or ":" not in spec:
            ap.error(f"job {spec!r}: VARIANT:CASE with VARIANT in {sorted(VARIANTS)}")
    from attnkit.env import record
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_job, args=(spec, i + 1, a.seconds, q)) for i, spec in enumerate(a.jobs)]
    for p in procs:
        p.start()
    results = [q.get() for _ in procs]
    for p in procs:
        p.join()
    results.sort(key=lambda r: a.jobs.index(r["job"]))
    json.dump(dict(kind="relbias-ws-stress", env=record(), seconds=a.seconds, variants=VARIANTS,
                   results=results), open(a.out, "w"), indent=1)
    for r in results:
        print(f"{r['job']:60s} calls {r['calls']:6d}  wrong {r['wrong_calls']:6d}"
              + (f"  FAULT {r['fault']}" if r["fault"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
