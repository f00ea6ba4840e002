import json
from pathlib import Path

import pytest

from htam.llm.replay_server import Scripted

FIXTURES = Path(__file__).parent / "fixtures"
CHAIN = "level2/5_Elementwise_Chain"


def fenced(code: str) -> str:
    return f"Here is the kernel.\n\n```python\n{code}\n```\n"


def choice(strategy_id: str) -> str:
    return json.dumps({"strategy_id": strategy_id, "rationale": "scripted"})


def variant(code: str, n: int) -> str:
    """The same kernel as different code (a comment in the kernel body)."""
    return code.replace("@triton.jit\n", f"@triton.jit  # variant {n}\n", 1)


def scripted_replies() -> list[Scripted]:
    """Six steps of replies with faults: strategy choices are matched by the JSON request in the
    prompt, code replies come in order."""
    good = fenced((FIXTURES / "chain_triton.py").read_text())
    broken = fenced(
        (FIXTURES / "chain_triton.py").read_text().replace("tl.sigmoid(v)", "tl.sigmoid(v")
    )
    wrong = fenced((FIXTURES / "chain_triton.py").read_text().replace("* alpha + beta", "* alpha"))
    code = [
        Scripted(content=good, prompt_tokens=1000, completion_tokens=400),
        Scripted(
            content="I would rather explain than write code.",
            prompt_tokens=900,
            completion_tokens=50,
        ),
        Scripted.error(500, "upstream failure"),
        Scripted(content=broken, prompt_tokens=1000, completion_tokens=400),
        Scripted(content=wrong, prompt_tokens=1000, completion_tokens=400),
        # correct variants: a run never evaluates the same code twice
        Scripted(content=variant(good, 1), prompt_tokens=1000, completion_tokens=400),
        Scripted(content=variant(good, 2), prompt_tokens=1000, completion_tokens=400),
    ]
    for reply in code:
        reply.when = "ModelNew"
    # Strategy choices (the only prompts asking for "strategy_id"): a 429, then prose instead of
    # JSON (one repair turn), then an unknown id every time: the documented fallback picks the
    # first candidate, which keeps the run deterministic.
    choose = [
        Scripted.error(429, "slow down", retry_after=0),
        Scripted(content="I think tiling would help."),
        Scripted(content=choice("not.a.strategy"), repeat=True),
    ]
    for reply in choose:
        reply.when = "strategy_id"
    return choose + code


@pytest.fixture
def prices(tmp_path, monkeypatch):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"replay-model": {"input": 1.0, "output": 2.0}}))
    monkeypatch.setenv("HTAM_PRICES", str(path))
    return path
