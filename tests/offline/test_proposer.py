"""The offline proposer behind the Proposer protocol: choices, transformations, outcomes."""

import ast

import pytest

from htam.offline import STRATEGIES, OfflineProposer
from htam.offline.params import parse_header
from htam.proposer import ProposalRequest, Strategy
from tests.offline.harness import compare, load_solution, task_of
from tests.offline.sources import CASES, UNSUPPORTED

ALL = [Strategy(s, s.split(".")[0], s) for s in STRATEGIES]


def _request(task, language="cpp", base=None, strategy=None, step=0, seed=0):
    target = "cpu"
    return ProposalRequest(
        task=task,
        target=target,
        language=language,
        base_code=base,
        feedback=None,
        strategy=strategy,
        step=step,
        seed=seed,
    )


def _strategy(sid: str) -> Strategy:
    return Strategy(sid, sid.split(".")[0], sid)


def test_defaults_and_validation():
    assert OfflineProposer().name == "offline"
    assert OfflineProposer().language == "cpp"
    assert OfflineProposer("cuda").language == "triton"
    assert OfflineProposer("cpu", "triton").language == "triton"
    with pytest.raises(ValueError):
        OfflineProposer("cuda", "cpp")


def test_baseline_then_strategies_change_the_parameters_in_the_header():
    task = task_of("ln", CASES["row_layer_norm"][0])
    proposer = OfflineProposer("cpu", "triton")
    base = proposer.propose(_request(task, "triton"))
    head = parse_header(base.code)
    assert head["family"] == "row" and head["applied"] == []
    assert head["params"]["welford"] is False and head["params"]["rows"] == 1
    nxt = proposer.propose(
        _request(task, "triton", base.code, _strategy("algorithmic_rewrite.welford_statistics"))
    )
    assert parse_header(nxt.code)["params"]["welford"] is True
    assert base.baseline and not nxt.baseline  # the untouched translation follows no direction
    again = proposer.propose(
        _request(task, "triton", nxt.code, _strategy("algorithmic_rewrite.welford_statistics"))
    )
    assert again.code is None and "already applied" in again.error
    rows = proposer.propose(
        _request(task, "triton", nxt.code, _strategy("parallel_mapping.rows_per_program"))
    )
    head = parse_header(rows.code)
    assert head["params"]["rows"] == 2 and head["params"]["welford"] is True
    assert head["applied"] == [
        "algorithmic_rewrite.welford_statistics",
        "parallel_mapping.rows_per_program",
    ]


@pytest.mark.parametrize("name", ["ew_two_inputs", "row_softmax_module", "gemm_transposed"])
@pytest.mark.parametrize("language", ["triton", "cpp"])
def test_each_strategy_writes_different_code(name, language):
    task = task_of(name, CASES[name][0])
    proposer = OfflineProposer("cpu", language)
    base = proposer.propose(_request(task, language)).code
    codes = {"baseline": base}
    for s in ALL:
        out = proposer.propose(_request(task, language, base, s))
        if out.code is None:
            assert out.error.startswith("no applicable strategy: ")
            continue
        codes[s.id] = out.code
    bodies = {k: c.split("\n", 1)[1] for k, c in codes.items()}  # without the header line
    assert len(set(bodies.values())) == len(bodies), "two strategies wrote the same code"
    assert len(codes) >= 6


def test_choice_is_deterministic_prefers_fresh_and_says_when_nothing_applies():
    task = task_of("sm", CASES["row_softmax_module"][0])
    proposer = OfflineProposer()
    same = {
        proposer.choose_strategy(_request(task, step=1, seed=7), ALL).strategy.id for _ in range(3)
    }
    assert len(same) == 1
    seeds = {
        proposer.choose_strategy(_request(task, step=1, seed=s), ALL).strategy.id for s in range(10)
    }
    assert len(seeds) > 1
    online = _strategy("algorithmic_rewrite.online_softmax")
    base = proposer.propose(_request(task, strategy=online)).code
    pair = [online, _strategy("data_reuse.register_row_cache")]
    assert proposer.choose_strategy(_request(task, base=base), pair).strategy.id == pair[1].id
    none = proposer.choose_strategy(
        _request(task),
        [_strategy("precision.tensor_core_dot"), _strategy("fusion.epilogue_fusion")],
    )
    assert none.strategy is None and none.rationale.startswith("no applicable strategy: ")


def test_choice_avoids_code_this_run_already_evaluated():
    task = task_of("sm", CASES["row_softmax_module"][0])
    proposer = OfflineProposer()
    base = proposer.propose(_request(task)).code
    pair = [
        _strategy("algorithmic_rewrite.online_softmax"),
        _strategy("data_reuse.register_row_cache"),
    ]
    picks = {
        proposer.choose_strategy(_request(task, base=base, seed=s), pair).strategy.id
        for s in range(10)
    }
    assert picks == {p.id for p in pair}
    tried = proposer.propose(_request(task, base=base, strategy=pair[0])).code
    for s in range(10):
        request = _request(task, base=base, seed=s)
        request.tried = frozenset({tried})
        choice = proposer.choose_strategy(request, pair)
        assert choice.strategy.id == pair[1].id and "not applied yet" in choice.rationale


def test_own_choice_keeps_to_the_direction_and_names_what_it_applied():
    task = task_of("sm", CASES["row_softmax_module"][0])
    proposer = OfflineProposer()
    base = proposer.propose(_request(task)).code
    request = _request(task, base=base, step=2)
    request.direction = "instruction_throughput"
    out = proposer.propose(request)
    assert out.strategy.direction == "instruction_throughput"
    assert parse_header(out.code)["applied"] == [out.strategy.id]
    request.direction = "fusion"  # nothing under it has a template for a softmax
    out = proposer.propose(request)
    assert out.strategy is not None and out.strategy.direction != "fusion"
    assert parse_header(out.code)["applied"] == [out.strategy.id]
    given = proposer.propose(_request(task, base=base, strategy=_strategy(out.strategy.id)))
    assert given.code == out.code and given.strategy is None  # the loop's own choice


def test_a_walk_of_many_steps_keeps_working():
    task = task_of("g", CASES["gemm_residual"][0])
    proposer = OfflineProposer("cpu", "triton")
    base, applied = None, []
    for step in range(10):
        request = _request(task, "triton", base, step=step, seed=1)
        choice = proposer.choose_strategy(request, ALL)
        request.strategy = choice.strategy
        out = proposer.propose(request)
        assert out.code is not None, out.error
        applied.append(choice.strategy.id)
        assert parse_header(out.code)["applied"] == applied
        base = out.code
    assert compare(task, load_solution(base), {}, atol=2e-3, rtol=2e-3) is None


def test_unsupported_task_gets_no_code():
    task = task_of("sort", UNSUPPORTED["sort"])  # (a conv + ReLU is a library-prefix match)
    proposer = OfflineProposer()
    out = proposer.propose(_request(task))
    assert out.code is None and out.error.startswith("no applicable strategy: ")
    assert "sort" in out.error
    assert proposer.choose_strategy(_request(task), ALL).strategy is None


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("language", ["triton", "cpp"])
def test_generated_files_pass_the_static_rules(name, language):
    from htam.evaluate.host.static import check_source

    task = task_of(name, CASES[name][0])
    code = OfflineProposer("cpu", language).propose(_request(task, language)).code
    assert check_source(code, language) == []
    tree = ast.parse(code)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert "Model" not in names
    assert not any(isinstance(n, ast.Try) for n in ast.walk(tree))
    new = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew")
    forward = next(f for f in new.body if isinstance(f, ast.FunctionDef) and f.name == "forward")
    ref = ast.parse(CASES[name][0])
    model = next(n for n in ref.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    ref_fwd = next(f for f in model.body if isinstance(f, ast.FunctionDef) and f.name == "forward")
    assert [a.arg for a in forward.args.args] == [a.arg for a in ref_fwd.args.args]


@pytest.mark.slow
def test_the_evaluator_accepts_a_triton_solution():
    from htam.evaluate.host.evaluator import Evaluator

    task = task_of("ew_gelu_sigmoid", CASES["ew_gelu_sigmoid"][0])
    code = OfflineProposer("cpu", "triton").propose(_request(task, "triton")).code
    with Evaluator(target="cpu") as evaluator:
        result = evaluator.evaluate(task, code, "triton")
    assert result.status == "ok", f"{result.messages}\n{result.log[-2000:]}"
