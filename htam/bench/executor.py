"""The executor seam: what runs a bench's pending units (``Executor``), and which one a bench
asks for (``executor_for``).

Two executors run the same units into the same unit directories and write the same
``units.jsonl`` records through the ledger (``htam.bench.ledger``), so a bench started with one
can be resumed with the other:

- ``local``, the local pool (``htam.bench.executor_local``), the embedded default: one process
  per GPU or CPU slot of this host;
- ``ray`` (``htam.bench.executor_ray``, with ``--ray``): one actor per GPU (or CPU slot) of a Ray
  cluster; only imported, and Ray with it, when ``BenchConfig.ray`` is set.

The executors import the ledger, never this module's choice of them: no cycle.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Protocol

from htam.bench.bench_config import BenchConfig, Unit
from htam.bench.ledger import Ledger
from htam.tasks.task import Task

Pending = deque[tuple[Unit, int]]  # (unit, attempt number), next first


class Executor(Protocol):
    """Runs the pending units to their end: each attempt's end goes to the ledger, a unit whose
    worker died is re-queued (or failed) through ``Ledger.lost``."""

    def run(self) -> None: ...


class ExecutorFactory(Protocol):
    def __call__(
        self, config: BenchConfig, tasks: dict[str, Task], pending: Pending, ledger: Ledger
    ) -> Executor: ...


def _local() -> ExecutorFactory:
    from htam.bench.executor_local import LocalPool

    return LocalPool


def _ray() -> ExecutorFactory:
    from htam.bench.executor_ray import RayPool

    return RayPool


# Each executor by name, imported when chosen (the local pool never imports Ray).
EXECUTORS: dict[str, Callable[[], ExecutorFactory]] = {"local": _local, "ray": _ray}


def executor_for(
    config: BenchConfig, tasks: dict[str, Task], pending: Pending, ledger: Ledger
) -> Executor:
    """The executor ``config`` asks for (``BenchConfig.executor``), ready to run ``pending``."""
    return EXECUTORS[config.executor]()(config, tasks, pending, ledger)
