"""The performance targets of each family, as data, and where the committed artifacts stand against them.

`attnkit report` renders `target_table(family)` into the README: each target with its bound, how many of its cases
meet it, and each case's figure (median [p20–p80]) from the newest artifact under `benchmarks/results/` that
measured it (accuracy: the newest GPU gate run under `benchmarks/checks/`), on the targets' GPU (`TARGET_GPU`)
only. A case no artifact measured reads "not measured"; a provider of ours that failed there reads "failed" and
counts as not met; a case where the peer of a comparison failed (FlexAttention does not compile some shapes) reads
"not comparable" and is not counted. Nothing here is timed.

Measures (all from one artifact per case):
  median       a provider's median µs
  paired       the paired ratio num ÷ den (per-round ratios of the same rounds, median [p20–p80])
  best_floor   the paired ratio of a provider to the fastest no-feature ("floor") provider of the same run
  byte_floor   a provider's median over the case's byte floor (the bytes it must move at the copy ceiling)
  case_ratio   a provider's median on one case over its median on another case of the same run (not paired)
  rel_rms      the largest relative RMS error against fp64 over the cases, in the newest gate run that has them
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .report import _fmt_us, artifact_key


@dataclass(frozen=True)
class Target:
    family: str
    what: str  # the target as the family's specification states it
    measure: str  # median | paired | best_floor | byte_floor | case_ratio | rel_rms
    bound: float
    sense: str  # "<=" or ">="
    cases: tuple  # case ids (case_ratio: (case, reference case) pairs; rel_rms: a case id prefix)
    provider: str = "attnkit"
    den: str | None = None  # paired: the denominator provider
    unit: str = "x"
    gates: tuple = ()  # rel_rms: the gates whose cases count (empty: every gate of ours)


# The GPU the targets are stated for: only its artifacts count against them (other cards' runs, e.g. an H100's
# correctness checks, are evidence of their own, not figures against these bounds).
TARGET_GPU = "H200"


def on_target_gpu(env: dict) -> bool:
    return TARGET_GPU in (env.get("device_name") or "")


def _t(family, what, measure, bound, sense, cases, provider, den=None, unit="x", gates=()):
    return Target(family, what, measure, bound, sense, tuple(cases), provider, den, unit, tuple(gates))


_R = "relbias-model-"
_RB_PREFILL = [_R + c for c in ("prefill-8k-global", "prefill-8k-w1024", "varlen-mixed")]
_RB_DECODE = [_R + c for c in ("decode-b1-64k", "decode-b32-64k", "decode-b32-8k", "paged-decode-b32-8k-bs16",
                               "paged-decode-b32-8k-bs64", "fp8-decode-b32-8k")]
_RB_VERIFY = [_R + c for c in ("verify32-64k", "verify32-8k")]
_S = "sparse_int8-model-"
_M = "mqa_decode-step-"


def _mqa(heads):
    return [f"{_M}h{heads}-t{t}-{f}" for f in ("fp8", "nvfp4") for t in (1, 2, 4, 8, 16)]


TARGETS = (
    _t("relbias", "every case at most 1.15x the best no-bias kernel on the same shapes (where one ran)", "best_floor",
       1.15, "<=", _RB_PREFILL + _RB_DECODE + _RB_VERIFY, "attnkit_fwd"),
    _t("relbias", "at least 2x faster than FlexAttention score_mod on prefill", "paired", 0.5, "<=", _RB_PREFILL,
       "attnkit_fwd", "flex_score_mod"),
    _t("relbias", "at least 1.5x faster than FlexAttention score_mod on decode", "paired", 1 / 1.5, "<=",
       _RB_DECODE + _RB_VERIFY, "attnkit_fwd", "flex_score_mod"),
    _t("relbias", "every decode case within 1.25x of its byte floor", "byte_floor", 1.25, "<=", _RB_DECODE,
       "attnkit_fwd"),
    _t("relbias", "fp8-KV decode about half the bf16 time (read: at most 0.55x)", "case_ratio", 0.55, "<=",
       [(_R + "fp8-decode-b32-8k", _R + "decode-b32-8k")], "attnkit_fwd"),
    _t("sparse_int8", "decode at most 6 us at 1 row", "median", 6.0, "<=",
       [_S + "decode-r1-c32k", _S + "decode-r1-c8k"], "attnkit", unit="us"),
    _t("sparse_int8", "decode at most 8 us at 8 rows", "median", 8.0, "<=", [_S + "decode-r8-c32k"], "attnkit",
       unit="us"),
    _t("sparse_int8", "prefill at most 40 us at 128 rows", "median", 40.0, "<=", [_S + "prefill-r128-c8k"],
       "attnkit", unit="us"),
    _t("sparse_int8", "prefill at most 450 us at 2048 rows", "median", 450.0, "<=", [_S + "prefill-r2048-c8k"],
       "attnkit", unit="us"),
    _t("sparse_int8", "prefill at most 1.4 ms at 8192 rows", "median", 1400.0, "<=", [_S + "prefill-r8192-c8k"],
       "attnkit", unit="us"),
    _t("sparse_int8", "adversarial inputs at most 1.5x the time of the model-like inputs", "case_ratio", 1.5, "<=",
       [(_S + "decode-r8-q8x", _S + "decode-r8-c32k"), (_S + "decode-r8-vscale2p60", _S + "decode-r8-c32k"),
        (_S + "prefill-r2048-q8x", _S + "prefill-r2048-c8k"),
        (_S + "prefill-r2048-vscale2p16", _S + "prefill-r2048-c8k")], "attnkit"),
    # the kernels as dispatched (the Gluon kernel's gate on sm_90, the Triton kernels' elsewhere), not a gate that
    # forces an option off the rule
    _t("sparse_int8", "relative RMS error at most 1.6e-3 on the model-like inputs", "rel_rms", 1.6e-3, "<=",
       [_S], "attnkit", unit="", gates=("sparse_int8/gluon", "sparse_int8/triton")),
    _t("mqa_decode", "swap-AB at least 2.2x faster than head-padded at 16 heads, 1-16 tokens (attention)", "paired",
       2.2, ">=", _mqa(16), "attnkit_headpad", "attnkit_swapab"),
    _t("mqa_decode", "swap-AB at least 1.8x faster than head-padded at 32 heads, 1-16 tokens (attention)", "paired",
       1.8, ">=", _mqa(32), "attnkit_headpad", "attnkit_swapab"),
    _t("mqa_decode", "the same at 16 heads, whole steps (insert + attention)", "paired", 2.2, ">=", _mqa(16),
       "attnkit_step_headpad", "attnkit_step_swapab"),
    _t("mqa_decode", "the same at 32 heads, whole steps (insert + attention)", "paired", 1.8, ">=", _mqa(32),
       "attnkit_step_headpad", "attnkit_step_swapab"),
    _t("mqa_decode", "a 16-token step at most 10 us", "median", 10.0, "<=",
       [f"{_M}h{h}-t16-{f}" for h in (16, 32) for f in ("fp8", "nvfp4")], "attnkit_step_swapab", unit="us"),
)


def _ok(r):
    return r is not None and r.get("status") == "ok"


def _rows(art, case):
    return {r["provider"]: r for r in art["rows"] if r["case"] == case}


def _value(t: Target, art: dict, case):
    """(median, p20, p80, note) of target t on `case` in this artifact, or None if the artifact does not hold it;
    ("failed", ...) if the provider ran and failed."""
    kinds = art.get("providers", {})
    if t.measure == "case_ratio":
        a, b = _rows(art, case[0]).get(t.provider), _rows(art, case[1]).get(t.provider)
        if a is None or b is None:
            return None
        if not (_ok(a) and _ok(b)):
            return ("failed", None, None, "")
        return (a["median_us"] / b["median_us"], a["p20_us"] / b["median_us"], a["p80_us"] / b["median_us"],
                f"{a['median_us']:.1f} / {b['median_us']:.1f} us, medians")
    rows = _rows(art, case)
    r = rows.get(t.provider)
    if r is None:
        return None
    if not _ok(r):
        return ("failed", None, None, r.get("error", "").split(":")[0])
    if t.measure == "median":
        return (r["median_us"], r["p20_us"], r["p80_us"], "")
    if t.measure == "byte_floor":
        f = r.get("byte_floor_us")
        if not f:
            return None
        return (r["median_us"] / f, r["p20_us"] / f, r["p80_us"] / f, f"floor {f:.1f} us")
    if t.measure == "paired":
        d = rows.get(t.den)
        if d is None:
            return None
        if not _ok(d):  # the peer did not run here (FlexAttention failed to compile some shapes): no comparison
            return ("peer failed", None, None, f"{t.den} failed: {d.get('error', '').split(':')[0]}")
        if t.den not in r.get("ratios", {}):
            return None
        x = r["ratios"][t.den]
        return (x["median"], x["p20"], x["p80"], "")
    if t.measure == "best_floor":
        floors = [p for p, x in rows.items() if kinds.get(p, {}).get("kind") == "floor" and _ok(x)
                  and p in r.get("ratios", {}) and not p.startswith("gather")]
        if not floors:
            return None
        best = min(floors, key=lambda p: rows[p]["median_us"])
        x = r["ratios"][best]
        return (x["median"], x["p20"], x["p80"], f"vs {best}")
    raise ValueError(f"unknown measure {t.measure!r}")


def _newest(arts, t: Target, case):
    """The newest artifact (by its env time, then file name) on the targets' GPU that holds target t's figure on
    `case`."""
    best = None
    for p, a in arts:
        if not on_target_gpu(a.get("env", {})):
            continue
        v = _value(t, a, case)
        if v is None:
            continue
        key = artifact_key(p, a)
        if best is None or key > best[0]:
            best = (key, p, a, v)
    return best


def _rel_rms(root: Path, t: Target):
    """(worst rel_rms, best, file, n) over the model-like cases (no q8x / vscale) of our kernels' gates (not the
    peers': a peer's error is not ours; t.gates, where given: those gates only) in the newest GPU gate run of this
    family on the targets' GPU that holds them; None if none."""
    from ..gate.registry import gates
    peers = {g.name for g in gates(t.family) if g.kind == "peer"}
    best = None
    for p in sorted((root / "benchmarks" / "checks").glob(f"check-{t.family}*.jsonl")):
        env, vals = None, []
        for line in p.read_text().splitlines():
            if not line.strip():
                continue
            d = json.loads(line)
            if d.get("kind") == "env":
                env = d
            elif (d.get("kind") == "case" and d.get("case", "").startswith(t.cases[0]) and "q8x" not in d["case"]
                  and "vscale" not in d["case"] and d.get("rel_rms") is not None and not d.get("perturbation")
                  and d.get("gate") not in peers and (not t.gates or d.get("gate") in t.gates)):
                vals.append(d["rel_rms"])
        if env is None or env.get("interpreter") or not on_target_gpu(env) or not vals:
            continue
        key = (env.get("time_utc", ""), p.name)
        if best is None or key > best[0]:
            best = (key, p, max(vals), min(vals), len(vals))
    return best


def _fmt(v, unit):
    if unit == "us":
        return _fmt_us(v)
    if unit == "":
        return f"{v:.2e}"
    return f"{v:.2f}"


def _met(t: Target, v: float) -> bool:
    return v <= t.bound if t.sense == "<=" else v >= t.bound


def _short(case) -> str:
    if isinstance(case, tuple):
        return " ÷ ".join(_short(c) for c in case)
    for pre in (_R, _S, _M):
        if case.startswith(pre):
            return case[len(pre):]
    return case


def target_table(family: str, arts, root: Path) -> str:
    """The family's targets against the committed artifacts (see the module docstring)."""
    lines = ["| target | bound | met | each case: value [p20–p80] (met: ✓) | artifacts |", "|---|---|---|---|---|"]
    for t in (t for t in TARGETS if t.family == family):
        bound = f"{t.sense} {_fmt(t.bound, t.unit)}{' us' if t.unit == 'us' else t.unit}"
        if t.measure == "rel_rms":
            b = _rel_rms(root, t)
            if b is None:
                lines.append(f"| {t.what} | {bound} | not measured | - | - |")
                continue
            _, p, worst, low, n = b
            lines.append(f"| {t.what} | {bound} | {'yes' if _met(t, worst) else 'no'} | {n} model-like cases: "
                         f"{low:.2e} to {worst:.2e} | `{p.relative_to(root).as_posix()}` |")
            continue
        cells, used, met, n = [], [], 0, 0
        for case in t.cases:
            n += 1
            hit = _newest(arts, t, case)
            if hit is None:
                cells.append(f"{_short(case)} not measured")
                continue
            _, p, a, (v, lo, hi, note) = hit
            rel = p.relative_to(root).as_posix()
            if rel not in used:
                used.append(rel)
            if v == "peer failed":
                n -= 1
                cells.append(f"{_short(case)} not comparable ({note})")
                continue
            if v == "failed":
                cells.append(f"{_short(case)} failed{' (' + note + ')' if note else ''}")
                continue
            ok = _met(t, v)
            met += ok
            extra = f", {note}" if note and t.measure != "case_ratio" else ""
            cells.append(f"{_short(case)} {_fmt(v, t.unit)} [{_fmt(lo, t.unit)}–{_fmt(hi, t.unit)}]"
                         f"{extra}{' ✓' if ok else ''}")
        verdict = ("n/a" if n == 0 else "yes" if met == n else "no" if met == 0 else f"{met} of {n}")
        arts_cell = "; ".join(f"`{u}`" for u in used) or "-"
        lines.append(f"| {t.what} | {bound} | {verdict} | {'; '.join(cells)} | {arts_cell} |")
    return "\n".join(lines)
