"""The fork server (``python -m htam.evaluate.sandbox.serve FD``) ends quietly, with no traceback, when
its client goes away while it still starts (imports torch): its channel closed, its home and
work root removed. A failure of its own still shows its traceback."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from htam.evaluate import channel, frames
from htam.evaluate.host.folders import mountinfo
from htam.evaluate.host.forkserver import scrubbed_env
from htam.evaluate.server_frames import Config

ROOT = str(Path(__file__).resolve().parents[2])


def _start(workroot: Path, home: Path) -> tuple[subprocess.Popen, socket.socket]:
    workroot.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    proc = subprocess.Popen(
        [sys.executable, "-m", "htam.evaluate.sandbox.serve", str(theirs.fileno())],
        pass_fds=[theirs.fileno()],
        env=scrubbed_env({"PYTHONPATH": ROOT, "TRITON_INTERPRET": "1"}),
        cwd=home,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    theirs.close()
    channel.send(ours, Config(workroot=str(workroot)))
    return proc, ours


@pytest.mark.slow
def test_a_closed_channel_while_it_imports_torch_ends_it_quietly(tmp_path):
    proc, ours = _start(tmp_path / "work", tmp_path / "home")
    ours.close()  # the client went away: the server meets it when it says "ready"
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, (proc.returncode, stderr)
    assert "Traceback" not in stderr, stderr
    # its standbys' sized job directories (tmpfs, as root) are not left mounted on the host
    assert not [p for p, _, _ in mountinfo() if p.startswith(str(tmp_path))]


@pytest.mark.slow
def test_its_work_root_removed_while_it_imports_torch_ends_it_quietly(tmp_path):
    """What the client did when Ctrl-C came mid-start: its cleanup removed the work root, and
    its end of the channel closed as it exited."""
    work = tmp_path / "work"
    proc, ours = _start(work, tmp_path / "home")
    shutil.rmtree(work)
    ours.close()
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, (proc.returncode, stderr)
    assert "Traceback" not in stderr, stderr


def test_its_home_removed_before_it_starts_ends_it_quietly(tmp_path):
    home = tmp_path / "work" / "home"
    proc, ours = _start(tmp_path / "work", home)
    home.rmdir()  # mostly before Python reaches serve(); later, it finds the folders gone
    try:
        _, stderr = proc.communicate(timeout=120)
    finally:
        ours.close()
    assert "Traceback" not in stderr, stderr


def test_its_own_failure_keeps_its_traceback(tmp_path):
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "htam.evaluate.sandbox.serve", str(theirs.fileno())],
        pass_fds=[theirs.fileno()],
        env=scrubbed_env({"PYTHONPATH": ROOT}),
        cwd=home,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    theirs.close()
    payload = b'{"no":"workroot"}'  # a config it cannot use: a fault, not a goodbye
    ours.sendall(frames.HEADER.pack(len(payload)) + payload)
    _, stderr = proc.communicate(timeout=120)
    ours.close()
    assert proc.returncode != 0 and "ChannelError: malformed message" in stderr, stderr
    assert os.path.isdir(home)
