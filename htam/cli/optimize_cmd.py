"""``htam optimize TASK``: run the HTAM loop on one task with an LLM or the offline proposer.

Exit status: 0 when the run ends with a correct candidate (faster or not: the last line says which
one the user keeps), 1 when no candidate was correct, 2 for a usage error, 3 when the LLM
endpoint failed (before the first step or repeatedly during the run).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import NoReturn

import typer

from htam.cli.common import (
    COMPILE_HELP,
    LANGUAGE_HELP,
    MEMORY_LIMIT_HELP,
    METHOD_HELP,
    TARGET_HELP,
    TIMEOUT_HELP,
    console,
    default_memory,
    err_console,
    fail,
    limit_overrides,
    resolve_target,
    resolve_task,
    timed_size,
)
from htam.cli.optimize_view import StepsView, final_line, stats_line, timed_line

INFRASTRUCTURE_EXIT = 3


def make_proposer(
    llm: str | None, base_url: str | None, model: str | None, target: str, language: str
):
    if llm is None and base_url is None:
        from htam.offline import OfflineProposer

        return OfflineProposer(target=target, language=language)
    from htam.llm import LLMClient, LLMError, LLMProposer, resolve_config

    try:
        return LLMProposer(LLMClient(resolve_config(llm, base_url, model)))
    except LLMError as exc:
        fail(str(exc))


def _preflight(proposer, quiet: bool, as_json: bool) -> None:
    """An LLM endpoint that cannot serve the run stops it here, before the evaluator starts and
    before the memory bank is opened."""
    from htam.llm import LLMError

    if not hasattr(proposer, "check"):
        return
    try:
        note = proposer.check()
    except LLMError as exc:
        _stop(f"the LLM endpoint cannot be used: {exc}", as_json)
    if not quiet or note.startswith("warning"):
        err_console.print(f"LLM: {note}", highlight=False, soft_wrap=True, markup=False)


def _run_dir(out: Path | None, stem: Path, resume: bool) -> Path:
    from htam.agent.rundir import latest_run_dir, new_run_dir

    if out is not None:
        return out
    if not resume:
        return new_run_dir(stem)
    latest = latest_run_dir(stem)
    if latest is None:
        fail(f"--resume: no earlier run {stem}-* to continue; pass --out DIR")
    return latest


def optimize_command(
    task: str = typer.Argument(
        ..., help="task file, or a built-in task id such as level1/6_Softmax"
    ),
    llm: str | None = typer.Option(
        None, help="LLM preset: deepseek, openai, vllm, sglang, ollama, llamacpp"
    ),
    base_url: str | None = typer.Option(None, help="any OpenAI-compatible endpoint (with --model)"),
    model: str | None = typer.Option(None, help="model name for --llm or --base-url"),
    steps: int = typer.Option(6, min=1, help="optimization steps T"),
    target: str | None = typer.Option(None, help=TARGET_HELP),
    language: str | None = typer.Option(None, help=LANGUAGE_HELP),
    size: str | None = typer.Option(
        None, help="size timed: small or large (default: large; on the CPU for C++ under 300 MB)"
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
        False, "--resume", help="continue the run in --out (default: the newest of this task)"
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
    workers: int = typer.Option(1, min=1, help="many tasks: worker processes on the CPU"),
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
    every step to a run directory. TASK may also be a suite (builtin, a directory; or any TASK
    with --tasks/--levels): then every task runs, on --workers or --ray, and one table ends."""
    from htam.agent import InfrastructureError, OptimizeConfig, Optimizer, RunDirError
    from htam.evaluate import CachedEvaluator, EvalConfig, Evaluator, EvaluatorError
    from htam.memory import MemoryBank, MemoryBankError
    from htam.tasks import TaskError, signature

    if verbose:
        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    quiet = quiet or as_json
    target, language = resolve_target(target, language, offline=llm is None and base_url is None)
    from htam.cli.bench_cmd import check_ray, is_many, optimize_many

    if is_many(task, tasks, levels):  # a suite: every task through the bench's executor
        from htam.bench import ProposerSpec

        if seed != 0:
            fail("--seed with many tasks: run `htam bench SUITE --seeds N` instead")
        spec = ProposerSpec(llm=llm, base_url=base_url, model=model)
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
            )
        )
    try:
        config = OptimizeConfig(
            method=method, steps=steps, seed=seed, target=target, language=language
        )
    except ValueError as exc:
        fail(str(exc))
    proposer = make_proposer(llm, base_url, model, target, language)
    _preflight(
        proposer, quiet, as_json
    )  # first: it fails in seconds, loading the tasks takes longer
    the_task = resolve_task(task)
    out = _run_dir(out, Path("runs") / f"{the_task.name}-{method}-s{seed}", resume)
    memory = memory or default_memory()
    size = timed_size(target, language, size, the_task)
    timed = signature(the_task, size)
    if not quiet:
        shapes = [f"{'x'.join(map(str, s))} {d}" for s, d in timed.inputs]
        other = "large" if size == "small" else None
        console.print(timed_line(size, shapes, timed.bytes, other), highlight=False)
        console.print(f"memory bank: {memory}", highlight=False, soft_wrap=True)
        console.print(f"run directory: {out}", highlight=False, soft_wrap=True)
    title = f"{the_task.id} · {method} · {proposer.name} · {target}/{language} · {size}"
    view = StepsView(title, config.steps, quiet=quiet, verbose=verbose)
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
            summary = optimizer.run(the_task, out, resume=resume)
    except InfrastructureError as exc:
        _stop(
            f"stopped: {exc.what} failed: {exc} (the failed steps are not in the memory; "
            f"--resume --out {out} continues)",
            as_json,
        )
    except (TaskError, EvaluatorError, MemoryBankError, RunDirError) as exc:
        fail(str(exc))
    summary["bank"] = str(memory)
    _finish(summary, out, as_json, quiet)


def _stop(message: str, as_json: bool) -> NoReturn:
    if as_json:
        typer.echo(json.dumps({"outcome": "stopped", "error": message}))
    fail(message, code=INFRASTRUCTURE_EXIT)


def _finish(summary: dict, out: Path, as_json: bool, quiet: bool) -> None:
    code = 1 if summary["outcome"] == "none_correct" else 0
    if as_json:
        typer.echo(json.dumps(summary))
        raise typer.Exit(code)
    if not quiet:
        console.print(stats_line(summary), highlight=False)
        if summary["timing_meaningful"] is False:
            console.print("note: Triton interpreter timings on the CPU are not meaningful")
    for flag in summary["best_flags"]:  # the evaluator's doubts about the kept result
        console.print(f"check the best candidate: {flag}", highlight=False, markup=False)
    console.print(final_line(summary, out), highlight=False, soft_wrap=True, markup=False)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("optimize")(optimize_command)
