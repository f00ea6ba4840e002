"""Mechanism study: htam, its ablations and random in a synthetic environment the score's
additive model cannot represent exactly (docs/mechanism.md).

A CHECK OF THE MECHANISM ONLY: no kernels, no LLM. The real policy, memory bank and update
rules run; the environment stands in for the evaluator and a simulated chooser for the LLM.

Environment (fixed per seed): ``n`` directions with ``m`` strategies each. The expected reward of
strategy l of direction g after the path (..., p2, p1) (p1 most recent) is

    S[g][l] + E[p1][g] + I[p2, p1][g] + D(g | path)

- E: a lag-1 table; I: a sparse *interaction* of the last two directions jointly (not a sum of
  per-edge terms, so no edge-additive model fits it exactly);
- D: *delayed payoffs*: an enabler direction pays a penalty when taken and a bonus to its partner
  when the partner follows within two path steps;
- noise N(0, noise) per step, and a *failure* with a probability that grows as S[g][l] falls:
  the step earns the fixed failure reward and the path does not move (as in the loop).

Each episode (a task) starts from ``given`` random directions, recorded like any step; the method
chooses the rest. The simulated chooser picks the strategy the memory ranks first (the policy's
``candidates`` order) with probability 0.9, else uniformly: the LLM reading the memory. no-local
has no memory of strategies: uniform. Score: mean reward per chosen step over the last half of
the episodes. Reported: per method the mean over seeds with a 95% t-interval, and htam minus
each other method, paired by seed, with its interval and the seeds htam wins.

Usage: python scripts/experiments/mechanism_study.py [--seeds 20] [--episodes 240] [--jobs 1]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from htam.memory import MemoryBank, StepRecord
from htam.policy import PolicyConfig, StateFeatures, make_policy
from htam.status import Status
from htam.vocab import Direction

METHODS = {  # name: (policy method, edge rule)
    "htam": ("htam", "lms"),
    "htam-mean": ("htam", "mean"),
    "no-position": ("no-position", "lms"),
    "no-prefix": ("no-prefix", "lms"),
    "no-update": ("no-update", "lms"),
    "no-local": ("no-local", "lms"),
    "no-hierarchy": ("no-hierarchy", "lms"),
    "random": ("random", "lms"),
}
FAIL = -0.6  # the failure reward (compile/runtime error) of PolicyConfig
T95 = {19: 2.093, 29: 2.045, 39: 2.023, 49: 2.010}  # t quantiles for 95% intervals


@dataclass
class Env:
    n: int
    m: int
    strat: list[list[float]]
    lag1: list[list[float]]
    pairs: dict[tuple[int, int], list[float]]
    enablers: dict[int, int]  # enabler -> partner
    noise: float

    @classmethod
    def make(cls, seed: int, n: int = 8, m: int = 3) -> Env:
        rng = random.Random(50_000 + seed)
        strat = [[rng.gauss(0, 0.25) for _ in range(m)] for _ in range(n)]
        lag1 = [[rng.gauss(0, 0.3) for _ in range(n)] for _ in range(n)]
        pairs = {
            (a, b): [rng.gauss(0, 0.8) if rng.random() < 0.15 else 0.0 for _ in range(n)]
            for a in range(n)
            for b in range(n)
        }
        order = rng.sample(range(n), 4)
        enablers = {order[0]: order[1], order[2]: order[3]}
        return cls(n, m, strat, lag1, pairs, enablers, noise=0.35)

    def expected(self, path: list[int], g: int, s: int) -> float:
        value = self.strat[g][s]
        if path:
            value += self.lag1[path[-1]][g]
        if len(path) >= 2:
            value += self.pairs[(path[-2], path[-1])][g]
        if g in self.enablers:
            value -= 0.2  # the set-up step costs now ...
        if any(self.enablers.get(p) == g for p in path[-2:]):
            value += 0.6  # ... and pays when its partner follows
        return value

    def step(self, path: list[int], g: int, s: int, rng: random.Random) -> tuple[bool, float]:
        """(correct, reward)."""
        fail_p = min(0.6, max(0.05, 0.2 - 0.6 * self.strat[g][s]))
        if rng.random() < fail_p:
            return False, FAIL
        return True, max(-1.0, min(1.0, self.expected(path, g, s) + rng.gauss(0, self.noise)))


def synthetic_seed(n: int, m: int) -> dict:
    return {
        "format": "htam-seed",
        "version": 1,
        "globals": [{"id": f"d{i}", "title": f"d{i}", "intent": "synthetic"} for i in range(n)],
        "locals": [
            {
                "id": f"d{i}.s{j}",
                "direction": f"d{i}",
                "title": f"s{j}",
                "description": "",
                "pattern": "",
                "op_families": ["other"],
            }
            for i in range(n)
            for j in range(m)
        ],  # fmt: skip
        "edges": [],
    }


def _pick_local(policy, direction: str, rng: random.Random) -> str:
    candidates = policy.candidates(direction)
    if not candidates:  # no-local: the writer picks without memory
        return ""
    return candidates[0].id if rng.random() < 0.9 else rng.choice(candidates).id


def run(method: str, seed: int, episodes: int, horizon: int = 6, given: int = 2) -> float:
    name, rule = METHODS[method]
    config = PolicyConfig(K=2, edge_rule=rule)
    env = Env.make(seed)
    bank = MemoryBank.in_memory(synthetic_seed(env.n, env.m))
    policy = make_policy(name, config, bank)
    rng, env_rng = random.Random(seed), random.Random(60_000 + seed)
    state, means = StateFeatures(), []
    for episode in range(episodes):
        path: list[int] = []
        rewards = []
        for step in range(horizon):
            prefix = [f"d{i}" for i in path[-config.K :]]
            if step < given:
                g = env_rng.randrange(env.n)
                local = f"d{g}.s{env_rng.randrange(env.m)}"
            else:
                direction = policy.decide(prefix, state, rng).direction
                if direction == Direction.ANY:
                    local = _pick_local(policy, direction, rng)
                    direction = local.split(".")[0]
                else:
                    local = _pick_local(policy, direction, rng) or (
                        f"{direction}.s{rng.randrange(env.m)}"
                    )
                g = int(direction[1:])
            correct, r = env.step(path, g, int(local.split(".s")[1]), env_rng)
            policy.record(
                StepRecord(f"{method}-{seed}", f"ep{episode}", "synthetic", step, prefix,
                           f"d{g}", local, Status.OK if correct else Status.COMPILE_ERROR,
                           None, None, r)
            )  # fmt: skip
            if step >= given:
                rewards.append(r)
            if correct:
                path.append(g)  # the path moves only with code that works
        means.append(statistics.fmean(rewards))
    bank.close()
    return statistics.fmean(means[episodes // 2 :])


def interval(values: list[float]) -> tuple[float, float]:
    """Mean and half-width of its 95% t-interval."""
    mean = statistics.fmean(values)
    t = T95.get(len(values) - 1, 1.96)
    return mean, t * statistics.stdev(values) / math.sqrt(len(values))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--episodes", type=int, default=240)
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    seeds = list(range(args.seeds))
    jobs = [(m, s, args.episodes) for m in METHODS for s in seeds]
    with ProcessPoolExecutor(args.jobs) as pool:
        scores = list(pool.map(run, *zip(*jobs, strict=True), chunksize=4))
    table = {m: scores[i * len(seeds) : (i + 1) * len(seeds)] for i, m in enumerate(METHODS)}
    print("MECHANISM STUDY (synthetic: interactions, noise, failures, delayed payoffs; no LLM).")
    print(f"{len(seeds)} seeds x {args.episodes} episodes x 6 steps (2 given); K=2; score = mean "
          "reward per chosen step, last half of the episodes.\n")  # fmt: skip
    print("| method | mean | 95% CI | htam minus method | 95% CI | htam wins |")
    print("|---|---:|---:|---:|---:|---:|")
    for method, values in table.items():
        mean, half = interval(values)
        diffs = [a - b for a, b in zip(table["htam"], values, strict=True)]
        if method == "htam":
            print(f"| {method} | {mean:+.3f} | ±{half:.3f} | | | |")
            continue
        d_mean, d_half = interval(diffs)
        wins = sum(d > 0 for d in diffs)
        print(f"| {method} | {mean:+.3f} | ±{half:.3f} | {d_mean:+.3f} | ±{d_half:.3f} "
              f"| {wins}/{len(seeds)} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
