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
