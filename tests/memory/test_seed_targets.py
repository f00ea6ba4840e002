"""The seed's strategies name the targets and languages they apply to, and a run is offered only
those for its own: a CPU C++ run is never offered a CUDA-only strategy, a GPU run still is."""

from __future__ import annotations

import pytest

from htam.agent.guides import Context, FlatGuide, HTAMGuide
from htam.memory import MemoryBank
from htam.memory.seed import applies, load_seed
from htam.policy import PolicyConfig, StateFeatures
from htam.vocab import LANGUAGES, Direction

GPU_SHAPED = {  # on a GPU only
    "launch_overhead.cuda_graph_capture",
    "parallel_mapping.warp_specialization",
    "precision.tensor_core_dot",
    "precision.wgmma_tensor_cores",
    "occupancy.launch_bounds",
    "data_reuse.tma_bulk_copy",
}
RUNS = [(str(t), str(lang)) for t, langs in LANGUAGES.items() for lang in langs]


def _ctx(target: str, language: str, step: int = 0) -> Context:
    state = StateFeatures(op_families=["elementwise", "gemm"], bound="memory", elements=1 << 20)
    return Context("task", step, 7, language, [], state, "", target=target)


def test_every_seed_strategy_names_its_targets_and_languages():
    for node in load_seed()["locals"]:
        assert node["targets"] and node["languages"], node["id"]
        assert set(node["targets"]) <= set(LANGUAGES), node["id"]
        assert set(node["languages"]) <= {str(lang) for ls in LANGUAGES.values() for lang in ls}
    for local_id in GPU_SHAPED:
        assert applies(local_id, "cuda", "cuda") and applies(local_id, "cuda", "triton")
        assert not applies(local_id, "cpu", "cpp") and not applies(local_id, "cpu", "triton")
    assert applies("fusion.elementwise_chain_fusion", "cpu", "cpp")
    assert applies("a.strategy_no_seed_holds", "cpu", "cpp")  # learned ones fit every run


@pytest.mark.parametrize(("target", "language"), RUNS)
def test_the_strategy_offer_follows_the_runs_target_and_language(target, language):
    bank = MemoryBank.in_memory()
    guide = HTAMGuide("htam", bank, PolicyConfig())
    ctx = _ctx(target, language)
    offered = {s.id for g in bank.direction_ids for s in guide.candidates(g, ctx)}
    flat = {s.id for s in FlatGuide("flat", bank, 4).candidates(Direction.ANY, ctx)}
    fitting = {n.id for n in bank.all_locals() if applies(n.id, target, language)}
    assert offered == flat == fitting
    if target == "cpu":
        assert not offered & GPU_SHAPED
        assert "fusion.elementwise_chain_fusion" in offered
    else:
        assert offered >= GPU_SHAPED
    # occupancy has nothing for a CPU: it is never decided there, and still is on a GPU
    _, breakdown = guide.decide(ctx)
    assert ("occupancy" in breakdown["probabilities"]) is (target == "cuda")
    assert ("occupancy" in breakdown.get("excluded", [])) is (target == "cpu")


def test_what_the_offline_cpp_backend_implements_is_offered_to_a_cpu_run():
    """The offline C++ backend's templates are the project's own word on what a strategy means
    on a CPU (cache tiling, block sizes, rows per thread, exp2): none of them is filtered out."""
    from htam.offline.backends.cpp import NOT_ON_CPU
    from htam.offline.strategies import RULES

    implemented = {s for table in RULES.values() for s in table} - set(NOT_ON_CPU)
    assert implemented and all(applies(s, "cpu", "cpp") for s in implemented)
