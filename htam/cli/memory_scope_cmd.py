"""``htam memory scopes`` and ``htam memory merge-scope``: what runs on each target learned,
and the one way a target's learning reaches another's runs (htam.memory.scopes)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from htam.cli.common import console, default_memory, fail
from htam.cli.json_errors import echo_json
from htam.vocab import Target

if TYPE_CHECKING:
    from htam.memory import MemoryBank


def register(app: typer.Typer) -> None:
    """Add the scope commands to ``htam memory`` (registered by htam.cli.memory_cmd)."""
    from htam.cli.memory_cmd import memory_app

    memory_app.command("scopes")(scopes_cmd)
    memory_app.command("merge-scope")(merge_scope_cmd)


def _open(path: Path | None) -> MemoryBank:
    from htam.memory import MemoryBank, MemoryBankError

    path = path or default_memory()
    try:
        return MemoryBank.open(path)
    except MemoryBankError as error:
        fail(str(error))


def scopes_cmd(
    path: Annotated[
        Path | None, typer.Argument(metavar="PATH", help="Bank file (default: `htam memory path`).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
) -> None:
    """What runs on each target learned: steps, node tries and evidence per scope."""
    with _open(path) as bank:
        found = bank.scopes()
        home = bank.scope
    rows = {scope: {"steps": s, "tries": t, "evidence": e} for scope, (s, t, e) in found.items()}
    if as_json:
        echo_json({"scopes": rows, "read_by_default": home})
        return
    table = Table(title="Scopes (a run reads and learns its target's only)")
    for column in ("scope", "steps", "node tries", "evidence"):
        table.add_column(column, justify="left" if column == "scope" else "right")
    for scope, row in rows.items():
        table.add_row(scope, *(str(row[k]) for k in ("steps", "tries", "evidence")))
    console.print(table)
    typer.echo(f"`htam memory show` reads scope {home!r} (the one with the most steps)")


def merge_scope_cmd(
    from_scope: Annotated[
        str, typer.Option("--from-scope", help="Scope to copy from: a target, or 'unscoped'.")
    ],
    into_scope: Annotated[str, typer.Option("--into-scope", help="Target whose scope learns.")],
    path: Annotated[
        Path | None, typer.Argument(metavar="PATH", help="Bank file (default: `htam memory path`).")
    ] = None,
) -> None:
    """Teach one target's runs what another's learned: statistics add, evidence is copied
    (marked with what it was measured on). Once per pair: again would count it twice."""
    from htam.memory.scopes import ScopeMergeError
    from htam.policy import PolicyConfig

    targets = [str(t) for t in Target]
    if into_scope not in targets:
        fail(f"--into-scope {into_scope!r}: a run reads the scope of its target: {targets}")
    with _open(path) as bank:
        try:
            copied = bank.merge_scope(from_scope, into_scope, config=PolicyConfig())
        except ScopeMergeError as error:
            fail(str(error))
    typer.echo(
        f"merged scope {from_scope} into {into_scope}: {copied['nodes']} node and "
        f"{copied['edges']} edge statistics added, {copied['evidence']} evidence records and "
        f"{copied['flat']} flat experiences copied"
    )
