"""repredict_h200 --set KEY=VALUE: a scenario override for every cell (what the measured runtime
ran with that the cell's file does not say); a key the scenario does not have, or a value it
refuses, is one line and exit 2 before anything is read or simulated."""

from __future__ import annotations

from tests.conftest import load_benchmark


def test_a_bad_override_is_one_line_and_exit_2(tmp_path, capsys):
    rp = load_benchmark("repredict_h200", "rp_overrides")
    out = tmp_path / "out.csv"
    base = [str(tmp_path / "missing.csv"), "--profile", "tiny", "--out", str(out)]
    assert rp.main([*base, "--set", "server.cuda_graph_bz=[1, 2]"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cuda_graph_bz" in err[0]
    assert rp.main([*base, "--set", "server.cuda_graph_bs"]) == 2     # no value
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not out.exists()


def test_a_validate_csv_without_rows_or_columns_is_one_line_and_exit_2(tmp_path, capsys):
    """An empty validate.csv, one without the metric column, and a missing file each stop
    the re-prediction with one line naming the file (it raised AttributeError before)."""
    rp = load_benchmark("repredict_h200", "rp_csv")
    out = tmp_path / "out.csv"
    empty = tmp_path / "empty.csv"
    empty.write_text("cell,arm,metric,predicted,measured,error_pct\n")
    cut = tmp_path / "cut.csv"
    cut.write_text("cell,arm\nbatch1,base\n")
    for path, said in ((empty, "no rows"), (cut, "'metric' missing"), (tmp_path / "gone.csv", "cannot be read")):
        assert rp.main([str(path), "--profile", "tiny", "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(path) in err[0] and said in err[0]
    assert not out.exists()
