"""What a finished candidate built is kept for the same code: regular files only, within a total."""

import ctypes
import os
import select
import struct
import threading
from pathlib import Path

import pytest

from htam.evaluate import Evaluator
from htam.evaluate.host import integrity
from htam.evaluate.sandbox.mounts import mountinfo
from tests.evaluate.cases import FIXTURES, RELU
from tests.evaluate.conftest import fast_config, task_for


def _build(job_dir, sizes: list[int]) -> None:
    ext = job_dir / "ext"
    ext.mkdir(parents=True)
    for k, size in enumerate(sizes):
        (ext / f"part{k}.so").write_bytes(os.urandom(size))


def test_a_build_is_kept_with_its_regular_files_only(tmp_path):
    job = tmp_path / "job"
    _build(job, [1000, 2000])
    os.symlink("/etc/passwd", job / "ext" / "link")
    integrity.promote(tmp_path / "cache", job, "abc")
    kept = integrity.builds_dir(tmp_path / "cache", "abc")
    assert sorted(p.name for p in (kept / "ext").iterdir()) == ["part0.so", "part1.so"]
    assert (kept / "manifest.json").exists()


def test_builds_beyond_the_total_are_not_kept(tmp_path, monkeypatch):
    """Red team: a candidate that failed on purpose left 601 MB of random bytes in the cache."""
    monkeypatch.setattr(integrity, "MAX_BUILD_TOTAL", 2500)
    job = tmp_path / "job"
    _build(job, [1000, 2000])
    integrity.promote(tmp_path / "cache", job, "abc")
    assert not integrity.builds_dir(tmp_path / "cache", "abc").exists()


def test_a_build_promoted_by_another_evaluator_meanwhile_is_kept(tmp_path, monkeypatch):
    """Two evaluators (bench lanes, test workers) promote the same code's build: the second's
    rename meets the first's folder, seen on the GPU as "Directory not empty"."""
    job = tmp_path / "job"
    _build(job, [1000])
    cache = tmp_path / "cache"
    target = integrity.builds_dir(cache, "abc")
    replace = os.replace

    def raced(src, dst):
        if Path(dst) == target:  # the other evaluator's copy lands first
            (target / "ext").mkdir(parents=True)
            (target / "ext" / "theirs.so").write_bytes(b"x")
        replace(src, dst)

    monkeypatch.setattr(integrity.os, "replace", raced)
    integrity.promote(cache, job, "abc")
    assert [p.name for p in (target / "ext").iterdir()] == ["theirs.so"]
    assert not list(target.parent.glob("*.tmp"))


# --------------------------------------------------------------------------- a build swapped mid-copy

_FAN_CLASS_CONTENT, _FAN_OPEN_PERM, _FAN_EVENT_ON_CHILD, _FAN_ALLOW = 0x08, 0x10000, 0x08000000, 1
_EVENT = struct.Struct("IBBHQii")  # struct fanotify_event_metadata


def _swap_on_first_open(folder: Path, secret: Path) -> threading.Thread:
    """A thread that holds the first open of a file under ``folder`` (a fanotify permission
    event: the opener waits for the answer) until every other file there has been replaced by a
    link to ``secret``: what a process of the candidate's that outlived its job could do between
    a promotion's look at the folder and its copy."""
    libc = ctypes.CDLL(None, use_errno=True)
    fan = libc.fanotify_init(_FAN_CLASS_CONTENT, os.O_RDONLY)
    if fan < 0:
        pytest.skip(f"no fanotify here: {os.strerror(ctypes.get_errno())}")
    mask = ctypes.c_uint64(_FAN_OPEN_PERM | _FAN_EVENT_ON_CHILD)
    if libc.fanotify_mark(fan, 1, mask, -100, str(folder).encode()) != 0:  # FAN_MARK_ADD
        os.close(fan)
        pytest.skip(f"no fanotify mark here: {os.strerror(ctypes.get_errno())}")

    stop = threading.Event()
    swapped: list[str] = []

    def swap(opened: str) -> None:
        for other in folder.iterdir():
            if other.name != opened:
                link = folder / f".{other.name}.link"
                link.symlink_to(secret)
                os.replace(link, other)
                swapped.append(other.name)

    def serve() -> None:
        while not stop.is_set():
            if not select.select([fan], [], [], 0.05)[0]:
                continue
            data = os.read(fan, 4096)
            for offset in range(0, len(data), _EVENT.size):
                fd = _EVENT.unpack_from(data, offset)[5]
                try:
                    if not swapped:
                        swap(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
                finally:  # an open left unanswered would wait for good
                    os.write(fan, struct.pack("iI", fd, _FAN_ALLOW))
                    os.close(fd)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    thread.fan, thread.stop, thread.swapped = fan, stop, swapped  # type: ignore[attr-defined]
    return thread


@pytest.mark.skipif(os.geteuid() != 0, reason="fanotify's permission events need root")
def test_a_file_swapped_for_a_link_during_the_copy_is_not_followed(tmp_path):
    """The promotion looked at each name (a regular file) and then copied it by path, following
    whatever stood there by then: a process left over from the job could swap a build file for a
    link to the cache's key between the two, and the key was kept as the build, for the next run
    of the same code to read."""
    secret = tmp_path / "secret.key"
    secret.write_text("sk-" + os.urandom(16).hex())
    secret.chmod(0o600)
    job = tmp_path / "job"
    _build(job, [4096] * 4)
    watcher = _swap_on_first_open(job / "ext", secret)
    try:
        integrity.promote(tmp_path / "cache", job, "abc")
    finally:
        watcher.stop.set()  # type: ignore[attr-defined]
        watcher.join(5.0)
        os.close(watcher.fan)  # type: ignore[attr-defined]
    kept = integrity.builds_dir(tmp_path / "cache", "abc")
    assert len(watcher.swapped) == 3  # type: ignore[attr-defined]
    copied = [p for p in kept.rglob("*") if p.is_file()] if kept.exists() else []
    assert all(secret.read_bytes() not in p.read_bytes() for p in copied), "the key was copied"
    assert sum(p.suffix == ".so" for p in copied) == 1  # the file opened first: itself


def test_a_build_of_too_many_files_is_not_kept(tmp_path, monkeypatch):
    """Every promoted file is an inode of the host's disk for good, and each version of a
    solution is promoted anew: 99,999 empty files (under the job directory's own limit) went
    into the cache at each passing evaluation."""
    monkeypatch.setattr(integrity, "MAX_BUILD_ENTRIES", 20, raising=False)
    job = tmp_path / "job"
    _build(job, [10] * 30)
    integrity.promote(tmp_path / "cache", job, "abc")
    assert not integrity.builds_dir(tmp_path / "cache", "abc").exists()


def test_special_files_and_links_in_a_build_are_left_out(tmp_path):
    job = tmp_path / "job"
    _build(job, [100])
    ext = job / "ext"
    os.mkfifo(ext / "fifo")
    (ext / "sub").mkdir()
    (ext / "sub" / "deep.so").write_bytes(b"deep")
    os.symlink(tmp_path, ext / "up")  # a link to a folder: not walked into
    os.symlink("/dev/zero", ext / "zero")
    os.symlink(ext, job / "triton")  # a link in a part's place
    integrity.promote(tmp_path / "cache", job, "abc")
    kept = integrity.builds_dir(tmp_path / "cache", "abc")
    files = sorted(str(p.relative_to(kept)) for p in kept.rglob("*") if p.is_file())
    assert files == ["ext/part0.so", "ext/sub/deep.so", "manifest.json"]
    assert integrity.verified(tmp_path / "cache", "abc") == kept


def test_all_builds_together_stay_within_the_cache_total(tmp_path, monkeypatch):
    """Each passing version of a solution kept up to MAX_BUILD_TOTAL in the cache for good: a run
    of many steps, each a little different, filled the host's disk 1 GiB a step. The least
    recently used builds go first."""
    monkeypatch.setattr(integrity, "MAX_CACHE_BUILDS", 7000, raising=False)
    cache = tmp_path / "cache"
    for k in range(4):
        job = tmp_path / f"job{k}"
        _build(job, [2000])
        if k == 3:  # code1 was used least recently, code0 since (by verified)
            for name, when in (("code0", 100), ("code1", 50), ("code2", 200)):
                os.utime(integrity.builds_dir(cache, name) / "manifest.json", (when, when))
            assert integrity.verified(cache, "code0")
        integrity.promote(cache, job, f"code{k}")
    kept = sorted(p.name for p in (cache / "builds").iterdir())
    assert kept == ["code0", "code2", "code3"]


def test_all_builds_together_stay_within_the_cache_entries(tmp_path, monkeypatch):
    """Empty files weigh nothing against the byte total, but each is an inode of the host's disk
    for good: 4,096 of them at every passing version of a solution."""
    monkeypatch.setattr(integrity, "MAX_CACHE_ENTRIES", 30, raising=False)
    cache = tmp_path / "cache"
    for k in range(3):
        job = tmp_path / f"job{k}"
        _build(job, [0] * 10)
        integrity.promote(cache, job, f"code{k}")
    kept = sorted(p.name for p in (cache / "builds").iterdir())
    assert kept == ["code1", "code2"]  # 12 entries each: ext, its 10 files, the manifest


def test_a_build_of_paths_too_long_to_copy_is_not_kept(tmp_path):
    """A chain of folders of 255-character names passes any path length the host can copy to."""
    job = tmp_path / "job"
    _build(job, [10])
    fd = os.open(job / "ext", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(20):  # 20 x 256 characters
            os.mkdir("d" * 255, dir_fd=fd)
            inner = os.open("d" * 255, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.close(os.open("f.so", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    integrity.promote(tmp_path / "cache", job, "abc")
    assert not integrity.builds_dir(tmp_path / "cache", "abc").exists()
    assert not list((tmp_path / "cache" / "builds").glob("*.tmp"))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_failure_after_the_run_leaves_no_job_directory_mounted(monkeypatch):
    """Each job directory is a tmpfs of its own (up to 4 GiB of memory): one raised after the run
    (in the promotion, the verdict, the blame) left both mounted on the host for good."""
    seen: list[Path] = []

    def failing(cache_dir, job_dir, code_digest, parts=("ext", "triton")):
        seen.append(Path(job_dir))
        raise RuntimeError("the promotion failed")

    code = (FIXTURES / "honest_relu_triton.py").read_text()
    with Evaluator("cpu", fast_config()) as evaluator:
        monkeypatch.setattr(integrity, "promote", failing)
        with pytest.raises(RuntimeError, match="the promotion failed"):
            evaluator.evaluate(task_for(RELU), code, "triton")
        mounted = {point for point, _, _ in mountinfo()}
    assert seen, "the honest candidate did not pass"
    assert str(seen[0]) not in mounted and not seen[0].exists()
