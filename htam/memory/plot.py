"""A picture of the transition graph, drawn by evidence as the bench report draws it: node size =
tries; an edge taken is solid, its width the times taken and its colour the sign of its utility
(the policy's, ``htam.policy.scoring.edge_utilities``, passed in); an edge known only from the
seed's prior is thin, grey and dotted (a prior never taken drew thickest by its utility alone).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from htam.memory.store import MemoryBank

FORMATS = (".png", ".svg")


def plot_bank(bank: MemoryBank, out: str | Path, utilities: dict[tuple[str, str], float]) -> Path:
    """Draw the directions and the transitions with ``utilities`` into ``out`` (.png or .svg)."""
    out = Path(out)
    if out.suffix.lower() not in FORMATS:
        raise ValueError(f"{out}: plot format must be one of {', '.join(FORMATS)}")
    import matplotlib

    matplotlib.use("Agg")  # files only: never needs a display
    import matplotlib.pyplot as plt
    import networkx as nx

    graph = nx.DiGraph()
    for node in bank.directions():
        graph.add_node(node.id, tries=node.stats.tries)
    styles = edge_styles([(e.src, e.dst, e.stats.count) for e in bank.edges()], utilities)
    graph.add_edges_from((s["src"], s["dst"]) for s in styles)
    positions = nx.circular_layout(graph)
    fig, ax = plt.subplots(figsize=(10, 10))
    sizes = [400 + 40 * graph.nodes[n]["tries"] for n in graph.nodes]
    colors = ["#9ecae1" if graph.nodes[n]["tries"] else "#eeeeee" for n in graph.nodes]
    nx.draw_networkx_nodes(graph, positions, node_size=sizes, node_color=colors, ax=ax)
    for node, (x, y) in positions.items():  # outside the circle, clear of nodes and edges
        ax.text(1.18 * x, 1.18 * y, node, fontsize=8, ha="left" if x > 0.01 else
                "right" if x < -0.01 else "center", va="center")  # fmt: skip
    for style in styles:
        nx.draw_networkx_edges(
            graph, positions, edgelist=[(style["src"], style["dst"])], width=style["width"],
            edge_color=style["color"], style=style["linestyle"], node_size=sizes, arrows=True,
            connectionstyle="arc3,rad=0.1", ax=ax,
        )  # fmt: skip
    ax.set_title(
        "HTAM transition graph (node size: tries; solid: taken, width: times taken, "
        "red: utility < 0; dotted grey: seed prior, never taken)",
        fontsize=10,
    )
    ax.set_xlim(-1.6, 1.6)
    ax.set_ylim(-1.4, 1.4)
    ax.set_axis_off()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, bbox_inches="tight")
    plt.close(fig)
    return out


def edge_styles(
    edges: list[tuple[str, str, int]], utilities: dict[tuple[str, str], float]
) -> list[dict]:
    """How each edge (src, dst, times taken) is drawn: its evidence decides, not the prior."""
    import math

    styles = []
    for src, dst, count in edges:
        utility = utilities.get((src, dst), 0.0)
        if count > 0:
            color = "#2ca02c" if utility >= 0 else "#d62728"
            style = {
                "linestyle": "solid",
                "width": 1.0 + 1.5 * math.log2(1 + count),
                "color": color,
            }
        else:
            style = {"linestyle": ":", "width": 0.8, "color": "#b0b0b0"}
        styles.append({"src": src, "dst": dst, "count": count, **style})
    return styles
