"""The host's precompiled torch header (htam.evaluate.host.pch): built by the host for a flag set
seen again, used by a candidate's C++ compile (gcc says so with -H), never writable by a
candidate, and a build whose flags differ from the header's is a plain build that works."""

import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

from htam.evaluate import Evaluator
from htam.evaluate.host import inline_calls, integrity, pch
from htam.evaluate.sandbox.isolation import PCH_ENV, PCH_MOUNT
from tests.evaluate.conftest import fast_config, task_for

ARGS = {"name": "e", "cpp_sources": "int f();", "functions": ["f"]}


def test_only_flags_that_read_or_run_nothing_reach_a_host_compile():
    assert pch.host_flags(ARGS)[-2:] == ["-fPIC", "-std=c++20"]
    assert pch.host_flags({**ARGS, "extra_cflags": ["-O3", "-DN=4"]})[-2:] == ["-O3", "-DN=4"]
    for unsafe in (["-fplugin=./p.so"], ["-include", "/tmp/job/x.h"], ["@/tmp/job/args"]):
        assert pch.host_flags({**ARGS, "extra_cflags": unsafe}) is None
    assert pch.host_flags({**ARGS, "extra_include_paths": ["/tmp/job"]}) is None
    # the flags are torch's own for main.cpp, its name left out: one header serves every name
    flags = pch.host_flags(ARGS)
    assert "-DTORCH_API_INCLUDE_EXTENSION_H" in flags
    assert not any("TORCH_EXTENSION_NAME" in f for f in flags)


def _fake_gch(root, arguments):
    folder = root / pch.variant(pch.host_flags(arguments)) / "torch"
    folder.mkdir(parents=True)
    (folder / "extension.h").write_text("#include <torch/extension.h>\n")
    (folder / "extension.h.gch").write_bytes(b"gpch")
    return folder / "extension.h.gch"


def test_a_build_uses_the_header_only_where_one_was_built_for_its_flags(tmp_path, monkeypatch):
    monkeypatch.delenv(PCH_ENV, raising=False)
    gch = _fake_gch(tmp_path, ARGS)
    assert pch.use_flags(ARGS) == []  # no header in view
    monkeypatch.setenv(PCH_ENV, str(tmp_path))
    assert pch.use_flags(ARGS) == ["-include", str(gch)[: -len(".gch")], "-Winvalid-pch"]
    assert pch.use_flags({**ARGS, "extra_cflags": ["-O2"]}) == []  # other flags: plain build


def test_the_host_precompiles_a_flag_set_seen_again_and_keeps_few(tmp_path, monkeypatch):
    built = []

    def fake_build(folder, flags):
        built.append(flags)
        gch = folder / "torch" / "extension.h.gch"
        gch.parent.mkdir(parents=True)
        gch.write_bytes(b"gpch")
        return gch

    monkeypatch.setattr(pch, "build", fake_build)
    assert pch.ensure(tmp_path, ARGS) is None  # first sighting: a plain build
    assert pch.ensure(tmp_path, ARGS) is not None and len(built) == 1
    assert pch.ensure(tmp_path, ARGS) is not None and len(built) == 1  # built once
    for level in ("-O1", "-O2", "-O3"):
        args = {**ARGS, "extra_cflags": [level]}
        pch.ensure(tmp_path, args)
        pch.ensure(tmp_path, args)
    assert len(built) == pch.MAX_VARIANTS  # the third extra flag set gets none
    assert pch.ensure(tmp_path, {**ARGS, "extra_cflags": ["-fplugin=x.so"]}) is None


WRITER = """
import contextlib
import os
import torch.nn as nn

ROOT = os.environ["HTAM_PCH_DIR"]
GCH = [os.path.join(d, f) for d, _, fs in os.walk(ROOT) for f in fs if f.endswith(".gch")]
assert GCH, f"no precompiled header in view at {ROOT}"
with open(GCH[0], "rb") as f:
    assert f.read(4) == b"gpch"
ATTEMPTS = (
    lambda: open(GCH[0], "r+b").write(b"evil"),
    lambda: open(os.path.join(os.path.dirname(GCH[0]), "planted.h.gch"), "wb"),
    lambda: os.unlink(GCH[0]),
    lambda: os.rename(GCH[0], GCH[0] + ".old"),
)
for attempt in ATTEMPTS:
    with contextlib.suppress(OSError):  # a refused write skips the exit below
        attempt()
        raise SystemExit("the candidate wrote into the precompiled headers")


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp_min(0)
"""


@pytest.mark.slow
def test_a_candidate_reads_the_header_but_cannot_write_it(tmp_path):
    cache = tmp_path / "cache"
    gch = _fake_gch(pch.root(cache), ARGS)
    with Evaluator("cpu", fast_config(cache_dir=cache)) as evaluator:
        if evaluator.isolation.startswith("isolation: partial"):
            pytest.skip(f"the candidate runs as the evaluator's user here: {evaluator.isolation}")
        result = evaluator.evaluate(task_for("level1/1_ReLU.py"), WRITER, "cpp", allow_torch=True)
    assert result.status == "ok", f"{result.messages}\n{result.log[-1500:]}"
    assert gch.read_bytes() == b"gpch"
    assert sorted(p.name for p in gch.parent.iterdir()) == ["extension.h", "extension.h.gch"]


MAIN = "#include <torch/extension.h>\nint answer() { return 42; }\n"
FIXTURE = (Path(__file__).parent / "fixtures" / "honest_relu_cpp.py").read_text()
(RELU_ARGS,) = inline_calls.calls(FIXTURE)  # extra_cflags -O3 -fopenmp


@pytest.fixture(scope="module")
def pch_cache(tmp_path_factory):
    """An evaluator's cache holding the header precompiled for the fixture's flags."""
    if not pch.compiler_is_gcc():
        pytest.skip("gcc is not the C++ compiler here")
    cache = tmp_path_factory.mktemp("cache")
    flags = pch.host_flags(RELU_ARGS)
    folder = pch.root(cache) / pch.variant(flags)
    gch = pch.build(folder, flags)
    assert gch is not None, (folder / "failed").read_text()
    return cache, flags, gch


def _compile(tmp_path, flags: list[str]) -> subprocess.CompletedProcess:
    source = tmp_path / "main.cpp"
    source.write_text(MAIN)
    command = ["c++", "-DTORCH_EXTENSION_NAME=cand", *flags, "-H", "-c", str(source)]
    return subprocess.run(
        [*command, "-o", str(tmp_path / "main.o")], capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow
def test_a_candidate_compile_reads_the_precompiled_header(pch_cache, tmp_path, monkeypatch):
    cache, flags, gch = pch_cache
    monkeypatch.setenv(PCH_ENV, str(pch.root(cache)))
    done = _compile(tmp_path, flags + pch.use_flags(RELU_ARGS))
    assert done.returncode == 0, done.stderr[-3000:]
    # gcc's -H marks a precompiled header it used with "!" (one it could not use with "x")
    assert f"! {gch}" in done.stderr.splitlines()
    assert "not used because" not in done.stderr


@pytest.mark.slow
def test_a_changed_flag_falls_back_to_a_plain_build(pch_cache, tmp_path, monkeypatch):
    cache, flags, gch = pch_cache
    monkeypatch.setenv(PCH_ENV, str(pch.root(cache)))
    # the candidate's flags differ from the header's (-O0: __OPTIMIZE__ is not defined)
    done = _compile(tmp_path, [*flags, "-O0", *pch.use_flags(RELU_ARGS)])
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"! {gch}" not in done.stderr.splitlines()
    assert "not used because" in done.stderr  # -Winvalid-pch: the plain header was read
    assert (tmp_path / "main.o").stat().st_size > 0


@pytest.mark.slow
def test_a_prebuild_in_the_sandbox_reads_the_hosts_header(pch_cache, monkeypatch, tmp_path):
    cache, _, _ = pch_cache
    code = FIXTURE.replace("return y;", f"return y;  // {time.time_ns()}", 1)
    (arguments,) = inline_calls.calls(code)
    # the prebuild keeps the extension's library alone: its build files are read in the job
    job = tmp_path / "job"
    promote = integrity.promote

    def keep_a_copy(cache_dir, job_dir, name, parts):
        shutil.copytree(Path(job_dir) / "ext", job, symlinks=True)
        return promote(cache_dir, job_dir, name, parts=parts)

    monkeypatch.setattr(integrity, "promote", keep_a_copy)
    with Evaluator("cpu", fast_config(cache_dir=cache)) as evaluator:
        evaluator.prebuild(code, "cpp")
    built = integrity.verified(cache, f"ext-{inline_calls.key(arguments)}")
    assert built is not None
    variant = pch.variant(pch.host_flags(arguments))
    wrapper = f"{PCH_MOUNT}/{variant}/torch/extension.h"  # the candidate's read-only view
    (ninja,) = job.rglob("build.ninja")
    assert f"-include {wrapper} -Winvalid-pch" in ninja.read_text()
    # what gcc read for main.o (its depfile, kept by ninja): the wrapper header would be listed
    # had it been included as text (the .gch refused); a .gch that gcc used is not listed
    (deps,) = job.rglob(".ninja_deps")
    assert b"main.cpp" in deps.read_bytes()
    assert wrapper.encode() not in deps.read_bytes()


def test_the_hosts_lock_is_not_open_to_a_candidate(tmp_path):
    """The lock beside the headers lay in a candidate's read-only view, readable by all: a
    candidate could open it and hold it (a lock needs no write access), and every build stage
    of the evaluator waited on it while the candidate ran."""
    lock = pch.root(tmp_path) / ".lock"
    lock.write_text("")
    lock.chmod(0o644)  # as an earlier version left it
    with pch._locked(lock):
        assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    fresh = tmp_path / "fresh.lock"
    with pch._locked(fresh):
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
