"""Help text as plain text (click's, not rich's boxes), wrapped between words only."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer.core

if TYPE_CHECKING:  # the classes of the click that typer runs, as mypy sees them
    from typer._click.core import Context as _Context
    from typer._click.formatting import HelpFormatter as _Formatter
else:  # typer's click (its own copy, in recent ones)
    _Context = typer.core.TyperCommand.context_class
    _Formatter = _Context.formatter_class
_HYPHEN = "\u2011"  # a non-breaking hyphen, while a help text is wrapped


class _WholeNamesFormatter(_Formatter):
    """Option help wrapped between words only: a method such as ``no-hierarchy`` is never cut at
    its hyphen (``no-`` ending a line reads as a name of its own)."""

    def write_dl(self, rows, *args, **kwargs):
        start = len(self.buffer)
        rows = [(term, text.replace("-", _HYPHEN)) for term, text in rows]
        super().write_dl(rows, *args, **kwargs)
        self.buffer[start:] = [s.replace(_HYPHEN, "-") for s in self.buffer[start:]]


class _HelpContext(_Context):
    formatter_class = _WholeNamesFormatter


class HelpCommand(typer.core.TyperCommand):
    """A command whose usage line names its arguments as its help does, in capitals:
    ``htam eval [OPTIONS] TASK SOLUTION_FILE``, where typer wrote ``{TASK} {solution_file}``."""

    context_class = _HelpContext

    def collect_usage_pieces(self, ctx) -> list[str]:
        return [piece.replace("{", "").replace("}", "").upper() if piece != self.options_metavar
                else piece for piece in super().collect_usage_pieces(ctx)]  # fmt: skip


class HelpGroup(typer.core.TyperGroup):
    """A group whose help lists each command's whole first sentence, wrapped, where click cut it
    to what fits one line ("Merge two banks: statistics add, evidence and step ledgers...")."""

    context_class = _HelpContext

    def format_commands(self, ctx, formatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=1 << 16)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
