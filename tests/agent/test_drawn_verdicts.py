"""A verdict that depends on the judge's random draw is no lesson about a strategy: a candidate
found `incorrect` only on inputs drawn in secret (shifted, outliers planted) is judged again on
fresh draws, past the evaluation cache. Failing again, it is the kernel's and learned; passing,
the first verdict stands (the candidate is not continued from) but is named and never learned.
(Seen on the GPU: the offline TF32 GEMM of Robust-KBench mnist_linear_relu, one element off
against one planted outlier once in 22 runs, and the memory learned it.)"""

from __future__ import annotations

import json

import pytest

from htam.agent import OptimizeConfig, Optimizer
from htam.agent.outcomes import DRAWN_INPUTS
from htam.evaluate.eval_config import EvalConfig
from htam.evaluate.host.cache import CachedEvaluator
from htam.evaluate.result import EvalResult
from htam.llm import LLMClient, LLMProposer, resolve_config
from htam.llm.replay_server import ReplayServer, Scripted
from htam.memory import MemoryBank
from htam.status import Fault, Status
from tests.agent.conftest import CHAIN, FIXTURES, choice, fenced, variant
from tests.evaluate.conftest import task_for
from tests.scripted_evaluator import ScriptedEvaluator

ON_OUTLIERS = (
    "timed call 9 (on scaled and shifted inputs with outliers planted), output 0: 1 of 1280 "
    "elements outside atol=3.10e-01 rtol=5e-03 (max abs error 4.127e-01 at flat index 517)"
)
ON_FIXED = "trial 0, output 0: 1280 of 1280 elements outside atol=1.00e-06 rtol=5e-03"


def _incorrect(message: str) -> EvalResult:
    return EvalResult(Status.INCORRECT, messages=[message])


def _run(tmp_path, outcomes: list):
    """Two steps of honest code, the evaluator's outcomes scripted in order behind the cache
    the CLI puts in front of it; the inner evaluator's calls and the bank's statuses."""
    good = (FIXTURES / "chain_triton.py").read_text()
    replies = [Scripted(content=choice("x"), when="strategy_id", repeat=True)]
    replies += [Scripted(content=fenced(variant(good, n)), when="ModelNew") for n in range(2)]
    inner = ScriptedEvaluator(lambda n, code: outcomes[n], config=EvalConfig(cache_dir=tmp_path))
    inner.target, inner.device_name, inner.torch_version = "cpu", "cpu", "x"
    cached = CachedEvaluator(inner, tmp_path / "evals")
    with ReplayServer(replies) as server, MemoryBank.in_memory() as bank:
        config = resolve_config(None, server.base_url, server.model, max_retries=0)
        cfg = OptimizeConfig(method="htam", steps=2, seed=1, target="cpu", language="triton")
        optimizer = Optimizer(LLMProposer(LLMClient(config)), cached, bank, cfg)
        summary = optimizer.run(task_for(CHAIN + ".py"), tmp_path / "run")
        learned = [r[0] for r in bank.connection.execute("SELECT status FROM steps")]
    steps = [json.loads(p.read_text()) for p in sorted((tmp_path / "run/steps").glob("*.json"))]
    return summary, steps, inner.evaluated, learned


def test_the_judges_name_for_drawn_inputs_is_the_one_matched():
    from types import SimpleNamespace

    from htam.evaluate.judge.shifted import Shifter

    planted = Shifter.inputs(SimpleNamespace(scale=1e4), outliers=True)
    assert DRAWN_INPUTS in planted and DRAWN_INPUTS in Shifter.inputs(SimpleNamespace(scale=None))


def test_incorrect_only_on_one_draw_is_named_never_learned_and_not_used(tmp_path, prices):
    summary, steps, calls, learned = _run(tmp_path, [2.0, _incorrect(ON_OUTLIERS), 3.0])
    assert summary.statuses == ["ok", "incorrect"]
    assert len(calls) == 3 and calls[1] == calls[2]  # judged again, not served from the cache
    second = steps[1]
    assert second["feedback"]["fault"] == Fault.DRAW and not second["memory_updated"]
    assert second["reward"] == 0.0 and not second["new_best"]
    assert second["feedback"]["messages"][0].startswith("incorrect only on inputs drawn")
    assert ON_OUTLIERS in second["feedback"]["messages"]
    assert learned == ["ok"]


@pytest.mark.parametrize(
    ("outcomes", "calls"),
    [
        ([2.0, _incorrect(ON_OUTLIERS), _incorrect(ON_OUTLIERS)], 3),  # fails every draw
        ([2.0, _incorrect(ON_FIXED)], 2),  # fails on the fixed inputs: nothing drawn
    ],
)
def test_incorrect_on_every_draw_or_on_fixed_inputs_is_the_kernels(
    tmp_path, prices, outcomes, calls
):
    summary, steps, evaluated, learned = _run(tmp_path, outcomes)
    assert summary.statuses == ["ok", "incorrect"] and len(evaluated) == calls
    assert steps[1]["feedback"]["fault"] is None and steps[1]["memory_updated"]
    assert steps[1]["reward"] < 0 and sorted(learned) == ["incorrect", "ok"]
