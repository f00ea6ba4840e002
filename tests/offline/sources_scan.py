"""Reference models of the scan family: KernelBench's five scans (inclusive, product, reverse,
exclusive, masked) at sizes with several tiles per row, and a scan over a leading dim."""

from tests.offline.kbsource import kb

SCAN_CUMSUM_LONG = kb(
    """
ROWS = 3
COLS = 2500

class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.cumsum(x, dim=self.dim)
""",
    "[torch.randn(ROWS, COLS)]",
    "[1]",
)

SCAN_CUMPROD_LEADING = kb(
    """
A = 37
B = 3
C = 5

class Model(nn.Module):
    def forward(self, x):
        return torch.cumprod(x, dim=0)
""",
    "[torch.rand(A, B, C) * 0.5 + 0.75]",
)

SCAN_REVERSE_MASKED = kb(
    """
ROWS = 4
COLS = 1100

class Model(nn.Module):
    def forward(self, x, mask):
        return torch.cumsum((x * mask).flip(-1), dim=-1).flip(-1)
""",
    "[torch.randn(ROWS, COLS), torch.rand(ROWS, COLS) > 0.5]",
)

SCAN_EXCLUSIVE = kb(
    """
ROWS = 5
COLS = 1500

class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        cumsum = torch.cumsum(x.narrow(dim=self.dim, start=0, length=x.size(self.dim) - 1), dim=self.dim)
        return torch.cat((torch.zeros_like(x.select(self.dim, 0).unsqueeze(self.dim)), cumsum), dim=self.dim)
""",
    "[torch.randn(ROWS, COLS)]",
    "[1]",
)

SCAN_CASES = {
    "scan_cumsum_long": (SCAN_CUMSUM_LONG, "scan", [{}, {"ROWS": 1, "COLS": 7}]),
    "scan_cumprod_leading": (SCAN_CUMPROD_LEADING, "scan", [{}]),
    "scan_reverse_masked": (SCAN_REVERSE_MASKED, "scan", [{}]),
    "scan_exclusive": (SCAN_EXCLUSIVE, "scan", [{}]),
}
