"""``htam optimize TASK`` on one task: its run directory (new, or the one ``--resume``
continues), the size it is timed at, what is printed before the first step, the loop itself and
the last line. The options were checked by ``optimize_cmd`` before anything here runs."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console

from htam.cli.common import (
    INFRASTRUCTURE_EXIT,
    console,
    err_console,
    fail,
    on_closed_stdout,
    reference_cannot_run,
    resolve_task,
)
from htam.cli.interrupts import interrupted, on_interrupt
from htam.cli.json_errors import echo_json
from htam.cli.optimize_runs import (
    check_resume,
    finished_records,
    remove_if_nothing_ran,
    resume_command,
    resume_settings,
    run_dir,
    run_record,
    steps_done,
)
from htam.cli.optimize_view import StepsView, final_line, stats_line, timed_line
from htam.cli.options import RunSettings
from htam.cli.sizes import over_memory_limit, timed_size
from htam.vocab import Size

# seen: only summary.json said timing_meaningful false, and the run printed 0.00049x
INTERPRETED_NOTE = (
    "Triton on the CPU runs in its interpreter: each candidate's correctness is checked, its "
    "speedups mean nothing"
)


@dataclass
class OptimizeRun:
    """What ``htam optimize``'s options resolved to (a suite's run takes its fields too)."""

    ctx: typer.Context
    task: str
    settings: RunSettings
    proposer: Any
    method: str
    steps: int
    seed: int
    size: str | None
    memory: Path
    out: Path | None
    out_is_new: bool  # --out was not given, or did not exist: a directory this command creates
    resume: bool
    memory_limit_mb: int | None
    as_json: bool
    quiet: bool
    verbose: bool
    started: float  # time.monotonic() when the command started

    @property
    def progress(self) -> Console | None:
        """Where the lines before the last one go: stdout, stderr with --json (stdout is its
        object; a suite's progress goes there too), nowhere with --quiet."""
        if self.as_json:
            return err_console
        return None if self.quiet else console


@dataclass
class Prepared:
    """The run directory and what the run is timed at, known before anything is printed."""

    config: Any  # OptimizeConfig
    task: Any  # Task
    out: Path
    record: dict | None  # the run's own record (run.json) when resumed
    size: Size
    timed: Any  # the task's Signature at ``size``
    created: Path | None  # ``out`` when this command made it (removed if no step runs in it)


def optimize_one(run: OptimizeRun) -> NoReturn:
    """Run the loop on one task and end with its last line (exit 0, or 1: none correct)."""
    ready = _prepare(run)
    if run.progress is not None:
        _print_header(run, ready, run.progress)
    if ready.record is not None and ready.record.get("steps") != ready.config.steps:
        from htam.agent.rundir import write_atomic  # more steps asked: the run is extended

        record = {**ready.record, "steps": ready.config.steps}
        write_atomic(ready.out / "run.json", json.dumps(record, indent=2))
    summary = _optimize(run, ready)
    summary["bank"] = str(run.memory)
    # wall_s: the steps alone; both count a resumed run's earlier steps (resumed_s)
    summary["total_s"] = time.monotonic() - run.started + summary.get("resumed_s", 0.0)
    _finish(summary, ready.out, run.as_json, run.progress)


def _prepare(run: OptimizeRun) -> Prepared:
    """The run directory (with the Ctrl-C and closed-stdout hooks), the configuration (from the
    run's record where ``--resume`` gives nothing again) and the size timed; a task this machine
    cannot run is refused here (exit 3), and a run directory made for it is removed."""
    from htam.tasks import TaskError, signature

    settings = run.settings
    config = settings.optimize_config(run.method, run.steps, run.seed)
    task = resolve_task(run.task)
    out = run_dir(run.out, Path("runs") / f"{task.name}-{run.method}-s{run.seed}", run.resume)
    on_interrupt(  # from here on Ctrl-C says how to continue the run
        lambda: (
            f"interrupted at step {steps_done(out)}; `{resume_command(run.ctx, out)}` continues"
        ),
        outcome="interrupted",
    )
    created = out if run.out_is_new and not run.resume else None  # not a run --resume found
    if created is not None:
        on_closed_stdout(lambda: remove_if_nothing_ran(created))
    asked = run.size
    record = run_record(out) if run.resume else None
    if record is not None:  # what is not given again comes from the run's own record
        config, asked = resume_settings(run.ctx, out, record, config, asked)
    size: Size | None = None
    try:  # the large size's signature runs the reference (isolated) when it has no meta kernels
        size = timed_size(settings.target, settings.language, asked, task, run.memory_limit_mb)
        timed = signature(task, size)
    except TaskError as exc:
        _stop(reference_cannot_run(exc, task, settings.target, size or asked), created)
    if record is not None:  # refused here, before anything is printed
        check_resume(out, record, task, config, run.proposer.name, size)
    # Tensors that alone exceed the memory limit (known from the signature, on the meta device):
    # refused now, not when the reference reaches the limit tens of seconds later.
    too_big = over_memory_limit(task, settings.target, size, timed.bytes, run.memory_limit_mb)
    if too_big:
        _stop(too_big, created)
    return Prepared(config, task, out, record, size, timed, created)


def _print_header(run: OptimizeRun, ready: Prepared, shown: Console) -> None:
    """The size timed and its shapes, the memory bank and the run directory."""
    from htam.agent.summary import timed_shapes  # a 0-dim input is "scalar float32"

    line = timed_line(ready.size, timed_shapes(ready.timed), ready.timed.bytes, ready.task.source)
    shown.print(line, highlight=False, soft_wrap=True)
    if run.settings.target == "cpu" and ready.config.language == "triton":  # before the speedups
        shown.print(INTERPRETED_NOTE, highlight=False, soft_wrap=True)
    shown.print(f"memory bank: {run.memory}", highlight=False, soft_wrap=True)
    if ready.record is not None:
        where = f"resuming {ready.out} at step {steps_done(ready.out)}"
    else:
        where = f"run directory: {ready.out}"
    shown.print(where, highlight=False, soft_wrap=True)


def _optimize(run: OptimizeRun, ready: Prepared) -> dict:
    """The loop, showing each step as it ends; the summary as a dict (summary.json's keys)."""
    from htam.agent import InfrastructureError, Optimizer, RunDirError
    from htam.evaluate import CachedEvaluator, EvalConfig, Evaluator, EvaluatorError
    from htam.memory import MemoryBank, MemoryBankError
    from htam.tasks import TaskError

    settings, config, out = run.settings, ready.config, ready.out
    title = (
        f"{ready.task.id} · {run.method} · {run.proposer.name} · "
        f"{settings.target}/{settings.language} · {ready.size}"
    )
    earlier = finished_records(out) if run.resume else []
    view = StepsView(
        title,
        config.steps,
        quiet=run.progress is None,
        verbose=run.verbose,
        earlier=earlier,
        shown=run.progress or console,
    )
    eval_config = EvalConfig(size=ready.size, **settings.eval_overrides)
    try:
        with (
            MemoryBank.open(run.memory, create=True) as bank,
            Evaluator(settings.target, eval_config) as evaluator,
            view.display(),
        ):
            evaluator_ = CachedEvaluator(evaluator)
            optimizer = Optimizer(run.proposer, evaluator_, bank, config, on_step=view)
            return optimizer.run(ready.task, out, resume=run.resume).to_dict()
    except KeyboardInterrupt:  # every finished step is in the run directory
        interrupted()
    except InfrastructureError as exc:
        _stop(
            f"stopped: {exc.what} failed: {exc} (the failed steps are not in the memory; "
            f"--resume --out {out} continues)"
        )
    except TaskError as exc:  # the task loaded, but its reference cannot run here
        # nothing to resume: the run directory this command made goes (seen: run.json alone)
        _stop(reference_cannot_run(exc, ready.task, settings.target, ready.size), ready.created)
    except (EvaluatorError, MemoryBankError, RunDirError) as exc:
        fail(str(exc))


def _stop(message: str, unused_out: Path | None = None) -> NoReturn:
    """The run cannot go on here (exit 3; with --json, ``{"outcome": "stopped", ...}``); a run
    directory this command created, ``unused_out``, is removed when no step ran in it."""
    if unused_out is not None:
        remove_if_nothing_ran(unused_out)
    fail(message, code=INFRASTRUCTURE_EXIT, outcome="stopped")


def _finish(summary: dict, out: Path, as_json: bool, shown: Console | None) -> NoReturn:
    """The stats, the evaluator's doubts and the last line on ``shown`` (``--quiet``: the last
    line alone; ``--json``: all of them on stderr, then the summary, with ``reason`` and
    ``stopped_early``, as one object on stdout)."""
    code = 1 if summary["outcome"] == "none_correct" else 0
    if shown is not None:
        shown.print(stats_line(summary), highlight=False, soft_wrap=True)
        for flag in summary["best_flags"]:  # the evaluator's doubts about the kept result
            shown.print(
                f"check the best candidate: {flag}", highlight=False, markup=False, soft_wrap=True
            )
    last = final_line(summary, out)
    if as_json:
        err_console.print(last, highlight=False, soft_wrap=True, markup=False)
        echo_json(summary)
        raise typer.Exit(code)
    console.print(last, highlight=False, soft_wrap=True, markup=False)
    raise typer.Exit(code)
