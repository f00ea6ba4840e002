"""``htam doctor``: what this machine offers the evaluator, each protection tried for real."""

from __future__ import annotations

import typer

from htam.cli.common import console
from htam.cli.json_errors import echo_json


def doctor_command(
    as_json: bool = typer.Option(False, "--json", help="print one JSON object on stdout"),
) -> None:
    """Try each isolation a candidate runs under, and say what this machine cannot offer."""
    from htam.evaluate.eval_config import cache_root, machine_memory_mb
    from htam.evaluate.sandbox import isolation

    plan = isolation.probe()
    rows = {
        "namespaces (no network, private /tmp and /dev/shm)": plan.namespaces,
        "read-only filesystem outside the job directory": plan.readonly_fs,
        "an own user id per candidate": plan.drop_uid,
        "no new sockets or keyrings (seccomp)": plan.socket_filter,
    }
    gpu = _gpu()
    report = {
        "isolation": plan.summary,
        "checks": rows,
        "missing": list(plan.missing),
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
