"""The lines of a server log as its logger wrote them, out of the wrappers a log is kept in.

A server's log reaches a user as the text its logger wrote, or wrapped by what ran it:

- Docker's ``json-file`` driver (the file ``docker inspect -f '{{.LogPath}}'`` names,
  ``<id>-json.log``): one JSON record a line, ``{"log": "<text>\\n", "stream": "stderr",
  "time": "<RFC3339>"}``. A line longer than 16 KiB is written as several records, only the
  last one's text ending in ``\\n`` (moby ``daemon/logger/copier.go``: its buffer is 16 KiB, and a
  piece that fills it is sent as a partial message). JSON loggers (``python-json-logger``,
  Vector, Fluent Bit) write ``{"message": ...}`` or ``{"msg": ...}`` records, one a line.
- The CRI format (containerd, CRI-O: Kubernetes' ``/var/log/pods/<pod>/<container>/0.log``):
  ``<RFC3339Nano time> <stdout|stderr> <P|F> <text>``, a line longer than containerd's
  ``max_container_log_line_size`` (16 KiB) written as ``P`` (partial) pieces ended by an ``F``
  (full) one (kubelet ``pkg/kubelet/kuberuntime/logs/logs.go`` ``parseCRILog`` joins them so).
- systemd's journal (a server run as a unit, read back with ``journalctl -u sglang``): journald
  cuts a line longer than its ``LineMax=`` (journald.conf, default 48K = 49152 bytes) into
  records of exactly that many bytes, the last one shorter (systemd ``journald-stream.c``
  ``stdout_stream_scan``, each cut record marked ``_LINE_BREAK=line-max``). ``journalctl``'s
  short formats print each record as ``<time> <host> <identifier>[<pid>]: <text>`` (``short``
  ``Mar 02 08:00:00``, ``short-precise``, ``short-iso`` and ``short-iso-precise`` RFC 3339,
  ``short-full`` ``Mon 2026-03-02 08:00:00 UTC``, ``short-unix``, ``short-monotonic``), ``-o cat``
  the text alone, ``-o json`` one object a record with the text under ``MESSAGE`` (an array of
  byte values where it is not UTF-8; null where it is past 4096 bytes, unless ``--all``). A
  record of exactly :data:`JOURNALD_LINE_MAX` bytes is a piece: it is joined with the next
  record of the same process (the same host, identifier and pid; the next line, under ``-o
  cat``), and ``-o json``'s ``_LINE_BREAK`` says it outright. 0.5.23's ``server_args=`` line is
  some 18K; a server with long arguments (a JSON ``--json-model-override-args``, a long graph
  size list) or a journal with a smaller ``LineMax=`` logs it past the limit, and its second
  piece was not read: the arguments after the cut were lost, and the last one before it read
  cut (``chunked_prefill_size`` 81 of 8192).
- A JSON logging formatter's records (``python-json-logger``, a shipper's re-encoding): the
  logger's message alone under ``message``/``msg``/``log``, its time in a field of its own
  (``asctime``, ``time``, ``timestamp``, ``@timestamp``, ``ts``, ``created``: ISO 8601, or
  epoch seconds, ms, us or ns), not in the text: :attr:`LogLine.time` carries it.
- A terminal's colours: ANSI SGR escapes (``ESC[32m`` ... ``ESC[0m``) left in a log captured
  with ``script`` or a coloured formatter.

:func:`log_lines` gives each logged line once, its pieces joined, numbered by the file line
its first piece is on (as an editor or ``grep -n`` counts them), with whether it ended (the
logger ends every record with a line end: a text without one was cut). A line that is neither
wrapper (a plain log, a benchmark's JSON result) is given as it is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import NamedTuple

from specsched.sim.server_log_kind import ANSI

LOG_TEXT_KEYS = ("log", "message", "msg", "MESSAGE")
"""Keys of a JSON log record's text: Docker's json-file driver's ``log``, the ``message``/
``msg`` of JSON logging formatters and log shippers, and journald's ``MESSAGE``
(``journalctl -o json``)."""
TIME_KEYS = ("asctime", "time", "timestamp", "@timestamp", "ts", "created", "__REALTIME_TIMESTAMP")
"""Keys of a JSON log record's time, the first one a record has read: logging's ``asctime``
(``2026-03-02 08:01:00,004``) and ``created`` (epoch seconds) as JSON formatters write them,
Docker's ``time``, ``timestamp``/``@timestamp`` of shippers (Logstash, Vector, Fluent Bit),
structured loggers' ``ts``, journald's ``__REALTIME_TIMESTAMP`` (epoch us)."""
JOURNALD_LINE_MAX = 48 * 1024
"""journald's default ``LineMax=`` (journald.conf): a longer line is stored as records of this
many bytes, the last one shorter (module docstring)."""
_JOURNAL = re.compile(
    r"^(?P<head>(?:[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}(?:\.\d+)?"              # short, short-precise
    r"|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"     # short-iso(-precise)
    r"|[A-Z][a-z]{2} \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)? \S+"           # short-full
    r"|\[\s*\d+\.\d+\]|\d{9,}\.\d+)"                                          # short-monotonic, short-unix
    r" (?P<host>\S+) (?P<ident>[^\s\[\]]+?)(?:\[(?P<pid>\d+)\])?: )(?P<text>.*)$", re.S)
"""A record as ``journalctl``'s short formats print it (module docstring): time, host,
identifier, pid, text."""
_MAX_RECORD = 1_000_000
"""A JSON line this long or longer is not parsed as a log record (a benchmark result with
per-request details is; no log record is that long: Docker's are 16 KiB of text at most)."""
_CRI = re.compile(r"^(?P<time>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})) "
                  r"(?P<stream>stdout|stderr) (?P<tag>[PF])(?::\S*)? ?(?P<text>.*)$", re.S)
"""A CRI log line (kubelet ``parseCRILog``: time, stream, tag, text, single spaces; the tag may
carry ``:``-separated extra flags)."""


class LogLine(NamedTuple):
    """One logged line: ``line`` the file line its (first piece's) text is on, ``text`` the
    logger's text without its line end, ``ended`` whether it had one (False: cut short),
    ``time`` the time its wrapper gave it (a JSON record's :data:`TIME_KEYS` field, a CRI
    line's time) as ``YYYY-MM-DD HH:MM:SS.ffffff`` (UTC where the wrapper said a zone or an epoch
    time), None without one: a JSON formatter's record has its time there, not in the text."""

    line: int
    text: str
    ended: bool
    time: str | None = None


def wrapper_time(value: object) -> str | None:
    """A wrapper's time (:data:`TIME_KEYS`) as ``YYYY-MM-DD HH:MM:SS.ffffff``: ISO 8601 (a comma
    before the fraction as logging's ``asctime`` writes it; a zone or ``Z`` put on UTC), or an
    epoch number (a number or its text; seconds, or ms/us/ns told by its size); None for anything
    else, a number before 1973 among them (a duration or a counter, not a time)."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = float(text)
        except ValueError:
            try:
                t = datetime.fromisoformat(re.sub(r"(:\d{2}),(\d)", r"\1.\2", text, count=1))
            except ValueError:
                return None
            if t.tzinfo is not None:
                t = t.astimezone(UTC).replace(tzinfo=None)
            return t.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, bool) or not isinstance(value, int | float) or not 1e8 <= value < 1e20:
        return None
    seconds = value / next((d for lim, d in ((1e17, 1e9), (1e14, 1e6), (1e11, 1e3)) if value >= lim), 1)
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    except (OverflowError, OSError, ValueError):
        return None


def _record_time(obj: dict) -> str | None:
    return next((t for k in TIME_KEYS if k in obj and (t := wrapper_time(obj[k])) is not None), None)


def json_record_text(raw: str) -> tuple[str, str | None, str | None] | None:
    """``(text, stream, time)`` of a JSON log record (an object holding a string under one of
    :data:`LOG_TEXT_KEYS`), or None for any other line (a benchmark's JSON result among them).
    ``stream`` is a Docker record's ``stream`` (its text may be a piece of a line), None for a
    formatter's record (a whole line); ``time`` the record's own (:func:`wrapper_time`)."""
    s = raw.lstrip("\ufeff \t\x00")
    if not s.startswith("{") or len(s) >= _MAX_RECORD:
        return None
    try:
        obj = json.loads(s)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    if "MESSAGE" in obj and ("__CURSOR" in obj or "_LINE_BREAK" in obj):   # journalctl -o json
        text = obj.get("MESSAGE")
        if isinstance(text, list) and all(isinstance(b, int) and 0 <= b < 256 for b in text):
            text = bytes(text).decode("utf-8", "replace")   # a text that is not UTF-8: its bytes
        # a record is a whole line, but a piece of one cut at LineMax; a text past 4096 bytes
        # without --all is null: nothing to read
        whole = obj.get("_LINE_BREAK") != "line-max"
        where = f"journal:{obj.get('_HOSTNAME')}:{obj.get('SYSLOG_IDENTIFIER')}:{obj.get('_PID')}"
        return (text if isinstance(text, str) else "") + ("\n" if whole else ""), where, _record_time(obj)
    key = next((k for k in LOG_TEXT_KEYS if isinstance(obj.get(k), str)), None)
    if key is None:
        return None
    stream = obj.get("stream")
    return obj[key], (stream if isinstance(stream, str) else "") if key == "log" else None, _record_time(obj)


def _clean(text: str) -> str:
    return ANSI.sub("", text) if "\x1b" in text else text


def log_lines(f: Iterable[str]) -> Iterator[LogLine]:
    """The logged lines of the text lines ``f`` (a file opened with ``newline="\\n"``), out of
    the wrappers of the module docstring, pieces of one line joined (per stream: stdout's and
    stderr's may interleave), colour escapes dropped. NULs before or after a line's text are
    dropped too: a hole, not text (logrotate's ``copytruncate`` of a log written through a
    shell's ``>`` leaves the writer at its old offset, so the next line follows a run of NULs;
    a crash can leave NULs after the last line). A piece whose line never ends (the file
    stops) is given at the end, cut (``ended`` False)."""
    # (wrapper, stream) -> first line, pieces, the first piece's time
    pending: dict[tuple[str, ...], tuple[int, list[str], str | None]] = {}
    for i, raw in enumerate(f, start=1):
        ended = raw.endswith("\n")
        body = (raw[:-1] if ended else raw).removesuffix("\r").strip("\x00").lstrip("\ufeff")
        rec = json_record_text(body) if "{" in body[:4] else None
        when = None
        if rec is not None:
            text, stream, when = rec
            if stream is None:   # a formatter's record: a whole line
                yield LogLine(i, _clean(text.removesuffix("\n")), ended, when)
                continue
            key = ("json", stream)
            whole = text.endswith("\n")
            text = text.removesuffix("\n").removesuffix("\r")
        else:
            m = _CRI.match(body)
            if m is not None:
                key = ("cri", m["stream"])
                whole = m["tag"] == "F"
                text = m["text"]
                when = wrapper_time(m["time"])
            else:
                # a journal record (journalctl's short formats, or -o cat's bare text) cut at
                # journald's LineMax: only a line that long, or one after such a piece, is looked at
                j = key = None
                if len(body) >= JOURNALD_LINE_MAX // 4 or any(k[0] == "journal" for k in pending):
                    j = _JOURNAL.match(body)
                    key = ("journal", *((j["host"], j["ident"], j["pid"] or "") if j is not None else ("", "", "")))
                    text = j["text"] if j is not None else body
                    cut = len(text.encode("utf-8", "replace")) == JOURNALD_LINE_MAX
                if key is None or (key not in pending and not cut):   # a whole line, as it is (its prefix kept)
                    yield LogLine(i, _clean(body), ended)
                    continue
                whole = not cut
                if key not in pending and j is not None:
                    text = j["head"] + text   # the joined line keeps its first record's prefix
        first, pieces, when = pending.pop(key, (i, [], when))
        pieces.append(text)
        if whole or not ended:   # the line's last piece, or the file stops in it
            yield LogLine(first, _clean("".join(pieces)), whole and ended, when)
        else:   # a piece: the line goes on in the stream's next record
            pending[key] = (first, pieces, when)
    for first, pieces, when in sorted(pending.values(), key=lambda v: v[0]):
        yield LogLine(first, _clean("".join(pieces)), False, when)


_STAMPED = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2}) ")
"""The time ``docker logs -t`` and ``kubectl logs --timestamps`` put before each line (RFC 3339)."""


def unwrapped_text(text: str) -> str | None:
    """``text`` as its program printed it, for a reader of printed output (bench_serving's
    report: sim/bench_serving.py), when it is kept in a container runtime's wrapper: Docker
    json-file records or CRI lines (:func:`log_lines`), or lines behind ``docker logs -t`` /
    ``kubectl logs --timestamps``'s time. Each file line keeps its number (a line's later
    pieces become blank lines). None when the first non-blank line has no such wrapper (the text
    is read as it is)."""
    lines = text.split("\n")
    first = next((x for x in lines if x.strip()), "")
    stamped = _STAMPED.match(first) is not None and _CRI.match(first) is None
    if not stamped and _CRI.match(first.rstrip("\r")) is None and (json_record_text(first) or ("", None, None))[1] is None:
        return None
    out = [""] * len(lines)
    for ll in log_lines(x + "\n" for x in lines):
        out[ll.line - 1] = _STAMPED.sub("", ll.text, count=1) if stamped else ll.text
    return "\n".join(out)
