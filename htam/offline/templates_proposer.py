"""The offline proposer: local strategies realized as transformations of template parameters."""

from __future__ import annotations

import random

from htam.offline.backends import BACKENDS, unknown_language
from htam.offline.ir.model import Match
from htam.offline.params import Params
from htam.offline.pipeline import (
    NoMatch,
    StrategyError,
    analyze,
    applicable,
    apply_strategy,
    generate,
    parameters,
)
from htam.offline.strategies import STRATEGIES
from htam.proposer import Choice, Proposal, ProposalRequest, Strategy
from htam.tasks.task import Task
from htam.vocab import LANGUAGES, Target

NO_STRATEGY = "no applicable strategy"


def supported_strategies(task: Task, language: str | None = None) -> list[str]:
    """Strategy ids with a template for ``task`` (in ``language``, none in a language without
    a backend; in any when None)."""
    try:
        m = analyze(task)
    except NoMatch:
        return []
    langs = [language] if language else list(BACKENDS)
    ids = {s for lang in langs if lang in BACKENDS for s in applicable(m, lang)}
    return [s for s in STRATEGIES if s in ids]


class OfflineProposer:
    """Same interface as the LLM proposer; writes code from templates, never calls a model."""

    name = "offline"

    def __init__(self, target: str = "cpu", language: str | None = None):
        targets = sorted(str(t) for t in Target)
        if target not in targets:
            raise ValueError(f"target must be {' or '.join(targets)}, not {target!r}")
        # The target's first language that has a backend (cuda's own, CUDA C++, has none).
        language = language or next(lang for lang in LANGUAGES[target] if lang in BACKENDS)
        if language not in BACKENDS:
            raise ValueError(
                unknown_language(language)
                + ("; use language 'triton' on cuda" if target == "cuda" else "")
            )
        if language not in LANGUAGES[target]:
            raise ValueError("the C++ templates are CPU code; use language='triton' for cuda")
        self.target = target
        self.language = str(language)

    def can_propose(self, task: Task) -> bool:
        """Whether any template matches ``task`` (else every proposal says why not)."""
        try:
            analyze(task)
        except NoMatch:
            return False
        return True

    def _language(self, request: ProposalRequest) -> str:
        lang = request.language or self.language
        if lang not in BACKENDS:
            raise StrategyError(unknown_language(lang))
        return lang

    # -- Proposer protocol ----------------------------------------------------------------
    def choose_strategy(self, request: ProposalRequest, candidates: list[Strategy]) -> Choice:
        try:
            m = analyze(request.task)
            lang = self._language(request)
        except (NoMatch, StrategyError) as err:
            return Choice(None, rationale=f"{NO_STRATEGY}: {err}")
        params, applied = parameters(m, lang, request.base_code)
        codes = {c.id: self._code(c.id, params, applied, m, lang) for c in candidates}
        usable = [c for c in candidates if codes[c.id] is not None]
        if not usable:
            ids = ", ".join(c.id for c in candidates) or "none"
            return Choice(
                None,
                rationale=f"{NO_STRATEGY}: no candidate ({ids}) has a template "
                f"for {m.describe()} in {lang} that changes the current code",
            )
        # Preference: not applied to the base yet, then code this run has not evaluated yet.
        fresh = [c for c in usable if c.id not in applied]
        untried = [c for c in usable if codes[c.id] not in request.tried]
        tiers = (
            ([c for c in fresh if c in untried], "not applied yet"),
            (untried, "every usable candidate was applied before; this code is new to the run"),
            (fresh, "not applied yet, though this run evaluated this code"),
            (usable, "every usable candidate was applied and evaluated before"),
        )
        pool, why = next((pool, why) for pool, why in tiers if pool)
        rng = random.Random(f"{request.seed}:{request.step}:{request.task.id}")
        pick = pool[rng.randrange(len(pool))]
        return Choice(
            pick,
            rationale=f"{pick.id} has a template for {m.describe()} ({why}; "
            f"{len(usable)} of {len(candidates)} candidates usable)",
        )

    def propose(self, request: ProposalRequest) -> Proposal:
        try:
            m = analyze(request.task)
            lang = self._language(request)
        except (NoMatch, StrategyError) as err:
            return _unsupported(str(err))
        params, applied = parameters(m, lang, request.base_code)
        strategy, own = request.strategy, None
        if strategy is None and request.base_code is not None:
            strategy = own = self._own_choice(request, m, lang)
            if strategy is None:
                return _unsupported(
                    f"every template strategy for {m.describe()} is already applied"
                )
        if strategy is not None:
            try:
                params = apply_strategy(strategy.id, params, m, lang)
            except StrategyError as err:
                return _unsupported(str(err))
            applied = [*applied, strategy.id]
        code = generate(m, lang, params, applied)
        step = strategy.id if strategy else "baseline"
        return Proposal(
            code=code,
            prompt=f"offline template: {m.describe()}; {step}",
            response=code,
            strategy=own,
            baseline=strategy is None,
        )

    def _own_choice(self, request: ProposalRequest, m: Match, lang: str) -> Strategy | None:
        """A strategy for a request that holds none: under the request's direction when one of
        those changes the code, else under any direction (the Proposal then names it)."""
        every = [Strategy(s, s.split(".")[0], s) for s in applicable(m, lang)]
        under = [s for s in every if s.direction == request.direction]
        return (under and self.choose_strategy(request, under).strategy) or (
            self.choose_strategy(request, every).strategy
        )

    def _code(
        self, sid: str, params: Params, applied: list[str], m: Match, lang: str
    ) -> str | None:
        """The code ``sid`` writes from the current parameters; None when it changes nothing."""
        try:
            return generate(m, lang, apply_strategy(sid, params, m, lang), [*applied, sid])
        except StrategyError:
            return None


def _unsupported(why: str) -> Proposal:
    """No code: no template writes any for this task or strategy (not a lesson for the memory)."""
    return Proposal(code=None, error=f"{NO_STRATEGY}: {why}", unsupported=True)
