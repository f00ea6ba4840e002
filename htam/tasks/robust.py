"""Robust-KBench tasks as that repository ships them, turned into KernelBench-format sources.

A Robust-KBench task is a folder with ``func_forward.py`` + ``config_forward.json`` (and, for a
backward task, ``func_backward.py`` + ``config_backward.json``). The file defines
``forward_fn(...)``, ``Model(**init_kwargs)`` whose ``forward(*inputs, fn=forward_fn)`` calls
``fn`` with its parameters, and ``get_inputs(**input_kwargs)``. The config file holds six
lists: ``single_``/``multi_`` × ``input``/``init``/``shared`` settings. Robust-KBench builds
every (init, input, shared) combination of a list family, in that loop order, with
``get_inputs(**input, **shared)`` and ``Model(**init, **shared)``; a kernel must be correct on
all of them.

The loader keeps the file verbatim and appends an adapter in HTAM's task contract
(``htam.tasks.module``): the keyword arguments become module constants ``RKB_INPUTS`` and
``RKB_INIT`` (with ``RKB_INIT_ARGS``, the same values in ``Model``'s parameter order, because
HTAM builds ``Model(*get_init_inputs())``), and every combination becomes one
``HTAM_CONFIGS`` entry: the first single combination is timed, the remaining single ones and
every multi one are checked for correctness. Duplicates are dropped.

Layouts: a task folder; a folder of task folders (``tasks/``); the ``kernelbench/level_N/
task_M/`` tree of the same repository, where each task folder also holds the original
KernelBench file (``100_HingeLoss.py``), whose name becomes the task's name.
"""

from __future__ import annotations

import inspect
import itertools
import json
import re
import types
from pathlib import Path
from pprint import pformat
from typing import Any

from htam.tasks.module import exec_task_source
from htam.tasks.task import TaskError

SUITE = "robust-kbench"
KINDS = ("forward", "backward")
FUNC_FILE = {kind: f"func_{kind}.py" for kind in KINDS}
CONFIG_FILE = {kind: f"config_{kind}.json" for kind in KINDS}
CONFIG_LISTS = tuple(
    f"{group}_{part}_configs"
    for group in ("single", "multi")
    for part in ("input", "init", "shared")
)
_LEVEL = re.compile(r"level_(\d+)$")
_KERNELBENCH_FILE = re.compile(r"\d+_.+\.py$")


def kind_of(path: Path) -> str | None:
    """The kind of a ``func_*.py`` file ("forward" or "backward"), else None."""
    return next((kind for kind, name in FUNC_FILE.items() if path.name == name), None)


def is_task_dir(path: Path) -> bool:
    return path.is_dir() and any((path / name).is_file() for name in FUNC_FILE.values())


def task_files(directory: Path) -> list[Path]:
    """The ``func_*.py`` files of one task folder: forward first."""
    return [directory / name for name in FUNC_FILE.values() if (directory / name).is_file()]


def suite_paths(root: Path) -> list[Path] | None:
    """Task files under ``root`` when it is a Robust-KBench layout, else None.

    A folder of task folders does not descend into its ``kernelbench/`` tree (200 translated
    KernelBench tasks, not Robust-KBench's own): name that tree to load it.
    """
    if is_task_dir(root):
        return task_files(root)
    levels = _level_dirs(root)
    named = _LEVEL.match(root.name)
    if not levels and named:
        levels = [(int(named.group(1)), root)]
    if levels:
        folders = [f for _, level in levels for f in sorted(level.iterdir(), key=_task_number)]
    else:
        folders = sorted(root.iterdir()) if root.is_dir() else []
    files = [file for folder in folders if is_task_dir(folder) for file in task_files(folder)]
    return files or None


def identity(path: Path, suite: str | None = None) -> tuple[str, str, int | None]:
    """(id, name, level) of a ``func_*.py`` file: ``robust-kbench/layernorm``,
    ``robust-kbench/layernorm_backward``, ``robust-kbench/level1/100_HingeLoss``."""
    folder = path.parent
    match = _LEVEL.match(folder.parent.name)
    level = int(match.group(1)) if match else None
    originals = sorted(p.stem for p in folder.glob("*.py") if _KERNELBENCH_FILE.match(p.name))
    name = originals[0] if level is not None and originals else folder.name
    if kind_of(path) == "backward":
        name += "_backward"
    relative = f"level{level}/{name}" if level is not None else name
    return f"{suite or SUITE}/{relative}", name, level


def configurations(data: Any, where: Path) -> list[tuple[dict, dict]]:
    """Every (input kwargs, init kwargs) combination: single ones first, duplicates dropped."""
    if not isinstance(data, dict):
        raise TaskError(where, f"expected an object with {', '.join(CONFIG_LISTS)}")
    for key in CONFIG_LISTS:
        value = data.get(key)
        if not isinstance(value, list) or not value or not all(isinstance(v, dict) for v in value):
            raise TaskError(where, f"{key} must be a non-empty list of objects")
    found: dict[str, tuple[dict, dict]] = {}
    for group in ("single", "multi"):
        lists = [data[f"{group}_{part}_configs"] for part in ("init", "input", "shared")]
        for init, inputs, shared in itertools.product(*lists):
            pair = ({**inputs, **shared}, {**init, **shared})  # shared last: it overrides
            found.setdefault(json.dumps(pair, sort_keys=True), pair)
    return list(found.values())


def robust_source(path: Path) -> str:
    """The KernelBench-format source of one ``func_*.py`` file and its config file."""
    kind = kind_of(path)
    if kind is None:
        raise TaskError(path, f"not a Robust-KBench task file ({' or '.join(FUNC_FILE.values())})")
    config_path = path.parent / CONFIG_FILE[kind]
    if not config_path.is_file():
        raise TaskError(path.parent, f"{path.name} needs {CONFIG_FILE[kind]} beside it")
    try:
        source = path.read_text(encoding="utf-8")
        data = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        where = config_path if isinstance(error, json.JSONDecodeError) else path
        raise TaskError(where, f"cannot read: {' '.join(str(error).split())}") from error
    pairs = configurations(data, config_path)
    module = _execute(source, path)
    configs = [_config(module, inputs, init, path) for inputs, init in pairs]
    configs = list({json.dumps(c, sort_keys=True): c for c in configs}.values())
    ignored = ignored_init_keys(data, module)
    adapter = _adapter(kind, configs, config_path.name, ignored) + _forward_without_fn(module)
    return source.rstrip() + "\n" + adapter


def _execute(source: str, path: Path) -> types.ModuleType:
    try:
        module = exec_task_source(source, "htam_rkb_" + re.sub(r"\W", "_", path.parent.name))
    except Exception as error:  # the task file's own failure, reported as the task's problem
        message = " ".join(f"{type(error).__name__}: {error}".split())
        raise TaskError(path, f"module fails to execute: {message}") from error
    for name in ("forward_fn", "Model", "get_inputs"):
        if not callable(getattr(module, name, None)):
            raise TaskError(path, f"missing {name} (a Robust-KBench task defines forward_fn, "
                                  "Model and get_inputs)")  # fmt: skip
    return module


def _config(module: types.ModuleType, inputs: dict, init: dict, path: Path) -> dict[str, Any]:
    """One ``HTAM_CONFIGS`` entry; the keyword arguments are checked against the signatures."""
    _check_kwargs(module.get_inputs, inputs, "get_inputs", path)
    parameters = inspect.signature(module.Model).parameters.values()
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    named = {p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    # mnist_pool's config passes kernel_size=2 to a Model() that hard-codes it (Robust-KBench's
    # own harness would fail there): keys Model has no parameter for are dropped, and named.
    init = {k: v for k, v in init.items() if k in named}
    keyword_only = sorted(set(init) - {p.name for p in positional})
    if keyword_only:
        raise TaskError(path, f"Model takes {', '.join(keyword_only)} by keyword only; HTAM "
                              "passes Model(*get_init_inputs()) positionally")  # fmt: skip
    _check_kwargs(module.Model, init, "Model", path)
    args = [init.get(p.name, p.default) for p in positional if p.name in init or
            p.default is not p.empty]  # fmt: skip
    return {"RKB_INPUTS": inputs, "RKB_INIT": init, "RKB_INIT_ARGS": args}


def ignored_init_keys(data: dict, module: types.ModuleType) -> list[str]:
    parameters = inspect.signature(module.Model).parameters.values()
    names = {p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    keys = {
        k for key in CONFIG_LISTS if "init" in key or "shared" in key for c in data[key] for k in c
    }
    return sorted(keys - names)


def _check_kwargs(function: Any, kwargs: dict, name: str, path: Path) -> None:
    try:
        inspect.signature(function).bind(**kwargs)
    except TypeError as error:
        raise TaskError(path, f"{name}(**{kwargs}) does not bind: {error}") from error


def _adapter(kind: str, configs: list[dict[str, Any]], config_name: str, ignored: list[str]) -> str:
    timed = configs[0]
    lines = [
        "",
        "",
        f"# ---- Added by the HTAM loader: {config_name} in HTAM's task contract. ----",
        "# The first configuration is timed; every other one is checked for correctness.",
        "# A candidate defines ModelNew with Model's constructor; its forward takes the same",
        "# inputs (the fn= argument is Robust-KBench's way to swap forward_fn in).",
        f"RKB_INPUTS = {timed['RKB_INPUTS']!r}  # get_inputs(**RKB_INPUTS)",
        f"RKB_INIT = {timed['RKB_INIT']!r}  # Model(**RKB_INIT)",
        f"RKB_INIT_ARGS = {timed['RKB_INIT_ARGS']!r}  # the same, in Model's parameter order",
    ]
    if ignored:
        lines.append(f"# Not passed to Model (it has no such parameter): {', '.join(ignored)}")
    if kind == "backward":
        lines.append("HTAM_KIND = 'backward'  # gradients through AutogradFunction are the task")
    lines += [
        f"HTAM_CONFIGS = {pformat(configs, width=96, sort_dicts=False)}",
        "_rkb_get_inputs = get_inputs",
        "",
        "",
        "def get_inputs():",
        "    return _rkb_get_inputs(**RKB_INPUTS)",
        "",
        "",
        "def get_init_inputs():",
        "    return list(RKB_INIT_ARGS)",
        "",
    ]
    return "\n".join(lines)


def _forward_without_fn(module: types.ModuleType) -> str:
    """Rebinds ``Model.forward`` without its ``fn=forward_fn`` parameter: torch.fx cannot trace
    a function-valued default, and the offline templates and op families come from that trace.
    The class keeps its name, so its own ``super(Model, self)`` calls still work."""
    params = list(inspect.signature(module.Model.forward).parameters.values())[1:]
    inputs = [p for p in params if p.name != "fn"]
    plain = all(p.kind == p.POSITIONAL_OR_KEYWORD and p.default is p.empty for p in inputs)
    if not params or params[-1].name != "fn" or not plain:
        return ""
    names = ", ".join(p.name for p in inputs)
    return (
        "\n\n_rkb_forward_with_fn = Model.forward\n\n\n"
        f"def _rkb_forward(self, {names}):\n"
        f"    return _rkb_forward_with_fn(self, {names}, fn=forward_fn)\n\n\n"
        "Model.forward = _rkb_forward  # forward(inputs) == forward(inputs, fn=forward_fn)\n"
    )


def _level_dirs(root: Path) -> list[tuple[int, Path]]:
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), c) for c in root.iterdir() if (m := _LEVEL.match(c.name))]
    return sorted(f for f in found if f[1].is_dir())


def _task_number(folder: Path) -> tuple[int, str]:
    match = re.search(r"(\d+)$", folder.name)
    return (int(match.group(1)) if match else 1 << 30, folder.name)
