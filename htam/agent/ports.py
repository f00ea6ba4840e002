"""What the loop needs of an evaluator: the direct ``htam.evaluate.Evaluator`` and the disk-cached
``htam.evaluate.CachedEvaluator`` both satisfy it, so the loop never unwraps one from the other."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from htam.evaluate.eval_config import EvalConfig
    from htam.evaluate.host.evaluator import Reference
    from htam.evaluate.result import EvalResult
    from htam.tasks.task import Task


@runtime_checkable
class EvaluatorPort(Protocol):
    config: EvalConfig  # the settings it evaluates with (``size``: the size it times)

    def evaluate(self, task: Task, code: str, language: str) -> EvalResult:
        """One candidate, verified and timed; failures come back as values."""
        ...

    def reference(self, task: Task, timed: bool = True) -> Reference:
        """The reference's cost and (when ``timed``) its times."""
        ...

    def peaks(self) -> dict:
        """The device's measured peaks (the roofline's denominators)."""
        ...
