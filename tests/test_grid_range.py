"""The range warning (sim/grid_range.py): a run that leaves its profile's measured grids says
so in one line per grid and axis, naming the largest value it reached and the measured
range, on every path that runs the simulator.

Named invariant INV-RANGE-ONCE: whatever the path (``specsched run``, ``compare``, a sweep,
DP attention, a disaggregated deployment, gpu_validate's pre-run check), each (profile,
grid, axis) a run left gets exactly one line, at the largest value any of its cost models
queried, and an axis the run stayed inside gets none.
"""

from __future__ import annotations

import io
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.disagg_config import KVTransferCost
from specsched.sim.engine import SimEngine
from specsched.sim.grid_range import EagerUnpriced, GridExit, merged, warning_lines, write_warnings
from specsched.sim.profile import Profile

from specsched.cli import main
from tests.conftest import load_benchmark, make_scenario

LINE = re.compile(r"^warning: profile small: (\w[\w ]*?(?: \(the KV read [^)]*\))?) (batch|tokens|context) ([\d.e+]+) beyond the profile's "
                  r"grid \(([\d.e+]+)-([\d.e+]+)\): extrapolated")

PROFILE = {
    "name": "small", "device": "synthetic",
    "gpu": {
        # extend: 256 tokens at most, attention context (keys per token) up to 100
        "extend": {"x": [1, 256], "context_len": [0, 100], "seconds": [[1e-5, 2e-5], [4e-4, 6e-4]]},
        "draft_inject_per_token_s": 1e-7,
        # decode and verify: batch 1-4, context 100-200 tokens per request
        "decode": {"x": [1, 4], "context_len": [100, 200], "seconds": [[1e-3, 1.1e-3], [1.5e-3, 1.7e-3]]},
        "verify": {"x": [1, 4], "context_len": [100, 200], "seconds": [[2e-3, 2.1e-3], [3e-3, 3.3e-3]]},
    },
    "host": {"ingest_per_request_s": 0.0, "schedule_s": 1e-4, "launch_s": 2e-4, "process_s": 1e-4,
             "sync_wakeup_s": 5e-5, "cross_queue_penalty_s": 1e-3},
}


def small_profile(**update) -> Profile:
    return Profile.model_validate({**PROFILE, **update})


def scenario(n: int = 8, prompt: int = 500, output: int = 20, **server):
    """``n`` requests at once (burst), ``prompt`` + ``output`` tokens, plain decoding; the
    defaults leave every axis: decode batch 8 > 4, context ~520 > 200, extend chunks of
    2048 tokens > 256 at an attention context of 250 keys per token > 100."""
    srv = {"speculative_algorithm": "none", "speculative_num_draft_tokens": 1, "max_running_requests": 16,
           "chunked_prefill_size": 2048, "max_prefill_tokens": 4096, **server}
    return make_scenario(srv, {"kind": "burst", "num_requests": n, "input_len": {"kind": "fixed", "value": prompt},
                               "output_len": {"kind": "fixed", "value": output}}, {"mean_accept_length": 1.0})


def parsed(lines: list[str]) -> dict[tuple[str, str], tuple[float, float, float]]:
    """(grid words, axis) -> (extent, lo, hi) of warning lines; every line parses, none repeats."""
    out = {}
    for line in lines:
        m = LINE.match(line)
        assert m, line
        key = (m.group(1), m.group(2))
        assert key not in out, f"two lines for {key}: {lines}"
        out[key] = tuple(float(m.group(i)) for i in (3, 4, 5))
    return out


def reached(result) -> dict[str, float]:
    """The largest decode batch and decode context per request of a run's steps table."""
    s = result.steps
    dec = s[(s["mode"] == "decode") & (s["part"] == "main")]
    return {"batch": float(dec["batch_size"].max())}


# ------------------------------------------------------------------------------ the owner
def test_merged_keeps_the_largest_extent_per_grid_and_axis():
    a = GridExit("p", "gpu.decode", "x", 8, 1, 4)
    b = GridExit("p", "gpu.decode", "x", 12, 1, 4)
    c = GridExit("p", "gpu.decode", "context_len", 300, 100, 200)
    e = EagerUnpriced("p", "batches above server.cuda_graph_max_bs (8) run eagerly")
    assert merged([a, c, b, e, e, a]) == merged([e, b, c]) and set(merged([a, c, b, e])) == {b, c, e}
    lines = warning_lines([a, c, b, e])
    assert len(lines) == 3
    assert lines[2] == ("warning: profile p: decode batch 12 beyond the profile's grid (1-4): "
                        "extrapolated linearly by the line through its points from half its last one up")
    out = io.StringIO()
    assert write_warnings([], out) == [] and out.getvalue() == ""


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["gpu.decode", "gpu.extend", "gpu.verify"]),
                          st.sampled_from(["x", "context_len"]), st.floats(5, 1e6)), min_size=1, max_size=20))
def test_one_note_per_key_at_the_maximum(queries):
    notes = [GridExit("p", g, a, q, 1, 4) for g, a, q in queries]
    m = merged(notes)
    assert len(m) == len({(g, a) for g, a, _ in queries})
    for n in m:
        assert n.extent == max(q for g, a, q in queries if (g, a) == (n.grid, n.axis))


def test_the_kv_read_on_another_grid_than_the_steps_names_its_batch_as_that_read():
    """A speculative run steps on the verify grid; the KV reads of extends' cached prefixes are
    priced on the decode grid. Eight requests reading past that grid's batch 4 are warned as the
    read's batch, not as a "decode batch 8" no decode step ran; on the steps' own grid (plain
    decoding) the same read shares the steps' batch line."""
    from specsched.sim.config import ServerArgs
    from specsched.sim.cost_model import CostModel
    from specsched.sim.grid_range import ROWS_READ

    for algo, window, grid in (("dspark", 4, "decode" + ROWS_READ), ("none", 1, "decode")):
        cm = CostModel(small_profile(), ServerArgs(speculative_algorithm=algo, speculative_num_draft_tokens=window))
        cm.rows_context_s(8, 300.0)
        got = parsed(cm.range_warnings())
        assert got[(grid, "batch")] == (8, 1, 4), got
        assert got[("decode" + ROWS_READ, "context")] == (300, 100, 200), got
        assert ("decode", "context") not in got and (algo == "none" or ("decode", "batch") not in got), got


# ------------------------------------------------------------------------------ plain run
def test_a_cached_prefix_read_is_warned_as_that_read_not_as_a_decode_context():
    """A prompt of 260 tokens in chunks of 250 and one output token: no decode step runs, but the
    second chunk's request reads its 250-token cached prefix, priced on the decode grid's context
    axis past its 200. The line names that read, so no decode is reported at a context no decode
    reached (a 60-token prefix among 4K prompts once read "verify context 60")."""
    sc = scenario(n=1, prompt=260, output=1, chunked_prefill_size=250, max_prefill_tokens=250)
    got = parsed(warning_lines(SimEngine(sc, small_profile()).run().extra["range_notes"]))
    read = "decode (the KV read of extends' cached prefixes and mixed steps' running rows)"
    assert (read, "context") in got and got[(read, "context")] == (250, 100, 200)
    assert ("decode", "context") not in got


def test_a_plain_run_notes_every_axis_it_left_once_at_its_extent():
    result = SimEngine(scenario(), small_profile()).run()
    got = parsed(warning_lines(result.extra["range_notes"]))
    assert set(got) == {("decode", "batch"), ("decode", "context"), ("extend", "tokens"), ("extend", "context")}
    assert got[("decode", "batch")] == (reached(result)["batch"], 1, 4) == (8, 1, 4)
    # the longest request's context at its last decode: 500 prompt + 19 outputs (rounded to 10)
    assert got[("decode", "context")] == (520, 100, 200)
    assert got[("extend", "tokens")] == (2048, 1, 256)
    assert got[("extend", "context")][1:] == (0, 100) and got[("extend", "context")][0] > 100


def test_a_run_inside_the_grid_says_nothing():
    result = SimEngine(scenario(n=2, prompt=80, output=20, chunked_prefill_size=128, max_prefill_tokens=256),
                       small_profile()).run()
    assert warning_lines(result.extra["range_notes"]) == []


def _scenario_file(tmp_path, **server) -> str:
    (tmp_path / "small.yaml").write_text(yaml.safe_dump(PROFILE))
    sc = scenario(**server).model_dump(mode="json", exclude_none=True)
    doc = {"name": "range", "profile": str(tmp_path / "small.yaml"), "seed": 1, "server": {
        k: sc["server"][k] for k in ("speculative_algorithm", "speculative_num_draft_tokens", "max_running_requests",
                                     "chunked_prefill_size", "max_prefill_tokens", "max_total_num_tokens")},
        "workload": {"kind": "burst", "num_requests": 8, "input_len": {"kind": "fixed", "value": 500},
                     "output_len": {"kind": "fixed", "value": 20}},
        "acceptance": {"mean_accept_length": 1.0},
        "arms": {"base": {}, "wide": {"workload": {"num_requests": 12}}}}
    path = tmp_path / "range.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_specsched_run_writes_the_lines_once(tmp_path, capsys):
    assert main(["run", _scenario_file(tmp_path), "--out", str(tmp_path / "r"), "--quiet"]) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("warning: profile small")]
    got = parsed(err)
    assert len(err) == 4 and got[("decode", "batch")] == (8, 1, 4)


def test_compare_writes_one_line_per_axis_for_all_its_runs(tmp_path, capsys):
    """Two arms x two seeds: one line per axis, at the wider arm's batch of 12."""
    assert main(["compare", _scenario_file(tmp_path), "--arms", "base,wide", "--seeds", "2", "--no-save"]) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("warning:")]
    got = parsed(err)
    assert len(err) == 4 and got[("decode", "batch")] == (12, 1, 4)


def test_a_sweep_writes_one_line_per_axis_for_all_its_points(tmp_path, capsys):
    from specsched.analysis.sweep import run_sweep

    with ThreadPoolExecutor(1) as ex:
        report = run_sweep(_scenario_file(tmp_path), {"workload.num_requests": [6, 10]}, 1, tmp_path / "s.parquet",
                           executor=ex, progress=False)
    assert not report.failed
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("warning:")]
    got = parsed(err)
    # 10 running requests replay the graph captured for 12 (cuda_graph_bs): 12 rows priced
    assert len(err) == 4 and got[("decode", "batch")] == (12, 1, 4)


# ------------------------------------------------------------------------------ DP attention
def test_dp_attention_per_rank_notes_the_ranks_batch():
    """Two ranks of 8 requests each (max_running_requests 32 split 16 per rank): the
    per-rank cost model reads each rank's batch of 8, one line per axis."""
    result = SimEngine(scenario(n=16, max_running_requests=32, enable_dp_attention=True, dp_size=2),
                       small_profile()).run()
    got = parsed(warning_lines(result.extra["range_notes"]))
    assert got[("decode", "batch")] == (8, 1, 4) and len(got) == 4


def test_dp_attention_on_a_tp_group_profile_notes_the_groups_batch():
    """A profile of a TP2 group: under DP attention the group's forward runs both ranks'
    requests (sim/dp_attention.py ``_group_gpu``: the group's step at dp x the largest
    rank's batch), so the decode batch reached is 16 and the per-rank reading's 8 is not
    written beside it."""
    prof = small_profile(hardware={"platform": "cpu", "tp_size": 2})
    result = SimEngine(scenario(n=16, max_running_requests=32, enable_dp_attention=True, dp_size=2), prof).run()
    got = parsed(warning_lines(result.extra["range_notes"]))
    assert got[("decode", "batch")] == (16, 1, 4) and len(got) == 4


# ------------------------------------------------------------------------------ disaggregation
def test_a_disaggregated_deployment_writes_each_axis_once():
    """Two prefill and two decode servers, each with its own cost model: one line per axis
    for the deployment (each server wrote its own before), at the largest decode batch."""
    prof = small_profile().model_copy(update={"kv_transfer": KVTransferCost(bytes_per_token=1e5, link_bytes_per_s=1e10,
                                                                            latency_s=1e-3)})
    sc = scenario(n=16, disaggregation={"prefill": {"instances": 2, "server": {}},
                                        "decode": {"instances": 2, "server": {}}})
    result = SimEngine(sc, prof).run()
    lines = warning_lines(result.extra["range_notes"])
    got = parsed(lines)
    assert set(got) == {("decode", "batch"), ("decode", "context"), ("extend", "tokens"), ("extend", "context")}
    assert got[("decode", "batch")][0] == reached(result)["batch"] > 4


# ------------------------------------------------------------------------------ gpu_validate
def test_gpu_validate_names_a_cell_before_it_runs_with_the_simulators_lines():
    gv = load_benchmark("gpu_validate")
    jobs = [gv.Job("far", "base", scenario(), "g", "far-base"),
            gv.Job("near", "base", scenario(n=2, prompt=80, chunked_prefill_size=128, max_prefill_tokens=256), "g",
                   "near-base")]
    lines = gv.pre_run_warnings(jobs, lambda job, seed: SimEngine(job.scenario, small_profile(), seed).run())
    assert len(lines) == 4 and all(ln.startswith("far base: warning: profile small:") for ln in lines)
    assert parsed([ln.removeprefix("far base: ") for ln in lines])[("decode", "batch")] == (8, 1, 4)


# ------------------------------------------------------------------------------ validate commands
def test_validate_bench_writes_the_lines_once_for_all_its_seeds(tmp_path, capsys, monkeypatch):
    from tests.test_from_bench import LINE, _write

    monkeypatch.chdir(tmp_path)
    (tmp_path / "small.yaml").write_text(yaml.safe_dump(PROFILE))
    line = _write(tmp_path, LINE)
    assert main(["validate-bench", str(line), "--profile", str(tmp_path / "small.yaml"), "--seeds", "2",
                 "--out", "a"]) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("warning: profile small")]
    assert err and len(parsed(err)) == len(err)


def test_validate_writes_the_lines_once_for_its_two_predictions(tmp_path, capsys):
    """``specsched validate`` predicts twice (as profiled, and at the run's measured host
    speed); each line is written once for both."""
    prof = tmp_path / "small.yaml"
    prof.write_text(yaml.safe_dump({**PROFILE, "host": {**PROFILE["host"], "reference_work_s": 1e-4}}))
    sc = tmp_path / "s.yaml"
    sc.write_text(yaml.safe_dump({
        "name": "v", "profile": str(prof),
        "server": {"max_running_requests": 4, "chunked_prefill_size": 64, "max_prefill_tokens": 96,
                   "max_total_num_tokens": 5000, "speculative_algorithm": "none", "speculative_num_draft_tokens": 1},
        "workload": {"kind": "burst", "num_requests": 2, "input_len": {"kind": "fixed", "value": 300},
                     "output_len": {"kind": "fixed", "value": 4}}}))
    assert main(["validate", str(sc), "--profile", str(prof), "--device", "cpu", "--preset", "tiny", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert "conditioned on the run's host speed" in captured.out
    # a burst: no decision waits on a clock, so both engines plan every step alike
    plans = [ln for ln in captured.out.splitlines() if ln.startswith("step plans:")]
    assert len(plans) == 1 and " rows identical (retractions 0 / 0, extend batches " in plans[0], plans
    assert "the first" not in plans[0]
    err = [ln for ln in captured.err.splitlines() if ln.startswith("warning: profile small")]
    assert ("decode", "context") in parsed(err) and len(parsed(err)) == len(err)


# ------------------------------------------------------------------------------ under a grid
def test_an_extend_under_the_grids_first_point_is_noted_at_its_smallest():
    """A prompt shorter than the extend grid's first point (H200 round 31: sharegpt-lengths'
    13-254-token extends under an 8b grid starting at 256) gets one line, at the smallest
    query, beside nothing for the axes the run stayed inside."""
    extend = {"x": [256, 1024], "context_len": [0, 600], "seconds": [[4e-4, 6e-4], [1.2e-3, 1.6e-3]]}
    prof = small_profile(gpu={**PROFILE["gpu"], "extend": extend})
    result = SimEngine(scenario(n=1, prompt=80, output=5), prof).run()
    assert warning_lines(result.extra["range_notes"]) == [
        "warning: profile small: extend tokens 80 below the profile's grid (256-1024): "
        "extrapolated by the line through its first doubling, at most its first point's time"]


def test_merged_keeps_the_smallest_under_and_the_largest_beyond_apart():
    lo = [GridExit("p", "gpu.extend", "x", q, 256, 1024, below=True) for q in (80, 13, 200)]
    hi = [GridExit("p", "gpu.extend", "x", q, 256, 1024) for q in (2048, 4096)]
    m = merged(lo + hi)
    assert sorted((n.below, n.extent) for n in m) == [(False, 4096), (True, 13)]


def test_a_padded_width_profile_says_its_context_is_the_padded_width():
    """Under ``gpu.attention_width: padded_max`` the decode grid is read at the batch's
    padded width (here the ~520-token contexts padded to a 1024 bucket), not at any request's
    context; the line says which it is (a CPU review read it as a request's context)."""
    padded = small_profile(gpu={**PROFILE["gpu"], "attention_width": "padded_max", "attention_bucket": 1024})
    lines = warning_lines(SimEngine(scenario(n=2, prompt=500, output=20), padded).run().extra["range_notes"])
    ctx = [ln for ln in lines if "decode context" in ln]
    assert len(ctx) == 1 and "padded up to the profile's bucket" in ctx[0], lines
    assert parsed(ctx)[("decode", "context")][0] > 1000   # the width, past every request's 520
    plain = warning_lines(SimEngine(scenario(n=2, prompt=500, output=20), small_profile()).run().extra["range_notes"])
    assert all("padded" not in ln for ln in plain) and any("(tokens per request;" in ln for ln in plain), plain


def test_a_verify_batch_read_for_a_longer_window_says_what_it_counts(tmp_path, capsys):
    """burst256-ht at speculative_num_draft_tokens=8 warned 'verify batch 341.333 beyond the
    profile's grid (1-256)' with max_running_requests 256: a fractional batch above the
    server's own limit. It is the token work of 256 requests at window 8 on a grid timed at
    window 6 (256 x 8 / 6, sim/cost_model.py step_s); the line now says so."""
    note = GridExit("p", "gpu.verify", "x", 256 * 8 / 6, 1, 256, x_window=(8, 6))
    assert note.line() == ("warning: profile p: verify batch 341.333 beyond the profile's grid (1-256): extrapolated "
                           "linearly by the line through its points from half its last one up (256 requests at window 8, read as batch "
                           "256 x 8/6 on a grid timed at window 6)")
    assert main(["run", "burst256-ht", "--set", "server.speculative_num_draft_tokens=8", "-q",
                 "--out", str(tmp_path / "r")]) == 0
    err = [e for e in capsys.readouterr().err.splitlines() if "verify batch" in e]
    assert len(err) == 1 and err[0].endswith("(256 requests at window 8, read as batch 256 x 8/6 on a grid timed "
                                             "at window 6)"), err


# A grid of one context column that says the contexts its measurements spanned
# (Grid.context_span): priced flat at every context, and a query past the span is said
def _span_grid(**kw):
    from specsched.sim.profile import Grid

    return Grid.model_validate({"x": [1, 8], "context_len": [0.0], "seconds": [[1e-3], [2e-3]], **kw})


@given(st.floats(0, 1e6), st.sampled_from([1, 3, 8, 20]))
@settings(max_examples=60, deadline=None)
def test_a_one_column_grid_is_flat_in_context_and_says_only_past_its_span(ctx, bs):
    g = _span_grid(context_span=[3890.0, 7170.0])
    interp, plain = g.interpolator("gpu.verify"), _span_grid().interpolator("gpu.verify")
    assert interp(bs, ctx) == plain(bs, ctx) == interp(bs, 0.0)
    past = round(ctx, -1) > 7170.0
    assert ("context_len" in interp.above) == past
    assert "context_len" not in plain.above   # no span: nothing claimed, nothing said


def test_the_span_warning_says_the_column_was_read_flat():
    line = GridExit("p", "gpu.verify", "context_len", 32750.0, 3890.0, 7170.0, columns=(0.0, 0.0)).line()
    assert "32750" in line and "3890-7170" in line and "priced at that column" in line
    assert "extrapolated" not in line


def test_a_reversed_context_span_is_refused():
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="lo <= hi"):
        _span_grid(context_span=[10.0, 5.0])


def test_a_grid_whose_columns_reach_past_its_span_says_which_figures_no_measurement_made():
    from specsched.sim.profile import Grid

    g = Grid.model_validate({"x": [1, 8], "context_len": [4500.0, 32768.0], "seconds": [[1e-3, 2e-3], [2e-3, 4e-3]],
                             "context_span": [3890.0, 7170.0]})
    interp = g.interpolator("gpu.verify")
    interp(8, 7000.0)
    assert "context_len" not in interp.above
    assert interp(8, 20000.0) > interp(8, 7000.0)   # the derived column still prices the growth
    assert interp.above["context_len"] == 20000.0
    inside = GridExit("p", "gpu.verify", "context_len", 20000.0, 3890.0, 7170.0, columns=(4500.0, 32768.0)).line()
    past = GridExit("p", "gpu.verify", "context_len", 40000.0, 3890.0, 7170.0, columns=(4500.0, 32768.0)).line()
    assert "which no measurement made" in inside and "3890-7170" in inside
    assert "extrapolated linearly" in past and "32768" in past


def _mi355x_batch8(tmp_path, **workload) -> Path:
    """scenarios/batch8-ll.yaml on its MI355X profile, base arm only, 64 output tokens and
    ``workload``'s keys, written to ``tmp_path/s.yaml``."""
    from tests.conftest import ROOT

    doc = yaml.safe_load((ROOT / "scenarios" / "batch8-ll.yaml").read_text())
    doc["profile"] = str(ROOT / "profiles" / "mi355x-dsv41-flash-tp4.yaml")
    doc["workload"].update(output_len={"kind": "fixed", "value": 64}, **workload)
    doc["arms"] = {"base": {}}
    doc.pop("reference", None)
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def test_the_mi355x_cells_stay_in_their_span_and_a_32k_prompt_leaves_it(tmp_path, capsys):
    p = _mi355x_batch8(tmp_path, num_requests=8)
    assert main(["run", str(p), "--out", str(tmp_path / "a")]) == 0
    assert "warning" not in capsys.readouterr().err
    p = _mi355x_batch8(tmp_path, num_requests=8, input_len={"kind": "fixed", "value": 32768})
    assert main(["run", str(p), "--out", str(tmp_path / "b")]) == 0
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("warning")]
    assert any("verify context" in x and "3890-7170" in x for x in lines), lines
    assert any("extend context" in x and "1940-2050" in x for x in lines), lines


# Under the span: contexts shorter than any measurement made are said the same way, once, at
# the smallest context reached
@given(st.floats(0, 1e5))
@settings(max_examples=60, deadline=None)
def test_a_context_under_the_span_is_noted_at_its_smallest(ctx):
    from specsched.sim.profile import Grid

    g = Grid.model_validate({"x": [1, 8], "context_len": [4500.0, 32768.0], "seconds": [[1e-3, 2e-3], [2e-3, 4e-3]],
                             "context_span": [3890.0, 7170.0]})
    interp, plain = g.interpolator("gpu.verify"), g.model_copy(update={"context_span": None}).interpolator("gpu.verify")
    interp(8, 5000.0)
    interp(8, ctx)
    plain(8, ctx)
    under = round(ctx, -1) < 3890.0
    assert interp.below.get("context_len") == (round(ctx, -1) if under else None)
    assert "context_len" not in plain.below   # no span: the columns are the measured range
    assert interp(8, 100.0) <= interp(8, 3000.0)   # priced as before: the first segment's slope


def test_the_under_span_line_names_axis_value_and_span():
    flat = GridExit("p", "gpu.verify", "context_len", 1200.0, 81350.0, 687410.0, below=True, columns=(0.0, 0.0)).line()
    low = GridExit("p", "gpu.verify", "context_len", 250.0, 3890.0, 7170.0, below=True, columns=(4500.0, 32768.0)).line()
    mid = GridExit("p", "gpu.extend", "context_len", 1000.0, 1200.0, 2050.0, below=True, columns=(900.0, 32768.0)).line()
    assert flat == ("warning: profile p: verify context 1200 below the contexts its measurements spanned "
                    "(81350-687410; tokens per request): priced at its one column, so the KV read's change with "
                    "context is not in the figure (the profile's provenance says where its growth with context "
                    "comes from)")
    assert "verify context 250 below" in low and "(3890-7170;" in low and "below its first column 4500" in low
    assert "extend context 1000 below" in mid and "from 900, which no measurement made" in mid
    a, b = (GridExit("p", "gpu.verify", "context_len", v, 3890.0, 7170.0, below=True, columns=(4500.0, 32768.0))
            for v in (250.0, 800.0))
    c = GridExit("p", "gpu.verify", "context_len", 9000.0, 3890.0, 7170.0, columns=(4500.0, 32768.0))
    assert merged([b, c, a]) == [c, a]   # the smallest under, the largest past: two lines


def test_a_short_prompt_on_the_mi355x_profile_says_it_ran_under_the_span(tmp_path, capsys):
    p = _mi355x_batch8(tmp_path, input_len={"kind": "fixed", "value": 256})
    assert main(["run", str(p), "--out", str(tmp_path / "a")]) == 0
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("warning")]
    verify = [x for x in lines if x.startswith("warning: profile mi355x-dsv41-flash-tp4: verify context ")]
    extend = [x for x in lines if x.startswith("warning: profile mi355x-dsv41-flash-tp4: extend context ")]
    assert len(verify) == 1 and "below the contexts its measurements spanned (3890-7170;" in verify[0], lines
    assert len(extend) == 1 and "below the contexts its measurements spanned (1940-2050;" in extend[0], lines
    assert float(verify[0].split("verify context ")[1].split()[0]) < 300   # the smallest: a 256-token prompt


def test_validate_ties_a_large_miss_to_the_grid_exits_beside_its_table():
    """A figure missed by over 10 % while the prediction left its profile's grids: validate
    says so under its table, naming the grids (the range warnings come a screen below)."""
    from specsched.runtime.cli_commands import extrapolated_misses_note
    from specsched.sim.grid_range import GridExit

    exits = [GridExit("p", "gpu.decode", "context_len", 1200.0, 64.0, 256.0),
             GridExit("p", "gpu.decode", "context_len", 900.0, 64.0, 256.0)]
    rows = [{"metric": "output_throughput", "error_pct": 85.0}, {"metric": "median_tpot_ms", "error_pct": -3.0}]
    note = extrapolated_misses_note(rows, exits)
    assert note is not None and note.startswith("note: 1 figure(s) miss by over 10 %")
    assert "gpu.decode context_len 1200 (past 64-256)" in note and "900" not in note   # the largest exit, once
    assert extrapolated_misses_note([{"metric": "x", "error_pct": 4.0}], exits) is None   # no large miss
    assert extrapolated_misses_note(rows, []) is None                                     # inside the grids
