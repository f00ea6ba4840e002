"""``htam bench``: suites x methods x seeds, one worker per GPU (or CPU slot), resumable; its
report (``htam report``, ``htam compare``: :mod:`htam.cli.report_cmd`) in Markdown and HTML."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from htam.cli.common import METHOD_HELP, check_bank, check_cache_dir, console, fail, writable_dir
from htam.cli.fmt import plural
from htam.cli.json_errors import echo_json
from htam.cli.llm_options import BaseUrl, LlmPreset, LlmTimeout, ModelName, build_proposer
from htam.cli.optimize_runs import resume_on_interrupt
from htam.cli.options import (
    AsJson,
    Gpus,
    Language,
    LlmOptions,
    MemoryLimitMb,
    ProposerFactory,
    RunSettings,
    Target,
    TimeoutS,
    bench_config,
    resolve_run,
)
from htam.cli.report_cmd import print_metrics
from htam.cli.sizes import default_size
from htam.cli.suites import (  # noqa: F401 - check_suites, load_tasks: the commands' import
    check_ray,
    check_suites,
    fitting_tasks,
    load_tasks,
    outcome_line,
    print_progress,
)
from htam.cli.workers import LANES_HELP, WORKERS_HELP, csv, parse_levels, plan_workers

RAY_HELP = "run the units on a Ray cluster (pip install 'htam[ray]'), see --ray-address"
RAY_ADDRESS_HELP = (
    "with --ray: local (join the local cluster, or start one for the run), auto (the running "
    "cluster, RAY_ADDRESS) or an address such as host:6379"
)
RAY_SLOTS_HELP = "Ray workers (default: every GPU, or CPU with --target cpu, of the cluster)"

# The options of bench alone (the shared groups: htam.cli.options, htam.cli.llm_options).
Suites = Annotated[
    list[str],
    typer.Argument(
        metavar="SUITE", help="builtin, a KernelBench checkout, a task directory or file"
    ),
]
Methods = Annotated[str, typer.Option("--methods", help=f"comma list of methods: {METHOD_HELP}")]
Steps = Annotated[int, typer.Option("--steps", min=1, help="optimization steps T per unit")]
Seeds = Annotated[int, typer.Option("--seeds", min=1, help="seeds 0..N-1 per (method, task)")]
Size = Annotated[
    str | None,
    typer.Option(
        "--size",
        help="task size: small or large (default: large on a GPU, small on the CPU, where a "
        "bench runs many tasks; optimize times a C++ task at large when it fits 300 MB)",
    ),
]
Workers = Annotated[int | None, typer.Option("--workers", min=1, help=WORKERS_HELP)]
Lanes = Annotated[int | None, typer.Option("--lanes", min=1, help=LANES_HELP)]
Tasks = Annotated[
    str | None, typer.Option("--tasks", help="fnmatch globs on task id or name, comma-separated")
]
Levels = Annotated[str | None, typer.Option("--levels", help="comma list of levels, e.g. 1,2")]
Memory = Annotated[
    Path | None, typer.Option("--memory", help="starting bank for accumulate/frozen modes")
]
MemoryMode = Annotated[str, typer.Option("--memory-mode", help="fresh | accumulate | frozen")]
Out = Annotated[Path, typer.Option("--out", help="bench directory")]
Resume = Annotated[bool, typer.Option("--resume", help="continue the bench in --out")]
Ray = Annotated[bool, typer.Option("--ray", help=RAY_HELP)]
RayAddress = Annotated[str, typer.Option("--ray-address", help=RAY_ADDRESS_HELP)]
RaySlots = Annotated[int | None, typer.Option("--ray-slots", min=1, help=RAY_SLOTS_HELP)]


def bench_command(
    ctx: typer.Context,
    suites: Suites,
    methods: Methods = "htam",
    steps: Steps = 6,
    seeds: Seeds = 1,
    llm: LlmPreset = None,
    base_url: BaseUrl = None,
    model: ModelName = None,
    llm_timeout: LlmTimeout = None,
    proposer: ProposerFactory = None,
    target: Target = None,
    language: Language = None,
    size: Size = None,
    gpus: Gpus = "all",
    workers: Workers = None,
    lanes: Lanes = None,
    tasks: Tasks = None,
    levels: Levels = None,
    memory: Memory = None,
    memory_mode: MemoryMode = "fresh",
    out: Out = Path("runs/bench"),
    resume: Resume = False,
    memory_limit_mb: MemoryLimitMb = None,
    timeout_s: TimeoutS = None,
    ray: Ray = False,
    ray_address: RayAddress = "local",
    ray_slots: RaySlots = None,
    as_json: AsJson = False,
) -> None:
    """Run every (method, seed, task) unit; writes OUT/metrics.json, report.md and report.html.
    On the CPU a task whose evaluation (at least 3x its tensors) exceeds the memory limit is
    skipped (one line each). --json: the units' counts and metrics.json as one object on stdout
    (the lines and the table go to stderr)."""
    from htam.bench import BenchError, run_bench

    ray_spec = check_ray(ray, ray_address, ray_slots)
    _check_memory(memory)
    _check_worker_count(ray_spec, workers, ray_slots)
    llm_options = LlmOptions(llm, base_url, model, llm_timeout, factory=proposer)
    settings = resolve_run(llm_options, target, language, memory_limit_mb, timeout_s)
    the_tasks = load_tasks(suites, parse_levels(levels), tasks)
    bench_size = default_size(settings.target, size)
    the_tasks = fitting_tasks(the_tasks, suites, settings.target, bench_size, memory_limit_mb,
                              ray_spec)  # fmt: skip
    units = len(the_tasks) * len(csv(methods)) * seeds
    plan = plan_workers(settings.target, workers, units, "unit", " (tasks x methods x seeds)",
                        gpus=gpus, ray=ray_spec, lanes=lanes)  # fmt: skip
    build_proposer(settings.spec, settings.target, settings.language)
    config = bench_config(settings, out=out, methods=csv(methods), seeds=seeds, steps=steps,
                          size=bench_size, devices=plan.devices, memory=memory,
                          memory_mode=memory_mode, ray=ray_spec,
                          ray_slots=ray_slots or plan.ray_slots)  # fmt: skip
    check_cache_dir()  # before the first line: a bad path is one line, not a traceback
    writable_dir(out, "--out")
    resume_on_interrupt(ctx, out, "bench")
    console.print(_plan_line(config, settings, len(the_tasks)))
    try:
        outcome = run_bench(config, the_tasks, resume=resume, on_event=print_progress)
    except BenchError as exc:
        fail(str(exc))
    _print_outcome(outcome)
    if as_json:
        echo_json(_outcome_json(outcome, out))


def _outcome_json(outcome, out: Path) -> dict:
    """What ``--json`` prints: the units of this run, where the reports are, and the metrics."""
    import json

    report = outcome.report
    return {
        "out": str(out),
        "planned": outcome.planned,
        "done": len(outcome.done),
        "failed": len(outcome.failed),
        "retried": len(outcome.retried),
        "already_finished": len(outcome.skipped),
        "wall_s": outcome.wall_s,
        "report": {"markdown": str(report.markdown), "html": str(report.html)},
        "metrics": json.loads(Path(report.metrics).read_text()),
    }


def _check_memory(memory: Path | None) -> None:
    """A starting bank is read before anything is written (seen: a traceback)."""
    if memory is None:
        return
    if not memory.exists():
        fail(f"--memory {memory}: no such memory bank (`htam memory init` creates one)")
    check_bank(memory)


def _check_worker_count(ray: str | None, workers: int | None, ray_slots: int | None) -> None:
    if ray is not None and workers is not None and ray_slots is not None:
        fail("--workers and --ray-slots both give the number of Ray workers: give one of them")


def _print_outcome(outcome) -> None:
    """The units done, failed, retried and skipped, the metrics and where the report is."""
    console.print(outcome_line(outcome))
    print_metrics(outcome.report.metrics)
    console.print(f"report: {outcome.report.markdown} · {outcome.report.html}")


def _plan_line(config, settings: RunSettings, tasks: int) -> str:
    """What runs where: tasks x methods x seeds, the workers, the proposer and the memory."""
    if config.ray is not None:
        slots = f", {config.ray_slots} workers" if config.ray_slots else ""
        where = f"Ray ({config.ray}{slots})"
    else:
        where = f"{len(config.devices)} worker(s) ({', '.join(config.devices)})"
    return (
        f"{plural(tasks, 'task')} x {plural(len(config.methods), 'method')} x "
        f"{plural(config.seeds, 'seed')} on {where} · {settings.spec.label()} · "
        f"{settings.target}/{settings.language} · memory {config.memory_mode}"
    )


def register(app: typer.Typer) -> None:
    app.command("bench")(bench_command)
