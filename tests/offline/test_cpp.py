"""Generated C++/OpenMP solutions compile and match their references.

All solutions but one share a single combined build (see tests/offline/harness.py); one solution
file runs exactly as written, building its own extension through torch's cpp_extension.load.
"""

import pytest

from htam.offline.proposer import OfflineProposer
from htam.proposer import ProposalRequest
from tests.offline.cases import all_cases, variants
from tests.offline.harness import build_combined, compare, load_solution, solution, task_of
from tests.offline.sources import CASES, EW_GELU_SIGMOID

CASES_ALL = all_cases()
SINGLES = {
    "ew_two_inputs",
    "row_softmax_module",
    "row_layer_norm",
    "row_argmin_middle",
    "gemm_residual",
    "gemm_transposed",
}


def _plan():
    plan = []
    for task, shapes in CASES_ALL:
        for strategies in variants(task, "cpp", singles=task.name in SINGLES):
            plan.append((task, shapes, strategies, solution(task, "cpp", strategies)))
    return plan


@pytest.fixture(scope="module")
def combined():
    plan = _plan()
    ext, units = build_combined([code for *_, code in plan])
    return plan, ext, units


@pytest.mark.slow
def test_all_cpp_solutions_in_one_build(combined):
    plan, ext, units = combined
    assert units >= 40  # distinct C++ sources: strategies change the code
    failures = []
    for task, shapes, strategies, code in plan:
        module = load_solution(code, ext=ext)
        for overrides in shapes:
            problem = compare(task, module, overrides, atol=1e-4, rtol=1e-4)
            if problem:
                failures.append(f"{task.name} {strategies}: {problem}")
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_a_solution_file_runs_as_written():
    task = task_of("ew_gelu_sigmoid", EW_GELU_SIGMOID)
    proposal = OfflineProposer("cpu").propose(
        ProposalRequest(task=task, target="cpu", language="cpp", base_code=None, feedback=None)
    )
    module = load_solution(proposal.code)  # its own load() builds the extension
    for overrides in CASES["ew_gelu_sigmoid"][2]:
        assert compare(task, module, overrides) is None
