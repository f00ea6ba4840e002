"""What a candidate wrote into its folders, measured and removed without recursion.

A candidate may leave any tree behind. A chain of 1,500 nested folders overflowed
Python's stack in ``os.walk`` (recursive under 3.11) and in ``shutil.rmtree``: the evaluator
crashed and the folder stayed on the host. So the walk here keeps its own stack and stops at
limits no build comes near, and removal falls back to ``rm -rf``, which has no depth limit.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import stat
import subprocess
from dataclasses import dataclass

from htam.evaluate.sandbox.mounts import MS_NODEV, MS_NOSUID, mount, mountinfo

MAX_ENTRIES = 100_000  # files and folders: empty files use no blocks but do use the host's inodes
MAX_DEPTH = 64
MAX_PATH = 2048  # characters below the root; the kernel refuses paths past 4096
_MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class Usage:
    bytes: int  # blocks allocated, links not followed
    sizes: int  # the regular files' lengths (a sparse file's copy is not sparse)
    entries: int
    over: str | None  # which limit the tree passed (the walk stopped there), or None


def scan(root: str) -> Usage:
    """The blocks and entries under ``root``, stopping at the first limit passed."""
    total = sizes = entries = 0
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                for entry in it:
                    entries += 1
                    if entries > MAX_ENTRIES:
                        return Usage(
                            total, sizes, entries, f"more than {MAX_ENTRIES} files and folders"
                        )
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += st.st_blocks * 512
                    sizes += st.st_size if stat.S_ISREG(st.st_mode) else 0
                    if stat.S_ISDIR(st.st_mode):
                        if depth + 1 > MAX_DEPTH:
                            return Usage(
                                total, sizes, entries, f"folders nested deeper than {MAX_DEPTH}"
                            )
                        if len(entry.path) - len(root) > MAX_PATH:
                            return Usage(
                                total, sizes, entries, f"paths longer than {MAX_PATH} characters"
                            )
                        stack.append((entry.path, depth + 1))
        except OSError:
            continue
    return Usage(total, sizes, entries, None)


def mount_sized(folder: str, size_bytes: int, uid: int) -> None:
    """Make ``folder`` a tmpfs of ``size_bytes`` owned by ``uid``: what a job writes there is
    bounded by the kernel, at once (a burst of ``posix_fallocate`` between two of the watchdog's
    looks went 12 GiB past its limit), and its pages are charged to the writer's memory group."""
    options = f"size={size_bytes},mode=0700,uid={uid},gid={uid}"
    mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, options)


def check_sized() -> str:
    """Try a sized job directory for real (``htam doctor``), in a child of its own mount
    namespace: a write past a 1 MiB tmpfs must fail. "" where it holds, else why not."""
    import errno
    import tempfile

    from htam.evaluate.sandbox.mounts import MS_PRIVATE, MS_REC, check

    folder = tempfile.mkdtemp(prefix="htam-sized-")
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            check(_libc.unshare(0x00020000), "unshare")  # CLONE_NEWNS
            mount(None, "/", None, MS_REC | MS_PRIVATE)
            mount_sized(folder, 1 << 20, 0)
            with open(os.path.join(folder, "x"), "wb") as f:
                f.write(bytes(2 << 20))
        except OSError as exc:
            code = 0 if exc.errno == errno.ENOSPC else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    os.rmdir(folder)
    code = os.waitstatus_to_exitcode(status)
    return "" if code == 0 else "no sized job directory (a tmpfs cannot be mounted here)"


def unmount_all(path: str | os.PathLike) -> None:
    """Detach every mount at or under ``path``, deepest first (the sized job directories)."""
    root = os.path.realpath(path)
    points = [p for p, _, _ in mountinfo() if p == root or p.startswith(root + "/")]
    for point in sorted(points, key=len, reverse=True):
        _umount(point)


def _umount(point: str) -> None:
    _libc.umount2(point.encode(), _MNT_DETACH)  # a mount already gone is no failure here


def remove(path: str | os.PathLike) -> None:
    """Remove a tree, however deep, the mounts in it first; nothing if it is gone."""
    if os.geteuid() == 0 and os.path.isdir(path):
        unmount_all(path)
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        subprocess.run(["rm", "-rf", "--", os.fspath(path)], check=False)
