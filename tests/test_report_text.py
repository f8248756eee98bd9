"""The text report: SGLang 0.5.23 bench_serving's result block as it prints it, then
specsched's own sections; n/a for figures that do not apply (NaN in the summary)."""

import math
from pathlib import Path

from specsched.sim.report import BENCH_ROWS, LATENCY_SECTIONS, format_report

FIXTURE = Path(__file__).parent / "data" / "report" / "sglang-0.5.23-result-block.txt"


def _full_summary() -> dict:
    s = {"scenario": "s", "arm": "a", "source": "sim", "seed": 1, "completed": 3, "duration": 2.5,
         "total_input_tokens": 300, "total_output_tokens": 30, "request_throughput": 1.2,
         "input_throughput": 120.0, "output_throughput": 12.0, "total_throughput": 132.0,
         "concurrency": 2.0, "accept_length": 2.5, "max_output_tokens_per_s": 20.0,
         "max_concurrent_requests": 3}
    for _, key, _, _ in LATENCY_SECTIONS:
        for i, st in enumerate(("mean", "median", "p90", "p95", "p99", "max")):
            s[f"{st}_{key}_ms"] = 10.0 + i
    return s


def _block(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if "Serving Benchmark Result" in ln)
    end = lines.index("=" * 50, start)
    return lines[start : end + 1]


def test_block_matches_sglang_0523_labels_order_and_alignment():
    """Rows, order, rules and the ``"{:<40} {:<10}"`` layout of SGLang 0.5.23's print block
    (sglang/benchmark/serving.py ``benchmark()``, after ``calculate_metrics``), transcribed
    in tests/data/report/sglang-0.5.23-result-block.txt."""
    want = FIXTURE.read_text().splitlines()
    got = _block(format_report(_full_summary(), bench={"backend": "specsched-sim", "request_rate": math.inf,
                                                       "max_concurrency": None}))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        if w.endswith(":"):   # a row: label padded to 40, one space, value left-aligned in 10
            assert g[:40] == f"{w:<40}" and g[40] == " " and g[41] != " " and len(g) >= 51, (g, w)
        else:                 # a rule, exactly
            assert g == w
    rows = {ln[:40].strip(): ln[41:] for ln in got if ln[:40].strip().endswith(":")}
    assert rows["Traffic request rate:"] == "inf       " and rows["Max request concurrency:"] == "not set   "
    closed = _block(format_report(_full_summary(), bench={"request_rate": 4, "max_concurrency": 32}))
    assert "Max request concurrency:                 32        " in closed   # an int, as bench_serving prints it
    assert "Traffic request rate:                    4.0       " in closed   # its float argument
    assert "Backend:                                 specsched-sim" in closed   # no record's backend: the source's
    assert rows["Backend:"].strip() == "specsched-sim" and rows["Peak concurrent requests:"] == "3         "
    assert rows["Successful requests:"].strip() == "3" and rows["P95 TTFT (ms):"].strip() == "13.00"


def test_specsched_sections_follow_the_block_with_the_maxima():
    text = format_report(_full_summary(), reference={"max_ttft_ms": 11.0})
    block, tail = text.split("=" * 50, 1)
    assert "Max TTFT" not in block and "Scenario / arm" not in block   # not SGLang's rows
    assert all(f"Max {x} (ms):" in tail for x in ("E2E Latency", "TTFT", "TPOT"))
    assert tail.index("Scheduler") < tail.index("Reference (measured) vs model")


def test_bench_rows_are_the_fixtures_first_rows():
    want = [ln for ln in FIXTURE.read_text().splitlines()[1:] if ln.endswith(":")][: len(BENCH_ROWS)]
    assert [label for label, _ in BENCH_ROWS] == want


def test_nan_figures_print_as_not_applicable():
    text = format_report({"scenario": "s", "arm": "a", "accept_length": math.nan,
                          "decode_throughput": float("nan"), "output_throughput": 12.5})
    lines = {ln.split(":")[0]: ln for ln in text.splitlines() if ":" in ln}
    assert "Accept length" not in lines   # bench_serving prints it only when the server reports one
    assert lines["Decode tok/s (steady batch)"].split()[-1] == "n/a"
    assert lines["Peak concurrent requests"].split()[-1] == "n/a"
    assert lines["Output token throughput (tok/s)"].split()[-1] == "12.50"
    assert "nan" not in text.lower().replace("n/a", "")


def test_names_start_in_the_value_column_and_figures_end_at_the_rule():
    """Names (scenario / arm, source / seed) start where the value column starts, short or long;
    figures are right-aligned to the 50-character rule (a short name was right-aligned, a long
    one left-aligned)."""
    for scenario in ("s", "a-much-longer-scenario-name"):
        lines = format_report({**_full_summary(), "scenario": scenario}).splitlines()
        names = [ln for ln in lines if ln.startswith(("Scenario / arm:", "Source / seed:"))]
        assert [ln[41:] for ln in names] == [f"{scenario} / a", "sim / 1"]
        (ttft,) = [ln for ln in lines if ln.startswith("Max TTFT (ms):")]
        assert len(ttft) == 50 and ttft.endswith(" 15.00")


def test_a_bucketed_peak_above_the_concurrency_cap_is_explained_in_our_section():
    """'Peak concurrent requests: 93' beside 'Max request concurrency: 64' read as a bug: the
    row is bench_serving's own (kept, label and value), counted in whole-second buckets; our
    section says so, and says nothing when the peak is within the cap or there is none."""
    summary = dict(_full_summary(), max_concurrent_requests=93)
    text = format_report(summary, bench={"request_rate": math.inf, "max_concurrency": 64})
    block, tail = text.split("=" * 50, 1)
    assert "Peak concurrent requests:                93        " in block
    note = " ".join(ln for ln in tail.split("-" * 19 + " Scheduler")[0].splitlines() if not ln.endswith("-"))
    assert ("note: Peak concurrent requests (93) is counted in whole-second buckets, as bench_serving does" in note
            and "At most 64 (Max request concurrency) ran at once." in note), tail
    assert all(len(ln) <= 50 for ln in tail.splitlines())
    for bench in ({"max_concurrency": 93}, {"max_concurrency": None}, None):
        assert "whole-second buckets" not in format_report(summary, bench=bench)
