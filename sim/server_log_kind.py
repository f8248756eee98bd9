"""Which server wrote a log, told by its lines: SGLang's batch lines, SGLang's start-up lines,
or vLLM's. One place, so that every reader that meets a log where it expects something else
(a bench_serving result: sim/bench_serving.py; an SGLang log with batch lines:
analysis/server_log.py) names it in the same one line.

- SGLang's scheduler statistics, "Prefill batch"/"Decode batch" (0.2-0.5.23; read by
  analysis/server_log.py): :data:`SGLANG_BATCH`.
- SGLang's start-up lines (analysis/server_launch.py): ``server_args=ServerArgs(...)`` (0.2-0.5.x,
  ``logger.info(f"{server_args=}")``) or ``server_args={...}`` (0.5.23 ``entrypoints/engine.py``
  ``_server_args_for_logging``), the scheduler's ``max_total_num_tokens=N, ...``, and "The server is
  fired up and ready to roll!" (``entrypoints/http_server.py`` ``_wait_and_warmup``, every
  version): :data:`SGLANG_STARTUP`. A log with these and no batch line was copied before the
  runs, or logged above info (then it has none of these either).
- vLLM's: its logger's prefix (``vllm/logger.py`` ``_FORMAT``: ``%(levelname)s %(asctime)s
  [%(filename)s:%(lineno)d] %(message)s`` with ``DATE_FORMAT`` ``%m-%d %H:%M:%S``; 0.6.x without
  the opening bracket; 0.10 on behind the process's ``(APIServer pid=N)``), its start-up lines
  ("vLLM API server version", "Initializing a V1 LLM engine", "Starting vLLM API server") and its
  periodic metrics line ("Avg prompt throughput: X tokens/s, ...", V0 ``engine/metrics.py`` and
  V1 ``v1/metrics/loggers.py`` ``LoggingStatLogger``): :data:`VLLM_LINE`.
- SGLang's logger prefix alone (``[2026-01-01 10:00:00 TP0] ...``): a stretch of an SGLang log
  with neither batch nor start-up lines: :data:`SGLANG_PREFIX`.
"""

from __future__ import annotations

import re

from specsched.sim.errors import ConfigError, clipped

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
"""An ANSI CSI escape (colour, cursor): none of a logger's own text (vLLM 0.10 on colours its
process prefix, ``vllm/utils/__init__.py`` ``_add_prefix``: ``CYAN`` ... ``RESET``)."""
SGLANG_BATCH = re.compile(r"\b(?:Prefill|Decode) batch(?: \[\d+\])?\s*[,.(]")
"""A line of SGLang's scheduler statistics (the loose form; analysis/server_log.py parses them)."""
SGLANG_STARTUP = re.compile(r"\bserver_args=(?:ServerArgs\(|\{)|\bmax_total_num_tokens=\d+, |"
                            r"The server is fired up and ready to roll")
"""A start-up line only SGLang writes (module docstring)."""
SGLANG_PREFIX = re.compile(r"^\[(?:\d{4}-\d{2}-\d{2} )?\d{2}:\d{2}:\d{2}(?:\.\d+)?(?: [A-Z_]+\d+)*\] ")
"""SGLang's logger prefix at the start of a line (``configure_logger``: ``[%(asctime)s{.msecs}{prefix}]``,
``datefmt`` ``%Y-%m-%d %H:%M:%S``, the scheduler's prefix `` DP<d> PP<p> ATTN_CP<c> MOE_DP<m> TP<t>
EP<e>``; 0.3.0 ``%H:%M:%S``; the HTTP server's and tokenizer's lines without ranks): what every
line of an SGLang log holds, batch lines or not."""
VLLM_SERVER = re.compile(r"vLLM API server version|Initializing an? (?:V1 )?LLM engine|Starting vLLM API server"
                         r"|\bAvg prompt throughput: ")
"""A line only a vLLM server writes (module docstring)."""
VLLM_PREFIX = re.compile(r"^(?:\(\w+ pid=\d+\) )?(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) \d{2}-\d{2} \d{2}:\d{2}:\d{2}"
                         r"(?:\.\d+)? \[?[\w.-]+\.py:\d+\]")
"""vLLM's logger prefix, which its benchmark client's output has too (told apart by
:data:`VLLM_CLIENT`)."""
VLLM_CLIENT = re.compile(r"Starting initial single prompt test run|Traffic request rate:|\bdataset_name=")
"""A line of vLLM's benchmark client (``vllm bench serve``, ``benchmark_serving.py``): its
``print(args)`` and the lines it prints before a run."""


class LogSigns:
    """What the lines of a file say of the server that wrote them, line by line (:meth:`see`),
    for a reader that found none of what it reads: :meth:`refusal` names the file for what it
    is. Each sign is looked for until first found (a reader stops asking once it has lines of
    its own)."""

    def __init__(self) -> None:
        self.vllm: tuple[int, str] | None = None
        self.vllm_prefix: tuple[int, str] | None = None
        self.vllm_client = False
        self.startup: tuple[int, str] | None = None
        self.sglang_prefix: tuple[int, str] | None = None

    def see(self, line: int, text: str) -> None:
        """Look at ``text``, the file's line ``line``."""
        if "\x1b" in text:
            text = ANSI.sub("", text)
        if self.startup is None and SGLANG_STARTUP.search(text):
            self.startup = (line, text)
        if self.startup is not None:
            return   # an SGLang log's start-up lines: not vLLM's
        if self.sglang_prefix is None and SGLANG_PREFIX.match(text):
            self.sglang_prefix = (line, text)
        if self.vllm is None and VLLM_SERVER.search(text):
            self.vllm = (line, text)
        if self.vllm_prefix is None and VLLM_PREFIX.match(text):
            self.vllm_prefix = (line, text)
        if not self.vllm_client and VLLM_CLIENT.search(text):
            self.vllm_client = True

    def refusal(self, path: str, expected: str) -> ConfigError | None:
        """The one-line refusal of the file at ``path`` as what its lines say it is, given
        where ``expected`` goes: a vLLM server's log, or an SGLang log of start-up lines only;
        None when they say neither."""
        if self.startup is not None:
            return startup_only(f"{path}:{self.startup[0]}", self.startup[1], expected)
        vllm = self.vllm or (self.vllm_prefix if not self.vllm_client else None)
        if vllm is not None:
            return vllm_log(f"{path}:{vllm[0]}", vllm[1], expected)
        if self.sglang_prefix is not None:
            return no_batch_lines(f"{path}:{self.sglang_prefix[0]}", self.sglang_prefix[1], expected)
        return None


def vllm_log(where: str, text: str, expected: str) -> ConfigError:
    """The one-line refusal of a vLLM server's log, its line ``text`` at ``where``, given where
    ``expected`` goes."""
    return ConfigError(where, "<line>", clipped(text.strip()),
                       f"a vLLM server's log, not {expected}: only SGLang's server log has 'Prefill batch'/'Decode "
                       "batch' lines (batch sizes, step times) for calibrate --server-log; a vLLM run is compared and "
                       "fitted from its benchmark result (vllm bench serve --save-result), without a server log")


def startup_only(where: str, text: str, expected: str) -> ConfigError:
    """The one-line refusal of an SGLang server log with start-up lines and no batch line, its
    first start-up line ``text`` at ``where``, given where ``expected`` goes."""
    return ConfigError(where, "<line>", clipped(text.strip()),
                       f"an SGLang server log with start-up lines only, no batch lines ('Prefill batch'/'Decode "
                       f"batch'), not {expected}: it was copied before the runs, or the runs logged above "
                       "--log-level info; give calibrate --server-log the log kept while the runs ran")


def no_batch_lines(where: str, text: str, expected: str) -> ConfigError:
    """The one-line refusal of a log whose lines carry SGLang's logger prefix
    (:data:`SGLANG_PREFIX`) but none of its batch or start-up lines, its first such line
    ``text`` at ``where``, given where ``expected`` goes: a stretch of an SGLang log
    (``docker logs --tail``, a rotated file) or one logged above info. It was refused as a JSON
    line cut short ("Expecting ',' delimiter; truncated?": the prefix's "[" read as a JSON list)."""
    return ConfigError(where, "<line>", clipped(text.strip()),
                       "a server log behind SGLang's logger prefix ('[date time ...]') with no 'Prefill batch'/'Decode "
                       f"batch' line and no start-up line, not {expected}: a part of the log (docker logs --tail, a "
                       "rotated file) or one logged above --log-level info; give calibrate --server-log the log kept "
                       "while the runs ran, and --from / --measured the bench_serving --output-file")
