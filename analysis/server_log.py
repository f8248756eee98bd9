"""SGLang server logs: the scheduler's "Prefill batch" and "Decode batch" lines.

What is read, and from which versions (each checked against that version's source):

- SGLang 0.5.23 logs them from ``srt/managers/scheduler_components/metrics_reporter.py``
  (``report_prefill_stats``, ``report_decode_stats``), one decode line every
  ``decode_log_interval`` (default 40) decode steps::

    [2026-01-01 10:00:00 TP0] Prefill batch, #new-seq: 3, #new-token: 3072, #cached-token: 0,
        token usage: 0.01, #running-req: 5, #queue-req: 2, #pending-token: 0, cuda graph: False,
        input throughput (token/s): 12345.67
    [2026-01-01 10:00:01 TP0] Decode batch, #running-req: 8, #token: 9000, token usage: 0.02,
        accept len: 3.10, accept rate: 0.42, cuda graph: True, gen throughput (token/s): 2500.00,
        #queue-req: 0

  Optional parts: ``accept len``/``accept rate`` (and ``cap len``, ``block accept len``)
  only with speculative decoding; ``#replay-token``; ``[N]`` after "batch" with
  ``SGLANG_LOG_FORWARD_ITERS``; hybrid-SWA pools write ``#full token``/``full token usage``
  and ``#swa token``/``swa token usage`` (pool_stats_observer.py); ``cpu graph``/``npu graph``
  instead of ``cuda graph`` on other devices; MFU and ``fwd occupancy`` suffixes; PD
  disaggregation counters.
- SGLang 0.2.x-0.5.3 log with a full stop after "batch" (``Prefill batch. #new-seq: ...``;
  0.3.0 ``srt/managers/tp_worker.py``, 0.3.6-0.4.6 ``srt/managers/scheduler.py``, 0.5.1
  ``scheduler_metrics_mixin.py``), 0.3.x with ``cache hit rate: 12.50%``, ``accept len``
  from 0.4 on, ``cuda graph`` on decode lines from 0.4.7 (prefill lines from 0.5.9); 0.5.4 switched to the
  comma (``Prefill batch [N], ``; the number only with ``SGLANG_LOG_FORWARD_ITERS`` from
  0.5.5). Every 0.4.x and 0.5.x release's log functions were compared (docs/real-servers.md
  has the table by version). 0.3.0 also
  writes a mixed-chunk prefill as ``Prefill batch(mixed #running-req: 3). #new-seq: ...``.
- Prefill-decode disaggregation (0.4.6 on): a prefill server's bootstrap queue
  (``#unbootstrapped-req`` 0.4.6-0.5.2, ``#prealloc-req`` 0.5.3-0.5.11, ``#bootstrap-req`` 0.5.12 on)
  and in-flight KV sends (``#transferring-req``, then ``#inflight-req``); a decode server's
  ``pre-allocated usage``, ``#prealloc-req``, ``#transfer-req``, ``#retracted-req``.
- The logger's prefix (``configure_logger``): ``[YYYY-MM-DD HH:MM:SS{.mmm with
  SGLANG_LOG_MS}{ DPn}{ PPn}{ ATTN_CPn}{ MOE_DPn}{ TPn}{ EPn}]`` (0.3.0: ``[HH:MM:SS TPn]``,
  no date: such times get the date 1970-01-01). Anything before it (a
  container runtime's or journald's own prefix) is skipped; the timestamp is the last one
  before the "batch" text. With DP attention every DP rank logs its own lines,
  interleaved: ``rank`` keeps them apart. 0.2.0-0.2.13 wrote no logger prefix but tagged
  the lines ``[gpu_id=N]``/``[gpu=N]`` (:data:`_GPU_ID`): the rank ``gpu=N``.

Fields are read by name, so added, reordered or unknown fields do not matter; a field a
line lacks is NaN. "gen throughput" is the tokens generated since the previous decode line
of the same rank over the wall time since it (prefill work in between included), so a
decode line preceded (on its rank) by a decode line and with an empty queue times pure
decode steps: seconds per step = running-req x accept len / gen throughput.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from specsched.analysis.server_launch import Launch
from specsched.sim.bench_serving import REPORT_TITLE, input_path
from specsched.sim.errors import ConfigError, clipped
from specsched.sim.input_files import READ_ERRORS, is_input_file, open_text, unreadable
from specsched.sim.log_lines import log_lines
from specsched.sim.server_log_kind import SGLANG_STARTUP, LogSigns

_BATCH = re.compile(r"\b(?P<kind>Prefill|Decode) batch(?: \[\d+\])?(?:\s*\(mixed (?P<mixed>[^)]*)\))?\s*[,.]\s*(?P<rest>.*)$")
_STAMP = r"(?:\d{4}-\d{2}-\d{2}[ T])?\d{2}:\d{2}:\d{2}(?:[.,]\d+)?"
_TIME = re.compile(rf"(?<![\d:])({_STAMP})")
_PREFIX = re.compile(rf"\[\s*{_STAMP}(?P<rank>(?:\s+[A-Z_]+\d+)*)\s*\]\s*$")
_GPU_ID = re.compile(r"\[gpu(?:_id)?=(?P<gpu>\d+)\]\s*$")
"""0.2.0-0.2.13's own tag before "Decode batch"/"Prefill batch": ``[gpu_id=0] Decode batch.``
(0.2.0-0.2.5 ``srt/managers/controller/tp_worker.py`` ``print_stats``,
``get_new_prefill_batch``), ``[gpu=0] Decode batch.`` (0.2.9-0.2.13
``srt/managers/tp_worker.py``); their logger wrote the message alone (``format="%(message)s"``
in ``srt/server.py``), no time. Each data-parallel worker logs its own lines under its GPU id:
the rank ``gpu=N``. 0.2.14 on: the ``[HH:MM:SS TPn]`` prefix (``configure_logger``)."""
_WRAPPER_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
                           r"|\b[A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2}(?:\.\d+)?|\d{2}:\d{2}:\d{2}(?:[.,]\d+)?"
                           r"|\b\d{4}([-/.])\d{1,2}\1\d{1,2}\b|\b\d{1,2}([-/.])\d{1,2}\2\d{4}\b")
"""A time a wrapper puts before SGLang's prefix (RFC 3339 of ``docker compose logs -t``,
``kubectl logs --timestamps``; journald's ``Mar 02 08:00:00``; a time of day; a date apart
from it, ``2026/03/02 08:01:00`` or ``02.03.2026``): not part of the line's source
(:func:`_source`). A date kept there named a log that ran past midnight as two servers."""
MAX_SOURCES = 32
"""At most this many sources (:func:`_source`) are told apart in one log, and at most one for
every two batch lines; a prefix that takes more values (a per-line counter or id a shipper
adds) names no server, and is left out (:func:`server_names`)."""
_TIME_ONLY_DATE = "1970-01-01 "
"""Date given to a time-only stamp (0.3.0's logger wrote ``%H:%M:%S``)."""
_FIELD = re.compile(r"(?P<key>#?[A-Za-z][A-Za-z\- ()/]*?):\s*(?P<value>-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|True|False)")
_NAMES = {
    "#new-seq": "new_seq", "#new-token": "new_token", "#cached-token": "cached_token", "token usage": "token_usage",
    "full token usage": "token_usage", "#running-req": "running_req", "#queue-req": "queue_req", "#token": "token",
    "#full token": "token", "accept len": "accept_len", "accept rate": "accept_rate",
    "gen throughput (token/s)": "gen_throughput", "input throughput (token/s)": "input_throughput",
    "#pending-token": "pending_token", "#swa token": "swa_token", "swa token usage": "swa_token_usage",
    "cuda graph": "graph", "cpu graph": "graph", "npu graph": "graph", "musa graph": "graph",
    "#replay-token": "replay_token", "mamba usage": "mamba_usage", "mamba num": "mamba_num",
    # HiSparse (pool_stats_observer.py ``get_decode_usage_msg_parts``): the device buffer
    # (``#gpu token``, each request's top-k working set) and the host copy (``#cpu token``)
    "#gpu token": "gpu_token", "gpu token usage": "gpu_token_usage",
    "#cpu token": "cpu_token", "cpu token usage": "cpu_token_usage",
    # speculative decoding's capped and block accept lengths (report_decode_stats)
    "cap len": "cap_len", "block accept len": "block_accept_len",
    # prefill-decode disaggregation: the prefill server's bootstrap and in-flight (KV sending)
    # queues, the decode server's preallocation, transfer and retracted queues
    "#unbootstrapped-req": "bootstrap_req", "#bootstrap-req": "bootstrap_req",
    "#transferring-req": "inflight_req", "#inflight-req": "inflight_req",
    "#prealloc-req": "prealloc_req", "#transfer-req": "transfer_req", "#retracted-req": "retracted_req",
    "pre-allocated usage": "prealloc_usage", "#optimistic-req": "optimistic_req",
    "#host-receive-req": "host_receive_req",
}
_PREFILL_NAMES = {"#prealloc-req": "bootstrap_req"}
"""0.5.3-0.5.11's prefill line names its bootstrap queue ``#prealloc-req`` (0.4.6-0.5.2:
``#unbootstrapped-req``; 0.5.12 on: ``#bootstrap-req``)."""
COLUMNS = ("line", "time", "rank", "kind", "new_seq", "new_token", "cached_token", "token_usage", "running_req",
           "queue_req", "token", "accept_len", "accept_rate", "graph", "gen_throughput", "input_throughput",
           "mixed", "pending_token", "replay_token", "swa_token", "swa_token_usage", "mamba_usage",
           "bootstrap_req", "inflight_req", "prealloc_req", "transfer_req", "retracted_req", "prealloc_usage",
           "optimistic_req", "host_receive_req", "mamba_num", "gpu_token", "gpu_token_usage", "cpu_token",
           "cpu_token_usage", "cap_len", "block_accept_len", "source")
"""Columns of :func:`parse_server_log`. ``graph`` is 1.0 when the line says the batch ran a
(cuda/cpu/npu) graph, 0.0 when it ran eagerly, NaN when the version does not say.
``mixed`` is 1.0 for 0.3.0's mixed-chunk prefill line (``Prefill batch(mixed #running-req:
N).``), whose running requests decoded in the same batch. The prefill-decode
disaggregation columns are NaN on a colocated server. ``gpu_token``/``cpu_token`` (and their
usages) are a HiSparse server's device buffer and host copy (0.5.23
``pool_stats_observer.py`` ``get_decode_usage_msg_parts``; such a line on a plain pool writes
no ``#token``: :func:`kv_tokens`); ``mamba_num`` a hybrid-SSM pool's used states; ``cap_len``
and ``block_accept_len`` speculative decoding's capped and block accept lengths;
``optimistic_req`` a PD prefill server's optimistic bootstraps, ``host_receive_req`` a PD
decode server's host-receive queue. ``source`` tells apart the servers of one file whose
lines a wrapper names (:func:`_source`; "" for a plain log): a line's rank is
(``source``, ``rank``) (:func:`rank_keys`)."""


def rank_keys(log: pd.DataFrame) -> pd.Series:
    """Each line's rank as one key: its logger prefix's ranks (``rank``) within its server
    (``source``), so the lines of two servers in one file (``docker compose logs`` of a prefill
    and a decode server, both ``TP0``) are two ranks."""
    rank = log["rank"].astype(str) if "rank" in log else pd.Series("", index=log.index)
    if "source" not in log:
        return rank
    return log["source"].fillna("").astype(str) + "\x00" + rank


def kv_tokens(log: pd.DataFrame) -> pd.Series:
    """The KV tokens the running requests hold, per line: ``#token`` (``#full token`` on a
    hybrid pool), else a HiSparse server's ``#cpu token``. SGLang 0.5.23 with HiSparse on a
    plain KV pool writes no ``#token`` (``get_decode_usage_msg_parts`` adds the plain part
    only when no other pool part was written) but ``#gpu token`` and ``#cpu token``: the host
    pool holds a copy of every token of each admitted request (hisparse_coordinator.py
    ``admit_request_into_staging`` backs up the whole prompt, ``_eager_backup_previous_token``
    each decoded token, ``request_finished`` frees them), so it counts the requests' full
    contexts, while the device buffer holds at most ``device_buffer_size`` tokens a request
    (``alloc_device_buffer``: the top-k working set, not the context). A request still being
    staged to the host after its prefill is counted too (a prefill's worth at most). NaN
    where a line says none of them."""
    token = log["token"] if "token" in log else pd.Series(np.nan, index=log.index)
    if "cpu_token" in log:
        token = token.fillna(log["cpu_token"])
    return token


def _source(wrapper: str) -> str:
    """Which server's output a line is, from what a wrapper put before SGLang's logger prefix:
    ``docker compose logs`` of several services (``prefill-1  | ``, ``decode-1   | ``),
    ``kubectl logs -l app=sglang --prefix`` (``[pod/sglang-prefill-7d9f/sglang] ``), journald's
    ``host sglang[4242]: ``, a Ray actor's ``(SGLangWorker pid=7) ``. Times are left out;
    digits are kept (replicas named by a digit alone: ``sglang-1  | ``, ``sglang-2  | ``, a
    StatefulSet's ``[pod/sglang-0/sglang]``), and :func:`server_names` reads them as one ``#``
    where they number lines rather than servers (``grep -n``'s ``123:``, a counter); ``""``
    without a wrapper. Every SGLang server numbers its ranks from ``TP0`` (its logger prefix
    names no server), so the lines of a prefill and a decode server in one file read as one
    rank's: each decode line was timed against the other server's line before it."""
    return " ".join(_WRAPPER_TIME.sub(" ", wrapper).split())


def _digits_as_one(source: str) -> str:
    return re.sub(r"\d+", "#", source)


def server_names(sources: pd.Series) -> pd.Series:
    """Each line's server (:func:`_source`'s text) as the log tells its servers apart: at most
    :data:`MAX_SOURCES` of them and one for every two batch lines. The text as written where it
    takes few enough values (replicas named by a digit alone); else with each run of digits
    that numbers lines read as one ``#`` (``grep -n``'s numbers, a shipper's counter before a
    service's name: every line its own value; :func:`_numbering_digits_as_one`); else ``""``
    (a per-line id: no server's name)."""
    limit = min(MAX_SOURCES, len(sources) / 2)
    if sources.nunique() <= limit:
        return sources
    sources = sources.map(_numbering_digits_as_one(sources, limit))
    return sources if sources.nunique() <= limit else pd.Series("", index=sources.index)


def _numbering_digits_as_one(sources: pd.Series, limit: float) -> dict[str, str]:
    """Each source's text with the runs of digits that number lines read as one ``#``: a run
    (by its place among the digit runs of sources alike but for their digits) that takes more
    than ``limit`` values over the lines, as ``grep -n``'s numbers or a shipper's counter do;
    the runs that take few values (the replica of ``123:sglang-1  | ``) are kept, so the
    replicas of a log read through ``grep -n`` stay apart."""
    parts = {s: re.split(r"(\d+)", s) for s in sources.unique()}
    taken: dict[tuple[str, int], set[str]] = {}
    for s, p in parts.items():
        for j in range(1, len(p), 2):
            taken.setdefault((_digits_as_one(s), j), set()).add(p[j])
    return {s: "".join("#" if j % 2 and len(taken[_digits_as_one(s), j]) > limit else x for j, x in enumerate(p))
            for s, p in parts.items()}


def parse_line(raw: str, line: int) -> dict[str, object] | None:
    """One log line -> a row of :data:`COLUMNS` (missing fields left out), or None when it
    is not a "Prefill batch"/"Decode batch" line."""
    m = _BATCH.search(raw)
    if m is None:
        return None
    head = raw[: m.start()]
    pm = _PREFIX.search(head)
    times = _TIME.findall(head)
    stamp = times[-1].replace(",", ".") if times else None
    if stamp is not None and "-" not in stamp:
        stamp = _TIME_ONLY_DATE + stamp
    kind = m.group("kind").lower()
    gm = None if pm else _GPU_ID.search(head)
    rank = " ".join(pm.group("rank").split()) if pm else f"gpu={gm.group('gpu')}" if gm else ""
    row: dict[str, object] = {"line": line, "time": stamp, "rank": rank, "kind": kind,
                              "source": _source(head[: pm.start()]) if pm else ""}
    rest = m.group("rest")
    if m.group("mixed") is not None:   # 0.3.0: the decoding requests batched with this prefill
        row["mixed"] = 1.0
        rest = f"{m.group('mixed')}, {rest}"
    for fm in _FIELD.finditer(rest):
        key = fm.group("key").strip()
        name = (_PREFILL_NAMES.get(key) if kind == "prefill" else None) or _NAMES.get(key)
        if name is None:
            continue
        v = fm.group("value")
        row[name] = 1.0 if v == "True" else 0.0 if v == "False" else float(v)
    return row


def _json_start(text: str) -> bool:
    """Whether a line starts a JSON object or a list of objects (a benchmark result), not a
    logger's ``[2026-01-01 10:00:00 TP0] ...`` or ``[2026-01-01 10:00:00] INFO: ...`` (SGLang's
    ``configure_logger`` prefix starts every line with "[")."""
    return text[:1] == "{" or re.match(r"\[\s*(?:[{\]]|$)", text) is not None


def parse_server_log(path: str | Path) -> pd.DataFrame:
    """One row per "Prefill batch"/"Decode batch" line of an SGLang server log (0.2.x to
    0.5.23; see the module docstring), streamed line by line (a compressed one, gzip, bzip2,
    xz or a zip of one file, found by its first bytes, decompressed on the way:
    :mod:`sim.compression`).

    Returns:
        DataFrame with :data:`COLUMNS` (``kind`` "prefill"/"decode", ``line`` the line number,
        ``time`` the logged timestamp or NaT, ``rank`` the logger prefix's ranks such as
        "DP1 TP8" or "" ; fields a line lacks are NaN).

    A last batch line without a line end (SGLang's logger ends every record with one) was cut
    short and is left out, with a ``warning:`` line on stderr.

    ``path`` ``-`` is the standard input (read once, kept for the process: :mod:`sim.input_files`).

    Raises:
        ConfigError: missing or unreadable file (a directory, a binary file), or no batch
            line in it (not an SGLang server log, or one logged at a level above INFO).
    """
    p = input_path(path)   # `zcat server.log.gz | ... --server-log -`
    if p.is_dir():   # --server-log logs/: the folder exists, "no such server log" sent the user looking for it
        files = sorted(x.name for x in p.iterdir() if x.is_file())
        here = f"; it holds {', '.join(files[:5])}{', ...' if len(files) > 5 else ''}" if files else " (it is empty)"
        raise ConfigError(str(p), "<file>", str(p), f"a folder, not a server log: name the log file in it{here}")
    if not is_input_file(p):
        raise ConfigError(str(p), "<file>", str(p), "no such server log")
    rows = []
    starts: list[int] = []   # rows logged before each server start-up line that follows batch lines
    launch = Launch()
    report_line = json_line = 0
    signs = LogSigns()   # what the lines say the file is, should it hold no batch line
    try:
        # a rotated, compressed log (server.log.1.gz) found by its first bytes; lines end at
        # "\n" only, as an editor or grep -n counts them: a progress bar's bare "\r" (tqdm
        # while CUDA graphs are captured) is not a line end
        with open_text(p, "an SGLang server log", errors="replace", newline="\n") as f:
            # each logged line once, out of a container runtime's records (Docker json-file,
            # CRI), its pieces joined, holes' NULs and colours dropped: sim/log_lines.py
            for i, raw, ended, wrapped_at in log_lines(f):
                if "server_args=" in raw or "max_total_num_tokens=" in raw:
                    launch.take(raw)
                if rows and (not starts or starts[-1] != len(rows)) and SGLANG_STARTUP.search(raw):
                    starts.append(len(rows))   # the server started again after batch lines
                if not rows:
                    signs.see(i, raw)
                    if not json_line and _json_start(raw.lstrip("\ufeff \t")):   # not a record: log_lines
                        json_line = i   # unwrapped those
                if "batch" not in raw:
                    if not report_line and REPORT_TITLE in raw:
                        report_line = i
                    continue
                if "\x00" in raw:
                    raise ConfigError(f"{p}:{i}", "<line>", "binary data", "an SGLang server log is text")
                row = parse_line(raw, i)
                if row is not None and row["time"] is None and wrapped_at is not None:
                    # no stamp in the text (a JSON formatter's record holds the message alone):
                    # the time its wrapper gave it
                    row["time"] = wrapped_at
                if row is not None and not ended:
                    # SGLang's logger ends every record with a newline (logging's StreamHandler),
                    # so the last line without one was cut (a log copied while the server wrote
                    # it, `head -c`, a full disk): its last field reads short ("#token: 1" of
                    # 19920), and the fit was refused as a damaged line
                    print(f"warning: {p}:{i}: left out: the last line is cut short (no line end: a log copied "
                          "while the server wrote it, or cut by size); its last field may read short",
                          file=sys.stderr)
                    row = None
                if row is not None:
                    bad = next((k for k, v in row.items() if isinstance(v, float) and not np.isfinite(v)), None)
                    if bad is not None:
                        # a figure past a float's range (digits a damaged line ran together):
                        # it reached the fit as an infinite step rate, a SciPy traceback
                        key, text = next(((fm.group("key").strip(), fm.group("value")) for fm in _FIELD.finditer(raw)
                                          if not np.isfinite(float(fm.group("value").replace("True", "1")
                                                                   .replace("False", "0")))), (bad, "inf"))
                        raise ConfigError(f"{p}:{i}", key, clipped(text, 40), "a finite number (SGLang logs each "
                                          "figure with two decimals): the line is damaged")
                    rows.append(row)
    except READ_ERRORS as e:
        raise unreadable(p, e) from None
    if not rows and report_line:
        # bench_serving's (or vLLM's) stdout: the client's side, given where the server's goes
        raise ConfigError(f"{p}:{report_line}", "<line>", REPORT_TITLE, "a benchmark client's printed report (its "
                          "stdout), not an SGLang server log: give it to --from (or validate --measured), which read "
                          "it as the run it reports; --server-log takes the server's own log")
    if not rows and json_line and signs.refusal(str(p), "") is None:
        # bench_serving's --output-file or vLLM's result JSON, given where the server's log goes
        raise ConfigError(f"{p}:{json_line}", "<line>", "a JSON value", "a benchmark result (bench_serving's "
                          "--output-file, vLLM's result JSON), not an SGLang server log: give it to --from (or "
                          "validate --measured); --server-log takes the server's own log")
    if not rows:
        raise signs.refusal(str(p), "an SGLang server log with batch lines") or ConfigError(
            str(p), "<lines>", 0, "no 'Prefill batch' or 'Decode batch' line: not an SGLang server log (or logged "
            "with --log-level above info)")
    rows = drop_repeated_copy(rows, starts, str(p))
    df = pd.DataFrame(rows).reindex(columns=list(COLUMNS))
    df["time"] = pd.to_datetime(df["time"], errors="coerce", format="mixed")
    df["rank"] = df["rank"].fillna("")
    df["source"] = server_names(df["source"].fillna(""))   # replicas by a digit; a per-line number names none
    df = first_pipeline_stage(df, str(p))
    _say_time_going_back(df, str(p))
    df.attrs["server_info"] = launch.server_info()   # start-up lines: analysis/server_launch.py
    return df


def _row_key(row: dict[str, object]) -> tuple[tuple[str, object], ...]:
    """What a batch line logged: every parsed field but its file line (the logger's time and
    rank included), whatever wrapper or prefix it was read through."""
    # a wrapper's digits may number the file's lines (grep -n): not what was logged
    return tuple(sorted((k, _digits_as_one(v) if k == "source" else v) for k, v in row.items() if k != "line"))


def _went_back(rows: list[dict[str, object]], j: int) -> bool:
    """Row ``j`` is stamped before row ``j - 1`` (both stamped, in one form: with a date, or
    0.3.0's time alone)."""
    a, b = rows[j - 1].get("time"), rows[j].get("time")
    return isinstance(a, str) and isinstance(b, str) and len(a) == len(b) and b < a


def drop_repeated_copy(rows: list[dict[str, object]], starts: list[int], path: str) -> list[dict[str, object]]:
    """``rows`` (:func:`parse_line`'s, in file order) less the batch lines that are a copy of
    earlier ones, with one ``warning:`` line; ``rows`` itself when there is none.

    A log joined with itself (``cat server.log server.log``, a log appended twice to one file, a
    snapshot followed by the later, longer copy of the same log) repeats its batch lines: each
    decode step was a sample twice and each prefill batch counted twice in the fit and its
    summary, and the seam read as "logs joined out of order". SGLang's logger writes in time
    order and never logs one batch twice, so a copy is known where the lines go back in time
    (the stamp before the line before it; or, for a log without stamps, 0.2.0-0.2.13, a server
    start-up line, :data:`sim.server_log_kind.SGLANG_STARTUP`, after batch lines: ``starts``
    holds the number of rows logged before each) and from there repeat an earlier run of lines
    field for field, stamps included (:func:`_row_key`), up to the end of the log or up to that
    seam (the first copy whole, the second going on). Such a run is read once. Lines that go
    back without repeating any (logs joined out of order) are kept, and said by
    :func:`_say_time_going_back`."""
    keys = [_row_key(r) for r in rows]
    drop: set[int] = set()
    seams: list[tuple[int, int, int]] = []   # (first row of the copy, first row it repeats, rows)
    first: dict[tuple[tuple[str, object], ...], int] = {}
    for j, k in enumerate(keys):
        if j in drop:
            continue
        i = first.setdefault(k, j)
        if i == j or not (_went_back(rows, j) or j in starts):
            continue
        m = 0
        while j + m < len(rows) and i + m < j and keys[i + m] == keys[j + m]:
            m += 1
        if j + m == len(rows) or i + m == j:   # the copy runs to the end, or repeats up to the seam
            drop.update(range(j, j + m))
            seams.append((j, i, m))
    if not seams:
        return rows
    j, i, m = seams[0]
    more = f" (and {len(seams) - 1} more such copies)" if len(seams) > 1 else ""
    print(f"warning: {path}:{rows[j]['line']}: from here the log repeats itself: batch lines {rows[j]['line']}-"
          f"{rows[j + m - 1]['line']} are lines {rows[i]['line']}-{rows[i + m - 1]['line']} again, the same times and "
          f"figures{more} (a log joined with itself, `cat server.log server.log`, or appended twice): each "
          f"repeated line is read once ({len(drop)} of {len(rows)} batch lines left out)", file=sys.stderr)
    return [r for k, r in enumerate(rows) if k not in drop]


def _say_time_going_back(log: pd.DataFrame, path: str) -> None:
    """One ``warning:`` line at the first batch line logged more than a second before the
    line before it of its rank: SGLang's logger writes in time order, so the log was joined out
    of order (``cat server.log server.log.1``: the rotated, older file after the newer). A
    decode line times the steps since the previous decode line of its rank
    (:func:`decode_step_samples`), so such a join gives one wrong sample at each seam. Time-only
    stamps (0.3.0: dated 1970-01-01) are left out: they wrap at midnight."""
    dated = log[log["time"].notna() & (log["time"] >= pd.Timestamp("1971-01-01"))]
    if len(dated) < 2:
        return
    keys = rank_keys(dated)
    back = dated.groupby(keys, sort=False)["time"].diff() < pd.Timedelta(seconds=-1)
    if back.any():
        i = back.idxmax()
        prev = dated.loc[:i][keys.loc[:i] == keys.at[i]].iloc[-2]
        back_s = (prev["time"] - dated.at[i, "time"]).total_seconds()
        # SGLang stamps local time (utils logging's asctime): a clock set back an hour for
        # daylight saving's end reads as the same jump, with the lines in order
        why = ("the local clock set back an hour (daylight saving's end: SGLang stamps local time), or logs joined "
               "out of order (`cat server.log server.log.1`); if joined, join them oldest first"
               if 3540 <= back_s <= 3660 else
               "logs joined out of order (`cat server.log server.log.1`)? join them oldest first")
        print(f"warning: {path}:{int(dated.at[i, 'line'])}: logged at {dated.at[i, 'time']}, before line "
              f"{int(prev['line'])} ({prev['time']}) of its rank: {why}: each decode line is timed against the line "
              "before it", file=sys.stderr)


def first_pipeline_stage(log: pd.DataFrame, path: str) -> pd.DataFrame:
    """The lines of a pipeline-parallel server's first stage, with a ``warning:`` line.

    With ``--pp-size N`` every stage runs a scheduler of its own, and each stage's first
    attention-TP rank logs the batch lines (0.5.23 observability/metrics_collector.py
    ``is_stats_logging_rank``: attn_tp_rank 0, whatever the PP rank), its logger prefix naming
    the stage (scheduler.py: `` PP<p>`` when pp_size > 1): each batch is logged N times. They
    were read as N times the batches (prefill batches and decode lines doubled, each decode
    step a sample twice). The first stage's lines are kept (the stage that takes new requests);
    the warning says the steps are a pipeline's, which the model does not have (``pp_size``
    is not modelled: sim/sglang_launch_args.py)."""
    stage = log["rank"].astype(str).str.extract(r"\bPP(\d+)\b")[0]
    if stage.dropna().nunique() < 2:
        return log
    n = stage.dropna().nunique()
    first = stage.dropna().astype(int).min()
    keep = stage.isna() | (stage.astype(float) == first)
    print(f"warning: {path}: lines of {n} pipeline-parallel stages (PP ranks in the logger prefix), each logging "
          f"every batch: the PP{first} stage's {int(keep.sum())} of {len(log)} batch lines are read; its steps are "
          "a pipeline's, which the model does not have (pp_size is not modelled): a fit to them prices them as one "
          "server's forwards", file=sys.stderr)
    return log[keep].reset_index(drop=True)


def is_server_log(path: str | Path) -> bool:
    """Whether ``path`` is an SGLang server log rather than a benchmark client's output: its
    first line that says which is a "Prefill batch"/"Decode batch" line (:func:`parse_line`),
    not a line that starts a JSON value (bench_serving's ``--output-file``, vLLM's result
    JSON) or carries the client's printed report title. A JSON line is judged first: a
    result's ``generated_texts`` or ``errors`` may quote a batch line. Streamed, stopping at
    that line (a server's start-up lines come before its first batch line), through
    :func:`sim.log_lines.log_lines` (a log kept as Docker json-file or CRI records is read
    through its records' text); compressed files read as :func:`parse_server_log` reads them.
    A pipe (``-``, the standard input, or ``<(zcat server.log.gz)``) is read whole once and
    kept for the process (:mod:`sim.input_files`), so its reader reads the same bytes (it was
    taken for a result, and a log piped to ``calibrate --from RUNS -`` refused as one). False
    for a missing or unreadable file or a folder: the result readers name those."""
    p = input_path(path)
    if p.is_dir() or not is_input_file(p):
        return False
    try:
        with open_text(p, "a benchmark result or an SGLang server log", errors="replace", newline="\n") as f:
            for _, raw, _, _ in log_lines(f):
                text = raw.lstrip(" \t")
                if _json_start(text):
                    return False
                if "batch" in text and parse_line(text, 0) is not None:
                    return True
                if REPORT_TITLE in text:
                    return False
    except (ConfigError, *READ_ERRORS):
        return False
    return False


def printed_report_line(path: str | Path) -> int | None:
    """The line of the first bench_serving (or vLLM) printed report title in ``path``, streamed
    through :func:`sim.log_lines.log_lines`; None when there is none or the file cannot be
    read. A server log holding one is a log of the server and the benchmark client together
    (``docker compose logs`` of both services): its batch lines are the server's, its reports
    the runs (sim/bench_serving.py ``printed_reports``)."""
    p = input_path(path)
    try:
        with open_text(p, "an SGLang server log", errors="replace", newline="\n") as f:
            return next((i for i, text, *_ in log_lines(f) if REPORT_TITLE in text), None)
    except (ConfigError, *READ_ERRORS):
        return None


def decode_step_samples(log: pd.DataFrame) -> pd.DataFrame:
    """Decode lines that time pure decode steps: the previous line of the same rank was a decode line
    with the same ``#running-req``, the queue is empty, throughput > 0, and the line states its KV
    tokens (:func:`kv_tokens`: ``#token``, ``#full token``, or a HiSparse server's ``#cpu token``).

    Why the same ``#running-req`` at both ends: SGLang 0.5.23 logs a decode line every
    ``decode_log_interval`` (40) forwards with ``gen throughput`` = the tokens of all those
    forwards over their time, but ``#running-req`` = the batch at the last of them
    (scheduler_components/metrics_reporter.py ``report_decode_stats``: ``len(batch.reqs)``).
    With no prefill line between two decode lines (every prefill batch logs one:
    ``report_prefill_stats``) nobody joined, so the batch only shrank (finishes, retractions);
    a window whose requests finished part-way ran larger batches than the line says, and its
    step read short (by a fifth at 8 req/s and 128 output tokens). Equal counts at both ends
    mean it ran that batch throughout. Columns ``running_req``, ``context`` (mean KV tokens
    per request = #token / running), ``tokens_per_step`` (running x accept len, or running
    without speculative decoding), ``step_s`` (= tokens_per_step / gen throughput). In a
    speculative server's log a line without a positive accept length is left out."""
    by_rank = log.groupby(rank_keys(log), sort=False)
    prev_decode = by_rank["kind"].shift(1).eq("decode")
    same_batch = by_rank["running_req"].shift(1).eq(log["running_req"])
    token = kv_tokens(log)
    d = log[(log["kind"] == "decode") & prev_decode & same_batch & (log["queue_req"].fillna(0) == 0)
            & (log["gen_throughput"] > 0) & (log["running_req"] > 0) & token.notna()].copy()
    d["token"] = token[d.index]
    if (log.loc[log["kind"] == "decode", "accept_len"] > 0).any():
        # a speculative server's log: a line without a positive accept length (NaN, 0.00: a
        # damaged line; 0.5.23's metrics_reporter divides accepted tokens by forwards) cannot
        # say its tokens per step, so it times nothing (it was priced as 1 token per request)
        d = d[d["accept_len"] > 0]
        acc = d["accept_len"]
    else:
        acc = 1.0
    d["context"] = d["token"] / d["running_req"]
    d["tokens_per_step"] = d["running_req"] * acc
    d["step_s"] = d["tokens_per_step"] / d["gen_throughput"]
    return d[["line", "running_req", "context", "tokens_per_step", "step_s"]].reset_index(drop=True)


def replica_ranks(ranks: pd.Series) -> bool:
    """The logger prefixes of several DP ranks' lines name independent replicas: every DP
    rank's lines carry one TP index (or none: TP 1), as SGLang numbers each replica's TP group
    from 0 (0.5.23 data_parallel_controller.py ``launch_tensor_parallel_group``; the prefix from
    scheduler.py's logger setup, ``DP<d>`` then ``TP<t>``); DP attention's ranks are one TP
    group, so its DP ranks log different TP indices (``DP0 TP0``, ``DP1 TP4``)."""
    tp = ranks.astype(str).str.extract(r"\bTP(\d+)\b")[0]
    return bool(tp.isna().all() or (tp.notna().all() and tp.nunique() == 1))


def decode_dp_ranks(log: pd.DataFrame) -> pd.Series:
    """The DP rank of each decode line whose logger prefix names one (``DP<d>``, SGLang's
    prefix when dp_size > 1: srt/utils.py ``configure_logger`` with the scheduler's prefix),
    as strings indexed as ``log``; empty for a log without prefixes."""
    if "rank" not in log:
        return pd.Series(dtype=object)
    decode = log[log["kind"] == "decode"]
    return decode["rank"].astype(str).str.extract(r"\bDP(\d+)\b")[0].dropna()


def dp_attention_ranks(log: pd.DataFrame) -> int:
    """How many DP-attention ranks logged the decode lines (``DP<d> TP<t>`` prefixes of several
    DP ranks in one TP group); 1 for a log of one rank or of data-parallel replicas
    (:func:`replica_ranks`), whose every line is a whole server's batch. Under DP attention a
    line's ``#running-req`` is its rank's, and SGLang caps each rank at
    ``max_running_requests // dp_size`` (0.5.23 mem_cache/kv_cache_configurator.py
    ``resolve_max_num_reqs``, which sizes each DP rank; the scheduler's startup
    line, scheduler.py ``init_memory_pool_and_cache``, logs ``max_running_requests=`` of that
    per-rank figure)."""
    dp = decode_dp_ranks(log)
    if dp.nunique() < 2 or replica_ranks(log.loc[dp.index, "rank"]):
        return 1
    return int(dp.nunique())


def prefill_summary(log: pd.DataFrame) -> dict[str, float]:
    """Batch composition of the prefill lines: count, mean/max new sequences and new tokens
    per prefill batch, cached-token share; and over every line: max running and queued
    requests, the decode line count and the mean accept length (NaN where the log does not
    say). With DP attention (:func:`dp_attention_ranks` > 1) the peaks are one rank's, and
    ``dp_ranks`` holds the rank count. A decode server's log (prefill-decode disaggregation) has no prefill line: its
    prefill figures are 0 batches and the rest is still reported."""
    p = log[log["kind"] == "prefill"]
    decode = log["kind"] == "decode"
    out: dict[str, float] = {"prefill_batches": int(len(p))}
    if not p.empty:
        new = p["new_token"].fillna(0)
        cached = p["cached_token"].fillna(0)
        total = float(new.sum() + cached.sum())
        out.update(mean_new_seq=float(p["new_seq"].mean()), mean_new_token=float(new.mean()),
                   max_new_token=float(new.max()), cached_share=float(cached.sum() / total) if total else float("nan"))
    accept = log.loc[decode, "accept_len"]
    accept = accept[accept > 0]   # a 0.00 or NaN one is a damaged line (decode_step_samples)
    n_dp = dp_attention_ranks(log)
    if n_dp > 1:   # each line is one rank's batch: the peak is a rank's, said so (format_log_summary)
        out["dp_ranks"] = n_dp
    out.update(max_running_req=float(log["running_req"].max()), max_queue_req=float(log["queue_req"].max()),
               decode_lines=int(decode.sum()),
               mean_accept_len=float(np.nanmean(accept)) if accept.notna().any() else float("nan"))
    return out


LOG_SUMMARY_LINES: tuple[tuple[str, str, float, str], ...] = (
    ("prefill_batches", "Prefill batches:", 1.0, "{:.0f}"),
    ("mean_new_seq", "Mean new seqs per prefill batch:", 1.0, "{:.2f}"),
    ("mean_new_token", "Mean new tokens per prefill batch:", 1.0, "{:.1f}"),
    ("max_new_token", "Max new tokens per prefill batch:", 1.0, "{:.0f}"),
    ("cached_share", "Cached prefill tokens (%):", 100.0, "{:.1f}"),
    ("max_running_req", "Max running requests:", 1.0, "{:.0f}"),
    ("max_queue_req", "Max queued requests:", 1.0, "{:.0f}"),
    ("decode_lines", "Decode lines:", 1.0, "{:.0f}"),
    ("mean_accept_len", "Mean accept length (tokens/step):", 1.0, "{:.2f}"),
)
"""(key of :func:`prefill_summary`, label, scale, format) of each line :func:`format_log_summary` prints."""


def format_log_summary(summary: dict[str, float], decode_samples: int) -> list[str]:
    """:func:`prefill_summary` as readable lines, a label then a figure, laid out as
    bench_serving prints its result (``{:<40} {:<10}``): counts, tokens, requests, the cached
    share in % and the accept length in tokens per decode step; a figure the log does not give
    (no prefill line, no accept length) reads ``n/a``, never NaN. The last line is the number
    of pure-decode samples (:func:`decode_step_samples`) the fit takes. A DP-attention log
    (``dp_ranks`` in the summary) has its running and queued peaks labelled per DP rank (each
    line is one rank's batch, :func:`dp_attention_ranks`) and a line with the rank count."""
    lines = []
    per_rank = summary.get("dp_ranks", 1) > 1
    if per_rank:
        lines.append(f"{'DP-attention ranks:':<40} {summary['dp_ranks']:.0f}")
    for key, label, scale, fmt in LOG_SUMMARY_LINES:
        if per_rank and key in ("max_running_req", "max_queue_req"):
            label = label.replace(":", " (per DP rank):")
        v = summary.get(key)
        text = "n/a" if v is None or not np.isfinite(v) else fmt.format(v * scale)
        lines.append(f"{label:<40} {text}")
    lines.append(f"{'Pure-decode samples:':<40} {decode_samples}")
    return lines
