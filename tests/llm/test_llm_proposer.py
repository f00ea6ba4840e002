"""The LLM proposer through the real client and a replay server."""

from __future__ import annotations

import pytest

from htam.evaluate.result import EvalResult
from htam.llm import LLMProposer
from htam.llm.llm_proposer import FALLBACK, NO_CODE
from htam.llm.replay_server import Scripted
from htam.proposer import Proposer
from htam.status import Fault, Status

from .helpers import CANDIDATES, GOOD_CODE, failure


def fenced(code: str) -> str:
    return f"Here is the faster version.\n\n```python\n{code}```\n"


@pytest.fixture
def proposer(make_client) -> LLMProposer:
    return LLMProposer(make_client())


def test_name_for_run_records(proposer, make_client):
    typed: Proposer = proposer  # LLMProposer satisfies the loop's Proposer protocol
    assert typed.name == "llm"
    assert LLMProposer(make_client(), name="deepseek-chat").name == "deepseek-chat"


def test_good_reply_gives_code_and_records_everything(server, proposer, make_request):
    server.add(
        Scripted(
            fenced(GOOD_CODE),
            reasoning="fuse relu and scale",
            prompt_tokens=900,
            completion_tokens=300,
        )
    )
    proposal = proposer.propose(make_request())
    assert proposal.code == GOOD_CODE and proposal.error is None
    assert proposal.reasoning == "fuse relu and scale"
    assert (proposal.usage.prompt_tokens, proposal.usage.completion_tokens) == (900, 300)
    assert proposal.usage.cost_usd == pytest.approx((900 * 0.28 + 300 * 0.42) / 1e6, rel=1e-12)
    assert proposal.response.startswith("Here is the faster version.")
    sent = server.chat_requests[0].json["messages"]
    assert [m["role"] for m in sent] == ["system", "user"]
    assert "@triton.jit" in sent[0]["content"] and "load_inline" not in sent[0]["content"]
    user = sent[1]["content"]
    assert "builtin/level1/relu2" in user and "return torch.relu(x) * 2.0" in user
    assert "Fuse the elementwise chain (`fusion.elementwise_chain`)" in user
    assert "Evidence: +1.4x on relu chains." in user
    assert "None yet: write the first implementation" in user
    assert proposal.prompt.startswith("[system]\n") and "[user]\n" in proposal.prompt


def test_reply_without_model_new_is_asked_once_more_then_gives_no_code(
    server, proposer, make_request
):
    server.add(*[Scripted("I would fuse the two operations, but I cannot write the code.")] * 2)
    proposal = proposer.propose(make_request())
    assert proposal.code is None and proposal.error == NO_CODE
    assert proposal.fault is Fault.ENDPOINT and proposal.usage.calls == 2
    assert "has no Python code block" in server.chat_requests[1].text()


def test_a_reply_without_code_is_not_served_again_from_the_cache(server, proposer, make_request):
    # the endpoint's fault on a first run; a rerun of the step asks again and gets code
    server.add(Scripted("I would fuse the two operations."), Scripted("Still only prose."))
    assert proposer.propose(make_request(step=3)).code is None
    server.add(Scripted(fenced(GOOD_CODE)))
    again = proposer.propose(make_request(step=3))
    assert again.code == GOOD_CODE and again.usage.cached_calls == 0
    assert len(server.chat_requests) == 3


def test_a_choice_that_is_not_the_json_asked_for_is_not_cached(server, proposer, make_request):
    server.add(Scripted('{"strategy_id": "memory_access.vec'), Scripted("prose"))
    assert proposer.choose_strategy(make_request(), CANDIDATES).rationale.startswith(FALLBACK)
    server.add(Scripted('{"strategy_id": "parallel.grid_stride"}'))
    assert proposer.choose_strategy(make_request(), CANDIDATES).strategy is CANDIDATES[2]
    # a valid answer is kept: a third run is served it
    assert proposer.choose_strategy(make_request(), CANDIDATES).usage.cached_calls == 1


def test_a_reply_cut_at_max_tokens_is_never_evaluated_and_asked_again(
    server, proposer, make_request
):
    server.add(
        Scripted(fenced(GOOD_CODE)[:-20], finish_reason="length"), Scripted(fenced(GOOD_CODE))
    )
    proposal = proposer.propose(make_request())
    assert proposal.code is not None and proposal.fault is None
    assert "cut off at the length limit" in server.chat_requests[1].text()


def test_a_refused_request_is_the_endpoints_fault(server, proposer, make_request):
    server.add(Scripted.error(400, "context length exceeded"))
    proposal = proposer.propose(make_request())
    assert proposal.code is None and "HTTP 400" in proposal.error
    assert proposal.fault is Fault.ENDPOINT and not proposal.infrastructure


def test_llm_error_becomes_a_proposal_error(server, make_client, make_request):
    server.add(*[Scripted.error(503, "overloaded")] * 2)
    proposal = LLMProposer(make_client(max_retries=1)).propose(make_request())
    assert proposal.code is None and "failed after 2 attempt(s)" in proposal.error
    assert server.base_url in proposal.error and proposal.prompt


def test_base_code_is_shown_when_there_is_one(server, proposer, make_request):
    server.add(Scripted(fenced(GOOD_CODE)))
    ok = EvalResult(status=Status.OK, runtime_ms=0.5, ref_runtime_ms=1.0)
    proposer.propose(make_request(feedback=ok, base_code="# BEST SO FAR\n" + GOOD_CODE))
    user = server.chat_requests[0].json["messages"][1]["content"]
    assert "Start from this correct implementation" in user and "# BEST SO FAR" in user
    assert "speedup 2.00x" in user  # the fallback state summary renders the feedback


def test_failure_feedback_uses_the_repair_template_with_the_failing_code(
    server, proposer, make_request
):
    broken = GOOD_CODE.replace("tl.maximum", "tl.maximumm")
    server.add(Scripted(fenced(broken)), Scripted(fenced(GOOD_CODE)))
    first = proposer.propose(make_request(step=1))
    assert first.code == broken
    feedback = failure(Status.COMPILE_ERROR, log="AttributeError: module has no 'maximumm'")
    second = proposer.propose(make_request(feedback=feedback, step=2, last_code=first.code))
    assert second.code == GOOD_CODE
    user = server.chat_requests[1].json["messages"][1]["content"]
    assert user.startswith("# Task builtin/level1/relu2: fix the failing implementation")
    assert "status `compile_error`" in user and "no 'maximumm'" in user
    assert "tl.maximumm(x, 0.0)" in user  # the failing code itself


def test_repair_without_a_remembered_attempt_says_so(server, proposer, make_request):
    server.add(Scripted(fenced(GOOD_CODE)))
    proposer.propose(make_request(feedback=failure(Status.INCORRECT), step=4))
    user = server.chat_requests[0].json["messages"][1]["content"]
    assert "(not available: write a correct implementation from the reference)" in user


def test_one_proposer_keeps_nothing_between_runs(server, proposer, make_request):
    # Two bench units on one task and seed: the second unit's first repair must not show the
    # first unit's code (the loop hands each request its own run's last code).
    broken = GOOD_CODE.replace("tl.maximum", "tl.maximumm")
    server.add(Scripted(fenced(broken)), Scripted(fenced(GOOD_CODE)), Scripted(fenced(GOOD_CODE)))
    assert proposer.propose(make_request(step=1)).code == broken  # unit A
    proposer.propose(make_request(feedback=failure(Status.INCORRECT), step=4))  # unit B
    leaked = server.chat_requests[1].json["messages"][1]["content"]
    assert "tl.maximumm" not in leaked
    assert "(not available: write a correct implementation from the reference)" in leaked
    # A duplicate is shown the code it repeated, carried by the request.
    proposer.propose(make_request(step=5, repeats_step=2, repeated_code="class ModelNew: ..."))
    messages = server.chat_requests[2].json["messages"]
    assert len(messages) == 4 and messages[2]["content"] == "```python\nclass ModelNew: ...\n```"


def test_given_state_summary_is_used_verbatim(server, proposer, make_request):
    server.add(Scripted(fenced(GOOD_CODE)))
    proposer.propose(make_request(state_summary="STATE-SUMMARY-FROM-THE-LOOP"))
    assert "STATE-SUMMARY-FROM-THE-LOOP" in server.chat_requests[0].json["messages"][1]["content"]


def test_seed_is_sent_and_steps_do_not_share_cache_entries(server, proposer, make_request):
    server.add(Scripted(fenced(GOOD_CODE), repeat=True))
    proposer.propose(make_request(step=1, seed=5))
    proposer.propose(make_request(step=2, seed=5))
    proposer.propose(make_request(step=1, seed=5))  # a rerun of step 1: cached
    assert [r.json["seed"] for r in server.chat_requests] == [5, 5]


def test_choose_strategy_valid_answer(server, proposer, make_request):
    server.add(Scripted('{"strategy_id": "memory_access.vector_loads", "rationale": "bandwidth"}'))
    choice = proposer.choose_strategy(make_request(), CANDIDATES)
    assert choice.strategy is CANDIDATES[1] and choice.rationale == "bandwidth"
    assert choice.usage.calls == 1
    user = server.chat_requests[0].json["messages"][1]["content"]
    assert all(f"`{c.id}`: {c.title}" in user for c in CANDIDATES)
    assert '"strategy_id"' in user


def test_choose_strategy_accepts_the_local_name(server, proposer, make_request):
    server.add(Scripted('```json\n{"strategy_id": "grid_stride"}\n```'))
    assert proposer.choose_strategy(make_request(), CANDIDATES).strategy is CANDIDATES[2]


def test_malformed_json_gets_one_repair_then_succeeds(server, proposer, make_request):
    server.add(
        Scripted("I think vector loads are best."),
        Scripted('{"strategy_id": "memory_access.vector_loads", "rationale": "fixed"}'),
    )
    choice = proposer.choose_strategy(make_request(), CANDIDATES)
    assert choice.strategy is CANDIDATES[1] and choice.rationale == "fixed"
    assert choice.usage.calls == 2
    repair = server.chat_requests[1].json["messages"]
    assert [m["role"] for m in repair] == ["system", "user", "assistant", "user"]
    assert "no valid JSON" in repair[3]["content"]
    assert "parallel.grid_stride" in repair[3]["content"]


def test_invalid_twice_falls_back_to_the_first_candidate(server, proposer, make_request):
    server.add(Scripted("{not json"), Scripted('{"strategy_id": "fusion.unknown"}'))
    choice = proposer.choose_strategy(make_request(), CANDIDATES)
    assert choice.strategy is CANDIDATES[0]
    assert (
        choice.rationale.startswith(FALLBACK)
        and "unknown strategy_id 'fusion.unknown'" in choice.rationale
    )
    assert choice.usage.calls == 2 and len(server.chat_requests) == 2
    assert "--- repair answer ---" in choice.response


def test_schema_error_is_shown_in_the_repair(server, proposer, make_request):
    server.add(Scripted('{"rationale": "forgot the id"}'), Scripted('{"strategy_id": 7}'))
    choice = proposer.choose_strategy(make_request(), CANDIDATES)
    assert "strategy_id: Field required" in server.chat_requests[1].json["messages"][3]["content"]
    assert choice.strategy is CANDIDATES[0] and "Input should be a valid string" in choice.rationale


def test_llm_error_in_choice_falls_back(server, make_client, make_request):
    server.add(Scripted.error(400, "prompt too long"))  # about this request: a fallback pick
    choice = LLMProposer(make_client(max_retries=1)).choose_strategy(make_request(), CANDIDATES)
    assert choice.strategy is CANDIDATES[0] and "LLM error" in choice.rationale
    assert not choice.infrastructure


def test_endpoint_failure_in_choice_is_flagged_not_picked(server, make_client, make_request):
    server.add(Scripted.error(500), Scripted.error(500))  # the endpoint is down: no pick
    choice = LLMProposer(make_client(max_retries=1)).choose_strategy(make_request(), CANDIDATES)
    assert choice.strategy is None and choice.infrastructure
    assert "failed after 2 attempt(s): HTTP 500" in choice.rationale


def test_endpoint_failure_in_proposal_is_flagged(server, make_client, make_request):
    server.add(Scripted.error(401, "invalid key"))
    proposal = LLMProposer(make_client()).propose(make_request())
    assert proposal.code is None and proposal.infrastructure and "HTTP 401" in proposal.error


def test_trivial_choices_make_no_call(server, proposer, make_request):
    assert proposer.choose_strategy(make_request(), []).strategy is None
    only = proposer.choose_strategy(make_request(), CANDIDATES[:1])
    assert only.strategy is CANDIDATES[0] and only.usage.calls == 0
    assert server.requests == []
