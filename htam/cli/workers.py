"""How many workers a suite runs on, and where, for ``optimize SUITE``, ``bench`` and
``transfer``: ``--workers N`` on the CPU (worker processes), on a GPU (one worker per GPU, at most
N GPUs) and on Ray (N Ray workers). Never more workers than units of work; each limit that
starts fewer workers than asked is said in one line on stderr."""

from __future__ import annotations

import os
from dataclasses import dataclass

import typer

from htam.cli.common import err_console, fail
from htam.cli.fmt import plural

# --workers N: what it counts where (transfer has no --ray).
LOCAL_WORKERS_HELP = (
    "worker processes (default: 1 on the CPU; on a GPU one per GPU, N takes N GPUs)"
)
WORKERS_HELP = (
    f"{LOCAL_WORKERS_HELP}; with --ray, N Ray workers (default: one per GPU, or per CPU with "
    "--target cpu, of the cluster)"
)


LANES_HELP = (
    "workers per GPU (default: $HTAM_LANES, else 1): while one worker's candidate is timed, the "
    "others build theirs and ask the LLM; the GPU times one job at a time"
)


def lanes_default() -> int:
    try:
        return max(1, int(os.environ.get("HTAM_LANES", "1")))
    except ValueError:
        fail(f"HTAM_LANES={os.environ['HTAM_LANES']!r}: give a whole number of workers per GPU")


def csv(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def parse_levels(text: str | None) -> list[int] | None:
    """``--levels``: comma-separated integers, or a usage error (exit 2)."""
    if not text:
        return None
    try:
        return [int(part) for part in csv(text)]
    except ValueError as error:
        raise typer.BadParameter(f"expected comma-separated integers, got {text!r}") from error


def gpu_devices(gpus: str) -> list[str]:
    """Worker devices for ``--gpus``: indices into the GPUs this process sees."""
    visible_env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible_env is not None:
        visible = csv(visible_env)
    else:
        import torch

        visible = [str(i) for i in range(torch.cuda.device_count())]
    if not visible:
        fail("no GPU is visible; use --target cpu")
    if gpus == "all":
        chosen = visible
    else:
        try:
            chosen = [visible[int(i)] for i in csv(gpus)]
        except (ValueError, IndexError):
            fail(f"--gpus {gpus!r}: give 'all' or indices among the {len(visible)} visible GPUs")
    return [f"cuda:{g}" for g in chosen]


def _note(text: str) -> None:
    err_console.print(f"note: {text}", highlight=False, soft_wrap=True, markup=False)


def cap_workers(workers: int, units: int, what: str, counted: str = "") -> int:
    """Workers for ``units`` units of work: one beyond a unit each would start (importing torch,
    holding a GPU or a Ray slot) only to wait, and fewer units than ``--workers`` is said in one
    line on stderr."""
    if units < 1 or workers <= units:
        return workers
    _note(
        f"--workers {workers}, but only {plural(units, what)} to run{counted}: "
        f"starting {plural(units, 'worker')}"
    )
    return units


@dataclass(frozen=True)
class Workers:
    """BenchConfig's ``devices`` (one worker each; ``["ray"]`` on Ray) and ``ray_slots``."""

    devices: list[str]
    ray_slots: int | None = None


def plan_workers(
    target: str,
    workers: int | None,
    units: int,
    what: str,
    counted: str = "",
    *,
    gpus: str = "all",
    ray: str | None = None,
    lanes: int | None = None,
) -> Workers:
    """The workers of ``units`` units of work (``what``; ``counted`` says how they are counted).
    ``workers`` is ``--workers`` (None: not given). On Ray it is the number of Ray workers (one
    GPU each on CUDA, one CPU else; not given: every one of the cluster, as Ray decides). On CUDA
    a worker has a GPU of its own, since two workers timing kernels on one GPU disturb each
    other's timings: N takes the first N GPUs of ``--gpus`` (not given: all of them). On the CPU
    it is the number of worker processes (default 1). Every way, at most one worker per unit.
    ``lanes`` workers share each GPU (its timings take turns: htam.evaluate.host.gpu_queue), so that
    builds and LLM calls run while the GPU times."""
    if ray is not None:
        slots = None if workers is None else cap_workers(workers, units, what, counted)
        return Workers(["ray"], slots)
    if target != "cuda":
        count = cap_workers(workers or 1, units, what, counted)
        return Workers([f"cpu{i}" for i in range(count)])
    devices = gpu_devices(gpus)
    lanes = lanes_default() if lanes is None else lanes
    if lanes > 1:
        chosen = devices if workers is None else devices[:workers]
        laned = [d for _ in range(lanes) for d in chosen]
        return Workers(laned[: cap_workers(len(laned), units, what, counted)])
    if workers is None:
        return Workers(devices)
    if workers > len(devices) and (units < 1 or len(devices) <= units):
        where = "visible" if gpus == "all" else f"in --gpus {gpus}"
        _note(
            f"--workers {workers}, but only {plural(len(devices), 'GPU')} {where} (one worker "
            f"per GPU): starting {plural(len(devices), 'worker')}"
        )
        return Workers(devices)
    return Workers(devices[: cap_workers(workers, units, what, counted)])
