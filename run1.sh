export ATTNKIT_GIT_SHA=e540ca4 PYTHONPATH=src
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m attnkit.cli check --tier full --gate relbias/flex_score_mod --jobs 15 --timeout 190 --seed 20261204 --out $OUT/check-relbias-flex.jsonl > $OUT/flex.log 2>&1
grep -v "^\[" $OUT/flex.log | tail -45
python3 -m attnkit.cli check --tier full --gate relbias/triton_fwd --gate relbias/triton_fwd_masked --gate relbias/triton_fwd_split --gate relbias/triton_decode --gate relbias/triton_decode_split --gate relbias/triton_decode_page_tiles --gate relbias/triton_decode_fast --gate relbias/triton_fp8_asm --jobs 15 --timeout 370 --seed 20261204 --out $OUT/check-relbias-triton.jsonl > $OUT/triton.log 2>&1
grep -v "^\[" $OUT/triton.log | grep -E "passed|FAIL|INCOMPLETE|stopped|power|relbias/" | tail -40
