"""The judge: a trusted process that draws every input, drives two isolated processes alike (the
candidate, and a runner of the reference) over channels, compares every output itself, and forms
the verdict.

Both processes run the same harness under the same isolation, each on its own copy of inputs the
judge drew fresh for that call (nothing can be remembered from an earlier call) and copied into
buffers it lent; each hands its outputs over into slots the judge lent, and every output, of the
correctness trials and of the timed calls alike, is compared on the device where it was
computed. The harness seals each output as its call returned it and the judge seals the slot
again after the comparison: an answer written later, by a thread or a stream the candidate left
running, does not pass for the call's. While one runs, the other is stopped, so neither can
slow the other. Each reports its call's device time by its events; the judge checks it against
its own clock around the call and the hand-over, and the reference runner (trusted code) shows
what an honest process's difference is: a candidate whose difference is larger let work escape
its events.
"""

from __future__ import annotations

import secrets
import socket
import time
from typing import Any

import torch

from htam.evaluate import buffers, channel, frames
from htam.evaluate.frames import Job
from htam.evaluate.judge import (
    exact,
    fresh_pages,
    gradients,
    judge_outputs,
    judge_timing,
    lending,
    phases,
    shifted,
    staging,
)
from htam.evaluate.judge.runner import Runner, Verdict, jsonable
from htam.evaluate.judge.trusted_jobs import (
    Emitter,
    as_list,
    build,
    inputs_for,
    one_line,
    task_module,
    unjudgeable,
)
from htam.status import Status

_perf = time.perf_counter
_clock = time.monotonic


class Judge:
    def __init__(self, job: Job, emit: Emitter, cand: Runner, ref: Runner):
        self.job, self.emit, self.cand, self.ref = job, emit, cand, ref
        self.device = job.device
        self.call_timeout_s = job.call_timeout_s
        self.first_call_timeout_s = job.compile_timeout_s
        self.marks: dict[str, float] = {"entered": _clock()}
        self.lent: list[buffers.Lent] = []
        self.first_call_s: float | None = None
        self.copy_ms = 0.0
        self.grad_specs: list | None = None  # a backward task's grad_output shapes
        self.draws = torch.Generator().manual_seed(secrets.randbits(63))  # compare.narrowed
        self.shifter: shifted.Shifter | None = None  # shifted.py, for floating outputs
        # the configuration's module, constructor args and seed
        self.model_args: tuple[Any, list, int] = (None, [], 0)
        self.notes: dict[int | str, str] = {}  # what the result should say: float64, retimed
        self.exact_budget = exact.byte_budget(job.memory_limit_mb)  # float64 copies
        self._probe = torch.empty(1, device="cuda") if self.device == "cuda" else None
        self.held = staging.Held(self.device)  # how a round's inputs are held (staging.py)

    def both(self, request: channel.Request, timeout_s: float) -> None:
        for runner in (self.ref, self.cand):
            runner.ask(request, channel.Ready, timeout_s)

    # ------------------------------------------------------------------ per configuration

    def setup(self, index: int, extra: int | None, seed: int):
        """Inputs and lent buffers of one configuration; both runners build their model with the
        same constructor arguments and seed. The judge runs the reference once to learn the
        outputs' shapes (and how long a call takes, for the limits)."""
        module = task_module(self.job, extra)
        init_args = list(module.get_init_inputs())
        self.model_args = (module, init_args, self.job.init_seed)
        reference = build(module.Model, init_args, self.job.init_seed, self.device)
        self.grad_specs = None
        if gradients.is_backward(module):  # a call is a training step: grad_outputs are inputs
            x = inputs_for(module, seed, self.device)
            self.grad_specs = gradients.output_specs(reference, x)
        sample = self.inputs(module, seed)
        key = _secret()
        before = staging.seals(sample, key)
        t0 = _perf()
        outs = self.step(reference, sample)
        self.sync()
        if index == 0:  # limits that follow the reference's own cost
            ref_s = _perf() - t0
            self.call_timeout_s = max(self.call_timeout_s, 50 * ref_s)
            self.emit(frames.Stage(stage="reference", run_s=30 + 2000 * ref_s))
        if why := unjudgeable(outs):
            raise Verdict.unjudgeable(why)
        specs = [(list(o.shape), o.dtype) for o in outs]
        tensor_bytes = staging.nbytes(sample) + staging.nbytes(outs)
        self.held = staging.Held(
            self.device,
            staging=staging.seals(sample, key) == before,  # the reference left them as they were
            large=tensor_bytes >= staging.LARGE_BYTES,
            trims=staging.trims(tensor_bytes, self.device),
        )
        # the lent buffers need only the inputs' shapes: the draw goes before they are made
        # (held beside them, it was a third copy of the inputs at the judge's peak)
        sample = [_shape_of(v) for v in sample]
        del reference, outs
        if self.device == "cuda":
            # what the reference's run here left in this process's allocator goes back to the
            # card before the buffers are lent (untimed: nothing is being measured)
            torch.cuda.empty_cache()
        args = jsonable(init_args, "constructor")
        self.both(
            channel.Model(config=index, init_args=args, seed=self.job.init_seed),
            self.call_timeout_s + self.first_call_timeout_s,
        )
        grads = len(self.grad_specs or ())
        for runner in (self.ref, self.cand):
            lending.lend_to(
                runner, index, sample, specs, grads, self.device, self.call_timeout_s, self.lent
            )
        return module

    def inputs(self, module, seed: int | None = None) -> list:
        """A call's inputs; a backward task's end with its grad_outputs. Each call's inputs, and
        its grad_outputs, come from a secret of their own (``seed``: one that ``setup`` drew and
        also uses): from one secret plus public offsets, a candidate that recovered the secret
        from trial 0's inputs (torch's CPU generator keeps 32 bits of a seed) knew every later
        call's."""
        x = inputs_for(module, _secret() if seed is None else seed, self.device)
        if self.grad_specs is None:
            return x
        return x + gradients.draw_grad_outputs(self.grad_specs, _secret(), self.device)

    def step(self, model, x: list) -> list:
        if self.grad_specs is None:
            return as_list(model(*x))
        n = len(self.grad_specs)
        return gradients.training_step(model, x[: len(x) - n], x[len(x) - n :])

    # ------------------------------------------------------------------ one call

    def call(self, runner: Runner, x: list, timeout_s: float, where: str) -> tuple:
        """``runner`` computes on a copy of ``x`` and hands its outputs over, alone on the
        machine. Returns its device ms by its events, what its call and hand-over took on the
        judge's clock beyond the events and the known overheads, the busy probe after it
        (the candidate's; 0 for the reference's runner), and the anonymous memory its process
        faulted in during the call (read while it is stopped, and once it has answered; None
        off the CPU)."""
        other = self.cand if runner is self.ref else self.ref
        if not other.stopped:
            other.freeze(True)
        trims = self.held.trims
        if trims:  # its allocator's cache taken again, before the inputs are in place
            runner.ask(channel.Cache(hold=True), channel.Ready, self.call_timeout_s)
            runner.freeze(True)
        for buf, v in zip(runner.ins, x, strict=True):
            if buf is not None and buf is not v:
                buf.copy_(v)
        self.sync()
        key = _secret()
        thaw = runner.stopped
        if thaw:
            runner.check_still()  # the stopped period, before the clock starts
        anon0 = fresh_pages.before(runner.pid, self.device)
        t0 = _perf()
        if thaw:
            # The thaw is on the clock, for both runners alike: a helper woken by it can work
            # on the inputs already in place before the call arrives (a C++
            # candidate reported 13.7x for work done between the thaw and the clock).
            runner.freeze(False, checked=True)
        done = runner.ask(channel.Call(key=key), channel.Done, timeout_s)
        t1 = _perf()
        grew = fresh_pages.grew(runner.pid, anon0)
        probe = 0.0 if runner.trusted else self._probe_ms()  # device work left running
        t2 = _perf()
        collected = runner.ask(channel.Collect(), channel.Done, self.call_timeout_s)
        t3 = _perf()
        if trims:  # off the clock: the other runner's call and the judge's work need it
            runner.ask(channel.Cache(hold=False), channel.Ready, self.call_timeout_s)
        runner.freeze(True)
        if collected.problem:
            raise runner._fail(Status.INCORRECT, f"{where}: {collected.problem}")
        for k, (buf, v) in enumerate(zip(runner.ins, x, strict=True)):
            # the reference may work in place on its own copy (`x.mul_(2)`
            # in a task's forward was blamed on every candidate beside it)
            if not runner.trusted and buf is not None and not torch.equal(buf, v):
                raise runner._fail(Status.REJECTED, f"the solution modified its inputs (input {k})")
        if runner.trusted:
            self.held.check(runner.ins, where)
        if len(done.seals) != len(runner.slots):
            raise runner._fail(Status.REJECTED, f"{where}: {len(done.seals)} seals for the outputs")
        runner.sealed = (key, done.seals)
        hidden = judge_timing.hidden_ms(
            (t1 - t0) * 1e3, (t3 - t2) * 1e3, done.ms, runner.baseline_ms, self.copy_ms
        )
        return done.ms, hidden, probe, grew

    def round(self, x: list, where: str, timeout_s: float, cand_first: bool) -> judge_timing.Sample:
        """One round on inputs ``x`` (a list the judge's own: staged in place)."""
        self.stage(x)
        self.held.seal(self.ref.ins, x)
        order = (self.cand, self.ref) if cand_first else (self.ref, self.cand)
        got = {r.name: self.call(r, x, timeout_s, where) for r in order}
        (c, ch, probe, c_grew), (r, rh, _, r_grew) = got[self.cand.name], got[self.ref.name]
        if self.grad_specs is None:  # a training step's gradients may live across calls
            fresh_pages.check(self.cand.slots, c_grew, r_grew, where)
        outputs = judge_outputs.Round(x, where, self.cand.slots, self.ref.slots, self.cand.sealed)
        for k, note in judge_outputs.check(outputs, self.rules()).items():
            self.notes.setdefault(k, note)
        self.held.release()  # the comparison's slices
        self.cand.check_still()
        return judge_timing.Sample(c, ch, r, rh, probe)

    def rules(self) -> judge_outputs.Rules:
        exact = None
        if self.grad_specs is None:  # a training step has no float64 second opinion
            exact = judge_outputs.Exact(*self.model_args, self.device, self.exact_budget)
        return judge_outputs.Rules(self.job.tolerances, self.draws, exact)

    def stage(self, x: list) -> None:
        """The round's inputs ``x`` held in the reference runner's lent inputs (staging.py)."""
        self.held.stage(self.ref.ins, x)

    def sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()

    def run(self) -> frames.Verdict:
        return phases.run(self)

    def _probe_ms(self) -> float:
        """Host time of a tiny kernel right after the candidate said it was done: long when the
        device is still busy with work the candidate left behind."""
        if self._probe is None:  # no device to probe (the CPU)
            return 0.0
        t0 = _perf()
        self._probe.fill_(1.0)
        torch.cuda.synchronize()
        return (_perf() - t0) * 1e3

    def close(self) -> None:
        for lent in self.lent:
            lent.free()
        for runner in (self.cand, self.ref):
            runner.close()


def _shape_of(value):
    """A tensor's shape and dtype without its memory (the meta device); a plain value as is."""
    if isinstance(value, torch.Tensor):
        return torch.empty(value.shape, dtype=value.dtype, device="meta")
    return value


def _secret() -> int:
    return secrets.randbits(63)


def run(job: Job, emit: Emitter, cand_sock: socket.socket, ref_sock: socket.socket) -> None:
    if job.candidate is None or job.runner is None:
        raise ValueError("a judge job without its runners")
    cand = Runner(cand_sock, job.candidate, trusted=False)
    ref = Runner(ref_sock, job.runner, trusted=True)
    judge = Judge(job, emit, cand, ref)
    try:
        if job.device == "cuda":
            torch.empty(1, device="cuda")
        judge.marks["device_ready"] = _clock()
        emit(judge.run())
    except Verdict as v:
        emit(v.record())
    except torch.cuda.OutOfMemoryError as exc:
        emit(Verdict.unjudgeable(one_line(exc)).record())
    finally:
        for sock in (cand_sock, ref_sock):
            try:
                channel.send(sock, channel.Exit())
            except OSError:
                pass
        judge.close()
