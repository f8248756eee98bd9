"""benchmarks/poisson_scatter.py: the simulator over seeds, and the same seeds with a slower
host on the extend path (a factor on the host-paced extend terms only)."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT, load_benchmark, tiny_profile

ps = load_benchmark("poisson_scatter")


def test_slower_host_scales_the_host_paced_extend_terms_only():
    p = tiny_profile(launch_per_extend_s=1e-3, launch_per_extend_token_s=1e-7, extend_idle_lead_s=2e-4,
                     extend_idle_lead_by_tokens={"tokens": [256, 1024], "seconds": [3e-4, 1e-4]})
    s = ps.slower_host(p, 1.5)
    assert s.host.launch_per_extend_s == pytest.approx(1.5e-3)
    assert s.host.launch_per_extend_token_s == pytest.approx(1.5e-7)
    assert s.host.extend_idle_lead_by_tokens.seconds == pytest.approx([4.5e-4, 1.5e-4])
    assert s.host.launch_s == p.host.launch_s and s.gpu == p.gpu


def test_scatter_gives_one_value_per_seed_and_a_slower_host_never_shortens_ttft(tmp_path):
    p = tiny_profile(launch_per_extend_s=1e-3, extend_idle_lead_s=5e-4)
    scen = ROOT / "scenarios" / "h200" / "poisson-nospec.yaml"
    base = ps.scatter(scen, p, 8.0, 12, 2)
    slow = ps.scatter(scen, ps.slower_host(p, 1.5), 8.0, 12, 2)
    assert all(len(v) == 2 for v in base.values())
    for f in ps.FIGURES:
        assert (slow[f] >= base[f] - 1e-9).all(), f
