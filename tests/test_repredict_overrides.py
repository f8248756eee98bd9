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
