"""The corpus of LLM-idiomatic solutions (tests/evaluate/corpus/, manifest.toml): every
legitimate one passes the static rules and is ``ok`` through the real Evaluator, and every cheat
variant is refused with its cause. The CPU runs the C++ and Triton (interpreter) files; the GPU
runs the CUDA and Triton ones (scripts/device/corpus_gpu.sh). A file marked ``cpu = false`` runs on the GPU
only (Triton's autotuner benchmarks through a GPU driver, which the interpreter lacks)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from htam.evaluate import Evaluator
from htam.evaluate.host.static import check_source
from tests.evaluate.conftest import fast_config, task_for

CORPUS = Path(__file__).parent / "corpus"
ENTRIES = tomllib.loads((CORPUS / "manifest.toml").read_text())["solution"]
GPU_LANGUAGES = ("cuda", "triton")


def _task(entry: dict):
    spec = entry["task"]
    if spec.startswith("corpus/"):
        return task_for(CORPUS / "tasks" / spec.removeprefix("corpus/"))
    return task_for(spec)


def _code(entry: dict) -> str:
    return (CORPUS / entry["file"]).read_text()


def _ids(entries: list[dict]) -> list:
    return [pytest.param(e, id=e["file"]) for e in entries]


def test_the_corpus_is_complete():
    files = {p.name for p in CORPUS.glob("*.py")}
    assert files == {e["file"] for e in ENTRIES}
    legit = [e for e in ENTRIES if e["status"] == "ok"]
    assert len(legit) >= 40
    assert {e["language"] for e in legit} == {"cpp", "cuda", "triton"}


def test_static_rules_refuse_no_legitimate_corpus_file():
    """The static rules' false-positive check: only the cheats that build nothing are refused
    before they run; the figure is printed (before the kernel probe: 19 of the 51 legitimate
    files, by the 'forward reaches no launched kernel' rule)."""
    refused = {}
    for e in ENTRIES:
        found = check_source(_code(e), e["language"])
        if found:
            refused[e["file"]] = [str(v) for v in found]
    legit = [e["file"] for e in ENTRIES if e["status"] == "ok"]
    print(f"static refusals: {len(refused)} of {len(ENTRIES)} files, legitimate: "
          f"{len(set(refused) & set(legit))} of {len(legit)}")  # fmt: skip
    assert not set(refused) & set(legit), refused
    static_cheats = {e["file"] for e in ENTRIES if e["cause"] == "[no-kernel]"}
    assert set(refused) == static_cheats


@pytest.fixture(scope="module")
def corpus_cpu_evaluator():
    with Evaluator("cpu", fast_config()) as evaluator:
        yield evaluator


@pytest.mark.slow
@pytest.mark.parametrize(
    "entry", _ids([e for e in ENTRIES if e["cpu"]])
)  # fmt: skip
def test_corpus_on_the_cpu(corpus_cpu_evaluator, entry):
    _judged(corpus_cpu_evaluator, entry)


@pytest.fixture(scope="module")
def corpus_gpu_evaluator():
    with Evaluator("cuda", fast_config(memory_limit_mb=8192)) as evaluator:
        yield evaluator


# What a plain ``pytest -m gpu`` runs of the corpus (~3 min): the whole corpus needs ~25 min of
# builds, which scripts/device/corpus_gpu.sh runs in shards.
GPU_SMOKE = {
    "cuda_ext_on_self.py",
    "cuda_submodule_forward.py",
    "cuda_cheat_side_input.py",
    "triton_kernel_on_self.py",
    "triton_autotuned.py",
    "triton_cheat_side_input.py",
}


def _gpu_shard() -> list[dict]:
    """The GPU's share: every CUDA file builds its own extension (~40 s each; a build is cached
    per solution), so scripts/device/corpus_gpu.sh runs them in shards, each well under a device call's
    10 minutes: HTAM_CORPUS_SHARD=k/n takes every n-th CUDA file from the k-th, =triton the
    Triton files, =all everything; unset, the smoke set above."""
    entries = [e for e in ENTRIES if e["language"] in GPU_LANGUAGES]
    shard = os.environ.get("HTAM_CORPUS_SHARD") or None
    if shard is None:
        return [e for e in entries if e["file"] in GPU_SMOKE]
    if shard in ("all", "triton"):
        return [e for e in entries if shard == "all" or e["language"] == "triton"]
    k, n = (int(v) for v in shard.split("/"))
    return [e for e in entries if e["language"] == "cuda"][k - 1 :: n]


@pytest.mark.gpu
@pytest.mark.parametrize("entry", _ids(_gpu_shard()))
def test_corpus_on_the_gpu(corpus_gpu_evaluator, entry):
    _judged(corpus_gpu_evaluator, entry)


def _judged(evaluator: Evaluator, entry: dict) -> None:
    if evaluator.device == "cuda":  # built off the GPU's queue, beside the other workers' timings
        evaluator.prebuild(_code(entry), entry["language"])
    result = evaluator.evaluate(_task(entry), _code(entry), entry["language"])
    said = " | ".join(result.messages)
    assert result.status == entry["status"], f"{said}\n{result.log[-3000:]}"
    assert entry["cause"] in said, said
