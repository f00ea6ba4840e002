"""The ``htam`` command line: ``main`` is the entry point (``htam``, ``python -m htam.cli``);
``app``, the typer application with every command (``htam.cli.application``), is built on first
use, so that ``htam --version`` loads nothing of it and ``import htam.cli`` changes nothing of
the process (no signal handler, no torch)."""

from __future__ import annotations

import os
import signal
import sys
import threading

from htam import __version__

INTERRUPTED_EXIT = 130  # as htam.cli.interrupts says it, which imports typer


def _exit_at_start(signum: int, frame: object) -> None:
    """SIGINT while ``htam`` itself starts (its imports take a while): nothing ran yet, so there
    is nothing to clean up or to resume; no traceback, exit 130."""
    os.write(2, b"interrupted\n")
    os._exit(INTERRUPTED_EXIT)


def main() -> None:
    """Run the command of ``sys.argv``. Ctrl-C while the commands load exits 130 without a
    traceback; then Python's own handler is back (a command's Ctrl-C: ``pipe_safe``) and
    SIGTERM exits 143 through ``finally`` blocks (``htam.signals``)."""
    if sys.argv[1:] == ["--version"]:
        print(f"htam {__version__}")
        return
    main_thread = threading.current_thread() is threading.main_thread()
    # SIGINT ignored (`nohup`, a shell's background job) stays ignored; SIGTERM is handled
    # whatever SIGINT is (a background run stopped with `kill` closes its evaluator too)
    at_start = main_thread and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if at_start:
        signal.signal(signal.SIGINT, _exit_at_start)
    from htam.signals import exit_on_sigterm

    if main_thread:
        exit_on_sigterm()
    from htam.cli.application import app

    if at_start:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    app()


def __getattr__(name: str):
    if name == "app":
        from htam.cli.application import app

        return app
    raise AttributeError(f"module 'htam.cli' has no attribute {name!r}")
