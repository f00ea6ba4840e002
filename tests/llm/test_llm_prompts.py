"""The prompt templates: every template renders, missing variables fail, overrides work."""

from __future__ import annotations

import jinja2
import pytest

from htam.evaluate.result import EvalResult
from htam.llm import PathStep, Prompts, StateView
from htam.llm.prompt_templates import error_excerpt
from htam.status import Status

from .helpers import CANDIDATES


@pytest.fixture
def prompts() -> Prompts:
    return Prompts()


@pytest.mark.parametrize(
    ("language", "present", "absent"),
    [
        ("cuda", "cuda_sources=", "@triton.jit"),
        ("triton", "@triton.jit", "load_inline"),
        ("cpp", "-fopenmp", "cuda_sources"),
    ],
)
def test_system_prompt_rules_per_language(prompts, language, present, absent):
    text = prompts.render("system.j2", language=language, target="cuda")
    assert present in text and absent not in text
    assert "class ModelNew(nn.Module)" in text and "No `try`/`except`" in text


def test_system_prompt_states_the_backward_contract_for_a_backward_task(prompts):
    forward = prompts.render("system.j2", language="triton", target="cuda", backward=False)
    backward = prompts.render("system.j2", language="triton", target="cuda", backward=True)
    assert "judged on its gradients" in backward and "torch.autograd.Function" in backward
    assert "judged on its gradients" not in forward


def test_state_summary_shows_task_feedback_and_path(prompts):
    feedback = EvalResult(
        status=Status.OK,
        runtime_ms=0.25,
        ref_runtime_ms=1.0,
        ref_compile_runtime_ms=0.5,
        sol_fraction=0.42,
        bound="memory",
    )
    state = StateView(
        task_id="builtin/level1/softmax",
        signature="softmax(x: float32[128, 4096], dim=1)",
        shapes=["x: float32[128, 4096]"],
        flops=2.6e6,
        bytes=4.2e6,
        bound="memory",
        roofline_ms=0.0012,
        feedback=feedback,
        path=[
            PathStep("memory_access", "memory_access.vector_loads", "ok 1.30x"),
            PathStep("fusion", None, "compile_error"),
        ],
    )
    text = prompts.state_summary(state)
    for expected in [
        "Task: builtin/level1/softmax",
        "Operator: softmax(x: float32[128, 4096], dim=1)",
        "Work: 2.60 MFLOP, 4.20 MB moved; memory-bound; roofline lower bound 1.2 us",
        "Feedback on the current code: ok (correct)",
        "runtime 250.0 us vs reference 1.000 ms: speedup 4.00x; vs torch.compile 2.00x",
        "42.0% of speed of light (memory-bound)",
        "1. memory_access / memory_access.vector_loads -> ok 1.30x",
        "2. fusion -> compile_error",
    ]:
        assert expected in text, expected


def test_state_summary_of_a_failure_has_the_error_tail(prompts):
    log = "x" * 5000 + "\nerror: identifier 'blockDimx' is undefined"
    failed = EvalResult(status=Status.COMPILE_ERROR, messages=["nvcc failed"], log=log)
    text = prompts.state_summary(StateView("t", feedback=failed))
    assert "Feedback on the current code: compile_error" in text
    assert "identifier 'blockDimx' is undefined" in text and len(text) < 2300
    excerpt = error_excerpt(failed)  # the messages whole, then the log's tail
    assert excerpt.startswith("nvcc failed\n...\n") and len(excerpt) <= 2005
    first = EvalResult(status=Status.COMPILE_ERROR, messages=["main.cpp:14: error: x"], log=log)
    assert error_excerpt(first).startswith("main.cpp:14: error: x")
    assert error_excerpt(EvalResult(status=Status.OK)) == ""


def test_templates_fail_on_missing_variables(prompts):
    with pytest.raises(jinja2.UndefinedError):
        prompts.render("choose_strategy.j2", candidates=CANDIDATES)


def test_user_prompt_directory_overrides_a_template(tmp_path, monkeypatch):
    (tmp_path / "choose_repair.j2").write_text("CUSTOM {{ error }} {{ ids | join('|') }}")
    monkeypatch.setenv("HTAM_PROMPTS_DIR", str(tmp_path))
    prompts = Prompts()
    assert prompts.render("choose_repair.j2", error="bad", ids=["a", "b"]) == "CUSTOM bad a|b\n"
    assert "ModelNew" in prompts.render("system.j2", language="cuda", target="cuda")
