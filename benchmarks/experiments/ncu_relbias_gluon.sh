#!/usr/bin/env bash
# Nsight Compute on the H200: the relbias Gluon kernels as dispatched, one launch each (the third of the profile
# run): the fp8 decode kernel on fp8 decode b32 x 8K (the source view: per SASS instruction, warp stall samples by
# reason; and its sections: occupancy, warp states, scheduler, memory, beside the bf16 decode kernel's), and the
# warp-specialized forward kernel on prefill 8K global (the source view). ncu serializes and replays kernels, so its
# durations are not the benchmark's.
# Usage: benchmarks/experiments/ncu_relbias_gluon.sh OUTDIR
set -uo pipefail
OUTDIR=${1:?usage: ncu_relbias_fp8_decode.sh OUTDIR}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
PROFILE="python -m attnkit.cli profile --family relbias --provider attnkit_fwd --iters 3"
ncu --kernel-name regex:"relbias_decode_gluon" --launch-skip 2 --launch-count 1 \
  --section SourceCounters --page source --print-source sass --csv \
  $PROFILE --case relbias-model-fp8-decode-b32-8k --out "$OUTDIR/profile-source.json" \
  > "$OUTDIR/ncu-source-fp8-decode-b32-8k.csv" 2> "$OUTDIR/ncu-source.err"
for c in relbias-model-fp8-decode-b32-8k relbias-model-decode-b32-8k; do
  ncu --kernel-name regex:"relbias_decode" --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
    --section LaunchStats --section MemoryWorkloadAnalysis --csv --page details \
    $PROFILE --case "$c" --out "$OUTDIR/profile-$c.json" > "$OUTDIR/ncu-$c.csv" 2> "$OUTDIR/ncu-$c.err"
done
ncu --kernel-name regex:"relbias_fwd_gluon_ws" --launch-skip 2 --launch-count 1 \
  --section SourceCounters --page source --print-source sass --csv \
  $PROFILE --case relbias-model-prefill-8k-global --out "$OUTDIR/profile-prefill-source.json" \
  > "$OUTDIR/ncu-source-prefill-8k-global.csv" 2> "$OUTDIR/ncu-source-prefill.err"
ls -la "$OUTDIR"
