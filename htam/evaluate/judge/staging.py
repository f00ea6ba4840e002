"""The judge's own memory on a large task (footprint.py): each round's inputs held once, in the
reference runner's lent inputs, and what the judge's allocator cached handed back each round.

A reference that leaves its inputs as they were (the judge's first call shows it) lets its
runner's lent inputs hold each round's inputs for the judge: the candidate's inputs are copied
from them and checked against them, and the judge keeps no copy of its own beside them. The
reference is trusted code and the candidate cannot reach its runner's buffers, so a seal taken
before the round and checked after the reference's call shows that they still are the round's
inputs (a reference that modifies them on a later call makes the task unjudgeable, never the
candidate's fault).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import torch

from htam.evaluate import buffers, footprint
from htam.evaluate.judge.runner import Verdict

# Tensors of a call (inputs and outputs) from which the judge hands its cache back each round:
# below it the card's memory is no concern, and the allocator's reuse saves time.
LARGE_BYTES = 1 << 28
# The share of the card beyond which an evaluation's footprint (footprint.needed_bytes) has each
# runner hand its allocator's cache back between its calls: two extra requests a call, worth it
# only where the runners' caches beside each other would crowd the card.
TRIM_SHARE = 0.25


def trims(tensor_bytes: int, device: str) -> bool:
    """Whether the runners' caches are handed back between calls, for tensors of this size."""
    if device != "cuda":
        return False
    card = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    return footprint.needed_bytes(tensor_bytes) > TRIM_SHARE * card


def nbytes(values: list) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def seals(values: list, key: int) -> list[int]:
    return [buffers.seal(v, key) for v in values if isinstance(v, torch.Tensor)]


@dataclass
class Held:
    """How one configuration's round inputs are held on ``device``: ``staging`` in the
    reference runner's lent inputs; ``large``: the judge's cache goes back each round;
    ``staged``: the key and seals of the round's staged inputs; ``trims``: each runner hands
    its allocator's cache back between its calls (Judge.call)."""

    device: str
    staging: bool = False
    large: bool = False
    trims: bool = False
    staged: tuple[int, list[int]] | None = None

    def stage(self, ins: list, x: list) -> None:
        """Copy the tensors of ``x`` into the reference runner's inputs ``ins`` and put those
        in their place in the list, freeing the judge's own copy (once nothing else holds it)."""
        if not self.staging:
            return
        for k, buf in enumerate(ins):
            if buf is not None and buf is not x[k]:
                buf.copy_(x[k])
                x[k] = buf  # (no other name holds the draw: the release below frees it)
        if self.device == "cuda":
            torch.cuda.synchronize()
        self.release()

    def seal(self, ins: list, x: list) -> None:
        """Seal the staged inputs as the round's calls will take them (none when ``x`` is not
        staged)."""
        self.staged = None
        if self.staging and all(buf is None or buf is v for buf, v in zip(ins, x, strict=True)):
            key = secrets.randbits(63)
            self.staged = (key, seals(x, key))

    def check(self, ins: list, where: str) -> None:
        """The reference's call left the staged inputs as they were."""
        if self.staged is None:
            return
        key, sealed = self.staged
        if seals(ins, key) != sealed:
            raise Verdict.unjudgeable(
                f"{where}: the reference modified its inputs in place on this call, though not "
                "on the first: its runner's inputs cannot stand for the call's"
            )

    def release(self) -> None:
        """Hand what the judge's allocator caches back to the card, on a large task: the judge's
        transient tensors (a fresh draw, its reference's outputs on shifted inputs, the
        comparison's slices) would otherwise stay reserved beside the runners' and the
        candidate's memory. Untimed: nothing runs on the card meanwhile."""
        if self.large and self.device == "cuda":
            torch.cuda.empty_cache()
