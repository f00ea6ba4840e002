"""``htam transfer``: build a memory on one suite and run another with it (frozen, accumulate)
against a fresh bank; and ``htam tasks configs``: the configurations each task is checked on."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from htam.cli.common import (
    LANGUAGE_HELP,
    TARGET_HELP,
    console,
    fail,
    no_tasks,
    resolve_target,
    writable_dir,
)
from htam.cli.fmt import plural
from htam.cli.llm_options import (
    BaseUrl,
    LlmPreset,
    LlmTimeout,
    ModelName,
    build_proposer,
    check_llm_options,
)
from htam.cli.optimize_runs import resume_on_interrupt
from htam.cli.sizes import (
    default_size,
)
from htam.cli.suites import check_suites, load_tasks, print_progress
from htam.cli.workers import LOCAL_WORKERS_HELP, plan_workers


def transfer_command(
    ctx: typer.Context,
    source: str = typer.Argument(
        ..., help="suite the memory is built on, e.g. a KernelBench checkout"
    ),
    target_suite: str = typer.Argument(
        ..., help="suite it is applied to, e.g. robust-kbench/tasks"
    ),
    method: str = typer.Option("htam", help="the memory-reading method compared"),
    steps: int = typer.Option(6, min=1, help="optimization steps T per unit (every arm)"),
    seeds: int = typer.Option(2, min=1, help="seeds 0..N-1 (every arm)"),
    source_tasks: str | None = typer.Option(None, help="globs on the source suite's task ids"),
    tasks: str | None = typer.Option(None, help="globs on the target suite's task ids"),
    llm: LlmPreset = None,
    base_url: BaseUrl = None,
    model: ModelName = None,
    llm_timeout: LlmTimeout = None,
    proposer: str | None = typer.Option(None, help="a custom proposer factory module:attr"),
    target: str | None = typer.Option(None, help=TARGET_HELP),
    language: str | None = typer.Option(None, help=LANGUAGE_HELP),
    size: str | None = typer.Option(None, help="task size: small (CPU) or large (GPU)"),
    gpus: str = typer.Option("all", help="all, or indices of visible GPUs (one worker each)"),
    workers: int | None = typer.Option(None, min=1, help=LOCAL_WORKERS_HELP),
    out: Path = typer.Option(Path("runs/transfer"), help="experiment directory"),
    resume: bool = typer.Option(False, "--resume", help="continue the experiment in --out"),
) -> None:
    """Build a bank on SOURCE (accumulate), then run TARGET_SUITE fresh, frozen and accumulate
    from it; writes OUT/transfer.md, transfer.json and curves.png."""
    from htam.bench import BenchConfig, BenchError, ProposerSpec
    from htam.bench.transfer import run_transfer

    offline = llm is None and base_url is None and proposer is None
    target, language = resolve_target(target, language, offline=offline)
    check_suites([source, target_suite])
    writable_dir(out, "--out")  # before the tasks load (seen: a raw errno after)
    resume_on_interrupt(ctx, out, "experiment")
    source_list = load_tasks([source], None, source_tasks)
    target_list = load_tasks([target_suite], None, tasks)
    backward = [t.id for t in target_list if t.kind == "backward"]
    if backward and offline:
        target_list = [t for t in target_list if t.kind != "backward"]
        console.print(
            f"[yellow]note:[/] {len(backward)} backward task(s) left out: the offline proposer "
            "writes forward kernels only (an LLM method takes them: docs/robust-kbench.md)"
        )
    if not target_list:
        fail(f"no task in {target_suite} matches")
    # Its phases run one after another on the same workers: the largest one counts.
    units = seeds * max(len(source_list), len(target_list))
    devices = plan_workers(
        target, workers, units, "unit", " (tasks x seeds, in its largest phase)", gpus=gpus
    ).devices
    check_llm_options(llm, base_url, model)
    spec = ProposerSpec(
        llm=llm, base_url=base_url, model=model, factory=proposer, llm_timeout_s=llm_timeout
    )
    build_proposer(spec, target, language)
    if (out / "build" / "bench.json").exists() and not resume:
        fail(f"{out} already holds a transfer experiment; pass --resume or choose another --out")
    try:
        base = BenchConfig(
            out=out,
            methods=[method],
            seeds=seeds,
            steps=steps,
            target=target,
            language=language,
            size=default_size(target, size),
            devices=devices,
            proposer=spec,
        )
        files = run_transfer(
            base,
            source_list,
            target_list,
            resume=resume,
            on_phase=lambda text: console.print(f"[bold]{escape(text)}[/]"),
            on_event=print_progress,
        )
    except (BenchError, ValueError, FileNotFoundError) as exc:
        fail(str(exc))
    console.print(files.markdown.read_text(), markup=False, highlight=False)
    console.print(f"report: {files.markdown} · {files.json}")


def configs_command(
    path: str = typer.Argument("builtin", help="a suite: builtin, a checkout, a task folder"),
    pattern: str | None = typer.Option(
        None, "--tasks", "--pattern", help="fnmatch globs on task id or name"
    ),
) -> None:
    """Each task's kind and configurations: the timed one and how many are checked."""
    from htam.tasks import TaskError, load_suite, num_extra
    from htam.tasks.module import exec_task_source, size_overrides

    try:
        tasks = load_suite(path, None, pattern, validate=False)
    except TaskError as error:
        fail(str(error))
    if not tasks:  # as `tasks list` (seen: an empty table, exit 0)
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


def register(app: typer.Typer) -> None:
    from htam.cli.tasks_cmd import tasks_app

    app.command("transfer")(transfer_command)
    tasks_app.command("configs")(configs_command)
