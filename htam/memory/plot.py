"""A picture of the transition graph: node size = tries, edge width = utility.

The utilities are the policy's (``htam.policy.scoring.edge_utilities``), passed in.
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
    for (src, dst), utility in utilities.items():
        graph.add_edge(src, dst, utility=utility)
    positions = nx.circular_layout(graph)
    fig, ax = plt.subplots(figsize=(9, 9))
    sizes = [400 + 40 * graph.nodes[n]["tries"] for n in graph.nodes]
    nx.draw_networkx_nodes(graph, positions, node_size=sizes, node_color="#9ecae1", ax=ax)
    nx.draw_networkx_labels(graph, positions, font_size=8, ax=ax)
    drawn = [graph.edges[e]["utility"] for e in graph.edges]
    nx.draw_networkx_edges(
        graph,
        positions,
        width=[0.5 + 6 * abs(u) for u in drawn],
        edge_color=["#2ca02c" if u >= 0 else "#d62728" for u in drawn],
        node_size=sizes,
        arrows=True,
        connectionstyle="arc3,rad=0.1",
        ax=ax,
    )
    ax.set_title("HTAM transition graph (node size: tries; edge width: |utility|, red < 0)")
    ax.set_axis_off()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, bbox_inches="tight")
    plt.close(fig)
    return out
