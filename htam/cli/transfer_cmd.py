"""``htam transfer``: build a memory on one suite and run another with it (frozen, accumulate)
against a fresh bank; and ``htam tasks configs``: the configurations each task is checked on."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from htam.cli.common import (
    METHOD_HELP,
    USAGE_EXIT,
    console,
    err_console,
    fail,
    no_tasks,
    writable_dir,
)
from htam.cli.fmt import plural
from htam.cli.llm_options import BaseUrl, LlmPreset, LlmTimeout, ModelName, build_proposer
from htam.cli.optimize_runs import resume_on_interrupt
from htam.cli.options import (
    Gpus,
    Language,
    LlmOptions,
    ProposerFactory,
    Target,
    bench_config,
    resolve_run,
)
from htam.cli.sizes import default_size
from htam.cli.suites import check_suites, load_tasks, print_progress
from htam.cli.workers import LOCAL_WORKERS_HELP, plan_workers

# The options of transfer alone (the shared groups: htam.cli.options, htam.cli.llm_options).
Source = Annotated[
    str,
    typer.Argument(
        metavar="SOURCE", help="suite the memory is built on, e.g. a KernelBench checkout"
    ),
]
TargetSuite = Annotated[
    str,
    typer.Argument(metavar="TARGET_SUITE", help="suite it is applied to, e.g. robust-kbench/tasks"),
]
Method = Annotated[
    str, typer.Option("--method", help=f"the memory-reading method compared: {METHOD_HELP}")
]
Steps = Annotated[
    int, typer.Option("--steps", min=1, help="optimization steps T per unit (every arm)")
]
Seeds = Annotated[int, typer.Option("--seeds", min=1, help="seeds 0..N-1 (every arm)")]
SourceTasks = Annotated[
    str | None, typer.Option("--source-tasks", help="globs on the source suite's task ids")
]
Tasks = Annotated[str | None, typer.Option("--tasks", help="globs on the target suite's task ids")]
Size = Annotated[str | None, typer.Option("--size", help="task size: small (CPU) or large (GPU)")]
Workers = Annotated[int | None, typer.Option("--workers", min=1, help=LOCAL_WORKERS_HELP)]
Out = Annotated[Path, typer.Option("--out", help="experiment directory")]
Resume = Annotated[bool, typer.Option("--resume", help="continue the experiment in --out")]


def transfer_command(
    ctx: typer.Context,
    source: Source,
    target_suite: TargetSuite,
    method: Method = "htam",
    steps: Steps = 6,
    seeds: Seeds = 2,
    source_tasks: SourceTasks = None,
    tasks: Tasks = None,
    llm: LlmPreset = None,
    base_url: BaseUrl = None,
    model: ModelName = None,
    llm_timeout: LlmTimeout = None,
    proposer: ProposerFactory = None,
    target: Target = None,
    language: Language = None,
    size: Size = None,
    gpus: Gpus = "all",
    workers: Workers = None,
    out: Out = Path("runs/transfer"),
    resume: Resume = False,
) -> None:
    """Build a bank on SOURCE (accumulate), then run TARGET_SUITE fresh, frozen and accumulate
    from it; writes OUT/transfer.md, transfer.json and curves.png."""
    from htam.bench import BenchError
    from htam.bench.transfer import run_transfer

    llm_options = LlmOptions(llm, base_url, model, llm_timeout, factory=proposer)
    settings = resolve_run(llm_options, target, language)
    check_suites([source, target_suite])
    writable_dir(out, "--out")  # before the tasks load (seen: a raw errno after)
    resume_on_interrupt(ctx, out, "experiment")
    source_list = load_tasks([source], None, source_tasks)
    target_list = _runnable(load_tasks([target_suite], None, tasks), llm_options.offline)
    if not target_list:
        fail(f"no task in {target_suite} matches")
    # Its phases run one after another on the same workers: the largest one counts.
    units = seeds * max(len(source_list), len(target_list))
    devices = plan_workers(settings.target, workers, units, "unit",
                           " (tasks x seeds, in its largest phase)", gpus=gpus).devices  # fmt: skip
    build_proposer(settings.spec, settings.target, settings.language)
    if (out / "build" / "bench.json").exists() and not resume:
        fail(f"{out} already holds a transfer experiment; pass --resume or choose another --out")
    base = bench_config(settings, out=out, methods=[method], seeds=seeds, steps=steps,
                        size=default_size(settings.target, size), devices=devices)  # fmt: skip
    try:
        files = run_transfer(base, source_list, target_list, resume=resume,
                             on_phase=lambda text: console.print(f"[bold]{escape(text)}[/]"),
                             on_event=print_progress)  # fmt: skip
    except (BenchError, ValueError, FileNotFoundError) as exc:
        fail(str(exc))
    console.print(files.markdown.read_text(), markup=False, highlight=False)
    console.print(f"report: {files.markdown} · {files.json}")


def _runnable(tasks: list, offline: bool) -> list:
    """The target suite's tasks the proposer can write kernels for: the offline proposer writes
    forward kernels only, so backward tasks are left out (one line says how many)."""
    backward = [t.id for t in tasks if t.kind == "backward"]
    if not (backward and offline):
        return tasks
    console.print(
        f"[yellow]note:[/] {len(backward)} backward task(s) left out: the offline proposer "
        "writes forward kernels only (an LLM method takes them: docs/robust-kbench.md)"
    )
    return [t for t in tasks if t.kind != "backward"]


def configs_command(
    path: str = typer.Argument(
        "builtin", metavar="PATH", help="a suite: builtin, a checkout, a task folder"
    ),
    pattern: str | None = typer.Option(
        None, "--tasks", "--pattern", help="fnmatch globs on task id or name"
    ),
) -> None:
    """Each task's kind and configurations: the timed one and how many are checked.

    As `htam tasks list`: bad task files are one line each on stderr, the others are listed,
    and the exit code is 2 if any failed."""
    from htam.tasks import TaskError, load_suite, num_extra
    from htam.tasks.module import exec_task_source, size_overrides

    errors: list[TaskError] = []
    try:
        tasks = load_suite(path, None, pattern, errors=errors, validate=False)
    except TaskError as error:
        fail(str(error))
    if not tasks and not errors:  # as `tasks list` (seen: an empty table, exit 0)
        no_tasks([path], filtered=pattern is not None)
    table = Table(title=f"{plural(len(tasks), 'task')} from {path}")
    for column in ("id", "kind", "configurations", "timed (large size)"):
        table.add_column(column)
    for task in tasks:
        timed = size_overrides(exec_task_source(task.source), "large")
        shown = {k: v for k, v in timed.items() if k != "RKB_INIT_ARGS"}
        table.add_row(
            task.id,
            task.kind,
            f"1 timed + {num_extra(task)} checked",
            escape(str(shown or "the module's constants")),
        )
    console.print(table)
    for refused in errors:
        err_console.print(
            f"[bold red]error:[/] {escape(str(refused))}", highlight=False, soft_wrap=True
        )
    if errors:
        raise typer.Exit(USAGE_EXIT)


def register(app: typer.Typer) -> None:
    from htam.cli.tasks_cmd import tasks_app

    app.command("transfer")(transfer_command)
    tasks_app.command("configs")(configs_command)
