"""Methods as guides, the registry as the one list of methods, the typed step, the evaluator
protocol, and one unit for the times the loop compares."""

from __future__ import annotations

import json

import pytest

from htam.agent.guides import FlatGuide, HTAMGuide, NoGuide, make_guide
from htam.agent.loop import OptimizeConfig
from htam.agent.ports import EvaluatorPort
from htam.agent.state import Progress, comparable_times
from htam.agent.step import ChoiceRecord, ProposalRecord, Step
from htam.agent.view import PathStep
from htam.evaluate.result import EvalResult, Timing
from htam.memory import MemoryBank, StepRecord
from htam.policy import PolicyConfig, reward
from htam.proposer import Usage
from htam.status import Status
from htam.vocab import METHODS, Guide, Method, method_spec


def test_every_registered_method_gets_its_guide():
    bank = MemoryBank.in_memory()
    kinds = {
        name: type(make_guide(spec, bank, PolicyConfig(), 4)) for name, spec in METHODS.items()
    }
    assert kinds == {
        "htam": HTAMGuide, "no-prefix": HTAMGuide, "no-position": HTAMGuide,
        "no-update": HTAMGuide, "no-hierarchy": HTAMGuide, "no-local": HTAMGuide,
        "random": HTAMGuide, "flat": FlatGuide, "refine": NoGuide, "oneshot": NoGuide,
    }  # fmt: skip
    assert [str(m) for m in Method] == list(METHODS)
    with pytest.raises(ValueError, match="needs a memory bank"):
        make_guide(method_spec("flat"), None, PolicyConfig(), 4)
    with pytest.raises(ValueError, match="unknown method 'genius'; known: htam, no-prefix"):
        OptimizeConfig(method="genius")


def test_oneshot_is_one_step_because_its_spec_says_so():
    assert OptimizeConfig(method="oneshot", steps=6).steps == 1
    assert OptimizeConfig(method="refine", steps=6).steps == 6
    assert [n for n, s in METHODS.items() if s.steps is not None] == ["oneshot"]
    assert [n for n, s in METHODS.items() if not s.uses_memory] == ["refine", "oneshot"]
    assert method_spec("no-prefix").variant.prefix_len == 1
    assert method_spec("random").guide is Guide.HTAM


def test_the_ablations_are_configurations_of_one_guide():
    bank = MemoryBank.in_memory()
    config = PolicyConfig(repairs=2)
    full = make_guide(method_spec("htam"), bank, config, 4)
    no_local = make_guide(method_spec("no-local"), bank, config, 4)
    assert full.repairs == no_local.repairs == 2
    assert NoGuide("refine").repairs == 0
    assert len(full.policy.candidates("fusion")) == len(bank.locals_of("fusion")) > 0
    assert no_local.policy.candidates("fusion") == []


def _result(ms: float | None, ref: float | None, status: Status = Status.OK) -> EvalResult:
    timing = Timing(ms, ms, ms, 0.0, 10, "perf_counter") if ms else None
    return EvalResult(status, runtime_ms=ms, ref_runtime_ms=ref, timing=timing)


def test_best_so_far_compares_one_unit():
    # 4x faster than its reference (2 ms); then a candidate whose reference went untimed, at
    # 1 ms: faster in milliseconds. 1/speedup (0.25) against 1.0 ms said "slower".
    progress = Progress(ref_ms=8.0)
    step = PathStep("fusion", None, "ok")
    assert progress.observe(_result(2.0, 8.0), "a", "fusion", step)
    assert progress.observe(_result(1.0, None), "b", "fusion", step)
    assert progress.best_code == "b"
    assert not progress.observe(_result(1.5, None), "c", "fusion", step)


def test_the_reward_compares_one_unit():
    # First success, reference untimed beside it, 10 ms alone: 2 ms is 5x faster. Against
    # the bare bar 1.0 (relative) the 2 ms read as 2x slower: a negative reward.
    before, new = comparable_times(_result(2.0, None), None, 10.0)
    assert (before, new) == (10.0, 2.0)
    assert reward(Status.OK, before, new, PolicyConfig()) == 1.0
    before, new = comparable_times(_result(2.0, 8.0), None, 10.0)
    assert (before, new) == (1.0, 0.25)
    best = _result(2.0, 8.0)
    assert comparable_times(_result(1.0, 8.0), best, 10.0) == (0.25, 0.125)
    assert comparable_times(_result(1.0, None), best, 10.0) == (2.0, 1.0)


def _step() -> Step:
    record = StepRecord(
        "run", "t", "sig", 2, ["fusion"], "memory_access", "memory_access.vectorized_access",
        Status.OK, 1.5, 2.0, 0.41, "", "lesson",
    )  # fmt: skip
    return Step(
        step=2, method="htam", direction="memory_access",
        strategy="memory_access.vectorized_access", prefix=["fusion"], repair_of=None,
        decision={"direction": "memory_access"}, choice=ChoiceRecord("why", "p", "r"),
        proposal=ProposalRecord("p2", "r2", None, None), feedback=_result(1.0, 2.0),
        reward=0.41, usage=Usage(10, 5, 0.001, 1, 0), new_best=True, repeats_step=None,
        repeated_proposals=0, best_speedup=2.0, memory_updated=True, wall_s=1.25,
        state_text="s", memory_record=record,
        exhausted_strategies=["fusion.elementwise_chain_fusion"], exhausted_directions=["fusion"],
    )  # fmt: skip


def test_a_step_is_frozen_and_its_file_format_round_trips():
    step = _step()
    with pytest.raises(AttributeError):
        step.reward = 1.0  # type: ignore[misc]
    data = json.loads(json.dumps(step.to_dict(), indent=2, default=str))
    assert list(data) == [
        "step", "method", "direction", "strategy", "prefix", "repair_of", "decision", "choice",
        "proposal", "feedback", "reward", "usage", "new_best", "repeats_step",
        "repeated_proposals", "best_speedup", "memory_updated", "wall_s", "state_text",
        "memory_record", "exhausted_strategies", "exhausted_directions",
    ]  # fmt: skip
    assert data["memory_record"]["status"] == "ok" and data["feedback"]["speedup"] == 2.0
    assert data["usage"] == {
        "prompt_tokens": 10, "completion_tokens": 5, "cost_usd": 0.001, "calls": 1,
        "cached_calls": 0,
    }  # fmt: skip
    back = Step.from_dict(data)
    assert back == step
    # a step written before exhaustion was recorded reads back with nothing exhausted
    older = Step.from_dict({k: v for k, v in data.items() if not k.startswith("exhausted")})
    assert older.exhausted_strategies == [] and older.exhausted_directions == []
    assert json.dumps(back.to_dict(), indent=2) == json.dumps(step.to_dict(), indent=2)


def test_both_evaluators_satisfy_the_protocol(tmp_path):
    from htam.evaluate.eval_config import EvalConfig
    from htam.evaluate.host.cache import CachedEvaluator
    from htam.evaluate.host.evaluator import Evaluator

    for cls in (Evaluator, CachedEvaluator):
        assert all(
            callable(getattr(cls, name, None)) for name in ("evaluate", "reference", "peaks")
        )

    class Inner:  # what CachedEvaluator needs of the evaluator it wraps
        config = EvalConfig(size="large", cache_dir=str(tmp_path))
        cache_dir = tmp_path

        def peaks(self):
            return {"bandwidth_gbs": 7.0}

    cached = CachedEvaluator(Inner())
    assert isinstance(cached, EvaluatorPort)
    assert cached.config.size == "large" and cached.peaks() == {"bandwidth_gbs": 7.0}
