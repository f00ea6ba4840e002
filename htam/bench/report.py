"""Bench reports: OUT/metrics.json, OUT/report.md (+ OUT/plots/*.png) and a self-contained
OUT/report.html (figures inlined as base64 PNG data URIs; no external resource of any kind)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, select_autoescape

from htam.bench import markdown, plots
from htam.bench.bench_config import Unit
from htam.bench.markdown import Link
from htam.bench.metrics import FAST_PS, UnitRow
from htam.bench.results import bench_metrics, load_rows

TEMPLATES = Path(__file__).parent / "templates"
MAX_MEMORY_GRAPHS = 4


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[str | Link]]


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


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def times(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}x"


# Two speedups, never confused: the best candidate's raw one (KernelBench's, may be below 1.0)
# and the one the user keeps (the reference stands unless a candidate beats it).
CANDIDATE_EAGER = "best candidate geomean vs eager (fail=1 / excl)"
CANDIDATE_COMPILE = "best candidate geomean vs compile (fail=1 / excl)"
KEPT_EAGER = "kept geomean vs eager (never < 1)"


def _pair(m: dict[str, Any], versus: str) -> str:
    prefix = f"candidate_geomean_{versus}"
    return f"{times(m[f'{prefix}_fail1'])} / {times(m[f'{prefix}_excl'])}"


def target(metrics: dict[str, Any], rows: list[UnitRow]) -> str | None:
    """The bench's target (cuda|cpu) from bench.json, else from where its units ran."""
    named = metrics.get("bench", {}).get("target")
    if named:
        return named
    devices = {(r.device or "").split(":")[0].rstrip("0123456789") for r in rows if r.device}
    return devices.pop() if len(devices) == 1 else None


def eval_header(target: str | None) -> str:
    # Evaluation time is device-busy time: GPU time only where a GPU did the work.
    return {"cuda": "eval (GPU) s", "cpu": "eval (CPU) s"}.get(target or "", "eval s")


def method_table(metrics: dict[str, Any], target: str | None = None) -> Table:
    headers = [
        "method",
        "units",
        "failed",
        "correct",
        "fast@1",
        *[f"fast_{p:g}" for p in FAST_PS],
        CANDIDATE_EAGER,
        CANDIDATE_COMPILE,
        KEPT_EAGER,
        "cost $",
        "tokens",
        "wall s",
        eval_header(target),
    ]
    rows = []
    for method, m in metrics["methods"].items():
        rows.append(
            [
                method,
                str(m["units"]),
                str(m["failed"]),
                pct(m["correctness"]),
                pct(m["fast_1"]),
                *[pct(m["fast_p"][str(p)]) for p in FAST_PS],
                _pair(m, "eager"),
                _pair(m, "compile"),
                times(m["kept_geomean_eager"]),
                f"{m['cost_usd']:.4f}",
                str(m["tokens"]),
                f"{m['wall_s']:.1f}",
                f"{m['eval_s']:.1f}",
            ]
        )
    return Table("Per method", headers, rows)


def level_table(metrics: dict[str, Any]) -> Table:
    headers = [
        "method",
        "level",
        "units",
        "correct",
        "fast@1",
        "fast_2",
        CANDIDATE_EAGER,
        KEPT_EAGER,
    ]
    rows = []
    for method, levels in metrics["by_level"].items():
        for level, m in levels.items():
            rows.append(
                [
                    method,
                    level,
                    str(m["units"]),
                    pct(m["correctness"]),
                    pct(m["fast_1"]),
                    pct(m["fast_p"]["2.0"]),
                    _pair(m, "eager"),
                    times(m["kept_geomean_eager"]),
                ]
            )
    return Table("Per level", headers, rows)


def curve_table(metrics: dict[str, Any]) -> Table:
    length = max((len(m["curve"]) for m in metrics["methods"].values()), default=0)
    rows = [[method, *[times(v) for v in m["curve"]]] for method, m in metrics["methods"].items()]
    return Table(
        "Discovery curves (mean best speedup after each step)",
        ["method", *[f"step {t + 1}" for t in range(length)]],
        rows,
    )


def _href(path: Path) -> str:
    return quote(path.as_posix())


def unit_links(row: UnitRow, out: Path) -> tuple[Link, Link | str]:
    """The unit's run directory, and its best.py (written only for code faster than the
    reference) or why there is none; paths relative to the report, which sits in ``out``."""
    unit = Unit(row.method, row.seed, row.task_id, row.level, row.steps_planned)
    run_dir = unit.run_dir(out).relative_to(out)
    unit_link = Link(row.key, _href(run_dir) + "/")
    if (out / run_dir / "best.py").exists():
        return unit_link, Link("best.py", _href(run_dir / "best.py"))
    return unit_link, "none: reference kept" if row.correct else "none"


def unit_table(rows: list[UnitRow], out: Path | None = None) -> Table:
    """One line per unit, linked to its run directory and best.py when ``out`` is given; an
    error is shown by its first line (the whole of it is in units.jsonl and the run directory)."""
    headers = [
        "unit",
        "best.py",
        "state",
        "best",
        "best candidate vs eager",
        "best candidate vs compile",
        "kept vs eager",
        "cost $",
        "device",
        "error",
    ]
    body = [
        [
            *(unit_links(r, out) if out is not None else (r.key, "-")),
            r.state,
            "correct" if r.correct else "not correct",
            times(r.speedup),
            times(r.speedup_vs_compile),
            times(r.kept_speedup),
            f"{r.cost_usd:.4f}",
            r.device or "-",
            markdown.one_line(r.error or "", 120),
        ]
        for r in rows
    ]
    return Table("Units", headers, body)


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
    markdown = out / "report.md"
    markdown.write_text(_markdown(title, metrics, tables, figures))
    html = out / "report.html"
    html.write_text(_html(title, metrics, tables, figures))
    return ReportFiles(metrics_path, markdown, html, paths)
