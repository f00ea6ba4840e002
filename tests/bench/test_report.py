"""Reports of a bench whose units failed with multi-line errors: every Markdown table row stays
one line (an error's line breaks once ended the row and broke report.md's unit table); the full
error stays in units.jsonl."""

import json

from htam.bench.markdown import cell, one_line, table
from htam.bench.report import write_report

ERROR = (
    "TaskError: level1/19_ReLU: the reference failed to run:\n"
    'Traceback (most recent call last):\n  File "x.py", line 3\n'
    "torch.OutOfMemoryError: CUDA out of memory | tried to allocate 6.4 GiB\n"
)


def _failed_bench(out):
    out.mkdir()
    units = [
        {"method": "htam", "seed": 0, "task_id": f"kb/level1/{n}", "level": 1, "steps": 2}
        for n in ("19_ReLU", "20_LeakyReLU")
    ]
    (out / "plan.json").write_text(json.dumps(units))
    with open(out / "units.jsonl", "w") as f:
        for u in units:
            key = f"htam/s0/{u['task_id']}"
            f.write(
                json.dumps({"unit": key, "status": "failed", "error": ERROR, "device": "cuda:0"})
                + "\n"
            )


def test_markdown_cells_are_one_line():
    assert cell("a\nb\r\n  c|d") == "a b c\\|d"
    assert one_line(ERROR).endswith(
        "torch.OutOfMemoryError: CUDA out of memory | tried to allocate 6.4 GiB"
    )
    assert one_line(ERROR).startswith("TaskError: level1/19_ReLU: the reference failed to run:")
    assert one_line("") == "" and len(one_line("x" * 500, 120)) == 120
    lines = table(["h1", "h2"], [["x\ny", "z"]])
    assert lines == ["| h1 | h2 |", "|---|---|", "| x y | z |"]


def test_failed_units_with_multiline_errors_keep_the_table_whole(tmp_path):
    out = tmp_path / "bench"
    _failed_bench(out)
    files = write_report(out)
    text = files.markdown.read_text()
    section = text.split("## Units")[1].split("## Figures")[0]
    rows = [line for line in section.strip().splitlines() if line]
    assert len(rows) == 4  # header, rule, two units: no row broken apart
    assert rows[1].startswith("|---|")
    assert all(line.startswith("| ") and line.endswith(" |") for line in rows[:1] + rows[2:])
    header = [c.strip() for c in rows[0].strip("|").split(" | ")]
    assert "best candidate vs eager" in header and "kept vs eager" in header
    # each row has exactly as many cells as the header ("|" inside the error is escaped)
    for line in rows[2:]:
        assert line.replace("\\|", "").count("|") == rows[0].count("|")
        assert "the reference failed to run: torch.OutOfMemoryError" in line
    # the whole error is still in units.jsonl
    assert json.loads((out / "units.jsonl").read_text().splitlines()[0])["error"] == ERROR
    metrics = json.loads(files.metrics.read_text())["methods"]["htam"]
    assert metrics["kept_geomean_eager"] == 1.0 and metrics["candidate_geomean_eager_fail1"] is None
    html = files.html.read_text()
    assert "kept geomean vs eager (never &lt; 1)" in html
    assert "best candidate geomean vs eager (fail=1 / excl)" in html
    assert "Traceback" not in html and "Traceback" not in text
