"""What a candidate sees of the filesystem: its Python, wherever it lives, and not the cache."""

import os
import secrets
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from htam.evaluate import Evaluator
from htam.evaluate.sandbox.isolation import needed_paths
from tests.evaluate.conftest import fast_config, task_for

SOLUTION = """
import torch.nn as nn
import htam_probe_module


class ModelNew(nn.Module):
    def forward(self, x):
        return htam_probe_module.relu(x)
"""


def test_import_paths_under_tmp_are_readable_but_never_the_cache(tmp_path, monkeypatch):
    venv = tmp_path / "venv" / "site-packages"  # a virtualenv in /tmp (newcomer: it was not)
    venv.mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [*sys.path, str(venv), str(tmp_path), "/tmp"])
    paths = needed_paths(cache_dir=str(tmp_path / "cache"))
    assert str(venv) in paths
    assert str(tmp_path) not in paths  # it holds the cache: its key and sealed records
    assert "/tmp" not in paths


@pytest.mark.slow
def test_a_candidate_imports_from_a_folder_under_tmp(tmp_path, monkeypatch):
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "htam_probe_module.py").write_text(
        "import torch\n\ndef relu(x):\n    return torch.relu(x)\n"
    )
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(mods), path) if p))
    with Evaluator("cpu", fast_config()) as evaluator:
        result = evaluator.evaluate(task_for("level1/1_ReLU.py"), SOLUTION, "cpp", allow_torch=True)
    assert result.status == "ok", f"{result.messages}\n{result.log[-1500:]}"


READER = """
import os

import torch
import torch.nn as nn

PATH = "BANK_PATH"
print("htam-cache-view", os.path.exists(PATH) and open(PATH).read(), flush=True)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""


@pytest.mark.slow
def test_the_evaluators_cache_is_out_of_view():
    """The cache lay in a candidate's (read-only) view wherever it was not under a home or /tmp,
    its files readable by all: the memory bank, whose SQLite locks a reader can hold (every
    write of the host's then waits, and fails), and the records of earlier jobs."""
    repo = Path(__file__).resolve().parents[2]  # in view wherever the repository lies
    cache = Path(tempfile.mkdtemp(prefix=".htam-test-cache-", dir=repo))
    try:
        cache.chmod(0o755)
        token = "bank-" + secrets.token_hex(8)
        bank = cache / "memory.db"
        bank.write_text(token)
        bank.chmod(0o644)
        code = READER.replace("BANK_PATH", str(bank))
        with Evaluator("cpu", fast_config(cache_dir=cache)) as evaluator:
            result = evaluator.evaluate(task_for("level1/1_ReLU.py"), code, "cpp", allow_torch=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    assert result.status == "ok", f"{result.messages}\n{result.log[-1500:]}"
    assert token not in result.log
    assert "htam-cache-view False" in result.log, result.log[-1500:]
