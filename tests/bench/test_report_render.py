"""The bench report as a reader meets it: a CPU bench made of synthetic unit summaries (no bench
run), written by write_report, rendered in headless Chromium; the checks read the DOM Chromium
built and the plot data each figure carries (data-plot), as drawn by matplotlib.

The data is the case that read badly (issue 14, item 11): a method with no unit faster than
eager (an empty fast@1 panel), two steps (fractional step ticks), curves all below 1.0 and
close together (0.26 against 0.30), three points per method (box plots from 3 points), a memory
bank with both taken and prior-only edges, and a CPU target (an "eval (GPU) s" column)."""

import json
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

from htam.bench.report import write_report
from htam.memory import MemoryBank, StepRecord
from htam.policy import PolicyConfig
from htam.status import Status
from tests.bench.conftest import render_dom

TASKS = ("builtin/level1/1_ReLU", "builtin/level1/3_Sigmoid", "builtin/level2/1_Gemm_Bias_ReLU")
# (method, task) -> best speedup after each step, 0.0 = nothing correct yet; None: never correct
CURVES = {
    ("htam", TASKS[0]): [0.0, 1.8],
    ("htam", TASKS[1]): [0.30, 0.30],
    ("htam", TASKS[2]): None,
    ("no-prefix", TASKS[0]): [0.26, 0.26],
    ("no-prefix", TASKS[1]): [0.0, 0.24],
    ("no-prefix", TASKS[2]): [0.28, 0.28],
}


def _unit_dir(out: Path, method: str, task: str) -> Path:
    return out / "runs" / method / "s0" / task.replace("/", "__")


def synthetic_bench(out: Path) -> Path:
    """A finished two-step CPU bench of 2 methods x 3 tasks, written as the runner writes it."""
    out.mkdir(parents=True)
    identity = {"steps": 2, "target": "cpu", "language": "triton", "size": "small"}
    (out / "bench.json").write_text(json.dumps({"identity": identity, "config": {}}))
    plan = [
        {
            "method": m,
            "seed": 0,
            "task_id": t,
            "level": int(t.split("level")[1][0]),
            "steps": 2,
            "key": f"{m}/s0/{t}",
        }
        for (m, t) in CURVES
    ]
    (out / "plan.json").write_text(json.dumps(plan))
    log = []
    for (method, task), curve in CURVES.items():
        run = _unit_dir(out, method, task)
        (run / "steps").mkdir(parents=True)
        best = max(curve) if curve else None
        for step in range(2):
            record = {"step": step, "wall_s": 2.0, "feedback": {"breakdown_s": {"wall": 1.5}}}
            (run / "steps" / f"step_{step:02d}.json").write_text(json.dumps(record))
        summary = {
            "steps": 2,
            "best_status": "ok" if best else "incorrect",
            "best_speedup": best,
            "best_speedup_vs_compile": None,
            "curve": curve or [0.0, 0.0],
            "cost_usd": 0.002,
            "tokens": {"prompt": 200, "completion": 100},
            "wall_s": 4.0,
            "timing_meaningful": False,
        }
        (run / "summary.json").write_text(json.dumps(summary))
        if best and best > 1.0:  # best.py is written only for code faster than the reference
            (run / "best.py").write_text("class ModelNew: ...\n")
        log.append({"unit": f"{method}/s0/{task}", "status": "done", "device": "cpu0"})
    (out / "units.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log))
    (out / "memory").mkdir()
    with MemoryBank.open(out / "memory" / "htam-s0.db", create=True) as bank:
        steps = [
            (["algorithmic_rewrite"], "fusion", Status.OK, 0.5),
            (["fusion"], "memory_access", Status.INCORRECT, -1.0),
            (["fusion"], "memory_access", Status.OK, -0.2),
        ]
        for i, (prefix, direction, status, reward) in enumerate(steps):
            bank.record_step(
                StepRecord(
                    "run", "task", "sig", i, prefix, direction, None, status, 1.0, None, reward
                ),
                config=PolicyConfig(),
            )
    return out


class _Dom(HTMLParser):
    """The figures' plot data and the tables' cells (text and link) of a dumped DOM."""

    def __init__(self):
        super().__init__()
        self.plots: dict[str, dict] = {}
        self.tables: list[dict] = []
        self._cell: dict | None = None
        self._heading = ""
        self._in_h2 = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "figure" and "data-plot" in attrs:
            self.plots[attrs["id"].removeprefix("fig-")] = json.loads(attrs["data-plot"])
        elif tag == "h2":
            self._in_h2, self._heading = True, ""
        elif tag == "table":
            self.tables.append({"title": self._heading, "headers": [], "rows": []})
        elif tag == "tr" and self.tables:
            self.tables[-1]["rows"].append([])
        elif tag in ("td", "th"):
            self._cell = {"text": "", "href": None, "tag": tag}
        elif tag == "a" and self._cell is not None:
            self._cell["href"] = attrs.get("href")

    def handle_data(self, data):
        if self._in_h2:
            self._heading += data
        if self._cell is not None:
            self._cell["text"] += data

    def handle_endtag(self, tag):
        if tag == "h2":
            self._in_h2 = False
        elif tag in ("td", "th") and self._cell is not None:
            table = self.tables[-1]
            if self._cell["tag"] == "th":
                table["headers"].append(self._cell["text"])
            else:
                table["rows"][-1].append(self._cell)
            self._cell = None


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("render")
    out = synthetic_bench(tmp / "bench")
    files = write_report(out)
    title, dom, console = render_dom(files.html, tmp)
    parsed = _Dom()
    parsed.feed(dom)
    for table in parsed.tables:
        table["rows"] = [r for r in table["rows"] if r]  # the header row has no td
    return files, title, console, parsed


@pytest.mark.slow
def test_report_renders_every_figure(report):
    files, title, console, dom = report
    assert title == "IMAGES 4 BROKEN 0" and console == ""  # 3 plots + 1 bank that learned
    assert set(dom.plots) == {
        "speedup_distribution",
        "levels",
        "discovery_curves",
        "memory_htam-s0",
    }


@pytest.mark.slow
def test_no_label_lies_over_data(report):
    """No legend over a bar, no value label over a point or over another label."""
    dom = report[3]
    for name, plot in dom.plots.items():
        assert plot["overlaps"] == [], name


def test_every_fast_p_panel_labels_its_values(report):
    panels = {p["key"]: p for p in report[3].plots["levels"]["panels"]}
    for key, panel in panels.items():
        assert panel["bars"] and all(b["label"] for b in panel["bars"]), key
    fast = panels["fast_1"]["bars"]
    # no-prefix never beat eager: its panel is not empty but says 0%
    assert {b["label"] for b in fast if b["method"] == "no-prefix"} == {"0%"}
    assert [b["label"] for b in fast if b["method"] == "htam"] == ["50%", "0%"]
    assert {b["label"] for b in panels["correctness"]["bars"]} >= {"100%", "0%"}
    axes = report[3].plots["levels"]["axes"]
    assert all(ax["ylim"][0] == 0 for ax in axes)


def test_discovery_curves_honest_axes(report):
    (ax,) = report[3].plots["discovery_curves"]["axes"]
    assert ax["xticks"] and all(t == int(t) for t in ax["xticks"])  # no 1.2, 1.4 steps
    assert set(ax["xticks"]) == {1.0, 2.0}
    # 0.26 against 0.30 on an axis from 0 through the reference's 1.0, not a zoomed one
    assert ax["ylim"][0] == 0 and ax["ylim"][1] >= 1.0
    assert "none correct" not in ax["ylabel"]


def test_no_box_from_three_points(report):
    columns = report[3].plots["speedup_distribution"]["columns"]
    assert {c["method"]: (c["points"], c["box"]) for c in columns} == {
        "htam": (2, False),
        "no-prefix": (3, False),
    }
    (ax,) = report[3].plots["speedup_distribution"]["axes"]
    assert ax["texts"] == []  # the counts moved off the data, into the tick labels
    assert "3 correct, 0 not" in ax["xticklabels"][1]


def test_memory_edges_drawn_by_evidence(report):
    edges = report[3].plots["memory_htam-s0"]["edges"]
    observed = [e for e in edges if e["evidence"] == "observed"]
    prior = [e for e in edges if e["evidence"] == "prior"]
    assert {(e["src"], e["dst"]) for e in observed} == {
        ("algorithmic_rewrite", "fusion"),
        ("fusion", "memory_access"),
    }
    assert prior and all(e["count"] == 0 for e in prior)
    assert all(e["count"] > 0 for e in observed)
    # styled apart: no prior-only edge looks like an observed one
    prior_looks = {(e["linestyle"], e["color"]) for e in prior}
    observed_looks = {(e["linestyle"], e["color"]) for e in observed}
    assert not prior_looks & observed_looks
    assert {e["linestyle"] for e in observed} == {"-"} or {e["linestyle"] for e in observed} == {
        "solid"
    }
    assert all(e["linestyle"] not in ("-", "solid") for e in prior)
    assert max(e["width"] for e in prior) < min(e["width"] for e in observed)
    colors = {(e["src"], e["dst"]): e["color"] for e in observed}
    assert colors[("fusion", "memory_access")] != colors[("algorithmic_rewrite", "fusion")]


def test_unit_rows_link_to_their_best_py(report):
    files, dom = report[0], report[3]
    (units,) = [t for t in dom.tables if t["title"] == "Units"]
    assert units["headers"][:2] == ["unit", "best.py"] and len(units["rows"]) == 6
    with_best = 0
    for unit, best, *_ in units["rows"]:
        run_dir = files.html.parent / unquote(unit["href"])
        assert run_dir.is_dir() and (run_dir / "summary.json").exists(), unit
        if (run_dir / "best.py").exists():
            with_best += 1
            assert best["text"] == "best.py"
            assert files.html.parent / unquote(best["href"]) == run_dir / "best.py"
        else:
            assert best["href"] is None and best["text"].startswith("none")
    assert with_best == 1
    assert "[best.py](runs/htam/s0/builtin__level1__1_ReLU/best.py)" in files.markdown.read_text()


def test_no_gpu_column_on_a_cpu_run(report):
    files, dom = report[0], report[3]
    headers = [h for t in dom.tables for h in t["headers"]]
    assert "eval (CPU) s" in headers
    assert not any("GPU" in h for h in headers)
    assert "GPU) s" not in files.markdown.read_text()


def test_the_overlap_check_sees_a_legend_over_a_bar_and_a_label_on_a_point():
    """The figures' "overlaps" are not empty by construction: planted faults are found."""
    from htam.bench.drawing import finish, pyplot

    fig, ax = pyplot().subplots(figsize=(4, 3))
    ax.bar([0, 1], [1.0, 1.0], label="a bar")
    ax.legend(loc="center")  # over both bars
    ax.plot([0.5], [0.5], marker="o")
    ax.annotate("here", (0.5, 0.5), ha="center", va="center")
    overlaps = finish(fig, "planted").data["overlaps"]
    assert any("'legend' over bar" in o for o in overlaps)
    assert any("'here' over point" in o for o in overlaps)
