"""bench_serving result files, read and written (SGLang's JSONL; vLLM's JSON).

SGLang's ``bench_serving --output-file F`` appends one JSON object per run to F (one line).
What each version writes (checked against each wheel's ``benchmark()``; fixtures of every
layout in tests/data/bench/):

- 0.1.24-0.2.11 (``sglang/bench_serving.py``): the 0.3 subset below under other names
  (``total_input``, ``total_output``, ``total_output_retokenized``, ``mean_e2e_latency``,
  ``median_e2e_latency``, ``median_ttft``, ``median_itl`` in ms, ``output_token_throughput``,
  ``benchmark_duration`` in s) and no ``completed``; read under the later names
  (:data:`_SGLANG_02_NAMES`). 0.2.12-0.2.15 write the 0.3 keys.
- 0.3.x (``sglang/bench_serving.py``): a subset: backend, dataset_name, request_rate,
  token totals, mean/median e2e latency, median TTFT and ITL, output_throughput, the
  random/sharegpt length arguments, duration, completed. No max_concurrency, no details.
- 0.4.0, 0.4.1: the 0.3 subset + ``max_concurrency``. 0.4.2, 0.4.3: the arguments,
  request/input/output throughput, mean, median, std and p99 of ``ttft``/``tpot``/``itl``/
  ``e2e_latency`` (``_ms``), ``concurrency``. 0.4.3.post3-0.5.3: + ``p95_itl_ms``, ``accept_length``
  (null without speculative decoding). ``--output-details`` (the per-request lists in the
  file) from 0.4.6.post5 (0.4.6-0.4.6.post4 add them to the returned dict only, after
  writing). 0.5.3: ``request_rate`` ``"trace"`` with ``--use-trace-timestamps``. 0.5.4: +
  ``total_input_text_tokens``/``total_input_vision_tokens``. 0.5.5: + ``tag``,
  ``server_info``. 0.5.6: + ``total_throughput``, the peaks. 0.5.8: + ``p90_e2e_latency_ms``.
  0.5.14: p90/p95 of every latency, ``--cache-report``. 0.5.15 moved the client to
  ``sglang/benchmark/serving.py`` (same keys). (Each release 0.3.6-0.5.23 checked:
  ``benchmark()``'s ``result`` dict before ``file.write(json.dumps(...))``.)
- 0.5.23 (``sglang/benchmark/serving.py``; ``python -m sglang.bench_serving`` still works):
  writes ``tag``, ``server_info`` (the server's /server_info, null if unreachable),
  ``total_input_text_tokens``/``total_input_vision_tokens``, ``total_throughput``,
  p90/p95 of every latency, ``max_output_tokens_per_s``, ``max_concurrent_requests``;
  ``request_rate`` is a number, ``Infinity`` (all at once) or ``"trace"`` (timestamped
  replay); with ``--goodput`` the goodput keys, with ``--cache-report`` a ``cache_report``
  object (read as ``cache_hit_rate``). ``max_itl_ms`` is printed, not written.
  ``--output-details`` adds per-request lists (one entry per request sent, failed ones
  included): ``input_lens``, ``output_lens`` (0 when failed), ``ttfts`` (s, 0.0 when
  failed), ``itls`` (s, one list per request, [] when failed), ``generated_texts``,
  ``errors`` ("" when it succeeded); with ``--cache-report`` also ``cached_tokens`` and
  ``cached_tokens_details`` (kept in ``extra``). SGLang writes no ``num_prompts``: it is
  ``len(input_lens)`` with details, else ``completed`` (failed requests then unknown).
  ``input_lens`` are the server's prompt counts where it reports them
  (``_record_server_prompt_len``), the totals the dataset's: a multi-turn replay writes
  ``total_input_tokens`` 0 and ``--gsp-fast-prepare`` 1 a request, read as not measured
  (:func:`_input_totals_unmeasured`). ``--rust-client`` (``benchmark/rust_client.py``: the
  ``sglang-bench`` extension "appends the same result keys"; its writer is compiled, not
  read) takes the rate as a string ("JSON cannot" carry inf): a null or ``"inf"`` rate reads
  as all at once, and its retokenized totals are 0 with ``--disable-retokenize``/``--vocab-size``
  (read as missing).

vLLM (each checked in that release's source archive; fixtures in tests/data/bench/) writes
one JSON object per run with ``json.dump`` (``--append-result``, 0.8.5 on, puts a newline
before each later run; hand-edited files may be indented):

- ``benchmarks/benchmark_serving.py --save-result`` 0.6.6/0.7.3: ``date``, ``backend``,
  ``model_id``, ``tokenizer_id``, ``best_of``, ``num_prompts``, ``--metadata`` KEY=VALUE
  pairs (strings), ``request_rate`` (a number, or the string ``"inf"``), ``burstiness``,
  ``max_concurrency``, then duration, completed, token totals, request_throughput,
  ``"request_goodput:"`` (with its colon; null without ``--goodput``), output_throughput,
  ``total_token_throughput`` (= SGLang's total_throughput), the per-request lists always,
  and ``{mean,median,std}_{m}_ms`` plus ``p{P}_{m}_ms`` for ``--percentile-metrics`` (default
  ttft,tpot,itl: no e2el unless asked, named ``e2el``) at ``--metric-percentiles`` (default
  99; P may be 99.9; ``p50`` stands in for a missing median). 0.8.5: no best_of; the lists
  only with ``--save-detailed``.
- ``vllm bench serve`` (``vllm/benchmarks/serve.py``; 0.8.5-0.9.2 beside the script): 0.8.5
  ``endpoint_type`` and ``label`` instead of ``backend`` (read as backend) and ``best_of``;
  0.9.2 no best_of, ``request_goodput`` without the colon, ``--ramp-up-strategy`` keys and
  ``rps_change_events``; 0.10.0 rescales the sends to end at num_prompts / rate; 0.11.0:
  ``backend`` again, ``max_output_tokens_per_s``, ``max_concurrent_requests``; 0.11.1:
  ``failed``; 0.14.0: with a drafter ``spec_decode_acceptance_length`` (1 + accepted / drafts:
  SGLang's accept length, read as ``accept_length``), ``spec_decode_acceptance_rate`` (%) and
  the draft counts; 0.16.0: ``start_times`` (the client's clock at each send; with
  ``--save-detailed``); 0.17.0: ``rtfx``; 0.23.0: ``--dataset-name timed_trace`` sends at the
  trace's times and still writes ``request_rate: "inf"``; 0.27.0: ``probe_*`` with
  ``--probe-request-rate``; 0.30.0: ``latencies`` and ``queue_times`` (kept without
  ``--save-detailed``), ``client_queue_time``/``e2el_including_client_queue`` statistics;
  0.33.0: ``server_queue_times``, ``server_ttfts``. A pooling (embedding) model's run
  (``total_input_sequences``, no output tokens) is refused. Checked in the source archives
  docs/real-servers.md lists (0.6.3-0.34.0).

:func:`read_bench` reads all of these tolerantly: keys missing, null, NaN or +-Infinity
(in a metric; ``request_rate`` Infinity is all at once) are missing,
unknown keys are kept (``BenchRun.extra``), vLLM's names are mapped to SGLang's. The project's
summaries use bench_serving's metric names and units already, so a run's summary is the
metric subset as is. :func:`bench_record` goes the other way: a simulated or measured run as
one bench_serving line (the keys and units of SGLang 0.5.23), written beside every results
directory as ``bench_serving.jsonl`` by ``sim.results.write_results``; its per-request lists
add vLLM's ``start_times`` (send times), which no SGLang version writes.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from specsched.sim import compression
from specsched.sim.arg_text import python_repr_args
from specsched.sim.errors import ConfigError, clipped
from specsched.sim.input_files import (
    NESTED_TOO_DEEPLY,
    READ_ERRORS,
    encoding_of,
    is_input_file,
    json_at,
    json_value,
    read_input,
    same_input,
    unreadable,
)
from specsched.sim.log_lines import LOG_TEXT_KEYS, unwrapped_text
from specsched.sim.metrics import finite_percentiles
from specsched.sim.server_log_kind import SGLANG_BATCH, LogSigns
from specsched.sim.tables import column, notna

STATS = ("mean", "median", "std", "p90", "p95", "p99")
LATENCIES = ("ttft", "tpot", "itl", "e2e_latency")
COUNT_KEYS = (
    "duration", "completed", "total_input_tokens", "total_output_tokens",
    "total_output_tokens_retokenized", "request_throughput", "input_throughput",
    "output_throughput", "total_throughput",
)
METRIC_KEYS: tuple[str, ...] = (
    *COUNT_KEYS,
    *(f"{s}_{m}_ms" for m in LATENCIES for s in STATS),
    "max_itl_ms", "concurrency", "accept_length", "max_output_tokens_per_s", "max_concurrent_requests",
)
"""bench_serving's metric keys (SGLang 0.5.23; older versions write subsets). Units: s for
``duration``, per s for throughputs, ms for ``*_ms``."""
ARG_KEYS = (
    "backend", "dataset_name", "request_rate", "max_concurrency", "num_prompts", "burstiness",
    "sharegpt_output_len", "random_input_len", "random_output_len", "random_range_ratio", "seed",
)
"""Run arguments read into ``BenchRun.args`` (num_prompts, burstiness and seed are vLLM's
keys; SGLang does not write them)."""
DETAIL_KEYS = ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors")
_IDENTIFYING = ("completed", "duration", "mean_ttft_ms", "median_ttft_ms", "output_throughput", "request_throughput")
_VLLM_NAMES = {"total_token_throughput": "total_throughput",
               # benchmarks/benchmark_serving.py 0.6.6-0.9.0 writes its goodput under this key, colon
               # and all (result["request_goodput:"]); vllm bench serve 0.9.2 on without the colon
               "request_goodput:": "request_goodput"}
EMBEDDING_BACKENDS = frozenset({"sglang-embedding", "vllm-embedding"})
"""SGLang bench_serving's embedding backends (0.5.10 ``bench_serving.py`` ``is_embedding``;
0.5.23 ``benchmark/serving.py`` ``_EMBEDDING_BACKENDS``): the line keeps the generation keys
with no output token. vLLM's pooling runs are known by their keys instead (a pooling
model's result has no output token key)."""
_VLLM_E2EL = re.compile(r"^(mean|median|std|p\d+(?:\.\d+)?|percentiles)_e2el_ms$")
"""vLLM's end-to-end latency statistics (``process_one_metric("e2el", ...)``, every
``benchmark_serving.py``/``vllm/benchmarks/serve.py`` from 0.6.3 to 0.34.0), read as SGLang's
``*_e2e_latency_ms``. Only these: other keys that hold ``_e2el_ms`` are other figures and are
kept as written (0.27+ ``probe_median_e2el_ms``, the ``--probe-request-rate`` side stream's
latency; 0.30+ ``mean_e2el_including_client_queue_ms``, which adds the wait for a
``--max-concurrency`` slot)."""


def vllm_name(key: str) -> str:
    """A result key under the name specsched reads it by (vLLM's names mapped to SGLang's)."""
    if key in _VLLM_NAMES:
        return _VLLM_NAMES[key]
    m = _VLLM_E2EL.match(key)
    return f"{m.group(1)}_e2e_latency_ms" if m else key


_SGLANG_02_NAMES = {
    "total_input": "total_input_tokens", "total_output": "total_output_tokens",
    "total_output_retokenized": "total_output_tokens_retokenized",
    "mean_e2e_latency": "mean_e2e_latency_ms", "median_e2e_latency": "median_e2e_latency_ms",
    "median_ttft": "median_ttft_ms", "median_itl": "median_itl_ms",
    "output_token_throughput": "output_throughput", "benchmark_duration": "duration",
}
"""SGLang 0.1.24-0.2.11's names for the keys it appends to ``--output-file`` (checked in the 0.1.24,
0.2.0, 0.2.5, 0.2.9, 0.2.10 and 0.2.11 wheels, ``sglang/bench_serving.py`` ``benchmark()``:
the same figures and units, ms latencies from ``metrics.*_ms``, ``benchmark_duration`` in s;
0.2.12 renamed them to the names 0.3-0.5.23 write and added ``completed``). Read under the
later names; a line that has both keeps the later one."""
_FALLBACKS = {
    "accept_length": "spec_decode_acceptance_length",   # vllm bench serve with a drafter
    # vLLM's early benchmarks/benchmark_serving.py (0.3-0.4 era) wrote the request throughput
    # under this misspelt key; not checked against a release (their PyPI source archives hold
    # no benchmarks/ folder): a line that has it is read, one that has not loses nothing
    "request_throughput": "request_inthroughput",
    **{f"median_{m}_ms": f"p50_{m}_ms" for m in LATENCIES},   # vLLM --metric-percentiles 50
}
"""A key read from another name when the file lacks it (the other name is also kept in
``extra``)."""
STEADY_LINE_KEYS = frozenset({"concurrency_ratio", "window_start", "window_end"})
"""The keys that make a JSON line a ``SteadyStateMetrics`` record (SGLang 0.5.23
benchmark/steady_state.py; appended by benchmark/steady_state_serving.py ``_append_metrics``),
none of which bench_serving's own result writes."""
STEADY_COMPARED = (
    "steady_duration", "steady_concurrency_threshold", "steady_completed", "steady_total_input",
    "steady_input_throughput", "steady_total_output", "steady_output_throughput", "steady_average_concurrency",
    "steady_peak_concurrency", "steady_peak_output_throughput",
)
"""The run summary's steady-state keys (:data:`sim.steady_state.SUMMARY_KEYS`) compared with a
prediction: not the ratio (an argument), the window's ends (each client's own clock: SGLang's
are ``time.perf_counter()`` values) or the retokenized figures (specsched generates no text)."""
ONE_BATCH_FIGURES = ("max_ttft_ms", "prefill_window_input_throughput", "decode_window_output_throughput")
"""The figures of a ``bench_one_batch_server`` line that bench_serving has no key for, under
the simulator summary's names of the same definitions (:func:`sim.metrics.summarize`):
``max_ttft_ms`` = ``last_ttft`` x 1000 (the time from sending the batch until every request
of it got its first token: in a burst, the largest TTFT); ``prefill_window_input_throughput``
= the line's ``input_throughput`` (total input tokens / that time);
``decode_window_output_throughput`` = the line's ``output_throughput`` (total output tokens
/ (``latency`` - that time)) (:func:`one_batch_line`)."""
EXTRA_SUMMARY_KEYS = ("cache_hit_rate", *ONE_BATCH_FIGURES)
"""Summary keys read from other parts of a line: ``cache_hit_rate`` (0-1) from SGLang
0.5.23's ``cache_report`` (``--cache-report``: cached prompt tokens / prompt tokens of the
successful requests), the simulator's prefix-cache hit rate under the same name; the
``bench_one_batch_server`` figures (:data:`ONE_BATCH_FIGURES`)."""
ONE_BATCH = "bench_one_batch_server"
"""``BenchRun.extra`` key marking a run read from a ``bench_one_batch_server`` line; its value
is the layout (:func:`one_batch_line`)."""
MAX_TIME_S = 1e9
"""A per-request time (TTFT, ITL, latency, the spread of the send times) at or past this many
seconds (31 years) is refused: no run is so long, and the whole-second buckets of the peaks
(:func:`_peaks`) overflowed on one."""
DETAILS_MAX_OUTPUT_TOKENS = 200_000
"""``bench_record`` adds per-request details (``--output-details``) to runs with at most this
many output tokens (the ITL lists grow with every token)."""


@dataclass
class BenchDetails:
    """Per-request lists of a run (``--output-details``), index = request.

    Attributes:
        input_lens, output_lens: tokens, int arrays (n,).
        ttfts: seconds, float array (n,) (0 for a failed request).
        itls: seconds, one float array per request (bench_serving's per-token gaps).
        errors: "" (or None) for a request that succeeded, else the error text.
        start_s: send times in s from the first send, float array (n,), or None: vLLM's
            ``vllm bench serve --save-detailed`` writes ``start_times`` (the client's
            ``time.perf_counter()`` at each send, 0.33 ``benchmark()``); SGLang writes none.
        latency_s: end-to-end latency in s, float array (n,) (vLLM's ``latencies``), or None.
        has_itls: the line holds ``itls``; without them (and without ``latency_s``) a
            request's finish, E2E and TPOT are unknown.
        streamed: False for a run with ``--disable-stream`` (:func:`not_streamed`): each
            ``ttfts`` entry is then the request's whole latency, not a first token.
        tokenless_ok: a row with no error text, TTFT 0.0 and output length 0 is a success
            (a prefill-only request, ``max_new_tokens`` 0), not a failure without a reason
            phrase; set by :func:`settle_tokenless` from the line's ``completed``.
    """

    input_lens: np.ndarray
    output_lens: np.ndarray
    ttfts: np.ndarray
    itls: list[np.ndarray]
    errors: list[str]
    start_s: np.ndarray | None = None
    latency_s: np.ndarray | None = None
    has_itls: bool = True
    streamed: bool = True
    tokenless_ok: bool = False

    @property
    def ok(self) -> np.ndarray:
        """Boolean (n,): the request succeeded (bench_serving counted it in ``completed``):
        no error text, and a first token (TTFT > 0) or an output length. The error text alone
        does not say it: a reply other than 200 with no reason phrase fails with an empty one
        (``output.error = response.reason or ""``, SGLang 0.3.0 to 0.5.x ``bench_serving.py``
        request functions, checked in 0.3.0 and 0.4.6.post5; the file holds no ``success``
        flag), and every failed request keeps ``RequestFuncOutput``'s ``ttft`` 0.0 and is
        listed with output length 0 (0.5.23 ``benchmark/serving.py`` ``calculate_metrics``
        appends 0 for it). A stream the server ended before its first token (an abort: the
        last message and ``[DONE]`` bring no text, HTTP 200) is a success with TTFT 0.0 and
        the output length it asked for: ``async_request_sglang_generate`` (backends
        ``sglang``, ``sglang-native``) and ``async_request_openai_chat_completions`` start
        ``output_len`` at the request's and update it only on a chunk with text, and set
        ``success`` at the stream's end; ``calculate_metrics`` counts it in ``completed``, its
        0.0 in the TTFT statistics and its asked length in the output totals (it was read as
        failed, against the line's own ``completed``). A row with neither (no error text, TTFT
        0.0, output length 0) is a success where :attr:`tokenless_ok` says so (a prefill-only
        request, :func:`settle_tokenless`), else a failure."""
        no_error = np.array([not e for e in self.errors], dtype=bool)
        if self.tokenless_ok:
            return no_error
        return no_error & ((self.ttfts > 0) | (self.output_lens > 0))


@dataclass
class BenchRun:
    """One bench_serving run (a line of a JSONL file, or a vLLM JSON file).

    Attributes:
        source: ``file:line`` it came from.
        args: run arguments found (:data:`ARG_KEYS`); ``request_rate`` is a float
            (``inf`` = all at once) or ``"trace"``; a null is left out.
        summary: metrics found (:data:`METRIC_KEYS`, bench_serving units), numbers only.
        extra: every other key, as read (``server_info``, ``tag``, unknown keys).
        details: per-request lists when the line has them, else None.
        chunk_itl_client: an SGLang ``sglang``/``sglang-native`` line written before the
            client split chunks into per-token gaps (0.1.24-0.4.3.post2: no ``accept_length``
            and no ``p95_itl_ms`` key, which 0.4.3.post3 added with the split;
            ``async_request_sglang_generate`` appends ``timestamp - most_recent_timestamp``
            once per chunk in the 0.4.3 and 0.4.3.post2 wheels, ``output.itl.extend([adjust_itl]
            * num_new_tokens)`` in 0.4.3.post3 and 0.4.4): its ITL is one gap per chunk.
        unmeasured: metric keys of :data:`METRIC_KEYS` the line holds without a finite
            number (null, "NaN", an infinity: an empty sample; not a null ``accept_length``,
            which SGLang writes for a run without speculative decoding), in key order; they are in
            neither ``summary`` nor ``extra``, and a comparison names them as not compared.
        notes: what reading the line found wrong without refusing it (per-request lists left
            out for a missing one, :func:`_details`; figures no single run gives,
            :func:`_impossible`), each one line starting with ``source``; the commands print
            them as ``warning:`` lines.
    """

    source: str
    args: dict[str, Any]
    summary: dict[str, float]
    extra: dict[str, Any] = field(default_factory=dict)
    details: BenchDetails | None = None
    chunk_itl_client: bool = False
    unmeasured: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)

    @property
    def num_prompts(self) -> int | None:
        """Requests sent: ``num_prompts`` (vLLM), else the details' length, else
        ``completed`` (SGLang writes no num_prompts)."""
        if isinstance(self.args.get("num_prompts"), int):
            return self.args["num_prompts"]
        if self.details is not None:
            return len(self.details.input_lens)
        c = self.summary.get("completed")
        return int(c) if c is not None else None


# ------------------------------------------------------------------ reading

STDIN = "-"
"""A result file given as ``-`` (``-:LINE`` for one run of it): the standard input, read as
``/dev/stdin`` (:func:`split_spec`) by every command that reads a bench_serving file
(``validate --measured``, ``validate-bench``, ``scenario from-bench``, ``calibrate --from``,
``plot``); a pipe is read once and kept (sim/input_files.py). A file named ``-`` is ``./-``."""
STDIN_PATH = Path("/dev/stdin")


def input_path(path: str | Path) -> Path:
    """``path`` as the file to open: ``-`` is the standard input (:data:`STDIN_PATH`)."""
    return STDIN_PATH if str(path) == STDIN else Path(path)


def split_spec(spec: str | Path) -> tuple[Path, int | None]:
    """``FILE[:LINE]`` -> (path, line or None). A path that exists as given wins (a file name
    may itself contain ':'); ``-`` is the standard input (:data:`STDIN`)."""
    text = str(spec)
    if text == STDIN or Path(text).exists() or ":" not in text:
        return input_path(text), None
    head, _, tail = text.rpartition(":")
    if not tail.isdigit() or int(tail) < 1:
        raise ConfigError("<command line>", "FILE:LINE", text, "LINE must be a line number >= 1")
    return input_path(head), int(tail)


def _text_of(data: bytes, p: Path) -> str:
    """``data`` (a result file's bytes) as text (:func:`sim.input_files.encoding_of`). A file
    cut inside its last character (a writer that keeps non-ASCII text as it is,
    ``json.dumps(..., ensure_ascii=False)``, killed or copied while writing) reads without that
    character, so its last line is a line cut short like any other (the whole file was refused
    as "not a text file"); a byte that is not text elsewhere is refused at its line.

    Raises:
        ConfigError: a byte that is not UTF-8 (or UTF-16 after its mark) before the end.
        UnicodeDecodeError: a file none of whose bytes read as text (the caller words it).
    """
    encoding = encoding_of(data)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        if e.end >= len(data) and e.start >= len(data) - 4:   # cut inside the last character
            return data[: e.start].decode(encoding)
        if e.start < 64 or b"\x00" in data[:4096]:   # no text at all: a binary file
            raise
        line = data.count(b"\n", 0, e.start) + 1
        raise ConfigError(f"{p}:{line}", "<bytes>", data[e.start:e.end].hex(" "), f"not {encoding.split('-sig')[0].upper()} "
                          "text (bench_serving writes ASCII JSON): a damaged file?") from None


def given_before(spec: str, before: list[str]) -> str | None:
    """The spec among ``before`` (``FILE[:LINE]``, :func:`split_spec`) that already names what
    ``spec`` names: the same file however spelt (:func:`sim.input_files.same_input`), whole or
    at the same line (a line of a file given whole is in it). None when none does. A command
    taking several inputs reads each once: one given twice was read twice (fitted or drawn
    twice)."""
    path, line = split_spec(spec)
    for b in before:
        bp, bl = split_spec(b)
        if same_input(bp, path) and bl in (None, line):
            return b
    return None


def _number(where: str, key: str, v: Any, numeric_strings: bool = False) -> float | None:
    """A JSON number of a result line as a float; None for a missing or null value.

    bench_serving writes every figure as a JSON number (SGLang 0.5.23
    ``benchmark/serving.py`` ``benchmark``: ``json.dumps`` of the result dict, infinity as
    ``Infinity``); the one string it takes is vLLM's ``"inf"`` request rate (``"inf"``,
    ``"infinity"``, ``"+inf"``, any case). A numeric string (``"120"``) is another writer's or
    a hand edit and is refused like ``"sixty"`` or ``true``, unless ``numeric_strings``: a
    value vLLM's ``--metadata KEY=VALUE`` writes, always a string (``seed``).

    Raises:
        ConfigError: a boolean, a list or object, or a string other than those above.
    """
    if v is None:
        return None
    if isinstance(v, bool):
        raise ConfigError(where, key, v, "must be a number")
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        t = v.strip().lower()
        if t in ("inf", "infinity", "+inf"):
            return math.inf
        if numeric_strings:
            try:
                return float(t)
            except ValueError:
                pass
        raise ConfigError(where, key, v, "must be a JSON number or null, not a string (bench_serving writes numbers)")
    raise ConfigError(where, key, v, "must be a number or null")


def _int_arg(where: str, key: str, v: Any, numeric_strings: bool = False) -> int | None:
    x = _number(where, key, v, numeric_strings)
    if x is None:
        return None
    if not math.isfinite(x) or x != int(x):
        raise ConfigError(where, key, v, "must be an integer or null")
    return int(x)


METADATA_ARGS = ("sharegpt_output_len", "random_input_len", "random_output_len", "random_range_ratio")
"""SGLang's dataset arguments that vLLM's result JSON never holds as numbers of its own: in one
(``date``), a string under such a name is a ``--metadata KEY=VALUE`` label (vLLM
``main``: every metadata value a string, put at the top of the result)."""


def vllm_metadata(obj: Mapping[str, Any], key: str) -> bool:
    """Whether ``obj[key]`` is a vLLM ``--metadata`` label (:data:`METADATA_ARGS`): a string in
    a vLLM result JSON. Read as SGLang's dataset argument, ``--metadata random_input_len=1024``
    refused the whole result ("must be a JSON number, not a string"); it is kept as written
    instead (vLLM writes no dataset arguments, and its random dataset draws lengths by its own
    range rule, not SGLang's ``compute_random_lens``)."""
    return "date" in obj and isinstance(obj.get(key), str)


def _args(obj: Mapping[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in ("backend", "dataset_name"):
        if obj.get(k) is not None:
            out[k] = str(obj[k])
    rate = obj.get("request_rate")
    if isinstance(rate, str) and rate.strip().lower() == "trace":
        out["request_rate"] = "trace"
    elif rate is not None:
        r = _number(where, "request_rate", rate)
        if not r > 0:
            raise ConfigError(where, "request_rate", rate, "must be > 0 (inf = all at once) or 'trace'")
        out["request_rate"] = r
    for k in ("max_concurrency", "num_prompts", "sharegpt_output_len", "random_input_len", "random_output_len"):
        if k in METADATA_ARGS and vllm_metadata(obj, k):
            continue   # a --metadata label, kept in extra (parse_run)
        v = _int_arg(where, k, obj.get(k))
        if v is not None:
            out[k] = v
    # vLLM's --metadata KEY=VALUE pairs are strings put at the top of its result JSON
    # (benchmark_serving.py / vllm/benchmarks/serve.py main), so a "seed" may be a label: read
    # as the scenario's seed when it is an integer, else kept as written ("--metadata
    # seed=run-3" refused the whole line)
    try:
        v = _int_arg(where, "seed", obj.get("seed"), numeric_strings=True)   # vLLM's --metadata seed=3: "3"
    except ConfigError:
        v = None
    if v is not None:
        out["seed"] = v
    for k in ("random_range_ratio", "burstiness"):
        if k in METADATA_ARGS and vllm_metadata(obj, k):
            continue
        v = _number(where, k, obj.get(k))
        if v is not None:
            out[k] = v
    return out


NEEDED_DETAILS = ("input_lens", "output_lens", "ttfts")
"""The per-request lists without which none is read: each request's prompt, output and first
token (the requests table, the input totals, ``from-bench --lengths details`` all need them)."""


def _details(obj: Mapping[str, Any], where: str, notes: list[str] | None = None) -> BenchDetails | None:
    """The line's per-request lists, or None. A line with some of bench_serving's lists but not
    one of :data:`NEEDED_DETAILS` (a hand-made or cut line) is read as one without details, with
    a note naming the missing key in ``notes`` (it lost them without a word); vLLM 0.30's
    ``latencies``/``queue_times``, written without ``--save-detailed``, are no such list."""
    missing = [k for k in NEEDED_DETAILS if not isinstance(obj.get(k), list)]
    if missing:
        have = [k for k in DETAIL_KEYS if isinstance(obj.get(k), list)]
        if have and notes is not None:
            notes.append(f"{where}: no {', no '.join(missing)} beside the per-request {', '.join(have)}: the per-request "
                         f"lists are left out (each request's {', '.join(NEEDED_DETAILS)} are needed), the line is read "
                         "as one without --output-details")
        return None
    n = len(obj["input_lens"])
    for k in ("output_lens", "ttfts", "itls", "errors", "start_times", "latencies"):
        if isinstance(obj.get(k), list) and len(obj[k]) != n:
            raise ConfigError(where, k, f"{len(obj[k])} entries", f"per-request lists must have {n} entries like input_lens")

    def arr(key: str, values: list[Any], non_negative: bool = False, gaps: bool = False) -> np.ndarray:
        """``values`` as floats. ``gaps``: null and NaN read as NaN (vLLM's send times and
        latencies); else every entry must be a number, since bench_serving writes one for every
        request, 0 for a failed one (0.5.23 ``RequestFuncOutput``'s defaults; vLLM's likewise):
        a null read as 0 made a prompt of 0 tokens or a TTFT of 0 ms enter the figures."""
        for j, v in enumerate(values):   # a list or a string inside (np.array made a 2-D array, or read "0.01")
            if v is None and gaps:
                continue
            if v is None or isinstance(v, bool) or not isinstance(v, (int, float)) or (not gaps and v != v):
                raise ConfigError(where, f"{key}[{j}]", clipped(v), "entries must be numbers: bench_serving writes one "
                                  "for every request (0 for a failed one)")
        a = np.array([np.nan if v is None else v for v in values], dtype=float)
        if non_negative:
            with np.errstate(invalid="ignore"):
                neg = np.flatnonzero((a < 0) | (a >= MAX_TIME_S))
            if neg.size:
                raise ConfigError(where, f"{key}[{int(neg[0])}]", values[int(neg[0])],
                                  f"a time must be >= 0 and < {MAX_TIME_S:g} (s)")
        return a

    itls_raw = obj.get("itls") if isinstance(obj.get("itls"), list) else [[] for _ in range(n)]
    itls = []
    for i, x in enumerate(itls_raw):
        if x is None:
            x = []
        if not isinstance(x, list):
            raise ConfigError(where, f"itls[{i}]", x, "must be a list of seconds")
        itls.append(arr(f"itls[{i}]", x, non_negative=True))
    errors = obj.get("errors") if isinstance(obj.get("errors"), list) else [""] * n
    start = latency = None
    if isinstance(obj.get("start_times"), list) and n:
        start = arr("start_times", obj["start_times"], gaps=True)
        if np.isfinite(start).any():
            with np.errstate(invalid="ignore"):
                far = np.flatnonzero(np.isinf(start) | (start - np.nanmin(start) >= MAX_TIME_S))
            if far.size:   # the peaks' whole-second buckets over such a span overflowed (a traceback)
                raise ConfigError(where, f"start_times[{int(far[0])}]", obj["start_times"][int(far[0])],
                                  f"send times are the client's clock in s: finite and within {MAX_TIME_S:g} s of "
                                  "each other")
            start = start - np.nanmin(start)
        else:
            start = None
    if isinstance(obj.get("latencies"), list):
        latency = arr("latencies", obj["latencies"], non_negative=True, gaps=True)
    lens = {}
    for key in ("input_lens", "output_lens"):
        v = arr(key, obj[key])
        with np.errstate(invalid="ignore"):
            # a token count is a whole number >= 0 (a failed request's output is 0); no writer puts
            # less, a fraction, or one past int64 (which the cast below made garbage, silently)
            bad = np.flatnonzero((v < 0) | np.isinf(v) | (v != np.floor(v)) & ~np.isnan(v) | (v >= 2.0**62))
        if bad.size:
            raise ConfigError(where, f"{key}[{int(bad[0])}]", obj[key][int(bad[0])], "a token count must be an integer >= 0")
        lens[key] = np.nan_to_num(v).astype(np.int64)
    return BenchDetails(lens["input_lens"], lens["output_lens"],
                        np.nan_to_num(arr("ttfts", obj["ttfts"], non_negative=True)), itls, [e or "" for e in errors], start, latency,
                        has_itls=isinstance(obj.get("itls"), list))


def _cache_report(obj: Mapping[str, Any], where: str) -> dict[str, float]:
    rep = obj.get("cache_report")
    if not isinstance(rep, dict):
        return {}
    v = _number(where, "cache_report.cache_hit_rate_pct", rep.get("cache_hit_rate_pct"))
    return {} if v is None or math.isnan(v) else {"cache_hit_rate": v / 100.0}


def _percentile_pairs(obj: dict[str, Any], where: str) -> dict[str, Any]:
    """``percentiles_{m}_ms`` as ``[[P, value], ...]`` -> ``p{P}_{m}_ms`` keys, where the line
    lacks them. vLLM's ``BenchmarkMetrics`` holds its percentiles so (``percentiles_ttft_ms:
    list[tuple[float, float]]``; its result JSON flattens them to ``p99_ttft_ms``, with
    ``p{int(P)}`` for a whole P, else ``p{P}``), and a dump of the dataclass
    (``dataclasses.asdict(metrics)``, saved by wrappers around the benchmark) keeps the
    lists. A dict ``{"99": value}`` or ``{"p99": value}`` is read the same way. The value as
    written is kept in ``extra``."""
    out = dict(obj)
    for k, v in obj.items():
        if not (k.startswith("percentiles_") and k.endswith("_ms")) or v is None:
            continue
        m = k[len("percentiles_"):-len("_ms")]
        if isinstance(v, dict):   # {"99": value} or {"p99": value}, as a dict of the pairs is written
            try:
                v = [[float(str(p).strip().lower().removeprefix("p")), x] for p, x in v.items()]
            except ValueError:
                raise ConfigError(where, k, next(iter(v)), "percentile keys must be numbers (99, p99)") from None
        if not isinstance(v, list) or not all(
                isinstance(pv, (list, tuple)) and len(pv) == 2
                and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in pv) for pv in v):
            raise ConfigError(where, k, clipped(v), "must be a list of [percentile, value in ms] pairs")
        bad = next((pv for pv in v if not 0 <= pv[0] <= 100), None)   # NaN and inf fail too
        if bad is not None:
            raise ConfigError(where, k, list(bad), "percentiles must be in [0, 100] (a p150 or pinf key was kept)")
        for pct, val in v:
            word = str(int(pct)) if float(pct).is_integer() else str(pct)
            out.setdefault(f"p{word}_{m}_ms", val)
    return out


_NON_NEGATIVE = tuple(k for k in METRIC_KEYS if k != "duration")
_WHOLE = ("completed", "total_input_tokens", "total_output_tokens", "total_output_tokens_retokenized",
          "max_concurrent_requests")


def _check_summary(summary: Mapping[str, float], obj: Mapping[str, Any], where: str) -> None:
    """No writer puts a negative count, latency or throughput, a fractional request or token
    count, or a run of no duration (a wall time): such a line is damaged or hand-made wrongly,
    and its figures would be compared as measured."""
    for k, v in summary.items():
        if k == "duration" and not v > 0:
            raise ConfigError(where, k, obj.get(k), "must be > 0 (the run's wall time in s)")
        if k in _NON_NEGATIVE and v < 0:
            raise ConfigError(where, k, obj.get(k, v), "must be >= 0 (bench_serving counts, ms and per-s figures)")
        if k in _WHOLE and v != math.floor(v):
            raise ConfigError(where, k, obj.get(k, v), "must be a whole number (a count of requests or tokens)")


UNIT_MISMATCH = 100.0
"""The per-request lists' median (s, x 1000) and the line's own median (ms) are the same
figure over the same successful requests (SGLang ``calculate_metrics``; vLLM's likewise); a
ratio past this factor either way means one of them is not in its unit (a list converted
to ms, a summary to s: 1000), not noise: SGLang 0.5.23 (``calculate_metrics``,
``use_retokenized_itl`` for a speculative server behind ``sglang-oai``) divides each chunk's
gap by its tokens for the summary's ITLs while the list keeps the gaps, a factor of the
tokens a chunk carries (the accept length, under 16), so the bound sits well above it."""


def _check_detail_units(d: BenchDetails, summary: Mapping[str, float], where: str) -> None:
    ok = d.ok
    if not ok.any():
        return
    itl = [x for x, good in zip(d.itls, ok.tolist(), strict=True) if good and len(x)]
    for key, values in (("ttfts", d.ttfts[ok]), ("itls", np.concatenate(itl) if itl else np.zeros(0))):
        ref = summary.get(f"median_{key[:-1]}_ms")
        values = values[np.isfinite(values)]
        if ref is None or not ref > 0 or not values.size:
            continue
        med = float(np.median(values)) * 1000.0
        if med > 0 and not 1 / UNIT_MISMATCH <= med / ref <= UNIT_MISMATCH:
            raise ConfigError(where, f"{key} (their median, s)", float(f"{med / 1000.0:.6g}"),
                              f"per-request {key} are in s (bench_serving, vLLM), so x 1000 their median should be "
                              f"near median_{key[:-1]}_ms = {ref:g}, not {med / ref:.3g} times it: a unit was changed")


STREAM_KEYS = tuple(f"{s}_{m}_ms" for m in ("ttft", "tpot", "itl") for s in STATS) + ("max_itl_ms",)
"""The statistics only a streamed reply measures (first token, the gaps after it)."""


def not_streamed(summary: Mapping[str, float], details: BenchDetails | None) -> bool:
    """The run's replies were not streamed (SGLang bench_serving ``--disable-stream``, 0.5.23
    benchmark/serving.py: each request function reads one reply, sets ``ttft`` when it arrives
    (the chat client: ``output.ttft = output.latency``, "For non-streaming, TTFT = total
    latency") and records no ITL). The line does not say so; its figures do: every ITL
    statistic 0 (``np.mean(itls or 0)`` of no gap) while the completed requests generated more
    than one token each on average, which a streamed run, whose later tokens arrive after
    its first, cannot give; with details, no successful request of more than one output
    token has a gap. Its TTFT statistics are end-to-end latencies and its TPOTs the
    microseconds between reading the reply and stopping the clock."""
    n, out = summary.get("completed"), summary.get("total_output_tokens")
    itl = [summary[k] for k in (f"{s}_itl_ms" for s in STATS) if k in summary]
    if not n or out is None or out <= n or not itl or any(v != 0 for v in itl):
        return False
    if details is not None:
        ok = details.ok & (details.output_lens > 1)
        return bool(ok.any()) and not any(len(details.itls[i]) for i in np.flatnonzero(ok))
    return True


ONE_BATCH_KEYS = frozenset({"run_name", "batch_size", "input_len", "output_len", "latency"})
"""The keys every ``bench_one_batch_server --result-filename`` line holds (SGLang 0.3.6,
0.4.6.post5, 0.5.5, 0.5.23 ``run_one_case``), none of which bench_serving writes."""


def one_batch(obj: Any) -> bool:
    """Whether a decoded JSON object is a ``python -m sglang.bench_one_batch_server
    --result-filename`` line: no bench_serving ``completed``, and ``last_ttft`` or three of
    :data:`ONE_BATCH_KEYS` (so that a line missing one of them is refused naming it, not
    read as a bench_serving run with nothing but its ``output_throughput``)."""
    return (isinstance(obj, dict) and "completed" not in obj
            and ("last_ttft" in obj or len(ONE_BATCH_KEYS & set(obj)) >= 3))


OFFLINE_ONE_BATCH_KEYS = frozenset({"prefill_latency", "prefill_throughput", "median_decode_latency", "total_latency"})
"""Keys of a ``python -m sglang.bench_one_batch --result-filename`` line (0.4.3 and
0.4.6.post5 ``bench_one_batch.py`` ``latency_test_run_once``, 0.5.23 ``benchmark/one_batch.py`` ``latency_test_run_once``:
run_name, batch_size, input_len, output_len, prefill_latency, prefill_throughput,
median_decode_latency, median_decode_throughput, total_latency, overall_throughput; the
decode pair absent at output_len 1), none of which a server benchmark writes."""


def offline_one_batch(obj: Any) -> bool:
    """Whether a decoded JSON object is a ``python -m sglang.bench_one_batch`` line (the model
    run in-process on one static batch, :data:`OFFLINE_ONE_BATCH_KEYS`), not a
    ``bench_one_batch_server`` line (:func:`one_batch`), which shares its first four keys."""
    return (isinstance(obj, dict) and "completed" not in obj and "latency" not in obj
            and len(OFFLINE_ONE_BATCH_KEYS & set(obj)) >= 2)


def _one_batch_int(obj: Mapping[str, Any], where: str, key: str) -> int:
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ConfigError(where, key, "missing" if key not in obj else clipped(v), "a bench_one_batch_server "
                          f"line's {key} must be a whole number >= 1 (run_one_case writes the int it ran)")
    return v


def one_batch_line(obj: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A ``bench_one_batch_server --result-filename`` line as the bench_serving keys of the
    run it measured, for :func:`parse_run`.

    What the line measured (SGLang 0.5.23 ``benchmark/one_batch_server.py``
    ``run_one_case``): after a warm-up (``run_benchmark_internal``: each batch size once at
    1024 input and 16 output tokens, unless ``--skip-warmup``) and ``/flush_cache``, one
    streamed ``/generate`` call carrying ``batch_size`` prompts of ``input_len`` tokens with
    ``max_new_tokens`` ``output_len`` and ``ignore_eos`` (unless ``--disable-ignore-eos``),
    timed by the client from the send: ``last_ttft`` (s) until every request of the batch
    got its first token (``BatchStreamRecorder.all_started_time``), ``latency`` (s) until
    the stream ended; ``input_throughput`` = batch_size x input_len / last_ttft;
    ``output_throughput`` = total output tokens / (latency - last_ttft) (the output tokens
    of the whole batch, those before last_ttft too: "historical numerator" under
    ``ignore_eos``); ``overall_throughput`` = (input + output tokens) / latency; ``acc_length``
    the server's running accept length (/server_info ``avg_spec_accept_length``), -1 when it
    has none; ``total_output_tokens`` and ``num_early_stopped`` (requests that stopped at
    EOS) as the stream counted them (null from the vLLM backend).

    Older releases write fewer keys (checked in the wheels' ``bench_one_batch_server.py``,
    0.5.14 ``benchmark/one_batch_server.py``): 0.3.6 and 0.4.0 run_name, batch_size,
    input_len, output_len, latency, output_throughput, overall_throughput, the output
    throughput over the whole latency (no stream, no ttft; 0.3.6 flushes no cache);
    0.4.6.post5 and 0.5.5 add last_gen_throughput, and their ``output_throughput`` is
    batch_size x output_len / (latency - ttft), ttft the last request's first token (not
    written); 0.5.14 adds input_throughput, last_ttft, acc_length (-1 without a drafter) and
    cache_hit_rate, a ``--backend vllm`` and ``/flush_cache`` before each case; 0.5.23 adds
    total_output_tokens, num_early_stopped and the steady-state window's figures. Every
    release sends ``ignore_eos`` true (0.5.23 unless ``--disable-ignore-eos``).

    Returns:
        ``obj`` with the bench_serving keys of the same definitions added: ``completed`` =
        batch_size, ``duration`` = latency, ``total_input_tokens``, ``total_output_tokens``,
        ``output_throughput`` = total output / latency, ``total_throughput`` =
        overall_throughput, ``accept_length`` = acc_length where > 0, ``request_rate``
        Infinity with ``dataset_name`` random and fixed lengths (``random_range_ratio`` 1);
        the line's own figures under :data:`ONE_BATCH_FIGURES`; its ``input_throughput``
        and ``output_throughput`` (other definitions than bench_serving's) only there, and
        :data:`ONE_BATCH` naming the layout.

    Raises:
        ConfigError: batch_size, input_len or output_len not a whole number >= 1; latency
            not a number > 0; last_ttft not > 0 or not below latency; requests stopped early
            (``num_early_stopped`` > 0, or ``total_output_tokens`` other than batch_size x
            output_len: ``--disable-ignore-eos`` or a clamped ``max_new_tokens``, whose
            per-request lengths the line does not hold).
    """
    bs, il, ol = (_one_batch_int(obj, where, k) for k in ("batch_size", "input_len", "output_len"))
    lat = _number(where, "latency", obj.get("latency"))
    if lat is None or not math.isfinite(lat) or lat <= 0:
        raise ConfigError(where, "latency", clipped(obj["latency"]) if "latency" in obj else "missing", "must be a number > 0 (s from sending the batch "
                          "to the end of its stream)")
    ttft = _number(where, "last_ttft", obj.get("last_ttft"))
    if ttft is not None and not (0 < ttft < lat):
        raise ConfigError(where, "last_ttft", obj.get("last_ttft"), f"must be > 0 and below latency {lat:g} s (the "
                          "batch's last first token comes before its stream ends)")
    tin = bs * il
    tout = _number(where, "total_output_tokens", obj.get("total_output_tokens"))
    early = _number(where, "num_early_stopped", obj.get("num_early_stopped"))
    if early or (tout is not None and tout != bs * ol):
        key, val = ("num_early_stopped", obj["num_early_stopped"]) if early else ("total_output_tokens", obj["total_output_tokens"])
        raise ConfigError(where, key, val, f"requests stopped short of output_len {ol} (batch_size {bs} x {ol} = "
                          f"{bs * ol} tokens asked: --disable-ignore-eos, or a clamped max_new_tokens); the line holds "
                          "no per-request lengths to replay: rerun without --disable-ignore-eos")
    tout = float(bs * ol)
    out = {k: v for k, v in obj.items() if k not in ("input_throughput", "output_throughput")}
    out.update(completed=bs, duration=lat, total_input_tokens=tin, total_output_tokens=tout,
               output_throughput=tout / lat, request_rate=math.inf, dataset_name="random",
               random_input_len=il, random_output_len=ol, random_range_ratio=1.0, num_prompts=bs)
    overall = _number(where, "overall_throughput", obj.get("overall_throughput"))
    if overall is not None:
        out["total_throughput"] = overall
    acc = _number(where, "acc_length", obj.get("acc_length"))
    if acc is not None and acc > 0:
        out["accept_length"] = acc
    thr_out = _number(where, "output_throughput", obj.get("output_throughput"))
    if ttft is not None:
        out["max_ttft_ms"] = ttft * 1000.0
        out["prefill_window_input_throughput"] = _number(where, "input_throughput", obj.get("input_throughput"))
        out["decode_window_output_throughput"] = thr_out
        out[ONE_BATCH] = "0.5.23: last_ttft"
    elif "last_gen_throughput" in obj:
        out["decode_window_output_throughput"] = thr_out   # 0.4.x-0.5.x: after the unwritten ttft
        out[ONE_BATCH] = "0.4-0.5: no last_ttft"
    else:
        out[ONE_BATCH] = "0.3: whole-latency output_throughput"   # = total output / latency, as computed
    return out


def parse_run(obj: Any, where: str) -> BenchRun:
    """One decoded JSON object -> :class:`BenchRun`.

    Raises:
        ConfigError: not a JSON object, no bench_serving metric key at all (not bench_serving
            output), or a present, non-null value of the wrong type.
    """
    if not isinstance(obj, dict):
        kind = ("true/false" if isinstance(obj, bool) else "number" if isinstance(obj, (int, float))
                else "string" if isinstance(obj, str) else "array" if isinstance(obj, list) else "null")
        text = json.dumps(obj)
        raise ConfigError(where, "<line>", f"{text[:60]}{'...' if len(text) > 60 else ''} (a JSON {kind})",
                          "a bench_serving result is a JSON object")
    if steady_line(obj):
        # sglang.benchmark.steady_state_serving --steady-state-output-file (0.5.23
        # steady_state.py SteadyStateMetrics, appended by steady_state_serving._append_metrics):
        # figures of the run's busiest window only; read as a run, its duration and throughputs
        # were compared with a whole predicted run. One right after its run's line is read with
        # that run (read_bench, _pair_steady): this one has none before it
        raise ConfigError(where, "<keys>", "concurrency_ratio, window_start, window_end",
                          "a steady-state window (steady_state_serving --steady-state-output-file) with no run's "
                          "line before it, not a whole bench_serving run: pass the run's --output-file (with the "
                          "same file for both, each window follows its run and is read with it; a run predicted "
                          "with workload.steady_state_concurrency_ratio writes its window as steady_state.jsonl)")
    if offline_one_batch(obj):
        # sglang.bench_one_batch --result-filename (0.4.3-0.5.23; 0.5.23 benchmark/one_batch.py
        # latency_test_run_once): one static batch run on the model in-process, no server or
        # scheduler; its run_name/batch_size/input_len/output_len passed it for a
        # bench_one_batch_server line, refused as "latency = 'missing'"
        raise ConfigError(where, "<keys>", "prefill_latency, total_latency",
                          "an offline one-batch benchmark's result (sglang.bench_one_batch: the model run in-process, "
                          "no server or scheduler), not a server's benchmark: its prefill and decode latencies are "
                          "forward times, no request's TTFT or ITL; for a run to compare, benchmark a server with "
                          "bench_one_batch_server or bench_serving")
    if one_batch(obj):
        obj = one_batch_line(obj, where)
    if {"completed_requests", "throughput_qps", "latency_mean"} <= set(obj) and "completed" not in obj:
        # sglang.multimodal_gen.benchmarks.bench_serving --output-file (0.5.23, a diffusion server's
        # image/video generation: calculate_metrics's dict, json.dump'ed): its "duration" made it
        # pass for a bench_serving line with nothing else, compared as a run's wall time alone
        raise ConfigError(where, "<keys>", "completed_requests, throughput_qps, latency_mean",
                          "a diffusion (image/video generation) benchmark's result (sglang.multimodal_gen "
                          "bench_serving), not an LLM server's bench_serving output: no tokens, TTFT or ITL to compare")
    stat = next((k for k in ("request_throughput", "time_to_first_token", "inter_token_latency")
                 if isinstance(obj.get(k), dict) and {"unit", "avg"} & set(obj[k])), None)
    if stat is not None:
        # NVIDIA genai-perf's profile_export_genai_perf.json (and AIPerf's export after it): each
        # metric an object {"unit", "avg", "p50", ...}; its request_throughput passed it for a
        # bench_serving run and was refused as "must be a number", the file never named
        raise ConfigError(where, stat, clipped(obj[stat]), "a genai-perf / AIPerf profile export (each metric an object "
                          "of unit, avg and percentiles), not bench_serving output: run SGLang's bench_serving or "
                          "vllm bench serve --save-result for a result specsched reads")
    raw, obj = obj, {vllm_name(k): v for k, v in obj.items()}
    obj = _percentile_pairs(obj, where)
    for k, new in _SGLANG_02_NAMES.items():   # SGLang 0.1.24-0.2.11's names
        if k in obj and new not in obj:
            obj[new] = obj.pop(k)
    if {"successful_requests", "total_latency"} <= set(obj) and "completed" not in obj:
        # sglang bench_offline_throughput --result-filename (0.5.23 benchmark/offline_throughput.py
        # throughput_test_once): throughputs of one offline batch, no latency of any request
        raise ConfigError(where, "<keys>", "successful_requests, total_latency",
                          "an offline throughput result (bench_offline_throughput), not bench_serving output: "
                          "it has no TTFT or ITL to compare")
    by_backend = isinstance(raw.get("backend"), str) and raw["backend"] in EMBEDDING_BACKENDS
    if (by_backend
            or "total_token_throughput" in raw and not {"total_output_tokens", "total_output", "output_throughput"} & set(raw)):
        # SGLang bench_serving --backend sglang-embedding / vllm-embedding (0.5.10 on,
        # is_embedding / _EMBEDDING_BACKENDS: the same keys, no output tokens), or
        # vllm bench serve on a pooling (embedding) model: vllm/benchmarks/serve.py benchmark()
        # writes EmbedBenchmarkMetrics' result (0.10.2-0.34.0: duration, completed,
        # total_input_tokens, request_throughput, total_token_throughput, e2el statistics;
        # 0.29 on total_input_sequences, input_sequence_throughput): no output token, TTFT or
        # ITL. Read as a run, its e2e latency and throughputs were compared with a generating
        # server's prediction (and from-bench refused it for want of lengths)
        raise ConfigError(where, "backend" if by_backend else "<keys>",
                          raw["backend"] if by_backend else "total_token_throughput without total_output_tokens",
                          "a pooling (embedding) model's run ("
                          + (f"SGLang bench_serving --backend {raw['backend']}" if by_backend else "vllm bench serve")
                          + "): no output tokens, TTFT or ITL to compare (specsched predicts a generating server)")
    if not any(obj.get(k) is not None for k in _IDENTIFYING):
        keys = ", ".join(list(obj)[:6]) or "none"
        hint = ""
        if {"benchmark", "metric"} <= set(obj):   # vLLM's SAVE_TO_PYTORCH_BENCHMARK_FORMAT side file
            hint = " (a vLLM .pytorch.json record: pass the result JSON saved beside it)"
        elif {"timestamp", "input_length", "output_length"} <= set(obj):   # a Mooncake trace's row
            hint = (" (a request trace's row, Mooncake's layout: replay it with a trace workload, "
                    "`trace: {path: ..., layout: mooncake}`)")
        elif {"avg_latency", "latencies", "percentiles"} <= set(obj):
            # vLLM's benchmarks/benchmark_latency.py / `vllm bench latency --output-json`: the
            # latencies of whole offline batches (LLM.generate), no server
            hint = (" (vLLM's offline latency benchmark, `vllm bench latency --output-json`: whole batches run "
                    "in-process, no server; `vllm bench serve --save-result` writes a run to compare)")
        elif {"elapsed_time", "requests_per_second", "tokens_per_second"} <= set(obj):
            # vLLM's benchmarks/benchmark_throughput.py / `vllm bench throughput --output-json`
            hint = (" (vLLM's offline throughput benchmark, `vllm bench throughput --output-json`: no server and "
                    "no request latency; `vllm bench serve --save-result` writes a run to compare)")
        elif any(isinstance(obj.get(k), str) for k in LOG_TEXT_KEYS):
            # Docker's json-file driver keeps a container's output as {"log": ..., "stream", "time"}
            hint = (" (a log kept as JSON records, as Docker's json-file driver keeps a container's: an SGLang "
                    "server's goes to calibrate --from RUNS --server-log)")
        raise ConfigError(where, "<keys>", keys, f"not bench_serving output: none of {', '.join(_IDENTIFYING)}{hint}")
    summary: dict[str, float] = {}
    unmeasured = []
    for k in METRIC_KEYS:
        v = _number(where, k, obj.get(k))
        if v is None and k in _FALLBACKS and obj.get(k) is None:
            v = _number(where, _FALLBACKS[k], obj.get(_FALLBACKS[k]))
        if v is not None and math.isfinite(v):   # NaN (an empty sample) or +-Infinity: missing
            summary[k] = v
        elif k in obj and not (k == "accept_length" and obj[k] is None):
            # (a null accept length is a run without speculative decoding, not a lost sample)
            unmeasured.append(k)
    _check_summary(summary, obj, where)
    summary.update(_cache_report(obj, where))
    for k in ONE_BATCH_FIGURES if ONE_BATCH in obj else ():
        v = _number(where, k, obj.get(k))
        if v is not None and math.isfinite(v):
            summary[k] = v
    args = _args(obj, where)
    if "backend" not in args and isinstance(obj.get("endpoint_type"), str):
        args["backend"] = obj["endpoint_type"]   # vllm bench serve 0.10 writes endpoint_type only
    notes: list[str] = []
    details = _details(obj, where, notes)
    if details is not None:
        settle_tokenless(details, summary)
        _check_detail_units(details, summary, where)
        notes += [f"{where}: {x}" for x in _count_mismatch(details, summary)]
    impossible = _impossible(summary, args, details)
    if impossible:
        notes.append(f"{where}: {'; '.join(impossible)}: no single run gives these figures (the line was edited, "
                     "or joined from parts of runs); read as written")
    labels = {k for k in METADATA_ARGS if vllm_metadata(obj, k)}
    if labels:
        notes.append(f"{where}: {', '.join(f'{k} = {obj[k]!r}' for k in sorted(labels))}: vLLM --metadata labels "
                     "(strings), kept as written, not read as bench_serving's dataset arguments (vLLM writes none, "
                     "and its random dataset draws lengths by its own range rule)")
    # an unread seed label kept, and --metadata labels under SGLang's dataset argument names
    used = (set(METRIC_KEYS) | set(ARG_KEYS) | set(DETAIL_KEYS) | set(ONE_BATCH_FIGURES)) - ({"seed"} - set(args)) - labels
    extra = {k: v for k, v in obj.items() if k not in used}
    if not_streamed(summary, details):
        # --disable-stream: the "TTFT" is the whole reply, TPOT ~0 and no ITL; compared with a
        # streamed prediction they read 99 % off; kept as written, not read as measured
        for k in STREAM_KEYS:
            if k in summary:
                extra[k] = obj[k]
                del summary[k]
        extra["streamed"] = False
        if details is not None:
            details.streamed = False
    if _input_totals_unmeasured(summary, args):
        extra.update({k: obj[k] for k in INPUT_TOTAL_KEYS if k in obj})   # as written, not read as measured
        for k in INPUT_TOTAL_KEYS:
            summary.pop(k, None)
        summary.update(_input_totals_of(details, summary))
    chunk_itl_client = False
    if args.get("backend") in SPLIT_ITL_BACKENDS and not {"accept_length", "p95_itl_ms"} & set(obj):
        # SGLang 0.1.24-0.4.3.post2: the sglang backend's client recorded one gap per chunk (the
        # split came in 0.4.3.post3 with these two keys)
        chunk_itl_client = True
    if summary.get("total_output_tokens_retokenized") == 0 and summary.get("total_output_tokens", 0) > 0:
        # SGLang 0.5.23's Rust client (--rust-client, sglang-bench) with --disable-retokenize or
        # --vocab-size: "the retokenized totals are then reported as 0" (its --help); not a count
        extra["total_output_tokens_retokenized"] = obj["total_output_tokens_retokenized"]
        del summary["total_output_tokens_retokenized"]
    return BenchRun(where, args, summary, extra, details, chunk_itl_client, tuple(unmeasured), notes)


def settle_tokenless(details: BenchDetails, summary: Mapping[str, float]) -> None:
    """Set ``details.tokenless_ok``: whether the line's rows with no error text, TTFT 0.0 and
    output length 0 are successes, by the line's own ``completed``.

    bench_serving's ``completed`` counts its client's ``success`` flags, whatever the output
    length (SGLang 0.5.23 benchmark/serving.py ``calculate_metrics``: ``if
    outputs[i].success: ... completed += 1``). A request sent with ``max_new_tokens`` 0
    (served prefill only) ends its stream with HTTP 200 and no text: ``success`` True,
    ``ttft`` 0.0, ``output_len`` 0, error "" (``async_request_sglang_generate``). In 0.5.23
    every failure writes an error text (``(response.reason or "") + ": " + body``, or the
    traceback), so such a row is a success; the 0.3.0 to 0.4.6.post5 clients wrote
    ``response.reason or ""``, and a reply other than 200 without a reason phrase left the
    same row (TTFT 0.0, output 0, no error text) for a failure. The file holds no
    ``success`` flag; its ``completed`` settles it: the rows are successes where counting
    them (with every row that has a first token or an output length and no error text) gives
    ``completed``, else failures (a line with no ``completed``, or one that both readings
    miss, which :func:`_count_mismatch` then says).

    Args:
        details: the line's per-request lists; ``tokenless_ok`` is set in place.
        summary: the line's figures (``completed``, requests).
    """
    done = summary.get("completed")
    details.tokenless_ok = done is not None and sum(not e for e in details.errors) == done


def _count_mismatch(details: BenchDetails, summary: Mapping[str, float]) -> list[str]:
    """One phrase when the per-request lists count other successes than the line's
    ``completed``. bench_serving counts a request by its client's ``success`` flag (SGLang
    0.5.23 benchmark/serving.py ``calculate_metrics``: ``completed += 1`` for each success;
    vLLM's the same), which the file does not hold: the reader counts a row successful by what
    it holds (:attr:`BenchDetails.ok`, :func:`settle_tokenless`). A success the row cannot show
    (a stream with no token, output length 0 and no error among rows that fail alike, the
    line's ``completed`` then matching neither reading) or a failure it cannot (an older client's error text
    "" with tokens already listed) makes them differ, as does a line edited or joined from
    parts; the rows are read as they say (the requests table, the input totals), the
    summary's figures as written."""
    done = summary.get("completed")
    k = int(details.ok.sum())
    if done is None or k == done:
        return []
    return [f"completed {done:g}, but the per-request lists hold {k} successful request(s) of {len(details.ok)} (no "
            "error text, and a first token or an output length; bench_serving counts its client's success flag, "
            "which the file does not hold): the lists' rows are read as they say, the summary's figures as written"]


ROUNDING = 0.005
"""Half a unit in the last place of bench_serving's printed report (``{:<10.2f}``: s, ms and
per-s figures to 2 decimals), read as a line by :func:`printed_reports`: the slack
:func:`_impossible` allows every figure it compares."""
ROUNDING_REL = 0.01
"""The relative slack :func:`_impossible` allows besides :data:`ROUNDING`: a figure copied to 3
significant digits (half a unit: up to 0.5 %). bench_serving's own file holds exact ratios
(``calculate_metrics``), so an edited or cut line is off by more."""


def _impossible(summary: Mapping[str, float], args: Mapping[str, Any], details: BenchDetails | None) -> list[str]:
    """What in a line no single run writes (each one phrase), beyond rounding (:data:`ROUNDING`
    on each figure and :data:`ROUNDING_REL` more):

    - ``duration`` shorter than an end-to-end latency statistic: SGLang 0.5.23
      benchmark/serving.py ``benchmark()`` times ``duration`` from before the first send to after
      the last reply, and every request's latency lies inside it (vLLM's ``benchmark()`` alike);
    - ``completed`` above the requests sent (``num_prompts``, vLLM's; the per-request lists'
      length): ``calculate_metrics`` counts the successful ones among the outputs;
    - ``output_throughput`` other than ``total_output_tokens / duration``, or
      ``request_throughput`` other than ``completed / duration``, as ``calculate_metrics``
      computes them (``sum(output_lens) / dur_s``, ``completed / dur_s``; vLLM's
      ``calculate_metrics`` the same two ratios).
    """
    out = []
    dur = summary.get("duration")
    if dur:
        for k in (f"{s}_e2e_latency_ms" for s in STATS if s != "std"):
            v = summary.get(k)
            if v is not None and v / 1000.0 > (dur + ROUNDING) * (1 + ROUNDING_REL) + ROUNDING / 1000.0:
                out.append(f"duration {dur:g} s is shorter than {k} {v:g} (every request's latency lies within it)")
                break
    sent = args.get("num_prompts") if isinstance(args.get("num_prompts"), int) else None
    if sent is None and details is not None:
        sent = len(details.input_lens)
    done = summary.get("completed")
    if sent is not None and done is not None and done > sent:
        out.append(f"completed {done:g} is more than the {sent} requests sent (num_prompts)")
    for key, count in (("output_throughput", "total_output_tokens"), ("request_throughput", "completed")):
        tot, thr = summary.get(count), summary.get(key)
        if dur and tot is not None and thr is not None:
            lo = tot / (dur + ROUNDING) * (1 - ROUNDING_REL) - ROUNDING
            hi = (tot / (dur - ROUNDING) if dur > ROUNDING else math.inf) * (1 + ROUNDING_REL) + ROUNDING
            if not lo <= thr <= hi:
                out.append(f"{key} {thr:g} is not {count} / duration = {tot:g} / {dur:g} = {tot / dur:.6g}")
    return out


INPUT_TOTAL_KEYS = ("total_input_tokens", "input_throughput", "total_throughput")
"""The metrics that count the prompts' tokens (``total_throughput`` = input + output over the
duration)."""
GSP_DATASET = "generated-shared-prefix"
"""SGLang bench_serving's generated-shared-prefix dataset (0.5.23 ``benchmark/datasets/generated_shared_prefix.py``)."""


def _input_totals_unmeasured(summary: Mapping[str, float], args: Mapping[str, Any]) -> bool:
    """The line's prompt-token totals are not the prompts sent, though it completed requests:

    - ``total_input_tokens`` 0: a multi-turn replay (SGLang 0.5.23 ``benchmark/serving.py``
      ``benchmark()`` calls ``calculate_metrics(input_requests=None)`` when the rows are
      conversations, ``wrap_multi_turn_request_func``: ``agentic-trace``, and
      ``generated-shared-prefix`` with ``--gsp-num-turns`` above 1), so the total, the input
      throughput and the input share of ``total_throughput`` are 0 whatever was sent; no
      request of a generating server has an empty prompt otherwise;
    - ``generated-shared-prefix`` with at most one token per completed request:
      ``--gsp-fast-prepare`` gives every row ``prompt_len`` 1 (0.5.23
      ``benchmark/datasets/generated_shared_prefix.py``) and the totals add those up.

    Both runs' per-request ``input_lens`` are the server's own counts
    (``_record_server_prompt_len``: ``usage.prompt_tokens`` or ``meta_info.prompt_tokens``)."""
    n, tin = summary.get("completed"), summary.get("total_input_tokens")
    if not n or tin is None:
        return False
    return tin == 0 or (args.get("dataset_name") == GSP_DATASET and tin <= n)


def _input_totals_of(details: BenchDetails | None, summary: Mapping[str, float]) -> dict[str, float]:
    """:data:`INPUT_TOTAL_KEYS` from the successful requests' ``input_lens`` as bench_serving
    defines them (0.5.23 ``calculate_metrics``: the prompt tokens of the successful requests,
    over the run's duration; ``total_throughput`` adds ``total_output_tokens``), or nothing
    without details, a duration or a success."""
    dur = summary.get("duration")
    if details is None or not dur or not details.ok.any():
        return {}
    tin = float(details.input_lens[details.ok].sum())
    out = {"total_input_tokens": tin, "input_throughput": tin / dur}
    if "total_output_tokens" in summary:
        out["total_throughput"] = (tin + summary["total_output_tokens"]) / dur
    return out


def steady_line(obj: Any) -> bool:
    """``obj`` is a ``SteadyStateMetrics`` record (:data:`STEADY_LINE_KEYS`), not a run."""
    return isinstance(obj, dict) and STEADY_LINE_KEYS <= set(obj)


def _pair_steady(objs: list[tuple[int, Any]]) -> tuple[list[tuple[int, Any, tuple[int, Any] | None]], dict[int, int]]:
    """The runs of a file with the steady-state record that follows each, if any.

    ``python -m sglang.benchmark.steady_state_serving --output-file F
    --steady-state-output-file F`` (SGLang 0.5.23 benchmark/steady_state_serving.py
    ``_run_with_capture``) runs bench_serving, whose ``benchmark()`` appends the run's line to
    F, then appends the run's ``SteadyStateMetrics`` to F (``_append_metrics``): the record on
    the line right after a run is that run's steady-state window. A record with no run right
    before it (its own file, or after another record) is left in place (and refused by
    :func:`parse_run`: it holds one window's figures, not a run's).

    Returns:
        ``(entries, paired)``: each ``(line, object, (steady line, steady object) or None)``
        in file order, the paired records taken out of them; ``paired`` maps a paired
        record's line to its run's line.
    """
    out: list[tuple[int, Any, tuple[int, Any] | None]] = []
    paired: dict[int, int] = {}
    for i, o in objs:
        if steady_line(o) and out and out[-1][2] is None and isinstance(out[-1][1], dict) and not steady_line(out[-1][1]):
            out[-1] = (out[-1][0], out[-1][1], (i, o))
            paired[i] = out[-1][0]
        else:
            out.append((i, o, None))
    return out, paired


def _steady_summary(obj: Mapping[str, Any], run: BenchRun, where: str) -> dict[str, float]:
    """A ``SteadyStateMetrics`` record (SGLang 0.5.23 benchmark/steady_state.py
    ``calculate_steady_state_metrics``) as the run summary's ``steady_*`` keys
    (:data:`sim.steady_state.SUMMARY_KEYS`: the keys a run predicted with
    ``workload.steady_state_concurrency_ratio`` has), plus ``steady_concurrency`` (the average
    concurrency under its earlier name). Units as written: s for the window, tokens and
    requests for the totals (``total_output`` a fraction: each request's tokens are weighted
    by its share of token times in the window), per s for the throughputs. ``total_input``
    and ``input_throughput`` null (a multi-turn replay, which passes no input requests) are
    left out.

    Raises:
        ConfigError: a value that is not a number; a ratio outside (0, 1]; a duration of 0 or
            less; a negative count or rate; or figures no window of ``run`` can have (more
            requests finished in it than the run completed, a window longer than the run):
            the record is another run's.
    """
    from specsched.sim.steady_state import STEADY_KEYS, SUMMARY_KEYS

    out: dict[str, float] = {}
    for k in STEADY_KEYS:
        v = _number(where, k, obj.get(k))
        if v is None or not math.isfinite(v):
            continue
        if k == "concurrency_ratio" and not 0 < v <= 1:
            raise ConfigError(where, k, obj.get(k), "must be in (0, 1] (steady_state_serving "
                              "--steady-state-concurrency-ratio)")
        if k == "duration" and not v > 0:
            raise ConfigError(where, k, obj.get(k), "must be > 0 (the steady-state window's length in s)")
        if k not in ("window_start", "window_end") and v < 0:
            raise ConfigError(where, k, obj.get(k), "must be >= 0 (steady-state counts and per-s figures)")
        out[SUMMARY_KEYS[k]] = v
    if "steady_average_concurrency" in out:
        out["steady_concurrency"] = out["steady_average_concurrency"]
    for key, ours, theirs in (("completed", "steady_completed", "completed"), ("duration", "steady_duration", "duration")):
        if ours in out and theirs in run.summary and out[ours] > run.summary[theirs] * (1 + 1e-6):
            raise ConfigError(where, key, obj.get(key), f"more than the run before it ({run.source}) has ({theirs} "
                              f"{run.summary[theirs]:g}): a steady-state window lies inside its run, so this record "
                              "is another run's (pass the run's own --output-file line)")
    return out


def multi_turn_replay(run: BenchRun) -> bool:
    """The line is SGLang's multi-turn replay (its written ``total_input_tokens`` 0 with
    requests completed, :func:`_input_totals_unmeasured`): its requests are the turns of
    conversations, each sent after the reply to the one before."""
    return run.extra.get("total_input_tokens") == 0 and (run.summary.get("completed") or 0) > 0


def _run_after_cut(raw: str) -> tuple[dict[str, Any], int] | None:
    """A line that is a run cut short with a whole run after it -> (that run, the cut's
    length), else None. bench_serving appends each run as one ``file.write(json.dumps(result)
    + "\\n")`` (0.5.23 benchmark/serving.py ``benchmark()``; vLLM's ``--append-result`` the
    same way): a run killed (or a disk filled) while its line was written leaves no newline,
    so the next run's line follows its cut text on the same line. The whole run is the
    bench_serving object (:data:`_IDENTIFYING` keys) that starts at a ``{"`` after the cut and
    ends the line; the text before it is not JSON (two whole runs joined are
    :func:`joined_runs`'). A ``{"`` inside a JSON string is written ``{\\"``, so each
    candidate is structure."""
    for m in re.finditer(r'\{"', raw):
        k = m.start()
        if k == 0:
            continue
        try:
            obj, end = json_at(raw, k)
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict) or raw[end:].strip() or not any(x in obj for x in _IDENTIFYING):
            continue
        try:
            json_value(raw[:k])
        except json.JSONDecodeError:
            return obj, k
        return None   # whole runs joined: not a cut one
    return None


def _indented_objects(text: str) -> list[tuple[int, Any]] | tuple[int, str, str]:
    """JSON objects written one after another, each over several lines (indented: ``jq .
    runs.jsonl``, or ``json.dump(result, f, indent=4)`` appended run after run), each keyed
    by the line it starts on; or, where the text stops being JSON, (line, that line, why)."""
    out: list[tuple[int, Any]] = []
    k, n = 0, len(text)
    while True:
        while k < n and text[k] in " \t\r\n\ufeff":   # (a byte-order mark: files saved with one, joined)
            k += 1
        if k >= n:
            return out
        start = text.count("\n", 0, k) + 1
        try:
            obj, k = json_at(text, k)
        except json.JSONDecodeError as e:
            where = text.splitlines()[e.lineno - 1] if e.lineno <= len(text.splitlines()) else ""
            return e.lineno, where.strip() or "<end of file>", f"{e.msg} line {e.lineno} column {e.colno}"
        if isinstance(obj, list):   # a list among the objects: its entries, each at the list's line
            out += [(start, o) for o in obj]
        else:
            out.append((start, obj))


BENCH_FILE = "a bench_serving result file (JSONL or JSON)"
"""What a result file holds, as the refusal of an empty one says it."""


REPORT_TITLE = "Serving Benchmark Result"
"""The title SGLang's bench_serving prints over its result block (0.2.0-0.5.23 ``benchmark()``:
``"{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")``)."""
_REPORT_ROWS = {
    "backend:": "backend", "traffic request rate:": "request_rate", "max request concurrency:": "max_concurrency",
    "max reqeuest concurrency:": "max_concurrency",   # so spelt by 0.4.0-0.4.6 (sglang/bench_serving.py; 0.5.1 fixed it)
    "successful requests:": "completed", "benchmark duration (s):": "duration",
    "total input tokens:": "total_input_tokens", "total input text tokens:": "total_input_text_tokens",
    "total input vision tokens:": "total_input_vision_tokens", "total generated tokens:": "total_output_tokens",
    "total generated tokens (retokenized):": "total_output_tokens_retokenized",
    "request throughput (req/s):": "request_throughput", "input token throughput (tok/s):": "input_throughput",
    "output token throughput (tok/s):": "output_throughput",
    "peak output token throughput (tok/s):": "max_output_tokens_per_s",
    "peak concurrent requests:": "max_concurrent_requests", "total token throughput (tok/s):": "total_throughput",
    "concurrency:": "concurrency", "accept length:": "accept_length",
    # vLLM's block (benchmarks/benchmark_serving.py 0.6-0.10, vllm/benchmarks/serve.py 0.10-0.34
    # ``benchmark()``): its own names for the rest, under the keys its result JSON writes them
    "failed requests:": "failed", "maximum request concurrency:": "max_concurrency",
    "request rate configured (rps):": "request_rate", "request goodput (req/s):": "request_goodput",
    "acceptance length:": "spec_decode_acceptance_length",
}
"""The printed report's rows (0.5.23 ``benchmark/serving.py`` ``benchmark()``'s ``print`` calls,
each ``"{:<40} {:<10}".format(label, value)``) -> the result file's keys for the same figures."""
STEADY_TITLE = "Steady-State Result"
"""The title SGLang 0.5.23's steady_state_serving prints over its steady-state block, after
bench_serving's report (benchmark/steady_state_serving.py ``_print_metrics``)."""
_STEADY_ROWS = {
    "concurrency ratio:": "concurrency_ratio", "measurement duration (s):": "duration",
    "minimum concurrency:": "concurrency_threshold", "completed requests:": "completed",
    "input tokens:": "total_input", "input token throughput (tok/s):": "input_throughput",
    "generated tokens:": "total_output", "output token throughput (tok/s):": "output_throughput",
    "output throughput, retokenized (tok/s):": "output_throughput_retokenized",
    "average concurrency:": "average_concurrency", "peak concurrency:": "peak_concurrency",
    "peak output throughput (tok/s):": "peak_output_throughput",
}
"""The steady-state block's rows (``_print_metrics``, each ``"{:<40} {:<10}"``; the input rows
one "N/A" row for a multi-turn replay) -> ``SteadyStateMetrics``' fields. The window's ends and
the retokenized total are not printed."""
_REPORT_STAT = re.compile(r"^(mean|median|std|max|p(\d+(?:\.\d+)?)) (ttft|tpot|itl|e2e latency|e2el) \(ms\):\s+(\S+)\s*$", re.I)
_VLLM_BEFORE = {"traffic request rate:": "request_rate", "maximum request concurrency:": "max_concurrency",
                "burstiness factor:": "burstiness", "traffic ramp-up strategy:": "ramp_up_strategy"}
"""What vLLM's ``benchmark()`` prints before its block (``Traffic request rate: inf``, ``Burstiness
factor: 1.0 (Poisson process)``, ``Maximum request concurrency: None``; 0.6.6-0.34.0) -> its result
JSON's keys; inside the block it repeats the rate and the concurrency only when they are set. A
ramp-up run prints ``Traffic ramp-up strategy: linear.`` and ``Will increase RPS from A to B RPS
...`` in place of the rate (0.11.0-0.34.0), read as the JSON's ``ramp_up_*`` keys."""
_VLLM_RAMP = re.compile(r"^Will increase RPS from (\S+) to (\S+) RPS")
PRINTED_BY_VLLM = "printed_by_vllm"
"""The key a run read from vLLM's printed block carries (True): its client, known in a result
JSON by ``date`` (:func:`vllm_client`)."""
_NAMESPACE_ARGS = ("dataset_name", "random_input_len", "random_output_len", "random_range_ratio", "sharegpt_output_len")
"""The dataset arguments read from the ``Namespace(...)`` line bench_serving prints before a run
(0.5.23 ``run_benchmark``: ``print(f"{args}\\n")``), which its printed report does not repeat."""


def _report_value(text: str) -> Any:
    v = text.strip()
    if v.lower() == "not set":   # Max request concurrency without --max-concurrency
        return None
    if v.lower() == "trace":
        return "trace"
    try:
        return float(v)   # "inf" too (Traffic request rate at --request-rate inf)
    except ValueError:
        return v


def _title_row(row: str, title: str) -> bool:
    """``row`` is ``title`` centred in "=" as SGLang prints a block's title, maybe after a log
    driver's prefix ("bench-1  | ====...")."""
    at = row.find("=")
    return title in row and at >= 0 and not row[at:].replace(title, "").replace(" ", "").strip("=")


def _steady_block(lines: list[str], k: int, out: list[tuple[int, dict[str, Any]]]) -> int:
    """Read the steady-state block whose title is ``lines[k]`` (SGLang 0.5.23
    steady_state_serving ``_print_metrics``, printed right after the run's report) into a
    ``SteadyStateMetrics`` record appended to ``out`` at its title's line (read with the run
    before it, :func:`_pair_steady`; the window's ends are not printed: null). Returns the
    index of the line after the block."""
    title = lines[k]
    prefix = title[: title.find("=")]
    obj: dict[str, Any] = {"window_start": None, "window_end": None}
    at, k = k + 1, k + 1
    while k < len(lines):
        row = lines[k]
        row = (row[len(prefix):] if prefix and row.startswith(prefix) else row).strip()
        if REPORT_TITLE in row or STEADY_TITLE in row or (len(row) >= 10 and set(row) == {"="}):
            break
        low = row.lower()
        label = max((x for x in _STEADY_ROWS if low.startswith(x)), key=len, default=None)
        if label is not None:
            v = row[len(label):].strip()
            obj[_STEADY_ROWS[label]] = None if v.upper() == "N/A" else _report_value(v)
        k += 1
    if "concurrency_ratio" in obj:
        out.append((at, obj))
    return k


def _vllm_block(obj: dict[str, Any], before: Mapping[str, Any]) -> dict[str, Any]:
    """A printed block without SGLang's ``Backend:`` row (every SGLang version prints it first)
    that has ``Successful requests:`` and ``Benchmark duration (s):``: vLLM's
    (``benchmarks/benchmark_serving.py`` 0.6-0.10 and ``vllm/benchmarks/serve.py`` 0.10-0.34
    ``benchmark()``, checked in the 0.7.3, 0.11.0 and 0.34.0 source archives), read as its result
    JSON holds the run. The backend, ``num_prompts`` and the rate, burstiness and concurrency come
    from its ``Namespace(...)`` line (``print(args)`` in ``main``) and the lines it prints before
    the block (:data:`_VLLM_BEFORE`); the block's own rate and concurrency rows win (0.10 on). Its
    ``random_*`` arguments are left out: vLLM's ``--random-range-ratio`` draws from [len x (1 - r),
    len x (1 + r)] (0.8.5 on), not SGLang's range, and its result JSON never holds them."""
    out = {k: v for k, v in obj.items() if k not in _NAMESPACE_ARGS or k == "dataset_name"}
    for k in ("request_rate", "max_concurrency", "burstiness", "num_prompts", "ramp_up_strategy", "ramp_up_start_rps",
              "ramp_up_end_rps"):
        if k not in out and before.get(k) is not None:
            out[k] = before[k]
    out["backend"] = str(before.get("backend", "vllm"))
    if "bench_type" in before:   # `vllm bench serve` (0.10 on) writes endpoint_type = --backend
        out["endpoint_type"] = out["backend"]
    out[PRINTED_BY_VLLM] = True
    return out


_SLO_ATTAINMENT = re.compile(r"^(?:(\w+) )?SLO attainment \(%\):\s*(\S+)\s*$")
"""SGLang 0.5.23's goodput rows (benchmark/goodput.py ``print_goodput``): ``SLO attainment
(%):`` and ``TTFT SLO attainment (%):`` per SLO, in percent."""


def printed_reports(text: str) -> list[tuple[int, dict[str, Any]]]:
    """Runs from bench_serving's printed output (its stdout kept as a log, or pasted), as the
    result file would hold them: one ``(line of the title, object)`` per "Serving Benchmark
    Result" block that names its ``Backend:``, ``Successful requests:`` and ``Benchmark duration
    (s):`` (SGLang's report does, 0.2.0-0.5.23; vLLM's, which has no ``Backend:`` row, is read by
    :func:`_vllm_block`; a block cut before the other two is no run here), read row
    by row under the result file's keys (:data:`_REPORT_ROWS`; ``Mean/Median/Std/Pnn/Max
    TTFT|TPOT|ITL|E2E Latency (ms)`` as ``mean_ttft_ms`` ...; ``--cache-report``'s ``Cache hit
    rate: 12.5%`` as ``cache_report.cache_hit_rate_pct``; ``--goodput``'s ``SLOs (ms): ttft:200
    tpot:20`` and ``SLO attainment (%):`` rows as ``goodput_slos_ms`` and ``slo_attainment``
    (0-1), per SLO ``slo_attainment_by_metric``); the dataset arguments from the
    last ``Namespace(...)`` line before the block (:data:`_NAMESPACE_ARGS`). The figures are as
    printed (two decimals). No per-request details and no ``server_info``: they are only in
    the result file. A "Steady-State Result" block right after a run's (SGLang 0.5.23
    ``python -m sglang.benchmark.steady_state_serving``) is its steady-state record
    (:func:`_steady_block`), read with the run."""
    lines = text.split("\n")
    out: list[tuple[int, dict[str, Any]]] = []
    ns: dict[str, Any] = {}
    vllm_ns: dict[str, Any] = {}   # what vLLM's block needs of its Namespace line and the lines before it
    k = 0
    after_run = False   # the last block read was a run's report
    while k < len(lines):
        row = lines[k].strip()
        if "Namespace(" in row and "dataset_name=" in row:   # print(args), or print(f"{args=}")
            ns, vllm_ns = {}, {}
            for name, v in python_repr_args(row[row.index("Namespace("):]).items():
                if name in _NAMESPACE_ARGS:
                    ns[name] = v
                if name in ("backend", "num_prompts", "bench_type") and v is not None:
                    vllm_ns[name] = v
        # (after a log driver's prefix, "bench-1  | ", as the block's rows may be)
        bare = row.split("| ", 1)[1].strip() if "| " in row and not row.lower().startswith(tuple(_VLLM_BEFORE)) else row
        low = bare.lower()
        before = next((x for x in _VLLM_BEFORE if low.startswith(x)), None)
        if before is not None:   # vLLM prints these before its block (SGLang's rate row is inside its own)
            v = bare[len(before):].split("(")[0].strip().rstrip(".")
            vllm_ns[_VLLM_BEFORE[before]] = None if v == "None" else _report_value(v)
        if (ramp := _VLLM_RAMP.match(bare)) is not None:
            vllm_ns.update(ramp_up_start_rps=_report_value(ramp.group(1)), ramp_up_end_rps=_report_value(ramp.group(2)))
        if _title_row(row, STEADY_TITLE):   # steady_state_serving's block, right after the run's
            k = _steady_block(lines, k, out) if after_run else k + 1
            after_run = False
            continue
        if not _title_row(row, REPORT_TITLE):
            k += 1
            continue
        title, obj = k + 1, dict(ns)
        prefix = lines[k][: lines[k].find("=")]   # what a log driver puts before each line ("bench-1  | ")
        diffusion = None   # the block's "Latency Mean (s):" row: the diffusion server's benchmark
        k += 1
        while k < len(lines):
            row = lines[k]
            row = (row[len(prefix):] if prefix and row.startswith(prefix) else row).strip()
            if REPORT_TITLE in row or STEADY_TITLE in row or (len(row) >= 10 and set(row) == {"="}):
                break
            low = row.lower()
            stat = _REPORT_STAT.match(row)
            if stat is not None:
                kind = stat.group(1).lower()
                metric = stat.group(3).lower().replace(" ", "_")
                obj[f"{kind}_{metric}_ms"] = _report_value(stat.group(4))
            elif low.startswith("latency mean (s):"):
                diffusion = _report_value(row[len("latency mean (s):"):])
            elif low.startswith("cache hit rate:") and row.endswith("%"):   # --cache-report's section
                obj["cache_report"] = {"cache_hit_rate_pct": _report_value(row[len("cache hit rate:"):-1])}
            elif low.startswith("slos (ms):"):   # --goodput's section (benchmark/goodput.py print_goodput)
                pairs = [x.split(":", 1) for x in row[len("slos (ms):"):].split()]
                if pairs and all(len(x) == 2 for x in pairs):
                    obj["goodput_slos_ms"] = {name: _report_value(v) for name, v in pairs}
            elif (att := _SLO_ATTAINMENT.match(row)) is not None:
                v = _report_value(att.group(2))
                v = v / 100 if isinstance(v, (int, float)) and not isinstance(v, bool) else v
                if att.group(1):
                    obj.setdefault("slo_attainment_by_metric", {})[att.group(1).lower()] = v
                else:
                    obj["slo_attainment"] = v
            else:
                label = max((x for x in _REPORT_ROWS if low.startswith(x)), key=len, default=None)
                if label is not None:
                    obj[_REPORT_ROWS[label]] = _report_value(row[len(label):])
            k += 1
        if diffusion is not None:
            # sglang.multimodal_gen's bench_serving (0.5.23 multimodal_gen/benchmarks/bench_serving.py):
            # the same title over an image/video generation run; its JSON's keys, refused as that is
            obj = {"completed_requests": obj.get("completed"), "throughput_qps": obj.get("request_throughput"),
                   "latency_mean": diffusion}
            out.append((title, obj))
            after_run = False
            continue
        if "backend" not in obj and {"completed", "duration"} <= set(obj):
            obj = _vllm_block(obj, vllm_ns)
        after_run = {"backend", "completed", "duration"} <= set(obj)   # every SGLang version prints these three
        if after_run:
            if isinstance(obj["backend"], float):
                obj["backend"] = str(obj["backend"])
            out.append((title, obj))
    return out


def read_bench(path: str | Path, line: int | None = None, *, left_out: list[str] | None = None) -> list[BenchRun]:
    """Every run in a bench_serving result file, or only the one on ``line``.

    Accepts SGLang's JSONL (one object per line; blank lines skipped), a file holding one
    JSON object over several lines (vLLM's), or a JSON list of objects; any of them
    compressed as a trace may be (gzip, bzip2, xz, a zip of one file; found by its first
    bytes, not its name: :func:`sim.compression.decompress`). Python's JSON
    extensions (``Infinity``, ``NaN``) are accepted as bench_serving writes them.

    ``left_out``: a caller that reads every run and says what it skipped passes a list; a
    JSONL file's last line cut short (no newline after it: bench_serving appends each run as
    ``file.write(json.dumps(result) + "\n")``, 0.5.23 benchmark/serving.py ``benchmark()``, so
    a run killed or a disk filled while appending leaves its line unfinished) is then left out
    of every run read and named in the list, instead of refusing the file's whole runs before
    it. Without the list it is refused, as every other line that is not complete JSON.

    Raises:
        ConfigError: missing/unreadable file, a line that is not complete JSON (e.g.
            truncated; names the line), not bench_serving output, a bad value, or
            ``line`` out of range.
    """
    p = Path(path)
    if p.is_dir():   # calibrate --from DIR: the folder exists, "no such file" sent the user looking for it
        files = sorted(x.name for x in p.iterdir() if x.suffix in (".jsonl", ".json", *compression.SUFFIXES))
        here = f"; it holds {', '.join(files[:5])}{', ...' if len(files) > 5 else ''}" if files else ""
        raise ConfigError(str(p), "<file>", str(p), f"a folder, not a bench_serving result file: name its files "
                          f"(e.g. {p}/*.jsonl){here}")
    if not is_input_file(p):
        raise ConfigError(str(p), "<file>", str(p), "no such file (looked for a bench_serving result file, JSONL or JSON)")
    raw_bytes = read_input(p, BENCH_FILE)   # once: a pipe (<(zcat runs.jsonl.gz), /dev/stdin) is read once
    try:
        # a compressed copy (gzip/bzip2/xz runs.jsonl, a zip of it): read as it was written
        raw_bytes = compression.decompress(raw_bytes, p)
        # a byte-order mark from an editor is not JSON; PowerShell 5's redirect writes UTF-16
        text = _text_of(raw_bytes, p)
    except UnicodeDecodeError:
        raise ConfigError(str(p), "<file>", p.name, "not a text file (bench_serving writes JSON)") from None
    except READ_ERRORS as e:
        raise unreadable(p, e) from None
    # a client's stdout (or a server's log) kept by a container runtime: Docker json-file
    # records, CRI lines, `kubectl logs --timestamps`: read as printed (sim/log_lines.py)
    text = unwrapped_text(text) or text
    objs: list[tuple[int, Any]] = []
    bad: tuple[int, str, str] | None = None
    # lines end at "\n" only (a "\r" before it is JSON whitespace): str.splitlines also breaks at
    # U+2028, U+0085 and the like, which a writer that keeps non-ASCII text as it is (json.dumps
    # with ensure_ascii=False, or serde_json) leaves raw in a generated text
    for i, raw in enumerate(text.split("\n"), start=1):
        # a byte-order mark at a line's start: files an editor saved with one, joined (`cat a b`)
        raw = raw.removeprefix("\ufeff")
        if not raw.strip():
            continue
        if raw[:1] in " \t":
            # an indented line is inside a multi-line object (json.dump(result, f, indent=2), jq .):
            # never a run of its own, though it may parse (an itls list's last gap, ``0.0084``, or
            # ``{}``); read as such it made a file of indented runs "JSONL" and hid the objects
            if bad is None:
                bad = (i, raw.strip(), "an indented line, part of a multi-line object")
            if line is None or i >= line:
                break
            continue
        try:
            objs.append((i, json_value(raw)))
        except json.JSONDecodeError as e:
            after = _run_after_cut(raw) if left_out is not None or line == i else None
            if after is not None:
                # a run killed while appending, the next run's line appended after it
                objs.append((i, after[0]))
                if left_out is not None:
                    left_out.append(f"{p}:{i}: left out: a run cut short before the run on this line (its first "
                                    f"{after[1]} characters: a run killed while its line was appended, the next "
                                    "run's line appended after it); the whole run is read as this line's")
                continue
            if bad is None:
                bad = (i, raw.strip(), f"{e.msg} column {e.colno}")   # the line is in the location
            if line is None or i >= line:
                break
    if bad is not None and line is not None and any(i == line and isinstance(o, dict) for i, o in objs):
        bad = None   # the named run is whole (another line was cut short, e.g. a run killed while appending)
    if (bad is not None and line is None and left_out is not None and objs and all(isinstance(o, dict) for _, o in objs)
            and not text.endswith("\n") and bad[0] == len(text.split("\n"))):
        # the last line, unfinished: an append interrupted; the runs before it are whole
        left_out.append(f"{p}:{bad[0]}: left out: the last line is cut short ({bad[2]}: a run killed while its line "
                        f"was appended); the {len(objs)} whole run(s) before it are read")
        bad = None
    if bad is not None:
        try:  # one object over several lines, or a list
            whole = json_value(text)
            objs = [(k + 1, o) for k, o in enumerate(whole)] if isinstance(whole, list) else [(1, whole)]
        except json.JSONDecodeError:
            # objects one after another, each over one line or several (JSONL runs and indented
            # ones appended to one file); where that fails too, a file that began as JSONL keeps
            # its line's error
            scanned = _indented_objects(text)
            if isinstance(scanned, list):
                objs = scanned
            else:
                # a file that began as JSONL keeps its line's error, and so does a first line that is a
                # run's own (more than the "{" an indented object opens with): the scan went on into
                # the next line's run, naming that whole line (or the end of the file) as the cut one
                one_line = bad is not None and bad[1][:1] == "{" and len(bad[1]) > 1 and scanned[0] > bad[0]
                i, raw, msg = bad if objs or one_line else scanned
                shown = clipped(raw)
                reports = printed_reports(text) if REPORT_TITLE in text else []
                if reports:   # its stdout kept: the run's figures as printed, under the result file's keys
                    objs = reports
                elif REPORT_TITLE in text:   # 0.2.0-0.5.23 benchmark() (and vLLM's) print this title over the report
                    # named at the title's line (a log before it, "INFO ...", was refused as a JSON line cut short)
                    at = next(k for k, x in enumerate(text.split("\n"), start=1) if REPORT_TITLE in x)
                    title = clipped(text.split("\n")[at - 1].strip())
                    raise ConfigError(f"{p}:{at}", "<line>", title, "bench_serving's printed report without its run's "
                                      "size (Successful requests, Benchmark duration: cut short?), not its result file: "
                                      "rerun with --output-file F (one JSON line per run) and pass F") from None
                elif msg.startswith(NESTED_TOO_DEEPLY):   # JSON, whole, past Python's recursion limit: not cut short
                    raise ConfigError(f"{p}:{i}", "<line>", shown, "JSON nested deeper than Python's recursion limit "
                                      f"({msg}): no bench_serving result nests so deep (a damaged file?)") from None
                else:
                    raise _other_file(p, text) or ConfigError(f"{p}:{i}", "<line>", shown,
                                                              f"not a complete JSON object ({msg}; truncated?)") from None
    if len(objs) == 1 and isinstance(objs[0][1], list):   # a JSON list on one line: runs by their place in it
        objs = [(k + 1, o) for k, o in enumerate(objs[0][1])]
    if not objs:
        raise ConfigError(str(p), "<file>", p.name, "empty: no bench_serving run in it")
    entries, paired = _pair_steady(objs)
    if line is not None:
        if line in paired:
            raise ConfigError(f"{p}:{line}", "<keys>", "concurrency_ratio, window_start, window_end",
                              f"the steady-state window of the run on line {paired[line]} (steady_state_serving appends "
                              "it after the run when --steady-state-output-file is the --output-file): pass "
                              f"{p}:{paired[line]}, which is read with these steady-state figures")
        hit = [e for e in entries if e[0] == line]
        if not hit:
            raise ConfigError(str(p), "LINE", line, f"no run on that line; runs are on lines {', '.join(str(e[0]) for e in entries[:20])}")
        if len(hit) > 1:
            raise joined_runs(p, line, len(hit))
        entries = hit
    runs = []
    for i, o, steady in entries:
        run = parse_run(o, f"{p}:{i}")
        if steady is not None:
            run.summary.update(_steady_summary(steady[1], run, f"{p}:{steady[0]}"))
        runs.append(run)
    return runs


_YAML_KEY = re.compile(r"^(?P<key>[A-Za-z_][\w-]*):(?:\s|$)", re.M)
SCENARIO_YAML_KEYS = frozenset({"workload", "server", "arms", "acceptance"})
"""Top-level keys only a specsched scenario YAML has among the files a user holds."""
PROFILE_YAML_KEYS = frozenset({"gpu", "host", "hardware", "provenance"})
"""Top-level keys of a specsched profile YAML (``specsched profile`` writes them)."""


def _specsched_yaml(text: str) -> tuple[str, str] | None:
    """(what the file is, where it goes) for text that is a specsched scenario or profile
    YAML, known by its top-level keys (:data:`SCENARIO_YAML_KEYS`, :data:`PROFILE_YAML_KEYS`)
    in the file's first 200 lines; None for anything else."""
    keys = {m.group("key") for m in _YAML_KEY.finditer("\n".join(text.split("\n")[:200]))}
    if keys & SCENARIO_YAML_KEYS:
        return "a scenario YAML", "a specsched scenario: pass it with --scenario (validate) or run it"
    if len(keys & PROFILE_YAML_KEYS) >= 2:
        return "a profile YAML", "a specsched profile: pass it with --profile"
    return None


def _other_file(p: Path, text: str) -> ConfigError | None:
    """The refusal of a file that is no JSON and no printed report but another input a user
    has beside their results, named for what it is and where it goes (it was refused as a JSON
    line cut short, "truncated?"): an SGLang server log (its batch lines), a vLLM server's log
    or an SGLang log of start-up lines only (:class:`sim.server_log_kind.LogSigns`), or a CSV table (a
    request trace: a header row and rows of as many commas), or a specsched scenario or profile
    YAML (:func:`_specsched_yaml`: it was refused as a JSON line cut short, "Expecting value;
    truncated?"). None for anything else."""
    m = SGLANG_BATCH.search(text)
    if m is not None:
        at = text.count("\n", 0, m.start()) + 1
        return ConfigError(f"{p}:{at}", "<line>", clipped(text.split("\n")[at - 1].strip()),
                           "an SGLang server log (its 'Prefill batch'/'Decode batch' lines), not a bench_serving "
                           "result: give it to calibrate --from RUNS --server-log; --measured and --from take "
                           "bench_serving's --output-file (JSON) or its printed report")
    signs = LogSigns()   # a vLLM server's log, or an SGLang one of start-up lines only
    for i, row in enumerate(text.split("\n")[:5000], start=1):
        signs.see(i, row)
    refusal = signs.refusal(str(p), "a bench_serving result (JSON)")
    if refusal is not None:
        return refusal
    own = _specsched_yaml(text)
    if own is not None:
        return ConfigError(f"{p}:1", "<file>", own[0], f"{own[1]}, not a bench_serving result (JSON)")
    rows = [x for x in text.split("\n")[:3] if x.strip()]
    if len(rows) >= 2 and "{" not in rows[0] and rows[0].count(",") >= 1 and rows[1].count(",") == rows[0].count(","):
        return ConfigError(f"{p}:1", "<line>", clipped(rows[0].strip()),
                           "a CSV table (a request trace? replay it with a `trace` workload, docs/real-servers.md "
                           "\"Trace replay\"), not a bench_serving result, which is JSON")
    return None


def joined_runs(p: Path, line: int, n: int) -> ConfigError:
    """The refusal of a line that holds ``n`` runs one after another: result files joined
    without a newline between them (vLLM's ``json.dump`` ends its file without one, so ``cat
    a.json b.json`` runs two results together on one line); no FILE:LINE can name one of
    them."""
    return ConfigError(f"{p}:{line}", "<line>", f"{n} runs", f"line {line} holds {n} runs one after another (result "
                       "files joined without a newline between them, e.g. `cat` of vLLM result files, which end "
                       f"without one): put each on its own line (`jq -c . {p.name}`) or pass the files one by one")


def require_measured(run: BenchRun) -> BenchRun:
    """``run``, unless nothing was measured in it: ``completed`` 0, every request failed
    (SGLang writes NaN or no medians then, vLLM 0 throughputs): compared, its zeros read as
    "n/a" beside a prediction; fitted, it gave a loss of 0 and a profile written as fitted
    with nothing fitted.

    Raises:
        ConfigError: ``completed`` is 0.
    """
    if run.summary.get("completed") == 0:
        failed = f" ({int((~run.details.ok).sum())} failed)" if run.details is not None else ""
        raise ConfigError(run.source, "completed", 0, f"every request of the run failed{failed}: no latency or "
                          "throughput was measured to compare or fit; pass a run that completed requests")
    return run


def read_bench_one(spec: str | Path) -> BenchRun:
    """The run named by ``FILE[:LINE]``; a file with one run needs no LINE. A last line cut
    short (:func:`read_bench` ``left_out``) does not count as a run: a file of one run and the
    unfinished line of the next (killed while appending) gives its one run, with a
    ``warning:`` line on stderr (it was refused, naming the cut line).

    Raises:
        ConfigError: as :func:`read_bench`, or several runs and no LINE.
    """
    path, line = split_spec(spec)
    left_out: list[str] = []
    runs = read_bench(path, line, left_out=left_out)
    at = [r.source.rsplit(":", 1)[1] for r in runs]
    shared = next((x for x in at if at.count(x) > 1), None)
    if len(runs) > 1 and shared is not None:
        raise joined_runs(path, int(shared), at.count(shared))
    if len(runs) > 1:
        lines = ", ".join(r.source.rsplit(":", 1)[1] for r in runs[:20])
        raise ConfigError(str(path), "LINE", "<none>", f"the file has {len(runs)} runs: name one as FILE:LINE (lines {lines})")
    warn_notes([*left_out, *runs[0].notes])   # said once the run is read (a refusal stays one line)
    return runs[0]


def read_bench_runs(path: str | Path) -> list[BenchRun]:
    """Every run of the bench_serving result file ``path``, read as ``calibrate --from FILE``
    reads a file given whole, for scripts that read sweep files themselves: a last line cut
    short (a run killed while appending, or a file copied while bench_serving was writing it)
    is left out (:func:`read_bench` ``left_out``), and that and each run's notes are said as
    ``warning:`` lines on stderr (:func:`warn_notes`) once the file is read. Without the list
    the cut line refused the file's every run.

    Raises:
        ConfigError: as :func:`read_bench`.
    """
    left_out: list[str] = []
    runs = read_bench(path, left_out=left_out)
    warn_notes([*left_out, *(note for r in runs for note in r.notes)])
    return runs


def warn_notes(notes: Iterable[str]) -> None:
    """Print each of the reader's notes (:attr:`BenchRun.notes`, :func:`read_bench`
    ``left_out``) as one ``warning:`` line on stderr: the way every command and script that
    reads a bench_serving file says what it read without refusing it."""
    import sys

    for note in notes:
        print(f"warning: {note}", file=sys.stderr)


# ------------------------------------------------------------------ into the results format

def to_run_data(run: BenchRun, label: str = "measured") -> Any:
    """A bench_serving run as a results run (``sim.records.RunResult``, as
    ``analysis.io.read_results`` returns).

    ``summary`` holds the file's metrics plus ``scenario`` (the tag or file name), ``arm``
    (``label``), ``source``. With details, ``requests`` has one row per successful request
    (a stream ended before its first token included: TTFT 0.0, as bench_serving counts it; its
    E2E and TPOT NaN, as the file does not hold the latency bench_serving timed for it, unless
    vLLM's ``latencies`` give one) and ``chunks`` one row per token (none for that stream). SGLang records no send times, so each request's times
    count from its own start (``start_s`` 0, ``first_token_s`` = TTFT, ``finish_s`` = TTFT +
    its ITLs, NaN when the line has no ``itls``); vLLM's ``start_times`` (``--save-detailed``,
    0.33) give the sends, relative to
    the first, and its ``latencies`` the finish. A run not streamed (:func:`not_streamed`)
    has each reply's finish only (TTFT and TPOT NaN, one chunk row at the finish). Without
    details both tables are empty. ``accept_level`` is NaN and ``spec_cycles``,
    ``retractions`` and ``preemptions`` 0: a client sees none of them.
    ``steps``/``timeseries`` are always empty (a client sees no steps). ``summary
    ["itl_per_chunk"]``: the details' ITLs are one gap per streamed chunk
    (:func:`details_itl_per_chunk`), so each of its ``chunks`` rows is a chunk, not a token.
    """
    import pandas as pd
    from specsched.sim.records import RunResult, empty_table

    summary: dict[str, Any] = dict(run.summary)
    name = run.extra.get("tag") or Path(run.source.rsplit(":", 1)[0]).stem
    summary.update(scenario=str(name), arm=label, source=f"bench_serving {run.source}",
                   itl_per_chunk=details_itl_per_chunk(run))
    requests, chunks = empty_table("requests"), empty_table("chunks")
    d = run.details
    if d is not None:
        # TTFT 0.0: a stream ended before its first token, which bench_serving counts a
        # success (its 0.0 in the TTFT statistics); its row stays, with no token row
        ok = np.flatnonzero(d.ok & np.isfinite(d.ttfts) & (d.ttfts >= 0))
        rows, crid, ct = [], [], []
        for i in ok.tolist():
            s0 = float(d.start_s[i]) if d.start_s is not None and np.isfinite(d.start_s[i]) else 0.0
            if not d.streamed:   # the reply came whole: its finish is known, its first token not
                fin, n_out = s0 + float(d.ttfts[i]), int(d.output_lens[i])
                rows.append((i, int(d.input_lens[i]), n_out, s0, np.nan, fin, np.nan, fin - s0, np.nan, np.nan, 0, 0, 0))
                crid.append(np.full(1, i))
                ct.append(np.array([fin]))
                continue
            first = s0 + float(d.ttfts[i])
            gaps = d.itls[i]
            t = first + np.cumsum(gaps) if len(gaps) else np.zeros(0)
            fin = float(t[-1]) if len(t) else first
            if d.latency_s is not None and np.isfinite(d.latency_s[i]) and d.latency_s[i] >= d.ttfts[i]:
                fin = s0 + float(d.latency_s[i])   # the client's own end-to-end clock
            elif not d.has_itls:
                fin = np.nan   # neither the gaps nor the client's clock: the finish is unknown
            n_out = int(d.output_lens[i])
            # a success whose stream brought no token (ended before its first, TTFT 0.0) and
            # whose lists give no latency: bench_serving timed its latency (the client's clock
            # at the last chunk) but wrote only the TTFT; its E2E and TPOT are unknown, not 0
            # (its row stays finished at its start, counted as bench_serving counts it)
            end = fin if len(t) or fin > s0 else np.nan
            tpot = (end - first) / (n_out - 1) if n_out > 1 else np.nan
            rows.append((i, int(d.input_lens[i]), n_out, s0, first, fin, float(d.ttfts[i]), end - s0, tpot,
                         np.nan, 0, 0, 0))
            if d.ttfts[i] == 0 and not len(t):
                continue   # ended before its first token: no token reached the client
            crid.append(np.full(len(t) + 1, i))
            ct.append(np.r_[first, t])
        if rows:
            requests = pd.DataFrame(rows, columns=list(requests.columns))
            chunks = pd.DataFrame({"rid": np.concatenate(crid), "time_s": np.concatenate(ct)})
            chunks["n_tokens"] = 1
        summary["failed"] = int((~d.ok).sum())
    elif isinstance(run.extra.get("failed"), int) and not isinstance(run.extra.get("failed"), bool):
        summary["failed"] = run.extra["failed"]   # vllm bench serve writes the count
    # the line's own arguments (rate, concurrency, lengths), which bench_record writes back in
    # place of a scenario's: with none they were written null
    return RunResult(requests=requests, chunks=chunks, steps=empty_table("steps"),
                     timeseries=empty_table("timeseries"), summary=summary, scenario=None,
                     extra={BENCH_ARGS: dict(run.args), MEASURED_CLIENT: measured_client(run)})


BENCH_ARGS = "bench_args"
"""``RunResult.extra`` key of a measured run's bench_serving arguments (:func:`to_run_data`)."""
MEASURED_CLIENT = "measured_client"
"""The key, in ``RunResult.extra`` of a measured run (:func:`to_run_data`) and in the
bench_serving line :func:`bench_record` writes for it, of the client that measured the run:
``{"backend": its backend, "itl_per_chunk": bool, "itls_per_chunk": bool}``
(:func:`measured_client`). That line's own backend is ``specsched-bench_serving ...``, which
reads as specsched's (per-token gaps, specsched's counting); read back, :func:`itl_per_chunk`,
:func:`details_itl_per_chunk` and :func:`client_counting` take the measuring client's."""


def measured_client(run: BenchRun) -> dict[str, Any]:
    """The client that measured ``run`` (:data:`MEASURED_CLIENT`): its backend, whether its ITL
    statistics are one gap per streamed chunk (:func:`itl_per_chunk`) and whether its
    per-request ``itls`` are (:func:`details_itl_per_chunk`); for a line that is itself a
    measured run's rewrite, the client it names."""
    own = _rewritten_client(run)
    return {"backend": own["backend"] if own is not None else run.args.get("backend"),
            "itl_per_chunk": itl_per_chunk(run), "itls_per_chunk": details_itl_per_chunk(run)}


def _rewritten_client(run: BenchRun) -> dict[str, Any] | None:
    """The :data:`MEASURED_CLIENT` record of a specsched line that rewrites a measured run, or
    None (another line, or a record not of that shape)."""
    rec = run.extra.get(MEASURED_CLIENT)
    backend = run.args.get("backend")
    if (not isinstance(backend, str) or not backend.startswith("specsched-") or not isinstance(rec, dict)
            or not all(isinstance(rec.get(k), bool) for k in ("itl_per_chunk", "itls_per_chunk"))):
        return None
    return rec


# ------------------------------------------------------------------ writing

def _value(summary: Mapping[str, Any], key: str) -> Any:
    v = summary.get(key)
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def workload_args(scenario: Any) -> dict[str, Any]:
    """bench_serving's argument keys for a scenario's workload (the inverse of
    ``analysis.from_bench``): rate ``inf`` for burst and closed loop (a closed loop is
    ``max_concurrency`` = concurrency), ``dataset_name`` ``random`` for fixed/uniform lengths
    (fixed = range ratio 1), ``sharegpt`` for the shipped ShareGPT-like histograms, else
    ``custom``, and ``trace`` with rate ``"trace"`` for a trace."""
    if scenario is None:
        return {}
    sc = scenario.model_dump(mode="json") if hasattr(scenario, "model_dump") else dict(scenario)
    w = sc.get("workload") or {}
    kind = w.get("kind")
    out: dict[str, Any] = {"dataset_name": "custom", "request_rate": math.inf, "max_concurrency": None,
                           "num_prompts": w.get("num_requests")}
    if kind == "closed_loop":
        out["max_concurrency"] = w.get("concurrency")
    elif kind == "multi_turn":   # the semaphore holds a conversation; prompts are generated
        out.update(dataset_name="multi_turn", max_concurrency=w.get("concurrency"))
        if w.get("request_rate") is not None:   # conversations started at a rate
            out["request_rate"] = w["request_rate"]
        at = (w.get("multi_turn") or {}).get("agentic_trace")
        if at:   # bench_serving --dataset-name agentic-trace; path, offset and turn cap as extra keys
            outs = w.get("output_len") or {}
            out.update(dataset_name="agentic-trace", dataset_path=at.get("path"), dataset_offset=at.get("offset", 0),
                       agentic_max_turns=at.get("max_turns"),
                       sharegpt_output_len=outs.get("value") if outs.get("kind") == "fixed" else None)
            # what the trace does not say and the scenario assumed (specsched's own keys): the
            # shared system prompt's tokens and the trace run's reply length
            mt = w.get("multi_turn") or {}
            if mt.get("system_prompt_len"):
                out["agentic_system_prompt_len"] = mt["system_prompt_len"]
            if at.get("trace_reply_len") is not None:
                out["agentic_trace_reply_len"] = at["trace_reply_len"]
        return out
    elif kind == "poisson":
        out["request_rate"] = w.get("request_rate")
        out["max_concurrency"] = w.get("max_concurrency")
        if w.get("burstiness") is not None:
            out["burstiness"] = w["burstiness"]
    elif kind == "trace":
        out.update(dataset_name="trace", request_rate="trace", max_concurrency=w.get("max_concurrency"))
        return out
    ins, outs = w.get("input_len") or {}, w.get("output_len") or {}
    if ins.get("kind") in ("fixed", "uniform") and outs.get("kind") in ("fixed", "uniform"):
        ratios = {d.get("range_ratio", 1.0) if d.get("kind") == "uniform" else 1.0 for d in (ins, outs)}
        out.update(dataset_name="random", random_input_len=ins.get("value"), random_output_len=outs.get("value"))
        if len(ratios) == 1:
            out["random_range_ratio"] = ratios.pop()
        else:   # bench_serving has one ratio for both; say each (extra keys, kept by readers)
            out["random_range_ratio"] = None
            out["random_input_range_ratio"] = ins.get("range_ratio", 1.0) if ins.get("kind") == "uniform" else 1.0
            out["random_output_range_ratio"] = outs.get("range_ratio", 1.0) if outs.get("kind") == "uniform" else 1.0
    elif "sharegpt" in str(ins.get("path", "")):
        out["dataset_name"] = "sharegpt"
        if outs.get("kind") == "fixed":
            out["sharegpt_output_len"] = outs.get("value")
    return out


def _details_of(requests: Any, chunks: Any, sends: bool = False) -> dict[str, Any] | None:
    """bench_serving's per-request lists from a run's tables (DataFrames or
    :class:`~sim.tables.Columns`; None when chunks are empty, unless the server rejected every
    request: those still list their errors, as bench_serving does). With ``sends``, also
    ``start_times``: each request's send time in s from the run's start (vLLM 0.33's key
    for the client's clock at each send; no SGLang version writes send times)."""
    if len(requests) == 0:
        return None
    no_chunks = chunks is None or len(chunks) == 0
    if no_chunks and ("error" not in requests.columns or notna(requests, "finish_s").any()):
        return None   # compact records: no per-request lists (a run whose every request the server
        # rejected has none to keep, and still writes its errors, as bench_serving does)
    from specsched.sim.metrics import _itl_of

    order = np.argsort(column(requests, "rid"), kind="stable")   # request ids are unique
    rid = column(requests, "rid")[order].astype(int)
    by_rid: dict[int, list[float]] = {}
    if not no_chunks:
        # every request's ITLs at once (itl_values per request, grouped by request id)
        vals, of = _itl_of(column(chunks, "rid"), column(chunks, "time_s", float), column(chunks, "n_tokens", int),
                           with_rids=True)
        cut = np.flatnonzero(of[1:] != of[:-1]) + 1
        heads = of[np.r_[0, cut]].astype(int).tolist() if len(of) else []
        by_rid = dict(zip(heads, (v.tolist() for v in np.split(vals, cut)), strict=True)) if len(of) else {}
    done = notna(requests, "finish_s")[order].tolist()
    out = {
        "input_lens": column(requests, "input_len")[order].astype(int).tolist(),
        "output_lens": [int(x) if ok else 0 for x, ok in zip(column(requests, "output_len")[order].tolist(), done, strict=True)],
        "ttfts": [float(x) if ok else 0.0 for x, ok in zip(column(requests, "ttft_s")[order].tolist(), done, strict=True)],
        "itls": [by_rid.get(r, []) for r in rid.tolist()],
        "generated_texts": [""] * len(rid),
        "errors": _errors(requests, order, done),
    }
    if sends:
        out["start_times"] = column(requests, "start_s", float)[order].tolist()
    return out


def _errors(requests: Any, order: np.ndarray, done: list[bool]) -> list[str]:
    """bench_serving's ``errors`` list in ``order``: "" for a request that succeeded, the
    server's error text for one it rejected (the requests table's ``error`` column,
    :meth:`sim.records.Recorder.mark_aborted`), else "not finished"."""
    texts = column(requests, "error")[order].tolist() if "error" in requests.columns else [""] * len(done)
    return ["" if ok else (t or "not finished") for ok, t in zip(done, texts, strict=True)]


def token_times(requests: Any, chunks: Any, done: np.ndarray,
                with_owner: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """The token timestamps bench_serving builds for each finished request (SGLang 0.5.23
    ``benchmark/serving.py`` ``calculate_metrics``; ``benchmark/steady_state.py``
    ``_token_timestamps``): start + TTFT, then each inter-token latency added in turn, a chunk
    of n tokens after a gap dt giving n latencies of dt / n (``async_request_sglang_generate``).
    A request that streamed no text (output_len 0, or ended by the server before its first
    token, its asked length kept) has TTFT 0.0 and one time is still counted at its start.

    Args:
        requests: the requests table (rid, start_s, first_token_s, output_len).
        chunks: the chunks table (rid, time_s, n_tokens), non-empty (full records).
        done: bool mask over the requests' rows, the finished ones.
        with_owner: also return each time's request (else None: the run's peak needs none).

    Returns:
        ``(times, owner)``: float seconds (shape (k,)) and, per time, the index of its request
        among the ``done`` rows (int, shape (k,)); first tokens first, then each request's later
        ones in order.
    """
    from specsched.sim.metrics import _itl_of

    rid_done = column(requests, "rid")[done]
    start = column(requests, "start_s", float)[done]
    first_s = column(requests, "first_token_s", float)[done]
    ttft = np.where((column(requests, "output_len")[done] == 0) | np.isnan(first_s), 0.0, first_s - start)
    first = start + ttft
    keep = np.isin(column(chunks, "rid"), rid_done)
    vals, of = _itl_of(column(chunks, "rid")[keep], column(chunks, "time_s", float)[keep],
                       column(chunks, "n_tokens", int)[keep], with_rids=True)
    # each request's token times: its first token, then its latencies summed one by one
    # (np.cumsum adds in order, as bench_serving's loop does)
    order = np.argsort(rid_done, kind="stable")
    cut = np.flatnonzero(of[1:] != of[:-1]) + 1 if len(of) else np.zeros(0, dtype=np.int64)
    starts, ends = np.r_[0, cut].astype(np.int64), np.r_[cut, len(of)].astype(np.int64)
    # each run of equal ids is one request's latencies: its row, looked up once per request
    owner = order[np.searchsorted(rid_done[order], of[starts[starts < len(of)]])]
    times = [first]
    for a, b, k in zip(starts.tolist(), ends.tolist(), owner.tolist(), strict=False):
        if b > a:
            seq = np.empty(b - a + 1)
            seq[0] = first[k]
            seq[1:] = vals[a:b]
            times.append(np.cumsum(seq)[1:])
    if not with_owner:
        return np.concatenate(times), None
    lens = (ends - starts)[: len(owner)]
    return np.concatenate(times), np.r_[np.arange(len(first)), np.repeat(owner, lens)]


def _peaks(requests: Any, chunks: Any) -> dict[str, float]:
    """bench_serving's ``max_output_tokens_per_s`` and ``max_concurrent_requests`` as SGLang
    0.5.23 computes them (``sglang/benchmark/serving.py`` ``calculate_metrics``): whole-second
    buckets from the first start, ``int(ceil(last end - first start)) + 1`` of them; a
    request runs in every second from its start's to its end's; its token times are
    start + TTFT, then each inter-token latency added in turn (a chunk of n tokens after a gap
    dt gives n latencies of dt / n, ``async_request_sglang_generate``), so the first chunk
    counts one token. The running requests need only the requests table (compact records
    have no chunks): without chunks only ``max_concurrent_requests``.

    Only the occupied buckets are counted (bench_serving's list has one per second of the
    run): a trace spanning days, or one row far from the rest, held an array of 8 bytes a
    second of its span (a row 1e10 s out asked for 75 GiB) or overflowed int64."""
    done = notna(requests, "finish_s")
    if not done.any():
        return {}
    start, finish = column(requests, "start_s", float)[done], column(requests, "finish_s", float)[done]
    t0 = float(start.min())
    n = np.ceil(float(finish.max()) - t0) + 1   # buckets 0 .. n - 1 (floats: no int64 overflow)
    lo = np.sort(np.floor(start - t0))
    hi = np.sort(np.minimum(np.floor(finish - t0) + 1, n))
    # requests running in second b: started at or before b, not ended by it; the most are at a start.
    # lo's distinct values by its sort (np.unique would sort again and import numpy.ma, ~6 ms)
    cand = lo[np.r_[True, lo[1:] != lo[:-1]]]
    conc = np.searchsorted(lo, cand, side="right") - np.searchsorted(hi, cand, side="right")
    out: dict[str, float] = {"max_concurrent_requests": int(conc.max())}
    if chunks is None or len(chunks) == 0:
        return out
    times, _ = token_times(requests, chunks, done)
    bucket = np.floor(times - t0)
    bucket = bucket[(bucket >= 0) & (bucket < n)]
    if not bucket.size:
        return {"max_output_tokens_per_s": 0.0, **out}
    if n <= 4 * bucket.size + 4096:   # a dense count costs no more memory than the tokens
        top = int(np.bincount(bucket.astype(np.int64)).max())
    else:                             # a sparse run (a trace spanning days): occupied seconds only
        top = int(np.unique(bucket, return_counts=True)[1].max())
    return {"max_output_tokens_per_s": float(top), **out}


def _table(run: Any, name: str) -> Any:
    """A run's table as held (a RunResult's columns need no pandas), or its attribute."""
    return run.table(name) if hasattr(run, "table") else getattr(run, name, None)


SPLIT_ITL_BACKENDS = frozenset({"sglang", "sglang-native"})
"""SGLang bench_serving backends whose client splits a streamed chunk of n tokens into n ITL
gaps of dt / n (``async_request_sglang_generate``: ``output.itl.extend([adjust_itl] *
num_new_tokens)``, benchmark/serving.py, sglang/bench_serving.py from 0.4.3.post3; earlier
lines: ``BenchRun.chunk_itl_client``); what specsched's
ITL figures are (:func:`sim.metrics.itl_values`)."""


RETOKENIZED_ITL_BACKENDS = frozenset({"sglang-oai", "sglang-oai-chat"})
"""SGLang backends whose ITL figures are split again when the server speculates: from 0.5.5
(the release that added the ``tag`` and ``server_info`` keys), ``calculate_metrics`` spreads
each chunk's gap over its retokenized tokens when ``accept_length > 0``
(``use_retokenized_itl``, benchmark/serving.py in 0.5.23), so the line's ITL statistics are per
token although its ``itls`` details stay per chunk."""


_PERCENTILE_KEY = re.compile(rf"^p(?P<p>\d+(?:\.\d+)?)_(?:{'|'.join(LATENCIES)})_ms$")


def uncompared_percentiles(run: BenchRun) -> list[str]:
    """The line's latency percentiles that no prediction gives: vLLM's ``--metric-percentiles``
    beyond :data:`STATS`' (``p99.9_ttft_ms``, ``p75_itl_ms``), kept in ``extra``; ``p50`` is
    not one of them (it is the median), nor is a p90/p95/p99 kept in ``extra`` (a line whose
    replies were not streamed keeps its first-token statistics there, not read as measured:
    :func:`not_streamed`)."""
    own = {50.0, *(float(s[1:]) for s in STATS if s.startswith("p"))}
    return [k for k, v in run.extra.items()
            if (m := _PERCENTILE_KEY.match(k)) and float(m.group("p")) not in own
            and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]


_LATENCY_COLUMNS = {"ttft": "ttft_s", "tpot": "tpot_s", "e2e_latency": "e2e_s"}
"""The requests table's column of each per-request latency statistic (seconds)."""


def client_percentiles(run: Any, keys: Iterable[str], per_chunk_itl: bool,
                       counting: ClientCounting | None = None) -> dict[str, float]:
    """A predicted run's latency percentiles named by ``keys`` (``p{P}_{ttft,tpot,itl,e2e_latency}_ms``,
    as :func:`uncompared_percentiles` lists a line's vLLM ``--metric-percentiles`` beyond
    :data:`STATS`), computed as the measured line's client computes its own: numpy's linear
    percentile (vllm benchmarks/serve.py ``calculate_metrics``: ``np.percentile(ttfts or 0, p)``)
    over the completed requests' TTFT, TPOT (requests of two or more output tokens) and
    end-to-end latency, and over every ITL gap (``per_chunk_itl``: one gap per streamed chunk,
    :func:`itl_per_chunk`; else a chunk of n tokens as n gaps), in ms. ``counting`` as in
    :func:`client_record`. A key whose sample the run lacks (no chunks for an ITL) is left out."""
    from specsched.sim.metrics import itl_values

    if counting is not None:
        run = _as_client_counts(run, counting)
    req, chunks = _table(run, "requests"), _table(run, "chunks")
    out: dict[str, float] = {}
    for key in keys:
        m = _PERCENTILE_KEY.match(key)
        if m is None:
            continue
        metric = key[len(f"p{m.group('p')}_"):-len("_ms")]
        if metric == "itl":
            if chunks is None or not len(chunks):
                continue
            v = itl_values(chunks, per_chunk=per_chunk_itl)
        else:
            if req is None or not len(req):
                continue
            v = column(req, _LATENCY_COLUMNS[metric], float)[notna(req, "finish_s")]
        v = v[np.isfinite(v)] * 1000.0
        if v.size:
            out[key] = finite_percentiles(v, (float(m.group("p")),))[0]
    return out


GOODPUT_SLO_COLUMNS = {"ttft": "ttft_s", "tpot": "tpot_s", "e2el": "e2e_s"}
"""SGLang 0.5.23 ``--goodput`` SLO names (benchmark/goodput.py ``GOODPUT_SLO_METRICS``) -> the
requests table's column of the same latency (seconds)."""


def goodput_slos(run: BenchRun) -> dict[str, float] | None:
    """The line's goodput SLOs in ms (``goodput_slos_ms``, SGLang 0.5.23 ``--goodput
    ttft:500 tpot:50``), or None when it has none or names a latency other than
    :data:`GOODPUT_SLO_COLUMNS` (a later release's: not predicted)."""
    slos = run.extra.get("goodput_slos_ms")
    if not isinstance(slos, Mapping) or not slos:
        return None
    out = {}
    for k, v in slos.items():
        if k not in GOODPUT_SLO_COLUMNS or not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
            return None
        out[str(k)] = float(v)
    return out


def measured_goodput(run: BenchRun) -> dict[str, float]:
    """The line's goodput figures under the table's names: ``request_goodput`` (req/s),
    ``slo_attainment`` (0-1, good requests / requests sent) and ``slo_attainment_<slo>`` per SLO
    (``slo_attainment_by_metric``); those it states as numbers."""
    out: dict[str, float] = {}
    for k in ("request_goodput", "slo_attainment"):
        v = run.extra.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out[k] = float(v)
    by = run.extra.get("slo_attainment_by_metric")
    if isinstance(by, Mapping):
        for k, v in by.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                out[f"slo_attainment_{k}"] = float(v)
    return out


def client_goodput(run: Any, slos: Mapping[str, float], duration_s: float,
                   counting: ClientCounting | None = None, sent: int | None = None) -> dict[str, float]:
    """A predicted run's goodput for the SLOs ``slos`` (ms, :func:`goodput_slos`), as SGLang
    0.5.23's bench_serving computes a line's (benchmark/goodput.py ``calculate_goodput``): a
    request counts when it completed and met every SLO (TTFT, TPOT = (latency - TTFT) /
    (output - 1), 0 for a one-token output, end-to-end latency; each ``<=`` its SLO);
    ``request_goodput`` = good requests / ``duration_s``, ``slo_attainment`` = good / requests
    sent, ``slo_attainment_<slo>`` = the requests that met that one / requests sent. ``counting``
    as in :func:`client_record`. ``sent``: the requests the measured run sent, where the
    prediction sends only those that succeeded (``scenario from-bench``): its failed ones met no
    SLO and count in SGLang's denominator; default the run's own requests. {} for a run
    without requests."""
    if counting is not None:
        run = _as_client_counts(run, counting)
    req = _table(run, "requests")
    if req is None or not len(req):
        return {}
    n = max(len(column(req, "ttft_s")), sent or 0)
    done = notna(req, "finish_s")
    ttft, e2e = column(req, "ttft_s", float), column(req, "e2e_s", float)
    out_len = column(req, "output_len", float)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out_len > 1, (e2e - ttft) / (out_len - 1), 0.0)
    observed = {"ttft": ttft, "tpot": tpot, "e2el": e2e}
    good = done.copy()
    out: dict[str, float] = {}
    for name, slo in slos.items():
        met = done & (observed[name] * 1000.0 <= slo)
        out[f"slo_attainment_{name}"] = float(met.sum()) / n
        good &= met
    out["request_goodput"] = float(good.sum()) / duration_s if duration_s > 0 else float("nan")
    out["slo_attainment"] = float(good.sum()) / n
    return out


def vllm_client(run: BenchRun) -> bool:
    """The line was written by vLLM's client: its result JSON (``date``, which only vLLM
    writes: ``benchmark_serving.py``/``vllm bench serve`` ``main``), its printed result block
    (:data:`PRINTED_BY_VLLM`, :func:`_vllm_block`), or a dump of its
    ``BenchmarkMetrics`` dataclass (``dataclasses.asdict``, as wrappers save it: no ``date``,
    but ``percentiles_{m}_ms`` lists, a field no SGLang version has;
    :func:`_percentile_pairs`)."""
    return ("date" in run.extra or run.extra.get(PRINTED_BY_VLLM) is True
            or any(k.startswith("percentiles_") and k.endswith("_ms") for k in run.extra))


def itl_per_chunk(run: BenchRun) -> bool:
    """The run's client records one ITL per streamed chunk, not n gaps of dt / n: every vLLM
    result file (``benchmark_serving.py`` and ``vllm bench serve``; found by :func:`vllm_client`:
    the ``date`` key that only vLLM writes, or a ``BenchmarkMetrics`` dump's percentile lists; vllm/benchmarks/lib/endpoint_request_func.py appends
    ``timestamp - most_recent_timestamp`` per chunk, 0.34.0), an SGLang ``sglang`` line from
    before the split (``BenchRun.chunk_itl_client``), and an SGLang line whose
    backend is not in :data:`SPLIT_ITL_BACKENDS` (``sglang-oai``, ``vllm``, ``lmdeploy``,
    ``trt``, ...: ``output.itl.append`` per chunk in SGLang 0.5.23 benchmark/serving.py; not
    specsched's own ``specsched-*`` lines, split as SGLang's; nor a 0.5.5+ ``sglang-oai`` line of a
    speculating server, :data:`RETOKENIZED_ITL_BACKENDS`). With speculative decoding a chunk
    carries a whole accepted block, so such an ITL is about the verify cycle, accept length
    times the split one."""
    own = _rewritten_client(run)
    if own is not None:   # a measured run's line as validate --measured rewrote it: its client's
        return own["itl_per_chunk"]
    if vllm_client(run):
        return True
    backend = run.args.get("backend")
    if (backend in RETOKENIZED_ITL_BACKENDS and ("server_info" in run.extra or "tag" in run.extra)
            and (run.summary.get("accept_length") or 0) > 0):
        return False
    return details_itl_per_chunk(run)


def details_itl_per_chunk(run: BenchRun) -> bool:
    """The run's per-request ``itls`` (``--output-details``) hold one gap per streamed chunk:
    as :func:`itl_per_chunk`, and also for a 0.5.5+ ``sglang-oai``/``sglang-oai-chat`` line of
    a speculating server, whose statistics are split over retokenized tokens
    (:data:`RETOKENIZED_ITL_BACKENDS`) while its ``itls`` stay ``output.itl``, one gap per chunk
    (0.5.23 benchmark/serving.py ``result_details``)."""
    own = _rewritten_client(run)
    if own is not None:   # a measured run's line as validate --measured rewrote it: its client's
        return own["itls_per_chunk"]
    if vllm_client(run) or run.chunk_itl_client:
        return True
    backend = run.args.get("backend")
    # specsched's own lines (backend specsched-sim / specsched-runtime, bench_record) are split
    return isinstance(backend, str) and backend not in SPLIT_ITL_BACKENDS and not backend.startswith("specsched-")


OOM_ABORT_MESSAGE = ("Out of memory even after retracting all other requests in the decode batch. "
                     "Aborting the last request.")
"""SGLang 0.5.23's error for a request aborted out of memory (managers/schedule_batch.py
``ScheduleBatch.retract_decode``, status 500), streamed in an error chunk on the OpenAI routes."""


@dataclass(frozen=True)
class ClientCounting:
    """How a bench_serving line's client counted the requests the server did not serve whole
    (:func:`client_counting` of the line; the prediction compared with it counts them alike).

    Attributes:
        tokenizer_rejects_completed: a request the tokenizer rejected (a prompt or prompt +
            output past the context, an empty prompt: sim/served.py ``is_tokenizer_rejection``)
            counted completed, TTFT 0.0, its asked output length; else failed.
        scheduler_aborts_completed: a request the scheduler aborted on arrival
            (``validate_input_length``: a prompt of ``max_req_input_len`` or more) likewise.
        oom_aborts: a request aborted out of memory mid-stream: ``"tokens"`` completed with
            the tokens it got, ``"asked"`` completed with the output length it asked (its TTFT
            and gaps those of the chunks it got), ``"failed"`` failed.
    """

    tokenizer_rejects_completed: bool = False
    scheduler_aborts_completed: bool = False
    oom_aborts: str = "tokens"


NATIVE_COUNTING = ClientCounting(True, True, "tokens")
"""``sglang``/``sglang-native`` (``async_request_sglang_generate``, the /generate route): every
rejection arrives inside an HTTP 200 stream (SGLang 0.5.23 srt/entrypoints/http_server.py
``generate_request``: the tokenizer's ValueError caught inside the stream and sent as an
``{"error": ...}`` message; the scheduler's abort sent as the request's last output, no text)
and the client sets ``success`` at the stream's end, keeping ``ttft`` 0.0, no ITL and its
initial ``output_len``, the asked ``max_new_tokens``; an out-of-memory abort's stream ends
with no text either, so it keeps the ``completion_tokens`` of its last text chunk."""

CHAT_COUNTING = ClientCounting(False, True, "asked")
"""``sglang-oai-chat`` (``async_request_openai_chat_completions``): the route kick-starts its
stream before answering 200 (serving_chat.py ``_handle_streaming_request``), so the
tokenizer's ValueError is an HTTP 400, a failed request. The scheduler's aborts come back as
outputs: ``_generate_chat_stream`` streams one whose finish reason carries a status (both the
scheduler's 400 and the out-of-memory 500: the HTTPStatus survives the pickled IPC,
environ.py ``SGLANG_USE_PICKLE_IPC`` on) as a ``data: {"error": ...}`` chunk after HTTP 200.
The client skips a chunk without ``choices`` and sets ``success`` at the stream's end; its
``output_len`` changes only on a chunk with ``usage``, which the route sends only when asked
(``should_include_usage``: no ``stream_options`` from the client,
``stream_response_default_include_usage`` off), so both count completed with the asked
length, the out-of-memory one with the TTFT and gaps of the tokens it got."""

COMPLETIONS_COUNTING = ClientCounting(False, False, "failed")
"""``sglang-oai`` (``async_request_openai_completions``): the tokenizer's ValueError is an
HTTP 400 as on the chat route (serving_completions.py ``_handle_streaming_request``); the
scheduler's aborts come back as the ``data: {"error": ...}`` chunk
(``_generate_completion_stream``), on which the client's ``data["choices"][0]["text"]``
raises a KeyError: ``success`` False, whatever tokens arrived before it."""

BACKEND_COUNTING = {"sglang": NATIVE_COUNTING, "sglang-native": NATIVE_COUNTING,
                    "sglang-oai-chat": CHAT_COUNTING, "sglang-oai": COMPLETIONS_COUNTING}
"""SGLang 0.5.23 bench_serving backend -> how its client counts (benchmark/serving.py
``ASYNC_REQUEST_FUNCS``). Any other line (specsched's own, another client) is compared as
specsched's results record a run: rejections failed, out-of-memory aborts completed with the
tokens they got (``ClientCounting()``)."""


def client_counting(run: BenchRun) -> ClientCounting:
    """How the line's client counted the requests the server rejected or aborted
    (:data:`BACKEND_COUNTING` of its ``backend``; ``ClientCounting()`` for any other)."""
    own = _rewritten_client(run)   # a measured run's line as validate --measured rewrote it: its client's
    return BACKEND_COUNTING.get(own["backend"] if own is not None else run.args.get("backend"), ClientCounting())


def _as_client_counts(run: Any, counting: ClientCounting) -> Any:
    """``run`` as a client that counts by ``counting`` records it. A request the server
    rejected (the requests table's ``error``) that this client counts completed becomes a
    completed one of TTFT 0.0, latency 0 (its rejection returns at once: the start stands
    in, as for the run's duration, :func:`sim.metrics.summarize`), the output length it asked
    for and no ITL; which rejections are the tokenizer's is read from SGLang's error text
    (sim/served.py ``is_tokenizer_rejection``). A request aborted out of memory (the
    requests table's ``oom_abort_asked_len``) keeps the output length it asked
    (``"asked"``) or fails with SGLang's error (``"failed"``: its chunks leave the ITL). The
    summary's counts, throughputs and latency statistics are taken again over the rows; the
    ITL statistics too where chunks were dropped (else unchanged: a rejection adds no gap).
    ``run`` itself when nothing changes."""
    from types import SimpleNamespace

    from specsched.sim.metrics import summarize
    from specsched.sim.records import empty_table
    from specsched.sim.served import is_tokenizer_rejection
    from specsched.sim.tables import Columns

    req = _table(run, "requests")
    if req is None or not len(req):
        return run
    n = len(req)
    errors = column(req, "error").tolist() if "error" in req.columns else [""] * n
    rejected = np.array([bool(e) for e in errors], dtype=bool)
    by_tokenizer = np.array([bool(e) and is_tokenizer_rejection(e) for e in errors], dtype=bool)
    counted = rejected & np.where(by_tokenizer, counting.tokenizer_rejects_completed,
                                  counting.scheduler_aborts_completed)
    asked = (np.asarray(column(req, "oom_abort_asked_len"), dtype=np.int64) if "oom_abort_asked_len" in req.columns
             else np.full(n, -1, np.int64))
    oom = (asked >= 0) & ~rejected if counting.oom_aborts != "tokens" else np.zeros(n, bool)
    if not counted.any() and not oom.any():
        return run
    cols = {c: np.array(column(req, c), copy=True) for c in req.columns}
    start = column(req, "start_s", float)
    for c in ("finish_s", "e2e_s", "ttft_s", "tpot_s", "first_token_s"):
        cols[c] = cols[c].astype(float)
    cols["finish_s"][counted] = start[counted]
    cols["e2e_s"][counted] = 0.0
    cols["ttft_s"][counted] = 0.0
    cols["tpot_s"][counted] = np.where(cols["output_len"][counted] > 1, 0.0, np.nan)
    errors = ["" if c else e for e, c in zip(errors, counted.tolist(), strict=True)]
    chunks = _table(run, "chunks")
    dropped = False
    if counting.oom_aborts == "asked":
        cols["output_len"][oom] = asked[oom]
        ttft, e2e, tpot = (np.asarray(x, float) for x in (cols["ttft_s"], cols["e2e_s"], cols["tpot_s"]))
        with np.errstate(invalid="ignore", divide="ignore"):
            tpot[oom] = np.where(asked[oom] > 1, (e2e[oom] - ttft[oom]) / (asked[oom] - 1), np.nan)
        cols["tpot_s"] = tpot
    elif counting.oom_aborts == "failed":
        for c in ("first_token_s", "finish_s", "ttft_s", "e2e_s", "tpot_s"):
            cols[c][oom] = np.nan
        errors = [OOM_ABORT_MESSAGE if o else e for e, o in zip(errors, oom.tolist(), strict=True)]
        if chunks is not None and len(chunks):
            keep = ~np.isin(column(chunks, "rid"), column(req, "rid")[oom])
            chunks = Columns({c: np.asarray(column(chunks, c))[keep] for c in chunks.columns})
            dropped = True
    cols.pop("error", None)
    if any(errors):
        cols["error"] = np.array(errors, dtype=object)
    folded = Columns(cols)
    again = summarize(folded, chunks if chunks is not None else empty_table("chunks"), empty_table("steps"))
    keep = {k for k in METRIC_KEYS if (dropped or "_itl_ms" not in k) and k != "accept_length"}
    summary = {k: v for k, v in dict(run.summary or {}).items() if k != "requests_aborted"}
    summary |= {k: v for k, v in again.items() if k in keep or k == "requests_aborted"}
    return SimpleNamespace(summary=summary, requests=folded, chunks=chunks, scenario=run.scenario, derived=None)


def client_record(run: Any, per_chunk_itl: bool, per_chunk_tokens: bool | None = None,
                  counting: ClientCounting | None = None) -> dict[str, Any]:
    """A predicted run's bench_serving metrics (:func:`bench_record` without details) as the
    measured line's client records them: with ``per_chunk_itl`` (:func:`itl_per_chunk` of the
    line) the ITL statistics are one gap per streamed chunk; with ``per_chunk_tokens``
    (default ``per_chunk_itl``; :func:`details_itl_per_chunk` of the line, whose raw ``itls``
    are per chunk also where its ITL statistics are split) ``max_output_tokens_per_s`` counts
    one token per chunk, as bench_serving counts one at start + TTFT and one per entry of the
    request's ``itl`` list (SGLang 0.5.23 benchmark/serving.py ``calculate_metrics``; vllm
    bench serve's is the same loop): with speculative decoding a chunk is a verify cycle's
    accepted block, and the token count read such a line's peak several times high. With
    ``counting`` (:func:`client_counting` of the line) the requests the server rejected or
    aborted count as that client counts them (:func:`_as_client_counts`); None: as the run
    records them. The summary's :data:`ONE_BATCH_FIGURES` are added (a
    ``bench_one_batch_server`` line's figures, :func:`sim.metrics.summarize`)."""
    from specsched.sim.metrics import itl_stats

    if counting is not None:
        run = _as_client_counts(run, counting)
    rec = bench_record(run, details=False)
    # the bench_one_batch_server figures bench_serving has no key for, as the summary has them
    summary = getattr(run, "summary", None) or {}
    rec |= {k: summary[k] for k in ONE_BATCH_FIGURES if k in summary}
    chunks = _table(run, "chunks")
    if per_chunk_itl:
        rec |= itl_stats(getattr(run, "chunks", None), per_chunk=True)
    if (per_chunk_itl if per_chunk_tokens is None else per_chunk_tokens) and rec.get("max_output_tokens_per_s") is not None \
            and chunks is not None and len(chunks):
        ones = {"rid": column(chunks, "rid"), "time_s": column(chunks, "time_s", float),
                "n_tokens": np.ones(len(column(chunks, "rid")), dtype=np.int64)}
        rec["max_output_tokens_per_s"] = _peaks(_table(run, "requests"), ones).get("max_output_tokens_per_s")
    return rec


RESULT_KEYS = (
    "tag", "backend", "dataset_name", "request_rate", "max_concurrency", "sharegpt_output_len", "random_input_len",
    "random_output_len", "random_range_ratio", "server_info", "duration", "completed", "total_input_tokens",
    "total_input_text_tokens", "total_input_vision_tokens", "total_output_tokens", "total_output_tokens_retokenized",
    "request_throughput", "input_throughput", "output_throughput", "total_throughput",
    *(f"{s}_{m}_ms" for m in ("e2e_latency", "ttft", "tpot", "itl") for s in STATS),
    "concurrency", "accept_length", "max_output_tokens_per_s", "max_concurrent_requests",
)
"""The keys SGLang 0.5.23 writes for a run, in its order (``benchmark/serving.py``
``benchmark()``, the ``result`` dict before ``--goodput``/``--cache-report`` keys and the
``--output-details`` lists): every one is present, null where SGLang would write null or the
run does not say (SGLang writes its argparse defaults, 1024, for the random lengths of any
dataset; a specsched line writes them only for a random workload)."""


def bench_record(run: Any, details: bool | None = None) -> dict[str, Any]:
    """One bench_serving line (SGLang 0.5.23's keys and units) for a run.

    Args:
        run: a ``RunResult`` (``summary``, ``requests``, ``chunks``, ``scenario``).
        details: add the per-request lists; None = when chunks exist and the run has at most
            :data:`DETAILS_MAX_OUTPUT_TOKENS` output tokens. The lists are SGLang's
            ``--output-details`` ones plus ``start_times`` (each request's send time, s from
            the run's start) when the run's requests have send times: SGLang (0.3.0-0.5.23)
            writes no send times, vLLM 0.33's ``vllm bench serve --save-detailed`` writes
            them under this key, so ``scenario from-bench --arrivals details`` and
            ``calibrate --from`` can replay the run's own arrivals.

    Returns:
        A JSON-ready dict, :data:`RESULT_KEYS` first in SGLang 0.5.23's order (input text
        tokens = input tokens, vision tokens 0), specsched's own keys after them
        (``num_prompts``, ``burstiness``, per-side range ratios, ``max_itl_ms``, the
        details). It holds: arguments (``backend`` = ``specsched-<source>``, ``dataset_name``,
        ``request_rate`` (``inf`` for burst/closed loop), ``max_concurrency``, the length
        arguments, plus ``num_prompts``/``burstiness`` as vLLM writes them), ``server_info``
        (the scenario's server arguments and its name/arm/seed/profile), every metric in
        :data:`METRIC_KEYS` the run has (p95 of TTFT/TPOT/E2E from the requests table when
        the summary lacks them; None where unknown, as bench_serving writes null; TPOT and ITL 0.0
        when no output had a second token, as bench_serving's ``np.mean(tpots or 0)`` writes them).
    """
    s = run.summary or {}
    rec: dict[str, Any] = {"tag": s.get("scenario"), "backend": f"specsched-{s.get('source', 'sim')}"}
    rec.update(workload_args(run.scenario))
    measured_args = (getattr(run, "extra", None) or {}).get(BENCH_ARGS)
    if run.scenario is None and isinstance(measured_args, Mapping):   # a measured line's, as it wrote them
        rec.update({k: v for k, v in measured_args.items() if k != "backend"})
        client = (getattr(run, "extra", None) or {}).get(MEASURED_CLIENT)
        if isinstance(client, Mapping):   # the client that measured it, whose ITLs and counts these are
            rec[MEASURED_CLIENT] = dict(client)
    sc = run.scenario
    server = sc.server.model_dump(mode="json") if hasattr(sc, "server") else (sc or {}).get("server") if isinstance(sc, Mapping) else None
    rec["server_info"] = {**(server or {}), "specsched": {k: s.get(k) for k in ("scenario", "arm", "seed", "profile", "source")}}
    req = _table(run, "requests")
    extra: dict[str, float] = {}
    sends = False   # the requests' start_s are send times on the run's clock (not a file's zeros)
    if req is not None and len(req):
        done = notna(req, "finish_s")
        for key, col in (("ttft", "ttft_s"), ("tpot", "tpot_s"), ("e2e_latency", "e2e_s")):
            if _value(s, f"p95_{key}_ms") is not None and _value(s, f"p90_{key}_ms") is not None:
                continue   # the summary has them (sim.metrics, every latency's P90 and P95): the record takes those
            v = column(req, col, float)[done] * 1000.0
            v = v[np.isfinite(v)]
            if v.size:   # np.percentile's values without its import of numpy.ma
                extra[f"p95_{key}_ms"], extra[f"p90_{key}_ms"] = finite_percentiles(v, (95, 90))
        sends = bool((column(req, "start_s")[done] > 0).any())   # a run, not a file's per-request lists
        # a simulated or measured run has its own clock even when every request starts at 0 (a burst)
        if sends or str(s.get("source", "")).startswith(("sim", "runtime")):
            memo = getattr(run, "derived", None)   # a RunResult keeps them for its next record
            peaks = memo.get("bench_peaks") if memo is not None else None
            if peaks is None:
                peaks = _peaks(req, _table(run, "chunks"))
                if memo is not None:
                    memo["bench_peaks"] = peaks
            extra.update(peaks)
    if req is not None and len(req) and (rec.get("num_prompts") is None or rec.get("request_rate") == "trace"):
        # a trace: the requests sent (its rows up to the limit; a limit above the rows sends the rows)
        rec["num_prompts"] = len(req)
    for k in METRIC_KEYS:
        v = _value(s, k)
        if v is None and k in extra:
            v = extra[k]
        if v is None and k == "total_output_tokens_retokenized":
            v = _value(s, "total_output_tokens")
        done, out_tokens = _value(s, "completed") or 0, _value(s, "total_output_tokens")
        if (v is None and k.endswith(("_tpot_ms", "_itl_ms")) and done > 0
                and (out_tokens is None or out_tokens <= done)):
            # every output one token: no TPOT or ITL sample, and bench_serving writes
            # np.mean(tpots or 0) (its every statistic of both) = 0.0, not null
            # (SGLang 0.5.23 benchmark/serving.py calculate_metrics); not a statistic a measured
            # line held as null or NaN beside longer outputs (it was written 0.0)
            v = 0.0
        rec[k] = v
    # SGLang 0.5.23's own keys, in its order, each present (null where unknown), then ours
    tin = rec.get("total_input_tokens")
    rec.update(total_input_text_tokens=tin, total_input_vision_tokens=None if tin is None else 0)
    rec = {**{k: rec.get(k) for k in RESULT_KEYS}, **{k: v for k, v in rec.items() if k not in RESULT_KEYS}}
    chunks = _table(run, "chunks")
    if details is None:   # _details_of says which runs have lists (not a run without chunks, compact records)
        details = (s.get("total_output_tokens") or 0) <= DETAILS_MAX_OUTPUT_TOKENS
    if details and req is not None:
        d = _details_of(req, chunks, sends)
        if d is not None:
            rec.update(d)
    return rec


def bench_line(run: Any, details: bool | None = None) -> str:
    """:func:`bench_record` as one JSON line (no newline), ``Infinity`` for an infinite rate
    as Python's json (and so bench_serving) writes it."""
    return record_line(bench_record(run, details))


def record_line(record: dict[str, Any]) -> str:
    """A bench_serving record as one JSON line (no newline): numpy scalars as numbers,
    ``Infinity`` for an infinite rate as Python's json (and so bench_serving) writes it."""
    return json.dumps(record, default=lambda o: o.item() if hasattr(o, "item") else str(o))
