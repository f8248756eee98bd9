"""The runtime executes the simulator's scheduler and loop on CPU (tiny model): same plans,
same committed tokens, the sync points each mode issues, results in the simulator's format."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from specsched.runtime.cli_commands import validation_table  # noqa: E402
from specsched.runtime.engine import RuntimeEngine  # noqa: E402
from specsched.sim.engine import SimEngine  # noqa: E402

from tests.conftest import make_scenario, tiny_profile  # noqa: E402

BURST = {"kind": "burst", "num_requests": 5, "input_len": {"kind": "uniform", "value": 48, "range_ratio": 0.5},
         "output_len": {"kind": "uniform", "value": 24, "range_ratio": 0.5}}
SERVER = {"max_running_requests": 4, "chunked_prefill_size": 64, "max_prefill_tokens": 96,
          "speculative_num_draft_tokens": 4, "max_total_num_tokens": 5000}


# the engine and the burst equivalence run with the HIP code paths too (cpu-as-hip), and on a
# GPU where one is present (cuda, cuda-as-hip)
DEVICES = ["cpu", "cpu-as-hip"] + (["cuda", "cuda-as-hip"] if torch.cuda.is_available() else [])


def runtime(server=None, workload=None, device="cpu"):
    sc = make_scenario({**SERVER, **(server or {})}, {**BURST, **(workload or {})}, {"mean_accept_length": 2.2})
    return sc, RuntimeEngine(sc, preset="tiny", device=device, warmup=False)


@pytest.mark.parametrize("device", DEVICES)
def test_same_plans_and_tokens_as_the_simulator(device):
    sc, eng = runtime(device=device)
    measured = eng.run()
    simulated = SimEngine(sc, tiny_profile(ingest_per_request_s=0.0)).run()
    cols = ["mode", "part", "batch_size", "num_extend_tokens", "accepted_tokens", "decoding_reqs"]
    # a burst reaches both at t = 0 with no ingest delay: the decisions do not depend on time
    assert measured.steps[cols].reset_index(drop=True).equals(simulated.steps[cols].reset_index(drop=True))
    a = measured.chunks.groupby("rid")["n_tokens"].apply(list)
    b = simulated.chunks.groupby("rid")["n_tokens"].apply(list)
    assert a.equals(b)
    assert list(measured.requests.columns) == list(simulated.requests.columns)
    assert list(measured.steps.columns) == list(simulated.steps.columns)
    assert measured.summary["completed"] == 5 and measured.summary["source"].startswith(f"runtime:{device}")
    assert measured.summary["backend"] in (device, device.removesuffix("-as-hip") + "-as-hip")
    # event records per step are counted (each is a barrier packet on HIP): on a GPU one done
    # event + one copy-done + one timing start + the pinned staging copies, no end mark
    assert measured.summary["event_records_per_step"] > 0
    assert "sdpa_ran" in measured.summary["environment"]
    assert (measured.requests["ttft_s"] <= measured.requests["e2e_s"]).all()
    s = measured.steps
    assert (s["gpu_end_s"] >= s["gpu_start_s"]).all() and s["gpu_start_s"].is_monotonic_increasing


@pytest.mark.parametrize("device", DEVICES)
def test_host_block_mode_blocks_on_publish_and_slot_expansion(device):
    _, eng = runtime({"sync_mode": "host_block", "prefill_slot_expansion_sync": True}, device=device)
    res = eng.run()
    syncs = res.summary["host_syncs"]
    verify_launches = int(((res.steps["mode"] == "verify") & (res.steps["part"] == "main")).sum())
    prefill_launches = int(((res.steps["part"] == "main") & (res.steps["num_extend_tokens"] > 0)).sum())
    assert syncs.get("publish", 0) >= verify_launches - 1 > 0
    assert syncs.get("slot_expansion", 0) == 2 * prefill_launches  # two repeat_interleave calls each


def test_stream_wait_and_output_size_remove_those_syncs():
    _, eng = runtime({"sync_mode": "stream_wait", "prefill_slot_expansion_sync": False})
    res = eng.run()
    syncs = res.summary["host_syncs"]
    assert syncs.get("publish", 0) == 0 and syncs.get("slot_expansion", 0) == 0
    assert syncs.get("results", 0) > 0  # results are still waited for (copy_done)


@pytest.mark.parametrize("device", DEVICES)
def test_cross_queue_wait_queues_on_the_schedule_stream(device):
    _, eng = runtime({"sync_mode": "cross_queue_wait"}, device=device)
    res = eng.run()
    assert res.summary["host_syncs"].get("publish", 0) == 0
    assert res.summary["queued_waits"].get("schedule", 0) > 0
    # the barrier is measured on purpose in this arm, and labelled so (refused on HIP otherwise)
    assert res.summary["schedule_barrier"].startswith("measured on purpose")
    _, eng = runtime({"sync_mode": "stream_wait"}, device=device)
    assert eng.run().summary["schedule_barrier"] == "none"


def test_measure_refuses_serializing_variables(monkeypatch, tmp_path, capsys):
    from specsched.cli import main

    sc = tmp_path / "s.yaml"
    sc.write_text("name: t\nprofile: h200-1b\nworkload: {kind: burst, num_requests: 1, input_len: {kind: fixed, "
                  "value: 8}, output_len: {kind: fixed, value: 4}}\n")
    monkeypatch.setenv("AMD_SERIALIZE_KERNEL", "3")
    out = tmp_path / "out"
    assert main(["measure", str(sc), "--device", "cpu", "--preset", "tiny", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "AMD_SERIALIZE_KERNEL" in err[0] and "--allow-serializing" in err[0]
    assert not out.exists()
    assert main(["measure", str(sc), "--device", "cpu", "--preset", "tiny", "--out", str(out),
                 "--allow-serializing"]) == 0
    assert out.exists()


def test_measure_refuses_a_pool_that_cannot_fit_with_the_estimate(tmp_path, capsys):
    from specsched.cli import main

    sc = tmp_path / "s.yaml"
    sc.write_text("name: t\nprofile: h200-1b\nserver: {max_total_num_tokens: 100000000000, max_running_requests: 4}\n"
                  "workload: {kind: burst, num_requests: 4, input_len: {kind: fixed, value: 1000000}, "
                  "output_len: {kind: fixed, value: 4}}\n")
    assert main(["measure", str(sc), "--device", "cpu", "--preset", "8b", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "preset 8b" in err[0] and "GiB" in err[0] and "KV pool" in err[0]
    assert not (tmp_path / "o").exists()


def test_closed_loop_and_poisson_run_to_completion():
    for wl in ({"kind": "closed_loop", "concurrency": 2, "num_requests": 4},
               {"kind": "poisson", "request_rate": 200.0, "max_concurrency": 2, "num_requests": 4}):
        _, eng = runtime(workload=wl)
        res = eng.run()
        assert res.summary["completed"] == 4
        assert (res.requests["output_len"] == res.chunks.groupby("rid")["n_tokens"].sum().sort_index().to_numpy()).all()


def test_validation_table_errors():
    rows = validation_table({"mean_ttft_ms": 110.0, "output_throughput": 90.0}, {"mean_ttft_ms": 100.0, "output_throughput": 100.0},
                            ("mean_ttft_ms", "output_throughput", "median_itl_ms"))
    assert rows[0]["error_pct"] == pytest.approx(10.0) and rows[1]["error_pct"] == pytest.approx(-10.0)
    assert rows[2]["error_pct"] != rows[2]["error_pct"]  # NaN when missing



def test_request_timer_starts_when_the_client_sends():
    """bench_serving starts a request's timer when its client sends it: an open-loop
    request at its arrival time, a closed-loop one when the slot it takes freed (the
    finishing request's last delivery), never later when the loop happens to poll."""
    from specsched.sim.workload import arrival_times
    wl = {"kind": "poisson", "request_rate": 400.0, "num_requests": 6}
    sc, eng = runtime(workload=wl)
    res = eng.run()
    sent = arrival_times(sc.workload, eng.specs, eng.seed)
    req = res.requests.sort_values("rid")
    assert req.start_s.to_numpy() == pytest.approx(sent[req.rid.to_numpy()], abs=1e-12)
    _, eng = runtime(workload={"kind": "closed_loop", "concurrency": 2, "num_requests": 5})
    req = eng.run().requests.sort_values("start_s")
    finishes = sorted(req.finish_s)
    # the 3rd..5th requests take the slots freed by the 1st..3rd finishes
    assert req.start_s.to_numpy()[2:] == pytest.approx(finishes[:3], abs=1e-12)


def test_request_rows_follow_the_scheduler_no_more_than_max_running_requests():
    """The 48 req/s Poisson run crashed the runtime (``PoolExhausted: no free request row``):
    requests that finished together kept their rows until after the next prefill took new
    ones. SGLang frees a finished request's row when its result is processed
    (``process_batch_result`` -> ``release_kv_cache``) and admits no more requests than free
    rows (``Scheduler.get_num_allocatable_reqs``), so rows in use never exceed
    max_running_requests, and neither may the runtime's."""
    wl = {"kind": "burst", "num_requests": 12, "input_len": {"kind": "fixed", "value": 24},
          "output_len": {"kind": "fixed", "value": 6}}
    sc, eng = runtime({"speculative_algorithm": "none", "speculative_num_draft_tokens": 1}, wl)
    pool, alloc, peak = eng.runner.pool, eng.runner.pool.alloc_row, [0]
    rows = eng.runner.pool.num_free_rows

    def counted():
        row = alloc()
        peak[0] = max(peak[0], rows - pool.num_free_rows)
        return row

    pool.alloc_row = counted
    res = eng.run()
    assert res.summary["completed"] == 12
    assert 0 < peak[0] <= sc.server.max_running_requests
    assert res.summary["request_rows_peak"] == peak[0]
    assert pool.num_free_rows == rows - len(eng.rows)


def test_measure_without_out_names_its_overrides(monkeypatch, tmp_path):
    """``measure --set`` without --out writes results/<scenario>/<arm>-seed<N>+<overrides>-measured,
    so a sweep over a key keeps every run (as ``specsched run`` does)."""
    from specsched.cli import main

    sc = tmp_path / "s.yaml"
    sc.write_text("name: t\nprofile: h200-1b\nworkload: {kind: burst, num_requests: 1, input_len: {kind: fixed, "
                  "value: 8}, output_len: {kind: fixed, value: 3}}\n")
    monkeypatch.chdir(tmp_path)
    for n in (1, 2):
        assert main(["measure", str(sc), "--device", "cpu", "--preset", "tiny", "--set", f"workload.num_requests={n}"]) == 0
    assert main(["measure", str(sc), "--device", "cpu", "--preset", "tiny"]) == 0
    names = sorted(p.name for p in (tmp_path / "results" / "t").iterdir())
    assert names == ["base-seed1+workload.num_requests=1-measured", "base-seed1+workload.num_requests=2-measured",
                     "base-seed1-measured"]


def test_no_accept_draw_is_made_inside_a_launch_call(monkeypatch):
    # a request's first draw (generator and block) inside its first verify's launch call was
    # host time of the proxy that SGLang's forced acceptance does not spend
    from specsched.sim.acceptance import AcceptanceModel

    sc, eng = runtime()
    inside, made = [], []
    real_launch, real_ensure = RuntimeEngine._launch_call, AcceptanceModel._ensure

    def launch(self, op):
        inside.append(op)
        try:
            return real_launch(self, op)
        finally:
            inside.pop()

    def ensure(self, rid, n):
        if inside:
            made.append(rid)
        return real_ensure(self, rid, n)

    monkeypatch.setattr(RuntimeEngine, "_launch_call", launch)
    monkeypatch.setattr(AcceptanceModel, "_ensure", ensure)
    measured = eng.run()
    assert (measured.steps["mode"] == "verify").any()
    assert made == []


# ------------------------------------------------------------------ the CLI's checks (measure, validate)
def _small_yaml(tmp_path, server: str = "") -> str:
    sc = tmp_path / "s.yaml"
    sc.write_text("name: t\nprofile: h200-1b\nacceptance: {mean_accept_length: 2.0}\n"
                  "server: {max_running_requests: 2" + server + "}\n"
                  "workload: {kind: burst, num_requests: 2, input_len: {kind: fixed, value: 8}, "
                  "output_len: {kind: fixed, value: 3}}\n")
    return str(sc)


@pytest.mark.parametrize("command", ["measure", "validate"])
@pytest.mark.parametrize("sets, key, value", [
    (["server.enable_dp_attention=true", "server.dp_size=2"], "server.dp_size", "2"),
])
def test_simulated_only_features_are_refused_in_one_line(tmp_path, capsys, command, sets, key, value):
    """docs/runtime.md "Simulated only": DP attention over 2 ranks was measured as one rank
    against a 2-rank prediction. It is refused before any work: one line naming the file,
    key and value, exit 2, nothing written."""
    from specsched.cli import main

    sc = _small_yaml(tmp_path)
    extra = ["--profile", "h200-1b"] if command == "validate" else []
    args = [command, sc, "--device", "cpu", "--preset", "tiny", "--out", str(tmp_path / "o"), *extra]
    for s in sets:
        args += ["--set", s]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"specsched: error: {sc}") and f": {key} = {value}: " in err[0], err
    assert "simulated only" in err[0]
    assert not (tmp_path / "o").exists()


def test_a_pool_smaller_than_the_warm_up_request_measures(tmp_path, capsys):
    """The warm-up request was a fixed 64 + 4 x window tokens: a pool of 40 that holds every
    request of the scenario crashed the warm-up (PoolExhausted traceback). It is sized
    within the pool now; a request the pool can never hold is refused up front in one line,
    as ``specsched run`` refuses it (sim.limits.check_pool)."""
    from specsched.cli import main

    sc = _small_yaml(tmp_path, ", speculative_algorithm: none, max_total_num_tokens: 40")
    assert main(["measure", sc, "--device", "cpu", "--preset", "tiny", "-q", "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "summary.json").is_file()
    capsys.readouterr()
    assert main(["measure", sc, "--device", "cpu", "--preset", "tiny", "-q", "--out", str(tmp_path / "p"),
                 "--set", "server.max_total_num_tokens=10"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "workload.input_len = 8" in err[0] and "max_total_num_tokens is 10" in err[0], err
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("command", ["measure", "validate"])
@pytest.mark.parametrize("target", ["file", "folder"])
def test_an_unwritable_out_is_refused_before_measuring(tmp_path, capsys, monkeypatch, command, target):
    """docs/results.md: an --out naming a file, or a folder with other content, is refused
    before the run; measure and validate refused it only after the whole measurement."""
    from specsched.cli import main

    def no_run(self, *a, **k):
        raise AssertionError("measured before refusing the --out")

    monkeypatch.setattr(RuntimeEngine, "__init__", no_run)
    out = tmp_path / "o"
    if target == "file":
        out.write_text("x")
    else:   # measure: a folder with other content; validate: its results dir inside is one
        d = out if command == "measure" else out / "t-base-measured"
        d.mkdir(parents=True)
        (d / "notes.txt").write_text("x")
    extra = ["--profile", "h200-1b"] if command == "validate" else []
    assert main([command, _small_yaml(tmp_path), "--device", "cpu", "--preset", "tiny", "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("specsched: error: cannot write"), err


@pytest.mark.parametrize("command", ["measure", "validate"])
def test_ctrl_c_says_nothing_was_written(tmp_path, capsys, monkeypatch, command):
    from specsched.cli import main

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(RuntimeEngine, "run", interrupted)
    out = tmp_path / "o"
    extra = ["--profile", "h200-1b"] if command == "validate" else []
    assert main([command, _small_yaml(tmp_path), "--device", "cpu", "--preset", "tiny", "--out", str(out), *extra]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    what = "measurement" if command == "measure" else "validation"
    assert err == [f"specsched: interrupted: {what} stopped, nothing written"]
    assert not out.exists()


def test_validate_says_where_results_went_and_warns_of_another_devices_profile(tmp_path, capsys, monkeypatch):
    """Without --out validate wrote nothing and said nothing; a profile of another device
    kind (h200-1b: cuda) and preset (1b) was taken silently for a cpu run of tiny."""
    from specsched.cli import main

    monkeypatch.chdir(tmp_path)
    sc = _small_yaml(tmp_path)
    assert main(["validate", sc, "--device", "cpu", "--preset", "tiny", "--profile", "h200-1b", "-q"]) == 0
    cap = capsys.readouterr()
    assert "nothing written: give --out DIR" in cap.out
    warn = [line for line in cap.err.splitlines() if line.startswith("warning: profile h200-1b was made on")]
    assert len(warn) == 1 and "cuda:NVIDIA H200" in warn[0] and "preset 1b" in warn[0] and "preset tiny" in warn[0]
    assert "device kind and preset" in warn[0]
    assert not (tmp_path / "results").exists()
    assert main(["validate", sc, "--device", "cpu", "--preset", "tiny", "--profile", "h200-1b", "-q",
                 "--out", "v"]) == 0
    assert f"results in {Path('v') / 't-base-measured'}/" in capsys.readouterr().out
    assert (tmp_path / "v" / "validate.csv").is_file()


def test_profile_facts_read_device_kind_preset_and_threads():
    from types import SimpleNamespace

    from specsched.runtime.cli_commands import profile_facts
    from specsched.sim.profile import load_profile

    assert profile_facts(load_profile("h200-1b")) == ("gpu", "1b", 16)
    cpu = SimpleNamespace(device="cpu (torch 2.13.0+cpu)", name="c",
                          provenance={"method": "profile_device(preset='tiny', ...)", "environment": "a; torch_threads: 2; b"})
    assert profile_facts(cpu) == ("cpu", "tiny", 2)
    assert profile_facts(load_profile("h200-llama8b-roofline"))[0] == "gpu"
    assert profile_facts(SimpleNamespace(device="synthetic", provenance={}))[0] is None


def test_validate_messages_say_what_is_missing(tmp_path, capsys):
    """``--profile`` missing said only what a profile is, not that one is required; a
    metric neither run has (verify cycles without speculation) printed a ``nan nan n/a`` row."""
    from specsched.runtime.cli_commands import format_validation

    from specsched.cli import main

    assert main(["validate", _small_yaml(tmp_path), "--device", "cpu", "--preset", "tiny"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--profile = '<missing>': required" in err[0], err
    text = format_validation(validation_table({"mean_ttft_ms": 1.0, "verify_cycles_per_s": float("nan")},
                                              {"mean_ttft_ms": 1.1, "verify_cycles_per_s": None}), "t")
    assert "mean_ttft_ms" in text and "verify_cycles_per_s" not in text and "nan" not in text


def test_a_chain_drafter_is_measured(tmp_path, capsys):
    """EAGLE and MTP with topk 1 run in the runtime as chain drafters (runtime/spec_cycle.py):
    they were refused as simulated only before."""
    import json

    from specsched.cli import main

    sc = _small_yaml(tmp_path)
    out = tmp_path / "tree"   # an EAGLE draft tree (topk > 1), simulated only before too
    assert main(["measure", sc, "--device", "cpu", "--preset", "tiny", "-q", "--out", str(out),
                 "--set", "server.speculative_algorithm=eagle", "--set", "server.speculative_num_steps=2",
                 "--set", "server.speculative_eagle_topk=2", "--set", "server.speculative_num_draft_tokens=4"]) == 0
    assert json.loads((out / "summary.json").read_text())["total_output_tokens"] == 6
    for algo in ("eagle", "mtp"):
        out = tmp_path / algo
        assert main(["measure", sc, "--device", "cpu", "--preset", "tiny", "-q", "--out", str(out),
                     "--set", f"server.speculative_algorithm={algo}", "--set", "server.speculative_num_steps=2",
                     "--set", "server.speculative_eagle_topk=1", "--set", "server.speculative_num_draft_tokens=3"]) == 0
        summary = json.loads((out / "summary.json").read_text())
        assert summary["completed"] == 2 and summary["total_output_tokens"] == 6


def test_validate_on_a_device_gives_the_measured_figures_sampling_intervals(tmp_path, capsys, monkeypatch):
    """``specsched validate CELL --device cpu``: under the table, each TTFT/TPOT figure's 95 %
    interval over the measured run's requests, marked where it holds the prediction (a miss
    inside is within what a rerun could measure: analysis/measured_noise.py)."""
    from specsched.cli import main

    monkeypatch.chdir(tmp_path)
    sc = tmp_path / "s.yaml"
    sc.write_text("name: t\nprofile: h200-1b\nacceptance: {mean_accept_length: 2.0}\nserver: {max_running_requests: 4}\n"
                  "workload: {kind: burst, num_requests: 12, input_len: {kind: fixed, value: 8}, "
                  "output_len: {kind: fixed, value: 3}}\n")
    assert main(["validate", str(sc), "--device", "cpu", "--preset", "tiny", "--profile", "h200-1b", "-q"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("note: measured 95 % intervals"))
    assert "median_ttft_ms " in line and "median_itl_ms" not in line
