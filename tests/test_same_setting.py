"""One rule for "the same setting" of a server argument (sim/sglang_launch_args.py
``same_setting``), used by every comparison of server arguments: validate's notes, from-bench
--template's notes, calibrate --from's log against the runs, the unmodelled arguments' defaults."""

from __future__ import annotations

import json
import math
from enum import Enum
from pathlib import Path

import pytest
from specsched.sim.sglang_launch_args import same_setting

from specsched.cli import main

DATA = Path(__file__).parent / "data"


class _Algo(Enum):
    EAGLE3 = "eagle3"


@pytest.mark.parametrize(("a", "b", "same"), [
    (8192, 8192.0, True), (8192, "8192", True), ("1", 1, True), (0.1 + 0.2, 0.3, True), (8192, 4096, False),
    (True, 1, False), (False, 0, False), (True, True, True), (None, None, True), (None, 0, False), (None, "", False),
    ([1, 2, 4], (1, 2, 4), True), ([1, 2], [1, 2, 4], False), ([1, "2"], (1.0, 2), True),
    ({"decode": {"max_bs": 48}}, {"decode": {"max_bs": 48.0}}, True), ({"a": 1}, {"a": 1, "b": 2}, False),
    (_Algo.EAGLE3, "EAGLE3", True), (_Algo.EAGLE3, "eagle3", True), ("EAGLE3", "eagle3", False),
    ("fcfs", "lpm", False), (math.nan, math.nan, True), ("auto", 1, False),
])
def test_same_setting(a, b, same):
    assert same_setting(a, b) is same and same_setting(b, a) is same


def test_calibrate_names_a_server_log_of_another_launch_than_the_runs(tmp_path, capsys, monkeypatch):
    """A run whose server_info states its launch beside a server log whose start-up lines state
    another (here the chunk size and the running limit): the log's decode steps are priced with
    the run's server; the difference was taken without a word. One warning line names it."""
    monkeypatch.chdir(tmp_path)
    run = json.loads((DATA / "bench" / "sglang-0.5.23-full-server-info.jsonl").read_text().splitlines()[0])
    info = run["server_info"]
    log = tmp_path / "server.log"
    args = {k: info[k] for k in ("model_path", "tp_size", "chunked_prefill_size", "max_running_requests")}
    args["chunked_prefill_size"] = 4096
    plain = (DATA / "logs" / "sglang-0.5.23.log").read_text()
    log.write_text(f"[2026-03-02 07:59:50] server_args={args!r}\n" + plain)
    (tmp_path / "run.jsonl").write_text(json.dumps(run) + "\n")
    argv = ["calibrate", "--from", "run.jsonl", "--server-log", str(log), "--profile", "h100-llama-3.1-8b-eagle3-analytic",
            "--params", "decode", "--seeds", "1", "--max-evals", "1", "--out", "o.yaml"]
    main(argv)
    err = [x for x in capsys.readouterr().err.splitlines() if "another launch" in x]
    assert len(err) == 1 and "chunked_prefill_size 8192 (log 4096)" in err[0], err
    args["chunked_prefill_size"] = 8192.0   # the same setting, written as a float
    log.write_text(f"[2026-03-02 07:59:50] server_args={args!r}\n" + plain)
    main(argv)
    assert "another launch" not in capsys.readouterr().err
