"""``--json``: one JSON object on stdout and nothing else (``echo_json``; whatever else the
command's code prints, a task file's ``print`` included, goes to stderr meanwhile), also on the
way out of an error, beside the error line on stderr, for the usage errors ``fail`` prints and
for those click finds before a command runs."""

from __future__ import annotations

import contextvars
import json
import sys
from typing import TYPE_CHECKING, Any

from rich.errors import MarkupError
from rich.text import Text

from htam.cli.help_format import HelpCommand, HelpGroup

try:
    from typer._click import ClickException  # a recent typer runs its own copy of click
except ImportError:  # pragma: no cover - older typer: click itself
    from click import ClickException  # type: ignore[assignment]  # the same class, click's copy

if TYPE_CHECKING:  # the context class of the click that typer runs (typer.Context derives it)
    from typer._click.core import Context as ClickContext


# Whether the running command was given --json (each command names it ``as_json``): set by
# JsonErrorsCommand for the time the command runs.
_JSON_MODE: contextvars.ContextVar[bool] = contextvars.ContextVar("htam_json", default=False)
# The real stdout while a --json command runs with sys.stdout pointed at stderr.
_JSON_OUT: contextvars.ContextVar = contextvars.ContextVar("htam_json_out", default=None)


def json_requested() -> bool:
    return _JSON_MODE.get()


def echo_json(data: object, **dumps: Any) -> None:
    """A ``--json`` command's object (or its text, already JSON), on the real stdout."""
    out = _JSON_OUT.get() or sys.stdout
    text = data if isinstance(data, str) else json.dumps(data, **dumps)
    out.write(text.rstrip("\n") + "\n")
    out.flush()


def print_json_error(message: str, code: int, **fields: object) -> None:
    """The JSON object a ``--json`` command prints on stdout when it stops without a result."""
    line = " ".join(str(message).split())  # one line, as on stderr
    echo_json({**fields, "error": line, "exit_code": code})


def json_in(args: list[str]) -> bool:
    """Whether ``--json`` is among ``args`` as an option (not after ``--``, where it is a value)."""
    options = args[: args.index("--")] if "--" in args else args
    return "--json" in options


def plain(message: str) -> str:
    """The text the error line shows: rich markup (``htam\\[ray]``) rendered."""
    try:
        return Text.from_markup(message).plain
    except MarkupError:
        return message


class JsonErrorsCommand(HelpCommand):
    """A command whose usage errors found by click itself (an unknown option, a bad or missing
    value: before the command runs, so ``fail`` never sees them) also print the JSON object of
    ``print_json_error`` on stdout when ``--json`` is on the command line; stderr keeps click's
    own message. Commands without ``--json`` are unchanged."""

    def _wants_json(self, args: list[str]) -> bool:
        if not any("--json" in getattr(p, "opts", ()) for p in self.params):
            return False
        return json_in(args)

    def make_context(self, info_name, args, parent=None, **extra):
        raw = list(args)  # the parser consumes the list it is given
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except ClickException as exc:
            if self._wants_json(raw):
                print_json_error(exc.format_message(), exc.exit_code)
            raise

    def invoke(self, ctx: ClickContext):
        as_json = bool(ctx.params.get("as_json"))
        token = _JSON_MODE.set(as_json)
        real = sys.stdout
        out = _JSON_OUT.set(real if as_json else None)
        if as_json:  # seen: a task file's print() went before the object
            sys.stdout = sys.stderr
        try:
            return super().invoke(ctx)
        except ClickException as exc:  # typer.BadParameter raised by a command itself
            if as_json:
                print_json_error(exc.format_message(), exc.exit_code)
            raise
        finally:
            sys.stdout = real
            _JSON_OUT.reset(out)
            _JSON_MODE.reset(token)


class JsonErrorsGroup(HelpGroup):
    """A group (``htam``, ``htam tasks``, ``htam memory``) whose own usage errors, an unknown
    option or command (``htam optimise x --json``, ``htam --json``), also print the JSON object
    of ``print_json_error`` on stdout when ``--json`` is anywhere on the command line. Errors of
    the command it runs are that command's (JsonErrorsCommand): they are not printed twice."""

    def make_context(self, info_name, args, parent=None, **extra):
        raw = list(args)  # the parser consumes the list it is given
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except ClickException as exc:
            if json_in(raw):
                print_json_error(exc.format_message(), exc.exit_code)
            raise

    def resolve_command(self, ctx: ClickContext, args: list[str]):
        try:  # typer's own adds "Did you mean 'optimize'?" to the message
            return super().resolve_command(ctx, args)
        except ClickException as exc:
            if json_in(args):
                print_json_error(exc.format_message(), exc.exit_code)
            raise
