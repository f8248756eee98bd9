"""The MI355X reference fit (sim/calibrate.py)."""

from __future__ import annotations

import pytest


def test_the_fitted_column_stays_and_the_second_grows_as_the_analytic_model_reads_kv():
    """Step 5 of the reference fit: each grid's first column is the fitted value at the
    cells' context, the second that plus the analytic roofline's growth to 32K, never less."""
    from specsched.sim import calibrate as cal
    from specsched.sim.profile import load_profile

    base = load_profile(str(cal.PROFILE))
    cf = cal.closed_form(base)
    growth = cal.analytic_growth()
    prof = cal.apply(base, cf, 0.24, 0.08, growth)
    v, e = prof.gpu.verify, prof.gpu.extend
    assert v.context_len == list(cal.VERIFY_CONTEXT) and e.context_len == list(cal.EXTEND_CONTEXT)
    for x, row in zip(v.x, v.seconds, strict=True):
        want = {1: cf["verify"][1], 8: cf["verify"][8], 32: cf["verify"][32], 64: cf["verify"][64], 256: 0.08}[int(x)]
        assert row[0] == want
        assert row[1] - row[0] == pytest.approx(max(0.0, growth[0](x, 32768.0) - growth[0](x, 4500.0)), rel=1e-9)
    assert all(r[1] >= r[0] for r in e.seconds) and e.seconds[-1][1] > e.seconds[-1][0]
    # the draft forward keeps its share of each column
    share = prof.gpu.draft_step.seconds[0][0] / v.seconds[0][0]
    for d, r in zip(prof.gpu.draft_step.seconds, v.seconds, strict=True):
        assert d[1] == pytest.approx(share * r[1], rel=1e-9)
