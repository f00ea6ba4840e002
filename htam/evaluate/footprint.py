"""The GPU memory an evaluation takes, as a multiple of the task's tensor bytes T (the inputs,
outputs and parameters of one call: Reference.nbytes), and what follows from it: a task too big
for the card is named before any candidate runs, and an out-of-memory that the evaluation's own
share explains is the evaluator's (an infrastructure cause, never the candidate's, never
learned).

Where the memory goes, for inputs I and outputs O (T = I + O + parameters): the judge holds a
round's inputs and, for each runner, the inputs and output slots it lends (3I + 2O, about 2.5T);
the reference's runner keeps its outputs and temporaries in its allocator (about T); the
candidate holds its last call's outputs (as a caller would) beside the new ones and its
temporaries (about 1.5T). Six CUDA contexts (the judge, two runners and the fork server's three
standbys) come on top. scripts/device/gpu_memory.py measures the real peak on a card against
these figures: on an 80 GB H100 (79.2 GiB) the 14 GiB tasks (34_InstanceNorm, 35_GroupNorm_,
36_RMSNorm_) were judged, and the 16 GiB ones (38_L1Norm_, 39_L2Norm_, 45_Average_Pooling_2D)
ran out of memory beside an honest candidate: 5T and the contexts sit between the two.
"""

from __future__ import annotations

JUDGE_MULTIPLE = 2.5
RUNNER_MULTIPLE = 1.0
CANDIDATE_SHARE = 1.5
CONTEXTS_BYTES = 6 * (512 << 20)
EVALUATOR_MULTIPLE = JUDGE_MULTIPLE + RUNNER_MULTIPLE


def own_bytes(tensor_bytes: int) -> float:
    """The evaluation's own GPU memory, the candidate's process aside."""
    return EVALUATOR_MULTIPLE * tensor_bytes + CONTEXTS_BYTES


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
        f"({multiple:g}x the task's {_gib(tensor_bytes)} of tensors, and the processes' "
        f"contexts), the card has {_gib(card_bytes)}"
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
