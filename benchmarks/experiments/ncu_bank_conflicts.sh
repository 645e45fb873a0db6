#!/usr/bin/env bash
# Nsight Compute source views (per SASS instruction: stall samples, shared-memory wavefronts against the ideal) of the
# mqa_decode swap-AB and head-padded attention kernels and the sparse_int8 attention kernel as dispatched, one launch
# each (the third of `attnkit profile --iters 3`), to find shared-memory bank conflicts; summarize each CSV with
# benchmarks/experiments/ncu_source_summary.py. Usage: benchmarks/experiments/ncu_bank_conflicts.sh OUTDIR
set -uo pipefail
OUTDIR=${1:?usage: ncu_bank_conflicts.sh OUTDIR}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
run() {  # family provider case kernel-regex tag
  ncu --kernel-name regex:"$4" --launch-skip 2 --launch-count 1 --section SourceCounters --page source \
    --print-source sass --csv python -m attnkit.cli profile --family "$1" --provider "$2" --case "$3" --iters 3 \
    --out "$OUTDIR/profile-$5.json" > "$OUTDIR/ncu-source-$5.csv" 2> "$OUTDIR/ncu-$5.err"
  python benchmarks/experiments/ncu_source_summary.py "$OUTDIR/ncu-source-$5.csv" 6 | tail -8
}
run mqa_decode attnkit_swapab mqa_decode-step-h16-t1-nvfp4 mqa_swapab mqa-swapab-h16-t1-nvfp4
run mqa_decode attnkit_swapab mqa_decode-step-h32-t4-fp8 mqa_swapab mqa-swapab-h32-t4-fp8
run mqa_decode attnkit_headpad mqa_decode-step-h16-t1-nvfp4 mqa_headpad mqa-headpad-h16-t1-nvfp4
run sparse_int8 attnkit sparse_int8-model-decode-r1-c32k "sparse_int8_(gluon_)?kernel" sparse-decode-r1
run sparse_int8 attnkit sparse_int8-model-prefill-r2048-c8k "sparse_int8_(gluon_)?kernel" sparse-prefill-r2048
