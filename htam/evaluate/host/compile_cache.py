"""Compile cache for ``load_inline``: extensions are named and placed by a hash of their sources,
flags and toolchain, so the same source never builds twice and two sources never collide.
``load`` (sources a solution wrote into its own job directory) is timed and its failures are
compile errors too."""

from __future__ import annotations

import hashlib
import inspect
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from htam.evaluate.host import pch
from htam.evaluate.host.pch import toolchain_key


class CompileError(Exception):
    """The candidate's extension failed to build."""


# g++/clang "file:line:col: error: ..." and nvcc "file(line): error: ..."
_ERROR = re.compile(
    r"^(?P<file>[^\s:()]+?)(?::(?P<line>\d+)(?::\d+)?:|\((?P<nvline>\d+)\):)"
    r"\s*(?:fatal )?error\b.*$",
    re.M,
)
_CONTEXT_LINES = 4  # the compiler's quoted source line and caret after the error
_TAIL = 800
_FILES = "load_inline's main.cpp holds your cpp_sources after its #include lines; cuda.cu your cuda_sources"


def build_failure(exc: BaseException) -> str:
    """What a failed build says to whoever repairs it: the first compiler error with its file
    and line and the lines the compiler quotes under it, the count of errors, then the end of
    the log (an include chain's tail, alone, hid the error)."""
    text = f"{type(exc).__name__}: {exc}"
    errors = list(_ERROR.finditer(text))
    if not errors:
        return text[-6000:]
    first = errors[0]
    name = os.path.basename(first["file"])
    line = first["line"] or first["nvline"]
    after = []  # the quoted source and caret: indented lines right after the error
    for quoted in text[first.end() :].lstrip("\n").splitlines()[:_CONTEXT_LINES]:
        if not quoted[:1].isspace() or not quoted.strip():
            break
        after.append(quoted)
    body = "\n".join([first.group(0).replace(first["file"], name, 1), *after])
    count = len(errors)
    return (
        f"the build failed with {count} error{'s' * (count != 1)}; the first, in {name} line "
        f"{line}:\n{body}\n({_FILES})\n\n... the end of the build log:\n{text[-_TAIL:]}"
    )


def extension_key(arguments: dict) -> str:
    """The build's name suffix for ``load_inline``'s bound arguments (those given, ``verbose``
    aside): the same in a candidate's process and in the evaluator, which prebuilds by it."""
    described = {k: v for k, v in arguments.items() if k not in ("verbose",)}
    return hashlib.sha256(repr(sorted(described.items())).encode()).hexdigest()[:16]


def _prebuilt(arguments: dict, build_dir: Path) -> bool:
    """Whether the extension was built already (by a prebuild of the same arguments, copied into
    this job, or earlier in this process): then it is loaded without ninja, whose build file
    names the folder it was built in."""
    plain = arguments.get("is_python_module", True) and not arguments.get("is_standalone")
    return bool(plain) and (build_dir / f"{arguments['name']}.so").is_file()


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
        name = f"{bound.arguments['name']}_{extension_key(bound.arguments)}"
        build_dir = base / name
        build_dir.mkdir(parents=True, exist_ok=True)
        bound.arguments["name"] = name
        if _prebuilt(bound.arguments, build_dir):
            return cpp_extension._import_module_from_library(name, str(build_dir), True)
        bound.arguments["build_directory"] = str(build_dir)
        # torch's own precompiled header is written into the installed torch package: the host's
        # (pch.py), read-only here, is used instead where one was built for these flags.
        bound.arguments["use_pch"] = False
        if with_pch := pch.use_flags(bound.arguments):
            bound.arguments["extra_cflags"] = [
                *(bound.arguments.get("extra_cflags") or []),
                *with_pch,
            ]
        t0 = time.perf_counter()
        try:
            return original(*bound.args, **bound.kwargs)
        except Exception as exc:
            raise CompileError(build_failure(exc)) from None
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
            raise CompileError(build_failure(exc)) from None
        finally:
            spent[0] += time.perf_counter() - t0

    cpp_extension.load_inline = load_inline
    cpp_extension.load = load
    # Without a precompiled header torch deletes a stale one inside its own package: nothing of
    # a job may write there (and a candidate's view of it is read-only).
    cpp_extension.remove_extension_h_precompiler_headers = lambda: None
    return lambda: spent[0]
