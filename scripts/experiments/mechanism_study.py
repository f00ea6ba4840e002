"""Mechanism study: htam, its ablations and random in a synthetic environment shaped like the
loop (docs/mechanism.md).

A CHECK OF THE MECHANISM ONLY: no kernels, no LLM. The real policy, memory bank, reward and
update rules run; the environment stands in for the evaluator and a simulated chooser for the
LLM. What it shares with the loop:

- **relative rewards**: each task has a runtime; a step applies a strategy to the best code so
  far and the new runtime is the best one times 2**(-gain), gain drawn around the expected gain
  of (path, direction, strategy); the reward is htam.policy.reward of that time against the best
  (log2 ratio, clipped; a slower candidate in the slow band; a tie within the noise);
- **lineage-only path**: the prefix the policy conditions on moves only with a new best (as
  Progress.lineage does);
- **state**: each task has an op family; each strategy suits some families (its op_families),
  and the expected gain of an off-family strategy is lower; the state carries the family, so the
  prior's off-family penalty acts as in the loop;
- **repairs**: a failed step is repaired once under the same direction and strategy (repairs=1),
  succeeding with probability 0.5, learned under that direction;
- **an LLM that may ignore the ranking**: the chooser takes the strategy the memory ranks first
  with probability ``--follow`` (several values), else one at random;
- **the loop's scale**: 6 steps a task (the first the baseline, no decision), tens of tasks.

The expected gain of strategy l of direction g after the lineage (..., p2, p1) is

    S[g][l] + F[family][g] + E[p1][g] + I[p2, p1][g] + D(g | lineage)

(E a lag-1 table, I a sparse interaction of the last two directions jointly, D a delayed payoff
from an enabler to its partner) with noise per step, and a failure probability that grows as
S falls. Score per (method, seed): the mean log2 of the final best speedup over the last half of
the tasks. Reported: the mean over seeds with a 95% t-interval, htam minus each method paired by
seed, and the transition term's mean share of htam's decisions (htam.policy.shares).

Usage: python scripts/experiments/mechanism_study.py [--seeds 20] [--tasks 80] [--follow 0.9 0.5 0.0]
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
from htam.policy import PolicyConfig, StateFeatures, make_policy, reward
from htam.policy.shares import term_shares
from htam.status import Status

METHODS = {  # name: (policy method, PolicyConfig overrides)
    "htam": ("htam", {}),
    "htam-lam0": ("htam", {"lam": 0.0}),  # V(g) only inside the prefix terms (no lambda V)
    "no-prefix": ("no-prefix", {}),
    "no-position": ("no-position", {}),
    "no-hierarchy": ("no-hierarchy", {}),
    "random": ("random", {}),
}
FAMILIES = ("elementwise", "reduction", "gemm", "normalization")
NOISE = 0.05  # the relative timing noise the reward's band sees
T95 = {19: 2.093, 29: 2.045, 39: 2.023, 49: 2.010}


@dataclass
class Env:
    n: int
    m: int
    strat: list[list[float]]
    suits: list[list[str]]  # op families each strategy suits
    family_gain: dict[str, list[float]]
    lag1: list[list[float]]
    pairs: dict[tuple[int, int], list[float]]
    enablers: dict[int, int]

    @classmethod
    def make(cls, seed: int, n: int = 8, m: int = 3) -> Env:
        rng = random.Random(50_000 + seed)
        strat = [[rng.gauss(0.1, 0.25) for _ in range(m)] for _ in range(n)]
        suits = [[rng.choice(FAMILIES), rng.choice(FAMILIES)] for _ in range(n * m)]
        family_gain = {f: [rng.gauss(0, 0.2) for _ in range(n)] for f in FAMILIES}
        lag1 = [[rng.gauss(0, 0.3) for _ in range(n)] for _ in range(n)]
        pairs = {
            (a, b): [rng.gauss(0, 0.6) if rng.random() < 0.15 else 0.0 for _ in range(n)]
            for a in range(n)
            for b in range(n)
        }
        order = rng.sample(range(n), 4)
        return cls(
            n, m, strat, suits, family_gain, lag1, pairs, {order[0]: order[1], order[2]: order[3]}
        )

    def gain(self, lineage: list[int], family: str, g: int, s: int) -> float:
        value = self.strat[g][s] + self.family_gain[family][g]
        if family not in self.suits[g * self.m + s]:
            value -= 0.3  # off-family: the strategy's idea fits the ops poorly
        if lineage:
            value += self.lag1[lineage[-1]][g]
        if len(lineage) >= 2:
            value += self.pairs[(lineage[-2], lineage[-1])][g]
        if g in self.enablers:
            value -= 0.15
        if any(self.enablers.get(p) == g for p in lineage[-2:]):
            value += 0.5
        return value

    def fails(self, g: int, s: int, rng: random.Random) -> bool:
        return rng.random() < min(0.5, max(0.05, 0.2 - 0.5 * self.strat[g][s]))


def synthetic_seed(env: Env) -> dict:
    return {
        "format": "htam-seed",
        "version": 1,
        "globals": [{"id": f"d{i}", "title": f"d{i}", "intent": "synthetic"} for i in range(env.n)],
        "locals": [
            {
                "id": f"d{i}.s{j}",
                "direction": f"d{i}",
                "title": f"s{j}",
                "description": "",
                "pattern": "",
                "op_families": env.suits[i * env.m + j],
            }
            for i in range(env.n)
            for j in range(env.m)
        ],  # fmt: skip
        "edges": [],
    }


@dataclass
class Task:
    """One task's loop state: the best time, the lineage, the last failure to repair."""

    family: str
    best_ms: float = 1.0
    lineage: list[int] | None = None
    failed: tuple[int, int] | None = None


def choose(policy, direction: str, state, follow: float, rng: random.Random, m: int) -> str:
    candidates = policy.candidates(direction, state)
    if not candidates:  # no memory of strategies: the writer picks
        return f"{direction}.s{rng.randrange(m)}"
    return candidates[0].id if rng.random() < follow else rng.choice(candidates).id


def run(method: str, seed: int, tasks: int, follow: float, horizon: int = 6):
    name, overrides = METHODS[method]
    config = PolicyConfig(K=2, **overrides)
    env = Env.make(seed)
    bank = MemoryBank.in_memory(synthetic_seed(env))
    policy = make_policy(name, config, bank)
    rng, env_rng = random.Random(seed), random.Random(60_000 + seed)
    finals, shares = [], []
    for t in range(tasks):
        task = Task(env_rng.choice(FAMILIES), lineage=[])
        state = StateFeatures(op_families=[task.family])
        for step in range(1, horizon):  # step 0 is the baseline: no decision
            prefix = [f"d{i}" for i in task.lineage[-config.K :]]
            if task.failed is not None:
                g, s = task.failed  # repair: the same direction and strategy, no decision
                ok = env_rng.random() < 0.5
            else:
                decision = policy.decide(prefix, state, rng)
                share = term_shares(decision.breakdown)
                if share is not None:
                    shares.append(share["transition"])
                direction = decision.direction
                local = choose(policy, direction, state, follow, rng, env.m)
                g, s = int(local.split(".")[0][1:]), int(local.split(".s")[1])
                ok = not env.fails(g, s, env_rng)
            task.failed = None if ok or task.failed is not None else (g, s)
            if ok:
                gain = env.gain(task.lineage, task.family, g, s) + env_rng.gauss(0, 0.15)
                new_ms = task.best_ms * 2.0 ** (-gain)
                r = reward(Status.OK, task.best_ms, new_ms, config, NOISE)
                if new_ms * (1 + max(NOISE, config.min_gain)) < task.best_ms:
                    task.best_ms = new_ms
                    task.lineage.append(g)  # the path moves only with a new best
            else:
                r = reward(Status.COMPILE_ERROR, None, None, config)
            policy.record(
                StepRecord(f"{method}-{seed}", f"task{t}", task.family, step, prefix,
                           f"d{g}", f"d{g}.s{s}", Status.OK if ok else Status.COMPILE_ERROR,
                           None, None, r)
            )  # fmt: skip
        finals.append(-math.log2(task.best_ms))
    bank.close()
    half = finals[tasks // 2 :]
    return statistics.fmean(half), (statistics.fmean(shares) if shares else None)


def interval(values: list[float]) -> tuple[float, float]:
    mean = statistics.fmean(values)
    t = T95.get(len(values) - 1, 1.96)
    return mean, t * statistics.stdev(values) / math.sqrt(len(values))


def table(follow: float, seeds: list[int], tasks: int, jobs: int) -> list[str]:
    runs = [(m, s, tasks, follow) for m in METHODS for s in seeds]
    with ProcessPoolExecutor(jobs) as pool:
        results = list(pool.map(run, *zip(*runs, strict=True), chunksize=4))
    by = {m: results[i * len(seeds) : (i + 1) * len(seeds)] for i, m in enumerate(METHODS)}
    lines = [f"### The LLM follows the memory's ranking with probability {follow}", "",
             "| method | log2 final speedup | 95% CI | htam minus method | 95% CI | htam wins "
             "| transition share |", "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    base = [v for v, _ in by["htam"]]
    for method, values in by.items():
        scores = [v for v, _ in values]
        share = [x for _, x in values if x is not None]
        share_text = f"{statistics.fmean(share):.3f}" if share else "-"
        mean, half = interval(scores)
        if method == "htam":
            lines.append(f"| {method} | {mean:+.3f} | ±{half:.3f} | | | | {share_text} |")
            continue
        diffs = [a - b for a, b in zip(base, scores, strict=True)]
        d_mean, d_half = interval(diffs)
        wins = sum(d > 0 for d in diffs)
        lines.append(f"| {method} | {mean:+.3f} | ±{half:.3f} | {d_mean:+.3f} | ±{d_half:.3f} "
                     f"| {wins}/{len(seeds)} | {share_text} |")  # fmt: skip
    return lines + [""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--tasks", type=int, default=80)
    parser.add_argument("--follow", type=float, nargs="+", default=[0.9, 0.5, 0.0])
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    seeds = list(range(args.seeds))
    print(f"MECHANISM STUDY (synthetic, shaped like the loop; no LLM). {args.seeds} seeds x "
          f"{args.tasks} tasks x 6 steps (5 decisions or repairs); K=2; score = mean log2 of the "
          "final best speedup over the last half of the tasks.\n")  # fmt: skip
    for follow in args.follow:
        print("\n".join(table(follow, seeds, args.tasks, args.jobs)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
