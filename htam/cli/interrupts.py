"""Ctrl-C, whenever it comes: every command stops with exit status 130 and one line on stderr
(``--json``: one JSON object on stdout too), never a traceback. (The evaluator's fork server,
in a session of its own, is killed by the Evaluator before its folder goes, also when Ctrl-C
comes while it starts: ``ForkServer.kill``.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

import typer

INTERRUPTED_EXIT = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C

_said: list[tuple[Callable[[], str], dict]] = []


def on_interrupt(message: Callable[[], str], **fields: object) -> None:
    """What an interruption of this command says from now on (``optimize``: the ``--resume``
    command that continues), and the fields its JSON object adds."""
    _said[:] = [(message, fields)]


def clear_hooks() -> None:
    _said.clear()


def interrupted(code: int = INTERRUPTED_EXIT) -> NoReturn:
    """Say what ``on_interrupt`` set (else "interrupted") on one line of stderr (and as a JSON
    object on stdout under ``--json``), and exit ``code``: ``INTERRUPTED_EXIT``, or for SIGTERM
    143, saying "terminated" (seen: SIGTERM gave no ``--resume`` line)."""
    from htam.cli.common import err_console
    from htam.cli.json_errors import json_requested, print_json_error

    message, fields = "interrupted", dict[str, object]()
    if _said:
        say, fields = _said[0]
        message = say()
    _said.clear()
    if code != INTERRUPTED_EXIT:
        message = message.replace("interrupted", "terminated", 1)
        fields = {k: "terminated" if v == "interrupted" else v for k, v in fields.items()}
    if json_requested():
        print_json_error(message, code, **fields)
    err_console.print(message, highlight=False, soft_wrap=True, markup=False)
    raise typer.Exit(code)
