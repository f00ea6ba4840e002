"""What the judge checks of each round's outputs, the candidate's against the reference's runner's
in the slots it lent them: within the tolerance (with a float64 second opinion for the float32
elements float32 cannot pin down), not narrowed to 16 bits, and unchanged since the call's
seal (an answer written after the call returned, by a thread or a stream the candidate left
running, does not pass for the call's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from htam.evaluate import buffers
from htam.evaluate.eval_config import Tolerance
from htam.evaluate.judge import exact
from htam.evaluate.judge.compare import compare_tensor, narrowed
from htam.evaluate.judge.runner import Verdict
from htam.status import Status


@dataclass(frozen=True)
class Exact:
    """What a float64 second opinion rebuilds the reference from: the configuration's module,
    its constructor arguments and seed, on ``device``, within ``budget`` bytes."""

    module: Any
    init_args: list
    seed: int
    device: str
    budget: int


@dataclass(frozen=True)
class Rules:
    """How outputs are judged: the tolerances by dtype, the generator of the narrowing check's
    draws, and the float64 second opinion (None: none, as for a backward task)."""

    tol: dict[str, Tolerance]
    draws: torch.Generator
    exact: Exact | None = None


@dataclass(frozen=True)
class Round:
    """One round's outputs: the slots of both runners after the calls on ``inputs``, and the
    key and seals of the candidate's call (``where`` names it)."""

    inputs: list
    where: str
    cand: list[torch.Tensor]
    ref: list[torch.Tensor]
    sealed: tuple[int, list[int]]


def check(round_: Round, rules: Rules) -> dict[int, str]:
    """Raise the verdict on the round, or return what the result should say of its outputs
    (a float64 second opinion that passed them), by output."""
    runs, notes, where = None, {}, round_.where
    for k, (o, r) in enumerate(zip(round_.cand, round_.ref, strict=True)):
        problem = compare_tensor(o, r, rules.tol)
        tol = rules.tol.get("float32")
        if problem and tol and r.dtype == torch.float32 and rules.exact is not None:
            # a second opinion from float64, for elements float32 cannot pin down
            e = rules.exact
            runs = runs or exact.reference_runs(
                e.module, e.init_args, e.seed, e.device, round_.inputs, round_.ref, e.budget
            )
            if runs is not None and k < len(runs[0]):
                ok, why = exact.judge_against_exact(o, r, runs[0][k], runs[1][k], tol)
                if not ok:
                    ok, noisy = exact.judge_ill_conditioned(o, r, runs[0][k], runs[1][k], tol)
                    why = noisy if ok else "; ".join(w for w in (why, noisy) if w)
                if ok:
                    notes[k] = f"output {k}: {why}"
                    continue
                problem += f" ({why})" if why else ""
        if problem:
            raise Verdict(Status.INCORRECT, f"{where}, output {k}: {problem}")
        narrow = narrowed(o, r, rules.draws)
        if narrow:
            raise Verdict(Status.REJECTED, f"{where}, output {k}: {narrow}")
    # Sealed again after the comparison: whatever it saw a kernel left running write, this
    # sees too.
    changed = buffers.changed(round_.cand, *round_.sealed)
    if changed is not None:
        raise Verdict(
            Status.REJECTED,
            f"{where}, output {changed}: changed after the call returned (written by "
            "something the solution left running)",
        )
    return notes
