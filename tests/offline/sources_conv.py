"""Reference models of the convolution family: 1-3 d convolutions and transposed convolutions
with stride, padding, dilation, output padding, groups (depthwise), a bias that does not fold
into a library prefix, and an unbatched input."""

from tests.offline.kbsource import kb


def _conv(module: str, inputs: str, consts: str) -> str:
    body = f"""
{consts}

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = {module}

    def forward(self, x):
        return self.conv(x)
"""
    return kb(body, inputs)


CONV_2D = _conv(
    # in a Sequential (the path conv.0): its bias does not fold into a library prefix
    "nn.Sequential(nn.Conv2d(C, 20, (3, 2), stride=(2, 1), padding=(1, 2), dilation=(1, 2)))",
    "[torch.randn(N, C, H, W)]",
    "N = 2\nC = 3\nH = 9\nW = 7",
)
CONV_1D_GROUPS = _conv(
    "nn.Conv1d(C, 32, 3, stride=2, padding=1, dilation=2, groups=2, bias=False)",
    "[torch.randn(N, C, L)]",
    "N = 2\nC = 4\nL = 19",
)
CONV_3D = _conv(
    "nn.Conv3d(C, 16, (2, 3, 3), stride=(1, 2, 1), padding=(1, 0, 1), bias=False)",
    "[torch.randn(N, C, D, H, W)]",
    "N = 1\nC = 2\nD = 4\nH = 7\nW = 5",
)
CONV_DEPTHWISE = _conv(
    "nn.Conv2d(C, C, 3, stride=2, padding=1, groups=C, bias=False)",
    "[torch.randn(N, C, H, W)]",
    "N = 2\nC = 5\nH = 8\nW = 9",
)
CONV_T_2D = _conv(
    "nn.ConvTranspose2d(C, 18, (3, 4), stride=(2, 3), padding=(1, 0), output_padding=(1, 2), "
    "dilation=(2, 1), bias=False)",
    "[torch.randn(N, C, H, W)]",
    "N = 2\nC = 3\nH = 5\nW = 4",
)
CONV_T_3D_GROUPS = _conv(
    "nn.ConvTranspose3d(C, 32, 3, stride=2, padding=1, groups=2, bias=False)",
    "[torch.randn(N, C, D, H, W)]",
    "N = 1\nC = 4\nD = 3\nH = 4\nW = 3",
)
CONV_T_1D_UNBATCHED = _conv(
    "nn.ConvTranspose1d(C, 3, 5, stride=3, padding=2, dilation=2, bias=False)",
    "[torch.randn(C, L)]",
    "C = 4\nL = 11",
)

CONV_DEPTHWISE_SEPARABLE = kb(
    """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.depthwise = nn.Conv2d(4, 4, 3, padding=1, groups=4, bias=False)
        self.pointwise = nn.Conv2d(4, 24, 1)

    def forward(self, x):
        x = self.depthwise(x)
        return self.pointwise(x)
""",
    "[torch.randn(2, 4, 7, 6)]",
)

CONV_CASES = {
    "conv_depthwise_separable": (CONV_DEPTHWISE_SEPARABLE, "conv", [{}]),
    "conv_2d_dilated": (CONV_2D, "conv", [{}]),
    "conv_1d_groups": (CONV_1D_GROUPS, "conv", [{}]),
    "conv_3d": (CONV_3D, "conv", [{}]),
    "conv_depthwise": (CONV_DEPTHWISE, "conv", [{}]),
    "conv_t_2d": (CONV_T_2D, "conv", [{}]),
    "conv_t_3d_groups": (CONV_T_3D_GROUPS, "conv", [{}]),
    "conv_t_1d_unbatched": (CONV_T_1D_UNBATCHED, "conv", [{}]),
}
