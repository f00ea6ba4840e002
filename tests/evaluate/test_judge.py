"""The judge's own draws, without runners: what a candidate could learn ahead of a call."""

import os
import types

import pytest
import torch

from htam.evaluate.frames import Job, TimingSettings
from htam.evaluate.judge.judge import Judge
from htam.evaluate.judge.runner import Verdict


def _judge() -> Judge:
    timing = TimingSettings(warmup_ms=0, timing_budget_ms=0, min_timed=1, max_timed=1,
                            l2_flush_mb=0)  # fmt: skip
    job = Job(kind="judge", device="cpu", timing=timing, call_timeout_s=1.0,
              compile_timeout_s=1.0)  # fmt: skip
    return Judge(job, emit=None, cand=None, ref=None)


def test_grad_outputs_are_not_any_calls_inputs():
    """A backward call's grad_outputs come from their own secret: drawn from ``seed + 1`` they
    were exactly the next call's inputs, known to the candidate one call ahead (red team)."""
    module = types.SimpleNamespace(get_inputs=lambda: [torch.randn(64)])
    judge = _judge()
    judge.grad_specs = [((64,), torch.float32)]
    calls = [judge.inputs(module) for _ in range(4)]
    inputs = [x for call in calls for x in call[:1]]
    for call in calls:
        grad = call[1]
        assert not any(torch.equal(grad, x) for x in inputs)
    assert not torch.equal(calls[0][1], calls[1][1])


class _Recorder:
    """A runner that records what the judge does to it, in order."""

    def __init__(self, log: list, name: str):
        self.log, self.name, self.pid = log, name, os.getpid()
        self.stopped, self.trusted, self.baseline_ms = True, True, 0.0
        self.ins, self.slots = [torch.zeros(4)], [torch.zeros(4)]

    def check_still(self):
        self.log.append(f"{self.name} checked")

    def freeze(self, stop: bool, checked: bool = False):
        self.log.append(f"{self.name} {'stopped' if stop else 'thawed'}")
        self.stopped = stop

    def ask(self, message, expect, timeout_s: float):
        self.log.append(f"{self.name} {message.op}")
        return types.SimpleNamespace(ms=0.0, seals=[0], problem=None)


def test_a_thaw_is_on_the_judges_clock(monkeypatch):
    """A runner is let go on only after the clock has started: a helper woken by the thaw can
    compute from the inputs already in place before the call arrives (red team 4: 13.7x for a
    C++ candidate while the thaw came before the clock)."""
    import htam.evaluate.judge.judge as judge_module

    log: list[str] = []
    monkeypatch.setattr(judge_module, "_perf", lambda: log.append("clock") or 0.0)
    judge = _judge()
    judge.cand, judge.ref = _Recorder(log, "cand"), _Recorder(log, "ref")
    judge.copy_ms = 0.0
    judge.call(judge.cand, [torch.ones(4)], 1.0, "test")
    assert log[:4] == ["cand checked", "clock", "cand thawed", "cand call"]


def test_staged_inputs_are_held_once_in_the_reference_runners_buffers():
    """The round's inputs go into the reference runner's lent inputs and the judge's own copy
    is dropped (its footprint, footprint.py); plain values stay in the list as they were."""
    judge = _judge()
    judge.held.staging = True
    judge.ref = types.SimpleNamespace(ins=[torch.zeros(4), None])
    drawn = torch.arange(4.0)
    x = [drawn, 3]
    judge.stage(x)
    assert x[0] is judge.ref.ins[0] and torch.equal(x[0], drawn) and x[1] == 3
    judge.held.seal(judge.ref.ins, x)
    judge.held.check(judge.ref.ins, "trial 0")  # left as they were: no complaint


def test_a_reference_that_modifies_its_staged_inputs_makes_the_task_unjudgeable():
    """Staging is for a reference that left its inputs as they were on the judge's first
    call; one that modifies them on a later call would have the candidate checked against
    inputs that are not the call's, so the task is named, never the candidate."""
    judge = _judge()
    judge.held.staging = True
    judge.ref = types.SimpleNamespace(ins=[torch.zeros(4)])
    x = [torch.ones(4)]
    judge.stage(x)
    judge.held.seal(judge.ref.ins, x)
    judge.ref.ins[0].mul_(2.0)
    with pytest.raises(Verdict) as raised:
        judge.held.check(judge.ref.ins, "timed call 3")
    assert raised.value.infrastructure and "modified its inputs" in raised.value.message


def test_without_staging_the_judge_keeps_its_own_inputs():
    judge = _judge()
    judge.ref = types.SimpleNamespace(ins=[torch.zeros(4)])
    x = [torch.ones(4)]
    judge.stage(x)
    judge.held.seal(judge.ref.ins, x)
    assert x[0] is not judge.ref.ins[0] and judge.held.staged is None


def test_on_a_crowded_card_each_runner_hands_its_cache_back_off_the_clock(monkeypatch):
    """Where the evaluation crowds the card (staging.trims), a runner takes its allocator's
    cache again before the inputs are in place and hands it back after the hand-over, both off
    the judge's clock and while the other runner is stopped: the runners' caches are never
    beside each other (footprint.py: 5.07x the tensors on an H100 before, the 16 GiB norms out
    of memory)."""
    import htam.evaluate.judge.judge as judge_module

    log: list[str] = []
    monkeypatch.setattr(judge_module, "_perf", lambda: log.append("clock") or 0.0)
    judge = _judge()
    judge.held.trims = True
    judge.cand, judge.ref = _Recorder(log, "cand"), _Recorder(log, "ref")
    judge.ref.stopped = False
    monkeypatch.setattr(judge.cand.ins[0], "copy_", lambda v: log.append("inputs copied"))
    judge.call(judge.cand, [torch.ones(4)], 1.0, "test")
    # (Runner.ask thaws a stopped runner itself)
    assert log[:6] == ["ref stopped", "cand cache", "cand stopped", "inputs copied",
                       "cand checked", "clock"]  # fmt: skip
    assert log[-4:] == ["cand collect", "clock", "cand cache", "cand stopped"]


def test_a_staged_draw_is_freed_before_the_release():
    """Staging leaves no name on the judge's own draw: on a GPU the release that follows hands
    its memory back (a loop variable kept it, a copy of the inputs beside the lent buffers)."""
    import weakref

    judge = _judge()
    judge.held.staging = True
    judge.ref = types.SimpleNamespace(ins=[torch.zeros(4)])
    drawn = torch.arange(4.0)
    gone = weakref.ref(drawn)
    x = [drawn]
    del drawn
    freed: list[bool] = []
    judge.held.release = lambda: freed.append(gone() is None)
    judge.stage(x)
    assert freed == [True]
