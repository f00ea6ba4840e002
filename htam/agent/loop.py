"""The HTAM loop (DESIGN §1): state -> direction -> local strategy -> code -> feedback -> memory,
for T steps, always continuing from the best correct implementation so far."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from htam.agent.propose import InfrastructureError, propose_distinct
from htam.agent.rundir import RunDir
from htam.agent.state import (
    Progress,
    features,
    noise_of,
    outcome_text,
    relative_time,
    repair_target,
    summary_text,
)
from htam.agent.summary import is_faster, lesson, summary
from htam.evaluate import roofline
from htam.evaluate.result import EvalResult
from htam.llm.render import PathStep, Prompts
from htam.memory import FlatMemory, MemoryBank, StepRecord, choice_guidance, guidance
from htam.policy import FLAT_DIRECTION, METHODS, PolicyConfig, make_policy, reward, step_rng
from htam.proposer import Choice, Proposal, ProposalRequest, Proposer, Usage
from htam.status import Status
from htam.tasks import Task, signature

BASELINES = ("flat", "refine", "oneshot")
ALL_METHODS = METHODS + BASELINES
NO_DIRECTION = "none"  # the direction recorded by methods that choose none


@dataclass
class OptimizeConfig:
    method: str = "htam"
    steps: int = 6
    seed: int = 0
    target: str = "cpu"
    language: str = "cpp"
    flat_k: int = 4  # experiences retrieved by the flat-memory baseline
    run_id: str | None = None  # default: derived from method, task and seed (stable on resume)
    # Consecutive steps lost to the endpoint (each after the client's own retries) before the
    # run stops: one more try rides out a blip, more would only burn backoff time.
    infra_patience: int = 2
    duplicate_retries: int = 2  # asks for different code when a proposal repeats evaluated code

    def __post_init__(self) -> None:
        if self.method not in ALL_METHODS:
            raise ValueError(f"unknown method {self.method!r}; known: {', '.join(ALL_METHODS)}")
        if self.method == "oneshot":
            self.steps = 1
        if self.steps < 1:
            raise ValueError("steps must be at least 1")


StepCallback = Callable[[dict[str, Any]], None]


class Optimizer:
    def __init__(
        self,
        proposer: Proposer,
        evaluator: Any,  # Evaluator or CachedEvaluator: evaluate(task, code, language), reference(task)
        bank: MemoryBank | None,
        config: OptimizeConfig,
        policy_config: PolicyConfig | None = None,
        on_step: StepCallback | None = None,
    ):
        self.proposer, self.evaluator, self.bank, self.config = proposer, evaluator, bank, config
        self.policy_config = policy_config or (bank.config if bank else PolicyConfig())
        self.on_step = on_step
        self.prompts = Prompts()
        uses_memory = config.method in METHODS or config.method == "flat"
        if uses_memory and bank is None:
            raise ValueError(f"method {config.method} needs a memory bank")
        self.policy = (
            make_policy(config.method, self.policy_config, bank)
            if config.method in METHODS
            else None
        )
        self.flat = FlatMemory(bank) if config.method == "flat" else None

    # ------------------------------------------------------------------ one run

    def run(self, task: Task, out_dir, resume: bool = False) -> dict[str, Any]:
        cfg = self.config
        run_id = cfg.run_id or f"{cfg.method}:{task.id}:s{cfg.seed}"
        rundir = RunDir(out_dir)
        base = getattr(self.evaluator, "evaluator", self.evaluator)  # under a CachedEvaluator
        size = base.config.size  # the size the evaluator times
        spec = {"task_id": task.id, "task_digest": task.digest, "method": cfg.method}
        spec |= {"seed": cfg.seed, "steps": cfg.steps, "target": cfg.target}
        spec |= {"language": cfg.language, "proposer": self.proposer.name, "size": size}
        rundir.start({**spec, "run_id": run_id}, resume)
        identity = {k: v for k, v in spec.items() if k not in ("task_digest", "steps")}
        identity |= {"steps_planned": cfg.steps, "run_dir": str(rundir.path)}
        started = time.monotonic()
        sig = signature(task, "small")
        timed = signature(task, size)  # the shapes timed, shown to the user
        # A proposer with nothing to write for this task spares the reference's timing: no
        # candidate will need it.
        ref = self.evaluator.reference(task, timed=self.proposer.can_propose(task))
        bound = roofline.lower_bound(ref.flops, ref.nbytes, ref.dtypes, base.peaks())
        progress = Progress(ref_ms=ref.timing["median_ms"] if ref.timing else None)
        usage = Usage()
        for record in rundir.finished_steps():
            self._replay(record, rundir, progress, usage)
        infra_failures = 0
        while (step := len(progress.path)) < cfg.steps:
            state_text = summary_text(
                self.prompts,
                task.id,
                sig,
                bound.kind,
                bound.time_ms,
                progress,
                self.policy_config.K,
            )
            try:
                record, code = self._step(task, sig, bound.kind, step, state_text, progress, run_id)
            except InfrastructureError:
                infra_failures += 1
                if infra_failures >= cfg.infra_patience:
                    raise
                continue
            infra_failures = 0
            usage.add(Usage(**record["usage"]))
            # a repeat keeps no code file: its code is the file of the step it repeats
            rundir.save_step(record, code if record["repeats_step"] is None else None)
            if record["new_best"]:
                rundir.save_best(code, faster=is_faster(progress.best_result))
            rundir.save_summary(
                summary(identity, progress, usage, ref, timed, time.monotonic() - started)
            )
            if self.on_step:
                self.on_step(record)
        result = summary(identity, progress, usage, ref, timed, time.monotonic() - started)
        rundir.save_summary(result)
        return result

    # ------------------------------------------------------------------ one step

    def _decide(self, progress: Progress, state, step: int, task_id: str):
        if self.policy is None:
            return NO_DIRECTION, {"method": self.config.method, "note": "no direction decision"}
        rng = step_rng(self.config.seed, task_id, step)
        prefix = self._prefix(progress)
        decision = self.policy.decide(prefix, state, rng)
        return decision.direction, {**decision.breakdown, "direction": decision.direction}

    def _prefix(self, progress: Progress) -> list[str]:
        # The path moves only with the code the loop continues from (see Progress.lineage).
        return [d for d in progress.lineage if d != NO_DIRECTION][-self.policy_config.K :]

    def _candidates(self, direction: str, state):
        if self.policy is not None:
            return self.policy.candidates(direction, state)
        if self.config.method == "flat":
            return [n.to_strategy() for n in self.bank.all_locals()]
        return []  # refine and oneshot: feedback only, no strategies

    def _step(self, task, sig, bound_kind, step, state_text, progress, run_id):
        cfg = self.config
        t0 = time.monotonic()
        state = features(sig, bound_kind, progress)
        # After a failure the step repairs that code: same direction and strategy, no decision.
        repair = repair_target(progress, self.policy_config.repairs) if self.policy else None
        if repair is None:
            direction, breakdown = self._decide(progress, state, step, task.id)
        else:
            direction = repair[1].direction
            breakdown = {"method": cfg.method, "direction": direction, "repair_of": repair[0]}
        request = ProposalRequest(
            task=task,
            target=cfg.target,
            language=cfg.language,
            base_code=progress.best_code,
            feedback=progress.last_result,
            last_code=progress.last_code,
            direction=None if direction == NO_DIRECTION else direction,
            state_summary=state_text,
            step=step,
            seed=cfg.seed,
            tried=frozenset(progress.tried),
        )
        candidates = self._candidates(direction, state)
        request.guidance = self._choice_guidance(direction, candidates, progress, state)
        if repair is not None:
            local = repair[1].strategy
            strategy = self.bank.local(local).to_strategy() if local else None
            choice = Choice(strategy, rationale=f"repair of step {repair[0]}")
        elif candidates:
            choice = self.proposer.choose_strategy(request, candidates)
        else:
            choice = Choice(None)
        if choice.infrastructure:
            raise InfrastructureError(choice.rationale.removeprefix("LLM error: "))
        request.strategy = choice.strategy
        if direction == FLAT_DIRECTION and choice.strategy:
            direction = choice.strategy.direction
        request.guidance = self._guidance(direction, choice, progress, state_text)
        repeated_before = progress.duplicates
        proposal, repeats, extra = propose_distinct(
            self.proposer, request, progress, cfg.duplicate_retries
        )
        if repeats is None:
            result = self._evaluate(task, proposal, cfg.language)
        else:
            result = EvalResult(
                Status.REJECTED,
                messages=[f"the same code as step {repeats}: not evaluated again"],
            )
        speedup_before = progress.best_speedup or None
        # Times relative to the reference timed beside each candidate; before the first
        # success the bar is the reference itself (1.0).
        before = relative_time(progress.best_result) if progress.best_result else 1.0
        new = relative_time(result) if result.correct and result.runtime_ms else None
        noise = noise_of(result, progress.best_result)
        value = reward(result.status, before, new, self.policy_config, noise)
        prefix = self._prefix(progress)
        applied = choice.strategy or proposal.strategy
        if applied is not None and direction not in (NO_DIRECTION, applied.direction):
            direction = applied.direction  # nothing under the chosen one applied: say what did
        strategy_id = applied.id if applied else None
        new_best = progress.observe(
            result,
            proposal.code,
            direction,
            PathStep(direction, strategy_id, outcome_text(result), repair is not None),
        )
        usage = Usage()
        usage.add(choice.usage)
        usage.add(extra)
        usage.add(proposal.usage)
        memory_record = StepRecord(
            run_id=run_id,
            task_id=task.id,
            task_signature=sig.text,
            step=step,
            prefix=prefix,
            direction=direction,
            local_id=strategy_id,
            status=result.status,
            speedup_before=speedup_before,
            speedup_after=result.speedup,
            reward=value,
            error_excerpt="" if result.correct else " ".join(result.messages)[:300],
            lesson=lesson(result, strategy_id),
        )
        # A repeat teaches nothing new: the memory learned from that code once already.
        memory_updated = repeats is None and self._learn(memory_record, state_text)
        record = {
            "step": step,
            "method": cfg.method,
            "direction": direction,
            "strategy": strategy_id,
            "prefix": prefix,
            "repair_of": repair[0] if repair else None,
            "decision": breakdown,
            "choice": {
                "rationale": choice.rationale,
                "prompt": choice.prompt,
                "response": choice.response,
            },
            "proposal": {
                "prompt": proposal.prompt,
                "response": proposal.response,
                "reasoning": proposal.reasoning,
                "error": proposal.error,
            },
            "feedback": result.to_dict(),
            "reward": value,
            "usage": asdict(usage),
            "new_best": new_best,
            "repeats_step": repeats,
            "repeated_proposals": progress.duplicates - repeated_before,
            "best_speedup": progress.best_speedup,
            "memory_updated": memory_updated,
            "wall_s": time.monotonic() - t0,
            "state_text": state_text,
            "memory_record": {**asdict(memory_record), "status": str(memory_record.status)},
        }
        return record, proposal.code

    def _guidance(self, direction: str, choice: Choice, progress: Progress, state_text: str) -> str:
        if self.flat is not None:
            hits = self.flat.retrieve(state_text, self.config.flat_k)
            return "\n\n".join(f"Past experience:\n{h.text}" for h in hits)
        if self.policy is None or direction == NO_DIRECTION:
            return ""
        local_id = choice.strategy.id if choice.strategy else None
        return guidance(
            self.bank,
            direction,
            local_id,
            self._prefix(progress),
            language=self.config.language,
        )

    def _choice_guidance(self, direction: str, candidates, progress: Progress, state) -> str:
        """The memory the strategy choice is shown (empty without a policy or candidates)."""
        if self.policy is None or not candidates:
            return ""
        return choice_guidance(
            self.bank,
            direction,
            [c.id for c in candidates],
            self._prefix(progress),
            language=self.config.language,
            state=state,
            budget_tokens=self.policy_config.prompt_memory_tokens,
        )

    def _evaluate(self, task: Task, proposal: Proposal, language: str) -> EvalResult:
        if proposal.code is None:
            return EvalResult(
                Status.REJECTED, messages=[proposal.error or "the reply held no code"]
            )
        return self.evaluator.evaluate(task, proposal.code, language)

    def _learn(self, record: StepRecord, state_text: str) -> bool:
        if self.flat is not None:
            return self.flat.add(f"{state_text}\nOutcome: {record.lesson}", record)
        if self.policy is not None and record.direction != NO_DIRECTION:
            return self.policy.record(record)
        return False

    def _replay(self, record: dict, rundir: RunDir, progress: Progress, usage: Usage) -> None:
        """Rebuild the state from a persisted step; re-apply its (idempotent) memory update."""
        result = EvalResult.from_dict(record["feedback"])
        progress.observe(
            result,
            rundir.step_code(record["step"]),
            record["direction"],
            PathStep(
                record["direction"],
                record["strategy"],
                outcome_text(result),
                record.get("repair_of") is not None,
            ),
        )
        usage.add(Usage(**record["usage"]))
        progress.duplicates += record.get("repeated_proposals", 0)
        if record.get("repeats_step") is None:
            self._learn(StepRecord(**record["memory_record"]), record["state_text"])
