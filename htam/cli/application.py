"""The ``htam`` application: every command, from the modules that each register theirs with
``register(app)``. Importing it installs no signal handler (``htam.cli.main`` does, for the
process it runs) and imports no torch: the commands import what they run when they run."""

from __future__ import annotations

import importlib
import os
import sys

import typer
from typer.models import DefaultPlaceholder

from htam import __version__
from htam.cli.common import (
    console,
    pipe_safe,
)
from htam.cli.json_errors import JsonErrorsCommand, JsonErrorsGroup

app = typer.Typer(
    name="htam",
    help="HTAM: LLM-driven GPU operator optimization guided by a Hierarchical Transition Graph.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    cls=JsonErrorsGroup,
    # click's plain help: rich's boxed tables squeezed each help text into a narrow column at 80
    # (words cut to "OpenAI-compatib…"); plain text wraps whole words and pipes cleanly
    rich_markup_mode=None,
    context_settings={"max_content_width": 100},
)


# Command modules, each registering its commands on ``app``. Add a module here to add commands.
COMMAND_MODULES: list[str] = [
    "tasks_cmd",
    "eval_cmd",
    "memory_cmd",
    "memory_scope_cmd",  # adds its commands to memory_cmd's group: after it
    "optimize_cmd",
    "bench_cmd",
    "report_cmd",
    "transfer_cmd",
    "doctor_cmd",
]

for _name in COMMAND_MODULES:
    importlib.import_module(f"htam.cli.{_name}").register(app)


def _pipe_safe_commands(typer_app: typer.Typer) -> None:
    """Every command, in sub-groups too, stops quietly (exit 141) when its stdout is closed, and
    with ``--json`` answers a usage error click finds with a JSON object too (JsonErrorsCommand;
    a sub-group's own, an unknown command, JsonErrorsGroup as ``htam``'s)."""
    for info in typer_app.registered_commands:
        if info.callback is not None:
            info.callback = pipe_safe(info.callback)
        if info.cls in (None, typer.core.TyperCommand):  # typer's default, unless one is set
            info.cls = JsonErrorsCommand
    for group in typer_app.registered_groups:
        if isinstance(group.cls, DefaultPlaceholder):  # typer's default, unless one is set
            group.cls = JsonErrorsGroup
        if group.typer_instance is not None:
            _pipe_safe_commands(group.typer_instance)


_pipe_safe_commands(app)

# Off a terminal (a pipe, a file) rich would fit tables into 80 columns, or the width of a
# terminal still attached to stdin, cutting ids to "builtin/level1…"; output there is plain and
# as wide as its content. An explicit COLUMNS still wins. Only the commands' own console is
# widened: help text keeps its 80 columns in a pipe (``htam bench --help | less``).
PIPE_COLUMNS = 1000


def _version(value: bool) -> None:
    if value:
        typer.echo(f"htam {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit():  # read per invocation: the console outlives one (tests, notebooks)
        console.width = int(columns)
    elif not sys.stdout.isatty():
        console.width = PIPE_COLUMNS
