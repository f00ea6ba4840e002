"""``htam report`` and ``htam compare``: a bench directory's metrics, report.md and report.html
recomputed from its unit summaries, and two benches side by side."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from htam.cli.common import console, fail, path_error


def fmt(value: float | None, kind: str) -> str:
    if value is None:
        return "n/a"
    return {"pct": f"{100 * value:.1f}%", "x": f"{value:.3g}x", "usd": f"${value:.4f}"}[kind]


def print_metrics(path: Path) -> None:
    import json

    metrics = json.loads(path.read_text())
    table = Table(title="bench")
    for name in (
        "method",
        "units",
        "correct",
        "fast@1",
        "candidate geomean (fail=1)",
        "candidate geomean (excl)",
        "kept geomean",
        "cost",
    ):
        table.add_column(name)
    for method, m in metrics["methods"].items():
        table.add_row(
            method,
            str(m["units"]),
            fmt(m["correctness"], "pct"),
            fmt(m["fast_1"], "pct"),
            fmt(m["candidate_geomean_eager_fail1"], "x"),
            fmt(m["candidate_geomean_eager_excl"], "x"),
            fmt(m["kept_geomean_eager"], "x"),
            fmt(m["cost_usd"], "usd"),
        )
    console.print(table)
    for note in metrics["notes"]:
        console.print(f"[yellow]note:[/] {note}")


def _bench_dir(path: Path) -> None:
    """A missing path is said as such, before "not a bench directory (no plan.json)"."""
    if not path.exists():
        fail(f"{path}: no such directory (give the --out of an `htam bench` run)")
    if not path.is_dir():
        fail(f"{path}: not a directory (give the --out of an `htam bench` run)")


def report_command(
    run_dir: Path = typer.Argument(
        ..., metavar="RUN_DIR", help="a bench directory (--out of htam bench)"
    ),
) -> None:
    """Recompute metrics.json, report.md and report.html from the unit summaries in RUN_DIR."""
    from htam.bench import ResultsError, write_report

    _bench_dir(run_dir)
    try:
        files = write_report(run_dir)
    except ResultsError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(path_error(exc, doing="cannot write the report"))
    print_metrics(files.metrics)
    console.print(f"report: {files.markdown} · {files.html}")


def compare_command(
    run_a: Path = typer.Argument(..., metavar="RUN_A", help="first bench directory"),
    run_b: Path = typer.Argument(..., metavar="RUN_B", help="second bench directory"),
) -> None:
    """Print two benches side by side, per method: correctness, fast@1, geomean, cost."""
    from htam.bench import ResultsError, bench_metrics

    _bench_dir(run_a)
    _bench_dir(run_b)
    try:
        a, b = bench_metrics(run_a), bench_metrics(run_b)
    except ResultsError as exc:
        fail(str(exc))
    table = Table(title=f"A = {run_a}  vs  B = {run_b}")
    table.add_column("method")
    for name in ("correct", "fast@1", "candidate geomean (fail=1)", "kept geomean", "cost"):
        table.add_column(f"{name}\nA / B", justify="right")
    for method in dict.fromkeys([*a["methods"], *b["methods"]]):
        ma, mb = a["methods"].get(method, {}), b["methods"].get(method, {})
        cells = [method]
        for key, kind in (
            ("correctness", "pct"),
            ("fast_1", "pct"),
            ("candidate_geomean_eager_fail1", "x"),
            ("kept_geomean_eager", "x"),
            ("cost_usd", "usd"),
        ):
            cells.append(f"{fmt(ma.get(key), kind)} / {fmt(mb.get(key), kind)}")
        table.add_row(*cells)
    console.print(table)
    for note in differences(run_a, run_b, a["bench"], b["bench"]):
        console.print(f"[yellow]note:[/] {note}", highlight=False)


def differences(run_a: Path, run_b: Path, a: dict, b: dict) -> list[str]:
    """What the two benches ran differently (their settings, their tasks): figures side by side
    mean little when they differ (seen: compare said nothing of it)."""
    from htam.bench.results import load_plan

    notes = [
        f"{key.replace('_', ' ')} differs: A {a[key]}, B {b[key]}"
        for key in dict.fromkeys([*a, *b])
        if key in a and key in b and a[key] != b[key]
    ]
    tasks_a, tasks_b = ({u.task_id for u in load_plan(run)} for run in (run_a, run_b))
    if tasks_a != tasks_b:
        notes.append(
            f"the tasks differ: {len(tasks_a - tasks_b)} only in A, {len(tasks_b - tasks_a)} only "
            f"in B, {len(tasks_a & tasks_b)} in both"
        )
    return notes


def register(app: typer.Typer) -> None:
    app.command("report")(report_command)
    app.command("compare")(compare_command)
