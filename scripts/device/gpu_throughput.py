"""Throughput on a GPU: a bench of KernelBench level-1 tasks x steps, driven by the loopback
replay endpoint replaying realistic solutions (scripts/device/throughput_replies.py: CUDA through
load_inline, or Triton), with a fresh build cache; prints the median wall time per fresh
candidate (amortized: the bench's wall time over its candidates, per GPU), the GPU's busy
fraction and the build/timed distributions (htam.bench.throughput).

    python3 scripts/device/gpu_throughput.py OUT [--tasks 16] [--steps 4] [--lanes 12] [--scale 16]
        [--language cuda|triton] [--budget-s 420] [--legacy]

``--scale S`` runs each task with its batch divided by S (copies of the KernelBench files with an
``HTAM_SMALL`` size, run at --size small): at their own sizes these tasks hold 12-16 GiB of
tensors each, and a bench of 64 candidates would not fit a 10-minute call. ``--scale 1`` runs
them as they are.

``--legacy`` measures the way candidates were evaluated before builds left the GPU's path: one
worker per GPU, every build inside its timed job, code for every architecture torch targets by
default (HTAM_LEGACY_BUILD=1). A bench stopped by ``--budget-s`` still reports what its events
hold.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/, for kb_common
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kb_common import kernelbench_root  # noqa: E402
from throughput_replies import ELEMENTWISE, TASKS, replies  # noqa: E402

from htam.bench.throughput import load_events, throughput, throughput_table  # noqa: E402
from htam.llm.replay_server import ReplayServer  # noqa: E402


def scaled(root: Path, tasks: list[str], scale: int, into: Path) -> tuple[Path, str]:
    """The suite and size to run: KernelBench itself (scale 1), or copies of the tasks whose
    small size divides their batch by ``scale``."""
    if scale <= 1:
        return root, "large"
    (into / "level1").mkdir(parents=True)
    for t in tasks:
        source = (root / "level1" / f"{t}.py").read_text()
        batch = int(re.search(r"^batch_size = (\d+)", source, re.MULTILINE).group(1))
        small = f'\n\nHTAM_SMALL = {{"batch_size": {max(1, batch // scale)}}}\n'
        (into / "level1" / f"{t}.py").write_text(source + small)
    return into, "small"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--lanes", type=int, default=12)
    parser.add_argument("--scale", type=int, default=16)
    parser.add_argument("--language", default="cuda", choices=("cuda", "triton"))
    parser.add_argument("--budget-s", type=float, default=420.0)
    parser.add_argument("--legacy", action="store_true")
    args = parser.parse_args()
    root = kernelbench_root()
    pool = TASKS if args.language == "cuda" else list(ELEMENTWISE)
    tasks = pool[: args.tasks]
    out = args.out.resolve()
    shutil.rmtree(out, ignore_errors=True)  # a fresh build (and reference) cache
    out.mkdir(parents=True)
    suite, size = scaled(root, tasks, args.scale, out / "tasks")
    env = {**os.environ, "HTAM_CACHE_DIR": str(out / "cache")}
    if args.legacy:
        env["HTAM_LEGACY_BUILD"] = "1"
    lanes = 1 if args.legacy else args.lanes
    script = {"model": "replay-model", "replies": replies(root, tasks, args.steps, args.language)}
    (out / "replies.json").write_text(json.dumps(script))
    with ReplayServer.from_file(out / "replies.json") as server:
        command = [
            sys.executable, "-m", "htam.cli", "bench", str(suite),
            "--tasks", ",".join(f"*level1/{t}" for t in tasks), "--size", size,
            "--methods", "refine", "--steps", str(args.steps), "--seeds", "1",
            "--base-url", server.base_url, "--model", "replay-model",
            "--target", "cuda", "--language", args.language,
            "--lanes", str(lanes), "--out", str(out / "bench"),
        ]  # fmt: skip
        print(" ".join(command), flush=True)
        t0 = time.monotonic()
        try:
            done = subprocess.run(command, env=env, timeout=args.budget_s)
            code = done.returncode
        except subprocess.TimeoutExpired:
            code = "stopped at the budget"
        wall = time.monotonic() - t0
        asked, at_once = len(server.chat_requests), server.max_in_flight
    figures = throughput(load_events(out / "bench"))
    print(f"bench exit: {code}; {wall:.0f} s; {asked} LLM requests, at most {at_once} at once")
    if figures is None:
        print("no evaluator events: nothing was evaluated")
        return
    (out / "throughput.json").write_text(json.dumps(figures, indent=2))
    for row in throughput_table(figures).rows:
        print("  " + " | ".join(str(c) for c in row))
    per = figures["wall_per_candidate_s"]
    print(
        f"RESULT {'legacy' if args.legacy else 'new'} {args.language}: "
        f"{figures['candidates']} candidates, median wall per fresh candidate (amortized) "
        f"{'n/a' if per is None else f'{per:.1f} s'}, GPU busy "
        f"{100 * (figures['gpu_busy_fraction'] or 0):.0f}%, "
        f"{figures['candidates_per_gpu_hour'] or 0:.0f} candidates/GPU-hour, prebuilt "
        f"{100 * (figures['prebuilt_fraction'] or 0):.0f}%"
    )


if __name__ == "__main__":
    main()
