"""specsched.analysis.overrides: dotted-key overrides, grid parsing, validation errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.analysis.overrides import (
    check_key,
    load_scenario_with_overrides,
    nest,
    parse_grid,
    parse_overrides,
    split_values,
)
from specsched.analysis.synthetic import write_demo_scenario
from specsched.sim.errors import ConfigError

from tests.conftest import ROOT


@pytest.fixture()
def scenario(tmp_path):
    return write_demo_scenario(tmp_path / "demo.yaml")


def test_split_values_respects_brackets_and_quotes():
    assert split_values("1, 2,[3, 4],'a,b', {x: 1, y: 2}") == ["1", "2", "[3, 4]", "'a,b'", "{x: 1, y: 2}"]


def test_parse_grid_yaml_types_and_order():
    grid = parse_grid(["server.chunked_prefill_size=8192,16384", "server.enable_mixed_chunk=true,false",
                       "acceptance.per_position_rates=[0.9, 0.8],[0.5]", "arm=base,stream_wait"])
    assert grid == {
        "server.chunked_prefill_size": [8192, 16384],
        "server.enable_mixed_chunk": [True, False],
        "acceptance.per_position_rates": [[0.9, 0.8], [0.5]],
        "arm": ["base", "stream_wait"],
    }


@pytest.mark.parametrize("items", [["noequals"], ["a=1", "a=2"], ["a="], ["a=1,,2"], ["a=1,1"], ["=3"]])
def test_parse_grid_rejects_bad_axes(items):
    with pytest.raises(ConfigError):
        parse_grid(items)


def test_parse_overrides_and_nest():
    ov = parse_overrides(["server.max_running_requests=16", "workload.output_len.value=8", "seed=4"])
    assert nest(ov) == {"server": {"max_running_requests": 16}, "workload": {"output_len": {"value": 8}}, "seed": 4}
    with pytest.raises(ConfigError, match="conflicts"):
        nest({"server": 1, "server.x": 2})


def test_override_applies_on_top_of_the_arm(scenario):
    sc = load_scenario_with_overrides(scenario, "stream_wait", ["server.chunked_prefill_size=2048",
                                                                "workload.num_requests=3"])
    assert sc.arm == "stream_wait"
    assert sc.server.sync_mode.value == "stream_wait"  # the arm's setting is kept
    assert sc.server.chunked_prefill_size == 2048
    assert sc.workload.num_requests == 3
    assert sc.workload.input_len.value == 1024  # untouched sibling keys survive
    # an override wins over the arm
    sc2 = load_scenario_with_overrides(scenario, "stream_wait", {"server.sync_mode": "host_block"})
    assert sc2.server.sync_mode.value == "host_block"
    assert load_scenario_with_overrides(scenario, "base", None).server.chunked_prefill_size == 4096


def test_unknown_key_names_the_key_and_the_allowed_ones(scenario):
    with pytest.raises(ConfigError) as e:
        load_scenario_with_overrides(scenario, "base", {"server.chunked_prefil_size": 1})
    assert e.value.key == "server.chunked_prefil_size"
    assert "chunked_prefill_size" in e.value.allowed
    with pytest.raises(ConfigError, match="not a mapping"):
        check_key("server.max_running_requests.x")
    with pytest.raises(ConfigError, match="cannot set"):
        check_key("arms.x")
    check_key("reference.base.output_throughput")  # free-form mapping


@pytest.mark.parametrize(("given", "home"), [("chunked_prefill_size", "server.chunked_prefill_size"),
                                             ("num_requests", "workload.num_requests"),
                                             ("mean_accept_length", "acceptance.mean_accept_length")])
def test_a_block_key_set_without_its_block_names_the_dotted_key(given, home):
    """``--set chunked_prefill_size=4096`` (the block left out) names the key it meant,
    ``server.chunked_prefill_size``, not only the top-level keys; a near typo of a top-level
    key still gets that key, and a key of no block gets no guess."""
    with pytest.raises(ConfigError) as e:
        check_key(given, value=1)
    assert f"did you mean {home!r}?" in e.value.allowed, e.value.allowed
    with pytest.raises(ConfigError) as e:
        check_key("sed", value=1)
    assert "did you mean 'seed'?" in e.value.allowed
    with pytest.raises(ConfigError) as e:
        check_key("zzzz_qqqq", value=1)
    assert "did you mean" not in e.value.allowed


def test_bad_value_is_a_config_error_with_the_key(scenario):
    with pytest.raises(ConfigError) as e:
        load_scenario_with_overrides(scenario, "base", ["server.max_running_requests=0"])
    assert e.value.key == "server.max_running_requests"
    assert e.value.value == 0
    with pytest.raises(ConfigError) as e2:
        load_scenario_with_overrides(scenario, "base", {"server.sync_mode": "sometimes"})
    assert e2.value.key == "server.sync_mode"
    with pytest.raises(ConfigError):
        load_scenario_with_overrides(scenario, "no_such_arm", {})


def test_a_bare_inf_is_infinity_as_bench_serving_spells_it():
    """``--set workload.request_rate=inf`` (bench_serving's ``--request-rate inf``) is the float
    infinity, as YAML's ``.inf``; a quoted 'inf' stays a string."""
    import math

    from specsched.analysis.overrides import parse_overrides

    got = parse_overrides(["workload.request_rate=inf", "a=Infinity", "b=+INF", "c=.inf", "d='inf'"])
    assert all(math.isinf(got[k]) and got[k] > 0 for k in ("workload.request_rate", "a", "b", "c"))
    assert got["d"] == "inf"


@settings(max_examples=20, deadline=None)
@given(conversations=st.integers(1, 50), turns=st.integers(1, 8), scenario=st.sampled_from(["multi-turn-example", "agentic-c128"]))
def test_a_multi_turn_what_if_derives_the_request_count_again(conversations, turns, scenario):
    """INV: after ``--set`` of the conversations or turns, num_requests = conversations x
    turns, whether the file left the count out (multi-turn-example) or stated the old
    product (agentic-c128): the loaded count used to be carried into the override and
    refused ("num_requests must equal it")."""
    sc = load_scenario_with_overrides(ROOT / "scenarios" / f"{scenario}.yaml", "base", {
        "workload.multi_turn.num_conversations": conversations, "workload.multi_turn.num_turns": turns})
    assert sc.workload.num_requests == conversations * turns


def test_a_stated_count_that_is_not_the_product_is_still_refused():
    with pytest.raises(ConfigError, match=r"workload.num_requests = 7: multi_turn makes 20 requests .* set 20 "
                                          r"\(fewer requests: set workload.multi_turn.num_conversations\)$"):
        load_scenario_with_overrides(ROOT / "scenarios" / "multi-turn-example.yaml", "base", {
            "workload.multi_turn.num_conversations": 4, "workload.num_requests": 7})
    with pytest.raises(ConfigError, match="num_requests must equal it"):
        load_scenario_with_overrides(ROOT / "scenarios" / "multi-turn-example.yaml", "base", {
            "workload": {"num_requests": 7}})


UNREAD_CASES = [
    ("batch8-ll", "server.swa_full_tokens_ratio", 0.3),
    ("batch8-ll", "server.swa_eviction_interval", 7),
    ("batch8-ll", "server.dp_spec_prefill_coordination", True),
    ("batch8-ll", "server.num_reserved_decode_tokens", 3),
    ("batch8-ll", "server.disaggregation_decode_extra_slots", 3),
    ("batch8-ll", "server.max_delay_passes", 1),
    ("batch8-ll", "workload.max_concurrency", 2),
    ("batch8-ll", "workload.request_rate", 0.5),
    ("batch8-ll", "workload.priorities", [1, 9]),
    ("poisson8b-sharegpt", "workload.concurrency", 2),
    ("poisson8b-sharegpt", "acceptance.mean_accept_length", 1.0),
    ("poisson8b-sharegpt", "server.min_free_slots", 60),
    # the drafter's shape, the publish wait and the DSpark slot expansion without speculation
    ("poisson8b-fixed", "server.speculative_num_draft_tokens", 6),
    ("poisson8b-fixed", "server.speculative_eagle_topk", 4),
    ("poisson8b-fixed", "server.speculative_num_steps", 3),
    ("poisson8b-fixed", "server.sync_mode", "host_block"),
    ("poisson8b-fixed", "server.prefill_slot_expansion_sync", True),
]


@pytest.mark.parametrize("key", ["workload.input_len.range_ratio", "workload.output_len.range_ratio"])
def test_a_random_length_ratio_set_on_fixed_lengths_is_refused_naming_the_key(key):
    """A range_ratio on a fixed length distribution is a key the kind does not read: refused
    in one line (sim.config length distributions), not run with a "changes nothing" note."""
    from specsched.sim.errors import ConfigError

    path = ROOT / "scenarios" / "poisson8b-fixed.yaml"
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_scenario_with_overrides(path, "base", {"workload.num_requests": 6, key: 0.3})


@pytest.mark.parametrize(("name", "key", "value"), UNREAD_CASES)
def test_a_note_names_an_override_only_when_the_run_does_not_move(name, key, value):
    """INV: an override that gets the "changes nothing" note leaves every request's timing
    exactly as the run without it (the note is never given for a key the run reads), and
    one the run reads gets none. Before, such what-ifs returned the unchanged run silently
    (a poisson run's workload.concurrency, a swept swa_full_tokens_ratio without a window)."""
    from specsched.analysis.overrides import unread_overrides
    from specsched.sim.engine import run_scenario

    path = ROOT / "scenarios" / f"{name}.yaml"
    small = {"workload.num_requests": 6}
    plain = load_scenario_with_overrides(path, "base", small)
    moved = load_scenario_with_overrides(path, "base", {**small, key: value})
    notes = unread_overrides(moved, [key, "workload.num_requests"])
    assert len(notes) == 1 and notes[0].startswith(f"note: {key} changes nothing")
    a, b = run_scenario(plain).requests, run_scenario(moved).requests
    assert a[["start_s", "first_token_s", "finish_s"]].equals(b[["start_s", "first_token_s", "finish_s"]])


def test_a_key_one_arm_or_one_grid_point_reads_gets_no_note():
    from specsched.analysis.overrides import unread_everywhere

    path = ROOT / "scenarios" / "batch8-ll.yaml"
    over = {"server.swa_full_tokens_ratio": 0.5, "workload.num_requests": 6}
    assert unread_everywhere(path, [("base", over)], over)
    assert not unread_everywhere(path, [("base", over), ("base", {**over, "server.sliding_window_size": 128})], over)
    assert not unread_overrides_of(path, {"server.sliding_window_size": 128, "server.swa_full_tokens_ratio": 0.5})


def unread_overrides_of(path, over):
    from specsched.analysis.overrides import unread_overrides

    return unread_overrides(load_scenario_with_overrides(path, "base", over), over)


def test_a_disaggregated_role_that_drafts_reads_the_acceptance():
    """Speculative decoding on a role's server only (the decode servers) reads acceptance: no note."""
    base = {"server.speculative_algorithm": "none", "server.speculative_num_draft_tokens": 1,
            "acceptance.mean_accept_length": 3.0}
    path = ROOT / "scenarios" / "agentic-pd-c128.yaml"
    decode = {"max_total_num_tokens": 4_000_000}
    assert unread_overrides_of(path, {**base, "server.disaggregation.decode.server": decode})
    drafting = {**decode, "speculative_algorithm": "dspark", "speculative_num_draft_tokens": 6}
    assert not unread_overrides_of(path, {**base, "server.disaggregation.decode.server": drafting})


def test_a_multi_turn_request_rate_is_read_and_gets_no_note():
    """A multi_turn workload's request_rate starts its conversations at that rate (the
    run moves), so the "changes nothing" note must not be given. Before, every kind but
    poisson got it: `--set workload.request_rate=2` on a multi-turn scenario printed
    "changes nothing in this run" while the run's duration and TTFTs changed."""
    from specsched.sim.engine import run_scenario

    path = ROOT / "scenarios" / "multi-turn-example.yaml"
    over = {"workload.request_rate": 0.5}
    assert not unread_overrides_of(path, over)
    a = run_scenario(load_scenario_with_overrides(path, "base")).requests
    b = run_scenario(load_scenario_with_overrides(path, "base", over)).requests
    assert not a["start_s"].equals(b["start_s"])


def test_a_scenario_files_workload_key_its_kind_does_not_read_gets_the_note(tmp_path, capsys, monkeypatch):
    """A scenario file that sets a workload key its kind does not read (a burst with a
    request_rate and a concurrency) gets the note ``--set`` gets, naming the file: it ran
    silently as a burst. A file whose keys all count gets none."""
    from specsched.cli import main

    monkeypatch.chdir(tmp_path)
    body = ("name: b\nprofile: h200-1b\nserver: {speculative_algorithm: none}\nworkload:\n  kind: {kind}\n"
            "  num_requests: 3\n  request_rate: 5\n  concurrency: 2\n"
            "  input_len: {{kind: fixed, value: 16}}\n  output_len: {{kind: fixed, value: 4}}\n")
    (tmp_path / "b.yaml").write_text(body.replace("{kind}", "burst").replace("{{", "{").replace("}}", "}"))
    assert main(["run", "b.yaml", "--out", "o1"]) == 0
    err = capsys.readouterr().err
    assert "note: b.yaml: workload.request_rate changes nothing in this run" in err
    assert "note: b.yaml: workload.concurrency changes nothing in this run" in err
    (tmp_path / "m.yaml").write_text(body.replace("{kind}", "multi_turn").replace("{{", "{").replace("}}", "}")
                                     .replace("  input_len: {kind: fixed, value: 16}\n",
                                              "  multi_turn: {num_conversations: 2, num_turns: 2, "
                                              "first_prompt_len: {kind: fixed, value: 16}, "
                                              "user_len: {kind: fixed, value: 8}}\n").replace("num_requests: 3", "num_requests: 4"))
    assert main(["run", "m.yaml", "--out", "o2"]) == 0
    assert "changes nothing" not in capsys.readouterr().err


def test_run_seed_adds_no_note_for_workload_keys_the_file_does_not_set(tmp_path, capsys, monkeypatch):
    """``specsched run S --seed N`` on a closed-loop file that sets neither request_rate,
    max_concurrency nor priorities prints no "changes nothing" note for them (it named all
    three: the seed's copy of the scenario read every key as set in the file); a key the file
    does set still gets its note with --seed."""
    from specsched.cli import main

    monkeypatch.chdir(tmp_path)
    body = ("name: c\nprofile: h200-1b\nserver: {speculative_algorithm: none}\nworkload:\n  kind: closed_loop\n"
            "  num_requests: 3\n  concurrency: 2\n"
            "  input_len: {kind: fixed, value: 16}\n  output_len: {kind: fixed, value: 4}\n")
    (tmp_path / "c.yaml").write_text(body)
    assert main(["run", "c.yaml", "--seed", "3", "--out", "o1"]) == 0
    assert "changes nothing" not in capsys.readouterr().err
    (tmp_path / "r.yaml").write_text(body.replace("  concurrency: 2\n", "  concurrency: 2\n  request_rate: 5\n"))
    assert main(["run", "r.yaml", "--seed", "3", "--out", "o2"]) == 0
    err = capsys.readouterr().err
    assert "note: r.yaml: workload.request_rate changes nothing in this run" in err
    assert "max_concurrency" not in err and "priorities" not in err


def test_an_unknown_override_key_names_the_override_not_only_the_file():
    """``--set server.max_runing_requests=3`` was reported as the scenario file's mistake."""
    from specsched.analysis.overrides import load_scenario_with_overrides

    with pytest.raises(ConfigError, match=r"\(--set server\.max_runing_requests\)"):
        load_scenario_with_overrides(ROOT / "scenarios" / "batch1-ll.yaml", overrides=["server.max_runing_requests=3"])


@pytest.mark.parametrize("how", ["set", "file"])
def test_a_trace_workloads_length_keys_get_the_note(tmp_path, capsys, monkeypatch, how):
    """A trace gives each request's prompt and output length: an output_len set on a trace
    workload (to cap the outputs, as bench_serving's --sharegpt-output-len does a dataset's)
    ran with the trace's lengths, without a word."""
    from specsched.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.csv").write_text("timestamp,input_length,output_length\n0,16,40\n1,16,40\n")
    extra = "  output_len: {kind: fixed, value: 4}\n  input_len: {kind: fixed, value: 8}\n" if how == "file" else ""
    (tmp_path / "s.yaml").write_text("name: s\nprofile: h200-1b\nserver: {speculative_algorithm: none}\n"
                                     f"workload:\n  kind: trace\n  trace: {{path: t.csv}}\n{extra}")
    argv = ["run", "s.yaml", "--out", "o"]
    if how == "set":
        argv += ["--set", "workload.output_len={kind: fixed, value: 4}", "--set", "workload.input_len.value=8"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    where = "s.yaml: " if how == "file" else ""
    for key in ("workload.output_len", "workload.input_len" if how == "file" else "workload.input_len.value"):
        assert err.count("changes nothing") == 2, err
        assert f"note: {where}{key} changes nothing in this run" in err and "the trace gives" in err, err


@pytest.mark.parametrize("profile, noted", [("h200-1b", True), ("h100-llama-3.1-8b-eagle3-analytic", False)])
def test_a_memory_fraction_the_profile_cannot_read_is_named(tmp_path, capsys, profile, noted):
    """server.mem_fraction_static sizes the KV pool only from a profile's hardware block: with a
    measured profile that has none it was accepted and ignored without a word."""
    from specsched.cli import main

    sc = tmp_path / "m.yaml"
    sc.write_text("name: m\nprofile: h200-1b\nserver: {max_running_requests: 4}\nworkload: {kind: burst, num_requests: 4, "
                  "input_len: {kind: fixed, value: 40}, output_len: {kind: fixed, value: 8}}\n")
    assert main(["run", str(sc), "-q", "--set", f"profile={profile}", "--set", "server.mem_fraction_static=0.5",
                 "--out", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    assert ("note: server.mem_fraction_static changes nothing in this run" in err) == noted, err


def test_a_chain_window_its_draft_steps_fix_gets_the_note():
    """A chain drafter without a tree verifies speculative_num_steps + 1 positions: sglang 0.5.23
    arg_groups/speculative_hook.py _handle_eagle_family resets speculative_num_draft_tokens to
    that when speculative_eagle_topk is 1 (with a warning). A sweep of the window at topk 1 with
    the steps given returned the same run at every point, silently. INV: the note is given only
    where the run does not move; with a tree the window is read (a chain's window without its
    steps is refused, as SGLang refuses it)."""
    from specsched.analysis.overrides import unread_overrides
    from specsched.sim.engine import run_scenario

    path = ROOT / "scenarios" / "public" / "eagle3-l8-h100-b1.yaml"
    small = {"workload.num_requests": 2, "workload.output_len.value": 32}
    key = "server.speculative_num_draft_tokens"
    plain = load_scenario_with_overrides(path, "eagle3_chain", small)
    moved = load_scenario_with_overrides(path, "eagle3_chain", {**small, key: 8})
    (note,) = unread_overrides(moved, [key])
    assert note.startswith(f"note: {key} changes nothing") and "speculative_num_steps + 1" in note
    a, b = run_scenario(plain).requests, run_scenario(moved).requests
    assert a[["start_s", "first_token_s", "finish_s"]].equals(b[["start_s", "first_token_s", "finish_s"]])
    # a tree reads its node count; a chain given no steps is refused (_handle_eagle_family)
    assert unread_overrides(load_scenario_with_overrides(path, "eagle3", {**small, key: 16}), [key]) == []
    no_steps = {**small, "server.speculative_num_steps": None, key: 6}
    with pytest.raises(ConfigError, match="without server.speculative_num_steps"):
        load_scenario_with_overrides(path, "eagle3_chain", no_steps)


def test_a_refusal_a_set_value_causes_at_hardware_resolution_says_with_overrides(tmp_path):
    """A value refused only once the profile's hardware is known (a --set draft tree over pages
    of 16 on MI300X, whose aiter attention SGLang refuses it on) named the scenario file alone,
    as if the file held it; the other refusals of an override say "(with overrides)"."""
    from specsched.sim.analytic.cli import write_analytic_profile
    from specsched.sim.analytic.gpus import load_gpu
    from specsched.sim.analytic.models import load_model
    from specsched.sim.analytic.writer import build_profile

    write_analytic_profile(build_profile(load_model("llama-3.1-8b"), load_gpu("MI300X"), 1), tmp_path / "p.yaml")
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nprofile: p.yaml\nserver: {speculative_algorithm: eagle, page_size: 16, "
                    "speculative_num_steps: 3, speculative_eagle_topk: 1, speculative_num_draft_tokens: 4}\n"
                    "acceptance: {mean_accept_length: 2.0}\n"
                    "workload: {kind: burst, num_requests: 2, input_len: {kind: fixed, value: 16}, "
                    "output_len: {kind: fixed, value: 4}}\n")
    load_scenario_with_overrides(path, "base")
    tree = {"server.speculative_eagle_topk": 4, "server.speculative_num_draft_tokens": 8}
    with pytest.raises(ConfigError) as e:
        load_scenario_with_overrides(path, "base", tree)
    assert e.value.file == f"{path} (with overrides)" and e.value.key == "server.speculative_eagle_topk"


def test_a_run_time_refusal_of_a_set_value_says_with_overrides(tmp_path):
    """The checks made when the run starts (sim/limits.py check_fits: a DP-attention rank count
    that does not divide the profile's TP group, SGLang's tp_size % dp_size assert) named the
    scenario file alone when ``--set profile=`` caused it, as if the file's values could not run;
    they name it "(with overrides)" as the load-time refusals do. Without overrides, the file."""
    from specsched.sim.analytic.cli import write_analytic_profile
    from specsched.sim.analytic.gpus import load_gpu
    from specsched.sim.analytic.models import load_model
    from specsched.sim.analytic.writer import build_profile
    from specsched.sim.limits import check_fits

    for tp in (1, 2):
        write_analytic_profile(build_profile(load_model("llama-3.1-8b"), load_gpu("H200"), tp), tmp_path / f"p{tp}.yaml")
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nprofile: p2.yaml\nserver: {dp_size: 2, enable_dp_attention: true}\n"
                    "workload: {kind: burst, num_requests: 2, input_len: {kind: fixed, value: 16}, "
                    "output_len: {kind: fixed, value: 4}}\n")
    check_fits(load_scenario_with_overrides(path, "base"))
    with pytest.raises(ConfigError) as e:
        check_fits(load_scenario_with_overrides(path, "base", {"profile": "p1.yaml"}))
    assert e.value.file == f"{path} (with overrides)" and e.value.key == "server.dp_size"
    path.write_text(path.read_text().replace("p2.yaml", "p1.yaml"))
    with pytest.raises(ConfigError) as e:
        check_fits(load_scenario_with_overrides(path, "base"))
    assert e.value.file == str(path)


def test_priorities_are_read_when_a_disaggregated_role_schedules_by_priority():
    """A decode (or prefill) server of a disaggregated deployment that sets
    enable_priority_scheduling on its own server reads workload.priorities: no "changes
    nothing" note. Before, only the top-level server's flag was read and the note was given."""
    path = ROOT / "scenarios" / "agentic-pd-c128.yaml"
    base = {"server.enable_priority_scheduling": False, "workload.priorities": [1, 9]}
    assert unread_overrides_of(path, base)
    for role in ("prefill", "decode"):
        over = {**base, f"server.disaggregation.{role}.server": {"enable_priority_scheduling": True}}
        assert not unread_overrides_of(path, over), role


@pytest.mark.parametrize("key", ["value", "kind", "range_ratio"])
def test_a_turn_count_distributions_keys_can_be_set(key):
    """workload.multi_turn.num_turns is a count or a length distribution (the schema lists
    its kind, value, range_ratio and path): ``--set workload.multi_turn.num_turns.value=4``
    (or a grid axis on it) was refused as 'num_turns is not a mapping'."""
    check_key(f"workload.multi_turn.num_turns.{key}")
    with pytest.raises(ConfigError, match="allowed: kind, value, range_ratio, path"):
        check_key("workload.multi_turn.num_turns.nosuch")
    sc = load_scenario_with_overrides(ROOT / "scenarios" / "multi-turn-example.yaml", "base", {
        "workload.multi_turn.num_turns.value": 4})
    assert sc.workload.multi_turn.num_turns.value == 4


def test_every_key_the_schema_lists_can_be_named_by_an_override():
    """Each key of ``specsched schema`` (docs/scenario-reference.md) is one --set or a grid
    axis can name, but the scenario's name and its arms."""
    from specsched.sim.schema import keys

    refused = []
    for k in keys():
        name = k if isinstance(k, str) else getattr(k, "key", None) or k[0]
        try:
            check_key(name)
        except ConfigError:
            refused.append(name)
    assert refused == ["name", "arms"]


def test_a_files_acceptance_without_speculation_gets_the_note(tmp_path, capsys, monkeypatch):
    """A file that states an acceptance block but leaves
    server.speculative_algorithm at none ran without speculation, without a word; the note
    names the file and the block. A file that turns speculation on gets none, and an
    acceptance key given with --set keeps its own note (not a second one for the file)."""
    from specsched.cli import main

    monkeypatch.chdir(tmp_path)
    body = ("name: a\nprofile: h200-1b\nserver: {max_running_requests: 4}\n"
            "acceptance: {mean_accept_length: 2.5}\nworkload:\n  kind: burst\n  num_requests: 2\n"
            "  input_len: {kind: fixed, value: 16}\n  output_len: {kind: fixed, value: 4}\n")
    (tmp_path / "a.yaml").write_text(body)
    assert main(["run", "a.yaml", "--out", "o1"]) == 0
    err = capsys.readouterr().err
    assert "note: a.yaml: acceptance changes nothing in this run" in err
    assert "speculative_algorithm is none" in err
    assert main(["run", "a.yaml", "--set", "acceptance.mean_accept_length=2", "--out", "o2"]) == 0
    err = capsys.readouterr().err
    assert "note: acceptance.mean_accept_length changes nothing in this run" in err
    assert "note: a.yaml: acceptance" not in err
    (tmp_path / "e.yaml").write_text(body.replace("{max_running_requests: 4}",
                                                  "{speculative_algorithm: dspark, speculative_num_draft_tokens: 6}"))
    assert main(["run", "e.yaml", "--out", "o3"]) == 0
    assert "changes nothing" not in capsys.readouterr().err
