"""``htam optimize TASK``: run the HTAM loop on one task with an LLM or the offline proposer.

Exit status: 0 when the run ends with a correct candidate (faster or not: the last line says which
one the user keeps), 1 when no candidate was correct, 2 for a usage error (a bad path included;
for a suite, any task file that could not be loaded, after the others ran), 3 when the LLM
endpoint failed (before the first step or repeatedly during the run) or the task's reference
cannot run here (refused before anything runs when, on the CPU, 3 times its tensors exceed
the memory limit), 130 when interrupted (Ctrl-C; ``--resume`` continues), 141 when stdout was
closed (``| head``: it stops quietly, and a run directory with no finished step is removed).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from htam.cli.common import (
    METHOD_HELP,
    check_bank,
    check_cache_dir,
    default_memory,
    fail,
    writable_dir,
)
from htam.cli.llm_options import BaseUrl, LlmPreset, LlmTimeout, ModelName, build_proposer
from htam.cli.optimize_one import OptimizeRun, optimize_one
from htam.cli.optimize_runs import check_run_out
from htam.cli.options import (
    AsJson,
    CompileReference,
    Language,
    LlmOptions,
    MemoryLimitMb,
    Target,
    TimeoutS,
    output_mode,
    resolve_run,
)
from htam.cli.sizes import check_size
from htam.cli.suites import check_ray
from htam.cli.workers import WORKERS_HELP, parse_levels

# The options of optimize alone (the shared groups: htam.cli.options, htam.cli.llm_options).
TaskArg = Annotated[
    str,
    typer.Argument(
        metavar="TASK", help="task file, or a built-in task id such as level1/6_Softmax"
    ),
]
Steps = Annotated[int, typer.Option("--steps", min=1, help="optimization steps T")]
Size = Annotated[
    str | None,
    typer.Option(
        "--size",
        help="size timed: small or large (default: large on a GPU; on the CPU, large for one "
        "C++ task under 300 MB whose evaluation the memory limit holds, else small, and small "
        "for a suite)",
    ),
]
Memory = Annotated[
    Path | None,
    typer.Option(
        "--memory",
        help="memory bank (SQLite); created from the seed if missing; see `htam memory path`",
    ),
]
Method = Annotated[str, typer.Option("--method", help=METHOD_HELP)]
Seed = Annotated[int, typer.Option("--seed", help="seed of the direction policy and the LLM")]
Out = Annotated[
    Path | None,
    typer.Option(
        "--out", help="run directory (default: a new runs/<task>-<method>-s<seed>-<time>)"
    ),
]
Resume = Annotated[
    bool,
    typer.Option(
        "--resume",
        help="continue the run in --out (default: the newest run of this task, method and seed)",
    ),
]
# A suite: many tasks.
Tasks = Annotated[
    str | None,
    typer.Option(
        "--tasks", help="many tasks: fnmatch globs on task id or name within TASK (a suite)"
    ),
]
Levels = Annotated[str | None, typer.Option("--levels", help="many tasks: comma list of levels")]
Workers = Annotated[
    int | None, typer.Option("--workers", min=1, help=f"many tasks: {WORKERS_HELP}")
]
Ray = Annotated[bool, typer.Option("--ray", help="many tasks: run them on a Ray cluster")]
RayAddress = Annotated[
    str, typer.Option("--ray-address", help="with --ray: local, auto, or an address")
]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="print only the last line")]
Verbose = Annotated[
    bool,
    typer.Option("--verbose", "-v", help="also LLM retries and each failure's first line"),
]


def optimize_command(
    ctx: typer.Context,
    task: TaskArg,
    llm: LlmPreset = None,
    base_url: BaseUrl = None,
    model: ModelName = None,
    llm_timeout: LlmTimeout = None,
    steps: Steps = 6,
    target: Target = None,
    language: Language = None,
    size: Size = None,
    memory: Memory = None,
    method: Method = "htam",
    seed: Seed = 0,
    out: Out = None,
    resume: Resume = False,
    memory_limit_mb: MemoryLimitMb = None,
    timeout_s: TimeoutS = None,
    compile_reference: CompileReference = None,
    tasks: Tasks = None,
    levels: Levels = None,
    workers: Workers = None,
    ray: Ray = False,
    ray_address: RayAddress = "local",
    as_json: AsJson = False,
    quiet: Quiet = False,
    verbose: Verbose = False,
) -> None:
    """Optimize TASK for T steps; writes best.py (when faster than PyTorch), summary.json and
    every step to a run directory. TASK may also be a suite (builtin, a KernelBench checkout or
    a directory of tasks; --tasks/--levels filter it, and make a task file a suite of one): then
    every task runs, on --workers or --ray, and one table ends (--json: one JSON object)."""
    from htam.cli.optimize_suite import is_many

    started = time.monotonic()
    quiet = output_mode(quiet, verbose, as_json)
    llm_options = LlmOptions(llm, base_url, model, llm_timeout)
    limits = (memory_limit_mb, timeout_s, compile_reference)
    settings = resolve_run(llm_options, target, language, *limits)
    check_size(size)  # before the run directory exists: a bad value leaves nothing behind
    parse_levels(levels)
    many = is_many(task, tasks, levels)
    _check_spread(task, seed, many, workers, ray)
    # The LLM endpoint first: it fails in seconds, and before the memory bank is created
    # (seen: a bank was left behind by a run refused for its endpoint).
    proposer = build_proposer(settings.spec, settings.target, settings.language, quiet)
    out_is_new = _check_paths(memory, out, many, resume)
    _check_filter(task, tasks, levels)
    run = OptimizeRun(ctx, task, settings, proposer, method, steps, seed, size,
                      memory or default_memory(), out, out_is_new, resume, memory_limit_mb,
                      as_json, quiet, verbose, started)  # fmt: skip
    if many:  # a suite: every task through the bench's executor
        _optimize_suite(run, tasks, levels, workers, check_ray(ray, ray_address))
    optimize_one(run)


def _check_spread(task: str, seed: int, many: bool, workers: int | None, ray: bool) -> None:
    """A negative seed, and --workers/--ray on one task (they spread a suite's tasks)."""
    if seed < 0:
        fail(f"--seed {seed}: a seed is a whole number from 0")
    if not many and ((workers or 1) > 1 or ray):  # they run a suite's tasks side by side
        used = f"--workers {workers}" if (workers or 1) > 1 else "--ray"
        fail(
            f"{used} runs the tasks of a suite side by side, and {task} is one task; leave it "
            "out, or give a suite (builtin, a directory, or --tasks/--levels)"
        )


def _check_paths(memory: Path | None, out: Path | None, many: bool, resume: bool) -> bool:
    """Every path the run writes to, created or opened before anything is printed: a bad one is
    one line (exit 2), not a traceback at its first write. True when ``out`` is a directory this
    command creates."""
    check_cache_dir()
    check_bank(memory or default_memory(), "--memory" if memory else "memory bank")
    out_is_new = out is None or not out.exists()
    if out is not None:
        if not many:
            check_run_out(out, resume)
        writable_dir(out, "--out")
    return out_is_new


def _check_filter(task: str, tasks: str | None, levels: str | None) -> None:
    """--tasks/--levels filter a suite: a TASK that is no file or directory is refused."""
    if (tasks is not None or levels is not None) and task != "builtin" and not Path(task).exists():
        fail(
            f"{task}: --tasks/--levels filter a suite (builtin, a KernelBench checkout, a "
            "directory or a task file), and this is no file or directory; for built-in tasks "
            f"give `builtin --tasks {Path(task).name}`, or leave --tasks/--levels out"
        )


def _optimize_suite(
    run: OptimizeRun, tasks: str | None, levels: str | None, workers: int | None, ray: str | None
) -> NoReturn:
    """Every task of the suite TASK through the bench's executor; exits with its status."""
    from htam.cli.optimize_suite import optimize_many

    if run.seed != 0:
        fail("--seed with many tasks: run `htam bench SUITE --seeds N` instead")
    raise typer.Exit(optimize_many(run, tasks, levels, workers, ray))


def register(app: typer.Typer) -> None:
    app.command("optimize")(optimize_command)
