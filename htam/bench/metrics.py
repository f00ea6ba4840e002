"""Bench metrics: pure functions over unit rows (one row per (method, seed, task) unit).

Definitions (the report prints them too):

- **correctness**: fraction of units whose best candidate is correct (some step passed every
  correctness check). A unit that failed (its worker died twice, or it raised) counts as incorrect.
- **fast_p** (KernelBench): fraction of units that are correct AND whose best speedup over eager
  PyTorch is > p, for p in FAST_PS. **fast@1** is fast_1: correct and faster than eager.
- Two speedups per unit, named apart everywhere (JSON, Markdown, HTML):
  - the **best candidate** speedup: the raw speedup of the fastest correct candidate, below 1.0
    when it is slower than the reference (what KernelBench's fast_p and geomeans use);
  - the **kept** speedup: what the user ends with, who keeps the reference when no correct
    candidate beats it: max(1.0, best candidate) for a correct unit, 1.0 otherwise; never < 1.0.
- **candidate geomean** vs eager and vs torch.compile, two variants: ``fail1`` counts every unit
  without a correct timed candidate as 1.0; ``excl`` is over the correct units only. None when no
  unit has the measurement (torch.compile is timed on GPUs only). **kept geomean** vs eager is
  over every unit.
- **discovery curve**: at each step t, the arithmetic mean over units of the best speedup after
  step t, where "no correct candidate yet" counts as 1.0 and a run shorter than the longest
  (oneshot, a failed unit) keeps its last value.
- **cost** ($) and **tokens** (prompt + completion) summed over units; **wall_s** summed unit wall
  time; **eval_s** summed evaluator wall time of every candidate (the device-busy time: GPU time on
  a GPU target), each capped by its step's wall time (a cached result is not counted again),
  falling back to the unit's wall time where steps carry no timing breakdown.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field, fields
from typing import Any

FAST_PS = (0.0, 0.8, 1.0, 1.5, 2.0)


@dataclass
class UnitRow:
    key: str
    method: str
    seed: int
    task_id: str
    level: int | None
    steps_planned: int
    state: str  # "complete" | "partial" (some steps persisted) | "failed" (no summary at all)
    correct: bool = False
    speedup: float | None = None  # best correct candidate vs eager
    speedup_vs_compile: float | None = None
    curve: list[float] = field(default_factory=list)
    cost_usd: float = 0.0
    tokens: int = 0
    wall_s: float = 0.0
    eval_s: float = 0.0
    timing_meaningful: bool | None = None
    error: str | None = None
    device: str | None = None  # where it last ran (worker slot's device)
    # The op family the offline proposer had no template for, when the unit ended on that
    # alone (htam.status.Status.NO_STRATEGY): counted apart, not as a failed candidate.
    no_strategy: str | None = None

    @property
    def kept_speedup(self) -> float:
        """The speedup the user ends with: the reference stands unless a correct candidate beats it."""
        return max(1.0, self.speedup) if self.correct and self.speedup else 1.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> UnitRow:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def geomean(values: list[float]) -> float | None:
    if not values:
        return None
    if any(v <= 0 for v in values):
        raise ValueError("geometric mean of non-positive speedups")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def correctness(rows: list[UnitRow]) -> float | None:
    return _mean([1.0 if r.correct else 0.0 for r in rows])


def fast_p(rows: list[UnitRow], p: float) -> float | None:
    return _mean(
        [1.0 if r.correct and r.speedup is not None and r.speedup > p else 0.0 for r in rows]
    )


def geomean_speedup(
    rows: list[UnitRow], versus: str = "eager", failures: str = "fail1"
) -> float | None:
    """Geometric-mean best speedup; ``versus`` eager|compile, ``failures`` fail1|excl."""
    attr = {"eager": "speedup", "compile": "speedup_vs_compile"}[versus]
    measured = [getattr(r, attr) for r in rows if r.correct and getattr(r, attr)]
    if not measured:
        return None
    if failures == "excl":
        return geomean(measured)
    if failures != "fail1":
        raise ValueError(f"failures must be fail1 or excl, not {failures!r}")
    return geomean([getattr(r, attr) if r.correct and getattr(r, attr) else 1.0 for r in rows])


def kept_geomean(rows: list[UnitRow]) -> float | None:
    """Geometric-mean kept speedup vs eager over every unit (never below 1.0)."""
    return geomean([r.kept_speedup for r in rows])


def unit_curve(row: UnitRow, length: int) -> list[float]:
    """A unit's best speedup after each of ``length`` steps, 0 ("none correct yet") as 1.0."""
    values = [v if v > 0 else 1.0 for v in row.curve] or [1.0]
    return (values + [values[-1]] * length)[:length]


def discovery_curve(rows: list[UnitRow]) -> list[float]:
    length = max((max(r.steps_planned, len(r.curve)) for r in rows), default=0)
    curves = [unit_curve(r, length) for r in rows]
    return [sum(c[t] for c in curves) / len(curves) for t in range(length)]


def summarize(rows: list[UnitRow]) -> dict[str, Any]:
    """Every metric over ``rows`` (one method, or one method at one level)."""
    meaningful = [r.timing_meaningful for r in rows if r.timing_meaningful is not None]
    return {
        "units": len(rows),
        "complete": sum(r.state == "complete" for r in rows),
        "partial": sum(r.state == "partial" for r in rows),
        "failed": sum(r.state == "failed" for r in rows),
        "correctness": correctness(rows),
        # units where the proposer had no applicable strategy, apart (and per missing family),
        # and correctness over the units where it had one
        "no_strategy": sum(r.no_strategy is not None for r in rows),
        "no_strategy_families": dict(
            sorted(Counter(r.no_strategy for r in rows if r.no_strategy).items())
        ),
        "correctness_applicable": correctness([r for r in rows if r.no_strategy is None]),
        "fast_1": fast_p(rows, 1.0),
        "fast_p": {str(p): fast_p(rows, p) for p in FAST_PS},
        "candidate_geomean_eager_fail1": geomean_speedup(rows, "eager", "fail1"),
        "candidate_geomean_eager_excl": geomean_speedup(rows, "eager", "excl"),
        "candidate_geomean_compile_fail1": geomean_speedup(rows, "compile", "fail1"),
        "candidate_geomean_compile_excl": geomean_speedup(rows, "compile", "excl"),
        "kept_geomean_eager": kept_geomean(rows),
        "curve": discovery_curve(rows),
        "cost_usd": sum(r.cost_usd for r in rows),
        "tokens": sum(r.tokens for r in rows),
        "wall_s": sum(r.wall_s for r in rows),
        "eval_s": sum(r.eval_s for r in rows),
        "timing_meaningful": all(meaningful) if meaningful else None,
    }


def compute_metrics(rows: list[UnitRow]) -> dict[str, Any]:
    """Per method, and per method and level (levels as strings, "none" for tasks without one)."""
    by_method: dict[str, list[UnitRow]] = defaultdict(list)
    for row in rows:
        by_method[row.method].append(row)
    methods = {m: summarize(rs) for m, rs in by_method.items()}
    levels: dict[str, dict[str, Any]] = {}
    for method, rs in by_method.items():
        by_level: dict[str, list[UnitRow]] = defaultdict(list)
        for row in rs:
            by_level[str(row.level) if row.level is not None else "none"].append(row)
        levels[method] = {lv: summarize(lrs) for lv, lrs in sorted(by_level.items())}
    notes = []
    if any(m["timing_meaningful"] is False for m in methods.values()):
        notes.append(
            "Some timings come from the Triton interpreter on the CPU: they check "
            "correctness but speedups from them are not meaningful."
        )
    return {"methods": methods, "by_level": levels, "notes": notes, "definitions": DEFINITIONS}


DEFINITIONS = {
    "correctness": "fraction of units whose best candidate is correct (failed units count as incorrect)",
    "no_strategy": "units that ended because the proposer had no applicable strategy for the task "
    "(no candidate was written), with the missing op family; counted apart from failed candidates",
    "correctness_applicable": "correctness over the units that are not no_strategy",
    "fast_1": "fast@1: fraction of units whose best candidate is correct and faster than eager PyTorch",
    "fast_p": "KernelBench fast_p: fraction of units correct AND with best speedup vs eager > p",
    "candidate_geomean_*_fail1": "geometric mean of the best candidate's raw speedup (below 1.0 "
    "when slower than the reference), units without a correct timed candidate counted as 1.0",
    "candidate_geomean_*_excl": "the same over correct units only (failures excluded)",
    "kept_geomean_eager": "geometric mean over every unit of the speedup the user ends with: "
    "max(1.0, best candidate) when a candidate is correct, else 1.0 (the reference stands)",
    "curve": "mean over units of the best speedup after each step; no correct candidate yet = 1.0; "
    "shorter runs keep their last value",
    "cost_usd": "LLM cost in US dollars, summed over units (cached replies cost nothing)",
    "tokens": "prompt + completion tokens, summed over units",
    "wall_s": "unit wall time, summed over units (workers run in parallel)",
    "eval_s": "evaluator wall time of every candidate, summed (GPU time on a GPU target), each "
    "capped by its step's wall time so cached results do not count again; unit wall "
    "time where steps carry no timing breakdown",
}
