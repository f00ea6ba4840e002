"""The LLM proposer: chooses local strategies and writes implementations through an LLMClient.

A fault of the model never aborts a run: strategy choice falls back to the first candidate (the
memory orders candidates by evidence). A reply without code, or cut at ``max_tokens``, is asked
for once more (one repair turn); a proposal still without code, or one whose request the
endpoint refused (HTTP 400, say a prompt too long), carries the reason in ``Proposal.error`` and
``Fault.ENDPOINT``: the step is named ``no_code`` and never learned. A reply without code, and a
strategy choice that is not the JSON asked for, leave the reply cache (a rerun asks again). A
failure of the endpoint itself (``LLMError.infrastructure``) is flagged on the Choice or
Proposal instead, so the loop can stop without learning from it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError

from htam.llm.client import ChatReply, LLMClient
from htam.llm.errors import LLMError, one_line
from htam.llm.parse import extract_code, extract_json
from htam.llm.prompt_templates import Prompts, StateView, error_excerpt, format_messages
from htam.proposer import Choice, Proposal, ProposalRequest, Strategy, Usage
from htam.status import Fault
from htam.tasks.task import Task

NO_CODE = "the reply has no Python code block defining class ModelNew"
TRUNCATED = "the reply was cut at the length limit (max_tokens) before its code was complete"
FALLBACK = "fallback to the first candidate"


class StrategyAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    strategy_id: str
    rationale: str = ""


class LLMProposer:
    def __init__(self, client: LLMClient, *, prompts: Prompts | None = None, name: str = "llm"):
        self.client = client
        self.prompts = prompts or Prompts()
        self.name = name
        # Stateless between calls: the code a repair or a duplicate prompt shows comes with the
        # request (the loop's own run), so one proposer serves many runs at once.

    def can_propose(self, task: Task) -> bool:
        return True  # a model can always try

    def check(self) -> str:
        """Preflight: raises an LLMError when the endpoint cannot serve a run (see
        ``LLMClient.check``)."""
        return self.client.check()

    # -- strategy choice -------------------------------------------------------------------

    def choose_strategy(self, request: ProposalRequest, candidates: list[Strategy]) -> Choice:
        if not candidates:
            return Choice(None, rationale=f"no candidate strategies under {request.direction!r}")
        if len(candidates) == 1:
            return Choice(candidates[0], rationale="the only candidate (no LLM call)")
        messages = [
            self._system(request),
            {"role": "user", "content": self._render_choose(request, candidates)},
        ]
        usage, responses = Usage(), list[str]()
        error = ""
        for attempt in range(2):  # the answer, then one repair showing the validation error
            try:
                reply = self._chat(messages, request, f"choose{attempt}")
            except LLMError as e:
                if e.infrastructure:
                    # The endpoint failed: no fallback pick, the step will not run.
                    return Choice(None, f"LLM error: {e}", usage, infrastructure=True)
                error = f"LLM error: {e}"
                break
            usage.add(reply.usage)
            responses.append(reply.content)
            chosen, rationale, error = _validate(reply.content, candidates)
            if chosen is not None:
                return Choice(chosen, rationale, usage, format_messages(messages), _join(responses))
            self.client.forget(reply)
            messages += [
                {"role": "assistant", "content": reply.content},
                {
                    "role": "user",
                    "content": self.prompts.render(
                        "choose_repair.j2", error=error, ids=[c.id for c in candidates]
                    ),
                },
            ]
        return Choice(
            candidates[0],
            rationale=f"{FALLBACK} ({one_line(error, 300)})",
            usage=usage,
            prompt=format_messages(messages),
            response=_join(responses),
        )

    def _render_choose(self, request: ProposalRequest, candidates: list[Strategy]) -> str:
        return self.prompts.render(
            "choose_strategy.j2",
            task=request.task,
            language=request.language,
            target=request.target,
            state_summary=self._state(request),
            base_code=request.base_code,
            direction=request.direction,
            guidance=request.guidance,
            candidates=candidates,
        )

    # -- implementation --------------------------------------------------------------------

    def propose(self, request: ProposalRequest) -> Proposal:
        messages = [
            self._system(request),
            {"role": "user", "content": self._render_write(request)},
        ]
        if request.repeats_step is not None:
            repeated = request.repeated_code
            if repeated is not None:
                messages += [
                    {"role": "assistant", "content": f"```python\n{repeated}\n```"},
                    {
                        "role": "user",
                        "content": self.prompts.render("duplicate.j2", step=request.repeats_step),
                    },
                ]
        usage, responses = Usage(), list[str]()
        for attempt in range(2):  # the reply, then one repair turn when it held no code
            prompt = format_messages(messages)
            try:
                reply = self._chat(messages, request, "write" if attempt == 0 else "write_again")
            except LLMError as e:
                return Proposal(
                    code=None, error=str(e), prompt=prompt, response=_join(responses),
                    usage=usage, infrastructure=e.infrastructure, fault=Fault.ENDPOINT,
                )  # fmt: skip
            usage.add(reply.usage)
            responses.append(reply.content)
            truncated = reply.finish_reason == "length"
            # a reply cut short is never evaluated: its code, if any, is a fragment
            code = None if truncated else extract_code(reply.content)
            if code is not None:
                break
            self.client.forget(reply)
            messages += [
                {"role": "assistant", "content": reply.content},
                {"role": "user", "content": self.prompts.render("no_code.j2", truncated=truncated)},
            ]
        return Proposal(
            code=code,
            error=None if code else (TRUNCATED if truncated else NO_CODE),
            prompt=prompt,
            response=_join(responses),
            reasoning=reply.reasoning,
            usage=usage,
            fault=None if code else Fault.ENDPOINT,
        )

    def _render_write(self, request: ProposalRequest) -> str:
        common = {
            "task": request.task,
            "language": request.language,
            "target": request.target,
            "state_summary": self._state(request),
            "base_code": request.base_code,
            "strategy": request.strategy,
            "guidance": request.guidance,
        }
        feedback = request.feedback
        if feedback is None or feedback.correct:
            return self.prompts.render("implement.j2", direction=request.direction, **common)
        return self.prompts.render(
            "repair.j2",
            status=str(feedback.status),
            excerpt=error_excerpt(feedback),
            failing_code=request.last_code,
            **common,
        )

    # -- shared ----------------------------------------------------------------------------

    def _system(self, request: ProposalRequest) -> dict:
        text = self.prompts.render(
            "system.j2",
            language=request.language,
            target=request.target,
            backward=request.task.kind == "backward",
        )
        return {"role": "system", "content": text}

    def _state(self, request: ProposalRequest) -> str:
        if request.state_summary:
            return request.state_summary
        return self.prompts.state_summary(StateView(request.task.id, feedback=request.feedback))

    def _chat(self, messages: list[dict], request: ProposalRequest, purpose: str) -> ChatReply:
        # The salt keeps equal prompts at different steps (or purposes) from sharing one cached
        # answer, while a rerun of the same step is still served from the cache.
        seed = None if self.client.config.seed is None else request.seed
        salt = f"{purpose}|{request.task.id}|step={request.step}"
        if request.attempt:
            salt += f"|attempt={request.attempt}"
        return self.client.chat(messages, seed=seed, cache_salt=salt)


def _validate(content: str, candidates: list[Strategy]) -> tuple[Strategy | None, str, str]:
    """(chosen, rationale, "") for a usable answer, else (None, "", why not)."""
    try:
        answer = StrategyAnswer.model_validate(extract_json(content))
    except ValueError as e:  # ValidationError is a ValueError; so is "no JSON"
        return None, "", _short_error(e)
    chosen = _match(answer.strategy_id, candidates)
    if chosen is None:
        ids = ", ".join(c.id for c in candidates)
        return None, "", f"unknown strategy_id {answer.strategy_id!r}; it must be one of: {ids}"
    return chosen, answer.rationale, ""


def _match(strategy_id: str, candidates: list[Strategy]) -> Strategy | None:
    wanted = strategy_id.strip().strip("`")
    for c in candidates:
        if c.id == wanted:
            return c
    # Models often drop the "<direction>." prefix; accept the local name when it is unique.
    by_name = [c for c in candidates if c.id.split(".", 1)[-1] == wanted]
    return by_name[0] if len(by_name) == 1 else None


def _short_error(error: ValueError) -> str:
    if isinstance(error, ValidationError):
        problems = "; ".join(
            f"{'.'.join(map(str, d['loc'])) or 'answer'}: {d['msg']}" for d in error.errors()
        )
        return f"the JSON answer is invalid ({problems})"
    return str(error)


def _join(responses: list[str]) -> str:
    return "\n\n--- repair answer ---\n\n".join(responses)
