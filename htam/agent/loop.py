"""The HTAM loop (DESIGN §1): state -> direction -> local strategy -> code -> feedback -> memory,
for T steps, always continuing from the best correct implementation so far.

What differs between methods lives in their guide (htam.agent.guides); the loop is the method's
four steps and nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from htam.agent.guides import NO_DIRECTION, Context, make_guide
from htam.agent.ports import EvaluatorPort
from htam.agent.propose import EvaluationError, InfrastructureError, propose_distinct
from htam.agent.rundir import RunDir
from htam.agent.state import (
    Progress,
    comparable_times,
    features,
    noise_of,
    outcome_text,
    repair_target,
    summary_text,
)
from htam.agent.step import ChoiceRecord, ProposalRecord, Step
from htam.agent.summary import is_faster, lesson, summary
from htam.agent.view import PathStep
from htam.evaluate import roofline
from htam.evaluate.result import EvalResult
from htam.evaluate.verdict import EVALUATOR_FAILED
from htam.memory import MemoryBank, StepRecord
from htam.policy import FLAT_DIRECTION, PolicyConfig, reward
from htam.proposer import Choice, Proposal, ProposalRequest, Proposer, Usage
from htam.status import Status
from htam.tasks import Task, signature
from htam.vocab import method_spec


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
        self.steps = method_spec(self.method).steps_for(self.steps)
        if self.steps < 1:
            raise ValueError("steps must be at least 1")


StepCallback = Callable[[Step], None]


class Optimizer:
    def __init__(
        self,
        proposer: Proposer,
        evaluator: EvaluatorPort,
        bank: MemoryBank | None,
        config: OptimizeConfig,
        policy_config: PolicyConfig | None = None,
        on_step: StepCallback | None = None,
    ):
        self.proposer, self.evaluator, self.bank, self.config = proposer, evaluator, bank, config
        self.policy_config = policy_config or PolicyConfig()
        self.on_step = on_step
        self.guide = make_guide(method_spec(config.method), bank, self.policy_config, config.flat_k)

    # ------------------------------------------------------------------ one run

    def run(self, task: Task, out_dir, resume: bool = False) -> dict[str, Any]:
        cfg = self.config
        run_id = cfg.run_id or f"{cfg.method}:{task.id}:s{cfg.seed}"
        rundir = RunDir(out_dir)
        size = self.evaluator.config.size  # the size the evaluator times
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
        # candidate will need it; one step records why, and the run ends there.
        able = self.proposer.can_propose(task)
        ref = self.evaluator.reference(task, timed=able)
        bound = roofline.lower_bound(ref.flops, ref.nbytes, ref.dtypes, self.evaluator.peaks())
        progress = Progress(ref_ms=ref.timing["median_ms"] if ref.timing else None)
        usage = Usage()
        for record in rundir.finished_steps():
            self._replay(Step.from_dict(record), rundir, progress, usage)
        infra_failures = 0
        while (index := len(progress.path)) < cfg.steps:
            # the prompt's shapes, work and bound are those of the size timed (newcomer: it
            # said 33x257 and a 50 ms bound for 68 kB while 4096x8192 was timed)
            state_text = summary_text(
                task.id, timed, bound.kind, bound.time_ms, progress, self.policy_config.K
            )
            ctx = Context(
                task_id=task.id,
                step=index,
                seed=cfg.seed,
                language=cfg.language,
                prefix=self._prefix(progress),
                state=features(sig, bound.kind, progress),
                state_text=state_text,
            )
            try:
                step, code = self._step(task, sig, ctx, progress, run_id)
            except InfrastructureError as exc:
                infra_failures += 1
                if infra_failures >= cfg.infra_patience or not exc.retry:
                    raise
                continue
            infra_failures = 0
            usage.add(step.usage)
            # a repeat keeps no code file: its code is the file of the step it repeats
            rundir.save_step(step.to_dict(), code if step.repeats_step is None else None)
            if step.new_best:
                rundir.save_best(code, faster=is_faster(progress.best_result))
            rundir.save_summary(
                summary(identity, progress, usage, ref, timed, time.monotonic() - started)
            )
            if self.on_step:
                self.on_step(step)
            if not able:
                break  # every further step would say the same
        result = summary(identity, progress, usage, ref, timed, time.monotonic() - started)
        rundir.save_summary(result)
        return result

    def _prefix(self, progress: Progress) -> list[str]:
        # The path moves only with the code the loop continues from (see Progress.lineage).
        return [d for d in progress.lineage if d != NO_DIRECTION][-self.policy_config.K :]

    # ------------------------------------------------------------------ one step

    def _step(self, task, sig, ctx: Context, progress: Progress, run_id: str):
        t0 = time.monotonic()
        # 1-2. The state is ctx; decide a direction, unless the step repairs a failure: then
        # the same direction and strategy, no decision.
        repair = repair_target(progress, self.guide.repairs)
        if repair is None:
            direction, breakdown = self.guide.decide(ctx)
        else:
            direction = repair[1].direction
            breakdown = {"method": self.config.method, "direction": direction}
            breakdown["repair_of"] = repair[0]
        # 3. A local strategy among the guide's candidates.
        request = self._request(task, ctx, progress, direction)
        candidates = self.guide.candidates(direction, ctx)
        request.guidance = self.guide.choice_guidance(direction, candidates, ctx)
        choice = self._choose(request, candidates, repair)
        request.strategy = choice.strategy
        if direction == FLAT_DIRECTION and choice.strategy:
            direction = choice.strategy.direction
        # 4. Code guided by the strategy and the memory; its feedback; the reward; learning.
        request.guidance = self.guide.guidance(direction, choice, ctx)
        repeated_before = progress.duplicates
        proposal, repeats, extra = propose_distinct(
            self.proposer, request, progress, self.config.duplicate_retries
        )
        result = self._evaluate(task, proposal) if repeats is None else _repeat(repeats)
        value = self._reward(result, progress)
        applied = choice.strategy or proposal.strategy
        if applied is not None and direction not in (NO_DIRECTION, applied.direction):
            direction = applied.direction  # nothing under the chosen one applied: say what did
        strategy_id = applied.id if applied else None
        speedup_before = progress.best_speedup or None
        new_best = progress.observe(
            result,
            proposal.code,
            direction,
            PathStep(direction, strategy_id, outcome_text(result), repair is not None),
        )
        usage = Usage()
        for part in (choice.usage, extra, proposal.usage):
            usage.add(part)
        memory_record = StepRecord(
            run_id=run_id,
            task_id=task.id,
            task_signature=sig.text,
            step=ctx.step,
            prefix=ctx.prefix,
            direction=direction,
            local_id=strategy_id,
            status=result.status,
            speedup_before=speedup_before,
            speedup_after=result.speedup,
            reward=value,
            error_excerpt="" if result.correct else " ".join(result.messages)[:300],
            lesson=lesson(result, strategy_id),
        )
        # A repeat teaches nothing new: the memory learned from that code once already. Nor does
        # a proposal the proposer could not write at all (newcomer: three steps without a
        # template taught "fusion failed" to the bank).
        learns = repeats is None and not proposal.unsupported
        memory_updated = learns and self.guide.learn(memory_record, ctx.state_text)
        step = Step(
            step=ctx.step,
            method=self.config.method,
            direction=direction,
            strategy=strategy_id,
            prefix=ctx.prefix,
            repair_of=repair[0] if repair else None,
            decision=breakdown,
            choice=ChoiceRecord.of(choice),
            proposal=ProposalRecord.of(proposal),
            feedback=result,
            reward=value,
            usage=usage,
            new_best=new_best,
            repeats_step=repeats,
            repeated_proposals=progress.duplicates - repeated_before,
            best_speedup=progress.best_speedup,
            memory_updated=memory_updated,
            wall_s=time.monotonic() - t0,
            state_text=ctx.state_text,
            memory_record=memory_record,
        )
        return step, proposal.code

    def _request(self, task: Task, ctx: Context, progress: Progress, direction: str):
        cfg = self.config
        return ProposalRequest(
            task=task,
            target=cfg.target,
            language=cfg.language,
            base_code=progress.best_code,
            feedback=progress.last_result,
            last_code=progress.last_code,
            direction=None if direction == NO_DIRECTION else direction,
            state_summary=ctx.state_text,
            step=ctx.step,
            seed=cfg.seed,
            tried=frozenset(progress.tried),
        )

    def _choose(self, request: ProposalRequest, candidates, repair) -> Choice:
        if repair is not None:
            local = repair[1].strategy
            strategy = self.guide.strategy(local) if local else None
            return Choice(strategy, rationale=f"repair of step {repair[0]}")
        if not candidates:
            return Choice(None)
        choice = self.proposer.choose_strategy(request, candidates)
        if choice.infrastructure:
            raise InfrastructureError(choice.rationale.removeprefix("LLM error: "))
        return choice

    def _reward(self, result: EvalResult, progress: Progress) -> float:
        # One unit on both sides (see comparable_times); a failure has no time.
        before, new = comparable_times(result, progress.best_result, progress.ref_ms)
        new = new if result.correct and result.runtime_ms else None
        noise = noise_of(result, progress.best_result)
        return reward(result.status, before, new, self.policy_config, noise)

    def _evaluate(self, task: Task, proposal: Proposal) -> EvalResult:
        if proposal.code is None:
            return EvalResult(
                Status.REJECTED, messages=[proposal.error or "the reply held no code"]
            )
        result = self.evaluator.evaluate(task, proposal.code, self.config.language)
        if result.infrastructure:
            cause = result.messages[0] if result.messages else "no cause given"
            raise EvaluationError(cause.removeprefix(f"{EVALUATOR_FAILED}: "))
        return result

    def _replay(self, step: Step, rundir: RunDir, progress: Progress, usage: Usage) -> None:
        """Rebuild the state from a persisted step; re-apply its (idempotent) memory update."""
        progress.observe(
            step.feedback,
            rundir.step_code(step.step),
            step.direction,
            PathStep(
                step.direction,
                step.strategy,
                outcome_text(step.feedback),
                step.repair_of is not None,
            ),
        )
        usage.add(step.usage)
        progress.duplicates += step.repeated_proposals
        if step.memory_updated:
            self.guide.learn(step.memory_record, step.state_text)


def _repeat(step: int) -> EvalResult:
    return EvalResult(
        Status.REJECTED, messages=[f"the same code as step {step}: not evaluated again"]
    )
