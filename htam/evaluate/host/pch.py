"""Precompiled ``torch/extension.h`` for ``load_inline``'s C++ file (main.cpp), built by the trusted
host and only read by candidates.

Parsing torch's headers is most of a C++ extension's build. torch's own ``use_pch`` writes its
``.gch`` into the installed torch package, which no job may write. Here the host (the build stage,
before a build job) precompiles the header once per toolchain and flag set into the evaluator's
cache (``<cache>/pch/<toolchain>/<variant>/torch/extension.h.gch``). A candidate sees that folder
only through a read-only bind (sandbox/isolation.py, ``PCH_MOUNT``) under a user id that owns
none of it, so it can neither plant nor alter a header that another candidate's build reads. Its
build adds ``-include <variant>/torch/extension.h -Winvalid-pch``: gcc loads the ``.gch`` when its
flags match, and otherwise (a flag differs, another compiler) includes the plain wrapper header
next to it, which includes torch's own: the same build as without a PCH.

The flags are torch's own for the C++ compile (its ninja file's ``cflags`` and ``post_cflags``),
the extension's name aside, so a PCH is valid for every build with the same extra flags. Only
flags that cannot read or run anything are taken into a host compile (``_SAFE``); a flag set is
precompiled when it is seen a second time (a header costs about 1.3 plain builds and ~0.8 GB), and
at most ``MAX_VARIANTS`` flag sets per toolchain are kept. A CUDA extension's cuda.cu gains
nothing: nvcc hands the host compiler a file it generated, already preprocessed.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import inspect
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from htam.evaluate.sandbox.isolation import PCH_ENV

HEADER = "torch/extension.h"
MAX_VARIANTS = 3
SEEN_BEFORE_BUILD = 2  # a flag set's sightings before its header is precompiled
_PLACEHOLDER = "htam_pch_placeholder"
# Flags a host compile of torch's header may take: optimization, language, macros, warnings.
_SAFE = re.compile(
    r"-O[0-3s]|-Ofast|-std=(c|gnu)\+\+\d\d|-D\w+(=[\w.]+)?|-U\w+|-w|-Wall|-Wno-[\w-]+|-g0?"
    r"|-fopenmp|-ffast-math|-funroll-loops|-march=native|-mtune=native|-mavx2|-mfma|-fPIC"
)
_BUILD_TIMEOUT_S = 600


def root(cache_dir: str | Path) -> Path:
    """The folder a candidate sees read-only (bound at PCH_MOUNT in its sandbox)."""
    path = Path(cache_dir) / "pch"
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o755)
    return path


def _with_cuda(arguments: dict) -> bool:
    given = arguments.get("with_cuda")
    return bool(arguments.get("cuda_sources")) if given is None else bool(given)


def host_flags(arguments: dict) -> list[str] | None:
    """torch's flags for the extension's main.cpp, the name aside; None where no PCH applies."""
    if (
        arguments.get("extra_include_paths")
        or arguments.get("no_implicit_headers")
        or arguments.get("is_standalone")
    ):
        return None
    extra = tuple(f.strip() for f in arguments.get("extra_cflags") or [])
    if not all(_SAFE.fullmatch(f) for f in extra):
        return None
    return _torch_cflags(extra, _with_cuda(arguments))


@functools.cache
def _torch_cflags(extra: tuple[str, ...], with_cuda: bool) -> list[str] | None:
    from torch.utils import cpp_extension

    writer = cpp_extension._write_ninja_file_to_build_library
    with tempfile.TemporaryDirectory(prefix="htam-pch-") as folder:
        ninja = os.path.join(folder, "build.ninja")
        given = {
            "path": ninja,
            "name": _PLACEHOLDER,
            "sources": [os.path.join(folder, "main.cpp")],
            "extra_cflags": list(extra),
            "extra_cuda_cflags": ["-arch=sm_90"],  # an explicit arch: torch asks no device
            "extra_sycl_cflags": [],
            "extra_ldflags": [],
            "extra_include_paths": [],
            "with_cuda": with_cuda,
            "with_sycl": False,
            "is_standalone": False,
        }
        # by name, and only those this torch's writer takes (SYCL came in a late version)
        taken = inspect.signature(writer).parameters
        try:
            writer(**{k: v for k, v in given.items() if k in taken})
        except (OSError, RuntimeError, TypeError, ValueError):
            return None  # another torch, or no CUDA home: plain builds
        lines = Path(ninja).read_text().splitlines()
    found = {k.strip(): v for k, _, v in (ln.partition("=") for ln in lines if " = " in ln)}
    tokens = shlex.split(found.get("cflags", "")) + shlex.split(found.get("post_cflags", ""))
    return [t for t in tokens if t != f"-DTORCH_EXTENSION_NAME={_PLACEHOLDER}"]


@functools.cache
def toolchain_key() -> str:
    try:
        cxx = subprocess.run(
            [os.environ.get("CXX", "c++"), "--version"], capture_output=True, text=True, timeout=30
        ).stdout.splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        cxx = "no-c++"
    parts = [torch.__version__, str(torch.version.cuda), cxx, sys.version.split()[0]]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:12]


def variant(flags: list[str]) -> str:
    digest = hashlib.sha256("\0".join(flags).encode()).hexdigest()[:16]
    return f"{toolchain_key()}/{digest}"


@functools.cache
def compiler_is_gcc() -> bool:
    from torch.utils import cpp_extension

    try:
        return cpp_extension.check_compiler_is_gcc(cpp_extension.get_cxx_compiler())
    except (OSError, subprocess.SubprocessError, RuntimeError):
        return False


def use_flags(arguments: dict) -> list[str]:
    """In the candidate's build: the flags that make its main.cpp use a precompiled header the
    host built for these arguments, or none (no header for them, or none in view)."""
    base = os.environ.get(PCH_ENV)
    flags = host_flags(arguments) if base else None
    if not base or not flags or not compiler_is_gcc():
        return []
    wrapper = Path(base) / variant(flags) / HEADER
    if not Path(f"{wrapper}.gch").is_file():
        return []
    return ["-include", str(wrapper), "-Winvalid-pch"]


# ------------------------------------------------------------------ the host's side


@contextlib.contextmanager
def _locked(path: Path):
    # Only the evaluator's user may open it: the folder is in a candidate's view (read-only),
    # and a lock needs no write access, so a candidate that held it stalled every build stage.
    fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # one made before, readable by all
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


def _seen(folder: Path) -> int:
    """Count one more sighting of the flag set; the count."""
    count_file = folder / "seen"
    count = int(count_file.read_text() or 0) if count_file.is_file() else 0
    count_file.write_text(str(count + 1))
    return count + 1


def ensure(cache_dir: str | Path, arguments: dict) -> Path | None:
    """The precompiled header for these arguments' main.cpp, built here if due; None where none
    is (yet) to be used. A failed precompile is remembered and not tried again."""
    flags = host_flags(arguments)
    if not flags or not compiler_is_gcc():
        return None
    toolchain = root(cache_dir) / variant(flags)
    gch = toolchain / f"{HEADER}.gch"
    if gch.is_file():
        return gch
    toolchain.mkdir(parents=True, exist_ok=True)
    with _locked(toolchain.parent / ".lock"):
        if gch.is_file():
            return gch  # another build thread made it meanwhile
        built = sum(
            (d / f"{HEADER}.gch").is_file() for d in toolchain.parent.iterdir() if d.is_dir()
        )
        failed = (toolchain / "failed").is_file()
        if failed or _seen(toolchain) < SEEN_BEFORE_BUILD or built >= MAX_VARIANTS:
            return None
        return build(toolchain, flags)


def build(folder: Path, flags: list[str]) -> Path | None:
    """Precompile torch's header with ``flags`` into ``folder``: the ``.gch`` or None."""
    from torch.utils import cpp_extension

    wrapper = folder / HEADER
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    # the wrapper is what gcc includes when it cannot use the .gch: torch's own header
    wrapper.write_text(f"#include <{HEADER}>\n")
    tmp = wrapper.parent / f".extension.h.gch.{os.getpid()}"
    cxx = cpp_extension.get_cxx_compiler()
    command = ["nice", "-n", "10", cxx, "-x", "c++-header", *flags, str(wrapper), "-o", str(tmp)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=_BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        done = None
    if done is None or done.returncode != 0:
        tmp.unlink(missing_ok=True)
        (folder / "failed").write_text(done.stderr[-4000:] if done else "timed out")
        return None
    gch = wrapper.parent / "extension.h.gch"
    tmp.chmod(0o644)
    os.replace(tmp, gch)
    for path in (folder, wrapper.parent, *folder.parents[:2]):
        path.chmod(0o755)
    return gch
