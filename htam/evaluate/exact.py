"""A second opinion from exact arithmetic, for outputs the float32 reference cannot pin down.

Some tasks compute a value whose float32 result is rounding noise: KernelBench level 2's
23_Conv3d_GroupNorm_Mean takes the mean of a group norm's output, exactly 0 in exact arithmetic,
and torch's own float32 answer is 7.8% (relative L2) from the float64 one. Any other order of
summation, however correct, lands elsewhere in that noise and fails a 2e-3 bound (H200: 1.9).

So when a float32 comparison fails, the judge runs the reference once more in float64 on the
same inputs. If the float32 reference meets the tolerance against it, the task is well
conditioned and the verdict stands. If it does not, the candidate is judged against the float64
result: it passes when it is at most ``FACTOR`` times as far from it as the float32 reference
is. Nothing the candidate does reaches this run: the judge builds the model and holds the inputs.
"""

from __future__ import annotations

import torch

from htam.evaluate.eval_config import Tolerance
from htam.evaluate.trusted_jobs import as_list, build

# How much further from the exact result than torch's own float32 answer a candidate may be: the
# candidate's order of summation (blocks of 1,024, then the blocks) was 7x further on task 23.
FACTOR = 10.0


def float64_outputs(module, init_args: list, seed: int, device: str, x: list) -> list | None:
    """The reference's outputs computed in float64 from the same parameters and inputs; None
    when the model does not run in float64 (an op without a float64 kernel, a fixed dtype) or
    its output depends on the random stream (dropout in training mode: two draws differ, and the
    float32 reference's distance from a float64 one would say nothing about rounding)."""
    try:
        model = build(module.Model, init_args, seed, device)
        if isinstance(model, torch.nn.Module):
            model = model.double()
        wide = [v.double() if torch.is_tensor(v) and v.is_floating_point() else v for v in x]
        runs = []
        for draw in (1, 2):
            torch.manual_seed(draw)
            with torch.no_grad():
                runs.append(
                    [o.detach() if torch.is_tensor(o) else o for o in as_list(model(*wide))]
                )
    except Exception:  # noqa: BLE001 - no second opinion: the float32 verdict stands
        return None
    for a, b in zip(*runs, strict=True):
        if torch.is_tensor(a) and not torch.equal(a, b):
            return None
    return runs[0]


def within_reference_error(
    out: torch.Tensor, ref: torch.Tensor, exact, tol: Tolerance
) -> tuple[bool, str]:
    """(accepted, why): whether ``out`` is within FACTOR times the float32 reference's own error
    of the float64 result ``exact``, for an output the reference itself does not pin down."""
    if not torch.is_tensor(exact) or exact.shape != ref.shape or not exact.is_floating_point():
        return False, ""
    e = exact.double().reshape(-1)
    if not bool(torch.isfinite(e).all()):
        return False, ""
    norm = float(torch.linalg.vector_norm(e))
    ref_err = float(torch.linalg.vector_norm(ref.double().reshape(-1) - e))
    if ref_err <= tol.rel_l2 * norm:  # well conditioned: the float32 verdict stands
        return False, ""
    err = float(torch.linalg.vector_norm(out.double().reshape(-1) - e))
    scale = norm or 1.0
    why = (
        f"ill-conditioned at this size: the float32 reference is {ref_err / scale:.2e} "
        f"(relative L2) from a float64 one, the candidate {err / scale:.2e}; judged against "
        f"float64, within {FACTOR:.0f}x the reference's own error"
    )
    return err <= FACTOR * ref_err, why
