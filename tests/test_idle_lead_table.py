"""The idle-stream extend lead per extend size: the profiler's fit and writing path (the GPU
measurement faked on CPU), the profile's table, and the simulator reading it by tokens."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from specsched.runtime.profile_fit import idle_lead_fit, neighbourhood_median
from specsched.sim.engine import run_scenario
from specsched.sim.profile import LeadTable, Profile, load_profile

from tests.conftest import make_scenario, profile_with_faked_idle_lead, tiny_profile

point = st.tuples(st.integers(1, 20000), st.floats(0, 0.05), st.floats(0, 0.05))


@given(st.lists(point, min_size=1, max_size=12))
@settings(max_examples=60, deadline=None)
def test_fit_invariants(points):
    """Invariants: every lead >= 0, tokens strictly increasing, the scalar is the table's
    median, and the table validates as the profile's LeadTable."""
    scalar, table = idle_lead_fit(points)
    assert table is not None
    assert all(s >= 0 for s in table["seconds"])
    assert table["tokens"] == sorted(set(float(t) for t, _, _ in points))
    assert scalar == pytest.approx(statistics.median(table["seconds"]))
    LeadTable(**table)


def test_fit_takes_wall_minus_device_and_nothing_on_cpu():
    scalar, table = idle_lead_fit([(4096, 0.0313, 0.0300), (1024, 0.0100, 0.0090), (256, 0.0050, 0.0052)])
    assert table == {"tokens": [256.0, 1024.0, 4096.0], "seconds": [0.0, pytest.approx(1e-3), pytest.approx(1.3e-3)]}
    assert scalar == pytest.approx(1e-3)
    assert idle_lead_fit([]) == (0.0, None)


@pytest.mark.parametrize("bad", [dict(tokens=[], seconds=[]), dict(tokens=[1.0, 2.0], seconds=[0.1]),
                                 dict(tokens=[2.0, 1.0], seconds=[0.1, 0.1]), dict(tokens=[1.0], seconds=[-1.0])])
def test_bad_tables_are_refused(bad):
    with pytest.raises(ValidationError):
        LeadTable(**bad)


def _run(lead_s: float, table: dict | None, tokens: int):
    prof = tiny_profile()
    prof = prof.model_copy(update={"host": prof.host.model_copy(update={
        "extend_idle_lead_s": lead_s,
        "extend_idle_lead_by_tokens": LeadTable(**table) if table else None})})
    sc = make_scenario(server={"speculative_algorithm": "none", "speculative_num_draft_tokens": 1},
                       workload={"num_requests": 1, "input_len": {"kind": "fixed", "value": tokens}})
    return run_scenario(sc, profile=prof).requests.ttft_s.iloc[0]


@pytest.mark.parametrize("tokens,expect", [(64, 3e-3), (256, 2e-3), (448, 1e-3), (2000, 1e-3)])
def test_simulator_reads_the_table_at_the_extend_tokens(tokens, expect):
    """The table wins over the scalar; linear between points, the end values outside."""
    table = {"tokens": [128.0, 384.0], "seconds": [3e-3, 1e-3]}
    # the table's value at these tokens acts exactly as that scalar would (the scalar is ignored)
    assert _run(5e-3, table, tokens) == pytest.approx(_run(expect, None, tokens), abs=1e-12)
    assert _run(5e-3, None, tokens) > _run(expect, None, tokens)  # the scalar alone still counts


def test_profiler_writes_the_measured_table(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """``specsched profile`` with the GPU's measurement faked: the table, its median, the
    provenance and the printed summary."""
    pytest.importorskip("torch")

    def fake(self, tokens, ext, inj):  # noqa: ANN001 -- the GPU's pairs: 2 ms lead at 16 tokens, 1 ms above
        ext()
        inj()
        self._tick()
        self.reps.setdefault("idle_lead", []).append(3)
        lead = 2e-3 if tokens <= 16 else 1e-3
        return {"device": [0.004] * 3, "wall": [0.004 + lead] * 3, "ext_device": [0.003] * 3,
                "ext_span": [0.003] * 3, "inj_device": [0.001] * 3, "inj_span": [0.001] * 3}

    out = profile_with_faked_idle_lead(monkeypatch, tmp_path, fake, "16,64,128")
    assert "extend + injection idle lead: 16 tok 2.000 ms, 64 tok 1.000 ms" in capsys.readouterr().out
    d = yaml.safe_load(out.read_text())
    host = d["host"]
    assert host["extend_idle_lead_by_tokens"]["tokens"] == [16.0, 64.0, 128.0]
    assert host["extend_idle_lead_by_tokens"]["seconds"] == pytest.approx([2e-3, 1e-3, 1e-3])
    assert host["extend_idle_lead_s"] == pytest.approx(1e-3)
    prov = d["provenance"]["host.extend_idle_lead_by_tokens"]
    assert "idle" in prov and "16: " in prov and "median of 3 repeats" in prov
    p = load_profile(str(out))
    assert isinstance(p, Profile) and p.host.extend_idle_lead_by_tokens.at(40) == pytest.approx(1.5e-3)


def test_cpu_profile_has_no_table() -> None:
    """Without the fake, a CPU run measures nothing: scalar 0, no table (old behaviour)."""
    pytest.importorskip("torch")
    from specsched.runtime.profiler import profile_device

    d = profile_device(device="cpu", preset="tiny", spec_window=3, max_bs=2, contexts=[64],
                       extend_tokens=[16, 64], cuda_graph_max_bs=2, repeats=3, progress=False)
    assert d["host"]["extend_idle_lead_s"] == 0.0 and "extend_idle_lead_by_tokens" not in d["host"]
    assert "not measured" in d["provenance"]["host.extend_idle_lead_by_tokens"]


def test_a_lone_noisy_grid_point_takes_its_neighbourhoods_lead():
    """runtime.profile_fit.neighbourhood_median: the H100 extend lead's 448-640-token points
    (round 50's profile) read 1.31, 0.95, 1.49, 1.22, 1.04 ms; 512 tokens takes the median of
    the points within a factor 1.41 of it (384-704 here), a 4K point two factors away keeps its own."""
    tokens = [384, 416, 448, 480, 512, 576, 640, 704, 2048, 4096]
    ms = [1.05, 1.00, 1.31, 0.95, 1.49, 1.22, 1.04, 1.03, 2.72, 4.43]
    got = neighbourhood_median(tokens, [m / 1e3 for m in ms])
    assert got[4] == pytest.approx(statistics.median([1.05, 1.00, 1.31, 0.95, 1.49, 1.22, 1.04, 1.03]) / 1e3)
    assert got[-2:] == pytest.approx([2.72e-3, 4.43e-3])  # a sparse tail is left as measured
    scalar, table = idle_lead_fit([(t, 0.02 + m / 1e3, 0.02) for t, m in zip(tokens, ms, strict=True)])
    assert table["seconds"] == pytest.approx(got)


@given(st.lists(st.tuples(st.integers(1, 20000), st.floats(0, 0.05)), min_size=1, max_size=15, unique_by=lambda p: p[0]),
       st.floats(1.0, 4.0))
@settings(max_examples=60, deadline=None)
def test_neighbourhood_median_invariants(pts, ratio):
    """Invariants: one lead per point; each within the range of the leads of its neighbourhood;
    ratio 1 (no neighbour but itself) changes nothing; a constant table stays constant."""
    tokens, secs = [float(t) for t, _ in pts], [s for _, s in pts]
    got = neighbourhood_median(tokens, secs, ratio)
    assert len(got) == len(pts)
    for x, g in zip(tokens, got, strict=True):
        near = [s for t, s in pts if x / ratio <= t <= x * ratio]
        assert min(near) - 1e-15 <= g <= max(near) + 1e-15
    assert neighbourhood_median(tokens, secs, 1.0) == pytest.approx(secs)
    assert neighbourhood_median(tokens, [1e-3] * len(pts), ratio) == pytest.approx([1e-3] * len(pts))


def test_neighbourhood_median_refuses_what_it_cannot_read():
    for tokens, secs, ratio in (([1.0, 2.0], [0.1], 1.5), ([0.0], [0.1], 1.5), ([1.0], [0.1], 0.5)):
        with pytest.raises(ValueError, match="neighbourhood_median"):
            neighbourhood_median(tokens, secs, ratio)


@pytest.mark.parametrize(("tokens", "secs", "ratio"), [
    ([1.0, 2.0], [0.1, 0.2], float("nan")),
    ([float("nan"), 2.0], [0.1, 0.2], 1.5),
    ([1.0, 2.0], [float("nan"), 0.2], 1.5),
    ([1.0, float("inf")], [0.1, 0.2], 1.5),
])
def test_neighbourhood_median_refuses_what_is_not_a_number(tokens, secs, ratio):
    """A NaN ratio or token count read as an empty neighbourhood (a NaN lead), a NaN lead spread
    into every neighbour's median: refused as the docstring's other cases are."""
    with pytest.raises(ValueError, match="neighbourhood_median"):
        neighbourhood_median(tokens, secs, ratio)
