"""The flat-memory baseline: BM25 retrieval of past experiences stored in the bank file."""

from __future__ import annotations

from htam.memory import FlatMemory, MemoryBank
from htam.memory.flat import tokenize

EXPERIENCES = [
    "softmax rows of 4096: online softmax with exp2 gave 1.8x",
    "layernorm: welford statistics in one pass, rows cached in registers",
    "gemm relu bias: epilogue fusion on the tensor core accumulator",
    "elementwise gelu chain fused into one kernel with vectorized loads",
    "conv2d 3x3 as implicit gemm, compile error on index math",
]


def _fill(bank, make_step) -> FlatMemory:
    flat = FlatMemory(bank)
    for i, text in enumerate(EXPERIENCES):
        assert flat.add(text, make_step(i, lesson=text))
    return flat


def test_tokenizer_splits_identifiers():
    assert tokenize("Online_Softmax exp2(x)!") == ["online", "softmax", "exp2", "x"]


def test_retrieve_ranks_the_relevant_first(bank, make_step):
    flat = _fill(bank, make_step)
    hits = flat.retrieve("fused softmax with online normalizer", 2)
    assert hits[0].text == EXPERIENCES[0] and hits[0].record.step == 0
    assert len(hits) == 2 and hits[0].score >= hits[1].score
    assert [h.record.step for h in flat.retrieve("gemm epilogue", 3)][0] == 2
    assert flat.retrieve("quantum teleportation", 3) == []
    assert flat.retrieve("", 3) == [] and flat.retrieve("softmax", 0) == []


def test_add_is_idempotent_and_empty_texts_never_match(bank, make_step):
    flat = _fill(bank, make_step)
    assert not flat.add("something else", make_step(0))
    assert flat.add("!!!", make_step(99))
    assert len(flat) == 6
    assert all(h.record.step != 99 for h in flat.retrieve("softmax gemm conv", 10))


def test_another_process_sees_new_experiences(tmp_path, make_step):
    path = tmp_path / "bank.db"
    with MemoryBank.open(path, create=True) as reader, MemoryBank.open(path) as writer:
        flat_reader = FlatMemory(reader)
        assert flat_reader.retrieve("softmax", 1) == []
        FlatMemory(writer).add(EXPERIENCES[0], make_step(0))
        assert flat_reader.retrieve("softmax", 1)[0].text == EXPERIENCES[0]
