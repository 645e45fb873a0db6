"""What the Gluon forward kernels' zeroing of value rows past cu_seqlens_k[-1] prevents, and what it costs.

The relbias Gluon forward kernels load key and value tiles by TMA, whole BLOCK_N rows at a time, so a sequence's last
tile may bring rows from past the last sequence (cu_seqlens_k[-1]): a caller's preallocated k / v buffer runs on with
whatever it holds there. The scores of those keys are masked (where, so a NaN key never reaches the softmax), but the
value product multiplies their zero probabilities by their values, and 0 x inf or NaN is NaN. The kernels therefore
zero, in shared memory, the value rows past cu_seqlens_k[-1] of a tile that crosses it (ZERO_PAST, always on in the
library: attnkit.relbias.interface._ZERO_PAST_ROWS).

Part 1, per Gluon forward route (relbias-varlen-mixed5 with five rows appended past its last sequence: NaN keys and
infinite values; value checks off): the outputs that are not finite with the zeroing off and on, and whether the
result with it on equals, bit for bit, the result over zero rows there.

Part 2, its cost: the dispatched forward with the zeroing off and on, over buffers that end with the last sequence
(exact: the kernels see that from the TMA descriptor's row count and zero nothing, the copies fill rows past the
buffer with zeros themselves) and over buffers with PAD rows past it (a preallocated buffer), on the model prefill
shapes (sequence lengths multiples of the key tile: no tile crosses the end) and on shapes whose last tile crosses
it (with PAD rows, the zeroing runs), timed by attnkit.bench.harness.bench_experiment (CUDA-graph replay, providers
alternating, paired ratios).

Usage: python benchmarks/experiments/relbias_past_rows.py OUT.json [case ...]. Prints a table last.
"""

import json
import sys

import torch

from attnkit.bench.harness import bench_experiment, require_cuda
from attnkit.bench.providers import Provider, _relbias_ours
from attnkit.gate.specs import relbias_kernel_call
from attnkit.relbias import interface
from attnkit.testing import shapes
from attnkit.testing.inputs import make_inputs

ROUTES = [("dispatched", {}), ("pipelined", {"gluon": True, "gluon_ws": False}),
          ("not pipelined", {"gluon": True, "gluon_ws": False, "gluon_pipe": False}),
          ("warp-specialized", {"gluon_ws": True}),
          ("warp-specialized persistent", {"gluon_ws": True, "gluon_persistent": True})]
CASES = ["relbias-model-prefill-8k-global", "relbias-model-prefill-8k-w1024", "relbias-model-varlen-mixed",
         "relbias-prefill-s1023"]
PAD = 64


def _pad(t, x, n=5):
    return torch.cat([t, torch.full((n,) + t.shape[1:], x, dtype=t.dtype, device=t.device)])


def leak_table(case_id="relbias-varlen-mixed5"):
    inp = make_inputs(shapes.get(case_id), "cuda", 0)
    zero = dict(inp, k=_pad(inp["k"], 0.0), v=_pad(inp["v"], 0.0))
    bad = dict(inp, k=_pad(inp["k"], float("nan")), v=_pad(inp["v"], float("inf")))
    rows = []
    for name, opts in ROUTES:
        rec = dict(case=case_id, route=name, options=opts)
        for flag in (False, True):
            interface._ZERO_PAST_ROWS = flag
            try:
                o_bad, l_bad = relbias_kernel_call(bad, validate=False, **opts)
                o_zero, l_zero = relbias_kernel_call(zero, validate=False, **opts)
            finally:
                interface._ZERO_PAST_ROWS = True
            torch.cuda.synchronize()
            tag = "on" if flag else "off"
            rec[f"nonfinite_{tag}"] = int((~torch.isfinite(o_bad.float())).sum())
            rec[f"equal_to_zero_rows_{tag}"] = bool(torch.equal(o_bad, o_zero) and torch.equal(l_bad, l_zero))
        rec["outputs"] = o_bad.numel()
        rows.append(rec)
    return rows


def _timed(flag, pad=0):
    def prepare(inp):
        if pad:  # a preallocated buffer: pad rows past the last sequence (copies of its first rows: finite, not 0)
            inp = dict(inp, k=torch.cat([inp["k"], inp["k"][:pad]]), v=torch.cat([inp["v"], inp["v"][:pad]]))
        interface._ZERO_PAST_ROWS = flag  # read when the launch is captured
        try:
            f = _relbias_ours(inp)
        finally:
            interface._ZERO_PAST_ROWS = True

        def call():
            interface._ZERO_PAST_ROWS = flag
            try:
                return f()
            finally:
                interface._ZERO_PAST_ROWS = True
        return call
    return prepare


def providers():
    return [Provider("zero-on", "relbias", "ours", "rows past the end zeroed (the library)", _timed(True)),
            Provider("zero-off", "relbias", "ours", "rows past the end not zeroed", _timed(False)),
            Provider("zero-on-pad", "relbias", "ours", f"the library, {PAD} rows past the end", _timed(True, PAD)),
            Provider("zero-off-pad", "relbias", "ours", f"not zeroed, {PAD} rows past the end", _timed(False, PAD))]


def main():
    require_cuda()
    out_path = sys.argv[1]
    ids = sys.argv[2:] or CASES
    leaks = leak_table()
    rows = bench_experiment(ids, providers, __doc__.split("\n")[0], out_path, rounds=9)
    with open(out_path) as f:
        art = json.load(f)
    art["leaks"] = leaks
    with open(out_path, "w") as f:
        json.dump(art, f, indent=1)
    print(f"{'route (validate=False)':30s} {'non-finite off':>15s} {'on':>6s} {'== zero rows on':>16s}")
    for r in leaks:
        same = str(r["equal_to_zero_rows_on"])
        print(f"{r['route']:30s} {r['nonfinite_off']:15d} {r['nonfinite_on']:6d} {same:>16s}")
    print(f"\n{'case':36s} {'buffer':>7s} {'on us':>9s} {'off us':>9s} {'on/off':>7s} {'p20-p80':>13s}  (paired)")
    for cid in ids:
        for sfx, buf in (("", "exact"), ("-pad", f"+{PAD}")):
            on = next((r for r in rows if r["case"] == cid and r["provider"] == "zero-on" + sfx), {})
            off = next((r for r in rows if r["case"] == cid and r["provider"] == "zero-off" + sfx), {})
            q = on.get("ratios", {}).get("zero-off" + sfx, {})
            if on.get("status") != "ok" or off.get("status") != "ok":
                print(f"{cid:36s} {buf:>7s} failed: {on.get('error', '')[:40]} {off.get('error', '')[:40]}")
                continue
            print(f"{cid:36s} {buf:>7s} {on['median_us']:9.2f} {off['median_us']:9.2f} {q['median']:7.3f} "
                  f"{q['p20']:6.3f}-{q['p80']:<6.3f}")


if __name__ == "__main__":
    main()
