"""The mechanism on real GPU tasks (issue 39 item 5): htam vs no-prefix vs flat vs random on
KernelBench tasks the offline proposer matches, then the transfer experiment (a bank built on
KernelBench, then Robust-KBench's forward tasks: fresh vs frozen vs accumulate).

One call on one GPU, bounded by ``--budget-s``:

- ``--workers`` processes, each with its own evaluator on the one GPU (their builds overlap on
  the CPUs; their timings may meet, alike for every method: each speedup is the candidate beside
  the reference in the same rounds). They take tasks from one queue; a worker runs every seed and
  method of its task, so a candidate another method or seed wrote is served by the evaluation
  cache (one for all workers) instead of judged again. A task is complete for all of them or
  left out of the tables, so whatever the budget leaves is a fair comparison.
- Banks: one per (method, seed), fresh from the seed, learning across the tasks in the order the
  workers finish them (the bench's ``fresh`` mode; SQLite serializes the workers' writes).
- Transfer (the last ``--transfer-share`` of the budget): htam on the Robust-KBench forward
  tasks the offline proposer matches, from a fresh seed bank (fresh), a private copy per task of
  the bank this seed's htam built on KernelBench (frozen), or one copy per seed learning across
  the tasks (accumulate).

Writes under OUT: rows.w*.jsonl and transfer_rows.w*.jsonl (one line per unit; a call on the
same OUT resumes: the units in them are not run again, the banks go on), mechanism.md and
mechanism.json (the tables: discovery curves, bootstrap intervals of the paired difference to
htam over tasks, the prefix's share of htam's decisions, the transfer arms), runs/ (each unit's
run directory). ``--select-only`` writes the task list (scripts/device/mechanism_tasks.json)
and stops.

    python3 scripts/device/gpu_mechanism.py OUT [--budget-s 450] [--steps 4] [--seeds 3]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(Path(__file__).resolve().parent)]
TASK_LIST = Path(__file__).resolve().parent / "mechanism_tasks.json"
METHODS = ("htam", "no-prefix", "flat", "random")
ARMS = ("fresh", "frozen", "accumulate")


def shared_root(name: str) -> Path:
    places = (ROOT / ".kb" / name, ROOT.parent / "shared" / name, ROOT.parents[1] / "shared" / name)
    return next((p for p in places if p.exists()), places[0])


# -- task selection (CPU; its result is committed as scripts/device/mechanism_tasks.json) ---------


def select(count: int, target: str, language: str, max_gib: float) -> dict:
    """Round-robin over families, among the tasks the offline proposer matches whose tensors
    (inputs, outputs, parameters) take at most ``max_gib``: the workers share one card, and an
    evaluation takes about 5x its task's tensors."""
    from kb_tensor_bytes import tensor_bytes

    from htam.offline import OfflineProposer
    from htam.tasks import load_suite, signature

    proposer = OfflineProposer(target, language)

    def fits(task) -> bool:
        size = tensor_bytes(Path(task.path)) if getattr(task, "path", None) else None
        return size is not None and size <= max_gib * 2**30

    def matched(tasks, sized=True):
        rows = []
        for task in tasks:
            if proposer.can_propose(task) and (not sized or fits(task)):
                families = list(signature(task, "small").families) or ["other"]
                rows.append({"id": task.id, "family": families[0], "families": families})
        return rows

    kb = load_suite(shared_root("kernelbench") / "KernelBench", levels=[1, 2])
    by_family: dict[str, list[dict]] = defaultdict(list)
    for row in matched(kb):
        by_family[row["family"]].append(row)
    chosen: list[dict] = []
    while len(chosen) < count and any(by_family.values()):  # round-robin over families
        for family in sorted(by_family):
            if by_family[family] and len(chosen) < count:
                chosen.append(by_family[family].pop(0))
    robust = [t for t in load_suite(shared_root("robust-kbench") / "tasks") if t.kind != "backward"]
    return {"kernelbench": chosen, "robust": matched(robust, sized=False)}


def load_tasks(ids: list[str], suite: Path):
    from htam.tasks import load_suite

    # the pattern filters before loading: only these files are loaded and validated
    # not validated here (a child process per task, minutes of the budget): a task that cannot
    # run is a unit's error row
    chosen = load_suite(suite, pattern=",".join(ids), validate=False)
    tasks = {t.id: t for t in chosen if t.id in set(ids)}
    return [tasks[i] for i in ids if i in tasks]


# -- the workers --------------------------------------------------------------------------


def evaluator_for(args):
    from htam.evaluate import CachedEvaluator, EvalConfig, Evaluator

    config = EvalConfig(
        size=args.size,
        timing_budget_ms=args.timing_ms,
        max_timed=50,  # min_timed as a user gets it: five rounds let load pass for escaped work
        warmup_ms=100.0,
        run_timeout_s=30.0,
        time_compile_reference=False,  # not a bar here: the mechanism compares methods
    )
    evaluator = Evaluator(args.target, config)
    return evaluator, CachedEvaluator(evaluator, Path(args.out) / "evals")


def run_unit(args, cached, bank_path, method, seed, task, out_dir) -> dict:
    from htam.agent import OptimizeConfig, Optimizer
    from htam.memory import MemoryBank
    from htam.offline import OfflineProposer

    started = time.monotonic()
    row = {"method": method, "seed": seed, "task": task.id}
    # a unit with no row was cut off by an earlier call's budget: its run starts over
    shutil.rmtree(out_dir, ignore_errors=True)
    bank = MemoryBank.open(bank_path) if bank_path else None
    try:
        cfg = OptimizeConfig(method=method, steps=args.steps, seed=seed, target=args.target,
                             language=args.language)  # fmt: skip
        proposer = OfflineProposer(args.target, args.language)
        summary = Optimizer(proposer, cached, bank, cfg).run(task, out_dir)
        row |= {
            k: getattr(summary, k) for k in ("curve", "statuses", "prefix_shares", "best_speedup")
        }
        row["correct"] = summary.best_status == "ok"
    except Exception as exc:  # noqa: BLE001 - one unit's failure is recorded, the worker goes on
        row |= {"error": f"{type(exc).__name__}: {exc}", "curve": [], "correct": False}
    finally:
        if bank is not None:
            bank.close()
    row["wall_s"] = time.monotonic() - started
    return row


def fresh_bank(path: Path, source: Path | None = None) -> Path:
    from htam.memory import MemoryBank

    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():  # a resumed call goes on with what the bank learned before
        return path
    if source is not None:
        shutil.copy(source, path)
    else:
        MemoryBank.create(path).close()
    return path


def prepare_banks(args) -> dict[tuple[str, int], Path | None]:
    """One bank per (method, seed), fresh from the seed, shared by the workers (SQLite in WAL
    mode serializes their writes, as in the bench); made here, before any worker starts."""
    from htam.bench.bench_config import MEMORYLESS

    out = Path(args.out)
    return {
        (m, s): None if m in MEMORYLESS else fresh_bank(out / "banks" / f"{m}-s{s}.db")
        for m in args.methods
        for s in range(args.seeds)
    }


def prepare_transfer(args, banks) -> dict[tuple[str, int], Path]:
    """Per seed: a fresh seed bank and one copy of the bank its htam built on KernelBench
    learning across the transfer tasks (accumulate); frozen copies are made per task."""
    out = Path(args.out) / "transfer_banks"
    arms = {}
    for s in range(args.seeds):
        arms[("fresh", s)] = fresh_bank(out / f"fresh-s{s}.db")
        arms[("accumulate", s)] = fresh_bank(out / f"accumulate-s{s}.db", banks[("htam", s)])
    return arms


def kb_units(args, cached, banks, task, family, done, rows) -> None:
    """Every (seed, method) of one task: a seed's later methods meet its candidates in the
    cache, and so do later seeds."""
    for seed in range(args.seeds):
        for method in args.methods:
            if (method, seed, task.id) in done:
                continue  # a resumed call: this unit ran in an earlier one
            run_dir = Path(args.out) / "runs" / method / f"s{seed}" / task.id.replace("/", "__")
            row = run_unit(args, cached, banks[(method, seed)], method, seed, task, run_dir)
            rows.write(json.dumps({**row, "family": family}) + "\n")
            rows.flush()


def transfer_units(args, cached, banks, arms, task, done, rows) -> None:
    slug = task.id.replace("/", "__")
    for seed in range(args.seeds):
        frozen = Path(args.out) / "transfer_banks" / f"frozen-s{seed}-{slug}.db"
        frozen = fresh_bank(frozen, banks[("htam", seed)])
        chosen = {"fresh": arms[("fresh", seed)], "frozen": frozen}
        chosen["accumulate"] = arms[("accumulate", seed)]
        for arm, bank in chosen.items():
            if (arm, seed, task.id) in done:
                continue
            run_dir = Path(args.out) / "transfer_runs" / arm / f"s{seed}" / slug
            row = run_unit(args, cached, bank, "htam", seed, task, run_dir)
            rows.write(json.dumps({**row, "arm": arm}) + "\n")
            rows.flush()


def worker(args, slot: int, phase: str, queue, stop_at: float, banks, arms) -> None:
    """Take tasks from ``queue`` until it is empty or ``stop_at`` has passed."""
    import queue as queues

    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")
    out = Path(args.out)
    plan = json.loads(Path(args.tasks_file).read_text())
    families = {r["id"]: r["family"] for r in plan["kernelbench"]}
    stem = "rows" if phase == "kernelbench" else "transfer_rows"
    key = "method" if phase == "kernelbench" else "arm"
    done = {(r[key], r["seed"], r["task"]) for r in read_rows(out, stem)}
    suite = args.kb_suite if phase == "kernelbench" else args.robust_suite
    evaluator, cached = evaluator_for(args)
    with evaluator, (out / f"{stem}.w{slot}.jsonl").open("a") as rows:
        while time.monotonic() < stop_at:
            try:
                task_id = queue.get_nowait()
            except queues.Empty:
                return
            task = load_tasks([task_id], suite)[0]
            if phase == "kernelbench":
                kb_units(args, cached, banks, task, families[task_id], done, rows)
            else:
                transfer_units(args, cached, banks, arms, task, done, rows)


def run_phase(args, phase: str, task_ids: list[str], stop_at: float, banks, arms) -> None:
    context = mp.get_context("spawn")
    queue = context.Queue()
    for task_id in task_ids:
        queue.put(task_id)
    workers = min(args.workers, len(task_ids))
    procs = [
        context.Process(target=worker, args=(args, w, phase, queue, stop_at, banks, arms))
        for w in range(workers)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=max(stop_at + args.grace_s - time.monotonic(), 1))
        if p.is_alive():
            p.kill()  # a unit past the budget: the rows written so far stand


# -- the tables ---------------------------------------------------------------------------


def read_rows(out: Path, stem: str) -> list[dict]:
    return [json.loads(line) for p in sorted(out.glob(f"{stem}.w*.jsonl"))
            for line in p.read_text().splitlines() if line.strip()]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--budget-s", type=float, default=450.0)
    parser.add_argument("--transfer-share", type=float, default=0.25)
    parser.add_argument("--grace-s", type=float, default=60.0, help="for a unit past the budget")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=6, help="evaluators on the one GPU")
    parser.add_argument("--tasks", type=int, default=48)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--size", default="large")
    parser.add_argument("--max-gib", type=float, default=2.0, help="task tensors, for --select-only")
    parser.add_argument("--timing-ms", type=float, default=40.0)
    parser.add_argument("--target", default="cuda")
    parser.add_argument("--language", default="triton")
    parser.add_argument("--tasks-file", default=str(TASK_LIST))
    parser.add_argument("--kb-suite", default=str(shared_root("kernelbench") / "KernelBench"))
    parser.add_argument("--robust-suite", default=str(shared_root("robust-kbench") / "tasks"))
    parser.add_argument("--select-only", action="store_true")
    parser.add_argument("--tables-only", action="store_true")
    args = parser.parse_args()
    args.methods = args.methods.split(",")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.select_only or not Path(args.tasks_file).exists():
        plan = select(args.tasks, args.target, args.language, args.max_gib)
        Path(args.tasks_file).write_text(json.dumps(plan, indent=1) + "\n")
        print(f"{len(plan['kernelbench'])} KernelBench, {len(plan['robust'])} Robust-KBench tasks")
        if args.select_only:
            return
    if not args.tables_only:
        started = time.monotonic()
        deadline = started + args.budget_s
        transfer_at = deadline - args.transfer_share * args.budget_s
        plan = json.loads(Path(args.tasks_file).read_text())
        banks = prepare_banks(args)
        run_phase(args, "kernelbench", [r["id"] for r in plan["kernelbench"]], transfer_at,
                  banks, {})  # fmt: skip
        print(f"kernelbench phase done at {time.monotonic() - started:.0f} s", flush=True)
        if "htam" in args.methods and plan["robust"]:
            arms = prepare_transfer(args, banks)
            run_phase(args, "transfer", [r["id"] for r in plan["robust"]], deadline, banks, arms)
        print(f"done in {time.monotonic() - started:.0f} s", flush=True)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from mechanism_tables import write_tables

    write_tables(out, read_rows(out, "rows"), read_rows(out, "transfer_rows"), args)


if __name__ == "__main__":
    main()
