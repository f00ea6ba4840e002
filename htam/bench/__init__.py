"""Benchmarks: suites x methods x seeds on one worker per device, metrics and reports.

Names are imported lazily: a spawned worker imports ``htam.bench.local_worker`` and should not
pay for jinja2 or matplotlib.
"""

from htam.lazy import lazy_exports

_EXPORTS = {
    "BenchConfig": "htam.bench.bench_config",
    "ProposerSpec": "htam.bench.bench_config",
    "Unit": "htam.bench.bench_config",
    "MEMORY_MODES": "htam.bench.bench_config",
    "BenchError": "htam.bench.bench_config",
    "BenchOutcome": "htam.bench.runner",
    "run_bench": "htam.bench.runner",
    "compute_metrics": "htam.bench.metrics",
    "UnitRow": "htam.bench.metrics",
    "ResultsError": "htam.bench.bench_config",
    "bench_metrics": "htam.bench.results",
    "load_rows": "htam.bench.results",
    "write_report": "htam.bench.report",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports("htam.bench", _EXPORTS)
