"""analysis/change_scores.py: an arm's predicted change against its measured change, within one
call's validate CSV. A profile error common to both arms cancels; pairs the model predicts
identical are the noise floor, not scored; the direction counts split as the docstring says; a
CSV copied into a second folder counts once; the scoreboard page carries the section."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.analysis.change_scores import (
    NULL_PCT,
    RESOLVED_PCT,
    WITHIN_PCT,
    change_pairs,
    change_table,
    noise_table,
)
from specsched.runtime.cli_commands import TARGET_METRICS

from benchmarks.h200_scoreboard import load_rows, main

DATA = Path(__file__).resolve().parent / "data" / "bench"


def _rows(figures: list[tuple[str, str, str, float, float]], file: str = "h100-v9/validate.csv",
          rnd: int = 9) -> pd.DataFrame:
    """Tagged validate rows: (cell, arm, metric, predicted, measured)."""
    df = pd.DataFrame(figures, columns=["cell", "arm", "metric", "predicted", "measured"])
    return df.assign(file=file, kind="plain", round=rnd, call="-", page=f"h100-v{rnd}.md", preset="8b")


def test_change_factor_error_and_its_scores():
    m = "median_ttft_ms"
    rows = _rows([("c", "base", m, 100.0, 110.0), ("c", "arm", m, 150.0, 154.0),     # +50 % vs +40 %
                  ("c", "same", m, 100.0, 112.0),                                    # predicted identical
                  ("c", "flat", m, 99.5, 110.0),                                     # -0.5 % vs 0
                  ("c", "wrong", m, 90.0, 121.0)])                                   # -10 % vs +10 %
    p = change_pairs(rows).set_index("arm")
    assert math.isclose(p.loc["arm", "pred_change_pct"], 50.0)
    assert math.isclose(p.loc["arm", "meas_change_pct"], 40.0)
    assert math.isclose(p.loc["arm", "gap_pp"], 10.0)
    assert math.isclose(p.loc["arm", "factor_err_pct"], 100 * (1.5 / 1.4 - 1))
    t = change_table(change_pairs(rows), TARGET_METRICS).set_index("metric").loc[m]
    assert t.n == 3  # "same" is the noise floor, not scored
    assert t.within == 1  # only "flat" (0.5 %) is within WITHIN_PCT
    assert (t.resolved, t.agree, t.missed, t.opposite) == (2, 1, 0, 1)
    assert (t.nulls, t.null_ok) == (1, 1)
    noise = noise_table(change_pairs(rows), TARGET_METRICS).set_index("metric").loc[m]
    assert noise.n == 1 and math.isclose(noise["median"], 100 * (112 / 110 - 1))


def test_a_change_predicted_as_none_is_missed_not_opposite():
    m = "output_throughput"
    rows = _rows([("c", "base", m, 100.0, 100.0), ("c", "a", m, 100.0 * (1 + NULL_PCT / 200), 100 + 2 * RESOLVED_PCT)])
    t = change_table(change_pairs(rows), TARGET_METRICS).set_index("metric").loc[m]
    assert (t.resolved, t.agree, t.missed, t.opposite) == (1, 0, 1, 0)


def test_pairs_form_within_one_file_and_copies_count_once():
    m = "median_tpot_ms"
    a = _rows([("c", "base", m, 10.0, 10.0), ("c", "arm", m, 12.0, 11.0)], file="h100-v9/a/validate.csv")
    b = _rows([("c", "base", m, 20.0, 20.0)], file="h100-v9/b/validate.csv")  # another call's base: no pair
    copy = a.assign(file="h100-v10/validate.csv", round=10)
    p = change_pairs(pd.concat([a, b, copy], ignore_index=True))
    assert len(p) == 1 and p.iloc[0]["round"] == 9


@settings(max_examples=40, deadline=None)
@given(st.floats(0.5, 2.0), st.lists(st.tuples(st.floats(1.0, 1e4), st.floats(0.2, 5.0)), min_size=1, max_size=8))
def test_a_profile_error_common_to_both_arms_cancels(k, arms):
    """Invariant: predictions that are the measurements times one factor k (a profile k off on
    every figure of the call) predict every change exactly: factor error 0, gap 0."""
    figures = []
    for i, (base, ratio) in enumerate(arms):
        cell = f"c{i}"
        figures += [(cell, "base", "median_itl_ms", k * base, base), (cell, "x", "median_itl_ms", k * base * ratio, base * ratio)]
    p = change_pairs(_rows(figures))
    assert len(p) == len(arms)
    assert (p.factor_err_pct.abs() < 1e-9).all() and (p.gap_pp.abs() < 1e-6).all()
    t = change_table(p, TARGET_METRICS)
    assert (t.within == t.n).all()


def test_scoreboard_page_has_the_changes_section(tmp_path):
    docs = tmp_path / "measurements"
    (docs / "h100-v9").mkdir(parents=True)
    lines = ["cell,arm,metric,predicted,measured,error_pct"]
    for m in TARGET_METRICS:
        lines += [f"c,base,{m},100,100,0", f"c,arm,{m},110,105,4.76", f"c,same,{m},100,101,-0.99"]
    (docs / "h100-v9" / "validate.csv").write_text("\n".join(lines) + "\n")
    rows, files, _ = load_rows(docs)
    assert files == 1 and len(rows) == 3 * len(TARGET_METRICS)
    assert main(["--docs", str(docs)]) == 0
    text = (docs / "scoreboard.md").read_text()
    assert "## What a change does" in text
    assert f"| c | arm | [9](h100-v9/) | - | +10.0 -> +5.0 (**+{100 * (1.1 / 1.05 - 1):.1f} %**) |" in text
    assert "| c | same | [9](h100-v9/) | - | = (+1.0) |" in text
    assert (docs / "scoreboard" / "changes.png").stat().st_size > 1000
    assert WITHIN_PCT < 100 * (1.1 / 1.05 - 1)


def test_verdict_names_each_case():
    from specsched.analysis.change_scores import verdict

    assert verdict(10.0, 10.5, 100 * (1.10 / 1.105 - 1)) == "agrees"
    assert verdict(10.0, 0.5, 9.45) == "measured no change"
    assert verdict(0.5, 10.0, -8.6) == "predicted no change"
    assert verdict(20.0, 10.0, 9.1) == "same direction"
    assert verdict(-5.0, 10.0, -13.6) == "opposite"


def test_compare_sets_each_arm_beside_its_measured_run(tmp_path, capsys):
    """`compare --measured`: with the simulator's own runs of the same seed as the measured
    ones, every predicted change is the measured change (factor error 0, 'agrees')."""
    from specsched.cli import main

    small = ["--set", "workload.num_requests=24"]
    for arm in ("base", "stream_wait"):
        assert main(["run", "burst256-ht", "--arm", arm, *small, "--out", str(tmp_path / arm), "-q"]) == 0
    capsys.readouterr()
    assert main(["compare", "burst256-ht", "--arms", "base,stream_wait", "--seeds", "1", *small, "--no-save", "-q",
                 "--measured", f"base={tmp_path / 'base'}", "--measured", f"stream_wait={tmp_path / 'stream_wait'}"]) == 0
    out = capsys.readouterr().out
    block = out.split("predicted against measured change, each arm against base", 1)[1]
    rows = [line for line in block.splitlines() if "stream_wait" in line and "%" in line]
    assert any("median_tpot_ms" in r for r in rows)
    assert rows and all("agrees" in r and "+0.0 %" in r for r in rows), rows


@pytest.mark.parametrize(("measured", "says"), [
    (["base"], "ARM=RUN"),
    (["other=x.jsonl", "base=y.jsonl"], "arm 'other' is not in --arms"),
    (["both=RUNS"], "give the base arm's run too"),
    (["base=RUNS", "base=RUNS"], "given twice"),
    (["base=/nonexistent/runs.jsonl"], "no such path"),
    # a change is measured between two runs: the base arm's alone, or one run given for two arms
    # (a measured change of 0 by construction)
    (["base=RUNS"], "another arm's run"),
    (["base=RUNS", "both=RUNS"], "name one run"),
])
def test_compare_measured_mistakes_are_one_line_before_any_run(measured, says, tmp_path, capsys):
    from specsched.cli import main

    runs = tmp_path / "runs"
    assert main(["run", "burst256-ht", "--set", "workload.num_requests=4", "--out", str(runs), "-q"]) == 0
    capsys.readouterr()
    argv = ["compare", "burst256-ht", "--arms", "base,both", "--seeds", "1", "--out", str(tmp_path / "o"), "-q"]
    for m in measured:
        argv += ["--measured", m.replace("RUNS", str(runs))]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err
    assert not (tmp_path / "o").exists()


def test_compare_measured_one_file_twice_by_line_and_without(tmp_path, capsys):
    """FILE and FILE:1 of a one-run file name one run."""
    from specsched.cli import main

    one = tmp_path / "one.jsonl"
    one.write_text((DATA / "sglang-0.5.23.jsonl").read_text().splitlines()[0] + "\n")
    argv = ["compare", "burst256-ht", "--arms", "base,stream_wait", "--seeds", "1", "--no-save", "-q",
            "--measured", f"base={one}", "--measured", f"stream_wait={one}:1"]
    assert main(argv) == 2
    assert "name one run" in capsys.readouterr().err


def _measured_block(argv, capsys):
    from specsched.cli import main

    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "predicted against measured change" in out or "--measured" in err, (out, err)
    block = out.split("predicted against measured change, each arm against base", 1)[-1]
    return block, err


def test_compare_measured_per_chunk_itl_is_not_set_beside_a_per_token_prediction(capsys):
    """A client that records one ITL per streamed chunk (vLLM) of a speculating server measures a
    verify cycle's gap; the prediction's ITL is per token, so an arm that moves the accept length
    would read a wrong change: the ITL rows are left out, and a note says why."""
    f = DATA / "vllm-0.33.0-bench-serve.json"
    block, err = _measured_block(["compare", "burst256-ht", "--arms", "base,stream_wait", "--seeds", "1",
                                  "--set", "workload.num_requests=8", "--no-save", "-q",
                                  "--measured", f"base={f}:1", "--measured", f"stream_wait={f}:2"], capsys)
    assert "median_tpot_ms" in block
    assert "_itl_ms" not in block.split("measured:")[0]
    assert "per streamed chunk" in err and "median_itl_ms" in err


def test_compare_measured_with_no_metric_in_common_says_so(capsys):
    """--metrics naming only figures the measured runs do not have: a note, not an empty table."""
    f = DATA / "sglang-0.5.23.jsonl"
    block, err = _measured_block(["compare", "burst256-ht", "--arms", "base,stream_wait", "--seeds", "1",
                                  "--set", "workload.num_requests=8", "--no-save", "-q", "--metrics",
                                  "verify_cycles_per_s", "--measured", f"base={f}:1", "--measured",
                                  f"stream_wait={f}:2"], capsys)
    assert "predicted change" not in block
    assert "verify_cycles_per_s" in err and "no measured value" in err


def test_scoreboard_with_every_pair_predicted_identical(tmp_path):
    """Only noise-floor pairs (no arm the model predicts to differ): the page and its scatter are
    still made (the scatter's axes took their limits from an empty selection, NaN)."""
    docs = tmp_path / "measurements"
    (docs / "h100-v9").mkdir(parents=True)
    lines = ["cell,arm,metric,predicted,measured,error_pct"]
    for m in TARGET_METRICS:
        lines += [f"c,base,{m},100,100,0", f"c,same,{m},100,101,-0.99"]
    (docs / "h100-v9" / "validate.csv").write_text("\n".join(lines) + "\n")
    assert main(["--docs", str(docs)]) == 0
    text = (docs / "scoreboard.md").read_text()
    assert "| c | same | [9](h100-v9/) | - | = (+1.0) |" in text
    assert (docs / "scoreboard" / "changes.png").is_file()


def test_compare_measured_per_chunk_itl_from_validate_folders(tmp_path, capsys):
    """The measured folders `validate-bench --out` writes keep their client's ITL counting (their
    bench_serving.jsonl names it): compared as the files themselves are."""
    from specsched.cli import main

    f = DATA / "vllm-0.33.0-bench-serve.json"
    for line in (1, 2):
        assert main(["validate-bench", f"{f}:{line}", "--scenario", "burst256-ht", "--set", "workload.num_requests=8",
                     "--out", str(tmp_path / f"v{line}"), "-q"]) == 0
    capsys.readouterr()
    block, err = _measured_block(["compare", "burst256-ht", "--arms", "base,stream_wait", "--seeds", "1",
                                  "--set", "workload.num_requests=8", "--no-save", "-q",
                                  "--measured", f"base={tmp_path / 'v1' / 'measured'}",
                                  "--measured", f"stream_wait={tmp_path / 'v2' / 'measured'}"], capsys)
    assert "median_tpot_ms" in block and "_itl_ms" not in block.split("measured:")[0]
    assert "per streamed chunk" in err
