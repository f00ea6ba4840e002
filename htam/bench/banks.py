"""Which memory bank each unit reads and writes, by memory mode.

- ``fresh``: each (method, seed) gets its own bank, built from the seed, shared by its tasks.
- ``accumulate``: one bank per method, shared by all its seeds and tasks; it starts as a copy of
  ``--memory`` (or the seed), so the given bank is never changed.
- ``frozen``: every unit gets a private copy of ``--memory`` (or the seed), made when the unit
  starts, so methods run with their usual update semantics but nothing they learn is kept.

Shared banks are built by the parent before any worker starts (two workers must never race to
create one file); SQLite in WAL mode serializes the workers' writes.
"""

from __future__ import annotations

from pathlib import Path

from htam.bench.bench_config import MEMORYLESS, BenchConfig, Unit


def memory_dir(out: Path) -> Path:
    return Path(out) / "memory"


def bank_path(unit: Unit, config: BenchConfig) -> Path | None:
    if unit.method in MEMORYLESS:
        return None
    root = memory_dir(config.out)
    if config.memory_mode == "fresh":
        return root / f"{unit.method}-s{unit.seed}.db"
    if config.memory_mode == "accumulate":
        return root / f"{unit.method}.db"
    return root / "frozen" / f"{unit.method}-s{unit.seed}-{unit.slug}.db"


def _source_data(config: BenchConfig) -> dict | None:
    """The export of ``--memory``, or None for the seed."""
    if config.memory is None or config.memory_mode == "fresh":
        return None
    from htam.memory import MemoryBank

    with MemoryBank.open(config.memory) as bank:
        return bank.export_json()


def prepare_shared(units: list[Unit], config: BenchConfig) -> list[Path]:
    """Create the shared banks of ``units`` that do not exist yet (kept on resume)."""
    if config.memory_mode == "frozen":
        return []
    from htam.memory import MemoryBank

    paths = sorted({p for u in units if (p := bank_path(u, config)) is not None})
    missing = [p for p in paths if not p.exists()]
    data = _source_data(config) if missing else None
    for path in missing:
        path.parent.mkdir(parents=True, exist_ok=True)
        MemoryBank.create(path, data).close()
    return paths


def private_copy(unit: Unit, config: BenchConfig, source_data: dict | None) -> Path:
    """A frozen-mode unit's own bank, rebuilt from the source at every (re)start: a resumed
    unit replays its finished steps into it, which gives the same state as before the crash."""
    from htam.memory import MemoryBank

    path = bank_path(unit, config)
    assert path is not None, "memoryless methods have no bank"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    MemoryBank.create(path, source_data).close()
    return path


def open_bank(unit: Unit, config: BenchConfig, frozen_source: dict | None):
    """The bank ``unit`` runs with (already open), or None for memoryless methods."""
    from htam.memory import MemoryBank

    path = bank_path(unit, config)
    if path is None:
        return None
    if config.memory_mode == "frozen":
        path = private_copy(unit, config, frozen_source)
    return MemoryBank.open(path)


def frozen_source(config: BenchConfig) -> dict | None:
    return _source_data(config) if config.memory_mode == "frozen" else None


def learn_into(path: Path, method: str, run_dirs: list[Path]) -> int:
    """Teach the bank at ``path`` every step the runs in ``run_dirs`` learned from, as each run
    did (its method's guide; a step is learned once, by its run id), and return how many were
    new to it. A batch of tasks learns into a shared copy of ``--memory`` while its workers run
    (none races another for the user's file) and into ``--memory`` itself when it ends, as one
    task's ``optimize`` does (seen: it left the user's bank as it was)."""
    import json

    from htam.agent.config import OptimizeConfig
    from htam.agent.guides import make_guide
    from htam.agent.step import Step
    from htam.memory import MemoryBank
    from htam.policy import PolicyConfig
    from htam.vocab import method_spec

    if method in MEMORYLESS:
        return 0
    new = 0
    with MemoryBank.open(path) as bank:
        guide = make_guide(method_spec(method), bank, PolicyConfig(), OptimizeConfig().flat_k)
        for run_dir in run_dirs:
            for file in sorted((run_dir / "steps").glob("step_*.json")):
                step = Step.from_dict(json.loads(file.read_text()))
                if step.memory_updated:
                    new += guide.learn(step.memory_record, step.state_text)
    return new
