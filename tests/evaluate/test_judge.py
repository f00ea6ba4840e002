"""The judge's own draws, without runners: what a candidate could learn ahead of a call."""

import types

import torch

from htam.evaluate.judge import Judge


def _judge() -> Judge:
    job = {"device": "cpu", "tolerances": {}, "timing": {}, "call_timeout_s": 1.0,
           "compile_timeout_s": 1.0}  # fmt: skip
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
