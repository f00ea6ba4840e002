"""The reference alone, as the evaluator knows it: its cost and its eager and torch.compile times,
measured once per task and settings in a trusted job and kept in the sealed cache."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from htam.evaluate import frames
from htam.evaluate.host import integrity
from htam.evaluate.host.errors import EvaluatorError
from htam.evaluate.host.watchdog import JobOutcome
from htam.status import Status
from htam.tasks.task import Task, TaskError

if TYPE_CHECKING:
    from htam.evaluate.host.evaluator import Evaluator

# What a reference job checks, in its cached results' names: a change of the rules is a new
# name (2: outputs a candidate cannot be judged against, trusted_jobs.unjudgeable).
REFERENCE_RULES = 2
TIMING_KEYS = ("warmup_ms", "timing_budget_ms", "min_timed", "max_timed", "l2_flush_mb")


@dataclass
class Reference:
    flops: int
    nbytes: int
    dtypes: list[str]
    timing: dict | None = None
    compile_timing: dict | None = None
    messages: list[str] = field(default_factory=list)


def time_compile(ev: Evaluator) -> bool:
    wanted = ev.config.time_compile_reference
    return ev.device == "cuda" if wanted is None else wanted


def reference_file(ev: Evaluator, task: Task) -> Path:
    c = ev.config
    key = (
        f"{REFERENCE_RULES}|{task.digest}|{c.size}|{ev.device_name}|{ev.torch_version}|{c.seed}|{c.trials}"
        f"|{'compile' if time_compile(ev) else 'eager'}"
        # the alone time is set against the paired one (reference_drift): same settings
        + "".join(f"|{getattr(c, k)}" for k in TIMING_KEYS)
    )
    name = f"{task.id.replace('/', '_')}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
    return ev.cache_dir / "reference" / name


def load(ev: Evaluator, task: Task, timed: bool) -> Reference:
    """The reference's cost and (``timed``) times: from the sealed cache, or a trusted job."""
    path = reference_file(ev, task)
    cached = integrity.read_sealed(ev.cache_dir, path)
    if cached is not None:
        return Reference(**cached)
    compile_too = timed and time_compile(ev)
    if compile_too and ev.device == "cuda":
        ev._warm(task)
    job = ev._job("reference", task, time=timed, time_compile=compile_too)
    outcome = ev._trusted(job)
    res = outcome.result
    costs = [f for f in outcome.frames if isinstance(f, frames.Cost)]
    if outcome.killed or not isinstance(res, frames.ReferenceRan) or res.status is not Status.OK:
        raise TaskError(task.id, f"the reference failed to run: {cause(outcome)}")
    if not costs:
        raise TaskError(task.id, "the reference ran without its cost")
    cost = costs[-1]
    ref = Reference(cost.flops, cost.bytes, cost.dtypes)
    if timed:
        ref.timing = _figures(res.timing)
        ref.compile_timing = _figures(res.compile_timing)
        ref.messages = [res.message] if res.message else []
        integrity.write_sealed(ev.cache_dir, path, asdict(ref))
    return ref


def _figures(timing: frames.TimingFigures | None) -> dict | None:
    """A time as the cache has always kept it (``measure.time_fns``'s, with ``elapsed_s``)."""
    return None if timing is None else timing.model_dump(exclude_none=True)


def runs_alone(ev: Evaluator, task: Task) -> bool:
    """Whether the reference, untimed in a job of its own, runs to a result."""
    try:
        outcome = ev._trusted(ev._job("reference", task, time=False, time_compile=False))
    except EvaluatorError:
        return False
    res = outcome.result
    return not outcome.killed and isinstance(res, frames.ReferenceRan) and res.status is Status.OK


def cause(outcome: JobOutcome) -> str:
    if outcome.killed:
        return outcome.killed
    res = outcome.result
    if isinstance(res, frames.ReferenceRan) and res.message:
        return res.message
    lines = [line for line in outcome.judge_log.strip().splitlines() if line.strip()]
    last = lines[-1].strip() if lines else "no output"
    return f"its process ended without a result ({last})"
