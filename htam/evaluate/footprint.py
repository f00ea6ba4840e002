"""The GPU memory an evaluation takes, as a multiple of the task's tensor bytes T (the inputs,
outputs and parameters of one call: Reference.nbytes), and what follows from it: a task too big
for the card is named before any candidate runs, and an out-of-memory that the evaluation's own
share explains is the evaluator's (an infrastructure cause, never the candidate's, never
learned).

Where the memory goes, for inputs I and outputs O (the large tasks are elementwise, a
normalization or a pooling: I = O = T/2 is the figure used), at the worst moment of a timed
round:

- the judge (2.5T): the inputs and output slots it lends each runner, 2(I + O) = 2T; the round's
  inputs are held in the reference runner's lent inputs (``Judge.stage``: a reference that
  leaves its inputs as they were), so the judge keeps no copy of its own beside them, only a
  transient of T/2: a fresh draw before it is staged, or its own copy of the reference's
  outputs on the shifted inputs (moved in place, shifted.py). What its allocator cached of these
  goes back to the card each round (``Judge.release``);
- the reference's runner (T/2): its allocator keeps the blocks of its last outputs for its next
  call, which is timed beside the candidate's (released, its next call would pay for fresh
  memory inside its timing and the candidate's would not);
- the candidate (T): its last call's outputs, held as a caller would, beside the new ones.

That is 4T. On top, independent of T: the comparison's float32 slices in the judge (2.25 GiB at
most, compare.py), each runner's L2 flush buffer and six CUDA contexts (the judge, two runners
and the fork server's three standbys). On the CPU the same code holds the same copies, less the allocators' caches (glibc
hands large blocks back, and the candidate's held outputs are renewed untouched): 2.5T, and
tests/evaluate/test_footprint.py measures 2.7-3.3T there (htam/evaluate/peak_memory.py, an upper
bound: it reads the processes one after another; 4.79T before the inputs were staged and
shifted in place). scripts/device/gpu_memory.py measures the peak on
a card. Before, 5T and more was measured on an 80 GB H100 (19_ReLU, 12 GiB of tensors: 78.2 GiB,
6.34x): the judge held the round's inputs, their shifted copy, its reference's outputs on them
and a mask of its finite elements (torch.isfinite takes one and a half times its input) at once,
and its allocator kept all of it reserved.
"""

from __future__ import annotations

LENT_MULTIPLE = 2.0  # inputs and output slots lent to each of the two runners
TRANSIENT_MULTIPLE = 0.5  # a fresh draw, or the judge's reference outputs on shifted inputs
JUDGE_MULTIPLE = LENT_MULTIPLE + TRANSIENT_MULTIPLE
RUNNER_MULTIPLE = 0.5  # the reference runner's cached outputs
CANDIDATE_SHARE = 1.0  # an honest candidate's held and new outputs
# The comparison's slices (compare.py, 2^28 elements): the float64 copy of a float32 slice its
# norm takes, or two float32 slices of errors, and a mask of 256 MiB.
COMPARE_BYTES = 9 << 28
CONTEXTS_BYTES = 6 * (512 << 20)
FLUSH_BYTES = 2 * (256 << 20)  # each runner's L2 flush buffer (EvalConfig.l2_flush_mb)
FIXED_BYTES = COMPARE_BYTES + CONTEXTS_BYTES + FLUSH_BYTES
EVALUATOR_MULTIPLE = JUDGE_MULTIPLE + RUNNER_MULTIPLE


def own_bytes(tensor_bytes: int) -> float:
    """The evaluation's own GPU memory, the candidate's process aside."""
    return EVALUATOR_MULTIPLE * tensor_bytes + FIXED_BYTES


def needed_bytes(tensor_bytes: int) -> float:
    """What judging an honest candidate takes."""
    return own_bytes(tensor_bytes) + CANDIDATE_SHARE * tensor_bytes


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def too_big(tensor_bytes: int, card_bytes: int) -> str | None:
    """Why a task cannot be judged on a card of ``card_bytes``, or None when it fits."""
    need = needed_bytes(tensor_bytes)
    if not card_bytes or need <= card_bytes:
        return None
    multiple = EVALUATOR_MULTIPLE + CANDIDATE_SHARE
    return (
        f"too big for this card: judging a candidate takes about {_gib(need)} of GPU memory "
        f"({multiple:g}x the task's {_gib(tensor_bytes)} of tensors, the comparison's slices "
        f"and the processes' contexts), the card has {_gib(card_bytes)}"
    )


def is_gpu_oom(message: str) -> bool:
    return "out of memory" in message.lower()


def crowds(tensor_bytes: int, free_bytes: int) -> bool:
    """Whether the evaluation's own share takes most of what was free: an out-of-memory beside a
    candidate is then the evaluator's doing as much as the candidate's."""
    return bool(free_bytes) and own_bytes(tensor_bytes) > free_bytes / 2


def crowded_cause(tensor_bytes: int, free_bytes: int, cause: str) -> str:
    return (
        f"the evaluation itself takes about {_gib(own_bytes(tensor_bytes))} of the "
        f"{_gib(free_bytes)} free on the card ({EVALUATOR_MULTIPLE:g}x the task's "
        f"{_gib(tensor_bytes)} of tensors): {cause}"
    )
