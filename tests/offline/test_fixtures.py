"""The offline proposer on tasks outside KernelBench (tests/offline/fixture_tasks.py): each gets
a candidate of its own (a kernel of ours, not the reference as written) that is correct against
the reference on the CPU, checked the way ``offline_coverage.py --check`` checks (Triton in the
interpreter). The GPU run of the same fixtures is in test_gpu.py."""

from __future__ import annotations

import pytest

from htam.evaluate.host.static import check_source
from htam.offline.check import check_solution
from htam.offline.pipeline import NoMatch, analyze
from tests.offline.fixture_tasks import MODELS, VARIANTS, fixture_task
from tests.offline.harness import solution


def _own_candidate(kind: str, stem: str) -> str:
    """The baseline solution of the fixture, after checking that it is one of our own."""
    task = fixture_task(kind, stem)
    try:
        analyze(task)
    except NoMatch as err:
        pytest.fail(f"{stem}: no candidate of its own: {err}")
    code = solution(task, "triton")
    assert "@triton.jit" in code, f"{stem}: the solution holds no kernel of ours"
    assert check_source(code, "triton") == []
    return code


def test_there_are_enough_fixtures():
    assert len(MODELS) >= 10 and len(VARIANTS) >= 8


@pytest.mark.parametrize("stem", VARIANTS)
def test_odd_shaped_variant_is_correct(stem):
    code = _own_candidate("variants", stem)
    assert check_solution(fixture_task("variants", stem).source, code) == "correct"


@pytest.mark.slow  # 2-25 s each in the Triton interpreter
@pytest.mark.parametrize("stem", MODELS)
def test_whole_model_is_correct(stem):
    code = _own_candidate("models", stem)
    assert check_solution(fixture_task("models", stem).source, code) == "correct"
