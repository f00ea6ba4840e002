"""Opening, creating, validating and migrating bank files; the seed contract."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from htam.memory import MemoryBank, MemoryBankError, load_seed
from htam.memory.schema import APPLICATION_ID, SCHEMA_V1, SCHEMA_VERSION
from htam.policy import OP_FAMILIES, PolicyConfig, StateFeatures

RULE = PolicyConfig()  # the policy's update rule: the bank keeps none

REQUIRED_DIRECTIONS = {
    "memory_access", "data_reuse", "parallel_mapping", "instruction_throughput",
    "fusion", "boundary_handling", "algorithmic_rewrite", "precision",
}  # fmt: skip
REQUIRED_LOCALS = {
    "fusion.elementwise_chain_fusion", "fusion.epilogue_fusion",
    "memory_access.vectorized_access", "memory_access.coalesced_row_access",
    "parallel_mapping.block_size_tuning", "parallel_mapping.rows_per_program",
    "data_reuse.register_row_cache", "data_reuse.shared_memory_tiling",
    "algorithmic_rewrite.online_softmax", "algorithmic_rewrite.welford_statistics",
    "instruction_throughput.warp_shuffle_reduction", "instruction_throughput.fast_exp2",
    "precision.tensor_core_dot", "boundary_handling.masked_tail",
}  # fmt: skip


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_seed_meets_the_contract():
    seed = load_seed()
    directions = {g["id"] for g in seed["globals"]}
    assert REQUIRED_DIRECTIONS <= directions
    locals_ = {loc["id"]: loc for loc in seed["locals"]}
    assert len(locals_) >= 30 and REQUIRED_LOCALS <= set(locals_)
    for local in locals_.values():
        assert local["id"].split(".")[0] == local["direction"] in directions
        assert local["op_families"] and set(local["op_families"]) <= set(OP_FAMILIES)
        assert local["triggers"] and local["pattern"] and local["checks"] and local["risks"]
        assert set(local["patterns"]) == {"cuda", "triton"}, local["id"]
        assert all(len(text) > 40 for text in local["patterns"].values()), local["id"]
    assert all(g["triggers"] and g["risks"] for g in seed["globals"])
    assert len(seed["edges"]) >= 8
    assert all(e["src"] in directions and e["dst"] in directions for e in seed["edges"])


def test_seed_covers_hopper_practice_and_known_bad_transitions(bank):
    ids = {node.id for node in bank.all_locals()}
    hopper = {
        "data_reuse.tma_bulk_copy", "precision.wgmma_tensor_cores", "precision.mma_sync_ldmatrix",
        "parallel_mapping.warp_specialization", "occupancy.launch_bounds",
        "occupancy.register_cap", "launch_overhead.cuda_graph_capture",
        "launch_overhead.kernel_count_reduction", "algorithmic_rewrite.parallel_scan",
        "algorithmic_rewrite.structured_matrix", "instruction_throughput.packed_half2_math",
        "algorithmic_rewrite.winograd_conv", "fusion.whole_block_fusion",
    }  # fmt: skip
    assert hopper <= ids and len(bank.directions()) == 10 and len(ids) == 46
    edges = bank.edges()
    negative = [e for e in edges if e.prior_utility < 0]
    assert len(negative) == 5 and all(e.rationale for e in negative)
    assert sum(bool(e.when) for e in negative) == 4
    assert sum(bool(e.when) for e in edges) >= 15  # applies-when checkable where it can be
    # a checkable condition reads the task: a scan trigger fires on cumsum only
    scan = bank.local("algorithmic_rewrite.parallel_scan")
    assert scan.triggers[0].matches(StateFeatures(ops=["cumsum"]))
    assert not scan.triggers[0].matches(StateFeatures(ops=["sum"]))
    assert scan.pattern_for("triton").startswith("tl.cumsum") and "shfl" in scan.pattern_for("cuda")


def test_every_direction_has_strategies(bank):
    assert len(bank.directions()) == 10 and len(bank.all_locals()) == 46
    for node in bank.directions():
        assert bank.locals_of(node.id), node.id
    strategy = bank.locals_of("fusion")[0].to_strategy()
    assert (strategy.id, strategy.direction) == ("fusion.elementwise_chain_fusion", "fusion")


def test_open_create_reopen_keeps_data(tmp_path, make_step):
    path = tmp_path / "sub" / "bank.db"
    with pytest.raises(MemoryBankError, match="no memory bank here"):
        MemoryBank.open(path)
    with MemoryBank.open(path, create=True) as bank:
        assert bank.record_step(make_step(0), config=RULE)
        mode = bank.connection.execute("PRAGMA journal_mode").fetchone()[0]
        assert mode == "wal"
    with MemoryBank.open(path, create=True) as bank:
        assert bank.direction("fusion").stats.tries == 1
        assert bank.step_count() == 1
    assert not list(tmp_path.glob("sub/.bank.db.*"))  # no build leftovers


def test_a_new_bank_and_its_journal_are_the_owners_alone(tmp_path, make_step):
    """A bank under a folder candidates can see (``htam optimize --out``) is neither readable
    nor lockable by them: SQLite gives -wal and -shm the database's mode."""
    path = tmp_path / "bank.db"
    bank = MemoryBank.create(path)
    bank.record_step(make_step(0), config=RULE)
    files = [path, path.with_name("bank.db-wal"), path.with_name("bank.db-shm")]
    modes = {f.name: f.stat().st_mode & 0o777 for f in files if f.exists()}
    bank.close()
    assert "bank.db-wal" in modes
    assert set(modes.values()) == {0o600}, modes


def test_create_never_overwrites(tmp_path):
    path = tmp_path / "bank.db"
    path.write_text("precious")
    with pytest.raises(MemoryBankError, match="already exists"):
        MemoryBank.create(path)
    assert path.read_text() == "precious"


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"", "empty file"), (b"hello, not a database at all", "not an SQLite file")],
)
def test_non_sqlite_files_are_refused_untouched(tmp_path, content, message):
    path = tmp_path / "x.db"
    path.write_bytes(content)
    with pytest.raises(MemoryBankError, match=message):
        MemoryBank.open(path, create=True)
    assert path.read_bytes() == content


def test_foreign_sqlite_file_is_refused_untouched(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    before = digest(path)
    with pytest.raises(MemoryBankError, match="not an HTAM memory bank"):
        MemoryBank.open(path, create=True)
    assert digest(path) == before and not (tmp_path / "other.db-wal").exists()


def test_newer_schema_is_refused_untouched(tmp_path):
    path = tmp_path / "bank.db"
    MemoryBank.create(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = digest(path)
    with pytest.raises(MemoryBankError, match="newer HTAM"):
        MemoryBank.open(path)
    assert digest(path) == before


def test_corrupt_bank_is_refused_untouched(tmp_path):
    path = tmp_path / "bank.db"
    MemoryBank.create(path).close()
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) > 3 * page
    data[page + 10 : 3 * page] = b"\xa5" * (2 * page - 10)  # smash b-tree pages, keep header
    path.write_bytes(bytes(data))
    with pytest.raises(MemoryBankError, match="corrupt"):
        MemoryBank.open(path)
    assert path.read_bytes() == bytes(data)


def test_version_1_bank_is_migrated_in_place(tmp_path, make_step):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    for statement in SCHEMA_V1.split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("PRAGMA user_version = 1")
    # a version-1 bank as version 1 wrote it: no per-language patterns, no edge conditions
    conn.execute(
        "INSERT INTO global_nodes (id, ord, title, intent, objectives, triggers, risks) "
        "VALUES ('fusion', 0, 'Fusion', 'fuse', '[]', '[]', '[]')"
    )
    conn.execute(
        "INSERT INTO local_nodes (id, ord, direction, title, description, pattern, checks, "
        "op_families, triggers, risks) VALUES ('fusion.elementwise_chain_fusion', 0, 'fusion', "
        "'chain', '', 'one pass', '[]', '[\"elementwise\"]', '[]', '[]')"
    )
    conn.execute("INSERT INTO edges (src, dst, fit) VALUES ('fusion', 'fusion', 0.1)")
    conn.execute("COMMIT")
    conn.close()
    with MemoryBank.open(path) as bank:
        assert bank.connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5
        assert bank.connection.execute("SELECT count(*) FROM flat_experiences").fetchone() == (0,)
        (node,) = bank.all_locals()
        assert node.patterns == {} and node.pattern_for("cuda") == "one pass"
        assert bank.edge("fusion", "fusion").when == {}
        assert bank.edge("fusion", "fusion").stats.fit == pytest.approx(0.1)  # kept, in scope cpu
        assert bank.record_step(make_step(0), config=RULE)


def test_unknown_ids_raise_key_errors(bank):
    with pytest.raises(KeyError):
        bank.locals_of("teleportation")
    with pytest.raises(KeyError):
        bank.local("fusion.nothing")
    assert bank.edge("fusion", "memory_access").prior_utility == pytest.approx(0.15)
    assert bank.edge("precision", "precision") is None
