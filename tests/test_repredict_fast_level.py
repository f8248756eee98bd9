"""repredict_h200 --fast-level: every host term put at one level (the profile's fast level, or
its median), each scaled by that level over the level its phase was measured at; a profile
that does not say at which level its terms were measured is left as it is."""

from __future__ import annotations

import pandas as pd
import pytest
from specsched.sim.host_speed import scale_host

from tests.conftest import load_benchmark, tiny_profile

FAST, SLOW = 0.25e-3, 0.5e-3


def _levelled(**host):
    p = tiny_profile(reference_work_s=0.4e-3, **host)
    data = p.model_dump(mode="python")
    data["gpu"]["eager_host_issue_s"] = 1e-3
    # the launch phase ran on the slow level, the scheduler phase on the fast one
    data["host"]["reference_work_by_term"] = {
        "host.launch_s": SLOW, "host.schedule_s": FAST, "host.process_s": FAST,
        "gpu.eager_host_issue_s": FAST, "gpu.eager_overhead_s": FAST}
    return type(p).model_validate(data)


def test_fast_level_halves_a_term_measured_on_the_slow_level_and_keeps_the_fast_ones() -> None:
    rp = load_benchmark("repredict_h200", "rp_fast1")
    prof = _levelled()
    assert rp.profile_fast_level(prof) == pytest.approx(FAST)
    tp, ref = rp.one_level_inputs(prof, "fast")
    got = scale_host(tp, 1.0, ref)
    assert got.host.launch_s == pytest.approx(prof.host.launch_s * FAST / SLOW)
    assert got.host.schedule_s == pytest.approx(prof.host.schedule_s)
    assert got.gpu.eager_host_issue_s == pytest.approx(prof.gpu.eager_host_issue_s)
    # a term the map leaves out sits at the profile's host.reference_work_s
    assert got.host.sync_wakeup_s == pytest.approx(prof.host.sync_wakeup_s * FAST / 0.4e-3)


def test_median_level_puts_every_term_at_the_profiles_reference_work() -> None:
    rp = load_benchmark("repredict_h200", "rp_fast2")
    prof = _levelled()
    tp, ref = rp.one_level_inputs(prof, "median")
    assert ref == pytest.approx(0.4e-3)
    got = scale_host(tp, 1.0, ref)
    assert got.host.launch_s == pytest.approx(prof.host.launch_s * 0.4e-3 / SLOW)
    assert got.host.schedule_s == pytest.approx(prof.host.schedule_s * 0.4e-3 / FAST)


def test_profile_without_levels_is_left_as_it_is() -> None:
    rp = load_benchmark("repredict_h200", "rp_fast3")
    assert rp.profile_fast_level(tiny_profile()) is None
    assert rp.one_level_inputs(tiny_profile(), "fast") is None
    # a reference work but no per-phase levels anywhere (no map, no provenance): nothing to level
    assert rp.one_level_inputs(tiny_profile(reference_work_s=0.3e-3), "fast") is None


def test_levels_read_back_from_an_older_profiles_provenance() -> None:
    rp = load_benchmark("repredict_h200", "rp_fast4")
    p = tiny_profile(reference_work_s=0.4e-3)
    data = p.model_dump(mode="python")
    data["provenance"] = {"host.reference_work_s": "median of 200 samples, p10 / p90 0.260 / 0.500 ms, 40% of samples "
                                                   "above ...; median per phase (ms): extend 0.450, launch 0.270, "
                                                   "sync 0.300, host 0.480, end 0.3; ..."}
    p = type(p).model_validate(data)
    assert rp.profile_fast_level(p) == pytest.approx(0.26e-3)
    tp, ref = rp.one_level_inputs(p, "fast")
    assert scale_host(tp, 1.0, ref).host.schedule_s == pytest.approx(p.host.schedule_s * 0.26 / 0.48)


def test_misses_counted_by_the_direction_the_run_missed(capsys) -> None:
    rp = load_benchmark("repredict_h200", "rp_fast5")
    assert rp.slower_than_predicted("median_ttft_ms", -10.0)
    assert not rp.slower_than_predicted("median_ttft_ms", 10.0)
    assert rp.slower_than_predicted("output_throughput", 10.0)
    assert not rp.slower_than_predicted("output_throughput", -10.0)
    t = pd.DataFrame({"metric": ["median_ttft_ms", "median_tpot_ms", "output_throughput", "p90_ttft_ms"],
                      "new_error_pct": [+20.0, +8.0, -7.0, 1.0], "fast_error_pct": [-9.0, -6.0, +6.0, 2.0]})
    rp.print_fast_level(t)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("all five")
    before, after = last.split(" | ")
    assert "1 of 4" in before and " 0 run slower,  3 run faster" in before
    assert "1 of 4" in after and " 3 run slower,  0 run faster" in after
