"""benchmarks/h200_scoreboard.py on a synthetic measurements tree: every validate CSV is found
and tagged with its round, call and preset; a CSV copied into a second folder counts once; the
within-5 % shares are the counts of |error| <= 5 %; a CSV missing a column is one line, exit 2,
nothing written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.runtime.cli_commands import TARGET_METRICS

from benchmarks.h200_scoreboard import WITHIN_PCT, load, main, share_table

ROOT = Path(__file__).resolve().parents[1]


def _csv(path: Path, errors: dict[str, float], cell: str = "batch1", extra: str = "") -> None:
    """A validate CSV: one row per metric, measured 100, predicted 100 + error."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["cell,arm,metric,predicted,measured,error_pct" + extra]
    lines += [f"{cell},base,{m},{100 + e},100,{e}" + (",1.2" if extra else "") for m, e in errors.items()]
    path.write_text("\n".join(lines) + "\n")


def _tree(docs: Path) -> None:
    # round 3: 1b from the page's command; five target figures (two beyond 5 %) + one not scored
    _csv(docs / "h200-v3" / "validate.csv", {"median_ttft_ms": 2.0, "p90_ttft_ms": -7.0, "median_tpot_ms": 5.0,
                                             "median_itl_ms": 0.5, "output_throughput": 12.0, "max_ttft_ms": 40.0})
    (docs / "h200-v3.md").write_text("```bash\npython benchmarks/gpu_validate.py --out OUT/v3 --preset 1b \\\n"
                                     "    --max-bs 128\n```\n")
    # round 4: two calls, preset from the profile the log says the call made; call b is a copy of a
    a = {m: 1.0 for m in TARGET_METRICS} | {"median_ttft_ms": -9.0}
    _csv(docs / "h200-v4" / "a" / "validate.csv", a, cell="batch8")
    _csv(docs / "h200-v4" / "a" / "validate_conditioned.csv", {m: 1.0 for m in TARGET_METRICS}, cell="batch8",
         extra=",speed_factor")
    (docs / "h200-v4" / "a" / "gpu_validate.log").write_text("profiled in 300 s -> OUT/a/h200-8b.yaml\n")
    (docs / "h200-v4" / "a" / "summary.md").write_text("Within 5 %: **4 of 5** figures\n")
    (docs / "h200-v4" / "b").mkdir()
    (docs / "h200-v4" / "b" / "validate.csv").write_bytes((docs / "h200-v4" / "a" / "validate.csv").read_bytes())
    # a later round filed in round 4's folder, no preset anywhere
    _csv(docs / "h200-v4" / "v5" / "validate.csv", {"median_ttft_ms": 3.0}, cell="batch8")
    # other formats beside them are not read
    (docs / "h200-v4-holdout" / "m").mkdir(parents=True)
    (docs / "h200-v4-holdout" / "m" / "sweep.csv").write_text("rate,seed\n8,1\n")


def test_counts_tags_dedup_and_shares(tmp_path):
    docs = tmp_path / "measurements"
    _tree(docs)
    df, counts = load(docs)
    assert counts["files"] == 5
    assert counts["duplicates"] == 5  # h200-v4/b repeats h200-v4/a row for row
    assert counts["not_scored"] == 1  # max_ttft_ms
    assert len(df) == 5 + 5 + 5 + 1
    tags = df.groupby(["round", "call", "kind"]).agg(preset=("preset", "first"), fresh=("fresh", "first"), n=("cell", "size"))
    assert tags.loc[(3, "-", "plain")].tolist() == ["1b", "not recorded", 5]
    assert tags.loc[(4, "a", "plain")].tolist() == ["8b", "yes", 5]
    assert tags.loc[(4, "a", "conditioned")].tolist() == ["8b", "yes", 5]
    assert tags.loc[(5, "v5", "plain")].tolist() == ["unknown", "not recorded", 1]
    assert (4, "b", "plain") not in tags.index

    overall = share_table(df, ["kind"]).set_index(["kind", "metric"])
    # plain: round 3 (2, -7, 5, 0.5, 12) + round 4a (-9, 1, 1, 1, 1) + round 5 (3): |e| <= 5 in 8 of 11
    assert overall.loc[("plain", "all"), ["within", "n"]].tolist() == [8, 11]
    assert overall.loc[("plain", "median_ttft_ms"), ["within", "n"]].tolist() == [2, 3]
    assert overall.loc[("plain", "median_ttft_ms"), "median_abs"] == 3.0
    assert overall.loc[("conditioned", "all"), ["within", "n"]].tolist() == [5, 5]

    assert main(["--docs", str(docs)]) == 0
    text = (docs / "scoreboard.md").read_text()
    assert "| plain | 67 % (2/3), 3.0 % |" in text
    assert "[4](h200-v4/)" in text  # no page for round 4: its folder
    assert "| 4 of 5 (4 of 5) |" in text  # the call's own summary.md, beside the count
    for png in ("ecdf.png", "by-round.png", "latest-heatmap.png"):
        assert (docs / "scoreboard" / png).stat().st_size < 150_000


def test_profile_carried_back_from_out_is_made_on_the_machine(tmp_path):
    """A profile call 1 wrote as OUT/p1/X comes back and is carried to call 2 as p1/X: the same
    profile, made on that machine minutes before; a profile named nowhere as made is not."""
    docs = tmp_path / "measurements"
    for rnd, used in ((6, "p1/gpu-8b.yaml"), (7, "p2/gpu-8b.yaml")):
        _csv(docs / f"h100-v{rnd}" / "b" / "validate.csv", {"median_ttft_ms": float(rnd)})  # rows unlike: no dedup
        (docs / f"h100-v{rnd}.md").write_text(
            "```bash\nspecsched profile --device cuda --preset 8b --max-bs 64 \\\n    --out OUT/p1/gpu-8b.yaml\n"
            f"python benchmarks/gpu_validate.py --out OUT/b --preset 8b --profile {used} --smi\n```\n")
    df, _ = load(docs)
    fresh = df.groupby("round").fresh.first()
    assert fresh[6] == "yes"
    assert fresh[7] == "not recorded"


def test_a_profile_named_in_environment_txt_is_an_earlier_rounds(tmp_path):
    """A call measured by another script than gpu_validate (benchmarks/closed_loop_crossover.py
    --csv) names its profile in environment.txt: another round's folder is not this machine's."""
    docs = tmp_path / "measurements"
    _csv(docs / "h100-v9" / "validate.csv", {"median_ttft_ms": 1.0})
    (docs / "h100-v9" / "environment.txt").write_text(
        "preset: 8b\nprofile: docs/measurements/h100-v8/p/gpu-8b.yaml (another lease)\n")
    _csv(docs / "h100-v10" / "validate.csv", {"median_ttft_ms": 2.0})
    (docs / "h100-v10" / "environment.txt").write_text("preset: 8b\n")
    df, _ = load(docs)
    tags = df.groupby("round").agg(fresh=("fresh", "first"), profile=("profile", "first"), preset=("preset", "first"))
    assert tags.loc[9].tolist() == ["no", "docs/measurements/h100-v8/p/gpu-8b.yaml", "8b"]
    assert tags.loc[10, "fresh"] == "not recorded"


def test_value_not_a_number_is_one_line_exit_2(tmp_path, capsys):
    docs = tmp_path / "measurements"
    _tree(docs)
    bad = docs / "h200-v3" / "validate.csv"
    bad.write_text(bad.read_text().replace(",2.0\n", ",two\n"))
    assert main(["--docs", str(docs)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0] and "'error_pct'" in err[0] and "'two'" in err[0]
    assert not (docs / "scoreboard.md").exists()


def test_missing_column_is_one_line_exit_2(tmp_path):
    docs = tmp_path / "measurements"
    _tree(docs)
    bad = docs / "h200-v6" / "validate.csv"
    bad.parent.mkdir()
    bad.write_text("cell,arm,metric,predicted,error_pct\nbatch1,base,median_ttft_ms,1,2\n")
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "h200_scoreboard.py"), "--docs", str(docs)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert str(bad) in lines[0] and "'measured'" in lines[0]
    assert not (docs / "scoreboard.md").exists() and not (docs / "scoreboard").exists()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-60, 60, allow_nan=False), min_size=1, max_size=40))
def test_share_is_the_count_within_target(errors):
    """Invariant: per metric, within = #(|error| <= 5 %), share = within / n, 'all' pools them."""
    metrics = [TARGET_METRICS[i % len(TARGET_METRICS)] for i in range(len(errors))]
    df = pd.DataFrame({"metric": metrics, "error_pct": errors, "abs_error_pct": np.abs(errors)})
    t = share_table(df, []).set_index("metric")
    assert t.loc["all", "within"] == sum(abs(e) <= WITHIN_PCT for e in errors)
    assert t.loc["all", "n"] == len(errors)
    for m in set(metrics):
        sel = [abs(e) for e, mm in zip(errors, metrics, strict=True) if mm == m]
        assert t.loc[m, "within"] == sum(e <= WITHIN_PCT for e in sel)
        assert t.loc[m, "share"] == t.loc[m, "within"] / len(sel)
