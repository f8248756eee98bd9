"""The radix prefix cache in the Scheduler: hits shrink extend work and KV use, evictable
cached tokens count in the KV budget (and are evicted when the pool needs room), and the
hit rate is reported as SGLang logs it."""

from __future__ import annotations

import pytest
from specsched.sim.config import Scenario
from specsched.sim.engine import SimEngine

BASE = dict(
    name="gsp", profile="mi355x-dsv41-flash-tp4", seed=1,
    server=dict(max_running_requests=64, max_total_num_tokens=2_600_000, chunked_prefill_size=16384,
                max_prefill_tokens=16384, speculative_algorithm="dspark", speculative_num_draft_tokens=6),
    acceptance=dict(mean_accept_length=3.2),
    workload=dict(kind="closed_loop", concurrency=1, num_requests=64, output_len=dict(kind="fixed", value=64),
                  shared_prefix=dict(num_groups=2, prompts_per_group=32, system_prompt_len=4000, question_len=200)),
)


def run(server=None, workload=None):
    d = {**BASE, "server": {**BASE["server"], **(server or {})}, "workload": {**BASE["workload"], **(workload or {})}}
    eng = SimEngine(Scenario.model_validate(d))
    return eng, eng.run()


def prefill_seconds_per_request(res) -> float:
    st = res.steps
    ext = st[st["num_extend_tokens"] > 0]
    return float((ext["gpu_end_s"] - ext["gpu_start_s"]).sum()) / len(res.requests)


def test_a_high_hit_workload_ttft_falls_by_the_prefill_work_it_skips():
    _, warm = run()
    _, cold = run({"disable_radix_cache": True})
    # 62 of 64 requests find their group's 4000-token system prompt: SGLang's hit rate
    # (hit / (hit + computed) over first-attempt prefills) = 62 x 4000 / (64 x 4200)
    assert warm.summary["cache_hit_rate"] == pytest.approx(62 * 4000 / (64 * 4200))
    assert "cache_hit_rate" not in cold.summary
    saved_ms = (prefill_seconds_per_request(cold) - prefill_seconds_per_request(warm)) * 1000
    gain_ms = cold.summary["median_ttft_ms"] - warm.summary["median_ttft_ms"]
    assert saved_ms > 0.5 * cold.summary["median_ttft_ms"]
    assert gain_ms == pytest.approx(saved_ms, rel=0.1)


def test_the_hit_rate_is_zero_with_the_cache_on_and_no_hit_and_absent_with_it_off():
    """SGLang reports its cache hit rate whenever the radix cache is on, 0.0 when no prompt
    token hit (scheduler_components/metrics_reporter.py: ``... if total_tokens > 0 else 0.0``):
    a distinct-prompt workload's summary and report say 0.0 (the key was absent, so a run
    without hits read as one without a cache); with the cache off there is no rate to report."""
    from specsched.sim.report import format_report

    distinct = {"num_requests": 8,
                "shared_prefix": dict(num_groups=8, prompts_per_group=1, system_prompt_len=100, question_len=50)}
    _, on = run(workload=distinct)
    _, off = run({"disable_radix_cache": True}, distinct)
    assert on.summary["cache_hit_rate"] == 0.0
    assert "cache_hit_rate" not in off.summary
    assert "Prefix cache hit rate:" in format_report(on.summary) and "Prefix cache hit rate:" not in format_report(off.summary)


def test_evictable_cached_prompts_count_in_the_budget_and_are_evicted():
    # 64 distinct 4200-token prompts through a 30K-token pool: the tree keeps every finished
    # prompt (evictable) until the pool needs the room; nothing is retracted
    eng, res = run({"max_total_num_tokens": 30_000},
                   {"concurrency": 4, "shared_prefix": dict(num_groups=64, prompts_per_group=1,
                                                            system_prompt_len=4000, question_len=200)})
    assert res.summary["completed"] == 64 and eng.sched.num_retractions == 0
    cache = eng.sched.cache
    assert cache.evictable_size > 0 and cache.protected_size == 0
    assert eng.sched.kv.used == eng.sched.kv.tree == cache.total_size  # INV-3 with the tree
    assert eng.sched.kv.tree + 4 * 4200 > 30_000 - 4 * 4200  # the tree was cut back to fit


def test_fast_path_matches_step_by_step_with_the_cache():
    from tests.test_sim_speed_equivalence import assert_same_run

    sc = Scenario.model_validate({**BASE, "workload": {**BASE["workload"], "kind": "burst", "concurrency": None}})
    step = SimEngine(sc, fast_forward=False).run()
    fast = SimEngine(sc).run()
    assert_same_run(step, fast)


def test_a_shared_prefix_scenario_runs_from_the_command_line(tmp_path, capsys):
    """A generated-shared-prefix workload has no input_len: `specsched run` crashed with an
    AttributeError in its pre-run size check (sim/limits.py), so the dataset could only be
    simulated from Python. The check takes system prompt + question as the longest prompt,
    and refuses one the pool cannot hold in one line."""
    import yaml

    from specsched.cli import main

    d = {**BASE, "workload": {**BASE["workload"], "num_requests": 8,
                              "shared_prefix": dict(num_groups=2, prompts_per_group=4, system_prompt_len=400,
                                                    question_len=50)}}
    p = tmp_path / "gsp.yaml"
    p.write_text(yaml.safe_dump(d))
    assert main(["run", str(p), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    assert '"completed": 8' in (tmp_path / "o" / "summary.json").read_text().replace(": 8.0", ": 8")
    big = {**d, "server": {**d["server"], "max_total_num_tokens": 300}}
    p.write_text(yaml.safe_dump(big))
    capsys.readouterr()
    assert main(["run", str(p), "--out", str(tmp_path / "o2"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "workload.input_len" in err and "450" in err


def test_zipf_groups_raise_the_hit_rate_and_cut_ttft():
    """Skewed groups (bench_serving 0.5.23 --gsp-group-distribution zipf): with 32 groups of
    which a few are hot, more requests find a system prompt already in the tree than with
    every group equally likely (each cold group's first request misses)."""
    sp = dict(num_groups=32, prompts_per_group=2, system_prompt_len=4000, question_len=200)
    _, uni = run(workload={"shared_prefix": sp})
    _, zipf = run(workload={"shared_prefix": {**sp, "group_distribution": "zipf", "zipf_alpha": 1.5}})
    assert uni.summary["cache_hit_rate"] == pytest.approx(32 * 4000 / (64 * 4200))
    assert zipf.summary["cache_hit_rate"] > 1.3 * uni.summary["cache_hit_rate"]
    assert zipf.summary["mean_ttft_ms"] < uni.summary["mean_ttft_ms"]


def test_zipf_alpha_errors_name_the_key(tmp_path, capsys):
    import yaml

    from specsched.cli import main

    for sp, key_val in ((dict(group_distribution="zipf"), "zipf_alpha"),
                        (dict(zipf_alpha=1.1), "1.1")):
        d = {**BASE, "workload": {**BASE["workload"], "shared_prefix": {**BASE["workload"]["shared_prefix"], **sp}}}
        p = tmp_path / "z.yaml"
        p.write_text(yaml.safe_dump(d))
        capsys.readouterr()
        assert main(["run", str(p), "--out", str(tmp_path / "o"), "--quiet"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "workload.shared_prefix.zipf_alpha" in err and key_val in err
        assert not (tmp_path / "o").exists()


def test_num_requests_left_out_is_the_groups_prompts_and_follows_an_override(tmp_path):
    """shared_prefix makes num_groups x prompts_per_group requests: left out, num_requests
    is that product (as a multi_turn workload's is), and `--set` of the groups re-derives it.
    Before, a file without it was refused as 'workload.num_requests = None: ... must equal
    it', and an override of num_groups against a file that stated it was refused too."""
    import yaml
    from specsched.analysis.overrides import load_scenario_with_overrides
    from specsched.sim.errors import ConfigError

    wl = {k: v for k, v in BASE["workload"].items() if k != "num_requests"}
    p = tmp_path / "gsp.yaml"
    p.write_text(yaml.safe_dump({**BASE, "workload": wl}))
    assert load_scenario_with_overrides(p).workload.num_requests == 64
    assert load_scenario_with_overrides(p, "base", {"workload.shared_prefix.num_groups": 4}).workload.num_requests == 128
    p.write_text(yaml.safe_dump(BASE))   # the file states 64
    assert load_scenario_with_overrides(p, "base", {"workload.shared_prefix.prompts_per_group": 4}).workload.num_requests == 8
    with pytest.raises(ConfigError, match="leave it out or set 8"):   # an explicit other count is still refused
        load_scenario_with_overrides(p, "base", {"workload.shared_prefix.prompts_per_group": 4, "workload.num_requests": 9})


@pytest.mark.parametrize("page", [2, 4])
def test_decode_stretches_evict_with_kv_pages_as_passes_one_by_one_do(monkeypatch, page):
    """INV-7 for the tree's LRU: with KV pages a finishing request's insert of its prompt's
    partial last page finds the cached pages and marks them used, so the fast path's decode
    stretches stop at that finish (sim/scheduler_stretch.py). Before, a stretch ran through it
    without touching the tree and a later eviction took other pages than the passes one by
    one take."""
    from specsched.sim.radix_cache import RadixCache

    from tests.conftest import tiny_profile

    seen: list = []
    orig = RadixCache.evict

    def counting(self, n):
        out = orig(self, n)
        seen.append((n, out))
        return out

    monkeypatch.setattr(RadixCache, "evict", counting)
    sc = Scenario.model_validate({
        "name": "t", "profile": "tiny", "seed": 1,
        "server": {"max_running_requests": 3, "chunked_prefill_size": 64, "max_prefill_tokens": 96,
                   "max_total_num_tokens": 300, "page_size": page, "speculative_algorithm": "dspark",
                   "speculative_num_draft_tokens": 4},
        "workload": {"kind": "burst", "output_len": {"kind": "fixed", "value": 8},
                     "shared_prefix": {"num_groups": 4, "prompts_per_group": 3, "system_prompt_len": 50,
                                       "question_len": 15}},
        "acceptance": {"mean_accept_length": 2.2, "request_spread": 0.3}})
    step = SimEngine(sc, tiny_profile(), fast_forward=False).run()
    by_step, seen[:] = list(seen), []
    fast = SimEngine(sc, tiny_profile()).run()
    assert sum(out for _, out in by_step) > 0
    assert seen == by_step
    assert fast.summary["cache_hit_rate"] == step.summary["cache_hit_rate"]
