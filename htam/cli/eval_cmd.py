"""``htam eval TASK SOLUTION``: evaluate one solution file against one task."""

from __future__ import annotations

import re
from pathlib import Path

import typer
from rich.table import Table
from rich.text import Text

from htam.cli.common import (
    COMPILE_HELP,
    INFRASTRUCTURE_EXIT,
    MEMORY_LIMIT_HELP,
    TARGET_HELP,
    TIMEOUT_HELP,
    check_cache_dir,
    console,
    fail,
    limit_overrides,
    reference_cannot_run,
    resolve_target,
    resolve_task,
)
from htam.cli.fmt import failure_line, fmt_speedup
from htam.cli.json_errors import echo_json
from htam.cli.sizes import (
    over_memory_limit,
    tensor_bytes,
    timed_size,
)
from htam.evaluate.result import EvalResult


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


def eval_command(
    task_spec: str = typer.Argument(
        ...,
        metavar="TASK",
        help="task file (KernelBench format) or built-in task id, as for `htam optimize`",
    ),
    solution_file: Path = typer.Argument(
        ...,
        metavar="SOLUTION_FILE",
        help="Python file defining ModelNew; it runs alone, so its kernel sources are in it "
        "(load_inline), not in files beside it",
    ),
    target: str | None = typer.Option(None, help=TARGET_HELP),
    language: str | None = typer.Option(
        None, help="cuda | triton (target cuda), cpp | triton (target cpu)"
    ),
    size: str | None = typer.Option(
        None, help="small or large; default as `htam optimize` (large, on the CPU for C++ < 300 MB)"
    ),
    allow_torch: bool = typer.Option(
        False, "--allow-torch", help="accept a solution without a custom kernel"
    ),
    memory_limit_mb: int | None = typer.Option(
        None, "--memory-limit-mb", min=256, help=MEMORY_LIMIT_HELP
    ),
    timeout_s: float | None = typer.Option(None, "--timeout-s", min=1.0, help=TIMEOUT_HELP),
    compile_reference: bool | None = typer.Option(
        None, "--compile-reference/--no-compile-reference", help=COMPILE_HELP
    ),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object on stdout"),
    show_log: bool = typer.Option(False, "--log", help="print the candidate's captured output"),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="each failure in full (a traceback), not its one line"
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="print only the verdict's line"),
) -> None:
    """Evaluate SOLUTION_FILE against TASK: correctness, timing, speed of light.

    Exit status: 0 correct, 1 not correct, 2 a usage error (a bad task, solution or option),
    3 when the task's reference cannot run here (over the memory or time limit; on the CPU a
    task whose tensors alone exceed the memory limit is refused before anything runs)."""
    from htam.agent.summary import timed_shapes
    from htam.cli.optimize_view import timed_line
    from htam.evaluate import EvalConfig, Evaluator, EvaluatorError
    from htam.tasks import TaskError, signature

    if sum((as_json, quiet, verbose)) > 1:
        fail("--json, --quiet and --verbose: give one of them")
    target, language = resolve_target(target, language)
    code = read_solution(solution_file)
    task = resolve_task(task_spec)
    check_cache_dir()  # compiled extensions and the evaluation cache: a bad path is one line
    try:
        size = timed_size(target, language, size, task, memory_limit_mb)
        too_big = over_memory_limit(task, target, size, tensor_bytes(task, size), memory_limit_mb)
        if too_big:  # known from the signature on the meta device: refused before it runs
            fail(too_big, code=INFRASTRUCTURE_EXIT)
        limits = limit_overrides(memory_limit_mb, timeout_s, compile_reference)
        config = EvalConfig(size=size, allow_torch=allow_torch, **limits)
        with Evaluator(target, config) as evaluator:
            result = evaluator.evaluate(task, code, language)
    except TaskError as exc:  # the task loaded, but its reference cannot run here: exit 3
        fail(reference_cannot_run(exc, task, target, size), code=INFRASTRUCTURE_EXIT)
    except EvaluatorError as exc:
        fail(str(exc))
    timed = signature(task, size)  # what was timed, said (seen: optimize said it, eval not)
    result.messages[:0] = beside_note(result, solution_file)
    if as_json:
        data = result.to_dict()
        if not show_log:
            data.pop("log")
        data |= {"task": task.id, "size": size, "timed_inputs": timed_shapes(timed)}
        echo_json(data)
    elif quiet:
        typer.echo(verdict_line(result))
    else:
        shapes, source = timed_shapes(timed), task.source
        console.print(timed_line(size, shapes, timed.bytes, source), highlight=False)
        console.print(result.isolation, markup=False, soft_wrap=True)
        console.print(render(result, verbose))
        if show_log and result.log:
            console.print("--- candidate output ---")
            console.print(result.log, markup=False, highlight=False)
    # 3: the machine could not judge the task (nothing said of the candidate), as elsewhere
    raise typer.Exit(0 if result.correct else INFRASTRUCTURE_EXIT if result.infrastructure else 1)


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
