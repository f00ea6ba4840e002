"""The judge's job in the order it runs: each runner's calibrated overhead, the build, the
correctness trials of every configuration (and the trial on shifted inputs), the timed phase,
the kernel probe, and the verdict with its figures. ``judge.py`` holds what each call takes."""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING

from htam.evaluate import channel, frames
from htam.evaluate.judge import judge_timing, kernel_probe, shifted
from htam.evaluate.judge.trusted_jobs import configs
from htam.status import Status

if TYPE_CHECKING:
    from htam.evaluate.judge.judge import Judge

_perf = time.perf_counter
_clock = time.monotonic


def run(judge: Judge) -> frames.Verdict:
    cand, ref = judge.cand, judge.ref
    for runner in (ref, cand):
        runner.baseline_ms = judge_timing.calibrate(runner, judge.call_timeout_s)
    # One baseline for both: the same harness under the same isolation has the same
    # overhead, and what is policed is the difference of the two runners' hidden time, in
    # which a shared baseline cancels exactly. Two separate calibrations differed by up to
    # 0.12 ms on the H200, enough to reject a reference against itself.
    ref.baseline_ms = cand.baseline_ms = min(ref.baseline_ms, cand.baseline_ms)
    ref.ask(channel.Build(), channel.Built, judge.first_call_timeout_s)
    built = cand.ask(channel.Build(), channel.Built, judge.first_call_timeout_s)
    judge.marks["built"] = _clock()
    judge.emit(frames.Stage(stage="built"))
    module = trials(judge)
    judge.marks["trials_done"] = _clock()
    timed = judge_timing.timed(
        timing_plan(judge), lambda i, outliers: timed_round(judge, module, i, outliers)
    )
    if timed.retimed:
        judge.notes["retimed"] = timed.retimed
    judge.marks["timed"] = _clock()
    if judge.job.kernel_required:
        kernel_probe.check(judge, module)  # last: spoiled results may corrupt its state
    return frames.Verdict(
        status=Status.OK,
        timing=timed.timing,
        paired_reference=timed.paired,
        escape=timed.escape,
        compile_s=built.compile_s,
        import_s=built.import_s,
        first_call_s=judge.first_call_s,
        marks=judge.marks,
        notes=list(judge.notes.values()),
    )


def trials(judge: Judge):
    """The correctness trials of every configuration, then the first configuration's again in
    use, and its trial on shifted inputs: the module the timed calls draw from."""
    base = None
    job, cand, ref = judge.job, judge.cand, judge.ref
    for index, (extra, trial_seeds) in enumerate(configs(job)):
        module = judge.setup(index, extra, secrets.randbits(63))
        base = base or (index, module, ref.slots, cand.slots, ref.ins, cand.ins,
                        judge.grad_specs, judge.model_args, judge.held)  # fmt: skip
        for t in range(len(trial_seeds)):
            first = index == 0 and t == 0
            n = t if extra is None else len(job.seeds) + index - 1
            t0 = _perf()
            timeout_s = judge.first_call_timeout_s if first else judge.call_timeout_s
            judge.round(judge.inputs(module), f"trial {n}", timeout_s, True)
            judge.first_call_s = judge.first_call_s or _perf() - t0
            if first:
                judge.copy_ms = judge_timing.copy_ms(cand.slots, ref.slots, judge.sync)
    if base is None:
        raise RuntimeError("no configuration was judged")
    index, module, ref.slots, cand.slots, ref.ins, cand.ins = base[:6]
    judge.grad_specs, judge.model_args, judge.held = base[6:]
    if len(configs(job)) > 1:
        judge.both(channel.Use(config=index), judge.call_timeout_s)
    if shifted.applies(ref.slots):
        shifted_trial(judge, module)
    return module


def shifted_trial(judge: Judge, module) -> None:
    """One trial on inputs the reference takes shifted (shifted.py), which also decides whether
    the timed calls get outliers."""
    grads = len(judge.grad_specs or ())
    judge.shifter = shifted.Shifter(*judge.model_args, judge.device, grads)
    x = judge.shifter.first(lambda: staged_inputs(judge, module))
    judge.held.release()  # the judge's copy of the reference's outputs
    if x is None:
        return
    judge.round(x, f"the trial on {judge.shifter.inputs()}", judge.call_timeout_s, True)
    why = judge.shifter.unplanted(x[: len(x) - grads])
    if why:
        judge.notes["outliers"] = (
            f"no outliers planted ({why}): a loss over a sample of the inputs would pass unseen"
        )


def timing_plan(judge: Judge) -> judge_timing.Plan:
    return judge_timing.Plan(
        judge.job,
        "cuda_events" if judge.device == "cuda" else "perf_counter",
        planting=bool(judge.shifter and judge.shifter.scale),
        baselines_ms=(judge.cand.baseline_ms, judge.ref.baseline_ms),
        copy_ms=judge.copy_ms,
    )


def timed_round(judge: Judge, module, i: int, outliers: bool) -> judge_timing.Sample:
    """Timed round ``i`` on fresh inputs (shifted, with ``outliers`` where they are planted)."""
    x, where = staged_inputs(judge, module), f"timed call {i}"
    shifter = judge.shifter
    if shifter is not None and shifter.mild is not None:
        # moved in place (held once); spoiled where the reference does not take the shift
        if shifter.next(x, outliers, in_place=True) is None:
            x = staged_inputs(judge, module)
        else:
            where = f"{where} (on {shifter.inputs(outliers)})"
        judge.held.release()  # the judge's copy of the reference's outputs
    return judge.round(x, where, judge.call_timeout_s, i % 2 == 0)


def staged_inputs(judge: Judge, module) -> list:
    """A call's fresh inputs, staged where the judge stages them (Judge.stage)."""
    x = judge.inputs(module)
    judge.stage(x)
    return x
