"""An elementwise C++ solution (built with glibc's vector math, -ffast-math) keeps IEEE
infinities: x * sigmoid(x) where expf overflows is -0, not NaN clamped to -1 (the quickstart's
best.py, found by a newcomer: inputs below -88 after the affine)."""

import pytest
import torch

from htam.tasks import load_task
from tests.evaluate.conftest import BUILTIN
from tests.offline.harness import load_solution, solution


@pytest.mark.slow
def test_an_overflowing_exp_stays_infinite_in_a_fast_math_chain():
    task = load_task(BUILTIN / "level2" / "5_Elementwise_Chain.py")
    code = solution(task, "cpp", ("fusion.elementwise_chain_fusion",))
    assert "-ffast-math" in code and "-fno-finite-math-only" in code
    module = load_solution(code)
    namespace: dict = {}
    exec(task.source, namespace)  # noqa: S102 - the built-in task's own source
    ref, new = namespace["Model"](1.7, -0.3), module.ModelNew(1.7, -0.3)
    x = torch.tensor([-1e3, -200.0, -100.0, -60.0, -1.0, 0.0, 0.5, 3.0, 1e3] * 8).reshape(8, 9)
    got, want = new(x), ref(x)
    assert not torch.isnan(got).any()
    torch.testing.assert_close(got, want)
