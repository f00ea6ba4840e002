"""The offline proposer: parameterized kernel templates for patterns found in the reference.

Three families are recognized in the reference's torch.fx graph: elementwise chains, row-wise
reductions and normalizations, and one GEMM with an elementwise epilogue. Each local strategy of
the memory is a transformation of a template's parameters; code is Triton (GPU, or the Triton
interpreter on CPU) or C++ with OpenMP (CPU). Tasks outside the families get a plain
"no applicable strategy: <why>" instead of code. :mod:`htam.offline.pipeline` runs the stages
(trace, lower, match, parameters, backend, render); the folders follow them.
"""

from htam.offline.front.trace import NoMatch
from htam.offline.ir.model import Match
from htam.offline.pipeline import explain_no_match
from htam.offline.pipeline import match_task as match
from htam.offline.strategies import STRATEGIES
from htam.offline.templates_proposer import OfflineProposer, supported_strategies

__all__ = [
    "Match",
    "NoMatch",
    "OfflineProposer",
    "STRATEGIES",
    "explain_no_match",
    "match",
    "supported_strategies",
]
