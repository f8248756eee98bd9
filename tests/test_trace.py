"""Trace workloads: Azure/Mooncake layouts, column mapping, time scaling, request limit,
streaming, and bad traces (one line naming file, line, column, value; exit 2; nothing
written)."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.config import TraceConfig, WorkloadConfig, load_scenario
from specsched.sim.engine import SimEngine
from specsched.sim.errors import ConfigError
from specsched.sim.trace import load_trace

from specsched.cli import main
from tests.conftest import ROOT, make_scenario, tiny_profile


def test_shipped_example_reads_the_same_in_both_layouts():
    az = load_trace(TraceConfig(path="trace-example-azure.csv", layout="azure"))
    mc = load_trace(TraceConfig(path="trace-example-mooncake.jsonl", layout="mooncake"))
    assert len(az) == len(mc) == 400
    assert np.array_equal(az.input_len, mc.input_len) and np.array_equal(az.output_len, mc.output_len)
    assert np.allclose(az.arrival_s, mc.arrival_s, atol=6e-4)          # Mooncake stores whole ms
    assert az.arrival_s[0] == 0 and (np.diff(az.arrival_s) >= 0).all()


def test_shipped_scenario_runs_every_arm():
    for arm, n in (("base", 400), ("first100", 100)):
        sc = load_scenario(ROOT / "scenarios" / "trace-example.yaml", arm)
        assert len(SimEngine(sc).specs) == n


def _trace_scenario(tmp_path, text, suffix=".csv", **trace):
    p = tmp_path / f"t{suffix}"
    p.write_text(text)
    return make_scenario(workload={"kind": "trace", "num_requests": trace.pop("limit", None),
                                   "trace": {"path": str(p), **trace}, "input_len": None, "output_len": None},
                         server={"speculative_algorithm": "none", "speculative_num_draft_tokens": 1})


def test_arrivals_lengths_scaling_and_limit_reach_the_engine(tmp_path, capsys):
    text = "when,prompt,gen\n100.0,50,5\n100.5,60,6\n102.0,70,0\n103.0,80,8\n"
    sc = _trace_scenario(tmp_path, text, columns={"timestamp": "when", "input_len": "prompt", "output_len": "gen"},
                         time_scale=2.0, limit=3)
    res = SimEngine(sc, tiny_profile()).run()
    err = capsys.readouterr().err   # the 0-token row is said, not silently changed
    assert err.count("0 output tokens") == 1 and "1 of 3 requests" in err and "gen" in err
    r = res.requests.sort_values("rid")
    assert r["input_len"].tolist() == [50, 60, 70] and r["output_len"].tolist() == [5, 6, 0]   # 0 kept: prefill only
    assert np.allclose(r["start_s"], [0.0, 1.0, 4.0])
    from specsched.sim.bench_serving import bench_record

    rec = bench_record(res)
    assert (rec["request_rate"], rec["dataset_name"], rec["num_prompts"]) == ("trace", "trace", 3)
    sc = _trace_scenario(tmp_path, text, columns={"timestamp": "when", "input_len": "prompt", "output_len": "gen"})
    assert bench_record(SimEngine(sc, tiny_profile()).run())["num_prompts"] == 4   # no limit: the rows sent
    capsys.readouterr()
    # a limit above the rows runs the rows, and says so (it ran silently short)
    (tmp_path / "t.csv").write_text(text.replace("103.0,80,8", "103.0,80,9"))   # a new file version: read again
    sc = _trace_scenario(tmp_path, text.replace("103.0,80,8", "103.0,80,9"),
                         columns={"timestamp": "when", "input_len": "prompt", "output_len": "gen"}, limit=10)
    assert bench_record(SimEngine(sc, tiny_profile()).run())["num_prompts"] == 4
    assert "asks for 10 requests; the trace has 4 rows" in capsys.readouterr().err


def test_max_concurrency_holds_a_trace_back(tmp_path):
    text = "timestamp,input_length,output_length\n" + "".join("0,100,20\n" for _ in range(6))
    sc = _trace_scenario(tmp_path, text)
    sc = sc.model_copy(update={"workload": sc.workload.model_copy(update={"max_concurrency": 2})})
    r = SimEngine(sc, tiny_profile()).run().requests.sort_values("start_s")
    assert (r["start_s"].to_numpy()[2:] > 0).all()         # the third waits for a slot


@pytest.mark.parametrize("text, suffix, line, key", [
    ("timestamp,input_length,output_length\n0,10,5\n-1,10,5\n", ".csv", 3, "timestamp"),
    ("timestamp,input_length,output_length\n5,10,5\n4,10,5\n", ".csv", 3, "timestamp"),
    ("timestamp,input_length\n0,10\n", ".csv", 1, "output_length"),
    ("timestamp,input_length,output_length\n0,10,5\n1,ten,5\n", ".csv", 3, "input_length"),
    ("timestamp,input_length,output_length\n0,-3,5\n", ".csv", 2, "input_length"),
    ('{"timestamp": 0, "input_length": 5, "output_length": 2}\n{"timestamp": 1, "input_length": 5}\n', ".jsonl", 2, "output_length"),
    ('{"timestamp": 0, "input_length": 5, "output_length": 2}\n{"timestamp": 1, "input_le', ".jsonl", 2, "<line>"),
    ('{"timestamp": 9, "input_length": 5, "output_length": 2}\n{"timestamp": 3, "input_length": 5, "output_length": 2}\n', ".jsonl", 2, "timestamp"),
])
def test_bad_traces_name_file_line_column_value(tmp_path, capsys, monkeypatch, text, suffix, line, key):
    sc = _trace_scenario(tmp_path, text, suffix=suffix)
    with pytest.raises(ConfigError) as e:
        SimEngine(sc, tiny_profile())
    assert e.value.file.endswith(f"t{suffix}:{line}") and e.value.key == key
    # through the CLI: exit 2, one line, no results directory
    monkeypatch.chdir(tmp_path)
    y = tmp_path / "s.yaml"
    y.write_text(yaml.safe_dump({"name": "s", "profile": "h200-llama8b-roofline",
                                 "workload": {"kind": "trace", "trace": {"path": f"t{suffix}"}}}))
    assert main(["run", str(y), "--out", "out"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"t{suffix}:{line}" in err[0] and key in err[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("layout, said", [("mooncake", "asks 256"), (None, "every row needs its output_length")])
def test_a_jsonl_row_without_one_of_the_columns_says_the_row_lacks_it(tmp_path, layout, said):
    """A Mooncake row without ``output_length`` among rows with one (a merged or hand-made trace)
    was refused with "name them under workload.trace.columns: {timestamp: ..., ...} (or set
    workload.trace.layout)", though the columns are named right and no mapping reads the row."""
    p = tmp_path / "t.jsonl"
    p.write_text('{"timestamp": 0, "input_length": 600, "output_length": 20, "hash_ids": [1, 2]}\n'
                 '{"timestamp": 500, "input_length": 700, "hash_ids": [1, 3]}\n')
    cfg = TraceConfig(path=str(p), **({"layout": layout} if layout else {}))
    with pytest.raises(ConfigError) as e:
        load_trace(cfg)
    msg = str(e.value)
    assert e.value.file.endswith("t.jsonl:2") and e.value.key == "output_length" and said in msg, msg
    assert "workload.trace.columns" not in msg and "workload.trace.layout" not in msg, msg


@pytest.mark.parametrize("row, key", [
    ('{"timestamp": 1' + "0" * 400 + ', "input_length": 5, "output_length": 2}', "timestamp"),
    ('{"timestamp": 1, "input_length": 1' + "0" * 5000 + ', "output_length": 2}', "input_length"),
    ("[" * 100_000 + "]" * 100_000, "<line>"),
])
def test_a_jsonl_number_past_a_float_or_nesting_past_the_stack_is_one_line(tmp_path, row, key):
    """An integer of hundreds of digits was an OverflowError traceback (4,300 digits: a
    ValueError), deeply nested brackets a RecursionError."""
    sc = _trace_scenario(tmp_path, '{"timestamp": 0, "input_length": 5, "output_length": 2}\n' + row + "\n",
                         suffix=".jsonl")
    with pytest.raises(ConfigError) as e:
        SimEngine(sc, tiny_profile())
    assert e.value.file.endswith("t.jsonl:2") and e.value.key == key


@pytest.mark.parametrize("text", [
    json.dumps([{"timestamp": 0, "input_length": 5, "output_length": 2}] * 2),
    json.dumps([{"timestamp": 0, "input_length": 5, "output_length": 2}] * 2, indent=2),
])
def test_a_json_list_of_rows_is_refused_saying_it_is_a_list_and_how_to_make_jsonl(tmp_path, text):
    """A trace dumped as one JSON list (.json) was refused as a line that is not a JSON
    object ('[' at column 1), which did not say what the file is."""
    sc = _trace_scenario(tmp_path, text + "\n", suffix=".json")
    with pytest.raises(ConfigError) as e:
        SimEngine(sc, tiny_profile())
    assert e.value.file.endswith("t.json:1") and "JSON list" in str(e.value) and "jq -c '.[]' t.json" in str(e.value)


def test_epoch_seconds_under_a_datetime_layout_say_to_set_the_time_unit(tmp_path):
    """An Azure-named trace whose TIMESTAMP is epoch seconds was refused as 'not a date and
    time' without the fix (the reverse case already had its hint)."""
    sc = _trace_scenario(tmp_path, "TIMESTAMP,ContextTokens,GeneratedTokens\n1700000000.5,10,5\n", layout="azure")
    with pytest.raises(ConfigError) as e:
        SimEngine(sc, tiny_profile())
    assert e.value.key == "TIMESTAMP" and "time_unit: s" in str(e.value)


@pytest.mark.parametrize("cell", ["nan", "NaN", "NA", "null", "n/a"])
def test_a_word_in_a_number_column_is_shown_as_written(tmp_path, cell):
    """pandas reads "nan", "NA", "null" (and more) as a missing cell by default, so the error
    said the cell was <empty>; only an empty cell is missing, the rest is shown as written."""
    sc = _trace_scenario(tmp_path, f"timestamp,input_length,output_length\n0,10,5\n{cell},10,5\n")
    with pytest.raises(ConfigError) as e:
        SimEngine(sc, tiny_profile())
    assert e.value.key == "timestamp" and e.value.value == cell


def test_missing_trace_file_and_missing_block():
    with pytest.raises(ConfigError, match="does not exist"):
        load_trace(TraceConfig(path="/nonexistent/trace.csv"))
    with pytest.raises(Exception, match="trace"):
        make_scenario(workload={"kind": "trace", "input_len": None, "output_len": None})


def test_a_large_trace_streams(tmp_path):
    """A trace is read once, in blocks: peak Python memory stays far below the file size."""
    p = tmp_path / "big.jsonl"
    rows = 60_000
    with open(p, "w") as f:
        for i in range(rows):
            f.write(json.dumps({"timestamp": i * 10, "input_length": 100 + i % 50, "output_length": 20,
                                "hash_ids": list(range(i, i + 12))}) + "\n")
    size = p.stat().st_size
    tracemalloc.start()
    tr = load_trace(TraceConfig(path=str(p), layout="mooncake"))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(tr) == rows and peak < size / 2, (peak, size)
    assert len(load_trace(TraceConfig(path=str(p), layout="mooncake"), limit=10)) == 10


def test_a_large_trace_is_read_once_for_every_run_that_replays_it(tmp_path, monkeypatch):
    """Runs over seeds and arms (compare, sweep) replay one file: a large trace is read once
    per process while the file, its trace block and limit stay the same; another limit, or
    the file rewritten, reads it again; the shared arrays are read-only."""
    from specsched.sim import trace as trace_mod
    from specsched.sim.workload import make_requests

    monkeypatch.setattr(trace_mod, "KEEP_MIN_BYTES", 1)
    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps({"timestamp": 10 * i, "input_length": 64, "output_length": 4}) + "\n" for i in range(50)))
    reads = []
    real = trace_mod._read_jsonl
    monkeypatch.setattr(trace_mod, "_read_jsonl", lambda *a: reads.append(1) or real(*a))
    cfg = WorkloadConfig(kind="trace", trace=TraceConfig(path=str(p), layout="mooncake"))
    first = [(s.arrival_s, s.input_len) for s in make_requests(cfg, seed=1)]
    again = [(s.arrival_s, s.input_len) for s in make_requests(cfg, seed=2)]
    assert first == again and len(reads) == 1
    tr = load_trace(TraceConfig(path=str(p), layout="mooncake"))
    with pytest.raises(ValueError):
        tr.arrival_s[0] = 5.0
    assert len(load_trace(TraceConfig(path=str(p), layout="mooncake"), limit=10)) == 10 and len(reads) == 2
    p.write_text(p.read_text() + json.dumps({"timestamp": 600, "input_length": 64, "output_length": 4}) + "\n")
    assert len(load_trace(TraceConfig(path=str(p), layout="mooncake"))) == 51 and len(reads) == 3


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 5000), st.integers(0, 500)), min_size=1, max_size=40),
       st.floats(0.1, 10.0))
def test_invariant_sorted_trace_arrivals_are_scaled_offsets(tmp_path_factory, rows, scale):
    """Invariant: arrival_i = (t_i - t_0) x time_scale, non-decreasing, lengths as written."""
    rows = sorted(rows)
    p = tmp_path_factory.mktemp("t") / "t.csv"
    p.write_text("timestamp,input_length,output_length\n" + "".join(f"{t},{a},{b}\n" for t, a, b in rows))
    tr = load_trace(TraceConfig(path=str(p), time_unit="ms", time_scale=scale))
    t = np.array([r[0] for r in rows], float) / 1000
    assert np.allclose(tr.arrival_s, (t - t[0]) * scale)
    assert tr.input_len.tolist() == [r[1] for r in rows] and tr.output_len.tolist() == [r[2] for r in rows]


def test_a_cut_jsonl_trace_line_keeps_the_column(tmp_path):
    sc = _trace_scenario(tmp_path, '{"timestamp": 0, "input_length": 5, "output_length": 2}\n{"timestamp": 1, "input_le',
                         suffix=".jsonl")
    with pytest.raises(ConfigError) as e:
        SimEngine(sc, tiny_profile())
    assert e.value.file.endswith("t.jsonl:2") and "column 18" in str(e.value)


@pytest.mark.parametrize("spec", ["none", "topup", "window"])
def test_a_trace_prompt_over_the_pool_names_the_steps_it_reserves_for(tmp_path, spec):
    """A prompt that can never fit the KV pool is refused when it reaches the scheduler; the
    message names in-flight slots only where the admission reserves them (the window rule's
    verify passes): neither SGLang's admission nor the simulated one charges any without
    speculative decoding or under the top-up rule (it said "in-flight verify slots" on a server
    that verifies nothing, then "2 slots of the decode steps"). A trace row like it no longer
    reaches the scheduler whole (SGLang aborts it: tests/test_trace_aborts.py): the request is
    handed to the scheduler here."""
    from specsched.sim.request import Req
    from specsched.sim.scheduler import UnschedulableRequest

    sc = _trace_scenario(tmp_path, "timestamp,input_length,output_length\n0,10,5\n1,10000000,5\n")
    server = {} if spec == "none" else {"speculative_algorithm": "dspark", "speculative_num_draft_tokens": 4}
    if spec == "window":
        server["semantics_rules"] = {"spec_kv_reservation": "window"}
    sc = sc.model_copy(update={"server": sc.server.model_validate({**sc.server.model_dump(), **server}),
                               "acceptance": sc.acceptance.model_validate({"mean_accept_length": 2.0}) if spec != "none" else sc.acceptance})
    eng = SimEngine(sc, tiny_profile())
    with pytest.raises(UnschedulableRequest, match=r"5 output tokens cannot fit" if spec != "window"
                       else r"\(\+ 8 slots of the verify steps in flight\) cannot fit"):
        eng.sched.add_request(Req(7, 10_000_000, 5))


def test_compare_reads_a_large_trace_once_for_its_check_and_every_run(tmp_path, capsys, monkeypatch):
    """``compare`` reads the trace before its first run (a bad row is refused up front) and
    its runs, arms x seeds, replay that read: the file is read once in all."""
    from specsched.sim import trace as trace_mod

    monkeypatch.setattr(trace_mod, "KEEP_MIN_BYTES", 1)
    monkeypatch.setattr(trace_mod, "_LAST", {})
    reads = []
    real = trace_mod._read_jsonl
    monkeypatch.setattr(trace_mod, "_read_jsonl", lambda *a: reads.append(1) or real(*a))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"timestamp": 50 * i, "input_length": 64, "output_length": 4})
                                              + "\n" for i in range(12)))
    (tmp_path / "s.yaml").write_text("name: s\nprofile: h200-1b\nworkload: {kind: trace, trace: {path: t.jsonl, "
                                     "layout: mooncake}}\narms:\n  b: {server: {max_running_requests: 8}}\n")
    assert main(["compare", "s.yaml", "--arms", "base,b", "--seeds", "2", "--no-save", "--no-progress"]) == 0
    capsys.readouterr()
    assert len(reads) == 1


@pytest.mark.parametrize(("row", "error"), [("1,131072,5", "The input (131072 tokens) is longer than the model's context length"),
                                            ("1,131000,100", "Requested token count exceeds the model's maximum context length")])
def test_a_trace_request_past_the_models_context_fails_as_sglang_rejects_it(tmp_path, capsys, monkeypatch, row, error):
    """A trace row longer than the model's context length fails as SGLang's tokenizer rejects
    it (tokenizer_manager.py ``_validate_one_request``), with its message; the other rows run.
    It ran whole once (a 500,000-token prompt on a 131,072-token model was prefilled past the
    profile's grid and held up every later request for minutes), then was refused."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.csv").write_text(f"TIMESTAMP,ContextTokens,GeneratedTokens\n0,100,5\n{row}\n")
    (tmp_path / "s.yaml").write_text("name: s\nprofile: h100-llama-3.1-8b-eagle3-analytic\nserver: {speculative_algorithm: none}\n"
                                     "workload: {kind: trace, trace: {path: t.csv, layout: custom, "
                                     "columns: {timestamp: TIMESTAMP, input_len: ContextTokens, output_len: GeneratedTokens}}}\n")
    assert main(["run", "s.yaml", "--out", "o", "-q"]) == 0
    import pandas as pd

    req = pd.read_parquet(tmp_path / "o" / "requests.parquet").sort_values("rid")
    assert req["error"].iloc[0] == "" and req["error"].iloc[1].startswith(error)


def test_a_small_traces_warnings_are_said_once_per_run(tmp_path, capsys, monkeypatch):
    """A trace read twice in one command (the context-length check before the run, then the
    run) says its warnings once: a small file is read again, and said them twice."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.csv").write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                                    "0,GPT-4,100,0,100,API log\n1,GPT-4,120,8,128,API log\n")
    (tmp_path / "s.yaml").write_text("name: s\nprofile: h100-llama-3.1-8b-eagle3-analytic\nserver: {speculative_algorithm: none}\n"
                                     "workload: {kind: trace, num_requests: 5, trace: {path: t.csv, layout: burstgpt}}\n")
    assert main(["run", "s.yaml"]) == 0
    err = capsys.readouterr().err
    assert err.count("0 output tokens") == 1 and err.count("asks for 5 requests") == 1


@pytest.mark.parametrize("unit, first, hint", [
    (None, 1_700_000_000_218, "time_unit: ms"),              # epoch ms read as s: gaps 1000 times wider
    ("ms", 1_700_000_000_218_000, "time_unit: us"),          # epoch us read as ms
    (None, 1_700_000_000_218_000_000, "time_unit: ns"),      # epoch ns (an OpenTelemetry export) read as s
])
def test_epoch_times_in_a_finer_unit_than_the_time_unit_are_refused_naming_the_unit(tmp_path, unit, first, hint):
    """Epoch milliseconds under the default unit (s) replayed a 75 s trace over 75,000 s,
    without a word (the span check only refuses 1e9 s and more); a first timestamp past 1e11 s
    (year 5138 as an epoch time, 3,000 years as an offset) is no time in its unit."""
    text = "timestamp,input_length,output_length\n" + "".join(f"{first + k * 500},10,5\n" for k in range(3))
    sc = _trace_scenario(tmp_path, text, **({"time_unit": unit} if unit else {}))
    with pytest.raises(ConfigError) as e:
        SimEngine(sc, tiny_profile())
    assert e.value.file.endswith("t.csv:2") and e.value.key == "timestamp" and hint in str(e.value)
    assert "2023-11-14" in str(e.value)


def test_epoch_nanoseconds_read_with_time_unit_ns(tmp_path):
    text = "timestamp,input_length,output_length\n1700000000218000000,10,5\n1700000000718000000,10,5\n"
    tr = load_trace(TraceConfig(path=str(tmp_path / "t.csv"), time_unit="ns")) if (tmp_path / "t.csv").write_text(text) else None
    assert np.allclose(tr.arrival_s, [0.0, 0.5], atol=1e-6)
    p = tmp_path / "s.csv"   # epoch seconds under the default unit stay accepted
    p.write_text("timestamp,input_length,output_length\n1700000000.25,10,5\n1700000001.25,10,5\n")
    assert np.allclose(load_trace(TraceConfig(path=str(p))).arrival_s, [0.0, 1.0])


def test_a_trace_without_num_requests_is_held_to_max_requests(tmp_path, capsys, monkeypatch):
    """--max-requests (default 2,000,000) bounds every workload; a trace without
    num_requests ran all its rows whatever the limit (a BurstGPT file of 5M rows started a
    run of hours, ~1 KB a request); now its rows are counted against the limit first."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.csv").write_text("timestamp,input_length,output_length\n" + "".join(f"{k},10,2\n" for k in range(30)))
    y = tmp_path / "s.yaml"
    y.write_text(yaml.safe_dump({"name": "s", "profile": "h200-llama8b-roofline",
                                 "workload": {"kind": "trace", "trace": {"path": "t.csv"}}}))
    assert main(["run", str(y), "--out", "out", "--max-requests", "10", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "t.csv" in err[0] and "30 rows" in err[0] and "num_requests" in err[0], err
    assert not (tmp_path / "out").exists()
    assert main(["run", str(y), "--out", "out", "--max-requests", "30", "-q"]) == 0
    assert main(["run", str(y), "--out", "out2", "--max-requests", "10", "--set", "workload.num_requests=10", "-q"]) == 0


_LFS = "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a2146\nsize 36567443\n"


@pytest.mark.parametrize("text, suffix, said", [
    ("0.218,1867,125\n0.5,1929,20\n", ".csv", "no header"),   # a header-less export: its first row was shown as the header
    (_LFS, ".csv", "git lfs pull"),
    (_LFS, ".jsonl", "git lfs pull"),
])
def test_a_trace_without_a_header_says_what_its_first_line_is(tmp_path, text, suffix, said):
    """A header-less CSV was refused as 'trace header has 0.218, 1867, 125', a Git LFS pointer
    (a dataset repository cloned without LFS) as 'trace header has version https://...' or
    'not a JSON object': neither said what to do."""
    sc = _trace_scenario(tmp_path, text, suffix=suffix)
    with pytest.raises(ConfigError) as e:
        SimEngine(sc, tiny_profile())
    assert e.value.file.endswith(f"t{suffix}:1") and said in str(e.value)
    if said == "no header":
        assert "timestamp,input_length,output_length" in str(e.value)


def _compressed(kind: str, data: bytes, name: str = "t.csv") -> bytes:
    import bz2
    import io
    import lzma
    import zipfile

    if kind == "bz2":
        return bz2.compress(data)
    if kind == "xz":
        return lzma.compress(data)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(name, data)
        if kind == "zip2":
            z.writestr("README.md", b"two files")
    return buf.getvalue()


@pytest.mark.parametrize("kind, suffix", [("bz2", ".csv.bz2"), ("xz", ".csv.xz"), ("zip", ".zip"), ("zip", ".csv.zip")])
def test_a_bz2_xz_or_one_file_zip_trace_streams_as_gzip_does(tmp_path, kind, suffix):
    """A trace as published or archived (a .zip release, a .bz2 or .xz copy) was refused as
    'not a text file'; gzip alone was read."""
    text = "timestamp,input_length,output_length\n0,10,5\n0.5,20,6\n2,30,7\n"
    (tmp_path / "t.csv").write_text(text)
    p = tmp_path / f"t{suffix}"
    p.write_bytes(_compressed(kind, text.encode()))
    plain, packed = load_trace(TraceConfig(path=str(tmp_path / "t.csv"))), load_trace(TraceConfig(path=str(p)))
    assert np.array_equal(plain.arrival_s, packed.arrival_s) and np.array_equal(plain.output_len, packed.output_len)


@pytest.mark.parametrize("data, said", [
    (b"(\xb5/\xfd" + b"\x00" * 40, "zstd -d"),                              # zstd: no reader in the standard library
    (_compressed("zip2", b"timestamp,input_length,output_length\n0,1,1\n"), "t.csv, README.md"),
    (_compressed("bz2", b"timestamp,input_length,output_length\n" * 400)[:60], "damaged or truncated"),
])
def test_an_unreadable_compressed_trace_is_one_line(tmp_path, capsys, monkeypatch, data, said):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.bin").write_bytes(data)
    y = tmp_path / "s.yaml"
    y.write_text(yaml.safe_dump({"name": "s", "profile": "h200-llama8b-roofline",
                                 "workload": {"kind": "trace", "trace": {"path": "t.bin", "format": "csv"}}}))
    assert main(["run", str(y), "--out", "out", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "t.bin" in err[0] and said in err[0], err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name, data", [
    ("BurstGPT.zip", b"PK\x03\x04" + b"not a zip archive" * 4),                         # a damaged release zip
    ("trace.gz", __import__("gzip").compress(b"TIMESTAMP,ContextTokens,GeneratedTokens\n" * 400)[:40]),   # a cut download
    ("trace.xz", b"\xfd7zXZ\x00" + b"\x00" * 40),
], ids=["zip", "gzip-cut", "xz"])
def test_a_damaged_archive_whose_name_does_not_say_csv_or_jsonl_is_one_line(tmp_path, capsys, monkeypatch, name, data):
    """The format of a trace named neither .csv nor .jsonl (BurstGPT.zip, trace.gz) is told by its
    first bytes, read before the reader's own refusal of a damaged file: a BadZipFile, EOFError or
    LZMAError traceback there, and an empty results folder."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_bytes(data)
    y = tmp_path / "s.yaml"
    y.write_text(yaml.safe_dump({"name": "s", "profile": "h200-llama8b-roofline",
                                 "workload": {"kind": "trace", "trace": {"path": name}}}))
    assert main(["run", str(y), "--out", "out", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{name}: <file> = '{name}'" in err[0] and "damaged or truncated" in err[0], err
    assert not (tmp_path / "out").exists()


def _spreadsheet(kind: str) -> bytes:
    """A workbook's zip as a spreadsheet program saves one: Office Open XML's parts (ECMA-376:
    ``[Content_Types].xml``, ``_rels/.rels``, ``xl/workbook.xml``, a sheet), or OpenDocument's
    (``mimetype`` first, stored, ``content.xml``, ``META-INF/manifest.xml``)."""
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        if kind == "xlsx":
            for name in ("[Content_Types].xml", "_rels/.rels", "xl/workbook.xml", "xl/worksheets/sheet1.xml"):
                z.writestr(name, "<?xml version='1.0'?><x/>")
        else:
            z.writestr("mimetype", "application/vnd.oasis.opendocument.spreadsheet", zipfile.ZIP_STORED)
            for name in ("content.xml", "styles.xml", "META-INF/manifest.xml"):
                z.writestr(name, "<?xml version='1.0'?><x/>")
    return buf.getvalue()


@pytest.mark.parametrize("kind, said", [("xlsx", "an Excel workbook"), ("ods", "an OpenDocument spreadsheet")])
def test_a_trace_saved_as_a_spreadsheet_is_named_one(tmp_path, capsys, monkeypatch, kind, said):
    """A trace opened in a spreadsheet and saved in its format (a zip of XML parts): it was
    refused as "a zip archive of 4 files ([Content_Types].xml, ...): unzip it and name the one to
    read", and unzipping gives XML, no rows."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / f"trace.{kind}").write_bytes(_spreadsheet(kind))
    y = tmp_path / "s.yaml"
    y.write_text(yaml.safe_dump({"name": "s", "profile": "h200-llama8b-roofline",
                                 "workload": {"kind": "trace", "trace": {"path": f"trace.{kind}", "layout": "azure"}}}))
    assert main(["run", str(y), "--out", "out", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"trace.{kind}: <file>" in err[0] and said in err[0] and "CSV" in err[0], err
    assert "unzip" not in err[0] and not (tmp_path / "out").exists()


@pytest.mark.parametrize("text, layout", [
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44,\n"
     "2023-11-16 18:15:47.1805900,396,109,\n", "azure"),
    ("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,374,44,418,Conversation log,\n"
     "5.5,GPT-4,396,109,505,API log,\n", "burstgpt"),
    ("timestamp,input_length,output_length\n0,374,44,\n0.5,396,109,\n", "custom"),
], ids=["azure", "burstgpt", "custom"])
def test_rows_ending_in_a_delimiter_keep_their_columns(tmp_path, text, layout):
    """A CSV whose rows end in a separator the header lacks (a spreadsheet or a script that
    writes one after every field): pandas took the rows' first field for an index and shifted
    every column by one, so the timestamp read the prompt length ("TIMESTAMP = '374': not a date
    and time", "Timestamp = 'ChatGPT'") or the output column came out empty. Read as pandas
    documents for such a file (``index_col=False``)."""
    p = tmp_path / "t.csv"
    p.write_text(text)
    tr = load_trace(TraceConfig(path=str(p), layout=layout))
    assert tr.arrival_s.tolist() == [0.0, 0.5] and tr.input_len.tolist() == [374, 396]
    assert tr.output_len.tolist() == [44, 109]


@pytest.mark.parametrize("row, value", [("2023-11-16 18:15:47.1805900,396,109,7", "7"),
                                        ("2023-11-16 18:15:47.1805900,396,7,109", "109"),
                                        ("2023-11-16 18:15:47.1805900,396,109,7,8", "5 fields")])
def test_a_row_with_a_field_past_the_header_is_refused_naming_it(tmp_path, capsys, monkeypatch, row, value):
    """A row with one non-empty field more than the header: pandas dropped the last field without
    a word, so a field inserted before the last replayed the wrong output length (7 for 109).
    The trace rules refuse a row that cannot be read as written: one line naming the file, the
    line, the field and its value, exit 2, nothing written. An empty field there (a separator
    ending every row) is still read (test above)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.csv").write_text(f"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n{row}\n")
    with pytest.raises(ConfigError) as e:
        load_trace(TraceConfig(path=str(tmp_path / "t.csv"), layout="azure"))
    assert e.value.file.endswith("t.csv:3") and e.value.key == "<field 4>" and e.value.value == value
    y = tmp_path / "s.yaml"
    y.write_text(yaml.safe_dump({"name": "s", "profile": "h200-llama8b-roofline",
                                 "workload": {"kind": "trace", "trace": {"path": "t.csv", "layout": "azure"}}}))
    assert main(["run", str(y), "--out", "out", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "t.csv:3: <field 4>" in err[0] and "header's 3 fields" in err[0], err
    assert not (tmp_path / "out").exists()


def test_sort_replays_an_unsorted_trace_in_time_order(tmp_path):
    """A log written as requests finish (a gateway's access log) is not in arrival order: it
    was refused with no way to replay it but sorting the file by hand. ``sort: true``
    replays the rows by timestamp (ties in file order), the limit then takes the first N by
    time, and each row keeps its own lengths and block ids; the refusal says so."""
    rows = [(7.0, 70, 7, [3, 4]), (2.0, 20, 2, [1]), (5.0, 50, 5, [1, 2]), (2.0, 21, 3, [9]), (9.0, 90, 9, [5])]
    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps({"timestamp": t * 1000, "input_length": i, "output_length": o, "hash_ids": h}) + "\n"
                         for t, i, o, h in rows))
    with pytest.raises(ConfigError) as e:
        load_trace(TraceConfig(path=str(p), layout="mooncake", block_size=16))
    assert "sort: true" in str(e.value)
    tr = load_trace(TraceConfig(path=str(p), layout="mooncake", block_size=16, sort=True))
    assert tr.arrival_s.tolist() == [0.0, 0.0, 3.0, 5.0, 7.0]
    assert tr.input_len.tolist() == [20, 21, 50, 70, 90] and tr.output_len.tolist() == [2, 3, 5, 7, 9]
    assert [tr.prompt_tokens(k).blocks.tolist() for k in range(5)] == [[1], [9], [1, 2], [3, 4], [5]]
    first3 = load_trace(TraceConfig(path=str(p), layout="mooncake", block_size=16, sort=True), limit=3)
    assert first3.input_len.tolist() == [20, 21, 50] and first3.arrival_s.tolist() == [0.0, 0.0, 3.0]
    assert [first3.prompt_tokens(k).blocks.tolist() for k in range(3)] == [[1], [9], [1, 2]]


def test_a_semicolon_csv_from_a_decimal_comma_locale_reads_its_decimal_commas(tmp_path):
    """A spreadsheet in a decimal-comma locale (de_DE, fr_FR) separates its CSV with ';'
    and writes 0,5 for 0.5: the separator was read, but each fractional timestamp was
    refused as not a number."""
    p = tmp_path / "t.csv"
    p.write_text("timestamp;input_length;output_length\n0,5;10;5\n1,25;20;6\n3;30;7\n")
    tr = load_trace(TraceConfig(path=str(p)))
    assert tr.arrival_s.tolist() == [0.0, 0.75, 2.5] and tr.input_len.tolist() == [10, 20, 30]


def test_epoch_times_in_a_coarser_unit_than_the_time_unit_are_warned(tmp_path, capsys):
    """Epoch seconds under Mooncake's layout (ms) replayed a 75 s trace in 75 ms, a burst,
    without a word; a first timestamp that reads as a date of 1980-2100 in a coarser unit is
    said (a warning: a relative trace may start weeks in)."""
    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps({"timestamp": 1_700_000_000 + 30 * k, "input_length": 10, "output_length": 5}) + "\n"
                         for k in range(3)))
    tr = load_trace(TraceConfig(path=str(p), layout="mooncake"))
    assert np.allclose(tr.arrival_s, [0.0, 0.03, 0.06])
    err = capsys.readouterr().err
    assert "epoch s" in err and "2023-11-14" in err and "time_unit: s" in err
    p.write_text("".join(json.dumps({"timestamp": 300 * k, "input_length": 10, "output_length": 5}) + "\n" for k in range(3)))
    load_trace(TraceConfig(path=str(p), layout="mooncake"))
    assert capsys.readouterr().err == ""


def test_a_folder_or_a_missing_trace_path_says_which_and_where_it_looked(tmp_path, capsys, monkeypatch):
    """A folder given as the trace was refused as 'trace file does not exist' (the agentic
    trace's reader already said 'is a directory'); a missing one now says where it looked."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "traces").mkdir()
    y = tmp_path / "s.yaml"
    y.write_text("name: s\nprofile: h200-1b\nworkload: {kind: trace, trace: {path: traces}}\n")
    assert main(["run", str(y), "--out", "o", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "path = 'traces'" in err[0] and "is a directory" in err[0], err
    assert main(["run", str(y), "--out", "o", "-q", "--set", "workload.trace.path=nope.csv"]) == 2
    assert "beside the scenario" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("name", "text", "layout"), [
    ("azure.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,4808,10\n", "azure"),
    ("bg.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,x\n",
     "burstgpt"),
    ("mc.jsonl", '{"timestamp": 0, "input_length": 100, "output_length": 5, "hash_ids": [1]}\n', "mooncake")])
def test_a_public_traces_columns_under_another_layout_name_the_layout(tmp_path, name, text, layout):
    """An Azure trace read without `layout: azure` (the default, custom, wants timestamp,
    input_length, output_length) was refused naming its header only; the columns are a known
    layout's, so the refusal names the layout to say (Mooncake's keys under the custom layout
    read, with a warning, since they are the custom names)."""
    (tmp_path / name).write_text(text)
    for other in ("custom", "azure", "burstgpt", "mooncake"):
        if other == layout or (layout == "mooncake" and other == "custom"):
            continue
        with pytest.raises(ConfigError) as e:
            load_trace(TraceConfig(path=str(tmp_path / name), layout=other))
        assert e.value.allowed.endswith(f"the columns are the {layout} layout's: say workload.trace.layout: {layout}"), \
            (other, e.value.allowed)


@pytest.mark.parametrize("header, layout, said", [
    ("timestamp,contexttokens,generatedtokens", "azure",
     "workload.trace.columns: {timestamp: timestamp, input_len: contexttokens, output_len: generatedtokens}"),
    ("Timestamp,Input_Length,output length", None,
     "workload.trace.columns: {timestamp: Timestamp, input_len: Input_Length, output_len: output length}"),
    ("when,prompt,reply", None, "name them under workload.trace.columns"),
])
def test_a_trace_header_in_other_spellings_says_which_columns_to_name(tmp_path, header, layout, said):
    """An Azure trace re-exported with a lowercased header (``timestamp,contexttokens,...``) was
    refused as "trace header has timestamp, contexttokens, generatedtokens", which did not say
    that names are matched exactly nor how to map them. The refusal now names the
    ``workload.trace.columns`` mapping that reads it (names that differ only in case, spaces,
    dashes or underscores), or says to map the columns there."""
    sc = _trace_scenario(tmp_path, header + "\n2023-11-16 18:15:46.68,374,44\n", suffix=".csv",
                         **({"layout": layout} if layout else {}))
    with pytest.raises(ConfigError) as e:
        SimEngine(sc, tiny_profile())
    assert said in str(e.value), str(e.value)


AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


@pytest.mark.parametrize("rows, gaps", [
    # a spreadsheet's re-export in a day-first locale (en_GB, de_DE, fr_FR): day 13 tells the order
    (["10/05/2024 23:59:59", "11/05/2024 00:00:01", "13/05/2024 00:00:01"], [0.0, 2.0, 172802.0]),
    (["10.05.2024 23:59:59", "13.05.2024 00:00:01"], [0.0, 172802.0]),
    # month first (en_US), told by day 13 in the second field
    (["5/10/2024 23:59:59", "5/13/2024 0:00:01"], [0.0, 172802.0]),
    # one date throughout: the order changes nothing
    (["05/10/2024 00:00:00", "05/10/2024 00:00:02.5"], [0.0, 2.5]),
])
def test_day_and_month_order_of_slash_dates_is_read_from_the_column(tmp_path, rows, gaps):
    """A date written d/m/y or m/d/y: pandas read each cell on its own, month first while it
    could and day first past 12, so 10/05 then 13/05 (day first) were 5 Oct then 13 May and
    the trace was refused as unsorted, and 10/05 then 11/05 replayed a month apart."""
    p = tmp_path / "t.csv"
    p.write_text(AZURE_HEADER + "".join(f"{r},10,2\n" for r in rows))
    assert load_trace(TraceConfig(path=str(p), layout="azure")).arrival_s.tolist() == pytest.approx(gaps)


@pytest.mark.parametrize("rows, line, said", [
    # every day <= 12 over several dates: 10/05 -> 11/05 is a day or a month
    (["10/05/2024 00:00:00", "11/05/2024 00:00:00"], 3, "day and month order"),
    # day first on one row, month first on another
    (["13/05/2024 00:00:00", "05/14/2024 00:00:00"], 3, "both"),
])
def test_slash_dates_whose_order_cannot_be_told_are_refused_in_one_line(tmp_path, rows, line, said):
    p = tmp_path / "t.csv"
    p.write_text(AZURE_HEADER + "".join(f"{r},10,2\n" for r in rows))
    with pytest.raises(ConfigError, match=said) as e:
        load_trace(TraceConfig(path=str(p), layout="azure"))
    assert (e.value.file, e.value.key) == (f"{p}:{line}", "TIMESTAMP")
    assert "YYYY-MM-DD" in str(e.value)


def test_slash_date_order_told_in_one_block_holds_for_the_next(tmp_path, monkeypatch):
    """The file is read in blocks: the order one block shows (13/05: day first) reads the
    next block's 10/06 as 10 June, and a block that contradicts it is refused."""
    import specsched.sim.trace as trace_mod

    monkeypatch.setattr(trace_mod, "CSV_BLOCK_ROWS", 2)
    p = tmp_path / "t.csv"
    p.write_text(AZURE_HEADER + "13/05/2024 00:00:00,10,2\n13/05/2024 00:00:01,10,2\n10/06/2024 00:00:00,10,2\n")
    assert load_trace(TraceConfig(path=str(p), layout="azure")).arrival_s.tolist() == pytest.approx([0.0, 1.0, 28 * 86400.0])
    p.write_text(AZURE_HEADER + "13/05/2024 00:00:00,10,2\n13/05/2024 00:00:01,10,2\n06/14/2024 00:00:00,10,2\n")
    with pytest.raises(ConfigError, match="both") as e:
        load_trace(TraceConfig(path=str(p), layout="azure"))
    assert e.value.file == f"{p}:4"
    # a first block of one date that does not tell the order (12/05), then one that does (13/05)
    p.write_text(AZURE_HEADER + "12/05/2024 10:00:00,10,2\n12/05/2024 10:00:01,10,2\n13/05/2024 10:00:00,10,2\n")
    assert load_trace(TraceConfig(path=str(p), layout="azure")).arrival_s.tolist() == pytest.approx([0.0, 1.0, 86400.0])


def test_a_day_first_date_that_is_no_day_is_shown_as_written(tmp_path):
    """31/02/2024 (day first, told by 31) is no date: the refusal shows the cell as the file has it."""
    p = tmp_path / "t.csv"
    p.write_text(AZURE_HEADER + "30/01/2024 00:00:00,10,2\n31/02/2024 00:00:00,10,2\n")
    with pytest.raises(ConfigError, match="not a date and time") as e:
        load_trace(TraceConfig(path=str(p), layout="azure"))
    assert (e.value.file, e.value.value) == (f"{p}:3", "31/02/2024 00:00:00")


@pytest.mark.parametrize("records", ["full", "compact"])
def test_a_zero_output_row_is_served_prefill_only_as_bench_serving_records_it(tmp_path, capsys, records):
    """A trace row asking 0 output tokens is sent as max_new_tokens 0: SGLang 0.5.23 runs its
    prefill (managers/schedule_batch.py ``is_prefill_only``; tp_worker.py a dummy next token)
    and ``update_finish_state`` finishes it with ``finished_len`` 0, so the client gets no
    text; bench_serving's client (benchmark/serving.py ``async_request_sglang_generate``)
    records a success with output_len 0, ttft 0.0 (no text chunk came) and latency up to
    the last chunk, and ``calculate_metrics`` leaves it out of TPOT. Before, the row ran as
    a one-token output: output_len 1, a TTFT and 1 output token counted."""
    text = "when,prompt,gen\n0.0,50,5\n0.5,60,0\n1.0,70,4\n"
    cols = {"timestamp": "when", "input_len": "prompt", "output_len": "gen"}
    sc = _trace_scenario(tmp_path, text, columns=cols)
    res = SimEngine(sc, tiny_profile(), records=records).run()
    err = capsys.readouterr().err
    assert err.count("0 output tokens") == 1 and "prefill only" in err
    r = res.requests.sort_values("rid").reset_index(drop=True)
    assert r["output_len"].tolist() == [5, 0, 4]
    z = r.iloc[1]
    assert z["ttft_s"] == 0.0 and z["finish_s"] > z["start_s"] and np.isnan(z["tpot_s"])
    s = res.summary
    assert s["completed"] == 3 and s["total_output_tokens"] == 9
    others = r.drop(index=1)
    assert s["mean_ttft_ms"] == pytest.approx(others["ttft_s"].sum() / 3 * 1e3)   # the 0.0 averaged in
    assert s["mean_e2e_latency_ms"] == pytest.approx(r["e2e_s"].mean() * 1e3)
    assert s["mean_tpot_ms"] == pytest.approx(others["tpot_s"].mean() * 1e3)
    from specsched.sim.bench_serving import bench_record

    rec = bench_record(res)
    assert rec["total_output_tokens"] == 9 and rec["completed"] == 3
    if records == "full":
        assert rec["output_lens"] == [5, 0, 4] and rec["ttfts"][1] == 0.0 and rec["itls"][1] == []


@pytest.mark.parametrize(("name", "text", "layout", "arrivals"), [
    ("azure.csv", AZURE_HEADER + "2023-11-16 18:15:46.6805900,4808,10\n2023-11-16 18:15:47.1805900,100,3\n", "azure",
     [0.0, 0.5]),
    ("mc.jsonl", '{"timestamp": 0, "input_length": 100, "output_length": 5, "hash_ids": [1]}\n'
                 '{"timestamp": 1500, "input_length": 600, "output_length": 2, "hash_ids": [1, 2]}\n', "mooncake",
     [0.0, 1.5]),
    ("bg.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,x\n"
               "7,GPT-4,100,3,103,x\n", "burstgpt", [0.0, 2.0]),
])
def test_a_public_trace_under_the_default_layout_is_read_as_its_layout(tmp_path, capsys, name, text, layout, arrivals):
    """``trace: {path: AzureLLMInferenceTrace_code.csv}`` (no layout: the default, custom) was
    refused ("say workload.trace.layout: azure"), and a Mooncake trace ran with its ms
    timestamps read as s (arrivals 1000 times apart) and its hash_ids unread, after a warning.
    A file whose columns are exactly one public layout's is read as that layout, said in one
    note; a layout stated (custom included) is read as stated."""
    (tmp_path / name).write_text(text)
    tr = load_trace(TraceConfig(path=str(tmp_path / name)))
    assert tr.arrival_s.tolist() == pytest.approx(arrivals)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"columns are the {layout} layout's" in err[0], err
    if layout == "mooncake":
        assert tr.hash_ids is not None
        stated = load_trace(TraceConfig(path=str(tmp_path / name), layout="custom"))
        assert stated.arrival_s.tolist() == pytest.approx([0.0, 1500.0])
        assert "read with layout custom" in capsys.readouterr().err
