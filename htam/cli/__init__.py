"""The ``htam`` command line. Each command group lives in its own module with ``register(app)``."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="htam",
    help="HTAM: LLM-driven GPU operator optimization guided by a Hierarchical Transition Graph.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)

# Command modules, each registering its commands on ``app``. Add a module here to add commands.
COMMAND_MODULES: list[str] = ["tasks_cmd", "eval_cmd", "memory_cmd", "optimize_cmd", "bench_cmd"]

for _name in COMMAND_MODULES:
    importlib.import_module(f"htam.cli.{_name}").register(app)


def main() -> None:
    app()
