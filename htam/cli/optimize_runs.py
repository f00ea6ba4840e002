"""``htam optimize``'s run directories: a new one, the one ``--resume`` continues, what a resume
must share with the run's record (run.json) and what it may change (more steps), and the
command line that continues an interrupted run."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path

import typer

from htam.cli.common import fail, writable_dir
from htam.cli.interrupts import on_interrupt
from htam.vocab import SIZES


def run_dir(out: Path | None, stem: Path, resume: bool) -> Path:
    """``--out``, else a new run directory, else (``--resume``) the latest one of this stem."""
    from htam.agent.rundir import latest_run_dir, new_run_dir

    if out is not None:
        return out
    if not resume:
        return writable_dir(new_run_dir(stem), "run directory")
    latest = latest_run_dir(stem)
    if latest is None:
        fail(f"--resume: no earlier run {stem}-* to continue; pass --out DIR")
    return latest


def check_run_out(out: Path, resume: bool) -> None:
    """``--out`` of one task's run: with ``--resume`` a run's folder; without, a new or empty
    folder (a run folder given again is refused by the run itself, which says --resume)."""
    made = out.is_dir() and (out / "run.json").is_file()
    if resume and not made:
        fail(f"--resume: {out} holds no run to continue (no run.json); without --resume a "
             "new run starts there")  # fmt: skip
    if not resume and not made and out.exists() and (not out.is_dir() or any(out.iterdir())):
        fail(f"--out {out}: not an empty folder or a run; a run writes run.json, steps/ and "
             "summary.json into it, so give a new or empty folder")  # fmt: skip


def remove_if_nothing_ran(out: Path) -> None:
    """Remove a run directory this command created when no step finished in it (its stdout was
    closed before the first one): nothing to resume, nothing to keep."""
    if not out.is_dir() or steps_done(out):
        return
    for name in ("run.json", "summary.json"):
        (out / name).unlink(missing_ok=True)
    for folder in (out / "steps", out):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


def steps_done(out: Path) -> int:
    """Finished steps in a run directory: the index of the step a resume starts with."""
    return len(list((out / "steps").glob("step_*.json")))


def finished_records(out: Path) -> list[dict]:
    """The step records a ``--resume`` finds in ``out``, in step order, for the table (a file
    that is no step record, without a step number or a verdict, is left out of it)."""
    records = [json.loads(p.read_text()) for p in sorted((out / "steps").glob("step_*.json"))]
    shown = [r for r in records if isinstance(r, dict) and {"step", "feedback"} <= r.keys()]
    return sorted(shown, key=lambda r: r["step"])


def run_record(out: Path) -> dict | None:
    """The run.json of the run ``--resume`` continues (None: no run there yet, a new one)."""
    from htam.agent.rundir import RunDir, RunDirError

    try:
        return RunDir(out).recorded()
    except RunDirError as exc:
        fail(str(exc))


def _given(ctx: typer.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source is not None and source.name != "DEFAULT"


def resume_settings(ctx: typer.Context, out: Path, record: dict, config, size: str | None):
    """``--resume`` without ``--steps`` (or ``--size``) continues with the run's own values; a
    larger ``--steps`` extends the run; a smaller one is refused, naming both."""
    old = record.get("steps")
    if isinstance(old, int) and old != config.steps:
        if not _given(ctx, "steps"):
            config = replace(config, steps=old)
        elif config.steps < old:
            fail(
                f"cannot resume {out}: --steps {config.steps} is fewer than the run's {old} "
                f"steps; give --steps {old} or more (or leave it out)"
            )
    if size is None and record.get("size") in SIZES:
        size = record["size"]
    return config, size


# What a resumed run must share with its record (run.json), and the option that sets each.
_RESUME_KEYS = {
    "task_id": "TASK",
    "task_digest": "the task file's content",
    "method": "--method",
    "seed": "--seed",
    "target": "--target",
    "language": "--language",
    "proposer": "the proposer (--llm/--base-url/--model)",
    "size": "--size",
}


def check_resume(out: Path, record: dict, task, config, proposer: str, size: str) -> None:
    """Refuse, before anything is printed, a resume that would continue a different run."""
    now = {"task_id": task.id, "task_digest": task.digest, "method": config.method}
    now |= {"seed": config.seed, "target": config.target, "language": config.language}
    now |= {"proposer": proposer, "size": size}
    other_task = record.get("task_id", now["task_id"]) != now["task_id"]
    changed = [
        f"{_RESUME_KEYS[k]} was {record[k]}, now {now[k]}"
        if k != "task_digest"
        else "the task file changed"
        for k in _RESUME_KEYS
        # another task's file differs, of course: "the task file changed" would mislead
        if k in record and record[k] != now[k] and not (k == "task_digest" and other_task)
    ]
    if changed:
        fail(f"cannot resume {out}: {'; '.join(changed)}")


def resume_on_interrupt(ctx: typer.Context, out: Path, what: str) -> None:
    """From here on Ctrl-C says how to continue the ``what`` (bench, batch, experiment) in
    ``out`` (seen: it said only "interrupted")."""
    on_interrupt(
        lambda: f"interrupted; `{resume_command(ctx, out)}` continues the {what} in {out}",
        outcome="interrupted",
        out=str(out),
    )


def resume_command(ctx: typer.Context, out: Path) -> str:
    """This command as the user gave it, with ``--resume --out OUT``: a resume must repeat what
    the run was started with (method, seed, steps, target, ...)."""
    words = ["htam", ctx.info_name or "optimize"]
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if param.name in ("out", "resume") or value is None:
            continue
        source = ctx.get_parameter_source(param.name)
        if source is None or source.name == "DEFAULT":
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        if not param.opts[0].startswith("-"):  # the TASK argument (bench: its SUITES)
            words.extend(str(v) for v in values)
        elif getattr(param, "is_flag", False):
            flags = param.opts if value else param.secondary_opts
            words.extend(flags[:1])
        else:
            for v in values:  # a repeatable option once per value
                words.extend([param.opts[0], str(v)])
    words += ["--resume", "--out", str(out)]
    return " ".join(shlex.quote(word) for word in words)
