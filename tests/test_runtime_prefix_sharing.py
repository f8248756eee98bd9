"""Prompts that share prefixes with the radix cache on: the runtime shares a cached prefix's
KV between request rows (runtime/radix_slots.py), so such a scenario measures and reports
the cache hit rate; with a KV page size above 1, which its token-by-token sharing does not
model, it is refused up front in one line, exit 2, nothing written. Multi-turn workloads
measure too (their turns share their history), refused likewise with KV pages above 1."""

from __future__ import annotations

import json

import pytest
import yaml

from specsched.cli import main

pytest.importorskip("torch")


def _write(tmp_path, name: str, workload: dict) -> str:
    """A tiny-profile DSpark scenario file with ``workload``."""
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump({
        "name": f"{name}-tiny", "profile": "tiny", "seed": 1,
        "server": {"max_running_requests": 4, "max_total_num_tokens": 5000, "chunked_prefill_size": 64,
                   "max_prefill_tokens": 96, "speculative_algorithm": "dspark", "speculative_num_draft_tokens": 4},
        "acceptance": {"mean_accept_length": 2.5, "request_spread": 0.3},
        "workload": workload}))
    return str(p)


def _scenario(tmp_path) -> str:
    return _write(tmp_path, "sp", {"kind": "burst", "output_len": {"kind": "fixed", "value": 8},
                                   "shared_prefix": {"num_groups": 2, "prompts_per_group": 3, "system_prompt_len": 48,
                                                     "question_len": 16}})


def test_shared_prefixes_with_the_radix_cache_measure(tmp_path, capsys, monkeypatch):
    """Was refused in one line ('prompts that share prefixes with the radix cache on are
    simulated only'): the runtime's pool shared no KV between rows."""
    monkeypatch.chdir(tmp_path)
    s = _scenario(tmp_path)
    assert main(["measure", s, "--preset", "tiny", "--device", "cpu", "--out", "out", "--quiet"]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["cache_hit_rate"] > 0


def test_shared_prefixes_with_kv_pages_measure(tmp_path, capsys, monkeypatch):
    """Was refused in one line ('prompts that share prefixes with the radix cache on run in the
    runtime with page_size 1 only'): the device pool now shares whole pages, each request
    keeping its partial last page (tests/test_runtime_radix.py)."""
    monkeypatch.chdir(tmp_path)
    s = _scenario(tmp_path)
    assert main(["measure", s, "--preset", "tiny", "--device", "cpu", "--set", "server.page_size=16",
                 "--out", "out", "--quiet"]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["cache_hit_rate"] > 0


def test_with_the_radix_cache_off_the_same_workload_measures(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = _scenario(tmp_path)
    assert main(["measure", s, "--preset", "tiny", "--device", "cpu", "--set", "server.disable_radix_cache=true",
                 "--out", "out", "--quiet"]) == 0
    assert (tmp_path / "out" / "summary.json").is_file()
    assert "cache_hit_rate" not in (tmp_path / "out" / "summary.json").read_text()


def _multi_turn(tmp_path) -> str:
    return _write(tmp_path, "mt", {"kind": "multi_turn", "concurrency": 2, "output_len": {"kind": "fixed", "value": 8},
                                   "multi_turn": {"num_conversations": 2, "num_turns": 2,
                                                  "first_prompt_len": {"value": 32}, "user_len": {"value": 16}}})


@pytest.mark.parametrize("radix_off", [False, True])
def test_multi_turn_measures(tmp_path, capsys, monkeypatch, radix_off):
    """Was refused in one line ('the runtime's clients send single requests'): the runtime's
    clients now release a conversation's next turn when its previous turn finishes
    (sim.workload.Clients), and with the radix cache on a later turn reads its history's KV
    from the tree."""
    monkeypatch.chdir(tmp_path)
    s = _multi_turn(tmp_path)
    args = ["measure", s, "--preset", "tiny", "--device", "cpu", "--out", "out", "--quiet"]
    if radix_off:
        args += ["--set", "server.disable_radix_cache=true"]
    assert main(args) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["completed"] == 4
    assert (summary.get("cache_hit_rate") or 0) > 0 if not radix_off else "cache_hit_rate" not in summary


def test_multi_turn_with_kv_pages_measures(tmp_path, capsys, monkeypatch):
    """Was refused in one line before any model was built: a conversation's later turn now
    reads its history's whole pages from the tree with a KV page size above 1."""
    monkeypatch.chdir(tmp_path)
    s = _multi_turn(tmp_path)
    assert main(["measure", s, "--preset", "tiny", "--device", "cpu", "--set", "server.page_size=16",
                 "--out", "out", "--quiet"]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["completed"] == 4 and summary["cache_hit_rate"] > 0

