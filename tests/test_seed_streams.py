"""The seed keys of a run's random draws (sim/seed_streams.py): no two streams of one run
share a key.

numpy's ``SeedSequence`` pads its entropy with zero words up to 4, so ``[s, 3]`` and
``[s, 3, 0]`` are one generator: a request's accept key ``[s, 3, rid]`` was the
generated-shared-prefix stream's for rid 0 and the multi_turn prompt stream's for rid 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim import seed_streams
from specsched.sim.config import load_scenario, with_value
from specsched.sim.engine import run_scenario

from tests.conftest import ROOT

_SKIP = {str(Path(seed_streams.__file__).resolve()), str(Path(np.__file__).resolve().parent)}


def _words(entropy) -> tuple[int, ...]:
    """The uint32 words numpy's SeedSequence reads from ``entropy`` (an int, a sequence of
    ints: each int's little-endian words in turn, or a uint32 array), without the padding."""
    if isinstance(entropy, np.random.SeedSequence):
        return (*_words(entropy.entropy), -1, *_words(list(entropy.spawn_key)))
    if isinstance(entropy, np.ndarray):
        return tuple(int(w) for w in entropy)
    out: list[int] = []
    for v in [entropy] if isinstance(entropy, int) else entropy:
        v = int(v)
        out.append(v & 0xFFFFFFFF)
        while v >> 32:
            v >>= 32
            out.append(v & 0xFFFFFFFF)
    return tuple(out)


def _site() -> str:
    """The sim function that asked for the generator (the first frame outside numpy and
    seed_streams.py)."""
    f = sys._getframe(2)
    while f is not None and (str(Path(f.f_code.co_filename).resolve()) in _SKIP
                             or str(Path(f.f_code.co_filename).resolve()).startswith(tuple(_SKIP))):
        f = f.f_back
    return f"{Path(f.f_code.co_filename).name}:{f.f_code.co_name}" if f else "?"


def _seeded(monkeypatch, sc, seed: int) -> dict[tuple, set]:
    """Run ``sc`` at ``seed``, recording every generator it seeds: its state -> the set of
    (site, key words) that reached it."""
    real = np.random.default_rng
    seen: dict[tuple, set] = {}

    def spy(entropy=None):
        g = real(entropy)
        state = g.bit_generator.state["state"]
        seen.setdefault((state["state"], state["inc"]), set()).add((_site(), _words(entropy)))
        return g

    monkeypatch.setattr(np.random, "default_rng", spy)
    run_scenario(sc, seed=seed)
    monkeypatch.setattr(np.random, "default_rng", real)
    return seen


def _speculative_scenarios():
    """A multi_turn run (prompt stream, output tokens, think times, drawn turn counts) and a
    generated-shared-prefix run (zipf groups, priorities, Poisson arrivals), both speculative,
    so each run also draws its requests' accept lengths."""
    mt = load_scenario(ROOT / "scenarios" / "multi-turn-example.yaml")
    w = mt.workload.model_dump()
    w.pop("num_requests")
    w["output_len"] = {"kind": "uniform", "value": 20, "range_ratio": 0.5}
    w["multi_turn"] |= {"num_conversations": 3, "num_turns": {"kind": "uniform", "value": 3, "range_ratio": 0.5},
                        "first_prompt_len": {"kind": "fixed", "value": 300}, "system_prompt_len": 100,
                        "user_len": {"kind": "uniform", "value": 60, "range_ratio": 0.5}}
    mt = with_value(mt, "workload", w)
    gsp = load_scenario(ROOT / "scenarios" / "batch8-ll.yaml")
    w = gsp.workload.model_dump()
    w.pop("num_requests")
    w.pop("input_len")
    w |= {"kind": "poisson", "request_rate": 50.0, "concurrency": None, "priorities": [0, 1, 2],
          "output_len": {"kind": "uniform", "value": 20, "range_ratio": 0.5},
          "shared_prefix": {"num_groups": 3, "prompts_per_group": 4, "system_prompt_len": 200, "question_len": 30,
                            "range_ratio": 0.5, "group_distribution": "zipf", "zipf_alpha": 1.1}}
    gsp = with_value(with_value(gsp, "workload", w), "server.enable_priority_scheduling", True)
    return [mt, gsp]


SCENARIOS = _speculative_scenarios()


@settings(max_examples=6, deadline=None)
@given(seed=st.one_of(st.sampled_from([0, 1, 7, 2**32 - 1, 2**32]), st.integers(0, 2**40)))
def test_no_two_streams_of_one_run_share_a_key(seed):
    """Every generator a run seeds is reached from one stream only: one call site with one
    key. Two sites, or two keys (``[s, 3]`` and ``[s, 3, 0]``), landing on one generator state
    are two streams drawing the same numbers."""
    with pytest.MonkeyPatch.context() as mp:
        for sc in SCENARIOS:
            name, seen = sc.name, _seeded(mp, sc, seed)
            shared = {k: sorted(v) for k, v in seen.items() if len(v) > 1}
            assert not shared, f"{name} seed {seed}: one generator from several streams: {list(shared.values())}"
            sites = {site for v in seen.values() for site, _ in v}
            assert any("acceptance" in s for s in sites), (name, sites)   # the run drew accept lengths


def _all_keys(seed: int, a: int, b: int) -> dict[tuple, object]:
    """Every stream's key at ``seed``, each indexed stream at index words drawn from a, b, 0."""
    out = {}
    for name, s in seed_streams.STREAMS.items():
        for idx in {(a, b, 0)[:len(s.index)], (0, 0)[:len(s.index)], (b, a)[:len(s.index)]}:
            out[(name, idx)] = seed_streams.key(name, seed, *idx)
    return out


@settings(max_examples=300, deadline=None)
@given(seed=st.one_of(st.integers(0, 2**32 - 1), st.integers(2**32, 2**70), st.sampled_from([0, 1, 2**32 - 1, 2**32])),
       a=st.one_of(st.integers(0, 3), st.integers(0, 2**32 - 1)), b=st.one_of(st.integers(0, 3), st.integers(0, 2**32 - 1)))
def test_no_two_stream_keys_of_one_seed_give_one_generator(seed, a, b):
    """The same invariant on the keys themselves: at one seed, two (stream, index) pairs
    never give one generator state (numpy's padding included)."""
    states = {}
    for who, k in _all_keys(seed, a, b).items():
        states.setdefault(np.random.default_rng(k).bit_generator.state["state"]["state"], []).append(who)
    assert all(len(v) == 1 for v in states.values()), [v for v in states.values() if len(v) > 1]


def test_the_old_keys_of_every_stream_but_accept_give_their_old_generator():
    """Only the accept key moved: every other stream draws what it drew ([seed, 3] is
    [seed, 3, 0] padded; the accept key was [seed, 3, rid])."""
    old = {"arrivals": [1], "lengths": [2], "prefix": [3], "multi_turn_prompts": [3, 2], "priorities": [4],
           "think": [5], "turns": [6], "zipf_groups": [7], "dp_rooms": [0xB007], "disagg_router": [0x50D]}
    for seed in (0, 1, 7, 2**32 + 5):
        for name, words in old.items():
            assert (np.random.default_rng(seed_streams.key(name, seed)).bit_generator.state
                    == np.random.default_rng([seed, *words]).bit_generator.state), name
        got = np.random.default_rng(seed_streams.key("prefix_output_tokens", seed, 4, 2)).bit_generator.state
        assert got == np.random.default_rng([seed, 3, 1, 4, 2]).bit_generator.state
        got = np.random.default_rng(seed_streams.key("accept", seed, 0)).bit_generator.state
        assert got != np.random.default_rng([seed, 3, 0]).bit_generator.state


def test_a_key_of_another_length_or_a_prefix_tag_is_refused():
    with pytest.raises(ValueError, match="takes 1 index words"):
        seed_streams.key("accept", 1)
    with pytest.raises(ValueError, match="takes 0 index words"):
        seed_streams.key("prefix", 1, 0)
    with pytest.raises(ValueError, match=r"turn must be in \[0, 2\*\*32\)"):
        seed_streams.key("prefix_output_tokens", 1, 0, 2**32)
    with pytest.raises(ValueError, match="rid must be in"):
        seed_streams.key("accept", 1, -1)
    with pytest.raises(ValueError, match="seed must be >= 0"):
        seed_streams.key("arrivals", -1)
    with pytest.raises(KeyError):
        seed_streams.key("nope", 1)
    S = seed_streams.Stream
    for clash in ({"a": S((3,)), "b": S((3, 1))}, {"a": S((3, 0)), "b": S((3, 0), ("rid",))}, {"a": S(())},
                  {"a": S((1 << 32,))}):
        with pytest.raises(ValueError):
            seed_streams._check_prefix_free(clash)
    seed_streams._check_prefix_free({"a": S((3, 0)), "b": S((3, 1), ("c", "t")), "c": S((8,), ("rid",))})
