import os
import shutil
import subprocess
from pathlib import Path

import pytest

from htam.bench import BenchConfig, ProposerSpec
from htam.tasks import load_suite
from tests.bench.helpers import TASKS

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
# Short timing: CPU timings under the Triton interpreter are not bars, only correctness is.
FAST_EVAL = dict(timing_budget_ms=20.0, min_timed=3, max_timed=10, run_timeout_s=30.0)


def tasks(names=TASKS):
    wanted = set(names)
    return [t for t in load_suite("builtin", levels=[1]) if t.id in wanted]


def config(
    out, methods=("htam", "no-prefix"), workers=2, steps=2, **proposer_kwargs
) -> BenchConfig:
    spec = ProposerSpec(factory="tests.bench.helpers:FixedProposer", kwargs=proposer_kwargs)
    return BenchConfig(
        out=out,
        methods=list(methods),
        steps=steps,
        target="cpu",
        language="triton",
        devices=[f"cpu{i}" for i in range(workers)],
        proposer=spec,
        eval_overrides=FAST_EVAL,
    )


def render_html(path: Path, tmp_path: Path) -> tuple[str, str]:
    """Load ``path`` in headless Chromium with a probe that titles the page with its count of
    images and of images that did not load; returns (title, console lines)."""
    title, _, console = render_dom(path, tmp_path)
    return title, console


def render_dom(path: Path, tmp_path: Path) -> tuple[str, str, str]:
    """``render_html`` that also returns the DOM as Chromium built it: (title, DOM, console)."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (apt-get install -y --no-install-recommends chromium)")
    probe = (
        '<script>window.addEventListener("load", function () { var n = 0, bad = 0;'
        "for (const i of document.images) { n++; if (!i.complete || i.naturalWidth === 0) bad++; }"
        'document.title = "IMAGES " + n + " BROKEN " + bad; });</script>'
    )
    page = tmp_path / "probe.html"
    page.write_text(path.read_text().replace("</head>", probe + "</head>", 1))
    profile = tmp_path / "chromium-profile"
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    start = done.stdout.index("<title>") + len("<title>")
    title = done.stdout[start : done.stdout.index("</title>", start)]
    console = "\n".join(line for line in done.stderr.splitlines() if ":CONSOLE" in line)
    return title, done.stdout, console


def cli_env() -> dict[str, str]:
    """The environment of a CLI subprocess: the repository on the path (for the scripted
    proposer) and the test session's cache."""
    env = dict(os.environ)
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{env.get('PYTHONPATH', '')}"
    return env


def htam_cli() -> list[str]:
    return [shutil.which("htam") or "htam"]
