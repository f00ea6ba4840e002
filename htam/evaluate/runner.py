"""The judge's handle on one isolated runner (the candidate, or the reference's runner): its
channel, with every reply read under a timeout, validated and checked to be the answer its
request asks for, and its processes, which the judge stops and lets go on as a whole.
"""

from __future__ import annotations

import signal
import socket

from htam.evaluate import candidate_user, channel


class Verdict(Exception):
    """The job is decided (status and message); raised from anywhere in the run."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class Runner:
    """The judge's view of one harness process: its channel, its processes, its buffers."""

    def __init__(self, sock: socket.socket, info: dict, trusted: bool):
        self.sock, self.uid, self.pid, self.by_uid = sock, info["uid"], info["pid"], info["by_uid"]
        self.trusted = trusted
        self.name = "the reference" if trusted else "the candidate"
        self.stopped = False
        self.stopper: candidate_user.Stopper | None = None  # made at the first stop
        self.baseline_ms = 0.0
        self.ins: list = []
        self.slots: list = []
        self.sealed: tuple[int, list[int]] = (0, [])  # the last call's key and output seals

    def _fail(self, status: str, message: str) -> Verdict:
        if self.trusted:  # not the candidate's fault: the task cannot be judged
            return Verdict("error", f"the reference failed: {message.strip().splitlines()[-1]}")
        return Verdict(status, message)

    def ask(self, message: dict, timeout_s: float, fds: list[int] | None = None):
        if self.stopped:
            self.freeze(False)
        try:
            channel.send(self.sock, message, fds)
        except OSError:
            raise self._fail("runtime_error", f"{self.name}'s process ended") from None
        reply = self.answer(timeout_s)
        expected = channel.REPLIES[message["op"]]
        if reply.type != expected:
            raise self._fail(
                "rejected",
                f"result channel tampered: a {reply.type!r} message in answer to "
                f"{message['op']!r} (expected {expected!r})",
            )
        return reply

    def answer(self, timeout_s: float):
        try:
            msg, _ = channel.recv(self.sock, timeout_s)
            parsed = channel.parse(msg)
        except channel.ChannelTimeout:
            raise self._fail(
                "timeout", f"{self.name} did not answer within {timeout_s:.0f} s"
            ) from None
        except channel.ChannelClosed:
            raise self._fail("runtime_error", f"{self.name}'s process ended") from None
        except channel.ChannelError as exc:
            raise self._fail("rejected", f"result channel tampered: {exc}") from None
        if parsed.type == "failed":
            raise self._fail(parsed.status, parsed.message)
        return parsed

    def freeze(self, stop: bool) -> None:
        """Stop every process of this runner (host-wide quiescence) or let them go on: at once,
        by its user id, where it has one of its own."""
        sig = signal.SIGSTOP if stop else signal.SIGCONT
        if not self.by_uid:
            candidate_user.signal_all([self.pid], sig)
        else:
            if self.stopper is None:
                self.stopper = candidate_user.Stopper(self.uid)
            try:
                self.stopper.signal(sig)
            except OSError as exc:
                raise Verdict("error", f"could not stop {self.name}: {exc}") from None
        self.stopped = stop

    def close(self) -> None:
        if self.stopper is not None:
            self.stopper.close()
            self.stopper = None
