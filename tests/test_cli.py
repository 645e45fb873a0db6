"""The console script end to end (subprocesses, as a user runs it)."""

import json
import pathlib
import os
import subprocess
import sys

import pytest


def _run(*args, timeout=600):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "attnkit.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_env_json():
    r = _run("env", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["env"]["torch"] and "kernel_paths" in d


def test_check_merge_family_writes_jsonl_and_reports_power(tmp_path):
    out = tmp_path / "c.jsonl"
    r = _run("check", "--family", "merge", "--seed", "7", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "power: split-lost" in r.stdout and "caught on" in r.stdout
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[0]["kind"] == "env" and lines[0]["seed"] == 7 and "git_sha" in lines[0]
    assert any(x["kind"] == "power" and x["caught"] for x in lines)
    assert any(x["kind"] == "gate" and x["status"] == "pass" for x in lines)


def test_bench_without_gpu_says_why():
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    r = _run("bench", "--family", "relbias")
    assert r.returncode == 2 and "CUDA GPU" in r.stderr


def test_bad_arguments_are_rejected():
    r = _run("check", "--family", "nope")
    assert r.returncode != 0 and "invalid choice" in r.stderr


def _records(path):
    cases, power, gates = [], {}, {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r["kind"] == "case":
            cases.append((r["gate"], r["case"], r["status"], r.get("worst_ratio")))
        elif r["kind"] == "power":
            power[(r["gate"], r["perturbation"])] = r["caught"]
        elif r["kind"] == "gate":
            gates[r["gate"]] = r["status"]
    return cases, power, gates


def test_check_jobs_gives_what_one_process_gives(tmp_path):
    """--jobs 2 runs every second case in each of two processes and merges them: the same cases in the same order
    with the same results and the same perturbations caught as one process."""
    args = ["check", "--gate", "relbias/triton_decode", "--case", "relbias-decode", "--seed", "3"]
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    r1 = _run(*args, "--out", str(one))
    r2 = _run(*args, "--jobs", "2", "--out", str(two))
    assert r1.returncode == 0 and r2.returncode == 0, r1.stdout + r1.stderr + r2.stdout + r2.stderr
    c1, p1, g1 = _records(one)
    c2, p2, g2 = _records(two)
    assert len(c1) >= 2 and c1 == c2 and p1 == p2 and g1 == g2
    assert json.loads(two.read_text().splitlines()[0])["jobs"] == 2
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("attnkit-check-")]  # shard files cleaned up
    assert _run("check", "--family", "merge", "--shard", "2/2").returncode == 2


def test_merged_shards_fail_when_any_shard_fails_and_catch_when_any_catches():
    from attnkit.gate.runner import GateResult, merge_shards
    ok = dict(status="pass", ok=True, group="g")
    a = GateResult("x", "pass", cases=[dict(case="c0", **ok)], power={"p": dict(caught=False, case=None, tried=1)})
    b = GateResult("x", "pass", cases=[dict(case="c1", **ok)], power={"p": dict(caught=True, case="c1", tried=1)})
    merged, = merge_shards([[b], [a]], "smoke", {"x": ["c0", "c1"]})
    assert merged.status == "pass" and [c["case"] for c in merged.cases] == ["c0", "c1"]
    assert merged.power["p"]["caught"] and merged.power["p"]["case"] == "c1" and merged.power["p"]["tried"] == 2
    assert "draw_errors" not in merged.power["p"]
    a.power["p"].update(draw_errors=1, draw_error="c0 draw 1: OutOfMemoryError")  # a shard's failed fresh draw shows
    merged, = merge_shards([[b], [a]], "smoke", {"x": ["c0", "c1"]})
    assert merged.power["p"]["draw_errors"] == 1 and merged.power["p"]["draw_error"].startswith("c0 draw 1")
    bad = GateResult("x", "fail", cases=[dict(case="c1", status="fail", ok=False, group="g")],
                     power={"p": dict(caught=False, case=None, tried=1)})
    merged, = merge_shards([[a], [bad]], "smoke", {"x": ["c0", "c1"]})
    assert merged.status == "fail" and "1 case(s) failed" in merged.reason and "power check not caught" in merged.reason


def test_a_case_that_ran_out_of_gpu_memory_runs_again_alone(device):
    """attnkit check --jobs: a case whose record says it ran out of GPU memory (several shards sharing the GPU) runs
    again, alone, with the same seed: its record replaced and marked, its gate settled again; a case that failed on
    its answer is not run again, and a second out-of-memory would stay a failure."""
    from attnkit.gate.registry import gates
    from attnkit.gate.runner import _settle, out_of_memory, rerun_out_of_memory, run_gate
    gate = next(g for g in gates("merge") if g.available(device)[0])
    res = run_gate(gate, device, "smoke", 5)
    assert res.status == "pass" and len(res.cases) >= 2
    first, second = dict(res.cases[0]), dict(res.cases[1])
    res.cases[0].update(status="fail", ok=False, reason="OutOfMemoryError: CUDA out of memory. Tried to allocate 1 GiB")
    res.cases[1].update(status="fail", ok=False, reason="max error 3.0 > bound")
    res = _settle(res, "smoke")
    assert res.status == "fail" and out_of_memory(res.cases[0]) and not out_of_memory(res.cases[1])
    said = []
    assert rerun_out_of_memory([[res]], "smoke", 5, device, log=said.append) == 1
    assert res.cases[0]["rerun_alone"] and res.cases[0]["status"] == "pass"
    assert res.cases[0]["worst_ratio"] == first["worst_ratio"]  # the same inputs: the same seed
    assert res.cases[1]["status"] == "fail" and "rerun_alone" not in res.cases[1]
    assert res.status == "fail" and len(said) == 1 and first["case"] in said[0]
    res.cases[1] = second
    assert rerun_out_of_memory([[res]], "smoke", 5, device) == 0 and res.status == "fail"  # settled only on a rerun
    assert _settle(res, "smoke").status == "pass"


def test_merged_shards_of_a_stopped_run_are_incomplete_not_passed():
    """A shard stopped before its cases ran leaves its gates "incomplete" (its cases, and a perturbation only they
    would have caught, are unknown), "fail" where a case that did run failed; a gate whose cases all ran stays as it
    was; the same shards without a stopped one still merge to a pass."""
    from attnkit.gate.runner import GateResult, merge_shards
    ok = dict(status="pass", ok=True, group="g")
    a = GateResult("x", "pass", cases=[dict(case="c0", **ok)], power={"p": dict(caught=False, case=None, tried=1)})
    whole = GateResult("y", "pass", cases=[dict(case="d0", **ok)])
    order = {"x": ["c0", "c1"], "y": ["d0"], "z": ["e0"]}
    x, y, z = merge_shards([[a, whole]], "smoke", order, stopped={1: "running x c1"})
    assert x.status == "incomplete" and "1 case(s) not run" in x.reason and "shard(s) 1" in x.reason
    assert y.status == "pass" and z.status == "incomplete" and "1 case(s) not run" in z.reason
    bad = GateResult("x", "fail", cases=[dict(case="c0", status="fail", ok=False, group="g")])
    x, = merge_shards([[bad]], "smoke", {"x": ["c0", "c1"]}, stopped={1: "running x c1"})
    assert x.status == "fail" and "1 case(s) failed" in x.reason and "not run" in x.reason
    b = GateResult("x", "pass", cases=[dict(case="c1", **ok)], power={"p": dict(caught=True, case="c1", tried=1)})
    x, = merge_shards([[a], [b]], "smoke", {"x": ["c0", "c1"]}, stopped={})
    assert x.status == "pass"


def test_a_stopped_run_counts_its_out_of_memory_cases_as_not_run():
    """A stopped run does not rerun the cases that ran out of GPU memory beside the other shards, so they settle
    nothing: their gate is "incomplete", its reason naming them, not "fail" (no answer was wrong); a case that failed
    on its answer still fails the gate, and an out-of-memory case already run again alone stays a failure."""
    from attnkit.gate.runner import GateResult, format_table, merge_shards
    ok = dict(status="pass", ok=True, group="g", worst_ratio=0.5)
    oom = dict(status="fail", ok=False, group="g", reason="OutOfMemoryError: CUDA out of memory. Tried to allocate 4 GiB")
    order = {"x": ["c0", "c1", "c2"]}
    stop = {3: "running y d0"}
    x, = merge_shards([[GateResult("x", "fail", cases=[dict(case="c0", **ok), dict(case="c1", **oom),
                                                         dict(case="c2", **ok)])]], "smoke", order, stopped=stop)
    assert x.status == "incomplete" and "1 case(s) ran out of GPU memory" in x.reason and "failed" not in x.reason
    row, = [ln for ln in format_table([x]).splitlines() if ln.startswith("x ") and " g " in ln]
    assert "INCOMPLETE (1 not run, out of GPU memory" in row and "c1" in row and "FAIL" not in row, row
    assert row.split()[3] == "0.50"  # the worst ratio of the cases that ran, not inf
    wrong = dict(status="fail", ok=False, group="g", reason="max error 3.0 > bound")
    x, = merge_shards([[GateResult("x", "fail", cases=[dict(case="c0", **wrong), dict(case="c1", **oom)])]],
                      "smoke", order, stopped=stop)
    assert x.status == "fail" and x.reason.startswith("1 case(s) failed") and "out of GPU memory" in x.reason
    assert "1 case(s) not run" in x.reason
    again = dict(oom, rerun_alone=True)
    x, = merge_shards([[GateResult("x", "fail", cases=[dict(case="c0", **ok), dict(case="c1", **again),
                                                         dict(case="c2", **ok)])]], "smoke", order, stopped=stop)
    assert x.status == "fail" and x.reason == "1 case(s) failed"
    x, = merge_shards([[GateResult("x", "fail", cases=[dict(case="c0", **ok), dict(case="c1", **oom),
                                                         dict(case="c2", **ok)])]], "smoke", order, stopped={})
    assert x.status == "fail" and x.reason == "1 case(s) failed"  # not stopped: the rerun settled it (here: failed)
    row, = [ln for ln in format_table([x]).splitlines() if ln.startswith("x ") and " g " in ln]
    assert "FAIL" in row and "not run" not in row and row.split()[3] == "inf", row


def _gate_statuses(path):
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    return lines[0], {x["gate"]: x["status"] for x in lines if x["kind"] == "gate"}


def test_check_timeout_stops_the_shards_and_says_what_did_not_run(tmp_path):
    """--timeout: the shards still running at the deadline are stopped and named with the case each was running;
    the results say incomplete (exit status 1, never a pass), and nothing is left running."""
    out = tmp_path / "c.jsonl"
    # two gates: about twice the 15 s of work per shard on a 2-core machine (one gate alone let a shard finish in 14 s)
    r = _run("check", "--gate", "relbias/triton_decode", "--gate", "relbias/triton_decode_split", "--jobs", "2",
             "--timeout", "15", "--seed", "3", "--out", str(out))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "INCOMPLETE relbias/triton_decode" in r.stdout and "stopped (--timeout 15 s passed)" in r.stderr
    meta, status = _gate_statuses(out)
    # (a shard that finishes its last case in the second the stop gives for stacks is done, not stopped)
    assert meta["complete"] is False and meta["timeout"] == 15 and meta["stopped"]
    assert set(meta["stopped"]) <= {"0", "1"}
    # every shard is accounted for once: done before the deadline, done as it was being stopped, or stopped
    done_before = r.stderr.count("shards done: shard")
    assert (len(meta["stopped"]) + r.stderr.count("finished its cases as it was being stopped") + done_before
            == 2), r.stderr
    # (the gates run in turn: the first may have finished on every shard by the deadline, the second cannot have)
    assert status["relbias/triton_decode"] in ("pass", "incomplete") and len(status) == 2, status
    assert status["relbias/triton_decode_split"] == "incomplete", status
    assert all(d == "before its first case" or d.startswith(("running relbias/triton_decode relbias-",
                                                             "running relbias/triton_decode_split relbias-"))
               for d in meta["stopped"].values()), meta["stopped"]
    running = sum(d.startswith("running") for d in meta["stopped"].values())
    # a shard stopped in a case shows where it was: its Python stack, from inside the gate runner
    assert r.stderr.count("Python stack when stopped") == running and "wrote no Python stack" not in r.stderr, r.stderr
    assert running == 0 or "run_gate" in r.stderr, r.stderr
    assert not _processes_naming(tmp_path)
    assert _run("check", "--family", "merge", "--timeout", "0").returncode == 2
    assert _run("check", "--family", "merge", "--timeout", "5", "--shard", "0/2").returncode == 2


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("taken_by", ["main", "other"])
def test_a_stuck_process_stack_is_read_back_from_its_stack_file(tmp_path, taken_by):
    """What `attnkit check --jobs` prints for a shard it stops: the main thread's Python stack, which faulthandler wrote
    into the shard's stack file on STACK_SIGNAL, read back by _main_stack, also when another thread took the signal
    (the main thread blocks it here, as a busy torch process's signal can land on any thread); nothing for a file
    without one."""
    import signal
    import time
    from attnkit.cli import STACK_SIGNAL, _main_stack
    log = tmp_path / "shard.log"
    stack_file = tmp_path / "shard.status.stack"
    code = ("import faulthandler, os, signal, sys, threading, time\n"  # fd 2 sent elsewhere, as a compile step may
            f"faulthandler.register({int(STACK_SIGNAL)}, file=open(sys.argv[1], 'w'), all_threads=True)\n"
            "os.dup2(1, 2)\n"
            "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
            + (f"signal.pthread_sigmask(signal.SIG_BLOCK, {{{int(STACK_SIGNAL)}}})\n" if taken_by == "other" else "\n")
            + "def stuck_in_this_case():\n    print('ready', flush=True); time.sleep(60)\n"
            "stuck_in_this_case()\n")
    with log.open("w") as f:
        p = subprocess.Popen([sys.executable, "-c", code, str(stack_file)], stdout=f, stderr=subprocess.DEVNULL)
        try:
            t0 = time.time()
            while "ready" not in log.read_text() and time.time() - t0 < 30:
                time.sleep(0.05)
            p.send_signal(STACK_SIGNAL)
            t0 = time.time()
            while "stuck_in_this_case" not in stack_file.read_text() and time.time() - t0 < 10:
                time.sleep(0.05)
        finally:
            p.kill()
            p.wait()
    text = stack_file.read_text()
    main_head = [ln for ln in text.split("stuck_in_this_case")[0].splitlines() if "most recent call first" in ln][-1]
    assert main_head.startswith("Current thread") == (taken_by == "main"), text  # which thread took the signal
    stack = _main_stack(stack_file)
    assert stack.splitlines()[1].strip().startswith('File "<string>", line 7 in stuck_in_this_case'), stack
    assert "<module>" in stack and "threading" not in stack, stack  # the main thread's stack alone
    (tmp_path / "plain.log").write_text("no stack here\n")
    assert _main_stack(tmp_path / "plain.log") == "" and _main_stack(tmp_path / "missing.log") == ""


def test_check_jobs_progress_line_counts_cases_and_names_the_longest_running(tmp_path):
    """The periodic progress line of --jobs: a finished shard counts all its cases, a running one the cases its status
    file says it finished; the running case started longest ago is named (a hung case shows there while it runs)."""
    import time
    from attnkit.cli import _progress_line
    now = time.time()
    (tmp_path / "shard-1.status").write_text(json.dumps({"done": 2, "gate": "g/a", "case": "c-7", "since": now - 50}))
    (tmp_path / "shard-2.status").write_text(json.dumps({"done": 4, "gate": "g/a", "case": "c-9", "since": now - 5}))
    line = _progress_line(tmp_path, {1: None, 2: None, 3: None}, [3, 5, 6, 2], now - 60)
    assert "9/16 cases done, 3 shard(s) running" in line, line  # 3 (finished) + 2 + 4 + 0 (no status yet)
    assert "longest on one case: shard 1, g/a c-7 for 50 s" in line, line
    (tmp_path / "shard-2.status").write_text("{cut")  # a torn file reads as no status, never an error
    assert "7/16 cases done" in _progress_line(tmp_path, {1: None, 2: None}, [3, 5, 6, 2], now - 60)  # 3 + 2 + 2


def _processes_naming(path):
    """Live processes whose command line names `path` (Linux /proc)."""
    found = []
    for d in pathlib.Path("/proc").iterdir():
        try:
            if d.name.isdigit() and str(path) in (d / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(d.name))
        except OSError:
            pass
    return found


@pytest.mark.skipif(not pathlib.Path("/proc/self/cmdline").exists(), reason="needs Linux /proc")
def test_check_jobs_terminated_stops_its_shards_and_writes_what_it_has(tmp_path):
    """SIGTERM to `attnkit check --jobs` (as `timeout` sends): its shard processes are stopped too, not left running
    orphaned, and the results written say incomplete."""
    import signal
    import time
    out = tmp_path / "c.jsonl"
    p = subprocess.Popen([sys.executable, "-m", "attnkit.cli", "check", "--gate", "relbias/triton_decode", "--jobs",
                          "2", "--seed", "3", "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    t0 = time.time()
    while len(_processes_naming(tmp_path)) < 3 and time.time() - t0 < 60:  # the parent and its two shards
        time.sleep(0.2)
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    so, se = p.communicate(timeout=60)
    assert p.returncode == 1, so + se
    assert "stopped (signal 15)" in se and "INCOMPLETE relbias/triton_decode" in so
    meta, status = _gate_statuses(out)
    assert meta["complete"] is False and status == {"relbias/triton_decode": "incomplete"}
    assert not _processes_naming(tmp_path)


def test_source_digest_follows_the_source_and_nothing_else(tmp_path):
    """env.source_digest: the same for the same files wherever they lie, different when a byte, a file name or the
    set of files changes; the environment record carries the package's."""
    import shutil

    from attnkit import env
    pkg = pathlib.Path(env.__file__).resolve().parent
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(pkg, a, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(pkg, b, ignore=shutil.ignore_patterns("__pycache__"))
    assert env.source_digest(a) == env.source_digest(b) == env.source_digest()
    assert env.record()["src_digest"] == env.source_digest()
    f = b / "relbias" / "config.py"
    f.write_bytes(f.read_bytes() + b" ")
    assert env.source_digest(b) != env.source_digest(a)
    f.write_bytes(f.read_bytes()[:-1])
    assert env.source_digest(b) == env.source_digest(a)
    f.rename(b / "relbias" / "config2.py")
    assert env.source_digest(b) != env.source_digest(a)
    (b / "relbias" / "config2.py").rename(f)
    (b / "extra.py").write_text("")
    assert env.source_digest(b) != env.source_digest(a)


def test_write_whole_replaces_or_keeps_never_cuts(tmp_path, monkeypatch):
    """The results, artifacts and status files are written whole: the new text replaces the old at once, and a write
    that fails half way (a run stopped mid-write) leaves the old text, not a cut file."""
    from attnkit._files import write_whole
    p = tmp_path / "r.jsonl"
    write_whole(p, "old\n")
    write_whole(p, "new\n")
    assert p.read_text() == "new\n" and [x.name for x in tmp_path.iterdir()] == ["r.jsonl"]

    def cut(self, text):
        pathlib.Path.open(self, "w").write(text[:2])
        raise KeyboardInterrupt
    monkeypatch.setattr(pathlib.Path, "write_text", cut)
    with pytest.raises(KeyboardInterrupt):
        write_whole(p, "newer\n")
    assert p.read_text() == "new\n"
