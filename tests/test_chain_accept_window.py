"""A chain drafter commits at most ``speculative_num_steps + 1`` tokens per verify: one draft
per serial step plus the bonus token, however many tree nodes the verify scores (SGLang
0.5.23 speculative/eagle_utils.py ``verify_tree_greedy_func``: accept_index of width
spec_steps + 1). With ``speculative_eagle_topk`` 1 SGLang resets the window to
steps + 1 (arg_groups/speculative_hook.py ``_handle_eagle_family``, with a warning) and
runs, so any other window becomes steps + 1 here too, never priced and drawn as a longer chain."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.config import load_scenario, with_value
from specsched.sim.engine import run_scenario
from specsched.sim.server_args import ServerArgs

from tests.conftest import ROOT


def _eagle(steps: int, window: int, topk: int, rates: list[float]):
    sc = load_scenario(ROOT / "scenarios" / "batch8-ll.yaml")
    sc = sc.model_validate({**sc.model_dump(), "server": {
        **sc.server.model_dump(), "speculative_algorithm": "eagle", "speculative_num_draft_tokens": window,
        "speculative_num_steps": steps, "speculative_eagle_topk": topk},
        "acceptance": {"per_position_rates": rates, "window": None}})
    return with_value(sc, "workload.num_requests", 16)


@settings(max_examples=12, deadline=None)
@given(steps=st.integers(1, 4), extra=st.integers(1, 4), topk=st.integers(2, 4), p=st.floats(0.5, 0.95))
def test_a_tree_never_accepts_deeper_than_its_steps(steps, extra, topk, p):
    window = min(steps + 1 + extra, topk + (steps - 1) * topk * topk + 1)   # a tree holds no more
    r = run_scenario(_eagle(steps, window, topk, [p]), seed=1)
    per_verify = (r.requests["output_len"] - 1) / r.requests["spec_cycles"]
    assert (per_verify <= steps + 1 + 1e-9).all()
    assert r.summary["accept_length"] <= steps + 1


def test_a_wider_tree_of_the_same_depth_is_never_faster():
    """More nodes at the same depth: a wider verify for the same accepted path."""
    tpot = [run_scenario(_eagle(3, w, 4, [0.8]), seed=1).summary["mean_tpot_ms"] for w in (4, 6, 8)]
    assert tpot[0] <= tpot[1] <= tpot[2]


@settings(max_examples=30, deadline=None)
@given(steps=st.integers(1, 8), window=st.integers(1, 16), algo=st.sampled_from(["eagle", "EAGLE3", "nextn", "mtp"]))
def test_a_chain_window_becomes_steps_plus_one(steps, window, algo):
    """INV-CW1: without a tree, the verify window is num_steps + 1 whatever was stated."""
    s = ServerArgs(speculative_algorithm=algo, speculative_num_draft_tokens=window, speculative_num_steps=steps)
    assert s.spec_window == s.accept_window == steps + 1


def test_a_tree_keeps_its_window_and_a_block_drafter_its_own():
    ok = ServerArgs(speculative_algorithm="eagle", speculative_num_draft_tokens=4, speculative_num_steps=3)
    assert ok.accept_window == 4
    tree = ServerArgs(speculative_algorithm="eagle", speculative_num_draft_tokens=8, speculative_num_steps=3,
                      speculative_eagle_topk=4)
    assert (tree.spec_window, tree.accept_window) == (8, 4)
    assert ServerArgs(speculative_algorithm="dspark", speculative_num_draft_tokens=6).accept_window == 6
    with pytest.raises(ValueError, match="without server.speculative_num_steps"):   # SGLang does not start it
        ServerArgs(speculative_algorithm="eagle", speculative_num_draft_tokens=5)


def test_a_tree_wider_than_its_candidates_is_refused():
    """steps 2, topk 2 draw 2 + 4 = 6 candidates; 16 draft tokens asked for 15 of them, which
    SGLang's organize_draft_results cannot take (torch.topk past the list): it ran as a 16-wide
    verify before. The largest tree, 7 tokens, runs."""
    import pytest

    with pytest.raises(ValueError) as e:
        ServerArgs(speculative_algorithm="eagle", speculative_num_draft_tokens=16, speculative_num_steps=2,
                   speculative_eagle_topk=2)
    assert "speculative_num_draft_tokens" in str(e.value) and "at most 7" in str(e.value)
    ok = ServerArgs(speculative_algorithm="eagle", speculative_num_draft_tokens=7, speculative_num_steps=2,
                    speculative_eagle_topk=2)
    assert ok.spec_window == 7


def test_steps_past_the_window_limit_name_the_limit_not_the_stated_window():
    """steps 100 with topk 1 said 'at most speculative_num_draft_tokens - 1 = 5', though the
    window follows the steps (it is reset to steps + 1); the limit is the window's, 64."""
    import pytest

    with pytest.raises(ValueError) as e:
        ServerArgs(speculative_algorithm="eagle", speculative_num_draft_tokens=6, speculative_num_steps=100)
    msg = str(e.value)
    assert "at most 63" in msg and "= 5" not in msg


@settings(max_examples=20, deadline=None)
@given(steps=st.integers(1, 100), algo=st.sampled_from(["none", "dspark", "dflash", "DSPARK"]))
def test_draft_steps_given_without_a_chain_drafter_load_as_sglang_resolves_them(steps, algo):
    """SGLang 0.5.23 ignores speculative_num_steps without an algorithm (the speculative hook
    runs per algorithm only: arg_groups/speculative_hook.py ``handle_speculative_decoding``)
    and sets it to 1 for DSpark and DFlash, with a warning when it was another value
    (``_handle_dspark``, ``_handle_dflash``). ``--set server.speculative_algorithm=none`` on
    an EAGLE scenario, or a pasted ``--speculative-num-steps 1`` beside DSPARK, was refused
    ('only a chain drafter ... has serial draft steps'). A block drafter's value loads as
    given, past its window too, for the defaults to reset it to 1 and say so
    (sim/defaults.py block_drafter_resets); it runs one draft forward either way."""
    window = {"none": {}}.get(algo, {"speculative_num_draft_tokens": 4})
    s = ServerArgs(speculative_algorithm=algo, speculative_num_steps=steps, **window)
    assert s.speculative_num_steps == (None if algo == "none" else steps)
    assert s.num_draft_forwards == (0 if algo == "none" else 1)


@settings(max_examples=30, deadline=None)
@given(algo=st.sampled_from([{}, {"speculative_algorithm": "none"}, {"speculative_algorithm": None}]),
       topk=st.one_of(st.none(), st.integers(-5, 0), st.integers(65, 1000)),
       window=st.one_of(st.none(), st.integers(-5, 0), st.integers(65, 1000)))
def test_topk_and_window_outside_their_range_without_an_algorithm_load_as_unset(algo, topk, window):
    """SGLang 0.5.23 checks speculative_eagle_topk and speculative_num_draft_tokens only in its
    per-algorithm hooks (arg_groups/speculative_hook.py ``handle_speculative_decoding``), and
    its readers outside them take 0 as unset (``speculative_num_draft_tokens or 1``); None is
    every speculative field's unset (arg_groups/fields/spec.py). Without an algorithm, topk 0
    or a window of 0 was refused ('must be >= 1'), and so was a pasted dump's null; they
    load as the keys left out."""
    s = ServerArgs(**algo, speculative_eagle_topk=topk, speculative_num_draft_tokens=window)
    assert s == ServerArgs()
    assert s.model_fields_set <= {"speculative_algorithm"}


def test_topk_and_window_within_their_range_without_an_algorithm_stay_as_given():
    s = ServerArgs(speculative_eagle_topk=4, speculative_num_draft_tokens=8)
    assert (s.speculative_eagle_topk, s.speculative_num_draft_tokens, s.spec_window) == (4, 8, 1)


@settings(max_examples=20, deadline=None)
@given(algo=st.sampled_from(["eagle", "eagle3", "nextn", "mtp", "standalone", "dspark", "dflash"]),
       nulls=st.lists(st.sampled_from(["speculative_num_steps", "speculative_eagle_topk",
                                       "speculative_num_draft_tokens"]), min_size=1, unique=True))
def test_null_draft_params_with_an_algorithm_are_the_keys_left_out(algo, nulls):
    """A null steps, topk or window is SGLang's unset: an EAGLE server given all three null
    gets SGLang's own choice (``_auto_choose_speculative_params``), a DSpark server given a
    null window its fallback window; both were refused ('must be >= 2')."""
    s = ServerArgs(speculative_algorithm=algo, **dict.fromkeys(nulls))
    assert s == ServerArgs(speculative_algorithm=algo)
    assert s.model_fields_set == {"speculative_algorithm"}


@settings(max_examples=10, deadline=None)
@given(algo=st.sampled_from(["eagle", "EAGLE3", "nextn", "mtp", "standalone"]),
       given_keys=st.sampled_from([("speculative_num_draft_tokens",), ("speculative_eagle_topk",),
                                   ("speculative_eagle_topk", "speculative_num_draft_tokens")]),
       steps_given=st.booleans())
def test_a_chain_given_a_window_or_topk_without_its_steps_is_refused_as_sglang_refuses_it(algo, given_keys,
                                                                                          steps_given):
    """sglang 0.5.23 arg_groups/speculative_hook.py _handle_eagle_family asserts topk and draft
    tokens unset when speculative_num_steps is, so such a server does not start: it ran here with
    steps = window - 1 and a warning. Refused, naming the keys and the rule; with the steps
    given, it runs."""
    from pydantic import ValidationError
    from specsched.sim.config import validation_error

    sc = load_scenario(ROOT / "scenarios" / "batch8-ll.yaml")
    server = {k: v for k, v in sc.server.model_dump(exclude_unset=True).items()
              if k not in ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")}
    values = {"speculative_num_draft_tokens": 8, "speculative_eagle_topk": 4}
    server.update(speculative_algorithm=algo, **{k: values[k] for k in given_keys})
    if steps_given:   # the three, as SGLang starts it
        server.update(speculative_num_steps=3, speculative_num_draft_tokens=8)
    data = {**sc.model_dump(exclude_unset=True), "server": server,
            "acceptance": {"per_position_rates": [0.7], "window": None}}
    if steps_given:
        assert sc.model_validate(data).server.speculative_num_steps == 3
        return
    with pytest.raises(ValidationError) as e:
        sc.model_validate(data)
    err = validation_error("s.yaml", e.value, data)
    assert err.key == f"server.{given_keys[0]}" and err.value == values[given_keys[0]], err
    assert "without server.speculative_num_steps" in err.allowed and "_handle_eagle_family" in err.allowed


def test_the_testers_partial_eagle_scenario_exits_2_in_one_line(tmp_path, capsys):
    """EAGLE with speculative_eagle_topk 4 and speculative_num_draft_tokens 8 but no
    speculative_num_steps ran with 7 steps and a warning; SGLang 0.5.23 does not start it."""
    from specsched.cli import main

    path = tmp_path / "eagle-partial.yaml"
    path.write_text("""name: eagle-partial
profile: h200-1b
server: {speculative_algorithm: EAGLE, speculative_eagle_topk: 4, speculative_num_draft_tokens: 8}
acceptance: {mean_accept_length: 3.0}
workload: {kind: closed_loop, concurrency: 4, num_requests: 16, input_len: {kind: fixed, value: 512},
           output_len: {kind: fixed, value: 256}}
""")
    assert main(["run", str(path), "-q", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "server.speculative_eagle_topk = 4" in err[0], err
    assert "speculative_num_draft_tokens 8" in err[0] and "speculative_num_steps" in err[0]
    assert "Traceback" not in err[0] and not (tmp_path / "o").exists()


def test_a_tree_of_fewer_drafts_than_steps_runs_and_accepts_no_deeper_than_its_drafts():
    """SGLang 0.5.23 starts an EAGLE tree of 5 steps, topk 4 and 3 draft tokens
    (_handle_eagle_family checks no such bound; organize_draft_results keeps the 2 best
    candidates): it was refused here as 'a chain proposes one token per step'. It drafts 5
    serial steps and verifies 3 tokens, so at most 3 are committed per verify, and a longer
    stated acceptance says the drafts, not the steps, cut it."""
    from specsched.sim.engine import SimEngine

    sc = _eagle(5, 3, 4, [0.8, 0.8])
    sc = sc.model_validate({**sc.model_dump(), "acceptance": {"per_position_rates": [0.8] * 7, "window": 8}})
    assert sc.server.accept_window == 3 and sc.server.num_draft_forwards == 5
    eng = SimEngine(sc)
    r = eng.run()
    per_verify = (r.requests["output_len"] - 1) / r.requests["spec_cycles"]
    assert (per_verify <= 3 + 1e-9).all() and r.summary["accept_length"] > 2.0
    lines = [n.line() for n in eng.range_notes()]
    assert any("speculative_num_draft_tokens = 3" in x and "fewer drafts than its steps" in x for x in lines), lines
