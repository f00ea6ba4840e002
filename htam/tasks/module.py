"""Execute a KernelBench-format task source into a fresh namespace, at a chosen size.

A task file is plain KernelBench: ``Model``, ``get_inputs()``, ``get_init_inputs()`` and module-level
shape constants, which ``get_inputs`` reads when it is called. HTAM adds two optional names:

- ``HTAM_SMALL``: a dict of constant overrides giving the small (CPU test) size. The module's own
  values are the large (GPU) size, so an unmodified KernelBench file is simply "large".
- ``HTAM_EXTRA``: a list of override dicts applied on top of the chosen size: extra shape
  configurations used for correctness only (they catch code hard-wired to one shape).

Overrides are applied by assigning module globals after the source has executed, so every
function that reads a constant at call time sees the chosen size.
"""

from __future__ import annotations

import types
from typing import Any, Literal

Size = Literal["small", "large"]


def exec_task_source(source: str, name: str = "htam_task") -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__["__file__"] = f"<{name}>"
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


def size_overrides(module: types.ModuleType, size: Size) -> dict[str, Any]:
    if size == "small":
        return dict(getattr(module, "HTAM_SMALL", {}) or {})
    return {}


def extra_configs(module: types.ModuleType) -> list[dict[str, Any]]:
    return [dict(c) for c in (getattr(module, "HTAM_EXTRA", []) or [])]


def apply_overrides(module: types.ModuleType, overrides: dict[str, Any]) -> None:
    for key, value in overrides.items():
        if key not in module.__dict__:
            raise KeyError(f"override {key!r} names no module-level constant of the task")
        module.__dict__[key] = value


def load_task_module(
    source: str, size: Size = "small", extra: int | None = None, name: str = "htam_task"
) -> types.ModuleType:
    """Execute ``source`` and apply the size (and optionally extra configuration ``extra``)."""
    module = exec_task_source(source, name)
    apply_overrides(module, size_overrides(module, size))
    if extra is not None:
        apply_overrides(module, extra_configs(module)[extra])
    return module
