"""Option groups that several commands share, each declared once as a typer ``Annotated`` alias
(``target: Target = None``), the one resolver from a command's options to the settings of a
run: target and language, the proposer and the evaluator's limits (``resolve_run``), and the
bench configuration those settings give (``bench_config``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import typer

from htam.cli.common import (
    COMPILE_HELP,
    LANGUAGE_HELP,
    MEMORY_LIMIT_HELP,
    TARGET_HELP,
    TIMEOUT_HELP,
    fail,
    limit_overrides,
    resolve_target,
)
from htam.cli.llm_options import check_llm_options

if TYPE_CHECKING:
    from htam.agent import OptimizeConfig
    from htam.bench.bench_config import BenchConfig, ProposerSpec

# Target and language.
Target = Annotated[str | None, typer.Option("--target", help=TARGET_HELP)]
Language = Annotated[str | None, typer.Option("--language", help=LANGUAGE_HELP)]

# The evaluator's limits a user may raise (``limit_overrides`` turns them into EvalConfig fields).
MemoryLimitMb = Annotated[
    int | None, typer.Option("--memory-limit-mb", min=256, help=MEMORY_LIMIT_HELP)
]
TimeoutS = Annotated[float | None, typer.Option("--timeout-s", min=1.0, help=TIMEOUT_HELP)]
CompileReference = Annotated[
    bool | None, typer.Option("--compile-reference/--no-compile-reference", help=COMPILE_HELP)
]

# Output.
AsJson = Annotated[bool, typer.Option("--json", help="print one JSON object on stdout")]

# What runs the units of a suite (bench, transfer; optimize on a suite has --workers alone).
ProposerFactory = Annotated[
    str | None,
    typer.Option(
        "--proposer",
        help="a custom proposer factory module:attr, called with target= and language= "
        "in each worker (e.g. a scripted proposer)",
    ),
]
Gpus = Annotated[
    str, typer.Option("--gpus", help="all, or indices of visible GPUs: 0,1 (one worker each)")
]


@dataclass(frozen=True)
class LlmOptions:
    """The LLM option group (``llm_options.LlmPreset`` and its siblings) with a custom proposer
    factory (``--proposer module:attr``) where the command has one."""

    llm: str | None = None
    base_url: str | None = None
    model: str | None = None
    llm_timeout: float | None = None
    factory: str | None = None

    @property
    def offline(self) -> bool:
        """The offline proposer writes the candidates: no LLM and no custom factory."""
        return self.llm is None and self.base_url is None and self.factory is None


@dataclass(frozen=True)
class RunSettings:
    """What a command that runs the loop (optimize, bench, transfer) resolved its options to."""

    target: str
    language: str
    spec: ProposerSpec
    eval_overrides: dict[str, Any] = field(default_factory=dict)

    def optimize_config(self, method: str, steps: int, seed: int) -> OptimizeConfig:
        """The loop's configuration for one run of ``method`` (a bad method: one line, exit 2)."""
        from htam.agent import OptimizeConfig

        try:
            return OptimizeConfig(method, steps, seed, target=self.target, language=self.language)
        except ValueError as exc:
            fail(str(exc))


def bench_config(settings: RunSettings, **fields: Any) -> BenchConfig:
    """The bench configuration of a command that runs units (bench, optimize on a suite,
    transfer): ``settings`` gives the target, language, proposer and limits, ``fields`` the
    rest; a value BenchConfig refuses is one line (exit 2)."""
    from htam.bench import BenchConfig

    resolved: dict[str, Any] = {"target": settings.target, "language": settings.language}
    resolved |= {"proposer": settings.spec, "eval_overrides": settings.eval_overrides}
    try:
        return BenchConfig(**resolved, **fields)
    except ValueError as exc:
        fail(str(exc))


def resolve_run(
    llm: LlmOptions,
    target: str | None,
    language: str | None,
    memory_limit_mb: int | None = None,
    timeout_s: float | None = None,
    compile_reference: bool | None = None,
) -> RunSettings:
    """Check the LLM options (``--model`` alone is refused), default the target and language
    (the offline proposer writes Triton on the GPU) and say how each worker builds its proposer;
    nothing is built or contacted here (``llm_options.build_proposer`` does that)."""
    from htam.bench.bench_config import ProposerSpec

    check_llm_options(llm.llm, llm.base_url, llm.model)
    the_target, the_language = resolve_target(target, language, offline=llm.offline)
    spec = ProposerSpec(
        llm=llm.llm,
        base_url=llm.base_url,
        model=llm.model,
        factory=llm.factory,
        llm_timeout_s=llm.llm_timeout,
    )
    limits = limit_overrides(memory_limit_mb, timeout_s, compile_reference)
    return RunSettings(the_target, the_language, spec, limits)


def output_mode(quiet: bool, verbose: bool, as_json: bool) -> bool:
    """Whether the command prints its last line alone (``--quiet``, or ``--json``, whose one
    object is all stdout gets); ``--verbose`` logs the LLM's retries and each failure."""
    if quiet and verbose:
        fail("--quiet and --verbose: give one of them")
    if verbose:
        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    quiet = quiet or as_json
    if quiet:  # the LLM's long-wait warning is not the one last line --quiet promises
        logging.getLogger("htam.llm").setLevel(logging.ERROR)
    return quiet
