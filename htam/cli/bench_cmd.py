"""``htam bench``: suites x methods x seeds, one worker per GPU (or CPU slot), resumable; its
report (``htam report``, ``htam compare``: :mod:`htam.cli.report_cmd`) in Markdown and HTML."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from htam.cli.common import (
    INFRASTRUCTURE_EXIT,
    LANGUAGE_HELP,
    MEMORY_LIMIT_HELP,
    METHOD_HELP,
    TARGET_HELP,
    TIMEOUT_HELP,
    check_bank,
    check_cache_dir,
    console,
    err_console,
    fail,
    limit_overrides,
    no_tasks,
    resolve_target,
    writable_dir,
)
from htam.cli.console import LoadProgress
from htam.cli.fmt import plural
from htam.cli.llm_options import (
    BaseUrl,
    LlmPreset,
    LlmTimeout,
    ModelName,
    build_proposer,
    check_llm_options,
)
from htam.cli.optimize_runs import resume_on_interrupt
from htam.cli.report_cmd import print_metrics
from htam.cli.sizes import (
    default_size,
    over_memory_limit,
    tensor_bytes,
)
from htam.cli.workers import LANES_HELP, WORKERS_HELP, csv, parse_levels, plan_workers
from htam.vocab import Size

RAY_HELP = "run the units on a Ray cluster (pip install 'htam[ray]'), see --ray-address"
RAY_ADDRESS_HELP = (
    "with --ray: local (join the local cluster, or start one for the run), auto (the running "
    "cluster, RAY_ADDRESS) or an address such as host:6379"
)
RAY_SLOTS_HELP = "Ray workers (default: every GPU, or CPU with --target cpu, of the cluster)"


def check_ray(ray: bool, address: str, slots: int | None = None) -> str | None:
    """BenchConfig.ray for ``--ray``/``--ray-address``; fails with the install line when Ray is
    asked for and missing, and on Ray's options without ``--ray`` (they were ignored,
    seen in use)."""
    if not ray:
        given = [o for o, v in (("--ray-address", address != "local"), ("--ray-slots", slots)) if v]
        if given:
            fail(
                f"{' and '.join(given)} {'needs' if len(given) == 1 else 'need'} --ray (without "
                "it the tasks run on this machine's workers)"
            )
        return None
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        fail("--ray needs Ray: pip install 'htam\\[ray]' (or 'ray\\[default]>=2.9')")
    return address


def check_suites(suites: list[str]) -> None:
    """A spec naming no suite is one line (exit 2) before any suite is loaded."""
    from htam.tasks import TaskError, check_suite

    for spec in suites:
        try:
            check_suite(spec)
        except TaskError as exc:
            fail(str(exc))


def load_tasks(
    suites: list[str], levels: list[int] | None, pattern: str | None, errors: list | None = None
) -> list:
    """The tasks of ``suites``. A bad task file stops here (exit 2), unless ``errors`` is given:
    then it is appended there and the other tasks still load (an empty result is the caller's)."""
    from htam.tasks import TaskError, load_suite

    check_suites(suites)
    tasks, seen = [], set()
    for spec in suites:
        try:
            with LoadProgress(spec) as progress:
                loaded = load_suite(spec, levels, pattern, errors=errors, on_load=progress)
        except (TaskError, ValueError, FileNotFoundError) as exc:
            fail(str(exc))
        for task in loaded:
            if task.id not in seen:
                seen.add(task.id)
                tasks.append(task)
    if not tasks and not errors:
        no_tasks(suites, filtered=bool(levels or pattern))
    return tasks


def fitting_tasks(
    tasks: list, suites: list[str], target: str, size: Size, memory_limit_mb: int | None, ray
) -> list:
    """The tasks whose tensors at ``size`` fit the memory limit (see ``over_memory_limit``):
    each other one is skipped with its reason on one line of stderr, since its reference could
    only fail at the limit. Checked on local CPU workers only: on a GPU the tensors live in GPU
    memory, and Ray's machines have memory of their own. None fitting exits 3, as one would."""
    if target != "cpu" or ray is not None:
        return tasks
    kept = []
    for task in tasks:
        reason = over_memory_limit(task, target, size, tensor_bytes(task, size), memory_limit_mb)
        if reason is None:
            kept.append(task)
        else:
            err_console.print(f"skipped {reason}", highlight=False, soft_wrap=True, markup=False)
    if tasks and not kept:
        fail(
            f"no task of {', '.join(suites)} fits the host memory allowed here (each is skipped "
            "above)",
            code=INFRASTRUCTURE_EXIT,
        )
    return kept


def print_progress(kind: str, record: dict, where: Console = console) -> None:
    """The bench's ``on_event``: a line per finished, lost or fatal unit on ``where`` (stdout;
    stderr when stdout carries JSON)."""
    if kind == "unit_end":
        speed = record.get("best_speedup")
        extra = f" {speed:.3g}x" if speed else ""
        where.print(
            escape(
                f"[{record.get('device') or '-'}] {record['unit']}: {record['status']}"
                f" ({record.get('best_status', record.get('error', ''))}{extra})"
            ),
            highlight=False,
        )
    elif kind == "unit_lost":
        where.print(
            f"[yellow]{escape(record['error'])}[/]: {escape(record['unit'])} -> {record['status']}"
        )
    elif kind == "worker_fatal":
        where.print(f"[red]worker {record['worker']}:[/] {escape(record['error'])}")


def bench_command(
    ctx: typer.Context,
    suites: list[str] = typer.Argument(
        ..., help="builtin, a KernelBench checkout, a task directory or file"
    ),
    methods: str = typer.Option("htam", help=f"comma list of methods: {METHOD_HELP}"),
    steps: int = typer.Option(6, min=1, help="optimization steps T per unit"),
    seeds: int = typer.Option(1, min=1, help="seeds 0..N-1 per (method, task)"),
    llm: LlmPreset = None,
    base_url: BaseUrl = None,
    model: ModelName = None,
    llm_timeout: LlmTimeout = None,
    proposer: str | None = typer.Option(
        None,
        help="a custom proposer factory module:attr, called with target= and language= "
        "in each worker (e.g. a scripted proposer)",
    ),
    target: str | None = typer.Option(None, help=TARGET_HELP),
    language: str | None = typer.Option(None, help=LANGUAGE_HELP),
    size: str | None = typer.Option(
        None,
        help="task size: small or large (default: large on a GPU, small on the CPU, where a "
        "bench runs many tasks; optimize times a C++ task at large when it fits 300 MB)",
    ),
    gpus: str = typer.Option("all", help="all, or indices of visible GPUs: 0,1 (one worker each)"),
    workers: int | None = typer.Option(None, min=1, help=WORKERS_HELP),
    lanes: int | None = typer.Option(None, min=1, help=LANES_HELP),
    tasks: str | None = typer.Option(
        None, help="fnmatch globs on task id or name, comma-separated"
    ),
    levels: str | None = typer.Option(None, help="comma list of levels, e.g. 1,2"),
    memory: Path | None = typer.Option(None, help="starting bank for accumulate/frozen modes"),
    memory_mode: str = typer.Option("fresh", help="fresh | accumulate | frozen"),
    out: Path = typer.Option(Path("runs/bench"), help="bench directory"),
    resume: bool = typer.Option(False, "--resume", help="continue the bench in --out"),
    memory_limit_mb: int | None = typer.Option(
        None, "--memory-limit-mb", min=256, help=MEMORY_LIMIT_HELP
    ),
    timeout_s: float | None = typer.Option(None, "--timeout-s", min=1.0, help=TIMEOUT_HELP),
    ray: bool = typer.Option(False, "--ray", help=RAY_HELP),
    ray_address: str = typer.Option("local", "--ray-address", help=RAY_ADDRESS_HELP),
    ray_slots: int | None = typer.Option(None, "--ray-slots", min=1, help=RAY_SLOTS_HELP),
) -> None:
    """Run every (method, seed, task) unit; writes OUT/metrics.json, report.md and report.html.
    On the CPU a task whose tensors exceed the memory limit is skipped (one line each)."""
    from htam.bench import BenchConfig, BenchError, ProposerSpec, run_bench

    ray_spec = check_ray(ray, ray_address, ray_slots)
    if memory is not None:  # read before anything is written (seen: a traceback)
        if not memory.exists():
            fail(f"--memory {memory}: no such memory bank (`htam memory init` creates one)")
        check_bank(memory)
    if ray_spec is not None and workers is not None and ray_slots is not None:
        fail("--workers and --ray-slots both give the number of Ray workers: give one of them")
    offline = llm is None and base_url is None and proposer is None
    target, language = resolve_target(target, language, offline=offline)
    level_list = parse_levels(levels)
    the_tasks = load_tasks(suites, level_list, tasks)
    bench_size = default_size(target, size)
    the_tasks = fitting_tasks(the_tasks, suites, target, bench_size, memory_limit_mb, ray_spec)
    units = len(the_tasks) * len(csv(methods)) * seeds
    plan = plan_workers(
        target,
        workers,
        units,
        "unit",
        " (tasks x methods x seeds)",
        gpus=gpus,
        ray=ray_spec,
        lanes=lanes,
    )
    devices, ray_slots = plan.devices, ray_slots or plan.ray_slots
    check_llm_options(llm, base_url, model)
    spec = ProposerSpec(
        llm=llm, base_url=base_url, model=model, factory=proposer, llm_timeout_s=llm_timeout
    )
    build_proposer(spec, target, language)
    try:
        config = BenchConfig(
            out=out,
            methods=csv(methods),
            seeds=seeds,
            steps=steps,
            target=target,
            language=language,
            size=bench_size,
            devices=devices,
            memory=memory,
            memory_mode=memory_mode,
            proposer=spec,
            eval_overrides=limit_overrides(memory_limit_mb, timeout_s),
            ray=ray_spec,
            ray_slots=ray_slots,
        )
    except ValueError as exc:
        fail(str(exc))
    check_cache_dir()  # before the first line: a bad path is one line, not a traceback
    writable_dir(out, "--out")
    resume_on_interrupt(ctx, out, "bench")
    slots = f", {ray_slots} workers" if ray_slots else ""
    where = (
        f"Ray ({ray_spec}{slots})"
        if ray_spec is not None
        else f"{len(devices)} worker(s) ({', '.join(devices)})"
    )
    console.print(
        f"{plural(len(the_tasks), 'task')} x {plural(len(config.methods), 'method')} x "
        f"{plural(seeds, 'seed')} on "
        f"{where} · {spec.label()} · "
        f"{target}/{language} · memory {memory_mode}"
    )
    try:
        outcome = run_bench(config, the_tasks, resume=resume, on_event=print_progress)
    except BenchError as exc:
        fail(str(exc))
    files = outcome.report
    console.print(
        f"{len(outcome.done)} done, {len(outcome.failed)} failed, {len(outcome.retried)} "
        f"retried, {len(outcome.skipped)} already finished · {outcome.wall_s:.1f} s"
    )
    print_metrics(files.metrics)
    console.print(f"report: {files.markdown} · {files.html}")


def register(app: typer.Typer) -> None:
    app.command("bench")(bench_command)
