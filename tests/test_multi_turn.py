"""Multi-turn conversations (workload kind ``multi_turn``) and the prefix cache's inserts:
after every prefill chunk (0.5.23 ``checkpoint_kv_cache`` -> ``RadixCache.checkpoint``) and,
with the output, when a request finishes (``release_kv_cache(..., checkpoint=True)``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from specsched.sim.config import LengthDist, MultiTurnConfig, Scenario
from specsched.sim.engine import SimEngine
from specsched.sim.prefix_workload import multi_turn_conversations, think_times

SERVER = dict(max_running_requests=64, max_total_num_tokens=2_600_000, chunked_prefill_size=16384,
              max_prefill_tokens=16384, speculative_algorithm="dspark", speculative_num_draft_tokens=6)


def scenario(mt=None, workload=None, server=None) -> Scenario:
    m = dict(num_conversations=6, num_turns=4, first_prompt_len=dict(kind="fixed", value=6000),
             user_len=dict(kind="uniform", value=1500, range_ratio=0.2), think_time_s=0.5)
    w = dict(kind="multi_turn", concurrency=3, output_len=dict(kind="uniform", value=200, range_ratio=0.5),
             multi_turn={**m, **(mt or {})})
    return Scenario.model_validate(dict(name="mt", profile="mi355x-dsv41-flash-tp4", seed=1,
                                        server={**SERVER, **(server or {})},
                                        acceptance=dict(mean_accept_length=3.2), workload={**w, **(workload or {})}))


@settings(max_examples=25, deadline=None)
@given(turns=st.integers(1, 5), conv=st.integers(1, 4), sys_len=st.integers(0, 50), seed=st.integers(0, 99))
def test_inv_multiturn_history_each_turn_resends_the_last_prompt_and_output(turns, conv, sys_len, seed):
    """INV-MULTITURN-HISTORY: turn k's prompt = turn k-1's prompt + its output + new text."""
    cfg = MultiTurnConfig(num_conversations=conv, num_turns=turns, system_prompt_len=sys_len,
                          first_prompt_len=LengthDist(kind="uniform", value=40, range_ratio=0.1),
                          user_len=LengthDist(kind="uniform", value=30, range_ratio=0.1))
    outs = np.random.default_rng(seed).integers(1, 20, size=conv * turns)
    convs = multi_turn_conversations(cfg, outs, seed)
    sys0 = convs[0][0].tokens[:sys_len]
    for c, specs in enumerate(convs):
        assert [s.index for s in specs] == [c * turns + t for t in range(turns)]
        assert np.array_equal(specs[0].tokens[:sys_len], sys0)
        for s in specs:
            assert len(s.tokens) == s.input_len + s.output_len and s.output_len == outs[s.index]
        for a, b in zip(specs, specs[1:], strict=False):
            assert b.input_len > a.input_len + a.output_len
            assert np.array_equal(b.tokens[: len(a.tokens)], a.tokens)


def test_each_later_turn_hits_its_whole_history_and_computes_only_the_new_text():
    # pool large, no shared system prompt: turn k finds turn k-1's prompt and output (all
    # but the last output token, whose KV the finished request never computed)
    sc = scenario()
    eng = SimEngine(sc)
    res = eng.run()
    assert res.summary["completed"] == 24
    specs = eng.specs
    hits = sum(specs[i - 1].input_len + specs[i - 1].output_len - 1 for i in range(len(specs)) if i % 4)
    assert eng.sched.cache_hit_tokens == hits
    assert eng.sched.cache_input_tokens == sum(s.input_len for s in specs) - hits
    assert res.summary["cache_hit_rate"] == pytest.approx(hits / sum(s.input_len for s in specs))


def test_output_tokens_enter_the_cache_when_a_request_finishes():
    # one turn per conversation: only the finish insert can put output tokens in the tree;
    # each request's prompt and all but its last output token are there afterwards
    eng = SimEngine(scenario({"num_turns": 1}))
    eng.run()
    for s in eng.specs:
        matched, _ = eng.sched.cache.match_prefix(s.tokens)
        assert matched == s.input_len + s.output_len - 1
    assert eng.sched.cache.protected_size == 0  # finished requests hold nothing


def test_think_time_keeps_a_conversation_out_of_the_server():
    quick = SimEngine(scenario({"think_time_s": 0.0})).run()
    slow = SimEngine(scenario({"think_time_s": 5.0})).run()
    rq, rs = quick.requests.sort_values("rid"), slow.requests.sort_values("rid")
    gaps = (rs["start_s"].to_numpy()[1:] - rs["finish_s"].to_numpy()[:-1])[np.arange(1, 24) % 4 != 0]
    assert gaps.min() >= 5.0 - 1e-9
    assert slow.summary["duration"] > quick.summary["duration"] + 3 * 5.0
    assert (rq["start_s"].to_numpy()[1:] - rq["finish_s"].to_numpy()[:-1])[np.arange(1, 24) % 4 != 0].max() < 1e-6


def test_exponential_think_times_have_the_mean_and_are_seeded():
    cfg = MultiTurnConfig(num_conversations=400, num_turns=6, first_prompt_len=LengthDist(value=10),
                          user_len=LengthDist(value=5), think_time_s=2.0, think_time_dist="exponential")
    a, b = think_times(cfg, 3), think_times(cfg, 3)
    assert a.shape == (400, 5) and np.array_equal(a, b)
    assert a.mean() == pytest.approx(2.0, rel=0.05)


def test_a_chunk_enters_the_cache_before_the_prompt_completes():
    # two requests sharing a 40K-token system prompt, sent together: the second is admitted
    # with the first's last chunk and finds the chunks already computed (per-chunk insert);
    # with an insert only at the end of the prompt it would find nothing
    sc = Scenario.model_validate(dict(
        name="chunks", profile="mi355x-dsv41-flash-tp4", seed=1, server=SERVER,
        acceptance=dict(mean_accept_length=3.2),
        workload=dict(kind="burst", num_requests=2, output_len=dict(kind="fixed", value=8),
                      shared_prefix=dict(num_groups=1, prompts_per_group=2, system_prompt_len=40000,
                                         question_len=100))))
    eng = SimEngine(sc)
    eng.run()
    assert eng.sched.cache_hit_tokens >= 16384


@pytest.mark.parametrize("change, key", [
    ({"workload": {"input_len": {"kind": "fixed", "value": 5}}}, "input_len"),
    ({"workload": {"num_requests": 7}}, "num_requests"),
    ({"workload": {"concurrency": None}}, "concurrency"),
    ({"mt": {"think_time_s": -1}}, "think_time_s"),
    ({"mt": {"num_turns": 0}}, "num_turns"),
])
def test_bad_multi_turn_blocks_are_refused(change, key):
    with pytest.raises(ValidationError, match=key):
        scenario(change.get("mt"), change.get("workload"))


@pytest.mark.parametrize("extra, key", [
    ({"request_rate": 2.0, "burstiness": 0.5}, "burstiness"),
    ({"request_rate": 2.0, "normalize_arrivals": True}, "normalize_arrivals"),
    ({"max_concurrency": 2}, "max_concurrency"),
    ({"trace": {"path": "t.jsonl", "layout": "mooncake"}}, "trace"),
])
def test_keys_multi_turn_does_not_read_are_refused(extra, key):
    """With request_rate the conversations start at exponential gaps (bench_serving's
    get_request): a burstiness, normalized arrivals, a max_concurrency (the slots are
    ``concurrency``) or a trace block were accepted and ignored, the run not the one asked for."""
    with pytest.raises(ValidationError, match=key):
        scenario(workload=extra)


def test_multi_turn_block_needs_its_kind():
    with pytest.raises(ValidationError, match="multi_turn"):
        scenario(workload={"kind": "closed_loop"})


def test_round_robin_dp_ranks_leave_most_histories_on_other_ranks():
    # 16 DP ranks behind round-robin dispatch: a later turn finds its history on this rank
    # with probability 1/16; every turn still finds the shared system prompt
    mt = {"num_conversations": 40, "num_turns": 6, "system_prompt_len": 3000, "dp_ranks": 16}
    eng = SimEngine(scenario(mt, {"concurrency": 4}))
    eng.run()
    specs = eng.specs
    later = [i for i in range(len(specs)) if i % 6]
    full = sum(specs[i - 1].input_len + specs[i - 1].output_len - 1 for i in later)
    sys_hits = 3000 * (len(specs) - 1)
    hits = eng.sched.cache_hit_tokens
    assert sys_hits <= hits < sys_hits + 0.3 * full
    one = SimEngine(scenario({**mt, "dp_ranks": 1}, {"concurrency": 4}))
    one.run()
    assert one.sched.cache_hit_tokens >= full


@pytest.mark.parametrize("server", [
    {"enable_dp_attention": True, "dp_size": 2},
    {"disaggregation": {"prefill": {"instances": 1, "server": {"enable_dp_attention": True, "dp_size": 4}},
                        "decode": {"instances": 1}}},
])
def test_dp_ranks_are_refused_where_the_servers_dp_ranks_are_simulated(server):
    """workload.multi_turn.dp_ranks stands for DP ranks the run does not simulate. With DP
    attention on a server the ranks and their round-robin dispatch are simulated
    (sim/dp_attention.py), so both together lost each history twice (prefix hits 0.33
    against 0.66 on Qwen3-30B-A3B at dp_size 2). Refused, naming the server that runs DP."""
    with pytest.raises(ValidationError, match="workload.multi_turn.dp_ranks"):
        scenario({"dp_ranks": 2}, server=server)
    scenario({"dp_ranks": 1}, server=server)
    scenario({"dp_ranks": 2})


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 50), ranks=st.integers(2, 4))
def test_inv_multiturn_routed_turn_shares_only_the_system_prompt_with_its_past(seed, ranks):
    """INV-MULTITURN-ROUTING: a turn's tokens extend the previous turn's exactly when it
    stayed on the rank; otherwise they share the system prompt and nothing more."""
    cfg = MultiTurnConfig(num_conversations=3, num_turns=5, system_prompt_len=7, dp_ranks=ranks,
                          first_prompt_len=LengthDist(value=20), user_len=LengthDist(value=9))
    convs = multi_turn_conversations(cfg, np.full(15, 4), seed)
    for specs in convs:
        for a, b in zip(specs, specs[1:], strict=False):
            n = min(len(a.tokens), len(b.tokens))
            common = int(np.argmax(a.tokens[:n] != b.tokens[:n])) if (a.tokens[:n] != b.tokens[:n]).any() else n
            assert common == len(a.tokens) or common == 7


@pytest.mark.parametrize("turns", [{"kind": "fixed", "value": 10**8}, {"kind": "uniform", "value": 10**8, "range_ratio": 0.5}])
def test_drawn_turn_counts_are_held_to_the_request_limit(turns):
    """A fixed num_turns makes num_requests, which the size check bounds; a drawn one left
    num_requests unset and the check passed (8 conversations of 1e8 turns ran out of memory
    instead of an error naming the key)."""
    from specsched.sim.errors import ConfigError
    from specsched.sim.limits import check_size

    sc = scenario({"num_turns": turns}, {"num_requests": None})
    with pytest.raises(ConfigError, match="workload.multi_turn.num_turns"):
        check_size(sc)
    check_size(scenario({"num_turns": {"kind": "uniform", "value": 6, "range_ratio": 0.5}}, {"num_requests": None}))


@pytest.mark.parametrize("turns, key, says", [
    ({"kind": "fixed", "value": 0}, "workload.multi_turn.num_turns.value", "must be >= 1"),
    ({"kind": "zipf", "value": 3}, "workload.multi_turn.num_turns.kind", "allowed: fixed, uniform, file"),
])
def test_a_bad_turn_distribution_names_its_own_key(tmp_path, turns, key, says):
    """num_turns is a count or a distribution: a bad distribution was reported as the count's
    error (``num_turns.int = '{...}': Input should be a valid integer``), naming neither the
    distribution's key nor what it allows."""
    import yaml
    from specsched.sim.config import load_scenario
    from specsched.sim.errors import ConfigError

    d = scenario().model_dump(mode="json", exclude_unset=True)
    d["workload"].pop("num_requests", None)
    d["workload"]["multi_turn"]["num_turns"] = turns
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(d))
    with pytest.raises(ConfigError) as e:
        load_scenario(p)
    assert key in str(e.value) and says in str(e.value) and ".int" not in str(e.value), str(e.value)


@pytest.mark.parametrize("command", ["run", "compare"])
def test_a_turn_past_the_models_context_is_refused_naming_the_turn(tmp_path, capsys, monkeypatch, command):
    """A conversation whose prompt grows past the model's context length is refused, naming
    the turn, its prompt and the limit, before any run writes: SGLang rejects such a request
    (tokenizer_manager.py ``_validate_one_request``). It ran: turns of 160K tokens were
    prefilled on a 131,072-token model, past the profile's grid."""
    from specsched.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text(
        "name: s\nprofile: h100-llama-3.1-8b-eagle3-analytic\nserver: {speculative_algorithm: none}\n"
        "workload: {kind: multi_turn, concurrency: 2, output_len: {kind: fixed, value: 10}, multi_turn: "
        "{num_conversations: 2, num_turns: 3, first_prompt_len: {kind: fixed, value: 60000}, "
        "user_len: {kind: fixed, value: 40000}}}\narms:\n  b: {server: {max_running_requests: 8}}\n")
    args = ["run", "s.yaml"] if command == "run" else ["compare", "s.yaml", "--arms", "base,b", "--seeds", "2"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "workload.multi_turn" in err and "turn 3" in err and "140020" in err and "context length 131072" in err
    assert not (tmp_path / "results").exists()
