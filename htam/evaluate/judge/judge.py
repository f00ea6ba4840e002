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

from htam.evaluate import buffers, channel
from htam.evaluate.eval_config import Tolerance
from htam.evaluate.judge import (
    exact,
    gradients,
    judge_outputs,
    judge_timing,
    kernel_probe,
    shifted,
)
from htam.evaluate.judge.runner import Runner, Verdict, jsonable
from htam.evaluate.judge.trusted_jobs import (
    Emitter,
    as_list,
    build,
    configs,
    inputs_for,
    task_module,
    unjudgeable,
)

_perf = time.perf_counter
_clock = time.monotonic


class Judge:
    def __init__(self, job: dict, emit: Emitter, cand: Runner, ref: Runner):
        self.job, self.emit, self.cand, self.ref = job, emit, cand, ref
        self.device = job["device"]
        self.tol = {k: Tolerance(**v) for k, v in job["tolerances"].items()}
        self.cfg = job["timing"]
        self.call_timeout_s = job["call_timeout_s"]
        self.first_call_timeout_s = job["compile_timeout_s"]
        self.marks: dict[str, float] = {"entered": _clock()}
        self.lent: list[buffers.Lent] = []
        self.first_call_s: float | None = None
        self.copy_ms = 0.0
        self.grad_specs: list | None = None  # a backward task's grad_output shapes
        self.probes: list[float] = []
        self.draws = torch.Generator().manual_seed(secrets.randbits(63))  # compare.narrowed
        self.shifter: shifted.Shifter | None = None  # shifted.py, for floating outputs
        # the configuration's module, constructor args and seed
        self.model_args: tuple[Any, list, int] = (None, [], 0)
        self.notes: dict[int | str, str] = {}  # what the result should say: float64, retimed
        self.exact_budget = exact.byte_budget(job.get("memory_limit_mb"))  # float64 copies
        self._probe = torch.empty(1, device="cuda") if self.device == "cuda" else None

    def both(self, message: dict, timeout_s: float) -> None:
        for runner in (self.ref, self.cand):
            runner.ask(message, timeout_s)

    # ------------------------------------------------------------------ per configuration

    def setup(self, index: int, extra: int | None, seed: int):
        """Inputs and lent buffers of one configuration; both runners build their model with the
        same constructor arguments and seed. The judge runs the reference once to learn the
        outputs' shapes (and how long a call takes, for the limits)."""
        module = task_module(self.job, extra)
        init_args = list(module.get_init_inputs())
        self.model_args = (module, init_args, self.job["init_seed"])
        reference = build(module.Model, init_args, self.job["init_seed"], self.device)
        self.grad_specs = None
        if gradients.is_backward(module):  # a call is a training step: grad_outputs are inputs
            x = inputs_for(module, seed, self.device)
            self.grad_specs = gradients.output_specs(reference, x)
        sample = self.inputs(module, seed)
        t0 = _perf()
        outs = self.step(reference, sample)
        self.sync()
        if index == 0:  # limits that follow the reference's own cost
            ref_s = _perf() - t0
            self.call_timeout_s = max(self.call_timeout_s, 50 * ref_s)
            self.emit({"type": "stage", "stage": "reference", "run_s": 30 + 2000 * ref_s})
        if why := unjudgeable(outs):
            raise Verdict("error", why)
        specs = [(list(o.shape), o.dtype) for o in outs]
        del reference, outs
        if self.device == "cuda":
            # what the reference's run here left in this process's allocator goes back to the
            # card before the buffers are lent (untimed: nothing is being measured)
            torch.cuda.empty_cache()
        args = jsonable(init_args, "constructor")
        self.both(
            {"op": "model", "config": index, "init_args": args, "seed": self.job["init_seed"]},
            self.call_timeout_s + self.first_call_timeout_s,
        )
        for runner in (self.ref, self.cand):
            self._lend_to(runner, index, sample, specs)
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

    def _lend_to(self, runner: Runner, index: int, sample: list, specs: list) -> None:
        runner.ins, runner.slots, fds, desc_in = [], [], [], []
        for k, x in enumerate(sample):
            if isinstance(x, torch.Tensor):
                lent = self._lend(list(x.shape), x.dtype, f"input {k}")
                runner.ins.append(lent.tensor)
                desc_in.append({"tensor": lent.descriptor})
                fds += [lent.fd] if lent.fd is not None else []
            else:
                runner.ins.append(None)
                desc_in.append({"value": jsonable(x, f"input {k}")})
        desc_out = []
        for k, (shape, dtype) in enumerate(specs):
            lent = self._lend(shape, dtype, f"output {k}")
            runner.slots.append(lent.tensor)
            desc_out.append(lent.descriptor)
            fds += [lent.fd] if lent.fd is not None else []
        grads = len(self.grad_specs or ())
        runner.ask(
            {
                "op": "buffers",
                "config": index,
                "inputs": desc_in,
                "outputs": desc_out,
                "grad_outputs": grads,
            },
            self.call_timeout_s,
            fds,
        )

    def _lend(self, shape: list[int], dtype: torch.dtype, what: str) -> buffers.Lent:
        if buffers.dtype_name(dtype) not in buffers.DTYPES:
            raise Verdict("error", f"the reference's {what} has dtype {dtype}, not supported")
        lent = buffers.lend(shape, buffers.dtype_name(dtype), self.device)
        self.lent.append(lent)
        return lent

    # ------------------------------------------------------------------ one call

    def call(self, runner: Runner, x: list, timeout_s: float, where: str) -> tuple:
        """``runner`` computes on a copy of ``x`` and hands its outputs over, alone on the
        machine. Returns its device ms by its events and what its call and hand-over took on
        the judge's clock beyond the events and the known overheads."""
        other = self.cand if runner is self.ref else self.ref
        if not other.stopped:
            other.freeze(True)
        for buf, v in zip(runner.ins, x, strict=True):
            if buf is not None:
                buf.copy_(v)
        self.sync()
        key = _secret()
        thaw = runner.stopped
        if thaw:
            runner.check_still()  # the stopped period, before the clock starts
        t0 = _perf()
        if thaw:
            # The thaw is on the clock, for both runners alike: a helper woken by it can work
            # on the inputs already in place before the call arrives (a C++
            # candidate reported 13.7x for work done between the thaw and the clock).
            runner.freeze(False, checked=True)
        done = runner.ask({"op": "call", "key": key}, timeout_s)
        t1 = _perf()
        if not runner.trusted:
            self.probes.append(self._probe_ms())  # device work the candidate left running
        t2 = _perf()
        collected = runner.ask({"op": "collect"}, self.call_timeout_s)
        t3 = _perf()
        runner.freeze(True)
        if collected.problem:
            raise runner._fail("incorrect", f"{where}: {collected.problem}")
        for k, (buf, v) in enumerate(zip(runner.ins, x, strict=True)):
            # the reference may work in place on its own copy (`x.mul_(2)`
            # in a task's forward was blamed on every candidate beside it)
            if not runner.trusted and buf is not None and not torch.equal(buf, v):
                raise runner._fail("rejected", f"the solution modified its inputs (input {k})")
        if len(done.seals) != len(runner.slots):
            raise runner._fail("rejected", f"{where}: {len(done.seals)} seals for the outputs")
        runner.sealed = (key, done.seals)
        hidden = judge_timing.hidden_ms(
            (t1 - t0) * 1e3, (t3 - t2) * 1e3, done.ms, runner.baseline_ms, self.copy_ms
        )
        return done.ms, hidden

    def round(self, x: list, where: str, timeout_s: float, cand_first: bool) -> tuple:
        order = (self.cand, self.ref) if cand_first else (self.ref, self.cand)
        got = {r.name: self.call(r, x, timeout_s, where) for r in order}
        judge_outputs.check(self, x, where)
        self.cand.check_still()
        return got[self.cand.name], got[self.ref.name]

    def sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()

    # ------------------------------------------------------------------ the whole job

    def run(self) -> dict:
        for runner in (self.ref, self.cand):
            runner.baseline_ms = judge_timing.calibrate(runner, self.call_timeout_s)
        # One baseline for both: the same harness under the same isolation has the same
        # overhead, and what is policed is the difference of the two runners' hidden time, in
        # which a shared baseline cancels exactly. Two separate calibrations differed by up to
        # 0.12 ms on the H200, enough to reject a reference against itself.
        common = min(self.ref.baseline_ms, self.cand.baseline_ms)
        self.ref.baseline_ms = self.cand.baseline_ms = common
        self.ref.ask({"op": "build"}, self.first_call_timeout_s)
        built = self.cand.ask({"op": "build"}, self.first_call_timeout_s)
        self.marks["built"] = _clock()
        self.emit({"type": "stage", "stage": "built"})
        seeds, base = self.job["seeds"], None
        for index, (extra, trial_seeds) in enumerate(configs(self.job)):
            module = self.setup(index, extra, _secret())
            base = base or (
                index,
                module,
                self.ref.slots,
                self.cand.slots,
                self.ref.ins,
                self.cand.ins,
                self.grad_specs,
                self.model_args,
            )
            for t in range(len(trial_seeds)):
                first = index == 0 and t == 0
                where = f"trial {t}" if extra is None else f"trial {len(seeds) + index - 1}"
                t0 = _perf()
                timeout_s = self.first_call_timeout_s if first else self.call_timeout_s
                self.round(self.inputs(module), where, timeout_s, True)
                self.first_call_s = self.first_call_s or _perf() - t0
                if first:
                    self.copy_ms = judge_timing.copy_ms(self)
        if base is None:
            raise RuntimeError("no configuration was judged")
        index, module, self.ref.slots, self.cand.slots, self.ref.ins, self.cand.ins = base[:6]
        self.grad_specs, self.model_args = base[6:]
        if len(configs(self.job)) > 1:
            self.both({"op": "use", "config": index}, self.call_timeout_s)
        if shifted.applies(self.ref.slots):
            grads = len(self.grad_specs or ())
            self.shifter = shifted.Shifter(*self.model_args, self.device, grads)
            x = self.shifter.first(self.inputs(module))
            if x is not None:
                where = f"the trial on {self.shifter.inputs()}"
                self.round(x, where, self.call_timeout_s, True)
                why = self.shifter.unplanted(x[: len(x) - len(self.grad_specs or ())])
                if why:
                    self.notes["outliers"] = (
                        f"no outliers planted ({why}): a loss over a sample of the inputs would "
                        "pass unseen"
                    )
        self.marks["trials_done"] = _clock()
        timing, paired, escape = judge_timing.timed(self, module)
        self.marks["timed"] = _clock()
        if self.job.get("kernel_required"):
            kernel_probe.check(self, module)  # last: spoiled results may corrupt its state
        return {
            "timing": timing,
            "paired_reference": paired,
            "escape": escape,
            "compile_s": built.compile_s,
            "import_s": built.import_s,
            "first_call_s": self.first_call_s,
            "marks": self.marks,
            "notes": list(self.notes.values()),
        }

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


def _secret() -> int:
    return secrets.randbits(63)


def run(job: dict, emit: Emitter, cand_sock: socket.socket, ref_sock: socket.socket) -> None:
    cand = Runner(cand_sock, job["candidate"], trusted=False)
    ref = Runner(ref_sock, job["runner"], trusted=True)
    judge = Judge(job, emit, cand, ref)
    try:
        if job["device"] == "cuda":
            torch.empty(1, device="cuda")
        judge.marks["device_ready"] = _clock()
        emit({"type": "verdict", "status": "ok", "message": "", **judge.run()})
    except Verdict as v:
        emit({"type": "verdict", "status": v.status, "message": v.message})
    except torch.cuda.OutOfMemoryError as exc:
        from htam.evaluate.judge.trusted_jobs import one_line

        emit({"type": "verdict", "status": "error", "message": one_line(exc)})
    finally:
        for sock in (cand_sock, ref_sock):
            try:
                channel.send(sock, {"op": "exit"})
            except OSError:
                pass
        judge.close()
