"""What a candidate sees of the filesystem: its Python, wherever it lives, and not the cache."""

import os
import sys

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
