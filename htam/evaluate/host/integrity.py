"""Caches a candidate cannot forge: every cached record carries a keyed digest (HMAC-SHA256 with
a per-installation secret that only the evaluator's user can read), and a record whose digest
does not match is treated as absent and computed again. Build outputs enter the cache only from
the evaluator's side, under the hash of the code that produced them, with the digest of each file.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import os
import secrets
import shutil
import stat
from pathlib import Path

from htam.evaluate.host import folders
from htam.evaluate.logs import NotRegular, open_regular

_SECRET_NAME = "secret.key"
MAX_BUILD_FILE = 512 << 20
# what one code's builds may keep in the cache in all (a candidate that failed on
# purpose left 601 MB of random bytes there, copied and hashed again at every rerun)
MAX_BUILD_TOTAL = 1 << 30
# files and folders of one code's builds: each is an inode of the host's disk for good (an
# honest Triton cache holds a few per kernel, an extension's build about six)
MAX_BUILD_ENTRIES = 4096
# what all codes' builds may keep in the cache together: each passing version of a solution may
# keep MAX_BUILD_TOTAL for good, so without it a run of many steps filled the host's disk
MAX_CACHE_BUILDS = 8 << 30
MAX_CACHE_ENTRIES = 100_000  # and their files and folders: inodes, whatever their size


def _secret(cache_dir: Path) -> bytes:
    path = cache_dir / _SECRET_NAME
    try:
        return bytes.fromhex(path.read_text().strip())
    except (OSError, ValueError):
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
        os.replace(tmp, path)
        return bytes.fromhex(path.read_text().strip())


def _digest(cache_dir: Path, body: bytes) -> str:
    return hmac.new(_secret(cache_dir), body, hashlib.sha256).hexdigest()


def write_sealed(cache_dir: Path, path: Path, data: dict) -> None:
    body = json.dumps(data, sort_keys=True).encode()
    record = {"digest": _digest(cache_dir, body), "data": data}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record))
    tmp.replace(path)


def read_sealed(cache_dir: Path, path: Path) -> dict | None:
    """The record's data, or None when it is missing, unreadable or its digest is wrong."""
    try:
        record = json.loads(path.read_text())
        data = record["data"]
        body = json.dumps(data, sort_keys=True).encode()
        if hmac.compare_digest(record["digest"], _digest(cache_dir, body)):
            return data
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


# --------------------------------------------------------------------------- builds


def _files(root: Path) -> dict[str, str]:
    out = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def builds_dir(cache_dir: Path, code_digest: str) -> Path:
    return cache_dir / "builds" / code_digest


def promote(cache_dir: Path, job_dir: Path, code_digest: str, parts=("ext", "triton")) -> None:
    """Copy what a finished (dead) candidate built into the cache for the same code only, with a
    sealed manifest of every file's hash; nothing when it comes to more than MAX_BUILD_TOTAL
    bytes or MAX_BUILD_ENTRIES files and folders."""
    target = builds_dir(cache_dir, code_digest)
    staging = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        kept = _copy_parts(job_dir, parts, staging)
    except (_TooMuch, OSError):  # past a total, or a tree the host cannot copy: not kept
        kept = 0
    if not kept:
        shutil.rmtree(staging, ignore_errors=True)
        return
    write_sealed(cache_dir, staging / "manifest.json", {"files": _files_except(staging)})
    shutil.rmtree(target, ignore_errors=True)
    try:
        os.replace(staging, target)
    except OSError as err:  # another evaluator (a bench lane) promoted the same code's build in
        shutil.rmtree(staging, ignore_errors=True)  # between: its copy serves as well
        if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
    _evict(target.parent, keep=target)


def _evict(builds: Path, keep: Path) -> None:
    """Remove the least recently used builds until all of them together hold no more than
    MAX_CACHE_BUILDS bytes and MAX_CACHE_ENTRIES files and folders (``keep``, the one just
    promoted, stays)."""
    found = []
    for folder in builds.iterdir():
        if folder.suffix == ".tmp" or folder == keep:
            continue
        try:  # another evaluator may remove one meanwhile
            used = (folder / "manifest.json").stat().st_mtime
        except OSError:
            continue
        found.append((used, folder, folders.scan(str(folder))))
    kept = folders.scan(str(keep))
    size = kept.sizes + sum(usage.sizes for _, _, usage in found)
    entries = kept.entries + sum(usage.entries for _, _, usage in found)
    for _, folder, usage in sorted(found, key=lambda row: row[0]):
        if size <= MAX_CACHE_BUILDS and entries <= MAX_CACHE_ENTRIES:
            break
        shutil.rmtree(folder, ignore_errors=True)
        size, entries = size - usage.sizes, entries - usage.entries


class _TooMuch(Exception):
    """The build passed one of the promotion's totals: none of it is kept."""


# Every name is opened relative to its folder's descriptor, never followed when it is a link,
# and each file is read through the descriptor it was checked on: the folder belongs to the
# candidate, and a process of its that outlived the job could swap a checked name for a link
# (to the cache's key) between a look by path and a copy by path.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _copy_parts(job_dir: Path, parts: tuple[str, ...], staging: Path) -> int:
    """Copy the parts of ``job_dir`` named by ``parts`` (folders or files, by a relative path
    of one or more components) into ``staging``: how many files were kept."""
    try:
        root = os.open(job_dir, _DIR_FLAGS)
    except OSError:
        return 0
    budget = _Budget()
    try:
        for part in parts:
            *above, last = Path(part).parts
            parent = _open_folders(root, above)
            if parent is None:
                continue
            try:
                fd = os.open(last, _DIR_FLAGS, dir_fd=parent)
            except OSError:  # absent, a link, not a folder: a regular file, or nothing
                (staging / part).parent.mkdir(parents=True, exist_ok=True)
                _copy_file(parent, last, staging / part, budget)
                continue
            finally:
                if parent != root:
                    os.close(parent)
            _copy_tree(fd, staging / part, budget)
    finally:
        os.close(root)
    return budget.files


def _open_folders(root: int, names: list[str]) -> int | None:
    """The folder at ``names`` under ``root``, each component opened from the one before it,
    never followed when it is a link (``root`` itself for no names); None where one is not a
    folder."""
    fd = root
    for name in names:
        try:
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError:
            child = None
        if fd != root:
            os.close(fd)
        if child is None:
            return None
        fd = child
    return fd


class _Budget:
    def __init__(self) -> None:
        self.bytes = self.entries = self.files = 0

    def entry(self) -> None:
        self.entries += 1
        if self.entries > MAX_BUILD_ENTRIES:
            raise _TooMuch(f"more than {MAX_BUILD_ENTRIES} files and folders")

    def take(self, size: int) -> None:
        self.bytes += size
        if self.bytes > MAX_BUILD_TOTAL:
            raise _TooMuch(f"more than {MAX_BUILD_TOTAL} bytes")


def _copy_tree(top: int, dest: Path, budget: _Budget) -> None:
    """Copy the regular files and folders under the open folder ``top`` (closed here) into
    ``dest``, without recursion: links, FIFOs, sockets and devices are left out."""
    stack = [(top, dest, 0)]
    try:
        while stack:
            fd, folder, depth = stack.pop()
            try:
                folder.mkdir(parents=True, exist_ok=True)
                with os.scandir(fd) as entries:
                    names = [e.name for e in entries]
                for name in names:
                    budget.entry()
                    if len(str(folder / name)) - len(str(dest)) > folders.MAX_PATH:
                        raise _TooMuch(f"paths longer than {folders.MAX_PATH} characters")
                    try:
                        child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                    except OSError:
                        _copy_file(fd, name, folder / name, budget)
                        continue
                    stack.append((child, folder / name, depth + 1))
                    if depth + 1 > folders.MAX_DEPTH:
                        raise _TooMuch(f"folders nested deeper than {folders.MAX_DEPTH}")
            finally:
                os.close(fd)
    finally:
        for fd, _, _ in stack:  # left open by a total passed
            os.close(fd)


def _copy_file(dir_fd: int, name: str, dest: Path, budget: _Budget) -> None:
    """Copy ``name`` under ``dir_fd`` when it is a regular file below MAX_BUILD_FILE, at most
    the length it had when it was opened."""
    try:
        fd = open_regular(name, dir_fd=dir_fd)
    except NotRegular:
        return
    try:
        st = os.fstat(fd)
        if st.st_size >= MAX_BUILD_FILE:
            return
        budget.take(st.st_size)
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            left = st.st_size
            while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
                os.write(out, chunk)
                left -= len(chunk)
            os.fchmod(out, stat.S_IMODE(st.st_mode) & 0o755)
            os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(out)
        budget.files += 1
    finally:
        os.close(fd)


def listed(cache_dir: Path, code_digest: str) -> list[str]:
    """The files a cached build's sealed manifest names (none without a sound manifest)."""
    manifest = read_sealed(cache_dir, builds_dir(cache_dir, code_digest) / "manifest.json")
    return sorted(manifest["files"]) if manifest else []


def _files_except(root: Path) -> dict[str, str]:
    return {k: v for k, v in _files(root).items() if k != "manifest.json"}


def verified(cache_dir: Path, code_digest: str) -> Path | None:
    """The cached builds of this code, if every file is exactly what was recorded."""
    target = builds_dir(cache_dir, code_digest)
    manifest = read_sealed(cache_dir, target / "manifest.json")
    if manifest is None:
        shutil.rmtree(target, ignore_errors=True)
        return None
    if _files_except(target) != manifest["files"]:
        shutil.rmtree(target, ignore_errors=True)
        return None
    with contextlib.suppress(OSError):  # a cache this user cannot write keeps its order
        os.utime(target / "manifest.json")  # used now: the last a full cache evicts
    return target
