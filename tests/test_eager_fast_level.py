"""The eager cycle's host issue is stated at the host's fast level, whatever share of the
profiler's eager points sat there (runtime.profile_fit.fast_level_issue), and old profiles
are refitted from the points their provenance records (refit_eager_issue).

Mechanism: an eager cycle issues its ~1,700 kernels one by one from Python, so its length is
host time that moves with the host's level (rented H200 hosts run the same Python work at two
levels 1.5-1.8x apart). The profile states ``gpu.eager_host_issue_s`` at its fast level
(runtime.host_reference.FAST_TERMS) and a run's reference work scales it from there; the
estimate must therefore come from the fast points alone."""

from __future__ import annotations

import pytest
from conftest import tiny_profile
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.runtime.host_reference import SLOW_RATIO
from specsched.runtime.profile_fit import (
    eager_fit,
    eager_issue_points_from_provenance,
    fast_level_issue,
    issue_estimate,
    issue_in_reference_works,
    refit_eager_issue,
)

# round 28's profile (docs/measurements/h200-v28/h200-8b.yaml, provenance of
# gpu.eager_host_issue_s): per point (batch, context) the kept-busy / idle-stream medians, ms
V28_POINTS = [(8, 512, 42.12, 42.7), (16, 512, 42.41, 42.31), (32, 512, 56.02, 55.12), (8, 1024, 51.23, 47.25),
              (16, 1024, 49.45, 47.05), (32, 1024, 53.45, 51.85), (8, 2048, 53.89, 53.09), (16, 2048, 52.99, 52.7),
              (32, 2048, 55.34, 49.08), (8, 4096, 28.87, 28.26), (16, 4096, 29.45, 29.27), (32, 4096, 46.77, 51.42),
              (8, 8192, 51.87, 45.18), (16, 8192, 51.09, 50.41), (32, 8192, 29.72, 30.67)]


def _issues(points):
    return [issue_estimate([h * 1e-3], [i * 1e-3]) for _, _, h, i in points]


def test_round_28s_points_give_the_fast_levels_issue():
    """3 of 15 points on the fast level (28-30 ms): the lower quartile of all points read
    42.2 ms, a slow-level figure scaled as the fast level's; the loop's eager cycle ran
    28.6 ms on a fast host (docs/measurements/h200-v29-eager.md)."""
    got = fast_level_issue(_issues(V28_POINTS))
    assert 28.26e-3 <= got <= 29.72e-3
    ratios = [(32, 0, 0.03, 1.5)] * len(V28_POINTS)
    assert eager_fit(ratios, _issues(V28_POINTS))[1] == got


@settings(max_examples=80, deadline=None)
@given(fast=st.lists(st.floats(0.02, 0.021), min_size=1, max_size=15),
       slow=st.lists(st.floats(0.02, 0.021), min_size=0, max_size=30),
       level=st.floats(1.6, 2.0), inflate=st.lists(st.floats(1.0, 1.05), min_size=45, max_size=45))
def test_a_two_level_host_gives_the_fast_points_range_whatever_their_share(fast, slow, level, inflate):
    """Any number of points (at least one) on the fast level, the rest on a slow level 1.6-2x
    slower (the two H200 levels: 1.5-1.8x), each point inflated by up to 5 % more: the
    estimate stays within the fast points."""
    seen_fast = [h * k for h, k in zip(fast, inflate, strict=False)]
    seen = seen_fast + [h * level * k for h, k in zip(slow, inflate[len(fast):], strict=False)]
    got = fast_level_issue(seen)
    assert min(seen_fast) <= got <= max(seen_fast)


def test_cpu_points_give_no_issue_and_every_point_within_the_ratio_counts():
    assert fast_level_issue([0.0, 0.0]) is None
    # all within SLOW_RATIO of the fastest: the plain lower quartile of them all
    pts = [0.010, 0.011, 0.012, 0.013, 0.010 * SLOW_RATIO]
    assert fast_level_issue(pts) == pytest.approx(0.011)


def _with_provenance(points) -> object:
    prof = tiny_profile()
    text = ("lower quartile over the gpu.eager_factor points; kept busy / idle: "
            + ", ".join(f"bs {b} ctx {c}: {h:.4g} ms / {i:.4g} ms" for b, c, h, i in points)
            + "; the host issues an eager cycle's kernels one by one. [date]")
    raw = prof.model_dump()
    raw["gpu"]["eager_host_issue_s"] = 0.0422167
    raw["gpu"]["eager_overhead_s"] = 0.0078
    raw["provenance"] = {"gpu.eager_host_issue_s": text}
    return type(prof).model_validate(raw)


def test_refit_reads_the_points_back_and_moves_only_the_issue():
    prof = _with_provenance(V28_POINTS + [(64, 512, 30.1, float("nan"))])
    pts = eager_issue_points_from_provenance(prof)
    assert pts[:15] == [(b, c, pytest.approx(h * 1e-3), pytest.approx(i * 1e-3)) for b, c, h, i in V28_POINTS]
    assert pts[15][:3] == (64, 512, pytest.approx(30.1e-3)) and pts[15][3] != pts[15][3]  # idle not measured: nan
    new = refit_eager_issue(prof)
    assert new.gpu.eager_host_issue_s == pytest.approx(fast_level_issue(_issues(V28_POINTS) + [30.1e-3]))
    a, b = prof.model_dump(), new.model_dump()
    a["gpu"].pop("eager_host_issue_s"), b["gpu"].pop("eager_host_issue_s")
    assert a == b
    assert refit_eager_issue(tiny_profile()) is None


@settings(max_examples=40, deadline=None)
@given(levels=st.lists(st.sampled_from([2.6e-4, 4.7e-4]), min_size=1, max_size=15), works=st.floats(50, 150))
def test_issue_over_its_points_reference_reads_the_same_works_on_either_level(levels, works):
    """Host work at one level's speed: each point's issue over the reference work sampled at it
    gives the same number of works whatever share of the points ran slow; CPU points (0) and
    points without a sample count for nothing."""
    issues = [works * r for r in levels]
    assert issue_in_reference_works(issues + [0.0], levels + [3e-4]) == pytest.approx(works)
    assert issue_in_reference_works([0.0], [3e-4]) is None
    with pytest.raises(ValueError):
        issue_in_reference_works(issues, levels[:-1] if len(levels) > 1 else [])
