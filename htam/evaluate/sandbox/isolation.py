"""OS isolation of candidate processes, with what a machine cannot offer detected and reported.

A candidate runs in a child of the fork server that, before any candidate code exists, enters
its own mount, network, IPC and UTS namespaces; sees every filesystem read-only except its job
directory (bound at ``/tmp/job``), with a private ``/tmp``, ``/var/tmp`` and ``/dev/shm``; gets
rlimits on processes, file size, open files and core dumps; sets ``no_new_privs``; and drops to a
user id of its own that nothing else on the machine uses. That id is the container: every process
the candidate starts, ``setsid`` or not, carries it, so one ``kill(-1)`` issued as that user ends
them all, and a scan of ``/proc`` by owner finds them all (for the memory limit and the freeze
around the reference's timing). Processes of another user, and the non-dumpable judge, fork
server and CLI, cannot be read through ``/proc/<pid>/mem`` or ``environ``.

The kernel calls go through ``ctypes`` (``os.unshare`` is Python 3.12 only; ``mount`` has no
Python binding). Everything here runs in trusted code, before the candidate is imported.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

from htam.evaluate.eval_config import cache_root
from htam.evaluate.sandbox.mounts import (
    MS_BIND,
    MS_NODEV,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    IsolationError,
    check,
    mount,
    private_proc,
    readonly_everything,
)
from htam.evaluate.sandbox.syscall_filter import check_filter, restrict_syscalls

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWUSER = (
    0x00020000,
    0x04000000,
    0x08000000,
    0x40000000,
    0x10000000,
)
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 1, 4, 38
JOB_MOUNT = "/tmp/job"  # where a candidate sees its job directory
PRIVATE = ("/tmp", "/var/tmp", "/dev/shm")  # each a fresh tmpfs for the candidate
# The host's precompiled headers (host/pch.py): named by the fork server's environment, shown to
# a candidate read-only at PCH_MOUNT, and the variable set to where the candidate sees them.
PCH_ENV, PCH_MOUNT = "HTAM_PCH_DIR", "/tmp/htam-pch"
_libc = ctypes.CDLL(None, use_errno=True)


def prctl(option: int, value: int) -> None:
    check(_libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), f"prctl({option})")


def not_dumpable() -> None:
    """No core dump, no ptrace and no /proc/<pid>/mem or environ of this process for anyone
    but root: set in the CLI, the fork server and the judge (forked children inherit it)."""
    prctl(PR_SET_DUMPABLE, 0)


def die_with_parent() -> None:
    """SIGKILL to this process when its parent ends: the fork server's children (a runner is
    stopped between its calls, and a stopped process notices nothing) went on for good after
    the CLI was killed with SIGKILL and the server left. Set in each child
    of the server, and again after a change of user, which clears it. (Not in the server: a
    client's thread that started it may end before the client does.)"""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:  # the parent ended before the call: this one goes as it would have
        os._exit(0)


@dataclass(frozen=True)
class Plan:
    """What a candidate child will do, decided once per fork server from what the machine
    offers (``probe``), so every job of one evaluator is isolated alike."""

    namespaces: bool
    readonly_fs: bool
    drop_uid: bool
    socket_filter: bool = False
    private_proc: bool = False  # a /proc listing only the candidate's own processes (mounts.py)
    cgroup: str = ""  # where each isolated process's control group is made (cgroups.py), or ""
    sized_dir: int = 0  # the size of each job directory's own tmpfs, in bytes; 0: none
    missing: tuple[str, ...] = ()  # one line per protection the machine cannot give

    @property
    def summary(self) -> str:
        if not self.missing:
            kernel = f", {self.cgroup} limits" if self.cgroup else ""
            if self.sized_dir:
                kernel += f", a job directory of {self.sized_dir / 2**30:.1f} GiB"
            return (
                "isolation: full (namespaces, read-only filesystem, own user id and /proc, "
                f"rlimits{kernel}, no new sockets or keyrings)"
            )
        return "isolation: partial; " + "; ".join(self.missing)


@dataclass
class Limits:
    nproc: int = 512  # processes and threads of the candidate's user
    nofile: int = 1024
    # queued signals of the user, and so POSIX timers: thousands of timers armed to fire while
    # the candidate is stopped were charged to the reference's calls (2-3x speedups of
    # a 0.08 ms ReLU)
    sigpending: int = 256
    fsize_bytes: int = 2 << 30  # largest file it may write (builds included)
    address_space_bytes: int | None = None  # CPU targets only: CUDA reserves huge ranges
    memfd: bool = True  # may create memfds (CUDA targets: not tried without them)
    # the kernel's limit on the memory of each isolated process's group (its pages and the
    # kernel's own objects for it); None: no group
    memory_bytes: int | None = None
    # the size of the tmpfs each job directory is (where the fork server may mount one): the
    # kernel refuses a write past it, however fast (posix_fallocate bursts)
    disk_bytes: int = 4 << 30
    extra: dict = field(default_factory=dict)


def enter(job_dir: str, uid: int, plan: Plan, limits: Limits) -> str:
    """Isolate this (freshly forked, not yet CUDA-initialized) process; return the path at
    which it sees its job directory. Raises IsolationError when a planned step fails."""
    os.chdir(job_dir)
    path = job_dir
    if plan.namespaces:
        flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
        if os.geteuid() != 0:  # an unprivileged user namespace, where the kernel allows one
            _user_namespace()
        check(_libc.unshare(flags), "unshare")
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        job_fd = os.open(job_dir, os.O_RDONLY | os.O_DIRECTORY)
        work_dir = os.path.dirname(os.path.realpath(job_dir))
        if work_dir in PRIVATE:  # a job made right in /tmp: it alone is kept out, not all of /tmp
            work_dir = os.path.realpath(job_dir)
        needed = []
        for p in needed_paths(None, work_dir):
            try:
                needed.append((p, os.open(p, os.O_PATH | os.O_DIRECTORY)))
            except FileNotFoundError:  # an import path removed meanwhile: nothing to show
                continue
        masks = {a for p, _ in needed if plan.drop_uid and (a := _closed_ancestor(p))}
        pch_fd = _open_dir(os.environ.get(PCH_ENV))
        if plan.readonly_fs:
            readonly_everything()
        if plan.private_proc:
            private_proc()
        for private in PRIVATE:
            if os.path.isdir(private):
                mount("tmpfs", private, "tmpfs", MS_NOSUID | MS_NODEV, "size=1g,mode=1777")
        _expose(needed, masks)
        _hide_caches()
        if pch_fd is not None:
            _bind_readonly(pch_fd, PCH_MOUNT)
            os.environ[PCH_ENV] = PCH_MOUNT
        os.makedirs(JOB_MOUNT)
        mount(f"/proc/self/fd/{job_fd}", JOB_MOUNT, None, MS_BIND)
        mount(None, JOB_MOUNT, None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV)
        os.close(job_fd)
        path = JOB_MOUNT
    os.chdir(path)
    _rlimits(limits)
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    if plan.drop_uid:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        # A change of user clears "dumpable", which would leave the candidate's own /proc files
        # owned by root; other users still cannot reach it.
        prctl(PR_SET_DUMPABLE, 1)
    die_with_parent()  # after the change of user, which clears it
    return path


def needed_paths(cache_dir: str | None = None, work_dir: str | None = None) -> list[str]:
    """Folders a candidate must read: the Python installation and every import path. Those under
    a private /tmp (a virtualenv in /tmp) are bound back read-only, except a private root itself
    and any folder that holds, or lies in, the cache directory (its secret key and sealed
    records) or ``work_dir`` (where the evaluator's jobs live)."""
    paths = _import_roots()  # the Python installation, the import paths, htam itself
    secret = [os.path.realpath(d) for d in (cache_dir or str(cache_root()), work_dir) if d]

    def allowed(p: str) -> bool:
        real = os.path.realpath(p)
        return real not in PRIVATE and not any(
            s == real or s.startswith(real + "/") or real.startswith(s + "/") for s in secret
        )

    return sorted(p for p in paths if os.path.isdir(p) and allowed(p))


def _hide_caches() -> None:
    """An empty folder over each evaluator cache still in view (one outside a home or /tmp):
    a candidate needs none of it (the headers are bound apart, at PCH_MOUNT), and what lies
    there is the host's, readable by all: the memory bank, whose SQLite locks a reader can hold
    (every write of the host's then waits, and fails), and the records of earlier jobs."""
    caches = {str(cache_root()), *([os.path.dirname(d)] if (d := os.environ.get(PCH_ENV)) else [])}
    imports = [os.path.realpath(p) for p in _import_roots()]
    for cache in sorted(os.path.realpath(c) for c in caches):
        holds_imports = any(p == cache or p.startswith(cache + "/") for p in imports)
        if cache == "/" or holds_imports or not os.path.isdir(cache):
            continue  # gone from view already (a home, /tmp), or the candidate's own imports
        mount("tmpfs", cache, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k,mode=755")


def _import_roots() -> set[str]:
    roots = {sys.prefix, sys.exec_prefix, sys.base_prefix, str(Path(__file__).resolve().parents[2])}
    return roots | {p for p in sys.path if p and os.path.isabs(p)}


def _closed_ancestor(path: str) -> str | None:
    """The outermost folder on the way to ``path`` that other users cannot pass through."""
    parts = path.strip("/").split("/")
    for i in range(1, len(parts)):
        folder = "/" + "/".join(parts[:i])
        if not os.stat(folder).st_mode & 0o001:
            return folder
    return None


def _expose(needed: list[tuple[str, int]], masks: set[str]) -> None:
    """A folder the candidate needs that lies in a home it may not enter (``/root``), or under a
    private /tmp: the home is replaced by an empty tmpfs (its secrets stay out of view) and
    only the needed folders are bound back, read-only."""
    for mask in sorted(masks):
        os.makedirs(mask, exist_ok=True)  # under a private /tmp it is not there yet
        mount("tmpfs", mask, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    hidden = tuple(masks) + PRIVATE
    for path, fd in needed:
        if any(path == h or path.startswith(h + "/") for h in hidden):
            os.makedirs(path, exist_ok=True)
            try:
                mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
            except IsolationError as exc:
                # a folder under /tmp removed since it was opened: the candidate imports nothing
                # from it (a home's folders must be shown: there a failure stays a failure)
                if exc.errno != errno.ENOENT or not path.startswith(
                    tuple(d + "/" for d in PRIVATE)
                ):
                    raise
        os.close(fd)


def _open_dir(path: str | None) -> int | None:
    try:
        return os.open(path, os.O_PATH | os.O_DIRECTORY) if path else None
    except OSError:
        return None


def _bind_readonly(fd: int, target: str) -> None:
    os.makedirs(target)
    mount(f"/proc/self/fd/{fd}", target, None, MS_BIND)
    mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.close(fd)


def _user_namespace() -> None:
    uid, gid = os.geteuid(), os.getegid()
    check(_libc.unshare(CLONE_NEWUSER), "unshare user")
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def _rlimits(limits: Limits) -> None:
    def cap(kind: int, value: int) -> None:
        soft, hard = resource.getrlimit(kind)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(kind, (value, value))

    cap(resource.RLIMIT_NPROC, limits.nproc)
    cap(resource.RLIMIT_NOFILE, limits.nofile)
    cap(resource.RLIMIT_SIGPENDING, limits.sigpending)
    cap(resource.RLIMIT_FSIZE, limits.fsize_bytes)
    cap(resource.RLIMIT_CORE, 0)
    if limits.address_space_bytes:
        cap(resource.RLIMIT_AS, limits.address_space_bytes)


# --------------------------------------------------------------------------- what the machine offers


def probe() -> Plan:
    """Try each protection in a throwaway child and keep those that work."""
    missing: list[str] = []
    root = os.geteuid() == 0
    namespaces = readonly = _try_in_child(_probe_namespaces)
    if not root:
        missing.append("no own user id (not running as root)")
        if not namespaces:
            missing.append("no namespaces (unprivileged user namespaces are off)")
    elif not namespaces:
        missing.append("no namespaces: network, /tmp and the filesystem are shared")
    sockets = _try_in_child(_probe_socket_filter)
    if not sockets:
        missing.append("no socket filter (seccomp unavailable): unix socket files are reachable")
    procs = root and namespaces and _try_in_child(_probe_private_proc)
    if root and namespaces and not procs:
        missing.append("no /proc of its own: every process's command line is in view")
    return Plan(namespaces, readonly, root, sockets, procs, missing=tuple(missing))


def _probe_socket_filter() -> None:
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    restrict_syscalls()
    check_filter()


def _probe_namespaces() -> None:
    if os.geteuid() != 0:
        _user_namespace()
    check(_libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC), "unshare")
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m")


def _probe_private_proc() -> None:
    """Root only: the new /proc must hide the host's first process from another user."""
    check(_libc.unshare(CLONE_NEWNS), "unshare")
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    private_proc()

    def as_another_user() -> None:
        os.setgroups([])
        os.setresgid(65534, 65534, 65534)
        os.setresuid(65534, 65534, 65534)
        os.listdir("/proc/1")

    if _try_in_child(as_another_user):
        raise IsolationError(0, "hidepid had no effect")


def _try_in_child(fn) -> bool:
    pid = os.fork()
    if pid == 0:
        try:
            fn()
            os._exit(0)
        except BaseException:  # noqa: BLE001 - any failure means "not available"
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0
