"""A generated solution run against its reference on this machine: the check the coverage
script (scripts/device/offline_coverage.py --check) and the fixture tests share.

The reference and ``ModelNew`` are built from the same seed and fed the same inputs; the outputs
are compared by the evaluator's own comparison (htam.evaluate.judge.compare) and tolerances.
"""

from __future__ import annotations

import hashlib
import importlib.util
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from htam.evaluate.eval_config import TOLERANCES
from htam.evaluate.judge.compare import compare_tensor
from htam.tasks.module import load_task_module

UNCHECKED = "not checked"  # the verdict's start when the reference itself fails
REFERENCE_FAILS = "the reference fails at this size"
ILL_CONDITIONED = "ill-conditioned, the reference is off from float64 too"


def load_solution(code: str):
    """The solution as a module imported from a real file (Triton reads kernels' source)."""
    digest = hashlib.sha1(code.encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / "htam_offline_check" / f"sol_{digest}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(code)
    spec = importlib.util.spec_from_file_location(f"htam_check_{digest}", path)
    assert spec is not None and spec.loader is not None  # a .py path always has both
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Verdict:
    """A check's outcome: ``message`` is "correct" or why not; ``max_error`` the largest
    absolute difference from the reference where both are tensors of one shape (else None)."""

    message: str
    max_error: float | None = None

    @property
    def status(self) -> str:
        """correct, incorrect, error or unchecked (the message's first word, normalized)."""
        if self.message.startswith(UNCHECKED):
            return "unchecked"
        return self.message.split(":")[0].split(" ")[0]


def _parts(value) -> list:
    """A model's output as the evaluator's slots: a tuple or list is its items, else itself."""
    return list(value) if isinstance(value, (tuple, list)) else [value]


def compare_output(out, ref) -> str | None:
    """None when ``out`` matches ``ref`` (a tensor, or a tuple of outputs compared one by one,
    as the evaluator's slots are), else why not."""
    outs, refs = _parts(out), _parts(ref)
    if isinstance(ref, (tuple, list)) != isinstance(out, (tuple, list)) or len(outs) != len(refs):
        return f"{len(outs)} outputs for the reference's {len(refs)}"
    for k, (o, r) in enumerate(zip(outs, refs, strict=True)):
        why = (
            compare_tensor(o, r, TOLERANCES)
            if isinstance(r, torch.Tensor)
            else (None if o == r else f"{o!r} != {r!r}")
        )
        if why is not None:
            return why if len(refs) == 1 else f"output {k}: {why}"
    return None


def max_error(out, ref) -> float | None:
    """The largest absolute difference of two same-shaped floating tensors, or over the pairs
    of two tuples of them (None where it means nothing)."""
    if isinstance(out, (tuple, list)) and isinstance(ref, (tuple, list)):
        errors = [max_error(o, r) for o, r in zip(out, ref, strict=False)]
        known = [e for e in errors if e is not None]
        return max(known) if known and len(out) == len(ref) else None
    same = isinstance(out, torch.Tensor) and isinstance(ref, torch.Tensor)
    if not same or out.shape != ref.shape or not ref.is_floating_point() or ref.numel() == 0:
        return None
    diff = (out.double() - ref.double()).abs().nan_to_num(nan=float("inf"))
    both_nan = torch.isnan(out) & torch.isnan(ref)
    return float(diff.masked_fill(both_nan | (out == ref), 0.0).max())


def check_solution(source: str, code: str, device: str = "cpu") -> str:
    """ "correct", or what went wrong running ``code``'s ModelNew against ``source``'s Model
    (its own sizes, on ``device``). Starts with :data:`UNCHECKED` when the reference fails, or
    when the candidate differs from a reference that differs from its own float64 form (the
    comparison then measures rounding, not the candidate)."""
    return check(source, code, device).message


def check(source: str, code: str, device: str = "cpu") -> Verdict:
    """:func:`check_solution` with the largest absolute error beside its message."""
    ref_mod = load_task_module(source, "small", name="htam_check_ref")
    init = ref_mod.get_init_inputs()
    torch.manual_seed(1)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in ref_mod.get_inputs()]
    try:
        torch.manual_seed(0)
        model = ref_mod.Model(*init).to(device)
        with torch.no_grad():
            ref = model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
    except Exception as err:  # noqa: BLE001 - sizes tied by a literal (a shrunken task)
        return Verdict(f"{UNCHECKED}: {REFERENCE_FAILS} ({type(err).__name__}: {err})"[:200])
    try:
        sol = load_solution(code)
        torch.manual_seed(0)
        new = sol.ModelNew(*init).to(device)
        with torch.no_grad():
            out = new(*inputs)
    except Exception as err:  # noqa: BLE001 - any failure of generated code is the verdict
        return Verdict(f"error {type(err).__name__}: {str(err)[:160]}")
    why, worst = compare_output(out, ref), max_error(out, ref)
    if why is None:
        return Verdict("correct", worst)
    off = _reference_error(ref_mod, init, inputs, ref, device)
    if off is not None:  # at this size the reference's own rounding decides the result
        return Verdict(f"{UNCHECKED}: {ILL_CONDITIONED} ({off})", worst)
    return Verdict(f"incorrect: {why}", worst)


def _reference_error(ref_mod, init: list, inputs: list, ref, device: str) -> str | None:
    """How the float32 reference differs from the same model in float64 (same parameters and
    inputs), by the evaluator's comparison; None when it matches."""
    if not all(isinstance(r, torch.Tensor) and r.dtype == torch.float32 for r in _parts(ref)):
        return None
    torch.manual_seed(0)
    model = ref_mod.Model(*init).to(device).double()
    wide = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
            for x in inputs]  # fmt: skip
    with torch.no_grad():
        exact = model(*wide)
    narrow = [e.float() for e in _parts(exact)]
    return compare_output(ref, narrow if isinstance(exact, (tuple, list)) else narrow[0])
