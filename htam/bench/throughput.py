"""A bench's throughput, from the evaluator's events (htam.evaluate.host.gpu_queue, under
OUT/events): candidates per GPU-hour, the GPU's busy fraction (the share of the wall time some
evaluator job held the GPU's queue), and each candidate's build time against its timed time, with
their distributions. Kept apart from the unit records: a bench run before these events existed
simply has none."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from htam.bench.report_tables import Table

DEFINITIONS = {
    "candidates per GPU-hour": "candidates evaluated (timed or failed) per hour of wall time per GPU",
    "GPU busy": "share of the wall time (first to last evaluator event) during which an "
    "evaluator job held the GPU's queue (a reference, a candidate's timed job, the peaks)",
    "build": "a candidate's build seconds: its prebuild (off the GPU's queue) plus what its timed "
    "job still compiled",
    "timed": "a candidate's seconds on the GPU's queue, less what its timed job compiled",
}


def load_events(out: Path) -> list[dict]:
    events = []
    for path in sorted((Path(out) / "events").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue  # a line cut by a killed worker
    return events


def _union_s(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def distribution(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {
        "n": len(values),
        "median": statistics.median(ordered),
        "p10": at(0.1),
        "p90": at(0.9),
        "mean": statistics.fmean(ordered),
        "max": ordered[-1],
    }


def throughput(events: list[dict]) -> dict[str, Any] | None:
    """The figures, or None without events."""
    gpu = [e for e in events if e.get("event") == "gpu"]
    cands = [e for e in events if e.get("event") == "candidate"]
    if not gpu and not cands:
        return None
    starts = [e["start"] - e.get("waited", 0.0) for e in gpu]
    starts += [e["at"] - e["build_s"] - e["gpu_s"] for e in cands if "at" in e]
    ends = [e["end"] for e in gpu] + [e["at"] for e in cands if "at" in e]
    wall = max(ends) - min(starts) if starts and ends else 0.0
    devices = sorted({e.get("gpu", "all") for e in gpu + cands})
    busy = {
        d: _union_s([(e["start"], e["end"]) for e in gpu if e.get("gpu", "all") == d])
        for d in devices
    }
    build = [e["build_s"] + e.get("job_compile_s", 0.0) for e in cands]
    timed = [max(0.0, e["gpu_s"] - e.get("job_compile_s", 0.0)) for e in cands]
    hours = wall / 3600 * max(1, len(devices))
    return {
        "candidates": len(cands),
        "wall_s": wall,
        "gpus": devices,
        "candidates_per_gpu_hour": len(cands) / hours if hours > 0 else None,
        "gpu_busy_fraction": sum(busy.values()) / (wall * len(devices)) if wall > 0 else None,
        "prebuilt_fraction": sum(bool(e.get("prebuilt")) for e in cands) / len(cands)
        if cands
        else None,
        "build_s": distribution(build),
        "timed_s": distribution(timed),
        "wall_per_candidate_s": wall * len(devices) / len(cands) if cands else None,
        "held_s_by_kind": _held_by_kind(gpu),
    }


def _held_by_kind(gpu: list[dict]) -> dict[str, float]:
    """Seconds the GPU's queue was held, by the kind of job that held it (reference, judge,
    peaks): where the GPU's time went."""
    held: dict[str, float] = {}
    for e in gpu:
        kind = e.get("kind", "?")
        held[kind] = held.get(kind, 0.0) + e["end"] - e["start"]
    return held


def _num(value: float | None, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:.3g}{unit}"


def throughput_table(figures: dict[str, Any]) -> Table:
    rows: list[list] = [
        ["candidates", str(figures["candidates"]), "", "", ""],
        ["candidates per GPU-hour", _num(figures["candidates_per_gpu_hour"]), "", "", ""],
        ["GPU busy", _num(100 * (figures["gpu_busy_fraction"] or 0), "%"), "", "", ""],
        ["wall per candidate", _num(figures["wall_per_candidate_s"], " s"), "", "", ""],
    ]
    for kind, seconds in sorted((figures.get("held_s_by_kind") or {}).items()):
        rows.append([f"GPU held by {kind} jobs", _num(seconds, " s"), "", "", ""])
    for name, key in (("build per candidate", "build_s"), ("timed per candidate", "timed_s")):
        d = figures[key]
        if d:
            rows.append(
                [
                    name,
                    _num(d["median"], " s"),
                    _num(d["p10"], " s"),
                    _num(d["p90"], " s"),
                    _num(d["max"], " s"),
                ]
            )
    return Table("Throughput", ["figure", "value (median)", "p10", "p90", "max"], rows)
