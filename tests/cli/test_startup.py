"""``htam`` starts fast and changes nothing by being imported: ``--version`` and ``--help`` load
no torch (seconds on a loaded machine), and importing the CLI installs no signal handler (a
notebook or a test importing ``htam.cli.app`` keeps its own)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "numpy", "matplotlib", "networkx", "jinja2", "openai", "htam.tasks.loader")

PROBE = """
import json, sys
from htam.cli import main
sys.argv = ["htam", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    assert exc.code in (0, None), exc.code
print(json.dumps([m for m in {heavy!r} if m in sys.modules]), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "args", [["--version"], ["--help"], ["optimize", "--help"], ["bench", "--help"],
             ["memory", "plot", "--help"], ["tasks", "list", "--help"]],
)  # fmt: skip
def test_version_and_help_import_no_torch(args):
    run = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stderr.strip().splitlines()[-1]) == []
    assert run.stdout.startswith("htam 0.") if args == ["--version"] else "Usage:" in run.stdout


def test_importing_the_cli_installs_no_signal_handler():
    probe = (
        "import signal\n"
        "before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)\n"
        "from htam.cli import app\n"
        "import typer.main\n"
        "typer.main.get_command(app)\n"
        "assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr


def test_sigterm_is_handled_even_where_sigint_is_ignored(tmp_path):
    """A background job of a shell (or `nohup`) starts with SIGINT ignored: SIGTERM must still
    exit through the evaluator's close (143), not kill htam outright."""
    import os

    probe = (
        "import signal, sys\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "from htam import cli\n"
        "import htam.cli.application as application\n"
        "application.app = lambda: print(signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL,"
        " signal.getsignal(signal.SIGINT) is signal.SIG_IGN)\n"
        "sys.argv = ['htam', 'doctor']\n"
        "cli.main()\n"
    )
    env = {**os.environ, "HTAM_CACHE_DIR": str(tmp_path)}
    run = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=env
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True", "True"]
