"""benchmarks/lead_smoothing.py: a profile's per-point idle leads read back from its provenance
match the tables the profiler wrote before it smoothed (round 50's H100 profile), and the
smoothed side is runtime.profile_fit.neighbourhood_median of them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml
from specsched.runtime.profile_fit import neighbourhood_median

from benchmarks.lead_smoothing import TABLES, per_point_from_provenance, smoothed

PROFILE = Path(__file__).resolve().parents[1] / "docs" / "measurements" / "h100-v50" / "p" / "gpu-8b.yaml"


def test_per_point_leads_read_back_from_provenance():
    recorded = yaml.safe_load(PROFILE.read_text())   # made before the profiler smoothed: its tables are per point
    blank = {**recorded, "host": {**recorded["host"]}}
    for key in TABLES:
        blank["host"][key] = {"tokens": [1.0], "seconds": [0.0]}
    back = per_point_from_provenance(blank)
    for key in TABLES:
        assert back["host"][key]["tokens"] == recorded["host"][key]["tokens"]
        np.testing.assert_allclose(back["host"][key]["seconds"], recorded["host"][key]["seconds"], atol=1e-5)


def test_smoothed_is_the_neighbourhood_median_and_leaves_the_rest():
    recorded = yaml.safe_load(PROFILE.read_text())
    got = smoothed(recorded)
    for key in TABLES:
        t = recorded["host"][key]
        assert got["host"][key]["seconds"] == neighbourhood_median(t["tokens"], t["seconds"])
    assert got["gpu"] == recorded["gpu"] and got["host"]["launch_s"] == recorded["host"]["launch_s"]
    assert got["host"]["extend_own_idle_lead_by_tokens"]["seconds"] != recorded["host"]["extend_own_idle_lead_by_tokens"]["seconds"]


def test_the_page_quotes_its_csv():
    """docs/measurements/lead-smoothing.md's counts are those of the CSV it was written from."""
    import pandas as pd

    docs = PROFILE.parents[2]
    text = (docs / "lead-smoothing.md").read_text()
    df = pd.read_csv(docs / "lead-smoothing" / "rerun.csv")
    runs, calls = len(df.drop_duplicates(["call", "run"])), df.call.nunique()
    assert f"({runs} runs in {calls} of them" in text
    rec, smo = (int((df[c].abs() <= 5).sum()) for c in ("error_recorded", "error_smoothed"))
    assert f"| all | {len(df)} | {rec} | {smo} |" in text
    runtime = (docs.parent / "runtime.md").read_text()
    assert f"re-predicts {runs} recorded runs" in runtime
