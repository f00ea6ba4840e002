"""The harness's hand-over of outputs, without a judge: what it keeps after a call."""

import socket

import torch

from htam.evaluate.candidate.harness import Harness
from htam.evaluate.frames import CandidateJob


def _harness(slot: torch.Tensor, x: torch.Tensor) -> tuple[Harness, list]:
    harness = Harness(
        socket.socket(), CandidateJob(code="", language="cpp", device="cpu")
    )  # never used
    harness.sock.close()
    harness.inputs[0], harness.slots[0], harness.grads[0] = [x], [slot], 0
    sent: list = []
    harness.send = sent.append
    return harness, sent


def test_collect_keeps_no_autograd_history_of_the_calls():
    """A reference with parameters returns outputs that require grad; copied into the judge's
    slot with autograd on, each copy chained that call's graph (and the activations it saved)
    onto the slot, so a reference runner held every call it ever made (L2 90: 108 GiB)."""
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.GELU())
    x, slot = torch.randn(8, 32), torch.empty(8, 32)
    harness, sent = _harness(slot, x)
    for _ in range(3):
        harness.pending = [model(x)]
        assert harness.pending[0].requires_grad
        harness.collect()
    assert sent[-1] == {"type": "done", "ms": 0.0, "problem": None}
    assert not slot.requires_grad and slot.grad_fn is None
    with torch.no_grad():
        torch.testing.assert_close(slot, model(x))


def test_a_reference_slower_beside_the_candidate_than_alone_is_flagged():
    from htam.evaluate.host.verdict import reference_drift

    assert reference_drift(8.454, 8.287) is None  # L1 39 on the H200: 2% apart
    assert reference_drift(1.0, None) is None and reference_drift(None, 1.0) is None
    flag = reference_drift(13.0, 10.0)
    assert flag and flag.startswith("the reference took 1.30x its own time")
    assert reference_drift(8.0, 10.0)  # faster beside it is as suspect
    # on a CPU other work moves both more: flagged beyond 2x (newcomer: 14x on a loaded machine)
    assert reference_drift(13.0, 10.0, 2.0) is None
    assert reference_drift(140.0, 10.0, 2.0).startswith("the reference took 14.00x")
    # which speedup a user of the candidate gets: the one against the reference alone
    said = reference_drift(774.714, 375.088, 1.5, 185.0)
    assert said.endswith(
        "rests on the paired time (4.19x); against the reference alone the candidate is 2.03x, "
        "what to expect when it replaces the reference"
    ), said


class _Late(torch.nn.Module):
    """Returns its output at once and writes it again later (as a thread or a stream left
    running would), after the call has returned."""

    def __init__(self):
        super().__init__()
        self.last: torch.Tensor | None = None

    def forward(self, x):
        self.last = torch.full_like(x, float("nan"))
        return self.last


def test_a_slot_written_after_the_call_returned_breaks_its_seal():
    from htam.evaluate.buffers import changed

    x, slot = torch.randn(64, 33), torch.empty(64, 33)
    harness, sent = _harness(slot, x)
    harness.models[0] = model = _Late()

    def call(key: int) -> list[int]:
        harness.call(key)
        assert sent[-1]["type"] == "done" and len(sent[-1]["seals"]) == 1
        return sent[-1]["seals"]

    seals = call(987654321)
    harness.collect()  # handed over as returned: the seal holds
    assert changed([slot], 987654321, seals) is None

    seals = call(5)
    model.last.copy_(torch.relu(x))  # the answer, written late into the returned tensor
    harness.collect()
    assert changed([slot], 5, seals) == 0

    seals = call(6)
    harness.collect()
    slot.copy_(torch.relu(x))  # or straight into the judge's slot
    assert changed([slot], 6, seals) == 0
