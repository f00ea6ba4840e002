"""The GPU memory an evaluation takes, as a multiple of the task's tensor bytes T (the inputs,
outputs and parameters of one call: Reference.nbytes), and what follows from it: a task too big
for the card is named before any candidate runs, and an out-of-memory that the evaluation's own
share explains is the evaluator's (an infrastructure cause, never the candidate's, never
learned).

Where the memory goes, for inputs I and outputs O (the large tasks are elementwise, a
normalization or a pooling: I = O = T/2 is the figure used), at the worst moment of a round:

- the judge's lent buffers (2T): the inputs and output slots it lends each runner, 2(I + O). The
  round's inputs are held in the reference runner's lent inputs (``Judge.stage``: a reference
  that leaves its inputs as they were), so the judge keeps no copy of its own beside them;
- one forward at a time (T): its outputs and its temporaries (an L1 norm's ``abs(x)`` is an
  input's size again), of the reference's runner, of the candidate, or of the judge's own copy
  of the reference on shifted inputs (moved in place, shifted.py); or a fresh draw in the judge
  before it is staged. Only one runs at a time: the other runner is stopped, and on a task that
  crowds the card each runner hands its allocator's cache back between its calls and takes as
  much again before its next one, off the judge's clock (staging.trims, channel.Cache). What the
  judge's allocator cached goes back to the card each round (``Judge.release``);
- the candidate's last outputs (T/2), held as a caller would, beside its new ones.

That is 3.5T. On top, independent of T: the comparison's float32 slices in the judge (2.25 GiB
at most, compare.py), each runner's L2 flush buffer and six CUDA contexts (the judge, two
runners and the fork server's three standbys). On an 80 GB H100, before the runners handed their
caches back, 5.07T was measured (L1 34_InstanceNorm, 14 GiB of tensors: 73.0 GiB; the judge
3.05T, each runner's cache a forward's outputs and temporaries beside the other's) and the 16 GiB
L1 and L2 norms ran out of memory; 6.34T before the inputs were staged (19_ReLU: the judge held
the round's inputs, their shifted copy, its reference's outputs on them and a mask of their
finite elements at once). On the CPU the same code holds the same copies less the allocators'
caches (glibc hands large blocks back): tests/evaluate/test_footprint.py measures 2.7-3.3T
there (htam/evaluate/peak_memory.py, an upper bound: it reads the processes one after another).
scripts/device/gpu_memory.py measures the peak on a card.
"""

from __future__ import annotations

LENT_MULTIPLE = 2.0  # inputs and output slots lent to each of the two runners
CALL_MULTIPLE = 1.0  # one forward's outputs and temporaries (or a fresh draw), one at a time
HELD_MULTIPLE = 0.5  # the candidate's last outputs, held beside its new ones
# The comparison's slices (compare.py, 2^28 elements): the float64 copy of a float32 slice its
# norm takes, or two float32 slices of errors, and a mask of 256 MiB.
COMPARE_BYTES = 9 << 28
CONTEXTS_BYTES = 6 * (512 << 20)
FLUSH_BYTES = 2 * (256 << 20)  # each runner's L2 flush buffer (EvalConfig.l2_flush_mb)
FIXED_BYTES = COMPARE_BYTES + CONTEXTS_BYTES + FLUSH_BYTES
EVALUATOR_MULTIPLE = LENT_MULTIPLE + CALL_MULTIPLE
NEEDED_MULTIPLE = EVALUATOR_MULTIPLE + HELD_MULTIPLE


def own_bytes(tensor_bytes: int) -> float:
    """The evaluation's own GPU memory, the candidate's process aside."""
    return EVALUATOR_MULTIPLE * tensor_bytes + FIXED_BYTES


def needed_bytes(tensor_bytes: int) -> float:
    """What judging an honest candidate takes."""
    return own_bytes(tensor_bytes) + HELD_MULTIPLE * tensor_bytes


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def too_big(tensor_bytes: int, card_bytes: int) -> str | None:
    """Why a task cannot be judged on a card of ``card_bytes``, or None when it fits."""
    need = needed_bytes(tensor_bytes)
    if not card_bytes or need <= card_bytes:
        return None
    return (
        f"too big for this card: judging a candidate takes about {_gib(need)} of GPU memory "
        f"({NEEDED_MULTIPLE:g}x the task's {_gib(tensor_bytes)} of tensors, the comparison's slices "
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
