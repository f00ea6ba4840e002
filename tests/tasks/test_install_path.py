"""HTAM imported from a folder under /tmp (a venv, a clone or a copy there) judges tasks as it
does from anywhere else: the isolated child that runs a reference keeps its import paths."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

RAISES = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        import late_helper  # noqa: F401
        raise ValueError("the reference's own failure")
def get_inputs():
    return [torch.randn(8)]
def get_init_inputs():
    return []
"""

DATA_DEPENDENT = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        # imported late, as torch imports its own modules on first use: from under /tmp too
        from late_helper import EPS
        return x / (x.abs().max().item() + EPS)
def get_inputs():
    return [torch.randn(8)]
def get_init_inputs():
    return []
"""

PROBE = """
import json, sys
from htam.tasks import Task, TaskError
from htam.tasks.signatures import signature
assert __import__("htam").__file__.startswith(sys.argv[1]), __import__("htam").__file__
out = {}
for name in ("raises", "data_dependent"):
    task = Task(name, name, open(sys.argv[1] + "/" + name + ".py").read())
    try:
        out[name] = {"ok": signature(task, "small", "cpu").to_dict()["outputs"]}
    except TaskError as exc:
        out[name] = {"error": str(exc)}
print(json.dumps(out))
"""


@pytest.mark.slow
def test_htam_installed_under_tmp_reports_a_reference_s_own_error(tmp_path):
    home = Path("/tmp") / tmp_path.name  # directly under /tmp, as a venv made there is
    assert str(tmp_path).startswith("/tmp/")
    shutil.copytree(ROOT / "htam", home / "htam", ignore=shutil.ignore_patterns("__pycache__"))
    try:
        (home / "raises.py").write_text(RAISES)
        (home / "data_dependent.py").write_text(DATA_DEPENDENT)
        (home / "late_helper.py").write_text("EPS = 1e-6\n")
        env = {**os.environ, "PYTHONPATH": str(home), "HTAM_CACHE_DIR": str(tmp_path / "c")}
        proc = subprocess.run(
            [sys.executable, "-c", PROBE, str(home)], capture_output=True, text=True,
            env=env, cwd=home, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout.splitlines()[-1])
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert "the reference's own failure" in out["raises"]["error"], out
    assert "ModuleNotFoundError" not in out["raises"]["error"]
    assert out["data_dependent"] == {"ok": [[[8], "float32"]]}, out
