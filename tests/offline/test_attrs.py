"""Constructor values as run-time values (htam/offline/front/attrs.py): a float attribute the
kernel reads from a buffer gives the reference's result for other init values; one whose
value is compiled in (a clamp bound) keeps the solution specialized, checked in __init__."""

import pytest
import torch

from htam.offline.pipeline import analyze
from tests.offline.harness import load_solution, solution, task_of
from tests.offline.kbsource import kb

SCALED = kb(
    """
N = 5
D = 33

class Model(nn.Module):
    def __init__(self, scale, shift, lo):
        super().__init__()
        self.scale = scale
        self.shift = shift
        self.lo = lo

    def forward(self, x):
        return torch.clamp(torch.sigmoid(x * self.scale) + self.shift, min=self.lo)
""",
    "[torch.randn(N, D)]",
    "[2.0, 0.25, 0.5]",
)


def _reference(init):
    ns: dict = {}
    exec(compile(SCALED, "<ref>", "exec"), ns)  # noqa: S102
    return ns["Model"](*init)


def test_a_float_attribute_is_read_at_run_time_and_a_baked_one_is_checked():
    task = task_of("attr_scaled", SCALED)
    m = analyze(task)
    assert m.attr_buffers == ("scale", "shift") and m.scalars == {"lo": 0.5}
    module = load_solution(solution(task, "triton"))
    x = torch.randn(5, 33)
    for init in ([2.0, 0.25, 0.5], [-1.5, 3.0, 0.5], [0.0, -0.75, 0.5]):
        got = module.ModelNew(*init)(x)
        assert torch.allclose(got, _reference(init)(x), atol=1e-6), init
    with pytest.raises(ValueError, match="specialized for lo=0.5"):
        module.ModelNew(2.0, 0.25, 0.1)


def test_the_buffers_are_not_parameters_and_follow_the_module():
    module = load_solution(solution(task_of("attr_scaled", SCALED), "triton"))
    new = module.ModelNew(2.0, 0.25, 0.5)
    assert list(new.state_dict()) == list(_reference([2.0, 0.25, 0.5]).state_dict())
    assert new._htam_scale.dtype == torch.float32 and new._htam_scale.item() == 2.0
