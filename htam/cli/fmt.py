"""How the CLI writes numbers and failures: speedups, byte counts, plurals, a failure's cause on
one line."""

from __future__ import annotations

import re
from pathlib import Path

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')


def failure_line(message: str) -> str:
    """A failure's cause on one line. A Python traceback becomes its exception line and where
    the candidate raised it, ``ValueError: sol boom (candidate.py:6)`` (the innermost frame of
    the candidate's own file, else the innermost frame outside HTAM and torch); any other
    multi-line message its first line, or, when that only introduces what follows (ends with
    ":"), the first line and the last. The full text stays in --json and --verbose."""
    lines = [line.rstrip() for line in str(message).splitlines() if line.strip()]
    if len(lines) <= 1:
        return lines[0] if lines else ""
    if not any(line.startswith("Traceback (most recent call last)") for line in lines):
        first = lines[0].strip()
        return f"{first} {lines[-1].strip()}" if first.endswith(":") else first
    start = max(i for i, line in enumerate(lines) if line.startswith("Traceback (most recent"))
    block = lines[start + 1 :]
    frames = [m for m in (_FRAME.match(line) for line in block) if m]
    # the exception: the unindented lines after the last frame's code
    last_frame = max((i for i, line in enumerate(block) if _FRAME.match(line)), default=-1)
    tail = [line for line in block[last_frame + 1 :] if not line.startswith(" ")]
    exception = tail[0].strip() if tail else lines[-1].strip()
    own = [f for f in frames if Path(f["file"]).name == "candidate.py"] or [
        f for f in frames if not _internal(f["file"])
    ]
    if own:
        exception += f" ({Path(own[-1]['file']).name}:{own[-1]['line']})"
    return exception


def _internal(path: str) -> bool:
    parts = Path(path).parts
    return "htam" in parts or "torch" in parts or "site-packages" in parts or path.startswith("<")


def fmt_speedup(value: float) -> str:
    """Two decimals, or two significant digits below 0.1 (0.0035x, not 0.00x)."""
    return f"{value:.2f}x" if value >= 0.1 else f"{value:.2g}x"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


_BYTE_UNITS = {"GB": 1e9, "MB": 1e6, "KB": 1e3, "B": 1}


def _byte_unit(n: float) -> str:
    return next(unit for unit, scale in _BYTE_UNITS.items() if n >= scale or unit == "B")


def fmt_bytes(n: float) -> str:
    """A byte count in decimal units, three significant digits: 268 MB, 1.07 GB, 34.3 KB. Every
    byte count HTAM prints goes through this or ``fmt_bytes_alike``."""
    unit = _byte_unit(n)
    return f"{n:.0f} B" if unit == "B" else f"{n / _BYTE_UNITS[unit]:.3g} {unit}"


def fmt_bytes_alike(*counts: float) -> list[str]:
    """Byte counts that one line compares, in one unit (the largest's) with as many decimals
    as tell them apart (12.90 GB, 12.88 GB): never 1.07 GB beside 268 MB. A count too small to
    show in that unit (2 KB beside GBs) keeps its own (``fmt_bytes``)."""
    unit = _byte_unit(max(counts))
    if unit == "B":
        return [fmt_bytes(n) for n in counts]
    scale = _BYTE_UNITS[unit]
    for digits in (2, 3, 4):
        shown = [f"{n / scale:.{digits}f}" for n in counts]
        if len(set(shown)) == len(set(counts)):
            break
    return [
        f"{text} {unit}" if float(text) > 0 or n == 0 else fmt_bytes(n)
        for text, n in zip(shown, counts, strict=True)
    ]
