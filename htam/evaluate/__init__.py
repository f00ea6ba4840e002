"""The evaluator: strict, isolated verification and honest timing of candidate implementations."""

from htam.evaluate.config import EvalConfig
from htam.evaluate.evaluator import Evaluator, EvaluatorError, Reference
from htam.evaluate.result import EvalResult, Timing
from htam.status import Status

__all__ = ["EvalConfig", "EvalResult", "Evaluator", "EvaluatorError", "Reference", "Status", "Timing"]
