"""The plot / compare / sweep subcommands through the specsched CLI."""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib.image as mpimg
import pandas as pd
import pytest
import yaml
from specsched.analysis.cli_commands import add_parsers
from specsched.analysis.overrides import load_scenario_with_overrides
from specsched.analysis.synthetic import write_demo_scenario
from specsched.sim.engine import run_scenario
from specsched.sim.results import write_results

from specsched.cli import main


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    return write_demo_scenario(tmp_path_factory.mktemp("cli") / "demo.yaml")


def test_add_parsers_registers_the_three_commands():
    p = argparse.ArgumentParser()
    add_parsers(p.add_subparsers(dest="command", required=True))
    a = p.parse_args(["plot", "r1", "r2", "--log-x", "--out", "o"])
    assert a.results_dirs == ["r1", "r2"] and a.log_x and a.out == "o" and callable(a.func)
    a = p.parse_args(["compare", "s.yaml", "--arms", "base,fix", "--seeds", "3", "--csv", "c", "--markdown", "m",
                      "--plot", "p"])
    assert (a.arms, a.seeds, a.csv, a.markdown, a.plot) == ("base,fix", 3, "c", "m", "p")
    a = p.parse_args(["sweep", "s.yaml", "--grid", "server.x=1,2", "arm=a,b", "--grid", "seed=3",
                      "--seeds", "2", "--out", "f.parquet", "--scheduler", "tcp://h:8786", "--no-resume"])
    assert a.grid == ["server.x=1,2", "arm=a,b", "seed=3"] and a.no_resume and a.scheduler == "tcp://h:8786"
    assert a.func.__name__ == "cmd_sweep"


def test_plot_command_writes_figures(scenario, tmp_path, capsys):
    dirs = []
    for arm in ("base", "stream_wait"):
        r = run_scenario(load_scenario_with_overrides(scenario, arm), seed=1)
        dirs.append(str(write_results(r, tmp_path / arm)))
    out = tmp_path / "figs"
    assert main(["plot", *dirs, "--out", str(out), "--log-x"]) == 0
    names = {p.name for p in out.iterdir()}
    for stem in ("ttft", "tpot_itl", "verify_split", "timeline_base_seed1", "timeline_stream_wait_seed1"):
        assert f"{stem}.png" in names and f"{stem}.svg" in names
    assert mpimg.imread(out / "ttft.png").shape[0] > 100
    assert str(out / "ttft.png") in capsys.readouterr().out


@pytest.fixture
def tiny_figures(monkeypatch):
    """Every figure `plot` draws replaced by a 1-inch one: the tests check where files go."""
    from specsched.analysis import plots

    def tiny(*args, **kwargs):
        fig = plots.plt.figure(figsize=(1, 1))
        fig.add_subplot().plot([0, 1])
        return fig

    for name in ("plot_ttft", "plot_tpot_itl", "plot_verify_split", "plot_timeline"):
        monkeypatch.setattr(plots, name, tiny)


def test_plot_default_out_dir(scenario, tmp_path, monkeypatch, tiny_figures):
    d = write_results(run_scenario(load_scenario_with_overrides(scenario, "base"), seed=3), tmp_path / "one")
    assert main(["plot", str(d)]) == 0  # one dir: next to it
    assert {p.name for p in (d / "plots").iterdir()} >= {"ttft.png", "timeline_base_seed3.svg"}
    d2 = write_results(run_scenario(load_scenario_with_overrides(scenario, "base"), seed=3), tmp_path / "two")
    monkeypatch.chdir(tmp_path)
    assert main(["plot", str(d), str(d2)]) == 0  # several: a folder of ./plots named after them
    assert {"timeline_base_seed3.png", "timeline_base_seed3_2.png"} <= {p.name for p in (tmp_path / "plots" / "one_vs_two").iterdir()}


def test_plot_tells_what_if_runs_of_one_arm_apart(scenario, tmp_path, monkeypatch, tiny_figures):
    """`specsched run --set` what-ifs of one arm (results folders <arm>-seed<N>+<overrides>) are
    drawn one label each, not pooled as if they were seeds of that arm; seeds of one setting
    still pool, and each run gets a timeline named after its setting."""
    from specsched.analysis import plots

    seen = []
    monkeypatch.setattr(plots, "plot_ttft", lambda runs, **kw: seen.append(plots.group_runs(runs))
                        or plots.plt.figure(figsize=(1, 1)))
    dirs = []
    for seed in (1, 2):
        run = run_scenario(load_scenario_with_overrides(scenario, "base"), seed=seed)
        dirs.append(str(write_results(run, tmp_path / f"base-seed{seed}")))
    # the same scenario run from another folder: its path differs, it is still a seed of base
    saved = tmp_path / "base-seed2" / "scenario.yaml"
    saved.write_text(yaml.safe_dump({**yaml.safe_load(saved.read_text()), "path": "../elsewhere/demo.yaml"}))
    over = {"server.chunked_prefill_size": 64}
    run = run_scenario(load_scenario_with_overrides(scenario, "base", over), seed=1)
    dirs.append(str(write_results(run, tmp_path / "base-seed1+server.chunked_prefill_size=64")))
    out = tmp_path / "figs"
    assert main(["plot", *dirs, "--out", str(out)]) == 0
    groups = seen[-1]
    assert {k: len(v) for k, v in groups.items()} == {"base": 2, "base+server.chunked_prefill_size=64": 1}
    names = {p.name for p in out.iterdir()}
    assert {"timeline_base_seed1.png", "timeline_base_seed2.png",
            "timeline_base_server.chunked_prefill_size_64_seed1.png"} <= names, names


def test_plot_tells_a_measured_run_from_its_prediction(scenario, tmp_path, monkeypatch, tiny_figures):
    """`validate --out DIR` writes <cell>-<arm>-measured/ and -predicted/ of one scenario, arm
    and seed: plotting the two drew one curve 'base (pooled over 2 runs)'. Each is now labelled
    by where it ran."""
    import json
    import shutil

    from specsched.analysis import plots

    seen = []
    monkeypatch.setattr(plots, "plot_ttft", lambda runs, **kw: seen.append(plots.group_runs(runs))
                        or plots.plt.figure(figsize=(1, 1)))
    run = run_scenario(load_scenario_with_overrides(scenario, "base"), seed=1)
    pred = write_results(run, tmp_path / "demo-base-predicted")
    meas = tmp_path / "demo-base-measured"
    shutil.copytree(pred, meas)
    summary = json.loads((meas / "summary.json").read_text())
    (meas / "summary.json").write_text(json.dumps({**summary, "source": "runtime:cpu (torch 2.13.0+cpu)"}))
    assert main(["plot", str(meas), str(pred), "--out", str(tmp_path / "figs")]) == 0
    assert {k: len(v) for k, v in seen[-1].items()} == {"base [runtime:cpu]": 1, "base [sim]": 1}


def test_a_plot_out_that_is_a_file_is_refused_naming_out(scenario, tmp_path, capsys):
    """`plot DIR --out notes.yaml` (a file) failed with "cannot write notes.yaml: File exists",
    naming neither --out nor what it takes; now one line naming --out, exit 2, the file kept,
    for runs and for a sweep file alike, and a path under a file likewise."""
    run = run_scenario(load_scenario_with_overrides(scenario, "base"), seed=1)
    d = str(write_results(run, tmp_path / "base-seed1"))
    note = tmp_path / "notes.yaml"
    note.write_text("mine\n")
    for out in (note, note / "figs"):
        capsys.readouterr()
        assert main(["plot", d, "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--out" in err[0] and "folder" in err[0], err
    assert note.read_text() == "mine\n"


@pytest.mark.parametrize("option,target", [("--csv", "dir"), ("--markdown", "dir"), ("--csv", "under_file"),
                                           ("--plot", "under_file")])
def test_compare_refuses_an_unwritable_table_or_plot_before_its_runs(scenario, tmp_path, capsys, monkeypatch, option,
                                                                     target):
    """`compare --csv DIR` (a folder) or a path under a file ran every arm and seed, then failed
    with "cannot write DIR: Is a directory", naming no option; now one line naming the option,
    exit 2, before any run."""
    from specsched.analysis import compare

    (tmp_path / "dir").mkdir()
    (tmp_path / "f.txt").write_text("x\n")
    out = {"dir": tmp_path / "dir", "under_file": tmp_path / "f.txt" / "t"}[target]
    ran = []
    monkeypatch.setattr(compare, "run_arms", lambda *a, **k: ran.append(1))
    assert main(["compare", str(scenario), "--arms", "base,stream_wait", "--no-save", option, str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert option in err[-1] and not ran, err


def test_plotting_another_set_never_overwrites_and_a_replacement_is_named(scenario, tmp_path, monkeypatch, capsys,
                                                                          tiny_figures):
    """Several inputs get their own folder (named after them; alike folder names take their
    parent's); a second set lands elsewhere; plotting the same set again, or into an --out
    holding other figures, says so on stderr; no temporary file is left."""
    dirs = {}
    for group in ("x", "y"):
        for arm in ("base", "stream_wait"):
            run = run_scenario(load_scenario_with_overrides(scenario, arm), seed=1)
            dirs[group, arm] = str(write_results(run, tmp_path / group / f"{arm}-seed1"))
    monkeypatch.chdir(tmp_path)
    assert main(["plot", dirs["x", "base"], dirs["x", "stream_wait"]]) == 0
    first = tmp_path / "plots" / "base-seed1_vs_stream_wait-seed1"
    made = {p.name: p.read_bytes() for p in first.iterdir()}
    assert "ttft.png" in made and "note:" not in capsys.readouterr().err
    assert main(["plot", dirs["x", "base"], dirs["y", "base"]]) == 0   # alike names: parent's name added
    second = tmp_path / "plots" / "x_base-seed1_vs_y_base-seed1"
    assert (second / "ttft.png").is_file() and {p.name: p.read_bytes() for p in first.iterdir()} == made
    assert "note:" not in capsys.readouterr().err
    assert main(["plot", dirs["x", "base"], dirs["x", "stream_wait"]]) == 0   # the same set again
    err = capsys.readouterr().err
    assert err == f"note: replaced {len(made)} file(s) of an earlier plot in plots/{first.name}/\n"
    assert main(["plot", dirs["y", "base"], "--out", str(first)]) == 0   # one run into the two-run folder
    err = capsys.readouterr().err
    assert "timeline_stream_wait_seed1.png" in err.split("not from this plot")[1], err
    assert not [p for p in (tmp_path / "plots").rglob("*") if p.name.endswith(".tmp")]


def test_compare_command_writes_csv_markdown_plot(scenario, tmp_path, capsys):
    csv, md, stem = tmp_path / "c.csv", tmp_path / "c.md", tmp_path / "bars"
    rc = main(["compare", str(scenario), "--arms", "base,stream_wait", "--seeds", "2", "--csv", str(csv),
               "--markdown", str(md), "--plot", str(stem), "--metrics", "output_throughput,p99_ttft_ms",
               "--set", "workload.num_requests=6", "--no-progress", "--no-save"])
    assert rc == 0
    table = pd.read_csv(csv)
    assert list(table["metric"]) == ["output_throughput", "p99_ttft_ms"]
    assert (table["arm"] == "stream_wait").all() and (table["n_seeds"] == 2).all()
    text = md.read_text()
    assert text.count("\n") == 8 and "p99_ttft_ms (pooled)" in text and text.rstrip().endswith("means over seeds.")
    assert list(table["across_seeds"]) == ["mean", "pooled"]
    assert (tmp_path / "bars.png").is_file() and (tmp_path / "bars.svg").is_file()
    assert "stream_wait" in capsys.readouterr().out


def test_compare_keeps_each_run_where_it_says(scenario, tmp_path, monkeypatch, capsys):
    """Every (arm, seed) run is kept as a results directory named as ``specsched run`` names
    it (the --set suffix too), holding that run (its seed in scenario.yaml and summary); the
    table's values are those runs'; the last line says where they are; --no-save keeps none."""
    from specsched.analysis.io import read_results
    from specsched.sim.config import load_scenario

    monkeypatch.chdir(tmp_path)
    argv = ["compare", str(scenario), "--arms", "base,stream_wait", "--seeds", "2", "--set", "workload.num_requests=6",
            "--metrics", "output_throughput", "--csv", "t.csv", "-q"]
    assert main([*argv, "--out", "kept"]) == 0
    out = capsys.readouterr().out
    names = sorted(p.name for p in (tmp_path / "kept").iterdir())
    assert names == [f"{a}-seed{s}+workload.num_requests=6" for a in ("base", "stream_wait") for s in (1, 2)]
    last = out.splitlines()[-1]
    # two seeds: the plot hint names each arm's seeds by a glob, pooled as the table pools them
    assert "runs kept in kept/" in last and "specsched plot kept/base-seed*+workload.num_requests=6 " in last
    assert "kept/stream_wait-seed*+workload.num_requests=6 (each arm's seeds pooled" in last
    hinted = sorted(p.name for p in (tmp_path / "kept").glob("base-seed*+workload.num_requests=6"))
    assert hinted == ["base-seed1+workload.num_requests=6", "base-seed2+workload.num_requests=6"]
    table = pd.read_csv(tmp_path / "t.csv").iloc[0]
    for arm, col in (("base", "base_value"), ("stream_wait", "arm_value")):
        runs = [read_results(tmp_path / "kept" / f"{arm}-seed{s}+workload.num_requests=6") for s in (1, 2)]
        assert [r.summary["seed"] for r in runs] == [1, 2] and all(r.summary["arm"] == arm for r in runs)
        assert table[col] == pytest.approx(sum(r.summary["output_throughput"] for r in runs) / 2)
        assert load_scenario(tmp_path / "kept" / f"{arm}-seed2+workload.num_requests=6" / "scenario.yaml", arm).seed == 2
    assert main([*argv, "--no-save", "--out", "none"]) == 0 and not (tmp_path / "none").exists()
    assert "runs kept" not in capsys.readouterr().out
    assert main(argv) == 0   # default: results/<scenario>/, where `specsched run` writes
    assert (tmp_path / "results" / "demo-tiny" / "base-seed1+workload.num_requests=6" / "summary.json").is_file()


def test_a_sweep_into_a_file_of_other_points_summarises_its_own_grid(scenario, tmp_path, capsys):
    """A sweep extends its file with the points of another --grid (resume), but its summary, best
    point and objectives were over every point in the file: a one-point grid was reported as
    "SLO met at 0 of 3" with the earlier sweep's points among them."""
    out = tmp_path / "s.parquet"
    args = ["--seeds", "1", "--out", str(out), "--workers", "1", "--no-progress"]
    assert main(["sweep", str(scenario), "--grid", "server.chunked_prefill_size=2048,4096", *args]) == 0
    capsys.readouterr()
    assert main(["sweep", str(scenario), "--grid", "server.chunked_prefill_size=1024", "--slo", "p99_ttft_ms<=1e9",
                 *args]) == 0
    cap = capsys.readouterr()
    assert "also holds 2 point(s) of earlier sweeps outside this --grid" in cap.err
    rows = [line for line in cap.out.splitlines() if line.startswith("│")]
    assert len(rows) == 1 and "1024" in rows[0] and "met at 1 of 1 point(s)" in cap.out
    assert pd.read_parquet(out)["server.chunked_prefill_size"].nunique() == 3   # the file keeps every point

def test_sweep_command(scenario, tmp_path, capsys):
    out = tmp_path / "s.parquet"
    rc = main(["sweep", str(scenario), "--grid", "server.chunked_prefill_size=2048,4096", "--seeds", "1",
               "--out", str(out), "--workers", "1", "--no-progress"])
    assert rc == 0
    t = pd.read_parquet(out)
    assert sorted(t["server.chunked_prefill_size"].unique()) == [2048, 4096]
    cap = capsys.readouterr()
    assert "2 run(s) done now" in cap.err
    # the summary table: one row per point, the key metrics, percentiles pooled
    assert "s.parquet: one row per point" in cap.out and "p99_ttft_ms (pooled)" in cap.out
    assert sum(line.count("2048") for line in cap.out.splitlines()) == 1
    rc = main(["sweep", str(scenario), "--grid", "server.chunked_prefill_size=2048,4096", "--out", str(out),
               "--no-progress"])
    assert rc == 0 and "0 run(s) done now, 2 already there" in capsys.readouterr().err
    # plot SWEEP.parquet: metric-vs-parameter lines
    assert main(["plot", str(out), "--out", str(tmp_path / "figs")]) == 0
    assert (tmp_path / "figs" / "sweep_s.png").is_file() and (tmp_path / "figs" / "sweep_s.svg").is_file()


@pytest.mark.parametrize("argv", [
    ["compare", "{s}", "--arms", "base,nope", "--seeds", "1"],
    ["compare", "{s}", "--arms", "base,", "--seeds", "1"],
    ["compare", "{s}", "--arms", "base", "--set", "server.bogus=1", "--seeds", "1"],
    ["sweep", "{s}", "--grid", "server.bogus=1,2", "--out", "{t}/x.parquet"],
    ["sweep", "{s}", "--grid", "server.max_running_requests=0", "--out", "{t}/x.parquet"],
    ["sweep", "{s}", "--grid", "noequals", "--out", "{t}/x.parquet"],
    ["sweep", "{s}", "--grid", "seed=1", "--scheduler", "localhost", "--out", "{t}/x.parquet"],
    ["plot", "{t}/does-not-exist"],
])
def test_bad_input_exits_2(argv, scenario, tmp_path, capsys):
    argv = [a.format(s=scenario, t=tmp_path) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("specsched: error:") and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.parquet").exists()


def test_a_seed_grid_axis_is_refused_for_seeds(scenario, tmp_path, capsys):
    """`sweep --grid seed=1,2` ran, but the axis shared its column with the runs' own seed:
    the table showed two unnamed rows and the parquet's seed column held the run seeds, the
    axis value only in the point key (and the points' runs overlapped: seeds 1, 2 and 2, 3)."""
    out = tmp_path / "x.parquet"
    assert main(["sweep", str(scenario), "--grid", "seed=1,2", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "seed = '1,2'" in err and "--seeds" in err and "--set seed=" in err, err
    assert not out.exists()


@pytest.mark.parametrize("option", ["--csv", "--markdown"])
def test_compare_refuses_a_table_over_the_scenario_it_reads(option, tmp_path, capsys):
    """`compare s.yaml --csv s.yaml` wrote the table over the scenario it had just compared (and
    --markdown likewise): one line, exit 2, before any run, the scenario left as it was."""
    s = write_demo_scenario(tmp_path / "demo.yaml")
    before = s.read_text()
    assert main(["compare", str(s), "--arms", "base,stream_wait", "--seeds", "1", "--no-save", option, str(s)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and option in err[0] and "the scenario" in err[0], err
    assert s.read_text() == before


def test_compare_with_an_unknown_arm_names_its_own_option(scenario, capsys):
    """`compare --arms base,nope` named the loader's `--arm` option, which compare does not
    have; it names --arms, the arm at fault and the allowed ones, exit 2, nothing run."""
    rc = main(["compare", str(scenario), "--arms", "base,nope", "--no-save"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "--arms = 'nope'" in err and "allowed: base" in err and "--arm =" not in err


@pytest.mark.parametrize(("flag", "value", "example"), [
    ("--arms", "base,", "e.g. base,fix"),
    ("--metrics", ",", "e.g. output_throughput,median_ttft_ms"),
    ("--metrics", "output_throughput,,p99_ttft_ms", "e.g. output_throughput,median_ttft_ms"),
])
def test_an_empty_item_of_a_list_option_gives_that_options_example(flag, value, example, scenario, capsys):
    """`compare --metrics ,` answered "expected a comma-separated list, e.g. base,fix": the
    arms' example under the metrics option."""
    argv = ["compare", str(scenario), "--arms", "base,stream_wait", "--no-save", "--seeds", "1"]
    argv = [*argv[:3], value, *argv[4:]] if flag == "--arms" else [*argv, flag, value]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{flag} = {value!r}" in err and example in err, err


SPEC_ARM_SCENARIO = """name: dd
profile: h200-1b
server: {admission_delay: none}
acceptance: {mean_accept_length: 3.0}
workload: {kind: closed_loop, concurrency: 4, num_requests: 6, input_len: {kind: fixed, value: 64},
           output_len: {kind: fixed, value: 8}}
arms:
  mtp: {server: {speculative_algorithm: dspark, speculative_num_draft_tokens: 4}}
"""


def test_compare_and_sweep_name_the_defaults_that_differ(scenario, tmp_path, capsys):
    """A speculative arm left without max_running_requests runs SGLang's 48 while the base
    arm gets another default: compare and sweep say so once, above their table; when the
    arms' filled defaults agree they print no such block."""
    spec = tmp_path / "dd.yaml"
    spec.write_text(SPEC_ARM_SCENARIO)
    line = "max_running_requests: base: 256 (the simulator's default); mtp: 48 (SGLang's reset for speculative decoding)"
    assert main(["compare", str(spec), "--arms", "base,mtp", "--seeds", "1", "--no-save", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.count("server defaults that differ between arms") == 1 and f"  {line}\n" in out
    assert out.index(line) < out.index("arms compared")
    assert main(["sweep", str(spec), "--grid", "arm=base,mtp", "server.chunked_prefill_size=2048,4096",
                 "--out", str(tmp_path / "s.parquet"), "--workers", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.count("server defaults that differ between grid points") == 1
    assert "max_running_requests: arm=base: 256 (the simulator's default); arm=mtp: 48 (SGLang's reset" in out
    assert main(["compare", str(scenario), "--arms", "base,stream_wait", "--seeds", "1", "--no-save", "--no-progress",
                 "--set", "workload.num_requests=6"]) == 0
    assert "differ between" not in capsys.readouterr().out


@pytest.mark.parametrize("resume", [True, False])
def test_a_sweep_out_that_is_a_folder_is_refused_naming_it_a_folder(scenario, tmp_path, capsys, resume):
    """`sweep --out results/mine` (a results folder) was refused as `not a readable parquet file
    (Error creating dataset. Could not read schema from 'results/mine/base-seed1/bench_serving.jsonl'
    ...)`, and with --no-resume as something else again; it is now said to be a folder, with the
    file to give instead."""
    run = tmp_path / "mine" / "base-seed1"
    run.mkdir(parents=True)
    (run / "summary.json").write_text("{}")
    argv = ["sweep", str(scenario), "--grid", "server.chunked_prefill_size=2048,4096", "--seeds", "1",
            "--out", str(tmp_path / "mine"), "--workers", "1", "--no-progress", *([] if resume else ["--no-resume"])]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a folder" in err[0] and "sweep.parquet" in err[0], err
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["base-seed1"]


def test_a_plot_of_an_arms_seeds_is_named_by_the_arms(tmp_path, monkeypatch):
    """`specsched plot results/b/base-seed{1..5} results/b/waiting_aware-seed{1..5}` (the runs
    compare keeps, pooled per arm in the figures) went to a folder cut at 80 characters with a
    hash, ``base-seed1_vs_base-seed2_vs_..._waiting_aw-774a44dd``; an arm's seeds now read
    together; one seed per arm and other names are as before."""
    from specsched.analysis.cli_commands import default_plot_dir

    monkeypatch.chdir(tmp_path)
    five = [f"results/b/{arm}-seed{s}" for arm in ("base", "waiting_aware") for s in range(1, 6)]
    assert default_plot_dir(five) == Path("plots/base-seeds1-5_vs_waiting_aware-seeds1-5")
    assert default_plot_dir(["r/base-seed3", "r/fix-seed1", "r/base-seed1", "r/fix-seed2"]) == \
        Path("plots/base-seeds1_3_vs_fix-seeds1-2")
    assert default_plot_dir(["r/base-seed1", "r/fix-seed1"]) == Path("plots/base-seed1_vs_fix-seed1")
    assert default_plot_dir(["r/one", "r/base-seed1", "r/base-seed2"]) == Path("plots/one_vs_base-seeds1-2")
