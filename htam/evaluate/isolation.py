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

from htam.evaluate.eval_config import cache_root

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWUSER = (
    0x00020000,
    0x04000000,
    0x08000000,
    0x40000000,
    0x10000000,
)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 1, 4, 38
JOB_MOUNT = "/tmp/job"  # where a candidate sees its job directory
PRIVATE = ("/tmp", "/var/tmp", "/dev/shm")  # each a fresh tmpfs for the candidate
_KEEP_WRITABLE = {"proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "mqueue"}
_libc = ctypes.CDLL(None, use_errno=True)


class IsolationError(OSError):
    pass


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise IsolationError(err, f"{what}: {os.strerror(err)}")


def _mount(src: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    def enc(s: str | None) -> bytes | None:
        return s.encode() if s is not None else None

    _check(
        _libc.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data or None)),
        f"mount {target}",
    )


def prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), f"prctl({option})")


def not_dumpable() -> None:
    """No core dump, no ptrace and no /proc/<pid>/mem or environ of this process for anyone
    but root: set in the CLI, the fork server and the judge (forked children inherit it)."""
    prctl(PR_SET_DUMPABLE, 0)


@dataclass(frozen=True)
class Plan:
    """What a candidate child will do, decided once per fork server from what the machine
    offers (``probe``), so every job of one evaluator is isolated alike."""

    namespaces: bool
    readonly_fs: bool
    drop_uid: bool
    socket_filter: bool = False
    missing: tuple[str, ...] = ()  # one line per protection the machine cannot give

    @property
    def summary(self) -> str:
        if not self.missing:
            return (
                "isolation: full (namespaces, read-only filesystem, own user id, rlimits, "
                "no new sockets or keyrings)"
            )
        return "isolation: partial; " + "; ".join(self.missing)


@dataclass
class Limits:
    nproc: int = 512  # processes and threads of the candidate's user
    nofile: int = 1024
    # queued signals of the user, and so POSIX timers: thousands of timers armed to fire while
    # the candidate is stopped were charged to the reference's calls (red team: 2-3x speedups of
    # a 0.08 ms ReLU)
    sigpending: int = 256
    fsize_bytes: int = 2 << 30  # largest file it may write (builds included)
    address_space_bytes: int | None = None  # CPU targets only: CUDA reserves huge ranges
    memfd: bool = True  # may create memfds (CUDA targets: not tried without them)
    extra: dict = field(default_factory=dict)


def _mountinfo() -> list[tuple[str, set[str], str]]:
    rows = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            fstype = parts[parts.index("-") + 1]
            point = parts[4].replace("\\040", " ")
            rows.append((point, set(parts[5].split(",")), fstype))
    return rows


def _readonly_everything() -> None:
    for point, opts, fstype in _mountinfo():
        if fstype in _KEEP_WRITABLE or "ro" in opts:
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for name, bit in (("nosuid", MS_NOSUID), ("nodev", MS_NODEV), ("noexec", MS_NOEXEC)):
            if name in opts:
                flags |= bit
        try:
            _mount(None, point, None, flags)
        except IsolationError:
            # A mount hidden under another one cannot be reached by its path; what is visible
            # at that path is remounted in its own turn.
            continue


def enter(job_dir: str, uid: int, plan: Plan, limits: Limits) -> str:
    """Isolate this (freshly forked, not yet CUDA-initialized) process; return the path at
    which it sees its job directory. Raises IsolationError when a planned step fails."""
    os.chdir(job_dir)
    path = job_dir
    if plan.namespaces:
        flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
        if os.geteuid() != 0:  # an unprivileged user namespace, where the kernel allows one
            _user_namespace()
        _check(_libc.unshare(flags), "unshare")
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        job_fd = os.open(job_dir, os.O_RDONLY | os.O_DIRECTORY)
        work_dir = os.path.dirname(os.path.realpath(job_dir))
        needed = []
        for p in needed_paths(None, work_dir):
            try:
                needed.append((p, os.open(p, os.O_PATH | os.O_DIRECTORY)))
            except FileNotFoundError:  # an import path removed meanwhile: nothing to show
                continue
        masks = {a for p, _ in needed if plan.drop_uid and (a := _closed_ancestor(p))}
        if plan.readonly_fs:
            _readonly_everything()
        for private in PRIVATE:
            if os.path.isdir(private):
                _mount("tmpfs", private, "tmpfs", MS_NOSUID | MS_NODEV, "size=1g,mode=1777")
        _expose(needed, masks)
        os.makedirs(JOB_MOUNT)
        _mount(f"/proc/self/fd/{job_fd}", JOB_MOUNT, None, MS_BIND)
        _mount(None, JOB_MOUNT, None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV)
        os.close(job_fd)
        path = JOB_MOUNT
    os.chdir(path)
    _rlimits(limits)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    if plan.drop_uid:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        # A change of user clears "dumpable", which would leave the candidate's own /proc files
        # owned by root; other users still cannot reach it.
        prctl(PR_SET_DUMPABLE, 1)
    return path


def needed_paths(cache_dir: str | None = None, work_dir: str | None = None) -> list[str]:
    """Folders a candidate must read: the Python installation and every import path. Those under
    a private /tmp (a virtualenv in /tmp) are bound back read-only, except a private root itself
    and any folder that holds, or lies in, the cache directory (its secret key and sealed
    records) or ``work_dir`` (where the evaluator's jobs live)."""
    paths = {sys.prefix, sys.exec_prefix, sys.base_prefix}
    paths |= {p for p in sys.path if p and os.path.isabs(p)}
    paths.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # htam itself
    secret = [os.path.realpath(d) for d in (cache_dir or str(cache_root()), work_dir) if d]

    def allowed(p: str) -> bool:
        real = os.path.realpath(p)
        return real not in PRIVATE and not any(
            s == real or s.startswith(real + "/") or real.startswith(s + "/") for s in secret
        )

    return sorted(p for p in paths if os.path.isdir(p) and allowed(p))


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
        _mount("tmpfs", mask, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    hidden = tuple(masks) + PRIVATE
    for path, fd in needed:
        if any(path == h or path.startswith(h + "/") for h in hidden):
            os.makedirs(path, exist_ok=True)
            try:
                _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
            except IsolationError as exc:
                # a folder under /tmp removed since it was opened: the candidate imports nothing
                # from it (a home's folders must be shown: there a failure stays a failure)
                if exc.errno != errno.ENOENT or not path.startswith(
                    tuple(d + "/" for d in PRIVATE)
                ):
                    raise
        os.close(fd)


def _user_namespace() -> None:
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(CLONE_NEWUSER), "unshare user")
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


# ---------------------------------------------------------------- the syscall filter


class _Filter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint),
    ]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


_LD, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _EACCES, _ENOSYS = 0x7FFF0000, 0x00050000 | 13, 0x00050000 | 38
_KILL = 0x80000000  # the whole process
_X86_64, _SYS_SECCOMP = 0xC000003E, 317
_X32 = 0x40000000  # the x32 ABI's numbers: x86_64's with this bit
_CLONE, _CLONE3, _UNSHARE, _SETNS = 56, 435, 272, 308
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
_NEW_NAMESPACES = (
    0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
)
_SOCKETS = (41, 53)  # socket, socketpair
_KEYRINGS = (248, 249, 250)  # add_key, request_key, keyctl
# io_uring_setup, _enter, _register: its SOCKET and CONNECT operations never pass the filter
_IO_URING = (425, 426, 427)
_SYSV_IPC = (29, 68)  # shmget, msgget: kernel memory in no process's resident set
_SYS_MEMFD_CREATE = 319


def restrict_syscalls(memfd: bool = True) -> None:
    """No new socket of any family, and no kernel keyring, in every thread of the process and
    its descendants (seccomp, synchronized across threads); the harness keeps the one socket it
    was given. A network namespace keeps the network out, but not a unix socket file that some
    other program left world-writable, and a socket's queued data is kernel memory in no
    resident set: red team 5 held 4 GiB under a 2 GiB limit in socket pairs, then 3 GiB in
    netlink sockets once pairs were refused, so every family is. No io_uring: its operations
    make and connect sockets without the socket syscall (red team 4 reached a host socket file
    that way). A user's keyring outlives its processes, and candidate user ids are reused: a key
    one job added, a later job of the same id read (red team). No System V shared memory or
    message queue: a detached segment is in no resident set (red team 4 held 6 GiB under a 3
    GiB limit). Without ``memfd`` no memfd either, for the same reason (4.5 GiB).

    No new namespace (unshare, setns, clone with a CLONE_NEW* flag; clone3, whose flags the
    filter cannot read, answers ENOSYS and the C library falls back to clone): in a user and
    mount namespace of its own a candidate mounted a tmpfs and held 6 GiB under a 2 GiB limit
    (red team 6). And only x86_64's own numbers: a 32-bit syscall (``int $0x80``) or an x32 one
    kills the process, since their numbers differ and the list above would miss them (red team
    6 reached a host socket file, hoarded socket buffers and planted a key that way)."""
    denied = _SOCKETS + _KEYRINGS + _IO_URING + _SYSV_IPC + (() if memfd else (_SYS_MEMFD_CREATE,))
    denied += (_UNSHARE, _SETNS)
    prog = [
        (_LD, None, None, 4),  # arch
        (_JEQ, None, "kill", _X86_64),
        (_LD, None, None, 0),  # the syscall number
        (_JGE, "kill", None, _X32),
        *[(_JEQ, "deny", None, nr) for nr in denied],
        (_JEQ, "nosys", None, _CLONE3),
        (_JEQ, None, "allow", _CLONE),
        (_LD, None, None, 16),  # clone's flags (the low half of its first argument)
        (_JSET, "deny", None, _NEW_NAMESPACES),
        ("allow", _RET, _ALLOW),
        ("deny", _RET, _EACCES),
        ("nosys", _RET, _ENOSYS),
        ("kill", _RET, _KILL),
    ]
    filters = _assemble(prog)
    program = _Program(len(filters), (_Filter * len(filters))(*filters))
    set_filter, tsync = 1, 1
    ret = _libc.syscall(_SYS_SECCOMP, set_filter, tsync, ctypes.byref(program))
    _check(ret, "seccomp")


def _assemble(prog: list[tuple]) -> list[_Filter]:
    """BPF from (code, jump if true, jump if false, k) with labels for the jumps (None: the next
    instruction), and labelled returns (label, code, k)."""
    at = {ins[0]: i for i, ins in enumerate(prog) if isinstance(ins[0], str)}
    out = []
    for i, ins in enumerate(prog):
        if isinstance(ins[0], str):
            out.append(_Filter(ins[1], 0, 0, ins[2]))
            continue
        code, jt, jf, k = ins
        hop = [0 if j is None else at[j] - i - 1 for j in (jt, jf)]
        out.append(_Filter(code, hop[0], hop[1], k))
    return out


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
    return Plan(namespaces, readonly, root, sockets, tuple(missing))


def _probe_socket_filter() -> None:
    import socket

    prctl(PR_SET_NO_NEW_PRIVS, 1)
    restrict_syscalls()
    for name, nr in (
        ("keyctl", _KEYRINGS[2]),
        ("io_uring_setup", _IO_URING[0]),
        ("socketpair", _SOCKETS[1]),
        ("unshare", _UNSHARE),
    ):
        if _libc.syscall(nr, 0, 0) != -1 or ctypes.get_errno() != errno.EACCES:
            raise IsolationError(0, f"the syscall filter let {name} through")
    for family, kind in (
        (socket.AF_UNIX, socket.SOCK_STREAM),
        (socket.AF_NETLINK, socket.SOCK_RAW),
    ):
        try:
            socket.socket(family, kind)
        except PermissionError:
            continue
        raise IsolationError(0, f"the socket filter let a {family.name} socket through")


def _probe_namespaces() -> None:
    if os.geteuid() != 0:
        _user_namespace()
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC), "unshare")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m")


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
