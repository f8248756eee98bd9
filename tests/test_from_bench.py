"""``scenario from-bench``: a bench_serving line -> scenario whose run reproduces the line's
arguments (rate, concurrency, prompts, length ranges); gamma arrivals (burstiness)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.analysis.from_bench import scenario_from_bench
from specsched.sim.bench_serving import parse_run, read_bench
from specsched.sim.config import Scenario, load_scenario
from specsched.sim.engine import SimEngine
from specsched.sim.errors import ConfigError
from specsched.sim.profile import load_profile
from specsched.sim.workload import gamma_arrivals, poisson_arrivals

from specsched.cli import main
from tests.conftest import ROOT, tiny_profile

LINE = {"backend": "sglang", "dataset_name": "random", "request_rate": 20.0, "max_concurrency": 5,
        "random_input_len": 600, "random_output_len": 40, "random_range_ratio": 0.25, "completed": 30,
        "duration": 3.0, "median_ttft_ms": 30.0, "output_throughput": 300.0,
        "server_info": {"max_running_requests": 8, "chunked_prefill_size": 2048, "max_prefill_tokens": 4096,
                        "max_total_num_tokens": 100000, "speculative_algorithm": "EAGLE3", "page_size": 1}}


def _write(tmp_path, obj):
    p = tmp_path / "runs.jsonl"
    p.write_text(json.dumps(obj) + "\n")
    return p


def test_scenario_from_line_reproduces_its_arguments(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = _write(tmp_path, LINE)
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", "s.yaml"]) == 0
    sc = load_scenario(tmp_path / "s.yaml")
    w = sc.workload
    assert (w.kind, w.request_rate, w.max_concurrency, w.num_requests) == ("poisson", 20.0, 5, 30)
    assert sc.server.max_running_requests == 8 and sc.server.chunked_prefill_size == 2048
    assert sc.server.speculative_algorithm.value == "none"       # EAGLE3 has no drafter here: left out, said so
    assert any("EAGLE3" in a.upper() for a in sc.assumptions)
    assert sc.reference["base"]["median_ttft_ms"] == 30.0
    res = SimEngine(sc, tiny_profile()).run()
    # run it, write it as bench_serving, and the line's arguments come back
    from specsched.sim.results import write_results

    (back,) = read_bench(write_results(res, tmp_path / "out") / "bench_serving.jsonl")
    for k in ("request_rate", "max_concurrency", "random_input_len", "random_output_len", "random_range_ratio", "dataset_name"):
        assert back.args[k] == LINE[k], k
    assert back.num_prompts == 30
    ins, outs = res.requests["input_len"], res.requests["output_len"]
    assert ins.min() >= 150 and ins.max() <= 600 and outs.min() >= 10 and outs.max() <= 40
    assert ins.max() - ins.min() > 200                              # really a range, not fixed


@pytest.mark.parametrize("rate, conc, kind", [(math.inf, None, "burst"), (math.inf, 7, "closed_loop"), (3.0, None, "poisson")])
def test_arrival_kinds_follow_bench_serving(rate, conc, kind):
    run = parse_run({**LINE, "request_rate": rate, "max_concurrency": conc}, "f:1")
    sc, _ = scenario_from_bench(run, "tiny")
    assert sc["workload"]["kind"] == kind
    if kind == "closed_loop":
        assert sc["workload"]["concurrency"] == 7


def test_ratio_zero_and_one_and_sharegpt():
    sc, _ = scenario_from_bench(parse_run({**LINE, "random_range_ratio": 0.0}, "f:1"), "tiny")
    assert sc["workload"]["input_len"] == {"kind": "uniform", "value": 600, "range_ratio": 0.0}
    sc, _ = scenario_from_bench(parse_run({**LINE, "random_range_ratio": 1.0}, "f:1"), "tiny")
    assert sc["workload"]["output_len"] == {"kind": "fixed", "value": 40}
    sc, _ = scenario_from_bench(parse_run({**LINE, "dataset_name": "sharegpt", "sharegpt_output_len": 128}, "f:1"), "tiny")
    assert sc["workload"]["input_len"]["path"] == "sharegpt-like-lengths-input.csv"
    assert sc["workload"]["output_len"] == {"kind": "fixed", "value": 128}
    Scenario.model_validate(sc)   # the shipped histogram resolves by name from anywhere


def test_lengths_from_details_write_histograms(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = {**LINE, "dataset_name": "generated-shared-prefix", "input_lens": [5, 7, 7], "output_lens": [3, 3, 9],
            "ttfts": [0.1, 0.1, 0.1], "itls": [[0.01] * 2, [0.01] * 2, [0.01] * 8], "errors": ["", "", ""]}
    p = _write(tmp_path, line)
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", "g.yaml"]) == 0
    data = yaml.safe_load((tmp_path / "g.yaml").read_text())
    assert data["workload"]["input_len"] == {"kind": "file", "path": "g-input-lengths.csv"}
    assert (tmp_path / "g-input-lengths.csv").read_text().splitlines() == ["length,weight", "5,1", "7,2"]
    assert data["workload"]["num_requests"] == 3
    load_scenario(tmp_path / "g.yaml")


@pytest.mark.parametrize(("details", "key"), [
    ({"input_lens": [5, 7], "output_lens": [0, 0], "errors": ["timeout", "500"]}, "completed"),
    ({"input_lens": [5, -1], "output_lens": [3, 3], "errors": ["", ""]}, "input_lens[1]"),
    ({"input_lens": [5, 7], "output_lens": [3, -2], "errors": ["", ""]}, "output_lens[1]"),
])
def test_details_that_give_no_lengths_are_one_line_and_write_nothing(tmp_path, monkeypatch, capsys, details, key):
    """A line whose every request failed wrote empty histograms and a scenario no run could
    load; a negative token count was clipped to a 1-token prompt. Both are refused now."""
    monkeypatch.chdir(tmp_path)
    line = {**LINE, "dataset_name": "generated-shared-prefix", "ttfts": [0.1, 0.1], "itls": [[0.01] * 2] * 2, **details,
            "completed": sum(not e for e in details["errors"])}   # of the 2 sent (more was said as impossible)
    p = _write(tmp_path, line)
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", "g.yaml"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"runs.jsonl:1: {key} = " in err, err
    assert sorted(x.name for x in tmp_path.iterdir()) == ["runs.jsonl"]


@pytest.mark.parametrize(("change", "key"), [
    ({"random_range_ratio": 1.5}, "random_range_ratio = 1.5"), ({"random_range_ratio": -0.1}, "random_range_ratio = -0.1"),
    ({"random_input_len": 0}, "random_input_len = 0"), ({"random_output_len": 0}, "random_output_len = 0"),
])
def test_random_arguments_bench_serving_would_refuse_are_refused(tmp_path, capsys, change, key):
    """A ratio above 1 was read as fixed lengths (bench_serving's randint would raise on it), and
    a 0-token length was refused under the scenario's own key (workload.input_len.value)."""
    p = _write(tmp_path, {**LINE, **change})
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", str(tmp_path / "g.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"runs.jsonl:1: {key}: " in err, err
    assert not (tmp_path / "g.yaml").exists()


def test_a_line_that_completed_nothing_says_so(tmp_path, capsys):
    """completed = 0 was reported as "num_prompts = '<missing>': need ... or completed"."""
    p = _write(tmp_path, {**LINE, "completed": 0})
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", str(tmp_path / "g.yaml")]) == 2
    assert "runs.jsonl:1: completed = 0: the run finished no request" in capsys.readouterr().err


def test_burstiness_and_trace_lines(tmp_path, capsys):
    sc, _ = scenario_from_bench(parse_run(LINE, "f:1"), "tiny", burstiness=0.5)
    assert sc["workload"]["burstiness"] == 0.5
    with pytest.raises(ConfigError, match="trace"):
        scenario_from_bench(parse_run({**LINE, "request_rate": "trace"}, "f:1"), "tiny")
    with pytest.raises(ConfigError, match="finite"):
        scenario_from_bench(parse_run({**LINE, "request_rate": None}, "f:1"), "tiny", burstiness=2.0)
    p = _write(tmp_path, {**LINE, "request_rate": "trace"})
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", str(tmp_path / "t.yaml")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1 and not (tmp_path / "t.yaml").exists()


def test_a_vllm_line_at_rate_inf_with_a_burstiness_is_a_burst(tmp_path, monkeypatch):
    """vLLM writes its --burstiness whatever the rate; at rate inf it sends every request at
    once. Such a line was refused as '<command line>: --burstiness = 0.5: needs a finite
    request_rate', an option the user never gave."""
    vllm = {"date": "20250101-000000", "backend": "vllm", "num_prompts": 20, "request_rate": "inf", "burstiness": 0.5,
            "max_concurrency": None, "completed": 20, "duration": 2.0, "total_input_tokens": 10240,
            "total_output_tokens": 320, "median_ttft_ms": 50.0, "output_throughput": 160.0}
    sc, _ = scenario_from_bench(parse_run(vllm, "f:1"), "tiny")
    assert sc["workload"]["kind"] == "burst" and "burstiness" not in sc["workload"]
    assert any("burstiness 0.5 has no effect" in n for n in sc["assumptions"])
    sc, _ = scenario_from_bench(parse_run({**vllm, "max_concurrency": 4}, "f:1"), "tiny")
    assert sc["workload"] == {**sc["workload"], "kind": "closed_loop", "concurrency": 4}
    with pytest.raises(ConfigError, match="--burstiness"):   # the command line's own is still refused
        scenario_from_bench(parse_run(vllm, "f:1"), "tiny", burstiness=0.5)


@settings(max_examples=25, deadline=None)
@given(st.floats(0.2, 5.0), st.floats(0.5, 50.0))
def test_invariant_gamma_gaps_have_mean_one_over_rate_and_cv_one_over_sqrt_shape(shape, rate):
    """Invariant (vLLM benchmark_serving --burstiness): gap ~ Gamma(shape, 1/(rate x shape))."""
    g = np.diff(gamma_arrivals(40_000, rate, shape, seed=2), prepend=0.0)
    assert g.mean() == pytest.approx(1 / rate, rel=0.05)
    assert g.std() / g.mean() == pytest.approx(1 / math.sqrt(shape), rel=0.06)


def test_burstiness_one_is_the_poisson_stream():
    from specsched.sim.config import WorkloadConfig
    from specsched.sim.workload import RequestSpec, arrival_times

    specs = [RequestSpec(i, 10, 10) for i in range(50)]
    w = WorkloadConfig.model_validate({"kind": "poisson", "num_requests": 50, "request_rate": 3.0, "burstiness": 1.0,
                                       "input_len": {"value": 10}, "output_len": {"value": 10}})
    assert np.array_equal(arrival_times(w, specs, 4), poisson_arrivals(50, 3.0, 4))
    w2 = w.model_copy(update={"burstiness": 0.3})
    assert not np.array_equal(arrival_times(w2, specs, 4), poisson_arrivals(50, 3.0, 4))


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 400), rate=st.floats(0.1, 100.0), shape=st.one_of(st.none(), st.floats(0.2, 5.0)),
       seed=st.integers(0, 50))
def test_invariant_normalized_arrivals_end_at_n_over_rate_with_the_drawn_proportions(n, rate, shape, seed):
    """Invariant (vllm bench serve 0.10.0+, serve.py get_request's target_total_delay_s): with
    normalize_arrivals the last send is at exactly n / rate and every send time is the drawn
    one times a single factor; without it the draw is unchanged."""
    from specsched.sim.config import WorkloadConfig
    from specsched.sim.workload import RequestSpec, arrival_times

    specs = [RequestSpec(i, 10, 10) for i in range(n)]
    base = {"kind": "poisson", "num_requests": n, "request_rate": rate, "burstiness": shape,
            "input_len": {"value": 10}, "output_len": {"value": 10}}
    drawn = arrival_times(WorkloadConfig.model_validate(base), specs, seed)
    t = arrival_times(WorkloadConfig.model_validate({**base, "normalize_arrivals": True}), specs, seed)
    assert t[-1] == pytest.approx(n / rate, rel=1e-12)
    assert np.allclose(t / t[-1], drawn / drawn[-1], rtol=1e-12)


def test_infinite_burstiness_sends_at_fixed_gaps_and_vllm_bench_serve_lines_normalize():
    """vllm 0.33 get_request: burstiness inf -> every gap 1/rate. from-bench marks lines of
    ``vllm bench serve`` (endpoint_type, no best_of) normalize_arrivals; benchmark_serving.py
    lines (0.7.3, 0.8.5) and SGLang lines are not."""
    assert gamma_arrivals(4, 2.0, math.inf, seed=1).tolist() == [0.5, 1.0, 1.5, 2.0]
    w = scenario_from_bench(parse_run({**LINE, "burstiness": math.inf}, "f:1"), "tiny")[0]["workload"]
    assert w["burstiness"] == math.inf
    data = ROOT / "tests" / "data" / "bench"
    for name, expect in (("vllm-0.10.1.1-bench-serve.json", True), ("vllm-0.33.0-bench-serve.json", True),
                         ("vllm-0.8.5-benchmark_serving.json", False), ("vllm-0.7.3-benchmark_serving.json", False),
                         ("sglang-0.5.10.jsonl", False)):
        obj = json.loads((data / name).read_text().splitlines()[0])
        run = parse_run({**LINE, **{k: obj[k] for k in ("endpoint_type", "best_of") if k in obj}}, "f:1")
        assert scenario_from_bench(run, "tiny")[0]["workload"].get("normalize_arrivals", False) is expect, name


def test_accept_length_without_server_info_means_a_drafter_assumed_and_said(tmp_path, monkeypatch, capsys):
    """A speculative run's line (accept_length, no server_info: SGLang 0.4.6) gives a scenario
    that decodes speculatively with the line's accept length, and the printed assumptions say
    the drafter kind and window were not in the line, what was assumed, and --template."""
    monkeypatch.chdir(tmp_path)
    src = ROOT / "tests" / "data" / "bench" / "sglang-0.4.6-eagle.jsonl"
    assert main(["scenario", "from-bench", str(src), "--profile", "h200-1b", "--out", "e.yaml"]) == 0
    sc = load_scenario(tmp_path / "e.yaml")
    assert sc.server.speculative_algorithm.enabled and sc.server.spec_window >= 4
    assert sc.acceptance.mean_accept_length == pytest.approx(3.02)
    printed = capsys.readouterr().out
    (note,) = [ln for ln in printed.splitlines() if "accept_length" in ln and "assumed" in ln]
    assert "neither the drafter kind nor its window" in note and "--template" in note
    assert "speculative_num_draft_tokens" in note
    # a profile that prices chain draft steps gets SGLang's default EAGLE chain (3 steps, window 4)
    run = parse_run({**LINE, "server_info": None, "accept_length": 2.9}, "f:1")
    sc, _ = scenario_from_bench(run, "h200-llama8b-roofline")
    assert sc["server"]["speculative_algorithm"] == "eagle" and sc["server"]["speculative_num_draft_tokens"] == 4
    assert sc["acceptance"] == {"mean_accept_length": 2.9}


def test_accept_length_from_server_info_internal_states_and_a_named_chain_drafter():
    """SGLang 0.5.23 bench_serving reads accept_length from /server_info's
    internal_states[0].avg_spec_accept_length; a line whose server_info names the drafter
    (EAGLE3) but not a usable window keeps that drafter."""
    info = {**LINE["server_info"], "internal_states": [{"avg_spec_accept_length": 2.5}]}
    sc, _ = scenario_from_bench(parse_run({**LINE, "server_info": info}, "f:1"), "h200-llama8b-roofline")
    assert sc["server"]["speculative_algorithm"] == "eagle3"
    assert sc["acceptance"] == {"mean_accept_length": 2.5}
    assert any("names the drafter but not its window" in a for a in sc["assumptions"])


@settings(max_examples=20, deadline=None)
@given(acc=st.floats(1.0, 12.0), profile=st.sampled_from(["h200-1b", "h200-llama8b-roofline"]))
def test_invariant_a_speculative_line_keeps_its_accept_length(acc, profile):
    """Invariant: whatever accept length a line without server_info reports, the scenario
    validates and its acceptance mean is that accept length (the window is widened to fit)."""
    sc, _ = scenario_from_bench(parse_run({**LINE, "server_info": None, "accept_length": acc}, "f:1"), profile)
    Scenario.model_validate({**sc, "path": ""})
    assert sc["acceptance"]["mean_accept_length"] == pytest.approx(acc)


def test_server_info_keys_the_model_does_not_use_are_named():
    info = {**LINE["server_info"], "mem_fraction_static": 0.88, "tp_size": 2, "model_path": None}
    sc, _ = scenario_from_bench(parse_run({**LINE, "server_info": info}, "f:1"), "tiny")
    (note,) = [a for a in sc["assumptions"] if "left out" in a and "tp_size" in a]
    assert "model_path" not in note   # unset keys are not "dropped"
    # mem_fraction_static is a scenario key (it sizes a default KV pool): not a dropped key; beside
    # the pool the server sized it is left out with its own note (it would cut that pool), and
    # taken where the line has no pool
    assert "mem_fraction_static" not in note and "mem_fraction_static" not in sc["server"]
    assert any("without mem_fraction_static 0.88" in a for a in sc["assumptions"])
    info.pop("max_total_num_tokens")
    sc, _ = scenario_from_bench(parse_run({**LINE, "server_info": info}, "f:1"), "tiny")
    assert sc["server"]["mem_fraction_static"] == 0.88


@pytest.mark.parametrize(("version", "width"), [
    # 0.4.x-0.5.x: ServerArgs.__post_init__ divides the chunk and scales the conservativeness
    ("0.4.6", {"dp_size": 4}),
    # 0.5.23: handle_deprecated_dp_attention moves the width to attn_dp_size (dp_size 1), and
    # resolved_dict reports enable_dp_attention true and the resolved (divided) values
    ("0.5.23", {"dp_size": 1, "attn_dp_size": 4}),
])
def test_a_dp_attention_server_info_gives_the_server_values_not_the_ranks(version, width):
    """/server_info reports a DP-attention server's arguments after SGLang's adjustment:
    chunked_prefill_size already the rank's (8192 // 4 = 2048), schedule_conservativeness
    already x 0.3. The scenario used them as the server's, so the simulator divided again
    (512-token chunks) and scaled again (0.09); 0.5.23's dp_size 1 made a 4-rank server one
    rank. A specsched line's server_info is the scenario's own and is read as written."""
    from specsched.sim.dp_attention import rank_server_args
    from specsched.sim.server_args import ServerArgs

    info = {**LINE["server_info"], "speculative_algorithm": None, "enable_dp_attention": True,
            "chunked_prefill_size": 2048, "schedule_conservativeness": 0.3, "max_running_requests": 64, **width}
    sc, _ = scenario_from_bench(parse_run({**LINE, "server_info": info}, "f:1"), "h200-1b")
    srv = sc["server"]
    assert (srv["enable_dp_attention"], srv["dp_size"], srv["chunked_prefill_size"]) == (True, 4, 8192)
    assert srv["schedule_conservativeness"] == pytest.approx(1.0)
    rank = rank_server_args(ServerArgs.model_validate(srv))
    assert (rank.chunked_prefill_size, rank.max_running_requests) == (2048, 16)
    assert rank.schedule_conservativeness == pytest.approx(0.3)
    assert any("DP attention" in a for a in sc["assumptions"]), version
    own = {**info, "dp_size": 4, "chunked_prefill_size": 8192, "schedule_conservativeness": 1.0,
           "specsched": {"scenario": "x"}}
    sc, _ = scenario_from_bench(parse_run({**LINE, "server_info": own}, "f:1"), "h200-1b")
    assert (sc["server"]["dp_size"], sc["server"]["chunked_prefill_size"]) == (4, 8192)


def test_a_pd_line_gives_a_colocated_scenario_that_runs_and_says_so(tmp_path, capsys):
    """0.5.23 bench_serving keeps /server_info's prefill and decode lists; from-bench took the
    decode server's arguments, disaggregation_mode included, and the scenario (one server in
    decode mode, no prefill server) stalled with a traceback. A hand-written
    disaggregation_mode is refused in one line."""
    info = {"prefill": [{"disaggregation_mode": "prefill", "chunked_prefill_size": 2048}],
            "decode": [{"disaggregation_mode": "decode", "chunked_prefill_size": 2048, "max_running_requests": 8}]}
    sc, _ = scenario_from_bench(parse_run({**LINE, "server_info": info}, "f:1"), "h200-1b")
    assert "disaggregation_mode" not in sc["server"] and sc["server"]["max_running_requests"] == 8
    assert any("prefill-decode disaggregated" in a for a in sc["assumptions"])
    run = SimEngine(Scenario.model_validate({**sc, "path": "", "workload": {**sc["workload"], "num_requests": 6}}),
                    tiny_profile()).run()
    assert int(run.summary["completed"]) == 6
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({**sc, "server": {**sc["server"], "disaggregation_mode": "decode"}}))
    assert main(["run", str(p), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "server.disaggregation_mode" in err
    assert not (tmp_path / "o").exists()


def test_a_vllm_drafter_line_gives_its_draft_length_and_per_position_rates():
    """vllm bench serve with a drafter writes its draft counts and per-position acceptance
    (accepted at position i / drafts). from-bench assumed SGLang's EAGLE default window of 4
    and a mean accept length whatever the run drafted: a vLLM server drafting 5 tokens was
    predicted with 3 draft steps and a flat per-position rate."""
    uncond = [0.8, 0.6, 0.42, 0.25, 0.1]
    line = {**LINE, "server_info": None, "accept_length": None, "spec_decode_acceptance_length": 1 + sum(uncond),
            "spec_decode_num_drafts": 100, "spec_decode_draft_tokens": 500, "spec_decode_accepted_tokens": 217,
            "spec_decode_per_position_acceptance_rates": uncond}
    sc, _ = scenario_from_bench(parse_run(line, "f:1"), "h200-llama8b-roofline")
    srv = sc["server"]
    assert (srv["speculative_num_steps"], srv["speculative_num_draft_tokens"]) == (5, 6)
    # the line gives the draft length: the assumption said it named "neither the drafter kind nor its window"
    (note,) = [n for n in sc["assumptions"] if "decoded speculatively" in n]
    assert "names its draft length but not the drafter kind" in note and "neither" not in note, note
    rates = sc["acceptance"]["per_position_rates"]
    assert np.cumprod(rates) == pytest.approx(uncond, abs=1e-5)
    run = SimEngine(Scenario.model_validate({**sc, "path": "", "workload": {
        "kind": "burst", "num_requests": 64, "input_len": {"kind": "fixed", "value": 64},
        "output_len": {"kind": "fixed", "value": 400}}}), load_profile("h200-llama8b-roofline")).run()
    assert run.summary["accept_length"] == pytest.approx(1 + sum(uncond), rel=0.03)
    # an SGLang line (no draft counts) keeps the assumed default drafter and its mean
    sc, _ = scenario_from_bench(parse_run({**LINE, "server_info": None, "accept_length": 2.2}, "f:1"),
                                "h200-llama8b-roofline")
    assert sc["server"]["speculative_num_draft_tokens"] == 4 and sc["acceptance"] == {"mean_accept_length": 2.2}


def test_a_shared_prefix_dataset_line_says_its_sharing_is_not_in_the_scenario():
    """A generated-shared-prefix run reuses its system prompts in the radix cache; its line
    holds no gsp_* arguments, and from-bench built prompts that share nothing without a word,
    so the prediction computed every system prompt the server had cached."""
    line = {**LINE, "dataset_name": "generated-shared-prefix", "total_input_tokens": 30 * 2100,
            "total_output_tokens": 30 * 40, "server_info": None}
    sc, _ = scenario_from_bench(parse_run(line, "f:1"), "h200-1b")
    assert any("workload.shared_prefix" in a for a in sc["assumptions"])
    sc, _ = scenario_from_bench(parse_run({**line, "dataset_name": "random"}, "f:1"), "h200-1b")
    assert not any("shared_prefix" in a for a in sc["assumptions"])


def test_drawn_arrivals_say_so_when_the_line_holds_its_send_times():
    """A line that holds its send times (specsched's own lines, vllm --save-detailed) built
    with the default ``--arrivals rate`` is another arrival draw than the measured run: the
    scenario says so and names the replay, a line without send times gets no such note."""
    line = dict(LINE, num_prompts=3, input_lens=[600, 500, 400], output_lens=[40, 30, 20], ttfts=[0.03] * 3,
                start_times=[0.0, 0.05, 0.1])
    with_times = parse_run(line, "runs.jsonl:1")
    sc, _ = scenario_from_bench(with_times, "h200-1b")
    assert any("--arrivals details" in a for a in sc["assumptions"])
    sc, _ = scenario_from_bench(parse_run(dict(LINE), "runs.jsonl:1"), "h200-1b")
    assert not any("--arrivals details" in a for a in sc["assumptions"])


@pytest.mark.parametrize(("tp", "dp", "said"), [(4, None, True), (1, None, False), (4, 4, True), (8, 2, True)])
def test_a_line_of_another_tp_size_than_the_profile_is_said(tp, dp, said):
    """server_info tp_size 4 against a TP1 profile was left out silently: the scenario then
    predicts a TP1 server. Said in the assumptions (a dp_size without DP attention is replicas
    of tp_size GPUs each, and tp_size 8 with dp_size 2 was left out silently too). With DP
    attention too, worded for it: tp_size counts the GPUs its ranks share, the MLP split over
    all of them, which a TP1 profile read per rank does not price (it said nothing)."""
    attention = {"enable_dp_attention": True} if dp and dp == tp else {}
    info = LINE["server_info"] | {"tp_size": tp} | ({"dp_size": dp} | attention if dp else {})
    run = parse_run(LINE | {"server_info": info}, "runs.jsonl:1")
    prof = str(ROOT / "profiles" / "h100-llama-3.1-8b-eagle3-analytic.yaml")
    assert load_profile(prof).hardware.tp_size == 1
    sc, _ = scenario_from_bench(run, prof)
    notes = [n for n in sc["assumptions"] if "prices tp_size" in n]
    assert bool(notes) is said
    if said:
        assert "tp_size 1" in notes[0] and f"tp_size {tp}" in notes[0] and f"--tp {tp}" in notes[0]
        assert ("with DP attention (4 attention ranks" in notes[0]) is bool(attention), notes[0]


@pytest.mark.parametrize(("quant", "said"), [("fp8", True), ("awq", True), (None, False), ("bf16-unknown", False)])
def test_a_line_of_another_weight_format_than_the_profile_is_said(quant, said):
    """server_info quantization fp8 against a bf16 analytic profile was listed among the
    unused keys only: the scenario then predicts bf16 weights, a decode step ~1.7x the
    server's. Said as a setup mismatch naming the --dtype that prices it."""
    info = LINE["server_info"] | ({"quantization": quant} if quant else {})
    prof = str(ROOT / "profiles" / "h100-llama-3.1-8b-eagle3-analytic.yaml")
    assert load_profile(prof).analytic["dtype"] == "bf16"
    sc, _ = scenario_from_bench(parse_run(LINE | {"server_info": info}, "runs.jsonl:1"), prof)
    notes = [n for n in sc["assumptions"] if n.startswith("setup mismatch: ") and "quantization" in n]
    assert bool(notes) is said
    if said:
        assert "prices bf16 weights" in notes[0] and f"--dtype {'fp8' if quant == 'fp8' else 'int4'}" in notes[0]


@pytest.mark.parametrize(("line", "said"), [({"backend": "vllm"}, "vLLM"), ({"backend": "lmdeploy"}, "LMDeploy"),
                                            ({"backend": "sglang"}, None), ({"backend": "openai"}, "unknown")])
def test_a_line_of_another_server_than_sglang_is_said(line, said):
    """A vllm bench serve (or bench_serving --backend vllm) line with no SGLang server_info was
    predicted with SGLang's scheduler without a word: said as a setup mismatch naming the
    server (and, for vLLM, the closest SGLang setting); an OpenAI-compatible backend is said as
    unknown; a line with SGLang's server_info is SGLang's whatever its client backend."""
    base = {k: v for k, v in LINE.items() if k != "server_info"}
    sc, _ = scenario_from_bench(parse_run(base | line, "runs.jsonl:1"), "h100-llama-3.1-8b-eagle3-analytic")
    mism = [n for n in sc["assumptions"] if n.startswith("setup mismatch: ") and "not SGLang" in n]
    unknown = [n for n in sc["assumptions"] if "does not say which server ran" in n]
    assert bool(mism) is (said not in (None, "unknown")) and bool(unknown) is (said == "unknown")
    if mism:
        assert f"a {said} server" in mism[0]
        assert ("enable_mixed_chunk" in mism[0]) is (said == "vLLM")
    sc2, _ = scenario_from_bench(parse_run(LINE | line, "runs.jsonl:1"), "h100-llama-3.1-8b-eagle3-analytic")
    assert not any("not SGLang" in n for n in sc2["assumptions"])   # SGLang's server_info: an SGLang server


@pytest.mark.parametrize(("kv", "said"), [("fp8_e4m3", True), ("bf16", False), ("auto", False), (None, False)])
def test_a_line_of_another_kv_cache_dtype_than_the_profile_is_said(kv, said):
    """server_info kv_cache_dtype fp8_e4m3 against a bf16-KV analytic profile was listed among
    the unused keys only: the scenario then predicts half the pool the server had. Said as a
    setup mismatch ('auto' resolves per model and GPU: not compared)."""
    info = LINE["server_info"] | ({"kv_cache_dtype": kv} if kv else {})
    prof = str(ROOT / "profiles" / "h100-llama-3.1-8b-eagle3-analytic.yaml")
    assert load_profile(prof).analytic["model"]["kv_cache_bytes"] == 2
    sc, _ = scenario_from_bench(parse_run(LINE | {"server_info": info}, "runs.jsonl:1"), prof)
    notes = [n for n in sc["assumptions"] if n.startswith("setup mismatch: ") and "kv_cache_dtype" in n]
    assert bool(notes) is said
    if said:
        assert "'fp8_e4m3' (1 byte(s))" in notes[0] and "--kv-cache-dtype fp8_e4m3" in notes[0]


def _failing_line(n_failed: int, **change):
    """LINE with --output-details of 40 requests, ``n_failed`` of them failed (SGLang 0.5.23
    benchmark/serving.py: a failed request keeps output_len 0, ttft 0.0, itl [] and its error)."""
    n = 40
    ok = [i >= n_failed for i in range(n)]
    return {**LINE, "completed": sum(ok), "input_lens": [500] * n, "output_lens": [40 if k else 0 for k in ok],
            "ttfts": [0.05 if k else 0.0 for k in ok], "itls": [[0.01] * 39 if k else [] for k in ok],
            "errors": ["" if k else "Bad Request" for k in ok], **change}


@pytest.mark.parametrize("rate, conc, kind", [(20.0, 5, "poisson"), (math.inf, None, "burst"), (math.inf, 7, "closed_loop")])
def test_failed_requests_are_not_sent_and_a_rate_is_thinned_to_span_the_same_run(rate, conc, kind):
    """bench_serving (0.5.23 benchmark/serving.py calculate_metrics) counts only successful
    requests in completed, the token totals and the throughputs, over the whole run's
    duration; a scenario that sent the failed ones too predicted completed and throughput
    high by the failed share. It sends the successes, at the line's rate x their share."""
    run = parse_run(_failing_line(10, request_rate=rate, max_concurrency=conc), "f:1")
    sc, _ = scenario_from_bench(run, "tiny")
    w = sc["workload"]
    assert (w["kind"], w["num_requests"]) == (kind, 30)
    if kind == "poisson":
        assert w["request_rate"] == pytest.approx(15.0) and w["max_concurrency"] == 5
    note = next(a for a in sc["assumptions"] if "failed" in a)
    assert "10 of the line's 40 requests failed" in note and "30 that succeeded" in note
    assert ("15 req/s" in note) == (kind == "poisson")
    # vLLM writes num_prompts and failed, and no details: the same
    vllm = {k: v for k, v in _failing_line(10, request_rate=rate, max_concurrency=conc).items()
            if k not in ("input_lens", "output_lens", "ttfts", "itls", "errors")}
    sc2, _ = scenario_from_bench(parse_run({**vllm, "num_prompts": 40, "failed": 10}, "f:1"), "tiny")
    assert sc2["workload"]["num_requests"] == 30 and sc2["workload"].get("request_rate") == w.get("request_rate")
    # no failure: as before
    sc3, _ = scenario_from_bench(parse_run(_failing_line(0, request_rate=rate, max_concurrency=conc), "f:1"), "tiny")
    assert sc3["workload"]["num_requests"] == 40 and sc3["workload"].get("request_rate") == (rate if kind == "poisson" else None)
    assert not any("failed" in a for a in sc3["assumptions"])


def test_validate_bench_predicts_the_successes_and_says_so_with_a_scenario_that_sends_all(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = _write(tmp_path, _failing_line(10, request_rate=math.inf, max_concurrency=None))
    assert main(["validate-bench", str(p), "--profile", "h200-1b", "--seeds", "1", "--out", "a"]) == 0
    out = capsys.readouterr().out
    assert "assumed: requests: 10 of the line's 40 requests failed" in out
    assert "note: the scenario sends 30 requests" not in out
    row = next(r for r in out.splitlines() if r.lstrip().startswith("completed"))
    assert [float(x) for x in row.split()[1:3]] == [30, 30], row
    sc = tmp_path / "all.yaml"
    sc.write_text((tmp_path / "a" / "from-bench.yaml").read_text().replace("num_requests: 30", "num_requests: 40"))
    assert main(["validate-bench", str(p), "--scenario", str(sc), "--seeds", "1", "--out", "b"]) == 0
    notes = [x for x in capsys.readouterr().out.splitlines() if x.startswith("note:")]
    assert any("10 of the measured run's 40 requests failed" in x and "sends all 40" in x for x in notes), notes



@pytest.mark.parametrize("given", [{}, 8, "x"])
def test_a_chain_window_sglang_resets_is_written_as_sglang_runs_it(given):
    """With topk 1 SGLang runs num_steps + 1 draft tokens whatever server_info says
    (0.5.23 arg_groups/speculative_hook.py _handle_eagle_family); a fuzzed
    speculative_num_draft_tokens of {} passed through into the scenario and was a TypeError
    traceback capping the accept length (8 capped it at a window SGLang never ran)."""
    info = {**LINE["server_info"], "speculative_algorithm": "EAGLE", "speculative_num_steps": 3,
            "speculative_eagle_topk": 1, "speculative_num_draft_tokens": given}
    sc, _ = scenario_from_bench(parse_run({**LINE, "server_info": info, "accept_length": 3.9}, "f:1"), "tiny")
    assert sc["server"]["speculative_num_draft_tokens"] == 4
    assert sc["acceptance"]["mean_accept_length"] == pytest.approx(3.9)
    assert any("speculative_num_draft_tokens" in a and "4" in a for a in sc["assumptions"]), sc["assumptions"]
    Scenario.model_validate({**sc, "profile": "h200-1b"})


def test_an_accept_length_past_the_servers_window_is_said_where_it_is_cut():
    """An accept length above the window server_info names (9.5 at speculative_num_steps 3,
    topk 1: 4 tokens verified) cannot come from that server; the scenario verifies at most the
    window, and the assumptions said 'mean accept length 9.500 from the line' beside a scenario
    holding 4.0: now one setup-mismatch note (printed as a warning) names the cut."""
    info = {**LINE["server_info"], "speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
            "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}
    sc, _ = scenario_from_bench(parse_run({**LINE, "server_info": info, "accept_length": 9.5}, "f:1"), "tiny")
    assert sc["acceptance"] == {"mean_accept_length": 4.0}
    (note,) = [a for a in sc["assumptions"] if "9.500" in a]
    assert note.startswith("setup mismatch: ") and "4" in note and "window" in note, note


def test_a_profile_file_given_from_the_working_folder_is_found_wherever_the_scenario_runs(tmp_path, monkeypatch, capsys):
    """``--profile my.yaml --out sub/s.yaml``: the scenario names the profile relative to its own
    folder, as a scenario's profile path is read, so it runs from any folder (it wrote
    ``profile: my.yaml``, which only resolved from the folder the command ran in)."""
    work, other = tmp_path / "work", tmp_path / "other"
    work.mkdir()
    other.mkdir()
    (work / "my.yaml").write_text((ROOT / "profiles" / "h200-1b.yaml").read_text())
    monkeypatch.chdir(work)
    p = _write(tmp_path, LINE)
    assert main(["scenario", "from-bench", str(p), "--profile", "my.yaml", "--out", "sub/s.yaml"]) == 0
    assert yaml.safe_load((work / "sub" / "s.yaml").read_text())["profile"] == "../my.yaml"
    monkeypatch.chdir(other)
    assert main(["run", str(work / "sub" / "s.yaml"), "--out", str(other / "o"), "--quiet"]) == 0
    assert load_profile(load_scenario(work / "sub" / "s.yaml").profile, work / "sub" / "s.yaml").name == "h200-1b"


def test_from_bench_says_what_it_wrote_then_its_assumptions(tmp_path, monkeypatch, capsys):
    """The output names each file as written (a bare path read like an error or a prompt) and
    heads the notes as the scenario's assumptions."""
    monkeypatch.chdir(tmp_path)
    p = _write(tmp_path, LINE)
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", "s.yaml"]) == 0
    lines = capsys.readouterr().out.splitlines()
    notes = load_scenario(tmp_path / "s.yaml").assumptions
    assert lines[0] == "wrote s.yaml" and lines[1].startswith("assumptions")
    assert lines[2:] == [f"  - {n}" for n in notes] and notes


@pytest.mark.parametrize("command", ["scenario from-bench", "validate-bench"])
def test_an_unknown_profile_on_the_command_line_names_the_option(tmp_path, monkeypatch, capsys, command):
    """--profile that names no profile is the command line's fault: the error says --profile
    (validate-bench named the temporary scenario it builds, a file the user never saw)."""
    monkeypatch.chdir(tmp_path)
    p = _write(tmp_path, LINE)
    assert main([*command.split(), str(p), "--profile", "no-such-profile", "--out", "x"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("specsched: error: <command line>: --profile = 'no-such-profile': no such profile"), err
    assert len(err.splitlines()) == 1 and "h200-1b" in err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("argv", [["scenario", "from-bench", "-q"], ["scenario", "-q", "from-bench"]])
def test_quiet_from_bench_prints_only_what_it_wrote(tmp_path, monkeypatch, capsys, argv):
    """-q after from-bench was refused ("unrecognized arguments") though `scenario --help` offers
    it; either place, only the written files are printed."""
    monkeypatch.chdir(tmp_path)
    p = _write(tmp_path, LINE)
    assert main([*argv, str(p), "--profile", "h200-1b", "--out", "s.yaml"]) == 0
    assert capsys.readouterr().out.splitlines() == ["wrote s.yaml"]


def test_a_ratio_one_line_says_its_lengths_are_written_fixed(tmp_path):
    """Range ratio 1 draws one length: the scenario says kind fixed, and the note that told of
    uniform integers says why (it read as if the lengths were drawn)."""
    sc, _ = scenario_from_bench(parse_run({**LINE, "random_range_ratio": 1.0}, "f:1"), "tiny")
    assert sc["workload"]["input_len"]["kind"] == "fixed"
    assert any("written as kind fixed" in n for n in sc["assumptions"])
    sc, _ = scenario_from_bench(parse_run(LINE, "f:1"), "tiny")
    assert sc["workload"]["input_len"]["kind"] == "uniform"
    assert not any("kind fixed" in n for n in sc["assumptions"])


@pytest.mark.parametrize(("width", "per_rank"), [({}, 3950), ({"enable_dp_attention": True, "attn_dp_size": 4}, 1000)])
def test_an_unset_max_running_requests_is_the_one_the_server_ran_with(width, per_rank):
    """SGLang 0.5.23 leaves ``max_running_requests`` null in /server_info when the launch did
    not set it (no speculative decoding) and sizes it from the KV pool at start
    (kv_cache_configurator.py ``resolve_max_num_reqs``: 2048-4096 here); the value it ran with
    is ``internal_states[i].effective_max_running_requests_per_dp`` (internal_state.py
    ``_add_topology``). The scenario kept specsched's 256 (a profile without a hardware
    block cannot size it), so a burst of 1000 ran 256 at a time on a server that ran them all."""
    from specsched.sim.dp_attention import rank_server_args
    from specsched.sim.server_args import ServerArgs

    info = {**LINE["server_info"], "speculative_algorithm": None, "max_running_requests": None,
            "max_total_num_tokens": 1011250, "chunked_prefill_size": 8192, **width,
            "internal_states": [{"effective_max_running_requests_per_dp": per_rank, "last_gen_throughput": 1.0}]}
    sc, _ = scenario_from_bench(parse_run({**LINE, "server_info": info}, "f:1"), "h200-1b")
    n = width.get("attn_dp_size", 1)
    assert sc["server"]["max_running_requests"] == per_rank * n
    assert rank_server_args(ServerArgs.model_validate(sc["server"])).max_running_requests == per_rank
    (note,) = [a for a in sc["assumptions"] if "effective_max_running_requests_per_dp" in a]
    assert str(per_rank) in note
    # a value the launch set is the server's own: kept as written
    set_info = {**info, "max_running_requests": 64 * n}
    sc, _ = scenario_from_bench(parse_run({**LINE, "server_info": set_info}, "f:1"), "h200-1b")
    assert sc["server"]["max_running_requests"] == 64 * n
    # unless the server cut it to its pool (min(asked per rank, token capacity // 2)): then
    # the limit it ran with
    asked = {**info, "max_running_requests": 8192 * n}
    sc, _ = scenario_from_bench(parse_run({**LINE, "server_info": asked}, "f:1"), "h200-1b")
    assert sc["server"]["max_running_requests"] == per_rank * n
    assert any("cut by the server" in a and str(8192 * n) in a for a in sc["assumptions"])


def test_a_cross_field_refusal_drops_only_the_key_it_names():
    """A /server_info whose arguments the model refuses across fields (a model validator, so
    pydantic gives no field location): schedule_policy shortest-prefill-first beside
    disable_radix_cache, which SGLang refuses to start with. from-bench dropped the line's
    server arguments one by one from the first (max_running_requests, the pool, the chunk,
    ...) until the refusal stopped: the scenario kept none of them. Only the key the refusal
    names is left out."""
    info = {**LINE["server_info"], "speculative_algorithm": None, "schedule_policy": "shortest-prefill-first",
            "disable_radix_cache": True, "max_running_requests": 1024}
    sc, _ = scenario_from_bench(parse_run({**LINE, "server_info": info}, "f:1"), "h200-1b")
    srv = sc["server"]
    assert "schedule_policy" not in srv and srv["disable_radix_cache"] is True
    assert (srv["max_running_requests"], srv["chunked_prefill_size"], srv["max_total_num_tokens"]) == (1024, 2048, 100000)
    dropped = [a for a in sc["assumptions"] if "not usable by the model" in a]
    assert len(dropped) == 1 and dropped[0].startswith("server_info schedule_policy = 'shortest-prefill-first'"), dropped


def test_a_stream_interval_is_the_scenarios_own():
    """SGLang's --stream-interval N (0.5.23 output_streamer.py ``accept``: the first token at
    once, then a chunk whenever N tokens are unsent) is now modelled
    (sim/output_streamer.py): server_info's value becomes the scenario's
    ``server.stream_interval``, not an assumption line saying it is not modelled."""
    info = {**LINE["server_info"], "speculative_algorithm": None, "stream_interval": 8}
    sc, _ = scenario_from_bench(parse_run({**LINE, "server_info": info}, "f:1"), "h200-1b")
    assert sc["server"]["stream_interval"] == 8
    assert not any("stream_interval" in a and "not modelled" in a for a in sc["assumptions"])
    assert not any("left out" in a and "stream_interval" in a for a in sc["assumptions"])
    # the other settings a client measures and the model does not have, each on its own line
    more = {**info, "num_continuous_decode_steps": 4, "enable_hierarchical_cache": True, "scheduler_recv_interval": 1}
    notes = scenario_from_bench(parse_run({**LINE, "server_info": more}, "f:1"), "h200-1b")[0]["assumptions"]
    assert any(a.startswith("server_info num_continuous_decode_steps 4") and "TTFT" in a for a in notes)
    assert any(a.startswith("server_info enable_hierarchical_cache True") for a in notes)
    assert not any("scheduler_recv_interval" in a for a in notes)


def test_a_random_line_whose_outputs_stopped_early_is_built_with_the_outputs_it_made(tmp_path, monkeypatch):
    """bench_serving asks each random request for exactly its drawn output length (ignore_eos
    on); with --disable-ignore-eos outputs end at the model's end-of-sequence token. Such a
    line (1024 asked at ratio 1, 312 made on average) was built to generate every token
    asked: more than three times the decode work measured. The measured outputs are used
    (the details' histogram, else their mean), and the notes say why."""
    short = {**LINE, "random_output_len": 1024, "random_range_ratio": 1.0, "completed": 100,
             "total_output_tokens": 31200, "server_info": None}
    sc, tables = scenario_from_bench(parse_run(short, "f:1"), "h200-1b")
    assert sc["workload"]["output_len"] == {"kind": "fixed", "value": 312} and not tables
    assert sc["workload"]["input_len"] == {"kind": "fixed", "value": 600}
    (note,) = [a for a in sc["assumptions"] if "stopped early" in a]
    assert "312.0 tokens per completed request" in note and "1024" in note and "--disable-ignore-eos" in note
    outs = [100, 300, 536, 312]
    detailed = {**short, "completed": 4, "total_output_tokens": sum(outs), "input_lens": [600] * 4,
                "output_lens": outs, "ttfts": [0.05] * 4, "itls": [[0.01] * (o - 1) for o in outs], "errors": [""] * 4}
    sc, tables = scenario_from_bench(parse_run(detailed, "f:1"), "h200-1b")
    assert sorted(tables["output"]["length"]) == sorted(outs) and sc["workload"]["output_len"]["kind"] == "file"
    monkeypatch.chdir(tmp_path)   # the written scenario runs with the histogram beside it
    p = tmp_path / "runs.jsonl"
    p.write_text(json.dumps(detailed) + "\n")
    assert main(["scenario", "from-bench", f"{p}:1", "--profile", "h200-1b", "--out", "s.yaml", "-q"]) == 0
    assert load_scenario(str(tmp_path / "s.yaml")).workload.output_len.kind == "file"
    # a line that made what it asked (within the draw's spread) keeps the arguments
    ok = {**LINE, "completed": 30, "total_output_tokens": 30 * 25}
    sc, _ = scenario_from_bench(parse_run(ok, "f:1"), "h200-1b")
    assert sc["workload"]["output_len"] == {"kind": "uniform", "value": 40, "range_ratio": 0.25}


def test_a_template_keeps_what_its_file_states_even_a_schema_default():
    """A ``--template`` (``--scenario-template`` of calibrate --from) states the server the run
    had: ``admission_delay: none`` is the schema's default but a choice for DSpark, whose
    automatic min_free_slots delay (sim/defaults.py resolve_server, SGLang's default for
    block drafters) must not come back; the keys the file leaves out are the run's profile's
    defaults, not the template profile's. (Dumping the template without its defaults lost the
    stated none: a hold-out replay of H200 round 31's 24 req/s run then predicted median ITL
    5.17 ms where the run's own prediction is 6.22.)"""
    run = parse_run({**LINE, "request_rate": 8.0, "max_concurrency": None, "accept_length": 3.1}, "x.jsonl:1")
    sc, _ = scenario_from_bench(run, "h200-1b", template=str(ROOT / "scenarios/h200/poisson-spec.yaml"))
    assert sc["server"]["admission_delay"] == "none" and sc["server"]["speculative_algorithm"] == "dspark"
    assert sc["acceptance"] == {"mean_accept_length": 3.2394, "request_spread": 0.2556}
    written = set(yaml.safe_load((ROOT / "scenarios/h200/poisson-spec.yaml").read_text())["server"])
    assert set(sc["server"]) == written
    built = Scenario.model_validate({**sc, "path": ""})
    from specsched.sim.defaults import apply_hardware_defaults
    assert apply_hardware_defaults(built)[0].server.admission_delay == "none"


def test_a_profile_given_as_a_stream_is_copied_beside_the_scenario(tmp_path, monkeypatch):
    """``--profile <(...)`` (a pipe, read once): the scenario names a copy of its bytes written
    beside it (``<stem>-profile.yaml``), not ``/dev/fd/N``, which is gone once the command
    ends; the scenario then runs from another folder."""
    import os
    import threading

    monkeypatch.chdir(tmp_path)
    p = _write(tmp_path, {**LINE, "completed": 4, "max_concurrency": 2})
    text = (ROOT / "profiles" / "h200-1b.yaml").read_bytes()
    fifo = tmp_path / "profile.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(text))
    writer.start()
    assert main(["scenario", "from-bench", str(p), "--profile", str(fifo), "--out", "built/s.yaml", "-q"]) == 0
    writer.join()
    sc = yaml.safe_load((tmp_path / "built" / "s.yaml").read_text())
    assert sc["profile"] == "s-profile.yaml"
    assert (tmp_path / "built" / "s-profile.yaml").read_bytes() == text
    fifo.unlink()
    monkeypatch.chdir(ROOT)   # another folder: the copy is found beside the scenario
    assert main(["run", str(tmp_path / "built" / "s.yaml"), "--out", str(tmp_path / "r"), "-q"]) == 0
    assert (tmp_path / "r" / "summary.json").exists()


def test_a_line_read_from_a_stream_gets_a_name_of_its_own(tmp_path):
    """A results file given as a stream (``<(zcat runs.jsonl.gz)``, ``/dev/fd/63``) has no name:
    the scenario is ``bench_serving-lineN``, not ``63-lineN``; a file keeps its stem."""
    import os
    import threading

    fifo = tmp_path / "63"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text(json.dumps(LINE) + "\n"))
    writer.start()
    run = read_bench(fifo)[0]
    writer.join()
    assert scenario_from_bench(run, "h200-1b")[0]["name"] == "bench_serving-line1"
    p = _write(tmp_path, LINE)
    assert scenario_from_bench(read_bench(p)[0], "h200-1b")[0]["name"] == "runs-line1"


def test_a_multimodal_line_says_its_vision_tokens_are_prefilled_as_text():
    """SGLang's image/mmmu datasets count the image tokens in total_input_tokens
    (total_input_vision_tokens, 0.5.4 on): the built prompts hold them, the vision encoder's
    time in the measured TTFT is not modelled, and nothing said so."""
    line = {**LINE, "dataset_name": "image", "total_input_tokens": 4000, "total_input_text_tokens": 1000,
            "total_input_vision_tokens": 3000, "total_output_tokens": 1200}
    sc, _ = scenario_from_bench(parse_run(line, "f:1"), "tiny")
    said = [a for a in sc["assumptions"] if "vision" in a]
    assert len(said) == 1 and "3000 vision tokens" in said[0] and "75%" in said[0] and "not modelled" in said[0]
    for text_only in ({**LINE, "total_input_vision_tokens": 0}, LINE):
        sc, _ = scenario_from_bench(parse_run(text_only, "f:1"), "tiny")
        assert not any("vision" in a for a in sc["assumptions"])


def test_a_sharegpt_line_replays_its_own_tokens_per_request(tmp_path, monkeypatch):
    """A sharegpt line without details: the shipped histograms scaled to the line's own
    tokens per completed request (a line of 100 output tokens a request replayed at the
    histogram's ~203 was +100 % output tokens); with details: the run's own lengths."""
    monkeypatch.chdir(tmp_path)
    line = {**LINE, "dataset_name": "sharegpt", "sharegpt_output_len": None, "completed": 50,
            "total_input_tokens": 10_000, "total_output_tokens": 5_000}
    sc, tables = scenario_from_bench(parse_run(line, "f:1"), "tiny")
    for side, mean in (("input", 200), ("output", 100)):
        t = tables[side]
        assert sc["workload"][f"{side}_len"] == {"kind": "file", "path": f"<{side}>"}
        assert (t["length"] >= 1).all() and t["weight"].sum() == pytest.approx(1.0)
        assert float(t["length"] @ t["weight"]) == pytest.approx(mean, rel=0.01)
    assert any("scaled" in a for a in sc["assumptions"])
    # sharegpt_output_len fixes the outputs; only the inputs are scaled
    sc, tables = scenario_from_bench(parse_run({**line, "sharegpt_output_len": 64}, "f:1"), "tiny")
    assert sc["workload"]["output_len"] == {"kind": "fixed", "value": 64} and set(tables) == {"input"}
    # per-request details: the run's own lengths, not the shipped shape
    detail = {**line, "input_lens": [5, 7, 7], "output_lens": [3, 3, 9], "ttfts": [0.1] * 3,
              "itls": [[0.01] * 2, [0.01] * 2, [0.01] * 8], "errors": ["", "", ""]}
    sc, tables = scenario_from_bench(parse_run(detail, "f:1"), "tiny")
    assert tables["input"]["length"].tolist() == [5, 7] and tables["output"]["length"].tolist() == [3, 9]
    # the written scenario runs, and its tokens per request are the line's
    p = tmp_path / "sg.jsonl"
    p.write_text(json.dumps(line) + "\n")
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", str(tmp_path / "sg.yaml")]) == 0
    s = load_scenario(str(tmp_path / "sg.yaml"))
    assert s.workload.input_len.path == "sg-input-lengths.csv"


@pytest.mark.parametrize(("model", "said"), [("meta-llama/Llama-3.1-70B-Instruct", True),
                                             ("meta-llama/Meta-Llama-3.1-8B-Instruct", False),
                                             ("/models/Llama-3.1-8B", False), (None, False)])
def test_a_line_of_another_model_than_the_profile_is_a_warning(tmp_path, monkeypatch, capsys, model, said):
    """A 70B server's line against an 8B analytic profile was accepted silently: now a setup
    mismatch, in the assumptions and as a ``warning:`` line on stderr (a TP mismatch too)."""
    monkeypatch.chdir(tmp_path)
    info = LINE["server_info"] | ({"model_path": model} if model else {})
    prof = str(ROOT / "profiles" / "h100-llama-3.1-8b-eagle3-analytic.yaml")
    sc, _ = scenario_from_bench(parse_run(LINE | {"server_info": info}, "runs.jsonl:1"), prof)
    notes = [n for n in sc["assumptions"] if n.startswith("setup mismatch: ") and "model" in n]
    assert bool(notes) is said
    p = _write(tmp_path, LINE | {"server_info": info | {"tp_size": 4}})
    assert main(["scenario", "from-bench", str(p), "--profile", prof, "--out", str(tmp_path / "s.yaml")]) == 0
    err = capsys.readouterr().err.splitlines()
    warnings = [e for e in err if e.startswith("warning: ")]
    assert any("tp_size 4" in w for w in warnings)
    assert any("Llama-3.1-70B" in w for w in warnings) is said


def test_quiet_from_bench_still_warns_of_a_setup_mismatch(tmp_path, monkeypatch, capsys):
    """-q promises only the written files on stdout (the assumptions are in the scenario), but
    it also dropped the stderr warning that the line's server ran tp_size 4 against a TP-1
    profile: the scenario was written silently for another setup. The warning stays."""
    monkeypatch.chdir(tmp_path)
    prof = str(ROOT / "profiles" / "h100-llama-3.1-8b-eagle3-analytic.yaml")
    p = _write(tmp_path, LINE | {"server_info": LINE["server_info"] | {"tp_size": 4}})
    assert main(["scenario", "from-bench", str(p), "--profile", prof, "--out", "s.yaml", "-q"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == ["wrote s.yaml"]
    assert [e for e in err.splitlines() if e.startswith("warning: ") and "tp_size 4" in e], err


def test_an_accept_length_is_kept_when_server_info_leaves_the_draft_tokens_null():
    """server_info with a chain drafter's steps and topk 1 but speculative_num_draft_tokens
    null: the model verifies steps + 1 tokens, and the line's accept length 3.05 was clipped
    to a window of 1 (mean_accept_length 1.0: no token accepted)."""
    info = {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
            "speculative_num_draft_tokens": None}
    run = parse_run({**LINE, "server_info": info, "accept_length": 3.05}, "f:1")
    sc, _ = scenario_from_bench(run, "profiles/h100-llama-3.1-8b-eagle3-analytic.yaml")
    assert sc["acceptance"] == {"mean_accept_length": 3.05}


def test_a_chain_drafter_the_profile_cannot_price_is_refused_before_writing(tmp_path, capsys):
    """server_info names EAGLE with 3 steps and the profile has no gpu.draft_step: the scenario
    was written, then every run of it was refused naming the profile's key."""
    info = {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
            "speculative_num_draft_tokens": 4}
    p = _write(tmp_path, {**LINE, "server_info": info, "accept_length": 3.05})
    assert load_profile("h200-1b").gpu.draft_step is None
    out = tmp_path / "s.yaml"
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "runs.jsonl:1: server_info.speculative_algorithm = 'eagle'" in err[0]
    assert "gpu.draft_step" in err[0] and not out.exists()
    # a profile that prices the draft step builds it
    sc, _ = scenario_from_bench(parse_run(json.loads(p.read_text()), "f:1"),
                                "profiles/h100-llama-3.1-8b-eagle3-analytic.yaml")
    assert sc["server"]["speculative_algorithm"] == "eagle"


def test_an_accept_length_past_any_window_is_refused_in_one_line():
    """accept_length 1e6 (damaged) widened the assumed window to 1000001; resolving that window
    raised pydantic's ValidationError (a traceback) instead of the one-line refusal."""
    with pytest.raises(ConfigError, match="speculative_num_draft_tokens"):
        scenario_from_bench(parse_run({**LINE, "server_info": None, "accept_length": 1e6}, "f:1"), "h200-1b")


def test_lengths_details_on_a_line_without_details_is_refused():
    """--lengths details on a line without per-request lists fell back to the line's means,
    fixed lengths, with an assumption line only; --arrivals details refuses the same."""
    with pytest.raises(ConfigError, match="--lengths = 'details': needs the line's per-request details"):
        scenario_from_bench(parse_run(LINE, "f:1"), "tiny", lengths="details")


def test_out_naming_an_existing_folder_writes_the_scenario_in_it(tmp_path, monkeypatch):
    """--out DIR (a folder): the length histograms were written beside the folder
    (DIR-input-lengths.csv), then the YAML refused as 'cannot write .DIR.<token>.tmp: Is a
    directory': half written, naming a temporary file."""
    monkeypatch.chdir(tmp_path)
    obj = json.loads((ROOT / "tests" / "data" / "bench" / "sglang-0.5.23-details.jsonl").read_text().splitlines()[0])
    p = _write(tmp_path, {**obj, "dataset_name": "sharegpt", "tag": "mine"})
    (tmp_path / "out").mkdir()
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", "out", "-q"]) == 0
    assert sorted(x.name for x in (tmp_path / "out").iterdir()) == ["mine-input-lengths.csv", "mine-output-lengths.csv",
                                                                    "mine.yaml"]
    assert not list(tmp_path.glob("out-*")) and load_scenario(tmp_path / "out" / "mine.yaml").name == "mine"


@pytest.mark.parametrize(("key", "value", "needle"), [
    ("pp_size", 2, "pipeline parallelism (2 stages"), ("enable_two_batch_overlap", True, "two micro-batches"),
    ("cpu_offload_gb", 20, "20 GB of weights"), ("speculative_accept_threshold_single", 0.5, "relaxed acceptance"),
    # both listed among ~80 set keys the model has no argument for (the full 0.5.23 server_info)
    ("enable_prefill_delayer", True, "prefill delayer"), ("speculative_adaptive", True, "fixed window"),
])
def test_a_line_whose_server_ran_an_unmodelled_setting_says_what_it_changed(key, value, needle):
    """server_info pp_size 2 (or TBO, CPU offload, relaxed acceptance), which a scenario's
    server block refuses as not modelled, was only named among the unused keys; at SGLang's
    default it is not mentioned."""
    run = parse_run(LINE | {"server_info": LINE["server_info"] | {key: value}}, "runs.jsonl:1")
    sc, _ = scenario_from_bench(run, "h200-1b")
    notes = [n for n in sc["assumptions"] if n.startswith(f"server_info {key} ")]
    assert len(notes) == 1 and "not modelled" in notes[0] and needle in notes[0], sc["assumptions"]
    assert not any(key in n for n in sc["assumptions"] if "no argument for" in n)
    from specsched.sim.sglang_launch_args import UNMODELLED

    default = UNMODELLED[key].default
    run = parse_run(LINE | {"server_info": LINE["server_info"] | {key: default}}, "runs.jsonl:1")
    assert not any(key in n for n in scenario_from_bench(run, "h200-1b")[0]["assumptions"])


def test_a_template_whose_accept_length_is_not_the_lines_says_so():
    """--template keeps the template's acceptance; the line measured its own accept length
    (a template reused for a run on another dataset accepts differently, and the prediction's
    decode cost is then off by the difference). The assumptions name both figures; a line
    whose accept length agrees, or that has none, gets no such line."""
    tpl = str(ROOT / "scenarios/h200/poisson-spec.yaml")   # mean_accept_length 3.2394
    run = parse_run({**LINE, "request_rate": 8.0, "max_concurrency": None, "accept_length": 2.1}, "x.jsonl:1")
    sc, _ = scenario_from_bench(run, "h200-1b", template=tpl)
    note = [n for n in sc["assumptions"] if "accept length" in n]
    assert len(note) == 1 and "3.239" in note[0] and "2.100" in note[0], sc["assumptions"]
    for acc in (3.24, None):
        run = parse_run({**LINE, "request_rate": 8.0, "max_concurrency": None, "accept_length": acc}, "x.jsonl:1")
        sc, _ = scenario_from_bench(run, "h200-1b", template=tpl)
        assert not [n for n in sc["assumptions"] if "accept length" in n], sc["assumptions"]


def test_a_line_naming_a_drafter_the_model_lacks_says_what_it_named():
    """A line whose server_info names SGLang's NGRAM (a host-side n-gram lookup the model does
    not have: a scenario naming it is refused) was built with an assumed EAGLE chain, saying the
    line "names neither the drafter kind nor its window", though it named both. The assumption
    now names what the line said and that it is not modelled."""
    info = {"speculative_algorithm": "NGRAM", "speculative_num_draft_tokens": 12}
    run = parse_run({**LINE, "server_info": info, "accept_length": 2.9}, "f:1")
    sc, _ = scenario_from_bench(run, "h100-llama-3.1-8b-eagle3-analytic")
    (note,) = [n for n in sc["assumptions"] if "decoded speculatively" in n]
    assert "neither" not in note and "NGRAM" in note and "not modelled" in note, note
    assert sc["server"]["speculative_algorithm"] == "eagle"



@pytest.mark.parametrize("profile,algo", [("h100-llama-3.1-8b-eagle3-analytic", "eagle"), ("h200-1b", "dspark")])
def test_an_unmodelled_drafters_window_from_server_info_is_the_assumed_window(profile, algo):
    """An NGRAM line's server_info says the window its server verified
    (speculative_num_draft_tokens 8: the tokens of its draft tree each request verifies a step,
    srt/speculative/ngram_worker.py); the stand-in drafter was given SGLang's default EAGLE
    window 4 (or the profile's block window) beside it. It now verifies the server's window,
    and the assumption says that the draft is the stand-in's, not NGRAM's."""
    info = {"speculative_algorithm": "NGRAM", "speculative_num_draft_tokens": 8}
    run = parse_run({**LINE, "server_info": info, "accept_length": 2.9}, "f:1")
    sc, _ = scenario_from_bench(run, profile)
    srv = sc["server"]
    assert srv["speculative_algorithm"] == algo and srv["speculative_num_draft_tokens"] == 8, srv
    if algo == "eagle":
        assert srv["speculative_num_steps"] == 7 and srv["speculative_eagle_topk"] == 1, srv
    (note,) = [n for n in sc["assumptions"] if "decoded speculatively" in n]
    assert "speculative_num_draft_tokens 8" in note and "server_info" in note and "NGRAM" in note, note
    assert "no draft forward" in note, note
    Scenario.model_validate({k: v for k, v in sc.items() if k != "assumptions"} | {"profile": profile})

def test_trace_rate_line_with_send_times_is_replayed(tmp_path, monkeypatch):
    """A line that says ``request_rate: "trace"`` and holds its send times (``start_times``: a
    trace replay that specsched's ``run`` or the runtime's ``measure`` wrote as bench_serving)
    is built as that replay under the default ``--arrivals``: it was refused as "cannot be
    rebuilt from its result line", though ``--arrivals details``, ``validate --measured`` and
    ``calibrate --from`` all replayed it. SGLang's own trace lines (no send times) stay refused."""
    monkeypatch.chdir(tmp_path)
    line = {"backend": "specsched-sim", "dataset_name": "trace", "request_rate": "trace", "completed": 4,
            "duration": 3.0, "median_ttft_ms": 30.0, "output_throughput": 30.0,
            "input_lens": [100, 200, 300, 400], "output_lens": [10, 20, 30, 40], "ttfts": [0.03] * 4,
            "itls": [[0.01] * 9, [0.01] * 19, [0.01] * 29, [0.01] * 39], "errors": [""] * 4,
            "generated_texts": [""] * 4, "start_times": [0.0, 0.5, 1.25, 2.0]}
    p = _write(tmp_path, line)
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", "s.yaml"]) == 0
    sc = load_scenario(tmp_path / "s.yaml")
    assert sc.workload.kind == "trace"
    res = SimEngine(sc, tiny_profile()).run()
    assert np.allclose(np.sort(res.requests["start_s"].to_numpy()), [0.0, 0.5, 1.25, 2.0])
    for k in ("start_times", "input_lens", "output_lens", "ttfts", "itls", "errors", "generated_texts"):
        line.pop(k)
    p = _write(tmp_path, line)
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", "t.yaml"]) == 2
    assert not (tmp_path / "t.yaml").exists()


@pytest.mark.parametrize("value", [6, 1, None])
def test_an_explicit_min_free_slots_delay_is_the_runs_threshold(value):
    """server_info min_free_slots_delay (SGLang 0.5.23 --min-free-slots-delay) was listed among the
    keys left out, and the automatic threshold (4) ran instead: an explicit value wins over it
    whatever the drafter (managers/min_free_slots_delayer.py resolve_min_free_slots; 1 disables)."""
    from specsched.sim.admission.base import resolve_threshold

    info = LINE["server_info"] | ({"min_free_slots_delay": value} if value is not None else {})
    sc, _ = scenario_from_bench(parse_run(LINE | {"server_info": info}, "runs.jsonl:1"), "h100-llama-3.1-8b-eagle3-analytic")
    srv = sc["server"]
    assert not any("min_free_slots_delay" in n and "left out" in n for n in sc["assumptions"])
    if value is None:
        assert "min_free_slots" not in srv
    else:
        assert srv["min_free_slots"] == value and srv["admission_delay"] == "min_free_slots"
        assert resolve_threshold(srv["max_running_requests"], value, dflash_family=False) == (value if value > 1 else 0)


def test_a_quantized_line_against_a_profile_that_states_no_weights_is_said():
    """A profile without an analytic block (measured, or the bundled roofline) states no weight
    format: an fp8 server's line against it was listed among the keys left out only."""
    info = LINE["server_info"] | {"quantization": "fp8"}
    sc, _ = scenario_from_bench(parse_run(LINE | {"server_info": info}, "runs.jsonl:1"), "h200-llama8b-roofline")
    notes = [n for n in sc["assumptions"] if n.startswith("setup mismatch: ") and "quantization" in n]
    assert len(notes) == 1 and "does not say which weights it prices" in notes[0] and "--dtype fp8" in notes[0]


def test_an_sglang_accept_length_is_said_to_be_the_servers_mean_since_launch():
    """SGLang's accept_length is /server_info's avg_spec_accept_length, the scheduler's totals
    since launch (reset only by /flush_cache): the assumption said "from the line", read as
    the run's own; vLLM's spec_decode_acceptance_length is the run's own."""
    sc, _ = scenario_from_bench(parse_run({**LINE, "server_info": None, "accept_length": 3.0}, "f:1"), "h200-1b")
    note = next(a for a in sc["assumptions"] if a.startswith("acceptance:"))
    assert "since the server started" in note and "--flush-cache" in note
    vllm = {**LINE, "server_info": None, "spec_decode_acceptance_length": 3.0}
    vllm.pop("accept_length", None)
    sc, _ = scenario_from_bench(parse_run(vllm, "f:1"), "h200-1b")
    assert not any("since the server started" in a for a in sc["assumptions"])


def test_an_image_line_draws_its_outputs_from_its_random_length_arguments():
    """SGLang 0.5.23's ``image`` dataset samples each request's text and output lengths with the
    random dataset's rule (benchmark/datasets/image.py ``sample_image_requests`` calls
    ``compute_random_lens`` with ``--random-output-len`` and ``--random-range-ratio``), so a
    line of it without details was built with every output fixed at the mean (ratio 0.0, the
    default: [1, 1024] read as 512 for every request) and said the line had no length
    arguments. The outputs are now the arguments' uniform draw; the prompts (text + vision
    tokens, which no argument gives) stay at the line's mean."""
    line = {**LINE, "dataset_name": "image", "random_input_len": 256, "random_output_len": 400,
            "random_range_ratio": 0.0, "completed": 30, "total_input_tokens": 30 * 1500,
            "total_input_text_tokens": 30 * 260, "total_input_vision_tokens": 30 * 1240,
            "total_output_tokens": 30 * 200}
    sc, _ = scenario_from_bench(parse_run(line, "f:1"), "tiny")
    w = sc["workload"]
    assert w["output_len"] == {"kind": "uniform", "value": 400, "range_ratio": 0.0}
    assert w["input_len"] == {"kind": "fixed", "value": 1500}
    said = [a for a in sc["assumptions"] if a.startswith("lengths:")]
    assert len(said) == 1 and "image" in said[0] and "no length arguments" not in said[0]
    # outputs that stopped early (--disable-ignore-eos) are still the measured mean, as for random
    short = {**line, "total_output_tokens": 30 * 40}
    sc, _ = scenario_from_bench(parse_run(short, "f:1"), "tiny")
    assert sc["workload"]["output_len"] == {"kind": "fixed", "value": 40}


@pytest.mark.parametrize(("info", "replicas"), [({"dp_size": 2, "load_balance_method": "round_robin"}, 2),
                                                ({"dp_size": 4, "enable_dp_attention": True}, 1),
                                                ({"dp_size": 1}, 1)])
def test_a_line_of_data_parallel_replicas_gives_a_scenario_of_replicas(tmp_path, monkeypatch, capsys, info, replicas):
    """server_info dp_size 2 without DP attention (two whole SGLang servers behind the
    data-parallel controller, each sent half the requests) was a setup-mismatch warning while
    the scenario sent one server every request. Replicas are simulated now
    (sim/dp_replicas.py): the scenario keeps dp_size, no warning, and its run has that many."""
    monkeypatch.chdir(tmp_path)
    p = _write(tmp_path, LINE | {"server_info": LINE["server_info"] | {"tp_size": 1} | info})
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", "s.yaml"]) == 0
    cap = capsys.readouterr()
    assert not [x for x in (cap.out + cap.err).splitlines() if x.startswith("warning:") and "dp_size" in x]
    sc = load_scenario(tmp_path / "s.yaml")
    assert (sc.server.dp_size, sc.server.dp_replicas) == (info["dp_size"], replicas)
    sc = sc.model_copy(update={"workload": sc.workload.model_copy(update={"num_requests": 12})})
    result = SimEngine(sc).run()
    assert result.summary["completed"] == 12
    assert result.summary.get("dp_replicas", 1) == replicas


@pytest.mark.parametrize(("method", "kept", "said"), [("total_requests", True, False), ("total_tokens", True, False),
                                                      ("shortest_queue", False, True), ("round_robin", False, False),
                                                      ("auto", False, False)])
def test_a_line_of_load_aware_dp_dispatch_keeps_its_method(tmp_path, monkeypatch, capsys, method, kept, said):
    """A replicas line dispatched by load (load_balance_method total_requests: the controller
    sends each request to the rank with the fewest, data_parallel_controller.py
    ``total_requests_scheduler``) was a round-robin scenario with a setup-mismatch warning; the
    model runs SGLang's load-aware methods now (sim/dp_dispatch.py), so the scenario keeps the
    line's method, with no warning. A value SGLang 0.5.23 does not have is left out, said;
    auto and round_robin (what the scenario runs without the key) are not written."""
    monkeypatch.chdir(tmp_path)
    info = LINE["server_info"] | {"tp_size": 1, "dp_size": 2, "load_balance_method": method}
    p = _write(tmp_path, LINE | {"server_info": info})
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", "s.yaml"]) == 0
    cap = capsys.readouterr()
    warned = [x for x in (cap.out + cap.err).splitlines() if x.startswith("warning:") and "load_balance_method" in x]
    assert not warned
    named = [x for x in (cap.out + cap.err).splitlines() if "load_balance_method" in x]
    assert bool(named) is said, named
    sc = load_scenario(tmp_path / "s.yaml")
    assert sc.server.dp_replicas == 2
    assert sc.server.load_balance_method == (method if kept else "auto")


def test_a_dp_attention_line_of_a_load_aware_method_is_a_setup_mismatch(tmp_path, monkeypatch, capsys):
    """DP attention's ranks take requests by what auto resolves to only (sim/dp_attention.py):
    a line of such a server dispatched by load warns, naming the method, and the scenario runs
    auto."""
    monkeypatch.chdir(tmp_path)
    info = LINE["server_info"] | {"tp_size": 2, "dp_size": 2, "enable_dp_attention": True,
                                  "load_balance_method": "total_tokens"}
    p = _write(tmp_path, LINE | {"server_info": info})
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", "s.yaml"]) == 0
    cap = capsys.readouterr()
    warned = [x for x in (cap.out + cap.err).splitlines() if x.startswith("warning:") and "load_balance_method" in x]
    assert len(warned) == 1 and "total_tokens" in warned[0], warned
    assert load_scenario(tmp_path / "s.yaml").server.load_balance_method == "auto"


def test_a_full_server_info_names_the_set_keys_it_leaves_out_and_counts_the_rest(capsys):
    """SGLang 0.5.23's /server_info is ``ServerArgs.resolved_dict()`` (every field, ~550 keys):
    the assumption naming the keys the model has no argument for listed some 300 names, the
    switched-off ones (false, 0, "none", "auto") among them, so the one set feature
    (enable_torch_compile true) was lost in the list; and the server's state (internal_states,
    version, startup_time, launch_command) was named as arguments left out. The set ones are
    listed with their values, the off ones counted, the state not named."""
    (run,) = read_bench(ROOT / "tests" / "data" / "bench" / "sglang-0.5.23-full-server-info.jsonl")
    assert len(run.extra.get("server_info") or run.args.get("server_info")) > 500
    sc, _ = scenario_from_bench(run, "h200-1b")
    (note,) = [a for a in sc["assumptions"] if "has no argument for" in a]
    listed, _, counted = note.partition("; and ")
    assert "enable_torch_compile=True" in listed and "torch_compile_max_bs=32" in listed
    for off in ("enable_hisparse", "moe_a2a_backend", "disable_cuda_graph_padding", "enable_lmcache"):
        assert off not in listed, off
    assert counted.startswith(tuple(f"{n} more switched off" for n in range(100, 400)))
    for state in ("internal_states", "startup_time", "launch_command", "version=", "frontend"):
        assert state not in note, state


def _mooncake_line(tmp_path, **over):
    src = ROOT / "tests" / "data" / "bench" / "sglang-0.5.23-datasets.jsonl"
    obj = json.loads(src.read_text().splitlines()[3]) | over
    if "completed" in over:   # the throughputs of that count (a line of other figures is warned about)
        obj.update(request_throughput=obj["completed"] / obj["duration"],
                   output_throughput=obj["total_output_tokens"] / obj["duration"])
    assert obj["dataset_name"] == "mooncake"
    (tmp_path / "m.jsonl").write_text(json.dumps(obj) + "\n")
    return obj


def test_a_mooncake_line_is_rebuilt_from_its_trace_file(tmp_path, capsys, monkeypatch):
    """SGLang 0.5.23's ``--dataset-name mooncake`` (benchmark/datasets/mooncake.py
    ``get_mooncake_request_over_time``) sends the trace's first rows at their timestamps (ms)
    x ``--mooncake-slowdown-factor`` whatever ``request_rate`` says, each row's rounds at once,
    prompts built from ``hash_ids``. ``scenario from-bench`` refused such a line; with
    ``--dataset-path`` it is now a trace workload of those rows: the trace's send times (x the
    factor), the rows' output lengths, the line's input total spread over the rows' ids, and
    the ids as shared prompt blocks."""
    from specsched.sim.trace import load_trace

    monkeypatch.chdir(tmp_path)
    trace = ROOT / "tests" / "data" / "traces" / "mooncake-conversation.jsonl"
    rows = [json.loads(x) for x in trace.read_text().splitlines()][:3]
    obj = _mooncake_line(tmp_path)
    assert main(["scenario", "from-bench", "m.jsonl", "--profile", "h200-1b", "--dataset-path", str(trace),
                 "--mooncake-slowdown-factor", "2", "--out", "s.yaml"]) == 0
    out = capsys.readouterr().out
    assert "mooncake trace" in out
    sc = load_scenario("s.yaml")
    assert sc.workload.kind == "trace" and sc.workload.trace.columns.hash_ids == "hash_ids"
    tr = load_trace(sc.workload.trace, scenario_path="s.yaml")
    assert tr.arrival_s.tolist() == pytest.approx([r["timestamp"] / 1000 * 2 for r in rows])
    assert tr.output_len.tolist() == [r["output_length"] for r in rows]
    ids = [len(r["hash_ids"]) for r in rows]
    assert int(tr.input_len.sum()) == pytest.approx(obj["total_input_tokens"], abs=3)
    assert tr.input_len.tolist() == pytest.approx([obj["total_input_tokens"] * k / sum(ids) for k in ids], abs=1)
    assert sc.workload.trace.block_size == round(obj["total_input_tokens"] / sum(ids))
    # the first two rows share their first 12 ids: their prompts share those blocks
    a, b = tr.prompt_tokens(0), tr.prompt_tokens(1)
    k = 12 * sc.workload.trace.block_size
    assert np.array_equal(a[:k], b[:k]) and a[k] != b[k]


def test_a_mooncake_line_of_several_rounds_and_its_missing_trace(tmp_path, capsys, monkeypatch):
    """Rounds (``--mooncake-num-rounds``, not in the line) send each row's rounds together,
    round r's prompt r queries and r - 1 placeholder replies long; with details the
    prompts are the line's own ``input_lens``. Without ``--dataset-path`` the refusal is one
    line naming that option; a request count that no row count of R rounds gives is refused."""
    monkeypatch.chdir(tmp_path)
    trace = ROOT / "tests" / "data" / "traces" / "mooncake-conversation.jsonl"
    rows = [json.loads(x) for x in trace.read_text().splitlines()][:2]
    lens = [900, 1900, 800, 1700]
    _mooncake_line(tmp_path, completed=4, total_input_tokens=sum(lens), total_output_tokens=20, input_lens=lens,
                   output_lens=[5] * 4,
                   ttfts=[0.05] * 4, itls=[[0.01] * 4] * 4, generated_texts=[""] * 4, errors=[""] * 4)
    assert main(["scenario", "from-bench", "m.jsonl", "--profile", "h200-1b", "--out", "s.yaml"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "m.jsonl:1: dataset_name = 'mooncake'" in err[0] and "--dataset-path" in err[0], err
    assert main(["scenario", "from-bench", "m.jsonl", "--profile", "h200-1b", "--dataset-path", str(trace),
                 "--mooncake-num-rounds", "3", "--out", "s.yaml"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--mooncake-num-rounds = 3" in err[0], err
    assert not (tmp_path / "s.yaml").exists()
    assert main(["scenario", "from-bench", "m.jsonl", "--profile", "h200-1b", "--dataset-path", str(trace),
                 "--mooncake-num-rounds", "2", "--out", "s.yaml"]) == 0
    capsys.readouterr()
    from specsched.sim.trace import load_trace

    tr = load_trace(load_scenario("s.yaml").workload.trace, scenario_path="s.yaml")
    assert tr.input_len.tolist() == lens
    assert tr.arrival_s.tolist() == pytest.approx([rows[0]["timestamp"] / 1000] * 2 + [rows[1]["timestamp"] / 1000] * 2)
    assert tr.output_len.tolist() == [rows[0]["output_length"]] * 2 + [rows[1]["output_length"]] * 2


def test_validate_measured_takes_a_mooncake_lines_options(tmp_path, capsys, monkeypatch):
    """``validate --measured F --profile P`` builds a mooncake line's scenario from the trace as
    ``scenario from-bench`` does; its ``--mooncake-slowdown-factor`` and ``--mooncake-num-rounds``
    were parsed and dropped on the way to validate-bench (the run predicted at factor 1 without
    a word). With ``--scenario S`` (whose workload is the replay) the trace options did nothing
    and are refused, as they are without ``--measured``."""
    monkeypatch.chdir(tmp_path)
    trace = ROOT / "tests" / "data" / "traces" / "mooncake-conversation.jsonl"
    _mooncake_line(tmp_path)
    assert main(["validate", "--measured", "m.jsonl", "--profile", "h200-1b", "--dataset-path", str(trace),
                 "--mooncake-slowdown-factor", "3", "--seeds", "1", "--out", "v"]) == 0
    assert "sent at their timestamps x 3 (--mooncake-slowdown-factor)" in capsys.readouterr().out
    sc = load_scenario("v/from-bench.yaml")
    assert any("x 3 (--mooncake-slowdown-factor)" in a for a in sc.assumptions)
    for argv in (["validate", "--measured", "m.jsonl", "--scenario", "v/from-bench.yaml"],
                 ["validate-bench", "m.jsonl", "--scenario", "v/from-bench.yaml"],
                 ["validate", "v/from-bench.yaml"]):
        assert main([*argv, "--mooncake-num-rounds", "2"]) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--mooncake-num-rounds = 2" in err[0], (argv, err)


def test_a_speculative_lines_null_accept_length_is_named_and_can_be_given(tmp_path, capsys, monkeypatch):
    """SGLang 0.5.23 writes ``accept_length`` null for a speculative server until its scheduler
    has logged a decode line since launch or the last /flush_cache (internal_state.py
    ``_average_accept_length``, totals added in metrics_reporter.py ``report_decode_stats``): a
    short run after ``--flush-cache`` has server_info naming the drafter and no accept length.
    Such a line was refused with "set acceptance.mean_accept_length", which ``validate
    --measured --set acceptance.mean_accept_length=X`` could not do (the line's scenario was
    refused before --set applied). Now the refusal names the line's accept_length and the
    command's way to give it, and validate's --set gives it."""
    monkeypatch.chdir(tmp_path)
    obj = json.loads((ROOT / "tests" / "data" / "bench" / "sglang-0.5.23-full-server-info.jsonl").read_text().splitlines()[0])
    assert obj["server_info"]["speculative_algorithm"]
    obj["accept_length"] = None
    obj["server_info"]["internal_states"][0].pop("avg_spec_accept_length", None)
    (tmp_path / "s.jsonl").write_text(json.dumps(obj) + "\n")
    assert main(["profile", "--analytic", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H200", "--tp", "1",
                 "--drafter", "chain", "--out", "p.yaml"]) == 0
    capsys.readouterr()
    assert main(["validate", "--measured", "s.jsonl", "--profile", "p.yaml", "--seeds", "1", "--out", "v"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "s.jsonl:1: accept_length = None" in err[0], err
    assert "--set acceptance.mean_accept_length=X" in err[0] and "_average_accept_length" in err[0], err
    assert main(["scenario", "from-bench", "s.jsonl", "--profile", "p.yaml", "--out", "b.yaml"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "accept_length = None" in err[0] and "--template, a scenario whose" in err[0], err
    assert not (tmp_path / "b.yaml").exists()
    assert main(["validate", "--measured", "s.jsonl", "--profile", "p.yaml", "--seeds", "1", "--out", "v",
                 "--set", "acceptance.mean_accept_length=2.5"]) == 0
    assert "acceptance: mean_accept_length 2.5 as given" in capsys.readouterr().out
    assert load_scenario("v/from-bench.yaml").acceptance.mean_accept_length == 2.5


def test_a_speculative_line_of_one_token_outputs_needs_no_accept_length(tmp_path, capsys, monkeypatch):
    """A TTFT benchmark (``--random-output-len 1``) against a speculative server: every request
    ends with its prefill's token, the server never verifies, so SGLang 0.5.23 writes
    ``accept_length`` null (internal_state.py ``_average_accept_length``: None while
    ``spec_total_num_forward_ct`` is 0). The line was refused for an accept length that can
    change nothing; now the scenario is built with an accept length of 1.0, said in a note.
    A line whose requests did decode still needs one (the test above)."""
    monkeypatch.chdir(tmp_path)
    obj = json.loads((ROOT / "tests" / "data" / "bench" / "sglang-0.5.23-full-server-info.jsonl").read_text().splitlines()[0])
    assert obj["server_info"]["speculative_algorithm"]
    obj["accept_length"] = None
    obj["server_info"]["internal_states"][0].pop("avg_spec_accept_length", None)
    obj["random_output_len"] = 1
    obj["total_output_tokens"] = obj["completed"]
    obj["output_lens"] = [1] * obj["completed"] if "output_lens" in obj else obj.get("output_lens")
    (tmp_path / "s.jsonl").write_text(json.dumps(obj) + "\n")
    assert main(["profile", "--analytic", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H200", "--tp", "1",
                 "--drafter", "chain", "--out", "p.yaml"]) == 0
    capsys.readouterr()
    assert main(["scenario", "from-bench", "s.jsonl", "--profile", "p.yaml", "--out", "b.yaml"]) == 0
    out = capsys.readouterr().out
    assert "no verify ran" in out, out
    sc = load_scenario("b.yaml")
    assert sc.acceptance.mean_accept_length == 1.0 and sc.workload.output_len.value == 1
    assert main(["run", "b.yaml"]) == 0


def test_details_input_lens_counted_by_the_server_are_named_beside_the_asked_total(tmp_path):
    """SGLang 0.5.23 writes into ``input_lens`` each prompt as the server counted it
    (benchmark/serving.py ``_record_server_prompt_len``: BOS, chat template, re-tokenized
    random text) and into ``total_input_tokens`` the dataset's asked lengths
    (``calculate_metrics``). A scenario from the details prefilled the server's counts and
    the comparison showed the difference as the model's input-token error without a word;
    now an assumption names both totals. Equal totals (the fixture as written) say nothing."""
    src = ROOT / "tests" / "data" / "bench" / "sglang-0.5.23-details.jsonl"
    obj = json.loads(src.read_text().splitlines()[0])
    p = tmp_path / "d.jsonl"
    p.write_text(json.dumps(obj) + "\n")
    sc, _ = scenario_from_bench(read_bench(p, 1)[0], "h200-1b", lengths="details")
    assert not any(a.startswith("input lengths:") for a in sc["assumptions"])
    obj["input_lens"] = [n + 40 for n in obj["input_lens"]]
    p.write_text(json.dumps(obj) + "\n")
    sc, _ = scenario_from_bench(read_bench(p, 1)[0], "h200-1b", lengths="details")
    said = [a for a in sc["assumptions"] if a.startswith("input lengths:")]
    assert len(said) == 1 and f"total_input_tokens {obj['total_input_tokens']}" in said[0], sc["assumptions"]
    assert "_record_server_prompt_len" in said[0]


def test_an_assumed_eagle_drafter_takes_sglangs_choice_for_the_profiles_model():
    """A line with an accept length but no drafter settings, predicted on a Llama profile: SGLang
    0.5.23 gives LlamaForCausalLM a 5-step, topk-4, 8-token draft tree when no chain setting is
    launched (arg_groups/speculative_hook.py _auto_choose_speculative_params); the assumption
    was the 3/1/4 chain of other models, called 'SGLang's default EAGLE parameters'. A profile
    without an architecture keeps the 3/1/4 chain."""
    run = parse_run({**LINE, "server_info": None, "accept_length": 3.02}, "f:1")
    notes: list[str] = []
    from specsched.analysis.from_bench import _assumed_drafter

    d = _assumed_drafter(3.02, None, "h100-llama-3.1-8b-eagle3-analytic", notes)
    assert (d["speculative_num_steps"], d["speculative_eagle_topk"], d["speculative_num_draft_tokens"]) == (5, 4, 8)
    assert "LlamaForCausalLM" in notes[0], notes
    sc, _ = scenario_from_bench(run, "h100-llama-3.1-8b-eagle3-analytic")
    assert sc["server"]["speculative_eagle_topk"] == 4 and sc["server"]["speculative_num_draft_tokens"] == 8
    sc, _ = scenario_from_bench(run, "h200-llama8b-roofline")   # no hardware.architecture
    assert sc["server"]["speculative_num_steps"] == 3 and sc["server"]["speculative_num_draft_tokens"] == 4


def test_an_out_holding_a_scenario_of_ones_own_is_not_replaced(tmp_path, monkeypatch, capsys):
    """`scenario from-bench ... --out my.yaml` wrote over the user's own scenario my.yaml
    without a word; a file from-bench wrote before (source: bench_serving ...) is still
    replaced, one written otherwise is refused in one line, exit 2, and left as it was."""
    monkeypatch.chdir(tmp_path)
    p = _write(tmp_path, LINE)
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", "s.yaml", "-q"]) == 0
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", "s.yaml", "-q"]) == 0
    mine = tmp_path / "my.yaml"
    mine.write_text("name: my\nprofile: h200-1b\n")
    capsys.readouterr()
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", "my.yaml", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "my.yaml" in err[0] and "--out" in err[0], err
    assert mine.read_text() == "name: my\nprofile: h200-1b\n"


def test_a_file_of_ones_own_beside_the_out_is_not_replaced(tmp_path, monkeypatch, capsys):
    """from-bench writes its length histograms beside the YAML (``<stem>-input-lengths.csv``):
    a user's own histogram of that name was replaced without a word, while a YAML of one's own
    at --out was refused. Refused in one line, exit 2, nothing written; the histograms of a
    scenario from-bench wrote there before (which names them) are still replaced."""
    monkeypatch.chdir(tmp_path)
    line = str(ROOT / "tests" / "data" / "bench" / "sglang-0.5.23-details.jsonl") + ":1"
    argv = ["scenario", "from-bench", line, "--profile", "h200-1b", "--lengths", "details", "-q", "--out"]
    mine = tmp_path / "s-input-lengths.csv"
    mine.write_text("length,weight\n100,1\n")
    assert main([*argv, "s.yaml"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "s-input-lengths.csv" in err[0] and "--out" in err[0], err
    assert mine.read_text() == "length,weight\n100,1\n"
    assert sorted(q.name for q in tmp_path.iterdir()) == ["s-input-lengths.csv"]
    mine.unlink()
    assert main([*argv, "s.yaml"]) == 0 and main([*argv, "s.yaml"]) == 0   # its own: replaced
    (tmp_path / "s.yaml").unlink()   # histograms no scenario of from-bench names any more
    assert main([*argv, "s.yaml"]) == 2


def test_a_mooncake_line_replays_the_files_first_rows_sorted(tmp_path, capsys, monkeypatch):
    """bench_serving (benchmark/datasets/mooncake.py) keeps the file's first --num-prompts rows
    as written (``MooncakeDataset.load``), then sorts those by timestamp
    (``get_mooncake_request_over_time``). A trace written out of order was rebuilt from the
    first rows by time of the whole file: other requests, sent at other times."""
    monkeypatch.chdir(tmp_path)
    rows = [{"timestamp": 300, "input_length": 1024, "output_length": 6, "hash_ids": [1, 3]},
            {"timestamp": 100, "input_length": 1024, "output_length": 5, "hash_ids": [1, 2]},
            {"timestamp": 0, "input_length": 512, "output_length": 7, "hash_ids": [4]},
            {"timestamp": 400, "input_length": 512, "output_length": 8, "hash_ids": [5]}]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _mooncake_line(tmp_path, completed=2, total_input_tokens=1000, total_output_tokens=11)
    assert main(["scenario", "from-bench", "m.jsonl", "--profile", "h200-1b", "--dataset-path", "t.jsonl",
                 "--out", "s.yaml"]) == 0
    from specsched.sim.trace import load_trace

    tr = load_trace(load_scenario("s.yaml").workload.trace, scenario_path="s.yaml")
    assert tr.arrival_s.tolist() == pytest.approx([0.0, 0.2])
    assert tr.output_len.tolist() == [5, 6]
    assert "its first 2 rows sorted by timestamp" in capsys.readouterr().out


def test_a_mooncake_row_without_an_output_length_asks_256_as_bench_serving_does(tmp_path, capsys, monkeypatch):
    """bench_serving asks ``record.get("output_length", 256)`` of a Mooncake row
    (benchmark/datasets/mooncake.py ``get_mooncake_request_over_time``), as the docstring of
    the rebuild said; such a row was refused with advice to name columns under
    workload.trace.columns, which from-bench gives no way to do."""
    monkeypatch.chdir(tmp_path)
    rows = [{"timestamp": 0, "input_length": 1024, "output_length": 6, "hash_ids": [1, 3]},
            {"timestamp": 100, "input_length": 1024, "hash_ids": [1, 2]}]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _mooncake_line(tmp_path, completed=2, total_input_tokens=1000, total_output_tokens=262)
    assert main(["scenario", "from-bench", "m.jsonl", "--profile", "h200-1b", "--dataset-path", "t.jsonl",
                 "--out", "s.yaml"]) == 0
    from specsched.sim.trace import load_trace

    tr = load_trace(load_scenario("s.yaml").workload.trace, scenario_path="s.yaml")
    assert tr.output_len.tolist() == [6, 256]


@pytest.mark.parametrize("pool", [None, "absent"])
def test_a_launch_pool_cap_sizes_the_pool_where_server_info_lacks_the_schedulers(pool):
    """--max-total-tokens (server_info's ``max_total_tokens``) caps the KV pool SGLang profiles
    (0.5.23 kv_cache_configurator.py ``_apply_token_constraints``). A server_info without the
    scheduler's ``max_total_num_tokens`` (null, or trimmed away) had the cap listed among the
    keys the model has no argument for and the pool left at specsched's default; where the
    scheduler's pool is there, it stays the pool."""
    info = {k: v for k, v in LINE["server_info"].items() if k not in ("max_total_num_tokens", "speculative_algorithm")}
    if pool is None:
        info["max_total_num_tokens"] = None
    info["max_total_tokens"] = 50000
    sc, _ = scenario_from_bench(parse_run({**LINE, "server_info": info}, "f:1"), "h200-1b")
    assert sc["server"]["max_total_num_tokens"] == 50000
    assert any("max_total_tokens (--max-total-tokens" in a for a in sc["assumptions"])
    assert not any("max_total_tokens=" in a for a in sc["assumptions"])
    sc, _ = scenario_from_bench(parse_run({**LINE, "server_info": {**info, "max_total_num_tokens": 49152}}, "f:1"),
                                "h200-1b")
    assert sc["server"]["max_total_num_tokens"] == 49152
    assert not any("max_total_tokens" in a for a in sc["assumptions"])


def test_the_pool_the_server_sized_is_stated_without_the_fraction_that_would_cut_it():
    """A real 0.5.23 server_info holds both ``mem_fraction_static`` and the scheduler's
    ``max_total_num_tokens``. Stated together, the simulator reads the pool as
    --max-total-tokens and takes the smaller of it and the profile's estimate at that fraction:
    the full-server-info line's 454836-token pool ran as 398310. The measured pool is stated
    alone; a --max-total-tokens cap (no scheduler pool) keeps its fraction."""
    f = ROOT / "tests/data/bench/sglang-0.5.23-full-server-info.jsonl"
    run = read_bench(f)[0]
    sc, _ = scenario_from_bench(run, "h100-llama-3.1-8b-eagle3-analytic")
    assert sc["server"]["max_total_num_tokens"] == 454836 and "mem_fraction_static" not in sc["server"]
    assert any("without mem_fraction_static 0.836" in a for a in sc["assumptions"])
    line = json.loads(f.read_text().splitlines()[0])
    line["server_info"] = {k: v for k, v in line["server_info"].items() if k != "max_total_num_tokens"}
    line["server_info"]["max_total_tokens"] = 400000
    capped, _ = scenario_from_bench(parse_run(line, "f:1"), "h100-llama-3.1-8b-eagle3-analytic")
    assert capped["server"]["mem_fraction_static"] == 0.836 and capped["server"]["max_total_num_tokens"] == 400000


def test_a_template_that_replaces_the_lines_server_says_what_it_replaced(tmp_path):
    """--template's server block stood in for the line's server_info without a word: a line
    measured at 8192-token chunks, a 48-request graph limit and a 454836-token pool was
    predicted at the template's values, or at the defaults for what it left out. The
    assumptions name both; a template that states the line's server says nothing."""
    f = ROOT / "tests/data/bench/sglang-0.5.23-full-server-info.jsonl"
    run = read_bench(f)[0]
    spec = {"speculative_algorithm": "eagle3", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
            "speculative_num_draft_tokens": 4}
    base = {"name": "t", "profile": "h100-llama-3.1-8b-eagle3-analytic", "acceptance": {"mean_accept_length": 3.1},
            "workload": {"kind": "burst", "num_requests": 4, "input_len": {"kind": "fixed", "value": 64},
                         "output_len": {"kind": "fixed", "value": 8}}}
    built, _ = scenario_from_bench(run, "h100-llama-3.1-8b-eagle3-analytic")
    for server, other, unstated in (
            (spec, None, ["max_running_requests 48", "max_total_num_tokens 454836", "chunked_prefill_size 8192",
                          "cuda_graph_max_bs 48"]),
            ({**built["server"], "chunked_prefill_size": 4096}, "chunked_prefill_size 8192 (template 4096)", None),
            (built["server"], None, None)):
        tpl = tmp_path / "tpl.yaml"
        tpl.write_text(yaml.safe_dump({**base, "server": server}))
        sc, _ = scenario_from_bench(run, "h100-llama-3.1-8b-eagle3-analytic", template=str(tpl))
        ran = [a for a in sc["assumptions"] if a.startswith("server: the line's server_info ran")]
        states = [a for a in sc["assumptions"] if a.startswith("server: the line's server_info states")]
        assert [other in a for a in ran] == ([True] if other else [])
        assert [all(u in a for u in unstated) for a in states] == ([True] if unstated else [])


PLAIN_LINE = {k: v for k, v in LINE.items() if k != "server_info"} | {"request_rate": 8.0, "max_concurrency": None}
"""LINE without its server_info, at a rate the h200 templates' servers serve."""


@pytest.mark.parametrize(("extra", "template", "said"), [
    ({"accept_length": 2.8}, "poisson-nospec", "decoded speculatively (accept_length 2.800)"),
    ({"server_info": {"speculative_algorithm": "EAGLE"}}, "poisson-nospec",
     "decoded speculatively (server_info.speculative_algorithm 'EAGLE')"),
    ({"server_info": {"speculative_algorithm": None}}, "poisson-spec", "ran no drafter (server_info.speculative_algorithm None)"),
    ({"server_info": {"speculative_algorithm": "None"}, "accept_length": None}, "poisson-spec", "ran no drafter"),
    ({"accept_length": None}, "poisson-spec", None),   # null alone: also a speculative server before its first log line
    ({"accept_length": 2.8}, "poisson-spec", None),    # both speculate (the accept lengths' note is another)
    ({"server_info": {"speculative_algorithm": None}}, "poisson-nospec", None),
])
def test_a_template_that_contradicts_the_lines_speculation_is_a_setup_mismatch(extra, template, said):
    """A template without a drafter for a line whose server decoded speculatively (accept length
    2.8, or server_info naming the drafter) was taken silently: the prediction decoded one token
    a step against a speculative run. Likewise a speculative template for a line whose
    server_info says no drafter ran. Said as a setup mismatch (each command's warning: line); a
    null accept length alone says nothing either way."""
    from specsched.analysis.from_bench import SETUP_MISMATCH

    run = parse_run(PLAIN_LINE | extra, "x.jsonl:1")
    sc, _ = scenario_from_bench(run, "h200-1b", template=str(ROOT / "scenarios" / "h200" / f"{template}.yaml"))
    notes = [n for n in sc["assumptions"] if n.startswith(f"{SETUP_MISMATCH}speculation:")]
    if said is None:
        assert notes == [], sc["assumptions"]
    else:
        assert len(notes) == 1 and said in notes[0] and f"the template {template}.yaml" in notes[0], notes
        assert not [n for n in sc["assumptions"] if "template's mean accept length" in n]   # one line for one fault


def test_from_bench_and_validate_warn_of_a_template_without_the_lines_drafter(tmp_path, monkeypatch, capsys):
    """The user's case: a speculative line (accept_length 2.8, no server_info) built with the
    no-speculation template, then validated against that scenario. Both commands were silent;
    each now prints one warning: line, and a scenario whose drafter agrees gets none."""
    monkeypatch.chdir(tmp_path)
    p = _write(tmp_path, PLAIN_LINE | {"accept_length": 2.8})
    tpl = str(ROOT / "scenarios" / "h200" / "poisson-nospec.yaml")
    assert main(["scenario", "from-bench", str(p), "--template", tpl, "--profile", "h200-1b", "--out", "s.yaml"]) == 0
    warned = [e for e in capsys.readouterr().err.splitlines() if e.startswith("warning: ")]
    assert len(warned) == 1 and "decoded speculatively (accept_length 2.800)" in warned[0] and "no drafter" in warned[0]
    assert main(["validate", "--measured", str(p), "--scenario", "s.yaml", "--seeds", "1", "--out", "v"]) == 0
    warned = [e for e in capsys.readouterr().err.splitlines() if e.startswith("warning: ") and "speculat" in e]
    assert len(warned) == 1 and "the scenario s.yaml runs no drafter" in warned[0], warned
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", "own.yaml"]) == 0   # its drafter assumed
    capsys.readouterr()
    assert main(["validate", "--measured", str(p), "--scenario", "own.yaml", "--seeds", "1", "--out", "v2"]) == 0
    assert not [e for e in capsys.readouterr().err.splitlines() if "speculat" in e]


def test_a_vllm_closed_loop_is_said_as_one_not_as_all_at_once():
    """A vllm bench serve line at request_rate inf with max_concurrency 8 is a closed loop of 8
    (vLLM's semaphore, benchmark() limited_request_func), and is built as one; its assumption
    said "arrivals: all at once (request_rate inf)". A line without the cap is a burst, said so."""
    vllm = {k: v for k, v in PLAIN_LINE.items() if k != "backend"} | {"endpoint_type": "openai", "backend": "openai",
                                                                     "request_rate": math.inf}
    sc, _ = scenario_from_bench(parse_run(vllm | {"max_concurrency": 8}, "v.json:1"), "h200-1b")
    assert sc["workload"]["kind"] == "closed_loop" and sc["workload"]["concurrency"] == 8
    (note,) = [n for n in sc["assumptions"] if n.startswith("arrivals:")]
    assert note.startswith("arrivals: a closed loop of 8 clients (request_rate inf with max_concurrency 8") and \
        "all at once" not in note, note
    sc, _ = scenario_from_bench(parse_run(vllm, "v.json:1"), "h200-1b")
    assert sc["workload"]["kind"] == "burst"
    assert [n for n in sc["assumptions"] if n.startswith("arrivals: all at once (request_rate inf)")]


def test_a_templates_arms_are_kept_as_what_ifs_on_the_lines_run(tmp_path, monkeypatch):
    """--template took the template's server and acceptance and dropped its arms: `run OUT
    --arm no_overlap` was refused (allowed: base). They are kept, said in the assumptions, and
    an arm overriding a key the line set (its rate) still applies, over the line's value."""
    monkeypatch.chdir(tmp_path)
    raw = yaml.safe_load((ROOT / "scenarios" / "h200" / "poisson-nospec.yaml").read_text())
    raw["arms"]["fast"] = {"workload": {"request_rate": 32}}
    (tmp_path / "tpl.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    p = _write(tmp_path, PLAIN_LINE)
    assert main(["scenario", "from-bench", str(p), "--template", "tpl.yaml", "--profile", "h200-1b", "--out",
                 "s.yaml", "-q"]) == 0
    base = load_scenario("s.yaml")
    assert base.workload.request_rate == 8.0 and base.server.enable_overlap_schedule is True
    assert load_scenario("s.yaml", arm="no_overlap").server.enable_overlap_schedule is False
    fast = load_scenario("s.yaml", arm="fast")
    assert fast.workload.request_rate == 32 and fast.workload.num_requests == base.workload.num_requests
    assert any(a.startswith("arms: the template tpl.yaml's arms kept (no_overlap, fast)") for a in base.assumptions)
    # one that does not validate on the line's workload (a gap shape for a closed loop) is left out, naming why
    raw["arms"]["bursty"] = {"workload": {"burstiness": 0.5}}
    (tmp_path / "tpl.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    loop = parse_run(PLAIN_LINE | {"request_rate": math.inf, "max_concurrency": 4}, "x.jsonl:1")
    sc, _ = scenario_from_bench(loop, "h200-1b", template="tpl.yaml")
    assert list(sc["arms"]) == ["no_overlap", "fast"]
    (left,) = [a for a in sc["assumptions"] if "left out: bursty (workload: " in a]
    assert "poisson" in left, left
