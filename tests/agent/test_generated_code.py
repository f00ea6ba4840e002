"""What the offline proposer hands a user as best.py: no duplicate imports, no dead helpers, and
constructor values it compiled in are checked, not silently ignored."""

from __future__ import annotations

import ast

import pytest
import torch

from htam.offline import OfflineProposer
from htam.proposer import ProposalRequest
from htam.tasks import builtin_suite


def _code(task, language: str) -> str | None:
    request = ProposalRequest(
        task=task, target="cpu", language=language, base_code=None, feedback=None
    )
    return OfflineProposer("cpu", language).propose(request).code


@pytest.mark.parametrize("language", ["cpp", "triton"])
def test_no_duplicate_imports_and_no_dead_helpers(language):
    generated = [c for t in builtin_suite() if (c := _code(t, language)) is not None]
    assert len(generated) >= 10
    for code in generated:
        tree = ast.parse(code)
        imports = [ast.unparse(s) for s in tree.body if isinstance(s, ast.Import | ast.ImportFrom)]
        assert len(imports) == len(set(imports)), imports
        for fn in (s for s in tree.body if isinstance(s, ast.FunctionDef)):
            assert code.count(f"{fn.name}(") + code.count(f"{fn.name}[") >= 2, fn.name


def test_constructor_values_compiled_in_are_checked():
    chain = next(t for t in builtin_suite() if t.name == "5_Elementwise_Chain")
    code = _code(chain, "cpp")
    tree = ast.parse(code)
    guard = next(
        s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == "_specialized"
    )
    namespace: dict = {}
    exec(compile(ast.Module([guard], []), "best.py", "exec"), namespace)
    assert "_specialized(self, {'alpha': 1.7, 'beta': -0.3})" in code

    class Built(torch.nn.Module):  # what ModelNew(*init_inputs) holds before the check
        def __init__(self, alpha, beta):
            super().__init__()
            self.alpha, self.beta = alpha, beta

    namespace["_specialized"](Built(1.7, -0.3), {"alpha": 1.7, "beta": -0.3})
    with pytest.raises(ValueError, match=r"specialized for alpha=1.7, not 2.5"):
        namespace["_specialized"](Built(2.5, -0.3), {"alpha": 1.7, "beta": -0.3})
