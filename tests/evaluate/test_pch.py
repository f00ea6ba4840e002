"""The host's precompiled torch header (htam.evaluate.host.pch): built by the host for a flag set
seen again, used by a candidate's C++ compile (gcc says so with -H), never writable by a
candidate, and a build whose flags differ from the header's is a plain build that works."""

import subprocess

import pytest

from htam.evaluate import Evaluator
from htam.evaluate.host import pch
from htam.evaluate.sandbox.isolation import PCH_ENV
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


@pytest.fixture(scope="module")
def built_pch(tmp_path_factory):
    root = tmp_path_factory.mktemp("pch")
    flags = pch.host_flags(ARGS)
    if not pch.compiler_is_gcc():
        pytest.skip("gcc is not the C++ compiler here")
    gch = pch.build(root / pch.variant(flags), flags)
    assert gch is not None, (root / pch.variant(flags) / "failed").read_text()
    return root, flags, gch


def _compile(tmp_path, flags: list[str]) -> subprocess.CompletedProcess:
    source = tmp_path / "main.cpp"
    source.write_text(MAIN)
    command = ["c++", "-DTORCH_EXTENSION_NAME=cand", *flags, "-H", "-c", str(source)]
    return subprocess.run(
        [*command, "-o", str(tmp_path / "main.o")], capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow
def test_a_candidate_compile_reads_the_precompiled_header(built_pch, tmp_path, monkeypatch):
    root, flags, gch = built_pch
    monkeypatch.setenv(PCH_ENV, str(root))
    done = _compile(tmp_path, flags + pch.use_flags(ARGS))
    assert done.returncode == 0, done.stderr[-3000:]
    # gcc's -H marks a precompiled header it used with "!" (one it could not use with "x")
    assert f"! {gch}" in done.stderr.splitlines()
    assert "not used because" not in done.stderr


@pytest.mark.slow
def test_a_changed_flag_falls_back_to_a_plain_build(built_pch, tmp_path, monkeypatch):
    root, flags, gch = built_pch
    monkeypatch.setenv(PCH_ENV, str(root))
    # the candidate's flags differ from the header's (an -O the header was not built with)
    done = _compile(tmp_path, [*flags, "-O1", *pch.use_flags(ARGS)])
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"! {gch}" not in done.stderr.splitlines()
    assert "not used because" in done.stderr  # -Winvalid-pch: the plain header was read
    assert (tmp_path / "main.o").stat().st_size > 0
