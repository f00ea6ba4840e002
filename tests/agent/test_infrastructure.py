"""A failing LLM endpoint stops a run with its cause and never reaches the memory; a repeated
candidate is never evaluated twice. Real loopback servers and the real CLI process."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from htam.agent import InfrastructureError, OptimizeConfig, Optimizer
from htam.evaluate import CachedEvaluator, EvalConfig, Evaluator
from htam.llm import LLMClient, LLMProposer, resolve_config
from htam.llm.replay_server import ReplayServer, Scripted
from htam.memory import MemoryBank
from tests.agent.conftest import CHAIN, FIXTURES, choice, fenced
from tests.evaluate.conftest import task_for


def _closed_port() -> int:
    """A loopback port with nothing listening (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_cli_stops_at_once_on_an_unreachable_endpoint(tmp_path):
    bank = tmp_path / "bank.db"
    with MemoryBank.open(bank, create=True):
        pass
    before = bank.read_bytes()
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    args = ["optimize", "level1/1_ReLU", "--target", "cpu", "--base-url", url, "--model", "x"]
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "htam.cli", *args, "--memory", str(bank)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    elapsed = time.monotonic() - started
    assert run.returncode == 3 and elapsed < 30, (run.returncode, elapsed)
    last = (run.stdout + run.stderr).strip().splitlines()[-1]
    assert "cannot connect" in last and "Connection refused" in last and url in last
    assert bank.read_bytes() == before
    assert not (tmp_path / "runs").exists()  # no run directory for a run that never started


@pytest.mark.slow
def test_cli_stops_when_the_endpoint_refuses_after_the_preflight(tmp_path):
    # GET /models answers, every chat request is refused: the step is tried twice, then the run
    # stops with the endpoint's answer on the last line and the bank as it was.
    bank = tmp_path / "bank.db"
    with MemoryBank.open(bank, create=True):
        pass
    before = bank.read_bytes()
    refused = Scripted.error(401, "invalid api key")
    refused.repeat = True
    with ReplayServer([refused]) as server:
        args = ["optimize", "level1/1_ReLU", "--target", "cpu", "--language", "triton"]
        args += ["--base-url", server.base_url, "--model", server.model, "--size", "small"]
        run = subprocess.run(
            [sys.executable, "-m", "htam.cli", *args, "--memory", str(bank), "--out", "run"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        chats = len(server.chat_requests)
    assert run.returncode == 3, run.stderr
    last = (run.stdout + run.stderr).strip().splitlines()[-1]
    assert last.startswith("error: stopped: the LLM endpoint failed") and "HTTP 401" in last
    assert chats == 2  # one step, tried twice (a 401 is not retried by the client)
    assert bank.read_bytes() == before
    assert not (tmp_path / "run" / "steps").exists()


@pytest.fixture(scope="module")
def evaluator():
    # A generous timeout: the machine running the tests may be busy, and a timeout is no bar here.
    config = EvalConfig(timing_budget_ms=20.0, min_timed=3, max_timed=10, run_timeout_s=120.0)
    with Evaluator("cpu", config) as ev:
        yield ev


def _optimizer(server, evaluator, bank, records, steps, redecisions=3):
    config = resolve_config(
        None, server.base_url, server.model, backoff_s=0.01, backoff_max_s=0.02, max_retries=1
    )
    loop = OptimizeConfig(method="htam", steps=steps, seed=3, target="cpu", language="triton",
                          redecisions=redecisions)  # fmt: skip
    proposer = LLMProposer(LLMClient(config))
    return Optimizer(
        proposer,
        CachedEvaluator(evaluator),
        bank,
        loop,
        on_step=lambda step: records.append(step.to_dict()),
    )


def _code(name: str = "chain_triton.py", old: str = "", new: str = "") -> Scripted:
    return Scripted(
        content=fenced((FIXTURES / name).read_text().replace(old, new)), when="ModelNew"
    )


@pytest.mark.slow
def test_endpoint_failing_mid_run_stops_it_without_learning(tmp_path, evaluator, prices):
    # Step 0 is served; then the key is refused (401): the step is tried once more, the run
    # stops with the endpoint's answer, and only step 0 is in the memory and the run directory.
    replies = [Scripted(content=choice("x"), when="strategy_id", repeat=True), _code()]
    replies.append(Scripted.error(401, "invalid api key", retry_after=None))
    replies[-1].repeat = True
    with (
        ReplayServer(replies) as server,
        MemoryBank.open(tmp_path / "m.db", create=True) as bank,
    ):
        records: list[dict] = []
        optimizer = _optimizer(server, evaluator, bank, records, steps=4)
        with pytest.raises(InfrastructureError, match=r"HTTP 401.*invalid api key"):
            optimizer.run(task_for(CHAIN + ".py"), tmp_path / "run")
        assert [r["feedback"]["status"] for r in records] == ["ok"]
        assert bank.step_count() == 1
        assert sum(d.stats.tries for d in bank.directions()) == 1
    assert sorted(p.name for p in (tmp_path / "run" / "steps").glob("*.json")) == ["step_00.json"]


@pytest.mark.slow
def test_a_repeated_candidate_is_asked_again_and_never_evaluated_twice(tmp_path, evaluator, prices):
    other = _code(old="* alpha + beta", new="* alpha + beta + 0.0")
    replies = [
        Scripted(content=choice("x"), when="strategy_id", repeat=True),
        _code(),  # step 0
        _code(),  # step 1: the same code ...
        other,  # ... asked again: a different candidate, evaluated
        _code(),  # step 2: repeats step 0, then step 1's code, then step 0's again
        other,
        _code(),
    ]
    with (
        ReplayServer(replies) as server,
        MemoryBank.open(tmp_path / "m.db", create=True) as bank,
    ):
        records: list[dict] = []
        # no fresh decision after the repeats (see the next test): the step is spent on them
        summary = _optimizer(server, evaluator, bank, records, steps=3, redecisions=0).run(
            task_for(CHAIN + ".py"), tmp_path / "run"
        )
        asked_again = [r for r in server.chat_requests if "already evaluated at step" in r.text()]
        assert len(asked_again) == 3
        assert "already evaluated at step 0" in asked_again[0].text()
        assert [r["repeats_step"] for r in records] == [None, None, 0]
        assert records[2]["feedback"]["status"] == "repeat"  # not "rejected": no rule broken
        assert "same code as step 0: not evaluated again" in records[2]["feedback"]["messages"][0]
        assert records[2]["memory_updated"] is False
        assert bank.step_count() == 2  # the memory learns once per distinct candidate
        assert summary.duplicates == 4
        codes = [p.read_text() for p in sorted((tmp_path / "run" / "steps").glob("*.py"))]
        assert len(set(codes[:2])) == 2


@pytest.mark.slow
def test_a_strategy_that_only_repeats_is_left_out_of_a_fresh_decision(tmp_path, evaluator, prices):
    """Step 1 under the chosen strategy repeats step 0's code three times: the strategy has
    nothing new left, so the step decides again without it, and its new code is evaluated."""
    third = _code(old="* alpha + beta", new="* alpha + beta + 0.0")
    replies = [Scripted(content=choice("x"), when="strategy_id", repeat=True), _code()]
    replies += [_code(), _code(), _code(), third]  # step 1: three repeats, then new code
    with (
        ReplayServer(replies) as server,
        MemoryBank.open(tmp_path / "m.db", create=True) as bank,
    ):
        records: list[dict] = []
        summary = _optimizer(server, evaluator, bank, records, steps=2).run(
            task_for(CHAIN + ".py"), tmp_path / "run"
        )
        assert [r["repeats_step"] for r in records] == [None, None]
        [skipped] = records[1]["decision"]["skipped"]
        exhausted = skipped["strategy"]
        assert skipped["repeats_step"] == 0 and exhausted is not None
        assert records[1]["exhausted_strategies"] == [exhausted]
        assert records[1]["strategy"] != exhausted
        # the fresh choice was asked without it among the candidates
        choices = [r.text() for r in server.chat_requests if "strategy_id" in r.text()]
        candidates = [text.split("## Candidate strategies", 1)[1] for text in choices]
        assert any(exhausted in c for c in candidates) and exhausted not in candidates[-1]
        assert records[1]["feedback"]["status"] == "ok" and records[1]["memory_updated"]
        assert bank.step_count() == 2 and summary.duplicates == 3


@pytest.mark.slow
def test_a_failure_of_the_evaluator_stops_the_run_without_learning(tmp_path, evaluator):
    """The reference cannot run in the sandbox (newcomer: a Python environment it could not see):
    not the candidate's failure. The run stops at its first evaluation with the cause, records
    no step, and the bank stays as it was (it had learned -0.6 per direction)."""
    from htam.agent import EvaluationError
    from htam.evaluate import EvalResult
    from htam.offline import OfflineProposer
    from htam.status import Status

    cached = CachedEvaluator(evaluator)
    calls = []

    def failing(task, code, language):
        calls.append(code)
        return EvalResult(Status.RUNTIME_ERROR, infrastructure=True, messages=[
            "the evaluator could not judge this task: the reference failed: No module named x"])  # fmt: skip

    cached.evaluate = failing
    bank_path = tmp_path / "m.db"
    with MemoryBank.open(bank_path, create=True):
        pass
    before = bank_path.read_bytes()
    loop = OptimizeConfig(method="htam", steps=4, seed=0, target="cpu", language="cpp")
    with MemoryBank.open(bank_path) as bank:
        optimizer = Optimizer(OfflineProposer(), cached, bank, loop)
        with pytest.raises(EvaluationError, match=r"^the reference failed: No module named x$"):
            optimizer.run(task_for(CHAIN + ".py"), tmp_path / "run")
    assert len(calls) == 1
    assert bank_path.read_bytes() == before
    assert not list((tmp_path / "run" / "steps").glob("*.json"))
