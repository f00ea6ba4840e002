"""Only the kernel's doing is learned (htam.status's fault taxonomy): an endpoint's reply in
prose, refused (HTTP 400) or cut at max_tokens, code repeating an earlier step, the offline
proposer's "no applicable strategy" and an evaluation the evaluator lost are named in the step,
never `rejected`, never learned and never cached. The endpoint is a real loopback server; the
evaluator is in-process (what is checked is the loop's bookkeeping, not a kernel), except for the
killed fork server, which is the real one."""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from htam.agent import OptimizeConfig, Optimizer
from htam.evaluate.eval_config import EvalConfig
from htam.evaluate.host.cache import CachedEvaluator
from htam.evaluate.result import EvalResult, Timing
from htam.llm import LLMClient, LLMProposer, resolve_config
from htam.llm.replay_server import ReplayServer, Scripted
from htam.memory import MemoryBank
from htam.offline import OfflineProposer
from htam.status import Fault, Status
from tests.agent.conftest import CHAIN, FIXTURES, choice, fenced, variant
from tests.evaluate.conftest import task_for
from tests.scripted_evaluator import ScriptedEvaluator, timed_ok


def _code(content: str, **extra) -> Scripted:
    return Scripted(content=content, when="ModelNew", **extra)


def _run(tmp_path, replies, bank, steps, evaluator=None, **loop):
    with ReplayServer(replies) as server:
        config = resolve_config(
            None, server.base_url, server.model, backoff_s=0.01, backoff_max_s=0.02, max_retries=1
        )
        cfg = OptimizeConfig(method="htam", steps=steps, seed=1, target="cpu", language="triton",
                             **loop)  # fmt: skip
        evaluator = evaluator or ScriptedEvaluator(lambda n, code: 1.5 + 0.5 * n)
        optimizer = Optimizer(LLMProposer(LLMClient(config)), evaluator, bank, cfg)
        summary = optimizer.run(task_for(CHAIN + ".py"), tmp_path / "run")
    steps_ = [json.loads(p.read_text()) for p in sorted((tmp_path / "run/steps").glob("*.json"))]
    return summary, steps_


def _bank_statuses(bank: MemoryBank) -> tuple[list[str], list[str]]:
    conn = bank.connection
    steps = [r[0] for r in conn.execute("SELECT status FROM steps")]
    evidence = [r[0] for r in conn.execute("SELECT status FROM evidence")]
    return steps, evidence


def test_endpoint_faults_are_named_never_rejected_and_never_learned(tmp_path, prices):
    good = (FIXTURES / "chain_triton.py").read_text()
    replies = [
        Scripted(content=choice("x"), when="strategy_id", repeat=True),
        _code("I would explain the approach rather than write it."),  # step 0: prose ...
        _code("Still prose, sorry."),  # ... and prose again after the repair turn
        Scripted.error(400, "context length exceeded", retry_after=None),  # step 1
        _code("```python\nclass ModelNew(torch.nn.Mod", finish_reason="length"),  # step 2 ...
        _code(fenced(good)),  # ... its repair turn answers honestly
        _code(fenced(variant(good, 1))),  # step 3
    ]
    replies[3].when = "ModelNew"
    with MemoryBank.in_memory() as bank:
        summary, steps = _run(tmp_path, replies, bank, steps=4)
        bank_steps, evidence = _bank_statuses(bank)
    statuses = [s["feedback"]["status"] for s in steps]
    assert statuses == ["no_code", "no_code", "ok", "ok"], statuses
    assert "rejected" not in summary.statuses
    assert [s["feedback"]["fault"] for s in steps[:2]] == ["endpoint", "endpoint"]
    assert "HTTP 400" in steps[1]["feedback"]["messages"][0]
    assert [s["memory_updated"] for s in steps] == [False, False, True, True]
    assert [s["reward"] for s in steps[:2]] == [0.0, 0.0]
    assert bank_steps == ["ok", "ok"] and set(evidence) <= {"ok"}


def test_code_repeating_an_earlier_step_is_a_repeat_not_a_rejection(tmp_path, prices):
    good = fenced((FIXTURES / "chain_triton.py").read_text())
    replies = [Scripted(content=choice("x"), when="strategy_id", repeat=True)]
    replies += [_code(good), _code(good)]
    with MemoryBank.in_memory() as bank:
        summary, steps = _run(tmp_path, replies, bank, steps=2, duplicate_retries=0,
                              redecisions=0)  # fmt: skip
        bank_steps, _ = _bank_statuses(bank)
    assert summary.statuses == ["ok", "repeat"]
    assert steps[1]["feedback"]["fault"] == "proposer" and not steps[1]["memory_updated"]
    assert bank_steps == ["ok"]


SORT = """import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.sort(x, dim=1).values


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
"""


def test_no_applicable_strategy_names_the_missing_family_and_teaches_nothing(tmp_path):
    (tmp_path / "sort.py").write_text(SORT)
    cfg = OptimizeConfig(method="htam", steps=3, seed=0, target="cpu", language="cpp")
    evaluator = ScriptedEvaluator(lambda n, code: 2.0)
    with MemoryBank.in_memory() as bank:
        before = bank.step_count()
        optimizer = Optimizer(OfflineProposer("cpu"), evaluator, bank, cfg)
        summary = optimizer.run(task_for(tmp_path / "sort.py"), tmp_path / "run")
        assert bank.step_count() == before
    assert summary.statuses == ["no_strategy"]
    step = json.loads((tmp_path / "run/steps/step_00.json").read_text())
    assert "missing family: sorting and selection" in step["feedback"]["messages"][0]
    assert evaluator.evaluated == []


@dataclass
class LosingOnce:
    """Loses the evaluation of its ``lose``-th candidate (as a dead fork server does), then
    judges it again as the scripted evaluator would."""

    inner: ScriptedEvaluator
    lose: int = 1
    calls: list[str] = field(default_factory=list)

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def evaluate(self, task, code, language):
        self.calls.append(code)
        if len(self.calls) - 1 == self.lose:
            return EvalResult(Status.LOST, messages=["the fork server died"], fault=Fault.EVALUATOR)
        return self.inner.evaluate(task, code, language)


def test_a_lost_evaluation_is_judged_again_and_its_loss_never_learned(tmp_path, prices):
    good = (FIXTURES / "chain_triton.py").read_text()
    replies = [Scripted(content=choice("x"), when="strategy_id", repeat=True)]
    replies += [_code(fenced(variant(good, n))) for n in range(3)]
    evaluator = LosingOnce(ScriptedEvaluator(lambda n, code: 1.5 + 0.5 * n))
    with MemoryBank.in_memory() as bank:
        summary, steps = _run(tmp_path, replies, bank, steps=3, evaluator=evaluator)
        bank_steps, _ = _bank_statuses(bank)
    assert summary.statuses == ["ok", "ok", "ok"]
    assert len(evaluator.calls) == 4 and evaluator.calls[1] == evaluator.calls[2]
    # the step says what happened to its first evaluation
    assert steps[1]["feedback"]["messages"][-1] == "judged again: the fork server died"
    assert not any("judged again" in m for m in steps[0]["feedback"]["messages"])
    assert bank_steps == ["ok", "ok", "ok"]


def test_a_timeout_is_learned_only_when_it_happens_again(tmp_path, prices):
    good = (FIXTURES / "chain_triton.py").read_text()
    replies = [Scripted(content=choice("x"), when="strategy_id", repeat=True)]
    replies += [_code(fenced(variant(good, n))) for n in range(2)]
    # step 0 times out once (the machine), then runs; step 1 hangs every time (the kernel)
    outcomes = [Status.TIMEOUT, 2.0, Status.TIMEOUT, Status.TIMEOUT]
    evaluator = ScriptedEvaluator(lambda n, code: outcomes[n])
    with MemoryBank.in_memory() as bank:
        summary, steps = _run(tmp_path, replies, bank, steps=2, evaluator=evaluator)
        bank_steps, _ = _bank_statuses(bank)
    assert summary.statuses == ["ok", "timeout"]
    assert steps[1]["feedback"]["fault"] is None and steps[1]["memory_updated"]
    assert sorted(bank_steps) == ["ok", "timeout"]


def test_the_cache_never_keeps_a_fault_as_a_verdict(tmp_path):
    results = [
        EvalResult(Status.LOST, messages=["fork server died"], fault=Fault.EVALUATOR),
        EvalResult(Status.RUNTIME_ERROR, messages=["out of host memory"], fault=Fault.MACHINE),
        timed_ok(2.0),
    ]
    inner = SimpleNamespace(
        config=EvalConfig(cache_dir=tmp_path), cache_dir=tmp_path, target="cpu",
        device_name="cpu", torch_version="x",
        evaluate=lambda task, code, language: results.pop(0),
    )  # fmt: skip
    task = SimpleNamespace(digest="d")
    cached = CachedEvaluator(inner, tmp_path / "evals")
    assert cached.evaluate(task, "code", "cpp").status is Status.LOST
    assert not list(tmp_path.glob("evals/*.json"))
    assert cached.evaluate(task, "code", "cpp").cause is Fault.MACHINE
    assert cached.evaluate(task, "code", "cpp").correct
    assert cached.evaluate(task, "code", "cpp").correct and cached.hits == 1


@pytest.mark.slow
def test_a_fork_server_killed_mid_run_is_replaced_and_its_loss_never_learned(tmp_path):
    from htam.evaluate import Evaluator

    config = EvalConfig(timing_budget_ms=20.0, min_timed=3, max_timed=10, run_timeout_s=120.0,
                        cache_dir=tmp_path / "cache")  # fmt: skip

    class KillsItsServer:
        def __init__(self, ev):
            self.ev, self.calls, self.results = ev, 0, []

        def __getattr__(self, name):
            return getattr(self.ev, name)

        def evaluate(self, task, code, language):
            self.calls += 1
            if self.calls == 2:  # the fork server dies under the run's second evaluation
                os.kill(self.ev.server.process.pid, signal.SIGKILL)
            result = self.ev.evaluate(task, code, language)
            self.results.append(result)
            return result

    cfg = OptimizeConfig(method="htam", steps=3, seed=0, target="cpu", language="cpp")
    with Evaluator("cpu", config) as ev, MemoryBank.in_memory() as bank:
        killing = KillsItsServer(ev)
        cached = CachedEvaluator(killing, tmp_path / "evals")
        summary = Optimizer(OfflineProposer("cpu"), cached, bank, cfg).run(
            task_for("level1/1_ReLU.py"), tmp_path / "run"
        )
        bank_steps, _ = _bank_statuses(bank)
        assert ev.server.alive()
    assert [r.status for r in killing.results].count(Status.LOST) == 1
    assert killing.calls == 4 and summary.steps == 3
    assert "lost" not in summary.statuses and "lost" not in bank_steps
    kept = [json.loads(p.read_text()) for p in (tmp_path / "evals").glob("*.json")]
    assert kept and all(k["status"] != "lost" and k.get("fault") is None for k in kept)


@pytest.mark.parametrize(
    ("refusal", "missing"),
    [
        ("its kernels would get bfloat16 tensors: the templates are float32", "bfloat16 inputs"),
        ("input x is float64; only float32 is supported", "float64 inputs"),
        ("unsupported module 'Conv2d'", "conv (Conv2d)"),
    ],
)
def test_a_refused_dtype_is_what_is_missing_not_the_tasks_family(refusal, missing):
    from htam.agent.outcomes import missing_family

    assert missing_family(f"no applicable strategy: {refusal}", ["elementwise"]) == missing


def _paired(ms: float, ref_beside: float, iqr: float = 0.01) -> EvalResult:
    timing = Timing(ms, ms, ms, iqr * ms, 10, "perf_counter")
    return EvalResult(Status.OK, runtime_ms=ms, ref_runtime_ms=ref_beside, timing=timing)


def test_a_reference_slower_beside_both_candidates_alike_is_no_noise_between_them():
    from htam.agent.outcomes import noise_of
    from htam.agent.state import faster_than

    # a CPU run of a 0.011 ms operator: the reference took about 15x its own time beside each
    # candidate; the second candidate is 7x faster than the first (measured so, paired)
    first, second = _paired(1.215, 0.164), _paired(0.177, 0.161)
    band = noise_of(second, first, ref_ms=0.011)
    assert band < 0.05 and faster_than(second, first, band)
    assert noise_of(first, None, ref_ms=0.011) < 0.05  # the first's own bar: its paired reference
    # compared in milliseconds (no paired reference on one side), the drift from alone counts
    unpaired = EvalResult(Status.OK, runtime_ms=0.177, timing=second.timing)
    assert noise_of(unpaired, first, ref_ms=0.011) > 10
