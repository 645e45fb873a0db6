"""One benchmark harness: CUDA-graph replay over rotated inputs, alternating rounds, paired ratios.

Method, per case:
1. Build ``n_sets`` independent random input sets so that together they span at least 3x the L2
   cache (``--warm-l2``: one set, and the row says so).
2. For each provider: ``prepare`` each set (planning, outside the timing), run it twice (warm-up,
   compilation), then capture one CUDA graph that runs the provider once on every set in turn.
   A provider that raises is recorded as failed with its error; one that cannot be captured is timed
   eagerly and the row says ``timing: eager``.
3. ``rounds`` rounds; in each, every provider (in an order shuffled each round from a fixed seed,
   ``round_orders``) replays its graph ``reps`` times between two CUDA events. One sample = elapsed /
   (reps * n_sets). A rotated order keeps each provider's predecessor the same in most rounds, so a kernel
   timed right after a heavy one (a 16 ms bias-mask SDPA) reads slower in those rounds (the rows say
   ``order``).
4. Per provider: median, p20, p80 of the samples. Per pair of providers: the per-round ratio of
   their samples (paired, so drift cancels), summarized by its median, p20 and p80.
"""

from __future__ import annotations

import json
import math
import random
import sys
import time
from pathlib import Path

import torch

from .. import env as envmod
from .._files import write_whole
from ..testing import shapes
from ..testing.inputs import make_inputs
from .providers import providers
from .roofline import floor_us, measure_ceilings

MAX_SETS = 64
MIN_SAMPLE_S = 1e-3  # a sample spans at least this long (more replays per sample for short cases)


def percentile(xs, q: float) -> float:
    """Linear-interpolated percentile (numpy's default) of a non-empty list."""
    s = sorted(xs)
    if not s:
        raise ValueError("percentile of no samples")
    pos = (len(s) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(samples) -> dict:
    return {"median": percentile(samples, 50), "p20": percentile(samples, 20), "p80": percentile(samples, 80),
            "n": len(samples)}


def paired_ratios(a, b) -> dict:
    """Summary of a[i] / b[i] over rounds (a and b sampled in the same rounds)."""
    if len(a) != len(b) or not a:
        raise ValueError("paired ratios need the same, non-zero number of samples")
    return summarize([x / y for x, y in zip(a, b)])


def _tensor_bytes(inp: dict) -> int:
    return sum(t.numel() * t.element_size() for t in inp.values() if isinstance(t, torch.Tensor))


def n_input_sets(set_bytes: int, l2_bytes: int, warm_l2: bool) -> int:
    if warm_l2:
        return 1
    return max(1, min(MAX_SETS, math.ceil(3 * l2_bytes / max(1, set_bytes))))


class _Timed:
    def __init__(self, provider, runs):
        self.provider = provider
        self.runs = runs
        self.graph = None
        self.timing = "cuda-graph"
        self.samples = []
        self.reps = 1

    def capture(self):
        for r in self.runs:  # warm-up: compile, autotune, allocate
            r()
            r()
        torch.cuda.synchronize()
        try:
            g = torch.cuda.CUDAGraph()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for r in self.runs:
                    r()
            torch.cuda.current_stream().wait_stream(s)
            with torch.cuda.graph(g):
                for r in self.runs:
                    r()
            g.replay()
            torch.cuda.synchronize()
            self.graph = g
        except Exception as e:  # noqa: BLE001
            torch.cuda.synchronize()
            self.graph = None
            self.timing = f"eager (graph capture failed: {type(e).__name__}: {str(e)[:160]})"

    def _once(self):
        if self.graph is not None:
            self.graph.replay()
        else:
            for r in self.runs:
                r()

    def calibrate(self):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        self._once()
        e.record()
        torch.cuda.synchronize()
        t = s.elapsed_time(e) * 1e-3
        self.reps = max(1, min(1000, math.ceil(MIN_SAMPLE_S / max(t, 1e-7))))

    def sample(self):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(self.reps):
            self._once()
        e.record()
        torch.cuda.synchronize()
        self.samples.append(s.elapsed_time(e) * 1e3 / (self.reps * len(self.runs)))


def _own_floor_us(provider, case, fl: dict) -> float:
    """The case's floor, or for a provider that does part of the case (floor_bytes), its own byte floor at the
    copy rate the case's floor used."""
    if provider.floor_bytes is None or not fl.get("bytes"):
        return fl["floor_us"]
    return provider.floor_bytes(case) * fl["byte_floor_us"] / fl["bytes"]


def round_orders(n: int, rounds: int, seed: int = 0) -> list[list[int]]:
    """Per round, the order in which the n timed providers replay: a permutation drawn from a generator
    seeded by (seed, round), so a run is reproducible and no provider always follows the same neighbour."""
    out = []
    for r in range(rounds):
        perm = list(range(n))
        random.Random(seed * 1_000_003 + r).shuffle(perm)
        out.append(perm)
    return out


def bench_case(case, provs, *, rounds: int, warm_l2: bool, ceilings: dict, l2_bytes: int, seed: int = 0,
               log=print) -> list[dict]:
    first = make_inputs(case, "cuda", seed)
    n_sets = n_input_sets(_tensor_bytes(first), l2_bytes, warm_l2)
    sets = [first] + [make_inputs(case, "cuda", seed + i) for i in range(1, n_sets)]
    fl = floor_us(case, ceilings)
    base = {"family": case.family, "case": case.id, "n_sets": n_sets, "warm_l2": warm_l2,
            "set_bytes": _tensor_bytes(first), "order": "shuffled per round", **fl}
    rows, timed = [], []
    for p in provs:
        if not p.takes(case):
            rows.append({**base, "provider": p.name, "kind": p.kind, "status": "n/a",
                         "error": "not applicable to this case (the provider's own shape rule)"})
            continue
        t0 = time.time()
        try:
            t = _Timed(p, [p.prepare(inp) for inp in sets])
            t.capture()
            t.calibrate()
            timed.append(t)
            log(f"  {p.name:22s} ready in {time.time() - t0:.1f}s ({t.timing[:40]}, reps={t.reps})")
        except Exception as e:  # noqa: BLE001  (recorded, not dropped)
            torch.cuda.synchronize()
            rows.append({**base, "provider": p.name, "kind": p.kind, "status": "failed",
                         "error": f"{type(e).__name__}: {str(e)[:400]}"})
            log(f"  {p.name:22s} FAILED: {type(e).__name__}: {str(e)[:120]}")
    for perm in round_orders(len(timed), rounds, seed):
        for i in perm:
            timed[i].sample()
    for t in timed:
        st = summarize(t.samples)
        row = {**base, "provider": t.provider.name, "kind": t.provider.kind, "status": "ok", "timing": t.timing,
               "median_us": st["median"], "p20_us": st["p20"], "p80_us": st["p80"], "rounds": st["n"],
               "reps_per_sample": t.reps, "samples_us": [round(x, 4) for x in t.samples],
               "pct_of_floor": 100.0 * _own_floor_us(t.provider, case, fl) / st["median"],
               "ratios": {o.provider.name: paired_ratios(t.samples, o.samples) for o in timed if o is not t}}
        rows.append(row)
    del sets, timed
    torch.cuda.empty_cache()
    return rows


def require_cuda() -> None:
    """Exit with a one-line reason (status 1) where no CUDA device is visible: the GPU-only experiment scripts
    call it first, so a CPU machine gets the reason, not a traceback from deep inside torch."""
    if not torch.cuda.is_available():
        sys.exit(f"{Path(sys.argv[0]).name}: no CUDA device here (it times or inspects kernels on a GPU)")


def bench_experiment(ids, provs, what: str, out_path, rounds: int = 5, log=print) -> list[dict]:
    """An experiment script's run (benchmarks/experiments/*_parts.py and the like): the environment and the
    machine's ceilings recorded once, then bench_case over each case id in turn (cold L2, progress printed), the
    artifact {"what", "env", "rows"} written to out_path. provs: a function returning the providers (fresh per
    case). Returns the rows."""
    require_cuda()
    env = envmod.record()
    ceil = measure_ceilings()
    env.update(ceil)
    l2 = env.get("l2_bytes") or (50 << 20)
    rows = []
    t0 = time.time()
    for cid in ids:
        log(f"{cid} ({time.time() - t0:.0f}s)", flush=True)
        rows += bench_case(shapes.get(cid), provs(), rounds=rounds, warm_l2=False, ceilings=ceil, l2_bytes=l2)
    with open(out_path, "w") as f:
        json.dump({"what": what, "env": env, "rows": rows}, f, indent=1)
    return rows


def format_rows(rows) -> str:
    out = [f"{'case':38s} {'provider':20s} {'median_us':>10s} {'p20-p80':>17s} {'%floor':>7s}"]
    for r in rows:
        if r["status"] != "ok":
            st = "n/a" if r["status"] == "n/a" else "FAILED"
            out.append(f"{r['case']:38s} {r['provider']:20s} {st:>10s} {r['error'][:60]}")
        else:
            out.append(f"{r['case']:38s} {r['provider']:20s} {r['median_us']:10.1f} "
                       f"{r['p20_us']:8.1f}-{r['p80_us']:<8.1f} {r['pct_of_floor']:6.1f}%")
    return "\n".join(out)


def run_bench(args) -> int:
    fam = args.family
    sweep = getattr(args, "sweep", None)
    if sweep:
        from .sweeps import SWEEPS, sweep_providers
        provs = sweep_providers(sweep)
        if SWEEPS[sweep].family != fam:
            raise ValueError(f"--sweep {sweep} belongs to family {SWEEPS[sweep].family}, not {fam}")
        if args.provider:
            provs = [p for p in provs if p.name in args.provider]
        cs = [shapes.get(c) for c in (args.case or SWEEPS[sweep].cases)]
    else:
        provs = providers(fam, args.provider)
        cs = [shapes.get(c) for c in args.case] if args.case else shapes.cases(fam, tier=shapes.BENCH)
    if not cs:
        print(f"no bench cases registered for {fam}", file=sys.stderr)
        return 2
    env = envmod.record()
    print(f"measuring ceilings on {env.get('device_name')} ...", file=sys.stderr, flush=True)
    ceilings = measure_ceilings()
    env.update(ceilings)
    l2 = env.get("l2_bytes") or (50 << 20)
    gpu = (env.get("device_name") or "gpu").replace("NVIDIA ", "").replace(" ", "-").lower()
    out = Path(args.out) if args.out else Path("benchmarks/results") / f"{fam}-{gpu}-{env['time_utc'][:10]}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    repro = f"attnkit bench --family {fam} --rounds {args.rounds}" + (" --warm-l2" if args.warm_l2 else "")
    repro += f" --sweep {sweep}" if sweep else ""
    repro += "".join(f" --case {c.id}" for c in (cs if args.case else []))
    repro += "".join(f" --provider {p}" for p in (args.provider or []))
    rows = []

    def write(complete):
        artifact = {"schema": 1, "env": env, "repro": repro, "complete": complete,
                    "providers": {p.name: {"kind": p.kind, "what": p.what} for p in provs}, "rows": rows}
        write_whole(out, json.dumps(artifact, indent=1, sort_keys=True) + "\n")

    for i, c in enumerate(cs):
        print(f"[{i + 1}/{len(cs)}] {c.id}", file=sys.stderr, flush=True)
        rows.extend(bench_case(c, provs, rounds=args.rounds, warm_l2=args.warm_l2, ceilings=ceilings, l2_bytes=l2,
                               log=lambda m: print(m, file=sys.stderr, flush=True)))
        write(complete=i + 1 == len(cs))  # after every case: a run cut short keeps what it measured (whole)
    print(format_rows(rows))
    print(f"\nartifact: {out}")
    return 0
