"""What ``htam optimize`` shows while it runs and when it ends.

On a terminal: a live table of finished steps under a line that says which step is running and
for how long. Elsewhere (a log, a pipe): one plain line per finished step, then the table. The
last line always says what the user keeps. Steps are numbered from 0 everywhere, as their files
are (``steps/step_00.json``).
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.spinner import Spinner
from rich.table import Table

from htam.cli.common import console
from htam.cli.fmt import fmt_bytes, fmt_speedup, plural
from htam.status import NO_CODE, Fault
from htam.tasks.module import has_small_size, size_label
from htam.vocab import Size

# What the strategy column says of a step that applied none because it is the task translated as
# it is (the offline proposer's first code: the record's ``proposal.baseline``).
BASELINE = "baseline (the operator in our kernels, no strategy yet)"


def strategy_text(record: dict) -> str:
    """A step record's strategy: its id, the baseline, or "(none)"."""
    if record["strategy"]:
        return record["strategy"]
    return BASELINE if (record.get("proposal") or {}).get("baseline") else "(none)"


# What the table's other columns and borders take (step, status, best, s, cost): the
# direction.strategy column gets the rest of the terminal.
OTHER_COLUMNS = 50


def chosen_cell(direction: str, strategy: str, width: int | None = None) -> str:
    """The table's direction.strategy cell. Where the terminal (``width`` columns, stdout's by
    default) leaves it too narrow for the whole id, it is broken after the dot: rich would cut a
    name with no space in it anywhere."""
    text = strategy if strategy.startswith(direction + ".") else f"{direction} · {strategy}"
    if len(text) > (width or console.width) - OTHER_COLUMNS:
        text = text.replace(".", ".\n", 1)
    return text


class StepsView:
    def __init__(
        self,
        title: str,
        steps: int,
        quiet: bool = False,
        verbose: bool = False,
        first: int = 0,
        earlier: list[dict] | None = None,
        shown: Console | None = None,
    ):
        """``steps``: the run's steps in all; ``first``: the first step this process runs;
        ``earlier``: the records of the steps a ``--resume`` found done (then ``first`` is 0),
        shown first and marked, since the last line counts them; ``shown``: the console the
        steps go to (stdout by default; stderr under --json)."""
        self.console = shown or console
        self.table = Table(title=title)
        # One column for the direction and the strategy (whose id starts with its direction):
        # at 80 columns two of them cut ids mid-word over three lines; this one breaks an id
        # at its dot only.
        self.table.add_column("step", no_wrap=True)
        self.table.add_column("direction.strategy")
        for name in ("status", "best speedup", "s", "cost $"):
            self.table.add_column(name, overflow="fold")
        self.steps, self.quiet, self.verbose = steps, quiet, verbose
        self.captions: set[str] = set()
        self.cost = 0.0
        self.done = first  # finished steps: the number of the one running
        self.started = self.step_started = time.monotonic()
        self.live = self.console.is_terminal and not quiet
        for record in earlier or []:
            self.add(record, note=" (before --resume)")

    def __rich__(self) -> Group:
        if self.done >= self.steps:
            return Group(self.table)
        now = time.monotonic()
        text = (
            f"step {self.done} running ({self.done + 1} of {self.steps}) · "
            f"{now - self.step_started:.0f} s (total {now - self.started:.0f} s)"
        )
        return Group(self.table, Spinner("dots", text))

    def display(self):
        if self.live:
            return Live(self, console=self.console, refresh_per_second=4, transient=False)
        return nullcontext()

    def __call__(self, step) -> None:
        self.add(step.to_dict())  # an htam.agent.Step, as its run-directory file holds it

    def add(self, record: dict, note: str = "") -> None:
        """One finished step's row (and line, off a terminal); ``note`` marks an earlier one."""
        fb = record["feedback"]
        self.cost += record["usage"]["cost_usd"]
        self.done += 1
        status = fb["status"] + (f" {fmt_speedup(fb['speedup'])}" if fb.get("speedup") else "")
        if not record.get("proposal", {}).get("wrote_code", True) and fb["status"] == "rejected":
            status = NO_CODE  # a step written before steps without code had their own status
        best = record["best_speedup"]
        tie = _within_the_noise(record)
        row = [
            str(record["step"]) + ("*" if note else ""),
            record["direction"],
            strategy_text(record),
            status,
            fmt_speedup(best) if best else "-",
            f"{record['wall_s']:.0f}",
            f"{self.cost:.4f}",
        ]
        if note:
            self.captions.add("* ran before --resume")
        if tie:
            self.captions.add(
                f"{TIE_MARK} faster, but within the timing noise of the best: not kept"
            )
        self.table.caption = "; ".join(sorted(self.captions)) or None
        cells = [row[3] + (f" {TIE_MARK}" if tie else ""), *row[4:]]
        self.table.add_row(row[0], chosen_cell(row[1], row[2], self.console.width), *cells)
        self.step_started = time.monotonic()
        if self.quiet or self.live:  # a live table stays on the screen when the run ends
            return
        # Off a terminal a line per step, and no table after them: it said it all twice.
        cost = f", ${self.cost:.4f}" if self.cost else ""
        self.console.print(
            f"step {record['step']}: {row[1]} / {row[2]}: {row[3]}"
            f"{', within the timing noise of the best' if tie else ''} (best {row[4]}, {row[5]} s"
            f"{cost}){note}{'' if self.verbose else _not_the_kernels(fb)}",
            highlight=False,
            soft_wrap=True,
        )
        if self.verbose and fb["status"] != "ok" and fb.get("messages"):
            self.console.print(
                f"  {fb['messages'][0]}", highlight=False, soft_wrap=True, markup=False
            )


# Marks a step faster than the best by less than the timing noise: the loop keeps the best it had
# (htam.agent.state.Progress.observe), which "ok 4.32x (best 4.01x)" alone left unexplained.
TIE_MARK = "≈"


def _within_the_noise(record: dict) -> bool:
    fb, best = record["feedback"], record["best_speedup"]
    speedup = fb.get("speedup")
    faster = fb["status"] == "ok" and bool(speedup and best) and speedup > best
    return faster and record.get("new_best") is False


def _not_the_kernels(feedback: dict) -> str:
    """The cause of an outcome that is not the kernel's doing (the endpoint's, the evaluator's,
    the proposer's), short, after the step's line: the status alone does not say what happened,
    and nothing of it reaches the memory."""
    if feedback.get("fault") in (None, Fault.KERNEL) or not feedback.get("messages"):
        return ""
    cause = " ".join(feedback["messages"][0].split())
    return f" · {escape(cause if len(cause) <= 200 else cause[:197] + '...')}"


def timed_line(size: Size, shapes: list[str], nbytes: int, source: str) -> str:
    """Which shapes are timed, named by where they come from (``size_label``), and what the
    other size would time. A task without HTAM_SMALL (an unmodified KernelBench file) has one
    size, its own: the line says so rather than "size small"."""
    timed = f"{', '.join(shapes)} ({fmt_bytes(nbytes)} in and out"
    if not has_small_size(source):
        return f"timing at {size_label(source, size)}: {timed})"
    line = f"timing at size {size}: {timed}; {size_label(source, size)})"
    return line + ("; --size large times the full size" if size == "small" else "")


def _why(summary: dict) -> str:
    """ "; stopped after 1 of 3 steps: CAUSE" or "; last failure: CAUSE" (or nothing)."""
    reason = summary.get("reason")
    if summary.get("stopped_early"):
        said = f"; stopped after {summary['steps']} of {summary['steps_planned']} steps"
        return said + (f": {reason}" if reason else "")
    return f"; last failure: {reason}" if reason else ""


def final_line(summary: dict, out: Path) -> str:
    """The last line: what the user keeps, and where; when the run found no correct candidate
    or stopped early, why (the summary's ``reason``: the first line of the last failure's
    cause)."""
    best = summary["best_speedup"]
    why = _why(summary)
    if summary["outcome"] == "none_correct":
        tried = ", ".join(summary["statuses"]) or "no step ran"
        return f"no correct candidate: the reference stands ({tried}){why}; see {out}/steps/"
    if summary["outcome"] == "reference_stands":
        return (
            f"no faster candidate: the reference stands; best candidate {fmt_speedup(best)} "
            f"({out / summary['best_file']}){why}"
        )
    parts = [f"best: {fmt_speedup(best)} vs eager"]
    if summary["best_speedup_vs_compile"]:
        parts.append(f"{fmt_speedup(summary['best_speedup_vs_compile'])} vs torch.compile")
    if summary["best_sol_fraction"]:
        parts.append(f"{100 * summary['best_sol_fraction']:.1f}% of speed of light")
    if summary.get("timing_meaningful") is False:  # said here, since --quiet keeps this line only
        parts.append("timed by the Triton interpreter: not meaningful")
    return ", ".join(parts) + f" → {out / 'best.py'}{why}"


def stats_line(summary: dict) -> str:
    """Steps, cost and time; proposals that repeated code the run had evaluated are named only
    when there were some ("0 repeats not evaluated" read as a failure). They are proposals, not
    steps: the proposer is asked again, and a step may hold several."""
    steps = plural(summary["steps"], "step")
    if summary["duplicates"]:
        repeated = plural(summary["duplicates"], "proposal")
        steps += f" ({repeated} repeated code already evaluated: not evaluated again)"
    took = f"{summary['wall_s']:.1f} s"
    if summary.get("total_s"):  # the evaluator's start and the reference's timing besides
        took = f"{summary['total_s']:.1f} s in all ({took} in the steps)"
    return f"{steps} · ${summary['cost_usd']:.4f} · {took}"
