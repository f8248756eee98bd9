"""``specsched validate --out DIR`` keeps every validation it appends to validate.csv: a run
with another seed or ``--set`` overrides is written beside the plain one
(``<scenario>-<arm>-seed<N>[+<overrides>]-measured``, the suffix ``measure`` and ``run``
use), not over it. It replaced the plain run's directories silently while validate.csv kept
both rows, so the earlier rows pointed at results that were gone."""

from __future__ import annotations

import json

import pytest

from specsched.cli import main

pytest.importorskip("torch")

SC = "scenarios/h200/batch8.yaml"
SMALL = ["--set", "workload.num_requests=2", "--set", "workload.output_len.value=4",
         "--set", "workload.input_len.value=16"]


def _validate(out, *extra: str) -> int:
    return main(["validate", SC, "--device", "cpu", "--preset", "tiny", "--profile", "h200-1b", "--quiet",
                 "--out", str(out), *SMALL, *extra])


def test_a_validation_with_another_seed_or_overrides_keeps_the_earlier_one(tmp_path, capsys):
    out = tmp_path / "v"
    assert _validate(out) == 0
    assert _validate(out, "--seed", "2") == 0
    assert _validate(out, "--set", "server.max_running_requests=1") == 0
    capsys.readouterr()
    measured = sorted(p.name for p in out.glob("*-measured"))
    assert len(measured) == 3 and len(list(out.glob("*-predicted"))) == 3, measured
    seeds = sorted(json.loads((out / m / "summary.json").read_text())["seed"] for m in measured)
    assert seeds == [1, 1, 2]
    # the names measure gives: <arm>-seed<N>[+<overrides>], after the scenario's name
    assert all(m.startswith("h200-batch8-base-seed") for m in measured), measured


def test_validate_csv_rows_say_their_seed_and_overrides(tmp_path, capsys):
    """validate.csv keeps its six columns in their order and adds ``seed`` and ``overrides``
    (the ``--set`` arguments as given): rows of the plain run, another seed and another
    override were told apart only by their order in the file."""
    import pandas as pd

    out = tmp_path / "v"
    assert _validate(out) == 0
    assert _validate(out, "--seed", "2", "--set", "server.max_running_requests=1") == 0
    capsys.readouterr()
    df = pd.read_csv(out / "validate.csv", keep_default_na=False)
    assert list(df.columns) == ["cell", "arm", "metric", "predicted", "measured", "error_pct", "seed", "overrides"]
    small = "workload.num_requests=2; workload.output_len.value=4; workload.input_len.value=16"
    runs = df.drop_duplicates(["seed", "overrides"])[["seed", "overrides"]].values.tolist()
    assert runs == [[1, small], [2, small + "; server.max_running_requests=1"]]
    assert (df.groupby(["seed", "overrides"]).size() == len(df) // 2).all()


def test_an_old_validate_csv_gains_the_columns_and_keeps_its_rows(tmp_path):
    from specsched.runtime.cli_commands import append_validate_rows, validate_csv_header

    path = tmp_path / "validate.csv"
    path.write_text("cell,arm,metric,predicted,measured,error_pct\nb8,base,mean_ttft_ms,1.0,2.0,-50.0\n")
    header = validate_csv_header(path)
    append_validate_rows(path, header, [{"cell": "b8", "arm": "base", "metric": "mean_ttft_ms", "predicted": 3.0,
                                         "measured": 2.0, "error_pct": 50.0, "seed": 2, "overrides": "a=1"}])
    assert path.read_text().splitlines() == [
        "cell,arm,metric,predicted,measured,error_pct,seed,overrides",
        "b8,base,mean_ttft_ms,1.0,2.0,-50.0,,",
        "b8,base,mean_ttft_ms,3.0,2.0,50.0,2,a=1"]


def test_a_csv_that_is_not_a_validate_csv_is_refused_before_measuring(tmp_path, capsys, monkeypatch):
    import specsched.runtime.engine as engine

    def measure(*a, **k):
        raise AssertionError("measured before refusing the file")
    monkeypatch.setattr(engine, "RuntimeEngine", measure)
    out = tmp_path / "v"
    out.mkdir()
    (out / "validate.csv").write_text("a,b\n1,2\n")
    assert _validate(out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "validate.csv" in err[0] and "<header> = 'a,b'" in err[0], err
    assert (out / "validate.csv").read_text() == "a,b\n1,2\n" and sorted(p.name for p in out.iterdir()) == ["validate.csv"]
