"""``htam bench``: suites x methods x seeds, one worker per GPU (or CPU slot), resumable; its
report (``htam report``, ``htam compare``: :mod:`htam.cli.report_cmd`) in Markdown and HTML."""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from htam.cli.common import (
    INFRASTRUCTURE_EXIT,
    LANGUAGE_HELP,
    MEMORY_LIMIT_HELP,
    METHOD_HELP,
    TARGET_HELP,
    TIMEOUT_HELP,
    USAGE_EXIT,
    LoadProgress,
    check_cache_dir,
    console,
    err_console,
    fail,
    limit_overrides,
    no_tasks,
    plural,
    resolve_target,
    writable_dir,
)
from htam.cli.report_cmd import fmt, print_metrics
from htam.cli.sizes import (
    default_size,
    over_memory_limit,
    tensor_bytes,
)

RAY_HELP = "run the units on a Ray cluster (pip install 'htam\\[ray]'), see --ray-address"
RAY_ADDRESS_HELP = (
    "with --ray: local (join the local cluster, or start one for the run), auto (the running "
    "cluster, RAY_ADDRESS) or an address such as host:6379"
)
RAY_SLOTS_HELP = "Ray workers (default: every GPU, or CPU with --target cpu, of the cluster)"


def check_ray(ray: bool, address: str) -> str | None:
    """BenchConfig.ray for ``--ray``/``--ray-address``; fails with the install line when Ray is
    asked for and missing."""
    if not ray:
        return None
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        fail("--ray needs Ray: pip install 'htam\\[ray]' (or 'ray\\[default]>=2.9')")
    return address


def _csv(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


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


def gpu_devices(gpus: str) -> list[str]:
    """Worker devices for ``--gpus``: indices into the GPUs this process sees."""
    visible_env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible_env is not None:
        visible = _csv(visible_env)
    else:
        import torch

        visible = [str(i) for i in range(torch.cuda.device_count())]
    if not visible:
        fail("no GPU is visible; use --target cpu")
    if gpus == "all":
        chosen = visible
    else:
        try:
            chosen = [visible[int(i)] for i in _csv(gpus)]
        except (ValueError, IndexError):
            fail(f"--gpus {gpus!r}: give 'all' or indices among the {len(visible)} visible GPUs")
    return [f"cuda:{g}" for g in chosen]


def fitting_tasks(
    tasks: list, suites: list[str], target: str, size: str, memory_limit_mb: int | None, ray
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


def cap_workers(workers: int, units: int, what: str, counted: str = "") -> int:
    """CPU workers for ``units`` units of work: one beyond a unit each would start (importing
    torch) only to wait, and fewer units than ``--workers`` is said in one line on stderr."""
    if units < 1 or workers <= units:
        return workers
    err_console.print(
        f"note: --workers {workers}, but only {plural(units, what)} to run{counted}: "
        f"starting {plural(units, 'worker')}",
        highlight=False,
        soft_wrap=True,
        markup=False,
    )
    return units


def worker_devices(target: str, gpus: str, workers: int) -> list[str]:
    """One worker per device: the GPUs ``--gpus`` names on CUDA, ``workers`` CPU slots else."""
    return gpu_devices(gpus) if target == "cuda" else [f"cpu{i}" for i in range(workers)]


def _progress(kind: str, record: dict) -> None:
    if kind == "unit_end":
        speed = record.get("best_speedup")
        extra = f" {speed:.3g}x" if speed else ""
        console.print(
            escape(
                f"[{record.get('device') or '-'}] {record['unit']}: {record['status']}"
                f" ({record.get('best_status', record.get('error', ''))}{extra})"
            ),
            highlight=False,
        )
    elif kind == "unit_lost":
        console.print(
            f"[yellow]{escape(record['error'])}[/]: {escape(record['unit'])} -> {record['status']}"
        )
    elif kind == "worker_fatal":
        console.print(f"[red]worker {record['worker']}:[/] {escape(record['error'])}")


def bench_command(
    suites: list[str] = typer.Argument(
        ..., help="builtin, a KernelBench checkout, a task directory or file"
    ),
    methods: str = typer.Option("htam", help=f"comma list of methods: {METHOD_HELP}"),
    steps: int = typer.Option(6, min=1, help="optimization steps T per unit"),
    seeds: int = typer.Option(1, min=1, help="seeds 0..N-1 per (method, task)"),
    llm: str | None = typer.Option(None, help="LLM preset (default: the offline proposer)"),
    base_url: str | None = typer.Option(None, help="any OpenAI-compatible endpoint (with --model)"),
    model: str | None = typer.Option(None, help="model name for --llm or --base-url"),
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
    workers: int = typer.Option(1, min=1, help="worker processes when --target cpu"),
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

    ray_spec = check_ray(ray, ray_address)
    offline = llm is None and base_url is None and proposer is None
    target, language = resolve_target(target, language, offline=offline)
    level_list = [int(x) for x in _csv(levels)] if levels else None
    the_tasks = load_tasks(suites, level_list, tasks)
    bench_size = default_size(target, size)
    the_tasks = fitting_tasks(the_tasks, suites, target, bench_size, memory_limit_mb, ray_spec)
    if ray_spec is not None:
        devices = ["ray"]  # placed by Ray
    else:
        if target == "cpu":
            units = len(the_tasks) * len(_csv(methods)) * seeds
            workers = cap_workers(workers, units, "unit", " (tasks x methods x seeds)")
        devices = worker_devices(target, gpus, workers)
    spec = ProposerSpec(llm=llm, base_url=base_url, model=model, factory=proposer)
    _check_proposer(spec, target, language)
    try:
        config = BenchConfig(
            out=out,
            methods=_csv(methods),
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
    where = (
        f"Ray ({ray_spec})"
        if ray_spec is not None
        else f"{len(devices)} worker(s) ({', '.join(devices)})"
    )
    console.print(
        f"{len(the_tasks)} tasks x {len(config.methods)} methods x {seeds} seeds on "
        f"{where} · {spec.describe()} · "
        f"{target}/{language} · memory {memory_mode}"
    )
    try:
        outcome = run_bench(config, the_tasks, resume=resume, on_event=_progress)
    except BenchError as exc:
        fail(str(exc))
    files = outcome.report
    console.print(
        f"{len(outcome.done)} done, {len(outcome.failed)} failed, {len(outcome.retried)} "
        f"retried, {len(outcome.skipped)} already finished · {outcome.wall_s:.1f} s"
    )
    print_metrics(files.metrics)
    console.print(f"report: {files.markdown} · {files.html}")


def _check_proposer(spec, target: str, language: str) -> None:
    """Build the proposer once here, so bad settings fail before any worker starts."""
    from htam.llm.errors import LLMError

    try:
        spec.build(target, language)
    except (ImportError, AttributeError, TypeError, ValueError, LLMError) as exc:
        fail(f"cannot build the proposer {spec.describe()}: {exc}")


def register(app: typer.Typer) -> None:
    app.command("bench")(bench_command)


def is_many(task: str, pattern: str | None, levels: str | None) -> bool:
    """``htam optimize`` runs a batch when given a suite (builtin, a directory) or a filter."""
    return pattern is not None or levels is not None or task == "builtin" or Path(task).is_dir()


def optimize_many(
    suite: str,
    pattern: str | None,
    levels: str | None,
    *,
    method: str,
    steps: int,
    target: str,
    language: str,
    size: str | None,
    memory: Path,
    out: Path | None,
    resume: bool,
    workers: int,
    ray: str | None,
    spec,
    eval_overrides: dict,
) -> int:
    """``htam optimize SUITE``: every task of SUITE through the bench's executor (local pool, or
    Ray), one unit per task, the memory accumulating from ``memory`` into OUT/memory; prints one
    table and returns the exit status (0: some task has a correct candidate, 1: none, 2: some
    task file could not be loaded; it is reported on one line and the other tasks still run).
    On the CPU a task whose tensors exceed the memory limit is skipped, one line each
    (``fitting_tasks``), and there are no more workers than tasks."""
    from htam.agent.rundir import new_run_dir
    from htam.bench import BenchConfig, BenchError, load_rows, run_bench
    from htam.memory import MemoryBank

    level_list = [int(x) for x in _csv(levels)] if levels else None
    errors: list = []  # bad task files: one line each, as `htam tasks list`; the rest still run
    the_tasks = load_tasks([suite], level_list, pattern, errors)
    for error in errors:
        err_console.print(
            f"[bold red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True
        )
    if not the_tasks:  # every task file is bad: each said why above
        raise typer.Exit(USAGE_EXIT)
    size = default_size(target, size)
    memory_limit_mb = eval_overrides.get("memory_limit_mb")
    the_tasks = fitting_tasks(the_tasks, [suite], target, size, memory_limit_mb, ray)
    if out is None:
        if resume:
            fail("--resume of a batch needs its --out")
        out = new_run_dir(Path("runs") / f"batch-{method}")
    writable_dir(out, "batch directory")
    if not memory.exists():
        MemoryBank.open(memory, create=True).close()
    if ray is None and target == "cpu":
        workers = cap_workers(workers, len(the_tasks), "task")
    devices = ["ray"] if ray is not None else worker_devices(target, "all", workers)
    try:
        config = BenchConfig(
            out=out,
            methods=[method],
            steps=steps,
            target=target,
            language=language,
            size=size,
            devices=devices,
            memory=memory,
            memory_mode="accumulate",
            proposer=spec,
            eval_overrides=eval_overrides,
            ray=ray,
        )
        outcome = run_bench(config, the_tasks, resume=resume, on_event=_progress)
    except (ValueError, BenchError) as exc:
        fail(str(exc))
    rows = sorted(load_rows(out), key=lambda r: r.task_id)
    table = Table(title=f"{len(rows)} tasks · {method} · {target}/{language}")
    for name in ("task", "state", "best candidate vs eager", "kept vs eager", "error"):
        table.add_column(name)
    for r in rows:
        table.add_row(
            r.task_id,
            r.state if not r.correct else "correct",
            fmt(r.speedup, "x"),
            fmt(r.kept_speedup, "x"),
            escape((r.error or "").splitlines()[0] if r.error else ""),
        )
    console.print(table)
    console.print(
        f"{len(outcome.done)} done, {len(outcome.failed)} failed, {len(outcome.skipped)} already "
        f"finished · {outcome.wall_s:.1f} s · runs {out}/runs · learned bank "
        f"{config.out / 'memory' / f'{method}.db'} (from {memory}, which is not changed)",
        highlight=False,
        soft_wrap=True,
    )
    if errors:
        err_console.print(
            f"{plural(len(errors), 'task file')} could not be loaded (above); exit {USAGE_EXIT}",
            highlight=False,
        )
        return USAGE_EXIT
    return 0 if any(r.correct for r in rows) else 1
