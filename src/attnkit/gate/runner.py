"""The gate runner behind ``attnkit check``."""

from __future__ import annotations

import json
import sys
import time
import traceback
from dataclasses import dataclass, field

import torch

from .._files import write_whole
from ..testing import shapes
from ..testing.baselines import BASELINES
from ..testing.compare import compare, poison_, unwritten
from ..testing.inputs import make_inputs
from ..testing.oracles import ORACLES
from .registry import Gate, gates

POWER_CASES_MAX = 4  # a perturbation is tried on at most this many applicable cases, stopping at the first catch
# On a case where a perturbation is not caught, its inputs are drawn anew (other seeds) up to this many draws in all:
# a perturbation whose effect depends on the data (one key past a window of 40 carries about 1/41 of the weight)
# can fall inside a loose bound on one draw, and `attnkit check` draws a new seed each run. A blind perturbation
# stays blind on every draw.
POWER_DRAWS = 3
POWER_DRAW_STRIDE = 7919  # draw k of a case uses seed + k * POWER_DRAW_STRIDE


@dataclass
class GateResult:
    gate: str
    status: str  # pass | fail | skipped | incomplete (attnkit check --jobs: a shard was stopped before its cases ran)
    cases: list = field(default_factory=list)  # per-case records
    # perturbation -> {"caught": bool, "case": id, "tried": n, "draws": n}, and where fresh draws failed
    # "draw_errors": n, "draw_error": the last one
    power: dict = field(default_factory=dict)
    reason: str = ""


def _exact(out, ref) -> dict:
    same = out.shape == ref.shape and torch.equal(out.cpu(), ref.cpu())
    diff = 0 if same else int((out.cpu() != ref.cpu()).sum()) if out.shape == ref.shape else -1
    return dict(ok=same, worst_ratio=0.0 if same else float("inf"),
                reason="" if same else f"{diff} bytes differ from the oracle's")


def _draw(gate: Gate, case, device, seed):
    """A case's seeded inputs and the oracle's (and the baseline's) answers: each case's first draw (_run_case), and
    a power check's fresh ones."""
    inp = make_inputs(case, device, seed)
    if gate.exact:
        return inp, (gate.oracle(inp)[0], None, None, None)
    ref, ref_lse = (gate.oracle or ORACLES[case.family])(inp)
    base, base_lse = BASELINES[case.family](inp)
    return inp, (ref, ref_lse, base, base_lse)


def _run_case(gate: Gate, case, device, seed):
    inp, refs = _draw(gate, case, device, seed)
    ref, ref_lse, base, base_lse = refs
    if gate.exact:
        out, _ = gate.call(inp, None, case)
        rec = dict(case=case.id, group=case.group, **_exact(out, ref))
        rec["status"] = "pass" if rec["ok"] else "fail"
        return inp, refs, rec
    out, lse = gate.call(inp, None, case)
    if device == "cuda":
        torch.cuda.synchronize()
    left = unwritten(out)
    cmp = compare(out, ref, base, out_dtype=gate.out_dtype, lse=lse, lse_ref=ref_lse if lse is not None else None,
                  lse_base=base_lse)
    rec = dict(case=case.id, group=case.group, **cmp.as_dict())
    if left:
        rec["ok"] = False
        rec["reason"] = (rec["reason"] + "; " if rec["reason"] else "") + f"{left} output elements unwritten"
    rec["status"] = "pass" if rec["ok"] else "fail"
    return inp, refs, rec


def _power(gate, pert, case, inp, refs):
    ref, ref_lse, base, base_lse = refs
    out, lse = gate.call(inp, pert.name, case)
    if gate.exact:
        r = _exact(out, ref)
        return not r["ok"], type("C", (), {"reason": r["reason"]})()
    cmp = compare(out, ref, base, out_dtype=gate.out_dtype, lse=lse, lse_ref=ref_lse if lse is not None else None,
                  lse_base=base_lse)
    return (not cmp.ok) or unwritten(out) > 0, cmp


def gate_cases(gate: Gate, tier: str, case_filter=None, shard=None) -> list:
    """The cases a gate runs at `tier`: its groups' cases it applies to, those whose id contains one of case_filter,
    and with shard = (i, n) every n-th of them from the i-th (attnkit check --jobs runs n shards side by side)."""
    case_list = [c for g in gate.groups for c in shapes.cases(tier=tier, group=g) if gate.applies(c)]
    if case_filter:
        case_list = [c for c in case_list if any(f in c.id for f in case_filter)]
    if shard is not None:
        case_list = case_list[shard[0]::shard[1]]
    return case_list


def run_gate(gate: Gate, device: str, tier: str, seed: int, progress=None, case_filter=None,
             shard=None, on_start=None) -> GateResult:
    """One gate over its cases; progress(gate, case, record) after each case, on_start(gate, case) before it."""
    ok, why = gate.available(device)
    if not ok:
        return GateResult(gate.name, "skipped", reason=why)
    case_list = gate_cases(gate, tier, case_filter, shard)
    res = GateResult(gate.name, "pass")
    power = {p.name: {"caught": False, "case": None, "tried": 0, "what": p.what} for p in gate.perturbations}
    for case in case_list:
        if on_start:
            on_start(gate, case)
        t0 = time.time()
        try:
            inp, refs, rec = _run_case(gate, case, device, seed)
        except Exception as e:  # recorded with its error, never dropped
            status = "unsupported" if gate.kind == "peer" else "fail"  # a peer that cannot take a shape
            rec = _error_record(case.id, case.group, status, e)
            inp = refs = None
        rec["seconds"] = round(time.time() - t0, 3)
        res.cases.append(rec)
        if inp is not None:
            for p in gate.perturbations:
                st = power[p.name]
                if st["caught"] or st["tried"] >= POWER_CASES_MAX or not p.applies(case):
                    continue
                st["tried"] += 1
                for draw in range(POWER_DRAWS):
                    d_inp, d_refs = inp, refs
                    if draw:  # a fresh draw that cannot be made (out of memory, say) ends this case's draws, recorded;
                        try:  # it neither stops the gate nor counts as a catch
                            d_inp, d_refs = _draw(gate, case, device, seed + draw * POWER_DRAW_STRIDE)
                        except Exception as e:
                            st["draw_errors"] = st.get("draw_errors", 0) + 1
                            st["draw_error"] = f"{case.id} draw {draw}: {type(e).__name__}: {str(e)[:300]}"
                            break
                    st["draws"] = st.get("draws", 0) + 1
                    try:
                        caught, cmp = _power(gate, p, case, d_inp, d_refs)
                        reason = cmp.reason
                    except Exception as e:
                        caught, reason = True, f"raised {type(e).__name__}"
                    if caught:
                        st.update(caught=True, case=case.id, reason=reason)
                        break
        del inp, refs
        if device == "cuda":
            torch.cuda.empty_cache()
        if progress:
            progress(gate, case, rec)
    res.power = power
    return _settle(res, tier)


def _settle(res: GateResult, tier: str) -> GateResult:
    """A gate's status from its cases and its perturbations' power checks."""
    power = res.power
    res.status, res.reason = "pass", ""
    failed = [c for c in res.cases if c["status"] == "fail"]
    blind = [n for n, st in power.items() if not st["caught"] and st["tried"] > 0]
    for st in power.values():  # a selection (--group / --case) can leave a perturbation no case to run on
        if st["tried"] == 0:
            st["reason"] = "no applicable case in this selection"
    if not res.cases:
        res.status, res.reason = "skipped", f"no case at tier {tier}"
    elif all(c["status"] == "unsupported" for c in res.cases):
        res.status, res.reason = "skipped", "the peer took none of the cases (all unsupported)"
    elif failed or blind:
        res.status = "fail"
        parts = []
        if failed:
            parts.append(f"{len(failed)} case(s) failed")
        if blind:
            parts.append("power check not caught: " + ", ".join(blind))
        res.reason = "; ".join(parts)
    return res


def _error_record(case_id: str, group, status: str, e: Exception) -> dict:
    """The record of a case that raised (inside an `except` block: the traceback is the one being handled)."""
    return dict(case=case_id, group=group, ok=False, status=status, reason=f"{type(e).__name__}: {str(e)[:2000]}",
                traceback=traceback.format_exc(limit=4)[-4000:])


def out_of_memory(rec: dict) -> bool:
    """A failed case record whose error was the GPU running out of memory (torch.OutOfMemoryError), not a wrong
    answer."""
    return rec.get("status") == "fail" and str(rec.get("reason", "")).startswith("OutOfMemoryError")


def rerun_out_of_memory(shards: list[list[GateResult]], tier: str, seed: int, device: str, log=None) -> int:
    """attnkit check --jobs: the cases that ran out of GPU memory beside the other shards (several processes share
    the GPU's memory) run again in this process, alone, with the same inputs (the same seed); each new record
    replaces the old one, marked "rerun_alone", and its shard's gate is settled again (a second out-of-memory stays
    a failure). Returns how many cases ran again."""
    from .registry import gates
    by_name = {g.name: g for g in gates()}
    n = 0
    for results in shards:
        for res in results:
            redo = [k for k, c in enumerate(res.cases) if out_of_memory(c)]
            if not redo:
                continue
            gate = by_name[res.gate]
            cases = {c.id: c for c in gate_cases(gate, tier)}
            for k in redo:
                cid = res.cases[k]["case"]
                if log:
                    log(f"attnkit check: running {res.gate} {cid} again alone (it ran out of GPU memory beside the "
                        "other shards)")
                t0 = time.time()
                try:
                    _, _, rec = _run_case(gate, cases[cid], device, seed)
                except Exception as e:
                    rec = _error_record(cid, res.cases[k].get("group"), "fail", e)
                rec["seconds"] = round(time.time() - t0, 3)
                rec["rerun_alone"] = True
                res.cases[k] = rec
                n += 1
                if device == "cuda":
                    torch.cuda.empty_cache()
            _settle(res, tier)  # (in place)
    return n


def merge_shards(shards: list[list[GateResult]], tier: str, order: dict,
                 stopped: dict | None = None) -> list[GateResult]:
    """One result per gate from the shards' results (attnkit check --jobs): the cases in the order of `order`
    (gate -> case ids in the unsharded order); a perturbation caught when any shard caught it (the first such shard's
    case), its tries summed; a gate every shard skipped stays skipped, with the reason they gave. stopped (shard
    index -> what it was doing) names shards that did not finish: a gate with cases no shard reported is then
    "incomplete" (not "pass": its unrun cases, and a perturbation only they would have caught, are unknown), or
    "fail" where a case that ran failed on its answer. A case that ran out of GPU memory beside the other shards and
    was not run again alone (a stopped run skips the rerun) counts as not run: "incomplete", not "fail"."""
    out = []
    for name in order:
        parts = [r for rs in shards for r in rs if r.gate == name]
        ran = [r for r in parts if r.status != "skipped" or r.cases]
        if not ran:
            if not parts and stopped and order[name]:
                out.append(GateResult(name, "incomplete", reason=f"{len(order[name])} case(s) not run: "
                                      + _stopped_text(stopped)))
            else:
                out.append(GateResult(name, "skipped", reason=parts[0].reason if parts else "no shard ran it"))
            continue
        rank = {cid: i for i, cid in enumerate(order[name])}
        res = GateResult(name, "pass", cases=sorted((c for r in ran for c in r.cases),
                                                    key=lambda c: rank.get(c["case"], len(rank))))
        for r in ran:
            for pname, st in r.power.items():
                acc = res.power.setdefault(pname, {"caught": False, "case": None, "tried": 0, "what": st.get("what")})
                acc["tried"] += st.get("tried", 0)
                acc["draws"] = acc.get("draws", 0) + st.get("draws", 0)
                if st.get("draw_errors"):  # fresh draws that could not be made, in any shard
                    acc["draw_errors"] = acc.get("draw_errors", 0) + st["draw_errors"]
                    acc["draw_error"] = st["draw_error"]
                if st.get("caught") and not acc["caught"]:
                    acc.update(caught=True, case=st.get("case"), reason=st.get("reason", ""))
        res = _settle(res, tier)
        reported = {c["case"] for c in res.cases}
        missing = [cid for cid in order[name] if cid not in reported]
        unsettled = [c for c in res.cases if out_of_memory(c) and not c.get("rerun_alone")] if stopped else []
        for c in unsettled:  # the table and the file say so case by case (format_table: not a wrong answer)
            c["not_run"] = NOT_RUN_OOM
        if stopped and (missing or unsettled):
            gaps = []
            if missing:
                gaps.append(f"{len(missing)} case(s) not run: " + _stopped_text(stopped))
            if unsettled:
                gaps.append(f"{len(unsettled)} case(s) ran out of GPU memory beside the other shards and were not "
                            "run again alone (the run was stopped)")
            wrong = sum(c["status"] == "fail" for c in res.cases) - len(unsettled)
            res.status = "fail" if wrong else "incomplete"
            res.reason = "; ".join(([f"{wrong} case(s) failed"] if wrong else []) + gaps)
        out.append(res)
    return out


NOT_RUN_OOM = "out of GPU memory beside the other shards; not run again alone (the run was stopped)"


def _stopped_text(stopped: dict) -> str:
    return "shard(s) " + ", ".join(str(i) for i in sorted(stopped)) + " stopped before finishing"


def read_jsonl(path) -> list[GateResult]:
    """The gate results of a file write_jsonl wrote."""
    results: dict = {}
    for line in open(path):
        rec = json.loads(line)
        kind = rec.pop("kind")
        if kind == "env":
            continue
        r = results.setdefault(rec["gate"], GateResult(rec["gate"], "pass"))
        if kind == "case":
            rec.pop("gate")
            r.cases.append(rec)
        elif kind == "power":
            r.power[rec.pop("perturbation")] = {k: v for k, v in rec.items() if k != "gate"}
        elif kind == "gate":
            r.status, r.reason = rec["status"], rec["reason"]
    return list(results.values())


def run_all(family: str | None, device: str, tier: str, seed: int, progress=None) -> list[GateResult]:
    return [run_gate(g, device, tier, seed, progress) for g in gates(family)]


def write_jsonl(path, env: dict, results: list[GateResult], meta: dict) -> None:
    """Written whole (attnkit._files.write_whole): a run stopped mid-write leaves the previous version (every gate
    it finished before), never a cut line."""
    lines = [json.dumps({"kind": "env", **env, **meta})]
    for r in results:
        lines += [json.dumps({"kind": "case", "gate": r.gate, **{k: v for k, v in c.items()}}, default=str)
                  for c in r.cases]
        lines += [json.dumps({"kind": "power", "gate": r.gate, "perturbation": name, **st}, default=str)
                  for name, st in r.power.items()]
        lines.append(json.dumps({"kind": "gate", "gate": r.gate, "status": r.status, "reason": r.reason,
                                 "cases": len(r.cases)}))
    write_whole(path, "\n".join(lines) + "\n")


def format_table(results: list[GateResult]) -> str:
    rows = [("gate", "shape family", "cases", "worst err/bound", "status")]
    for r in results:
        if r.status == "skipped":
            rows.append((r.gate, "-", "0", "-", f"SKIPPED ({r.reason})"))
            continue
        if r.status == "incomplete":
            rows.append((r.gate, "-", str(len(r.cases)), "-", f"INCOMPLETE ({r.reason})"))
        by_group: dict = {}
        for c in r.cases:
            by_group.setdefault(c["group"], []).append(c)
        for g, cs in by_group.items():
            not_run = [c for c in cs if c.get("not_run")]  # merge_shards: out of memory in a stopped run
            bad = [c for c in cs if c["status"] == "fail" and not c.get("not_run")]
            unsup = [c for c in cs if c["status"] == "unsupported"]
            ran = [c for c in cs if c["status"] != "unsupported" and not c.get("not_run")]
            worst = max((c.get("worst_ratio", float("inf")) for c in ran), default=0.0)
            st = "FAIL" if bad else "INCOMPLETE" if not_run else "pass"
            if not_run:
                st += f" ({len(not_run)} not run, {NOT_RUN_OOM}: " + ", ".join(
                    c["case"].replace(g + "-", "") for c in not_run) + ")"
            if unsup:
                st += f" ({len(unsup)} unsupported by the peer: " + ", ".join(c["case"].replace(g + "-", "") for c in unsup) + ")"
            rows.append((r.gate, g, str(len(cs)), f"{worst:.2f}" if ran else "-", st))
        for name, st in r.power.items():
            verdict = (f"caught on {st['case']}" if st["caught"] else
                       "not run: no applicable case selected" if st["tried"] == 0 else "NOT CAUGHT")
            if st.get("draw_errors"):
                verdict += f" ({st['draw_errors']} fresh draw(s) failed; last: {st['draw_error'][:80]})"
            rows.append((r.gate, f"power: {name}", str(st["tried"]), "-", verdict))
    w = [max(len(x[i]) for x in rows) for i in range(5)]
    lines = ["  ".join(x[i].ljust(w[i]) for i in range(5)) for x in rows]
    lines.insert(1, "  ".join("-" * w[i] for i in range(5)))
    return "\n".join(lines)
