"""Correctness: candidate outputs against reference outputs, in the trusted parent process."""

from __future__ import annotations

import torch

from htam.evaluate.config import TOLERANCES, Tolerance


def _tolerance(dtype: torch.dtype, table: dict[str, Tolerance]) -> Tolerance | None:
    return table.get(str(dtype).removeprefix("torch."))


def compare_tensor(out: torch.Tensor, ref: torch.Tensor, table: dict[str, Tolerance]) -> str | None:
    """None when ``out`` matches ``ref``; otherwise why not."""
    if not isinstance(out, torch.Tensor):
        return f"output is a {type(out).__name__}, expected a tensor"
    if out.shape != ref.shape:
        return f"shape {tuple(out.shape)} != expected {tuple(ref.shape)}"
    if out.dtype != ref.dtype:
        return f"dtype {out.dtype} != expected {ref.dtype}"
    tol = _tolerance(ref.dtype, table)
    if tol is None:  # integers and booleans (argmax, masks): exact
        if torch.equal(out, ref):
            return None
        wrong = (out != ref).sum().item()
        return f"{wrong} of {ref.numel()} elements differ (exact comparison)"
    # float32 arithmetic is exact enough for tolerances of 1e-3 and avoids doubling the memory
    # of outputs that can be hundreds of megabytes; norms accumulate in float64.
    o, r = out.float(), ref.float()
    finite = torch.isfinite(r)
    if not bool(finite.all()):  # rare: compare the non-finite positions, then the rest
        if not torch.equal(torch.isnan(o), torch.isnan(r)):
            return "NaNs where the reference has none (or the reverse)"
        if not torch.equal(o[~finite].nan_to_num(), r[~finite].nan_to_num()):
            return "infinities differ from the reference"
        o, r = o[finite], r[finite]
    elif not bool(torch.isfinite(o).all()):
        return "NaN or infinity where the reference is finite"
    if r.numel() == 0:
        return None
    norm = torch.linalg.vector_norm(r, dtype=torch.float64).item()
    atol = tol.atol_scale * norm / r.numel() ** 0.5 + tol.atol_floor
    err = (o - r).abs_()
    bad = err > r.abs().mul_(tol.rtol).add_(atol)
    if bool(bad.any()):
        i = int(err.argmax())
        return (
            f"{int(bad.sum())} of {r.numel()} elements outside atol={atol:.2e} rtol={tol.rtol:.0e}"
            f" (max abs error {err.flatten()[i].item():.3e} at flat index {i})"
        )
    if norm > 0:
        rel = torch.linalg.vector_norm(err, dtype=torch.float64).item() / norm
        if rel > tol.rel_l2:
            return f"relative L2 error {rel:.3e} > {tol.rel_l2:.0e}"
    return None


def compare_outputs(
    outs: list[list], refs: list[list], table: dict[str, Tolerance] | None = None
) -> str | None:
    """Compare every trial; None when all match."""
    table = table or TOLERANCES
    if len(outs) != len(refs):
        return f"{len(outs)} trial results for {len(refs)} trials"
    for trial, (out, ref) in enumerate(zip(outs, refs, strict=True)):
        if len(out) != len(ref):
            return f"trial {trial}: {len(out)} outputs, expected {len(ref)}"
        for k, (o, r) in enumerate(zip(out, ref, strict=True)):
            if not isinstance(r, torch.Tensor):
                if o != r:
                    return f"trial {trial}, output {k}: {o!r} != {r!r}"
                continue
            problem = compare_tensor(o, r, table)
            if problem:
                return f"trial {trial}, output {k}: {problem}"
    return None
