"""The Triton baseline of a convolution's elementwise epilogue: the prefix's convolutions run
channels-last (weights converted once in ``__init__``) and the fused epilogue reads their result
in that order, writing the output in the reference's. Checked under the interpreter on
convolutions of every kind, odd channel counts (one tile of channels, a ragged second), one
sample, an epilogue that also reads an input and per-channel parameters, with every strategy
still offered; the layout only where module convolutions (and batch norms) alone feed a 4-d or
5-d elementwise tail, and never in C++."""

from __future__ import annotations

import pytest
import torch

from htam.offline.pipeline import analyze, applicable
from tests.offline.cases import everything
from tests.offline.harness import compare, load_solution, solution, task_of
from tests.offline.sources import kb

CONV2D = """
N = 2
C_IN = 3
C_OUT = 5
H = 9
W = 11

class Model(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3)
        self.bias = nn.Parameter(torch.randn(c_out, 1, 1))

    def forward(self, x):
        y = torch.relu(self.conv(x)) + self.bias
        return torch.tanh(y) * 0.5
"""
CONV_TRANSPOSE3D = """
N = 2
C_IN = 4
C_OUT = 6
D = 3
H = 5
W = 4

class Model(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.deconv = nn.ConvTranspose3d(c_in, c_out, 3, stride=2, padding=1)
        self.scale = nn.Parameter(torch.randn(c_out, 1, 1, 1))

    def forward(self, x):
        y = self.deconv(x)
        return F.hardswish(y * self.scale - 0.25)
"""
# The epilogue reads an input as well (same shape as the convolution's result): that one keeps
# the reference's order, only the library result is read channels-last.
CONV_RESIDUAL = """
N = 2
C = 40
H = 6
W = 7

class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.sigmoid(self.bn(self.conv(x))) + x
"""
SOURCES = {
    "conv2d": (CONV2D, "[torch.randn(N, C_IN, H, W)]", "[C_IN, C_OUT]"),
    "conv_transpose3d": (CONV_TRANSPOSE3D, "[torch.randn(N, C_IN, D, H, W)]", "[C_IN, C_OUT]"),
    "conv_residual": (CONV_RESIDUAL, "[torch.randn(N, C, H, W)]", "[C]"),
}
SHAPES = {
    "conv2d": [{}, {"N": 1}, {"C_OUT": 33, "H": 5, "W": 3}, {"C_OUT": 1}],
    "conv_transpose3d": [{}, {"N": 1, "C_OUT": 37}],
    "conv_residual": [{}, {"C": 3}, {"N": 1, "C": 64, "H": 3, "W": 3}],
}


# a second or more each under the interpreter: the other convolutions stay in the fast tier
SLOW_EPILOGUES = {"conv_residual", "conv2d", "conv_transpose3d"}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_EPILOGUES else n for n in SOURCES]
)
def test_channels_last_epilogue_matches_the_reference(name):
    task = task_of(f"layout_{name}", kb(*SOURCES[name]))
    assert "fusion.elementwise_chain_fusion" not in applicable(analyze(task), "triton")
    for strategies in [(), ("parallel_mapping.block_size_tuning",), everything(task, "triton")]:
        code = solution(task, "triton", strategies)
        assert "offs_cl" in code and "_channels_last_weights(self)" in code
        module = load_solution(code)
        for shape in SHAPES[name]:
            problem = compare(task, module, shape, atol=2e-4, rtol=2e-4)
            assert problem is None, f"{name} {strategies} {shape}: {problem}"


def test_the_weights_are_channels_last_and_the_output_keeps_the_reference_order():
    task = task_of("layout_weights", kb(*SOURCES["conv_transpose3d"]))
    module = load_solution(solution(task, "triton"))
    new = module.ModelNew(4, 6)
    assert new.deconv.weight.is_contiguous(memory_format=torch.channels_last_3d)
    out = new(torch.randn(2, 4, 3, 5, 4))
    assert out.is_contiguous()


def test_convolution_inputs_are_handed_over_channels_last_unless_the_kernel_reads_them():
    expected = {"conv2d": ("x",), "conv_transpose3d": ("x",), "conv_residual": ()}
    for name, inputs in expected.items():
        task = task_of(f"layout_{name}", kb(*SOURCES[name]))
        assert analyze(task).conv_inputs == inputs, name
        code = solution(task, "triton")
        assert ("x = _to_channels_last(x)" in code) == bool(inputs), name
        assert "_to_channels_last" not in solution(task, "cpp")


@pytest.mark.parametrize(
    "shape",
    [(2, 70, 5, 3), (1, 1, 4, 4), (3, 3, 1, 1), (2, 5, 3, 4, 2), (2, 64, 17, 9), (0, 4, 3, 3)],
)
def test_the_channels_last_conversion_kernel(shape):
    """The tiled kernel against torch's copy: two channel tiles and a ragged one (70), one
    channel, one position, 5-d, empty; strided inputs are made contiguous first."""
    task = task_of("layout_conversion", kb(*SOURCES["conv2d"]))
    module = load_solution(solution(task, "triton"))
    x = torch.randn(*shape)
    for given in (x, x.transpose(2, 3).contiguous().transpose(2, 3)):
        fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
        got = module._to_channels_last(given)
        assert got.is_contiguous(memory_format=fmt)
        assert torch.equal(got, x)
    assert module._to_channels_last(torch.randn(3, 4, 5)).is_contiguous()  # not 4-d or 5-d


@pytest.mark.parametrize(
    "body, inputs, why",
    [
        (  # no convolution in the prefix: a matrix product
            """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return torch.sigmoid(self.fc(x)) * 2
""",
            "[torch.randn(4, 8)]",
            "linear",
        ),
        (  # a functional convolution: no module whose weight __init__ could convert
            """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 3, 3, 3))

    def forward(self, x):
        return torch.relu(F.conv2d(x, self.w))
""",
            "[torch.randn(2, 3, 8, 8)]",
            "functional",
        ),
        (  # a pooling after the convolution (slower channels-last on the H200)
            """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.pool = nn.AvgPool2d(2)

    def forward(self, x):
        return torch.relu(self.pool(self.conv(x)))
""",
            "[torch.randn(2, 3, 8, 8)]",
            "pool",
        ),
        (  # a group norm after the convolution
            """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.norm = nn.GroupNorm(2, 4)

    def forward(self, x):
        return torch.sigmoid(self.norm(self.conv(x)))
""",
            "[torch.randn(2, 3, 8, 8)]",
            "group_norm",
        ),
        (  # a 3-d result (Conv1d): no channels-last format
            """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(3, 4, 3)

    def forward(self, x):
        return torch.relu(self.conv(x))
""",
            "[torch.randn(2, 3, 16)]",
            "conv1d",
        ),
    ],
)
def test_other_library_prefixes_keep_the_reference_order(body, inputs, why):
    task = task_of(f"layout_no_{why}", kb(body, inputs))
    assert not analyze(task).features.get("channels_last"), why
    assert "offs_cl" not in solution(task, "triton"), why


def test_the_cpp_baseline_keeps_the_reference_order_and_may_fuse():
    task = task_of("layout_cpp", kb(*SOURCES["conv2d"]))
    assert analyze(task).features.get("channels_last")
    assert "fusion.elementwise_chain_fusion" in applicable(analyze(task), "cpp")
    assert "channels_last" not in solution(task, "cpp")


# Reductions over the channels of a convolution's result, to one value per position: read as
# rows of contiguous channels (the result's ``movedim(1, -1)`` view, no copy when channels-last).
CHANNEL_ROWS = {
    "min_keepdim": (
        """
N = 2
C_IN = 3
C_OUT = 5
H = 9
W = 11

class Model(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3)

    def forward(self, x):
        return torch.tanh(torch.min(self.conv(x) * 1.5, dim=1, keepdim=True)[0])
""",
        "[torch.randn(N, C_IN, H, W)]",
    ),
    "logsumexp_3d": (
        """
N = 2
C_IN = 4
C_OUT = 37
D = 3
H = 5
W = 4

class Model(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.deconv = nn.ConvTranspose3d(c_in, c_out, 3, stride=2, padding=1)

    def forward(self, x):
        return torch.clamp(torch.logsumexp(self.deconv(x), dim=1) - 0.5, min=-1.0)
""",
        "[torch.randn(N, C_IN, D, H, W)]",
    ),
    # per-channel values (the convolution's bias, a scale) are read along the rows of channels
    "amax_per_channel": (
        """
N = 2
C_IN = 3
C_OUT = 6
H = 7
W = 5

class Model(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1)
        self.s = nn.Parameter(torch.randn(c_out, 1, 1))

    def forward(self, x):
        return torch.amax(self.conv(x) * self.s, dim=1) + 1.0
""",
        "[torch.randn(N, C_IN, H, W)]",
    ),
}


# Each case runs its kernel (under Triton's interpreter on the CPU): the 3-D logsumexp and the
# keepdim min take minutes there, and run with the slow tests; the per-channel amax stays fast.
SLOW_ROWS = {"logsumexp_3d", "min_keepdim", "amax_per_channel"}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_ROWS else n for n in CHANNEL_ROWS]
)
def test_channel_reductions_read_channels_last_rows_and_match(name):
    task = task_of(f"layout_rows_{name}", kb(*CHANNEL_ROWS[name], "[C_IN, C_OUT]"))
    assert analyze(task).features.get("channels_last")
    for strategies in [(), ("parallel_mapping.rows_per_program",), everything(task, "triton")]:
        code = solution(task, "triton", strategies)
        assert ".movedim(1, -1).contiguous()" in code and "_channels_last_weights(self)" in code
        module = load_solution(code)
        for shape in ({}, {"N": 1}, {"C_OUT": 1}):
            problem = compare(task, module, shape, atol=2e-4, rtol=2e-4)
            assert problem is None, f"{name} {strategies} {shape}: {problem}"
    assert "movedim" not in solution(task, "cpp")


@pytest.mark.parametrize(
    "forward",
    [
        "torch.softmax(self.conv(x), dim=1)",  # an output per element: not a row of channels
        "torch.sum(self.conv(x), dim=[2, 3])",  # over positions, not channels
        "torch.amax(self.conv(x) * self.p, dim=1)",  # a tensor read per position
    ],
)
def test_other_reductions_keep_the_reference_order(forward):
    body = f"""
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.p = nn.Parameter(torch.randn(6, 6))

    def forward(self, x):
        return {forward}
"""
    task = task_of("layout_rows_no", kb(body, "[torch.randn(2, 3, 8, 8)]"))
    assert analyze(task).family == "row"
    assert not analyze(task).features.get("channels_last")
    assert "movedim" not in solution(task, "triton")
