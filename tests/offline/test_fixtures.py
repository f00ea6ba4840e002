"""The offline proposer on tasks outside KernelBench (tests/offline/fixture_tasks.py): each gets
a candidate of its own (a kernel of ours, not the reference as written) that is correct against
the reference on the CPU, checked the way ``offline_coverage.py --check`` checks (Triton in the
interpreter). Their GPU run is the last test (``-m gpu``)."""

from __future__ import annotations

import pytest
import torch

from htam.evaluate.host.static import check_source
from htam.offline.check import check_solution
from htam.offline.pipeline import NoMatch, analyze
from tests.offline.cases import variants
from tests.offline.fixture_tasks import MODELS, VARIANTS, fixture_task
from tests.offline.harness import build_pair, load_solution, solution, time_ms


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


# networks whose layers a library prefix would hold (with the norms and activations between
# them): the whole-model path runs those in kernels of ours instead of one tail kernel
NETWORKS = ["mha_encoder_layer", "mlp_residual_norm", "mobilenet_block", "resnet_bottleneck",
            "squeeze_excitation", "tiny_unet"]  # fmt: skip


@pytest.mark.parametrize("stem", NETWORKS)
def test_a_network_takes_the_whole_model_path(stem):
    m = analyze(fixture_task("models", stem))
    assert m.family == "model" and not m.library
    assert sum(m.ir.calls.values()) >= 2, m.ir.calls


# one program a row, or a channel, each a Python loop in the interpreter: 15-50 s
_SLOW = {"tall_log_softmax", "batchnorm_unit_height"}


@pytest.mark.parametrize(
    "stem", [pytest.param(s, marks=pytest.mark.slow) if s in _SLOW else s for s in VARIANTS]
)
def test_odd_shaped_variant_is_correct(stem):
    code = _own_candidate("variants", stem)
    assert check_solution(fixture_task("variants", stem).source, code) == "correct"


@pytest.mark.slow  # 2-25 s each in the Triton interpreter
@pytest.mark.parametrize("stem", MODELS)
def test_whole_model_is_correct(stem):
    code = _own_candidate("models", stem)
    assert check_solution(fixture_task("models", stem).source, code) == "correct"


FIXTURES = [("models", s) for s in MODELS] + [("variants", s) for s in VARIANTS]


@pytest.mark.gpu
@pytest.mark.parametrize(("kind", "stem"), FIXTURES, ids=[f"{k}-{s}" for k, s in FIXTURES])
def test_fixture_on_gpu(kind, stem):
    """Baseline and every single strategy correct on the GPU (compiled Triton, the evaluator's
    tolerances); the baseline's time against eager printed. ``pytest -m gpu -s`` shows them."""
    task = fixture_task(kind, stem)
    _own_candidate(kind, stem)
    failures = []
    for strategies in variants(task, "triton", singles=True):
        code = solution(task, "triton", strategies)
        verdict = check_solution(task.source, code, device="cuda")
        if verdict != "correct":
            failures.append(f"{strategies or 'baseline'}: {verdict}")
    assert not failures, "\n".join(failures)
    model, new, inputs = build_pair(task, load_solution(solution(task, "triton")), {})
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in inputs]
    eager, ours = time_ms(model.cuda(), inputs), time_ms(new.cuda(), inputs)
    print(f"\nGPU {stem:24s} eager {eager:8.3f} ms  offline {ours:8.3f} ms  x{eager / ours:5.2f}")
