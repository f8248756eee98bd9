"""Multi-turn conversations in the runtime (workload kind ``multi_turn``): the runtime's
clients (sim.workload.Clients over sim.workload.Conversations) release a conversation's
next turn when its previous turn finished plus a think time, as the simulator's client
processes do (sim/engine_clients.py ``_conversations``), and each turn's prompt (its whole
history and the new text) is fed as token ids, so with the radix cache on a later turn
reads its history's KV from the tree. Where no timing decides a plan (think time 0, every
conversation in flight or started at once), both engines make the same plans and report the
same cache hit rate and turns."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from specsched.runtime.engine import RuntimeEngine  # noqa: E402
from specsched.sim.config import Scenario  # noqa: E402
from specsched.sim.engine import SimEngine  # noqa: E402
from specsched.sim.workload import Clients, make_requests  # noqa: E402

from tests.conftest import tiny_profile  # noqa: E402
from tests.test_runtime_radix import (  # noqa: E402
    PLAN_COLS,
    SPEC,
    _check_pool,
    _checked,
    _evictions,
    _plans,
    recorded_extends,
)

SERVER = {"max_running_requests": 3, "chunked_prefill_size": 64, "max_prefill_tokens": 96,
          "max_total_num_tokens": 5000}
MULTI = {"kind": "multi_turn", "concurrency": 2, "output_len": {"kind": "fixed", "value": 8},
         "multi_turn": {"num_conversations": 3, "num_turns": 3, "system_prompt_len": 16,
                        "first_prompt_len": {"kind": "fixed", "value": 24},
                        "user_len": {"kind": "uniform", "value": 12, "range_ratio": 0.5}}}


def _scenario(server=None, workload=None, spec="dspark") -> Scenario:
    srv = {**SERVER, **(server or {})}
    if spec:
        srv.update(SPEC[spec])
    return Scenario.model_validate({"name": "t", "profile": "tiny", "seed": 1, "server": srv,
                                    "workload": {**MULTI, **(workload or {})},
                                    "acceptance": {"mean_accept_length": 2.2, "request_spread": 0.3}})


def _both(monkeypatch, server=None, workload=None, spec="dspark"):
    sc = _scenario(server, workload, spec)
    plans = _plans(monkeypatch)
    evictions = _evictions(monkeypatch)
    eng = RuntimeEngine(sc, preset="tiny", device="cpu", warmup=False)
    radix = eng.sched.cache is not None
    if radix:
        held = _checked(monkeypatch, eng)
    measured = eng.run()
    n_measured, ev_measured = len(plans), list(evictions)
    simulated = SimEngine(sc, tiny_profile(ingest_per_request_s=0.0)).run()
    assert n_measured and plans[:n_measured] == plans[n_measured:]
    assert ev_measured == evictions[len(ev_measured):]
    assert measured.steps[PLAN_COLS].reset_index(drop=True).equals(simulated.steps[PLAN_COLS].reset_index(drop=True))
    total = sum(len(c) for c in _turns(sc))
    assert measured.summary["completed"] == simulated.summary["completed"] == total
    assert measured.summary.get("cache_hit_rate") == simulated.summary.get("cache_hit_rate")
    assert list(measured.requests.columns) == list(simulated.requests.columns)
    assert sorted(measured.requests["rid"].tolist()) == sorted(simulated.requests["rid"].tolist())
    if radix:
        assert held and max(held) <= sc.server.max_total_num_tokens
        _check_pool(eng)
    return sc, eng, plans[:n_measured], measured, simulated, ev_measured


def _turns(sc: Scenario) -> list[list[int]]:
    """Each conversation's request ids, turn by turn."""
    out: list[list[int]] = []
    for s in make_requests(sc.workload, sc.seed):
        if s.turn == 0:
            out.append([])
        out[-1].append(s.index)
    return out


@pytest.mark.parametrize("spec", [None, "dspark"])
@pytest.mark.parametrize("radix_off", [False, True])
def test_conversations_run_with_the_same_plans_as_the_simulator(monkeypatch, spec, radix_off):
    sc, _, plans, measured, _, _ = _both(monkeypatch, {"disable_radix_cache": radix_off}, spec=spec)
    prefix: dict[int, int] = {}   # each turn's first extend's prefix (a chunked prompt's later chunks extend further)
    for rids, _, prefixes in plans:
        for rid, p in zip(rids, prefixes, strict=True):
            prefix.setdefault(rid, p)
    later = [rid for conv in _turns(sc) for rid in conv[1:]]
    if radix_off:
        assert all(p == 0 for p in prefix.values())
        assert "cache_hit_rate" not in measured.summary
    else:
        # a later turn's history (its previous prompt and output but the last output token,
        # which has no KV) comes from the tree; turn 0 shares the system prompt at most
        specs = {s.index: s for s in make_requests(sc.workload, sc.seed)}
        for rid in later:
            prev = specs[rid - 1]
            assert prefix[rid] >= prev.input_len + prev.output_len - 1
        assert measured.summary["cache_hit_rate"] > 0


def test_conversations_started_at_an_infinite_rate_without_a_cap(monkeypatch):
    # request_rate .inf: every conversation starts at 0 and none waits for a slot
    _both(monkeypatch, workload={"request_rate": float("inf"), "concurrency": None}, spec=None)


def test_a_pool_that_evicts_conversation_histories(monkeypatch):
    # 3 conversations in flight in a pool that cannot keep every history: the tree evicts
    *_, evictions = _both(monkeypatch, {"max_total_num_tokens": 160}, {"concurrency": 3}, spec=None)
    assert sum(evictions) > 0


def test_each_later_turn_is_fed_its_whole_history(monkeypatch):
    """A turn's extend feeds its prompt's ids (the previous turn's prompt, output and the new
    text, mod the vocabulary) at their positions, with the radix cache off (every position)."""
    sc = _scenario({"disable_radix_cache": True}, spec=None)
    eng = RuntimeEngine(sc, preset="tiny", device="cpu", warmup=False)
    seen = recorded_extends(eng)
    eng.run()
    specs = {s.index: s for s in make_requests(sc.workload, sc.seed)}
    fed: dict[int, list[int]] = {}
    for rids, prefix, ext, toks in seen:
        off = 0
        for rid, p, e in zip(rids, prefix, ext, strict=True):
            assert p == len(fed.get(rid, []))
            fed.setdefault(rid, []).extend(toks[off:off + e])
            off += e
    for rid, ids in fed.items():
        s = specs[rid]
        assert ids == [int(t) % eng.vocab for t in s.tokens[:s.input_len]]
        if s.turn:
            prev = specs[rid - 1]
            assert ids[:prev.input_len + prev.output_len] == [int(t) % eng.vocab for t in prev.tokens]


def _replay(sc: Scenario, order: list[int], finish_at: dict[int, float]) -> list[tuple[int, float]]:
    """The sends of :class:`Clients` when request i finishes ``finish_at[i]`` after its send."""
    clients = Clients(sc, make_requests(sc.workload, sc.seed), sc.seed)
    sent: list[tuple[int, float]] = []
    now = 0.0
    flying: dict[int, float] = {}
    while True:
        for i, t in clients.due_timed(now):
            sent.append((i, t))
            flying[i] = t + finish_at[i]
        nxt = clients.next_time()
        if nxt is not None and (not flying or nxt < min(flying.values())):
            now = max(now, nxt)   # a turn released after its think time, before any finish
            continue
        if not flying:
            return sent
        i = min(flying, key=lambda k: (flying[k], order.index(k)))
        now = max(now, flying.pop(i))
        clients.finished(now, i)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3), st.sampled_from([0.0, 0.5]), st.data())
def test_inv_each_turn_is_sent_after_the_previous_one_finished_and_its_think_time(conc, think, data):
    """INV: turn t >= 1 of a conversation is sent at its turn t-1's finish plus the think
    time; turn 0 when a slot is free (never more than ``concurrency`` conversations between
    their first send and last finish); every turn is sent once."""
    sc = _scenario(workload={"concurrency": conc, "multi_turn": {**MULTI["multi_turn"], "think_time_s": think}})
    specs = make_requests(sc.workload, sc.seed)
    took = data.draw(st.lists(st.floats(0.01, 3.0), min_size=len(specs), max_size=len(specs)))
    finish_at = dict(enumerate(took))
    sent = dict(_replay(sc, list(range(len(specs))), finish_at))
    assert sorted(sent) == [s.index for s in specs]
    spans = []
    for conv in _turns(sc):
        for a, b in zip(conv, conv[1:], strict=False):
            assert sent[b] == pytest.approx(sent[a] + finish_at[a] + think)
        spans.append((sent[conv[0]], sent[conv[-1]] + finish_at[conv[-1]]))
    for t, _ in spans:   # conversations open at each start
        assert sum(1 for a, b in spans if a <= t < b) <= conc


def test_a_multi_turn_client_needs_the_finished_request():
    sc = _scenario()
    clients = Clients(sc, make_requests(sc.workload, sc.seed), sc.seed)
    clients.due_timed(0.0)
    with pytest.raises(ValueError, match="index"):
        clients.finished(1.0)


def test_think_times_hold_the_next_turn_in_the_runtime():
    """A think time of 0.05 s: each later turn is sent at least that long after the previous
    turn's last token, by the runtime's clock."""
    sc = _scenario({"disable_radix_cache": True}, {"concurrency": 3,
                   "multi_turn": {**MULTI["multi_turn"], "num_conversations": 2, "num_turns": 2,
                                  "think_time_s": 0.05}}, spec=None)
    res = RuntimeEngine(sc, preset="tiny", device="cpu", warmup=False).run()
    req = res.requests.set_index("rid")
    for conv in _turns(sc):
        a, b = conv
        assert req.loc[b, "start_s"] >= req.loc[a, "finish_s"] + 0.05 - 1e-9
    assert np.isfinite(req["finish_s"]).all()


@pytest.mark.parametrize("spec", [None, "dspark", "eagle-tree"])
def test_a_cached_history_holds_the_kv_of_the_ids_the_next_turn_resends(monkeypatch, spec):
    """KV content, not only counts: a conversation's history in the prefix cache (its last
    turn's prompt and output but the last output token) holds the KV of exactly the ids the
    tree matched, the output positions included (the runtime feeds each turn's output ids as
    it decodes: runtime/kv_cache.py ``ReqToTokenPool.forced``), i.e. the KV a fresh prefill
    of those ids computes. Before, the output positions held the KV of the tokens the proxy
    chose, which the next turn's ids do not match."""
    from specsched.runtime.runner import ModelRunner

    sc = _scenario(spec=spec)
    eng = RuntimeEngine(sc, preset="tiny", device="cpu", warmup=False)
    eng.run()
    specs = {s.index: s for s in make_requests(sc.workload, sc.seed)}
    fresh = ModelRunner(eng.runner.target, eng.dev, max_reqs=1, max_context=eng.runner.pool.max_context)
    checked = 0
    for conv in _turns(sc):
        last = specs[conv[-1]]
        ids = [int(t) for t in last.tokens[:last.input_len + last.output_len - 1]]
        n, node = eng.sched.cache.match_prefix(ids)
        assert n == len(ids)
        cached = eng.tree_slots.prefix(node)
        row = fresh.add_request()
        fresh.extend([row], [0], [n], torch.tensor(ids, dtype=torch.int64) % eng.vocab)
        own = fresh.pool.req_to_token[row, :n]
        assert torch.allclose(eng.runner.kv.k[:, cached], fresh.kv.k[:, own], atol=1e-4, rtol=1e-4)
        assert torch.allclose(eng.runner.kv.v[:, cached], fresh.kv.v[:, own], atol=1e-4, rtol=1e-4)
        fresh.free_request(row)
        checked += 1
    assert checked == sc.workload.multi_turn.num_conversations


def test_a_pool_that_retracts_a_turn(monkeypatch):
    # short first prompts, outputs that may stop early and a pool of 170 under DSpark windows:
    # a running turn outgrows it, is retracted, and re-prefills over its cached history
    _, _, _, measured, simulated, _ = _both(
        monkeypatch, {"max_total_num_tokens": 170, "max_running_requests": 4, "admission_delay": "none"},
        {"concurrency": 3, "ignore_eos": False, "output_len": {"kind": "fixed", "value": 32},
         "multi_turn": {**MULTI["multi_turn"], "system_prompt_len": 8, "first_prompt_len": {"kind": "fixed", "value": 8}}})
    assert measured.summary["num_retractions"] == simulated.summary["num_retractions"] >= 1


@pytest.mark.parametrize("spec", ["dspark", "eagle-tree"])
def test_more_conversations_than_clients_run_with_the_same_plans_as_the_simulator(monkeypatch, spec):
    # 6 conversations, 2 clients: a client whose conversation ended sends the next one's
    # turn 0 at once, ordered among the turns released at that time where its finish was
    # delivered (the simulator's client resumes there), not after them
    _both(monkeypatch, workload={"multi_turn": {**MULTI["multi_turn"], "num_conversations": 6}}, spec=spec)


def test_a_freed_client_starts_its_next_conversation_where_its_finish_was_reported():
    # 2 clients, 3 conversations of 2 turns: conversation 0 ends at t=2 and is reported
    # first, then conversation 1's turn 0: conversation 2's turn 0 goes before 1's turn 1
    sc = _scenario(workload={"concurrency": 2, "multi_turn": {**MULTI["multi_turn"], "num_conversations": 3,
                                                              "num_turns": 2}}, spec=None)
    specs = make_requests(sc.workload, sc.seed)
    clients = Clients(sc, specs, sc.seed)
    turns = _turns(sc)
    assert [i for i, _ in clients.due_timed(0.0)] == [turns[0][0], turns[1][0]]
    clients.finished(1.0, turns[0][0])
    assert clients.due_timed(1.0) == [(turns[0][1], 1.0)]
    clients.finished(2.0, turns[0][1])   # conversation 0 ends: its client takes conversation 2
    clients.finished(2.0, turns[1][0])
    assert clients.due_timed(2.0) == [(turns[2][0], 2.0), (turns[1][1], 2.0)]


@pytest.mark.parametrize("page", [4, 16])
@pytest.mark.parametrize("spec", [None, "dspark", "eagle-tree"])
def test_conversations_with_kv_pages_run_with_the_same_plans_as_the_simulator(monkeypatch, page, spec):
    # the tree keeps a history's whole pages; a turn's partial last page stays with it and is
    # freed when it finishes; a later turn extends from its history's last whole page
    sc, _, plans, measured, _, _ = _both(monkeypatch, {"page_size": page}, spec=spec)
    assert all(p % page == 0 for _, _, prefixes in plans for p in prefixes)
    assert measured.summary["cache_hit_rate"] > 0


@pytest.mark.parametrize("page", [4, 16])
def test_a_paged_pool_that_evicts_conversation_histories(monkeypatch, page):
    *_, evictions = _both(monkeypatch, {"max_total_num_tokens": 160, "page_size": page}, {"concurrency": 3}, spec=None)
    assert sum(evictions) > 0


@pytest.mark.parametrize("page", [4, 16])
def test_a_paged_cached_history_holds_the_kv_of_the_ids_the_next_turn_resends(page):
    from specsched.runtime.runner import ModelRunner

    sc = _scenario({"page_size": page}, spec="dspark")
    eng = RuntimeEngine(sc, preset="tiny", device="cpu", warmup=False)
    eng.run()
    specs = {s.index: s for s in make_requests(sc.workload, sc.seed)}
    fresh = ModelRunner(eng.runner.target, eng.dev, max_reqs=1, max_context=eng.runner.pool.max_context)
    for conv in _turns(sc):
        last = specs[conv[-1]]
        ids = [int(t) for t in last.tokens[:last.input_len + last.output_len - 1]]
        n, node = eng.sched.cache.match_prefix(ids)
        assert n == len(ids) // page * page > 0
        cached = eng.tree_slots.prefix(node)
        row = fresh.add_request()
        fresh.extend([row], [0], [n], torch.tensor(ids[:n], dtype=torch.int64) % eng.vocab)
        own = fresh.pool.req_to_token[row, :n]
        assert torch.allclose(eng.runner.kv.k[:, cached], fresh.kv.k[:, own], atol=1e-4, rtol=1e-4)
        assert torch.allclose(eng.runner.kv.v[:, cached], fresh.kv.v[:, own], atol=1e-4, rtol=1e-4)
        fresh.free_request(row)
