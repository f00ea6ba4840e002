"""Roofline: device peaks measured once and cached, and each candidate's fraction of the
lower-bound time ("% of speed of light")."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from htam.vocab import BoundKind


@dataclass(frozen=True)
class Bound:
    time_ms: float
    kind: BoundKind


def _compute_peak(dtypes: list[str], peaks: dict) -> float:
    """The fastest rate the task's dtype may legitimately use (TF32 is within fp32 tolerance)."""
    if any(d in ("bfloat16", "float16") for d in dtypes):
        return peaks["bf16_tflops"]
    if "float32" in dtypes:
        return peaks["tf32_tflops"]
    return peaks["fp32_tflops"]


def lower_bound(flops: int, nbytes: int, dtypes: list[str], peaks: dict) -> Bound:
    compute_ms = flops / (_compute_peak(dtypes, peaks) * 1e12) * 1e3
    memory_ms = nbytes / (peaks["bandwidth_gbs"] * 1e9) * 1e3
    if compute_ms >= memory_ms:
        return Bound(compute_ms, "compute")
    return Bound(memory_ms, "memory")


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "device"


def peaks_file(cache_dir: Path, device: str) -> Path:
    return cache_dir / "peaks" / f"{slug(device)}-v2.json"  # v2: float32 copy and add streams


def load_peaks(cache_dir: Path, device: str) -> dict | None:
    path = peaks_file(cache_dir, device)
    return json.loads(path.read_text()) if path.exists() else None


def store_peaks(cache_dir: Path, device: str, peaks: dict) -> Path:
    path = peaks_file(cache_dir, device)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(peaks, indent=2))
    tmp.replace(path)
    return path
