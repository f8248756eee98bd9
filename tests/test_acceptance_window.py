"""Acceptance across verify windows: per-position rates measured at one window carry to
others (diminishing returns), old scenarios are unchanged, and a window sweep or a drafter
change moves verify cycles/s, TPOT and throughput the way the mechanism implies."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, reject, settings
from hypothesis import strategies as st
from specsched.sim.acceptance import AcceptanceModel, extend_rates, mean_accept_length
from specsched.sim.config import AcceptanceConfig, load_scenario, with_value
from specsched.sim.engine import run_scenario

from tests.conftest import ROOT


def pop_mean(cfg: AcceptanceConfig, window: int) -> float:
    return AcceptanceModel(cfg, window, seed=1).mean


@settings(max_examples=40, deadline=None)
@given(target=st.floats(1.2, 5.5), spread=st.floats(0.0, 1.0), decay=st.floats(0.6, 1.0))
def test_mean_holds_at_its_window_and_longer_windows_add_ever_less(target, spread, decay):
    assume(target < 1 + sum(decay ** (i * (i + 1) / 2) for i in range(5)) - 0.05)
    try:
        cfg = AcceptanceConfig(mean_accept_length=target, request_spread=spread, window=6, rate_decay=decay)
        means = [pop_mean(cfg, w) for w in range(2, 11)]
    except ValueError as e:  # the per-request spread lowers the reachable mean below the bound above
        assert "out of reach" in str(e)
        reject()
    assert means[4] == pytest.approx(target, abs=1e-6)
    gains = np.diff(means)
    assert (gains >= -1e-12).all()                      # a longer window never accepts less
    assert (np.diff(gains) <= 1e-9).all()               # ... and each position adds less than the last
    assert all(1.0 <= m <= w for m, w in zip(means, range(2, 11), strict=True))


def test_scenarios_without_a_window_are_unchanged():
    """No ``window``: the rates are solved at the run's window (the old model), draw for draw."""
    cfg = AcceptanceConfig(mean_accept_length=3.2, request_spread=0.25)
    same = AcceptanceConfig(mean_accept_length=3.2, request_spread=0.25, window=6)
    a, b = AcceptanceModel(cfg, 6, 3), AcceptanceModel(same, 6, 3)
    np.testing.assert_array_equal(a.base_logits, b.base_logits)
    assert [a.draw(r, c) for r in range(5) for c in range(50)] == [b.draw(r, c) for r in range(5) for c in range(50)]
    assert np.ptp(a.base_logits) == 0                   # one constant rate, as before


def test_given_rates_are_cut_or_continued():
    assert extend_rates(np.array([0.9, 0.8, 0.7]), 2, 1.0).tolist() == [0.9, 0.8]
    assert extend_rates(np.array([0.9, 0.8]), 4, 0.5).tolist() == pytest.approx([0.9, 0.8, 0.4, 0.2])
    cfg = AcceptanceConfig(per_position_rates=[0.9, 0.8, 0.7])
    assert pop_mean(cfg, 3) == pytest.approx(mean_accept_length(np.array([0.9, 0.8])))


def test_histogram_measured_at_its_window_extends_past_it():
    hist = [0.2, 0.2, 0.2, 0.4]                          # measured at window 4
    short = pop_mean(AcceptanceConfig(histogram=hist), 4)
    longer = pop_mean(AcceptanceConfig(histogram=hist, window=4), 6)
    assert short == pytest.approx(sum(k * h for k, h in enumerate(hist, 1)))
    assert longer > short
    assert pop_mean(AcceptanceConfig(histogram=hist, window=4), 4) == pytest.approx(short)


def test_empty_rates_and_non_finite_histograms_are_refused():
    with pytest.raises(ValueError):
        AcceptanceConfig(per_position_rates=[])
    with pytest.raises(ValueError):
        AcceptanceConfig(histogram=[float("inf"), 1.0])


# ----------------------------------------------------------------- through the simulator
def _cell(window: int | None = None, algo: str | None = None, batch: int = 8):
    sc = load_scenario(ROOT / "scenarios" / f"batch{batch}-ll.yaml")
    sc = with_value(sc, "workload.num_requests", batch)
    sc = with_value(sc, "workload.output_len.value", 256)
    if window is not None:
        sc = with_value(sc, "server.speculative_num_draft_tokens", window)
    if algo is not None:
        if algo == "eagle":   # the window's chain: SGLang refuses a chain's window without its steps
            sc = with_value(sc, "server.speculative_num_steps", sc.server.speculative_num_draft_tokens - 1)
        sc = with_value(sc, "server.speculative_algorithm", algo)
    return run_scenario(sc).summary


def test_window_sweep_moves_cycles_and_has_an_optimum():
    """At batch 64 the verify forward is past its memory-bound regime: an interior optimum."""
    runs = {w: _cell(window=w, batch=64) for w in range(2, 9)}
    cycles = [runs[w]["verify_cycles_per_s"] for w in range(2, 9)]
    accept = [runs[w]["accept_length"] for w in range(2, 9)]
    tput = [runs[w]["decode_throughput"] for w in range(2, 9)]
    assert all(b < a for a, b in zip(cycles, cycles[1:], strict=False))   # more tokens per verify: slower cycles
    assert accept[-1] > accept[0]
    best = int(np.argmax(tput))
    assert 0 < best < len(tput) - 1                                        # neither the shortest nor the longest


def test_chain_drafter_is_slower_per_cycle_at_equal_acceptance():
    block, chain = _cell(window=6), _cell(window=6, algo="eagle")
    assert chain["verify_cycles_per_s"] < block["verify_cycles_per_s"]
    assert chain["median_tpot_ms"] > block["median_tpot_ms"]
    assert chain["output_throughput"] < block["output_throughput"]


# --- own expit/logit/brentq (no scipy import on a run's path) are scipy's, bit for bit
@settings(max_examples=60, deadline=None)
@given(xs=st.lists(st.floats(-800.0, 800.0), min_size=1, max_size=40),
       ps=st.lists(st.floats(1e-300, 1.0, exclude_max=True, exclude_min=True), min_size=1, max_size=40))
def test_expit_and_logit_are_scipys_bit_for_bit(xs, ps):
    from scipy import special
    from specsched.sim.acceptance import expit, logit

    x, p = np.array(xs + [-709.5, -745.2, 709.5]), np.array(ps + [0.3, 0.65, 0.5])
    assert expit(x).tobytes() == special.expit(x).tobytes()
    assert logit(p).tobytes() == special.logit(p).tobytes()


@settings(max_examples=80, deadline=None)
@given(root=st.floats(-20.0, 20.0), power=st.sampled_from([1, 3, 5]), scale=st.floats(0.01, 50.0),
       lo=st.floats(-30.0, -20.5), hi=st.floats(20.5, 30.0), xtol=st.sampled_from([2e-12, 1e-10, 1e-4]))
def test_brentq_is_scipys_bit_for_bit(root, power, scale, lo, hi, xtol):
    """The same iterates as scipy.optimize.brentq, so the same root to the last bit (the
    solved logits, hence every accept-length draw, do not move)."""
    from scipy import optimize
    from specsched.sim.acceptance import brentq

    def f(x):
        return np.tanh(scale * (x - root)) + 0.1 * (x - root) ** power

    assert brentq(f, lo, hi, xtol=xtol) == optimize.brentq(f, lo, hi, xtol=xtol)


def test_brentq_refuses_a_bracket_without_a_sign_change():
    from specsched.sim.acceptance import brentq

    with pytest.raises(ValueError, match="different signs"):
        brentq(lambda x: x * x + 1.0, -1.0, 1.0)


def _scipy_logits(target: float, spread: float, decay: float, gamma: int) -> np.ndarray:
    """logits_for_mean's solve done with scipy's brentq, expit and logit."""
    from scipy import optimize, special
    from specsched.sim import acceptance as acc

    shape = np.log(decay) * np.arange(gamma)

    def base(x):
        if decay == 1.0:
            return np.full(gamma, x)
        return special.logit(np.clip(special.expit(x) * np.exp(shape), 1e-12, 1 - 1e-12))

    def f(x):
        nodes, w = acc._HERMITE
        means = [acc.mean_accept_length(special.expit(base(x) + spread * z)) for z in nodes]
        return float(np.dot(w, means) / w.sum()) - target

    return base(optimize.brentq(f, -30.0, 30.0, xtol=1e-10))


def test_spec_logits_match_scipys_solve():
    """logits_for_mean with the own solver equals the scipy-solved logits on a grid of
    targets and decays."""
    from specsched.sim.acceptance import logits_for_mean

    for target in (1.3, 2.5, 3.4):
        for spread, decay in ((0.0, 1.0), (0.8, 0.9)):
            ours = logits_for_mean(target, 6, spread, decay)
            assert ours.tobytes() == _scipy_logits(target, spread, decay, 5).tobytes()


# ------------------------------------------ a window what-if on a file that states no window
H200 = ROOT / "scenarios" / "h200"


@settings(max_examples=12, deadline=None)
@given(w=st.integers(2, 10))
def test_inv_window_carry_a_what_if_reads_the_acceptance_at_the_files_window(w):
    """INV-WINDOW-CARRY: the acceptance a scenario states without ``acceptance.window`` was
    measured at the scenario's own window, so a run at window ``w`` (``--set``, a sweep axis,
    an arm) carries its per-position rates from there: the same accept lengths as the file
    with ``acceptance.window`` written out. Before, the mean was taken at every window as
    given: the H200 low-acceptance cell (1.6 at window 4) drew 1.6 at windows 2 and 8, so
    window 2 came out the fastest."""
    from specsched.analysis.overrides import load_scenario_with_overrides

    key = {"server.speculative_num_draft_tokens": w}
    implicit = load_scenario_with_overrides(H200 / "window4-lowacc.yaml", "base", key)
    explicit = load_scenario_with_overrides(H200 / "window4-lowacc.yaml", "base", {**key, "acceptance.window": 4})
    a, b = AcceptanceModel(implicit.acceptance, w, seed=1), AcceptanceModel(explicit.acceptance, w, seed=1)
    np.testing.assert_array_equal(a.base_logits, b.base_logits)
    assert [a.draw(r, c) for r in range(3) for c in range(30)] == [b.draw(r, c) for r in range(3) for c in range(30)]
    mean = a.mean
    assert (mean < 1.6) if w < 4 else (mean > 1.6) if w > 4 else mean == pytest.approx(1.6)


def test_a_shorter_window_than_the_stated_mean_is_a_what_if_not_an_error():
    """The H200 high-acceptance cell states 6.0 at window 8: window 4 was refused ('exceeds
    the verify window'); it now runs with the accept length the per-position rates give."""
    from specsched.analysis.overrides import load_scenario_with_overrides

    sc = load_scenario_with_overrides(H200 / "window8-highacc.yaml", "base", {"server.speculative_num_draft_tokens": 4})
    assert sc.acceptance.window == 8 and 3.0 < AcceptanceModel(sc.acceptance, 4, seed=1).mean < 4.0


def test_a_what_if_that_states_its_own_acceptance_or_keeps_the_window_is_left_alone(tmp_path):
    from specsched.analysis.overrides import load_scenario_with_overrides

    path = H200 / "window4-lowacc.yaml"
    own = load_scenario_with_overrides(path, "base", {"server.speculative_num_draft_tokens": 6,
                                                      "acceptance.mean_accept_length": 2.0})
    assert own.acceptance.window is None and own.acceptance.mean_accept_length == 2.0
    same = load_scenario_with_overrides(path, "base", {"server.sync_mode": "host_block"})
    assert same.acceptance.window is None
    # an arm of the file moves the window: pinned the same way
    import yaml
    raw = yaml.safe_load(path.read_text())
    raw["profile"] = str((H200 / raw["profile"]).resolve()) if raw["profile"].endswith(".yaml") else raw["profile"]
    raw["arms"] = {"w2": {"server": {"speculative_num_draft_tokens": 2}}}
    f = tmp_path / "arm.yaml"
    f.write_text(yaml.safe_dump(raw))
    assert load_scenario(f, "w2").acceptance.window == 4
    assert load_scenario(f, "base").acceptance.window is None


@pytest.mark.parametrize("w", [4, 12])
def test_a_sweeps_set_acceptance_is_carried_like_the_files(w, tmp_path):
    """INV-WINDOW-CARRY across a sweep's layers: ``--set`` keys are the scenario every grid point
    starts from, so a window axis carries the acceptance they state from their window, as it
    carries one written in the file. Before, ``--set speculative_algorithm=dspark --set
    acceptance.mean_accept_length=3`` over a window axis took 3.0 at every window (the point's
    overrides stated the acceptance beside the window): windows 4 and 12 accepted the same."""
    import yaml
    from specsched.analysis.overrides import Layered, load_scenario_with_overrides
    from specsched.analysis.sweep import run_sweep

    raw = yaml.safe_load((H200 / "window4-lowacc.yaml").read_text())
    raw["profile"] = str((H200 / raw["profile"]).resolve()) if raw["profile"].endswith(".yaml") else raw["profile"]
    raw["server"] = {k: v for k, v in raw["server"].items() if not k.startswith("speculative_")}
    raw.pop("acceptance", None)
    raw.pop("arms", None)
    raw["workload"]["num_requests"] = 4
    f = tmp_path / "plain.yaml"
    f.write_text(yaml.safe_dump(raw))
    fixed = {"server.speculative_algorithm": "dspark", "acceptance.mean_accept_length": 3.0}
    point = {"server.speculative_num_draft_tokens": w}
    layered = load_scenario_with_overrides(f, "base", Layered(point, fixed))
    written = dict(raw, server={**raw["server"], "speculative_algorithm": "dspark"},
                   acceptance={"mean_accept_length": 3.0})
    g = tmp_path / "dspark.yaml"
    g.write_text(yaml.safe_dump(written))
    in_file = load_scenario_with_overrides(g, "base", point)
    assert layered.acceptance == in_file.acceptance and layered.acceptance.window not in (None, w)
    mean = AcceptanceModel(layered.acceptance, w, seed=1).mean
    assert (mean < 3.0) if w < layered.acceptance.window else (mean > 3.0)
    # the sweep builds its points so
    report = run_sweep(str(f), {"server.speculative_num_draft_tokens": [w]}, 1, tmp_path / "s.parquet",
                       overrides=fixed, executor=None, max_workers=1)
    assert not report.failed
    t = report.table
    assert t.loc[t["metric"] == "accept_length", "value"].iloc[0] == pytest.approx(mean, rel=0.15)


def test_prepared_draws_are_the_lazy_draws_and_make_none_later(monkeypatch):
    cfg = AcceptanceConfig(mean_accept_length=3.2, request_spread=0.26)
    lazy, ready = AcceptanceModel(cfg, 6, 7), AcceptanceModel(cfg, 6, 7)
    rids, cycles = list(range(70)), [300 if r % 3 else 5 for r in range(70)]   # 2 blocks, 1 block
    ready.prepare(rids, cycles)
    assert [ready.drawn(r) for r in rids] == [512 if r % 3 else 256 for r in rids]
    made = []
    real = AcceptanceModel._ensure
    monkeypatch.setattr(AcceptanceModel, "_ensure", lambda self, rid, n: made.append(rid) or real(self, rid, n))
    got = [[ready.draw(r, c) for c in range(n)] for r, n in zip(rids, cycles, strict=True)]
    assert made == []
    want = [[lazy.draw(r, c) for c in range(n)] for r, n in zip(rids, cycles, strict=True)]
    assert got == want
    assert [ready.level(r) for r in rids] == [lazy.level(r) for r in rids]
    with pytest.raises(ValueError, match="2 requests, 1 cycle counts"):
        ready.prepare([1, 2], [3])


def test_a_window_past_the_stated_rates_is_said_once_at_its_largest():
    """A window sweep picked window 10 on the 6 the acceptance was measured at, its gain
    resting on rates continued past the last measured one, and nothing said so. The run's
    range notes now say it, once, at the largest window (merged across runs)."""
    from specsched.sim.engine import SimEngine
    from specsched.sim.grid_range import AcceptanceBeyond, merged

    from tests.conftest import make_scenario, tiny_profile

    def notes(window: int, **acc):
        given = {"mean_accept_length": None, **acc} if "per_position_rates" in acc else {"window": 6}
        sc = make_scenario({"speculative_num_draft_tokens": window}, {"num_requests": 2}, acceptance=given)
        return [n for n in SimEngine(sc, tiny_profile()).run().extra["range_notes"] if isinstance(n, AcceptanceBeyond)]

    assert notes(6) == [] and notes(4) == []
    (n10,) = notes(10)
    assert (n10.window, n10.measured, n10.block) == (10, 6, True)
    assert "positions 7-10" in n10.line() and "--speculative-dspark-block-size" in n10.line()
    (rates,) = notes(6, per_position_rates=[0.8, 0.7])   # rates for positions 2-3: window 3 stated
    assert rates.measured == 3
    assert merged([*notes(8), n10]) == [n10]


def test_one_position_past_the_stated_rates_is_named_as_one():
    """A window one longer than the stated one continues one position: the line said
    "positions 4-4 continue the last stated rate"."""
    from specsched.sim.grid_range import AcceptanceBeyond

    line = AcceptanceBeyond(window=4, measured=3, rate_decay=1.0, block=False).line()
    assert "position 4 continues the last stated rate" in line and "4-4" not in line
    assert "positions 4-6 continue" in AcceptanceBeyond(window=6, measured=3, rate_decay=1.0, block=False).line()


def test_a_dflash_window_past_the_stated_rates_names_dflash_not_dspark():
    """DFlash takes its window as the block size (--speculative-num-draft-tokens or
    --speculative-dflash-block-size, sglang 0.5.23 arg_groups/speculative_hook.py _handle_dflash),
    unchecked against the draft checkpoint's; the warning named DSpark's gamma + 1 rule and its
    --speculative-dspark-block-size flag for a DFlash run."""
    from specsched.sim.engine import SimEngine
    from specsched.sim.grid_range import AcceptanceBeyond

    from tests.conftest import make_scenario, tiny_profile

    sc = make_scenario({"speculative_algorithm": "dflash", "speculative_num_draft_tokens": 10},
                       {"num_requests": 2}, acceptance={"window": 6})
    (n,) = [n for n in SimEngine(sc, tiny_profile()).run().extra["range_notes"] if isinstance(n, AcceptanceBeyond)]
    line = n.line()
    assert "positions 7-10" in line
    assert "DSpark" not in line and "dspark" not in line
    assert "--speculative-dflash-block-size" in line and "_handle_dflash" in line


def test_a_tree_run_below_its_stated_acceptance_window_says_the_cut():
    """A draft tree (speculative_eagle_topk > 1) accepts at most speculative_num_steps + 1
    tokens per verify whatever its node count (sglang 0.5.23: the tree's depth + the bonus
    token). An acceptance.window copied from speculative_num_draft_tokens (32 nodes, depth 5)
    spread the stated mean over 32 positions and cut it at 6: the run's accept length came out
    3.3 for a stated 4.2, silently. The run now says so in one warning line."""
    from specsched.sim.engine import SimEngine
    from specsched.sim.grid_range import AcceptanceTreeCut, warning_lines

    from tests.conftest import make_scenario, tiny_profile

    tree = {"speculative_algorithm": "eagle", "speculative_num_steps": 5, "speculative_eagle_topk": 8,
            "speculative_num_draft_tokens": 32}

    def cuts(acc):
        sc = make_scenario(tree, {"num_requests": 2}, acceptance=acc)
        eng = SimEngine(sc, tiny_profile())
        return eng, [n for n in eng.run().extra["range_notes"] if isinstance(n, AcceptanceTreeCut)]

    eng, (n,) = cuts({"mean_accept_length": 4.2, "window": 32})
    assert (n.measured, n.depth) == (32, 6) and abs(n.run_mean - eng.acceptance.mean) < 1e-9
    (line,) = [x for x in warning_lines([n]) if "tree" in x]
    assert "acceptance.window 32" in line and "speculative_num_steps + 1 = 6" in line and "4.2" in line
    assert cuts({"mean_accept_length": 4.2, "window": 6})[1] == []
    assert cuts({"mean_accept_length": 4.2})[1] == []
    # a chain whose window a what-if shortened carries the rates as documented: no note
    chain = make_scenario({"speculative_algorithm": "eagle", "speculative_num_draft_tokens": 4, "speculative_num_steps": 3},
                          {"num_requests": 2}, acceptance={"mean_accept_length": 3.0, "window": 8})
    assert not [n for n in SimEngine(chain, tiny_profile()).run().extra["range_notes"] if isinstance(n, AcceptanceTreeCut)]


def test_a_what_if_on_another_draft_tree_says_its_accept_length_is_carried(tmp_path):
    """An EAGLE cell measured as a chain (topk 1, 4 draft tokens, accept length 2.6) swept to
    a tree of topk 4 and 16 draft tokens priced every candidate and kept the accept length at
    2.59: the tree came out only slower (1205 -> 853 tok/s on Llama-3.1-70B, A100 TP8), while
    SGLang 0.5.23's tree verify keeps the longest matching path over every candidate
    (speculative/eagle_utils.py eagle_sample). The what-if pins the file's draft as
    acceptance.tree and the run says in one warning line that its accept length is carried."""
    from specsched.analysis.overrides import load_scenario_with_overrides
    from specsched.sim.engine import SimEngine
    from specsched.sim.grid_range import warning_lines

    from tests.conftest import tiny_profile

    f = _chain_file(tmp_path)

    def tree_lines(over):
        sc = load_scenario_with_overrides(f, "base", over)
        return sc, [x for x in warning_lines(SimEngine(sc, tiny_profile()).run().extra["range_notes"])
                    if "acceptance.tree" in x]

    sc, (line,) = tree_lines({"server.speculative_eagle_topk": 4, "server.speculative_num_draft_tokens": 16})
    assert sc.acceptance.tree == [1, 4]
    assert "topk 1, speculative_num_draft_tokens 4" in line and "topk 4, 16 tokens" in line and "eagle_sample" in line
    assert tree_lines({})[1] == []                                             # the file's own draft
    assert tree_lines({"workload.num_requests": 3})[1] == []                   # a what-if off the draft
    stated = {"server.speculative_eagle_topk": 4, "server.speculative_num_draft_tokens": 16,
              "acceptance.mean_accept_length": 3.1, "acceptance.tree": [4, 16]}
    assert tree_lines(stated)[1] == []                                         # measured on this tree


def test_a_what_if_that_moves_the_draft_and_another_acceptance_key_still_carries_the_files_acceptance(tmp_path):
    """``--set acceptance.request_spread=0.3 --set server.speculative_num_draft_tokens=6`` on a
    cell stated as a mean at window 4 took the mean at window 6 as given (1.6 drawn at 6,
    where the carried rates give more), and ``--set acceptance.sibling_rate=0.3`` beside a
    wider topk lost the pinned draft tree, so the run never said that its accept length is
    the tree model's: any acceptance key in the what-if counted as 'states its own
    acceptance'. Only a source (mean, rates, histogram), or the key the pin writes, does."""
    from specsched.analysis.overrides import load_scenario_with_overrides

    path = H200 / "window4-lowacc.yaml"
    sc = load_scenario_with_overrides(path, "base", {"server.speculative_num_draft_tokens": 6,
                                                     "acceptance.request_spread": 0.3})
    assert sc.acceptance.window == 4 and sc.acceptance.request_spread == 0.3
    own = load_scenario_with_overrides(path, "base", {"server.speculative_num_draft_tokens": 6,
                                                      "acceptance.window": 5})
    assert own.acceptance.window == 5
    f = _chain_file(tmp_path)
    wide = {"server.speculative_eagle_topk": 4, "server.speculative_num_draft_tokens": 8}
    assert load_scenario_with_overrides(f, "base", {**wide, "acceptance.sibling_rate": 0.3}).acceptance.tree == [1, 4]
    assert load_scenario_with_overrides(f, "base", {**wide, "acceptance.tree": [4, 8]}).acceptance.tree == [4, 8]
    assert load_scenario_with_overrides(f, "base", {**wide, "acceptance.mean_accept_length": 3.0}).acceptance.tree is None


def test_a_cut_tree_line_never_says_a_mean_instead_of_the_same_mean():
    """acceptance.window 9 at rate_decay 0.8 on a 5-step tree cuts a stated 3.4 to 3.396,
    and the line read 'the run's mean accept length is 3.4 instead of the stated 3.4'."""
    from specsched.sim.grid_range import AcceptanceTreeCut

    line = AcceptanceTreeCut(9, 6, 3.4, 3.396).line()
    assert "is 3.396 instead of the stated 3.4" in line
    assert "is 2.73 instead of the stated 3.4" in AcceptanceTreeCut(9, 6, 3.4, 2.7312).line()


def _chain_file(tmp_path):
    """A 3-step EAGLE chain (3/1/4) stated as a mean accept length of 2.6, on the tiny profile."""
    import yaml

    f = tmp_path / "chain.yaml"
    f.write_text(yaml.safe_dump({
        "name": "chain", "profile": "tiny", "seed": 1,
        "server": {"max_running_requests": 16, "max_total_num_tokens": 200_000, "chunked_prefill_size": 2048,
                   "speculative_algorithm": "eagle", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                   "speculative_num_draft_tokens": 4},
        "acceptance": {"mean_accept_length": 2.6},
        "workload": {"kind": "burst", "num_requests": 2, "input_len": {"kind": "fixed", "value": 100},
                     "output_len": {"kind": "fixed", "value": 20}}}))
    return f


def test_a_sweeps_checks_load_its_points_as_its_runs_do(tmp_path, capsys):
    """Every check a sweep makes before its runs loads a point on the --set layer, as the runs
    do: ``--set dspark --set acceptance=3`` over windows 2, 4, 8 was refused ('exceeds the
    verify window, speculative_num_draft_tokens = 2') by the checks, which took the
    acceptance at window 2, though each point carries it from the --set window; and a --set
    window the grid also sets still places the acceptance (window 6 here, not dspark's 8)."""
    import pandas as pd

    from specsched.cli import main

    path = str(H200 / "poisson-nospec.yaml")
    common = ["--set", "server.speculative_algorithm=dspark", "--set", "acceptance.mean_accept_length=3",
              "--set", "workload.num_requests=8", "--no-progress"]
    out = tmp_path / "a.parquet"
    assert main(["sweep", path, *common, "--grid", "server.speculative_num_draft_tokens=2,4,8",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    out6 = tmp_path / "b.parquet"
    assert main(["sweep", path, *common, "--set", "server.speculative_num_draft_tokens=6",
                 "--grid", "server.speculative_num_draft_tokens=6", "--out", str(out6)]) == 0
    t = pd.read_parquet(out6)
    acc = t.loc[t["metric"] == "accept_length", "value"].iloc[0]
    assert acc == pytest.approx(3.0, rel=0.12)   # stated at window 6 (8 requests: one seed's draws)
    from specsched.analysis.overrides import Layered, load_scenario_with_overrides
    sc = load_scenario_with_overrides(path, "base", Layered({"server.speculative_num_draft_tokens": 4}, {
        "server.speculative_algorithm": "dspark", "server.speculative_num_draft_tokens": 6,
        "acceptance.mean_accept_length": 3.0}))
    assert sc.acceptance.window == 6
