"""The judge: a trusted process that holds the reference, its inputs and its outputs, drives a
candidate's process over a channel, compares every output itself, and forms the verdict.

Each call the candidate makes runs on inputs the judge drew fresh for it (so nothing can be
remembered from an earlier call) and copied into buffers it lent; every output, of the
correctness trials and of the timed calls alike, is compared on the device where it was computed.
The reference runs here, never in the candidate's process, and is timed while the candidate's
processes are stopped; the candidate's reported device time is checked against the judge's own
clock around the call (work that escaped the candidate's timed stream, or a forged time, shows up
as the difference).
"""

from __future__ import annotations

import signal
import socket
import statistics
import time

import torch

from htam.evaluate import buffers, channel, isolation, measure
from htam.evaluate.compare import compare_tensor
from htam.evaluate.config import Tolerance
from htam.evaluate.worker import (
    Emitter,
    as_list,
    build,
    configs,
    inputs_for,
    one_line,
    task_module,
)

_perf = time.perf_counter
_clock = time.monotonic
TIMING_SEED = 10_000  # timed calls draw inputs from seeds above the correctness trials'


class Verdict(Exception):
    """The job is decided (status and message); raised from anywhere in the run."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class Candidate:
    """The judge's view of the candidate process: its channel and its processes."""

    def __init__(self, sock: socket.socket, info: dict):
        self.sock, self.uid, self.pid, self.by_uid = sock, info["uid"], info["pid"], info["by_uid"]
        self.stopped = False

    def ask(self, message: dict, timeout_s: float, fds: list[int] | None = None):
        if self.stopped:
            self.freeze(False)
        channel.send(self.sock, message, fds)
        return self.answer(timeout_s)

    def answer(self, timeout_s: float):
        try:
            msg, fds = channel.recv(self.sock, timeout_s)
        except channel.ChannelTimeout:
            raise Verdict(
                "timeout", f"the candidate did not answer within {timeout_s:.0f} s"
            ) from None
        except channel.ChannelClosed:
            raise Verdict("runtime_error", "the candidate's process ended") from None
        except channel.ChannelError as exc:
            raise Verdict("rejected", f"result channel tampered: {exc}") from None
        try:
            parsed = channel.parse(msg)
        except channel.ChannelError as exc:
            raise Verdict("rejected", f"result channel tampered: {exc}") from None
        if parsed.type == "failed":
            raise Verdict(parsed.status, parsed.message)
        return parsed

    def _pids(self) -> list[int]:
        if self.by_uid:
            return isolation.uid_pids(self.uid)
        return [self.pid]

    def freeze(self, stop: bool) -> None:
        """Stop every process of the candidate (host-wide quiescence) or let them go on."""
        isolation.signal_all(self._pids(), signal.SIGSTOP if stop else signal.SIGCONT)
        self.stopped = stop


class Judge:
    def __init__(self, job: dict, emit: Emitter, cand: Candidate):
        self.job, self.emit, self.cand = job, emit, cand
        self.device = job["device"]
        self.tol = {k: Tolerance(**v) for k, v in job["tolerances"].items()}
        self.cfg = job["timing"]
        self.once = measure.timer(self.device, self.cfg["l2_flush_mb"])
        self.call_timeout_s = job["call_timeout_s"]
        self.first_call_timeout_s = job["compile_timeout_s"]
        self.marks: dict[str, float] = {"entered": _clock()}
        self.lent: list[buffers.Lent] = []
        self.first_call_s: float | None = None

    # ------------------------------------------------------------------ per configuration

    def setup(self, index: int, extra: int | None, seed: int):
        """Reference model, inputs and lent buffers of one configuration; the candidate builds
        its ModelNew with the same constructor arguments and seed."""
        module = task_module(self.job, extra)
        init_args = list(module.get_init_inputs())
        reference = build(module.Model, init_args, self.job["init_seed"], self.device)
        sample = inputs_for(module, seed, self.device)
        t0 = _perf()
        outs = as_list(reference(*sample))
        self._sync()
        if index == 0:  # limits that follow the reference's own cost
            ref_s = _perf() - t0
            self.call_timeout_s = max(self.call_timeout_s, 50 * ref_s)
            self.emit({"type": "stage", "stage": "reference", "run_s": 30 + 2000 * ref_s})
        self.cand.ask(
            {
                "op": "model",
                "config": index,
                "init_args": _jsonable(init_args, "constructor"),
                "seed": self.job["init_seed"],
            },
            self.call_timeout_s + self.first_call_timeout_s,
        )
        ins, fds, desc_in = [], [], []
        for k, x in enumerate(sample):
            if isinstance(x, torch.Tensor):
                lent = self._lend(x, f"input {k}")
                ins.append(lent.tensor)
                desc_in.append({"tensor": lent.descriptor})
                fds += [lent.fd] if lent.fd is not None else []
            else:
                ins.append(None)
                desc_in.append({"value": _jsonable(x, f"input {k}")})
        slots = []
        for k, o in enumerate(outs):
            if not isinstance(o, torch.Tensor):
                raise Verdict("error", f"the reference's output {k} is a {type(o).__name__}")
            lent = self._lend(o, f"output {k}")
            slots.append(lent.tensor)
            fds += [lent.fd] if lent.fd is not None else []
        self.cand.ask(
            {
                "op": "buffers",
                "config": index,
                "inputs": desc_in,
                "outputs": [lent.descriptor for lent in self.lent[-len(outs) :]],
            },
            self.call_timeout_s,
            fds,
        )
        return module, reference, ins, slots

    def _lend(self, t: torch.Tensor, what: str) -> buffers.Lent:
        if not buffers.supported(t):
            raise Verdict("error", f"the reference's {what} has dtype {t.dtype}, not supported")
        lent = buffers.lend(list(t.shape), buffers.dtype_name(t.dtype), self.device)
        self.lent.append(lent)
        return lent

    # ------------------------------------------------------------------ one round

    def candidate_call(self, ins: list, x: list, slots: list, timeout_s: float, where: str):
        """The candidate computes on a copy of ``x``; returns (its device ms, judge wall ms)."""
        for buf, v in zip(ins, x, strict=True):
            if buf is not None:
                buf.copy_(v)
        self._sync()
        if self.cand.stopped:
            self.cand.freeze(False)  # before the clock starts: the thaw is not the call's time
        t0 = _perf()
        done = self.cand.ask({"op": "call"}, timeout_s)
        wall_ms = (_perf() - t0) * 1e3
        self.cand.freeze(True)
        if done.problem:
            raise Verdict("incorrect", f"{where}: {done.problem}")
        for k, (buf, v) in enumerate(zip(ins, x, strict=True)):
            if buf is not None and not torch.equal(buf, v):
                raise Verdict("rejected", f"the solution modified its inputs (input {k})")
        return done.ms, wall_ms

    def check(self, slots: list, ref_outs: list, where: str) -> None:
        for k, (o, r) in enumerate(zip(slots, ref_outs, strict=True)):
            problem = compare_tensor(o, r, self.tol)
            if problem:
                raise Verdict("incorrect", f"{where}, output {k}: {problem}")

    def _sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()

    # ------------------------------------------------------------------ the whole job

    def run(self) -> dict:
        built = self.cand.answer(self.first_call_timeout_s)
        self.marks["built"] = _clock()
        self.emit({"type": "stage", "stage": "built"})
        seeds = self.job["seeds"]
        base = None
        for index, (extra, trial_seeds) in enumerate(configs(self.job)):
            module, reference, ins, slots = self.setup(index, extra, trial_seeds[0])
            if base is None:
                base = (index, module, reference, ins, slots)
            else:
                self.cand.ask({"op": "use", "config": index}, self.call_timeout_s)
            for t, seed in enumerate(trial_seeds):
                x = inputs_for(module, seed, self.device)
                ref_outs = as_list(reference(*x))
                first = index == 0 and t == 0
                where = f"trial {t}" if extra is None else f"trial {len(seeds) + index - 1}"
                t0 = _perf()
                timeout_s = self.first_call_timeout_s if first else self.call_timeout_s
                self.candidate_call(ins, x, slots, timeout_s, where)
                if first:
                    self.first_call_s = _perf() - t0
                self.check(slots, ref_outs, where)
        self.marks["trials_done"] = _clock()
        index, module, reference, ins, slots = base
        if len(configs(self.job)) > 1:
            self.cand.ask({"op": "use", "config": index}, self.call_timeout_s)
        timing, paired, escape = self.time(module, reference, ins, slots)
        self.marks["timed"] = _clock()
        self.police(timing, escape)
        return {
            "timing": timing,
            "paired_reference": paired,
            "escape": escape,
            "compile_s": built.compile_s,
            "import_s": built.import_s,
            "first_call_s": self.first_call_s,
            "marks": self.marks,
        }

    def time(self, module, reference, ins: list, slots: list):
        """Interleaved rounds, each on fresh inputs: the reference (timed here, the candidate
        stopped) and the candidate (timed by its events, bounded by this process's clock); every
        output compared."""
        pings = []
        for _ in range(10):
            self.cand.freeze(False)
            t0 = _perf()
            self.cand.ask({"op": "ping"}, self.call_timeout_s)
            pings.append((_perf() - t0) * 1e3)
        ping_ms = statistics.median(pings)
        cand_ms, ref_ms, wall_ms, probes = [], [], [], []
        i = 0

        def one_round(i: int) -> float:
            x = inputs_for(module, TIMING_SEED + i, self.device)
            order = (0, 1) if i % 2 == 0 else (1, 0)  # no position bias
            got: dict[int, tuple[float, float]] = {}
            outs: list = []
            for who in order:
                if who == 0:
                    got[0] = self.candidate_call(
                        ins, x, slots, self.call_timeout_s, f"timed call {i}"
                    )
                else:
                    self.cand.freeze(True)
                    probes.append(self._probe_ms())
                    ms, _, _ = self.once(lambda *a: outs.append(reference(*a)), x)
                    got[1] = (ms, ms)
            self.check(slots, as_list(outs[-1]), f"timed call {i}")
            cand_ms.append(got[0][0])
            wall_ms.append(got[0][1])
            ref_ms.append(got[1][0])
            return got[0][1] + got[1][0]

        warm = 0.0
        while warm < self.cfg["warmup_ms"] or i < 2:
            warm += one_round(i)
            i += 1
        per_round = statistics.median(w + r for w, r in zip(wall_ms, ref_ms, strict=True))
        for lst in (cand_ms, ref_ms, wall_ms, probes):
            lst.clear()
        n = max(
            self.cfg["min_timed"],
            min(self.cfg["max_timed"], int(self.cfg["timing_budget_ms"] / max(per_round, 1e-3))),
        )
        for _ in range(n):
            one_round(i)
            i += 1
        copy_ms = self._copy_ms(slots)
        escaped = [w - c - ping_ms - copy_ms for w, c in zip(wall_ms, cand_ms, strict=True)]
        method = "cuda_events" if self.device == "cuda" else "perf_counter"
        meaningful = self.job.get("meaningful", True)
        timing = measure.summary(cand_ms, method, meaningful)
        timing["wall_median_ms"] = statistics.median(wall_ms)
        escape = {
            "escaped_ms": statistics.median(escaped),
            "forged_calls": sum(c > w + 0.05 for c, w in zip(cand_ms, wall_ms, strict=True)),
            "ping_ms": ping_ms,
            "copy_ms": copy_ms,
            "busy_probes": sum(p > self.job["busy_probe_ms"] for p in probes),
            "rounds": len(cand_ms),
        }
        return timing, measure.summary(ref_ms, method, meaningful), escape

    def police(self, timing: dict, escape: dict) -> None:
        """Timing the judge's clock does not bear out is a rejection, with the figures."""
        median = timing["median_ms"]
        if escape["forged_calls"]:
            raise Verdict(
                "rejected",
                f"the candidate reported more device time than passed on the judge's clock "
                f"({escape['forged_calls']} of {escape['rounds']} calls)",
            )
        allowed = self.job["escape_ratio"] * median + self.job["escape_slack_ms"]
        if escape["escaped_ms"] > allowed:
            raise Verdict(
                "rejected",
                f"work escaped the timed stream: {escape['escaped_ms']:.3f} ms of each call "
                f"ran outside its events ({median:.3f} ms inside), by the judge's clock",
            )
        if escape["busy_probes"] > max(1, escape["rounds"] // 5):
            raise Verdict(
                "rejected",
                f"the device was still busy after {escape['busy_probes']} of "
                f"{escape['rounds']} of the candidate's calls had returned",
            )

    def _probe_ms(self) -> float:
        """Host time of a tiny kernel right after the candidate was stopped: long when the
        device is still busy with work the candidate left behind."""
        if self.device != "cuda":
            return 0.0
        t0 = _perf()
        torch.empty(1, device="cuda").fill_(1.0)
        torch.cuda.synchronize()
        return (_perf() - t0) * 1e3

    def _copy_ms(self, slots: list) -> float:
        """What copying the outputs into the lent slots costs (the candidate does it inside the
        call the judge's clock measures)."""
        best = float("inf")
        for _ in range(3):
            self._sync()
            t0 = _perf()
            for s in slots:
                s.copy_(s)
            self._sync()
            best = min(best, (_perf() - t0) * 1e3)
        return best

    def close(self) -> None:
        for lent in self.lent:
            lent.free()


def _jsonable(value, what: str):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, what) for v in value]
    raise Verdict(
        "error",
        f"the task's {what} value of type {type(value).__name__} cannot be handed to a candidate",
    )


def run(job: dict, emit: Emitter, sock: socket.socket) -> None:
    cand = Candidate(sock, job["candidate"])
    judge = Judge(job, emit, cand)
    try:
        if job["device"] == "cuda":
            torch.empty(1, device="cuda")
        judge.marks["device_ready"] = _clock()
        emit({"type": "verdict", "status": "ok", "message": "", **judge.run()})
    except Verdict as v:
        emit({"type": "verdict", "status": v.status, "message": v.message})
    except torch.cuda.OutOfMemoryError as exc:
        emit({"type": "verdict", "status": "error", "message": one_line(exc)})
    finally:
        try:
            channel.send(sock, {"op": "exit"})
        except OSError:
            pass
        judge.close()
