"""The convolution family (a convolution whose bias a library prefix would not add) reads its window, groups, weight and bias from the model's
convolution module at every call: one solution computes the reference for other constructor
values, on the implicit-GEMM and on the direct (narrow groups) kernel."""

import torch

from tests.offline.harness import load_solution, solution, task_of
from tests.offline.kbsource import kb

CONV_T_ARGS = kb(
    """
class Model(nn.Module):
    def __init__(self, c_out, k, s, p, groups):
        super().__init__()
        self.conv = nn.ConvTranspose2d(
            4, c_out, k, stride=s, padding=p, groups=groups, bias=False
        )

    def forward(self, x):
        return self.conv(x)
""",
    "[torch.randn(2, 4, 6, 5)]",
    "[32, 3, 2, 1, 2]",
)


def test_the_window_and_groups_are_read_from_the_module_not_compiled_in():
    code = solution(task_of("conv_t_args", CONV_T_ARGS), "triton")
    assert "_htam_conv(_attr(self, 'conv'), y, 2, True)" in code
    module = load_solution(code)
    ref_ns: dict = {}
    exec(compile(CONV_T_ARGS, "<ref>", "exec"), ref_ns)  # noqa: S102
    x = torch.randn(2, 4, 6, 5)
    # 32 and 16 output channels: the implicit GEMM; 4 per group of 2 / 4: the direct kernel
    for init in ([32, 3, 2, 1, 2], [16, (2, 4), (1, 3), (0, 1), 1], [4, 3, 3, 2, 4]):
        torch.manual_seed(0)
        expected = ref_ns["Model"](*init)(x)
        torch.manual_seed(0)
        got = module.ModelNew(*init)(x)
        assert got.shape == expected.shape, init
        assert torch.allclose(got, expected, atol=1e-5, rtol=1e-4), init
