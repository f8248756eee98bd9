"""``calibrate --from server.log`` without bench_serving runs: the decode factor fitted to the
log's pure-decode lines (analysis/calibrate_log.py); what the log cannot determine refused."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from specsched.analysis.calibrate_bench import decode_step_seconds, scale_profile
from specsched.sim.config import load_scenario, with_value
from specsched.sim.engine import run_scenario
from specsched.sim.profile import load_profile

from specsched.cli import main
from tests.conftest import ROOT, make_scenario

DECODE_LOG_INTERVAL = 40   # SGLang 0.5.23 server_args.py decode_log_interval's default


def _stamp(t: float) -> str:
    ms = int(round(t * 1000))
    s, ms = divmod(ms, 1000)
    m, s = divmod(s, 60)
    return f"2026-03-02 {8 + m // 60:02d}:{m % 60:02d}:{s:02d}.{ms:03d}"


def sglang_log_lines(result, offset_s: float = 0.0, pool: int = 200_000) -> list[str]:
    """The SGLang 0.5.23 batch lines a simulated run's server would have logged
    (managers/scheduler_components/metrics_reporter.py): a ``Prefill batch`` line per extend,
    a ``Decode batch`` line every :data:`DECODE_LOG_INTERVAL` decode/verify forwards with the
    batch at the last of them, the KV in use, the window's tokens over its wall time (since
    the previous decode line, ``last_decode_stats_tic``) and, verifying, the accepted tokens
    per request and forward (``spec_num_accepted_tokens / spec_num_forward_ct``)."""
    steps, ts = result.steps, result.timeseries
    steps = steps[steps["part"] == "main"]
    t_ts = ts["time_s"].to_numpy()
    out, n_dec, tokens, reqs, tic = [], 0, 0, 0, offset_s
    for s in steps.itertuples():
        row = ts.iloc[max(int(np.searchsorted(t_ts, s.gpu_end_s, side="right")) - 1, 0)]
        kv, running, waiting = int(row.kv_used_tokens), int(row.running), int(row.waiting)
        end = offset_s + s.gpu_end_s
        if s.mode == "extend":
            out.append(f"[{_stamp(end)} TP0] Prefill batch, #new-seq: {s.batch_size}, #new-token: {s.num_extend_tokens}, "
                       f"#cached-token: 0, token usage: {kv / pool:.2f}, #running-req: {running}, #queue-req: {waiting}, "
                       "#pending-token: 0, cuda graph: False, input throughput (token/s): 0.00")
            continue
        n_dec, tokens, reqs = n_dec + 1, tokens + s.accepted_tokens, reqs + s.batch_size
        if n_dec % DECODE_LOG_INTERVAL:
            continue
        spec = f"accept len: {tokens / reqs:.2f}, accept rate: 0.50, " if s.mode == "verify" else ""
        out.append(f"[{_stamp(end)} TP0] Decode batch, #running-req: {s.batch_size}, #token: {kv}, token usage: "
                   f"{kv / pool:.2f}, {spec}cuda graph: True, gen throughput (token/s): {tokens / (end - tic):.2f}, "
                   f"#queue-req: {waiting}")
        tic, tokens, reqs = end, 0, 0
    return out


def _simulated_log(tmp_path, spec: bool, factor: float):
    """A log of closed loops at 2, 8 and 32 clients on h200-1b with ``decode`` x ``factor``,
    and the scenario (the template) they ran."""
    srv = {} if spec else {"speculative_algorithm": "none", "speculative_num_draft_tokens": None}
    sc = make_scenario(server=srv, workload={"kind": "closed_loop", "num_requests": 16, "concurrency": 8,
                                             "input_len": {"kind": "fixed", "value": 1000},
                                             "output_len": {"kind": "fixed", "value": 400}})
    data = sc.model_dump(mode="json", exclude={"path"})
    data["profile"] = "h200-1b"
    tpl = tmp_path / "tpl.yaml"
    tpl.write_text(yaml.safe_dump(data))
    truth = scale_profile(load_profile("h200-1b"), {"decode": factor})
    lines, off = [], 0.0
    for conc in (2, 8, 32):
        s = with_value(with_value(load_scenario(tpl), "workload.concurrency", conc), "workload.num_requests", 2 * conc)
        res = run_scenario(s, profile=truth)
        lines += sglang_log_lines(res, off)
        off += float(res.steps["gpu_end_s"].max()) + 1.0
    log = tmp_path / "server.log"
    log.write_text("\n".join(lines) + "\n")
    return log, tpl


@pytest.mark.parametrize(("spec", "factor"), [(False, 0.88), (True, 1.1)])
def test_a_log_alone_recovers_the_decode_factor_it_was_simulated_with(tmp_path, capsys, monkeypatch, spec, factor):
    """A log written from simulated runs with decode x``factor`` (plain decode steps, and
    DSpark's verify steps at their logged accept length): ``calibrate --from server.log``
    fits the decode factor back within 3 %, reports each batch band's error before and after,
    says what it left at the profile's values, and names the log in the provenance. It was
    refused ("SGLang server logs alone")."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "300")   # the fit table one line a row
    log, tpl = _simulated_log(tmp_path, spec, factor)
    assert main(["calibrate", "--from", str(log), "--profile", "h200-1b", "--scenario-template", str(tpl),
                 "--out", "fitted.yaml"]) == 0
    out = capsys.readouterr().out
    prof = yaml.safe_load((tmp_path / "fitted.yaml").read_text())
    prov = prof["provenance"]["calibrate.from_logs"]
    fitted = float(prov.split("decode x")[1].split()[0])
    assert fitted == pytest.approx(factor, rel=0.03), out
    assert "server.log" in prov and "alone" in prov and "prefill" in prov and "host" in prov
    assert "not fitted: prefill, host, idle_lead" in out
    metric = "verify_step_ms" if spec else "decode_step_ms"
    rows = [line for line in out.splitlines() if line.startswith("server.log #running-req")]
    assert len(rows) >= 2 and all(metric in r for r in rows)
    assert all(abs(float(r.split("%")[1].split()[-1])) < 3 for r in rows), rows   # the error after
    ref = load_profile("h200-1b")
    assert prof["gpu"]["extend"] == ref.model_dump(mode="json")["gpu"]["extend"]   # left at the profile's
    assert prof["host"] == ref.model_dump(mode="json")["host"]


def test_a_verify_step_under_the_host_blocking_publish_wait_is_priced_with_its_launch():
    """A verify batch's host waits for the previous forward before it schedules and launches
    (sim/loop.py, SGLang overlap_utils.py), so a logged verify step is the forward plus that
    host work; priced as max(forward, host) it read 3.28 ms for the simulator's 3.80 (h200-1b,
    DSpark window 4, 8 requests), and the fitted decode factor took the launch in."""
    sc = make_scenario(workload={"kind": "closed_loop", "num_requests": 8, "concurrency": 8,
                                 "input_len": {"kind": "fixed", "value": 1000},
                                 "output_len": {"kind": "fixed", "value": 200}})
    sc = sc.model_copy(update={"profile": "h200-1b"})
    prof = load_profile("h200-1b")
    st = run_scenario(sc, profile=prof).steps
    verify = st[(st["part"] == "main") & (st["mode"] == "verify") & (st["batch_size"] == 8)]
    spacing = float(verify["gpu_end_s"].diff().iloc[5:40].mean())
    assert decode_step_seconds(prof, sc.server, 8, 1050) == pytest.approx(spacing, rel=0.01)


def _refused(capsys, tmp_path, argv) -> str:
    before = set(tmp_path.iterdir())
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert set(tmp_path.iterdir()) == before
    return err[0]


def test_what_a_log_alone_cannot_determine_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    """``--params`` naming prefill, host or a key no decode step reads (the extend grid; the
    plain decode grid of a speculative server's log), a log with no pure-decode line (a PD
    prefill server's) and ``--metrics`` (a log has no bench_serving figure): one line naming
    what, exit 2, nothing written."""
    monkeypatch.chdir(tmp_path)
    logs = ROOT / "tests" / "data" / "logs"
    plain, eagle = str(logs / "sglang-0.5.23-launch.log"), str(logs / "sglang-0.4.6-eagle.log")
    base = ["calibrate", "--profile", "h200-1b", "--out", "f.yaml"]
    for p in ("prefill", "host", "decode,host", "gpu.extend"):
        bad = p.split(",")[-1]
        line = _refused(capsys, tmp_path, [*base, "--from", plain, "--params", p])
        assert f"--params = '{bad}': not determined by server logs alone" in line, line
    line = _refused(capsys, tmp_path, [*base, "--from", eagle, "--params", "gpu.decode"])
    assert "--params = 'gpu.decode': prices none of the 1 pure-decode step(s) of sglang-0.4.6-eagle.log" in line
    prefill = str(logs / "sglang-0.4.9-pd-prefill.log")
    line = _refused(capsys, tmp_path, [*base, "--from", prefill])
    assert line.startswith(f"specsched: error: {prefill}: Decode batch = ") and "#running-req" in line, line
    line = _refused(capsys, tmp_path, [*base, "--server-log", plain, "--metrics", "median_itl_ms"])
    assert "--metrics = 'median_itl_ms'" in line


def test_server_log_without_runs_is_the_log_only_fit(tmp_path, capsys, monkeypatch):
    """``calibrate --server-log LOG`` with no ``--from`` fits the log alone, as ``--from LOG``
    does (it ran the MI355X reference fit, --server-log and --out unread)."""
    monkeypatch.chdir(tmp_path)
    log = str(ROOT / "tests" / "data" / "logs" / "sglang-0.5.23-launch.log")
    assert main(["calibrate", "--server-log", log, "--profile", "h200-1b", "--out", "a.yaml"]) == 0
    a = capsys.readouterr().out
    assert main(["calibrate", "--from", log, "--profile", "h200-1b", "--out", "b.yaml"]) == 0
    b = capsys.readouterr().out
    assert a.replace("a.yaml", "b.yaml") == b and "sglang-0.5.23-launch.log" in a
    prov = yaml.safe_load((tmp_path / "a.yaml").read_text())["provenance"]["calibrate.from_logs"]
    assert "server log sglang-0.5.23-launch.log alone (2 pure-decode steps" in prov


def test_a_log_too_short_to_judge_the_factor_asks_for_more_decode_lines_not_runs(tmp_path, capsys, monkeypatch):
    """A log with one pure-decode step for one factor leaves nothing to judge how well it is
    pinned: the report asks for a log with more decode lines, which a log-only fit can use (it
    asked for "runs at more loads", of which it has none)."""
    monkeypatch.chdir(tmp_path)
    log = str(ROOT / "tests" / "data" / "logs" / "sglang-0.4.6-eagle.log")
    assert main(["calibrate", "--from", log, "--profile", "h200-1b", "--out", "f.yaml"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("not identified")]
    assert line.startswith("not identified: 1 fitted figure(s) for 1 factor(s) (decode)"), line
    assert "give a log with more pure-decode 'Decode batch' lines" in line and "runs" not in line


def test_a_profile_fitted_to_logs_alone_is_still_said_to_be_an_analytic_estimate():
    """Decode lines fit the decode step only: prefill and host stay the roofline's. Its
    provenance under calibrate.from (the key of a fit to measured runs) dropped the run's
    "analytic estimate" line, so TTFTs read as calibrated."""
    from specsched.sim.profile import Profile, analytic_costs

    base = {"name": "a", "device": "x", "provenance": {"method": "analytic roofline"}}
    logs = {**base, "provenance": {**base["provenance"], "calibrate.from_logs": "fitted ... decode lines ... alone"}}
    runs = {**base, "provenance": {**base["provenance"], "calibrate.from": "fitted ... to bench_serving runs"}}
    costs = {"gpu": {"extend": {"x": [1, 10], "seconds": [[1e-3], [2e-3]]},
                     "decode": {"x": [1, 10], "seconds": [[1e-3], [2e-3]]}}}
    assert analytic_costs(Profile.model_validate({**logs, **costs}))
    assert not analytic_costs(Profile.model_validate({**runs, **costs}))
