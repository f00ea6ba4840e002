"""A 6-step `htam optimize` on the CPU driven by a scripted model on loopback: C++ candidates,
with a reply without code and a broken build among them.

    python3 scripts/device/scripted_cpu_run.py OUT_DIR
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from htam.llm.replay_server import ReplayServer, Scripted

FIX = Path(__file__).resolve().parents[2] / "tests" / "agent" / "fixtures"


def main(out: Path) -> int:
    good = (FIX / "chain_fused_cpp.py").read_text()
    broken = good.replace("std::fmin(std::fmax(v, -1.f), 2.f)", "std::fmin(std::fmax(v, -1.f), 2.f")
    replies = [
        Scripted(
            content='{"strategy_id": "fusion.elementwise_chain_fusion", "rationale": "fuse"}',
            when="strategy_id",
            repeat=True,
        ),
        Scripted(content=f"```python\n{good}\n```", when="ModelNew"),
        Scripted(content="No code this time.", when="ModelNew"),
        Scripted(content=f"```cpp\n{broken}\n```\n```python\n{broken}\n```", when="ModelNew"),
        Scripted(content=f"```python\n{good}\n```", when="ModelNew", repeat=True),
    ]
    with ReplayServer(replies) as server:
        cmd = [
            sys.executable,
            "-m",
            "htam.cli",
            "optimize",
            "level2/5_Elementwise_Chain",
            "--base-url",
            server.base_url,
            "--model",
            server.model,
            "--target",
            "cpu",
            "--language",
            "cpp",
            "--steps",
            "6",
            "--memory",
            str(out / "memory.db"),
            "--out",
            str(out / "run"),
        ]
        code = subprocess.call(cmd, env={**os.environ, "COLUMNS": "120"})
    subprocess.call(
        [sys.executable, "-m", "htam.cli", "memory", "show", str(out / "memory.db")],
        env={**os.environ, "COLUMNS": "120"},
    )
    return code


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
