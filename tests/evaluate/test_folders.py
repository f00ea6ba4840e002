"""The job directory's walk and removal: no recursion, limits no build comes near, and files
removed but held open counted (red team 5)."""

import os

import pytest

from htam.evaluate.host import folders
from htam.evaluate.host.watchdog import _unlinked_bytes


def _chain(root, depth: int, name: str = "a") -> None:
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)


def test_a_plain_tree_is_measured(tmp_path):
    (tmp_path / "ext").mkdir()
    (tmp_path / "ext" / "lib.so").write_bytes(b"x" * 10000)
    (tmp_path / "log").write_text("hello")
    usage = folders.scan(str(tmp_path))
    assert usage.over is None
    assert usage.entries == 3
    assert usage.sizes == 10005
    assert usage.bytes >= 12288  # whole blocks


@pytest.mark.slow
def test_a_deep_chain_stops_the_walk_and_is_removed(tmp_path):
    (tmp_path / "deep").mkdir()
    try:
        _chain(tmp_path / "deep", 1500)
        usage = folders.scan(str(tmp_path))
        assert usage.over == "folders nested deeper than 64"
        assert usage.entries == 65
    finally:  # pytest's own removal of old tmp folders would overflow its stack on it
        folders.remove(tmp_path / "deep")
    assert not (tmp_path / "deep").exists()


def test_long_names_stop_the_walk_before_the_kernel_refuses_the_path(tmp_path):
    try:
        _chain(tmp_path, 20, "n" * 200)
        assert folders.scan(str(tmp_path)).over == "paths longer than 2048 characters"
    finally:
        folders.remove(tmp_path / ("n" * 200))
    assert not os.listdir(tmp_path)


def test_many_empty_files_pass_the_entry_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(folders, "MAX_ENTRIES", 50)
    for i in range(80):
        (tmp_path / str(i)).touch()
    usage = folders.scan(str(tmp_path))
    assert (usage.over, usage.entries, usage.bytes) == ("more than 50 files and folders", 51, 0)


def test_files_removed_but_open_are_counted_once_on_their_filesystem(tmp_path):
    fds = []
    for i in range(2):
        fd = os.open(tmp_path / f"f{i}", os.O_RDWR | os.O_CREAT, 0o600)
        os.posix_fallocate(fd, 0, 1 << 20)
        fds.append(fd)
    fds.append(os.dup(fds[0]))  # the same file twice
    os.unlink(tmp_path / "f0")
    try:
        assert _unlinked_bytes([os.getpid()], str(tmp_path)) == 1 << 20  # f1 is still linked
        os.unlink(tmp_path / "f1")
        assert _unlinked_bytes([os.getpid()], str(tmp_path)) == 2 << 20
        assert _unlinked_bytes([os.getpid()], "/proc") == 0  # another filesystem
    finally:
        for fd in fds:
            os.close(fd)
    assert _unlinked_bytes([os.getpid()], str(tmp_path)) == 0


def test_a_file_removed_and_closed_but_still_mapped_is_counted(tmp_path):
    import mmap

    fd = os.open(tmp_path / "m", os.O_RDWR | os.O_CREAT, 0o600)
    os.posix_fallocate(fd, 0, 1 << 20)
    mapped = mmap.mmap(fd, 1 << 20)
    os.close(fd)
    os.unlink(tmp_path / "m")
    try:
        assert _unlinked_bytes([os.getpid()], str(tmp_path)) == 1 << 20
    finally:
        mapped.close()
    assert _unlinked_bytes([os.getpid()], str(tmp_path)) == 0
