"""What every backend is: the protocol the pipeline calls, and the code a backend hands back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from htam.offline.ir.model import Match
from htam.offline.params import Params
from htam.vocab import Language


@dataclass(frozen=True)
class KernelCode:
    """A backend's part of a solution file; the render stage (:mod:`htam.offline.source`) puts
    it together with the header, the helpers and ``ModelNew``."""

    imports: str  # the file's import block
    kernels: tuple[str, ...]  # module-level kernel definitions, before ModelNew (Triton's)
    forward: tuple[str, ...]  # ModelNew.forward's body (the library prelude goes before it)
    setup: str = ""  # module-level code after the helpers (the C++ source and its build)
    init: tuple[str, ...] = ()  # ModelNew.__init__'s last lines, after the reference's
    pre: tuple[str, ...] = ()  # ModelNew.forward's first lines, before the library prelude
    replaced: tuple[str, ...] = ()  # prelude results ``pre`` computes (their lines are dropped)


class Backend(Protocol):
    """One language's templates: which strategies it realizes for a match, and the code."""

    language: Language

    def strategies(self, match: Match) -> list[str]:
        """Strategy ids with a template for ``match`` in this language, in STRATEGIES order."""
        ...

    def render(self, match: Match, params: Params) -> KernelCode:
        """The kernels and forward lines for ``match`` with ``params``."""
        ...
