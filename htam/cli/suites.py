"""What the commands that run a suite share (``bench``, ``optimize SUITE``, ``transfer``):
its tasks, loaded once and filtered to those whose tensors fit this machine, Ray asked for or
not, a line per finished, lost or fatal unit, and the line that counts them at the end."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from htam.cli.common import INFRASTRUCTURE_EXIT, console, err_console, fail, no_tasks
from htam.cli.console import LoadProgress
from htam.cli.sizes import over_memory_limit, tensor_bytes
from htam.vocab import Size


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


def outcome_line(outcome, retried: bool = True) -> str:
    """A finished bench's units, as ``bench`` and ``optimize SUITE`` end with them: done,
    failed, retried (``retried``: bench, whose units a lost worker re-queues), already finished
    by an earlier run, and the wall time."""
    counts = [f"{len(outcome.done)} done", f"{len(outcome.failed)} failed"]
    if retried:
        counts.append(f"{len(outcome.retried)} retried")
    counts.append(f"{len(outcome.skipped)} already finished")
    return f"{', '.join(counts)} · {outcome.wall_s:.1f} s"
