"""The evaluator's build stage ahead of the device's queue: a candidate's ``load_inline``
extensions that can be read from its source (htam.evaluate.host.inline_calls) are built in a build job
(the candidate's sandbox, only the compiler running) beside whatever the GPU is timing, and kept
in the evaluator's cache by their key (their C++ file with torch's header precompiled by the host,
host/pch.py); the timed evaluation preloads them and builds nothing. A
build is never repeated: the same extension in any later candidate is loaded from the cache."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from htam.evaluate.host import folders, inline_calls, integrity, pch
from htam.evaluate.host.forkserver import ForkServerError
from htam.vocab import Language

if TYPE_CHECKING:
    from htam.evaluate.host.evaluator import Evaluator

PREBUILT_LANGUAGES = (Language.CUDA, Language.CPP)  # built ahead of the GPU queue
# Every build inside its timed job, as before builds left the GPU's path: for "before" figures.
LEGACY_ENV = "HTAM_LEGACY_BUILD"


def legacy() -> bool:
    return os.environ.get(LEGACY_ENV) == "1"


def _calls(code: str, language: str) -> list[dict]:
    return inline_calls.calls(code) if language in PREBUILT_LANGUAGES else []


def _name(arguments: dict) -> str:
    return f"ext-{inline_calls.key(arguments)}"


def _own(arguments: dict) -> str:
    """The one file of a build that is the extension's own output, as the candidate's
    load_inline (compile_cache) places it under ``ext/``: its library, which a later job
    imports without ninja. Whatever else the build job left (sources, objects, and anything
    the extension's static initializers wrote when the job imported it, at any name under
    ``ext/``) is not kept."""
    key = inline_calls.key(arguments)
    return f"ext/{pch.toolchain_key()}/{key}/{key}.so"


def _kept(ev: Evaluator, arguments: dict) -> Path | None:
    """The verified prebuild of this extension, when it holds its own library and nothing
    else (a build kept before only the library was holds the job's whole ``ext/`` tree)."""
    path = integrity.verified(ev.cache_dir, _name(arguments))
    if path is None or integrity.listed(ev.cache_dir, _name(arguments)) != [_own(arguments)]:
        return None
    return path


def prebuild(ev: Evaluator, code: str, language: str) -> float:
    """Build the code's extensions not built before, outside the device's queue: the seconds it
    took. A failed build is not kept: the timed evaluation meets and reports it."""
    t0 = time.perf_counter()
    for arguments in [] if legacy() else _calls(code, language):
        name = _name(arguments)
        if _kept(ev, arguments):
            continue
        # here, in the trusted host, never in the sandbox, which only reads it
        pch.ensure(ev.cache_dir, arguments)
        spec = ev._candidate_spec(inline_calls.script(arguments), language, None)
        spec["device"] = "cpu"  # it only compiles: no call is timed, nothing runs on the GPU
        spec["nice"] = 10  # the compilers yield the CPU to a judge timing meanwhile
        job = ev._job("build", timeout_s=ev.config.compile_timeout_s)
        try:
            outcome = ev._run(job, spec, gpu=False)
        except ForkServerError:
            break  # the timed evaluation builds it, and meets the server's fate
        try:
            status = outcome.result.get("status") if outcome.result else None
            if outcome.job_dir and status == "ok" and not outcome.killed:
                integrity.promote(
                    ev.cache_dir, Path(outcome.job_dir), name, parts=(_own(arguments),)
                )
        finally:  # a tmpfs of its own, whatever happened above
            if outcome.job_dir:
                folders.remove(outcome.job_dir)
    return time.perf_counter() - t0


def prebuilt(ev: Evaluator, code: str, language: str) -> Path | None:
    """The verified prebuilds of the code's extensions, as one folder to preload: each brings
    its own library alone, so none holds a file at another's name."""
    found = [
        (path, arguments) for arguments in _calls(code, language) if (path := _kept(ev, arguments))
    ]
    if len(found) <= 1:
        return found[0][0] if found else None
    staged = Path(tempfile.mkdtemp(prefix="prebuilt-", dir=ev._workroot))
    for path, arguments in found:
        own = _own(arguments)
        (staged / own).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path / own, staged / own)
    return staged
