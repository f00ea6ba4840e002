"""Every knob of the evaluator in one place."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

# The environment that reaches candidate code: only what compilers, PyTorch, Triton, CUDA and
# the thread pools read (an allowlist: DATABASE_URL, GH_PAT or SMTP_PASSWD came back through a
# candidate's log under a list of secret-looking names), and of those none whose name
# looks like a secret.
ENV_ALLOWED = ("PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM", "USER", "LOGNAME",
               "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH",
               "CPLUS_INCLUDE_PATH", "CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "MAX_JOBS",
               "VIRTUAL_ENV", "CONDA_PREFIX")  # fmt: skip
ENV_ALLOWED_PREFIXES = ("LC_", "PYTHON", "HTAM_", "TORCH", "PYTORCH_", "TRITON_", "CUDA",
                        "NVCC_", "NVIDIA_", "NCCL_", "OMP_", "GOMP_", "KMP_", "MKL_",
                        "OPENBLAS_")  # fmt: skip
SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PWD", "CREDENTIAL", "AUTH")


def env_allowed(name: str) -> bool:
    upper = name.upper()
    if any(marker in upper for marker in SECRET_MARKERS):
        return False
    return upper in ENV_ALLOWED or upper.startswith(ENV_ALLOWED_PREFIXES)


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
    run_timeout_s: float = 120.0  # after the build (raised with the reference's own run time)
    call_timeout_s: float = 10.0  # one call of the candidate (at least 50x the reference's)
    # Resident host memory of the candidate's processes, and of the judge: by default half of
    # the machine's memory (GPU tensors do not count; they never travel through the host).
    memory_limit_mb: int | None = None
    output_limit_bytes: int = 4 << 20  # captured stdout+stderr; more is an output flood
    warmup_ms: float = 200.0  # long enough for a GPU idle since process start to reach boost clocks
    timing_budget_ms: float = 500.0  # adaptive: trials until this much measured time ...
    min_timed: int = 10  # ... but at least this many
    max_timed: int = 200  # ... and at most this many
    l2_flush_mb: int = 256  # bigger than the H200's 60 MB L2
    # Host time from the end event to a device-wide sync: beyond this share of the event time
    # (plus the slack), work escaped the timed stream.
    escape_ratio: float = 0.5
    # Beyond what the reference's runner shows of the same overheads: the least slack for host
    # scheduling noise (the judge widens it to 4x the spread it sees; None chooses by size).
    escape_slack_ms: float | None = None
    busy_probe_ms: float = 2.0  # a tiny kernel slower than this: the device was still busy
    flag_speedup: float = 10.0
    time_compile_reference: bool | None = None  # torch.compile reference; default: GPU only
    allow_torch: bool = False
    tolerances: dict[str, Tolerance] = field(default_factory=lambda: dict(TOLERANCES))
    cache_dir: Path = field(default_factory=cache_root)

    def memory_limit(self) -> int:
        if self.memory_limit_mb:
            return self.memory_limit_mb
        return max(2048, machine_memory_mb() // 2)

    def address_space(self) -> int:
        """RLIMIT_AS for CPU candidates: room for torch's reservations beside the limit."""
        return (self.memory_limit() + 8192) << 20

    def judge_settings(self) -> dict:
        keys = (
            "compile_timeout_s",
            "run_timeout_s",
            "call_timeout_s",
            "escape_ratio",
            "escape_slack_ms",
            "busy_probe_ms",
        )
        settings = {k: getattr(self, k) for k in keys}
        if settings["escape_slack_ms"] is None:
            # small: the CPU test size, calls of ~0.1 ms where a loaded 2-core machine's
            # scheduling alone put 0.7-1.9 ms between two honest runners' least overheads (CI)
            settings["escape_slack_ms"] = 0.05 if self.size == "large" else 2.5
        settings["tolerances"] = {k: asdict(v) for k, v in self.tolerances.items()}
        return settings


def machine_memory_mb() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return 16384
