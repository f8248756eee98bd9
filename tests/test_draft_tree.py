"""The draft tree's accept length (sim/draft_tree.py) and its use by the acceptance draws.

Named invariants:
- INV-TREE-CHAIN: a chain (topk 1) or sibling_rate 0 accepts exactly as the chain's rates say.
- INV-TREE-MONO: more draft tokens, or a wider topk, never accept less; no tree accepts more
  than its depth + 1 or its draft tokens.
- INV-TREE-WALK: the accept length equals a direct walk down SGLang's selected tree, the
  target choosing one candidate rank per depth (an independent Monte Carlo).
"""

from __future__ import annotations

import heapq

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.acceptance import AcceptanceModel, mean_accept_length
from specsched.sim.config import AcceptanceConfig
from specsched.sim.draft_tree import fit_sibling_rate, rank_rates, tree_mean, tree_rates

rates = st.lists(st.floats(0.02, 0.99), min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(rates, st.floats(0.0, 1.0), st.integers(1, 8))
def test_inv_tree_chain_a_chain_or_no_sibling_share_accepts_as_the_chain(p, theta, topk):
    p = np.array(p)
    chain = mean_accept_length(p)
    assert tree_mean(p, theta, 1, len(p) + 1) == pytest.approx(chain, rel=1e-12)
    assert tree_mean(p, 0.0, topk, len(p) * topk + 1) == pytest.approx(chain, rel=1e-12)
    np.testing.assert_allclose(tree_rates(p, theta, 1, len(p) + 1), p, rtol=1e-12)


@settings(max_examples=200, deadline=None)
@given(rates, st.floats(0.0, 1.0), st.integers(1, 7), st.integers(2, 40))
def test_inv_tree_mono_more_candidates_never_accept_less(p, theta, topk, n):
    p = np.array(p)
    m = tree_mean(p, theta, topk, n)
    assert tree_mean(p, theta, topk, n + 1) >= m - 1e-12
    assert tree_mean(p, theta, topk + 1, n) >= m - 1e-12
    assert 1.0 <= m <= min(len(p), n - 1) + 1 + 1e-12
    if n - 1 >= len(p) and theta > 0 and topk > 1:
        assert m >= mean_accept_length(p) - 1e-12


def _walk_mean(p: np.ndarray, theta: float, topk: int, n: int, draws: int, rng: np.random.Generator) -> float:
    """An independent reading of the mechanism: build SGLang's tree as rank paths (each
    candidate named by its ranks from the root), then let the target pick one rank per
    depth (rank r with :func:`rank_rates`' probability, else a rank past every candidate)
    and accept while its path is in the tree."""
    a = rank_rates(p, theta, topk)
    def score(path):
        return float(np.prod([a[d, r] for d, r in enumerate(path)]))
    beams = [(r,) for r in range(topk)]
    cands = list(beams)
    for _ in range(1, len(p)):
        expanded = [b + (r,) for b in beams for r in range(topk)]
        cands += expanded
        beams = [c for _, _, c in heapq.nlargest(topk, [(score(c), -i, c) for i, c in enumerate(expanded)])]
    order = {c: i for i, c in enumerate(cands)}
    tree = {c for c in heapq.nlargest(n - 1, cands, key=lambda c: (score(c), -order[c]))}
    total = 0
    for _ in range(draws):
        path: tuple[int, ...] = ()
        for d in range(len(p)):
            u, cum, pick = rng.random(), 0.0, topk   # topk: a token no candidate holds
            for r in range(topk):
                cum += a[d, r]
                if u < cum:
                    pick = r
                    break
            if path + (pick,) not in tree:
                break
            path = path + (pick,)
        total += 1 + len(path)
    return total / draws


@pytest.mark.parametrize("p, theta, topk, n", [
    ([0.8, 0.7, 0.7, 0.6], 0.3, 4, 8),
    ([0.6, 0.6, 0.6], 0.5, 2, 6),
    ([0.9, 0.5, 0.8, 0.4, 0.7], 0.2, 8, 32),
    ([0.5], 0.7, 3, 3),
])
def test_inv_tree_walk_the_mean_is_a_walk_down_the_selected_tree(p, theta, topk, n):
    p = np.array(p)
    got = _walk_mean(p, theta, topk, n, 40_000, np.random.default_rng(7))
    assert got == pytest.approx(tree_mean(p, theta, topk, n), abs=0.02)


def _draws(cfg: AcceptanceConfig, window: int, tree) -> np.ndarray:
    model = AcceptanceModel(cfg, window, seed=3, tree=tree)
    return model.draws(np.arange(6), np.zeros(6, dtype=np.int64), 300)


def test_a_chain_draws_the_same_lengths_with_or_without_the_tree_model():
    base = AcceptanceConfig(per_position_rates=[0.8, 0.7, 0.6], request_spread=0.3)
    plain = _draws(base, 4, None)
    assert (plain == _draws(base, 4, (1, 4))).all()
    assert (plain == _draws(base.model_copy(update={"sibling_rate": 0.4}), 4, (1, 4))).all()
    # without sibling_rate a tree accepts the stated rates, as before
    assert (plain == _draws(base, 4, (4, 8))).all()


def test_a_wider_tree_accepts_more_with_a_sibling_rate_and_the_draws_follow_its_mean():
    cfg = AcceptanceConfig(per_position_rates=[0.7] * 4, sibling_rate=0.3)
    chain = AcceptanceModel(cfg, 5, seed=1, tree=(1, 5))
    wide = AcceptanceModel(cfg, 5, seed=1, tree=(4, 16))
    assert wide.mean > chain.mean + 0.3
    assert wide.mean == pytest.approx(tree_mean(np.full(4, 0.7), 0.3, 4, 16), rel=1e-9)
    d = wide.draws(np.arange(400), np.zeros(400, dtype=np.int64), 50)
    assert d.mean() == pytest.approx(wide.mean, abs=0.05)


def test_a_mean_is_solved_on_the_tree_it_was_measured_on():
    """An accept length measured on SGLang's default EAGLE-3 tree carried to a chain and to
    another tree by one drafter's rank-1 rates."""
    cfg = AcceptanceConfig(mean_accept_length=4.2, tree=[8, 32], sibling_rate=0.3, request_spread=0.2)
    at_measured = AcceptanceModel(cfg, 6, seed=1, tree=(8, 32))
    assert at_measured.mean == pytest.approx(4.2, abs=1e-6)
    chain = AcceptanceModel(cfg, 6, seed=1, tree=(1, 6))
    small = AcceptanceModel(cfg, 6, seed=1, tree=(4, 8))
    assert chain.mean < small.mean < at_measured.mean


def test_sibling_rate_with_a_histogram_is_refused_in_one_line(tmp_path, capsys):
    import yaml

    from specsched.cli import main
    from tests.conftest import ROOT

    data = yaml.safe_load((ROOT / "scenarios" / "public" / "eagle3-l8-h100-b1.yaml").read_text())
    data["profile"] = str(ROOT / "profiles" / f"{data['profile']}.yaml")
    data["acceptance"] = {"histogram": [0.5, 0.5], "sibling_rate": 0.3}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "res"
    assert main(["run", str(path), "--arm", "eagle3", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "acceptance.sibling_rate = 0.3" in err and str(path) in err
    assert not out.exists()


@pytest.mark.parametrize("p, theta", [(0.7, 0.3), (0.55, 0.6), (0.85, 0.1)])
def test_two_accept_lengths_on_two_trees_give_back_the_rate_and_the_sibling_rate(p, theta):
    chain = (1, 4, 3, tree_mean(np.full(3, p), theta, 1, 4))
    tree = (8, 32, 5, tree_mean(np.full(5, p), theta, 8, 32))
    got_p, got_theta = fit_sibling_rate(chain, tree)
    assert got_p == pytest.approx(p, abs=1e-6) and got_theta == pytest.approx(theta, abs=1e-5)


def test_accept_lengths_no_sibling_rate_gives_are_refused():
    with pytest.raises(ValueError, match="no sibling rate"):
        fit_sibling_rate((1, 4, 3, 2.5), (8, 32, 3, 2.4))   # the wider tree accepting less
    with pytest.raises(ValueError, match="wider than a chain"):
        fit_sibling_rate((1, 4, 3, 2.5), (1, 6, 5, 3.0))


def test_a_mean_past_what_the_measured_tree_can_accept_is_refused_and_its_top_is_reached():
    """A tree of 2 draft tokens accepts at most 2 per verify whatever its depth: a stated 2.5
    is refused in one line at load, and 2.0 (every draft accepted) draws 2 every cycle (the
    solver's bound was strict: a ValueError traceback, found by benchmarks/fuzz.py)."""
    from pydantic import ValidationError
    from specsched.sim.config import Scenario

    def scenario(mean: float) -> dict:
        return {"name": "t", "profile": "h200-1b",
                "server": {"speculative_algorithm": "eagle", "speculative_eagle_topk": 2,
                           "speculative_num_draft_tokens": 2, "speculative_num_steps": 1},
                "workload": {"kind": "burst", "num_requests": 2, "input_len": {"kind": "fixed", "value": 8},
                             "output_len": {"kind": "fixed", "value": 8}},
                "acceptance": {"mean_accept_length": mean, "window": 3, "sibling_rate": 0.3}}

    with pytest.raises(ValidationError, match="out of reach on the draft tree it was measured on"):
        Scenario.model_validate(scenario(2.5))
    sc = Scenario.model_validate(scenario(2.0))
    model = AcceptanceModel(sc.acceptance, sc.server.accept_window, 1, (2, 2))
    assert (model.draws(np.arange(3), np.zeros(3, dtype=np.int64), 20) == 2).all()


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 5), st.floats(0.0, 1.0), st.integers(1, 6), st.integers(0, 24),
       st.floats(0.001, 0.998), st.floats(0.0005, 0.05))
def test_inv_tree_mono_a_likelier_draft_never_accepts_less_and_ranks_stay_ordered(depth, theta, topk, extra, p, dp):
    """A mean is solved by bisection in the rank-1 rate, which needs the tree's mean to grow
    with it; a sibling share past p / (1 - p) would make rank 2 likelier than rank 1 (and a
    tree of sibling rate 1 accept everything at any rate: the solver found no bracket)."""
    n = depth + 1 + extra
    lo, hi = tree_mean(np.full(depth, p), theta, topk, n), tree_mean(np.full(depth, min(p + dp, 1.0)), theta, topk, n)
    assert hi >= lo - 1e-12
    a = rank_rates(np.full(depth, p), theta, topk)
    assert (np.diff(a, axis=1) <= 1e-15).all() and a.sum(axis=1).max() <= 1.0 + 1e-12
    assert tree_mean(np.full(depth, 1e-9), theta, topk, n) == pytest.approx(1.0, abs=1e-6)


def test_rank1_rates_on_a_wider_tree_say_once_that_the_accept_length_is_the_tree_models():
    """per_position_rates with a sibling_rate on the scenario's own topk-4, 8-token tree drew
    the tree model's accept length (3.42 from rank-1 rates of 0.75, the chain's 3.21) and no
    line said so; a mean stated on that tree is drawn as stated, and a chain draws the rates."""
    from specsched.sim.engine import SimEngine
    from specsched.sim.grid_range import warning_lines

    from tests.conftest import make_scenario, tiny_profile

    tree = {"speculative_algorithm": "eagle", "speculative_num_steps": 5, "speculative_eagle_topk": 4,
            "speculative_num_draft_tokens": 8}
    chain = {**tree, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 6}

    def lines(srv, acc):
        eng = SimEngine(make_scenario(srv, {"num_requests": 2}, acceptance=acc), tiny_profile())
        return eng, [x for x in warning_lines(eng.range_notes()) if "sim/draft_tree.py" in x]

    rates = {"mean_accept_length": None, "per_position_rates": [0.75] * 5, "sibling_rate": 0.3, "request_spread": 0.0}
    eng, found = lines(tree, rates)
    assert len(found) == 1 and f"({eng.acceptance.mean:.3g})" in found[0] and "rank-1" in found[0]
    assert "speculative_eagle_topk 4, 8 draft tokens" in found[0] and "acceptance.sibling_rate 0.3" in found[0]
    assert lines(tree, {"mean_accept_length": 3.4, "sibling_rate": 0.3})[1] == []
    assert lines(chain, rates)[1] == []
    assert lines(tree, {**rates, "sibling_rate": None})[1] == []   # no sibling_rate: its own line


def test_a_sibling_rate_beside_a_mean_on_the_runs_own_tree_says_the_mean_stays():
    """A mean_accept_length with a sibling_rate and no acceptance.tree is taken as measured on
    the run's own tree and drawn as stated there: switching a scenario to a wider EAGLE tree and
    adding a sibling rate moved nothing, silently (sim/grid_range.py AcceptanceSiblingUnread).
    With acceptance.tree stated, or on a chain, or without a sibling rate, no such line."""
    from specsched.sim.engine import SimEngine
    from specsched.sim.grid_range import warning_lines

    from tests.conftest import make_scenario, tiny_profile

    tree = {"speculative_algorithm": "eagle", "speculative_num_steps": 5, "speculative_eagle_topk": 4,
            "speculative_num_draft_tokens": 8}
    chain = {**tree, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 6}

    def lines(srv, acc):
        eng = SimEngine(make_scenario(srv, {"num_requests": 2}, acceptance=acc), tiny_profile())
        return [x for x in warning_lines(eng.range_notes()) if "leaves the mean accept length as stated" in x]

    found = lines(tree, {"mean_accept_length": 3.4, "sibling_rate": 0.3})
    assert len(found) == 1 and "speculative_eagle_topk 4, 8 draft tokens" in found[0] and "sibling_rate 0.3" in found[0]
    assert lines(tree, {"mean_accept_length": 3.4, "sibling_rate": 0.3, "tree": [1, 6]}) == []
    assert lines(chain, {"mean_accept_length": 3.4, "sibling_rate": 0.3}) == []
    assert lines(tree, {"mean_accept_length": 3.4}) == []
