"""The tables of a bench report (Markdown and HTML render the same ones): per method, per
level, the discovery curves and one line per unit."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from htam.bench import markdown
from htam.bench.bench_config import Unit
from htam.bench.markdown import Link
from htam.bench.metrics import FAST_PS, UnitRow


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[str | Link]]


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
