"""Compile cache for ``load_inline``: extensions are named and placed by a hash of their sources,
flags and toolchain, so the same source never builds twice and two sources never collide.
``load`` (sources a solution wrote into its own job directory) is timed and its failures are
compile errors too."""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch


class CompileError(Exception):
    """The candidate's extension failed to build."""


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


def install_compile_cache(root: str | Path) -> Callable[[], float]:
    """Wrap ``torch.utils.cpp_extension.load_inline`` and ``load``; return a reader of seconds
    spent building."""
    from torch.utils import cpp_extension

    original = cpp_extension.load_inline
    signature = inspect.signature(original)
    spent = [0.0]
    base = Path(root) / toolchain_key()

    def load_inline(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        described = {k: v for k, v in bound.arguments.items() if k not in ("verbose",)}
        digest = hashlib.sha256(repr(sorted(described.items())).encode()).hexdigest()[:16]
        name = f"{bound.arguments['name']}_{digest}"
        build_dir = base / name
        build_dir.mkdir(parents=True, exist_ok=True)
        bound.arguments["name"] = name
        bound.arguments["build_directory"] = str(build_dir)
        # A precompiled header would be written into the installed torch package.
        bound.arguments["use_pch"] = False
        t0 = time.perf_counter()
        try:
            return original(*bound.args, **bound.kwargs)
        except Exception as exc:
            raise CompileError(f"{type(exc).__name__}: {exc}"[-6000:]) from None
        finally:
            spent[0] += time.perf_counter() - t0

    load_original = cpp_extension.load

    def load(*args, **kwargs):
        # Sources the solution wrote itself (into its job directory): built where it says, but
        # timed, and a failure is a compile error like load_inline's.
        t0 = time.perf_counter()
        try:
            return load_original(*args, **kwargs)
        except Exception as exc:
            raise CompileError(f"{type(exc).__name__}: {exc}"[-6000:]) from None
        finally:
            spent[0] += time.perf_counter() - t0

    cpp_extension.load_inline = load_inline
    cpp_extension.load = load
    # Without a precompiled header torch deletes a stale one inside its own package: nothing of
    # a job may write there (and a candidate's view of it is read-only).
    cpp_extension.remove_extension_h_precompiler_headers = lambda: None
    return lambda: spent[0]
