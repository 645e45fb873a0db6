"""The sm_90 compile of the sparse_int8 Gluon kernel with and without gluon_v_regs (compiled on any machine, no GPU
needed): registers, stack bytes and shared memory per program, and the query-digit loop's length, shared-memory
instructions and barriers (compile_check.digit_loop_shared_ops), written as JSON to the path given.

    python benchmarks/experiments/sparse_int8_v_regs_sass.py OUT.json
"""

import json
import subprocess
import sys

from attnkit.testing import compile_check as cc

NAMES = ["sparse_int8_gluon D256 direct1", "sparse_int8_gluon D256 direct1 ids_early v_regs",
         "sparse_int8_gluon D256 direct0 ids_early", "sparse_int8_gluon D256 direct0 ids_early v_regs",
         "sparse_int8_gluon D128 direct0", "sparse_int8_gluon D128 direct0 ids_early v_regs"]

if __name__ == "__main__":
    rows = []
    for name in NAMES:
        k, _ = cc.compile_named(name)
        rows.append(dict(name=name, **cc.resource_usage(k.asm["cubin"]), shared_bytes=k.metadata.shared,
                         digit_loop=cc.digit_loop_shared_ops(name)))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    import triton
    out = dict(what="sm_90 compile of the sparse_int8 Gluon kernel, gluon_v_regs on and off", arch="sm_90",
               triton=triton.__version__, commit=commit, rows=rows)
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)
    for r in rows:
        print(r["name"], r["regs"], r["stack_bytes"], r["shared_bytes"], r["digit_loop"])
