"""Prefix-sharing workloads (bench_serving generated-shared-prefix) and how much of them a
radix cache can reuse."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.prefix_workload import generated_shared_prefix, output_tokens
from specsched.sim.radix_cache import RadixCache


def test_groups_share_exactly_their_system_prompt():
    convs = generated_shared_prefix(3, 4, 100, 20, 8, seed=1)
    turns = [c[0] for c in convs]
    assert len(turns) == 12 and {t.group for t in turns} == {0, 1, 2}
    assert all(t.input_len == 120 for t in turns)
    a, b = [t for t in turns if t.group == 0][:2]
    assert np.array_equal(a.tokens[:100], b.tokens[:100]) and a.tokens[100] != b.tokens[100]
    c = next(t for t in turns if t.group == 1)
    assert a.tokens[0] != c.tokens[0]
    assert [t.index for t in turns] == list(range(12))


def test_shuffled_unless_ordered_and_seeded():
    ordered = [c[0].group for c in generated_shared_prefix(4, 8, 10, 5, 2, seed=3, ordered=True)]
    assert ordered == sorted(ordered)
    a = [c[0].group for c in generated_shared_prefix(4, 8, 10, 5, 2, seed=3)]
    b = [c[0].group for c in generated_shared_prefix(4, 8, 10, 5, 2, seed=3)]
    assert a == b and a != ordered


def test_multi_turn_resends_history_and_answer():
    conv = generated_shared_prefix(1, 1, 50, 10, 6, seed=2, num_turns=3)[0]
    t0, t1, t2 = conv
    assert np.array_equal(t1.tokens[: t0.input_len], t0.tokens)
    gen = output_tokens(2, t0.conversation, 0, t0.output_len)
    assert np.array_equal(t1.tokens[t0.input_len: t0.input_len + 6], gen)
    assert t2.input_len == t1.input_len + 6 + 10


@settings(max_examples=40, deadline=None)
@given(groups=st.integers(1, 5), per=st.integers(1, 6), sys_len=st.integers(1, 64), q=st.integers(1, 16))
def test_a_warm_cache_hits_every_system_prompt_after_the_first(groups, per, sys_len, q):
    convs = generated_shared_prefix(groups, per, sys_len, q, 4, seed=0)
    c = RadixCache()
    hits = 0
    for conv in convs:
        t = conv[0]
        hits += c.match_prefix(t.tokens)[0]
        c.insert(t.tokens)
    # every request but the first of its group finds its system prompt (and nothing more)
    assert hits == (per - 1) * groups * sys_len


def test_zipf_groups_follow_the_rank_law_and_keep_the_uniform_pool():
    """bench_serving 0.5.23 ``sample_generated_shared_prefix_requests`` with
    ``--gsp-group-distribution zipf``: each request's group drawn by rank (group 0 hottest, P
    proportional to 1 / rank^alpha); the questions and lengths are the uniform run's."""
    from specsched.sim.prefix_workload import zipf_group_probs

    groups, per = 8, 250
    uni = [c[0] for c in generated_shared_prefix(groups, per, 30, 10, 2, seed=5, ordered=True)]
    zipf = [c[0] for c in generated_shared_prefix(groups, per, 30, 10, 2, seed=5, ordered=True,
                                                  group_distribution="zipf", zipf_alpha=1.2)]
    counts = np.bincount([t.group for t in zipf], minlength=groups) / (groups * per)
    assert np.abs(counts - zipf_group_probs(groups, 1.2)).max() < 0.03
    assert counts[0] > 3 * counts[-1] and [t.group for t in uni] == list(np.repeat(range(groups), per))
    # same question (the tail after the system prompt) slot by slot; the system prompt is the drawn group's
    for u, z in zip(uni, zipf, strict=True):
        assert np.array_equal(u.tokens[30:], z.tokens[30:])
    sys0 = uni[0].tokens[:30]
    assert all(np.array_equal(z.tokens[:30], sys0) for z in zipf if z.group == 0)


def test_zipf_needs_a_positive_alpha_and_uniform_refuses_one():
    import pytest

    for kw in (dict(group_distribution="zipf"), dict(group_distribution="zipf", zipf_alpha=0.0),
               dict(group_distribution="zipf", zipf_alpha=float("inf")), dict(zipf_alpha=1.0),
               dict(group_distribution="pareto", zipf_alpha=1.0)):
        with pytest.raises(ValueError):
            generated_shared_prefix(2, 2, 4, 4, 2, seed=0, **kw)


def test_the_zipf_group_draw_has_its_own_seed_key():
    """The zipf group draw used [seed, 3, 2], the multi_turn prompt stream's key: the two
    streams drew the same numbers (every stream's key: tests/test_seed_streams.py)."""
    from specsched.sim.prefix_workload import group_assignment, prompt_stream, zipf_group_probs

    for seed in (1, 7):
        drawn = group_assignment(8, 50, seed, "zipf", 1.1)
        shared = prompt_stream(seed).choice(8, size=400, replace=True, p=zipf_group_probs(8, 1.1))
        assert not np.array_equal(drawn, shared)


# sha256 (first 16 hex) of the requests (index, lengths, turn, token ids) before the zipf draw
# moved to its own key: every other stream draws what it drew
HASHES_BEFORE = {("gsp-uniform", 1): "d333b623217b707c", ("gsp-uniform", 7): "50263391ce0c4f20",
                 ("multi-turn-example", 1): "903933956f38f821", ("multi-turn-example", 7): "215963415f7b5805",
                 ("agentic-trace-example", 1): "eb53d314940f3f74", ("agentic-trace-example", 7): "0b0ec5f8c803cb8b",
                 ("mt-drawn-turns", 1): "054fc6b848d229ae", ("mt-drawn-turns", 7): "cd78eec8c59d2c80",
                 ("batch8-ll", 1): "7ac45398cfb7d9a1", ("batch8-ll", 7): "b54af80117ef1530"}


def _digest(specs) -> str:
    import hashlib

    h = hashlib.sha256()
    for s in specs:
        h.update(repr((s.index, s.input_len, s.output_len, s.arrival_s, s.priority, s.turn)).encode())
        if s.tokens is not None:
            h.update(bytes(memoryview(s.tokens).cast("B")))
    return h.hexdigest()[:16]


def test_uniform_shared_prefix_and_multi_turn_requests_are_what_they_were():
    from specsched.sim.config import WorkloadConfig, load_scenario
    from specsched.sim.workload import make_requests

    from tests.conftest import ROOT

    def scenario(name):
        p = ROOT / "scenarios" / f"{name}.yaml"
        return load_scenario(p).workload, str(p)

    gsp = WorkloadConfig.model_validate(dict(
        kind="burst", output_len=dict(kind="uniform", value=30, range_ratio=0.5),
        shared_prefix=dict(num_groups=6, prompts_per_group=5, system_prompt_len=300, question_len=40, range_ratio=0.5)))
    mt, mt_path = scenario("multi-turn-example")
    drawn = mt.model_dump()
    drawn["multi_turn"] |= {"num_turns": dict(kind="uniform", value=5, range_ratio=0.2), "dp_ranks": 2}
    drawn.pop("num_requests")
    cases = {"gsp-uniform": (gsp, None), "multi-turn-example": (mt, mt_path),
             "agentic-trace-example": scenario("agentic-trace-example"),
             "mt-drawn-turns": (WorkloadConfig.model_validate(drawn), mt_path), "batch8-ll": scenario("batch8-ll")}
    got = {(name, seed): _digest(make_requests(w, seed, path)) for name, (w, path) in cases.items() for seed in (1, 7)}
    assert got == HASHES_BEFORE
