"""What a benchmark is asked to do: the config, the proposer recipe, and the work units.

Everything here is plain data that crosses a ``spawn`` boundary by pickling, so nothing in this
module imports torch.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from htam.agent.run_summary import RunSummary
from htam.vocab import METHOD_NAMES, Guide, Size, method_spec, methods_of

if TYPE_CHECKING:
    from htam.agent.config import OptimizeConfig

MEMORY_MODES = ("accumulate", "frozen", "fresh")


class BenchError(Exception):
    """A bench that cannot start or go on (its one-line message says why)."""


class ResultsError(BenchError):
    """A bench directory that cannot be read back."""


def read_json(path: Path) -> Any:
    """A bench file's JSON; a damaged one (cut short, edited) is a one-line ResultsError that
    names it (seen: a JSONDecodeError traceback from `report` and `--resume`)."""
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultsError(f"{path}: damaged, not JSON ({exc}); restore or remove it") from None


# Methods that never read the memory (their guide is none, htam.vocab): they get no bank at all.
MEMORYLESS = methods_of(Guide.NONE)
# Kept in every process the bench starts (multicast over NVLink is off on the lent machines).
FIXED_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


@dataclass(frozen=True)
class ProposerSpec:
    """How a worker builds its own proposer (each worker owns its LLM client).

    ``factory`` ("module:attr") builds a custom proposer, e.g. a scripted one in tests; it is
    called as ``factory(target=..., language=..., **kwargs)``. Without it: an LLM proposer when
    ``llm`` or ``base_url`` is set, else the offline template proposer.
    """

    llm: str | None = None
    base_url: str | None = None
    model: str | None = None
    factory: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    llm_timeout_s: float | None = None  # per LLM call; None: the client's default

    def build(self, target: str, language: str):
        if self.factory:
            module, _, attr = self.factory.partition(":")
            return getattr(importlib.import_module(module), attr)(
                target=target, language=language, **self.kwargs
            )
        if self.llm is None and self.base_url is None:
            from htam.offline import OfflineProposer

            return OfflineProposer(target=target, language=language)
        from htam.llm import LLMClient, LLMProposer, resolve_config

        timeout = {"timeout_s": self.llm_timeout_s} if self.llm_timeout_s else {}
        return LLMProposer(
            LLMClient(resolve_config(self.llm, self.base_url, self.model, **timeout))
        )

    def label(self) -> str:
        """The proposer in words, for what a bench prints (describe() is its resume key)."""
        if self.factory:
            return f"proposer {self.factory}"
        if self.llm or self.base_url:
            model = self.model or ("the preset's" if self.llm else "none given")
            return f"LLM {self.llm or self.base_url}, model {model}"
        return "offline templates"

    def describe(self) -> str:
        if self.factory:
            return self.factory
        if self.llm or self.base_url:
            return f"llm:{self.llm or self.base_url}:{self.model or 'default'}"
        return "offline"


@dataclass
class BenchConfig:
    out: Path
    methods: list[str]
    seeds: int = 1
    steps: int = 6
    target: str = "cpu"
    language: str = "cpp"
    size: Size = "small"
    devices: list[str] = field(default_factory=lambda: ["cpu0"])  # one worker per entry
    memory: Path | None = None  # starting bank for accumulate/frozen (default: the seed)
    memory_mode: str = "fresh"
    proposer: ProposerSpec = field(default_factory=ProposerSpec)
    eval_overrides: dict[str, Any] = field(default_factory=dict)  # EvalConfig fields
    max_attempts: int = 2  # a unit whose worker dies is re-queued once, then recorded failed
    max_worker_starts: int = 4  # per device slot: a slot whose workers keep dying is given up
    # Executor (not part of the identity: a bench may be resumed on the other one). None: the
    # local pool on ``devices``; else Ray: "local" (connect to or start a local cluster),
    # "auto" (the running cluster) or a cluster address; one actor per GPU (CPU slot on CPU
    # targets), ``ray_slots`` of them (None: every GPU / CPU the cluster has at the start).
    ray: str | None = None
    ray_slots: int | None = None

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        unknown = [m for m in self.methods if m not in METHOD_NAMES]
        if unknown:
            raise ValueError(
                f"unknown method(s) {', '.join(unknown)}; known: {', '.join(METHOD_NAMES)}"
            )
        if not self.methods:
            raise ValueError("no methods given")
        if self.memory_mode not in MEMORY_MODES:
            raise ValueError(
                f"unknown memory mode {self.memory_mode!r}; choose {', '.join(MEMORY_MODES)}"
            )
        if self.memory_mode == "fresh" and self.memory is not None:
            raise ValueError(
                "--memory has no effect with --memory-mode fresh (banks start from the seed)"
            )
        if self.memory is not None and not Path(self.memory).exists():
            raise ValueError(f"{self.memory}: no memory bank there")
        if self.seeds < 1 or self.steps < 1:
            raise ValueError("seeds and steps must be at least 1")
        if not self.devices:
            raise ValueError("no devices (workers) to run on")
        if self.ray_slots is not None and self.ray_slots < 1:
            raise ValueError("ray_slots must be at least 1")

    @property
    def executor(self) -> str:
        """The executor that runs the units (``htam.bench.executor.EXECUTORS``' key)."""
        return "local" if self.ray is None else "ray"

    def planned_steps(self, method: str) -> int:
        return method_spec(method).steps_for(self.steps)

    def optimize_config(self, unit: Unit) -> OptimizeConfig:
        """The loop's configuration for ``unit``, on this bench's target and language."""
        from htam.agent.config import OptimizeConfig

        return OptimizeConfig(unit.method, unit.steps, unit.seed, self.target, self.language)

    def identity(self) -> dict[str, Any]:
        """What a resumed bench must share with the one it continues."""
        return {
            "steps": self.steps,
            "target": self.target,
            "language": self.language,
            "size": self.size,
            "memory_mode": self.memory_mode,
            "memory": str(self.memory) if self.memory else None,
            "proposer": self.proposer.describe(),
        }

    def to_json(self) -> str:
        data = asdict(self)
        data["out"] = str(self.out)
        data["memory"] = str(self.memory) if self.memory else None
        return json.dumps(data, indent=2, default=str)


@dataclass(frozen=True)
class Unit:
    """One (method, seed, task) run."""

    method: str
    seed: int
    task_id: str
    level: int | None
    steps: int  # planned

    @property
    def key(self) -> str:
        return f"{self.method}/s{self.seed}/{self.task_id}"

    @property
    def slug(self) -> str:
        return self.task_id.replace("/", "__")

    def run_dir(self, out: Path) -> Path:
        return Path(out) / "runs" / self.method / f"s{self.seed}" / self.slug

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "key": self.key}


def plan_units(tasks: list, config: BenchConfig) -> list[Unit]:
    """Seed-major, then task, then method: every method sees the tasks in the same order, which
    matters for memory that accumulates across tasks."""
    return [
        Unit(method, seed, task.id, task.level, config.planned_steps(method))
        for seed in range(config.seeds)
        for task in tasks
        for method in config.methods
    ]


def read_summary(unit: Unit, out: Path) -> RunSummary | None:
    path = unit.run_dir(out) / "summary.json"
    return RunSummary.from_dict(read_json(path)) if path.exists() else None


def unit_done(unit: Unit, out: Path) -> bool:
    summary = read_summary(unit, out)
    return summary is not None and summary.steps == unit.steps
