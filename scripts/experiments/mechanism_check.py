"""Mechanism check of the transition-aware policy in a synthetic environment.

THIS IS A CHECK OF THE MECHANISM ONLY. No kernels, no LLM: a toy environment whose reward
depends on the last two directions, to confirm that the position-weighted prefix score learns
what it is designed to learn. It says nothing about real optimization quality.

Environment: ``n`` directions; an episode is ``T`` steps. The expected reward of direction ``g``
after the prefix (..., p2, p1) (p1 most recent) is

    E[p1, g] + beta * E[p2, g]        (a start table S[g] on the first step)

with E ~ N(0, sigma_e) fixed per seed, plus N(0, noise) per step, clipped to [-1, 1]. The best
next direction therefore depends on the two previous ones, and the older one weighs less.
Each episode stands for a task: its first two directions are given by the task (drawn at random)
and recorded like any step; the method under test chooses the remaining ones. Without varied
starts a learned policy settles into a few fixed paths, where p1 alone determines p2 and the
prefix has nothing to add.

Usage: python scripts/experiments/mechanism_check.py [--episodes 300] [--seeds 0 1 2 3 4]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from dataclasses import dataclass

from htam.memory import MemoryBank, StepRecord
from htam.policy import PolicyConfig, StateFeatures, make_policy
from htam.status import Status

METHODS = ("htam", "no-position", "no-prefix", "random")
GIVEN_STEPS = 2  # directions each episode (task) starts with, drawn at random


@dataclass
class Env:
    n: int
    start: list[float]
    table: list[list[float]]  # table[src][dst]
    beta: float
    noise: float

    @classmethod
    def make(cls, seed: int, n: int = 8, sigma_e: float = 0.4, beta: float = 0.7) -> Env:
        rng = random.Random(10_000 + seed)
        table = [[rng.gauss(0, sigma_e) for _ in range(n)] for _ in range(n)]
        return cls(n, [rng.gauss(0, 0.2) for _ in range(n)], table, beta, noise=0.1)

    def expected(self, prefix: list[int], g: int) -> float:
        if not prefix:
            return self.start[g]
        value = self.table[prefix[-1]][g]
        if len(prefix) >= 2:
            value += self.beta * self.table[prefix[-2]][g]
        return value

    def reward(self, prefix: list[int], g: int, rng: random.Random) -> float:
        return max(-1.0, min(1.0, self.expected(prefix, g) + rng.gauss(0, self.noise)))


def synthetic_seed(n: int) -> dict:
    """A bank with ``n`` bare directions: no priors, no edges, one strategy each."""
    return {
        "format": "htam-seed",
        "version": 1,
        "globals": [{"id": f"d{i}", "title": f"d{i}", "intent": "synthetic"} for i in range(n)],
        "locals": [
            {
                "id": f"d{i}.only",
                "direction": f"d{i}",
                "title": "only",
                "description": "",
                "pattern": "",
                "op_families": ["other"],
            }
            for i in range(n)
        ],  # fmt: skip
        "edges": [],
    }


def run(method: str, seed: int, episodes: int, horizon: int, config: PolicyConfig) -> list[float]:
    """Mean reward of the chosen steps per episode, learning from scratch in the seed's env."""
    env = Env.make(seed)
    bank = MemoryBank.in_memory(synthetic_seed(env.n))
    policy = make_policy(method, config, bank)
    rng, env_rng = random.Random(seed), random.Random(20_000 + seed)
    state = StateFeatures()
    means = []
    for episode in range(episodes):
        path: list[int] = []
        rewards = []
        for step in range(horizon):
            prefix = [f"d{i}" for i in path[-config.K :]]
            if step < GIVEN_STEPS:
                g = env_rng.randrange(env.n)
            else:
                g = int(policy.decide(prefix, state, rng).direction[1:])
            r = env.reward(path, g, env_rng)
            policy.record(
                StepRecord(f"{method}-{seed}", f"ep{episode}", "synthetic", step, prefix,
                           f"d{g}", None, Status.OK, None, None, r)
            )  # fmt: skip
            if step >= GIVEN_STEPS:
                rewards.append(r)
            path.append(g)
        means.append(statistics.fmean(rewards))
    bank.close()
    return means


def oracle(seed: int, horizon: int, episodes: int = 2000) -> float:
    """Mean expected reward of the chosen steps for the greedy policy that knows the env."""
    env = Env.make(seed)
    rng = random.Random(30_000 + seed)
    total = 0.0
    for _ in range(episodes):
        path = [rng.randrange(env.n) for _ in range(GIVEN_STEPS)]
        for _ in range(horizon - GIVEN_STEPS):
            g = max(range(env.n), key=lambda d: env.expected(path, d))
            total += env.expected(path, g)
            path.append(g)
    return total / (episodes * (horizon - GIVEN_STEPS))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(8)))
    args = parser.parse_args(argv)
    config = PolicyConfig(K=2)
    horizon = config.T
    print("MECHANISM CHECK ONLY (synthetic environment, no kernels, no LLM).")
    print(f"{len(args.seeds)} seeds x {args.episodes} episodes x {horizon} steps; K={config.K}, "
          f"tau_pos={config.tau_pos}, T_g={config.T_g}, c={config.c}; env beta=0.7")  # fmt: skip
    print(f"Episodes start with {GIVEN_STEPS} random directions; the method picks the rest.")
    print(
        "Mean reward per chosen step over the last half of the episodes (learning from scratch).\n"
    )
    half = args.episodes // 2
    table = {
        m: [statistics.fmean(run(m, s, args.episodes, horizon, config)[half:]) for s in args.seeds]
        for m in METHODS
    }
    header = "method        " + "".join(f"  seed {s:<3}" for s in args.seeds) + "     mean"
    print(header)
    for method, values in table.items():
        cells = "".join(f"  {v:+8.3f}" for v in values)
        print(f"{method:<13} {cells}  {statistics.fmean(values):+8.3f}")
    oracle_cells = "".join(f"  {oracle(s, horizon):+8.3f}" for s in args.seeds)
    print(f"{'(oracle)':<13} {oracle_cells}")
    for better, worse in zip(METHODS, METHODS[1:], strict=False):
        wins = sum(a > b for a, b in zip(table[better], table[worse], strict=True))
        print(f"{better} beats {worse} on {wins}/{len(args.seeds)} seeds")
    means = [statistics.fmean(table[m]) for m in METHODS]
    ordered = all(a > b for a, b in zip(means, means[1:], strict=False))
    print(f"\nfull HTAM > no-position > no-prefix > random: {'yes' if ordered else 'NO'}")
    return 0 if ordered else 1


if __name__ == "__main__":
    sys.exit(main())
