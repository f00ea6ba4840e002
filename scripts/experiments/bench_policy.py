"""Decision latency and store size of a memory bank as evidence grows.

Builds a file-backed bank with 50 directions (5 strategies each, triggers, prior edges), records
synthetic steps up to 10^5 (every step is one evidence record in the ledger; detailed evidence
stays bounded per strategy), and reports:
- the file size at 10^3, 10^4 and 10^5 records (after a WAL checkpoint), and bytes per record;
- the latency of ``policy.decide`` (which computes the full ``explain`` breakdown) on a freshly
  opened bank, as median / p90 / p99 over many decisions with K-long prefixes.

Usage: python scripts/experiments/bench_policy.py [--records 100000] [--decisions 2000] [--out DIR]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from htam.memory import MemoryBank, StepRecord
from htam.policy import OP_FAMILIES, PolicyConfig, StateFeatures, make_policy
from htam.status import Status

N_DIRECTIONS = 50
LOCALS_PER_DIRECTION = 5
CHECKPOINTS = (1_000, 10_000, 100_000)


def bench_seed(rng: random.Random) -> dict:
    ids = [f"dir{i:02d}" for i in range(N_DIRECTIONS)]
    trigger = {"if": {"bound": "memory", "sol_fraction_below": 0.6}, "weight": 0.3, "why": "b"}
    family = {"if": {"op_families": ["softmax", "reduction"]}, "weight": 0.2, "why": "f"}
    return {
        "format": "htam-seed",
        "version": 1,
        "globals": [
            {"id": g, "title": g, "intent": "bench", "triggers": [trigger, family][: i % 3]}
            for i, g in enumerate(ids)
        ],
        "locals": [
            {
                "id": f"{g}.s{j}",
                "direction": g,
                "title": f"s{j}",
                "description": "bench",
                "pattern": "p",
                "op_families": rng.sample(OP_FAMILIES, 2),
                "triggers": [family] if j == 0 else [],
            }
            for g in ids
            for j in range(LOCALS_PER_DIRECTION)
        ],  # fmt: skip
        "edges": [
            {"src": a, "dst": b, "prior_utility": 0.1}
            for a, b in sorted({tuple(rng.sample(ids, 2)) for _ in range(200)})
        ],
    }


def synthetic_steps(rng: random.Random, start: int, count: int, k: int) -> list[StepRecord]:
    statuses = list(Status)
    steps = []
    for n in range(start, start + count):
        direction = f"dir{rng.randrange(N_DIRECTIONS):02d}"
        status = rng.choice(statuses)
        steps.append(
            StepRecord(
                run_id=f"run{n // 600}", task_id=f"task{(n // 6) % 100}",
                task_signature="softmax f32[4096x4096] memory-bound", step=n % 6,
                prefix=[f"dir{rng.randrange(N_DIRECTIONS):02d}" for _ in range(min(n % 6, k))],
                direction=direction, local_id=f"{direction}.s{rng.randrange(LOCALS_PER_DIRECTION)}",
                status=status, speedup_before=1.0, speedup_after=1.3 if status.correct else None,
                reward=rng.uniform(-1, 1) if status.correct else -0.6,
                error_excerpt="" if status.correct else "error: identifier 'x' is undefined" * 3,
                lesson="vectorized loads helped once rows were contiguous",
            )
        )  # fmt: skip
    return steps


def file_size(bank: MemoryBank) -> int:
    bank.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return bank.path.stat().st_size


def latency_ms(path: Path, decisions: int, config: PolicyConfig, rng: random.Random) -> list[float]:
    with MemoryBank.open(path) as bank:
        policy = make_policy("htam", config, bank)
        state = StateFeatures(op_families=["softmax"], bound="memory", sol_fraction=0.4)
        ids = bank.direction_ids
        times = []
        for i in range(decisions):
            prefix = [rng.choice(ids) for _ in range(config.K)]
            started = time.perf_counter()
            policy.decide(prefix, state, random.Random(i))
            times.append((time.perf_counter() - started) * 1000)
    return times


def summary(times: list[float]) -> str:
    q = statistics.quantiles(times, n=100)
    return f"median {statistics.median(times):.3f} ms, p90 {q[89]:.3f} ms, p99 {q[98]:.3f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=CHECKPOINTS[-1])
    parser.add_argument("--decisions", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=None, help="keep the bank in this folder")
    args = parser.parse_args(argv)
    config = PolicyConfig()
    rng = random.Random(0)
    folder = args.out or Path(tempfile.mkdtemp(prefix="htam-bench-"))
    path = folder / "bench.db"
    path.unlink(missing_ok=True)
    print(f"bank: {N_DIRECTIONS} directions, {N_DIRECTIONS * LOCALS_PER_DIRECTION} strategies, "
          f"K={config.K}; file {path}")  # fmt: skip
    with MemoryBank.create(path, bench_seed(rng)) as bank:
        print(f"empty bank: {file_size(bank):,} bytes")
        done, sizes = 0, {}
        for target in [c for c in CHECKPOINTS if c <= args.records]:
            started = time.perf_counter()
            while done < target:
                chunk = min(10_000, target - done)
                bank.record_steps(synthetic_steps(rng, done, chunk, config.K), config=config)
                done += chunk
            sizes[target] = file_size(bank)
            evidence = bank.connection.execute("SELECT count(*) FROM evidence").fetchone()[0]
            print(f"{target:>7,} records: {sizes[target]:>12,} bytes "
                  f"({sizes[target] / target:,.0f} B/record; ledger {bank.step_count():,} rows, "
                  f"bounded evidence {evidence} rows; recorded in "
                  f"{time.perf_counter() - started:.1f} s)")  # fmt: skip
            times = latency_ms(path, args.decisions // 4, config, rng)
            print(f"          decide() at {target:,} records: {summary(times)}")
    if len(sizes) >= 2:
        keys = sorted(sizes)
        growth = [(sizes[b] - sizes[a]) / (b - a) for a, b in zip(keys, keys[1:], strict=False)]
        print("marginal bytes per record between checkpoints: "
              + ", ".join(f"{g:,.0f}" for g in growth))  # fmt: skip
    times = latency_ms(path, args.decisions, config, rng)
    print(f"decision latency ({N_DIRECTIONS} directions, {done:,} records, "
          f"{args.decisions} decisions): {summary(times)}")  # fmt: skip
    return 0 if statistics.median(times) <= 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
