"""What runs inside a candidate's (sandboxed, hostile) process: import the solution, build
``ModelNew`` when the judge says how, and run the calls the judge asks for.

Nothing here decides anything. The harness never holds the reference, its source or its outputs;
it reads inputs from buffers the judge lent and copies outputs into slots the judge lent, and it
reports each call's device time, which the judge checks against its own clock. Code the candidate
runs can subvert this file's checks, but then it only changes what the judge sees, and the judge
verifies what it sees. The clocks were captured when the fork server imported this module.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import sys
import threading
import time
import traceback

import torch

from htam.evaluate import buffers, channel, measure
from htam.evaluate.candidate import fresh_memory, kernels
from htam.evaluate.frames import CandidateJob
from htam.evaluate.host.compile_cache import CompileError, install_compile_cache
from htam.evaluate.judge import gradients
from htam.status import Status

_perf = time.perf_counter
_active_threads = threading.active_count
_excerpt_limit = 3000


def _excerpt(exc: BaseException) -> str:
    if isinstance(exc, CompileError):  # its message leads with the first error: kept whole
        return str(exc)
    return "".join(traceback.format_exception(exc))[-_excerpt_limit:]


def _is_compile_failure(exc: BaseException) -> bool:
    kind = type(exc)
    return isinstance(exc, CompileError) or (
        kind.__module__.startswith("triton") and "Compil" in kind.__name__
    )


def _import(path: str):
    spec = importlib.util.spec_from_file_location("htam_candidate", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules["htam_candidate"] = module  # Triton's JIT reads the source back through it
    spec.loader.exec_module(module)
    return module


class Harness:
    def __init__(self, sock: socket.socket, job: CandidateJob):
        self.sock = sock
        self.device = job.device
        self.models: dict[int, object] = {}
        self.inputs: dict[int, list] = {}
        self.slots: dict[int, list[torch.Tensor]] = {}
        self.grads: dict[int, int] = {}  # a backward task's grad_outputs, last of the inputs
        self.active = 0
        self.cls: type | None = None
        self.threads0 = _active_threads()
        self.once = measure.timer(self.device, job.l2_flush_mb)
        self.pending: list = []
        # the last collected call's outputs, held as a caller that keeps its last result would:
        # the next call's outputs may not share their storage
        self.held: list[torch.Tensor] = []
        # the reference's runner (trusted torch) is not checked for that: it holds nothing over,
        # which keeps a large task's outputs off the card once (scripts/device/gpu_memory.py)
        self.hold = job.hold_outputs
        self.reserve = 0  # what the GPU allocator held after the last call (Harness.cache)
        # the anonymous memory resident before the next call (read between calls, untimed)
        self.anon0: int | None = None
        self.kernels: kernels.Observer | None = None

    def send(self, message: dict) -> None:
        """A reply as a plain JSON object: code of the candidate's may stand in for any of this
        process's (attacks patch this method), so nothing here is trusted; the judge decodes
        each reply into one of ``channel``'s typed messages, or refuses it."""
        if self.hold and self.device == "cpu" and "seals" not in message:
            # what the next call starts from: read before the reply that lets the judge time it
            fresh_memory.release_free_heap()
            self.anon0 = fresh_memory.anon_bytes()
        channel.send(self.sock, message)

    def fail(self, status: channel.FailStatus, message: str) -> None:
        self.send({"type": "failed", "status": status, "message": message[-7000:]})

    # ------------------------------------------------------------------ stages

    def build(self, job: CandidateJob) -> bool:
        compile_s = install_compile_cache(job.extension_dir)
        self.kernels = kernels.install()
        t0 = _perf()
        try:
            module = _import(job.code_path)
        except BaseException as exc:  # noqa: BLE001 - anything the candidate raises is its failure
            self.fail(Status.COMPILE_ERROR, _excerpt(exc))
            return False
        cls = getattr(module, "ModelNew", None)
        if not isinstance(cls, type):
            self.fail(Status.COMPILE_ERROR, "the solution defines no class ModelNew")
            return False
        self.cls = cls
        self.send({"type": "built", "import_s": _perf() - t0, "compile_s": compile_s()})
        return True

    def model(self, msg: channel.Model) -> None:
        torch.manual_seed(msg.seed)
        if self.cls is None:
            raise RuntimeError("no ModelNew loaded before the init")
        model = self.cls(*msg.init_args)
        if isinstance(model, torch.nn.Module):
            model = model.to(self.device)
        self.models[msg.config] = model
        self.active = msg.config
        self.send({"type": "ready"})

    def lend(self, msg: channel.Buffers, fds: list[int]) -> None:
        fds = list(fds)

        def take(desc: dict) -> torch.Tensor:
            return buffers.borrow(desc, fds.pop(0) if "handle" not in desc else None)

        k = msg.config
        self.inputs[k] = [take(a["tensor"]) if "tensor" in a else a["value"] for a in msg.inputs]
        self.slots[k] = [take(d) for d in msg.outputs]
        self.grads[k] = msg.grad_outputs
        self.send({"type": "ready"})

    def call(self, key: int | None = None) -> None:
        """One timed call, answered at once: the judge's clock around it holds only the flush,
        the call, a device-wide synchronize and the outputs' seals (a null call, ``key`` None,
        for the judge's baseline of that overhead, times nothing the candidate wrote)."""
        result: list = []
        if key is None:
            ms, _, _ = self.once(_nothing, ())
        else:
            ms, _, _ = self.once(self._forward(result), self.inputs[self.active])
        self.pending = result[0] if result else []
        # Sealed as returned (the device is synchronized): the judge seals the slots again once
        # it has stopped this process, and any difference was written after the call.
        seals = (
            [buffers.seal(o, key) if type(o) is torch.Tensor else 0 for o in self.pending]
            if key is not None
            else []  # a null call returned nothing to seal
        )
        self.send({"type": "done", "ms": float(ms), "seals": seals if result else []})

    def _forward(self, result: list):
        model, inputs = self.models[self.active], self.inputs[self.active]
        n = len(inputs) - self.grads[self.active]

        def run(*args):
            if n == len(args):
                out = model(*args)
                # a tuple's or list's items taken inside the clock: a list subclass's
                # __iter__ did a third of a GELU after it
                result.append(list(out) if isinstance(out, (tuple, list)) else [out])
            else:  # a training step: the forward, then its gradients
                result.append(gradients.training_step(model, list(args[:n]), list(args[n:])))

        return run

    def probe(self) -> None:
        """The kernel probe: one untimed call with every result of the solution's own kernels
        spoiled (candidate/kernels.py), its outputs handed over like a call's; what the
        kernels' wrappers counted goes to the judge, which compares the outputs itself."""
        result: list = []
        observer = self.kernels
        if observer is None:  # the judge probes only a built solution
            raise RuntimeError("a kernel probe before the build")
        observer.start()
        raised = None
        try:
            self._forward(result)(*self.inputs[self.active])
            if self.device == "cuda":
                torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - a spoiled result may well make it fail
            raised = f"{type(exc).__name__}: {exc}"[:500]
        seen = observer.stop()
        if raised is None:
            self.pending = result[0]
            problem = self._check(self.pending, self.inputs[self.active], self.slots[self.active])
            if problem is None:
                for slot, o in zip(self.slots[self.active], self.pending, strict=True):
                    slot.copy_(o.detach())
            raised = problem
        self.pending = []
        if self.device == "cuda":
            torch.cuda.synchronize()
        self.send({"type": "probed", **seen, "raised": raised})

    def cache(self, hold: bool) -> None:
        """Hand the allocator's cache back to the card (remembering how much it held), or take
        as much again, as one block that the next call's allocations split (channel.Cache)."""
        if self.device == "cuda":
            if not hold:
                self.reserve = torch.cuda.memory_reserved()
                torch.cuda.empty_cache()
            elif (need := self.reserve - torch.cuda.memory_reserved()) > 0:
                # freed at once: the allocator keeps it as one segment, for the call to split
                torch.empty(need, dtype=torch.uint8, device="cuda")
        self.send({"type": "ready"})

    def collect(self) -> None:
        """Check the last call's outputs and copy them into the judge's slots."""
        outs, inputs, slots = self.pending, self.inputs[self.active], self.slots[self.active]
        self.pending = []
        problem = self._check(outs, inputs, slots)
        if problem is None and self.hold and self.grads[self.active] == 0:
            self._faulted_in(outs, slots)
        if problem is None:
            # From a detached view: a copy from an output that requires grad (a reference with
            # parameters) chained every call's graph, and the tensors it saved, onto the slot;
            # L2 90's reference runner grew to 108 GiB that way, and each call allocated afresh.
            # (Detached rather than under no_grad: nothing runs between the last copy and the
            # reply, where a thread a candidate left can still write the slot.)
            _hand_over(slots, outs)
            if self.device == "cuda":
                torch.cuda.synchronize()
            if self.hold:  # the call before's are freed: an allocator reuses them
                self.held = list(outs)
                _renew(outs, slots)
        # The reference's runner frees its outputs before it answers, not after: the judge
        # stops it once it has, and reads how much memory its next call faults in (a 64 MB
        # output freed only after the stop was freed inside the next call, which then showed
        # no growth: judge/fresh_pages.py). No other name here holds them.
        del outs
        self.send({"type": "done", "ms": 0.0, "problem": problem})

    def _faulted_in(self, outs: list, slots: list) -> None:
        """Large CPU outputs must be memory the call faulted in, as a fresh output's is: the
        process's resident anonymous memory grew during the call by at least half their size.
        Outputs prepared ahead (a pool allocated and written before the calls, one handed over
        a call, never twice) alias nothing and are renewed only once handed over, yet no call
        paid for their pages: 2.2x on the CPU for a 1x ReLU."""
        before, self.anon0 = self.anon0, None
        fresh = fresh_memory.fresh_bytes(outs, slots) if self.device == "cpu" else 0
        if before is None or not fresh:
            return
        grew = (fresh_memory.anon_bytes() or 0) - before
        if grew < fresh // 2:
            raise _Rejected(
                f"the call's outputs ({fresh >> 20} MiB) were memory resident before the call "
                f"(it faulted in {max(grew, 0) >> 20} MiB): outputs prepared ahead skip what a "
                "fresh output pays for its pages"
            )

    def _check(self, outs: list, inputs: list, slots: list) -> str | None:
        if _active_threads() > self.threads0:
            raise _Rejected("the solution started a background thread")
        if len(outs) != len(slots):
            return f"{len(outs)} outputs, expected {len(slots)}"
        tensors_in = [x for x in inputs if isinstance(x, torch.Tensor)]
        for k, (o, slot) in enumerate(zip(outs, slots, strict=True)):
            if type(o) is not torch.Tensor:
                raise _Rejected(f"output {k} is a {type(o).__name__}, not a plain torch.Tensor")
            if o.device.type != self.device:
                raise _Rejected(f"output {k} is on {o.device.type}, expected {self.device}")
            if any(fresh_memory.overlaps(o, x) for x in tensors_in):
                raise _Rejected(f"output {k} aliases an input tensor")
            if any(fresh_memory.overlaps(o, h) for h in self.held):
                # a buffer kept across calls: the caller's last result is overwritten, and no
                # call pays for fresh memory (on the CPU, 3-4.5x for an honest 1x ReLU)
                raise _Rejected(
                    f"output {k} shares storage with an output of the call before (a buffer "
                    "kept across calls overwrites the result its caller holds)"
                )
            if self.hold and _own_memory(o, slots):
                raise _Rejected(
                    f"output {k} is memory the solution holds itself, not the allocator's (its "
                    "storage cannot be renewed after the hand-over, as a kept buffer's is)"
                )
            if o.shape != slot.shape:
                return f"output {k}: shape {tuple(o.shape)} != expected {tuple(slot.shape)}"
            if o.dtype != slot.dtype:
                return f"output {k}: dtype {o.dtype} != expected {slot.dtype}"
        return None

    # ------------------------------------------------------------------ the loop

    def serve(self, job: CandidateJob) -> None:
        """Null calls (before any candidate code exists), then the build, then the judge's
        requests, until it says exit or goes away."""
        while True:
            try:
                msg, fds = channel.recv(self.sock, 3600.0, channel.REQUEST, with_fds=True)
            except channel.ChannelError:
                return  # the judge is gone (or broke its protocol): nothing left to do
            if msg.op == "exit":
                return
            try:
                if not self.answer(msg, fds, job):
                    return
            except _Rejected as rej:
                self.fail(Status.REJECTED, str(rej))
                return
            except BaseException as exc:  # noqa: BLE001
                failure = _is_compile_failure(exc)
                self.fail(Status.COMPILE_ERROR if failure else Status.RUNTIME_ERROR, _excerpt(exc))
                return

    def answer(self, msg: channel.Request, fds: list[int], job: CandidateJob) -> bool:
        """Do what ``msg`` asks; False when the harness is done (its build failed)."""
        if isinstance(msg, channel.Null):
            self.call()
        elif isinstance(msg, channel.Build):
            return self.build(job)
        elif isinstance(msg, channel.Model):
            self.model(msg)
        elif isinstance(msg, channel.Buffers):
            self.lend(msg, fds)
        elif isinstance(msg, channel.Use):
            self.active = msg.config
            self.send({"type": "ready"})
        elif isinstance(msg, channel.Call):
            self.call(msg.key)
        elif isinstance(msg, channel.Collect):
            self.collect()
        elif isinstance(msg, channel.Probe):
            self.probe()
        elif isinstance(msg, channel.Cache):
            self.cache(msg.hold)
        return True


class _Rejected(Exception):
    pass


def _nothing() -> None:
    return None


def _hand_over(slots: list, outs: list) -> None:
    """Copy each output into the judge's slot for it (in a function of its own: a loop's
    variable would hold the last output past the reply)."""
    for slot, o in zip(slots, outs, strict=True):
        slot.copy_(o.detach())


def _own_memory(o: torch.Tensor, slots: list) -> bool:
    """An output whose storage the harness cannot renew (``torch.from_blob`` over a buffer of
    the solution's), other than the judge's lent slot itself (timed as a hand-over)."""
    if o.numel() == 0 or o.untyped_storage().resizable():
        return False
    return not any(fresh_memory.overlaps(o, s) for s in slots)


def _renew(outs: list, slots: list) -> None:
    """Give every handed-over output's storage fresh memory from its allocator. A buffer the
    solution kept across calls (the last call's output, or one of several it rotates through)
    then meets fresh pages when it is written again, as an honest fresh output does: on the
    CPU, a kept 128 MB buffer skipped the page faults and got 6.7x for a 0.8x ReLU. What is
    kept is only the storage object, never the pages it had."""
    seen: set[int] = set()
    for o in outs:
        storage = o.untyped_storage()
        ptr = storage.data_ptr()
        if o.numel() == 0 or ptr in seen or any(fresh_memory.overlaps(o, s) for s in slots):
            continue
        seen.add(ptr)
        size = storage.nbytes()
        storage.resize_(0)  # frees the memory (a large one is unmapped) ...
        storage.resize_(size)  # ... and takes fresh memory, copying nothing


def run(job: CandidateJob, sock: socket.socket) -> None:
    """The candidate process's whole life after isolation: build, then serve the judge."""
    os.environ.update(job.env)
    if job.nice:  # a build beside a timing: the judge's clock keeps its core
        os.nice(job.nice)
    if job.device == "cuda":
        torch.empty(1, device="cuda")
    Harness(sock, job).serve(job)
