"""Load one task: a KernelBench-format file, a directory with a task file and configs.json, or a
Robust-KBench task as shipped (``func_forward.py``/``func_backward.py``; see ``robust``).

Every problem becomes a ``TaskError`` whose message is one line naming the file and the problem.
"""

from __future__ import annotations

import json
import re
import signal
import threading
import traceback
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from pprint import pformat
from typing import Any

import torch

from htam.tasks import robust
from htam.tasks.module import exec_task_source, size_label
from htam.tasks.runtime import StageError, instantiate
from htam.tasks.signatures import signature
from htam.tasks.task import Task, TaskError

BUILTIN_DIR = Path(__file__).parent / "builtin"
CONFIGS_FILE = "configs.json"
REQUIRED = ("Model", "get_inputs", "get_init_inputs")
# Validation runs the reference for real only when its small size is this cheap; bigger ones
# (an unmodified KernelBench file is "large" at every size) are checked on the meta device.
REAL_RUN_MAX_FLOPS = 1e9
REAL_RUN_MAX_BYTES = 256 * 2**20

_LEVEL_DIR = re.compile(r"level(\d+)$")
# A task's module, and its reference's one run at the small size, in the loading process: a
# task that sleeps or loops there hung every command, silently.
LOAD_TIMEOUT_S = 120.0


class _TooLong(BaseException):  # not caught as the task's own failure
    pass


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Raise _TooLong after ``seconds`` (SIGALRM: the main thread only; elsewhere no limit)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def alarm(signum: int, frame: object) -> None:
        raise _TooLong

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def load_task(path: str | Path, suite: str | None = None, *, validate: bool = True) -> Task:
    """Load and check one task; raises ``TaskError`` (one line: file and problem).

    ``suite`` prefixes the id (default: "builtin" for HTAM's own files, "kernelbench" for files
    of a KernelBench checkout, else "local"). With ``validate`` the reference runs once at size
    small (``_validate``).
    """
    path = Path(path)
    if not path.exists():
        raise TaskError(path, "no such file")
    if robust.is_task_dir(path):
        path = robust.task_files(path)[0]  # a task folder stands for its forward task
    kind = robust.kind_of(path)
    if kind is not None:
        source = robust.robust_source(path)
    else:
        source = _configs_dir_source(path) if path.is_dir() else _read(path)
    task_id, name, level = task_identity(path, suite)
    try:
        with _time_limit(LOAD_TIMEOUT_S):
            module = _execute(source, path, name)
            _check_module(module, path)
            task = Task(id=task_id, name=name, source=source, path=path, level=level,
                        kind=kind or "forward")  # fmt: skip
            if validate:
                _validate(task, path)
    except _TooLong:
        what = "its module and its reference's run at the small size" if validate else "its module"
        raise TaskError(path, f"{what} did not finish within {LOAD_TIMEOUT_S:.0f} s") from None
    return task


def task_identity(path: Path, suite: str | None = None) -> tuple[str, str, int | None]:
    """(id, name, level) from the path alone: "<suite>/[levelN/]<name>", stable across machines."""
    if robust.kind_of(path) is not None:
        return robust.identity(path, suite)
    name = path.name if path.is_dir() else path.stem
    level = level_of(path)
    suite = suite or _default_suite(path)
    relative = f"level{level}/{name}" if level is not None else name
    return f"{suite}/{relative}", name, level


def level_of(path: Path) -> int | None:
    match = _LEVEL_DIR.match(path.parent.name)
    return int(match.group(1)) if match else None


def one_line(error: BaseException, limit: int = 300) -> str:
    """``Type: message`` of an exception on one line (the last line of its traceback)."""
    text = traceback.format_exception_only(type(error), error)[-1]
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _default_suite(path: Path) -> str:
    resolved = path.resolve()
    if resolved.is_relative_to(BUILTIN_DIR.resolve()):
        return "builtin"
    if level_of(path) is not None and resolved.parent.parent.name == "KernelBench":
        return "kernelbench"
    return "local"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise TaskError(path, f"cannot read: {one_line(error)}") from error


def _configs_dir_source(directory: Path) -> str:
    """Source of a Robust-KBench style directory: its task file with configs.json appended."""
    files = sorted(p for p in directory.glob("*.py") if not p.name.startswith("_"))
    configs_path = directory / CONFIGS_FILE
    if not configs_path.is_file():
        raise TaskError(directory, f"a task directory needs {CONFIGS_FILE} next to its task file")
    if len(files) != 1:
        found = ", ".join(p.name for p in files) or "none"
        raise TaskError(
            directory, f"a task directory needs exactly one .py task file (found {found})"
        )
    configs = _read_configs(configs_path)
    source = _read(files[0])
    if re.search(r"^HTAM_CONFIGS\s*=", source, re.MULTILINE):
        raise TaskError(files[0], f"defines HTAM_CONFIGS and has a {CONFIGS_FILE}; keep one")
    return f"{source.rstrip()}\n\n# From {CONFIGS_FILE} (added by the HTAM loader).\nHTAM_CONFIGS = {pformat(configs)}\n"


def _read_configs(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(_read(path))
    except json.JSONDecodeError as error:
        raise TaskError(path, f"invalid JSON: {one_line(error)}") from error
    if isinstance(data, dict):
        data = data.get("configs")
    if not isinstance(data, list) or not data or not all(isinstance(c, dict) for c in data):
        raise TaskError(
            path, 'expected a non-empty list of override objects (or {"configs": [...]})'
        )
    return data


def _execute(source: str, path: Path, name: str) -> types.ModuleType:
    module_name = "htam_task_" + re.sub(r"\W", "_", name)
    try:
        return exec_task_source(source, module_name)
    except SyntaxError as error:
        raise TaskError(path, f"syntax error at line {error.lineno}: {error.msg}") from error
    except ImportError as error:
        raise TaskError(path, f"import error: {one_line(error)}") from error
    except Exception as error:  # any exception of the task's module code is the task's problem
        raise TaskError(path, f"module fails to execute: {one_line(error)}") from error


def _check_module(module: types.ModuleType, path: Path) -> None:
    missing = [n for n in REQUIRED if not callable(getattr(module, n, None))]
    if missing:
        # A Model without arguments is the common case of a missing get_init_inputs: say how.
        none = "; a Model without arguments: def get_init_inputs(): return []"
        hint = none if missing == ["get_init_inputs"] else ""
        raise TaskError(
            path, f"missing {', '.join(missing)} (a task defines {', '.join(REQUIRED)}{hint})"
        )
    overrides = {"HTAM_SMALL": [getattr(module, "HTAM_SMALL", None) or {}]}
    overrides["HTAM_EXTRA"] = list(getattr(module, "HTAM_EXTRA", None) or [])
    overrides["HTAM_CONFIGS"] = list(getattr(module, "HTAM_CONFIGS", None) or [])
    for owner, dicts in overrides.items():
        for config in dicts:
            if not isinstance(config, dict):
                raise TaskError(path, f"{owner} must hold dicts of constant overrides")
            unknown = sorted(k for k in config if k not in module.__dict__)
            if unknown:
                raise TaskError(path, f"{owner} overrides unknown constant(s) {', '.join(unknown)}")


def _validate(task: Task, path: Path) -> None:
    """Run the task once at size small. A failure names what failed (``get_inputs()``, the
    model's construction, or the reference's forward) and the shapes it ran at (``size_label``:
    the reduced size, or the KernelBench size of a file without HTAM_SMALL)."""
    at = size_label(task.source, "small")
    try:
        sig = signature(task, "small")
        if sig.flops <= REAL_RUN_MAX_FLOPS and sig.bytes <= REAL_RUN_MAX_BYTES:
            model, inputs = instantiate(task, "small", staged=True)
            with torch.no_grad():
                model(*inputs)
    except TaskError as error:  # from the isolated run (no meta kernels): already one line
        cause = error.problem
        if cause.startswith("the reference failed to run: "):
            cause = f"the reference failed at {at}: {cause.split(': ', 1)[1]}"
        else:  # "get_inputs() failed: ...", from the child's StageError
            cause = cause.replace(" failed: ", f" failed at {at}: ", 1)
        raise TaskError(path, cause) from error
    except StageError as error:
        raise TaskError(path, f"{error.stage} failed at {at}: {error.cause}") from error
    except Exception as error:  # the reference's own failure, reported as the task's problem
        raise TaskError(path, f"the reference failed at {at}: {one_line(error)}") from error
