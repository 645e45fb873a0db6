"""The Python wrappers' own host time per call, with every kernel launch stubbed out (no GPU needed).

Runs under Triton's interpreter on a CPU with the interpreter's launch replaced by a no-op, so what is timed is the
wrapper alone: option resolution, input checks (validate=False here, as a graph-captured or benched call makes
them), the plan, buffers, and the launch arguments, for one call of sparse_int8 (decode, 1 row, the model's 32K
shape), mqa_decode (16 heads x 1 token fp8, head-padded: the path off sm_90) and relbias (decode, 3 sequences).
Best of 7 rounds of 400 calls, in us, with the call cache (attnkit._callcache: a repeated layout's checks, options
and plan kept) on and off, the two alternating round by round. On a GPU the launches add Triton's launcher and
the driver (benchmarks/experiments/host_overhead.py measures the whole call there).

Usage: TRITON_INTERPRET=1 python benchmarks/experiments/wrapper_overhead.py OUT.json
"""

import json
import os
import sys
import time

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402
import triton.runtime.interpreter as interp  # noqa: E402

from attnkit import _callcache  # noqa: E402
from attnkit import env as envmod  # noqa: E402
from attnkit.mqa_decode import mqa_decode_attention  # noqa: E402
from attnkit.relbias import relbias_attention  # noqa: E402
from attnkit.sparse_int8 import sparse_int8_attention  # noqa: E402
from attnkit.testing.inputs import make_inputs  # noqa: E402
from attnkit.testing.shapes import get  # noqa: E402

interp.InterpretedFunction.__getitem__ = lambda self, grid: (lambda *a, **k: None)  # launches stubbed out


def best_us(f, n=400, rounds=7):
    """Best us per call with the call cache on and off, the settings alternating round by round."""
    best = {True: float("inf"), False: float("inf")}
    for on in (True, False):
        _callcache.set_call_cache(on)
        f()
    for _ in range(rounds):
        for on in (True, False):
            _callcache.set_call_cache(on)
            t0 = time.perf_counter()
            for _ in range(n):
                f()
            best[on] = min(best[on], (time.perf_counter() - t0) / n * 1e6)
    _callcache.set_call_cache(None)
    return {"cache on": round(best[True], 1), "cache off": round(best[False], 1)}


def main():
    r = make_inputs(get("relbias-decode-b3-k203"), "cpu")
    kw = dict(cu_seqlens_q=r["cu_seqlens_q"], table=r["table"], window=r["window"], beyond=r["beyond"],
              softmax_scale=r["softmax_scale"], k_scale=r["k_scale"], v_scale=r["v_scale"])
    ro, rl = torch.empty_like(r["q"]), torch.empty(r["q"].shape[:2])
    s = make_inputs(get("sparse_int8-model-decode-r1-c32k"), "cpu")
    sa = (s["q"], s["k_cache"], s["v_cache"], s["key_scale"], s["value_scale"], s["indices"])
    so, sl = torch.empty_like(s["q"]), torch.empty(s["q"].shape[:2])
    m = make_inputs(get("mqa_decode-step-h16-t1-fp8"), "cpu")
    ma = [m[n] for n in ("q", "swa_cache", "comp_cache", "swa_idx", "comp_idx", "positions", "cos_sin", "sink",
                         "num_heads", "softmax_scale", "comp_format")]
    res = {
        "sparse_int8-model-decode-r1-c32k": best_us(lambda: sparse_int8_attention(
            *sa, scale=s["scale"], validate=False, out=so, lse=sl)),
        "mqa_decode-step-h16-t1-fp8 (head-padded)": best_us(lambda: mqa_decode_attention(*ma, validate=False)),
        "relbias-decode-b3-k203": best_us(lambda: relbias_attention(
            r["q"], r["k"], r["v"], cu_seqlens_k=r["cu_seqlens_k"], validate=False, max_seqlen_q=1,
            max_seqlen_k=300, out=ro, lse=rl, **kw)),
    }
    with open(sys.argv[1], "w") as f:
        json.dump({"schema": 1, "env": envmod.record(), "what": "wrapper host us per call, launches stubbed, call cache on / off",
                   "us_per_call": res}, f, indent=1)
    for k, v in res.items():
        print(f"{k:44s} cache on {v['cache on']:7.1f} us   off {v['cache off']:7.1f} us")


if __name__ == "__main__":
    main()
