"""Helpers shared by CLI commands: defaults for target/language/size, tasks by id, the default
memory bank and clean error exits (number and failure formats: ``htam.cli.fmt``)."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import typer
import typer.core

from htam.cli.console import console, err_console  # noqa: F401 - every command's, from here
from htam.signals import TERMINATED_EXIT
from htam.vocab import LANGUAGES, METHOD_NAMES, check_target, languages_help, targets_help

DEFAULT_LANGUAGE = {str(target): str(langs[0]) for target, langs in LANGUAGES.items()}
# Help texts built from the registry (htam.vocab): a new method or language shows up here.
METHOD_HELP = ", ".join(METHOD_NAMES)
TARGET_HELP = f"{targets_help()} (default: cuda when a GPU is visible)"
LANGUAGE_HELP = languages_help()


# Exit statuses shared by the commands (README, "Exit status"): 2 a usage error, 3 when the
# evaluator cannot judge the task here (its reference cannot run) or the LLM endpoint fails.
USAGE_EXIT = 2
INFRASTRUCTURE_EXIT = 3


def fail(message: str, code: int = USAGE_EXIT, **fields: object) -> NoReturn:
    """Print one unwrapped error line (paths in it stay copy-pastable) and exit with `code`.

    Under ``--json`` (``json_requested``) stdout also gets one JSON object, ``{"error": the
    line without "error: ", "exit_code": code}`` and any ``fields`` (``optimize`` adds
    ``"outcome": "stopped"``): a script reading stdout sees why there is no result."""
    from htam.cli.json_errors import json_requested, plain, print_json_error

    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    if json_requested():
        print_json_error(plain(message), code, **fields)
    raise typer.Exit(code)


# A reader that went away (``htam ... | head -2``): the command stops quietly with the status a
# shell reports for a process ended by SIGPIPE (128 + 13), never 1 ("no correct candidate").
CLOSED_STDOUT_EXIT = 141
_closed_stdout_hooks: list[Callable[[], None]] = []


def on_closed_stdout(hook: Callable[[], None]) -> None:
    """Run ``hook`` if this command stops because its stdout was closed (e.g. to remove a run
    directory it created and wrote nothing into)."""
    _closed_stdout_hooks.append(hook)


def pipe_safe(command: Callable) -> Callable:
    """``command`` with a closed stdout (BrokenPipeError) ending it with CLOSED_STDOUT_EXIT and
    no message, as a Unix tool does; click itself would exit 1. Ctrl-C ends it with exit 130
    and one line (``htam.cli.interrupts``), where click would say "Aborted!" and exit 1."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        from htam.cli import interrupts

        _closed_stdout_hooks.clear()
        interrupts.clear_hooks()
        try:
            return command(*args, **kwargs)
        except KeyboardInterrupt:  # Ctrl-C where the command has no handler of its own
            interrupts.interrupted()
        except SystemExit as exc:  # SIGTERM (htam.signals): the same line, exit 143
            if exc.code != TERMINATED_EXIT:
                raise
            interrupts.interrupted(TERMINATED_EXIT)
        except BrokenPipeError:
            for hook in reversed(_closed_stdout_hooks):
                try:
                    hook()
                except OSError:
                    pass
            try:  # what is still buffered for stdout goes nowhere, not to a second error at exit
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
            except (OSError, ValueError):
                pass
            raise typer.Exit(CLOSED_STDOUT_EXIT) from None
        except OSError as exc:  # a path it reads or writes: one line, as every usage error
            if exc.filename is None:
                raise
            fail(path_error(exc))
        finally:
            _closed_stdout_hooks.clear()
            interrupts.clear_hooks()

    return wrapper


def path_error(exc: OSError, path: object = None, doing: str = "") -> str:
    """One line for an OSError on a file: the path the user gave (else the one that failed),
    what was being done, and the cause ("Permission denied", "Read-only file system")."""
    where = path if path is not None else exc.filename
    return f"{where}: {doing + ': ' if doing else ''}{exc.strerror or exc}"


def writable_dir(path: Path, what: str) -> Path:
    """Create ``path``, a directory HTAM will write to, before anything else is printed: a bad
    path is one line here rather than a traceback at the first write."""
    if path.exists() and not path.is_dir():
        fail(f"{what} {path}: exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        cause = f"{blocker} is not a directory" if blocker else (exc.strerror or str(exc))
        fail(f"{what} {path}: cannot create the directory: {cause}")
    if not os.access(path, os.W_OK | os.X_OK):
        fail(f"{what} {path}: the directory is not writable")
    return path


def check_cache_dir() -> Path:
    """HTAM_CACHE_DIR (compiled extensions, evaluation and LLM caches, the default bank)."""
    from htam.evaluate.eval_config import cache_root

    what = "HTAM_CACHE_DIR" if os.environ.get("HTAM_CACHE_DIR") else "cache directory"
    return writable_dir(cache_root(), what)


def check_bank(path: Path, what: str = "--memory") -> None:
    """Open (creating it from the seed if missing) the memory bank at ``path`` once, up front."""
    import sqlite3

    from htam.memory import MemoryBank, MemoryBankError

    if path.is_dir():
        fail(f"{what} {path}: is a directory; give a memory bank file (.db)")
    if not path.parent.is_dir():  # a typo in the path is not a new folder to create
        cause = "is not a directory" if path.parent.exists() else "does not exist"
        fail(f"{what} {path}: its folder {path.parent} {cause}")
    try:
        MemoryBank.open(path, create=True).close()
    except MemoryBankError as exc:
        fail(str(exc))
    except (OSError, sqlite3.Error) as exc:
        cause = getattr(exc, "strerror", None) or str(exc)
        fail(f"{what} {path}: cannot open or create the memory bank: {cause}")


def no_tasks(suites: list[str], filtered: bool) -> NoReturn:
    """An empty suite is a usage error; a checkout whose tasks sit in tasks/ (Robust-KBench's
    root) gets the path to give instead."""
    message = f"no task in {', '.join(suites)}"
    message += " matches the levels and pattern given" if filtered else " (no task files found)"
    inner = [Path(s) / "tasks" for s in suites if (Path(s) / "tasks").is_dir()]
    if inner:
        message += f"; its tasks are in {inner[0]}: give that path instead"
    fail(message)


def default_target() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_target(
    target: str | None, language: str | None, offline: bool = False
) -> tuple[str, str]:
    """Target and language, defaulted; the offline proposer writes Triton on the GPU."""
    target = target or default_target()
    if language is None and offline and target == "cuda":
        language = "triton"
    try:
        the_target, the_language = check_target(target, language)
    except ValueError as exc:
        fail(str(exc))
    if the_target == "cuda" and default_target() != "cuda":  # before anything is printed
        fail("target cuda asked for, but no CUDA device is visible (run with --target cpu)")
    return str(the_target), str(the_language)


def resolve_task(spec: str):
    """A task file, or a built-in task by id (``builtin/level1/6_Softmax``, ``level1/6_Softmax``)
    or name (``6_Softmax``): every command takes the same task names."""
    from htam.tasks import TaskError, builtin_suite, load_task

    path = Path(spec)
    try:
        if path.is_file():
            return load_task(path)
        for task in builtin_suite():
            if spec in (task.id, task.id.removeprefix("builtin/"), task.name):
                return task
    except TaskError as exc:
        fail(str(exc))
    if path.is_dir():
        return _folder_task(spec)
    fail(
        f"{spec}: no such task file, and no built-in task has that id or name "
        "(see `htam tasks list`)"
    )


def _folder_task(spec: str):
    """The one task a folder holds (a Robust-KBench task folder of a forward file alone), else a
    usage error that names the files to give (its forward and backward tasks, say)."""
    from htam.tasks import TaskError, load_suite

    errors: list[TaskError] = []
    try:
        tasks = load_suite(spec, errors=errors)
    except (TaskError, ValueError, FileNotFoundError):
        tasks = []
    if len(tasks) == 1 and not errors:
        return tasks[0]
    message = f"{spec}: is a directory; give one task file (a folder of tasks is a suite)"
    if tasks:
        shown = [f"{t.path} ({t.id})" if t.path else t.id for t in tasks[:4]]
        more = f" and {len(tasks) - 4} more" if len(tasks) > 4 else ""
        message += f": it holds {len(tasks)} tasks: {', '.join(shown)}{more}"
    fail(message)


def reference_cannot_run(error: Exception, task, target: str, size: str | None) -> str:
    """The one-line message for a task whose reference cannot run here (a ``TaskError`` raised
    once the task loaded: over the memory or time limit, a crash at the size timed), with the
    usual cause named for an unmodified KernelBench file timed small on the CPU. Every command exits
    ``INFRASTRUCTURE_EXIT`` (3) with it: the task is fine, this machine cannot judge it."""
    from htam.tasks.module import has_small_size

    hint = memory_hint(str(error), task, target, size)
    if not has_small_size(task.source) and target == "cpu" and size != "large":
        hint += (
            "; this task has no HTAM_SMALL size, so it runs at its full size on the CPU: "
            "add one (see docs/tasks.md)"
        )
    return f"{error}{hint}"


def memory_hint(message: str, task, target: str, size: str | None) -> str:
    """For a reference stopped at the host memory limit on the CPU, the limit that lets it run
    (its tensors' size known from the meta device): the message's own "raise it" names none."""
    from htam.cli.sizes import limit_advice, tensor_bytes
    from htam.vocab import SIZES, size_named

    if target != "cpu" or size not in SIZES or "more host memory" not in message:
        return ""
    advice = limit_advice(tensor_bytes(task, size_named(size)))
    return f"; give {advice}" if advice else ""


def default_memory() -> Path:
    """The bank used when none is named: one per user, shared by every task and method."""
    from htam.evaluate.eval_config import cache_root

    return cache_root() / "memory.db"


# On the CPU, a task's large (GPU) size is timed when its tensors total at most this much: at the
# small test sizes (tens of KB) a candidate's time is mostly call overhead, and speedups there
# say little about the operator (a chain measured 2.5x small, 4.3x large).
MEMORY_LIMIT_HELP = (
    "host memory a candidate or the reference may use, MB (default: half the machine)"
)
TIMEOUT_HELP = (
    "time limit after the build, seconds (default 120; never under 30 s plus 2000 times the "
    "reference's call)"
)


COMPILE_HELP = (
    "also time the reference under torch.compile (on by default on a GPU, off on the CPU: give "
    "--compile-reference there to get it, at 1-3 extra minutes once per task and size)"
)


def limit_overrides(
    memory_limit_mb: int | None, timeout_s: float | None, compile_reference: bool | None = None
) -> dict:
    """EvalConfig fields for the limits a user raised (the message of a hit limit names them)
    and for a torch.compile reference asked for or declined."""
    out: dict = {}
    if compile_reference is not None:
        out["time_compile_reference"] = compile_reference
    if memory_limit_mb is not None:
        out["memory_limit_mb"] = memory_limit_mb
    if timeout_s is not None:
        out["run_timeout_s"] = timeout_s
    return out
