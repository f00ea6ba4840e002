"""The candidate's user as its container: each isolated process runs under a user id of its own,
so every process it starts can be found, measured, stopped and killed by that id, however fast it
forks."""

from __future__ import annotations

import os
import signal

UID_BASE = 2_100_000  # candidate user ids: far above any real account


def candidate_uid(server_pid: int, slot: int) -> int:
    """A user id per (fork server, slot): unique on the machine while both live (a server has
    at most five isolated processes alive: two standbys, a job's two, one being ended)."""
    return UID_BASE + (server_pid % 100_000) * 8 + slot % 8


def uid_pids(uid: int) -> list[int]:
    """Every process owned by ``uid`` (the candidate and all it started)."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    pids.append(int(name))
            except OSError:
                continue
    return pids


_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm", "rb") as f:
                total += int(f.read().split()[1]) * _PAGE
        except (OSError, ValueError, IndexError):
            continue
    return total / (1 << 20)


def signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            continue


def kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid`` at once: ``kill(-1)`` from a process of that user reaches
    all of them atomically, however fast they fork."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
