"""Reference models of the pool family: max and average pooling over 1-3 dims with padding,
dilation, ceil mode, count_include_pad off and a divisor, and an unbatched input."""

from tests.offline.kbsource import kb

POOL_MAX_2D = kb(
    """
N = 2
C = 3
H = 13
W = 11

class Model(nn.Module):
    def __init__(self, k, s, p, d):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=k, stride=s, padding=p, dilation=d, ceil_mode=True)

    def forward(self, x):
        return self.pool(x)
""",
    "[torch.randn(N, C, H, W)]",
    "[3, 2, 1, 2]",
)

POOL_AVG_3D = kb(
    """
N = 2
C = 2
D = 5
H = 7
W = 6

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool3d((2, 3, 3), stride=(1, 2, 2), padding=1, count_include_pad=False)

    def forward(self, x):
        return self.pool(x)
""",
    "[torch.randn(N, C, D, H, W)]",
)

POOL_AVG_1D_DIVISOR = kb(
    """
C = 3
L = 37

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.avg = nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, divisor_override=4)
        self.max1 = nn.MaxPool1d(4, stride=3, padding=2)

    def forward(self, x):
        return self.avg(x)
""",
    "[torch.randn(C, L, L)]",
)

POOL_CASES = {
    "pool_max_2d": (POOL_MAX_2D, "pool", [{}, {"H": 4, "W": 33}]),
    "pool_avg_3d": (POOL_AVG_3D, "pool", [{}]),
    "pool_avg_unbatched_divisor": (POOL_AVG_1D_DIVISOR, "pool", [{}]),
}
