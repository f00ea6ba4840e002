"""What a finished candidate built is kept for the same code: regular files only, within a total."""

import os
from pathlib import Path

from htam.evaluate.host import integrity


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
