"""Suites: the built-in one, a KernelBench checkout, a directory of tasks, or a single file.

``spec`` resolution, in order:

1. ``"builtin"``: HTAM's own tasks (``htam/tasks/builtin/level{1,2,3}``), ids ``builtin/...``.
2. A file: that one task.
3. A directory with a ``KernelBench/`` folder (a KernelBench repository root), or a directory
   holding ``level<N>/`` folders (e.g. the ``KernelBench/`` folder itself): every
   ``level<N>/*.py``. For a KernelBench checkout the default levels are 1-3 (level 4 needs
   Hugging Face models); ids are ``kernelbench/level1/19_ReLU``.
4. A Robust-KBench layout as shipped (``htam.tasks.robust``): a task folder (its forward and
   backward tasks), a folder of task folders, or its ``kernelbench/level_N/task_M/`` tree;
   ids ``robust-kbench/layernorm``, ``robust-kbench/layernorm_backward``,
   ``robust-kbench/level1/100_HingeLoss``.
5. A directory with ``configs.json``: one HTAM Robust-KBench style task.
6. Any other directory: its ``*.py`` task files and its sub-directories holding a
   ``configs.json``, ids ``<directory name>/<task name>``; but one folder named ``level<N>``
   gives its files the ids they have alone (``kernelbench/level1/19_ReLU`` in a checkout).

Files whose names start with ``_`` (``__init__.py``) are never tasks, nor are solution files
kept beside the tasks (a ``ModelNew`` and no ``get_inputs``: ``htam eval``'s input, not a task).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from fnmatch import fnmatch
from pathlib import Path

from htam.tasks import robust
from htam.tasks.loader import BUILTIN_DIR, CONFIGS_FILE, load_task, task_identity
from htam.tasks.task import Task, TaskError

KERNELBENCH_LEVELS = [1, 2, 3]


def builtin_suite() -> list[Task]:
    return load_suite("builtin")


def load_suite(
    spec: str | Path,
    levels: list[int] | None = None,
    pattern: str | None = None,
    *,
    errors: list[TaskError] | None = None,
    validate: bool = True,
    on_load: Callable[[int, int, str], None] | None = None,
) -> list[Task]:
    """Load the tasks of ``spec`` (see the module docstring), filtered by level and pattern.

    ``pattern`` is an fnmatch glob, or several separated by commas, matched against each task's
    id with and without its suite and its name. A bad task file raises its ``TaskError``, unless ``errors`` is given: then it is
    appended there and the remaining tasks still load. ``on_load(done, total, task_id)`` is
    called before each file is loaded (a validated KernelBench level takes minutes).
    """
    paths, suite, default_levels = _resolve(spec)
    levels = levels or default_levels
    chosen = []
    for path in paths:
        task_id, name, level = task_identity(path, suite)
        if levels is not None and level not in levels:
            continue
        # the ids every command takes: builtin/level1/1_ReLU, level1/1_ReLU (optimize's), 1_ReLU
        names = (task_id, task_id.split("/", 1)[-1], name)
        if pattern is None or any(fnmatch(n, g) for g in pattern.split(",") for n in names):
            chosen.append((path, task_id))
    tasks = []
    for done, (path, task_id) in enumerate(chosen):
        if on_load is not None:
            on_load(done, len(chosen), task_id)
        try:
            tasks.append(load_task(path, suite, validate=validate))
        except TaskError as error:
            if errors is None:
                raise
            errors.append(error)
    return tasks


def check_suite(spec: str | Path) -> None:
    """Raise the ``TaskError`` that ``load_suite`` would for a spec naming no suite, before any
    task is loaded (loading a suite can take minutes)."""
    _resolve(spec)


def _resolve(spec: str | Path) -> tuple[list[Path], str | None, list[int] | None]:
    """(task paths, suite name or None to let each path decide, default level filter)."""
    if str(spec) == "builtin":
        return level_tasks(BUILTIN_DIR), "builtin", None
    root = Path(spec)
    if not root.exists():
        raise TaskError(
            root, "no such file or directory (expected 'builtin', a KernelBench checkout, "
            "a directory of tasks or a task file)"
        )  # fmt: skip
    if root.is_file():
        return [root], None, None
    robust_paths = robust.suite_paths(root)
    if robust_paths is not None:
        return robust_paths, robust.SUITE, None
    if _level_dirs(root / "KernelBench"):
        return level_tasks(root / "KernelBench"), "kernelbench", KERNELBENCH_LEVELS
    if _level_dirs(root):
        if root.name == "KernelBench":
            return level_tasks(root), "kernelbench", KERNELBENCH_LEVELS
        return level_tasks(root), root.name, None
    if (root / CONFIGS_FILE).is_file():
        return [root], None, None
    if re.fullmatch(r"level\d+", root.name):  # one level folder: ids as its files alone have
        return _task_paths(root), None, None
    return _task_paths(root), root.name, None


def level_tasks(root: Path) -> list[Path]:
    """Task paths in ``root/level<N>/``, by level then by KernelBench number."""
    return [path for _, directory in _level_dirs(root) for path in _task_paths(directory)]


def _level_dirs(root: Path) -> list[tuple[int, Path]]:
    if not root.is_dir():
        return []
    found = []
    for child in root.iterdir():
        match = re.fullmatch(r"level(\d+)", child.name)
        if match and child.is_dir():
            found.append((int(match.group(1)), child))
    return sorted(found)


def _task_paths(directory: Path) -> list[Path]:
    paths = [
        child
        for child in directory.iterdir()
        if not child.name.startswith(("_", "."))
        and (
            (child.is_file() and child.suffix == ".py" and not is_solution_file(child))
            or (child.is_dir() and (child / CONFIGS_FILE).is_file())
        )
    ]
    return sorted(paths, key=_natural_key)


def is_solution_file(path: Path) -> bool:
    """A candidate (``ModelNew`` at the top level, no ``get_inputs``), read without running it.
    A file that cannot be read or parsed is not one: loading it says what is wrong."""
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return False
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return "ModelNew" in names and "get_inputs" not in names


def _natural_key(path: Path) -> tuple[int, str]:
    # KernelBench numbers its files: 2_ before 10_.
    match = re.match(r"(\d+)", path.name)
    return (int(match.group(1)) if match else 1 << 30, path.name)
