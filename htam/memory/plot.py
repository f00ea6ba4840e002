"""A picture of the transition graph: node size = tries, edge width = utility."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from htam.policy.config import PolicyConfig

if TYPE_CHECKING:
    from htam.memory.store import MemoryBank

FORMATS = (".png", ".svg")


def edge_utilities(bank: MemoryBank, config: PolicyConfig) -> dict[tuple[str, str], float]:
    """U~(src -> dst) of every stored edge, as the policy would score it."""
    values = {g.id: g.stats.value(config.value_shrink) for g in bank.directions()}
    return {(e.src, e.dst): values[e.dst] + e.stats.fit for e in bank.edges()}


def plot_bank(bank: MemoryBank, out: str | Path, config: PolicyConfig | None = None) -> Path:
    """Draw the global directions and their transitions into ``out`` (.png or .svg)."""
    out = Path(out)
    if out.suffix.lower() not in FORMATS:
        raise ValueError(f"{out}: plot format must be one of {', '.join(FORMATS)}")
    import matplotlib

    matplotlib.use("Agg")  # files only: never needs a display
    import matplotlib.pyplot as plt
    import networkx as nx

    config = config or PolicyConfig()
    graph = nx.DiGraph()
    for node in bank.directions():
        graph.add_node(node.id, tries=node.stats.tries)
    for (src, dst), utility in edge_utilities(bank, config).items():
        graph.add_edge(src, dst, utility=utility)
    positions = nx.circular_layout(graph)
    fig, ax = plt.subplots(figsize=(9, 9))
    sizes = [400 + 40 * graph.nodes[n]["tries"] for n in graph.nodes]
    nx.draw_networkx_nodes(graph, positions, node_size=sizes, node_color="#9ecae1", ax=ax)
    nx.draw_networkx_labels(graph, positions, font_size=8, ax=ax)
    utilities = [graph.edges[e]["utility"] for e in graph.edges]
    nx.draw_networkx_edges(
        graph,
        positions,
        width=[0.5 + 6 * abs(u) for u in utilities],
        edge_color=["#2ca02c" if u >= 0 else "#d62728" for u in utilities],
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
