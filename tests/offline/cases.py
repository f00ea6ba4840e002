"""Every task the offline tests check: the builtin suite's matched tasks plus tests/offline/sources."""

from __future__ import annotations

import functools

from htam.offline.pipeline import analyze, applicable
from htam.offline.pipeline import match_task as match
from htam.tasks.module import extra_configs, load_task_module
from htam.tasks.task import Task
from tests.offline.harness import task_of
from tests.offline.sources import CASES


# Loaded once per session: three test modules parametrize over them at collection, and each load
# reads, validates and signs every builtin task (seconds, paid three times before).
@functools.cache
def builtin_tasks() -> tuple[Task, ...]:
    from htam.tasks import builtin_suite

    return tuple(builtin_suite())


@functools.cache
def _all_cases() -> tuple[tuple[Task, list[dict]], ...]:
    out = [(task_of(name, src), shapes) for name, (src, _, shapes) in CASES.items()]
    for task in builtin_tasks():
        if match(task) is not None:
            extras = extra_configs(load_task_module(task.source, "small"))
            out.append((task, [{}, *extras]))
    return tuple(out)


def all_cases() -> list[tuple[Task, list[dict]]]:
    """(task, size overrides) for every task that one of the three families should cover."""
    return [(task, [dict(shape) for shape in shapes]) for task, shapes in _all_cases()]


def everything(task: Task, language: str) -> tuple[str, ...]:
    """All strategies with a template for the task, applied together (block sweep excluded:
    it is a ladder; one step of it is checked on its own)."""
    return tuple(
        s for s in applicable(analyze(task), language) if s != "parallel_mapping.block_size_tuning"
    )


def variants(task: Task, language: str, singles: bool) -> list[tuple[str, ...]]:
    """Baseline, all together, and (if ``singles``) each strategy alone."""
    ids = applicable(analyze(task), language)
    out = [(), everything(task, language)]
    return out + ([(s,) for s in ids] if singles else [])
