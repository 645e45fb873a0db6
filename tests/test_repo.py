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
