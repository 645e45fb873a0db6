#!/usr/bin/env bash
# Nsight Compute on the H200: the swap-AB (Gluon) attention kernel and the finishing merge at 1-8 tokens, each kernel
# timed alone (ncu serializes launches, so programmatic dependent launch overlaps nothing here), boost clocks kept,
# plus the warp stall reasons of the attention kernel. Usage: benchmarks/experiments/ncu_mqa_small_t.sh OUTDIR
# (CASES: the step cases' suffixes, default the eight below; e.g. CASES="h16-t16-fp8 h16-t16-nvfp4")
set -uo pipefail
OUTDIR=${1:?usage: ncu_mqa_small_t.sh OUTDIR}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
M=gpu__time_duration.sum,sm__cycles_elapsed.max,smsp__inst_executed.sum,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio
cases=""
for c in ${CASES:-h16-t1-fp8 h16-t2-fp8 h16-t4-fp8 h16-t8-fp8 h16-t1-nvfp4 h16-t4-nvfp4 h32-t1-nvfp4 h32-t4-nvfp4}; do
  cases="$cases --case mqa_decode-step-$c"
done
# every attention and merge launch of the profile run (two warm-up calls, then --iters calls, per provider and case)
ncu --clock-control none --kernel-name regex:"mqa_(swapab|headpad|merge)" --metrics "$M" --csv --page raw \
  python -m attnkit.cli profile --family mqa_decode --provider attnkit_swapab --provider attnkit_headpad $cases \
  --iters 2 --out "$OUTDIR/profile.json" > "$OUTDIR/ncu.csv" 2> "$OUTDIR/ncu.err"
