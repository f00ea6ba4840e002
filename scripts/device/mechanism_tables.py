"""The tables of scripts/device/gpu_mechanism.py: discovery curves with bootstrap intervals over tasks,
the paired difference of each method to htam, the prefix's share of htam's decisions, and the
transfer arms. Pure functions over the unit rows (one dict per (method or arm, seed, task))."""

from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

RESAMPLES = 2000


def best_after(curve: list[float], steps: int) -> list[float]:
    """The best speedup after each step, "no correct candidate yet" as 1.0 (the reference),
    a shorter run keeping its last value."""
    values = [v if v and v > 0 else 1.0 for v in curve] or [1.0]
    return (values + [values[-1]] * steps)[:steps]


def bootstrap(values: list[float], seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high): the mean and its 95% percentile bootstrap interval."""
    if not values:
        return (math.nan, math.nan, math.nan)
    rng = random.Random(seed)
    means = sorted(sum(rng.choice(values) for _ in values) / len(values) for _ in range(RESAMPLES))
    return (sum(values) / len(values), means[int(0.025 * RESAMPLES)], means[int(0.975 * RESAMPLES)])


def complete(rows: list[dict], key: str, arms: list[str]) -> list[dict]:
    """The rows of the (seed, task) pairs every arm finished without an error."""
    have = defaultdict(set)
    for r in rows:
        if "error" not in r:
            have[(r["seed"], r["task"])].add(r[key])
    done = {pair for pair, got in have.items() if set(arms) <= got}
    return [r for r in rows if (r["seed"], r["task"]) in done]


def per_task(rows: list[dict], key: str, steps: int) -> dict[str, dict[str, list[list[float]]]]:
    """task -> arm -> the curves of its seeds."""
    table: dict[str, dict[str, list[list[float]]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        table[r["task"]][r[key]].append(best_after(r["curve"], steps))
    return table


def curves(table, arms: list[str], steps: int) -> dict[str, list[tuple[float, float, float]]]:
    """arm -> per step (mean, low, high) over tasks of the seeds' mean best speedup."""
    result = {}
    for arm in arms:
        result[arm] = [
            bootstrap([sum(c[t] for c in runs[arm]) / len(runs[arm]) for runs in table.values()])
            for t in range(steps)
        ]
    return result


def paired(table, arm: str, base: str, steps: int) -> tuple[float, float, float]:
    """The geometric-mean ratio arm / base of the final best speedup, paired by task (seeds
    averaged in logs), with its bootstrap interval over tasks."""
    logs = []
    for runs in table.values():
        a = sum(math.log(c[steps - 1]) for c in runs[arm]) / len(runs[arm])
        b = sum(math.log(c[steps - 1]) for c in runs[base]) / len(runs[base])
        logs.append(a - b)
    mean, low, high = bootstrap(logs)
    return (math.exp(mean), math.exp(low), math.exp(high))


def shares(rows: list[dict]) -> dict[str, Any]:
    values = [s for r in rows if r.get("method", "htam") == "htam"
              for s in r.get("prefix_shares") or [] if s is not None]  # fmt: skip
    if not values:
        return {"decisions": 0}
    ordered = sorted(values)
    return {
        "decisions": len(values),
        "mean": sum(values) / len(values),
        "median": ordered[len(ordered) // 2],
        "above_10pct": sum(v > 0.10 for v in values) / len(values),
        "above_25pct": sum(v > 0.25 for v in values) / len(values),
    }


def _fmt(cell: tuple[float, float, float]) -> str:
    return f"{cell[0]:.3f} [{cell[1]:.3f}, {cell[2]:.3f}]"


def section(rows, key, arms, base, steps, title) -> tuple[list[str], dict]:
    done = complete(rows, key, arms)
    table = per_task(done, key, steps)
    lines = [f"## {title}", ""]
    seeds = sorted({r["seed"] for r in done})
    lines.append(f"{len(table)} tasks complete for every arm, seeds {seeds}, {len(done)} units; "
                 f"{len(rows) - len(done)} units of incomplete tasks left out.")  # fmt: skip
    if not table:
        return lines + [""], {"tasks": 0}
    curve = curves(table, arms, steps)
    lines += ["", "Discovery curve: mean over tasks of the best speedup vs eager after each step "
              "(no correct candidate yet = 1.0), 95% bootstrap interval over tasks:", ""]  # fmt: skip
    lines.append("| arm | " + " | ".join(f"step {t + 1}" for t in range(steps)) + " |")
    lines.append("|---|" + "---|" * steps)
    lines += [f"| {a} | " + " | ".join(_fmt(c) for c in curve[a]) + " |" for a in arms]
    ratios = {a: paired(table, a, base, steps) for a in arms if a != base}
    lines += ["", f"Final best speedup, geometric-mean ratio to {base}, paired by task "
              "(95% bootstrap interval over tasks; 1.0 = no difference):", ""]  # fmt: skip
    lines += ["| arm | ratio |", "|---|---|"]
    lines += [f"| {a} / {base} | {_fmt(r)} |" for a, r in ratios.items()]
    correct = {a: sum(r["correct"] for r in done if r[key] == a) for a in arms}
    units = {a: sum(r[key] == a for r in done) for a in arms}
    lines += ["", "Correct units: " + ", ".join(f"{a} {correct[a]}/{units[a]}" for a in arms)]
    data = {"tasks": len(table), "seeds": seeds, "curve": curve, "ratios": ratios,
            "correct": correct, "units": units}  # fmt: skip
    return lines + [""], data


def write_tables(out: Path, rows: list[dict], transfer_rows: list[dict], args) -> None:
    methods = list(args.methods)
    lines = ["# The mechanism on real GPU tasks", "",
             f"Offline proposer, target {args.target}, language {args.language}, size "
             f"{args.size}, {args.steps} steps, {args.seeds} seeds.", ""]  # fmt: skip
    body, mech = section(rows, "method", methods, "htam", args.steps,
                         "htam vs no-prefix vs flat vs random (KernelBench)")  # fmt: skip
    lines += body
    share = shares(complete(rows, "method", methods))
    lines += ["## The prefix's share of htam's decisions", "",
              "Share = the transition term's spread over the directions scored, over the sum of "
              "every term's spread (htam.policy.shares).", "", json.dumps(share), ""]  # fmt: skip
    families = defaultdict(set)
    for r in rows:
        families[r.get("family", "?")].add(r["task"])
    lines += [
        "Tasks per family: " + ", ".join(f"{f} {len(t)}" for f, t in sorted(families.items())),
        "",
    ]
    body, trans = section(transfer_rows, "arm", ["fresh", "frozen", "accumulate"], "fresh",
                          args.steps, "Transfer: KernelBench bank -> Robust-KBench forward")  # fmt: skip
    lines += body
    failed = [r for r in rows + transfer_rows if "error" in r]
    if failed:
        lines += [f"{len(failed)} units failed; first: {failed[0]['error'][:300]}", ""]
    (out / "mechanism.md").write_text("\n".join(lines))
    (out / "mechanism.json").write_text(
        json.dumps(
            {"mechanism": mech, "prefix_share": share, "transfer": trans}, indent=1, default=str
        )
    )
    print("\n".join(lines))
