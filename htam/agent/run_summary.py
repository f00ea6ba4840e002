"""A run's summary as a typed, frozen value: what ``Optimizer.run`` returns and ``summary.json``
holds, read back by the bench, its report, the transfer experiment and the CLI.

``RunSummary.to_dict`` is the on-disk form: its keys and their order are ``summary.json``'s
format. ``RunSummary.from_dict`` also reads the summaries older versions wrote: a key they lack
gets what they meant by its absence (the outcome from the best status and speedup; bare statuses
from the display texts "ok 1.32x" their ``statuses`` held).

``best_speedup`` is the best correct candidate's speedup over eager PyTorch, however small (what
KernelBench's fast_p counts). ``user_speedup`` is what the user ends with: the candidate when it
is faster than the reference, else the reference itself (1.0); None when nothing was correct.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

# outcome: the best correct candidate beats the reference / does not / no candidate was correct
FASTER, REFERENCE_STANDS, NONE_CORRECT = "faster", "reference_stands", "none_correct"
OUTCOMES = (FASTER, REFERENCE_STANDS, NONE_CORRECT)
# the file the run leaves its best candidate in, by outcome (none when nothing was correct)
BEST_FILES = {FASTER: "best.py", REFERENCE_STANDS: "best_slower_than_reference.py"}


@dataclass(frozen=True)
class RunSummary:
    # the run's identity
    task_id: str
    method: str
    seed: int
    target: str
    language: str
    proposer: str
    size: str | None  # the size timed (None: written before sizes were recorded)
    steps_planned: int
    run_dir: str | None
    resumed_s: float  # earlier sessions' step time, for a resumed run
    # how it went
    steps: int
    outcome: str  # one of OUTCOMES
    stopped_early: bool  # fewer steps than planned
    reason: str | None  # why it ended so (the first line of the last failure's cause)
    best_status: str
    best_speedup: float | None
    user_speedup: float | None
    best_file: str | None
    best_speedup_vs_compile: float | None
    best_runtime_ms: float | None
    # the reference beside the best candidate, in the same rounds: best_speedup is the ratio of
    # these two (ref_runtime_ms is the reference timed alone, before the steps)
    best_ref_runtime_ms: float | None
    best_sol_fraction: float | None
    best_flags: list[str]
    ref_runtime_ms: float | None
    ref_compile_runtime_ms: float | None
    timed_inputs: list[str]
    timed_bytes: int | None
    timing_meaningful: bool | None
    curve: list[float]  # the best speedup after each step
    # each step's status alone (its outcome text, "ok 1.32x", is for people: the speedups are in
    # the step files and ``curve``)
    statuses: list[str]
    path: list[list[str | None]]  # [direction, strategy] of each step
    duplicates: int
    cost_usd: float
    tokens: dict[str, int] = field(default_factory=lambda: {"prompt": 0, "completion": 0})
    calls: int = 0
    cached_calls: int = 0
    wall_s: float = 0.0
    # the transition term's share of each decision (empty where no decision was scored)
    prefix_shares: list[float | None] = field(default_factory=list)

    @property
    def correct(self) -> bool:
        return self.outcome != NONE_CORRECT

    @property
    def total_tokens(self) -> int:
        return self.tokens.get("prompt", 0) + self.tokens.get("completion", 0)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: _copy(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSummary:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        steps = int(data["steps"])
        planned = data.get("steps_planned", steps)
        best_speedup = data.get("best_speedup")
        outcome = data.get("outcome") or _old_outcome(data.get("best_status"), best_speedup)
        values |= {
            "steps": steps,
            "steps_planned": planned,
            "outcome": outcome,
            "statuses": [str(s).split(" ", 1)[0] for s in data.get("statuses", [])],
            "path": [list(p) for p in data.get("path", [])],
        }
        defaults: dict[str, Any] = {
            # the loop always writes its identity; a summary without one (written by hand) reads
            # with empty names: the bench knows each unit's from its plan
            "task_id": "",
            "method": "",
            "seed": 0,
            "target": "",
            "language": "",
            "proposer": "unknown",
            "best_status": "none",  # what the loop writes when no step ran
            "best_speedup": None,
            "size": None,
            "run_dir": None,
            "resumed_s": 0.0,
            "stopped_early": steps < planned,
            "reason": None,
            "user_speedup": None if outcome == NONE_CORRECT else max(best_speedup or 1.0, 1.0),
            "best_file": BEST_FILES.get(outcome),
            "best_speedup_vs_compile": None,
            "best_runtime_ms": None,
            "best_ref_runtime_ms": None,
            "best_sol_fraction": None,
            "best_flags": [],
            "ref_runtime_ms": None,
            "ref_compile_runtime_ms": None,
            "timed_inputs": [],
            "timed_bytes": None,
            "timing_meaningful": None,
            "curve": [],
            "duplicates": 0,
            "cost_usd": 0.0,
        }
        return cls(**(defaults | values))


def _old_outcome(best_status: str | None, best_speedup: float | None) -> str:
    """The outcome a summary written before outcomes were recorded meant: a correct best
    (status ok) beats the reference or not by its speedup."""
    if best_status != "ok":
        return NONE_CORRECT
    return FASTER if best_speedup and best_speedup > 1.0 else REFERENCE_STANDS


def _copy(value: Any) -> Any:
    if isinstance(value, list):
        return [_copy(v) for v in value]
    if isinstance(value, dict):
        return dict(value)
    return value
