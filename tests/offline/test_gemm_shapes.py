"""Shape-aware Triton GEMM: the per-shape plan (TF32 from the tolerance, tiles, operand order),
the matrix-vector kernel, and correctness of every path in the interpreter."""

from __future__ import annotations

import pytest
import torch

from htam.evaluate.judge.needles import MAX_OUTPUT
from htam.offline.backends.triton.gemm_plan import TF32_PRODUCT_ERROR, tf32_max_k
from htam.offline.params import GemmParams
from htam.offline.pipeline import analyze, applicable, apply_strategy, baseline, generate
from tests.offline.harness import build_pair, load_solution, task_of

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def _source(sizes: str, forward: str, inputs: str, init: str = "", args: str = "A, B") -> str:
    body = f"    def __init__(self):\n        super().__init__()\n{init}\n" if init else ""
    return (
        HEAD
        + f"\n{sizes}\n\nclass Model(nn.Module):\n{body}"
        + f"    def forward(self, {args}):\n        return {forward}\n\n"
        + f"def get_inputs():\n    return [{inputs}]\n\n"
        + "def get_init_inputs():\n    return []\n"
    )


PLAIN = _source("M, K, N = 5, 40, 7", "torch.matmul(A, B)", "torch.randn(M, K), torch.randn(K, N)")
TRANS_B = _source(
    "M, K, N = 5, 40, 7", "torch.matmul(A, B.T)", "torch.randn(M, K), torch.randn(N, K)"
)
TRANS_A = _source(
    "M, K, N = 5, 40, 7", "torch.matmul(A.T, B)", "torch.randn(K, M), torch.randn(K, N)"
)
LINEAR = _source(
    "B, K, N = 6, 24, 9",
    "torch.relu(self.fc(x) * 2.0)",
    "torch.randn(B, K)",
    init="        self.fc = nn.Linear(K, N)",
    args="x",
)
# matrix-vector products: N == 1 and M == 1, both orders of the matrix, batched, an epilogue
GEMV_N1 = _source("M, K = 37, 300", "torch.matmul(A, B)", "torch.randn(M, K), torch.randn(K, 1)")
GEMV_M1 = _source("K, N = 45, 300", "torch.matmul(A, B)", "torch.randn(1, K), torch.randn(K, N)")
GEMV_M1_T = _source("K, N = 45, 70", "torch.matmul(A, B.T)", "torch.randn(1, K), torch.randn(N, K)")
GEMV_N1_T = _source("M, K = 13, 99", "torch.matmul(A.T, B)", "torch.randn(K, M), torch.randn(K, 1)")
GEMV_BMM = _source(
    "S, M, K = 3, 11, 70", "torch.bmm(A, B)", "torch.randn(S, M, K), torch.randn(S, K, 1)"
)
GEMV_LINEAR = _source(
    "B, K = 21, 130",
    "torch.sigmoid(self.fc(x)) + 1.0",
    "torch.randn(B, K)",
    init="        self.fc = nn.Linear(K, 1)",
    args="x",
)
GEMVS = {
    "n1": GEMV_N1,
    "m1": GEMV_M1,
    "m1_t": GEMV_M1_T,
    "n1_t": GEMV_N1_T,
    "bmm": GEMV_BMM,
    "linear": GEMV_LINEAR,
}


class _Recording:
    """Stands for a jitted kernel: records each launch's arguments, then runs it."""

    def __init__(self, fn):
        self.fn, self.calls = fn, []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.calls.append((args, kwargs))
            return self.fn[grid](*args, **kwargs)

        return launch


def _code(source: str, params: GemmParams | None = None, strategies=()) -> str:
    m = analyze(task_of("gemm_shapes", source))
    p = params or baseline(m)
    for s in strategies:
        p = apply_strategy(s, p, m, "triton")
    return generate(m, "triton", p, list(strategies))


def _run(source: str, code: str, sizes: dict | None = None, atol: float = 1e-4):
    """(recorded htam_gemm, recorded htam_gemv) after one forward checked against the reference."""
    sol = load_solution(code)
    gemm, gemv = _Recording(sol.htam_gemm), _Recording(sol.htam_gemv)
    sol.htam_gemm, sol.htam_gemv = gemm, gemv
    ref_model, new, inputs = build_pair(task_of("gemm_shapes", source), sol, sizes or {})
    with torch.no_grad():
        ref, out = ref_model(*inputs), new(*inputs)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=atol)
    return gemm, gemv


# -- precision --------------------------------------------------------------------------------


def test_tf32_limit_follows_the_tolerance():
    k = tf32_max_k()  # the evaluator's float32 rel_l2 (2e-3)
    assert 10_000_000 < k < 20_000_000  # far above KernelBench's largest K (1,048,576)
    assert tf32_max_k(1e-3) == 0  # a tolerance the TF32 error alone exceeds: never
    assert tf32_max_k(4e-3) > k


def test_tf32_error_estimate_covers_truncated_inputs():
    """Emulate the tensor cores' truncation to a 10-bit mantissa: the relative L2 error of the
    product stays below the estimate for rand, randn and nn.Linear-like operands."""

    def tf32(x):
        return (x.view(torch.int32) & ~0x1FFF).view(torch.float32)

    gen = torch.Generator().manual_seed(0)
    for k in (64, 4096):
        for a, b in (
            (torch.rand(64, k, generator=gen), torch.rand(k, 64, generator=gen)),
            (torch.randn(64, k, generator=gen), torch.randn(k, 64, generator=gen)),
            (torch.rand(64, k, generator=gen), (torch.rand(k, 64, generator=gen) * 2 - 1) / k**0.5),
        ):
            ref = a.double() @ b.double()
            got = tf32(a).double() @ tf32(b).double()
            rel = ((got - ref).norm() / ref.norm()).item()
            assert 3e-4 < rel < TF32_PRODUCT_ERROR, (k, rel)


def test_the_baseline_says_why_it_multiplies_in_tf32():
    code = _code(TRANS_B)
    assert f"tf32 = K <= {tf32_max_k()} and not (M * N * batch <= {MAX_OUTPUT}" in code
    assert "within the evaluator's float32 rel_l2 0.002" in code
    forced = _code(TRANS_B, strategies=("precision.tensor_core_dot",))
    assert "    tf32 = True\n" in forced and "precision.tensor_core_dot: TF32 for every K" in forced
    ieee = _code(TRANS_B, GemmParams(epilogue="fused", tile=-1, bk=0, tf32=False))
    assert "    tf32 = False\n" in ieee


# -- the plan at KernelBench's sizes ------------------------------------------------------------


def _plan(source: str, params: GemmParams | None = None):
    return load_solution(_code(source, params))._htam_gemm_plan


def test_plan_at_kernelbench_sizes():
    plan = _plan(TRANS_B)
    # (M, N, K, batch, A K-major, B K-major, B N-major, SMs)
    # 17_Matmul_with_transposed_B: both operands already K-major, read in place with TF32
    assert plan(2048, 4096, 8192, 1, True, True, False, 132) == (
        True,
        (128, 128, 32, 8, 3),
        False,
        False,
    )
    # nn.Linear of level 2 (x @ W^T, 1024 x 8192 -> 8192): the weight is read in place
    assert plan(1024, 8192, 8192, 1, True, True, False, 132)[2:] == (False, False)
    # 1_Square (4096^2, plain B): B copied once into K-major rows for TF32's wgmma
    assert plan(4096, 4096, 4096, 1, True, False, True, 132)[2:] == (False, True)
    # 16 / 18 (A.T): A copied K-major
    assert plan(2048, 4096, 8192, 1, False, True, False, 132)[2] is True
    # 6_Matmul_with_large_K (256 x 256, K = 524288): small tiles (split-K fills the GPU), B
    # read by its strides (M = 256 reuses it too little to pay for a 512 MB copy)
    assert plan(256, 256, 524288, 1, True, False, True, 132) == (
        True,
        (64, 64, 32, 4, 4),
        False,
        False,
    )
    # 59_Matmul_Swish_Scaling (128 x 32768 -> 32768): 256 tiles of 128 x 128
    assert plan(128, 32768, 32768, 1, True, True, False, 132)[1] == (128, 128, 32, 8, 3)
    # a 256 x 8192 output: 128 tiles of 128 x 128 leave SMs idle, 256 of 64 x 128 do not
    assert plan(256, 8192, 8192, 1, True, True, False, 132)[1] == (64, 128, 32, 4, 4)
    # Robust-KBench mnist_linear_relu (64 x 1600 by 1600 x 128): few outputs, where the judge
    # plants outliers, and a product so small that IEEE costs nothing
    assert plan(64, 128, 1600, 1, True, True, False, 132)[0] is False
    # beyond the tolerance's K: IEEE fp32, and B N-major for the FMA path
    tf32, cfg, copy_a, copy_b = plan(2048, 2048, 20_000_000, 1, True, True, False, 132)
    assert (tf32, cfg, copy_a, copy_b) == (False, (64, 64, 32, 4, 3), False, True)


def test_strategies_replace_the_per_shape_tile():
    m = analyze(task_of("gemm_shapes", TRANS_B))
    base = baseline(m)
    assert (base.tile, base.bk, base.tf32) == (-1, 0, None)
    tiled = apply_strategy("data_reuse.shared_memory_tiling", base, m, "triton")
    bk = apply_strategy("parallel_mapping.block_size_tuning", base, m, "triton")
    assert tiled.tile == 1 and bk.bk == 64
    assert _plan(TRANS_B, tiled)(2048, 4096, 8192, 1, True, True, False, 132)[1] == (
        64,
        64,
        32,
        4,
        3,
    )
    assert _plan(TRANS_B, bk)(2048, 4096, 8192, 1, True, True, False, 132)[1][2] == 64


# -- operand order, run in the interpreter ----------------------------------------------------


def _strides(gemm: _Recording) -> tuple[int, ...]:
    """(s_am, s_ak, s_bk, s_bn) of the one GEMM launch."""
    ((args, _),) = gemm.calls
    # the last positional arguments: M, N, K, s_ab, s_am, s_ak, s_bb, s_bk, s_bn, K_CHUNK, WS_STRIDE
    s = args[-11:]
    return s[4], s[5], s[7], s[8]


def test_linear_weight_is_read_k_major_in_place(monkeypatch):
    """x @ W^T: the weight's rows are K-contiguous, the order TF32's wgmma reads; no copy."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    gemm, gemv = _run(LINEAR, _code(LINEAR), atol=2e-4)
    assert not gemv.calls
    s_am, s_ak, s_bk, s_bn = _strides(gemm)
    assert (s_ak, s_bk) == (1, 1) and s_bn == 24  # B[k, n] = W[n, k]: stride K along n


@pytest.mark.slow
def test_plain_b_is_copied_k_major_when_reused(monkeypatch):
    """M >= 1024: a row-major B is copied once into K-major rows (padded to 16 elements)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    big = PLAIN.replace("M, K, N = 5, 40, 7", "M, K, N = 1030, 20, 9")
    tf32 = GemmParams(epilogue="fused", tile=-1, bk=0, tf32=True)  # shapes this small stay IEEE
    gemm, _ = _run(big, _code(big, tf32), atol=2e-4)
    s_am, s_ak, s_bk, s_bn = _strides(gemm)
    assert (s_ak, s_bk, s_bn) == (1, 1, 32)  # K = 20 padded to 32
    # and for the FMA path (IEEE), a K-major B is copied N-major instead
    trans = TRANS_B.replace("M, K, N = 5, 40, 7", "M, K, N = 1030, 20, 9")
    gemm, _ = _run(trans, _code(trans, GemmParams(epilogue="fused", tile=-1, bk=0, tf32=False)))
    s_am, s_ak, s_bk, s_bn = _strides(gemm)
    assert (s_bk, s_bn) == (16, 1)  # N = 9 padded to 16


def test_transposed_a_is_copied_k_major_when_reused(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    wide = TRANS_A.replace("M, K, N = 5, 40, 7", "M, K, N = 3, 18, 1030")
    tf32 = GemmParams(epilogue="fused", tile=-1, bk=0, tf32=True)  # shapes this small stay IEEE
    gemm, _ = _run(wide, _code(wide, tf32), atol=2e-4)
    s_am, s_ak, s_bk, s_bn = _strides(gemm)
    assert (s_am, s_ak) == (32, 1)
    small = _run(TRANS_A, _code(TRANS_A, tf32))[0]  # N = 7: read by its strides, no copy
    assert _strides(small)[:2] == (1, 5)


@pytest.mark.parametrize(
    "name",
    # the linear layer's is seconds under the interpreter: in the full suite
    [PLAIN, TRANS_B, TRANS_A, pytest.param(LINEAR, marks=pytest.mark.slow)],
    ids=["plain", "tb", "ta", "fc"],
)
def test_every_strategy_on_small_shapes(name, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    m = analyze(task_of("gemm_shapes", name))
    for s in [None, *applicable(m, "triton")]:
        _run(name, _code(name, strategies=(s,) if s else ()))


# -- matrix-vector ----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", list(GEMVS))
def test_gemv_kernel_for_a_vector_operand(name, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    source = GEMVS[name]
    variants = [(), ("fusion.epilogue_fusion",)] if name == "linear" else [()]
    variants.append(("memory_access.vectorized_access", "boundary_handling.masked_tail"))
    for strategies in variants:
        gemm, gemv = _run(source, _code(source, strategies=strategies))
        assert not gemm.calls and len(gemv.calls) == 1, strategies


def test_gemv_tiles_follow_the_matrix_order(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    # N == 1, A row-major: rows along K (4 per program); K = 300 splits K (3 row blocks < SMs)
    _, gemv = _run(GEMV_N1, _code(GEMV_N1))
    ((args, kw),) = gemv.calls
    assert (kw["BR"], kw["BK"], kw["ROWS_M"]) == (4, 64, True) and kw["SPLIT"]
    # M == 1, B row-major: B^T's rows are contiguous, loads along the rows
    _, gemv = _run(GEMV_M1, _code(GEMV_M1))
    ((args, kw),) = gemv.calls
    assert (kw["BR"], kw["BK"], kw["ROWS_M"]) == (256, 16, False)
