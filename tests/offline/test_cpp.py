"""Generated C++/OpenMP solutions compile and match their references.

All solutions but one share a single combined build (see tests/offline/harness.py); one solution
file runs exactly as written, building its own extension through torch's cpp_extension.load.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from htam.evaluate.host.static import check_source
from htam.offline.templates_proposer import OfflineProposer
from htam.proposer import ProposalRequest
from htam.tasks import builtin_suite
from tests.offline.cases import all_cases, variants
from tests.offline.harness import (
    build_combined,
    compare,
    cpp_flags_of,
    cpp_unit,
    load_solution,
    solution,
    task_of,
)
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
            code = solution(task, "cpp", strategies)
            # the whole-model family's runtime is a torch extension of its own, built once for
            # every model (tests/offline/test_whole_model.py), not a unit of the combined build
            if '"family": "model"' not in code.split("\n", 1)[0]:
                plan.append((task, shapes, strategies, code))
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
    # each built with its own flags: the fast-math families' rounding is what is checked
    fast = {cpp_flags_of(code) for *_, code in plan if "-ffast-math" in cpp_flags_of(code)}
    assert fast and len({cpp_flags_of(code) for *_, code in plan}) >= 2
    failures = []
    for task, shapes, strategies, code in plan:
        module = load_solution(code, ext=ext)
        for overrides in shapes:
            problem = compare(task, module, overrides, atol=1e-4, rtol=1e-4)
            if problem:
                failures.append(f"{task.name} {strategies}: {problem}")
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_a_solution_file_runs_as_written(tmp_path):
    task = task_of("ew_gelu_sigmoid", EW_GELU_SIGMOID)
    proposal = OfflineProposer("cpu").propose(
        ProposalRequest(task=task, target="cpu", language="cpp", base_code=None, feedback=None)
    )
    module = load_solution(proposal.code)  # its own load() builds the extension
    for overrides in CASES["ew_gelu_sigmoid"][2]:
        assert compare(task, module, overrides) is None
    # Built where torch's extension directory points (the evaluator: the job's directory), and
    # not built again by another process importing the same code.
    name, _ = cpp_unit(proposal.code)
    library = Path(os.environ["TORCH_EXTENSIONS_DIR"]) / name / f"{name}.so"
    built = library.stat().st_mtime_ns
    again = tmp_path / "solution.py"
    again.write_text(proposal.code)
    run = subprocess.run([sys.executable, str(again)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert library.stat().st_mtime_ns == built


@pytest.mark.slow
def test_builtin_cpp_solutions_pass_the_static_rules_without_torch_headers():
    """Every family's kernel includes Python.h, never torch/ headers, except the whole-model
    family: its C++ runtime (graph/cpp_rt.py) is one fixed set of primitives shared by every
    model, built once with torch/extension.h, so the header cost is paid once, not per task."""
    from htam.offline.pipeline import analyze

    codes = []
    for task in builtin_suite():
        request = ProposalRequest(
            task=task, target="cpu", language="cpp", base_code=None, feedback=None
        )
        code = OfflineProposer("cpu", "cpp").propose(request).code
        if code is not None:
            codes.append((task.id, analyze(task).family, code))
    assert len(codes) >= 15
    assert sum(family != "model" for _, family, _ in codes) >= 15
    for task_id, family, code in codes:
        assert check_source(code, "cpp") == [], task_id
        _, src = cpp_unit(code)
        if family == "model":
            assert "#include <torch/extension.h>" in src, task_id
        else:
            assert "#include <Python.h>" in src and "torch/" not in src, task_id
    # The no-kernel rule still sees the kernel: the same file without its load() has none.
    unbuilt = code.replace("_ext = load(", "_ext = dict(")
    assert [v.rule for v in check_source(unbuilt, "cpp")] == ["no-kernel"]
