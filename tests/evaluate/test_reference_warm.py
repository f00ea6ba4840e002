"""The reference's torch.compile warmed off the device's queue (trusted_jobs._warm): it fills the
shared inductor cache for a small task, and leaves a large or backward one to the timed job."""

from __future__ import annotations

import pytest

from htam.evaluate import frames
from htam.evaluate.judge import trusted_jobs
from htam.status import Status

SMALL = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2
def get_inputs():
    return [torch.randn(64, 33)]
def get_init_inputs():
    return []
"""

# 2**29 float32 elements = 2 GiB: sized on the meta device, never allocated
LARGE = SMALL.replace("torch.randn(64, 33)", "torch.randn(2**15, 2**14)")


def _job(source: str, tmp_path) -> frames.Job:
    return frames.Job(
        kind="warm",
        device="cpu",
        task_source=source,
        size="large",
        env={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")},
        timing=frames.TimingSettings(
            warmup_ms=1, timing_budget_ms=1, min_timed=1, max_timed=1, l2_flush_mb=0
        ),
    )


def test_a_large_task_is_left_to_the_timed_job_without_allocating_it(tmp_path):
    sent: list[frames.Frame] = []
    trusted_jobs._warm(_job(LARGE, tmp_path), sent.append)
    assert sent == [frames.ReferenceRan(status=Status.OK, message="not warmed")]


def test_the_meta_size_counts_inputs_and_parameters():
    from htam.tasks.module import load_task_module

    module = load_task_module(LARGE, "large", name="htam_task")
    assert trusted_jobs._meta_bytes(module) == 2**31


@pytest.mark.slow
def test_a_small_task_is_compiled_into_the_shared_inductor_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    sent: list[frames.Frame] = []
    trusted_jobs._warm(_job(SMALL, tmp_path), sent.append)
    assert sent[-1].message == "warmed", sent
    assert any((tmp_path / "inductor").rglob("*.py")), "nothing reached the inductor cache"
