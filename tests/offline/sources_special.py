"""Reference models of the loss, attention and triangular-product families."""

from tests.offline.kbsource import kb


def _fn(expr: str, args: str, inputs: str, consts: str, init: str = "[]", module: str = "") -> str:
    body = f"""
{consts}

class Model(nn.Module):
    def __init__(self, *args):
        super().__init__()
        {module or "pass"}

    def forward(self, {args}):
        return {expr}
"""
    return kb(body, inputs, init)


CROSS_ENTROPY = _fn(
    "F.cross_entropy(x, t)",
    "x, t",
    "[torch.randn(N, C) * 3, torch.randint(0, C, (N,))]",
    "N = 7\nC = 37",
)
CROSS_ENTROPY_IGNORE = _fn(
    "F.cross_entropy(x, t, ignore_index=2, reduction='mean')",
    "x, t",
    "[torch.randn(N, C), torch.randint(0, C, (N,))]",
    "N = 9\nC = 5",
)
CROSS_ENTROPY_NONE = _fn(
    "torch.nn.functional.cross_entropy(x, t, reduction='none')",
    "x, t",
    "[torch.randn(N, C), torch.randint(0, C, (N,))]",
    "N = 6\nC = 130",
)
KL_BATCHMEAN = _fn(
    "F.kl_div(torch.log(p), q, reduction='batchmean')",
    "p, q",
    "[torch.rand(N, C).softmax(-1), torch.rand(N, C).softmax(-1)]",
    "N = 5\nC = 70",
)
KL_LOG_TARGET_SUM = _fn(
    "F.kl_div(p, q, reduction='sum', log_target=True)",
    "p, q",
    "[torch.randn(N, C), torch.randn(N, C)]",
    "N = 3\nC = 17",
)
TRIPLET = _fn(
    "self.loss_fn(a, p, n)",
    "a, p, n",
    "[torch.rand(N, C) * 0.5, torch.rand(N, C), torch.rand(N, C)]",
    "N = 8\nC = 45",
    "[0.7]",
    "self.loss_fn = torch.nn.TripletMarginLoss(margin=args[0])",
)
ATTENTION = _fn(
    "F.scaled_dot_product_attention(q, k, v)",
    "q, k, v",
    "[torch.randn(B, H, S, D), torch.randn(B, H, S, D), torch.randn(B, H, S, D)]",
    "B = 2\nH = 2\nS = 37\nD = 24",
)
ATTENTION_CAUSAL_WIDE = _fn(
    "F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.05)",
    "q, k, v",
    "[torch.rand(B, S, D), torch.rand(B, S, D), torch.rand(B, S, D)]",
    "B = 2\nS = 70\nD = 200",
)
TRIU = _fn(
    "torch.triu(torch.matmul(a, b))",
    "a, b",
    "[torch.triu(torch.rand(N, N)), torch.triu(torch.rand(N, N))]",
    "N = 150",
)
TRIL_OFFSET = _fn(
    "torch.tril(a @ b, diagonal=-3)",
    "a, b",
    "[torch.randn(M, K), torch.randn(K, N)]",
    "M = 90\nK = 40\nN = 130",
)
SPECIAL_CASES = {
    "attention": (ATTENTION, "attention", [{}]),
    "attention_causal_wide": (ATTENTION_CAUSAL_WIDE, "attention", [{}]),
    "triu_matmul": (TRIU, "triangular", [{}, {"N": 200}]),
    "tril_offset": (TRIL_OFFSET, "triangular", [{}]),
    "loss_cross_entropy": (CROSS_ENTROPY, "loss", [{}, {"C": 3000}]),
    "loss_cross_entropy_ignore": (CROSS_ENTROPY_IGNORE, "loss", [{}]),
    "loss_cross_entropy_none": (CROSS_ENTROPY_NONE, "loss", [{}]),
    "loss_kl_batchmean": (KL_BATCHMEAN, "loss", [{}, {"C": 2500}]),
    "loss_kl_log_target_sum": (KL_LOG_TARGET_SUM, "loss", [{}]),
    "loss_triplet": (TRIPLET, "loss", [{}]),
}
