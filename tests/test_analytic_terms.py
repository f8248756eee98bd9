"""benchmarks/analytic_terms.py: an analytic profile against a measured one, and the refit
from a measured profile's cells."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.analytic.gpus import load_gpu
from specsched.sim.analytic.models import load_model
from specsched.sim.analytic.writer import build_profile
from specsched.sim.profile import Profile

from tests.conftest import load_benchmark

at = load_benchmark("analytic_terms")


@pytest.fixture(scope="module")
def analytic() -> Profile:
    return Profile.model_validate(build_profile(load_model("qwen3-0.6b"), load_gpu("H200"), 1, window=6))


def test_a_profile_against_itself_is_one_everywhere(analytic):
    """The cells a measured grid is read at are the analytic grid's own cells when both are
    the same profile: every ratio is 1, every shape term equal (the readers line up)."""
    pairs = at.grid_pairs(analytic, analytic)
    for name in ("decode", "extend", "draft_inject"):
        _, _, m, a = pairs[name]
        assert m == pytest.approx(a, rel=0.02)  # the interpolator rounds a context to 10 tokens (256 -> 260)
    for _, mv, av in at.shape_terms({k: v for k, v in pairs.items() if k != "cycle"}):
        assert mv == pytest.approx(av, rel=0.05)


def test_cycle_adds_the_block_draft_to_a_verify_without_it(analytic):
    """An analytic cycle (verify_includes_draft false) is verify + draft_step at batch x window
    tokens, the sum the simulator reads."""
    f = at.cycle_reader(analytic)
    v = analytic.gpu.verify.interpolator()(16, 1024)
    d = analytic.gpu.draft_step.interpolator()(96, 1024)
    assert f(16, 1024) == pytest.approx(v + d, rel=1e-12)


def test_grid_cells_become_the_observations_the_fit_predicts(analytic):
    """Every decode and extend cell read as an Observation is predicted by the roofline at
    exactly that cell's value (kind, batch, tokens and context in the right places), so a
    refit compares like with like."""
    obs = at.grid_observations(analytic)
    assert len(obs) == len(analytic.gpu.decode.seconds) * len(analytic.gpu.decode.context_len) + \
        len(analytic.gpu.extend.seconds) * len(analytic.gpu.extend.context_len)
    for ob in obs[::7]:
        assert at._predict(analytic, ob) == pytest.approx(ob.seconds, rel=1e-4)


@settings(deadline=None)
@given(errs=st.lists(st.floats(-50, 50), min_size=1, max_size=30))
def test_counts_within_are_nested_and_bounded(errs):
    """Invariant: rows within 5 % are a subset of rows within 10 %, both at most all rows."""
    df = pd.DataFrame({"metric": ["median_itl_ms"] * len(errs), "new_error_pct": errs})
    five, ten, n = at.count_within(df, "new_error_pct")["median_itl_ms"]
    assert five == sum(abs(e) <= 5 for e in errs) and ten == sum(abs(e) <= 10 for e in errs)
    assert five <= ten <= n == len(errs)


def test_graft_host_refuses_the_profiles_in_the_wrong_order(tmp_path, analytic, capsys):
    """graft-host ANALYTIC MEASURED wrote the measured profile with the analytic one's host
    terms and exit 0; each slot is now checked for its kind."""
    from specsched.sim.analytic.cli import write_analytic_profile

    a = tmp_path / "a.yaml"
    write_analytic_profile(analytic.model_dump(mode="json", exclude_none=True), a)
    out = tmp_path / "g.yaml"
    assert at.main(["graft-host", str(a), "profiles/h200-1b.yaml", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert str(a) in err and "measured profile first" in err and not out.exists()
    assert at.main(["graft-host", "profiles/h200-1b.yaml", str(a), "--out", str(out)]) == 0


@pytest.mark.parametrize("text", ["a: 1\nb: [1, 2, 3, 4]\nc: x,y,z,w\n", "cell,arm\nx,y\n", ""])
def test_counts_of_a_file_that_is_not_a_repredict_csv_names_it(tmp_path, capsys, text):
    p = tmp_path / "x.yaml"
    p.write_text(text)
    for cmd in ("counts", "runs"):
        assert at.main([cmd, str(p)]) == 2
        err = capsys.readouterr().err
        assert str(p) in err and "repredict_h200.py CSV" in err and "tokenizing" not in err


def test_the_host_rows_hold_every_scalar_host_term_with_its_value():
    """``terms``: every scalar host term the simulator charges (sim.host_speed.HOST_SECONDS,
    the loop's result path and the per-token ingest among them) has its row, in ms."""
    from specsched.sim.host_speed import HOST_SECONDS

    from tests.conftest import tiny_profile

    m = tiny_profile(result_path_s=5e-5, recv_path_per_req_s=2e-6, ingest_per_token_s=1e-6)
    rows = {name: (a, b) for name, a, b in at.scalar_terms(m, tiny_profile())}
    assert {f"host.{k} (ms)" for k in HOST_SECONDS} <= set(rows)
    assert rows["host.result_path_s (ms)"] == pytest.approx((5e-2, 0.0))
    assert rows["host.recv_path_per_req_s (ms)"] == pytest.approx((2e-3, 0.0))
    assert rows["host.ingest_per_token_s (ms)"] == pytest.approx((1e-3, 0.0))
