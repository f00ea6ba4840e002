"""``htam memory``: init, show, export, import, merge and plot through the real CLI app."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from htam.cli import app
from htam.memory import MemoryBank, StepRecord
from htam.policy import PolicyConfig
from htam.status import Status

RULE = PolicyConfig()  # the policy's update rule: the bank keeps none

runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, ["memory", *map(str, args)])


def _learn(path, run: str) -> None:
    with MemoryBank.open(path) as bank:
        for step in range(3):
            bank.record_step(
                StepRecord(run, "t", "sig", step, ["fusion"] * step, "memory_access",
                           "memory_access.vectorized_access", Status.OK, 1.0, 1.5, 0.4), config=RULE
            )  # fmt: skip


def test_init_show_export_import_merge_plot(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    result = _run("init", a)
    assert result.exit_code == 0 and "10 directions, 46 strategies" in result.output
    assert _run("init", b).exit_code == 0
    _learn(a, "ra")
    _learn(b, "rb")
    shown = _run("show", a, "--top", "3")
    assert shown.exit_code == 0 and "Directions" in shown.output
    assert "fusion -> memory_access" in shown.output and "3 recorded steps" in shown.output
    # the strategies tried, and a count of the 45 others, which --all lists
    assert "memory_access.vectorized_access" in shown.output
    assert "memory_access.coalesced_row_access" not in shown.output
    assert "45 more never tried: --all lists them" in shown.output
    every = _run("show", a, "--all").output
    assert "memory_access.coalesced_row_access" in every and "never tried" not in every
    assert _run("export", a, tmp_path / "a.json").exit_code == 0
    exported = json.loads((tmp_path / "a.json").read_text())
    assert exported["format"] == "htam-memory-export" and len(exported["steps"]) == 3
    assert _run("import", tmp_path / "a.json", tmp_path / "c.db").exit_code == 0
    assert _run("merge", a, b, tmp_path / "m.db").exit_code == 0
    assert _run("merge", tmp_path / "a.json", b, tmp_path / "m.json").exit_code == 0
    with MemoryBank.open(tmp_path / "m.db") as merged:
        assert merged.direction("memory_access").stats.tries == 6
    assert len(json.loads((tmp_path / "m.json").read_text())["steps"]) == 6
    for name in ("g.png", "g.svg"):
        assert _run("plot", a, tmp_path / name).exit_code == 0
    assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in (tmp_path / "g.svg").read_text()


def test_errors_exit_non_zero_and_touch_nothing(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a bank")
    for args in (("init", text), ("show", text), ("export", text, tmp_path / "x.json")):
        result = _run(*args)
        assert result.exit_code == 2, args
    # show reads a JSON export too (newcomer round 7): this is neither
    assert "neither a memory bank nor a JSON export" in _run("show", text).output
    assert text.read_text() == "not a bank"
    bank = tmp_path / "a.db"
    _run("init", bank)
    assert _run("export", bank, text).exit_code == 2 and text.read_text() == "not a bank"
    assert _run("plot", bank, tmp_path / "g.gif").exit_code == 2
    assert _run("import", text, tmp_path / "n.db").exit_code == 2
    assert not (tmp_path / "n.db").exists()


def test_default_bank_path_show_and_json(tmp_path, monkeypatch):
    # conftest points HTAM_CACHE_DIR at a fresh directory; the default bank lives under it
    monkeypatch.setenv("HTAM_CACHE_DIR", str(tmp_path / "cache"))
    default = tmp_path / "cache" / "memory.db"
    printed = _run("path")
    assert printed.exit_code == 0 and printed.stdout.strip() == str(default)
    missing = _run("show")
    assert missing.exit_code == 2 and "no such bank" in missing.output
    assert _run("init", default).exit_code == 0
    _learn(default, "r")
    shown = _run("show")
    assert shown.exit_code == 0 and f"bank: {default}" in shown.output
    data = json.loads(_run("show", "--json", "--top", "2").stdout)
    assert data["bank"] == str(default) and data["steps"] == 3
    access = next(d for d in data["directions"] if d["id"] == "memory_access")
    assert access["tries"] == 3 and access["outcomes"] == {"ok": 3}
    assert len(data["transitions"]) == 2 and {"src", "dst", "utility"} <= set(
        data["transitions"][0]
    )
    assert any(s["id"] == "memory_access.vectorized_access" for s in data["strategies"])


def test_scopes_and_merge_scope(tmp_path):
    bank = tmp_path / "m.db"
    assert _run("init", bank).exit_code == 0
    _learn(bank, "cpu-run")  # steps without a target: learned into the default scope, cpu
    listed = _run("scopes", bank, "--json")
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.output)["scopes"]["cpu"] == {"steps": 3, "tries": 6, "evidence": 3}
    typo = _run("merge-scope", bank, "--from-scope", "cpu", "--into-scope", "gpu")
    assert typo.exit_code == 2 and "a run reads the scope of its target" in typo.output
    merged = _run("merge-scope", bank, "--from-scope", "cpu", "--into-scope", "cuda")
    assert merged.exit_code == 0, merged.output
    assert "3 evidence records" in merged.output
    with MemoryBank.open(bank, scope="cuda") as opened:
        assert opened.direction("memory_access").stats.tries == 3
    again = _run("merge-scope", bank, "--from-scope", "cpu", "--into-scope", "cuda")
    assert again.exit_code == 2 and "twice" in again.output
