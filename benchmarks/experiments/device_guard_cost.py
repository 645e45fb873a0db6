"""The host time attnkit._runtime.on_device_of adds to a call whose tensors are on the current device (the common
case: the guard asks for the tensor's device and the current one, and enters nothing). A no-op function called with
a CUDA tensor, plain and guarded, alternating, ROUNDS runs of N calls each.

Usage: python benchmarks/experiments/device_guard_cost.py OUT.json. Prints the medians last."""

import json
import statistics
import sys
import time

import torch

from attnkit import env as envmod
from attnkit._runtime import on_device_of
from attnkit.bench.harness import require_cuda

N = 200000
ROUNDS = 6


def main(out_path):
    require_cuda()
    x = torch.zeros(4, device="cuda")

    def plain(x):
        return x

    guarded = on_device_of("x")(plain)
    us = {"plain": [], "guarded": []}
    for _ in range(ROUNDS):
        for name, fn in (("plain", plain), ("guarded", guarded)):
            t = time.perf_counter()
            for _ in range(N):
                fn(x)
            us[name].append(round((time.perf_counter() - t) / N * 1e6, 3))
    added = statistics.median(us["guarded"]) - statistics.median(us["plain"])
    rec = dict(schema=1, env=envmod.record(), calls_per_round=N, rounds=ROUNDS, us_per_call=us,
               median_added_us=round(added, 3))
    with open(out_path, "w") as f:
        json.dump(rec, f, indent=1)
    print(f"plain {statistics.median(us['plain']):.3f} us, guarded {statistics.median(us['guarded']):.3f} us: "
          f"+{added:.3f} us a call")


if __name__ == "__main__":
    main(sys.argv[1])
