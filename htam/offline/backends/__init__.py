"""Stage 5 of the pipeline: the backends, one per language, behind one protocol
(:class:`~htam.offline.backends.base.Backend`), registered by the vocabulary's language names.

Both read the IR layer (``htam.offline.ir``: programs, expressions, row schedules, the forward's
tensor views), the parameter classes and the strategy rules; neither imports the other."""

from __future__ import annotations

from htam.offline.backends.base import Backend
from htam.offline.backends.cpp import CppBackend
from htam.offline.backends.triton import TritonBackend

# keyed by Language (a str: looked up by either)
BACKENDS: dict[str, Backend] = {b.language: b for b in (TritonBackend(), CppBackend())}


def unknown_language(language: str) -> str:
    """The message for a language without a backend."""
    return f"the offline templates write {' or '.join(BACKENDS)}, not {str(language)!r}"
