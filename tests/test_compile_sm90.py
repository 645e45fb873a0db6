"""Every kernel, in the variants its dispatcher launches, compiles for sm_90 (Hopper) here, without a GPU:
Triton lowers it and the ptxas in Triton's package assembles a cubin. Catches what the interpreter lets
through. Run in a subprocess because the interpreter, set for the rest of the suite, replaces kernels."""

import json
import os
import subprocess
import sys


def test_all_kernels_compile_for_sm90():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    code = ("import json; from attnkit.testing.compile_check import compile_all; "
            "print(json.dumps(compile_all(log=lambda *a: None)))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    results = json.loads(r.stdout.strip().splitlines()[-1])
    names = {x["name"].split()[0] for x in results}
    assert {"merge", "relbias_fwd", "relbias_decode", "relbias_write", "sparse_int8", "mqa_write", "mqa_headpad",
            "mqa_swapab", "mqa_mxfp8_out"} <= names
    assert all(x["cubin_bytes"] > 0 for x in results)
    # compiled as launched (16-byte aligned pointers and strides): the forward kernel's K and V loads are
    # software-pipelined into shared memory (without the specialization nothing was, and registers differed)
    fwd = [x for x in results if x["name"].startswith("relbias_fwd D128 paged0") and "bm64" in x["name"]]
    assert fwd and all(x["shared"] >= 64 * 1024 for x in fwd), fwd


def test_sass_census_counts_a_loop_and_its_tensor_core_instructions():
    """compile_check --census: the sparse_int8 split kernel (D 64) has a candidate loop whose SASS holds the tile's
    MMAs (two score products and two value products per tile, the hi / lo splits), and no loop is invented where a
    kernel has none (the record writer)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    code = ("import json; from attnkit.testing.compile_check import compile_all; "
            "print(json.dumps(compile_all(names=['sparse_int8 D64', 'mqa_write nvfp40'], log=lambda *a: None, "
            "census=True)))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    results = {x["name"].split()[0]: x for x in json.loads(r.stdout.strip().splitlines()[-1])}
    loops = results["sparse_int8"]["loops"]
    assert loops and all(lp["instructions"] >= 100 for lp in loops)
    top = dict(loops[0]["top"])
    assert top.get("HMMA", 0) > 0, top
    assert results["mqa_write"]["loops"] == []
