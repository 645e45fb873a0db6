"""attnkit check | bench | report | env"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
from pathlib import Path

from ._files import write_whole

FAMILY_CHOICES = ("relbias", "sparse_int8", "mqa_decode", "merge")


def _prepare_runtime() -> str:
    """Pick the device; on a machine without a GPU, run Triton kernels in the interpreter. This must
    happen before any module that defines a Triton kernel is imported."""
    import torch
    if torch.cuda.is_available():
        return "cuda"
    os.environ.setdefault("TRITON_INTERPRET", "1")
    return "cpu"


def _progress_factory(total: int):
    try:
        from tqdm import tqdm
        bar = tqdm(total=total, unit="case", file=sys.stderr, dynamic_ncols=True)

        def step(gate, case, rec):
            bar.set_description(f"{gate.name} {case.id}"[:60])
            bar.update(1)
            if rec["status"] != "pass":
                bar.write(f"{rec['status'].upper()} {gate.name} {case.id}: {str(rec.get('reason'))[:300]}")
        return step, bar.close
    except ImportError:
        count = [0]

        def step(gate, case, rec):
            count[0] += 1
            print(f"[{count[0]}/{total}] {gate.name} {case.id} {rec['status']} ({rec['seconds']}s)",
                  file=sys.stderr, flush=True)
        return step, lambda: None


def cmd_check(args) -> int:
    device = _prepare_runtime()
    from . import env as envmod
    from .gate.registry import gates
    from .gate.runner import format_table, run_gate, write_jsonl
    shard = None
    if args.shard:
        try:
            i, n = (int(x) for x in args.shard.split("/"))
            assert 0 <= i < n
        except (ValueError, AssertionError):
            print(f"attnkit check: --shard takes I/N with 0 <= I < N, got {args.shard!r}", file=sys.stderr)
            return 2
        shard = (i, n)
    if args.jobs < 1:
        print(f"attnkit check: --jobs must be at least 1, got {args.jobs}", file=sys.stderr)
        return 2
    if args.timeout is not None and not (0 < args.timeout < float("inf")):
        print(f"attnkit check: --timeout must be a positive number of seconds, got {args.timeout}", file=sys.stderr)
        return 2
    if args.timeout and args.shard:
        print("attnkit check: --timeout runs shard processes itself; it cannot be combined with --shard",
              file=sys.stderr)
        return 2
    from .testing import shapes

    tier = args.tier or ("full" if device == "cuda" else "smoke")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    selected = gates(args.family)
    if args.gate:
        unknown = set(args.gate) - {g.name for g in selected}
        if unknown:
            print(f"attnkit check: unknown gate(s) {sorted(unknown)}; known: {[g.name for g in selected]}",
                  file=sys.stderr)
            return 2
        selected = [g for g in selected if g.name in args.gate]
    if args.kernels_only:
        selected = [g for g in selected if g.kind == "kernel"]
    if args.group or args.skip_group:
        import dataclasses
        keep = lambda gr: ((not args.group or any(gr.startswith(x) for x in args.group))  # noqa: E731
                           and not any(gr.startswith(x) for x in (args.skip_group or [])))
        selected = [dataclasses.replace(g, groups=tuple(gr for gr in g.groups if keep(gr))) for g in selected]
        selected = [g for g in selected if g.groups]
    from .gate.runner import gate_cases
    total = sum(len(gate_cases(g, tier, args.case, shard)) for g in selected if g.available(device)[0])
    print(f"attnkit check: {len(selected)} gate(s), {total} case(s), tier={tier}, device={device}, seed={seed}",
          file=sys.stderr)
    step, close = _progress_factory(total)
    t0 = time.time()
    out = Path(args.out) if args.out else Path("check-results") / f"check-{tier}-{device}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    env = envmod.record()
    repro = (f"attnkit check --tier {tier} --seed {seed}" + (f" --family {args.family}" if args.family else "")
             + "".join(f" --gate {g}" for g in (args.gate or [])) + (" --kernels-only" if args.kernels_only else "")
             + "".join(f" --group {g}" for g in (args.group or []))
             + "".join(f" --skip-group {g}" for g in (args.skip_group or []))
             + "".join(f" --case {c}" for c in (args.case or [])))
    results = []
    if args.jobs > 1 or args.timeout:  # in shard processes
        close()
        results, stopped = _check_jobs(args, selected, tier, seed, out, device)
        write_jsonl(out, env, results, {"tier": tier, "seed": seed, "seconds": round(time.time() - t0, 1),
                                        "complete": not stopped, "repro": repro, "jobs": args.jobs,
                                        **({"timeout": args.timeout} if args.timeout else {}),
                                        **({"stopped": {str(i): d for i, d in stopped.items()}} if stopped else {})})
    else:
        on_start = None
        if args.status_file:  # a shard of --jobs: the case it starts and how many it finished, for its parent's
            started = [0]  # progress lines and to name the case if the shard is stopped
            import faulthandler
            # its parent asks for every thread's Python stack before it stops a shard: into a file of its own (a
            # compile step may have fd 2, the log, redirected at that moment)
            stacks = open(_stack_file(args.status_file), "w")  # noqa: SIM115 (open for the process's life)
            faulthandler.register(STACK_SIGNAL, file=stacks, all_threads=True)

            def on_start(gate, case):
                write_whole(args.status_file, json.dumps({"done": started[0], "gate": gate.name, "case": case.id,
                                                          "since": time.time()}))
                started[0] += 1
        for g in selected:  # the file is rewritten after every gate: a run cut short keeps what it did
            results.append(run_gate(g, device, tier, seed, step, case_filter=args.case, shard=shard,
                                    on_start=on_start))
            write_jsonl(out, env, results, {"tier": tier, "seed": seed, "seconds": round(time.time() - t0, 1),
                                            "complete": len(results) == len(selected), "repro": repro,
                                            **({"shard": args.shard} if shard else {})})
    close()
    print(format_table(results))
    bad = [r for r in results if r.status == "fail"]
    skipped = [r for r in results if r.status == "skipped"]
    short = [r for r in results if r.status == "incomplete"]
    print(f"\n{len(results) - len(bad) - len(skipped) - len(short)} passed, {len(bad)} failed, {len(skipped)} skipped "
          f"(a skipped gate did not run here)" + (f", {len(short)} incomplete" if short else "")
          + f"; results: {out}; reproduce with --seed {seed}")
    for r in bad:
        print(f"FAILED {r.gate}: {r.reason}")
    for r in short:
        print(f"INCOMPLETE {r.gate}: {r.reason}")
    return 1 if bad or short else 0


PROGRESS_EVERY = 30.0  # seconds between attnkit check --jobs progress lines


def _shard_status(tmp: Path, i: int):
    """A --jobs shard's status file (written by its on_start, replaced whole): {done, gate, case, since}, or None."""
    try:
        return json.loads((tmp / f"shard-{i}.status").read_text())
    except (OSError, ValueError):
        return None


def _progress_line(tmp: Path, pending: dict, totals: list, t_start: float) -> str:
    """Cases done over all shards (a finished shard counts all of its cases) and the running case started longest
    ago: a case that holds its shard far longer than the others shows here while it runs."""
    now, done, longest = time.time(), 0, None
    for i, total in enumerate(totals):
        if i not in pending:
            done += total
            continue
        st = _shard_status(tmp, i)
        if st:
            done += st["done"]
            if longest is None or st["since"] < longest[1]["since"]:
                longest = (i, st)
    line = f"[{now - t_start:.0f} s] {done}/{sum(totals)} cases done, {len(pending)} shard(s) running"
    if longest:
        i, st = longest
        line += f"; longest on one case: shard {i}, {st['gate']} {st['case']} for {now - st['since']:.0f} s"
    return line


# The signal a --jobs shard writes its Python stacks on: a real-time one. With SIGUSR1, shards stopped on the H200 in a
# Triton compile wrote nothing and ended by the SIGTERM after it, so something in the process had taken the signal
# over (LLVM sets handlers for SIGUSR1 and SIGUSR2 when asked to; not shown to be the cause).
STACK_SIGNAL = signal.SIGRTMIN + 4 if hasattr(signal, "SIGRTMIN") else signal.SIGUSR1
STACK_WAIT = 1.0  # seconds a stopped shard is given to write its Python stacks (STACK_SIGNAL) before SIGTERM


def _stack_file(status_file) -> Path:
    """Where a --jobs shard writes its Python stacks when its parent asks (STACK_SIGNAL): beside its status file."""
    return Path(str(status_file) + ".stack")


def _main_stack(path: Path, lines: int = 40) -> str:
    """The main thread's stack in the last dump faulthandler wrote into a file (a stopped shard's stack file: what it
    was doing), at most `lines` lines, or "" when there is none. The signal may land on any thread of the process (torch
    and Triton start their own), so "Current thread" is not always the main one; faulthandler lists the threads
    newest first, so the main thread's block is the last."""
    import re
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    heads = list(re.finditer(r"^(Current thread|Thread) 0x[0-9a-f]+ .*\(most recent call first\):$", text, re.M))
    if not heads:
        return ""
    block = text[heads[-1].start():].splitlines()
    end = next((j for j, ln in enumerate(block[1:], 1) if not ln.startswith("  ")), len(block))
    return "\n".join(block[:min(end, lines)])


class _Stop(Exception):
    """attnkit check --jobs: stop the shards (the --timeout passed, or the parent was interrupted or terminated)."""


def _raise_stop(signum, frame):
    raise _Stop(f"signal {signum}")


def _check_jobs(args, selected, tier, seed, out, device):
    """attnkit check --jobs N: N processes, each running every N-th case of every selected gate (compiling kernels
    side by side: the gates are compile-bound), then one result per gate merged from theirs. The shards are
    reported as they finish, and every PROGRESS_EVERY seconds the cases done and the case that has run longest. At
    --timeout seconds, on Ctrl-C or on SIGTERM the unfinished shards are stopped
    (terminated, killed 5 s later), each named with the case it was running; what the shards finished is merged
    (a shard's file holds every gate it finished), and the gates they left unrun are "incomplete". A case that ran out
    of GPU memory beside the other shards runs again alone in this process before the merge (rerun_out_of_memory;
    not after a stop). Returns the
    merged results and the stopped shards (index -> what it was doing; empty when every shard finished)."""
    import subprocess
    import tempfile

    from .gate.runner import gate_cases, merge_shards, read_jsonl, rerun_out_of_memory
    n = args.jobs
    base = ((["--family", args.family] if args.family else []) + [x for g in (args.gate or []) for x in ("--gate", g)]
            + (["--kernels-only"] if args.kernels_only else [])
            + [x for g in (args.group or []) for x in ("--group", g)]
            + [x for g in (args.skip_group or []) for x in ("--skip-group", g)]
            + [x for c in (args.case or []) for x in ("--case", c)])
    tmp = Path(tempfile.mkdtemp(prefix="attnkit-check-", dir=out.parent))
    t_start = time.time()
    deadline = t_start + args.timeout if args.timeout else None
    old_term = signal.signal(signal.SIGTERM, _raise_stop)
    procs, pending, stopped, why = [], {}, {}, ""
    # n shards side by side already fill the cores: each compiles the peers' torch.compile graphs (FlexAttention)
    # with one Inductor compile worker, not a pool of its own per shard (unless the caller set it)
    shard_env = {"TORCHINDUCTOR_COMPILE_THREADS": "1", **os.environ} if n > 1 else None
    try:
        for i in range(n):
            cmd = [sys.executable, "-m", "attnkit.cli", "check", *base, "--tier", tier, "--seed", str(seed),
                   "--shard", f"{i}/{n}", "--out", str(tmp / f"shard-{i}.jsonl"),
                   "--status-file", str(tmp / f"shard-{i}.status")]
            log = open(tmp / f"shard-{i}.log", "w")
            procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=shard_env), log))
            pending[i] = procs[-1]
        totals = [sum(len(gate_cases(g, tier, args.case, (i, n))) for g in selected if g.available(device)[0])
                  for i in range(n)]
        done, last_report = 0, t_start
        while pending:
            for i, (p, log) in list(pending.items()):
                if p.poll() is not None:
                    log.close()
                    del pending[i]
                    done += 1
                    print(f"[{done}/{n} shards done: shard {i} after {time.time() - t_start:.0f} s]", file=sys.stderr,
                          flush=True)
            if pending and time.time() - last_report >= PROGRESS_EVERY:
                last_report = time.time()
                print(_progress_line(tmp, pending, totals, t_start), file=sys.stderr, flush=True)
            if pending and deadline and time.time() > deadline:
                raise _Stop(f"--timeout {args.timeout:g} s passed")
            if pending:
                time.sleep(0.2)
    except (_Stop, KeyboardInterrupt) as e:
        why = str(e) if isinstance(e, _Stop) else "interrupted"
    finally:
        signal.signal(signal.SIGTERM, old_term)
        asked = set()
        for i, (p, log) in pending.items():  # first each stuck shard's Python stacks, into its stack file
            if p.poll() is None and _shard_status(tmp, i):  # (the handler is set before its first case starts)
                p.send_signal(STACK_SIGNAL)
                asked.add(i)
        if asked:
            time.sleep(STACK_WAIT)
        for i, (p, log) in list(pending.items()):  # a shard that finished its last case meanwhile is done, not stopped
            if p.poll() == 0:
                log.close()
                del pending[i]
                print(f"attnkit check: shard {i}/{n} finished its cases as it was being stopped", file=sys.stderr,
                      flush=True)
        for i, (p, log) in pending.items():
            p.terminate()
        for i, (p, log) in pending.items():
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            log.close()
            st = _shard_status(tmp, i)
            doing = (f"running {st['gate']} {st['case']} (for {time.time() - st['since']:.0f} s)" if st
                     else "before its first case")
            stopped[i] = doing
            print(f"attnkit check: shard {i}/{n} stopped ({why}) {doing}; its log: {tmp / f'shard-{i}.log'}",
                  file=sys.stderr, flush=True)
            stack = _main_stack(_stack_file(tmp / f"shard-{i}.status"))
            if i in asked:
                print(f"attnkit check: shard {i}/{n}'s Python stack when stopped (innermost first):\n{stack}" if stack
                      else f"attnkit check: shard {i}/{n} wrote no Python stack (exit status {p.returncode})",
                      file=sys.stderr, flush=True)
    shards = []
    for i in range(n):
        f = tmp / f"shard-{i}.jsonl"
        if not f.exists():
            if i not in stopped:
                stopped[i] = "exited without results"
                print(f"attnkit check: shard {i}/{n} wrote no results; its log: {tmp / f'shard-{i}.log'}",
                      file=sys.stderr)
            continue
        if i not in stopped and not json.loads(f.open().readline()).get("complete", True):
            stopped[i] = "ended before finishing its gates"  # e.g. an error outside any case
            print(f"attnkit check: shard {i}/{n} ended before finishing its gates; its log: "
                  f"{tmp / f'shard-{i}.log'}", file=sys.stderr)
        shards.append(read_jsonl(f))
    if not why:  # a case that ran out of GPU memory beside the others runs again alone (not after a stop)
        rerun_out_of_memory(shards, tier, seed, device, log=lambda m: print(m, file=sys.stderr, flush=True))
    order = {g.name: [c.id for c in gate_cases(g, tier, args.case)] for g in selected}
    if not stopped:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    return merge_shards(shards, tier, order, stopped), stopped


def cmd_env(args) -> int:
    _prepare_runtime()
    from . import env as envmod
    rec = envmod.record()
    if args.json:
        print(json.dumps({"env": rec, "kernel_paths": envmod.kernel_paths(), "options": envmod.tuning_options()},
                         indent=2, default=str))
        return 0
    for k, v in rec.items():
        print(f"{k:14s} {v}")
    print("\nkernel paths:")
    for p in envmod.kernel_paths():
        print(f"  {p['path']:48s} {p['status']:18s} {p['runs']}")
    print("\ntuning options (keyword argument, else environment variable, else default; None: the launch rule):")
    for o in envmod.tuning_options():
        print(f"  {o['family']:12s} {o['keyword']:18s} {o['env']:36s} default {str(o['default']):6s} "
              f"now {str(o['now']):6s} {o['what']}")
    return 0


def cmd_bench(args) -> int:
    device = _prepare_runtime()
    if device != "cuda":
        print("attnkit bench times kernels by CUDA-graph replay and needs a CUDA GPU; none is visible here.",
              file=sys.stderr)
        return 2
    from .bench.harness import run_bench
    return run_bench(args)


def cmd_profile(args) -> int:
    device = _prepare_runtime()
    if device != "cuda":
        print("attnkit profile needs a CUDA GPU; none is visible here.", file=sys.stderr)
        return 2
    from .bench.profile import run_profile
    return run_profile(args)


def cmd_report(args) -> int:
    from .bench.report import run_report
    return run_report(args)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="attnkit", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)

    c = sub.add_parser("check", help="run every registered gate against its fp64 oracle on this machine")
    c.add_argument("--family", choices=FAMILY_CHOICES)
    c.add_argument("--gate", action="append", help="run only this gate (repeatable)")
    c.add_argument("--tier", choices=("smoke", "full"), help="default: full on a GPU, smoke on a CPU")
    c.add_argument("--kernels-only", action="store_true", help="only our kernels' gates (leave out the peers')")
    c.add_argument("--group", action="append", help="only shape families starting with this (repeatable)")
    c.add_argument("--case", action="append", help="only cases whose id contains this (repeatable)")
    c.add_argument("--skip-group", action="append", help="leave out shape families starting with this (repeatable)")
    c.add_argument("--seed", type=int, help="input seed (default: fresh, printed for reproduction)")
    c.add_argument("--out", help="JSONL output path (default check-results/check-<tier>-<device>.jsonl)")
    c.add_argument("--jobs", type=int, default=1, help="run the cases in this many processes side by side (the "
                                                       "gates are compile-bound: on a many-core GPU host, 8 or 16)")
    c.add_argument("--shard", help="I/N: only every N-th case of each gate from the I-th (what --jobs runs)")
    c.add_argument("--timeout", type=float, help="stop the run after this many seconds (in shard processes, --jobs "
                                                 "of them): what finished is written, the rest is reported incomplete "
                                                 "and each stopped shard named with the case it was running")
    c.add_argument("--status-file", help=argparse.SUPPRESS)  # a --jobs shard's current case, for its parent
    c.set_defaults(fn=cmd_check)

    b = sub.add_parser("bench", help="time our kernels and the peers by CUDA-graph replay (GPU)")
    b.add_argument("--family", choices=("relbias", "sparse_int8", "mqa_decode"), required=True)
    b.add_argument("--case", action="append", help="case id (repeatable; default: the family's bench cases)")
    b.add_argument("--provider", action="append", help="provider name (repeatable; default: all)")
    b.add_argument("--rounds", type=int, default=15, help="alternating rounds per case (default 15)")
    b.add_argument("--sweep", help="time a named grid of option settings (attnkit.bench.sweeps) instead of the "
                                    "providers; default cases: the grid's")
    b.add_argument("--warm-l2", action="store_true", help="time on one input set (warm L2; reported as such)")
    b.add_argument("--out", help="artifact path (default benchmarks/results/<family>-<gpu>-<date>.json)")
    b.set_defaults(fn=cmd_bench)

    pr = sub.add_parser("profile", help="per-kernel GPU time of one provider call (torch profiler, GPU)")
    pr.add_argument("--family", required=True, choices=("relbias", "sparse_int8", "mqa_decode"))
    pr.add_argument("--case", action="append", required=True, help="case id (repeatable)")
    pr.add_argument("--provider", action="append", default=[], help="provider name (repeatable; default: all)")
    pr.add_argument("--iters", type=int, default=20)
    pr.add_argument("--out", help="JSON path")
    pr.set_defaults(fn=cmd_profile)
    r = sub.add_parser("report", help="regenerate README status tables and docs/figures from committed artifacts")
    r.add_argument("--root", default=".", help="repository root (default .)")
    r.set_defaults(fn=cmd_report)

    e = sub.add_parser("env", help="device, versions and the kernel paths available here")
    e.add_argument("--json", action="store_true")
    e.set_defaults(fn=cmd_env)

    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
