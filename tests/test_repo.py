"""Repository invariants: the README's commands, CI, the status registry."""

from pathlib import Path

from attnkit.gate.registry import gates
from attnkit.status import KERNEL_PATHS

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands():
    text = (ROOT / "README.md").read_text()
    blocks = text.split("```bash\n")[1:3]
    return [b.split("```")[0].strip() for b in blocks]


def test_readme_starts_with_the_two_commands():
    main, tests = _readme_commands()
    assert main.endswith("attnkit check") and "pip install torch==2.13.0" in main
    assert "pytest" in tests and "TRITON_INTERPRET=1" in tests


def test_ci_runs_exactly_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert _readme_commands()[1] in ci


def test_every_implemented_kernel_path_has_a_kernel_gate():
    for fam, paths in KERNEL_PATHS.items():
        if any(status == "implemented" for _, status in paths):
            assert any(g.family == fam and g.kind == "kernel" for g in gates()), fam


def _collected(env_shard):
    import os
    import subprocess
    import sys
    env = dict(os.environ)
    env.pop("ATTNKIT_TEST_SHARD", None)
    if env_shard is not None:
        env["ATTNKIT_TEST_SHARD"] = env_shard
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                        "tests/test_options.py"], cwd=ROOT, env=env, capture_output=True, text=True)
    return r.returncode, [ln for ln in r.stdout.splitlines() if "::" in ln], r.stdout + r.stderr


def test_test_shards_partition_a_file():
    # gpu_tier.sh tests-par runs a file as n processes, each with ATTNKIT_TEST_SHARD=i/n: together they must run
    # every test once
    rc, whole, _ = _collected(None)
    assert rc == 0 and len(whole) > 3
    parts = [_collected(f"{i}/3")[1] for i in range(3)]
    assert sorted(sum(parts, [])) == sorted(whole) and all(parts)
    rc, _, out = _collected("3/3")
    assert rc != 0 and "ATTNKIT_TEST_SHARD" in out


# benchmarks/experiments' scripts by what they need: a GPU (each says so and exits where there is none) or not
GPU_ONLY_EXPERIMENTS = {"device_guard_cost", "flex_score_mod_variants", "host_overhead", "launch_floor",
                        "mqa_cluster_occupancy",
                        "mqa_step_parts", "mqa_t1_lists", "relbias_past_rows",
                        "sparse_int8_decode_parts", "sparse_int8_gather_floor",
                        "sync_cost"}
CPU_EXPERIMENTS = {"gluon_mqa_decode_once_sm90", "gluon_sparse_int8_tile_sm90", "gluon_ws_sm90_compile",
                   "ncu_source_summary", "sparse_int8_rounding_floor", "sparse_int8_v_regs_sass", "wrapper_overhead",
                   "stress_under_load"}  # stress: --device cpu (its own tests)


def test_every_experiment_script_is_classified():
    scripts = {p.stem for p in (ROOT / "benchmarks" / "experiments").glob("*.py")}
    assert scripts == GPU_ONLY_EXPERIMENTS | CPU_EXPERIMENTS, scripts ^ (GPU_ONLY_EXPERIMENTS | CPU_EXPERIMENTS)


def test_gpu_only_experiments_say_so_without_a_gpu(tmp_path):
    """Without a CUDA device each GPU-only experiment exits non-zero with a one-line reason, not a traceback from
    inside torch, and writes no artifact."""
    import subprocess
    import sys

    import pytest
    import torch
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is here")
    for name in sorted(GPU_ONLY_EXPERIMENTS):
        out = tmp_path / f"{name}.json"
        r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "experiments" / f"{name}.py"), str(out)],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode != 0 and "no CUDA device here" in r.stderr, (name, r.stderr[-2000:])
        assert "Traceback" not in r.stderr and not out.exists(), (name, r.stderr[-2000:])
