"""Split rows: few long rows are cut into chunks reduced by many programs, then combined."""

import re

import pytest

from tests.offline.cases import everything
from tests.offline.harness import compare, load_solution, solution, task_of
from tests.offline.sources import kb

# (forward expression, inputs): every accumulator kind the combine handles
SPLIT_CASES = {
    "sum": ("torch.sum(x, dim=-1)", "[torch.randn(ROWS, COLS)]"),
    "amin_keepdim": ("torch.amin(x, dim=1, keepdim=True)", "[torch.randn(ROWS, COLS)]"),
    "argmax": ("torch.argmax(x, dim=1)", "[torch.randn(ROWS, COLS)]"),
    "softmax": ("torch.softmax(x * 3.0, dim=-1)", "[torch.randn(ROWS, COLS)]"),
    "log_softmax": ("F.log_softmax(x, dim=-1)", "[torch.randn(ROWS, COLS)]"),
    "layer_norm": ("F.layer_norm(x, (COLS,)) * 2.0", "[torch.randn(ROWS, COLS) * 3 + 5]"),
    "mse_to_scalar": (
        "torch.mean((x - y) ** 2)",
        "[torch.randn(ROWS, COLS), torch.randn(ROWS, COLS)]",
    ),
    "middle_dim_std": ("torch.std(x, dim=0)", "[torch.randn(COLS, ROWS)]"),
}


def _source(expr: str, inputs: str) -> str:
    args = "x, y" if re.search(r"\by\b", expr) else "x"  # not the y of "layer_norm"
    body = f"""
ROWS = 3
COLS = 9001

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, {args}):
        return {expr}
"""
    return kb(body, inputs)


def _task(name: str):
    expr, inputs = SPLIT_CASES[name]
    return task_of(f"split_{name}", _source(expr, inputs))


# each is seconds of the Triton interpreter over long rows: one case keeps the path in the fast tier
FAST_SPLIT = {"middle_dim_std"}


@pytest.mark.parametrize(
    "name", [n if n in FAST_SPLIT else pytest.param(n, marks=pytest.mark.slow) for n in SPLIT_CASES]
)
def test_few_long_rows_take_the_split_path_and_match(name):
    task = _task(name)
    for strategies in [(), everything(task, "triton")]:
        code = solution(task, "triton", strategies)
        assert "htam_split_pass0[(n_rows, split)]" in code and "htam_split_out" in code
        module = load_solution(code)
        # 3 rows of 9001: 3 chunks each; 1 row of 4097: 2 chunks (one ragged); 1200 rows: no split
        for shape in ({}, {"ROWS": 1, "COLS": 4097}, {"ROWS": 1200, "COLS": 5}):
            problem = compare(task, module, shape, atol=2e-4, rtol=2e-4)
            assert problem is None, f"{name} {strategies} {shape}: {problem}"


def test_the_split_is_chosen_from_the_shape_at_run_time():
    code = solution(_task("sum"), "triton")
    assert "if n_rows < 1024:" in code  # many rows keep one program per row
    assert "split = triton.cdiv(R, chunk)" in code
