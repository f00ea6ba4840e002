"""Reference models of the GEMM family (linear, transposed, batched, 3-d) for
tests/offline/sources.CASES."""

from tests.offline.kbsource import kb

GEMM_RESIDUAL = kb(
    """
BATCH = 7
IN = 33
OUT = 40

class Model(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.proj = nn.Linear(d_in, d_out)

    def forward(self, x, residual):
        y = F.relu(self.proj(x))
        return y * 0.5 + residual
""",
    "[torch.randn(BATCH, IN), torch.randn(BATCH, OUT)]",
    "[IN, OUT]",
)

GEMM_TRANSPOSED = kb(
    """
M = 19
K = 37
N = 21

class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.scale = 0.25
        self.bias = nn.Parameter(torch.randn(n))

    def forward(self, a, b):
        return torch.tanh(torch.matmul(a, b.t()) * self.scale + self.bias)
""",
    "[torch.randn(M, K), torch.randn(N, K)]",
    "[N]",
)

GEMM_BMM = kb(
    """
B = 3
M = 9
K = 20
N = 17

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k):
        return F.gelu(torch.bmm(q, k), approximate="tanh") - 1.0
""",
    "[torch.randn(B, M, K), torch.randn(B, K, N)]",
    "[]",
)

GEMM_ADDMM_3D = kb(
    """
B = 2
S = 5
K = 24
N = 12

class Model(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(k, n) * 0.2)
        self.fc = nn.Linear(k, n, bias=False)

    def forward(self, x):
        return torch.sigmoid(self.fc(x)) * 2.0
""",
    "[torch.randn(B, S, K)]",
    "[K, N]",
)
