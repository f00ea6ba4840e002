"""``htam tasks list``: the tasks of a suite with their signatures; ``htam tasks check``: every
reference of a suite run at its real size (see htam.bench.check)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from htam.cli.common import USAGE_EXIT, console, err_console, fail, no_tasks
from htam.cli.console import LoadProgress
from htam.cli.fmt import fmt_bytes, plural
from htam.cli.json_errors import echo_json
from htam.cli.workers import parse_levels

if TYPE_CHECKING:  # torch comes with the tasks: imported when a command runs
    from htam.tasks import Task, TaskError
    from htam.tasks.signatures import Signature

# FLOPs come from torch.utils.flop_counter, which counts matrix multiplications, convolutions and
# attention only: an elementwise or reduction task counts 0, which is not its work. Such a task
# shows "-" (and JSON "flops_counted": false); its bytes, the figure that bounds it, are shown.
FLOPS_NOTE = "FLOPs: matmul, conv and attention only (torch's flop counter); - where it counts none"

tasks_app = typer.Typer(
    help="Task suites: list and inspect reference operators.", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    from htam.cli import check_cmd

    check_cmd.register(tasks_app)
    app.add_typer(tasks_app, name="tasks")


@tasks_app.command("list")
def list_tasks(
    path: Annotated[
        str,
        typer.Argument(
            metavar="PATH", help="'builtin', a KernelBench checkout, a task directory or file."
        ),
    ] = "builtin",
    levels: Annotated[str | None, typer.Option(help="Comma-separated levels, e.g. 1,2.")] = None,
    pattern: Annotated[
        str | None,
        # --tasks, as in optimize, bench and transfer; --pattern, its older name, still works
        typer.Option(
            "--tasks", "--pattern", help="fnmatch globs on task id or name, comma-separated."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help='One JSON object on stdout: {"tasks": [...], ...}.')
    ] = False,
) -> None:
    """List tasks with level, op families, FLOPs and bytes at size small, and shapes.

    Bad task files are reported one line each on stderr; the others are still listed, and the
    exit code is 2 (a usage error, as for any bad task file) if any failed. A path that holds no
    task at all is a usage error too.
    """
    from htam.tasks import TaskError, load_suite

    errors: list[TaskError] = []
    try:
        with LoadProgress(path) as progress:
            tasks = load_suite(path, parse_levels(levels), pattern, errors=errors, on_load=progress)
    except (TaskError, ValueError, FileNotFoundError) as error:
        fail(str(error))
    if not tasks and not errors:
        no_tasks([path], filtered=bool(levels or pattern))
    if as_json:
        echo_json(_listing(path, tasks, errors), indent=2)
    elif tasks:  # every file bad: their error lines alone, no empty table before them
        console.print(_table(tasks, path))
    for refused in errors:
        err_console.print(
            f"[bold red]error:[/] {escape(str(refused))}", highlight=False, soft_wrap=True
        )
    if errors:
        raise typer.Exit(USAGE_EXIT)


def _listing(path: str, tasks: list[Task], errors: list[TaskError]) -> dict:
    """One labelled object, so that a reader can tell the tasks from anything added later and
    sees the bad files too (they also go to stderr, one line each, for a person)."""
    return {
        "suite": path,
        "size": "small",  # the size the signatures are computed at
        "flops_note": FLOPS_NOTE,
        "count": len(tasks),
        "tasks": [_task_dict(t) for t in tasks],
        "errors": [str(error) for error in errors],
    }


def _task_dict(task: Task) -> dict:
    from htam.tasks import signature
    from htam.tasks.runtime import num_extra

    return {
        "id": task.id,
        "name": task.name,
        "level": task.level,
        "digest": task.digest,
        "path": str(task.path) if task.path else None,
        "kind": task.kind,
        "configs": 1 + num_extra(task),  # the timed one and those checked for correctness
        "signature": signature(task, "small").to_dict(),
        "flops_counted": flops_counted(signature(task, "small")),
    }


def flops_counted(sig: Signature) -> bool:
    """Whether the flop counter counted anything: 0 means "not counted", not "no work"."""
    return sig.flops > 0


def _table(tasks: list[Task], title: str) -> Table:
    from htam.tasks import signature
    from htam.tasks.runtime import num_extra
    from htam.tasks.signatures import format_specs, human

    table = Table(
        title=f"{plural(len(tasks), 'task')} from {title}, at size small (HTAM_SMALL, else the file's own)",
        caption=FLOPS_NOTE,
    )
    table.add_column("id")
    table.add_column("level", justify="right")
    table.add_column("families")
    table.add_column("FLOPs", justify="right")
    table.add_column("bytes", justify="right")
    table.add_column("shapes (in -> out)")
    table.add_column("configs", justify="right")
    for task in tasks:
        sig = signature(task, "small")
        table.add_row(
            task.id,
            "" if task.level is None else str(task.level),
            ", ".join(sig.families),
            human(sig.flops) if flops_counted(sig) else "-",
            fmt_bytes(sig.bytes),
            f"{format_specs(sig.inputs)} -> {format_specs(sig.outputs)}",
            str(1 + num_extra(task)),
        )
    return table
