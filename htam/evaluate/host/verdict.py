"""From what the watchdog saw and what the judge said to an EvalResult's status and one-line
cause. The one place where ``ok`` is given: only a judge's verdict of ``ok`` (which the judge
gives after comparing every output itself) on a job the watchdog did not end."""

from __future__ import annotations

import signal
from collections.abc import Callable

from htam.evaluate import footprint, roofline
from htam.evaluate.eval_config import EvalConfig
from htam.evaluate.frames import TimingFigures, Verdict
from htam.evaluate.host.watchdog import JobOutcome
from htam.evaluate.logs import printable
from htam.evaluate.result import EvalResult, Timing
from htam.status import EVALUATOR_GPU_MEMORY, Fault, Status

# paired / alone reference time beyond which a result is flagged: on a GPU, and on a CPU, where
# other work on the machine moves both by more (a step's reference took 14x the time
# of another's on a loaded machine, and that step's speedup became the run's best)
REFERENCE_DRIFT = {"cuda": 1.15, "cpu": 2.0}
EVALUATOR_FAILED = "the evaluator could not judge this task"
# Below any call of a forward through Python (a microsecond or more on either device)
MIN_MEDIAN_MS = 1e-4


def _too_short(median_ms: float) -> str:
    return (
        f"[timing] the calls' median time is {median_ms:.3g} ms by the solution's own events, "
        f"below what any call takes ({MIN_MEDIAN_MS * 1e3:.1f} us), and the judge's clock cannot "
        "bound calls this short here: a forged timer"
    )


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
    verdict = outcome.verdict
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
    status, message = verdict.status, verdict.message
    timing = verdict.timing
    if status is Status.OK and timing is not None and not timing.median_ms >= MIN_MEDIAN_MS:
        # No call takes (next to) no time: such a median is the candidate's events saying so
        # where the judge's clock, at its resolution, could put no floor under them. Every
        # figure over the candidate's time divides by it: 0 ended the run (ZeroDivisionError),
        # a denormal made the speedup infinite.
        status, message = Status.REJECTED, _too_short(timing.median_ms)
    if status is Status.OK:
        result.status = Status.OK
        return
    if verdict.infrastructure:  # the task, not the candidate: say so plainly
        result.status = Status.RUNTIME_ERROR
        result.messages = [f"{EVALUATOR_FAILED}: {message}"]
        result.infrastructure = True
        return
    result.status = status
    if message == "the candidate's process ended":
        message = (
            f"the candidate's process ended ({signal_name(outcome.candidate_exit)}): "
            + _last_line(outcome.log, "no output")
        )
    # the candidate's own words (an exception's, a compiler's quote of its source)
    result.messages = [printable(message or f"{status} without a message")]


def blame(
    result: EvalResult,
    outcome: JobOutcome,
    ref_nbytes: int,
    gpu_free: int,
    runs_alone: Callable[[], bool],
) -> None:
    """Whose failure a failed evaluation is, where the judge could not tell: the evaluation's
    own share of the card, or the candidate beside a reference that ``runs_alone``."""
    # The reference's host memory beside a candidate is the judge's and its runner's alone
    # (the slots it lends the candidate included): a candidate cannot raise it, and the
    # task cannot be judged at this limit (every candidate of Robust-KBench's
    # llama_rmsnorm blamed on the CPU). Anything else the reference met beside the candidate
    # but not alone (GPU memory) is the candidate's doing.
    host_memory = outcome.kill_kind == "reference"
    cause = result.messages[0].removeprefix(f"{EVALUATOR_FAILED}: ") if result.messages else ""
    if (
        (result.infrastructure or result.status is Status.RUNTIME_ERROR)
        and footprint.is_gpu_oom(cause)
        and footprint.crowds(ref_nbytes, gpu_free)
    ):
        # the evaluation's own share of the card explains it (the reference's runner or the
        # candidate ran out of it): not the candidate's fault, and nothing to learn
        result.status = Status.RUNTIME_ERROR
        why = footprint.crowded_cause(ref_nbytes, gpu_free, cause)
        result.messages = [f"{EVALUATOR_GPU_MEMORY}: {why}"]
        result.fault = Fault.EVALUATOR
    elif result.infrastructure and not host_memory and runs_alone():
        # the only difference was the candidate beside it (a candidate holding
        # the GPU's memory made the reference's runner fail and stopped the run)
        result.infrastructure = False
        result.messages = [
            f"the reference failed beside this candidate ({cause}) but runs alone: the "
            "candidate's use of shared resources (GPU memory, the machine's) is blamed"
        ]


def _last_line(log: str, default: str) -> str:
    lines = [line.strip() for line in log.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else default


def timing_fields(t: TimingFigures) -> dict:
    return t.model_dump(include=set(Timing.__dataclass_fields__))


def add_timing(
    result: EvalResult, outcome: JobOutcome, ref, config: EvalConfig, peaks: dict, device: str
) -> None:
    """A correct result's times, speedups, share of speed of light and timing flags, from the
    judge's verdict and the reference's own times (``ref``: the evaluator's Reference)."""
    res = outcome.verdict
    if res is None or res.timing is None or res.paired_reference is None or res.escape is None:
        raise ValueError("a correct result without the judge's verdict and its figures")
    result.timing = Timing(**timing_fields(res.timing))
    result.runtime_ms = res.timing.median_ms
    result.ref_runtime_ms = res.paired_reference.median_ms
    if ref.compile_timing and ref.timing:
        # torch.compile's time, carried onto this run's clock by the eager/compiled ratio
        # that the reference's process measured side by side.
        ratio = ref.compile_timing["median_ms"] / ref.timing["median_ms"]
        result.ref_compile_runtime_ms = result.ref_runtime_ms * ratio
    result.breakdown_s = _breakdown(outcome, res)
    result.flags += res.notes
    if res.escape.uncharged:  # within the clock's resolution: its words say so (the reward's
        result.flags.append(res.escape.uncharged)  # noise band reads "clock resolution")
    c = config
    if not result.timing.meaningful:
        result.messages.append("timings under the Triton interpreter are not meaningful")
    bound = roofline.lower_bound(ref.flops, ref.nbytes, ref.dtypes, peaks)
    result.sol_fraction, result.bound = bound.time_ms / result.runtime_ms, bound.kind
    slack = res.escape.slack_ms
    if result.timing.meaningful and result.runtime_ms < 2 * slack:
        result.flags.append(
            f"calls of {result.runtime_ms:.3f} ms are "
            f"{'below' if result.runtime_ms < slack else 'within 2x of'} the judge's clock "
            f"resolution here ({slack:.1f} ms, what an honest runner's overhead varies by on "
            "this machine): the time rests on the candidate's own events (a quieter machine, or "
            "a larger size where the task has one, bounds it)"
        )
    alone = ref.timing and ref.timing["median_ms"]
    drift = reference_drift(
        result.ref_runtime_ms, alone, REFERENCE_DRIFT[device], result.runtime_ms
    )
    if drift and result.timing.meaningful:
        result.flags.append(drift)
    if result.speedup and result.speedup > c.flag_speedup and result.timing.meaningful:
        result.flags.append(
            f"speedup {result.speedup:.1f}x is above {c.flag_speedup:.0f}x: check it by hand"
        )


def reference_drift(
    paired_ms: float | None,
    alone_ms: float | None,
    limit: float = REFERENCE_DRIFT["cuda"],
    candidate_ms: float | None = None,
) -> str | None:
    """A flag when the reference, timed beside the candidate (the speedup's denominator), took
    other than its own time alone by more than ``limit`` times: on the H200 the two agreed
    within 3.1% over level 1. A reference runner that held every call's autograd graph
    was the one such case found (``Harness.collect``)."""
    if not paired_ms or not alone_ms:
        return None
    ratio = paired_ms / alone_ms
    if 1 / limit <= ratio <= limit:
        return None
    said = (
        f"the reference took {ratio:.2f}x its own time beside this candidate ({paired_ms:.3f} ms "
        f"against {alone_ms:.3f} ms alone): the speedup rests on the paired time"
    )
    if candidate_ms:  # which number a user of the candidate gets: the reference it replaces
        said += (  # runs alone, not slowed by a neighbour
            f" ({paired_ms / candidate_ms:.2f}x); against the reference alone the candidate is "
            f"{alone_ms / candidate_ms:.2f}x, what to expect when it replaces the reference"
        )
    return said


def _breakdown(outcome: JobOutcome, res: Verdict) -> dict:
    marks = res.marks
    compile_s = res.compile_s + (res.first_call_s or 0.0)
    out = {
        "wall": outcome.wall_s,
        "compile_and_first_call": compile_s,
        "import": res.import_s,
    }
    if marks:
        out.update(
            {
                "until_judge_ready": marks["device_ready"] - outcome.started,
                "build": marks["built"] - marks["device_ready"],
                "trials": marks["trials_done"] - marks["built"],
                "timing": marks["timed"] - marks["trials_done"],
                "verdict_and_exit": outcome.started + outcome.wall_s - marks["timed"],
            }
        )
        out["overhead"] = outcome.wall_s - compile_s - out["timing"]
    return out
