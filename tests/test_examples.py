"""examples/serving_layers.py: the engine-style calls of each family run and match the oracle (and, on a GPU, their
CUDA-graph replays give the eager bits); its check fails on a wrong call."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import torch

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "serving_layers.py"


def test_the_serving_example_runs_and_matches_the_oracle():
    env = dict(os.environ, PYTHONPATH=str(EXAMPLE.parents[1] / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=900, env=env)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    lines = r.stdout.strip().splitlines()
    assert [ln.split()[0] for ln in lines] == ["sparse_int8", "mqa_decode", "relbias"], r.stdout
    assert all(ln.endswith("ok") for ln in lines), r.stdout
    graph = "same bits" if torch.cuda.is_available() else "not run (no GPU)"
    assert all(graph in ln for ln in lines), r.stdout


def test_the_serving_examples_check_fails_on_a_wrong_call(monkeypatch):
    """A value scale 5 % off moves the sparse_int8 call past the example's bound."""
    spec = importlib.util.spec_from_file_location("serving_layers", EXAMPLE)
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    right = ex.sparse_int8_attention
    monkeypatch.setattr(ex, "sparse_int8_attention", lambda q, k, v, ks, vs, ix: right(q, k, v, ks, vs * 1.05, ix))
    monkeypatch.setattr(ex, "replayed", lambda call, inputs: None)
    err, _ = ex.sparse_int8_decode(torch.Generator().manual_seed(0))
    assert err > ex.BOUND
