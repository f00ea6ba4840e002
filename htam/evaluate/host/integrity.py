"""Caches a candidate cannot forge: every cached record carries a keyed digest (HMAC-SHA256 with
a per-installation secret that only the evaluator's user can read), and a record whose digest
does not match is treated as absent and computed again. Build outputs enter the cache only from
the evaluator's side, under the hash of the code that produced them, with the digest of each file.
"""

from __future__ import annotations

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

_SECRET_NAME = "secret.key"
MAX_BUILD_FILE = 512 << 20
# what one code's builds may keep in the cache in all (a candidate that failed on
# purpose left 601 MB of random bytes there, copied and hashed again at every rerun)
MAX_BUILD_TOTAL = 1 << 30


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
    sealed manifest of every file's hash; nothing when it comes to more than MAX_BUILD_TOTAL."""
    # A link in place of a folder would make this (privileged) copy read what it points to.
    present = [
        p
        for p in parts
        if stat.S_ISDIR(os.lstat(job_dir / p).st_mode if os.path.lexists(job_dir / p) else 0)
        and any((job_dir / p).iterdir())
    ]
    if not present:
        return
    usage = [folders.scan(str(job_dir / p)) for p in present]
    if any(u.over for u in usage) or sum(u.sizes for u in usage) > MAX_BUILD_TOTAL:
        return
    target = builds_dir(cache_dir, code_digest)
    staging = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    for part in present:
        shutil.copytree(job_dir / part, staging / part, ignore=_special)
    write_sealed(cache_dir, staging / "manifest.json", {"files": _files_except(staging)})
    shutil.rmtree(target, ignore_errors=True)
    try:
        os.replace(staging, target)
    except OSError as err:  # another evaluator (a bench lane) promoted the same code's build in
        shutil.rmtree(staging, ignore_errors=True)  # between: its copy serves as well
        if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise


def _kept_size(path: str) -> int | None:
    """The size of a regular file a promotion would copy; None for what a hostile build left
    that is not one (a FIFO would block the copy, a link would be followed) or is too large."""
    st = os.lstat(path)
    return st.st_size if stat.S_ISREG(st.st_mode) and st.st_size < MAX_BUILD_FILE else None


def _special(folder: str, names: list[str]) -> list[str]:
    """The names under ``folder`` a promotion skips: neither a kept file nor a folder."""
    return [
        name
        for name in names
        if _kept_size(path := os.path.join(folder, name)) is None
        and not stat.S_ISDIR(os.lstat(path).st_mode)  # links are not copied: nor followed
    ]


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
    return target
