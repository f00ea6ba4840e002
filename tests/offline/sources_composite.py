"""Reference models for the composite lowerings (losses, einsum), a float forward argument
and a view of an input that adds a dim of size 1: sources in KernelBench's form."""

from tests.offline.kbsource import kb

LOSS_SMOOTH_L1 = kb(
    """
N = 7
D = 257

class Model(nn.Module):
    def forward(self, predictions, targets):
        return F.smooth_l1_loss(predictions, targets, beta=0.5, reduction="sum")
""",
    "[torch.randn(N, D), torch.randn(N, D)]",
)

LOSS_HUBER_MODULE = kb(
    """
N = 5
D = 33

class Model(nn.Module):
    def __init__(self, delta):
        super().__init__()
        self.loss = nn.HuberLoss(delta=delta)

    def forward(self, predictions, targets):
        return self.loss(predictions, targets)
""",
    "[torch.randn(N, D) * 2.0, torch.randn(N, D)]",
    "[0.7]",
)

EW_SCALAR_INPUT = kb(
    """
M = 9
N = 33

class Model(nn.Module):
    def forward(self, A, s):
        return A * s + s
""",
    "[torch.randn(M, N), 3.25]",
)

EW_UNSQUEEZED_INPUT = kb(
    """
N = 9
M = 33

class Model(nn.Module):
    def forward(self, A, B):
        return A.unsqueeze(1) * B
""",
    "[torch.randn(N), torch.randn(N, M)]",
)

GEMM_EINSUM = kb(
    """
B = 2
I = 3
L = 16
K = 12

class Model(nn.Module):
    def forward(self, A, W):
        return torch.einsum("bil,lk->bik", A, W)
""",
    "[torch.randn(B, I, L), torch.randn(L, K)]",
)

COMPOSITE_CASES = {
    "loss_smooth_l1": (LOSS_SMOOTH_L1, "row", [{}]),
    "loss_huber_module": (LOSS_HUBER_MODULE, "row", [{}]),
    "ew_scalar_input": (EW_SCALAR_INPUT, "elementwise", [{}]),
    "ew_unsqueezed_input": (EW_UNSQUEEZED_INPUT, "elementwise", [{}, {"M": 1000}]),
    "gemm_einsum": (GEMM_EINSUM, "gemm", [{}]),
}
