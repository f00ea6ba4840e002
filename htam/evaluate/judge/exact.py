"""A second opinion from exact arithmetic, for output elements float32 cannot pin down.

Some tasks compute values whose float32 result is rounding noise: KernelBench level 2's
23_Conv3d_GroupNorm_Mean takes the mean of a group norm's output, exactly 0 in exact arithmetic,
and torch's own float32 answer is 7.8% (relative L2) from the float64 one. Any other order of
summation, however correct, lands elsewhere in that noise and fails a 2e-3 bound (H200: 1.9).

So when a float32 output fails, the judge computes the reference once more, in float32 and then
in float64, on the same inputs and parameters. The second opinion applies only where it is sound:

- the judge's float32 run must match the reference runner's output (the same function: a lazily
  built or stateful model is not), and two float64 runs under different random seeds must agree
  (dropout in training mode does not);
- every value involved is finite;
- only the elements that are **zero to float32 precision** are judged against float64: those
  whose float64 value is smaller than the float32 reference's own error there. There the
  candidate passes within ``FACTOR`` times the reference's error (L2 over those elements); every
  other element keeps the float32 verdict against the reference.

Where every element is zero to float32 precision, a constant near 0 passes too: the result says
so, and its speed is no evidence of work.

A reference whose whole float32 answer is beyond the tolerance from float64 is ill-conditioned:
on a GPU, a deep network of convolutions (cuDNN multiplies float32 in TF32 by default) and
training-mode batch norms, such as KernelBench level 3's ResNet101, MobileNets and EfficientNet-B0,
is 7.8e-2 (relative L2) from its float64 value, and a one-ulp change of its input moves it as far
as any other order of the same sums. There the float32 tolerance judges rounding, not work, and
:func:`judge_ill_conditioned` judges the candidate against float64 instead: it passes within
``NOISY_FACTOR`` times the reference's own distance (an output of zeros is 13x or more on those
tasks). A reference further than ``MAX_NOISE`` from float64 carries too little of the answer to
judge anything by, and the float32 verdict stands. Nothing the candidate does reaches these runs:
the judge builds the model and holds the inputs. Tensors too large for the second opinion's
working set (:func:`working_bytes`) get none (:func:`byte_budget`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from htam.evaluate.eval_config import Tolerance
from htam.evaluate.judge.compare import compare_tensor
from htam.evaluate.judge.trusted_jobs import as_list, build

# How much further from the exact result than torch's own float32 answer a candidate may be: the
# candidate's order of summation (blocks of 1,024, then the blocks) was 7x further on task 23.
FACTOR = 10.0
NOISY_FACTOR = 3.0
MAX_NOISE = 0.25  # relative L2 from float64 beyond which a reference is not an answer
# What a second opinion may hold at its peak (working_bytes), beside the tensors the judge holds
# anyway (the inputs, both runners' outputs)
MAX_BYTES = 2 << 30
# Elements judged at a time: the comparison's temporaries (float64 distances, masks, the parts
# picked out) stay at about SLICE_BYTES an element of a slice whatever the output's size, and a
# GPU synchronizes only at the end.
SLICE = 1 << 20
SLICE_BYTES = 40


def byte_budget(memory_limit_mb: int | None) -> int:
    """How much a second opinion may hold (:func:`working_bytes`): MAX_BYTES, and an eighth of
    the evaluation's host memory limit, so that a candidate failing on purpose cannot make the
    judge's second opinion outgrow the limit (which would be charged to the reference)."""
    return MAX_BYTES if not memory_limit_mb else min(MAX_BYTES, (memory_limit_mb << 20) // 8)


def _floats(tensors) -> int:
    return sum(t.numel() for t in tensors if torch.is_tensor(t) and t.is_floating_point())


def working_bytes(x: list, outs: list, params: int = 0, scratch: int = 0) -> int:
    """What a second opinion holds at its peak for inputs ``x``, outputs ``outs``, a model of
    ``params`` floating-point parameters and buffers and ``scratch`` bytes of the model's own
    intermediate tensors in float32, beside what the judge holds anyway. Two moments are the
    largest: a float64 run (the inputs and parameters in float64, 8 bytes an element; the
    judge's float32 outputs, 4, and two float64 runs, 16; the run's intermediates, twice their
    float32 size) and the comparison (the float32 and one float64 run kept, 12; the mask of
    elements zero to float32 precision and its complement, 2; the candidate's and the
    reference's other elements, compacted, 8; a slice's temporaries). tests/evaluate/test_exact.py
    measures it."""
    out = _floats(outs)
    compare = 22 * out + SLICE_BYTES * min(out, SLICE)
    return max(8 * (_floats(x) + params) + 20 * out + 2 * scratch, compare)


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) << 10
    return 0


def _scratch(run, device: str) -> tuple[list, int]:
    """``run()``'s outputs and the bytes of intermediates it held beyond them at its peak: the
    process's peak resident set (reset first) or, on a GPU, the allocator's peak."""
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        out = run()
        peak = torch.cuda.max_memory_allocated() - before
    else:
        try:  # the peak resident set starts again from the current one
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:  # not offered (gVisor): the peak since start counts, more than enough
            pass
        before = _status_bytes("VmRSS:")
        out = run()
        peak = _status_bytes("VmHWM:") - before
    held = sum(t.untyped_storage().nbytes() for t in out if torch.is_tensor(t))
    return out, max(0, peak - held)


def _parameters(model) -> int:
    if not isinstance(model, torch.nn.Module):
        return 0
    return _floats(list(model.parameters()) + list(model.buffers()))


def reference_runs(
    module, init_args: list, seed: int, device: str, x: list, outs: list, budget: int
):
    """(float32 outputs, float64 outputs) of the reference on ``x``, the float64 ones from the
    same parameters cast; None where no sound second opinion exists (a working set beyond
    ``budget`` bytes, an op without a float64 kernel, a result that depends on the random
    stream)."""
    if working_bytes(x, outs) > budget:
        return None
    try:
        model = build(module.Model, init_args, seed, device)
        with torch.no_grad():  # also builds lazily made parameters, in float32
            narrow, scratch = _scratch(lambda: as_list(model(*x)), device)
        if working_bytes(x, outs, _parameters(model), scratch) > budget:
            return None
        if isinstance(model, torch.nn.Module):
            model = model.double()
        wide_x = [v.double() if torch.is_tensor(v) and v.is_floating_point() else v for v in x]
        torch.manual_seed(1)
        with torch.no_grad():
            wide = as_list(model(*wide_x))
        torch.manual_seed(2)
        with torch.no_grad():
            again = as_list(model(*wide_x))
    except Exception:  # noqa: BLE001 - no second opinion: the float32 verdict stands
        return None
    finally:
        if device == "cuda":
            torch.cuda.empty_cache()
    for a, b in zip(wide, again, strict=True):
        if torch.is_tensor(a) and not torch.equal(a, b):
            return None
    return narrow, wide


@dataclass
class _Sums:
    """What the comparison needs of every element, gathered a slice at a time: which elements
    are zero to float32 precision (float32's answer there carries no significant digit), the
    largest rounding of the float32 reference anywhere, the L2 distances from float64 over
    those elements (of the reference and of the candidate), and the candidate's largest
    distance from float64 over the others."""

    zero: torch.Tensor
    noise_max: torch.Tensor
    ref_sq: torch.Tensor
    err_sq: torch.Tensor
    off_max: torch.Tensor


def _sums(o: torch.Tensor, r: torch.Tensor, e: torch.Tensor) -> _Sums:
    acc = [torch.zeros((), dtype=torch.float64, device=e.device) for _ in range(4)]
    zero = torch.empty(e.shape, dtype=torch.bool, device=e.device)
    for i in range(0, e.numel(), SLICE):
        ec, rc = e[i : i + SLICE], r[i : i + SLICE]
        noise = rc.double().sub_(ec).abs_()
        z = zero[i : i + SLICE]
        # an exact 0 for a value float64 does not round to 0 carries none either: its noise
        # equals the value
        torch.gt(noise, ec.abs(), out=z)
        z |= (rc == 0) & (ec != 0)
        off = o[i : i + SLICE].double().sub_(ec).abs_()
        acc[0] = torch.maximum(acc[0], noise.max())
        acc[1] += noise[z].square().sum()
        acc[2] += off[z].square().sum()
        acc[3] = torch.maximum(acc[3], off.masked_fill_(z, 0.0).max())
    return _Sums(zero, *acc)


def judge_against_exact(
    out: torch.Tensor, ref: torch.Tensor, narrow, exact, tol: Tolerance
) -> tuple[bool, str]:
    """(accepted, why) for an output that failed against the float32 reference ``ref``, given
    the judge's own float32 run ``narrow`` and the float64 run ``exact`` of the reference."""
    table = {"float32": tol}
    usable = all(torch.is_tensor(t) and t.shape == ref.shape for t in (narrow, exact))
    if not usable or narrow.dtype != ref.dtype or compare_tensor(narrow, ref, table):
        return False, ""  # not the reference's function: no second opinion
    o, r, e = (t.reshape(-1) for t in (out, ref, exact))
    if not all(bool(torch.isfinite(t).all()) for t in (o, r, e)):
        return False, ""
    sums = _sums(o, r, e)
    n = int(sums.zero.sum())
    if n == 0:
        return False, ""
    if n < e.numel():  # every other element keeps the float32 verdict
        keep = ~sums.zero
        problem = compare_tensor(o[keep], r[keep], table)
        del keep
        # or is as near float64 as float32's worst rounding in this output: where the reference
        # landed near its float64 value by chance, another order of the same sums did not
        # (a centred mean over rows with outliers planted, 1.6e-6 off against atol 1e-6).
        # Such elements are the few of the zeros that float32 hit by chance, never more than
        # the zeros themselves: one cancelling sum's noise (1e-3) beside a softmax (values
        # below it) let an answer of all zeros through, the softmax never
        # computed (cheat_exact_slack.py).
        slack = FACTOR * float(sums.noise_max)
        by_chance = e.numel() - n <= n
        if problem and (not by_chance or float(sums.off_max) > slack):
            return False, f"elements not zero to float32 precision: {problem}"
    ref_err, err = float(sums.ref_sq) ** 0.5, float(sums.err_sq) ** 0.5
    why = (
        f"{n} of {e.numel()} elements are zero to float32 precision (their float64 value is "
        f"below the float32 reference's own error): judged there against float64, the candidate "
        f"{err:.2e} from it (L2), the reference {ref_err:.2e}, within {FACTOR:.0f}x"
    )
    if n == e.numel():
        why += "; the whole output is 0 to float32 precision, so a constant near 0 passes too"
    return err <= FACTOR * ref_err, why


def _rel(a: torch.Tensor, e: torch.Tensor, scale: float) -> float:
    """The relative L2 distance of ``a`` from ``e``, a slice at a time (no whole-output
    float64 temporary: the working set stays what :func:`working_bytes` counts)."""
    sq = torch.zeros((), dtype=torch.float64, device=e.device)
    for i in range(0, e.numel(), SLICE):
        sq += a[i : i + SLICE].double().sub_(e[i : i + SLICE]).square_().sum()
    return float(sq) ** 0.5 / scale


def judge_ill_conditioned(
    out: torch.Tensor, ref: torch.Tensor, narrow, exact, tol: Tolerance
) -> tuple[bool, str]:
    """(accepted, why) for an output that failed against a float32 reference ``ref`` which is
    itself beyond the tolerance from the float64 run ``exact`` (relative L2, whole output)."""
    usable = all(torch.is_tensor(t) and t.shape == ref.shape for t in (narrow, exact))
    if not usable or narrow.dtype != ref.dtype or out.shape != ref.shape:
        return False, ""
    o, r, n, e = (t.reshape(-1) for t in (out, ref, narrow, exact))
    if not all(bool(torch.isfinite(t).all()) for t in (o, r, n, e)):
        return False, ""
    scale = float(torch.linalg.vector_norm(e))
    if scale == 0 or compare_tensor(r, e.to(r.dtype), {"float32": tol}) is None:
        return False, ""  # the reference is within its tolerance: the float32 verdict stands
    ref_err, own_err = _rel(r, e, scale), _rel(n, e, scale)
    # the judge's own float32 run is the same function, as noisy (not a stateful model)
    same = own_err <= NOISY_FACTOR * ref_err and ref_err <= NOISY_FACTOR * own_err
    if not same or ref_err > MAX_NOISE:
        return False, "" if not same else (
            f"the reference is {ref_err:.2e} from float64 (relative L2): too far to judge by"
        )
    err = _rel(o, e, scale)
    why = (
        f"the reference itself is {ref_err:.2e} from float64 (relative L2), beyond the float32 "
        f"tolerance: judged against float64, the candidate {err:.2e}, within "
        f"{NOISY_FACTOR:g}x the reference's"
    )
    return err <= NOISY_FACTOR * ref_err, why
