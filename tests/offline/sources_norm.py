"""Reference models of the channel-norm family: BatchNorm in training mode (1-3 d, statistics
split over programs), in eval mode and without affine parameters; GroupNorm with and without
them, over rows longer than one tile."""

from tests.offline.kbsource import kb

NORM_BATCH_2D = kb(
    """
N = 6
C = 3
H = 17
W = 70

class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm2d(c, eps=1e-3, momentum=0.2)
        with torch.no_grad():
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.bn(x)
""",
    "[torch.randn(N, C, H, W) * 2.0 + 0.5]",
    "[C]",
)

NORM_BATCH_1D_EVAL = kb(
    """
N = 9
C = 5

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(C, affine=False)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1.0, 1.0)
            self.bn.running_var.uniform_(0.5, 2.0)
        self.bn.eval()

    def forward(self, x):
        return self.bn(x)
""",
    "[torch.randn(N, C)]",
)

NORM_GROUP = kb(
    """
N = 3
C = 6
L = 700

class Model(nn.Module):
    def __init__(self, groups, affine):
        super().__init__()
        self.gn = nn.GroupNorm(groups, C, eps=1e-4, affine=affine)
        if affine:
            with torch.no_grad():
                self.gn.weight.uniform_(0.5, 1.5)
                self.gn.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.gn(x)
""",
    "[torch.randn(N, C, L)]",
    "[3, True]",
)

NORM_CASES = {
    "norm_batch_2d": (NORM_BATCH_2D, "channel_norm", [{}, {"N": 1, "W": 1}]),
    "norm_batch_1d_eval": (NORM_BATCH_1D_EVAL, "channel_norm", [{}]),
    "norm_group": (NORM_GROUP, "channel_norm", [{}, {"L": 1}]),
}
