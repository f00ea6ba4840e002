"""``htam optimize TASK``: run the HTAM loop on one task with an LLM or the offline proposer."""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import typer
from rich.live import Live
from rich.table import Table

from htam.cli.common import console, default_size, fail, resolve_target


def resolve_task(spec: str):
    """A task file, or a built-in task by id (``builtin/level1/6_Softmax``) or name."""
    from htam.tasks import builtin_suite, load_task

    path = Path(spec)
    if path.exists():
        return load_task(path)
    for task in builtin_suite():
        if spec in (task.id, task.id.removeprefix("builtin/"), task.name):
            return task
    fail(
        f"{spec}: no such task file, and no built-in task has that id or name "
        "(see `htam tasks list`)"
    )


def make_proposer(
    llm: str | None, base_url: str | None, model: str | None, target: str, language: str
):
    if llm is None and base_url is None:
        from htam.offline import OfflineProposer

        return OfflineProposer(target=target, language=language)
    from htam.llm import LLMClient, LLMError, LLMProposer, resolve_config

    try:
        return LLMProposer(LLMClient(resolve_config(llm, base_url, model)))
    except LLMError as exc:
        fail(str(exc))


def default_memory() -> Path:
    from htam.evaluate.config import cache_root

    return cache_root() / "memory.db"


class LiveSteps:
    """One row per finished step: a live table on a terminal; elsewhere (a log, a pipe) a line per
    step as it finishes and the whole table at the end."""

    def __init__(self, title: str):
        self.table = Table(title=title)
        for name in ("step", "direction", "strategy", "status", "best speedup", "cost $"):
            self.table.add_column(name)
        self.cost = 0.0

    def display(self):
        if console.is_terminal:
            return Live(self.table, console=console, refresh_per_second=4)
        return nullcontext()

    def close(self) -> None:
        if not console.is_terminal:
            console.print(self.table)

    def __call__(self, record: dict) -> None:
        fb = record["feedback"]
        self.cost += record["usage"]["cost_usd"]
        status = fb["status"] + (f" {fb['speedup']:.2f}x" if fb.get("speedup") else "")
        row = [
            str(record["step"]),
            record["direction"],
            record["strategy"] or "-",
            status,
            f"{record['best_speedup']:.2f}x",
            f"{self.cost:.4f}",
        ]
        self.table.add_row(*row)
        if not console.is_terminal:
            console.print(
                f"step {row[0]}: {row[1]} / {row[2]}: {row[3]} (best {row[4]})",
                highlight=False,
                soft_wrap=True,
            )


def optimize_command(
    task: str = typer.Argument(
        ..., help="task file, or a built-in task id such as level1/6_Softmax"
    ),
    llm: str | None = typer.Option(
        None, help="LLM preset: deepseek, openai, vllm, sglang, ollama, llamacpp"
    ),
    base_url: str | None = typer.Option(None, help="any OpenAI-compatible endpoint (with --model)"),
    model: str | None = typer.Option(None, help="model name for --llm or --base-url"),
    steps: int = typer.Option(6, min=1, help="optimization steps T"),
    target: str | None = typer.Option(
        None, help="cuda or cpu (default: cuda when a GPU is visible)"
    ),
    language: str | None = typer.Option(None, help="cuda | triton (cuda); cpp | triton (cpu)"),
    size: str | None = typer.Option(None, help="task size: small (CPU) or large (GPU)"),
    memory: Path | None = typer.Option(
        None, help="memory bank (SQLite); created from the seed if missing"
    ),
    method: str = typer.Option("htam", help="htam, flat, refine, oneshot, random, no-prefix, ..."),
    seed: int = typer.Option(0, help="seed of the direction policy and the LLM"),
    out: Path | None = typer.Option(
        None, help="run directory (default runs/<task>-<method>-s<seed>)"
    ),
    resume: bool = typer.Option(False, "--resume", help="continue the run in --out"),
) -> None:
    """Optimize TASK for T steps; writes best.py and summary.json to the run directory."""
    from htam.agent import OptimizeConfig, Optimizer, RunDirError
    from htam.evaluate import CachedEvaluator, EvalConfig, Evaluator, EvaluatorError
    from htam.memory import MemoryBank, MemoryBankError
    from htam.tasks import TaskError

    target, language = resolve_target(target, language, offline=llm is None and base_url is None)
    the_task = resolve_task(task)
    try:
        config = OptimizeConfig(
            method=method, steps=steps, seed=seed, target=target, language=language
        )
    except ValueError as exc:
        fail(str(exc))
    proposer = make_proposer(llm, base_url, model, target, language)
    out = out or Path("runs") / f"{the_task.name}-{method}-s{seed}"
    memory = memory or default_memory()
    view = LiveSteps(f"{the_task.id} · {method} · {proposer.name} · {target}/{language}")
    try:
        with (
            MemoryBank.open(memory, create=True) as bank,
            Evaluator(target, EvalConfig(size=default_size(target, size))) as evaluator,
            view.display(),
        ):
            optimizer = Optimizer(proposer, CachedEvaluator(evaluator), bank, config, on_step=view)
            summary = optimizer.run(the_task, out, resume=resume)
    except (TaskError, EvaluatorError, MemoryBankError, RunDirError) as exc:
        fail(str(exc))
    view.close()
    _print_summary(summary, out)


def _print_summary(summary: dict, out: Path) -> None:
    best = summary["best_speedup"]
    vs_compile = summary["best_speedup_vs_compile"]
    console.print(
        f"[bold]best:[/] {summary['best_status']}"
        + (f", {best:.2f}x vs eager" if best else "")
        + (f", {vs_compile:.2f}x vs torch.compile" if vs_compile else "")
        + (
            f", {100 * summary['best_sol_fraction']:.1f}% of speed of light"
            if summary["best_sol_fraction"]
            else ""
        )
        + f" · {summary['steps']} steps · ${summary['cost_usd']:.4f} · {summary['wall_s']:.1f} s"
    )
    if summary["timing_meaningful"] is False:
        console.print("[yellow]note:[/] Triton interpreter timings on the CPU are not meaningful")
    console.print(f"run directory: {out} (best.py, summary.json, steps/)")
    console.print_json(json.dumps({k: summary[k] for k in ("curve", "statuses")}))


def register(app: typer.Typer) -> None:
    app.command("optimize")(optimize_command)
