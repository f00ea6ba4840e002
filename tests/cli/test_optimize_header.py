"""The first line of ``htam optimize``: the shapes it times, a 0-dim input named, not blank."""

from __future__ import annotations

from typer.testing import CliRunner

from htam.cli import app

runner = CliRunner()

SCALAR_TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, s):
        return torch.sigmoid(x) * s


def get_inputs():
    return [torch.randn(64, 32), torch.tensor(0.5)]


def get_init_inputs():
    return []
"""


def test_a_zero_dim_input_is_named_scalar_in_the_first_line(fake_evaluator, tmp_path):
    task = tmp_path / "scaled.py"
    task.write_text(SCALAR_TASK)
    args = ["optimize", str(task), "--target", "cpu", "--steps", "1"]
    result = runner.invoke(app, args, env=fake_evaluator)
    assert result.exit_code == 0, (result.output, result.exception)
    first = result.stdout.splitlines()[0]
    assert ": 64x32 float32, scalar float32 (" in first, first  # was "64x32 float32,  float32"
