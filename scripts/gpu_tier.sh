#!/usr/bin/env bash
# The GPU tier: CUDA tests, `attnkit check --tier full`, and the benchmark suite, into OUTDIR.
# Usage: scripts/gpu_tier.sh OUTDIR [STAGE...]
#   stages: env tests tests-par tests-k check check-ours check-ours-par check-<family> gate-<gate> bench-<family>
#           sweep-<name> stress   (stress: benchmarks/experiments/stress_under_load.py's default jobs, several
#           processes side by side for STRESS_SECONDS, default 40; tests-k: the tests selected by pytest -k
#           "$TESTS_K"; gate-<gate>: one gate, its "/"
#           written as ":", e.g. gate-relbias:gluon_fwd)
#           (-par: the same work in parallel processes, compile-bound on the CPU; not for timing; gate-* and
#           check-<family> run the cases in JOBS processes, default 8: attnkit check --jobs; TIMEOUT=seconds stops
#           them there, writing what finished and naming what did not: attnkit check --timeout)
#           (default: env tests check bench-relbias bench-sparse_int8 bench-mqa_decode); run stages in separate invocations when one command
#           has a time limit.
# Uses the torch and triton already installed on the machine (nothing is installed or replaced).
set -uo pipefail
OUTDIR=${1:?usage: scripts/gpu_tier.sh OUTDIR [STAGE...]}
shift
STAGES=${*:-env tests check bench-relbias bench-sparse_int8 bench-mqa_decode}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
status=0
for stage in $STAGES; do
  echo "== $stage"
  case "$stage" in
    env) $PY -m attnkit.cli env --json > "$OUTDIR/env.json" || status=1 ;;
    tests)
      $PY -m pytest -q -p no:cacheprovider tests > "$OUTDIR/pytest.log" 2>&1 || status=1
      tail -3 "$OUTDIR/pytest.log" ;;
    tests-par)  # the test files in groups side by side (compile-bound, so they overlap on a many-core host);
      # the last group is every test file the others do not name, so no file is left out. tests/test_mqa_decode.py
      # runs as MQA_SHARDS processes (default 3; ATTNKIT_TEST_SHARD in tests/conftest.py), each every n-th of its
      # tests; tests/test_relbias_gluon.py likewise as RG_SHARDS processes (default 1). NO_COMPILE=1 leaves out
      # tests/test_compile_sm90.py (compile-only: it runs on the CPU in CI, and on a GPU host it outlasts a 10-minute
      # call beside the rest); the log says so.
      shards=${MQA_SHARDS:-3}
      rg_shards=${RG_SHARDS:-1}
      groups=("tests/test_relbias.py"
              "tests/test_relbias_gluon_decode.py tests/test_relbias_writer.py tests/test_relbias_clients.py tests/test_relbias_ws_protocol.py"
              "tests/test_sparse_int8.py tests/test_sparse_int8_corner_cases.py tests/test_splitk.py"
              "tests/test_mqa_writer.py tests/test_tensor_parallel.py tests/test_fp8_rounding.py tests/test_properties.py")
      [ "${NO_COMPILE:-0}" = 1 ] || groups+=("tests/test_compile_sm90.py")
      named=" ${groups[*]} tests/test_mqa_decode.py tests/test_relbias_gluon.py tests/test_compile_sm90.py "
      rest=""
      for f in tests/test_*.py; do case "$named" in *" $f "*) ;; *) rest="$rest $f" ;; esac; done
      groups+=("$rest")
      [ "${NO_COMPILE:-0}" = 1 ] &&
        echo "tests/test_compile_sm90.py left out (NO_COMPILE=1)" | tee "$OUTDIR/pytest-skipped-files.txt"
      i=0; pids=()
      for grp in "${groups[@]}"; do
        $PY -m pytest -q -p no:cacheprovider $grp > "$OUTDIR/pytest-$i.log" 2>&1 & pids+=($!); i=$((i + 1))
      done
      for ((s = 0; s < shards; s++)); do
        ATTNKIT_TEST_SHARD="$s/$shards" $PY -m pytest -q -p no:cacheprovider tests/test_mqa_decode.py \
          > "$OUTDIR/pytest-mqa-$s.log" 2>&1 & pids+=($!)
      done
      for ((s = 0; s < rg_shards; s++)); do
        ATTNKIT_TEST_SHARD="$s/$rg_shards" $PY -m pytest -q -p no:cacheprovider tests/test_relbias_gluon.py \
          > "$OUTDIR/pytest-relbias-gluon-$s.log" 2>&1 & pids+=($!)
      done
      for p in "${pids[@]}"; do wait "$p" || status=1; done
      tail -n 1 "$OUTDIR"/pytest-*.log ;;
    tests-k)
      $PY -m pytest -q -p no:cacheprovider tests -k "${TESTS_K:?set TESTS_K}" > "$OUTDIR/pytest-k.log" 2>&1 || status=1
      tail -5 "$OUTDIR/pytest-k.log" ;;
    gate-*)
      gate=$(echo "${stage#gate-}" | tr ':' '/')
      tag=$(echo "${stage#gate-}" | tr ':' '_')
      $PY -m attnkit.cli check --tier full --gate "$gate" --jobs "${JOBS:-8}" ${TIMEOUT:+--timeout "$TIMEOUT"} \
        --out "$OUTDIR/gate-$tag.jsonl" \
        > "$OUTDIR/gate-$tag.log" 2>&1 || status=1
      tail -8 "$OUTDIR/gate-$tag.log" ;;
    check-ours-par)  # our kernels' gates (no peers), every family, the cases in JOBS processes (default 8)
      $PY -m attnkit.cli check --tier full --kernels-only --jobs "${JOBS:-8}" ${TIMEOUT:+--timeout "$TIMEOUT"} \
        --out "$OUTDIR/check-ours-par.jsonl" > "$OUTDIR/check-ours-par.log" 2>&1 || status=1
      grep -E "passed|FAIL|INCOMPLETE|stopped" "$OUTDIR/check-ours-par.log" | tail -20 ;;
    check)
      $PY -m attnkit.cli check --tier full --out "$OUTDIR/check-full.jsonl" > "$OUTDIR/check.log" 2>"$OUTDIR/check.err" || status=1
      tail -60 "$OUTDIR/check.log" ;;
    check-ours)
      $PY -m attnkit.cli check --tier full --kernels-only --out "$OUTDIR/check-ours.jsonl" > "$OUTDIR/check-ours.log" 2>&1 || status=1
      grep -E "power|passed|FAIL" "$OUTDIR/check-ours.log" | tail -40 ;;
    check-*)
      fam=${stage#check-}
      $PY -m attnkit.cli check --tier full --family "$fam" --jobs "${JOBS:-8}" ${TIMEOUT:+--timeout "$TIMEOUT"} \
        --out "$OUTDIR/check-$fam.jsonl" \
        > "$OUTDIR/check-$fam.log" 2>&1 || status=1
      tail -30 "$OUTDIR/check-$fam.log" ;;
    bench-*)
      fam=${stage#bench-}
      if $PY -c "import sys; from attnkit.testing import shapes; sys.exit(0 if shapes.cases('$fam', tier=shapes.BENCH) else 1)"; then
        $PY -m attnkit.cli bench --family "$fam" --out "$OUTDIR/$fam-bench.json" 2> "$OUTDIR/$fam-bench.log" | tail -40 || status=1
      else
        echo "no bench cases registered for $fam"
      fi ;;
    sweep-*)
      name=${stage#sweep-}
      fam=$($PY -c "from attnkit.bench.sweeps import SWEEPS; print(SWEEPS['$name'].family)") || { status=2; continue; }
      $PY -m attnkit.cli bench --family "$fam" --sweep "$name" --rounds "${ROUNDS:-7}" --out "$OUTDIR/sweep-$name.json" \
        2> "$OUTDIR/sweep-$name.log" | tail -60 || status=1 ;;
    stress)
      $PY benchmarks/experiments/stress_under_load.py "$OUTDIR/stress.json" --seconds "${STRESS_SECONDS:-40}" \
        2> "$OUTDIR/stress.log" || status=1 ;;
    *) echo "unknown stage $stage"; status=2 ;;
  esac
done
exit $status
