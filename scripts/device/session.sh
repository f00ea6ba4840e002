#!/usr/bin/env bash
# One device call made of phases, each under its own time limit, logs and tables under $OUT:
#
#   bash scripts/device/session.sh PHASE:SECONDS ...
#
# phases: doctor, corpus (every CUDA and Triton file of tests/evaluate/corpus, CORPUS_WORKERS test workers, default 8;
# CORPUS_SHARD as test_corpus.py's HTAM_CORPUS_SHARD, CORPUS_K as pytest's -k),
# gputests (pytest -m gpu, the corpus aside, GPU_WORKERS test workers, one per file unless GPU_DIST=load; GPU_TESTS_K
# as pytest's -k, GPU_TESTS_PATHS the folders or files), memory (gpu_memory.py, MEMORY_TASKS its task stems), throughput
# (gpu_throughput.py), offline (the offline proposer's baseline of every KernelBench task of OFFLINE_LEVELS, default 1,2,3, skipping the tasks of OFFLINE_PREVIOUS, a carried offline_check.jsonl; 6
# processes sharing the GPU through its queue), families (gpu_families.py), probe (gpu_reference_probe.py
# $PROBE_ARGS), mechanism
# (gpu_mechanism.py; its rows, banks and cache in $OUT/mech_state.tgz, resumed from
# .gpu/mech_state.tgz when carried back). $OUT brings back 8 files a call: choose phases to match. Needs .whl/ and .kb/ carried (scripts/device/README.md).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /opt/htam-site .whl/*.whl >/dev/null 2>&1 || { echo "wheels failed"; exit 1; }
# not under /tmp: each candidate gets a private /tmp
export PYTHONPATH=/opt/htam-site:$PWD PYTHONUNBUFFERED=1
export HTAM_CACHE_DIR=$PWD/.gpu/cache HTAM_TEST_CACHE_DIR=$PWD/.gpu/cache KB_ROOT=$PWD/.kb/kernelbench/KernelBench
mkdir -p .gpu
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
for spec in "$@"; do
    phase=${spec%%:*} secs=${spec##*:}
    t0=$(date +%s)
    echo "=== $phase ($secs s)"
    case $phase in
    doctor) timeout "$secs" python3 -m htam.cli doctor 2>&1 | tee "$OUT/doctor.txt" ;;
    corpus) HTAM_CORPUS_SHARD=${CORPUS_SHARD:-all} timeout -s INT -k 20 "$secs" python3 -m pytest -v -m gpu -n "${CORPUS_WORKERS:-8}" \
            -p no:cacheprovider -k "${CORPUS_K:-}" tests/evaluate/test_corpus.py -rfE >"$OUT/corpus.log" 2>&1
        echo "exit $?"; grep -E " (PASSED|FAILED|ERROR) |passed|failed" "$OUT/corpus.log" | tail -60 ;;
    gputests) timeout -s INT -k 20 "$secs" python3 -m pytest -v -m gpu -n "${GPU_WORKERS:-6}" \
            --dist "${GPU_DIST:-loadfile}" -p no:cacheprovider -k "${GPU_TESTS_K:-}" ${GPU_TESTS_PATHS:-tests} --deselect tests/evaluate/test_corpus.py \
            -rfE >"$OUT/gputests.log" 2>&1
        echo "exit $?"; grep -E " (PASSED|FAILED|ERROR) |^(FAILED|ERROR)|passed|failed" \
            "$OUT/gputests.log" | tail -70 ;;
    memory) timeout -s KILL "$secs" python3 scripts/device/gpu_memory.py .gpu/memory \
            ${MEMORY_TASKS:-} >"$OUT/memory.log" 2>&1
        echo "exit $?"; tail -20 "$OUT/memory.log"; cp .gpu/memory/gpu_memory.json .gpu/memory/gpu_memory.md "$OUT/" 2>/dev/null ;;
    throughput) python3 scripts/device/gpu_throughput.py .gpu/throughput --budget-s $((secs - 30)) \
            ${THROUGHPUT_ARGS:-} >"$OUT/throughput.log" 2>&1
        echo "exit $?"; tail -16 "$OUT/throughput.log" ;;
    throughput_before) python3 scripts/device/gpu_throughput.py .gpu/throughput_before --legacy \
            --tasks 4 --steps 1 --budget-s $((secs - 30)) >"$OUT/throughput_before.log" 2>&1
        echo "exit $?"; tail -12 "$OUT/throughput_before.log" ;;
    offline) mkdir -p .gpu/offline  # $OUT takes 8 files a call: the shards' logs stay here
        for i in 0 1 2 3 4 5; do
            SHARD=$i/6 KB_LEVELS=${OFFLINE_LEVELS:-1,2,3} timeout -s KILL "$secs" python3 \
                scripts/device/gpu_offline_check.py .gpu/offline/s$i $((secs - 40)) \
                ${OFFLINE_PREVIOUS:-} >".gpu/offline/shard$i.log" 2>&1 &
        done
        wait
        tail -3 .gpu/offline/shard*.log
        cat .gpu/offline/s*/offline_check.jsonl >"$OUT/offline_check.jsonl" 2>/dev/null
        python3 scripts/device/gpu_offline_check.py --summary "$OUT/offline_check.jsonl" \
            >"$OUT/offline_check.txt" 2>&1
        head -40 "$OUT/offline_check.txt" ;;
    families) python3 scripts/device/gpu_families.py .gpu/families "$secs" >.gpu/families.log 2>&1
        echo "exit $?"; cp .gpu/families/families.md "$OUT/" 2>/dev/null; tail -30 "$OUT/families.md" ;;
    mechanism) # resumes from .gpu/mech_state.tgz (the last call's, carried back) if there is one
        [ -f .gpu/mech_state.tgz ] && [ ! -d .gpu/mech ] && tar xzf .gpu/mech_state.tgz -C .gpu
        python3 scripts/device/gpu_mechanism.py .gpu/mech --budget-s $((secs - 60)) \
            --grace-s 30 --workers "${MECH_WORKERS:-6}" ${MECH_ARGS:-} >"$OUT/mechanism.log" 2>&1
        echo "exit $?"; cp .gpu/mech/mechanism.md .gpu/mech/mechanism.json "$OUT/" 2>/dev/null
        tar czf "$OUT/mech_state.tgz" -C .gpu --exclude mech/runs mech
        head -60 "$OUT/mechanism.md" 2>/dev/null ;;
    probe) timeout -s KILL "$secs" python3 scripts/device/gpu_reference_probe.py ${PROBE_ARGS:-} \
            >"$OUT/probe.log" 2>&1
        echo "exit $?"; grep -v Warning "$OUT/probe.log" | tail -30 ;;
    *) echo "unknown phase $phase" ;;
    esac
    echo "--- $phase took $(($(date +%s) - t0)) s"
done
