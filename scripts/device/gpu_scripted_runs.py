"""The loop on a GPU with a scripted model on loopback (issue: htam optimize): one run whose
candidates are CUDA (load_inline), one whose candidates are Triton.

    python3 scripts/device/gpu_scripted_runs.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from htam.agent import OptimizeConfig, Optimizer
from htam.evaluate import CachedEvaluator, EvalConfig, Evaluator
from htam.llm import LLMClient, LLMProposer, resolve_config
from htam.llm.replay_server import ReplayServer, Scripted
from htam.memory import MemoryBank
from htam.tasks import builtin_suite

FIX = Path(__file__).resolve().parents[2] / "tests" / "agent" / "fixtures"
CHAIN = "builtin/level2/5_Elementwise_Chain"


def replies(code: str) -> list[Scripted]:
    broken = code.replace("class ModelNew", "class ModelNew(nn.Module:")  # a syntax error
    choose = Scripted(
        content='{"strategy_id": "fusion.elementwise_chain_fusion"}',
        when="strategy_id",
        repeat=True,
    )
    return [
        choose,
        Scripted(content=f"```python\n{broken}\n```", when="ModelNew"),
        Scripted(content=f"```python\n{code}\n```", when="ModelNew", repeat=True),
    ]


def main(out: Path) -> None:
    task = next(t for t in builtin_suite() if t.id == CHAIN)
    summaries = {}
    with Evaluator("cuda", EvalConfig(size="large")) as ev:
        for language, fixture in (("cuda", "chain_cuda.py"), ("triton", "chain_triton.py")):
            code = (FIX / fixture).read_text()
            with (
                ReplayServer(replies(code)) as server,
                MemoryBank.open(out / f"memory-{language}.db", create=True) as bank,
            ):
                client = LLMClient(resolve_config(None, server.base_url, server.model))
                config = OptimizeConfig(steps=3, seed=1, target="cuda", language=language)
                optimizer = Optimizer(
                    LLMProposer(client),
                    CachedEvaluator(ev),
                    bank,
                    config,
                    on_step=lambda r: print(
                        r["step"],
                        r["direction"],
                        r["strategy"],
                        r["feedback"]["status"],
                        r["feedback"]["speedup"],
                        flush=True,
                    ),
                )
                summary = optimizer.run(task, out / f"run-{language}").to_dict()
                summaries[language] = summary
                print(
                    language,
                    json.dumps(
                        {
                            k: summary[k]
                            for k in (
                                "best_status",
                                "best_speedup",
                                "best_speedup_vs_compile",
                                "best_sol_fraction",
                                "statuses",
                                "curve",
                                "cost_usd",
                                "tokens",
                                "steps",
                            )
                        }
                    ),
                    flush=True,
                )
                print("memory steps recorded:", bank.step_count(), flush=True)
    (out / "scripted_runs.json").write_text(json.dumps(summaries, indent=2))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
