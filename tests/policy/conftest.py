from __future__ import annotations

import pytest

from htam.memory import MemoryBank, StepRecord
from htam.status import Status


def synthetic_seed(n: int = 4) -> dict:
    """``n`` bare directions with two strategies each and no priors."""
    return {
        "format": "htam-seed",
        "version": 1,
        "globals": [{"id": f"d{i}", "title": f"D{i}", "intent": "test"} for i in range(n)],
        "locals": [
            {
                "id": f"d{i}.{name}",
                "direction": f"d{i}",
                "title": name,
                "description": "",
                "pattern": "",
                "op_families": [family],
            }
            for i in range(n)
            for name, family in (("a", "elementwise"), ("b", "gemm" if i else "softmax"))
        ],  # fmt: skip
        "edges": [],
    }


def record(step: int, prefix: list[str], direction: str, r: float, run: str = "run", **kw):
    status = kw.pop("status", Status.OK if r > -0.5 else Status.INCORRECT)
    return StepRecord(run, "task", "sig", step, prefix, direction, kw.pop("local", None), status,
                      None, None, r, **kw)  # fmt: skip


@pytest.fixture
def toy_bank():
    with MemoryBank.in_memory(synthetic_seed()) as bank:
        yield bank


@pytest.fixture
def seed_bank():
    with MemoryBank.in_memory() as bank:
        yield bank


@pytest.fixture(scope="session")
def make_record():
    return record


@pytest.fixture(scope="session")
def toy_seed():
    return synthetic_seed()
