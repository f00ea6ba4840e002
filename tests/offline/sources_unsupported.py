"""Reference models no single-kernel family covers: the matcher must refuse them, with a
reason (or hand them to the whole-model family)."""

from tests.offline.kbsource import kb

UNSUPPORTED = {
    "conv": kb(
        """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return torch.relu(self.conv(x))
""",
        "[torch.randn(1, 3, 8, 8)]",
        "[]",
    ),
    "sort": kb(
        """
class Model(nn.Module):
    def forward(self, x):
        return torch.sort(x, dim=-1).values
""",
        "[torch.randn(4, 9)]",
        "[]",
    ),
    "two_gemms": kb(
        """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))
""",
        "[torch.randn(4, 8)]",
        "[]",
    ),
    "gemm_softmax": kb(
        """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 6)

    def forward(self, x):
        return torch.softmax(self.fc(x), dim=-1)
""",
        "[torch.randn(4, 8)]",
        "[]",
    ),
    "training_dropout": kb(
        """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.3)

    def forward(self, x):
        return self.drop(torch.relu(x))
""",
        "[torch.randn(4, 8)]",
        "[]",
    ),
    "transpose_add": kb(
        """
class Model(nn.Module):
    def forward(self, x):
        return x.transpose(0, 1) + 1.0
""",
        "[torch.randn(4, 8)]",
        "[]",
    ),
}
