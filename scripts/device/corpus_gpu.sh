#!/usr/bin/env bash
# The corpus of LLM-idiomatic solutions on the GPU (tests/evaluate/test_corpus.py), one shard per
# device call: each CUDA file builds its own extension (~40 s), so they run in three shards.
#
#   bash scripts/device/corpus_gpu.sh triton   the 21 Triton files          (~3 min on an H200)
#   bash scripts/device/corpus_gpu.sh 1/3      7-8 of the 23 CUDA files     (~6 min each; then 2/3, 3/3)
set -uo pipefail
# the dependencies gpu_run.sh installs (its first lines), where a call has installed them
if [ ! -d /opt/htam-site ] && ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target /opt/htam-site .whl/*.whl || exit 1
fi
export PYTHONPATH=/opt/htam-site:$PWD PYTHONUNBUFFERED=1 HTAM_CORPUS_SHARD="$1"
export HTAM_CACHE_DIR=${HTAM_CACHE_DIR:-$PWD/.gpu/cache}
log="${OUT:-/tmp}/corpus_gpu_${1//\//_of_}.log"
timeout -s KILL 570 python3 -m pytest -q -m gpu tests/evaluate/test_corpus.py -p no:cacheprovider \
    --durations=0 >"$log" 2>&1
echo "pytest exit $?"
tail -60 "$log"
