"""What the watchdog counts as a candidate's host memory: what it allocated (anonymous and shared
memory), not the pages of files it maps (torch's and CUDA's libraries in every process)."""

import mmap
import os

import pytest

from htam.evaluate.sandbox.candidate_user import DESCRIPTOR_KB, descriptors_mb, rss_mb

MB = 1 << 20


def _child(r_go: int, w_ready: int, body) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            keep = body()  # noqa: F841 - held while the parent measures
            os.write(w_ready, b"x")
            os.read(r_go, 1)
        finally:
            os._exit(0)
    return pid


def _measured(body, measure=rss_mb) -> float:
    """``measure`` of a child process once ``body`` has run in it (and before it exits)."""
    r_go, w_go = os.pipe()
    r_ready, w_ready = os.pipe()
    pid = _child(r_go, w_ready, body)
    try:
        os.read(r_ready, 1)
        return measure([pid])
    finally:
        os.write(w_go, b"x")
        os.waitpid(pid, 0)


@pytest.mark.slow
def test_mapped_file_pages_do_not_count_and_allocations_do(tmp_path):
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        f.truncate(256 * MB)

    def map_file():
        with open(big, "rb") as f:
            m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        sum(m[i] for i in range(0, len(m), mmap.PAGESIZE))  # every page resident
        return m

    def allocate():
        return bytearray(os.urandom(MB)) * 256

    base = _measured(lambda: None)
    assert _measured(map_file) - base < 32
    assert _measured(allocate) - base > 200


def test_open_descriptors_are_charged():
    """Red team 10: pipe buffers are kernel memory in no resident set."""
    base = _measured(lambda: None, descriptors_mb)
    held = _measured(lambda: [os.pipe() for _ in range(400)], descriptors_mb)
    assert held - base >= 800 * DESCRIPTOR_KB / 1024


def test_page_tables_count(tmp_path):
    """Red team 11: page tables are each process's kernel memory, mapped file or not (100
    processes mapping libtorch 16 times each held 1.3 GB of them under a 1 GiB limit)."""
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        f.truncate(256 * MB)

    def map_often():
        maps = []
        with open(big, "rb") as f:
            for _ in range(16):
                m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
                m.madvise(mmap.MADV_NOHUGEPAGE)  # a page-table entry a page, not one a 2 MB folio
                sum(m[i] for i in range(0, len(m), mmap.PAGESIZE))  # every page mapped
                maps.append(m)
        return maps

    # 16 x 65536 pages, 8 bytes an entry: 8 MB of page tables, no anonymous memory
    assert _measured(map_often) - _measured(lambda: None) > 6
