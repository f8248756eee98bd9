"""benchmarks/gpu_validate.py's bookkeeping: a run that fails is reported and the others go
on with a fresh engine; validate.csv, checks.md and results.tar.gz are always written, and a
deadline stops new runs without losing what was measured (the round-3 sweep lost every
results directory when one rate crashed the runtime)."""

from __future__ import annotations

import csv
import sys
import tarfile

from specsched.sim.engine import SimEngine

from tests.conftest import load_benchmark, make_scenario, tiny_profile

gv = load_benchmark("gpu_validate")

SC = make_scenario({"speculative_algorithm": "none", "speculative_num_draft_tokens": 1},
                   {"num_requests": 3, "input_len": {"kind": "fixed", "value": 64}, "output_len": {"kind": "fixed", "value": 4}})


def _jobs():
    return [gv.Job("a", "base", SC, "a", "a-base"), gv.Job("a", "other", SC, "a", "a-other"),
            gv.Job("b@8", "base", SC, "rates", "b-rate8"), gv.Job("b@16", "base", SC, "rates", "b-rate16")]


def test_a_failed_run_is_reported_and_the_rest_go_on_with_a_fresh_engine(tmp_path):
    engines = []

    def measure(job, eng):
        if eng is None:
            eng = object()
            engines.append(eng)
        if job.result_name == "a-other" or job.result_name == "b-rate8":
            raise RuntimeError(f"PoolExhausted: no free request row\nsecond line of {job.label}")
        return SimEngine(job.scenario, tiny_profile()).run(), eng

    val = gv.Validation(tmp_path, measure, lambda job, seed: SimEngine(job.scenario, tiny_profile()).run())
    try:
        val.run(_jobs())
    finally:
        val.save()
    assert val.failures == ["a other: RuntimeError: PoolExhausted: no free request row",
                            "b@8 base: RuntimeError: PoolExhausted: no free request row"]
    assert len(engines) == 3  # a, then b's group twice: rebuilt after b@8 failed
    with open(tmp_path / "validate.csv") as f:
        cells = {(r["cell"], r["arm"]) for r in csv.DictReader(f)}
    assert cells == {("a", "base"), ("b@16", "base")}
    with tarfile.open(tmp_path / "results.tar.gz") as tar:
        names = {n.split("/")[1] for n in tar.getnames() if n.count("/") >= 1}
    assert names == {"a-base-measured", "a-base-predicted", "b-rate16-measured", "b-rate16-predicted"}
    text = (tmp_path / "checks.md").read_text()
    assert "## Runs that failed" in text and "b@8 base: RuntimeError" in text


def test_the_deadline_skips_runs_and_keeps_what_was_measured(tmp_path):
    def measure(job, eng):
        return SimEngine(job.scenario, tiny_profile()).run(), eng

    val = gv.Validation(tmp_path, measure, lambda job, seed: SimEngine(job.scenario, tiny_profile()).run(),
                        deadline_s=0.0)
    val.run(_jobs())
    val.save()
    assert val.skipped == ["a base", "a other", "b@8 base", "b@16 base"] and not val.rows
    assert "## Runs not started (deadline)" in (tmp_path / "checks.md").read_text()
    assert (tmp_path / "results.tar.gz").exists() and (tmp_path / "validate.csv").exists()


def test_the_summary_counts_the_target_figures_within_5_percent():
    rows = [{"cell": "c", "arm": "base", "metric": m, "predicted": 1.0, "measured": 1.0, "error_pct": e}
            for m, e in zip(gv.TARGETS, [1.0, -5.0, 5.01, float("nan"), -20.0], strict=True)]
    rows.append({"cell": "c", "arm": "base", "metric": "max_ttft_ms", "predicted": 1, "measured": 1, "error_pct": 0.0})
    text = gv.summary_text(rows, ["--out", "x y"], {"profile": 120.0, "total": 560.0}, ["c other: E"], ["d base"])
    assert "Within 5 %: **2 of 4** figures" in text            # nan not counted; max_ttft not a target
    assert "median_tpot_ms 0/1" in text and "p90_ttft_ms 1/1" in text
    assert "--out 'x y'" in text and "profile 120 s, total 560 s" in text
    assert "| c | base | **+1.0 %** | **-5.0 %** | +5.0 % |" in text
    assert "Failed: c other: E" in text and "Not started (deadline): d base" in text


def test_one_call_writes_the_round_into_one_folder(tmp_path, capsys):
    """With a profile given and no cells (the quickest round), the call still writes the
    summary, the environment and its own log into --out, and gives stdout back."""
    import yaml

    prof = tmp_path / "p.yaml"
    prof.write_text(yaml.safe_dump(tiny_profile().model_dump(mode="json", exclude_none=True)))
    out = tmp_path / "round"
    assert gv.main(["--out", str(out), "--profile", str(prof), "--cells", "none", "--device", "cpu"]) == 0
    for name in ("summary.md", "environment.txt", "gpu_validate.log", "validate.csv", "checks.md", "results.tar.gz"):
        assert (out / name).is_file(), name
    assert "Within 5 %: **0 of 0**" in (out / "summary.md").read_text()
    assert "Within 5 %" in (out / "gpu_validate.log").read_text()
    assert not isinstance(sys.stdout, gv._Tee)


def test_the_summary_counts_the_cells_never_measured_before_apart():
    """The out-of-sample figure: the new cells' count within 5 % beside the other cells'."""
    def rows(cell, errs):
        return [{"cell": cell, "arm": "base", "metric": m, "predicted": 1.0, "measured": 1.0, "error_pct": e}
                for m, e in zip(gv.TARGETS, errs, strict=True)]
    old = rows("batch8", [1.0, 1.0, 1.0, 1.0, 9.0])
    new = rows("queue-chunked", [1.0, 7.0, 7.0, 1.0, 1.0]) + rows("poisson-spec@32", [9.0] * 5)
    text = gv.summary_text(old + new, [], {}, [], [])
    assert ("First measured in round 18 (queue-chunked, poisson-spec@32): **3 of 10** within 5 %; "
            "the other cells: **4 of 5**") in text
    assert "First measured" not in gv.summary_text(old, [], {}, [], [])
    cond = [{**r, "speed_factor": 1.0} for r in old + new]
    assert text.count("First measured in round 18") == 1
    assert gv.summary_text(old + new, [], {}, [], [], cond).count("**3 of 10** within 5 %") == 2
    # a later round's new cells are counted apart from everything measured before them
    r19 = rows("small-chunk", [1.0, 1.0, 9.0, 9.0, 9.0])
    assert ("First measured in round 19 (small-chunk): **2 of 5** within 5 %; the other cells: **7 of 15**"
            in gv.summary_text(old + new + r19, [], {}, [], []))


def test_an_arm_that_resizes_the_model_gets_a_fresh_engine():
    """A window sweep's arms: set_scenario refuses another window (round 20 lost two arms of
    window-sweep to it), so the engine is rebuilt; an arm that only changes the rate reuses it."""
    class Fake:
        def __init__(self, sc):
            self.sc, self.set = sc, 0

        def accepts(self, sc):
            return sc.server.spec_window == self.sc.server.spec_window

        def set_scenario(self, sc):
            self.sc, self.set = sc, self.set + 1

    w4 = make_scenario()
    w6 = make_scenario({"speculative_num_draft_tokens": 6})
    first = gv.engine_for(gv.Job("s", "base", w4, "s", "s-base"), None, Fake)
    again = gv.engine_for(gv.Job("s", "rate", w4, "s", "s-rate"), first, Fake)
    assert again is first and first.set == 1
    other = gv.engine_for(gv.Job("s", "w6", w6, "s", "s-w6"), first, Fake)
    assert other is not first and other.sc is w6 and other.set == 0



def test_an_engine_that_cannot_take_the_next_arm_is_gone_before_the_next_is_built(tmp_path):
    """A window sweep's arms: the old engine's device memory must be free when the next
    engine is built (its constructor sizes the pool against the free memory,
    runtime/memory.py check_fits). engine_for's own ``del`` drops one name only: the
    group loop, ``_one`` and ``measure`` still held the old engine, so nothing was freed."""
    import gc
    import weakref

    alive_at_build: list[bool] = []
    last: list[weakref.ref] = []

    class Fake:
        def __init__(self, sc):
            alive_at_build.append(bool(last) and last[-1]() is not None)
            self.sc = sc
            last.append(weakref.ref(self))

        def accepts(self, sc):
            return sc.server.spec_window == self.sc.server.spec_window

        def set_scenario(self, sc):
            self.sc = sc

    def measure(job, eng):
        eng = gv.engine_for(job, eng, Fake)
        gc.collect()
        return SimEngine(SC, tiny_profile()).run(), eng

    w4 = make_scenario()
    w6 = make_scenario({"speculative_num_draft_tokens": 6})
    val = gv.Validation(tmp_path, measure, lambda job, seed: SimEngine(SC, tiny_profile()).run())
    val.run([gv.Job("s", "base", w4, "s", "s-base"), gv.Job("s", "rate", w4, "s", "s-rate"),
             gv.Job("s", "w6", w6, "s", "s-w6")])
    assert not val.failures
    assert alive_at_build == [False, False]  # two engines built: the w6 arm's after the first was freed


def test_an_engine_does_not_take_an_arm_with_another_kv_pool():
    """runtime/engine.py sizes the device KV pool from max_total_num_tokens (it holds what the
    scheduler's ledger holds); an arm with a larger pool reusing the engine would hand out
    slots the device pool does not have, a smaller one would measure another pool. Both need
    a fresh engine, as a window does."""
    from types import SimpleNamespace

    from specsched.runtime.engine import RuntimeEngine, served_for

    base = make_scenario({"max_total_num_tokens": 20_000})
    held = SimpleNamespace(scenario=base, seed=base.seed, specs=served_for(base, base.seed)[0])
    assert RuntimeEngine.accepts(held, make_scenario({"max_total_num_tokens": 20_000}))
    assert not RuntimeEngine.accepts(held, make_scenario({"max_total_num_tokens": 40_000}))
    assert not RuntimeEngine.accepts(held, make_scenario({"max_total_num_tokens": 10_000}))


def test_forwards_above_the_profiles_step_grid_are_named():
    """Round 28's poisson-nospec base decoded at batch 64 on a profile whose gpu.decode grid
    stopped at 32: those forwards were priced by extrapolation (6 % below what they ran) and
    its TTFT came out 29-32 % low, with nothing in checks.md to say why. The run is named,
    with how many forwards and how far; a run within the grid, or of another grid, is not."""
    import pandas as pd

    steps = pd.DataFrame({"mode": ["extend", "decode", "decode", "decode", "verify"],
                          "batch_size": [1, 16, 40, 64, 64]})
    line = gv.grid_reach_line("poisson-nospec base", steps, {"decode": 32.0, "verify": 64.0})
    assert line is not None and line.startswith("- poisson-nospec base: ")
    assert "2 of 3 decode forwards at batch 40..64" in line and "1..32" in line and "max_bs >= 64" in line
    assert "verify" not in line
    assert gv.grid_reach_line("x base", steps, {"decode": 64.0, "verify": 64.0}) is None
    assert gv.grid_reach_line("x base", steps, {}) is None


def test_checks_md_lists_the_runs_above_the_grid(tmp_path):
    def measure(job, eng):
        return SimEngine(job.scenario, tiny_profile()).run(), object()

    val = gv.Validation(tmp_path, measure, lambda job, seed: SimEngine(job.scenario, tiny_profile()).run(),
                        grid_x={"decode": 1.0})
    val.run(_jobs()[:1])
    text = (tmp_path / "checks.md").read_text()
    assert "## Forwards above the profile's step grid" in text and "- a base: " in text


def test_each_measured_figure_carries_its_sampling_interval_and_the_summary_names_misses_within_it(tmp_path):
    """validate.csv gives each TTFT/TPOT figure of a run of enough requests its measured 95 %
    interval (analysis/measured_noise.py); the summary names the misses outside 5 % that lie
    inside their interval (round 49's p90 TTFT: -15 % and -6 % in two runs of one arm, the
    interval [58.7, 90.6] ms around a measured 69.1)."""
    sc = make_scenario({"speculative_algorithm": "none", "speculative_num_draft_tokens": 1},
                       {"kind": "poisson", "num_requests": 60, "request_rate": 40.0,
                        "input_len": {"kind": "uniform", "value": 400, "range_ratio": 0.5},
                        "output_len": {"kind": "uniform", "value": 30, "range_ratio": 0.5}})
    # the "measurement" another seed of the same simulation: every difference is sampling noise
    val = gv.Validation(tmp_path, lambda job, eng: (SimEngine(job.scenario, tiny_profile(), seed=11).run(), eng),
                        lambda job, seed: SimEngine(job.scenario, tiny_profile(), seed=3).run())
    val.run([gv.Job("n", "base", sc, "n", "n-base")])
    val.save()
    with open(tmp_path / "validate.csv") as f:
        rows = {r["metric"]: r for r in csv.DictReader(f)}
    lo, hi = float(rows["median_ttft_ms"]["measured_ci_low"]), float(rows["median_ttft_ms"]["measured_ci_high"])
    assert lo <= float(rows["median_ttft_ms"]["measured"]) <= hi
    assert rows["median_itl_ms"]["measured_ci_low"] == ""
    fake = [dict(val.rows[0], metric="p90_ttft_ms", predicted=79.2, measured=69.1, error_pct=14.6,
                 measured_ci_low=58.7, measured_ci_high=90.6),
            dict(val.rows[0], metric="median_ttft_ms", predicted=50.0, measured=43.5, error_pct=14.9,
                 measured_ci_low=42.6, measured_ci_high=44.7)]
    line = gv.noise_line(fake)
    assert "**1 of 2**" in line and "p90_ttft_ms +14.6 %" in line and "median_ttft_ms" not in line
    assert line in gv.summary_text(fake, [], {}, [], [])


def test_the_profiles_grid_is_the_users_and_a_device_out_of_memory_is_one_line(tmp_path, capsys, monkeypatch):
    """On an H100 the default grid's KV pool (128 rows of 8K tokens for preset 8b) does not fit:
    the call ended in a torch traceback after start-up. The grid flags reach the profiler, and
    a device out of memory is one line naming the flags to lower, exit 2."""
    import torch
    from specsched.runtime import profiler

    seen = {}

    def oom(**kw):
        seen.update(kw)
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 67.00 GiB.")

    monkeypatch.setattr(profiler, "profile_device", oom)
    argv = ["--out", str(tmp_path / "r"), "--preset", "8b", "--max-bs", "64", "--contexts", "512,4096",
            "--extend-tokens", "256,2048", "--cells", "none"]
    assert gv.main(argv) == 2
    assert seen["contexts"] == [512, 4096] and seen["extend_tokens"] == [256, 2048] and seen["max_bs"] == 64
    assert seen["extend_prefixes"] == [0, 1024, 2048, 4096, 8192]
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and "ran out of memory" in err[0] and "--contexts (now 4096)" in err[0], err
