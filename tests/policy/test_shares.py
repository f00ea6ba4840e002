"""Each term's share of a decision: its spread over the directions scored."""

import pytest

from htam.policy.shares import term_shares


def _terms(prefix_utilities, value, prior, exploration, lam=1.0, weights=(0.6, 0.4)):
    prefix_terms = [{"weight": w} for w in weights[: len(prefix_utilities)]]
    prefix = sum(w * u for w, u in zip(weights, prefix_utilities, strict=False))
    return {
        "prefix_terms": prefix_terms, "prefix": prefix, "value": value,
        "value_term": lam * value, "prior": prior, "exploration": exploration,
    }  # fmt: skip


def test_a_transition_equal_to_v_has_no_share():
    # U~ = V(g) on every edge: the prefix only repeats V(g), it moves nothing of its own
    breakdown = {"directions": {"a": _terms([0.5, 0.5], 0.5, 0.2, 0.1),
                                "b": _terms([0.1, 0.1], 0.1, 0.2, 0.1)}}  # fmt: skip
    shares = term_shares(breakdown)
    assert shares["transition"] == pytest.approx(0.0)
    assert shares["value"] == pytest.approx(1.0)


def test_the_transition_share_is_its_spread_over_all_spreads():
    breakdown = {"directions": {"a": _terms([1.0, 1.0], 0.0, 0.0, 0.0),
                                "b": _terms([0.0, 0.0], 0.0, 0.3, 0.0)}}  # fmt: skip
    shares = term_shares(breakdown)
    assert shares["transition"] == pytest.approx(1.0 / 1.3)
    assert shares["prior"] == pytest.approx(0.3 / 1.3)


def test_no_scored_directions_no_share():
    assert term_shares({"method": "random", "probabilities": {"a": 1.0}}) is None


def test_the_prior_gives_way_as_evidence_accrues():
    from htam.policy import PolicyConfig
    from htam.policy.scoring import DirectionView, score_terms

    views = [
        DirectionView("a", tries=0, reward_sum=0.0),
        DirectionView("b", tries=4, reward_sum=0.0),
    ]
    priors = {"a": (0.8, []), "b": (0.8, [])}
    terms = score_terms(views, {}, [], [], priors, PolicyConfig(prior_tries=4.0))
    assert terms["a"]["prior"] == pytest.approx(0.8) and terms["b"]["prior"] == pytest.approx(0.4)
    fixed = score_terms(views, {}, [], [], priors, PolicyConfig(prior_tries=None))
    assert fixed["b"]["prior"] == pytest.approx(0.8)
