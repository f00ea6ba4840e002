"""The optimization loop, its guides (one per kind of method) and its run directories.

Names are imported lazily: ``htam.agent.view`` (the state summary) is needed by the LLM side,
which must not pay for the loop's imports (torch through the evaluator and the tasks).
"""

from htam.lazy import lazy_exports

_EXPORTS = {
    "OptimizeConfig": "htam.agent.config",
    "Optimizer": "htam.agent.loop",
    "Step": "htam.agent.step",
    "InfrastructureError": "htam.agent.propose",
    "EvaluationError": "htam.agent.propose",
    "RunDir": "htam.agent.rundir",
    "RunDirError": "htam.agent.rundir",
    "make_guide": "htam.agent.guides",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports("htam.agent", _EXPORTS)
