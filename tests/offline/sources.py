"""Reference models written for these tests: varied spellings, names, op orders and shapes.

The elementwise ones are here, the other families' in sources_<family>.py. Each is a
KernelBench source; ``SHAPES[name]`` lists size overrides to check it at (ragged tails,
non-powers of two). The builtin suite adds the project's own tasks on top of these.
"""

from tests.offline.kbsource import HEAD, kb  # noqa: F401 (HEAD: test_match reads it here)
from tests.offline.sources_gemm import GEMM_ADDMM_3D, GEMM_BMM, GEMM_RESIDUAL, GEMM_TRANSPOSED
from tests.offline.sources_rows import (
    ROW_ARGMIN_MIDDLE,
    ROW_HINGE_MEAN,
    ROW_L2_NORMALIZE,
    ROW_LAYER_NORM,
    ROW_LAYER_NORM_3D,
    ROW_LOG_SOFTMAX,
    ROW_SOFTMAX_MODULE,
    ROW_STATS,
)
from tests.offline.sources_unsupported import UNSUPPORTED  # noqa: F401 (tests read it here)

EW_GELU_SIGMOID = kb(
    """
ROWS = 7
COLS = 1000

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = x * 2 + 1
        y = F.gelu(y)
        return torch.sigmoid(y)
""",
    "[torch.randn(ROWS, COLS)]",
    "[]",
)

EW_TWO_INPUTS = kb(
    """
ROWS = 7
COLS = 257

class Model(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.act = nn.LeakyReLU(0.2)
        self.shift = nn.Parameter(torch.randn(cols))
        self.clip = nn.Hardtanh(-1.5, 1.5)

    def forward(self, inp, gate):
        z = self.act(inp) * gate - self.shift
        z = torch.clamp(z, min=-2.0).div(3.0)
        z = self.clip(F.softplus(z, beta=2.0) + torch.tanh(z).abs())
        return 1.0 - torch.rsub(z, 0.5, alpha=2.0) + z.neg().exp()
""",
    "[torch.randn(ROWS, COLS), torch.randn(ROWS, COLS)]",
    "[COLS]",
)

EW_CHANNEL = kb(
    """
N = 2
C = 5
H = 7
W = 9

class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))
        self.scale = nn.Parameter(torch.rand(1) + 0.5)

    def forward(self, x):
        x = F.silu(x + self.bias)
        x = F.elu(x, alpha=0.7) * self.scale
        x = F.mish(x) + x.pow(3) - torch.rsqrt(x * x + 1.0)
        x = F.hardswish(x) + F.selu(x) + F.relu6(x * 4) + torch.exp(-x.abs())
        x = torch.maximum(x, F.logsigmoid(x)) + F.gelu(x, approximate="tanh") / (2 ** x)
        return F.hardsigmoid(x) + F.softsign(x) + torch.sqrt(x.square() + 0.25)
""",
    "[torch.randn(N, C, H, W)]",
    "[C]",
)

# name -> (source, family, size overrides to check)
CASES = {
    "ew_gelu_sigmoid": (
        EW_GELU_SIGMOID,
        "elementwise",
        [{}, {"ROWS": 7, "COLS": 257}, {"ROWS": 3, "COLS": 33}],
    ),
    "ew_two_inputs": (EW_TWO_INPUTS, "elementwise", [{}, {"ROWS": 5, "COLS": 1000}]),
    "ew_channel": (EW_CHANNEL, "elementwise", [{}, {"N": 1, "H": 3, "W": 33}]),
    "row_log_softmax": (ROW_LOG_SOFTMAX, "row", [{}, {"COLS": 257}, {"ROWS": 3, "COLS": 33}]),
    "row_softmax_module": (ROW_SOFTMAX_MODULE, "row", [{}, {"ROWS": 2, "COLS": 2049}]),
    "row_layer_norm": (ROW_LAYER_NORM, "row", [{}, {"COLS": 1000}, {"COLS": 33}]),
    "row_stats": (ROW_STATS, "row", [{}, {"COLS": 1000}, {"ROWS": 1, "COLS": 257}]),
    "row_l2_normalize": (ROW_L2_NORMALIZE, "row", [{}, {"COLS": 33}]),
    "row_hinge_mean": (ROW_HINGE_MEAN, "row", [{}, {"N": 1024}]),
    "row_argmin_middle": (ROW_ARGMIN_MIDDLE, "row", [{}, {"R": 257, "I": 1}, {"I": 33}]),
    "row_layer_norm_3d": (ROW_LAYER_NORM_3D, "row", [{}]),
    "gemm_residual": (GEMM_RESIDUAL, "gemm", [{}, {"BATCH": 1, "IN": 65, "OUT": 3}]),
    "gemm_transposed": (GEMM_TRANSPOSED, "gemm", [{}, {"M": 64, "K": 32}]),
    "gemm_bmm": (GEMM_BMM, "gemm", [{}, {"B": 1, "M": 33, "N": 5}]),
    "gemm_linear_3d": (GEMM_ADDMM_3D, "gemm", [{}, {"S": 1}]),
}

# The composite lowerings' cases live beside these (imported last: they use kb).
from tests.offline.sources_composite import COMPOSITE_CASES  # noqa: E402

CASES.update(COMPOSITE_CASES)
from tests.offline.sources_scan import SCAN_CASES  # noqa: E402

CASES.update(SCAN_CASES)
from tests.offline.sources_pool import POOL_CASES  # noqa: E402

CASES.update(POOL_CASES)
from tests.offline.sources_norm import NORM_CASES  # noqa: E402

CASES.update(NORM_CASES)
from tests.offline.sources_conv import CONV_CASES  # noqa: E402

CASES.update(CONV_CASES)
from tests.offline.sources_special import SPECIAL_CASES  # noqa: E402

CASES.update(SPECIAL_CASES)
