"""A control group per isolated process: memory (the kernel's own included) and process count
limited by the kernel, on cgroup v2 or v1, whichever the machine mounts.

The watchdog's accounting from ``/proc`` sees what processes hold, not what the kernel holds for
them: pipes pinning a process's huge pages after it unmapped them (3 GB under a 1 GiB limit),
160 processes of 65,530 mappings each (2.2 GB of slabs under 512 MB). A memory cgroup charges
every page and kernel object to the group that allocated it, whoever holds it later, and refuses
or ends the allocation past its limit. The watchdog stays as a second line, with its figures.

Groups live under ``htam-<server pid>`` in the evaluator's own group (v1) or the hierarchy's
root (v2, whose processes-only-in-leaves rule forbids a child of a group with processes); the
fork server makes one per isolated child, the child joins it before it isolates itself, and the
server removes it once the child is reaped.
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass

CONTROLLERS = ("memory", "pids")


@dataclass(frozen=True)
class CgroupPlan:
    """Where this machine's groups are made: one folder per controller (v1), or one (v2)."""

    version: int
    bases: tuple[str, ...]  # the per-server folder under each hierarchy (one for v2)

    @property
    def summary(self) -> str:
        return f"cgroup v{self.version}"


def _mounts() -> list[tuple[str, str, set[str]]]:
    rows = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            tail = parts[parts.index("-") + 1 :]
            rows.append((parts[4], tail[0], set(tail[2].split(","))))
    return rows


def _own_paths() -> dict[str, str]:
    """This process's group in each hierarchy: controller name (or "" for v2) -> path."""
    paths = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, names, path = line.rstrip("\n").split(":", 2)
            for name in names.split(",") if names else [""]:
                paths[name] = path
    return paths


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def probe(tag: str) -> tuple[CgroupPlan | None, str]:
    """Make this server's folder(s) for groups, named ``htam-<tag>``: the plan, or None and why
    none can be made here (the line ``htam doctor`` and the isolation summary show)."""
    if os.geteuid() != 0:
        return None, "no cgroup: not running as root"
    mounts = _mounts()
    own = _own_paths()
    v1 = {}
    for point, fstype, opts in mounts:
        if fstype == "cgroup":
            for name in CONTROLLERS:
                if name in opts:
                    v1[name] = point
    why = ""
    if all(name in v1 for name in CONTROLLERS):
        try:
            bases = []
            for name in CONTROLLERS:
                base = os.path.join(v1[name] + own.get(name, "/"), f"htam-{tag}")
                os.makedirs(base, exist_ok=True)
                bases.append(base)
            return CgroupPlan(1, tuple(bases)), ""
        except OSError as exc:
            why = f"cgroup v1: {exc.strerror}"
    for point, fstype, _ in mounts:
        if fstype != "cgroup2":
            continue
        try:
            available = _read(os.path.join(point, "cgroup.controllers")).split()
            if not all(name in available for name in CONTROLLERS):
                why = why or f"cgroup v2 at {point} offers {available or 'no controllers'}"
                continue
            _write(os.path.join(point, "cgroup.subtree_control"), "+memory +pids")
            base = os.path.join(point, f"htam-{tag}")
            os.makedirs(base, exist_ok=True)
            _write(os.path.join(base, "cgroup.subtree_control"), "+memory +pids")
            return CgroupPlan(2, (base,)), ""
        except OSError as exc:
            why = f"cgroup v2 at {point}: {exc.strerror}"
    return None, f"no cgroup ({why or 'no memory and pids controllers mounted'})"


@dataclass(frozen=True)
class Group:
    """One isolated process's group: its folder under each base."""

    version: int
    folders: tuple[str, ...]

    @property
    def memory(self) -> str:
        return self.folders[0]

    @property
    def pids(self) -> str:
        return self.folders[-1]

    def join(self, pid: int = 0) -> None:
        """Move ``pid`` (0: the caller) into the group, in every hierarchy."""
        for folder in self.folders:
            _write(os.path.join(folder, "cgroup.procs"), str(pid or os.getpid()))

    def oom_kills(self) -> int:
        """How many of the group's processes the kernel ended for its memory limit."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            for line in _read(os.path.join(self.memory, name)).splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            return 0
        return 0

    def memory_peak(self) -> int:
        """The most memory (pages and kernel objects) the group held at once, in bytes."""
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        try:
            return int(_read(os.path.join(self.memory, name)))
        except (OSError, ValueError):
            return 0

    def remove(self, timeout_s: float = 2.0) -> bool:
        """Remove the (emptied) group; False if a process was still in it."""
        deadline = time.monotonic() + timeout_s
        for folder in self.folders:
            while True:
                try:
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:  # EBUSY: a process not yet gone
                    if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                        return False
                    time.sleep(0.01)
        return True


def create(plan: CgroupPlan, name: str, memory_bytes: int, pids: int) -> Group:
    """A new group limited to ``memory_bytes`` (swap included, none beyond) and ``pids``."""
    folders = tuple(os.path.join(base, name) for base in plan.bases)
    for folder in folders:
        os.makedirs(folder, exist_ok=True)
    group = Group(plan.version, folders)
    if plan.version == 2:
        _write(os.path.join(group.memory, "memory.max"), str(memory_bytes))
        _write(os.path.join(group.memory, "memory.swap.max"), "0")
        _write(os.path.join(group.pids, "pids.max"), str(pids))
    else:
        _write(os.path.join(group.memory, "memory.limit_in_bytes"), str(memory_bytes))
        swap = os.path.join(group.memory, "memory.memsw.limit_in_bytes")
        if os.path.exists(swap):
            _write(swap, str(memory_bytes))
        _write(os.path.join(group.pids, "pids.max"), str(pids))
    return group


def remove_base(plan: CgroupPlan) -> None:
    """The server's folders, once every group in them is removed."""
    for base in plan.bases:
        try:
            for name in os.listdir(base):
                path = os.path.join(base, name)
                if os.path.isdir(path):
                    Group(plan.version, (path,)).remove(0.5)
            os.rmdir(base)
        except OSError:
            continue


def check() -> tuple[str | None, str]:
    """Try the kernel's limit for real (``htam doctor``): a child in a group of 32 MiB that
    touches 96 MiB must be ended. The plan's summary, or None and why not."""
    plan, why = probe(f"doctor{os.getpid()}")
    if plan is None:
        return None, why
    try:
        group = create(plan, "check", 32 << 20, 16)
        pid = os.fork()
        if pid == 0:
            try:
                group.join()
                held = [bytearray(16 << 20) for _ in range(6)]
                os._exit(0 if held else 1)
            finally:
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        group.remove()
    except OSError as exc:
        return None, f"no cgroup ({plan.summary}: {exc.strerror})"
    finally:
        remove_base(plan)
    if os.waitstatus_to_exitcode(status) != -9:
        return None, f"no cgroup ({plan.summary}: its memory limit had no effect)"
    return plan.summary, ""
