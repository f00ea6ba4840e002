"""The report's figures: speed-ups per method, per level, the discovery curves and the memory's
transition graph, each drawn and finished by ``htam.bench.drawing``."""

from __future__ import annotations

import math
from typing import Any

from htam.bench.drawing import LABEL_FONT, Plot, finish, legend_below, pyplot
from htam.bench.metrics import UnitRow

# Below this many points a box plot invents a distribution (quartiles of 3 points): show points.
BOX_MIN_POINTS = 8


def speedup_distribution(rows: list[UnitRow], methods: list[str]) -> Plot:
    """Best speedup vs eager of every correct unit, one column of points per method; a box only
    over enough points to have quartiles; the counts in the tick labels, off the data."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(5, 1.3 * len(methods) + 2), 4))
    columns, ticks = [], []
    for i, method in enumerate(methods):
        mine = [r for r in rows if r.method == method]
        values = [r.speedup for r in mine if r.correct and r.speedup]
        boxed = len(values) >= BOX_MIN_POINTS
        if boxed:
            ax.boxplot(values, positions=[i], widths=0.5, showfliers=False)
        if values:
            jitter = [i + 0.12 * ((k % 5) - 2) / 2 for k in range(len(values))]
            ax.scatter(jitter, values, s=14, alpha=0.7, zorder=3)
        ticks.append(f"{method}\n{len(values)} correct, {len(mine) - len(values)} not")
        columns.append({"method": method, "points": len(values), "box": boxed})
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(methods)), ticks, fontsize=8)
    ax.set_yscale("log")
    # Plain ratios on the log axis: "0.3x" reads at a glance, "3 x 10^-1" does not; and ticks
    # of its own over the data's range (the log locator labelled only 1x and 0.9x over 0.85-1.3).
    ax.yaxis.set_major_locator(FixedLocator(ratio_ticks(*ax.get_ylim())))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.set_xlim(-0.6, len(methods) - 0.4)
    ax.set_ylabel("best speedup vs eager (log; dashed: eager)")
    ax.set_title("Speedup distribution (correct units)")
    return finish(fig, "speedup_distribution", columns=columns)


# Mantissas of the ticks of a log axis of speedups, coarsest first: the first set that puts
# enough ticks in the data's range is used.
TICK_MANTISSAS = (
    (1,),
    (1, 2, 5),
    (1, 1.5, 2, 3, 5, 7),
    (1, 1.1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9),
)


def ratio_ticks(lo: float, hi: float, fewest: int = 4) -> list[float]:
    """At least ``fewest`` ticks inside [lo, hi], from the coarsest set of round ratios that
    has them; over a range too narrow for any, evenly spread values with enough digits."""
    for mantissas in TICK_MANTISSAS:
        ticks = sorted(
            t for e in range(-4, 5) for m in mantissas if lo <= (t := round(m * 10.0**e, 6)) <= hi
        )
        if len(ticks) >= fewest:
            return ticks
    step = (math.log(hi) - math.log(lo)) / (fewest + 1)
    for digits in range(2, 7):
        ticks = sorted(
            {round(math.exp(math.log(lo) + step * k), digits) for k in range(1, fewest + 1)}
        )
        if len(ticks) == fewest:
            return ticks
    return [lo, hi]


def _percent(value: float) -> str:
    return f"{100 * value:.0f}%"


def _ratio(value: float) -> str:
    return f"{value:.2f}x"


LEVEL_PANELS = (
    ("correctness", "correct", _percent),
    ("fast_1", "fast@1 (correct and faster than eager)", _percent),
    ("candidate_geomean_eager_fail1", "best candidate geomean (fail = 1.0)", _ratio),
    ("kept_geomean_eager", "kept geomean (never < 1)", _ratio),
)


def level_bars(by_level: dict[str, dict[str, Any]], methods: list[str]) -> Plot:
    """Correctness, fast@1, the best candidate's geomean speedup (failures as 1.0) and the kept
    geomean speedup per level, a bar per method, every bar labelled with its value (a 0% bar is
    invisible without its label); the legend under the panels, off the bars."""
    plt = pyplot()
    levels = sorted({lv for m in methods for lv in by_level.get(m, {})})
    fig, axes = plt.subplots(1, len(LEVEL_PANELS), figsize=(20, 4))
    width = 0.8 / max(1, len(methods))
    crowded = len(methods) * len(levels) > 6  # narrow bars: labels turned upright to fit
    panels = []
    for ax, (key, title, fmt) in zip(axes, LEVEL_PANELS, strict=True):
        bars, top = [], 1.0
        for i, method in enumerate(methods):
            got = [by_level.get(method, {}).get(lv, {}).get(key) for lv in levels]
            xs = [k + (i - (len(methods) - 1) / 2) * width for k in range(len(levels))]
            drawn = ax.bar(xs, [v or 0.0 for v in got], width=width, label=method)
            labels = ["n/a" if v is None else fmt(v) for v in got]
            texts = ax.bar_label(
                drawn, labels, padding=2, fontsize=LABEL_FONT, rotation=90 if crowded else 0
            )
            top = max([top, *(v for v in got if v is not None)])
            bars += [
                {"method": method, "level": lv, "value": v, "label": t.get_text()}
                for lv, v, t in zip(levels, got, texts, strict=True)
            ]
        ax.set_xticks(range(len(levels)), [f"level {lv}" for lv in levels])
        ax.set_title(title, fontsize=10)
        # From 0 with head room for the labels: a ratio near 1.0 is not blown up into a cliff.
        ax.set_ylim(0, top * (1.35 if crowded else 1.18))
        if key in ("correctness", "fast_1"):  # fractions: no tick past 100%
            ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0], ["0%", "25%", "50%", "75%", "100%"])
        else:
            ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
        panels.append({"key": key, "title": title, "bars": bars})
    legend_below(fig, axes[0], len(methods))
    return finish(fig, "levels", panels=panels)


def discovery_curves(methods_metrics: dict[str, dict[str, Any]]) -> Plot:
    """The mean best speedup after each step: whole steps on x, y from 0 through 1.0 (the
    reference's speed), so 0.26 against 0.30 looks like the small gap it is."""
    from matplotlib.ticker import MaxNLocator

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    top, steps = 1.0, 1
    for method, m in methods_metrics.items():
        curve = m["curve"]
        ax.plot(range(1, len(curve) + 1), curve, marker="o", label=method)
        top, steps = max([top, *curve]), max(steps, len(curve))
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="eager PyTorch = 1.0")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole: no 1.2, 1.4
    ax.set_xlim(0.5, steps + 0.5)
    ax.set_ylim(0, top * 1.1)
    ax.set_xlabel("step")
    ax.set_ylabel("mean best speedup vs eager")
    ax.set_title("Discovery curves")
    legend_below(fig, ax, len(methods_metrics) + 1)
    return finish(fig, "discovery_curves")


def memory_graph(bank_file) -> Plot:
    """The transition graph of one bank, edges drawn by their evidence: an edge this bench took
    is solid (width: times taken; green: mean observed reward >= 0, red: < 0); an edge known
    only from the seed's prior is thin, grey and dotted, since nothing was observed on it."""
    import networkx as nx
    from matplotlib.colors import to_hex
    from matplotlib.lines import Line2D

    from htam.memory import MemoryBank

    plt = pyplot()
    with MemoryBank.open(bank_file) as bank:
        nodes = {node.id: node.stats.tries for node in bank.directions()}
        edges = [(e.src, e.dst, e.stats.count, e.stats.observed) for e in bank.edges()]
    graph = nx.DiGraph()
    graph.add_nodes_from(nodes)
    graph.add_edges_from((src, dst) for src, dst, *_ in edges)
    positions = nx.circular_layout(graph)
    fig, ax = plt.subplots(figsize=(9, 9))
    sizes = {n: 400 + 40 * tries for n, tries in nodes.items()}
    nx.draw_networkx_nodes(
        graph,
        positions,
        nodelist=list(nodes),
        ax=ax,
        node_size=[sizes[n] for n in nodes],
        node_color=["#9ecae1" if t else "#eeeeee" for t in nodes.values()],
    )
    nx.draw_networkx_labels(graph, positions, font_size=8, ax=ax)
    drawn = []
    for evidence in ("prior", "observed"):  # observed on top
        chosen = [e for e in edges if (e[2] > 0) == (evidence == "observed")]
        if not chosen:
            continue
        style: dict[str, object]
        if evidence == "observed":
            style = dict(
                style="solid",
                width=[1.0 + 1.5 * math.log2(1 + c) for *_, c, _ in chosen],
                edge_color=["#2ca02c" if (r or 0) >= 0 else "#d62728" for *_, r in chosen],
            )
        else:
            style = dict(style=":", width=0.8, edge_color="#b0b0b0", alpha=0.8)
        patches = nx.draw_networkx_edges(
            graph,
            positions,
            edgelist=[(s, d) for s, d, *_ in chosen],
            ax=ax,
            arrows=True,
            node_size=[sizes[n] for n in graph.nodes],
            connectionstyle="arc3,rad=0.1",
            **style,
        )
        for (src, dst, count, reward), patch in zip(chosen, patches, strict=True):
            drawn.append(
                {
                    "src": src,
                    "dst": dst,
                    "count": count,
                    "observed_reward": reward,
                    "evidence": evidence,
                    "linestyle": str(patch.get_linestyle()),
                    "width": float(patch.get_linewidth()),
                    "color": to_hex(patch.get_edgecolor()),
                }
            )
    key = [
        Line2D([], [], color="#2ca02c", lw=2.5, label="taken, mean reward >= 0"),
        Line2D([], [], color="#d62728", lw=2.5, label="taken, mean reward < 0"),
        Line2D([], [], color="#b0b0b0", lw=1, ls=":", label="seed prior only (never taken)"),
    ]
    fig.legend(
        handles=key,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.06),
        ncol=3,
        fontsize=8,
        frameon=False,
    )
    ax.set_title("Transition graph (node size: tries, grey: untried; edge width: times taken)")
    ax.set_axis_off()
    return finish(fig, "memory_graph", axes_texts=False, edges=drawn)
