"""``htam doctor``: what this machine offers the evaluator, each protection tried for real."""

from __future__ import annotations

from dataclasses import replace

import typer

from htam.cli.common import console
from htam.cli.json_errors import echo_json


def doctor_command(
    as_json: bool = typer.Option(False, "--json", help="print one JSON object on stdout"),
) -> None:
    """Try each isolation a candidate runs under, and say what this machine cannot offer."""
    from htam.evaluate.eval_config import cache_root, machine_memory_mb
    from htam.evaluate.host import folders
    from htam.evaluate.host.evaluator import DISK_LIMIT_MB
    from htam.evaluate.sandbox import cgroups, isolation

    cgroup, no_cgroup = cgroups.check()
    no_sized = folders.check_sized()
    plan = isolation.probe()
    plan = replace(
        plan,
        cgroup=cgroup or "",
        sized_dir=0 if no_sized else DISK_LIMIT_MB << 20,
        missing=plan.missing + tuple(why for why in (no_cgroup, no_sized) if why),
    )
    rows = {
        "namespaces (no network, private /tmp and /dev/shm)": plan.namespaces,
        "read-only filesystem outside the job directory": plan.readonly_fs,
        "an own user id per candidate": plan.drop_uid,
        "no new sockets or keyrings (seccomp)": plan.socket_filter,
        f"a memory and process limit per candidate ({cgroup or 'no cgroup'})": bool(cgroup),
        f"a job directory of {DISK_LIMIT_MB / 1024:.1f} GiB (its own tmpfs)": not no_sized,
    }
    gpu = _gpu()
    report = {
        "isolation": plan.summary,
        "checks": rows,
        "missing": list(plan.missing),
        "cgroup": cgroup,
        "job_directory": None if no_sized else f"tmpfs of {DISK_LIMIT_MB} MiB",
        "gpu": gpu,
        "memory_mb": machine_memory_mb(),
        "cache_dir": str(cache_root()),
    }
    if as_json:
        echo_json(report)
        return
    console.print(plan.summary, markup=False, soft_wrap=True)
    for name, ok in rows.items():
        console.print(f"  {'yes' if ok else 'NO '}  {name}", markup=False)
    console.print(f"  gpu: {gpu or 'none visible'}", markup=False)
    console.print(f"  host memory: {report['memory_mb']} MB; cache: {report['cache_dir']}")


def _gpu() -> str | None:
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_name()


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor_command)
