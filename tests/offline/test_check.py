"""The CPU check (htam.offline.check) and how the coverage script sizes the tasks it checks."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from htam.offline.check import ILL_CONDITIONED, REFERENCE_FAILS, UNCHECKED, Verdict, max_error

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "device" / "offline_coverage.py"


def _coverage():
    spec = importlib.util.spec_from_file_location("offline_coverage", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_max_error_is_the_largest_absolute_difference():
    ref = torch.tensor([1.0, float("nan"), float("inf"), 3.0])
    out = torch.tensor([1.5, float("nan"), float("inf"), 2.0])
    assert max_error(out, ref) == pytest.approx(1.0)
    assert max_error(torch.tensor([0.0, float("nan")]), torch.zeros(2)) == float("inf")


def test_max_error_is_none_where_it_means_nothing():
    assert max_error(torch.zeros(3), torch.zeros(4)) is None  # shapes differ
    assert max_error((torch.zeros(2),), torch.zeros(2)) is None  # not a tensor
    assert max_error(torch.zeros(2, dtype=torch.long), torch.zeros(2, dtype=torch.long)) is None


@pytest.mark.parametrize(
    ("message", "status"),
    [
        ("correct", "correct"),
        ("incorrect: 3 of 8 elements outside", "incorrect"),
        ("error RuntimeError: boom", "error"),
        (f"{UNCHECKED}: {ILL_CONDITIONED} (x)", "unchecked"),
        ("refused: a static rule", "refused"),
    ],
)
def test_verdict_status(message, status):
    assert Verdict(message).status == status


SOURCE = """
import torch
import torch.nn as nn
batch_size = 64
height, width = 224, 224
groups = 32

class Model(nn.Module):
    def forward(self, x):
        return x

def get_inputs():
    return [torch.rand(batch_size, 3, height, width)]

def get_init_inputs():
    return [groups]
"""


def test_shrink_caps_sizes_batch_and_groups():
    small = _coverage().shrink(SOURCE, 32)
    assert "batch_size = 2" in small and "height, width = (32, 32)" in small
    assert "groups = 4" in small


def test_a_size_that_cannot_decide_is_retried_larger():
    cov = _coverage()
    assert cov._retry(f"{UNCHECKED}: {REFERENCE_FAILS} (RuntimeError: output size 0)", 16)
    assert cov._retry(f"{UNCHECKED}, the shrunk task does not build: pooling", 128)
    assert cov._retry(f"{UNCHECKED}: {ILL_CONDITIONED} (...)", 16)
    assert not cov._retry(f"{UNCHECKED}: {ILL_CONDITIONED} (...)", cov.ILL_CAP)
    assert not cov._retry("incorrect: 3 of 8 elements outside", 16)
    assert not cov._retry("correct", 16)


def test_shrink_can_keep_sizes_divisible_by_each_other():
    source = "in_channels = 240\nout_channels = 480\ngroups = 3\nheight = 224\n"
    small = _coverage().shrink(source, 16, factors=True)
    assert "in_channels = 12" in small and "out_channels = 12" in small
    assert "groups = 3" in small and "height = 16" in small
    assert "in_channels = 16" in _coverage().shrink(source, 16)


def test_a_small_cap_leaves_channel_counts_at_sixteen():
    source = "in_channels = 32\nout_channels = 64\nkernel_size = 5\nlength = 131072\n"
    small = _coverage().shrink(source, 4)
    assert "in_channels = 16" in small and "out_channels = 16" in small
    assert "kernel_size = 4" in small and "length = 4" in small
