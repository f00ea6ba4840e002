"""What the judge checks of each round's outputs, the candidate's against the reference's runner's
in the slots it lent them: within the tolerance (with a float64 second opinion for the float32
elements float32 cannot pin down), not narrowed to 16 bits, and unchanged since the call's
seal (an answer written after the call returned, by a thread or a stream the candidate left
running, does not pass for the call's)."""

from __future__ import annotations

import torch

from htam.evaluate import buffers
from htam.evaluate.judge import exact
from htam.evaluate.judge.compare import compare_tensor, narrowed
from htam.evaluate.judge.runner import Verdict


def check(judge, x: list, where: str) -> None:
    """Raise the verdict on the round on inputs ``x`` (``where`` names the call), or return."""
    runs = None
    for k, (o, r) in enumerate(zip(judge.cand.slots, judge.ref.slots, strict=True)):
        problem = compare_tensor(o, r, judge.tol)
        tol = judge.tol.get("float32")
        if problem and tol and r.dtype == torch.float32 and judge.grad_specs is None:
            # a second opinion from float64, for elements float32 cannot pin down
            module, init_args, seed = judge.model_args
            runs = runs or exact.reference_runs(
                module, init_args, seed, judge.device, x, judge.ref.slots, judge.exact_budget
            )
            if runs is not None and k < len(runs[0]):
                ok, why = exact.judge_against_exact(o, r, runs[0][k], runs[1][k], tol)
                if ok:
                    judge.notes.setdefault(k, f"output {k}: {why}")
                    continue
                problem += f" ({why})" if why else ""
        if problem:
            raise Verdict("incorrect", f"{where}, output {k}: {problem}")
        narrow = narrowed(o, r, judge.draws)
        if narrow:
            raise Verdict("rejected", f"{where}, output {k}: {narrow}")
    # Sealed again after the comparison: whatever it saw a kernel left running write, this
    # sees too.
    changed = buffers.changed(judge.cand.slots, *judge.cand.sealed)
    if changed is not None:
        raise Verdict(
            "rejected",
            f"{where}, output {changed}: changed after the call returned (written by "
            "something the solution left running)",
        )
