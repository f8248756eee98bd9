"""Extreme but type-valid numbers in a scenario: each run ends in 0 or in one error line
(exit 2) naming the key, never a traceback, a MemoryError, an OverflowError or a hang.

The parametrized cases each failed before their fix: an int64 overflow (lengths, a hash
block, a trace's reply length, priorities), a 16 GiB token-id array made before the check
that refuses it (a multi-turn system prompt or user turn), an infinite clock (a think time
of 1e308 s), NaN arrival gaps that never ended (burstiness 5e-324), and a search for a least
SWA ratio that never ended (a window of 2**63).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specsched.cli import main

BATCH = ("scenarios/h200/batch8.yaml", ["workload.num_requests=2", "workload.output_len.value=8"])
POISSON = ("scenarios/poisson8b-fixed.yaml", ["workload.num_requests=2", "workload.output_len.value=8"])
MULTI = ("scenarios/multi-turn-example.yaml", [
    "workload.multi_turn.num_conversations=2", "workload.multi_turn.num_turns=2", "workload.output_len.value=8",
    "workload.multi_turn.first_prompt_len.value=100", "workload.multi_turn.user_len.value=50",
    "workload.multi_turn.system_prompt_len=100"])
AGENTIC = ("scenarios/agentic-trace-example.yaml", ["workload.multi_turn.num_conversations=1"])
PREFIX = ("scenarios/h200/shared-prefix.yaml", [
    "workload.shared_prefix.num_groups=2", "workload.shared_prefix.prompts_per_group=1", "workload.output_len.value=8"])
MOONCAKE = ("scenarios/trace-example.yaml", ["workload.num_requests=2"], "mooncake")
PRIORITY = ("scenarios/h200/batch8.yaml", ["workload.num_requests=2", "workload.output_len.value=8",
                                           "server.enable_priority_scheduling=true"])


def run(tmp_path, capsys, base, key, value):
    """``specsched run`` of ``base`` with ``key=value``: (exit status, stderr lines)."""
    path, sets, *arm = base
    args = ["run", path, "-q", "--out", str(tmp_path / "out")]
    if arm:
        args += ["--arm", arm[0]]
    for item in [*(s for s in sets if s.split("=")[0] != key), f"{key}={value}"]:
        args += ["--set", item]
    rc = main(args)
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    return rc, err


def assert_one_line(rc, err, tmp_path, key):
    errors = [line for line in err if "error" in line]
    assert rc == 2 and len(errors) == 1 and key in errors[0], err
    assert not any("Traceback" in line for line in err), err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("base", "key", "value", "named"), [
    (BATCH, "workload.output_len.value", 2**63, "workload.output_len.value"),
    (BATCH, "workload.input_len.value", 10**30, "workload.input_len.value"),
    (PREFIX, "workload.shared_prefix.system_prompt_len", 10**30, "workload.shared_prefix.system_prompt_len"),
    (PREFIX, "workload.shared_prefix.question_len", 10**30, "workload.shared_prefix.question_len"),
    (AGENTIC, "workload.multi_turn.agentic_trace.trace_reply_len", 2**63,
     "workload.multi_turn.agentic_trace.trace_reply_len"),
    (MOONCAKE, "workload.trace.block_size", 2**63, "workload.trace.block_size"),
    (PRIORITY, "workload.priorities", f"[{2**63}, 1]", "workload.priorities"),
    (PRIORITY, "workload.priorities", f"[{-10**30}, 1]", "workload.priorities"),
    (MULTI, "workload.multi_turn.system_prompt_len", 2**31 - 1, "workload.multi_turn"),
    (MULTI, "workload.multi_turn.first_prompt_len.value", 2**31 - 1, "workload.multi_turn"),
    (MULTI, "workload.multi_turn.user_len.value", 2**31 - 1, "workload.multi_turn"),
    (MULTI, "workload.multi_turn.think_time_s", "1.0e+308", "workload.multi_turn.think_time_s"),
    (POISSON, "workload.burstiness", "5.0e-324", "workload.burstiness"),
    (BATCH, "server.sliding_window_size", 2**63, "server.swa_full_tokens_ratio"),
    (BATCH, "server.max_running_requests", 10**30, "server.max_running_requests"),
    (BATCH, "server.context_length", 10**30, "server.context_length"),
])
def test_an_extreme_value_is_refused_in_one_line(tmp_path, capsys, base, key, value, named):
    rc, err = run(tmp_path, capsys, base, key, value)
    assert_one_line(rc, err, tmp_path, named)


def test_a_multi_turn_history_past_memory_is_refused_before_it_is_made(tmp_path, capsys):
    """With a context and a pool that hold it, a system prompt just under 2**31 tokens in two
    conversations is refused for the memory its token ids take (64 GiB), before any is made."""
    base = (MULTI[0], [*MULTI[1], f"server.context_length={2**31 - 1}", f"server.max_total_num_tokens={2**63 - 1}"])
    rc, err = run(tmp_path, capsys, base, "workload.multi_turn.system_prompt_len", 2**31 - 1 - 400)
    assert_one_line(rc, err, tmp_path, "workload.multi_turn")
    assert "of token ids" in err[-1], err


@pytest.mark.parametrize(("base", "key", "value"), [
    (PRIORITY, "workload.priorities", f"[{2**63 - 1}, {-(2**63 - 1)}]"),
    (MULTI, "workload.multi_turn.think_time_s", "1.0e+9"),
    (POISSON, "workload.burstiness", "1.0e-300"),
    (BATCH, "server.max_running_requests", 2**31 - 1),
    (BATCH, "server.context_length", 2**31 - 1),
])
def test_the_largest_allowed_value_runs(tmp_path, capsys, base, key, value):
    rc, err = run(tmp_path, capsys, base, key, value)
    assert rc == 0 and not any("Traceback" in line for line in err), err


FIELDS = [
    (BATCH, "workload.input_len.value"), (BATCH, "workload.output_len.value"), (BATCH, "server.max_running_requests"),
    (BATCH, "server.max_total_num_tokens"), (BATCH, "server.context_length"), (BATCH, "server.sliding_window_size"),
    (BATCH, "server.cuda_graph_max_bs"), (BATCH, "server.max_prefill_tokens"), (BATCH, "seed"),
    (BATCH, "acceptance.request_spread"), (BATCH, "host.speed_factor"), (POISSON, "workload.request_rate"),
    (POISSON, "workload.burstiness"), (MULTI, "workload.multi_turn.system_prompt_len"),
    (MULTI, "workload.multi_turn.user_len.value"), (MULTI, "workload.multi_turn.think_time_s"),
    (PREFIX, "workload.shared_prefix.question_len"), (MOONCAKE, "workload.trace.block_size"),
]
VALUES = [2**31, 2**53, 2**63, 10**30, "1.0e+308", "1.0e-308", "5.0e-324"]


@settings(max_examples=12, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(FIELDS), value=st.sampled_from(VALUES))
def test_any_extreme_value_runs_or_is_refused_in_one_line(tmp_path_factory, capsys, field, value):
    base, key = field
    tmp_path = tmp_path_factory.mktemp("x")
    rc, err = run(tmp_path, capsys, base, key, value)
    assert not any("Traceback" in line for line in err), err
    assert rc in (0, 2), (rc, err)
    if rc == 2:
        assert len([line for line in err if "error" in line]) == 1, err
        assert not (tmp_path / "out").exists()
