"""From what the watchdog saw and what the judge said to an EvalResult's status and one-line
cause. The one place where ``ok`` is given: only a judge's verdict of ``ok`` (which the judge
gives after comparing every output itself) on a job the watchdog did not end."""

from __future__ import annotations

import signal

from htam.evaluate.eval_config import EvalConfig
from htam.evaluate.result import EvalResult, Timing
from htam.evaluate.watchdog import JobOutcome
from htam.status import Status

_STATUSES = {s.value for s in Status}
EVALUATOR_FAILED = "the evaluator could not judge this task"


def signal_name(code: int | None) -> str:
    if code is None:
        return "still running when it was ended"
    if code < 0:
        try:
            return f"killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def judge_outcome(result: EvalResult, outcome: JobOutcome, config: EvalConfig) -> None:
    verdict = outcome.result
    if outcome.killed:
        kind = outcome.kill_kind
        result.status = Status.TIMEOUT if kind == "timeout" else Status.RUNTIME_ERROR
        # "reference": the task cannot be judged here, which says nothing of the candidate
        result.infrastructure = kind == "reference"
        cause = EVALUATOR_FAILED if result.infrastructure else "killed"
        result.messages = [f"{cause}: {outcome.killed}"]
        return
    if verdict is None:
        result.status = Status.RUNTIME_ERROR
        result.messages = [
            "the judge ended without a verdict: " + _last_line(outcome.judge_log, "no output")
        ]
        return
    status, message = verdict.get("status"), verdict.get("message") or ""
    if status == "ok":
        result.status = Status.OK
        return
    if status == "error":  # the task, not the candidate: say so plainly
        result.status = Status.RUNTIME_ERROR
        result.messages = [f"{EVALUATOR_FAILED}: {message}"]
        result.infrastructure = True
        return
    result.status = Status(status) if status in _STATUSES else Status.RUNTIME_ERROR
    if message == "the candidate's process ended":
        message = (
            f"the candidate's process ended ({signal_name(outcome.candidate_exit)}): "
            + _last_line(outcome.log, "no output")
        )
    result.messages = [message or f"{status} without a message"]


def _last_line(log: str, default: str) -> str:
    lines = [line.strip() for line in log.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else default


def timing_fields(t: dict) -> dict:
    return {k: t[k] for k in Timing.__dataclass_fields__ if k in t}
