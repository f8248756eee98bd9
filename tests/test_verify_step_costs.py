"""benchmarks/verify_step_costs.py: a verify step's batch is rebuilt from the run's records
(members, committed lengths) and priced by the cost model at exactly those contexts; bad
input is one line and exit 2."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import load_benchmark

pytest.importorskip("torch")

costs = load_benchmark("verify_step_costs")
ROUND26 = Path(__file__).resolve().parents[1] / "docs" / "measurements" / "h200-v26" / "h200-8b.yaml"


def _run(d: Path) -> None:
    """Two requests (prompts 100 and 900); a verify at 10-20 ms holds both, one at 30-40 ms
    only the second (the first finished at 25 ms)."""
    d.mkdir(parents=True)
    steps = [(0, "extend", "main", 2, 1000, 0.000, 0.008),
             (1, "verify", "main", 2, 0, 0.010, 0.020),
             (2, "verify", "main", 1, 0, 0.030, 0.040)]
    pd.DataFrame(steps, columns=["step", "mode", "part", "batch_size", "num_extend_tokens", "gpu_start_s",
                                 "gpu_end_s"]).to_parquet(d / "steps.parquet")
    pd.DataFrame({"rid": [0, 1], "input_len": [100, 900], "first_token_s": [0.009, 0.009],
                  "finish_s": [0.025, 0.045]}).to_parquet(d / "requests.parquet")
    # first tokens at 9 ms; 3 more each at 9.5 ms (the step before the first verify), 4 at 21 ms
    pd.DataFrame({"rid": [0, 1, 0, 1, 0, 1], "time_s": [0.009, 0.009, 0.0095, 0.0095, 0.021, 0.021],
                  "n_tokens": [1, 1, 3, 3, 4, 4]}).to_parquet(d / "chunks.parquet")


def test_batches_are_rebuilt_from_the_records(tmp_path):
    _run(tmp_path / "sharegpt-lengths-base-measured")
    t = costs.rebuild(tmp_path / "sharegpt-lengths-base-measured")
    assert list(t.bs) == list(t.n) == [2, 1]
    assert t.longest.tolist() == [904, 908]          # prompt + tokens delivered before the step ended
    assert t["mean"].tolist() == [504.0, 908.0]
    assert t.ms.tolist() == pytest.approx([10.0, 10.0])


def test_a_runs_decode_steps_are_rebuilt_as_its_verify_steps(tmp_path):
    """Without speculative decoding the run's steps are mode decode: rebuilt the same way
    (poisson-nospec's decode steps against its grid; none were before)."""
    run = tmp_path / "poisson-nospec-base-measured"
    _run(run)
    st = pd.read_parquet(run / "steps.parquet")
    st["mode"] = st["mode"].replace("verify", "decode")
    st.to_parquet(run / "steps.parquet")
    t = costs.rebuild(run)
    assert list(t.bs) == list(t.n) == [2, 1]
    assert t.longest.tolist() == [904, 908]


def test_steps_are_priced_at_their_own_contexts(tmp_path):
    from specsched.sim.config import load_scenario
    from specsched.sim.cost_model import CostModel
    from specsched.sim.profile import load_profile

    _run(tmp_path / "sharegpt-lengths-base-measured")
    t = costs.rebuild(tmp_path / "sharegpt-lengths-base-measured")
    sc = load_scenario(costs.scenarios_dir() / "h200" / "sharegpt-lengths.yaml", "base")
    prof = load_profile(str(ROUND26))
    got = costs.price(t, sc.server, {"p": prof})
    cm = CostModel(prof, sc.server)
    assert got.p.tolist() == pytest.approx([cm.step_s(2, 504.0, 904) * 1e3, cm.step_s(1, 908.0, 908) * 1e3])
    refit = costs.price(t, sc.server, {"p": costs._profile(f"{ROUND26}+excess")})
    assert (refit.p < got.p).all()  # the refit takes the loop's extra width out of the excess


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    _run(tmp_path / "nonsense")
    assert costs.main([str(tmp_path / "nonsense"), "--profile", f"p={ROUND26}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "CELL-ARM-measured" in err[0]
    assert costs.main([str(tmp_path / "nonsense"), "--profile", f"p={ROUND26}+other"]) == 2


def test_a_rate_sweep_run_is_read_with_its_own_scenario(tmp_path, capsys):
    """A rate sweep's runs are named CELL-rateR-measured (round 27's poisson-spec@16, where the
    verify miss shows) and hold the scenario they ran (scenario.yaml, its ``arm``): read from
    the name, 'rate16' was taken for an arm and every such run refused."""
    import yaml
    from specsched.sim.bundled import scenarios_dir

    run = tmp_path / "poisson-spec-rate16-measured"
    _run(run)
    sc = yaml.safe_load((scenarios_dir() / "h200" / "poisson-spec.yaml").read_text())
    sc["workload"]["request_rate"] = 16.0
    (run / "scenario.yaml").write_text(yaml.safe_dump({**sc, "arm": "base"}))
    assert costs.main([str(run), "--profile", f"p={ROUND26}"]) == 0, capsys.readouterr().err
    assert "2 of 2 verify/decode steps rebuilt" in capsys.readouterr().out


def test_a_run_without_its_records_is_one_line(tmp_path, capsys):
    """A predicted run kept slim (steps.parquet and summary.json only, as the rounds' tarballs
    hold them) has no requests or chunks to rebuild batches from: one line, exit 2 (was a
    FileNotFoundError traceback)."""
    run = tmp_path / "sharegpt-lengths-base-predicted"
    _run(run)
    (run / "chunks.parquet").unlink()
    assert costs.main([str(run), "--profile", f"p={ROUND26}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "chunks.parquet" in err[0]


def test_steps_are_priced_at_the_graph_batch_the_run_padded_to(tmp_path, capsys):
    """``--set server.cuda_graph_bs=[...]``: a run whose runtime captured other graph sizes
    than SGLang's speculative list (rounds up to 28: 1, 2, 4, 8, ...) is priced at its own
    padding; the one-request verify runs at graph 1 either way, the two-request one at 2 under
    both lists, so only a list without 2 moves it (to 4); ``--by-graph-batch`` groups by it."""
    from specsched.sim.cost_model import CostModel
    from specsched.sim.profile import load_profile

    run = tmp_path / "sharegpt-lengths-base-measured"
    _run(run)
    sc = costs._scenario(run, "sharegpt-lengths", "base", ["server.cuda_graph_bs=[1,4,8]"])
    assert CostModel(load_profile(str(ROUND26)), sc.server).padded_batch(2) == 4
    t = costs.rebuild(run)
    plain = costs.price(t, costs._scenario(run, "sharegpt-lengths", "base").server, {"p": load_profile(str(ROUND26))})
    padded = costs.price(t, sc.server, {"p": load_profile(str(ROUND26))})
    assert padded.p[0] > plain.p[0] and padded.p[1] == plain.p[1]
    assert costs.main([str(run), "--profile", f"p={ROUND26}", "--set", "server.cuda_graph_bs=[1,4,8]",
                       "--by-graph-batch"]) == 0
    out = capsys.readouterr().out
    assert "graph_bs" in out and any(line.split()[:1] == ["4"] for line in out.splitlines())
    assert costs.main([str(run), "--profile", f"p={ROUND26}", "--set", "server.cuda_graph_bz=[1]"]) == 2
    assert "cuda_graph_bz" in capsys.readouterr().err


def _extend_run(d: Path) -> None:
    """Three requests (prompts 600, 650, 700): a cold first extend of the first, then one
    extend of the other two together (1350 tokens) with its injection, then a verify."""
    d.mkdir(parents=True)
    steps = [(0, "extend", "main", 1, 600, 0.000, 0.030, 0),
             (1, "extend", "main", 2, 1350, 0.030, 0.080, 0),
             (1, "extend", "inject", 2, 1350, 0.080, 0.083, 0),
             (2, "verify", "main", 3, 0, 0.083, 0.090, 3)]
    pd.DataFrame(steps, columns=["step", "mode", "part", "batch_size", "num_extend_tokens", "gpu_start_s",
                                 "gpu_end_s", "decoding_reqs"]).to_parquet(d / "steps.parquet")
    pd.DataFrame({"rid": [0, 1, 2], "input_len": [600, 650, 700], "start_s": [0.0, 0.01, 0.02],
                  "first_token_s": [0.031, 0.084, 0.084], "finish_s": [0.5, 0.5, 0.5]}).to_parquet(d / "requests.parquet")


def test_extends_are_rebuilt_and_priced_at_their_bucket(tmp_path):
    """An extend forward's requests are the ones waiting at its start whose first token came
    after it; the cold first forward is left out; the price is CostModel.extend_s of those
    prompt lengths at prefix 0, at the bucket the tokens replay."""
    from specsched.sim.config import load_scenario
    from specsched.sim.cost_model import CostModel
    from specsched.sim.profile import load_profile

    run = tmp_path / "poisson-spec-base-measured"
    _extend_run(run)
    t = costs.rebuild_extends(run)
    assert t.lens.tolist() == [(650, 700)] and t.ok.tolist() == [True]
    assert t.ms.tolist() == pytest.approx([50.0]) and t.inj_ms.tolist() == pytest.approx([3.0])
    sc = load_scenario(costs.scenarios_dir() / "h200" / "poisson-spec.yaml", "base")
    prof = load_profile(str(ROUND26))
    got = costs.price_extends(t, sc.server, {"p": prof})
    cm = CostModel(prof, sc.server)
    assert got.p.tolist() == pytest.approx([cm.extend_s((650, 700), (0, 0)) * 1e3])
    assert got.bucket.tolist() == [cm.extend_bucket(1350)] and cm.extend_bucket(1350) >= 1350


def test_an_extend_whose_prompts_do_not_add_up_is_not_priced(tmp_path):
    """A cached prefix or a chunk: the waiting requests' prompts do not sum to the recorded
    tokens, so the composition is unknown and the step is marked, not priced."""
    run = tmp_path / "poisson-spec-base-measured"
    _extend_run(run)
    st = pd.read_parquet(run / "steps.parquet")
    st.loc[st.step == 1, "num_extend_tokens"] = 1200
    st.to_parquet(run / "steps.parquet")
    assert costs.rebuild_extends(run).ok.tolist() == [False]


def test_padding_read_is_the_true_cost_whatever_the_profile_charges():
    """Steps whose durations follow a padding cost of 0.85 (the dense attention's padded
    positions), priced by a profile charging 0.7: the read is 0.85, not 1 + slope (1.15),
    and a profile charging the true cost reads it back with a flat error."""
    from tests.test_attention_padding import model, profile

    true, charged = model(0.85, window=4), model(0.7, window=4)
    rows = []
    for mean in range(300, 1000, 25):   # one graph batch (16) and width (1024): the mix moves
        rows.append({"bs": 16, "n": 16, "mean": float(mean), "longest": 1000,
                     "ms": true.step_s(16, mean, 1000) * 1e3, "p": charged.step_s(16, mean, 1000) * 1e3})
    steps = pd.DataFrame(rows)
    pts = costs.padding_points(steps, _server(), profile(0.7), "p")
    assert costs.padding_read(pts, 0.7) == pytest.approx(0.85, abs=0.02)
    same = steps.assign(p=steps.ms)
    assert costs.padding_read(costs.padding_points(same, _server(), profile(0.85), "p"), 0.85) == pytest.approx(0.85, abs=1e-6)


def _server():
    from tests.conftest import make_scenario
    return make_scenario({"speculative_algorithm": "dspark", "speculative_num_draft_tokens": 4,
                          "max_total_num_tokens": 10**6, "max_running_requests": 64, "cuda_graph_max_bs": 64},
                         acceptance={"mean_accept_length": 1.0, "request_spread": 0.0}).server
