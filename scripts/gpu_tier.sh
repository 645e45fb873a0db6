#!/usr/bin/env bash
# The GPU tier in one run: CUDA tests, `attnkit check --tier full`, and the benchmark suite.
# Usage: scripts/gpu_tier.sh OUTDIR [FAMILY...]   (default families: relbias sparse_int8 mqa_decode)
# Uses the torch and triton already installed on the machine (nothing is installed or replaced).
set -uo pipefail
OUTDIR=${1:?usage: scripts/gpu_tier.sh OUTDIR [FAMILY...]}
shift
FAMILIES=${*:-relbias sparse_int8 mqa_decode}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
status=0
$PY -m attnkit.cli env --json > "$OUTDIR/env.json" || status=1
echo "== pytest (GPU)"
$PY -m pytest -q -p no:cacheprovider tests > "$OUTDIR/pytest.log" 2>&1 || status=1
tail -3 "$OUTDIR/pytest.log"
echo "== attnkit check --tier full"
$PY -m attnkit.cli check --tier full --out "$OUTDIR/check-full.jsonl" > "$OUTDIR/check.log" 2>&1 || status=1
grep -vE "^\s*$" "$OUTDIR/check.log" | grep -vE "it/s|case/s" | tail -60
for fam in $FAMILIES; do
  if $PY -c "import sys; from attnkit.testing import shapes; sys.exit(0 if shapes.cases('$fam', tier=shapes.BENCH) else 1)"; then
    echo "== attnkit bench --family $fam"
    $PY -m attnkit.cli bench --family "$fam" --out "$OUTDIR/$fam-bench.json" 2> "$OUTDIR/$fam-bench.log" || status=1
  fi
done
exit $status
