"""The mount layer of a candidate's isolation (``isolation.enter``): ``mount(2)`` through
``ctypes``, a read-only view of every filesystem, and a ``/proc`` of the candidate's own.

A candidate shares the host's PID namespace, where the judge finds, stops and ends its processes
by user id. The host's ``/proc`` would show it every process of the machine and their command
lines, which anyone may read: a secret passed to another program as an argument came back
through a candidate's log. So the candidate's mount namespace gets a fresh
instance of proc over ``/proc`` with ``hidepid=2`` (``invisible``): other users' processes are
not there, its own are, and the rest of ``/proc`` is as before. What the host had mounted over
parts of its ``/proc`` (a container's masks: ``/proc/kcore`` on ``/dev/null``, ``/proc/sys``
read-only) is mounted again on the new instance, as it was.
"""

from __future__ import annotations

import ctypes
import os

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
_KEEP_WRITABLE = {"proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "mqueue"}
_libc = ctypes.CDLL(None, use_errno=True)


class IsolationError(OSError):
    pass


def check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise IsolationError(err, f"{what}: {os.strerror(err)}")


def mount(src: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    def enc(s: str | None) -> bytes | None:
        return s.encode() if s is not None else None

    check(
        _libc.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data or None)),
        f"mount {target}",
    )


def mountinfo() -> list[tuple[str, set[str], str]]:
    rows = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            fstype = parts[parts.index("-") + 1]
            point = parts[4].replace("\\040", " ")
            rows.append((point, set(parts[5].split(",")), fstype))
    return rows


def readonly_everything() -> None:
    for point, opts, fstype in mountinfo():
        if fstype in _KEEP_WRITABLE or "ro" in opts:
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for name, bit in (("nosuid", MS_NOSUID), ("nodev", MS_NODEV), ("noexec", MS_NOEXEC)):
            if name in opts:
                flags |= bit
        try:
            mount(None, point, None, flags)
        except IsolationError:
            # A mount hidden under another one cannot be reached by its path; what is visible
            # at that path is remounted in its own turn.
            continue


def private_proc() -> None:
    """A proc instance over ``/proc`` that lists only the processes of the caller's user (this
    mount namespace's, as root, before the candidate's user is taken), the host's mounts under
    ``/proc`` put back on it. Raises IsolationError where the kernel refuses it."""
    held = [
        (point, os.open(point, os.O_PATH), opts)
        for point, opts, _ in mountinfo()
        if point.startswith("/proc/")
    ]
    try:
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2")
        for point, fd, opts in held:
            mount(f"/proc/self/fd/{fd}", point, None, MS_BIND)
            if "ro" in opts:
                mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    finally:
        for _, fd, _ in held:
            os.close(fd)
