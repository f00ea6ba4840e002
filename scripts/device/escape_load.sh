#!/usr/bin/env bash
# The escape charge on honest tiny calls (issue 39): the offline Triton baselines of TASKs
# judged by one evaluator on a quiet GPU, then by LOAD evaluators at once on the same GPU (the
# mechanism experiment shared one H100 between 6), each task REPEAT times per evaluator. Prints
# how many were ok, how many of those flagged an escape within the clock's resolution, and how
# many were charged with escaped work; logs in $OUT/quiet.log and $OUT/load*.log.
#
#   [LOAD=6] [REPEAT=3] bash scripts/device/escape_load.sh SECONDS TASK...
#   e.g. bash scripts/device/escape_load.sh 420 robust-kbench/mnist_conv_relu_pool \
#            robust-kbench/mnist_linear_relu
#
# Needs .whl/ and .kb/ carried, as scripts/device/session.sh does.
set -uo pipefail
seconds=$1
shift
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /opt/htam-site .whl/*.whl >/dev/null 2>&1 || { echo "wheels failed"; exit 1; }
export PYTHONPATH=/opt/htam-site:$PWD PYTHONUNBUFFERED=1 HTAM_CACHE_DIR=$PWD/.gpu/cache
start=$(date +%s)
# alone first: the quiet figures, and the device's peaks cached before the evaluators share them
timeout -s KILL $((seconds / 3)) python3 scripts/device/gpu_reference_probe.py \
    --repeat "${REPEAT:-3}" "$@" >"$OUT/quiet.log" 2>&1
left=$((seconds - ($(date +%s) - start) - 10))
for i in $(seq 1 "${LOAD:-6}"); do
    timeout -s KILL "$left" python3 scripts/device/gpu_reference_probe.py \
        --repeat "${REPEAT:-3}" "$@" >"$OUT/load$i.log" 2>&1 &
done
wait
summary() {  # LOGS...: verdict lines, then the flags and charges under them
    local ok rejected flagged charged
    ok=$(cat "$@" | grep -c '^[^ ]* ok ')
    rejected=$(cat "$@" | grep -c '^[^ ]* rejected ')
    flagged=$(cat "$@" | grep -c "within the judge's clock resolution here (slack")
    charged=$(cat "$@" | grep -c '^   work escaped the timed stream')
    echo "ok $ok (an escape within the clock's resolution flagged: $flagged), rejected" \
        "$rejected (escaped work charged: $charged)"
}
echo "quiet: $(summary "$OUT/quiet.log")"
echo "under load (${LOAD:-6} evaluators): $(summary "$OUT"/load*.log)"
grep -h "escaped\|clock resolution here (slack" "$OUT"/quiet.log "$OUT"/load*.log | sort | uniq -c \
    | sort -rn | head -8 | cut -c1-400
