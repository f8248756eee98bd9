"""Server arguments SGLang 0.5.23 checks at start-up (arg_groups/validation_hook.py
``check_server_args``), held to the same rule here: a configuration SGLang refuses to start
is refused, one it starts is run."""

from __future__ import annotations

import pytest
from specsched.sim.new_token_ratio import NewTokenRatio
from specsched.sim.server_args import ServerArgs


@pytest.mark.parametrize(("chunk", "page"), [(1000, 16), (8200, 64), (4097, 256)])
def test_a_chunk_that_is_not_whole_pages_is_refused(tmp_path, capsys, chunk, page):
    # check_server_args: assert chunked_prefill_size % page_size == 0 (chunking on, not a
    # disaggregated decode server); before, the run cut every chunk to a page boundary and ran
    from specsched.sim.server_args import chunk_pages_refusal

    from specsched.cli import main

    assert "multiple of server.page_size" in chunk_pages_refusal(chunk, page, 1)
    rc = main(["run", "h200/poisson-nospec", "--set", f"server.page_size={page}", "--set",
               f"server.chunked_prefill_size={chunk}", "--out", str(tmp_path / "r"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and f"server.chunked_prefill_size = {chunk}" in err and "multiple of server.page_size" in err


def test_whole_pages_chunking_off_and_a_decode_server_pass():
    from specsched.sim.server_args import chunk_pages_refusal

    assert chunk_pages_refusal(8192, 64, 1) is None
    assert chunk_pages_refusal(-1, 64, 1) is None
    assert chunk_pages_refusal(1000, 16, 1, "decode") is None


def test_the_dp_attention_check_takes_each_ranks_chunk(tmp_path, capsys):
    # arg_groups/parallel_hook.py _handle_data_parallelism divides chunked_prefill_size by the
    # attention DP size before check_server_args runs: burst256-ht's 16384 over 2 ranks is 8192,
    # whole pages of 256; 16640 over 2 is 8320, not (refused as the run starts, after the DP
    # size's own check)
    from specsched.sim.bundled import scenarios_dir

    from specsched.cli import main

    base = [str(scenarios_dir() / "burst256-ht.yaml"), "--set", "server.enable_dp_attention=true",
            "--set", "server.dp_size=2", "--set", "workload.num_requests=4", "--quiet"]
    rc = main(["run", *base, "--set", "server.chunked_prefill_size=16640", "--out", str(tmp_path / "a")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "server.chunked_prefill_size = 16640" in err and "each of the 2 DP-attention ranks gets 8320" in err
    from specsched.sim.server_args import chunk_pages_refusal

    assert chunk_pages_refusal(16384, 256, 2) is None and chunk_pages_refusal(16640, 256, 2) is not None
    assert chunk_pages_refusal(16384, 64, 3) is not None and chunk_pages_refusal(1000, 16, 1, "decode") is None


def test_under_disaggregation_the_roles_are_checked_not_their_template():
    """The top-level server of a PD deployment is only the template its roles inherit: with a
    chunk of part pages there and whole pages on the prefill server, SGLang launches both
    (the decode server is exempt), and so does the run; the check refused the template."""
    from specsched.analysis.overrides import load_scenario_with_overrides
    from specsched.sim.bundled import scenarios_dir
    from specsched.sim.errors import ConfigError
    from specsched.sim.limits import check_chunk_pages

    path = scenarios_dir() / "agentic-pd-c128.yaml"
    base = {"server.page_size": 64, "server.chunked_prefill_size": 16000}
    check_chunk_pages(load_scenario_with_overrides(
        path, "base", {**base, "server.disaggregation.prefill.server": {"chunked_prefill_size": 16384}}))
    with pytest.raises(ConfigError, match=r"server\.disaggregation\.prefill\.server\.chunked_prefill_size"):
        check_chunk_pages(load_scenario_with_overrides(path, "base", base))


def test_the_resolved_page_size_is_checked(tmp_path):
    # the check runs on the resolved arguments: DeepSeek-V4's model override sets page_size 256
    # (arg_groups/model_overrides/deepseek_v4.py _deepseek_v4_overrides), so a stated chunk of
    # 1000 stops SGLang, and 1024 runs
    from specsched.sim.config import load_scenario
    from specsched.sim.errors import ConfigError
    from specsched.sim.limits import check_fits

    from tests.test_defaults import _scenario

    bad = load_scenario(_scenario(tmp_path, "deepseek-v4-flash", "MI355X", 4, "chunked_prefill_size: 1000"))
    with pytest.raises(ConfigError, match="server.chunked_prefill_size.*multiple of server.page_size .256."):
        check_fits(bad)
    ok = load_scenario(_scenario(tmp_path, "deepseek-v4-flash", "MI355X", 4, "chunked_prefill_size: 1024"))
    assert (ok.server.page_size, ok.server.chunked_prefill_size) == (256, 1024)
    check_fits(ok)


@pytest.mark.parametrize("policy", ["lpm", "dfs-weight", "hrrn", "random", "routing-key", "shortest-prefill-first"])
def test_priority_scheduling_takes_fcfs_or_lof_only(policy):
    # check_server_args: "To use priority scheduling, schedule_policy must be 'fcfs' or 'lof'";
    # before, the run sorted these orders by priority (or ignored it) and ran
    with pytest.raises(ValueError, match="server.schedule_policy.*fcfs or lof only"):
        ServerArgs(schedule_policy=policy, enable_priority_scheduling=True)
    for ok in ("fcfs", "lof"):
        ServerArgs(schedule_policy=ok, enable_priority_scheduling=True)
    ServerArgs(schedule_policy=policy)


def test_schedule_conservativeness_zero_runs():
    # check_server_args asserts schedule_conservativeness >= 0: 0 starts, with a new_token_ratio
    # of 0 (new_token_ratio_tracker.py NewTokenRatioTracker.from_config); it was refused here
    s = ServerArgs(schedule_conservativeness=0)
    r = NewTokenRatio(s.schedule_conservativeness)
    assert (r.init, r.floor, r.value) == (0.0, 0.0, 0.0)
    r.on_decode_step()
    assert r.value == 0.0
    with pytest.raises(ValueError):
        ServerArgs(schedule_conservativeness=-0.1)
