"""Per-kernel GPU time of one provider call (torch profiler): where a step's time goes, kernel by kernel.

``attnkit profile --family F --case C [--provider P]...`` prints, per provider, each kernel's mean device
time per call and the sum, over ``--iters`` eager calls after a warm-up (launch gaps are not counted:
the CUDA-graph time of the same call is what ``attnkit bench`` reports).
"""

from __future__ import annotations

import json
from collections import defaultdict

import torch

from ..testing import shapes
from ..testing.inputs import make_inputs
from .providers import providers


def profile(family: str, case_ids, names, iters: int = 20) -> list[dict]:
    from torch.profiler import ProfilerActivity, profile as tprofile
    rows = []
    for cid in case_ids:
        case = shapes.get(cid)
        inp = make_inputs(case, "cuda", 0)
        for p in providers(family, names or None):
            try:
                run = p.prepare(inp)
                run()
                run()
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001
                rows.append(dict(case=cid, provider=p.name, error=f"{type(e).__name__}: {str(e)[:200]}"))
                continue
            with tprofile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(iters):
                    run()
                torch.cuda.synchronize()
            per = defaultdict(float)
            for ev in prof.events():
                if ev.device_type == torch.autograd.DeviceType.CUDA:
                    per[ev.name] += ev.device_time_total if hasattr(ev, "device_time_total") else ev.cuda_time_total
            kernels = sorted(((k, v / iters) for k, v in per.items()), key=lambda kv: -kv[1])
            rows.append(dict(case=cid, provider=p.name, total_us=round(sum(v for _, v in kernels), 2),
                             kernels=[dict(name=k[:80], us=round(v, 2)) for k, v in kernels]))
    return rows


def run_profile(args) -> int:
    rows = profile(args.family, args.case, args.provider, args.iters)
    for r in rows:
        if "error" in r:
            print(f"{r['case']}  {r['provider']}  FAILED {r['error']}")
            continue
        print(f"{r['case']}  {r['provider']}  {r['total_us']:.2f} us/call")
        for k in r["kernels"]:
            print(f"    {k['us']:9.2f}  {k['name']}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0
