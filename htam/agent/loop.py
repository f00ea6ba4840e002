"""The HTAM loop (DESIGN §1): state -> direction -> local strategy -> code -> feedback -> memory,
for T steps, always continuing from the best correct implementation so far.

What differs between methods lives in their guide (htam.agent.guides); the loop is the method's
four steps and nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from htam.agent.config import OptimizeConfig
from htam.agent.guides import Context, make_guide
from htam.agent.outcomes import (
    after_redraw,
    after_retry,
    needs_retry,
    new_best_band,
    on_drawn_inputs,
    prefix_share,
    repeated,
    step_reward,
    unjudged,
)
from htam.agent.ports import EvaluatorPort
from htam.agent.propose import Asker, EvaluationError, InfrastructureError
from htam.agent.records import learned_record
from htam.agent.run_summary import RunSummary
from htam.agent.rundir import RunDir, new_run_id
from htam.agent.state import (
    Progress,
    features,
    outcome_text,
    step_status,
    summary_text,
)
from htam.agent.step import ChoiceRecord, ProposalRecord, Step
from htam.agent.summary import is_faster, summary
from htam.agent.view import PathStep
from htam.evaluate import roofline
from htam.evaluate.host.verdict import EVALUATOR_FAILED
from htam.evaluate.result import EvalResult
from htam.memory import MemoryBank
from htam.policy import PolicyConfig
from htam.proposer import Proposer, Usage
from htam.status import Fault
from htam.tasks import Task, signature
from htam.vocab import Direction, method_spec

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
        if bank is not None:  # a run reads and learns only its target's scope (memory.scopes)
            bank.scope = config.target
        self.on_step = on_step
        self.guide = make_guide(method_spec(config.method), bank, self.policy_config, config.flat_k)
        self.asker = Asker(proposer, self.guide, config)

    # ------------------------------------------------------------------ one run

    def run(self, task: Task, out_dir, resume: bool = False) -> RunSummary:
        cfg = self.config
        rundir = RunDir(out_dir)
        run_id = cfg.run_id or self._run_id(rundir, task, resume)
        size = self.evaluator.config.size  # the size the evaluator times
        spec = {"task_id": task.id, "task_digest": task.digest, "method": cfg.method}
        spec |= {"seed": cfg.seed, "steps": cfg.steps, "target": cfg.target}
        spec |= {"language": cfg.language, "proposer": self.proposer.name, "size": size}
        rundir.start({**spec, "run_id": run_id}, resume)
        identity = {k: v for k, v in spec.items() if k not in ("task_digest", "steps")}
        identity |= {"steps_planned": cfg.steps, "run_dir": str(rundir.path)}
        started = time.monotonic()
        # the shapes timed: shown to the user, and the state the policy decides on and the
        # memory learns under (the small size's said "tiny tensors" of every GPU task)
        timed = signature(task, size)
        # A proposer with nothing to write for this task spares the reference's timing: no
        # candidate will need it; one step records why, and the run ends there.
        able = self.proposer.can_propose(task)
        ref = self.evaluator.reference(task, timed=able)
        bound = roofline.lower_bound(ref.flops, ref.nbytes, ref.dtypes, self.evaluator.peaks())
        progress = Progress(ref_ms=ref.timing["median_ms"] if ref.timing else None)
        usage = Usage()
        finished = rundir.finished_steps()
        for record in finished:
            self._replay(Step.from_dict(record), rundir, progress, usage)
        # a resumed run's times count its earlier sessions' steps
        identity["resumed_s"] = sum(record.get("wall_s") or 0.0 for record in finished)
        started -= identity["resumed_s"]
        infra_failures = 0
        while (index := len(progress.path)) < cfg.steps:
            # the prompt's shapes, work and bound are those of the size timed (seen: it
            # said 33x257 and a 50 ms bound for 68 kB while 4096x8192 was timed)
            state_text = summary_text(
                task.id, timed, bound.kind, bound.time_ms, progress, self.policy_config.K
            )
            ctx = Context(
                task_id=task.id,
                step=index,
                seed=cfg.seed,
                language=cfg.language,
                target=cfg.target,
                prefix=self._prefix(progress),
                state=features(timed, bound.kind, progress),
                state_text=state_text,
            )
            try:
                step, code = self._step(task, timed, ctx, progress, run_id)
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

    def _run_id(self, rundir: RunDir, task: Task, resume: bool) -> str:
        """A new id for a new run; a resumed run keeps its own, so that the bank, which records
        each (run id, task, step) once, does not count its replayed steps twice."""
        cfg = self.config
        recorded = rundir.recorded() if resume else None
        if recorded is None:
            return new_run_id(cfg.method, task.id, cfg.seed)
        # run.json files older than the id kept none: their steps went under this one
        return recorded.get("run_id", f"{cfg.method}:{task.id}:s{cfg.seed}")

    def _prefix(self, progress: Progress) -> list[str]:
        # The path moves only with the code the loop continues from (see Progress.lineage).
        return [d for d in progress.lineage if d != Direction.NONE][-self.policy_config.K :]

    # ------------------------------------------------------------------ one step

    def _step(self, task, sig, ctx: Context, progress: Progress, run_id: str):
        t0 = time.monotonic()
        repeated_before = progress.duplicates
        # 1-4. The state is ctx; a direction, a local strategy, code guided by them (decided
        # again while the code only repeats evaluated code: see htam.agent.propose).
        asked = self.asker.ask(task, ctx, progress)
        direction, choice, proposal = asked.last.direction, asked.last.choice, asked.last.proposal
        repeats, repair, usage = asked.last.repeats, asked.repair, asked.usage
        progress.exhausted_strategies.update(asked.exhausted_strategies)
        progress.exhausted_directions.update(asked.exhausted_directions)
        progress.prefix_shares.append(prefix_share(asked.breakdown))
        if repeats is not None:
            result = repeated(repeats)
        elif proposal.code is None:
            result = unjudged(proposal, list(sig.families))
        else:
            result = self._evaluate(task, proposal.code)
        value = self._reward(result, progress)
        applied = choice.strategy or proposal.strategy
        if proposal.baseline:  # no strategy applied: no direction to credit or to extend the path
            applied, direction = None, Direction.NONE
        elif applied is not None and direction not in (Direction.NONE, applied.direction):
            direction = applied.direction  # nothing under the chosen one applied: say what did
        strategy_id = applied.id if applied else None
        speedup_before = progress.best_speedup or None
        new_best = progress.observe(
            result,
            proposal.code,
            direction,
            PathStep(
                direction,
                strategy_id,
                outcome_text(result, proposal.code is not None),
                repair is not None,
                repeats is not None,
                step_status(result, proposal.code is not None),
            ),
            band=self._band(result, progress),
        )
        memory_record = learned_record(
            task, sig, ctx, run_id, self.config, self.evaluator.config.size,
            direction=direction, strategy_id=strategy_id, result=result,
            speedup_before=speedup_before, reward=value, code=proposal.code,
        )  # fmt: skip
        # Only the kernel's doing is learned (htam.status): not a repeat (the memory learned
        # from that code once already), not a proposal the proposer could not write, not an
        # endpoint's reply without code, not an evaluation the evaluator or the machine lost.
        learns = result.cause is Fault.KERNEL
        memory_updated = learns and self.guide.learn(memory_record, ctx.state_text)
        step = Step(
            step=ctx.step,
            method=self.config.method,
            direction=direction,
            strategy=strategy_id,
            prefix=ctx.prefix,
            repair_of=repair[0] if repair else None,
            decision=asked.breakdown,
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
            exhausted_strategies=asked.exhausted_strategies,
            exhausted_directions=asked.exhausted_directions,
        )
        return step, proposal.code

    def _band(self, result: EvalResult, progress: Progress) -> float:
        return new_best_band(result, progress, self.policy_config.min_gain)

    def _reward(self, result: EvalResult, progress: Progress) -> float:
        return step_reward(result, progress, self.policy_config)

    def _evaluate(self, task: Task, code: str) -> EvalResult:
        result = self._judged(task, code)
        if needs_retry(result) and not result.infrastructure:
            # judged again (a fresh fork server, a quieter moment): a second fault is named in
            # the step and never learned; a second timeout is the kernel's own
            result = after_retry(result, self._judged(task, code))
        if result.infrastructure:
            cause = result.messages[0] if result.messages else "no cause given"
            raise EvaluationError(cause.removeprefix(f"{EVALUATOR_FAILED}: "))
        if on_drawn_inputs(result):
            # judged on fresh draws, past the cache (it would serve this very verdict)
            fresh = getattr(self.evaluator, "evaluator", self.evaluator)  # CachedEvaluator's
            result = after_redraw(result, fresh.evaluate(task, code, self.config.language))
        return result

    def _judged(self, task: Task, code: str) -> EvalResult:
        return self.evaluator.evaluate(task, code, self.config.language)

    def _replay(self, step: Step, rundir: RunDir, progress: Progress, usage: Usage) -> None:
        """Rebuild the state from a persisted step; re-apply its (idempotent) memory update."""
        # what it found exhausted, before its outcome (a new best clears them), as it ran
        progress.exhausted_strategies.update(step.exhausted_strategies)
        progress.exhausted_directions.update(step.exhausted_directions)
        progress.observe(
            step.feedback,
            rundir.step_code(step.step),
            step.direction,
            PathStep(
                step.direction,
                step.strategy,
                outcome_text(step.feedback, step.proposal.wrote_code),
                step.repair_of is not None,
                step.repeats_step is not None,
                step_status(step.feedback, step.proposal.wrote_code),
            ),
            band=self._band(step.feedback, progress),
        )
        usage.add(step.usage)
        progress.duplicates += step.repeated_proposals
        progress.prefix_shares.append(prefix_share(step.decision))
        if step.memory_updated:
            self.guide.learn(step.memory_record, step.state_text)
