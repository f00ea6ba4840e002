"""Evaluation statuses shared by the evaluator, the memory and the loop (no heavy imports)."""

from enum import StrEnum


class Status(StrEnum):
    OK = "ok"
    REJECTED = "rejected"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    INCORRECT = "incorrect"

    @property
    def correct(self) -> bool:
        return self is Status.OK


# A step's outcome where the proposer wrote no code (no template applies, a reply without a code
# block): nothing was evaluated. Its result carries REJECTED for the reward; the run names it so.
NO_CODE = "no_code"
# An out-of-memory that the evaluation's own GPU footprint explains (htam.evaluate.footprint):
# an infrastructure cause, never the candidate's, never learned.
EVALUATOR_GPU_MEMORY = "the evaluator's own GPU memory"
