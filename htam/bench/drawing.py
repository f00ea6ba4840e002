"""What every report figure is drawn with: matplotlib on its Agg backend (files only, never a
display), and each figure finished as PNG bytes with the data it shows as drawn (axes, ticks,
value labels, what overlaps what), so that a test or a reader can check it without reading
pixels."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from typing import Any

LABEL_FONT = 7


@dataclass
class Plot:
    png: bytes
    data: dict[str, Any] = field(default_factory=dict)


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _marks(ax, renderer) -> list[tuple[str, Any]]:
    """Display-space boxes of what carries data: bars, scatter points and line markers."""
    from matplotlib.patches import Rectangle
    from matplotlib.transforms import Bbox

    marks = []
    for patch in ax.patches:
        if isinstance(patch, Rectangle) and patch.get_width() and patch.get_height():
            marks.append(("bar", patch.get_window_extent(renderer)))
    scale = ax.figure.dpi / 72.0

    def dots(kind: str, points, radius: float) -> None:
        for x, y in ax.transData.transform(points):
            if math.isfinite(x) and math.isfinite(y):
                marks.append(
                    (kind, Bbox.from_extents(x - radius, y - radius, x + radius, y + radius))
                )

    for coll in ax.collections:
        sizes = coll.get_sizes()
        if len(coll.get_offsets()) and len(sizes):
            dots("point", coll.get_offsets(), math.sqrt(max(sizes)) / 2 * scale)
    for line in ax.lines:
        if line.get_marker() not in (None, "", "None", " "):
            dots("point", line.get_xydata(), line.get_markersize() / 2 * scale)
    return marks


def _overlaps(fig, axes_texts: bool = True) -> list[str]:
    """Every label (value label, annotation, legend) that lies over a data mark or another
    label: what a reader cannot read. Empty in a good figure. Without ``axes_texts`` only the
    legends count (a graph's node names sit on their nodes by design)."""
    renderer = fig.canvas.get_renderer()
    found: list[str] = []
    legends = [leg for leg in [*fig.legends, *(ax.get_legend() for ax in fig.axes)] if leg]
    for ax in fig.axes:
        marks = _marks(ax, renderer)
        texts = [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts if t.get_text()]
        texts = texts if axes_texts else []
        texts += [("legend", leg.get_window_extent(renderer)) for leg in legends]
        for i, (name, box) in enumerate(texts):
            inner = box.expanded(0.98, 0.9)  # glyph boxes have padding: touching is not hiding
            hits = [kind for kind, mark in marks if inner.overlaps(mark)]
            hits += [other for other, box2 in texts[i + 1 :] if inner.overlaps(box2)]
            found += [f"{ax.get_title() or 'axes'}: {name!r} over {hit}" for hit in hits]
    return sorted(set(found))


def _axes_data(ax) -> dict[str, Any]:
    lo, hi = sorted(ax.get_xlim())
    return {
        "title": ax.get_title(),
        "xlabel": ax.get_xlabel(),
        "ylabel": ax.get_ylabel(),
        "xticks": [float(t) for t in ax.get_xticks() if lo - 1e-9 <= t <= hi + 1e-9],
        "xticklabels": [t.get_text() for t in ax.get_xticklabels()],
        "ylim": [float(v) for v in ax.get_ylim()],
        "yticklabels": [t.get_text() for t in ax.get_yticklabels() if t.get_text()],
        "yscale": ax.get_yscale(),
        "texts": [t.get_text() for t in ax.texts],
    }


def finish(fig, kind: str, axes_texts: bool = True, **data: Any) -> Plot:
    fig.canvas.draw()  # lays out ticks and labels, so what is read back is what is drawn
    data = {
        "kind": kind,
        "axes": [_axes_data(ax) for ax in fig.axes],
        "overlaps": _overlaps(fig, axes_texts),
        **data,
    }
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    pyplot().close(fig)
    return Plot(buffer.getvalue(), data)


def legend_below(fig, ax, ncol: int) -> None:
    """The legend under the figure, where it can never cover a bar or a point."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(
            handles,
            labels,
            loc="upper center",
            bbox_to_anchor=(0.5, 0.0),
            ncol=max(1, ncol),
            fontsize=8,
            frameon=False,
        )
