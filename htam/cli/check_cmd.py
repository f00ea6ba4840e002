"""``htam tasks check``: every reference of a suite at its real size, with a progress bar (plain
lines when stderr is not a terminal), resume, and a table or JSON on stdout."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from htam.cli.common import (
    USAGE_EXIT,
    check_cache_dir,
    console,
    err_console,
    fail,
    no_tasks,
    writable_dir,
)
from htam.cli.fmt import plural
from htam.cli.json_errors import echo_json
from htam.cli.options import Target as TargetOption
from htam.cli.workers import parse_levels
from htam.vocab import SIZES, Target, targets_help


def default_jobs(target: str) -> int:
    """Warm-up processes: on a GPU a quarter of the cores, at most 4 (each torch.compile build
    starts compile workers of its own, and the measuring process, which sets the pace, needs CPU
    too); on the CPU none, since builds there would disturb the CPU timings."""
    return max(1, min(4, (os.cpu_count() or 4) // 4)) if target == "cuda" else 0


def parse_eval_options(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs naming EvalConfig fields; values are JSON where they parse as JSON."""
    import pydantic

    from htam.evaluate import EvalConfig

    fields = {f.name for f in dataclasses.fields(EvalConfig)} - {"size", "tolerances", "cache_dir"}
    options: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in fields:
            fail(f"--eval {item!r}: give KEY=VALUE with KEY one of {', '.join(sorted(fields))}")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    try:  # typed as EvalConfig types them (seen: a string reached the evaluator)
        checked = pydantic.TypeAdapter(EvalConfig).validate_python(options)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        name, msg = str(first["loc"][0]), first["msg"]
        fail(f"--eval {name}={options[name]!r}: {msg[0].lower()}{msg[1:]}")
    for key, value in options.items():
        least = _LEAST.get(key)
        if least is not None and getattr(checked, key) is not None and value < least:
            fail(f"--eval {key}={value!r}: at least {least}")
    return {key: getattr(checked, key) for key in options}


# The least value of a setting that has one (seen: trials=0 failed every reference
# with a TypeError, and memory_limit_mb=1 passed); 0 where any positive amount will do.
_LEAST = {
    "trials": 1,
    "min_timed": 1,
    "max_timed": 1,
    "memory_limit_mb": 256,
    "compile_timeout_s": 1,
    "run_timeout_s": 1,
    "call_timeout_s": 0.001,
    "output_limit_bytes": 1024,
    "warmup_ms": 0,
    "timing_budget_ms": 0.001,
    "l2_flush_mb": 0,
    "escape_ratio": 0,
    "escape_slack_ms": 0,
    "busy_probe_ms": 0,
    "flag_speedup": 1,
}


class Reporter:
    """Progress on stderr: a rich bar on a terminal, otherwise one plain line per event."""

    def __init__(self) -> None:
        self.live = err_console.is_terminal
        self.progress: Progress | None = None
        self.bar: TaskID | None = None

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "plan":
            self._line(
                f"{data['total']} tasks: {data['skipped']} already checked, {data['todo']} to run"
            )
            if self.live and data["todo"]:
                self.progress = Progress(
                    TextColumn("{task.description}"),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TimeElapsedColumn(),
                    TextColumn("{task.fields[last]}"),
                    console=err_console,
                    transient=False,
                )
                self.progress.start()
                self.bar = self.progress.add_task("check", total=data["todo"], last="")
        elif kind == "task_end":
            record = data["record"]
            line = f"[{data['done']}/{data['todo']}] {record['id']}: {summary_line(record)}"
            if self.progress is not None and self.bar is not None:
                self.progress.update(self.bar, advance=1, last=record["id"])
                if record["status"] != "ok":
                    self._line(line)
            else:
                self._line(line)
        elif kind == "warmups_off":
            self._line(f"warm-ups off, each task builds torch.compile cold: {data['cause']}")
        elif kind == "retry_alone":
            self._line(f"{data['id']}: ran out of GPU memory beside warm-ups; again alone")

    def _line(self, text: str) -> None:
        target = self.progress.console if self.progress is not None else err_console
        target.print(escape(text), highlight=False, soft_wrap=True)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def summary_line(record: dict[str, Any]) -> str:
    if record["status"] == "failed":
        return f"failed: {record['cause']}"
    parts = [record["status"], f"eager {record['eager_ms']:.4g} ms"]
    if record.get("compile_ms"):
        parts.append(f"compile {record['compile_ms']:.4g} ms ({record['ratio']:.3g}x)")
    parts.append(f"SoL {100 * record['sol_eager']:.1f}% ({record['bound']})")
    if record["status"] == "compile_failed":
        parts.append(record["cause"])
    return ", ".join(parts)


# The terminal shows what fits a screen; FLOPs, bytes and the bound's time are in check.md/json.
TERMINAL_COLUMNS = (
    "task",
    "status",
    "eager ms",
    "compile ms",
    "eager/compile",
    "SoL eager",
    "bound",
    "cause",
)


def _table(outcome, title: str) -> list[Table]:
    from htam.bench.check_report import LEVEL_HEADERS, TASK_HEADERS, level_row, summarize, task_row

    keep = [TASK_HEADERS.index(h) for h in TERMINAL_COLUMNS]
    tasks = Table(title=title)
    for header in TERMINAL_COLUMNS:
        left = header in ("task", "status", "cause")
        tasks.add_column(header, justify="left" if left else "right", no_wrap=header == "task")
    for record in outcome.records:
        row = task_row(record)
        tasks.add_row(*[escape(row[i]) for i in keep])
    summary = summarize(outcome.records)
    levels = Table(title="per level")
    for header in LEVEL_HEADERS:
        levels.add_column(header, justify="right")
    for level, s in [*summary["levels"].items(), ("all", summary["all"])]:
        levels.add_row(*level_row(level, s))
    return [tasks, levels]


# The options of check alone (--target: htam.cli.options).
Suite = Annotated[
    str,
    typer.Argument(metavar="SUITE", help="builtin, a KernelBench checkout, a directory or file"),
]
CheckSize = Annotated[str, typer.Option("--size", help="large (the real size) or small")]
Levels = Annotated[str | None, typer.Option("--levels", help="Comma-separated levels, e.g. 1,2.")]
Tasks = Annotated[
    str | None, typer.Option("--tasks", help="fnmatch globs on id or name, comma-separated")
]
Out = Annotated[Path, typer.Option("--out", help="results directory; a rerun into it resumes")]
Jobs = Annotated[
    int | None, typer.Option("--jobs", help="warm-up processes for torch.compile builds")
]
Measurers = Annotated[
    int, typer.Option("--measurers", help="measuring processes; above 1 their timings may overlap")
]
EvalOptions = Annotated[
    list[str] | None, typer.Option("--eval", help="evaluator setting KEY=VALUE (repeatable)")
]
RetryFailed = Annotated[
    bool, typer.Option("--retry-failed", help="run again tasks that failed before")
]
CheckJson = Annotated[bool, typer.Option("--json", help="print check.json to stdout")]


def check_command(
    suite: Suite,
    target: TargetOption = None,
    size: CheckSize = "large",
    levels: Levels = None,
    tasks: Tasks = None,
    out: Out = Path("runs/check"),
    jobs: Jobs = None,
    measurers: Measurers = 1,
    eval_options: EvalOptions = None,
    retry_failed: RetryFailed = False,
    as_json: CheckJson = False,
) -> None:
    """Run every reference at its real size: status and cause, eager and torch.compile times,
    FLOPs, bytes, roofline bound. Writes OUT/check.json and OUT/check.md; exit 1 if any failed,
    2 if a task file could not be loaded (the others are checked)."""
    from htam.bench.check import CheckConfig, CheckError, run_check
    from htam.cli.common import default_target

    target = target or default_target()
    if target not in tuple(Target):
        fail(f"unknown target {target!r}; choose {targets_help()}")
    if size not in SIZES:
        fail(f"unknown size {size!r}; choose {' or '.join(SIZES)}")
    if measurers < 1 or (jobs is not None and jobs < 0):
        fail("--measurers must be at least 1 and --jobs at least 0")
    loaded, errors = _load(suite, levels, tasks)
    check_cache_dir()
    overrides = parse_eval_options(eval_options or [])  # a bad one leaves no --out behind
    writable_dir(out, "--out")
    jobs = default_jobs(target) if jobs is None else jobs
    config = CheckConfig(out=out, target=target, size=size, jobs=jobs, measurers=measurers,
                         eval_overrides=overrides, retry_failed=retry_failed)  # fmt: skip
    reporter = Reporter()
    try:
        outcome = run_check(loaded, config, reporter)
    except CheckError as exc:  # another check's settings in --out: a usage error
        fail(str(exc))
    finally:
        reporter.close()
    _print_outcome(outcome, as_json, f"{target}, {size} size")
    if errors:  # as `htam optimize SUITE`: the others ran, and the bad files are a usage error
        err_console.print(
            f"{plural(len(errors), 'task file')} could not be loaded (above); exit {USAGE_EXIT}",
            highlight=False,
        )
        raise typer.Exit(USAGE_EXIT)
    if any(r["status"] == "failed" for r in outcome.records):
        raise typer.Exit(1)


def _load(suite: str, levels: str | None, tasks: str | None) -> tuple[list, list]:
    """The suite's tasks and the errors of the files that could not be loaded (one line each on
    stderr; the others are checked). None loaded: exit 2, saying why."""
    from htam.tasks import TaskError, load_suite

    errors: list[TaskError] = []
    try:
        # No validation run on the CPU at load (minutes for KernelBench's sizes): running every
        # reference on the target is what the check itself does.
        loaded = load_suite(suite, parse_levels(levels), tasks, errors=errors, validate=False)
    except (TaskError, ValueError, FileNotFoundError) as exc:
        fail(str(exc))
    for error in errors:
        err_console.print(
            f"[bold red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True
        )
    if not loaded:
        if errors:  # every task file is bad: each said why above (exit 2, as `tasks list`)
            raise typer.Exit(USAGE_EXIT)
        no_tasks([suite], filtered=bool(levels or tasks))
    return loaded, errors


def _print_outcome(outcome, as_json: bool, where: str) -> None:
    """check.json on stdout (--json) or the tables, then on stderr what ran and where the
    files are."""
    if as_json:
        echo_json(outcome.files.json.read_text())
    else:
        title = f"{plural(len(outcome.records), 'reference')}, {where}"
        for table in _table(outcome, title):
            console.print(table)
    err_console.print(
        f"{outcome.measured} run, {outcome.skipped} resumed, "
        f"{outcome.wall_s:.0f} s; {outcome.files.json} · {outcome.files.markdown}",
        highlight=False,
        soft_wrap=True,
    )


def register(app: typer.Typer) -> None:
    app.command("check")(check_command)
