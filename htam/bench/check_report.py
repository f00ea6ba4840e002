"""The files of ``htam tasks check``: OUT/check.json (config, per-level summary, every record)
and OUT/check.md (the same as tables; causes on one line, the full ones in check.json)."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from htam.bench import markdown
from htam.tasks.signatures import human

STATUSES = ("ok", "compile_failed", "failed")


class CheckError(Exception):
    pass


@dataclass
class CheckFiles:
    json: Path
    markdown: Path


def load_records(out: Path) -> dict[str, dict[str, Any]]:
    path = Path(out) / "results.jsonl"
    last: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                last[record["id"]] = record
    return last


def check_identity(out: Path, identity: dict[str, Any]) -> None:
    """Record what the records of ``out`` depend on; refuse a check that would mix others in."""
    path = Path(out) / "config.json"
    if path.exists():
        old = json.loads(path.read_text())
        changed = [k for k, v in identity.items() if old.get(k) != v]
        if changed:
            raise CheckError(
                f"{out} holds a check with another {', '.join(changed)}; choose another --out"
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(identity, indent=2))


def geomean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, kept)) / len(kept)) if kept else None


def stats(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts per status; geometric means over the tasks that have the measurement."""
    timed = [r for r in records if r.get("ratio")]
    return {
        "tasks": len(records),
        **{s: sum(r["status"] == s for r in records) for s in STATUSES},
        "geomean_eager_over_compile": geomean([r["ratio"] for r in timed]),
        "compile_faster": sum(r["ratio"] > 1 for r in timed),
        "geomean_sol_eager": geomean([r.get("sol_eager") for r in records]),
        "geomean_sol_compile": geomean([r.get("sol_compile") for r in records]),
        "eager_ms_total": sum(r.get("eager_ms") or 0.0 for r in records),
        "measure_s_total": sum(r.get("time_s") or 0.0 for r in records),
    }


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    by_level: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_level["none" if r.get("level") is None else str(r["level"])].append(r)
    return {"levels": {lv: stats(rs) for lv, rs in sorted(by_level.items())}, "all": stats(records)}


DEFINITIONS = {
    "status": "ok: the reference ran and was timed; compile_failed: eager timed, torch.compile "
    "could not be; failed: the reference did not run (cause says why)",
    "eager_ms / compile_ms": "median time of the eager / torch.compile reference, timed side by "
    "side in one process (CUDA events on a GPU)",
    "ratio": "eager_ms / compile_ms: above 1, torch.compile is faster",
    "flops / bytes": "FLOPs counted by FlopCounterMode; bytes of inputs + outputs + parameters",
    "bound_ms / bound": "roofline lower bound on the time from the measured device peaks, and "
    "whether memory or compute sets it",
    "sol_eager / sol_compile": "% of speed of light: bound_ms / eager_ms (/ compile_ms)",
    "geomean_eager_over_compile": "geometric mean of ratio over the tasks with both times",
}


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}x"


def task_row(r: dict[str, Any]) -> list[str]:
    """One task as table cells (shared by the Markdown file and the terminal table)."""
    return [
        r["id"],
        r["status"],
        _ms(r.get("eager_ms")),
        _ms(r.get("compile_ms")),
        _x(r.get("ratio")),
        human(r["flops"]) if r.get("flops") is not None else "-",
        human(r["bytes"], "B") if r.get("bytes") is not None else "-",
        _ms(r.get("bound_ms")),
        r.get("bound") or "-",
        _pct(r.get("sol_eager")),
        r.get("cause") or "",
    ]


TASK_HEADERS = [
    "task",
    "status",
    "eager ms",
    "compile ms",
    "eager/compile",
    "FLOPs",
    "bytes",
    "bound ms",
    "bound",
    "SoL eager",
    "cause",
]
LEVEL_HEADERS = [
    "level",
    "tasks",
    "ok",
    "compile failed",
    "failed",
    "geomean eager/compile",
    "compile faster",
    "geomean SoL eager",
    "measure s",
]


def level_row(level: str, s: dict[str, Any]) -> list[str]:
    return [
        level,
        str(s["tasks"]),
        str(s["ok"]),
        str(s["compile_failed"]),
        str(s["failed"]),
        _x(s["geomean_eager_over_compile"]),
        str(s["compile_faster"]),
        _pct(s["geomean_sol_eager"]),
        f"{s['measure_s_total']:.0f}",
    ]


def render_markdown(
    records: list[dict[str, Any]], summary: dict[str, Any], identity: dict[str, Any]
) -> str:
    devices = sorted({r["device"] for r in records if r.get("device")})
    lines = [
        "# htam tasks check",
        "",
        f"{len(records)} tasks; target {identity['target']}, size {identity['size']}; "
        f"device {', '.join(devices) or 'n/a'}.",
        "",
        "## Per level",
        "",
    ]
    rows = [level_row(lv, s) for lv, s in summary["levels"].items()]
    lines += markdown.table(LEVEL_HEADERS, [*rows, level_row("all", summary["all"])])
    lines += ["", "## Tasks", "", "Full causes are in check.json (`detail`).", ""]
    lines += markdown.table(TASK_HEADERS, [task_row(r) for r in records])
    lines += ["", "## Definitions", ""]
    lines += [f"- **{k}**: {v}" for k, v in DEFINITIONS.items()]
    return "\n".join(lines) + "\n"


def write_files(out: Path, records: list[dict[str, Any]], identity: dict[str, Any]) -> CheckFiles:
    out = Path(out)
    summary = summarize(records)
    data = {"config": identity, "summary": summary, "definitions": DEFINITIONS, "tasks": records}
    json_path, md_path = out / "check.json", out / "check.md"
    json_path.write_text(json.dumps(data, indent=2))
    md_path.write_text(render_markdown(records, summary, identity))
    return CheckFiles(json_path, md_path)
