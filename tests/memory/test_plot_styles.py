"""`htam memory plot` draws an edge by its evidence, as the bench report does: a prior never
taken is thin, grey and dotted whatever its utility (it drew thickest before)."""

from htam.memory.plot import edge_styles


def test_a_prior_never_taken_is_dotted_and_thin_whatever_its_utility():
    styles = edge_styles(
        [("fusion", "tiling", 0), ("tiling", "fusion", 3), ("fusion", "precision", 2)],
        {("fusion", "tiling"): 0.9, ("tiling", "fusion"): 0.1, ("fusion", "precision"): -0.2},
    )
    prior, taken, bad = styles
    assert prior["linestyle"] == ":" and prior["color"] == "#b0b0b0"
    assert taken["linestyle"] == bad["linestyle"] == "solid"
    assert prior["width"] < bad["width"] < taken["width"]  # width: times taken, not utility
    assert taken["color"] == "#2ca02c" and bad["color"] == "#d62728"


def test_the_plot_of_a_seed_bank_is_written(tmp_path):
    from htam.memory import MemoryBank
    from htam.memory.plot import plot_bank
    from htam.policy import PolicyConfig
    from htam.policy.scoring import edge_utilities

    with MemoryBank.create(tmp_path / "bank.db") as bank:
        out = plot_bank(bank, tmp_path / "graph.svg", edge_utilities(bank, PolicyConfig()))
    svg = out.read_text()
    assert "dotted grey: seed prior, never taken" in svg and "memory_access" in svg
