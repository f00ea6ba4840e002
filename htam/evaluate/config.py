"""Every knob of the evaluator in one place."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

# Names of environment variables that never reach candidate code.
SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


def cache_root() -> Path:
    return Path(os.environ.get("HTAM_CACHE_DIR") or Path.home() / ".cache" / "htam")


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol_scale: float  # elementwise atol = atol_scale * rms(reference) + atol_floor
    rel_l2: float  # ||out - ref|| / ||ref|| bound: a near-zero output cannot pass
    atol_floor: float = 1e-6


# float32 is loose enough for TF32 tensor-core dots (rel. error near 3e-4), far below any cheat.
TOLERANCES: dict[str, Tolerance] = {
    "float64": Tolerance(rtol=1e-6, atol_scale=1e-6, rel_l2=1e-7),
    "float32": Tolerance(rtol=5e-3, atol_scale=5e-3, rel_l2=2e-3),
    "float16": Tolerance(rtol=1e-2, atol_scale=1e-2, rel_l2=5e-3),
    "bfloat16": Tolerance(rtol=2e-2, atol_scale=2e-2, rel_l2=1e-2),
}


@dataclass
class EvalConfig:
    size: str = "small"  # "small" (CPU tests) or "large" (GPU)
    trials: int = 3  # correctness trials with fresh inputs at the base configuration
    seed: int = 1234
    compile_timeout_s: float = 300.0  # import + build of the candidate (nvcc, g++, ...)
    run_timeout_s: float = 120.0  # everything after the build: trials and timing
    memory_limit_mb: int = 8192  # resident host memory of the candidate's process group
    output_limit_bytes: int = 4 << 20  # captured stdout+stderr; more is an output flood
    warmup_ms: float = 200.0  # long enough for a GPU idle since process start to reach boost clocks
    timing_budget_ms: float = 500.0  # adaptive: trials until this much measured time ...
    min_timed: int = 10  # ... but at least this many
    max_timed: int = 200  # ... and at most this many
    l2_flush_mb: int = 256  # bigger than the H200's 60 MB L2
    # Host time from the end event to a device-wide sync: beyond this share of the event time
    # (plus the slack), work escaped the timed stream.
    escape_ratio: float = 0.5
    escape_slack_ms: float = 0.1
    flag_speedup: float = 10.0
    time_compile_reference: bool | None = None  # torch.compile reference; default: GPU only
    allow_torch: bool = False
    tolerances: dict[str, Tolerance] = field(default_factory=lambda: dict(TOLERANCES))
    cache_dir: Path = field(default_factory=cache_root)
