"""specsched.analysis.plots and analysis.io on real simulator runs of a small scenario."""

from __future__ import annotations

import json
from types import SimpleNamespace

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
import pytest
from specsched.analysis import plots
from specsched.analysis.io import read_results
from specsched.analysis.overrides import load_scenario_with_overrides
from specsched.analysis.synthetic import write_demo_scenario
from specsched.sim.engine import run_scenario
from specsched.sim.errors import ConfigError
from specsched.sim.results import write_results

ARMS = ("base", "stream_wait")


@pytest.fixture(scope="module")
def result_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    path = write_demo_scenario(root / "demo.yaml")
    dirs = []
    for arm in ARMS:
        sc = load_scenario_with_overrides(path, arm)
        for seed in (1, 2):
            dirs.append(write_results(run_scenario(sc, seed=seed), root / f"{arm}-{seed}"))
    return dirs


@pytest.fixture(scope="module")
def runs(result_dirs):
    return [read_results(d) for d in result_dirs]


def _legend_texts(fig):
    texts = []
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is not None:
            texts += [t.get_text() for t in leg.get_texts()]
    texts += [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    return texts


def _check_saved(fig, stem):
    png, svg = plots.save_figure(fig, stem)
    assert png.suffix == ".png" and svg.suffix == ".svg"
    img = mpimg.imread(png)
    assert img.ndim == 3 and img.shape[0] > 200 and img.shape[1] > 200
    assert float(np.std(img[..., :3])) > 0.01  # not a blank canvas
    assert svg.read_text().lstrip().startswith(("<?xml", "<svg"))
    assert not list(png.parent.glob(".*tmp*"))  # atomic: no temporaries left
    plots.plt.close(fig)
    return png, svg


def test_read_results_gives_the_contract_tables(runs, result_dirs):
    r = runs[0]
    assert r.summary["arm"] == "base" and r.summary["source"] == "sim"
    assert {"ttft_s", "tpot_s", "start_s"} <= set(r.requests.columns)
    assert len(r.requests) == 12 and r.requests["ttft_s"].notna().all()
    assert set(r.steps["mode"]) >= {"extend", "verify"}
    assert r.scenario["server"]["max_running_requests"] == 8


def test_read_results_bad_inputs(tmp_path, result_dirs):
    with pytest.raises(ConfigError, match="not a directory"):
        read_results(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="summary.json"):
        read_results(tmp_path / "empty")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "summary.json").write_text("{}")
    pd.DataFrame({"rid": [1]}).to_parquet(bad / "requests.parquet")
    with pytest.raises(ConfigError, match="missing"):
        read_results(bad)


def test_write_results_round_trips_a_run_read_back(runs, tmp_path):
    out = write_results(runs[1], tmp_path / "copy")
    back = read_results(out)
    pd.testing.assert_frame_equal(back.requests, runs[1].requests)
    assert back.summary["seed"] == runs[1].summary["seed"]
    write_results(runs[2], out)  # replaces the directory as a whole
    assert read_results(out).summary["arm"] == "stream_wait"
    assert json.loads((out / "summary.json").read_text())["arm"] == "stream_wait"


@pytest.mark.parametrize("log_x", [False, True])
def test_ttft_figure_has_each_arm_with_percentiles(runs, tmp_path, log_x):
    fig = plots.plot_ttft(runs, log_x=log_x)
    cdf, hist = fig.axes[:2]
    texts = _legend_texts(fig)
    for arm in ARMS:
        assert any(t.startswith(f"{arm} (pooled over 2 runs, n=24;") and "p50" in t and "p99" in t for t in texts), texts
    assert not any(t.startswith("waiting_aware") for t in texts)
    assert cdf.get_xscale() == ("log" if log_x else "linear")
    assert "TTFT" in cdf.get_xlabel() and "(ms" in cdf.get_xlabel()
    # p50/p90/p99 marked: 3 vertical lines per arm on the CDF
    vlines = [ln for ln in cdf.get_lines() if len(set(ln.get_xdata())) == 1 and len(ln.get_xdata()) == 2]
    assert len(vlines) == 3 * len(ARMS)
    p50_base = np.percentile(pd.concat([r.requests for r in runs[:2]])["ttft_s"] * 1e3, 50)
    assert any(abs(ln.get_xdata()[0] - p50_base) < 1e-9 for ln in vlines)
    _check_saved(fig, tmp_path / f"ttft{int(log_x)}")


def test_ttft_accepts_a_requests_dataframe(tmp_path):
    df = pd.DataFrame({"ttft_s": [0.1, 0.2, 0.3, 3.0], "arm": ["a", "a", "b", "b"]})
    fig = plots.plot_ttft(df)
    assert "(s)" in fig.axes[0].get_xlabel()  # > 2 s -> seconds
    texts = _legend_texts(fig)
    assert any(t.startswith("a (n=2") for t in texts) and any(t.startswith("b (n=2") for t in texts)
    _check_saved(fig, tmp_path / "df")


def test_tpot_itl_figure(runs, tmp_path):
    fig = plots.plot_tpot_itl(runs)
    titles = [ax.get_title() for ax in fig.axes]
    assert any("TPOT" in t for t in titles) and any("ITL" in t for t in titles)
    texts = _legend_texts(fig)
    assert sum(t.startswith("stream_wait (pooled over 2 runs, n=") for t in texts) == 2  # TPOT and ITL CDFs
    itl_cdf = next(ax for ax in fig.axes if ax.get_title().startswith("ITL: cumulative"))
    assert itl_cdf.get_xscale() == "log"  # a few long gaps would flatten a linear axis
    _check_saved(fig, tmp_path / "tpot")


def test_plot_legend_and_compare_table_give_the_same_pooled_percentile(runs):
    """One definition of a percentile across seeds: the plot legend's pooled p99 TTFT is the
    compare table's (pooled) value."""
    from specsched.analysis.compare import summarize_comparison
    from specsched.analysis.runner import latency_samples, summary_metrics

    rows, latency = [], {}
    for r in runs:
        arm, seed = r.summary["arm"], int(r.summary["seed"])
        rows += [(arm, seed, m, v) for m, v in summary_metrics(r).items()]
        latency[(arm, seed)] = latency_samples(r)
    table = summarize_comparison(pd.DataFrame(rows, columns=["arm", "seed", "metric", "value"]),
                                 ["p99_ttft_ms", "p90_ttft_ms"], latency=latency, n_resamples=200)
    assert set(table["across_seeds"]) == {"pooled"}
    pooled = np.concatenate([r.requests["ttft_s"].to_numpy() for r in runs if r.summary["arm"] == "stream_wait"])
    p99 = float(table.loc[table["metric"] == "p99_ttft_ms", "arm_value"].iloc[0])
    assert p99 == pytest.approx(np.percentile(pooled, 99) * 1e3, rel=1e-12)
    texts = _legend_texts(plots.plot_ttft(runs))
    legend = next(t for t in texts if t.startswith("stream_wait (pooled"))
    assert f"p99 {p99:.3g} ms" in legend
    plots.plt.close("all")


def test_timeline_figure(runs, tmp_path):
    fig = plots.plot_timeline(runs[0])
    a1, a2, a3 = fig.axes[:3]
    assert {t.get_text() for t in a1.get_legend().get_texts()} >= {"running", "waiting"}
    lanes = [t.get_text() for t in a3.get_yticklabels()]
    assert any("prefill" in t for t in lanes) and any("verify" in t for t in lanes) and "host blocked" in lanes
    assert a3.get_xlabel() == "time since run start (s)"
    assert "KV" in a2.get_ylabel()
    steps = runs[0].steps
    bars = [c for c in a3.collections]
    n_spans = sum(len(c.get_paths()) for c in bars)
    assert n_spans == len(steps) + int((steps["host_blocked_s"] > 0).sum())
    _check_saved(fig, tmp_path / "timeline")


def test_verify_cycles_split_on_a_hand_made_trace():
    steps = pd.DataFrame({
        "step": [0, 1, 2, 3, 4, 5],
        "mode": ["extend", "verify", "verify", "verify", "extend", "verify"],
        "batch_size": [2, 2, 2, 2, 1, 3],
        "num_extend_tokens": [100, 0, 0, 0, 50, 0],
        "gpu_start_s": [0.0, 1.0, 1.5, 2.1, 2.5, 3.0],
        "gpu_end_s": [1.0, 1.4, 1.9, 2.5, 2.8, 3.3],
        "host_blocked_s": [0.0, 0.05, 0.1, 0.2, 0.0, 0.0],
        "accepted_tokens": [0, 4, 5, 6, 0, 7],
    })
    cyc = plots.verify_cycles(steps)
    # cycles: verify1 -> verify2 (wall 0.5, gpu 0.4), verify2 -> verify3 (wall 0.6, gpu 0.4);
    # verify3 -> verify5 holds a prefill and is dropped; the first verify has no previous one
    np.testing.assert_allclose(cyc["wall_s"], [0.5, 0.6])
    np.testing.assert_allclose(cyc["gpu_s"], [0.4, 0.4])
    np.testing.assert_allclose(cyc["stall_s"], [0.1, 0.2])
    assert list(cyc["batch_size"]) == [2, 2]


def test_verify_split_figure(runs, tmp_path):
    fig = plots.plot_verify_split(runs)
    ax = fig.axes[0]
    texts = _legend_texts(fig)
    for arm in ARMS:
        assert f"{arm}: GPU work" in texts and f"{arm}: host stall (GPU idle)" in texts
    assert "(ms)" in ax.get_ylabel() and "batch size" in ax.get_xlabel()
    _check_saved(fig, tmp_path / "verify")
    with pytest.raises(ValueError):
        plots.plot_verify_split(runs[0].steps[runs[0].steps["mode"] == "extend"])


def test_arm_bars_with_confidence_intervals(runs, tmp_path):
    rows = [{"arm": r.summary["arm"], "seed": r.summary["seed"], "metric": m, "value": r.summary[m]}
            for r in runs for m in ("output_throughput", "median_ttft_ms")]
    samples = pd.DataFrame(rows)
    fig = plots.plot_arm_bars(samples)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 2
    assert [t.get_text() for t in axes[0].get_xticklabels()] == list(ARMS)
    assert axes[0].get_title() == "Output throughput (tok/s)" and axes[1].get_title() == "median TTFT (ms)"
    heights = [p.get_height() for p in axes[0].patches]
    want = samples[samples.metric == "output_throughput"].groupby("arm", sort=False)["value"].mean()
    np.testing.assert_allclose(heights, want.to_numpy())
    assert any(len(c.get_segments()) for c in axes[0].collections)  # error bars drawn (2 seeds)
    texts = _legend_texts(fig)
    assert "base (n=2 seeds)" in texts and "stream_wait (n=2 seeds)" in texts
    _check_saved(fig, tmp_path / "bars")
    with pytest.raises(ValueError):
        plots.plot_arm_bars(samples, ["nope"])


def test_read_results_csv_format(tmp_path, result_dirs):
    from specsched.analysis.synthetic import write_demo_scenario

    sc = load_scenario_with_overrides(write_demo_scenario(tmp_path / "d.yaml"), "base")
    r = run_scenario(sc, seed=4)
    back = read_results(write_results(r, tmp_path / "csv", fmt="csv"))
    assert len(back.requests) == len(r.requests) and back.summary["seed"] == 4
    np.testing.assert_allclose(back.steps["gpu_end_s"], r.steps["gpu_end_s"])


def test_plots_tolerate_runs_without_steps_or_chunks(runs, tmp_path):
    from specsched.analysis.io import empty_table
    from specsched.sim.records import RunResult

    bare = RunResult(requests=runs[0].requests, chunks=empty_table("chunks"), steps=empty_table("steps"),
                   timeseries=empty_table("timeseries"), summary=dict(runs[0].summary), scenario=None)
    _check_saved(plots.plot_timeline(bare), tmp_path / "tl")
    _check_saved(plots.plot_tpot_itl([bare]), tmp_path / "tpot")
    with pytest.raises(ValueError):
        plots.plot_verify_split([bare])


def test_verify_cycles_fall_back_to_decode_steps():
    """Decode steps when no verify ran; the last one's host wait no later launch records,
    so its cycle is left out."""
    steps = pd.DataFrame({
        "step": [0, 1, 2, 3], "mode": ["decode"] * 4, "batch_size": [4] * 4, "num_extend_tokens": [0] * 4,
        "gpu_start_s": [0.0, 0.012, 0.024, 0.036], "gpu_end_s": [0.010, 0.022, 0.034, 0.046],
        "host_blocked_s": [0.0] * 4, "accepted_tokens": [4] * 4,
    })
    cyc = plots.verify_cycles(steps)
    np.testing.assert_allclose(cyc["wall_s"], [0.012, 0.012])
    np.testing.assert_allclose(cyc["stall_s"], [0.002, 0.002])


def test_host_blocked_mark_stays_within_the_cycle_it_happened_in():
    """A step records the host's blocking since the previous launch: with overlap scheduling
    the wait for an extend lands on the second decode after it, whose cycle (2 ms) it
    exceeded seven-fold, drawn as a black mark far above its bar. Each wait is counted in the
    cycles it overlaps (just before the result it waited for), so the mark never tops the
    wall, and the total is kept over the cycles shown."""
    ms = 1e-3
    steps = pd.DataFrame({
        "step": range(9), "mode": ["decode", "decode", "extend"] + ["decode"] * 6,
        "batch_size": [4] * 9, "num_extend_tokens": [0, 0, 512] + [0] * 6,
        # back to back on the GPU (overlap): a launch waits for the forward two back
        "gpu_start_s": np.array([0, 2, 4, 18, 20, 22, 24, 26, 28]) * ms,
        "gpu_end_s": np.array([2, 4, 18, 20, 22, 24, 26, 28, 30]) * ms,
        "host_blocked_s": np.array([0, 0, 1.5, 1.5, 13.5, 1.5, 1.5, 1.5, 1.5]) * ms,
        "accepted_tokens": [4] * 9,
    })
    cyc = plots.verify_cycles(steps)
    assert (cyc["host_blocked_s"] <= cyc["wall_s"] + 1e-12).all()
    # step 4 waited 13.5 ms for the extend: counted in the extend's cycle, which is not drawn;
    # the decode cycles each hold 1.5 ms of 2; the last two, whose waits no launch records, are left out
    np.testing.assert_allclose(cyc["wall_s"], [2 * ms] * 4)
    np.testing.assert_allclose(cyc["host_blocked_s"], [1.5 * ms] * 4)


def test_split_plot_of_decode_runs_says_decode_step(runs, tmp_path):
    """Runs without speculative decoding time decode steps: the title and labels say so; a
    plot of both kinds says step."""
    decode = runs[0].steps.assign(mode=runs[0].steps["mode"].astype(str).replace("verify", "decode"))
    ax = plots.plot_verify_split(decode).axes[0]
    assert ax.get_title().startswith("Decode step wall time") and "verify" not in ax.get_title()
    assert ax.get_xlabel() == "batch size (requests in the decode forward)"
    assert ax.get_ylabel() == "mean wall time per decode step (ms)"
    assert "host blocked within the decode step's wall" in " ".join(_legend_texts(ax.figure))
    ax = plots.plot_verify_split(runs[0].steps).axes[0]
    assert ax.get_title().startswith("Verify cycle wall time") and "verify forward" in ax.get_xlabel()
    from specsched.sim.records import RunResult

    plain = RunResult(requests=runs[1].requests, chunks=runs[1].chunks, steps=decode, timeseries=runs[1].timeseries,
                      summary=dict(runs[1].summary, arm="plain"), scenario=None)
    ax = plots.plot_verify_split([runs[0], plain]).axes[0]
    assert ax.get_title().startswith("Step (verify cycle or decode step) wall time")
    assert ax.get_ylabel() == "mean wall time per step (ms)"


def test_the_running_limit_is_drawn_only_where_it_keeps_the_counts_readable(runs):
    """A limit far above the counts (4096 against ~30 running) flattened both curves against
    zero; it is named in the title instead, and drawn when the counts come near it."""
    run = runs[0]
    top = float(max(run.timeseries["running"].max(), run.timeseries["waiting"].max()))
    for limit, drawn in ((int(100 * top) + 1, False), (max(int(top), 1), True)):
        with_limit = SimpleNamespace(**{k: getattr(run, k) for k in ("requests", "chunks", "steps", "timeseries",
                                                                     "summary")},
                                     scenario={"server": {"max_running_requests": limit}})
        a1 = plots.plot_timeline(with_limit).axes[0]
        labels = {t.get_text() for t in a1.get_legend().get_texts()}
        assert (f"max_running_requests = {limit}" in labels) is drawn
        assert ("off the scale" in a1.get_title()) is not drawn
        plots.plt.close("all")


@pytest.mark.parametrize("given", ["bars.png", "bars.svg", "bars"])
def test_save_figure_takes_a_stem_given_with_its_suffix(tmp_path, given):
    """``compare --plot bars.png`` wrote bars.png.png and bars.png.svg: a stem given with
    the suffix of one of the two formats it writes is that stem."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from specsched.analysis.plots import save_figure

    fig = plt.figure()
    png, svg = save_figure(fig, tmp_path / given)
    plt.close(fig)
    assert (png, svg) == (tmp_path / "bars.png", tmp_path / "bars.svg")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bars.png", "bars.svg"]


def test_log_axis_tick_labels_do_not_collide_over_four_decades():
    """The ITL panels of the README's burst256-ht plot span 1.6 ms to 15 s: 1-2-5 ticks over
    those four decades printed '5000' '10000' '20000' into one another ('500010000'). Over
    more than three decades only the powers of ten are labelled; no two labels overlap."""
    fig, axes = plots.plt.subplots(2, 2, figsize=(13, 9), layout="constrained")
    itl = {"base": np.geomspace(1.6e-3, 15.2, 500)}
    plots._distribution_panels(axes[1, 0], axes[1, 1], itl, "ITL", "ms", 1e3, True, 50)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in (axes[1, 0], axes[1, 1]):
        lo, hi = ax.get_xlim()
        boxes = sorted((t.get_window_extent(renderer) for t in ax.get_xticklabels()
                        if t.get_text() and lo <= t.get_position()[0] <= hi), key=lambda b: b.x0)
        assert len(boxes) >= 4
        for a, b in zip(boxes, boxes[1:], strict=False):
            assert a.x1 <= b.x0, [t.get_text() for t in ax.get_xticklabels()]
    plots.plt.close(fig)


@pytest.mark.parametrize("log_x", [False, True])
def test_itls_equal_but_for_rounding_still_plot(log_x):
    """A bench_serving line whose ITLs are all the same gap, read back in seconds and
    scaled to ms, can differ in the last bits (12.300000000000002 vs 12.3): the histogram's
    edges over that span were not increasing and matplotlib refused them (numpy 'bins must
    increase monotonically')."""
    fig, axes = plots.plt.subplots(1, 2)
    v = np.array([12.299999999999999, 12.300000000000002] * 10)  # ms, scale 1
    assert v.max() > v.min()
    plots._distribution_panels(axes[0], axes[1], {"measured": v}, "ITL", "ms", 1.0, log_x, 50)
    plots.plt.close(fig)


def test_a_timeline_of_several_decode_servers_draws_each_and_a_busy_share_per_server():
    """A 1P2D run's steps and timeseries hold both decode servers' rows, grouped by server:
    the timeline drew them as one line that jumped back to the start at the second server
    and summed both servers' forward time over one span ('GPU busy 199.5 %'). The tables
    carry a decode_server column, and the timeline draws one line per decode server and a busy
    share of at most 100 %."""
    from specsched.sim.engine import SimEngine

    from tests.conftest import make_scenario
    from tests.test_disaggregation import _pd, _profile

    sc = make_scenario(_pd(decode=2), {"kind": "poisson", "request_rate": 200.0, "num_requests": 24,
                                       "input_len": {"kind": "fixed", "value": 200},
                                       "output_len": {"kind": "fixed", "value": 40}})
    res = SimEngine(sc, _profile(), 1).run()
    assert set(res.steps["decode_server"]) == {0, 1} and set(res.timeseries["decode_server"]) == {0, 1}
    for table, t in ((res.steps, "gpu_start_s"), (res.timeseries, "time_s")):
        for _, rows in table.groupby("decode_server"):
            assert (rows[t].diff().dropna() >= 0).all()
    run = SimpleNamespace(scenario=sc, steps=res.steps, timeseries=res.timeseries, requests=res.requests,
                          summary={**res.summary, "scenario": sc.name, "seed": 1}, label="base")
    fig = plots.plot_timeline(run)
    a1, _, a3 = fig.axes[:3]
    running = [ln for ln in a1.get_lines() if ln.get_label().startswith("running")]
    assert len(running) == 2
    for ln in running:
        assert (np.diff(np.asarray(ln.get_xdata(), float)) >= 0).all()
    share = float(a3.get_title().split("GPU busy ")[1].split("%")[0])
    assert 0 < share <= 100, a3.get_title()
    assert "decode server" in a3.get_title()
    plots.plt.close("all")


def test_verify_cycles_of_several_decode_servers_stay_within_each_server():
    """Two decode servers' verifies sorted together made cycles from one server's verify to
    the other's: negative walls and GPU time above the wall (median cycle halved)."""
    from specsched.sim.engine import SimEngine

    from tests.conftest import make_scenario
    from tests.test_disaggregation import _pd, _profile

    wl = {"kind": "poisson", "request_rate": 200.0, "num_requests": 24,
          "input_len": {"kind": "fixed", "value": 200}, "output_len": {"kind": "fixed", "value": 60}}
    spec = {"speculative_algorithm": "dspark", "speculative_num_draft_tokens": 4}
    sc = make_scenario(_pd(decode=2, **spec), wl, acceptance={"mean_accept_length": 2.0})
    steps = SimEngine(sc, _profile(), 1).run().steps
    v = plots.verify_cycles(steps)
    assert len(v) and (v["wall_s"] > 0).all() and (v["gpu_s"] <= v["wall_s"] + 1e-12).all()
    one = [plots.verify_cycles(rows.drop(columns="decode_server")) for _, rows in steps.groupby("decode_server")]
    assert len(v) == sum(len(x) for x in one)


def test_a_stated_p95_on_the_histogram_has_its_own_line_style_in_the_legend():
    """A bench_serving line without details states median, p90, p95 and p99: its p95 was drawn
    on the histogram as a solid line, a style the legend (p50, p90, p99) never names, so it
    read as a fourth kind of curve. It now has its own style, named in the legend."""
    bare = SimpleNamespace(requests=pd.DataFrame(), summary={
        "arm": "measured", "scenario": "s", "median_ttft_ms": 300.0, "p90_ttft_ms": 800.0,
        "p95_ttft_ms": 1100.0, "p99_ttft_ms": 1700.0})
    fig = plots.plot_ttft([], marks=[bare])
    hist = fig.axes[1]
    # get_linestyle() names every dash pattern "--": the pattern itself tells them apart
    styles = [(ln.get_linestyle(), str(ln._unscaled_dash_pattern))
              for ln in sorted(hist.lines, key=lambda ln: ln.get_xdata()[0])]
    assert len(styles) == 4 and styles[2][0] != "-" and len(set(styles)) == 4, styles
    assert "p95" in [t.get_text() for t in hist.get_legend().get_texts()]
    plots.plt.close(fig)


def test_arms_with_the_same_distribution_stay_visible_in_the_ttft_plot():
    """Two arms whose TTFTs coincide but for the tail (waiting_aware against base on the
    256 burst: the same p50 and p90) were two 1.6-point lines, the second hiding the first
    up to p90. Earlier arms are drawn wider now, in both panels and the legend, so the first
    shows around the second."""
    ttft = np.linspace(0.1, 15.0, 200)
    frame = pd.DataFrame({"arm": ["base"] * 200 + ["waiting_aware"] * 200,
                          "ttft_s": np.concatenate([ttft, np.where(ttft > 14.5, 15.5, ttft)])})
    fig = plots.plot_ttft(frame)
    cdf, hist = fig.axes[:2]
    steps = [ln for ln in cdf.get_lines() if len(ln.get_xdata()) > 2]   # the ECDFs, not the percentile marks
    assert [ln.get_color() for ln in steps] == [plots._colors(2)[0], plots._colors(2)[1]]
    wide, narrow = (ln.get_linewidth() for ln in steps)
    assert wide > narrow + 1
    assert [p.get_linewidth() for p in hist.patches] == [wide, narrow]
    keys = [h for h in hist.get_legend().legend_handles if h.get_label() in ("base", "waiting_aware")]
    assert [h.get_linewidth() for h in keys] == [wide, narrow]
    plots.plt.close(fig)


def _bands(ax):
    return [t for t in ax.get_legend().get_texts() if "95 % band of one run" in t.get_text()]


def test_one_runs_ttft_and_tpot_distributions_carry_their_95_percent_band_and_pooled_ones_and_itl_none(runs):
    """A single run's ECDF of per-request TTFT or TPOT is shaded with its 95 % DKW band (where a
    rerun could put it by chance); arms pooled over seeds, and the ITL panel (gaps of one request
    are not independent draws), have none."""
    one = [r for r in runs if r.summary.get("arm", "base") == "base"][:1] + \
          [r for r in runs if r.summary.get("arm") == "stream_wait"]
    fig = plots.plot_ttft(one)
    ax = fig.axes[0]
    assert len(_bands(ax)) == 1   # base: one run; stream_wait: pooled over two seeds
    assert len(ax.collections) >= 1
    plots.plt.close(fig)
    fig = plots.plot_tpot_itl(one)
    assert len(_bands(fig.axes[0])) == 1 and not _bands(fig.axes[2])
    plots.plt.close(fig)


def test_the_ecdf_band_holds_the_true_distribution_as_often_as_it_says():
    from specsched.analysis.stats import ecdf, ecdf_band_halfwidth

    rng = np.random.default_rng(3)
    n, hits = 300, 0
    h = ecdf_band_halfwidth(n)
    for _ in range(300):
        x, f = ecdf(rng.uniform(size=n))
        dev = max(np.max(np.abs(f - x)), np.max(np.abs(f - 1.0 / n - x)))   # sup |F_n - F|, both sides of a step
        hits += dev <= h
    assert 0.93 <= hits / 300 <= 1.0
    with pytest.raises(ValueError):
        ecdf_band_halfwidth(0)
