"""`htam optimize` end to end (a real process, the real evaluator on the CPU, a real loopback
endpoint) against an endpoint that misbehaves the ways real ones do, in order: a reply in prose,
HTTP 400 in the shape OpenAI-compatible servers send for a prompt too long, a reply cut at
max_tokens mid-function, HTTP 429 with Retry-After, code an earlier step already had, then honest
code. Only the kernel's doing is learned: no step is `rejected`, the bank records only `ok`, the
step lines say what happened and the evaluation cache holds verdicts only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from htam.llm import extract_code
from htam.llm.replay_server import ReplayServer, Scripted
from htam.memory import MemoryBank
from tests.agent.conftest import CHAIN, FIXTURES, choice, fenced, variant

CONTEXT_TOO_LONG = {
    "error": {
        "message": "This model's maximum context length is 8192 tokens. However, your messages "
        "resulted in 9120 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
CUT = "```python\nimport torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"


def _faults_then_honest(good: str) -> list[Scripted]:
    code = [
        Scripted(content="I would fuse the chain into one pass over memory and vectorize it."),
        Scripted(status=400, body=json.dumps(CONTEXT_TOO_LONG)),
        Scripted(content=CUT + "        return torch.sigm", finish_reason="length"),
        Scripted.error(429, "Rate limit reached for requests", retry_after=0.2),
        Scripted(content=fenced(good)),
        Scripted(content=fenced(good)),  # the code of the step before, again
        Scripted(content=fenced(variant(good, 1))),
    ]
    for reply in code:
        reply.when = "ModelNew"
    return [Scripted(content=choice("unknown"), when="strategy_id", repeat=True), *code]


def _in_order(good: str) -> list[Scripted]:
    """The same faults answering every request in turn, strategy choices included, then
    honest code."""
    replies = _faults_then_honest(good)[1:]
    for reply in replies:
        reply.when = None
    return replies + [Scripted(content=fenced(variant(good, n))) for n in range(2, 8)]


def _htam(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HTAM_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    return subprocess.run(
        [sys.executable, "-m", "htam.cli", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip


def _optimize(
    tmp_path: Path, replies: list[Scripted], steps: int = 3
) -> tuple[subprocess.CompletedProcess, list]:
    with ReplayServer(replies) as server:
        run = _htam(
            tmp_path, "optimize", CHAIN, "--target", "cpu", "--language", "triton",
            "--size", "small", "--steps", str(steps), "--base-url", server.base_url,
            "--model", server.model, "--memory", str(tmp_path / "bank.db"), "--out", "run",
        )  # fmt: skip
    return run, server.chat_requests


def _only_the_kernels_doing_is_kept(tmp_path: Path, run: subprocess.CompletedProcess) -> list:
    """The steps; asserts what holds whatever the order: no `rejected`, only `ok` learned and
    cached, and every step that is not the kernel's doing says why on its line."""
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    steps = [json.loads(p.read_text()) for p in sorted((tmp_path / "run/steps").glob("*.json"))]
    assert "rejected" not in [s["feedback"]["status"] for s in steps] and "rejected" not in out
    lines = [line for line in out.splitlines() if line.startswith("step ")]
    for step, line in zip(steps, lines, strict=True):
        assert (step["feedback"]["fault"] is None) == (" · " not in line), line
    with MemoryBank.open(tmp_path / "bank.db") as memory:
        learned = [r[0] for r in memory.connection.execute("SELECT status FROM steps")]
        evidence = [r[0] for r in memory.connection.execute("SELECT status FROM evidence")]
    assert learned and set(learned) == {"ok"} and set(evidence) <= {"ok"}
    kept = [json.loads(p.read_text()) for p in (tmp_path / "cache/evals").glob("*.json")]
    assert kept and all(k["status"] == "ok" and k.get("fault") is None for k in kept)
    # the reply cache keeps no reply without code: a rerun asks the endpoint again
    replies = [json.loads(p.read_text()) for p in (tmp_path / "cache/llm").glob("*/*.json")]
    writes = [r["response"]["content"] for r in replies if "strategy_id" not in json.dumps(r)]
    assert writes and all(extract_code(content) is not None for content in writes)
    return steps


@pytest.mark.slow
def test_the_same_faults_answering_every_request_in_turn_teach_nothing_either(tmp_path):
    run, _ = _optimize(tmp_path, _in_order((FIXTURES / "chain_triton.py").read_text()))
    _only_the_kernels_doing_is_kept(tmp_path, run)


@pytest.mark.slow
def test_a_misbehaving_endpoint_is_named_in_the_steps_and_never_learned(tmp_path):
    run, requests = _optimize(
        tmp_path, _faults_then_honest((FIXTURES / "chain_triton.py").read_text())
    )
    steps = _only_the_kernels_doing_is_kept(tmp_path, run)
    statuses = [s["feedback"]["status"] for s in steps]
    # the prose and the refusal: one step without code; the cut reply: its repair turn meets
    # the 429, waits and gets honest code; the repeat is asked again and answered anew
    assert statuses == ["no_code", "ok", "ok"], statuses
    assert steps[0]["feedback"]["fault"] == "endpoint" and not steps[0]["memory_updated"]
    assert "context length" in steps[0]["feedback"]["messages"][0]
    assert steps[2]["repeated_proposals"] == 1
    lines = [line for line in run.stdout.splitlines() if line.startswith("step ")]
    assert "no_code" in lines[0] and "HTTP 400" in lines[0], lines
    assert "repeated code already evaluated" in run.stdout
    writes = [r for r in requests if "strategy_id" not in r.text()]
    assert len(writes) == 7  # the 429 answered one of them: its retry got the honest code


def _code_in_other_shapes(good: str) -> list[Scripted]:
    """Honest code the ways models wrap it: the kernel and its module in two blocks, the module
    in a ```cpp fence, with no fence at all, and as a string of a JSON answer."""
    kernel, module = good.split("class ModelNew", 1)
    shapes = [
        f"The kernel:\n\n```python\n{variant(kernel, 1)}```\n\nThe module:\n\n"
        f"```python\nclass ModelNew{module}```\n",
        f"```cpp\n{variant(good, 2)}```\n",
        variant(good, 3),
        json.dumps({"code": variant(good, 4), "explanation": "one fused pass"}),
    ]
    code = [Scripted(content=shape, when="ModelNew") for shape in shapes]
    return [Scripted(content=choice("unknown"), when="strategy_id", repeat=True), *code]


@pytest.mark.slow
def test_code_in_two_blocks_another_fence_no_fence_or_json_is_judged_as_written(tmp_path):
    run, requests = _optimize(
        tmp_path, _code_in_other_shapes((FIXTURES / "chain_triton.py").read_text()), steps=4
    )
    steps = _only_the_kernels_doing_is_kept(tmp_path, run)
    assert [s["feedback"]["status"] for s in steps] == ["ok"] * 4
    assert len([r for r in requests if "strategy_id" not in r.text()]) == 4  # no repair turn


@pytest.mark.slow
def test_the_repair_prompts_carry_the_first_compiler_error_and_the_first_wrong_elements(tmp_path):
    good = (FIXTURES / "chain_fused_cpp.py").read_text()
    broken = good.replace("std::fmax(v, -1.f)", "std::fmaxx(v, -1.f)")
    wrong = good.replace("p[i] * a + b;", "p[i] * a;")
    assert broken != good and wrong != good
    code = [Scripted(content=fenced(c), when="ModelNew") for c in (broken, wrong)]
    code.append(Scripted(content="Prose: what the wrong answer's repair prompt held is asserted."))
    code[-1].when = "ModelNew"
    choose = Scripted(content=choice("unknown"), when="strategy_id", repeat=True)
    with ReplayServer([choose, *code]) as server:
        run = _htam(
            tmp_path, "optimize", CHAIN, "--target", "cpu", "--language", "cpp",
            "--size", "small", "--steps", "3", "--base-url", server.base_url,
            "--model", server.model, "--memory", str(tmp_path / "bank.db"), "--out", "run",
        )  # fmt: skip
        writes = [r.text() for r in server.chat_requests if "strategy_id" not in r.text()]
    assert run.returncode == 1, run.stdout + run.stderr  # no correct candidate
    statuses = [json.loads(p.read_text())["feedback"]["status"]
                for p in sorted((tmp_path / "run/steps").glob("*.json"))]  # fmt: skip
    assert statuses == ["compile_error", "incorrect", "no_code"], statuses
    after_build, after_wrong = writes[1], writes[2]
    excerpt = after_build.split("Error excerpt:")[1][:600]
    assert "the first, in main.cpp line" in excerpt and "fmaxx" in excerpt, excerpt
    assert "In file included from" not in excerpt
    excerpt = after_wrong.split("Error excerpt:")[1][:1500]
    assert "first differing: at [0, " in excerpt and "expected" in excerpt, excerpt
