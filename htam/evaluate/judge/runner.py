"""The judge's handle on one isolated runner (the candidate, or the reference's runner): its
channel, with every reply read under a timeout, validated and checked to be the answer its
request asks for, and its processes, which the judge stops and lets go on as a whole.
"""

from __future__ import annotations

import signal
import socket
import time
from typing import TypeVar

from htam.evaluate import channel, frames
from htam.evaluate.sandbox import candidate_user
from htam.status import Status

SETTLE_S = 5.0  # how long every thread of a stopped runner may take to stop
_STOPPED = "tTZX"  # stopped, traced, or gone
# CPU time the threads of a stopped runner may still gain in all: the end of a last slice that
# had not been counted when the judge read the times (microseconds); a self-resumed helper ran
# 60-80 ms.
TAIL_NS = 200_000
M = TypeVar("M", channel.Built, channel.Ready, channel.Done, channel.Probed)


# What a runner was doing when it did not answer in time, by the request it had been sent.
PHASES = {
    "null": "during the harness's empty calls, before the solution was imported",
    "build": "while importing the solution and building its extensions (the build phase)",
    "model": "while constructing ModelNew (its __init__)",
    "buffers": "while taking its inputs",
    "call": "during a call of ModelNew.forward (the run phase)",
    "collect": "while handing its outputs over after a call",
    "probe": "during the kernel probe's call of ModelNew.forward",
}


class Verdict(Exception):
    """The job is decided (status and message); raised from anywhere in the run.
    ``infrastructure``: the task cannot be judged here, which says nothing of the candidate."""

    def __init__(self, status: Status, message: str, infrastructure: bool = False):
        super().__init__(message)
        self.status, self.message = Status(status), message
        self.infrastructure = infrastructure

    @classmethod
    def unjudgeable(cls, message: str) -> Verdict:
        return cls(Status.RUNTIME_ERROR, message, infrastructure=True)

    def record(self) -> frames.Verdict:
        return frames.Verdict(
            status=self.status, message=self.message, infrastructure=self.infrastructure
        )


def jsonable(value, what: str):
    """A task's value as the runners receive it (JSON), or the task cannot be judged."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [jsonable(v, what) for v in value]
    raise Verdict.unjudgeable(
        f"the task's {what} value of type {type(value).__name__} cannot be handed over"
    )


class Runner:
    """The judge's view of one harness process: its channel, its processes, its buffers."""

    def __init__(self, sock: socket.socket, info: frames.RunnerInfo, trusted: bool):
        self.sock, self.uid, self.pid, self.by_uid = sock, info.uid, info.pid, info.by_uid
        self.trusted = trusted
        self.name = "the reference" if trusted else "the candidate"
        self.stopped = False
        self.stopper: candidate_user.Stopper | None = None  # made at the first stop
        self.still: dict[int, int] | None = None  # each thread's CPU time when last stopped
        self.baseline_ms = 0.0
        self.ins: list = []
        self.slots: list = []
        self.sealed: tuple[int, list[int]] = (0, [])  # the last call's key and output seals

    def _fail(self, status: Status, message: str) -> Verdict:
        if self.trusted:  # not the candidate's fault: the task cannot be judged
            return Verdict.unjudgeable(f"the reference failed: {message.strip().splitlines()[-1]}")
        return Verdict(status, message)

    def ask(
        self,
        request: channel.Request,
        expect: type[M],
        timeout_s: float,
        fds: list[int] | None = None,
    ) -> M:
        """Send ``request`` and return its answer, which must be an ``expect``."""
        if self.stopped:
            self.freeze(False)
        try:
            channel.send(self.sock, request, fds)
        except OSError:
            raise self._fail(Status.RUNTIME_ERROR, f"{self.name}'s process ended") from None
        reply = self.answer(timeout_s, request.op)
        expected = channel.REPLIES[request.op]
        if reply.type != expected or not isinstance(reply, expect):
            raise self._fail(
                Status.REJECTED,
                f"result channel tampered: a {reply.type!r} message in answer to "
                f"{request.op!r} (expected {expected!r})",
            )
        return reply

    def answer(self, timeout_s: float, op: str = "") -> channel.CandidateMessage:
        try:
            parsed, _ = channel.recv(self.sock, timeout_s, channel.CANDIDATE)
        except channel.ChannelTimeout:
            phase = PHASES.get(op, "")
            raise self._fail(
                Status.TIMEOUT,
                f"{self.name} did not answer within {timeout_s:.0f} s"
                + (f" {phase}" if phase else ""),
            ) from None
        except channel.ChannelClosed:
            raise self._fail(Status.RUNTIME_ERROR, f"{self.name}'s process ended") from None
        except channel.ChannelError as exc:
            raise self._fail(Status.REJECTED, f"result channel tampered: {exc}") from None
        if parsed.type == "failed":
            raise self._fail(parsed.status, parsed.message)
        return parsed

    def freeze(self, stop: bool, checked: bool = False) -> None:
        """Stop every process of this runner (host-wide quiescence) or let them go on: at once,
        by its user id, where it has one of its own. A thaw first checks that nothing ran while
        stopped, unless the caller has just ``checked``."""
        sig = signal.SIGSTOP if stop else signal.SIGCONT
        if not self.by_uid:
            candidate_user.signal_all([self.pid], sig)
            self.stopped = stop
            return
        if not stop and not checked:
            self.check_still()
        if self.stopper is None:
            self.stopper = candidate_user.Stopper(self.uid)
        try:
            self.stopper.signal(sig)
        except OSError as exc:
            raise Verdict.unjudgeable(f"could not stop {self.name}: {exc}") from None
        self.stopped = stop
        # Both runners alike: the other's call starts once every thread of this one has
        # stopped, and the judge does the same work before either's call (while only the
        # candidate was settled, CI once timed the reference against itself at 1.41x).
        self.still = self._settle() if stop else None

    def _settle(self) -> dict[int, int]:
        """Each thread's time on a CPU once every thread of the user has stopped (a thread stops
        as it leaves the kernel) and the times hold still: a thread shows as stopped just before
        it leaves the CPU, and its last slice is counted as it leaves."""
        deadline, last = time.monotonic() + SETTLE_S, None
        while True:
            threads = candidate_user.activity(self.uid)
            moving = [tid for tid, (state, _) in threads.items() if state not in _STOPPED]
            times = {tid: ran for tid, (state, ran) in threads.items() if state in "tT"}
            if not moving and times == last:
                return times
            if time.monotonic() > deadline:
                raise self._ran(f": {len(moving)} threads would not stay stopped")
            last = times
            time.sleep(0.0005)

    def check_still(self) -> None:
        """Nothing of the user ran since it was stopped. No stop keeps a process stopped: a
        SIGCONT resumes it whoever sends it, its own timer or a sibling the stop had not reached
        yet (helpers ran 60-80 ms while the harness was stopped); but the kernel counts
        every thread's time, and a stopped one gains none."""
        if self.still is None:
            return
        live = {t: v for t, v in candidate_user.activity(self.uid).items() if v[0] not in "ZX"}
        stirred = live.keys() != self.still.keys() or any(v[0] not in "tT" for v in live.values())
        grew = 0 if stirred else sum(live[t][1] - ran for t, ran in self.still.items())
        if stirred or grew > TAIL_NS:
            raise self._ran()

    def _ran(self, detail: str = "") -> Verdict:
        return self._fail(
            Status.REJECTED,
            f"a process of {self.name} ran while the judge had it stopped (it resumed itself)"
            + detail,
        )

    def close(self) -> None:
        if self.stopper is not None:
            self.stopper.close()
            self.stopper = None
