"""The Triton templates on a real GPU: every strategy compiles and is correct; timings printed.

Run on the GPU machine: ``pytest -m gpu tests/offline/test_gpu.py -s``.
"""

import pytest
import torch

from tests.offline.cases import all_cases, variants
from tests.offline.harness import build_pair, compare, load_solution, solution, time_ms

CASES = all_cases()
IDS = [task.name for task, _ in CASES]


def _tf32(task, strategies) -> bool:
    """Products in TF32: every template with a ``tl.dot`` (GEMMs and library GEMM prefixes,
    convolutions, attention, triangular products) chooses them wherever the float32 tolerance
    allows, the strategy forces them."""
    return 'input_precision="tf32"' in solution(task, "triton", strategies)


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_triton_variants_on_gpu(case):
    task, shapes = case
    failures = []
    for strategies in variants(task, "triton", singles=True):
        module = load_solution(solution(task, "triton", strategies))
        rel_l2 = 3e-3 if _tf32(task, strategies) else None
        for overrides in shapes:
            try:  # collect every failing variant, compile errors included, then report them all
                problem = compare(task, module, overrides, device="cuda", rel_l2=rel_l2)
            except RuntimeError as err:
                problem = f"{type(err).__name__}: {str(err)[:300]}"
            if problem:
                failures.append(f"{strategies}: {problem}")
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "case",
    [c for c in CASES if not c[0].id.startswith("test/")],
    ids=[t.name for t, _ in CASES if not t.id.startswith("test/")],
)
def test_builtin_tasks_at_full_size_on_gpu(case):
    task, _ = case
    for strategies in variants(task, "triton", singles=False):
        module = load_solution(solution(task, "triton", strategies))
        model, new, inputs = build_pair(task, module, {}, size="large")
        model, new = model.cuda(), new.cuda()
        inputs = [x.cuda() for x in inputs]
        with torch.no_grad():
            expected, got = model(*inputs), new(*inputs)
        assert got.shape == expected.shape and got.dtype == expected.dtype
        if got.dtype == torch.int64:
            assert torch.equal(got, expected), task.name
        else:  # relative L2 error: TF32 products over K in the thousands are off near zeros
            rel = ((got - expected).norm() / expected.norm()).item()
            assert rel < (5e-3 if _tf32(task, strategies) else 1e-4), rel
        eager, ours = time_ms(model, inputs), time_ms(new, inputs)
        label = "all" if strategies else "baseline"
        print(
            f"\nGPU {task.name:24s} {label:8s} eager {eager:8.3f} ms  offline {ours:8.3f} ms"
            f"  speedup {eager / ours:6.2f}"
        )
