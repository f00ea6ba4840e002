"""Execute a KernelBench-format task source into a fresh namespace, at a chosen size.

A task file is plain KernelBench: ``Model``, ``get_inputs()``, ``get_init_inputs()`` and module-level
shape constants, which ``get_inputs`` reads when it is called. HTAM adds two optional names:

- ``HTAM_SMALL``: a dict of constant overrides giving the small (CPU test) size. The module's own
  values are the large (GPU) size, so an unmodified KernelBench file is simply "large".
- ``HTAM_EXTRA``: a list of override dicts applied on top of the chosen size: extra shape
  configurations used for correctness only (they catch code hard-wired to one shape).
- ``HTAM_CONFIGS`` (Robust-KBench style tasks): a list of override dicts, each a complete
  configuration. The first is the timed one (it is applied at both sizes, with ``HTAM_SMALL``
  on top at the small size); the rest are checked for correctness after ``HTAM_EXTRA``. Each
  configuration is completed at execution time with the module's own values of every constant
  any configuration names, so configurations never leak into one another.

Overrides are applied where the source assigns each constant (it is executed again with the
override in place of the module's value), so constants derived from it follow, and every
function that reads a constant at call time sees the chosen size.
"""

from __future__ import annotations

import ast
import re
import types
from typing import Any

from htam.vocab import SIZES, Size

__all__ = ["SIZES", "Size"]  # re-exported: the task helpers' callers name sizes through here
_HAS_SMALL = re.compile(r"^HTAM_SMALL\s*=", re.MULTILINE)


def has_small_size(source: str) -> bool:
    """Whether the task gives a reduced size (``HTAM_SMALL``); an unmodified KernelBench file
    does not, and runs at its own shapes at both sizes. Read from the source: no code runs."""
    return _HAS_SMALL.search(source or "") is not None


def size_label(source: str, size: Size) -> str:
    """What the shapes at ``size`` are, named by where they come from (messages say this, not
    "small": an unmodified KernelBench file is as large at size small as at size large)."""
    if not has_small_size(source):
        return "the KernelBench size (the file's own shapes; it has no HTAM_SMALL)"
    return "the reduced size (HTAM_SMALL)" if size == "small" else "the full size"


def exec_task_source(source: str, name: str = "htam_task") -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__["__file__"] = f"<{name}>"
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    _complete_configs(module)
    return module


def _complete_configs(module: types.ModuleType) -> None:
    # Runs before any override, so the module's own values are still there to fill in with.
    configs = _configs(module)
    if not configs:
        return
    keys = {key for config in configs for key in config if key in module.__dict__}
    defaults = {key: module.__dict__[key] for key in keys}
    module.__dict__["HTAM_CONFIGS"] = [defaults | config for config in configs]


def _configs(module: types.ModuleType) -> list[dict[str, Any]]:
    return [dict(c) for c in (getattr(module, "HTAM_CONFIGS", []) or [])]


def size_overrides(module: types.ModuleType, size: Size) -> dict[str, Any]:
    configs = _configs(module)
    base = configs[0] if configs else {}
    if size == "small":
        return base | dict(getattr(module, "HTAM_SMALL", {}) or {})
    return base


def extra_configs(module: types.ModuleType) -> list[dict[str, Any]]:
    extras = [dict(c) for c in (getattr(module, "HTAM_EXTRA", []) or [])]
    return extras + _configs(module)[1:]


def apply_overrides(module: types.ModuleType, overrides: dict[str, Any]) -> None:
    for key, value in overrides.items():
        if key not in module.__dict__:
            raise KeyError(f"override {key!r} names no module-level constant of the task")
        module.__dict__[key] = value


def load_task_module(
    source: str, size: Size = "small", extra: int | None = None, name: str = "htam_task"
) -> types.ModuleType:
    """Execute ``source`` and apply the size (and optionally extra configuration ``extra``)."""
    first = exec_task_source(source, name)
    overrides = size_overrides(first, size)
    if extra is not None:
        overrides |= extra_configs(first)[extra]
    if not overrides:
        return first
    module = _exec_pinned(source, name, overrides)
    apply_overrides(module, overrides)  # names bound otherwise (a loop, an unpacking)
    if "HTAM_CONFIGS" in first.__dict__:  # completed with the module's own values
        module.__dict__["HTAM_CONFIGS"] = first.__dict__["HTAM_CONFIGS"]
    return module


_PINNED = "__htam_pinned__"


def _exec_pinned(source: str, name: str, overrides: dict[str, Any]) -> types.ModuleType:
    """The source executed again with each module-level ``NAME = value`` of an overridden name
    reading the override instead, so that constants derived from it (``bias_shape =
    (out_channels, 1, 1)``) follow the chosen size."""
    tree = ast.parse(source, f"<{name}>")
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target = node.target
        else:
            continue
        if isinstance(target, ast.Name) and target.id in overrides and node.value is not None:
            pinned = ast.Subscript(
                ast.Name(_PINNED, ast.Load()), ast.Constant(target.id), ast.Load()
            )
            node.value = ast.copy_location(pinned, node.value)
    ast.fix_missing_locations(tree)
    module = types.ModuleType(name)
    module.__dict__.update({"__file__": f"<{name}>", _PINNED: overrides})
    exec(compile(tree, f"<{name}>", "exec"), module.__dict__)
    del module.__dict__[_PINNED]
    return module
