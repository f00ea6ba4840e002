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
