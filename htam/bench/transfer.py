"""The transfer experiment: a memory built on one suite (KernelBench), applied to another
(Robust-KBench), against a fresh seed bank with the same budget and seeds.

Four ordinary benches under OUT, each resumable on its own::

    build/        the source suite, --memory-mode accumulate: its bank is build/memory/<method>.db
    fresh/        the target suite from the seed bank
    frozen/       the target suite from the built bank, nothing learned kept between units
    accumulate/   the target suite from the built bank, learning kept across its units
    transfer.json, transfer.md, curves.png   the comparison

Which transferred knowledge the decisions used comes from the step records' ``decision``
(``policy.explain()``): a prefix edge of the chosen direction counts as transferred when the
built bank had observed it, and a strategy when the built bank had tried it.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from htam.agent.step import Step
from htam.bench.bench_config import BenchConfig, Unit
from htam.bench.metrics import discovery_curve
from htam.bench.results import load_plan, load_rows
from htam.bench.runner import run_bench

ARMS = ("fresh", "frozen", "accumulate")


@dataclass
class TransferFiles:
    json: Path
    markdown: Path
    curves: Path | None
    bank: Path


def run_transfer(
    base: BenchConfig,
    source_tasks: list,
    target_tasks: list,
    resume: bool = False,
    on_phase: Callable[[str], None] | None = None,
    on_event=None,
) -> TransferFiles:
    """Run the four benches of ``base`` (its methods, seeds, steps, target, devices and
    proposer; its out is the experiment's root) and write the comparison."""
    root = Path(base.out)
    say = on_phase or (lambda _: None)
    build = replace(base, out=root / "build", memory_mode="accumulate", memory=None)
    say(f"build: {len(source_tasks)} source task(s), memory accumulate")
    _bench(build, source_tasks, resume, on_event)
    bank = root / "build" / "memory" / f"{base.methods[0]}.db"
    for arm in ARMS:
        config = replace(
            base, out=root / arm, memory_mode=arm, memory=None if arm == "fresh" else bank
        )
        say(f"{arm}: {len(target_tasks)} target task(s)")
        _bench(config, target_tasks, resume, on_event)
    return write_transfer(root, base.methods[0])


def _bench(config: BenchConfig, tasks: list, resume: bool, on_event) -> None:
    # BenchConfig validates on construction; dataclasses.replace builds a new one, so a bad
    # combination fails here before anything runs.
    exists = (config.out / "bench.json").exists()
    run_bench(config, tasks, resume=resume and exists, on_event=on_event, report=False)


def write_transfer(root: Path, method: str) -> TransferFiles:
    """Compare the arms under ``root`` for ``method``: transfer.json, transfer.md, curves.png."""
    root = Path(root)
    bank = root / "build" / "memory" / f"{method}.db"
    known_edges, known_locals = _transferred(bank)
    arms = {arm: _arm(root / arm, method, known_edges, known_locals) for arm in ARMS}
    data = {
        "method": method,
        "bank": str(bank),
        "transferred_edges": len(known_edges),
        "transferred_strategies": len(known_locals),
        "arms": arms,
        "tasks": _per_task(arms),
    }
    json_path = root / "transfer.json"
    json_path.write_text(json.dumps(data, indent=2))
    curves = _plot_curves(arms, root / "curves.png")
    md_path = root / "transfer.md"
    md_path.write_text(_markdown(data, curves))
    return TransferFiles(json_path, md_path, curves, bank)


def _transferred(bank: Path) -> tuple[set[tuple[str, str]], set[str]]:
    from htam.memory import MemoryBank

    if not bank.exists():
        raise FileNotFoundError(f"{bank}: the build bench left no bank")
    with MemoryBank.open(bank) as opened:
        edges = {(e.src, e.dst) for e in opened.edges() if e.stats.count > 0}
        locals_ = {node.id for node in opened.all_locals() if node.stats.tries > 0}
    return edges, locals_


def _arm(out: Path, method: str, known_edges: set, known_locals: set) -> dict[str, Any]:
    rows = [r for r in load_rows(out) if r.method == method]
    units = [u for u in load_plan(out) if u.method == method]
    best: dict[str, dict[int, float | None]] = defaultdict(dict)
    for row in rows:
        best[row.task_id][row.seed] = row.speedup if row.correct else None
    edges: Counter[str] = Counter()
    strategies: Counter[str] = Counter()
    steps = 0
    for unit in units:
        for step in _steps(unit, out):
            steps += 1
            direction = step.direction
            terms = (step.decision or {}).get("directions", {}).get(direction, {})
            for term in terms.get("prefix_terms", []):
                if (term["src"], direction) in known_edges:
                    edges[f"{term['src']} -> {direction}"] += 1
            if step.strategy is not None and step.strategy in known_locals:
                strategies[step.strategy] += 1
    return {
        "best": best,
        "curve": discovery_curve(rows),  # none correct yet: 1.0, as in the table
        "steps": steps,
        "edges_used": dict(edges.most_common()),
        "strategies_used": dict(strategies.most_common()),
    }


def _steps(unit: Unit, out: Path) -> list[Step]:
    folder = unit.run_dir(out) / "steps"
    return [Step.from_dict(json.loads(p.read_text())) for p in sorted(folder.glob("step_*.json"))]


def geomean_fail1(values: list[float | None]) -> float | None:
    """Geometric mean with a failed seed counted as 1.0 (no speedup), as the bench does."""
    if not values:
        return None
    return math.exp(sum(math.log(v if v else 1.0) for v in values) / len(values))


def _per_task(arms: dict[str, dict]) -> dict[str, dict[str, Any]]:
    tasks = sorted({t for arm in arms.values() for t in arm["best"]})
    table = {}
    for task in tasks:
        row = {}
        for arm, data in arms.items():
            seeds = data["best"].get(task, {})
            values = [seeds[s] for s in sorted(seeds)]
            row[arm] = {
                "seeds": values,
                "correct": sum(v is not None for v in values),
                "geomean": geomean_fail1(values),
            }
        table[task] = row
    return table


def _plot_curves(arms: dict[str, dict], path: Path) -> Path | None:
    if not any(arm["curve"] for arm in arms.values()):
        return None
    from htam.bench.drawing import finish, legend_below, pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for arm, data in arms.items():
        ax.plot(range(1, len(data["curve"]) + 1), data["curve"], marker="o", label=arm)
    ax.set_xlabel("step")
    ax.set_ylabel("mean best speedup vs eager (none correct = 1.0)")
    legend_below(fig, ax, ncol=len(arms))
    path.write_bytes(finish(fig, "transfer_curves").png)
    return path


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}x"


def _markdown(data: dict[str, Any], curves: Path | None) -> str:
    arms = data["arms"]
    lines = [
        f"# Transfer: {data['method']}, memory built in {data['bank']}",
        "",
        f"The built bank had observed {data['transferred_edges']} transition edge(s) and tried "
        f"{data['transferred_strategies']} strategy(ies). Best speedup vs eager per seed "
        "('-' = no correct candidate); geomean counts a failed seed as 1.0.",
        "",
        "| task | "
        + " | ".join(f"{a} (seeds)" for a in ARMS)
        + " | "
        + " | ".join(f"{a} geomean" for a in ARMS)
        + " | frozen / fresh |",
        "|---|" + "---|" * (2 * len(ARMS) + 1),
    ]
    for task, row in data["tasks"].items():
        seeds = [" ".join(_fmt(v) for v in row[a]["seeds"]) or "not run" for a in ARMS]
        means = [_fmt(row[a]["geomean"]) for a in ARMS]
        fresh, frozen = row["fresh"]["geomean"], row["frozen"]["geomean"]
        ratio = f"{frozen / fresh:.3g}" if fresh and frozen else "-"
        lines.append(f"| {task} | " + " | ".join(seeds + means) + f" | {ratio} |")
    lines += ["", "## Discovery curves (mean best speedup after each step)", ""]
    for arm in ARMS:
        lines.append(f"- {arm}: " + ", ".join(f"{v:.3g}" for v in arms[arm]["curve"]))
    if curves is not None:
        lines += ["", f"![discovery curves]({curves.name})"]
    lines += ["", "## Transferred knowledge the decisions used", ""]
    for arm in ("frozen", "accumulate"):
        used = arms[arm]
        edges = ", ".join(f"{k} ({v})" for k, v in used["edges_used"].items()) or "none"
        strategies = ", ".join(f"{k} ({v})" for k, v in used["strategies_used"].items()) or "none"
        lines.append(
            f"- {arm}, {used['steps']} steps: edges in the chosen direction's prefix "
            f"term: {edges}; strategies with built evidence: {strategies}"
        )
    return "\n".join(lines) + "\n"
