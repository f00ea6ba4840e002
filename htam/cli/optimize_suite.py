"""``htam optimize SUITE``: every task of a suite through the bench's executor (local pool, or
Ray), one unit per task. It ends with one table; with ``--json``, with one JSON object on stdout
instead, whose ``tasks`` are per task the summary a single task's ``--json`` prints, while the
progress lines go to stderr."""

from __future__ import annotations

import functools
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from htam.agent.rundir import RunDir
from htam.cli.common import USAGE_EXIT, console, err_console, fail, writable_dir
from htam.cli.fmt import plural
from htam.cli.json_errors import echo_json, print_json_error
from htam.cli.optimize_runs import resume_on_interrupt
from htam.cli.report_cmd import fmt
from htam.cli.sizes import default_size
from htam.cli.suites import fitting_tasks, load_tasks, print_progress
from htam.cli.workers import parse_levels, plan_workers


def is_many(task: str, pattern: str | None, levels: str | None) -> bool:
    """``htam optimize`` runs a batch when given a suite (builtin, a directory) or a filter."""
    return pattern is not None or levels is not None or task == "builtin" or Path(task).is_dir()


def _silent(*_args, **_kwargs) -> None:
    """--quiet: no progress lines."""


def optimize_many(
    suite: str,
    pattern: str | None,
    levels: str | None,
    *,
    method: str,
    steps: int,
    target: str,
    language: str,
    size: str | None,
    memory: Path,
    out: Path | None,
    resume: bool,
    workers: int | None,
    ray: str | None,
    spec,
    eval_overrides: dict,
    as_json: bool = False,
    quiet: bool = False,
    ctx=None,
) -> int:
    """Every task of SUITE, one unit each, the memory accumulating from ``memory`` into
    OUT/memory; prints one table (``as_json``: one JSON object; ``quiet``: the last line alone)
    and returns the exit status (0: some task has a correct candidate, 1: none, 2: some task
    file could not be loaded; it is reported on one line and the other tasks still run). On the
    CPU a task whose tensors exceed the memory limit is skipped, one line each
    (``fitting_tasks``); ``plan_workers`` says how many workers run the tasks, never more than
    there are tasks. From the batch directory's creation on, Ctrl-C prints the ``--resume``
    command that continues it (``ctx``: the command's context, which that command repeats)."""
    from htam.agent.rundir import new_run_dir
    from htam.bench import BenchConfig, BenchError, load_rows, run_bench
    from htam.bench.banks import learn_into
    from htam.memory import MemoryBank

    level_list = parse_levels(levels)
    errors: list = []  # bad task files: one line each, as `htam tasks list`; the rest still run
    the_tasks = load_tasks([suite], level_list, pattern, errors)
    for error in errors:
        err_console.print(
            f"[bold red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True
        )
    if not the_tasks:  # every task file is bad: each said why above
        if as_json:
            print_json_error(
                f"no task of {suite} could be loaded ({plural(len(errors), 'task file')}, each "
                "on its line of stderr)",
                USAGE_EXIT,
                errors=[str(error) for error in errors],
            )
        raise typer.Exit(USAGE_EXIT)
    size = default_size(target, size)
    memory_limit_mb = eval_overrides.get("memory_limit_mb")
    the_tasks = fitting_tasks(the_tasks, [suite], target, size, memory_limit_mb, ray)
    if out is None:
        if resume:
            fail("--resume of a batch needs its --out")
        out = new_run_dir(Path("runs") / f"batch-{method}")
    writable_dir(out, "batch directory")
    if ctx is not None:
        resume_on_interrupt(ctx, out, "batch")
    if not memory.exists():
        MemoryBank.open(memory, create=True).close()
    plan = plan_workers(target, workers, len(the_tasks), "task", ray=ray)
    on_event = functools.partial(print_progress, where=err_console) if as_json else print_progress
    if quiet and not as_json:  # --json keeps its progress, on stderr
        on_event = _silent
    try:
        config = BenchConfig(
            out=out,
            methods=[method],
            steps=steps,
            target=target,
            language=language,
            size=size,
            devices=plan.devices,
            memory=memory,
            memory_mode="accumulate",
            proposer=spec,
            eval_overrides=eval_overrides,
            ray=ray,
            ray_slots=plan.ray_slots,
        )
        outcome = run_bench(config, the_tasks, resume=resume, on_event=on_event)
    except (ValueError, BenchError) as exc:
        fail(str(exc))
    rows = sorted(load_rows(out), key=lambda r: r.task_id)
    bank = config.out / "memory" / f"{method}.db"
    learned = learn_into(memory, method, [unit_dir(r, out) for r in rows])
    if as_json:
        record: dict[str, object] = {"suite": suite, "method": method, "target": target}
        record |= {"language": language}
        record |= {"size": size, "out": str(out), "memory": str(memory), "bank": str(bank)}
        record |= {"learned_steps": learned}
        record |= {"count": len(rows), "tasks": task_records(rows, out)}
        record |= {"errors": [str(error) for error in errors], "done": len(outcome.done)}
        record |= {"failed": len(outcome.failed), "skipped": len(outcome.skipped)}
        echo_json(record | {"wall_s": outcome.wall_s})
    else:
        if not quiet:
            title = f"{plural(len(rows), 'task')} · {method} · {target}/{language}"
            console.print(_table(rows, title))
        console.print(
            f"{len(outcome.done)} done, {len(outcome.failed)} failed, {len(outcome.skipped)} "
            f"already finished · {outcome.wall_s:.1f} s · runs {out}/runs · memory {memory} "
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


def _table(rows: list, title: str) -> Table:
    table = Table(title=title)
    for name in ("task", "state", "best candidate vs eager", "kept vs eager", "error"):
        table.add_column(name)
    for r in rows:
        table.add_row(
            r.task_id,
            r.state if not r.correct else "correct",
            fmt(r.speedup, "x"),
            fmt(r.kept_speedup, "x"),
            escape((r.error or "").splitlines()[0] if r.error else ""),
        )
    return table
