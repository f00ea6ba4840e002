"""The optimization loop and its run directories."""

from htam.agent.loop import ALL_METHODS, BASELINES, OptimizeConfig, Optimizer
from htam.agent.propose import InfrastructureError
from htam.agent.rundir import RunDir, RunDirError

__all__ = [
    "ALL_METHODS",
    "BASELINES",
    "InfrastructureError",
    "OptimizeConfig",
    "Optimizer",
    "RunDir",
    "RunDirError",
]
