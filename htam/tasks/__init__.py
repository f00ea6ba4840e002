"""Tasks: KernelBench-format reference operators, suites of them, and their signatures."""

from htam.tasks.families import FAMILIES
from htam.tasks.loader import load_task
from htam.tasks.module import Size
from htam.tasks.runtime import instantiate, num_extra
from htam.tasks.signature import Signature, signature
from htam.tasks.suites import builtin_suite, load_suite
from htam.tasks.task import Task, TaskError

__all__ = [
    "FAMILIES",
    "Signature",
    "Size",
    "Task",
    "TaskError",
    "builtin_suite",
    "instantiate",
    "load_suite",
    "load_task",
    "num_extra",
    "signature",
]
