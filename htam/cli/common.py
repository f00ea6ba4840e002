"""Helpers shared by CLI commands: defaults for target/language/size and clean error exits."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console

console = Console()
err_console = Console(stderr=True)

DEFAULT_LANGUAGE = {"cuda": "cuda", "cpu": "cpp"}


def fail(message: str, code: int = 2) -> NoReturn:
    """Print one unwrapped error line (paths in it stay copy-pastable) and exit with `code`."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def default_target() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_target(
    target: str | None, language: str | None, offline: bool = False
) -> tuple[str, str]:
    """Target and language, defaulted; the offline proposer writes Triton on the GPU."""
    target = target or default_target()
    if target not in DEFAULT_LANGUAGE:
        fail(f"unknown target {target!r}; choose cuda or cpu")
    language = language or ("triton" if offline and target == "cuda" else DEFAULT_LANGUAGE[target])
    allowed = {"cuda": ("cuda", "triton"), "cpu": ("cpp", "triton")}[target]
    if language not in allowed:
        fail(f"language {language!r} does not run on target {target}; choose one of {allowed}")
    return target, language


def default_size(target: str, size: str | None) -> str:
    size = size or ("large" if target == "cuda" else "small")
    if size not in ("small", "large"):
        fail(f"unknown size {size!r}; choose small or large")
    return size
