"""The candidate's syscall filter: seccomp BPF installed in trusted code after the candidate's
process is isolated (``isolation.enter``) and before its code is imported; every thread of the
process and its descendants keeps it. What it refuses, and the attack behind each rule, is in
:func:`restrict_syscalls`; :func:`check_filter` proves the rules hold where it is installed
(``isolation.probe`` runs it in a throwaway child before any candidate relies on it)."""

from __future__ import annotations

import ctypes
import errno
import os
import socket

_libc = ctypes.CDLL(None, use_errno=True)


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
_VMSPLICE = 278
# What no build or kernel calls, each a way to hold or reach what the limits do not see:
# vmsplice (a pipe pins the caller's pages, huge ones too, after it unmapped them: 3 GB held
# under a 1 GiB limit), userfaultfd, perf_event_open, bpf, process_vm_readv/writev, kexec,
# handles that open files by number, fanotify, and every mount call (old and new API).
_UNNEEDED = (
    (_VMSPLICE, 323, 298, 321, 310, 311, 246, 320, 303, 304, 300)
    + (165, 166, 155, 167, 168)  # mount, umount2, pivot_root, swapon, swapoff
    + (428, 429, 430, 431, 432, 433, 442)  # open_tree .. fspick, mount_setattr
)


def restrict_syscalls(memfd: bool = True) -> None:
    """No new socket of any family, and no kernel keyring, in every thread of the process and
    its descendants (seccomp, synchronized across threads); the harness keeps the one socket it
    was given. A network namespace keeps the network out, but not a unix socket file that some
    other program left world-writable, and a socket's queued data is kernel memory in no
    resident set: a candidate held 4 GiB under a 2 GiB limit in socket pairs, then 3 GiB in
    netlink sockets once pairs were refused, so every family is. No io_uring: its operations
    make and connect sockets without the socket syscall (a candidate reached a host socket file
    that way). A user's keyring outlives its processes, and candidate user ids are reused: a key
    one job added, a later job of the same id read. No System V shared memory or
    message queue: a detached segment is in no resident set (a candidate held 6 GiB under a 3
    GiB limit). Without ``memfd`` no memfd either, for the same reason (4.5 GiB).

    No new namespace (unshare, setns, clone with a CLONE_NEW* flag; clone3, whose flags the
    filter cannot read, answers ENOSYS and the C library falls back to clone): in a user and
    mount namespace of its own a candidate mounted a tmpfs and held 6 GiB under a 2 GiB limit.
    And only x86_64's own numbers: a 32-bit syscall (``int $0x80``) or an x32 one
    kills the process, since their numbers differ and the list above would miss them (a
    candidate reached a host socket file, hoarded socket buffers and planted a key that way)."""
    denied = _SOCKETS + _KEYRINGS + _IO_URING + _SYSV_IPC + (() if memfd else (_SYS_MEMFD_CREATE,))
    denied += (_UNSHARE, _SETNS) + _UNNEEDED
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
    if _libc.syscall(_SYS_SECCOMP, set_filter, tsync, ctypes.byref(program)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp: {os.strerror(err)}")


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


def check_filter() -> None:
    """Raise OSError unless the installed filter refuses what it must (a keyring, io_uring, a
    socket pair, a new namespace, unix and netlink sockets)."""
    for name, nr in (
        ("keyctl", _KEYRINGS[2]),
        ("io_uring_setup", _IO_URING[0]),
        ("socketpair", _SOCKETS[1]),
        ("unshare", _UNSHARE),
        ("vmsplice", _VMSPLICE),
    ):
        if _libc.syscall(nr, 0, 0) != -1 or ctypes.get_errno() != errno.EACCES:
            raise OSError(0, f"the syscall filter let {name} through")
    for family, kind in (
        (socket.AF_UNIX, socket.SOCK_STREAM),
        (socket.AF_NETLINK, socket.SOCK_RAW),
    ):
        try:
            socket.socket(family, kind)
        except PermissionError:
            continue
        raise OSError(0, f"the socket filter let a {family.name} socket through")
