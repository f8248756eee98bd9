"""The routing-key waiting-queue order (sglang 0.5.23 managers/schedule_policy.py
``SchedulePolicy._sort_by_routing_key``, ``CacheAgnosticPolicy.ROUTING_KEY``) and the
per-request routing keys a workload draws (``workload.routing_keys``)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.config import Scenario
from specsched.sim.engine import run_scenario
from specsched.sim.request import Req
from specsched.sim.schedule_policy import QueueContext, RoutingKey
from specsched.sim.workload import make_requests, scheduler_request

from tests.test_sglang_rules import running, sched


def _req(rid: int, key: str | None) -> Req:
    return Req(rid, 100, 5, routing_key=key)


def rids(reqs):
    return [r.rid for r in reqs]


# --- the ordering rule ----------------------------------------------------------------------

def test_sort_by_routing_key_on_a_hand_built_queue():
    # running: b twice, a once. Held keys first, the most held first (b, then a); then the
    # rest by their key's text, no key as "" (so before "c"); one key's requests keep
    # their queue order (stable sort)
    run = [_req(100, "b"), _req(101, "a"), _req(102, "b"), _req(103, None)]
    queue = [_req(0, "c"), _req(1, "a"), _req(2, None), _req(3, "b"), _req(4, "a"), _req(5, "b")]
    got = RoutingKey().order(list(queue), QueueContext(running=tuple(run)))
    assert rids(got) == [3, 5, 1, 4, 2, 0]


def test_no_key_in_the_running_batch_leaves_the_queue_as_it_is():
    # SGLang returns before sorting when the batch holds no key: the queue keeps its order
    # (the last sort's, in place), not the keys' text order
    queue = [_req(0, "z"), _req(1, None), _req(2, "a")]
    for run in ((), (_req(9, None),)):
        assert rids(RoutingKey().order(list(queue), QueueContext(running=run))) == [0, 1, 2]


keys = st.sampled_from([None, "a", "b", "c", "d"])


@settings(max_examples=200, deadline=None)
@given(running_keys=st.lists(keys, max_size=8), queue_keys=st.lists(keys, max_size=12))
def test_routing_key_order_invariants(running_keys, queue_keys):
    """Named invariants of the order: a permutation of the queue; every request whose key
    the running batch holds comes before every one whose key it does not; among held keys
    the more held comes first; one key's requests keep their queue order."""
    run = tuple(_req(100 + i, k) for i, k in enumerate(running_keys))
    queue = [_req(i, k) for i, k in enumerate(queue_keys)]
    got = RoutingKey().order(list(queue), QueueContext(running=run))
    assert sorted(rids(got)) == rids(queue)
    held = {k: running_keys.count(k) for k in running_keys if k}
    flags = [r.routing_key in held for r in got]
    assert flags == sorted(flags, reverse=True) or not held
    counts = [held[r.routing_key] for r in got if r.routing_key in held]
    assert counts == sorted(counts, reverse=True)
    for k in set(queue_keys):
        same = [r.rid for r in got if r.routing_key == k]
        assert same == sorted(same)


# --- in the scheduler: the sort persists, as SGLang's in-place sort does --------------------

def test_the_scheduler_admits_the_held_key_first_and_keeps_the_sorted_queue():
    s = sched(schedule_policy="routing-key", max_running_requests=3)
    for rid in (100, 101):
        running(s, rid, 100, 50, 10).routing_key = "b"
    for r in (_req(0, "a"), _req(1, None), _req(2, "b"), _req(3, "a")):
        s.add_request(r)
    plan = s.schedule()
    assert plan.new_rids == (2,)   # one free slot: the request whose key the batch holds
    # the queue stays sorted (no key before "a"), FCFS would have kept 0, 1, 3
    assert rids(s.waiting) == [1, 0, 3]


# --- the workload's keys ----------------------------------------------------------------------

def _scenario(policy: str, keys: list[str] | None, seed: int = 1) -> Scenario:
    w = dict(kind="poisson", request_rate=40.0, num_requests=200,
             input_len=dict(kind="fixed", value=512), output_len=dict(kind="fixed", value=128))
    if keys is not None:
        w["routing_keys"] = keys
    return Scenario.model_validate(dict(name="rk", profile="h200-llama8b-roofline", seed=seed,
                                        server=dict(schedule_policy=policy, max_running_requests=16),
                                        workload=w))


def test_routing_keys_come_from_their_own_stream_and_the_list():
    plain = make_requests(_scenario("fcfs", None).workload, 3)
    keyed = make_requests(_scenario("fcfs", ["a", "a", "b"]).workload, 3)
    # the keys change no other draw
    assert [(s.input_len, s.output_len) for s in plain] == [(s.input_len, s.output_len) for s in keyed]
    got = [s.routing_key for s in keyed]
    assert set(got) == {"a", "b"} and all(s.routing_key is None for s in plain)
    # a key listed twice is drawn about twice as often (200 draws: 2/3 expected)
    assert 0.55 < got.count("a") / len(got) < 0.78
    assert got == [s.routing_key for s in make_requests(_scenario("fcfs", ["a", "a", "b"]).workload, 3)]
    # both engines build the scheduler's request with one function: the key reaches it
    assert scheduler_request(keyed[0], True).routing_key == got[0]


def _ttfts(sc: Scenario) -> np.ndarray:
    return run_scenario(sc).requests.sort_values("rid")["ttft_s"].to_numpy()


def test_routing_key_without_keys_runs_as_fcfs_and_with_keys_reorders_admission():
    fcfs = _ttfts(_scenario("fcfs", ["a", "b", "c", "d"]))
    assert np.array_equal(_ttfts(_scenario("routing-key", None)), _ttfts(_scenario("fcfs", None)))
    keyed = _ttfts(_scenario("routing-key", ["a", "b", "c", "d"]))
    assert not np.array_equal(keyed, fcfs)
    # an overloaded queue (40 req/s into 16 slots): affinity lets the held keys' requests
    # overtake, so the others wait longer: the tail grows (equal work, so the mean stays)
    assert np.percentile(keyed, 90) > 1.2 * np.percentile(fcfs, 90)
    assert abs(keyed.mean() / fcfs.mean() - 1) < 0.02


def test_a_disaggregated_prefill_servers_copy_keeps_the_routing_key(tmp_path):
    # the router sends the request to a prefill and a decode server at once; the prefill
    # server's copy is the same request (GenerateReqInput.routing_key reaches every server's
    # scheduler, managers/scheduler.py handle_generate_request), so an order that reads the
    # key there (a schedule-policy class of your own) sees it
    from tests.conftest import make_scenario
    from tests.test_disaggregation import _pd, _profile

    (tmp_path / "keys_seen.py").write_text(
        "SEEN = []\n"
        "class Seen:\n"
        "    name = 'seen'\n"
        "    @classmethod\n"
        "    def from_server(cls, server, seed=0):\n"
        "        return cls()\n"
        "    def order(self, waiting, ctx):\n"
        "        SEEN.extend(r.routing_key for r in waiting)\n"
        "        return list(waiting)\n")
    sc = make_scenario(server=_pd(schedule_policy=f"{tmp_path / 'keys_seen.py'}:Seen"),
                       workload={"num_requests": 6, "routing_keys": ["a", "b"]})
    from specsched.sim.engine import SimEngine

    eng = SimEngine(sc, _profile())
    eng.run()
    import sys

    seen = [m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == str(tmp_path / "keys_seen.py")]
    assert seen and seen[0].SEEN and None not in seen[0].SEEN


# --- bench_serving's shared-prefix keys (--gsp-send-routing-key) ----------------------------

def _gsp(send: bool, **extra) -> Scenario:
    w = dict(kind="poisson", request_rate=200.0, output_len=dict(kind="fixed", value=64),
             shared_prefix=dict(num_groups=4, prompts_per_group=16, system_prompt_len=256, question_len=64,
                                send_routing_key=send), **extra)
    return Scenario.model_validate(dict(name="gsp", profile="h200-llama8b-roofline", seed=1,
                                        server=dict(schedule_policy="routing-key", max_running_requests=8),
                                        workload=w))


def test_shared_prefix_requests_carry_their_group_as_the_routing_key():
    # bench_serving 0.5.23 --gsp-send-routing-key: requests of one system prompt share one key
    specs = make_requests(_gsp(True).workload, 1)
    by_key: dict[str, set[bytes]] = {}
    for s in specs:
        by_key.setdefault(s.routing_key, set()).add(s.tokens[:256].tobytes())
    assert len(by_key) == 4 and all(len(prefixes) == 1 for prefixes in by_key.values())
    assert len(set().union(*by_key.values())) == 4   # four keys, four system prompts
    assert all(s.routing_key is None for s in make_requests(_gsp(False).workload, 1))
    # the keys reorder admission under routing-key
    assert not np.array_equal(_ttfts(_gsp(True)), _ttfts(_gsp(False)))


def test_send_routing_key_and_routing_keys_together_are_refused_in_one_line(tmp_path, capsys):
    import yaml

    from specsched.cli import main

    doc = {"name": "gsp", "profile": "h200-llama8b-roofline", "server": {"schedule_policy": "routing-key"},
           "workload": {"kind": "poisson", "request_rate": 10.0, "output_len": {"kind": "fixed", "value": 8},
                        "routing_keys": ["a"],
                        "shared_prefix": {"num_groups": 2, "prompts_per_group": 2, "system_prompt_len": 16,
                                          "question_len": 4, "send_routing_key": True}}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc))
    assert main(["run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "out"), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "workload.routing_keys = ['a']" in err[0] and "send_routing_key" in err[0], err
    assert not (tmp_path / "out").exists()


def test_a_conversations_turns_share_one_routing_key():
    """A session's client sends one key with every turn: under multi_turn the key is drawn
    per conversation and its later turns keep it (a single-turn workload draws per request,
    as before: every request starts its own conversation)."""
    sc = Scenario.model_validate(dict(
        name="mt", profile="h200-llama8b-roofline",
        server=dict(schedule_policy="routing-key"),
        workload=dict(kind="multi_turn", concurrency=4, routing_keys=["a", "b", "c", "d", "e"],
                      output_len=dict(kind="fixed", value=8),
                      multi_turn=dict(num_conversations=10, num_turns=4, first_prompt_len=dict(kind="fixed", value=64),
                                      user_len=dict(kind="fixed", value=16)))))
    specs = make_requests(sc.workload, sc.seed)
    by_conv = []
    for s in specs:
        if s.turn == 0:
            by_conv.append(set())
        by_conv[-1].add(s.routing_key)
    assert len(by_conv) == 10 and all(len(k) == 1 for k in by_conv)
    assert len(set().union(*by_conv)) > 1
    run_scenario(sc)   # and it runs
