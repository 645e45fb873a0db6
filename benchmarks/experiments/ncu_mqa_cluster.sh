#!/usr/bin/env bash
# Nsight Compute source views of the mqa_decode swap-AB (Gluon) attention kernel as dispatched at one token, where the
# cluster merge runs (16 / 32 heads x fp8 / nvfp4): per SASS instruction the warp stall samples, summarized per
# stretch between the cluster barriers (the attention and the partial stores, the barrier, the merge after it) by
# benchmarks/experiments/ncu_source_summary.py. One launch each (the third of `attnkit profile --iters 3`), caches
# flushed before it (ncu's default), so the shares are of a cold launch. Usage: ncu_mqa_cluster.sh OUTDIR
# (CASES: the step cases' suffixes, default the four below; NCU_EXTRA: more ncu options, e.g. "--cache-control none
# --warp-sampling-interval 0" for a launch after warm ones, sampled every 32 cycles)
set -uo pipefail
OUTDIR=${1:?usage: ncu_mqa_cluster.sh OUTDIR}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
for c in ${CASES:-h16-t1-nvfp4 h32-t1-nvfp4 h16-t1-fp8 h32-t2-fp8}; do
  ncu --kernel-name regex:mqa_swapab --launch-skip 2 --launch-count 1 --section SourceCounters ${NCU_EXTRA:-} \
    --metrics gpu__time_duration.sum --page source --print-source sass --csv \
    python -m attnkit.cli profile --family mqa_decode --provider attnkit_swapab --case "mqa_decode-step-$c" --iters 3 \
    --out "$OUTDIR/profile-$c.json" > "$OUTDIR/ncu-source-$c.csv" 2> "$OUTDIR/ncu-$c.err"
  echo "== $c"
  python benchmarks/experiments/ncu_source_summary.py "$OUTDIR/ncu-source-$c.csv" 12 | head -20
done
