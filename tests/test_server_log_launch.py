"""A server log's start-up lines as every SGLang version writes them: the ``server_args=`` line
and the scheduler's limits line (``max_total_num_tokens=...``), read into the ``server_info``
the fit and from-bench use (``analysis.server_log.launch_server_info``)."""

from __future__ import annotations

from pathlib import Path

from specsched.analysis.server_log import parse_server_log

LOGS = Path(__file__).parent / "data" / "logs"
BATCH = ("[2024-12-05 10:01:02 TP0] Decode batch. #running-req: 16, #token: 18640, token usage: 0.04, "
         "gen throughput (token/s): 1066.67, #queue-req: 0\n")


def test_a_0_4_0_launch_gives_the_scheduler_limits_its_line_has():
    """0.3.x-0.4.x's scheduler logs ``max_total_num_tokens=, max_prefill_tokens=,
    max_running_requests=, context_len=`` without ``chunked_prefill_size`` (added by 0.4.6):
    the line was not recognised and the fit ran at specsched's 724000-token pool. The chunk
    comes from the ``server_args=ServerArgs(...)`` line (the dataclass's repr)."""
    info = parse_server_log(LOGS / "sglang-0.4.0-launch.log").attrs["server_info"]
    assert info["max_total_num_tokens"] == 444938 and info["max_prefill_tokens"] == 16384
    assert info["internal_states"] == [{"effective_max_running_requests_per_dp": 2049}]
    assert info["chunked_prefill_size"] == 8192 and info["schedule_policy"] == "lpm" and info["tp_size"] == 1
    assert info["model_path"] == "meta-llama/Llama-3.1-8B-Instruct"


def test_a_0_2_launch_without_a_logger_prefix_is_read(tmp_path):
    """0.2.x logged the message alone (``format="%(message)s"``): ``server_args=ServerArgs(...)``
    at the start of the line, the worker's limits behind its ``[gpu=0]`` tag (0.2.9
    ``srt/managers/tp_worker.py`` ``ModelTpServer.__init__``)."""
    log = tmp_path / "server.log"
    log.write_text("server_args=ServerArgs(model_path='m', tokenizer_path='m', tp_size=1, chunked_prefill_size=None, "
                   "max_prefill_tokens=16384, schedule_policy='lpm', dp_size=1)\n"
                   "[gpu=0] max_total_num_tokens=91034, max_prefill_tokens=16384, max_running_requests=2047, "
                   "context_len=8192\n"
                   "[gpu=0] Decode batch. #running-req: 16, #token: 18640, token usage: 0.04, "
                   "gen throughput (token/s): 1066.67, #queue-req: 0\n")
    info = parse_server_log(log).attrs["server_info"]
    assert info["max_total_num_tokens"] == 91034 and info["max_prefill_tokens"] == 16384
    assert info["chunked_prefill_size"] is None and info["model_path"] == "m"


def test_a_pipeline_parallel_launch_takes_its_first_stages_limits(tmp_path):
    """Every stage's first TP rank logs the limits line (0.4.9 ``scheduler.py``: ``tp_rank ==
    0``, prefix `` TP0 PP1``); 0.4.9 sized each stage's pool on its own (0.5.23 takes the
    stages' minimum: ``_apply_token_constraints``). The batch lines read are the first stage's
    (``first_pipeline_stage``), and so is the launch: the last line logged (PP1's) was taken,
    whichever stage it was."""
    assert parse_server_log(LOGS / "sglang-0.5.23-pp2.log").attrs["server_info"]["max_total_num_tokens"] == 180000
    log = tmp_path / "pp.log"
    log.write_text("[2025-07-20 10:00:05 TP0 PP0] max_total_num_tokens=150000, chunked_prefill_size=8192, "
                   "max_prefill_tokens=16384, max_running_requests=64, context_len=131072, available_gpu_mem=9.10 GB\n"
                   "[2025-07-20 10:00:05 TP0 PP1] max_total_num_tokens=210000, chunked_prefill_size=8192, "
                   "max_prefill_tokens=16384, max_running_requests=96, context_len=131072, available_gpu_mem=9.40 GB\n"
                   + BATCH.replace("TP0]", "TP0 PP0]") + BATCH.replace("TP0]", "TP0 PP1]"))
    info = parse_server_log(log).attrs["server_info"]
    assert info["max_total_num_tokens"] == 150000
    assert info["internal_states"] == [{"effective_max_running_requests_per_dp": 64}]


def test_the_last_launch_of_a_log_of_several_is_read(tmp_path):
    """A log appended over two launches: the runs after the second measured the second."""
    first = "[2024-12-05 10:00:29 TP0] max_total_num_tokens=1000, max_prefill_tokens=16384, max_running_requests=8, context_len=4096\n"
    log = tmp_path / "two.log"
    log.write_text(first + BATCH + first.replace("=1000,", "=2000,") + BATCH)
    assert parse_server_log(log).attrs["server_info"]["max_total_num_tokens"] == 2000
