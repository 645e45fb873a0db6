"""The console script end to end (subprocesses, as a user runs it)."""

import json
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
