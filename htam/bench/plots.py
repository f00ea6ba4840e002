"""The report's figures as PNG bytes (matplotlib, Agg backend: files only, never a display)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from htam.bench.metrics import UnitRow


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    _pyplot().close(fig)
    return buffer.getvalue()


def speedup_distribution(rows: list[UnitRow], methods: list[str]) -> bytes:
    """Best speedup vs eager of every correct unit, one column of points per method."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(5, 1.3 * len(methods) + 2), 4))
    for i, method in enumerate(methods):
        mine = [r for r in rows if r.method == method]
        values = [r.speedup for r in mine if r.correct and r.speedup]
        if values:
            ax.boxplot(values, positions=[i], widths=0.5, showfliers=False)
            jitter = [i + 0.12 * ((k % 5) - 2) / 2 for k in range(len(values))]
            ax.scatter(jitter, values, s=14, alpha=0.7, zorder=3)
        failed = len(mine) - len(values)
        ax.annotate(
            f"{failed} not correct",
            (i, 0),
            xycoords=("data", "axes fraction"),
            xytext=(0, 4),
            textcoords="offset points",
            ha="center",
            fontsize=8,
        )
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(methods)), methods, rotation=20)
    ax.set_yscale("log")
    ax.set_xlim(-0.6, len(methods) - 0.4)
    ax.set_ylabel("best speedup vs eager (log)")
    ax.set_title("Speedup distribution (correct units)")
    return _png(fig)


def level_bars(by_level: dict[str, dict[str, Any]], methods: list[str]) -> bytes:
    """Correctness, fast@1, the best candidate's geomean speedup (failures as 1.0) and the kept
    geomean speedup per level, a bar per method."""
    plt = _pyplot()
    levels = sorted({lv for m in methods for lv in by_level.get(m, {})})
    panels = (
        ("correctness", "correct"),
        ("fast_1", "fast@1"),
        ("candidate_geomean_eager_fail1", "best candidate geomean (fail = 1.0)"),
        ("kept_geomean_eager", "kept geomean (never < 1)"),
    )
    fig, axes = plt.subplots(1, len(panels), figsize=(20, 4))
    width = 0.8 / max(1, len(methods))
    for j, (key, label) in enumerate(panels):
        ax = axes[j]
        for i, method in enumerate(methods):
            values = [by_level.get(method, {}).get(lv, {}).get(key) or 0.0 for lv in levels]
            xs = [k + (i - (len(methods) - 1) / 2) * width for k in range(len(levels))]
            ax.bar(xs, values, width=width, label=method)
        ax.set_xticks(range(len(levels)), [f"level {lv}" for lv in levels])
        ax.set_title(label)
        if key in ("correctness", "fast_1"):
            ax.set_ylim(0, 1)
        else:
            ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    axes[0].legend(fontsize=8)
    return _png(fig)


def discovery_curves(methods_metrics: dict[str, dict[str, Any]]) -> bytes:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for method, m in methods_metrics.items():
        curve = m["curve"]
        ax.plot(range(1, len(curve) + 1), curve, marker="o", label=method)
    ax.set_xlabel("step")
    ax.set_ylabel("mean best speedup (none correct yet = 1.0)")
    ax.set_title("Discovery curves")
    ax.legend(fontsize=8)
    return _png(fig)


def memory_graph(bank_file: Path) -> bytes:
    """The transition graph of one bank, drawn by htam.memory.plot."""
    import tempfile

    from htam.memory import MemoryBank
    from htam.memory.plot import plot_bank

    with tempfile.TemporaryDirectory() as tmp, MemoryBank.open(bank_file) as bank:
        path = plot_bank(bank, Path(tmp) / "graph.png")
        _pyplot().close("all")
        return path.read_bytes()
