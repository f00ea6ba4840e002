"""The candidate's user as its container: each isolated process runs under a user id of its own,
so every process it starts can be found, measured, stopped and killed by that id, however fast it
forks."""

from __future__ import annotations

import os
import signal
import socket

UID_BASE = 2_100_000  # candidate user ids: far above any real account
# A stopper's real and saved user id: candidate uid + this, above every candidate id (pids go
# up to 2**22, so candidate ids stay below 2_100_000 + 2**25).
GUARD_OFFSET = 1 << 30
_TICKS = os.sysconf("SC_CLK_TCK")


SLOTS = 8  # candidate user ids per fork server


def candidate_uid(server_pid: int, slot: int) -> int:
    """A user id per (fork server, slot): unique on the machine while both live (a server has
    at most five isolated processes alive: two standbys, a job's two, one being ended). The
    whole pid, not a part: servers whose pids differ by 100000, on a machine with pid_max at
    2**22, shared ids."""
    return UID_BASE + server_pid * SLOTS + slot % SLOTS


def uid_pids(uid: int) -> list[int]:
    """Every process owned by ``uid`` (the candidate and all it started; not its ``Stopper``,
    which acts as ``uid`` but is really another user's)."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid and _real_uid(name) == uid:
                    pids.append(int(name))
            except OSError:
                continue
    return pids


def _real_uid(pid: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Uid:"):
                return int(line.split()[1])
    return -1


def activity(uid: int) -> dict[int, tuple[str, int]]:
    """Every thread of every process owned by ``uid``: its state and its time on a CPU so far, in
    nanoseconds (to the clock tick where the kernel keeps no schedstat)."""
    threads = {}
    for pid in uid_pids(uid):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            where = f"/proc/{pid}/task/{tid}"
            try:
                with open(f"{where}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()  # from the state on
                try:
                    with open(f"{where}/schedstat") as f:
                        ran = int(f.read().split()[0])
                except OSError:  # utime + stime, in clock ticks
                    ran = (int(fields[11]) + int(fields[12])) * 1_000_000_000 // _TICKS
            except (OSError, ValueError, IndexError):
                continue
            threads[int(tid)] = (fields[0], ran)
    return threads


def rss_mb(pids: list[int]) -> float:
    """The memory ``pids`` hold: their anonymous and shared-memory resident pages, and their
    page tables. Pages of mapped files (torch's and CUDA's libraries, some 1 GiB a process on
    the H200) are the page cache's, shared and reclaimable, and are not counted; a private
    mapping written to becomes anonymous and is. The page tables that map them are each
    process's own kernel memory (100 processes mapping libtorch 16 times each held
    1.3 GB of them under a 1 GiB limit)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status", "rb") as f:
                for line in f:
                    if line.startswith((b"RssAnon:", b"RssShmem:", b"VmPTE:")):
                        total += int(line.split()[1]) << 10
        except (OSError, ValueError, IndexError):
            continue
    return total / (1 << 20)


# What an open descriptor is charged: a pipe's buffer and structures, which no resident set
# shows (440 processes of 505 full pipes held 2.4 GB under a 1 GiB limit, about
# 5.4 KB a descriptor once the user's first 64 MB of pipe pages were spent). An honest
# candidate holds a few hundred descriptors: a few MB.
DESCRIPTOR_KB = 16


def descriptors_mb(pids: list[int]) -> float:
    """Kernel memory behind the open descriptors of ``pids``, at ``DESCRIPTOR_KB`` each."""
    count = 0
    for pid in pids:
        try:
            count += len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            continue
    return count * DESCRIPTOR_KB / 1024


def private_tmp_mb(pid: int, folders: tuple[str, ...]) -> float:
    """What the process's private tmpfs mounts of ``folders`` hold: memory, in no process's
    resident set (three of 1 GiB beside the limit). Only mounts of its own, seen
    through its root; the host's folders of those names are not its memory."""
    total = 0
    for folder in folders:
        try:
            if os.stat(f"/proc/{pid}/root{folder}").st_dev == os.stat(folder).st_dev:
                continue
            st = os.statvfs(f"/proc/{pid}/root{folder}")
        except OSError:
            continue
        total += (st.f_blocks - st.f_bfree) * st.f_frsize
    return total / (1 << 20)


def signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            continue


def kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid`` at once: ``kill(-1)`` acting as that user reaches all of
    them atomically, however fast they fork. The killer's real and saved ids are the guard id,
    as a ``Stopper``'s: with the user's own ids, a process of the candidate's stopping all of
    its user in a loop stopped the killer before its kill, and the server waited on it for
    good."""
    pid = os.fork()
    if pid == 0:
        try:
            _act_as(uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _act_as(uid: int) -> None:
    """Act as ``uid`` (its effective id) with the guard id as real and saved id: this process
    reaches every process of ``uid`` with a signal, and none of them reaches it (the kernel lets
    a process signal another only when one of its ids is the other's real or saved id)."""
    os.setresgid(uid, uid, uid)
    os.setresuid(uid + GUARD_OFFSET, uid, uid + GUARD_OFFSET)
    if os.getresuid() != (uid + GUARD_OFFSET, uid, uid + GUARD_OFFSET):
        raise OSError(f"could not act as user {uid} under its guard id")


class Stopper:
    """Stops and resumes every process of a candidate's user at once. A child of the judge's,
    whose effective user id is the candidate's and whose real and saved ones are a guard id no
    process has: its ``kill(-1)`` reaches every process of the candidate's user atomically,
    however fast they fork, and none of them may signal or trace it (the kernel lets a process
    signal another only when one of its ids is the other's real or saved id). Listing /proc and
    signalling each process took the judge 0.8 ms, and 6-40 ms beside 400 processes of the
    candidate's: after each hand-over, a window in which a thread of the candidate's wrote the
    answer the call had not computed."""

    def __init__(self, uid: int):
        self.sock, theirs = socket.socketpair()
        self.pid = os.fork()
        if self.pid == 0:
            try:
                self.sock.close()
                _serve_stops(theirs, uid)
            finally:
                os._exit(0)
        theirs.close()

    def signal(self, sig: int, timeout_s: float = 30.0) -> None:
        """Send ``sig`` to every process of the user, and wait until it has been sent."""
        self.sock.settimeout(timeout_s)
        self.sock.sendall(bytes([sig]))
        if self.sock.recv(1) != b"k":
            raise OSError("the stopper ended")

    def close(self) -> None:
        self.sock.close()  # the stopper reads the end of its socket and exits
        os.waitpid(self.pid, 0)


def _serve_stops(sock: socket.socket, uid: int) -> None:
    try:
        _act_as(uid)
    except OSError:
        return  # kill(-1) with any other ids could reach other users' processes
    while sig := sock.recv(1):
        try:
            os.kill(-1, sig[0])
        except ProcessLookupError:
            pass  # no process of the user is left
        sock.sendall(b"k")
