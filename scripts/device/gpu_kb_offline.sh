#!/usr/bin/env bash
# The offline proposer's baseline candidate of every KernelBench task it matches (levels 1-3 by
# default), evaluated at the real size on every visible GPU at once (one shard of the tasks per
# GPU, scripts/device/gpu_offline_check.py), for at most SECONDS; rows in $OUT/offline_check.jsonl,
# tables (per level, per family, every failure) in $OUT/offline_check.txt.
#
#   [KB_LEVELS=1,2,3] [KB_TASKS=GLOB,...] bash scripts/device/gpu_kb_offline.sh SECONDS
#
# Needs .whl/ (htam's wheel, and einops' for level 3's two Mamba2 tasks) and .kb/kernelbench.
set -uo pipefail
seconds=${1:-480}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /opt/htam-site .whl/*.whl || exit 1
export PYTHONPATH=/opt/htam-site:$PWD PYTHONUNBUFFERED=1 KB_LEVELS=${KB_LEVELS:-1,2,3}
export HTAM_CACHE_DIR=$PWD/.gpu/cache
gpus=$(nvidia-smi -L | wc -l)
echo "$gpus GPUs, levels $KB_LEVELS, $seconds s"
for i in $(seq 0 $((gpus - 1))); do
    # the shard stops starting tasks 60 s before the end (a task at the real size takes ~10-40 s)
    CUDA_VISIBLE_DEVICES=$i SHARD=$i/$gpus timeout -s KILL "$seconds" \
        python3 scripts/device/gpu_offline_check.py "$OUT/shard$i" $((seconds - 60)) \
        >"$OUT/shard$i.log" 2>&1 &
done
wait
cat "$OUT"/shard*/offline_check.jsonl >"$OUT/offline_check.jsonl"
python3 scripts/device/gpu_offline_check.py --summary "$OUT/offline_check.jsonl" \
    | tee "$OUT/offline_check.txt" | head -12
