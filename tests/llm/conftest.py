"""Fixtures for the LLM tests: a replay server, clients with recorded (not slept) backoff."""

from __future__ import annotations

import pytest

from htam.evaluate.result import EvalResult
from htam.llm import LLMClient, LLMConfig
from htam.llm.replay_server import ReplayServer
from htam.proposer import ProposalRequest
from htam.tasks.task import Task

from .helpers import CANDIDATES, REFERENCE, Sleeps


@pytest.fixture
def server():
    with ReplayServer() as srv:
        yield srv


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def make_client(server, sleeps, tmp_path):
    def make(**overrides) -> LLMClient:
        fields = {
            "base_url": server.base_url,
            "model": "deepseek-chat",
            "cache_dir": tmp_path / "llm-cache",
            "timeout_s": 5.0,
            "max_retries": 3,
            "backoff_s": 1.0,
            "backoff_max_s": 8.0,
        }
        return LLMClient(LLMConfig(**{**fields, **overrides}), sleep=sleeps)

    return make


@pytest.fixture
def task() -> Task:
    return Task(id="builtin/level1/relu2", name="relu2", source=REFERENCE, level=1)


@pytest.fixture
def make_request(task):
    def make(feedback: EvalResult | None = None, **fields) -> ProposalRequest:
        values = {
            "task": task,
            "target": "cpu",
            "language": "triton",
            "base_code": None,
            "feedback": feedback,
            "direction": "fusion",
            "strategy": CANDIDATES[0],
            "guidance": "Fusion: keep intermediates in registers. Evidence: +1.4x on relu chains.",
            "step": 1,
            "seed": 0,
        }
        return ProposalRequest(**{**values, **fields})

    return make
