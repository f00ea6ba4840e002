"""``htam optimize TASK``: run the HTAM loop on one task with an LLM or the offline proposer.

Exit status: 0 when the run ends with a correct candidate (faster or not: the last line says which
one the user keeps), 1 when no candidate was correct, 2 for a usage error (a bad path included;
for a suite, any task file that could not be loaded, after the others ran), 3 when the LLM
endpoint failed (before the first step or repeatedly during the run) or the task's reference
cannot run here (refused before anything runs when, on the CPU, its tensors alone exceed
the memory limit), 130 when interrupted (Ctrl-C; ``--resume`` continues), 141 when stdout was
closed (``| head``: it stops quietly, and a run directory with no finished step is removed).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import NoReturn

import typer

from htam.cli.common import (
    COMPILE_HELP,
    INFRASTRUCTURE_EXIT,
    LANGUAGE_HELP,
    MEMORY_LIMIT_HELP,
    METHOD_HELP,
    TARGET_HELP,
    TIMEOUT_HELP,
    check_bank,
    check_cache_dir,
    console,
    default_memory,
    fail,
    limit_overrides,
    on_closed_stdout,
    reference_cannot_run,
    resolve_target,
    resolve_task,
    writable_dir,
)
from htam.cli.interrupts import interrupted, on_interrupt
from htam.cli.json_errors import echo_json
from htam.cli.llm_options import (
    BaseUrl,
    LlmPreset,
    LlmTimeout,
    ModelName,
    build_proposer,
    check_llm_options,
)
from htam.cli.optimize_runs import (
    check_resume,
    check_run_out,
    finished_records,
    remove_if_nothing_ran,
    resume_command,
    resume_settings,
    run_dir,
    run_record,
    steps_done,
)
from htam.cli.optimize_view import (
    StepsView,
    final_line,
    stats_line,
    timed_line,
)
from htam.cli.sizes import check_size, over_memory_limit, timed_size
from htam.cli.workers import WORKERS_HELP, parse_levels

# seen: only summary.json said timing_meaningful false, and the run printed 0.00049x
INTERPRETED_NOTE = (
    "Triton on the CPU runs in its interpreter: each candidate's correctness is checked, its "
    "speedups mean nothing"
)


def optimize_command(
    ctx: typer.Context,
    task: str = typer.Argument(
        ..., help="task file, or a built-in task id such as level1/6_Softmax"
    ),
    llm: LlmPreset = None,
    base_url: BaseUrl = None,
    model: ModelName = None,
    llm_timeout: LlmTimeout = None,
    steps: int = typer.Option(6, min=1, help="optimization steps T"),
    target: str | None = typer.Option(None, help=TARGET_HELP),
    language: str | None = typer.Option(None, help=LANGUAGE_HELP),
    size: str | None = typer.Option(
        None,
        help="size timed: small or large (default: large on a GPU; on the CPU, large for one "
        "C++ task under 300 MB, else small, and small for a suite)",
    ),
    memory: Path | None = typer.Option(
        None, help="memory bank (SQLite); created from the seed if missing; see `htam memory path`"
    ),
    method: str = typer.Option("htam", help=METHOD_HELP),
    seed: int = typer.Option(0, help="seed of the direction policy and the LLM"),
    out: Path | None = typer.Option(
        None, help="run directory (default: a new runs/<task>-<method>-s<seed>-<time>)"
    ),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="continue the run in --out (default: the newest run of this task, method and seed)",
    ),
    memory_limit_mb: int | None = typer.Option(
        None, "--memory-limit-mb", min=256, help=MEMORY_LIMIT_HELP
    ),
    timeout_s: float | None = typer.Option(None, "--timeout-s", min=1.0, help=TIMEOUT_HELP),
    compile_reference: bool | None = typer.Option(
        None, "--compile-reference/--no-compile-reference", help=COMPILE_HELP
    ),
    tasks: str | None = typer.Option(
        None, help="many tasks: fnmatch globs on task id or name within TASK (a suite)"
    ),
    levels: str | None = typer.Option(None, help="many tasks: comma list of levels"),
    workers: int | None = typer.Option(None, min=1, help=f"many tasks: {WORKERS_HELP}"),
    ray: bool = typer.Option(False, "--ray", help="many tasks: run them on a Ray cluster"),
    ray_address: str = typer.Option(
        "local", "--ray-address", help="with --ray: local, auto, or an address"
    ),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object on stdout"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="print only the last line"),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="also LLM retries and each failure's first line"
    ),
) -> None:
    """Optimize TASK for T steps; writes best.py (when faster than PyTorch), summary.json and
    every step to a run directory. TASK may also be a suite (builtin, a KernelBench checkout or
    a directory of tasks; --tasks/--levels filter it, and make a task file a suite of one): then
    every task runs, on --workers or --ray, and one table ends (--json: one JSON object)."""
    from htam.agent import InfrastructureError, OptimizeConfig, Optimizer, RunDirError
    from htam.evaluate import CachedEvaluator, EvalConfig, Evaluator, EvaluatorError
    from htam.memory import MemoryBank, MemoryBankError
    from htam.tasks import TaskError, signature

    started = time.monotonic()
    if quiet and verbose:
        fail("--quiet and --verbose: give one of them")
    if verbose:
        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    quiet = quiet or as_json
    if quiet:  # the LLM's long-wait warning is not the one last line --quiet promises
        logging.getLogger("htam.llm").setLevel(logging.ERROR)
    check_llm_options(llm, base_url, model)
    target, language = resolve_target(target, language, offline=llm is None and base_url is None)
    check_size(size)  # before the run directory exists: a bad value leaves nothing behind
    parse_levels(levels)
    from htam.cli.bench_cmd import check_ray
    from htam.cli.optimize_suite import is_many, optimize_many

    # Every path the run writes to, created or opened before anything is printed: a bad one is
    # one line (exit 2), not a traceback at its first write.
    if seed < 0:
        fail(f"--seed {seed}: a seed is a whole number from 0")
    many = is_many(task, tasks, levels)
    if not many and ((workers or 1) > 1 or ray):  # they run a suite's tasks side by side
        used = f"--workers {workers}" if (workers or 1) > 1 else "--ray"
        fail(
            f"{used} runs the tasks of a suite side by side, and {task} is one task; leave it "
            "out, or give a suite (builtin, a directory, or --tasks/--levels)"
        )
    # The LLM endpoint first: it fails in seconds, and before the memory bank is created
    # (seen: a bank was left behind by a run refused for its endpoint).
    from htam.bench.bench_config import ProposerSpec

    spec = ProposerSpec(llm=llm, base_url=base_url, model=model, llm_timeout_s=llm_timeout)
    proposer = build_proposer(spec, target, language, quiet)
    check_cache_dir()
    check_bank(memory or default_memory(), "--memory" if memory else "memory bank")
    out_is_new = out is None or not out.exists()  # a directory this command creates
    if out is not None:
        if not many:
            check_run_out(out, resume)
        writable_dir(out, "--out")

    if (tasks is not None or levels is not None) and task != "builtin" and not Path(task).exists():
        fail(
            f"{task}: --tasks/--levels filter a suite (builtin, a KernelBench checkout, a "
            "directory or a task file), and this is no file or directory; for built-in tasks "
            f"give `builtin --tasks {Path(task).name}`, or leave --tasks/--levels out"
        )
    if many:  # a suite: every task through the bench's executor
        if seed != 0:
            fail("--seed with many tasks: run `htam bench SUITE --seeds N` instead")
        raise typer.Exit(
            optimize_many(
                task,
                tasks,
                levels,
                method=method,
                steps=steps,
                target=target,
                language=language,
                size=size,
                memory=memory or default_memory(),
                out=out,
                resume=resume,
                workers=workers,
                ray=check_ray(ray, ray_address),
                spec=spec,
                eval_overrides=limit_overrides(memory_limit_mb, timeout_s, compile_reference),
                as_json=as_json,
                quiet=quiet,
                ctx=ctx,
            )
        )
    try:
        config = OptimizeConfig(
            method=method, steps=steps, seed=seed, target=target, language=language
        )
    except ValueError as exc:
        fail(str(exc))
    the_task = resolve_task(task)
    out = run_dir(out, Path("runs") / f"{the_task.name}-{method}-s{seed}", resume)
    on_interrupt(  # from here on Ctrl-C says how to continue the run
        lambda: f"interrupted at step {steps_done(out)}; `{resume_command(ctx, out)}` continues",
        outcome="interrupted",
    )
    created = out if out_is_new and not resume else None  # not a run --resume found
    if created is not None:
        on_closed_stdout(lambda: remove_if_nothing_ran(created))
    memory = memory or default_memory()
    record = run_record(out) if resume else None
    if record is not None:  # what is not given again comes from the run's own record
        config, size = resume_settings(ctx, out, record, config, size)
    try:  # the large size's signature runs the reference (isolated) when it has no meta kernels
        size = timed_size(target, language, size, the_task, memory_limit_mb)
        timed = signature(the_task, size)
    except TaskError as exc:
        _stop(reference_cannot_run(exc, the_task, target, size), created)
    if record is not None:  # refused here, before anything is printed
        check_resume(out, record, the_task, config, proposer.name, size)
    # Tensors that alone exceed the memory limit (known from the signature, on the meta device):
    # refused now, not when the reference reaches the limit tens of seconds later.
    too_big = over_memory_limit(the_task, target, size, timed.bytes, memory_limit_mb)
    if too_big:
        _stop(too_big, created)
    if not quiet:
        shapes = [f"{'x'.join(map(str, s))} {d}" for s, d in timed.inputs]
        console.print(timed_line(size, shapes, timed.bytes, the_task.source), highlight=False)
        if target == "cpu" and config.language == "triton":  # said before the speedups are
            console.print(INTERPRETED_NOTE, highlight=False, soft_wrap=True)
        console.print(f"memory bank: {memory}", highlight=False, soft_wrap=True)
        if record is not None:
            console.print(
                f"resuming {out} at step {steps_done(out)}", highlight=False, soft_wrap=True
            )
        else:
            console.print(f"run directory: {out}", highlight=False, soft_wrap=True)
    if (
        record is not None and record.get("steps") != config.steps
    ):  # more steps asked: the run is extended
        from htam.agent.rundir import write_atomic

        write_atomic(out / "run.json", json.dumps({**record, "steps": config.steps}, indent=2))
    title = f"{the_task.id} · {method} · {proposer.name} · {target}/{language} · {size}"
    earlier = finished_records(out) if resume else []
    view = StepsView(title, config.steps, quiet=quiet, verbose=verbose, earlier=earlier)
    try:
        with (
            MemoryBank.open(memory, create=True) as bank,
            Evaluator(
                target,
                EvalConfig(
                    size=size, **limit_overrides(memory_limit_mb, timeout_s, compile_reference)
                ),
            ) as evaluator,
            view.display(),
        ):
            optimizer = Optimizer(proposer, CachedEvaluator(evaluator), bank, config, on_step=view)
            summary = optimizer.run(the_task, out, resume=resume).to_dict()
    except KeyboardInterrupt:  # every finished step is in the run directory
        interrupted()
    except InfrastructureError as exc:
        _stop(
            f"stopped: {exc.what} failed: {exc} (the failed steps are not in the memory; "
            f"--resume --out {out} continues)"
        )
    except TaskError as exc:  # the task loaded, but its reference cannot run here
        _stop(reference_cannot_run(exc, the_task, target, size))
    except (EvaluatorError, MemoryBankError, RunDirError) as exc:
        fail(str(exc))
    summary["bank"] = str(memory)
    # wall_s: the steps alone; both count a resumed run's earlier steps (resumed_s)
    summary["total_s"] = time.monotonic() - started + summary.get("resumed_s", 0.0)
    _finish(summary, out, as_json, quiet)


def _stop(message: str, unused_out: Path | None = None) -> NoReturn:
    """The run cannot go on here (exit 3; with --json, ``{"outcome": "stopped", ...}``); a run
    directory this command created, ``unused_out``, is removed when no step ran in it."""
    if unused_out is not None:
        remove_if_nothing_ran(unused_out)
    fail(message, code=INFRASTRUCTURE_EXIT, outcome="stopped")


def _finish(summary: dict, out: Path, as_json: bool, quiet: bool) -> None:
    """The stats, the evaluator's doubts and the last line (``--quiet``: the last line alone;
    ``--json``: the summary, with ``reason`` and ``stopped_early``, as one object)."""
    code = 1 if summary["outcome"] == "none_correct" else 0
    if as_json:
        echo_json(summary)
        raise typer.Exit(code)
    if not quiet:
        console.print(stats_line(summary), highlight=False)
        for flag in summary["best_flags"]:  # the evaluator's doubts about the kept result
            console.print(f"check the best candidate: {flag}", highlight=False, markup=False)
    console.print(final_line(summary, out), highlight=False, soft_wrap=True, markup=False)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("optimize")(optimize_command)
