"""``htam eval TASK SOLUTION``: evaluate one solution file against one task."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from htam.cli.common import (
    INFRASTRUCTURE_EXIT,
    check_cache_dir,
    console,
    fail,
    limit_overrides,
    memory_hint,
    reference_cannot_run,
    resolve_target,
    resolve_task,
)
from htam.cli.fmt import failure_line, fmt_speedup
from htam.cli.json_errors import echo_json
from htam.cli.options import AsJson, CompileReference, Language, MemoryLimitMb, Target, TimeoutS
from htam.cli.sizes import (
    over_memory_limit,
    tensor_bytes,
    timed_size,
)
from htam.evaluate.result import EvalResult
from htam.vocab import Size


def _fmt(value: float | None, unit: str = "", digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}{unit}"


def render(result: EvalResult, verbose: bool = False) -> Table:
    """The result as a table; each message (a failure's cause) on one line unless ``verbose``
    (the full text, a candidate's traceback included, is also in --json)."""
    style = "green" if result.correct else "red"
    table = Table(title=f"[{style}]{result.status}[/] on {result.device} ({result.language})")
    table.add_column("metric")
    table.add_column("value", overflow="fold")
    table.add_row("runtime", _fmt(result.runtime_ms, " ms"))
    table.add_row("reference (eager)", _fmt(result.ref_runtime_ms, " ms"))
    table.add_row("reference (torch.compile)", _fmt(result.ref_compile_runtime_ms, " ms"))
    for name, value in (("eager", result.speedup), ("compile", result.speedup_vs_compile)):
        table.add_row(f"speedup vs {name}", "-" if value is None else fmt_speedup(value))
    if result.sol_fraction is None:
        table.add_row("% of speed of light", "-")
    else:
        sol = f"{100 * result.sol_fraction:.3g}%"
        table.add_row(
            "% of speed of light", sol + (f" ({result.bound}-bound)" if result.bound else "")
        )
    if result.timing:
        t = result.timing
        table.add_row(
            "timing", f"{t.trials} trials, {t.method}, min {t.min_ms:.4g} / max {t.max_ms:.4g} ms"
        )
    for name, seconds in result.breakdown_s.items():
        table.add_row(f"time: {name}", f"{seconds:.3f} s")
    for message in result.messages + [f"FLAG: {f}" for f in result.flags]:
        # "[rule] ..." is text, not rich markup
        table.add_row("note", Text(message if verbose else failure_line(message)))
    return table


# The options of eval alone (the shared groups: htam.cli.options).
TaskSpec = Annotated[
    str,
    typer.Argument(
        metavar="TASK",
        help="task file (KernelBench format) or built-in task id, as for `htam optimize`",
    ),
]
SolutionFile = Annotated[
    Path,
    typer.Argument(
        metavar="SOLUTION_FILE",
        help="Python file defining ModelNew; it runs alone, so its kernel sources are in it "
        "(load_inline), not in files beside it",
    ),
]
EvalSize = Annotated[
    str | None,
    typer.Option(
        "--size",
        help="small or large; default as `htam optimize` (large, on the CPU for C++ < 300 MB "
        "when the memory limit holds its evaluation)",
    ),
]
AllowTorch = Annotated[
    bool, typer.Option("--allow-torch", help="accept a solution without a custom kernel")
]
ShowLog = Annotated[bool, typer.Option("--log", help="print the candidate's captured output")]
Verbose = Annotated[
    bool,
    typer.Option("--verbose", "-v", help="each failure in full (a traceback), not its one line"),
]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="print only the verdict's line")]


def eval_command(
    task_spec: TaskSpec,
    solution_file: SolutionFile,
    target: Target = None,
    language: Language = None,
    size: EvalSize = None,
    allow_torch: AllowTorch = False,
    memory_limit_mb: MemoryLimitMb = None,
    timeout_s: TimeoutS = None,
    compile_reference: CompileReference = None,
    as_json: AsJson = False,
    show_log: ShowLog = False,
    verbose: Verbose = False,
    quiet: Quiet = False,
) -> None:
    """Evaluate SOLUTION_FILE against TASK: correctness, timing, speed of light.

    Exit status: 0 correct, 1 not correct, 2 a usage error (a bad task, solution or option),
    3 when the task's reference cannot run here (over the memory or time limit; on the CPU a
    task whose evaluation, at least 3 times its tensors, exceeds the memory limit is refused
    before anything runs)."""
    from htam.tasks import signature

    if sum((as_json, quiet, verbose)) > 1:
        fail("--json, --quiet and --verbose: give one of them")
    target, language = resolve_target(target, language)
    code = read_solution(solution_file)
    task = resolve_task(task_spec)
    check_cache_dir()  # compiled extensions and the evaluation cache: a bad path is one line
    limits = limit_overrides(memory_limit_mb, timeout_s, compile_reference)
    # what is timed, said before the evaluation (a KernelBench file at its own size took ten
    # minutes on 2 cores with nothing on the screen); --json and --quiet print their one answer
    announce = None if as_json or quiet else _announce
    size, result = _evaluate(task, code, target, language, size, allow_torch, limits, announce)
    timed = signature(task, size)
    result.messages[:0] = beside_note(result, solution_file)
    if result.infrastructure and result.messages:  # stopped at the memory limit: what would do
        result.messages[0] += memory_hint(result.messages[0], task, target, size)
    if as_json:
        _print_json(result, task, size, timed, show_log)
    elif quiet:
        typer.echo(verdict_line(result))
    else:
        _print_table(result, show_log, verbose)
    # 3: the machine could not judge the task (nothing said of the candidate), as elsewhere
    raise typer.Exit(0 if result.correct else INFRASTRUCTURE_EXIT if result.infrastructure else 1)


def _evaluate(task, code: str, target: str, language: str, size: str | None, allow_torch: bool,
              limits: dict[str, Any], announce: Callable[[Any, Size], None] | None = None,
              ) -> tuple[Size, EvalResult]:  # fmt: skip
    """The size timed and the result of one evaluation (``announce(task, size)`` first); a task
    whose reference cannot run here (its tensors over the memory limit, refused before it runs;
    or failing when it runs) is one line, exit 3."""
    from htam.evaluate import EvalConfig, Evaluator, EvaluatorError
    from htam.tasks import TaskError

    memory_limit_mb = limits.get("memory_limit_mb")
    timed: Size | None = None
    try:
        timed = timed_size(target, language, size, task, memory_limit_mb)
        too_big = over_memory_limit(task, target, timed, tensor_bytes(task, timed), memory_limit_mb)
        if too_big:  # known from the signature on the meta device: refused before it runs
            fail(too_big, code=INFRASTRUCTURE_EXIT)
        if announce:
            announce(task, timed)
        config = EvalConfig(size=timed, allow_torch=allow_torch, **limits)
        with Evaluator(target, config) as evaluator:
            return timed, evaluator.evaluate(task, code, language)
    except TaskError as exc:  # the task loaded, but its reference cannot run here: exit 3
        fail(reference_cannot_run(exc, task, target, timed or size), code=INFRASTRUCTURE_EXIT)
    except EvaluatorError as exc:
        fail(str(exc))


def _announce(task, size: Size) -> None:
    from htam.agent.summary import timed_shapes
    from htam.cli.optimize_view import timed_line
    from htam.tasks import signature

    timed = signature(task, size)
    console.print(timed_line(size, timed_shapes(timed), timed.bytes, task.source), highlight=False)


def _print_json(result: EvalResult, task, size: Size, timed, show_log: bool) -> None:
    """The result's fields, the task, the size and the shapes timed (the log with --log)."""
    from htam.agent.summary import timed_shapes

    data = result.to_dict()
    if not show_log:
        data.pop("log")
    echo_json(data | {"task": task.id, "size": size, "timed_inputs": timed_shapes(timed)})


def _print_table(result: EvalResult, show_log: bool, verbose: bool) -> None:
    """How the candidate was isolated (what was timed is said before it ran), the result's
    table and (--log) its captured output."""
    console.print(result.isolation, markup=False, soft_wrap=True)
    console.print(render(result, verbose))
    if show_log and result.log:
        console.print("--- candidate output ---")
        console.print(result.log, markup=False, highlight=False)


def beside_note(result: EvalResult, solution_file: Path) -> list[str]:
    """A first message for a solution that read a file beside it, which the job does not have
    (seen: a traceback about /tmp/job/kernel.cpp was all it said)."""
    found = re.search(r"No such file or directory: '/tmp/job/([^'/]+)'", " ".join(result.messages))
    if result.correct or not found or not (solution_file.parent / found[1]).is_file():
        return []
    return [
        f"the solution reads {found[1]}, a file beside it: a solution runs alone, as one file; "
        "put that source in it (torch.utils.cpp_extension.load_inline)"
    ]


def verdict_line(result: EvalResult) -> str:
    """One line: the status, then the speedups, the share of speed of light and the runtime
    when correct, else the first failure's cause."""
    if not result.correct:
        cause = failure_line(result.messages[0]) if result.messages else ""
        return f"{result.status}: {cause}" if cause else str(result.status)
    parts = [str(result.status)]
    if result.speedup is not None:
        parts.append(f"{fmt_speedup(result.speedup)} vs eager")
    if result.speedup_vs_compile is not None:
        parts.append(f"{fmt_speedup(result.speedup_vs_compile)} vs compile")
    if result.sol_fraction is not None:
        parts.append(f"{100 * result.sol_fraction:.3g}% of speed of light")
    parts.append(_fmt(result.runtime_ms, " ms"))
    parts += [f"FLAG: {f}" for f in result.flags]
    return " · ".join(parts)


def read_solution(path: Path) -> str:
    """The solution's text, or a one-line error: missing, a folder, too large, not UTF-8."""
    from htam.evaluate.host.evaluator import MAX_SOLUTION_BYTES

    if path.is_dir():
        fail(f"{path}: is a directory, not a solution file")
    if not path.is_file():
        fail(f"{path}: no such solution file")
    size = path.stat().st_size
    if size > MAX_SOLUTION_BYTES:
        fail(f"{path}: {size} bytes; a solution may have at most {MAX_SOLUTION_BYTES}")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        fail(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})")


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)
