"""The consoles every command prints through (stdout and stderr), and the progress shown while a
suite loads."""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from htam.cli.fmt import plural

if TYPE_CHECKING:  # rich.progress is imported when a bar is shown
    from rich.progress import Progress, TaskID


class _Console(Console):
    """rich's Console, except that a closed pipe is an error the command handles (see
    ``pipe_safe``): rich itself would exit 1, the status of "no correct candidate"."""

    def print(self, *objects, **kwargs) -> None:
        """Tables fold what does not fit a narrow terminal onto more lines, never cut it to
        "buil…" (seen: ids and headers lost at 60 columns)."""
        for item in objects:
            if isinstance(item, Table):
                fold(item)
        super().print(*objects, **kwargs)

    def on_broken_pipe(self) -> None:
        self.quiet = True  # nothing more is written to it
        raise BrokenPipeError(errno.EPIPE, "the output was closed")


def fold(table: Table) -> Table:
    """``table`` with its cells folded onto more lines where they do not fit (a minimum width
    per column pushed whole columns off a 40-column terminal)."""
    for column in table.columns:
        if column.overflow == "ellipsis":  # rich's default
            column.overflow = "fold"
    return table


console = _Console()
err_console = _Console(stderr=True)


class LoadProgress:
    """``load_suite``'s ``on_load`` for a command: a transient bar on stderr when it is a
    terminal, else one line; shown from ``MANY`` tasks on (each reference runs once when it is
    loaded, and KernelBench's levels 1-3 take minutes)."""

    MANY = 20

    def __init__(self, source: str):
        self.source = source
        self.progress: Progress | None = None
        self.bar: TaskID | None = None

    def __call__(self, done: int, total: int, task_id: str) -> None:
        if total < self.MANY:
            return
        if done == 0 and not err_console.is_terminal:
            err_console.print(
                f"loading {plural(total, 'task')} from {self.source}", highlight=False
            )
        if not err_console.is_terminal:
            return
        if self.progress is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self.progress = Progress(
                TextColumn("loading tasks"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.description}"), console=err_console, transient=True,
            )  # fmt: skip
            self.progress.start()
            self.bar = self.progress.add_task("", total=total)
        if self.bar is not None:
            self.progress.update(self.bar, completed=done, description=task_id)

    def __enter__(self) -> LoadProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()
