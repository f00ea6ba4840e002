"""Tasks: KernelBench-format reference operators, suites of them, and their signatures.

Names are imported lazily so that light modules needing only ``Task`` do not import torch.
The signature code lives in ``signatures`` (plural): a submodule named ``signature`` would,
once imported, shadow the ``signature`` function as an attribute of this package.
"""

from htam.lazy import lazy_exports

_EXPORTS = {
    "FAMILIES": "htam.tasks.families",
    "load_task": "htam.tasks.loader",
    "Size": "htam.tasks.module",
    "instantiate": "htam.tasks.runtime",
    "num_extra": "htam.tasks.runtime",
    "Signature": "htam.tasks.signatures",
    "signature": "htam.tasks.signatures",
    "builtin_suite": "htam.tasks.suites",
    "check_suite": "htam.tasks.suites",
    "load_suite": "htam.tasks.suites",
    "Task": "htam.tasks.task",
    "TaskError": "htam.tasks.task",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports("htam.tasks", _EXPORTS)
