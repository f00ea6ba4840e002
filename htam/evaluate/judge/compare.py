"""Correctness: candidate outputs against reference outputs, in the trusted parent process."""

from __future__ import annotations

import math

import torch

from htam.evaluate.eval_config import TOLERANCES, Tolerance


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
        differ = (out != ref).reshape(-1)
        wrong = differ.sum().item()
        first = differ.nonzero()[:FIRST_SHOWN].reshape(-1).tolist()
        return f"{wrong} of {ref.numel()} elements differ (exact comparison); " + _shown(
            out.reshape(-1), ref.reshape(-1), first, ref.shape
        )
    o, r = out.reshape(-1), ref.reshape(-1)
    norm, finite = _reference_stats(ref)
    if not finite:  # rare: compare the non-finite positions, then the rest
        o, r = o.float(), r.float()
        keep = torch.isfinite(r)
        if not torch.equal(torch.isnan(o), torch.isnan(r)):
            return "NaNs where the reference has none (or the reverse)"
        if not torch.equal(o[~keep].nan_to_num(), r[~keep].nan_to_num()):
            return "infinities differ from the reference"
        o, r = o[keep], r[keep]
    if r.numel() == 0:
        return None
    atol = tol.atol_scale * norm / r.numel() ** 0.5 + tol.atol_floor
    problem, first = _compare_slices(o, r, norm, atol, tol)
    if problem is None:
        return None
    if finite:  # flat positions of the whole tensor (not of its finite part)
        problem += "; " + _shown(out.reshape(-1), ref.reshape(-1), first, ref.shape)
    return problem


FIRST_SHOWN = 3  # differing elements a wrong answer shows, with their indices and both values


def _index(flat: int, shape: torch.Size) -> str:
    at = []
    for size in reversed(shape):
        at.append(flat % size)
        flat //= size
    return "[" + ", ".join(str(i) for i in reversed(at)) + "]"


def _shown(o: torch.Tensor, r: torch.Tensor, flat: list[int], shape: torch.Size) -> str:
    """The first differing elements: where (the output's own indices) and both values."""
    parts = [
        f"at {_index(k, shape)} got {o[k].item():.6g}, expected {r[k].item():.6g}" for k in flat
    ]
    return "first differing: " + "; ".join(parts) if parts else ""


# Elements per slice: float32 slices of 4 MB stay in cache and no large temporary is allocated
# (fresh pages are what makes whole-tensor arithmetic on hundreds of megabytes slow).
# On a GPU every slice costs a few host synchronizations, so slices are large there (1 GiB of
# float32 temporaries at most).
_SLICE = 1 << 20
_GPU_SLICE = 1 << 28


def _slices(n: int, cuda: bool = False):
    step = _GPU_SLICE if cuda else _SLICE
    return ((i, min(i + step, n)) for i in range(0, n, step))


def _reference_stats(r: torch.Tensor) -> tuple[float, bool]:
    """L2 norm (accumulated in float64) of the finite part, and whether all of it is finite.
    Computed on every comparison, never cached: the judge compares against slots that the
    reference's runner refills in place, so neither the tensor's id nor its version tells one
    call's values from the next (a cache froze the first call's norm for every later one)."""
    flat, sq, finite = r.reshape(-1), 0.0, True
    for i, j in _slices(flat.numel(), flat.is_cuda):
        part = flat[i:j].float()
        ok = torch.isfinite(part)
        if not bool(ok.all()):
            finite, part = False, part[ok]
        sq += torch.linalg.vector_norm(part, dtype=torch.float64).item() ** 2
    return sq**0.5, finite


# Errors whose squares float32 holds: below, squares underflow (an answer of zeros to outputs
# of 1e-30 had a relative L2 error of 0, red team 18); above, they overflow.
_SQUARE_RANGE = (1e-15, 1e15)


def _squares(err: torch.Tensor, largest: float) -> float:
    """The sum of the squared errors: in float32 (fast), or in float64 where the largest error
    is outside ``_SQUARE_RANGE`` (the reference's norm is accumulated in float64 too)."""
    if (
        largest > 0
        and math.isfinite(largest)
        and not (_SQUARE_RANGE[0] <= largest <= _SQUARE_RANGE[1])
    ):
        return torch.linalg.vector_norm(err, dtype=torch.float64).item() ** 2
    return torch.dot(err, err).item()


def _compare_slices(
    o: torch.Tensor, r: torch.Tensor, norm: float, atol: float, tol: Tolerance
) -> tuple[str | None, list[int]]:
    """Elementwise tolerance, then relative L2 error, slice by slice. A slice whose largest
    error is within ``atol`` cannot break the elementwise rule, so only others are looked at
    element by element; a NaN or infinity anywhere makes the slice's sum of squares non-finite.
    Also returns the flat positions of the first elements outside the tolerance (the largest
    error's, when only the relative L2 error fails)."""
    n_bad, worst, worst_at, err_sq = 0, -1.0, 0, 0.0
    first: list[int] = []
    for i, j in _slices(r.numel(), r.is_cuda):
        oc, rc = o[i:j].float(), r[i:j].float()
        err = (oc - rc).abs_()
        k = int(err.argmax())
        largest = err[k].item()
        sq = _squares(err, largest)
        if not math.isfinite(sq) and not bool(torch.isfinite(oc).all()):
            bad = ~torch.isfinite(oc)
            first = (i + bad.nonzero()[:FIRST_SHOWN].reshape(-1)).tolist()
            return "NaN or infinity where the reference is finite", first
        err_sq += sq
        if largest > worst:
            worst, worst_at = largest, i + k
        if largest <= atol:
            continue
        bad = err > rc.abs().mul_(tol.rtol).add_(atol)
        if bool(bad.any()):
            n_bad += int(bad.sum())
            if len(first) < FIRST_SHOWN:
                first += (i + bad.nonzero()[: FIRST_SHOWN - len(first)].reshape(-1)).tolist()
    if n_bad:
        return (
            f"{n_bad} of {r.numel()} elements outside atol={atol:.2e} rtol={tol.rtol:.0e}"
            f" (max abs error {worst:.3e} at flat index {worst_at})"
        ), first
    if norm > 0:
        rel = err_sq**0.5 / norm
        if rel > tol.rel_l2:
            return f"relative L2 error {rel:.3e} > {tol.rel_l2:.0e}", [worst_at]
    return None, []


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


NARROW_SAMPLE = 4096  # elements drawn for the check below
NARROW_MARGIN = 0.45  # how many more of the candidate's than of the reference's may be 16-bit
_NARROW = (torch.float16, torch.bfloat16)


def narrowed(out: torch.Tensor, ref: torch.Tensor, generator: torch.Generator) -> str | None:
    """Why ``out`` looks computed or stored in 16 bits where ``ref`` is float32, or None: of a
    random sample of its nonzero elements, a share of 16-bit (float16 or bfloat16) values
    larger than the reference's at the same places by ``NARROW_MARGIN``. The harness checks
    each output's dtype, but in the candidate's own process: patched out, a float16 answer
    became float32 in the copy into the judge's slot and passed within the tolerance; one element in 32 nudged off a 16-bit value then passed a
    check of every element (1.58x against 0.98x). An answer nudged off 16-bit values everywhere is beyond any
    check of values (docs/evaluator.md). Zeros say nothing (an exact 0 where the reference has
    float32 noise is no sign of 16 bits); where fewer than 1% of the draw is nonzero, it is
    drawn again from the nonzero elements alone, and fewer than 64 of them is no evidence."""
    if ref.dtype != torch.float32 or out.shape != ref.shape or ref.numel() < 64:
        return None
    n = min(NARROW_SAMPLE, ref.numel())
    where = torch.randint(0, ref.numel(), (n,), generator=generator).to(ref.device)
    o, r = out.reshape(-1)[where], ref.reshape(-1)[where]
    nonzero = o != 0
    count = int(nonzero.sum())
    if count * 100 < n:
        # Mostly zeros: the draw is taken again from the nonzero elements alone. Taken as no
        # evidence, a float16 answer to a ReLU whose output was 99.9% zeros passed
        # (attack_sparse_float16.py).
        places = out.reshape(-1).nonzero().reshape(-1)
        if places.numel() < 64:
            return None
        pick = torch.randint(0, places.numel(), (n,), generator=generator).to(places.device)
        where = places[pick]
        o, r = out.reshape(-1)[where], ref.reshape(-1)[where]
        nonzero = torch.ones_like(o, dtype=torch.bool)
        count = n
    o, r = o[nonzero], r[nonzero]
    for dtype in _NARROW:
        own = int((o.to(dtype).float() == o).sum()) / count
        theirs = int((r.to(dtype).float() == r).sum()) / count
        if own - theirs >= NARROW_MARGIN:
            name = str(dtype).removeprefix("torch.")
            return (
                f"{own:.0%} of {count} nonzero elements drawn are {name} values, against "
                f"{theirs:.0%} of the reference's: computed or stored in less than float32"
            )
    return None
