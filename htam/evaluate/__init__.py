"""The evaluator: strict, isolated verification and honest timing of candidate implementations.

Names are imported lazily: ``htam.evaluate.result`` is needed by light modules (the LLM client,
the proposer protocol) that must not pay for importing torch.
"""

from htam.lazy import lazy_exports

_EXPORTS = {
    "EvalConfig": "htam.evaluate.eval_config",
    "Evaluator": "htam.evaluate.host.evaluator",
    "EvaluatorError": "htam.evaluate.host.evaluator",
    "Reference": "htam.evaluate.host.evaluator",
    "CachedEvaluator": "htam.evaluate.host.cache",
    "EvalResult": "htam.evaluate.result",
    "Timing": "htam.evaluate.result",
    "Status": "htam.status",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports("htam.evaluate", _EXPORTS)
