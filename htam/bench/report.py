"""Bench reports: OUT/metrics.json, OUT/report.md (+ OUT/plots/*.png) and a self-contained
OUT/report.html (figures inlined as base64 PNG data URIs; no external resource of any kind)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from htam.bench import markdown, plots, throughput
from htam.bench.metrics import UnitRow
from htam.bench.report_tables import (
    Table,
    curve_table,
    level_table,
    method_table,
    target,
    unit_table,
)
from htam.bench.results import bench_metrics, load_rows

TEMPLATES = Path(__file__).parent / "templates"
MAX_MEMORY_GRAPHS = 4


@dataclass
class Figure:
    name: str
    caption: str
    png: bytes
    data: dict[str, Any] = field(default_factory=dict)  # what the figure shows, as drawn


@dataclass
class ReportFiles:
    metrics: Path
    markdown: Path
    html: Path
    figures: list[Path]


def memory_banks(out: Path) -> list[Path]:
    """The shared banks of the bench that learned something (frozen-mode private copies are not
    drawn), first seeds first so that every method gets a graph before any gets its second."""
    from htam.memory import MemoryBank

    def learned(bank_file: Path) -> bool:
        with MemoryBank.open(bank_file) as bank:
            return bank.step_count() > 0

    def seed_first(bank_file: Path) -> tuple[str, str]:
        method, _, seed = bank_file.stem.rpartition("-")
        return seed, method

    banks = sorted((Path(out) / "memory").glob("*.db"), key=seed_first)
    return [bank for bank in banks if learned(bank)][:MAX_MEMORY_GRAPHS]


def make_figures(out: Path, rows: list[UnitRow], metrics: dict[str, Any]) -> list[Figure]:
    methods = list(metrics["methods"])
    if not methods:
        return []
    drawn = [
        (
            "speedup_distribution",
            "Best speedup vs eager per unit (correct units; log scale; a box only over "
            f"{plots.BOX_MIN_POINTS} points or more)",
            plots.speedup_distribution(rows, methods),
        ),
        (
            "levels",
            "Correctness, fast@1, best-candidate geomean (failures as 1.0) and kept "
            "geomean per level",
            plots.level_bars(metrics["by_level"], methods),
        ),
        (
            "discovery_curves",
            "Mean best speedup vs eager after each step; a unit with no correct candidate yet "
            "counts as 1.0, the reference's own speed",
            plots.discovery_curves(metrics["methods"]),
        ),
    ]
    for bank in memory_banks(out):
        caption = (
            f"Memory graph of {bank.name}: solid edges were taken in this bench, dotted grey "
            "ones are the seed's prior only"
        )
        drawn.append((f"memory_{bank.stem}", caption, plots.memory_graph(bank)))
    return [Figure(name, caption, plot.png, plot.data) for name, caption, plot in drawn]


def _subtitle(metrics: dict[str, Any]) -> str:
    ident = metrics.get("bench", {})
    parts = [f"{k}: {v}" for k, v in ident.items() if v is not None]
    return f"{metrics['planned_units']} planned units, {metrics['not_run']} not run. " + "; ".join(
        parts
    )


def _markdown(
    title: str, metrics: dict[str, Any], tables: list[Table], figures: list[Figure]
) -> str:
    lines = [f"# {title}", "", _subtitle(metrics), ""]
    lines += [f"> **Note:** {n}\n" for n in metrics["notes"]]
    for table in tables:
        lines += [f"## {table.title}", "", *markdown.table(table.headers, table.rows), ""]
    lines += ["## Figures", ""]
    lines += [f"![{f.caption}](plots/{f.name}.png)\n" for f in figures]
    lines += ["## Definitions", ""]
    lines += [f"- **{k}**: {v}" for k, v in metrics["definitions"].items()]
    return "\n".join(lines) + "\n"


def _html(title: str, metrics: dict[str, Any], tables: list[Table], figures: list[Figure]) -> str:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["j2"]))
    inline = [
        {
            "name": f.name,
            "caption": f.caption,
            "data": base64.b64encode(f.png).decode("ascii"),
            "plot": json.dumps(f.data),
        }
        for f in figures
    ]
    return env.get_template("report.html.j2").render(
        title=title,
        subtitle=_subtitle(metrics),
        notes=metrics["notes"],
        tables=tables,
        figures=inline,
        definitions=metrics["definitions"],
    )


def write_report(out: Path, title: str | None = None) -> ReportFiles:
    """(Re)compute metrics from the unit summaries in ``out`` and write every report file."""
    out = Path(out)
    rows = load_rows(out)
    metrics = bench_metrics(out)
    speed = throughput.throughput(throughput.load_events(out))
    if speed is not None:
        metrics["throughput"] = speed
        metrics["definitions"] = {**metrics["definitions"], **throughput.DEFINITIONS}
    title = title or f"HTAM bench: {out.name}"
    metrics_path = out / "metrics.json"
    metrics_path.write_text(json.dumps(metrics, indent=2))
    figures = make_figures(out, rows, metrics)
    plot_dir = out / "plots"
    plot_dir.mkdir(exist_ok=True)
    paths = []
    for fig in figures:
        path = plot_dir / f"{fig.name}.png"
        path.write_bytes(fig.png)
        paths.append(path)
    tables = [
        method_table(metrics, target(metrics, rows)),
        level_table(metrics),
        curve_table(metrics),
        unit_table(rows, out),
    ]
    if speed is not None:
        tables.insert(1, throughput.throughput_table(speed))
    markdown = out / "report.md"
    markdown.write_text(_markdown(title, metrics, tables, figures))
    html = out / "report.html"
    html.write_text(_html(title, metrics, tables, figures))
    return ReportFiles(metrics_path, markdown, html, paths)
