"""``htam memory``: create, inspect, plot, export, import and merge memory banks."""

from __future__ import annotations

import json
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from htam.cli.common import console, default_memory, fail, path_error
from htam.cli.json_errors import echo_json
from htam.cli.memory_view import directions_table, edges_table, locals_table, show_json

if TYPE_CHECKING:  # the commands import the bank when they run: `htam --help` stays light
    from htam.memory import MemoryBank

memory_app = typer.Typer(
    help="Memory banks: the Hierarchical Transition Graph.", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    app.add_typer(memory_app, name="memory")


def _open(path: Path) -> MemoryBank:
    from htam.memory import MemoryBank, MemoryBankError

    try:
        return MemoryBank.open(path)
    except MemoryBankError as error:
        fail(str(error))


def _is_bank(path: Path) -> bool:
    from htam.memory.schema import SQLITE_MAGIC

    with path.open("rb") as handle:
        return handle.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC


def _load_any(path: Path) -> dict[str, Any]:
    """An export from a bank file or from an exported JSON file."""
    if not path.exists():
        fail(f"{path}: no such file")
    if _is_bank(path):
        with _open(path) as bank:
            return bank.export_json()
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        fail(f"{path}: neither a memory bank nor a JSON export ({error})")


@contextmanager
def _any_bank(path: Path) -> Iterator[MemoryBank]:
    """A bank file opened, or a JSON export (what `export` and `merge` write) loaded into a
    temporary bank: show and plot take whatever merge takes."""
    from htam.memory import MemoryBank, MemoryBankError

    if _is_bank(path):
        with _open(path) as bank:
            yield bank
        return
    data = _load_any(path)
    with tempfile.TemporaryDirectory(prefix="htam-bank-") as tmp:
        try:
            bank = MemoryBank.import_json(data, Path(tmp) / "bank.sqlite")
        except (MemoryBankError, KeyError, ValueError, TypeError) as error:
            fail(f"{path}: {error}")
        with bank:
            yield bank


def _to_write(out: Path, new: bool = True) -> Path:
    """``out`` checked before anything is read or made: its folder exists (a typo is not a new
    folder; seen: `plot` made one at the root and the others gave a traceback),
    and a ``new`` file does not."""
    if new and out.exists():
        fail(f"{out}: already exists; refusing to overwrite it")
    if not out.parent.is_dir():
        cause = "is not a directory" if out.parent.exists() else "does not exist"
        fail(f"{out}: its folder {out.parent} {cause}")
    return out


def _write_json(data: dict[str, Any], out: Path) -> None:
    try:
        _to_write(out).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", "utf-8")
    except OSError as error:
        fail(f"{out}: cannot write it: {error.strerror or error}")


@memory_app.command("init")
def init(
    path: Annotated[Path, typer.Argument(metavar="PATH", help="New bank file (must not exist).")],
) -> None:
    """Create a bank from the packaged seed knowledge."""
    from htam.memory import MemoryBank, MemoryBankError

    if path.parent == default_memory().parent:  # HTAM's own cache folder: made when first used
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with MemoryBank.create(_to_write(path)) as bank:
            typer.echo(
                f"created {path}: {len(bank.direction_ids)} directions, "
                f"{len(bank.parent_of)} strategies, {len(bank.edges())} prior transitions"
            )
    except MemoryBankError as error:
        fail(str(error))
    except (OSError, sqlite3.Error) as error:
        fail(path_error(error, path, "cannot create it") if isinstance(error, OSError)
             else f"{path}: cannot create it: {error}")  # fmt: skip


@memory_app.command("export")
def export(
    path: Annotated[Path, typer.Argument(metavar="PATH", help="Bank file.")],
    out: Annotated[
        Path, typer.Argument(metavar="OUT", help="JSON file to write (must not exist).")
    ],
) -> None:
    """Write a bank as versioned JSON."""
    _to_write(out)
    with _open(path) as bank:
        _write_json(bank.export_json(), out)
    typer.echo(f"exported {path} -> {out}")


@memory_app.command("import")
def import_(
    source: Annotated[Path, typer.Argument(metavar="SOURCE", help="JSON export.")],
    path: Annotated[Path, typer.Argument(metavar="PATH", help="New bank file (must not exist).")],
) -> None:
    """Create a bank from a JSON export."""
    from htam.memory import MemoryBank, MemoryBankError

    _to_write(path)
    data = _load_any(source)
    try:
        MemoryBank.import_json(data, path).close()
    except (MemoryBankError, KeyError, ValueError) as error:
        fail(f"{source}: {error}")
    typer.echo(f"imported {source} -> {path}")


@memory_app.command("merge")
def merge_cmd(
    a: Annotated[Path, typer.Argument(metavar="A", help="Bank file or JSON export.")],
    b: Annotated[Path, typer.Argument(metavar="B", help="Bank file or JSON export.")],
    out: Annotated[
        Path, typer.Argument(metavar="OUT", help="New bank file, or a .json export to write.")
    ],
) -> None:
    """Merge two banks: statistics add, evidence and step ledgers union without duplicates."""
    from htam.memory import MemoryBank, MemoryBankError, merge
    from htam.policy import PolicyConfig

    _to_write(out)
    try:
        merged = merge(_load_any(a), _load_any(b), PolicyConfig())
        if out.suffix.lower() == ".json":
            _write_json(merged, out)
        else:
            MemoryBank.import_json(merged, out).close()
    except (MemoryBankError, KeyError, ValueError) as error:
        fail(str(error))
    typer.echo(f"merged {a} + {b} -> {out} ({len(merged['steps'])} steps)")


@memory_app.command("path")
def path_cmd() -> None:
    """Print the default bank's path (what `htam optimize` uses without --memory)."""
    path = default_memory()
    typer.echo(path)
    if not path.exists():
        typer.echo("(not created yet: the first `htam optimize` creates it)", err=True)


@memory_app.command("show")
def show(
    path: Annotated[
        Path | None,
        typer.Argument(
            metavar="PATH", help="Bank file or JSON export (default: `htam memory path`)."
        ),
    ] = None,
    top: Annotated[int, typer.Option(min=0, help="Strongest edges to list.")] = 15,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
    every: Annotated[
        bool, typer.Option("--all", help="Also list strategies never tried (JSON always does).")
    ] = False,
) -> None:
    """Directions with statistics, the strongest transitions, strategies tried or with evidence."""
    path = path or default_memory()
    if not path.exists():
        fail(f"{path}: no such bank (`htam memory init {path}` creates one)")
    with _any_bank(path) as bank:
        if as_json:
            echo_json(show_json(bank, path, top))
            return
        typer.echo(f"bank: {path}")
        console.print(directions_table(bank))
        console.print(edges_table(bank, top))
        console.print(locals_table(bank, every))
        typer.echo(f"{bank.step_count()} recorded steps")


@memory_app.command("plot")
def plot(
    path: Annotated[Path, typer.Argument(metavar="PATH", help="Bank file or JSON export.")],
    out: Annotated[Path, typer.Argument(metavar="OUT", help="Image to write: .png or .svg.")],
) -> None:
    """Draw the transition graph (node size = tries, edge width = utility)."""
    from htam.memory.plot import plot_bank
    from htam.policy import PolicyConfig
    from htam.policy.scoring import edge_utilities

    if not path.exists():
        fail(f"{path}: no such file")
    _to_write(out, new=False)
    with _any_bank(path) as bank:
        try:
            plot_bank(bank, out, edge_utilities(bank, PolicyConfig()))
        except ValueError as error:
            fail(str(error))
        except OSError as error:
            fail(path_error(error, out, "cannot write it"))
    typer.echo(f"wrote {out}")
