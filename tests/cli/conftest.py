import os
import subprocess
import sys
from contextlib import nullcontext

import pytest

from tests.agent.fake_evaluator import FakeEvaluator


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A command's environment for CliRunner: run from tmp_path, with a cache of its own."""
    monkeypatch.chdir(tmp_path)
    return {"HTAM_CACHE_DIR": str(tmp_path / "cache")}


def start_htam(tmp_path, args: list[str], group: bool = True) -> subprocess.Popen:
    """``htam ARGS`` as a user's shell runs it, from tmp_path with a home and cache of its own,
    its output piped; with ``group`` in a process group of its own (a Ctrl-C sent to that group
    reaches nothing of the test's)."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env |= {"HOME": str(tmp_path), "HTAM_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.Popen(
        [sys.executable, "-m", "htam.cli", *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=group,
    )


@pytest.fixture
def fake_evaluator(monkeypatch, tmp_path):
    """The real loop and offline proposer on an evaluator that compiles nothing."""
    import htam.evaluate

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(
        htam.evaluate, "Evaluator", lambda target, config: nullcontext(FakeEvaluator(config=config))
    )
    monkeypatch.setattr(htam.evaluate, "CachedEvaluator", lambda evaluator: evaluator)
    return {"HTAM_CACHE_DIR": str(tmp_path / "cache")}
