"""The command line as a user runs it: tables, result files, bad input (exit 2, one clear
line, nothing left behind), determinism."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from specsched.sim.config import load_scenario
from specsched.sim.engine import run_scenario
from specsched.sim.errors import ConfigError

from specsched.cli import main
from tests.conftest import ROOT


def small_scenario(tmp_path: Path, **replace: str) -> Path:
    text = (ROOT / "scenarios" / "batch8-ll.yaml").read_text()
    text = text.replace("num_requests: 32", "num_requests: 10").replace("value: 1024", "value: 64")
    text = text.replace("profile: mi355x-dsv41-flash-tp4", f"profile: {ROOT / 'profiles' / 'mi355x-dsv41-flash-tp4.yaml'}")
    for a, b in replace.items():
        assert a in text, a
        text = text.replace(a, b)
    p = tmp_path / "s.yaml"
    p.write_text(text)
    return p


def test_run_prints_table_and_writes_results(tmp_path, capsys):
    out = tmp_path / "res"
    assert main(["run", str(small_scenario(tmp_path)), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Serving Benchmark Result" in text and "Median TTFT (ms):" in text and "Verify cycles/s" in text
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] == 10 and summary["arm"] == "base"
    req = pd.read_parquet(out / "requests.parquet")
    assert len(req) == 10 and (req["output_len"] == 64).all()
    for f in ("chunks.parquet", "steps.parquet", "timeseries.parquet", "scenario.yaml"):
        assert (out / f).is_file()


def test_run_csv_and_arm(tmp_path):
    out = tmp_path / "res"
    assert main(["run", str(small_scenario(tmp_path)), "--arm", "stream_wait", "--format", "csv", "--out", str(out)]) == 0
    assert (out / "requests.csv").is_file()
    assert json.loads((out / "summary.json").read_text())["arm"] == "stream_wait"


@pytest.mark.parametrize(
    ("replace", "key", "value"),
    [
        ({"max_running_requests: 128": "max_running_requests: -3"}, "server.max_running_requests", "-3"),
        ({"  max_running_requests: 128": "  max_runing_requests: 128"}, "server.max_runing_requests", "128"),
        ({"sync_mode: host_block": "sync_mode: spin"}, "server.sync_mode", "spin"),
        ({"  concurrency: 8\n": ""}, "workload", "closed_loop needs 'concurrency'"),
        ({"mean_accept_length: ": "mean_accept_length: 9 #"}, "", "exceeds the verify window"),
    ],
)
def test_bad_scenario_exits_2_with_one_clear_line(tmp_path, capsys, replace, key, value):
    path = small_scenario(tmp_path, **replace)
    out = tmp_path / "res"
    assert main(["run", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err and key in err and value in err
    assert not out.exists() and not list(tmp_path.glob(".res*"))


def test_unknown_arm_and_missing_files(tmp_path, capsys):
    path = small_scenario(tmp_path)
    assert main(["run", str(path), "--arm", "nope"]) == 2
    assert "--arm" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "missing.yaml")]) == 2
    assert "does not exist" in capsys.readouterr().err
    bad = small_scenario(tmp_path, **{f"profile: {ROOT / 'profiles' / 'mi355x-dsv41-flash-tp4.yaml'}": "profile: nosuch"})
    assert main(["run", str(bad)]) == 2
    assert "profile" in capsys.readouterr().err


def test_bad_profile_names_its_file(tmp_path):
    prof = tmp_path / "p.yaml"
    text = (ROOT / "profiles" / "mi355x-dsv41-flash-tp4.yaml").read_text().replace("eager_factor: 1.0", "eager_factor: 0.5")
    prof.write_text(text)
    path = small_scenario(tmp_path, **{f"profile: {ROOT / 'profiles' / 'mi355x-dsv41-flash-tp4.yaml'}": f"profile: {prof}"})
    with pytest.raises(ConfigError) as e:
        run_scenario(load_scenario(path))
    assert str(prof) in str(e.value) and "gpu.eager_factor" in str(e.value) and "0.5" in str(e.value)


def test_failed_write_leaves_previous_results(tmp_path, monkeypatch):
    from specsched.sim import results as results_mod

    path = small_scenario(tmp_path)
    out = tmp_path / "res"
    assert main(["run", str(path), "--out", str(out)]) == 0
    before = (out / "summary.json").read_text()
    monkeypatch.setattr(results_mod.json, "dumps", lambda *a, **k: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError):
        main(["run", str(path), "--out", str(out), "--seed", "7"])
    assert (out / "summary.json").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    shutil.rmtree(out)


def test_same_seed_identical_other_seed_differs(tmp_path):
    sc = load_scenario(small_scenario(tmp_path))
    a, b, c = run_scenario(sc, seed=3), run_scenario(sc, seed=3), run_scenario(sc, seed=4)
    pd.testing.assert_frame_equal(a.requests, b.requests)
    pd.testing.assert_frame_equal(a.chunks, b.chunks)
    pd.testing.assert_frame_equal(a.steps, b.steps)
    assert a.summary == b.summary
    assert not a.chunks.equals(c.chunks)


def test_unknown_key_suggests_the_nearest(tmp_path, capsys):
    path = small_scenario(tmp_path, **{"  max_running_requests: 128": "  max_runing_requests: 128"})
    assert main(["run", str(path), "--out", str(tmp_path / "r")]) == 2
    assert "did you mean 'max_running_requests'" in capsys.readouterr().err


def test_cross_field_error_names_the_key_not_the_whole_scenario(tmp_path, capsys):
    path = small_scenario(tmp_path, **{"mean_accept_length: ": "mean_accept_length: 9 #"})
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "acceptance.mean_accept_length = " in err and "description" not in err and len(err) < 300


def test_sglang_spelling_of_the_algorithm_is_accepted(tmp_path):
    sc = load_scenario(small_scenario(tmp_path, **{"speculative_algorithm: dspark": "speculative_algorithm: DSPARK"}))
    assert sc.server.speculative_algorithm.value == "dspark"


def test_run_set_overrides_and_hides_the_reference(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", str(small_scenario(tmp_path)), "--set", "workload.num_requests=4", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert json.loads((out / "summary.json").read_text())["completed"] == 4
    assert "Reference (measured)" not in text


def test_a_yaml_file_read_again_is_a_fresh_equal_document_and_a_changed_one_is_reread(tmp_path):
    """read_yaml_file keeps parsed documents by their text: a second read gives an equal
    document that the caller may change freely; a file whose text changed (even at the
    same size, within the file system's timestamp resolution) is parsed again."""
    from specsched.sim.yaml_io import read_yaml_file

    f = tmp_path / "p.yaml"
    f.write_text("a: 1\nb: [1, 2]\n")
    first = read_yaml_file(f)
    first["b"].append(3)
    assert read_yaml_file(f) == {"a": 1, "b": [1, 2]}
    f.write_text("a: 2\nb: [1, 2]\n")
    assert read_yaml_file(f) == {"a": 2, "b": [1, 2]}


def test_a_what_if_run_writes_beside_the_plain_run_not_over_it(tmp_path, capsys, monkeypatch):
    path = small_scenario(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(path)]) == 0
    plain = [d for d in (tmp_path / "results").glob("*/*") if d.is_dir()]
    assert len(plain) == 1
    before = (plain[0] / "summary.json").read_text()
    capsys.readouterr()
    assert main(["run", str(path), "--set", "workload.num_requests=4"]) == 0
    said = capsys.readouterr().out
    (what_if,) = [d for d in (tmp_path / "results").glob("*/*") if d.is_dir() and d != plain[0]]
    assert what_if.name == plain[0].name + "+workload.num_requests=4"
    assert f"results in {what_if.relative_to(tmp_path)}/" in said
    assert (plain[0] / "summary.json").read_text() == before
    assert json.loads((what_if / "summary.json").read_text())["completed"] == 4


def test_override_suffix_is_stable_and_keeps_unsafe_values_apart():
    from specsched.cli import overrides_suffix

    a = overrides_suffix({"server.b": 1, "server.a": True})
    assert a == overrides_suffix({"server.a": True, "server.b": 1}) == "server.a=true+server.b=1"
    x, y = overrides_suffix({"server.p": "a/b.py:C"}), overrides_suffix({"server.p": "a_b.py:C"})
    assert x != y and "/" not in x and ":" not in x
    assert len(overrides_suffix({"server.k": "v" * 500})) < 100


def test_a_uniform_length_without_range_ratio_is_said_to_be_fixed(tmp_path, capsys):
    """"uniform 8000" with the scenario's default range_ratio 1.0 sends every prompt at 8000
    tokens; bench_serving's default ratio is 0.0. run says so once per length it affects."""
    import yaml

    sc = tmp_path / "u.yaml"
    sc.write_text(yaml.safe_dump({
        "name": "u", "profile": "h200-1b",
        "workload": {"kind": "burst", "num_requests": 3, "input_len": {"kind": "uniform", "value": 800},
                     "output_len": {"kind": "uniform", "value": 20, "range_ratio": 0.5}}}))
    assert main(["run", str(sc), "--out", str(tmp_path / "o")]) == 0
    notes = [ln for ln in capsys.readouterr().err.splitlines() if "without range_ratio" in ln]
    assert len(notes) == 1 and "workload.input_len" in notes[0] and "every length is 800" in notes[0]


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.from_regex(r"(server|workload)\.[a-z_]{1,30}(\.[a-z_]{1,12})?", fullmatch=True),
                       st.integers(0, 10**9), min_size=1, max_size=6))
@example({"workload.input_len.value": 128, "workload.num_requests": 8, "workload.output_len.value": 32})
def test_a_cut_override_suffix_names_no_override_with_a_cut_value(overrides):
    """`validate --set workload.input_len.value=128 --set workload.num_requests=8 --set
    workload.output_len.value=32` wrote `...+workload.output_len.value=3-f430b442-measured`:
    the cut at 80 characters fell inside the last value, so the folder read as an output of 3
    tokens. The name is now cut between overrides: each one it names is whole."""
    from specsched.cli import OUT_NAME_MAX, overrides_suffix

    name = overrides_suffix(overrides)
    raw = "+".join(f"{k}={v}" for k, v in sorted(overrides.items()))
    if name == raw:
        return
    kept = name.rsplit("-", 1)[0]
    assert len(kept) <= OUT_NAME_MAX
    items = raw.split("+")
    if len(items[0]) > OUT_NAME_MAX:   # no whole override fits: the first one, cut
        assert kept == items[0][:OUT_NAME_MAX], name
    else:
        parts = kept.split("+")
        assert parts == items[:len(parts)], name
