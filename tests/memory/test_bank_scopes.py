"""Scopes: a CPU run's learning is not a GPU run's until the user merges it; the seed is shared;
an older bank (schema 4) and an older export (version 1) still load, their statistics in the
scope their steps name."""

from __future__ import annotations

import json
import sqlite3

import pytest

from htam.agent import OptimizeConfig, Optimizer
from htam.memory import MemoryBank, StepRecord, choice_guidance
from htam.memory.schema import APPLICATION_ID, MIGRATIONS, SCHEMA_V1, SCHEMA_VERSION
from htam.memory.scopes import LEGACY_SCOPE, ScopeMergeError
from htam.offline import OfflineProposer
from htam.policy import PolicyConfig
from htam.status import Status
from htam.tasks import signature
from tests.evaluate.conftest import task_for
from tests.scripted_evaluator import ScriptedEvaluator

RULE = PolicyConfig()
CHAIN = "level2/5_Elementwise_Chain.py"
LANGUAGE = {"cpu": "cpp", "cuda": "triton"}


def _run(bank: MemoryBank, out, target: str, size: str = "small") -> None:
    evaluator = ScriptedEvaluator(lambda n, code: 1.5 + 0.25 * n)
    evaluator.config.size = size
    cfg = OptimizeConfig(method="htam", steps=3, seed=0, target=target, language=LANGUAGE[target])
    Optimizer(OfflineProposer(target), evaluator, bank, cfg).run(task_for(CHAIN), out)


def _learned(bank: MemoryBank, scope: str) -> tuple[int, int, int]:
    """(direction tries, observed edge steps, evidence records) the bank shows in ``scope``."""
    bank.scope = scope
    tries = sum(d.stats.tries for d in bank.directions())
    edges = sum(e.stats.count for e in bank.edges())
    evidence = sum(len(bank.evidence(n.id)) for n in bank.all_locals())
    return tries, edges, evidence


def test_a_cpu_run_teaches_a_gpu_run_only_through_a_merge(tmp_path):
    with MemoryBank.open(tmp_path / "m.db", create=True) as bank:
        _run(bank, tmp_path / "cpu", "cpu")
        cpu = _learned(bank, "cpu")
        assert cpu[0] == 3 and cpu[2] == 3  # three steps learned, each with its evidence
        assert _learned(bank, "cuda") == (0, 0, 0)  # nothing of it in the GPU's scope
        # the GPU run reads and updates its own scope only: the CPU's numbers do not move
        _run(bank, tmp_path / "cuda", "cuda", size="large")
        assert bank.scope == "cuda" and _learned(bank, "cuda")[0] == 3
        assert _learned(bank, "cpu") == cpu
        bank.scope = "cuda"
        gpu_evidence = [ev for n in bank.all_locals() for ev in bank.evidence(n.id)]
        assert {ev.context["target"] for ev in gpu_evidence} == {"cuda"}
        assert {ev.context["size"] for ev in gpu_evidence} == {"large"}
        assert {ev.task_signature for ev in gpu_evidence} == {
            signature(task_for(CHAIN), "large").text
        }
        # the seed is shared: both scopes see the same strategies and priors
        assert bank.edge("memory_access", "fusion").prior_utility == pytest.approx(0.1)
        copied = bank.merge_scope("cpu", "cuda", config=RULE)
        assert copied["evidence"] == 3 and copied["nodes"] > 0
        merged = _learned(bank, "cuda")
        assert merged[0] == 6 and merged[2] == 6
        assert _learned(bank, "cpu") == cpu  # a merge copies, it does not move
        with pytest.raises(ScopeMergeError, match="twice"):
            bank.merge_scope("cpu", "cuda", config=RULE)
    # the merged evidence says what it was measured on
    with MemoryBank.open(tmp_path / "m.db", scope="cuda") as bank:
        ev = next(ev for n in bank.all_locals() for ev in bank.evidence(n.id)
                  if ev.context["target"] == "cpu")  # fmt: skip
        shown = choice_guidance(bank, bank.local(ev.local_id).direction, [ev.local_id], [],
                                target="cuda")  # fmt: skip
        assert "(measured on cpu)" in shown


def test_a_step_is_learned_into_the_scope_of_its_target(bank, make_step):
    record = make_step(0, prefix=["precision"], status=Status.COMPILE_ERROR, reward=-0.6)
    record.context = {"target": "cuda", "language": "triton", "device": "H200", "size": "large"}
    bank.scope = "cpu"
    assert bank.record_step(record, config=RULE)
    assert bank.direction("fusion").stats.tries == 0
    assert bank.edge("precision", "fusion").stats.count == 0
    assert bank.scopes() == {"cuda": (1, 2, 1)}  # 1 step, 2 node tries (direction, local)
    bank.scope = "cuda"
    assert bank.direction("fusion").stats.tries == 1
    assert bank.edge("precision", "fusion").stats.count == 1
    (ev,) = bank.evidence(record.local_id)
    assert ev.context == record.context and ev.scope == "cuda"


def test_merging_an_empty_scope_or_into_itself_is_refused(bank):
    with pytest.raises(ScopeMergeError, match="nothing"):
        bank.merge_scope("cuda", "cpu", config=RULE)
    with pytest.raises(ScopeMergeError, match="itself"):
        bank.merge_scope("cpu", "cpu", config=RULE)


def _version_4_bank(path, targets: list[str]) -> None:
    """A bank as schema 4 wrote it: statistics in the node and edge rows, one step per target
    in ``targets`` ("" for a step that named none), each with its evidence."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    scripts = [SCHEMA_V1, *(MIGRATIONS[v] for v in (2, 3, 4))]
    for script in scripts:
        assert isinstance(script, str)
        for statement in script.split(";"):
            if statement.strip():
                conn.execute(statement)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("PRAGMA user_version = 4")
    conn.execute(
        "INSERT INTO global_nodes (id, ord, title, intent, objectives, triggers, risks, tries, "
        "successes, reward_sum, ema, status_counts) VALUES ('fusion', 0, 'Fusion', 'fuse', "
        "'[]', '[]', '[]', ?, ?, 0.5, 0.2, ?)",
        (len(targets), len(targets), json.dumps({"ok": len(targets)})),
    )
    conn.execute(
        "INSERT INTO local_nodes (id, ord, direction, title, description, pattern, checks, "
        "op_families, triggers, risks, tries) VALUES ('fusion.chain', 0, 'fusion', 'chain', "
        "'', 'one pass', '[]', '[\"elementwise\"]', '[]', '[]', ?)",
        (len(targets),),
    )
    conn.execute(
        "INSERT INTO edges (src, dst, prior_utility, count, weight_sum, reward_wsum, fit) "
        "VALUES ('fusion', 'fusion', 0.1, 1, 1.0, 0.5, 0.3)"
    )
    for i, target in enumerate(targets):
        context = json.dumps({"target": target} if target else {})
        conn.execute(
            "INSERT INTO steps (run_id, task_id, step, task_signature, direction, local_id, "
            "status, reward, prefix, weights, recorded_at, context) VALUES "
            "('old', 't', ?, 'sig', 'fusion', 'fusion.chain', 'ok', 0.5, '[]', '[]', 1.0, ?)",
            (i, context),
        )
        conn.execute(
            "INSERT INTO evidence (run_id, task_id, step, local_id, polarity, task_signature, "
            "status, reward, error_excerpt, lesson, recorded_at, context) VALUES "
            "('old', 't', ?, 'fusion.chain', 'positive', 'sig', 'ok', 0.5, '', '', 1.0, ?)",
            (i, context),
        )
    conn.execute("COMMIT")
    conn.close()


def test_a_version_4_bank_of_one_target_keeps_its_learning_in_that_scope(tmp_path):
    _version_4_bank(tmp_path / "old.db", ["cuda", "cuda"])
    with MemoryBank.open(tmp_path / "old.db") as bank:
        assert bank.connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert bank.scope == "cuda"  # the scope holding the most steps is read by default
        fusion = bank.direction("fusion").stats
        assert (fusion.tries, fusion.status_counts) == (2, {"ok": 2})
        edge = bank.edge("fusion", "fusion")
        assert (edge.stats.count, edge.stats.fit, edge.prior_utility) == (1, 0.3, 0.1)
        assert len(bank.evidence("fusion.chain")) == 2
        bank.scope = "cpu"
        assert bank.direction("fusion").stats.tries == 0 and not bank.evidence("fusion.chain")
        assert bank.edge("fusion", "fusion").stats.fit == pytest.approx(0.1)  # the prior
        record = StepRecord("new", "t", "sig", 0, ["fusion"], "fusion", "fusion.chain",
                            Status.OK, 1.0, 1.2, 0.2, context={"target": "cpu"})  # fmt: skip
        assert bank.record_step(record, config=RULE)
        assert bank.direction("fusion").stats.tries == 1


def test_a_version_4_bank_of_mixed_targets_is_kept_apart_until_merged(tmp_path):
    _version_4_bank(tmp_path / "old.db", ["cpu", "cuda", ""])
    with MemoryBank.open(tmp_path / "old.db", scope="cuda") as bank:
        # the statistics cannot be split: no target's run reads them
        assert bank.direction("fusion").stats.tries == 0
        # evidence records carried their target: each is in its own scope
        assert [ev.context for ev in bank.evidence("fusion.chain")] == [{"target": "cuda"}]
        assert set(bank.scopes()) == {"cpu", "cuda", LEGACY_SCOPE}
        bank.merge_scope(LEGACY_SCOPE, "cuda", config=RULE)
        assert bank.direction("fusion").stats.tries == 3
        assert len(bank.evidence("fusion.chain")) == 2  # its own and the unscoped one


def test_a_version_1_export_loads_into_the_scope_its_steps_name(tmp_path, bank, make_step):
    for i in range(2):
        bank.record_step(make_step(i, prefix=["precision"]), config=RULE)
    export = bank.export_json()
    assert export["version"] == 2 and set(export["scopes"]) == {"cpu"}
    # the same learning as a version-1 export wrote it: statistics inside nodes and edges
    stats = export["scopes"]["cpu"]
    old = {**export, "version": 1}
    del old["scopes"], old["merges"]
    old["globals"] = [{**g, "stats": stats["nodes"].get(g["id"], {})} for g in export["globals"]]
    old["locals"] = [{**n, "stats": stats["nodes"].get(n["id"], {})} for n in export["locals"]]
    by_edge = {(e["src"], e["dst"]): e["stats"] for e in stats["edges"]}
    old["edges"] = [{**e, "stats": by_edge.get((e["src"], e["dst"]), {})} for e in export["edges"]]
    old["steps"] = [{k: v for k, v in s.items() if k not in ("context", "scope")}
                    for s in export["steps"]]  # fmt: skip
    with MemoryBank.import_json(old, tmp_path / "v1.db") as copy:
        # its steps named no target: the learning is kept apart under LEGACY_SCOPE
        assert copy.scope == LEGACY_SCOPE
        assert copy.direction("fusion").stats.tries == 2
        assert copy.edge("precision", "fusion").stats.count == 2


def test_an_export_with_statistics_of_unknown_nodes_is_refused(tmp_path, bank, make_step):
    bank.record_step(make_step(0), config=RULE)
    export = bank.export_json()
    export["scopes"]["cpu"]["nodes"]["teleportation"] = {"tries": 1}
    with pytest.raises(ValueError, match="unknown nodes"):
        MemoryBank.import_json(export, tmp_path / "x.db")
    assert not (tmp_path / "x.db").exists()
