"""``htam optimize SUITE``: every task of a suite through the bench's executor (local pool, or
Ray), one unit per task. It ends with one table; with ``--json``, with one JSON object on stdout
instead, whose ``tasks`` are per task the summary a single task's ``--json`` prints, while the
progress lines go to stderr."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.table import Table

from htam.agent.rundir import RunDir
from htam.cli.common import USAGE_EXIT, console, err_console, fail, writable_dir
from htam.cli.fmt import plural
from htam.cli.json_errors import echo_json, print_json_error
from htam.cli.optimize_runs import resume_on_interrupt
from htam.cli.options import bench_config
from htam.cli.report_cmd import fmt
from htam.cli.sizes import default_size
from htam.cli.suites import fitting_tasks, load_tasks, outcome_line, print_progress
from htam.cli.workers import parse_levels, plan_workers

if TYPE_CHECKING:
    from htam.cli.optimize_one import OptimizeRun


def is_many(task: str, pattern: str | None, levels: str | None) -> bool:
    """``htam optimize`` runs a batch when given a suite (builtin, a directory) or a filter."""
    return pattern is not None or levels is not None or task == "builtin" or Path(task).is_dir()


def _silent(*_args, **_kwargs) -> None:
    """--quiet: no progress lines."""


def optimize_many(
    run: OptimizeRun, pattern: str | None, levels: str | None, workers: int | None, ray: str | None
) -> int:
    """Every task of the suite ``run.task``, one unit each, the memory accumulating from
    ``run.memory`` into OUT/memory; prints one table (``--json``: one JSON object; ``--quiet``:
    the last line alone) and returns the exit status (0: some task has a correct candidate, 1:
    none, 2: some task file could not be loaded; it is reported on one line and the other tasks
    still run). On the CPU a task whose evaluation (3x its tensors) exceeds the memory limit is
    skipped, one line each (``fitting_tasks``); ``plan_workers`` says how many workers run the
    tasks, never more than there are tasks. From the batch directory's creation on, Ctrl-C prints the ``--resume``
    command that continues it (``run.ctx``: the command's context, which that command repeats)."""
    from htam.bench import BenchError, load_rows, run_bench
    from htam.bench.banks import learn_into

    settings = run.settings
    errors: list[Exception] = []  # bad task files: one line each; the rest still run
    the_tasks = _load(run, parse_levels(levels), pattern, errors)
    size = default_size(settings.target, run.size)
    memory_limit_mb = settings.eval_overrides.get("memory_limit_mb")
    the_tasks = fitting_tasks(the_tasks, [run.task], settings.target, size, memory_limit_mb, ray)
    out = _batch_dir(run)
    plan = plan_workers(settings.target, workers, len(the_tasks), "task", ray=ray)
    config = bench_config(settings, out=out, methods=[run.method], steps=run.steps, size=size,
                          devices=plan.devices, memory=run.memory, memory_mode="accumulate",
                          ray=ray, ray_slots=plan.ray_slots)  # fmt: skip
    try:
        outcome = run_bench(config, the_tasks, resume=run.resume, on_event=_on_event(run))
    except (ValueError, BenchError) as exc:
        fail(str(exc))
    rows = sorted(load_rows(out), key=lambda r: r.task_id)
    learned = learn_into(run.memory, run.method, [unit_dir(r, out) for r in rows])
    if run.as_json:
        record = _record(run, config, rows, learned) | {"errors": [str(e) for e in errors]}
        record |= {"done": len(outcome.done), "failed": len(outcome.failed)}
        echo_json(record | {"skipped": len(outcome.skipped), "wall_s": outcome.wall_s})
    else:
        if not run.quiet:
            where = f"{config.target}/{config.language}"
            title = f"{plural(len(rows), 'task')} · {run.method} · {where}"
            console.print(_table(rows, title, out))
        console.print(
            f"{outcome_line(outcome, retried=False)} · runs {out}/runs · memory {run.memory} "
            f"learned {plural(learned, 'new step')}",
            highlight=False,
            soft_wrap=True,
        )
    if errors:
        err_console.print(
            f"{plural(len(errors), 'task file')} could not be loaded (above); exit {USAGE_EXIT}",
            highlight=False,
        )
        return USAGE_EXIT
    return 0 if any(r.correct for r in rows) else 1


def _load(run: OptimizeRun, levels: list[int] | None, pattern: str | None, errors: list) -> list:
    """The suite's tasks; each file that cannot be loaded is one line of stderr (and one entry
    of ``errors``), and when none can, the command ends here (exit 2)."""
    the_tasks = load_tasks([run.task], levels, pattern, errors)
    for error in errors:
        err_console.print(
            f"[bold red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True
        )
    if not the_tasks:  # every task file is bad: each said why above
        if run.as_json:
            print_json_error(
                f"no task of {run.task} could be loaded ({plural(len(errors), 'task file')}, "
                "each on its line of stderr)",
                USAGE_EXIT,
                errors=[str(error) for error in errors],
            )
        raise typer.Exit(USAGE_EXIT)
    return the_tasks


def _batch_dir(run: OptimizeRun) -> Path:
    """The batch directory (new, or --out), writable, with the Ctrl-C hook that says how to
    resume it, and the memory bank the batch learns into, created from the seed if missing."""
    from htam.agent.rundir import new_run_dir
    from htam.memory import MemoryBank

    out = run.out
    if out is None:
        if run.resume:
            fail("--resume of a batch needs its --out")
        out = new_run_dir(Path("runs") / f"batch-{run.method}")
    writable_dir(out, "batch directory")
    resume_on_interrupt(run.ctx, out, "batch")
    if not run.memory.exists():
        MemoryBank.open(run.memory, create=True).close()
    return out


def _on_event(run: OptimizeRun):
    """Progress lines: on stdout, on stderr with --json (stdout is its object), none quiet."""
    if run.as_json:
        return functools.partial(print_progress, where=err_console)
    return _silent if run.quiet else print_progress


def _record(run: OptimizeRun, config, rows: list, learned: int) -> dict[str, object]:
    """--json's object: what ran, where its runs and memory are, and per task its summary."""
    bank = config.out / "memory" / f"{run.method}.db"
    return {
        "suite": run.task, "method": run.method, "target": config.target,
        "language": config.language, "size": config.size, "out": str(config.out),
        "memory": str(run.memory), "bank": str(bank), "learned_steps": learned,
        "count": len(rows), "tasks": task_records(rows, config.out),
    }  # fmt: skip


def unit_dir(row, out: Path) -> Path:
    """The run directory of a bench row's unit."""
    from htam.bench.bench_config import Unit

    return Unit(row.method, row.seed, row.task_id, row.level, row.steps_planned).run_dir(out)


def task_records(rows: list, out: Path) -> list[dict]:
    """Per task, the summary a single task's ``--json`` prints (its summary.json), with its
    state in the suite (complete, partial or failed), whether its best candidate is correct,
    and its error; a unit that failed before its first step has no summary: outcome None."""
    records = []
    for r in rows:
        run_dir = unit_dir(r, out)
        read = RunDir(run_dir).summary()  # an older version's summary gets the keys it lacked
        summary = read.to_dict() if read else {}
        record = {"task_id": r.task_id, "run_dir": str(run_dir), "outcome": None, **summary}
        records.append(record | {"state": r.state, "correct": r.correct, "error": r.error})
    return records


def _table(rows: list, title: str, out: Path) -> Table:
    table = Table(title=title)
    for name in ("task", "state", "best candidate vs eager", "kept vs eager", "error"):
        table.add_column(name)
    for r in rows:
        table.add_row(
            r.task_id,
            r.state if not r.correct else "correct",
            fmt(r.speedup, "x"),
            fmt(r.kept_speedup, "x"),
            escape(_why_not(r, out)),
        )
    return table


def _why_not(row, out: Path, limit: int = 200) -> str:
    """The error cell: the unit's error, else for a task with no correct candidate the cause its
    own last line gives (its summary's reason; seen: a row of "partial, n/a, 1x" and an empty
    cell for a task the offline proposer has no template for)."""
    text = row.error
    if not text and not row.correct:
        summary = RunDir(unit_dir(row, out)).summary()
        text = summary.reason if summary else None
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."
