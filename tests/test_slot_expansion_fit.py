"""host.slot_expansion_s: the profiler's fit against what the simulator then charges.

The profiler times the loop's DSpark prefill under the slot-expansion sync (extend,
``prepare_inject(sync=True)``, inject) and records the GPU idle gap between the extend's
end and the injection's start, and the sync-free preparation's host time. The loop prepares
the injection inside the block and its launch reuses the batch (runtime/engine.py
``_host_block``), so the simulator, fed the fitted value, must idle the GPU there exactly
as long as the loop did. Round 15 (docs/measurements/h200-v15.md "burst66 TTFT"): the fit
subtracted the preparation, the simulator idled 0.21 ms where the loop idled 1.70 ms, on
each of burst66's 16 prefill chunks.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")

from specsched.runtime.profile_fit import (  # noqa: E402
    refit_slot_expansion,
    slot_expansion_fit,
    slot_expansion_points_from_provenance,
)
from specsched.runtime.profile_provenance import Provenance  # noqa: E402
from specsched.sim.engine import SimEngine  # noqa: E402

from tests.conftest import make_scenario, tiny_profile  # noqa: E402

WAKE = 5e-5  # tiny_profile's host.sync_wakeup_s


def _simulated_gaps(slot_expansion_s: float, sync_mode: str) -> np.ndarray:
    """GPU idle between each extend's end and its injection's start (s), simulated."""
    sc = make_scenario({"sync_mode": sync_mode, "prefill_slot_expansion_sync": True},
                       {"kind": "closed_loop", "concurrency": 1, "num_requests": 3,
                        "output_len": {"kind": "fixed", "value": 12}})
    res = SimEngine(sc, tiny_profile(slot_expansion_s=slot_expansion_s)).run()
    s = res.steps.reset_index(drop=True)
    inj = s.index[s["part"] == "inject"]
    return s.loc[inj, "gpu_start_s"].to_numpy() - s.loc[inj - 1, "gpu_end_s"].to_numpy()


@settings(max_examples=20, deadline=None)
@given(gap=st.floats(WAKE, 3e-3), prep=st.floats(1e-5, 2e-3), tokens=st.sampled_from([256, 1024, 4096]),
       sync_mode=st.sampled_from(["host_block", "stream_wait"]))
def test_the_simulated_gap_is_the_profiled_gap(gap: float, prep: float, tokens: int, sync_mode: str) -> None:
    """INV-SE1: a profile fitted from one slot-expansion point (gap G, preparation P) makes
    the simulator idle the GPU for G between the extend's end and the injection's start,
    whatever P: the loop idles for G there (the preparation is inside the block)."""
    fitted = slot_expansion_fit([(tokens, gap, prep)], WAKE)
    assert _simulated_gaps(fitted, sync_mode) == pytest.approx([gap] * 3, abs=1e-12)


def test_round_15_points() -> None:
    """The round-15 profile's points (ms, gap / preparation): the median gap less the
    wake-up, 1.337 ms (the fit gave 0.213 ms when it subtracted the preparation)."""
    pts = [(256, 1.338e-3, 1.123e-3), (1024, 0.801e-3, 0.7179e-3), (2048, 0.8762e-3, 0.7018e-3),
           (4096, 1.446e-3, 1.162e-3), (8192, 1.404e-3, 0.9951e-3)]
    assert slot_expansion_fit(pts, 1.337e-6) == pytest.approx(1.338e-3 - 1.337e-6)


@settings(max_examples=50, deadline=None)
@given(pts=st.lists(st.tuples(st.integers(1, 10_000), st.floats(0, 5e-3), st.floats(0, 2e-3)), min_size=1, max_size=6),
       wake=st.floats(0, 1e-4))
def test_the_preparation_does_not_enter_the_fit(pts, wake) -> None:
    """INV-SE2: the fit depends on the gaps and the wake-up only, and is the median of
    ``max(0, gap - wake)``."""
    s = slot_expansion_fit(pts, wake)
    assert slot_expansion_fit([(t, g, 0.0) for t, g, _ in pts], wake) == s
    assert s == pytest.approx(float(np.median([max(0.0, g - wake) for _, g, _ in pts])))


@settings(max_examples=50, deadline=None)
@given(pts=st.lists(st.tuples(st.integers(1, 100_000), st.floats(1e-7, 9e-3), st.floats(1e-7, 9e-3)),
                    min_size=1, max_size=6))
def test_points_round_trip_through_the_provenance(pts) -> None:
    """The points the profiler writes into the provenance read back (to its 4 significant
    digits), so a profile made with the old fit can be refitted from its own text."""
    fake = SimpleNamespace(slot_pts=pts, _reps_text=lambda key: "median of 8-15 repeats")
    text = Provenance._slot_expansion_text(fake, "date X")
    back = slot_expansion_points_from_provenance(SimpleNamespace(provenance={"host.slot_expansion_s": text}))
    assert [t for t, _, _ in back] == [t for t, _, _ in pts]
    for (_, g, q), (_, g2, q2) in zip(pts, back, strict=True):
        assert g2 == pytest.approx(g, rel=1e-3) and q2 == pytest.approx(q, rel=1e-3)
    assert slot_expansion_points_from_provenance(SimpleNamespace(provenance={})) == []


def test_refit_from_provenance_uses_the_profiles_own_points() -> None:
    """refit_slot_expansion: the fit of the points the provenance records, every other field
    as it was; None where the provenance has none."""
    p = tiny_profile(slot_expansion_s=2e-4)
    assert refit_slot_expansion(p) is None
    pts = [(256, 1.338e-3, 1.123e-3), (1024, 0.801e-3, 0.718e-3), (4096, 1.446e-3, 1.162e-3)]
    fake = SimpleNamespace(slot_pts=pts, _reps_text=lambda key: "median of 8 repeats")
    text = Provenance._slot_expansion_text(fake, "date X")
    p = p.model_copy(update={"provenance": {**(p.provenance or {}), "host.slot_expansion_s": text}})
    new = refit_slot_expansion(p)
    assert new.host.slot_expansion_s == pytest.approx(slot_expansion_fit(pts, p.host.sync_wakeup_s), rel=1e-3)
    assert new.host.slot_expansion_s != p.host.slot_expansion_s
    assert new.gpu == p.gpu and new.host.launch_s == p.host.launch_s
