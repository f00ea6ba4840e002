"""The pool family reads its window from the model's pooling module at every call: a solution
written for one set of constructor values computes the reference for another."""

import torch

from tests.offline.harness import load_solution, solution, task_of
from tests.offline.sources_pool import POOL_MAX_2D


def test_the_window_is_read_from_the_module_not_compiled_in():
    task = task_of("pool_max_2d", POOL_MAX_2D)
    code = solution(task, "triton")
    assert "_pool_geometry(m, x, 2)" in code
    module = load_solution(code)
    ref_ns: dict = {}
    exec(compile(POOL_MAX_2D, "<ref>", "exec"), ref_ns)  # noqa: S102
    x = torch.randn(2, 3, 17, 12)
    for init in ([3, 2, 1, 2], [2, 1, 0, 1], [5, 3, 2, 1]):
        torch.manual_seed(0)
        expected = ref_ns["Model"](*init)(x)
        got = module.ModelNew(*init)(x)
        assert got.shape == expected.shape and torch.allclose(got, expected), init
