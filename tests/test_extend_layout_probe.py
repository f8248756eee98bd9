"""benchmarks/extend_layout_probe.py: extends of several requests in one chunk timed with the
profiler's own runner and set beside a profile's prediction (docs/measurements/h200-extend-layouts.md)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

pytest.importorskip("torch")

from tests.conftest import load_benchmark  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_a_layout_is_extend_at_prefix_terms_and_a_bad_one_is_one_line(tmp_path, capsys):
    probe = load_benchmark("extend_layout_probe")
    assert probe.parse_layout("64@1900+448@0") == ((64, 1900), (448, 0))
    assert probe.parse_layout("512") == ((512, 0),)
    for bad in ("0@5", "64@-1"):
        with pytest.raises(ValueError, match="allowed: E@P"):
            probe.parse_layout(bad)
    out = tmp_path / "never.csv"
    assert probe.main(["--device", "cpu", "--preset", "tiny", "--profile", "h200-1b", "--layouts", "64@-1",
                       "--out", str(out)]) == 2
    assert "--layouts" in capsys.readouterr().err and not out.exists()


def test_the_probe_times_each_layout_and_prices_it_with_the_profile(tmp_path):
    """On CPU with the tiny preset: one row per layout, its dense keys per token as the cost
    model computes them (B Q C / T with C rounded to the profile's bucket), a positive measured
    time and the profile's own extend price (a two-request chunk is dearer than its tokens alone)."""
    probe = load_benchmark("extend_layout_probe")
    out = tmp_path / "layouts.csv"
    assert probe.main(["--device", "cpu", "--preset", "tiny", "--profile", str(ROOT / "profiles" / "h200-1b.yaml"),
                       "--scenario", str(ROOT / "scenarios" / "h200" / "small-chunk.yaml"), "--repeats", "1",
                       "--layouts", "32@0,16@40+16@0", "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["layout"] for r in rows] == ["32@0", "16@40+16@0"]
    assert [int(r["requests"]) for r in rows] == [1, 2]
    assert all(float(r["measured_ms"]) > 0 and float(r["predicted_ms"]) > 0 for r in rows)
    assert float(rows[1]["dense_keys_per_token"]) > float(rows[0]["dense_keys_per_token"])
    assert not list(tmp_path.glob("*.tmp"))
