"""Request traces: arrival time, prompt and output length per request, streamed once.

A trace is a CSV (header row) or JSONL file, one request per row in arrival order, with
the columns named in the scenario (:class:`sim.workload_config.TraceConfig`). Public production
traces come in two layouts this reads as they are:

- Azure LLM inference traces (AzurePublicDataset, ``AzureLLMInferenceTrace_*.csv``):
  ``TIMESTAMP`` (date and time, e.g. ``2023-11-16 18:15:46.6805900``), ``ContextTokens``,
  ``GeneratedTokens``.
- Mooncake traces (FAST'25 release, JSONL): ``timestamp`` (ms), ``input_length``,
  ``output_length``, ``hash_ids`` (ids of the prompt's 512-token blocks; equal leading ids
  = a shared prompt prefix). They become the requests' prompt token ids
  (:mod:`sim.trace_prefix`), so the radix prefix cache reuses what the trace shares.

Replay follows SGLang bench_serving's trace mode (benchmark/serving.py ``get_request``
with ``use_trace_timestamps``): a request is sent at (timestamp - first timestamp) x
``time_scale``. Unlike bench_serving, which sorts the rows, an unsorted trace is refused:
a reordered file is more often a broken export than an intent; ``sort: true`` replays it in
time order (a log written as requests finish, not as they arrive).

The file is read once, in blocks (CSV: pandas in chunks of only the three columns; JSONL:
line by line), and reading stops at the request limit; only four numeric arrays are kept
(32 bytes a request: arrival, lengths and the row's line), plus the block ids a prompt needs (ceil(input / block_size) of
them, 8 bytes each) when the trace has them. Every bad row raises :class:`ConfigError` naming the file, line,
column and value. Nothing is downloaded: the path is a local file; a compressed one
(``trace.jsonl.gz``, ``.bz2``, ``.xz``, a ``.zip`` of one file; found by its first bytes:
:mod:`sim.compression`) is decompressed while it streams.
"""

from __future__ import annotations

import json
import math
import re
import sys
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd
from specsched.sim import compression
from specsched.sim.bundled import scenario_data_path
from specsched.sim.errors import ConfigError, clipped
from specsched.sim.input_files import (
    READ_ERRORS,
    file_key,
    is_input_file,
    json_value,
    open_text,
    unreadable,
)
from specsched.sim.served import EMPTY_PROMPT
from specsched.sim.trace_prefix import MOONCAKE_BLOCK_SIZE, BlockTokens, prefix_reuse
from specsched.sim.workload_config import MAX_ARRIVAL_SPAN_S, TraceConfig

CSV_BLOCK_ROWS = 200_000
JSONL_BLOCK_ROWS = 8_192   # rows held as Python objects before they become arrays
_UNIT_S = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
MAX_TIMESTAMP_S = 1e11
"""A first timestamp at or past this many seconds (in the trace's time unit) is refused: as an
epoch time it is the year 5138, as an offset from a trace's start 3,000 years. Epoch times
written in a finer unit than the one read (epoch ms under the default s: 1.7e12) reach it,
where the gaps would replay 1000 times wider without a word (the span check below
:data:`MAX_ARRIVAL_SPAN_S` passes a day's trace so stretched)."""
_EPOCH_S = (3.2e8, 4.1e9)   # 1980 to 2100: where an epoch time in the right unit lands
MAX_TOKENS = 2.0**62
"""A length at or past this is refused: held as int64, a larger one (1e300 in a JSON row)
became garbage, silently."""


@dataclass(frozen=True)
class Trace:
    """A loaded trace: ``arrival_s`` (seconds from the first request, non-decreasing),
    ``input_len`` (tokens, >= 0: an empty prompt is one the server rejects, sim/served.py
    ``server_rejections``) and ``output_len`` (tokens, >= 0: 0 is served prefill only,
    :func:`sim.workload.scheduler_request`); int/float arrays of shape (n,);
    ``lines``: each request's 1-based line in the file (int64 (n,); None for a Trace built
    by hand), so that a row the server can never run is named by its line (sim/limits.py).
    With block ids (Mooncake's ``hash_ids``): ``hash_ids`` (int64 (m,), every request's ids
    concatenated, each cut to the blocks its prompt fills) and ``hash_offsets`` (int64
    (n + 1,): request i's ids are ``hash_ids[hash_offsets[i]:hash_offsets[i + 1]]``); both
    None when the trace has none."""

    arrival_s: np.ndarray
    input_len: np.ndarray
    output_len: np.ndarray
    hash_ids: np.ndarray | None = None
    hash_offsets: np.ndarray | None = None
    block_size: int = MOONCAKE_BLOCK_SIZE
    lines: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.arrival_s)

    def prompt_tokens(self, i: int) -> BlockTokens | None:
        """Request i's prompt token ids built from its block ids (:class:`BlockTokens`),
        or None when the trace has no block ids (its prompts share nothing)."""
        if self.hash_ids is None or self.hash_offsets is None:
            return None
        return BlockTokens(self.hash_ids, int(self.input_len[i]), i, self.block_size,
                           int(self.hash_offsets[i]), int(self.hash_offsets[i + 1]))

    def prefix_reuse(self) -> float | None:
        """The trace's own prefix reuse (:func:`sim.trace_prefix.prefix_reuse`), None without
        block ids."""
        if self.hash_ids is None or self.hash_offsets is None:
            return None
        return prefix_reuse(self.input_len, self.hash_ids, self.hash_offsets, self.block_size)


def _format(cfg: TraceConfig, p: Path) -> str:
    if cfg.format != "auto":
        return cfg.format
    suffixes = [x.lower() for x in p.suffixes]
    if suffixes and suffixes[-1] in compression.SUFFIXES:   # trace.jsonl.gz: the suffix before it
        suffixes.pop()
    if suffixes and suffixes[-1] in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    if suffixes and suffixes[-1] in (".csv", ".tsv", ".txt"):
        return "csv"
    # no telling name (a pipe: <(zcat trace.jsonl.gz) is /dev/fd/63): a JSON line starts with "{"
    try:
        with open_text(p, TRACE_FILE, encoding="utf-8-sig", errors="replace") as f:
            head = f.read(4096).lstrip()
    except READ_ERRORS as e:
        # a damaged or cut archive whose name does not say what it holds (BurstGPT.zip, trace.gz):
        # its first bytes are read here, before the reader's own refusal; it was a traceback
        raise unreadable(p, e) from None
    return "jsonl" if head.startswith("{") else "csv"


TRACE_FILE = "a request trace (CSV or JSONL)"
"""What a trace file holds, as the refusal of an empty one says it."""


class _Checker:
    """Validates rows block by block (times finite, >= 0, non-decreasing; lengths integer
    >= 0) and collects them."""

    def __init__(self, where: str, cols: tuple[str, str, str], ordered: bool = True) -> None:
        self.where, self.cols, self.ordered = where, cols, ordered
        self.t: list[np.ndarray] = []
        self.i: list[np.ndarray] = []
        self.o: list[np.ndarray] = []
        self.lines: list[np.ndarray] = []
        self.last = -math.inf
        self.last_raw: object = None
        self.last_line = 0
        self.first_raw: object = None
        self.first_line = 0
        self.max_t, self.max_raw, self.max_line = -math.inf, None, 0   # the latest row (shown when the span is too long)
        self.n = 0
        self.hashes = array("q")          # block ids of every row so far, concatenated
        self.offsets = array("q", [0])    # where each row's ids end
        self.any_hashes = False
        self.unread_hash_ids = False      # the rows have Mooncake's hash_ids, no block-id column is read
        self.dates = _DateOrder(self._shift)   # d/m/y or m/d/y dates: the order the column has shown so far
        self.unended: str | None = None   # the read last row, as a warning shows it, when it has no line end

    def add_hashes(self, v: object, input_len: object, line: int, col: str, block_size: int) -> None:
        """One row's block ids (a JSON list, or a CSV cell of ids; None/absent = none),
        cut to the blocks its prompt fills."""
        if v is None:
            self.offsets.append(len(self.hashes))
            return
        if isinstance(v, str):
            t = v.strip().strip("[]").strip()
            try:
                v = [int(x) for x in re.split(r"[\s,;]+", t)] if t else []
            except ValueError:
                self._fail(line, col, clipped(v), "must be a list of integers >= 0 (prompt block ids)")
        if not isinstance(v, list) or not all(type(x) is int and x >= 0 for x in v):
            shown = clipped(v) if isinstance(v, list) else v
            self._fail(line, col, shown, "must be a list of integers >= 0 (prompt block ids)")
        keep = -(-input_len // block_size) if type(input_len) is int and input_len > 0 else len(v)
        try:
            self.hashes.extend(v[:keep])
        except OverflowError:
            self._fail(line, col, max(v), "block ids must be < 2^63")
        self.offsets.append(len(self.hashes))
        self.any_hashes = True

    def _fail(self, line: int, col: str, value: object, allowed: str) -> None:
        raise ConfigError(f"{self.where}:{line}", col, value, allowed)

    def _shift(self, seconds: float) -> None:
        """Move every time read so far by ``seconds`` (:class:`_DateOrder`: the rows of one date
        read month first before a later row told the column is day first)."""
        for t in self.t:
            t += seconds
        self.last += seconds
        self.max_t += seconds

    def add(self, t: np.ndarray, ins: np.ndarray, outs: np.ndarray, lines: np.ndarray, raw: list | None = None) -> None:
        """One block of rows; ``raw`` = the timestamp cells as written (shown in errors)."""
        ts, ic, oc = self.cols
        shown = raw if raw is not None else t.tolist()
        bad = ~np.isfinite(t) | (t < 0)
        if bad.any():
            k = int(np.argmax(bad))
            self._fail(int(lines[k]), ts, shown[k], "timestamps must be finite and >= 0")
        prev = np.r_[self.last, t[:-1]]
        bad = t < prev
        if bad.any() and self.ordered:
            k = int(np.argmax(bad))
            before = shown[k - 1] if k > 0 else self.last_raw
            self._fail(int(lines[k]), ts, shown[k], f"timestamps must not decrease (previous row: {before}); "
                       "workload.trace.sort: true replays the rows in time order")
        for name, v, lo in ((ic, ins, 0), (oc, outs, 0)):
            bad = ~np.isfinite(v) | (v < lo) | (v != np.floor(v)) | (v >= MAX_TOKENS)
            if bad.any():
                k = int(np.argmax(bad))
                self._fail(int(lines[k]), name, _shown(v[k].item()), f"must be an integer >= {lo} and < 2^62")
        if len(t) and self.n == 0:
            self.first_raw, self.first_line = shown[0], int(lines[0])
        if len(t):
            self.last, self.last_raw, self.last_line = float(t[-1]), shown[-1], int(lines[-1])
            k = int(np.argmax(t))
            if t[k] > self.max_t:
                self.max_t, self.max_raw, self.max_line = float(t[k]), shown[k], int(lines[k])
        self.t.append(t)
        self.i.append(ins.astype(np.int64))
        self.o.append(outs.astype(np.int64))
        self.lines.append(np.asarray(lines, dtype=np.int64))
        self.n += len(t)


def _no_bools(values: pd.Series | list, where: str, col: str, lines: np.ndarray) -> None:
    """A JSON true/false is no number (pandas read it as 1/0: a length of 1, a time of 1 s)."""
    if isinstance(values, list):
        k = next((j for j, v in enumerate(values) if isinstance(v, bool)), None)
        if k is not None:
            raise ConfigError(f"{where}:{int(lines[k])}", col, str(values[k]).lower(), "not a number")


_NUMERIC_DATE = re.compile(r"^\s*(\d{1,2})([/.\-])(\d{1,2})\2(\d{4}|\d{2})(?=$|[\sT])")
"""A date with the year last and two numbers before it (``10/05/2024 00:00:01``,
``5/10/2024 0:00``, ``10.05.2024``): a spreadsheet's re-export of a trace in its locale's short
form (en_US month first; en_GB, de_DE, fr_FR day first). The file does not say which."""
_ISO_DATE = "write the dates as YYYY-MM-DD (ISO 8601, as the Azure traces have them)"
_DATE_SEPS = np.array([ord(c) for c in "/.-"], dtype=np.uint32)


class _DateOrder:
    """The day/month order of a trace column's :data:`_NUMERIC_DATE` dates, told by a field
    past 12 and held from block to block (the file is read in blocks); until one tells it,
    the first date seen (its order does not matter while every row has that date)."""

    def __init__(self, shift: Callable[[float], None] | None = None) -> None:
        self.day_first: bool | None = None
        self.told_by: tuple[int, object] = (0, None)   # line and cell that told the order
        self.first: tuple[tuple[str, str, str], int, object] | None = None   # (d1, d2, year), line, cell
        self.read_month_first = False   # rows of the one date so far were read month first (pandas')
        self.shift = shift              # moves the times read so far, once the order turns out day first

    def iso(self, values: list, where: str, col: str, lines: np.ndarray) -> list:
        """``values`` with each numeric date rewritten as ISO (year-month-day) in the column's
        order; other cells as they are.

        Raises:
            ConfigError: the column has dates day first and month first, or dates of more
                than one day whose fields are all 12 or less (either order reads them).
        """
        if not values:
            return values
        # a numeric date has its first separator at the cell's second or third character (an ISO
        # one at the fifth): found in C, so a column of ISO times costs no per-cell match
        head = np.array(values, dtype=object).astype("U3").view(np.uint32).reshape(len(values), 3)
        maybe = np.flatnonzero(np.isin(head[:, 1], _DATE_SEPS) | np.isin(head[:, 2], _DATE_SEPS))
        found = [(k, m) for k in maybe.tolist() if isinstance(v := values[k], str) and (m := _NUMERIC_DATE.match(v))]
        if not found:
            return values
        for k, m in found:
            a, b = int(m.group(1)), int(m.group(3))
            if a > 12 or b > 12:
                day_first = a > 12
                if self.day_first is None:
                    self.day_first, self.told_by = day_first, (int(lines[k]), values[k])
                    if day_first and self.read_month_first and self.shift is not None and self.first is not None:
                        # the earlier blocks' one date (d1/d2) was read as month d1, day d2
                        (d1, d2, y), _, _ = self.first
                        year = int(y) if len(y) == 4 else 2000 + int(y)
                        read, meant = pd.Timestamp(year, int(d1), int(d2)), pd.Timestamp(year, int(d2), int(d1))
                        self.shift((meant - read).total_seconds())
                elif self.day_first != day_first:
                    line, cell = self.told_by
                    raise ConfigError(f"{where}:{int(lines[k])}", col, values[k],
                                      f"dates written both {'day' if self.day_first else 'month'} first (line "
                                      f"{line}: {cell}) and {'month' if self.day_first else 'day'} first: {_ISO_DATE}")
            if self.first is None:
                self.first = ((m.group(1), m.group(3), m.group(4)), int(lines[k]), values[k])
        if self.day_first is None:
            key, line, cell = self.first
            k, m = next(((k, m) for k, m in found if (m.group(1), m.group(3), m.group(4)) != key), (None, None))
            if m is not None:
                raise ConfigError(f"{where}:{int(lines[k])}", col, values[k],
                                  f"the day and month order cannot be told (line {line}: {cell}; no field past 12 "
                                  f"in the dates so far, and either order reads them as other days): {_ISO_DATE}")
            self.read_month_first = True
            return values   # one date throughout: either order gives the same gaps (read month first)
        out = list(values)
        for k, m in found:
            d, mo = (m.group(1), m.group(3)) if self.day_first else (m.group(3), m.group(1))
            year = m.group(4) if len(m.group(4)) == 4 else f"20{m.group(4)}"
            out[k] = f"{year}-{int(mo):02d}-{int(d):02d}{values[k][m.end():]}"
        return out


def _times(values: pd.Series | list, unit: str, where: str, col: str, lines: np.ndarray,
           dates: _DateOrder | None = None) -> np.ndarray:
    """Timestamps in seconds (any origin). ``dates``: the column's day/month order so far
    (:class:`_DateOrder`): pandas reads each cell on its own, month first while it can and
    day first past 12, so 10/05/2024 then 13/05/2024 were 5 October then 13 May."""
    _no_bools(values, where, col, lines)
    if unit == "datetime":
        values = list(values)
        iso = (dates or _DateOrder()).iso(values, where, col, lines)
        # every time on one clock, UTC: a trace logged in local time with its offset changes
        # offset at a daylight-saving switch (+01:00 -> +02:00), which pandas refuses to mix
        # unless asked to convert; times without a zone are read as UTC (only differences count)
        ts = pd.to_datetime(pd.Series(iso), errors="coerce", format="mixed", utc=True)
        if ts.isna().any():
            k = int(np.argmax(ts.isna().to_numpy()))
            cell = list(values)[k]
            hint = ""
            if not isinstance(cell, bool) and not math.isnan(pd.to_numeric(pd.Series([cell]), errors="coerce").iloc[0]):
                hint = " (it is a number: set workload.trace.time_unit: s, ms, us or ns)"   # epoch seconds under azure's layout
            raise ConfigError(f"{where}:{int(lines[k])}", col, _shown(cell), f"not a date and time{hint}")
        return ts.to_numpy("datetime64[ns]").astype(np.int64) / 1e9
    v = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(float)
    if np.isnan(v).any():
        k = int(np.argmax(np.isnan(v)))
        cell = list(values)[k]
        hint = ""
        if isinstance(cell, str) and cell.strip() and not pd.isna(pd.to_datetime(cell, errors="coerce", format="mixed")):
            hint = "; it is a date and time: set workload.trace.time_unit: datetime"   # a custom layout of an Azure-like file
        raise ConfigError(f"{where}:{int(lines[k])}", col, _shown(cell), f"not a number (time unit {unit}{hint})")
    return v * _UNIT_S[unit]


def _shown(value: object) -> object:
    """A cell as an error shows it: an empty CSV cell (NaN from pandas) or a JSON null as
    ``<empty>``, a whole float without its ``.0``."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or (isinstance(value, str) and not value.strip()):
        return "<empty>"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:   # 1e300 stays 1e+300
        return int(value)
    return value


def _numbers(values: pd.Series | list, where: str, col: str, lines: np.ndarray) -> np.ndarray:
    _no_bools(values, where, col, lines)
    v = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(float)
    if np.isnan(v).any():
        k = int(np.argmax(np.isnan(v)))
        raise ConfigError(f"{where}:{int(lines[k])}", col, _shown(list(values)[k]), "not a number")
    return v


class _TailTracked:
    """A text file handed to pandas, remembering the last character of what it read: pandas
    gives a row without a line end as it gives any other, so only the text tells whether the
    file's last row ended (``read`` and iteration are the calls pandas makes)."""

    def __init__(self, f: IO[str]) -> None:
        self.f, self.last = f, ""

    def read(self, n: int = -1) -> str:
        s = self.f.read(n)
        if s:
            self.last = s[-1]
        return s

    def __iter__(self) -> _TailTracked:
        return self

    def __next__(self) -> str:
        s = next(self.f)
        self.last = s[-1]
        return s

    def __getattr__(self, name: str) -> object:
        return getattr(self.f, name)


def _unended(where: Path, line: int, cells: dict[str, object]) -> str:
    """The warning for a trace's last row without a line end."""
    shown = ", ".join(f"{k} = {_shown(v)}" for k, v in cells.items())
    return (f"warning: {where}:{line}: the last row has no line end ({shown}): a file cut short (head -c, an "
            "interrupted download or copy) ends so, its last field missing digits; it is replayed as written (take rows whole "
            "with head -n, or fetch the whole file)")


def _read_csv(p: Path, cols: tuple[str, str, str], unit: str, limit: int | None, chk: _Checker,
              hashes: tuple[str | None, bool, int]) -> None:
    with open_text(p, TRACE_FILE, newline="", encoding="utf-8-sig") as f:   # a spreadsheet's byte-order mark is not a column
        header = f.readline()
    import csv

    hcol, required, block_size = hashes
    sep = ","
    for cand in (",", "\t", ";"):   # a tab-separated export, or a spreadsheet's in a decimal-comma locale
        names = [c.strip() for c in next(csv.reader([header], delimiter=cand), [])]
        if all(c in names for c in cols):
            sep = cand
            break
    else:
        names = [c.strip() for c in next(csv.reader([header]), [])]
    missing = [c for c in (*cols, *([hcol] if hcol and required else [])) if c not in names]
    if missing:
        raise ConfigError(f"{p}:1", missing[0], "<missing>",
                          f"trace header has {', '.join(names) or 'no columns'}"
                          f"{_header_hint(header, names, cols, sep) or _layout_hint(names, cols) or _columns_hint(names, cols)}")
    if hcol not in names:
        hcol = None
    chk.unread_hash_ids = hcol is None and "hash_ids" in names
    wanted = {*cols, *([hcol] if hcol else [])}
    # one column past the header's: a row with a field too many puts it there (pandas, reading only
    # the wanted columns, dropped it without a word, and a field inserted before the last shifted
    # the lengths). Every column is parsed, a block at a time, and the unwanted ones dropped:
    # pandas refuses `usecols` with more names than a file's rows have fields
    extra = len(set(names)) == len(names)
    layout = (dict(header=None, skiprows=1, names=[*names, _EXTRA]) if extra else
              dict(usecols=lambda c: str(c).strip() in wanted))
    first_line = 2
    try:
        # only an empty cell is missing: pandas would read "nan", "NA", "null" as one too, and the
        # error would show the cell as <empty>
        # names matched stripped, as the header check above matches them ("TIMESTAMP , ContextTokens")
        # read as text (decompressed, decoded) once more from the start: a pipe's bytes are kept
        with open_text(p, TRACE_FILE, newline="", encoding="utf-8-sig") as f:
            f = _TailTracked(f)
            # index_col=False: rows ending in a separator the header lacks ("...,374,44,") made
            # pandas take each row's first field for an index and shift every column by one
            reader = pd.read_csv(f, chunksize=CSV_BLOCK_ROWS, dtype=str, index_col=False, **layout,
                                 keep_default_na=False, na_values=[""],
                                 skip_blank_lines=False, skipinitialspace=True, sep=sep)
            for block in reader:
                if extra:
                    block = block[[c for c in block.columns if c in wanted or c == _EXTRA]]
                block.columns = [str(c).strip() for c in block.columns]
                lines = np.arange(first_line, first_line + len(block))
                first_line += len(block)
                try:
                    _csv_block(block, lines, p, cols, hcol, block_size, sep, unit, limit, chk, names)
                except ConfigError as e:
                    raise _said_cut(e, f, reader, p, first_line - 1) from None
                if limit is not None and chk.n >= limit:
                    break
            else:
                # every row read: a file cut short in its last row (head -c of a large trace, an
                # interrupted download) gives that row's last field short, read as a whole value
                if f.last not in ("\n", "\r") and chk.n and chk.last_line == first_line - 1:
                    last = {c: block[c].iloc[-1] for c in cols}
                    chk.unended = _unended(p, chk.last_line, last)
    except ConfigError:
        raise
    except (pd.errors.ParserError, ValueError) as e:
        m = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(e))
        if m is not None and extra:   # two fields or more past the header's
            raise _too_many(p, int(m[2]), names, f"{m[3]} fields") from None
        raise ConfigError(str(p), "<file>", p.name, f"not a readable CSV ({str(e).splitlines()[0]})") from None


def _too_many(p: Path, line: int, names: list[str], value: object) -> ConfigError:
    """The refusal of a CSV trace's row with more fields than its header names."""
    return ConfigError(f"{p}:{line}", f"<field {len(names) + 1}>", value,
                       f"a row has the header's {len(names)} fields ({', '.join(names)}); this one has more, and "
                       "which of its fields is the extra one cannot be told: remove it, or name its column in the header")


_EXTRA = "\x00past the header"
"""The name :func:`_read_csv` gives a CSV trace's column past its header's last: a row's field
there is refused (:func:`_csv_block`)."""


def _said_cut(e: ConfigError, f: _TailTracked, reader: Any, p: Path, last_line: int) -> ConfigError:
    """``e`` (a refused row of a CSV trace) with the hint that the file was cut short, when the
    row is the file's last and has no line end: ``head -c`` can stop inside the timestamp, leaving
    no length cells, and the refusal named only an empty or unparsable cell."""
    if f.last in ("\n", "\r") or not e.file.endswith(f":{last_line}"):
        return e
    try:
        if next(reader, None) is not None:   # rows after this block: the refused row is not the last
            return e
    except (pd.errors.ParserError, ValueError):
        return e
    return ConfigError(e.file, e.key, e.value, f"{e.allowed}; the last row has no line end: the file was cut short "
                       f"(head -c, an interrupted download or copy): drop it (head -n -1 {p.name}) or fetch the whole file")


def _csv_block(block: Any, lines: np.ndarray, p: Path, cols: tuple[str, str, str], hcol: str | None, block_size: int,
               sep: str, unit: str, limit: int | None, chk: _Checker, names: list[str]) -> None:
    """Check and add one block of a CSV trace's rows (``lines``: their line numbers) to ``chk``.

    Raises:
        ConfigError: a row's cell that is not a number, timestamp or block id list; a row with a
            non-empty field past the header's ``names`` (:data:`_EXTRA`).
    """
    blank = block.isna().all(axis=1).to_numpy()
    if blank.any():   # a blank line (an editor's trailing one, a spreadsheet's CRLF at the end): no request
        block, lines = block[~blank], lines[~blank]
    if limit is not None and chk.n + len(block) > limit:
        block, lines = block.iloc[: limit - chk.n], lines[: limit - chk.n]
    if _EXTRA in block:
        over = block[_EXTRA].notna().to_numpy()
        if over.any():   # an empty one is a separator ending the row ("...,374,44,"): read as before
            k = int(over.argmax())
            raise _too_many(p, int(lines[k]), names, clipped(block[_EXTRA].iloc[k], 40))
        block = block.drop(columns=_EXTRA)
    ins = _numbers(block[cols[1]], str(p), cols[1], lines)
    if hcol:
        for v, n, line in zip(block[hcol].tolist(), ins.tolist(), lines.tolist(), strict=True):
            chk.add_hashes(None if v is None or v != v else v, int(n) if n == n and n == int(n) else None,
                           line, hcol, block_size)
    raw_t = block[cols[0]].tolist()
    cells = raw_t
    if sep == ";" and unit != "datetime":   # a decimal-comma locale's spreadsheet: 0,5 is 0.5
        cells = block[cols[0]].str.replace(",", ".", regex=False).tolist()
    chk.add(_times(cells, unit, str(p), cols[0], lines, chk.dates), ins, _numbers(block[cols[2]], str(p), cols[2], lines),
            lines, raw_t)


LFS_POINTER = "version https://git-lfs.github.com/spec/"
"""First line of a Git LFS pointer file (the LFS specification, git-lfs docs/spec.md): what a
dataset repository cloned without LFS holds in place of each large file."""
_LFS_HINT = "; the file is a Git LFS pointer, not the trace: fetch it (git lfs pull)"


def _is_data(cell: str) -> bool:
    """A cell that is a value (a number, a date and time), not a column name."""
    if not cell:
        return False
    if not math.isnan(pd.to_numeric(pd.Series([cell]), errors="coerce").iloc[0]):
        return True
    return cell[:1].isdigit() and not pd.isna(pd.to_datetime(cell, errors="coerce", format="mixed"))


def _header_hint(line: str, names: list[str], cols: tuple[str, ...], sep: str) -> str:
    """For a CSV header without the trace's columns: what its first line is when it is no
    header at all (empty for a header that names other columns)."""
    if line.startswith(LFS_POINTER):
        return _LFS_HINT
    if names and all(_is_data(c) for c in names):
        return f"; no header: the first line is a row; add a header line naming the columns ({sep.join(cols)})"
    return ""


_COLUMN_KEYS = ("timestamp", "input_len", "output_len")
"""``workload.trace.columns`` keys of the first three columns read."""


def _spelling(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", str(name)).lower()


def _columns_hint(names: list[str] | dict, cols: tuple[str, ...]) -> str:
    """For a header (or a JSONL row's keys) without the trace's columns: the
    ``workload.trace.columns`` mapping that reads it when its names differ from the layout's
    only in case, spaces, dashes or underscores (an Azure trace re-exported with a lowercased
    header: ``timestamp,contexttokens,generatedtokens``), else where to map them. Column names
    are matched exactly, as pandas and the JSON keys give them."""
    by = {_spelling(n): str(n) for n in names}
    got = [c if c in names else by.get(_spelling(c)) for c in cols[:3]]
    if all(got):
        pairs = ", ".join(f"{k}: {v}" for k, v in zip(_COLUMN_KEYS, got, strict=True))
        return f"; names are matched exactly: say workload.trace.columns: {{{pairs}}}"
    want = ", ".join(f"{k}: ..." for k in _COLUMN_KEYS)
    return f"; name them under workload.trace.columns: {{{want}}} (or set workload.trace.layout)"


def _layout_hint(names: list[str] | dict, cols: tuple[str, ...]) -> str:
    """For a header (or a JSONL row's keys) without the trace's columns: the public layout
    whose columns they are (an Azure trace read under the default, custom, layout), empty
    when they are no known layout's or the one read (:data:`sim.workload_config.TRACE_LAYOUTS`)."""
    from specsched.sim.workload_config import TRACE_LAYOUTS

    for layout, (c, _unit) in TRACE_LAYOUTS.items():
        want = (c.timestamp, c.input_len, c.output_len)
        if want != tuple(cols[:3]) and all(x in names for x in want):
            return f"; the columns are the {layout} layout's: say workload.trace.layout: {layout}"
    return ""


def _row_key_hint(row: dict, cols: tuple[str, ...], key: str) -> str:
    """For a JSONL row without the trace's column ``key``: when the row has the trace's other
    columns, only this row lacks one (a hand-made or merged trace), and no column mapping reads
    it (the hint was to name the columns under ``workload.trace.columns``); a Mooncake row
    without ``output_length`` is one SGLang's bench_serving replays asking 256 tokens
    (0.5.23 benchmark/datasets/mooncake.py: ``record.get("output_length", 256)``). Else the
    layout or column mapping hints."""
    if all(c in row for c in cols[:3] if c != key):
        default = " (SGLang's bench_serving asks 256 for a Mooncake row without one)" if key == "output_length" else ""
        return f"; the row lacks the trace's {key}{default}: every row needs its {key}"
    return _layout_hint(row, cols) or _columns_hint(row, cols)


def _list_hint(line: str, p: Path) -> str:
    """For a refused JSONL line: a JSON list of rows (json.dump of a list, over one line or
    several) is no JSONL; say so and how to make it one; a Git LFS pointer's first line says
    the file is one (empty for any other line)."""
    if line.startswith(LFS_POINTER):
        return _LFS_HINT
    if not line.lstrip().startswith("["):
        return ""
    return f"; the file is a JSON list, a JSONL trace has one object per line: jq -c '.[]' {p.name} > rows.jsonl"


def _read_jsonl(p: Path, cols: tuple[str, str, str], unit: str, limit: int | None, chk: _Checker,
                hashes: tuple[str | None, bool, int], output_default: int | None = None) -> None:
    hcol, required, block_size = hashes
    block: list[tuple[object, object, object, int]] = []

    def flush() -> None:
        if not block:
            return
        lines = np.array([b[3] for b in block])
        raw_t = [b[0] for b in block]
        chk.add(_times(raw_t, unit, str(p), cols[0], lines, chk.dates),
                _numbers([b[1] for b in block], str(p), cols[1], lines),
                _numbers([b[2] for b in block], str(p), cols[2], lines), lines, raw_t)
        block.clear()

    with open_text(p, TRACE_FILE, encoding="utf-8-sig") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json_value(line)
            except json.JSONDecodeError as e:
                cut = ""
                if not line.endswith(("\n", "\r")):   # only the file's last line can end without one
                    cut = (f"; the last line has no line end: the file was cut short (head -c, an interrupted "
                           f"download or copy): drop it (head -n -1 {p.name}) or fetch the whole file")
                raise ConfigError(f"{p}:{lineno}", "<line>", line.strip()[:60],
                                  f"not a JSON object ({e.msg} column {e.colno}){_list_hint(line, p) or cut}") from None
            if not isinstance(row, dict):
                raise ConfigError(f"{p}:{lineno}", "<line>", line.strip()[:60],
                                  f"each line must be a JSON object{_list_hint(line, p)}")
            if output_default is not None and cols[2] not in row:
                row[cols[2]] = output_default
            for c in (*cols, *([hcol] if hcol and required else [])):
                if c not in row:
                    raise ConfigError(f"{p}:{lineno}", c, "<missing>",
                                      f"row has keys {', '.join(row) or 'none'}{_row_key_hint(row, cols, c)}")
            if hcol:
                chk.add_hashes(row.get(hcol), row[cols[1]], lineno, hcol, block_size)
            elif chk.n == 0 and not block:
                chk.unread_hash_ids = "hash_ids" in row
            block.append((row[cols[0]], row[cols[1]], row[cols[2]], lineno))
            if len(block) >= JSONL_BLOCK_ROWS:
                flush()
            if limit is not None and chk.n + len(block) >= limit:
                break
    flush()


_LAST: dict[tuple, Trace] = {}
"""The last large trace read, by (file, its size and modification time, the trace block,
limit): the runs of one ``compare`` or ``sweep`` over seeds and arms replay the same file,
which is then read once per process, not once per run (a 100 MB trace takes seconds)."""
KEEP_MIN_BYTES = 4 << 20
"""Files from this size on are kept in :data:`_LAST`; smaller ones read in milliseconds and
are read again (a file rewritten within the clock's tick at the same size stays correct)."""
_SAID: set[tuple] = set()
"""Warnings said, by (the read's :data:`_LAST` key, text): a small trace read again in the same
process (the context-length check before a run, then the run: sim/limits.py) says each once."""


def _warn(key: tuple, text: str) -> None:
    if (key, text) not in _SAID:
        _SAID.add((key, text))
        print(text, file=sys.stderr)


def _first_names(p: Path, fmt: str) -> list[str]:
    """The column names of a trace file: its CSV header, or its first JSONL row's keys ([] when
    the first non-empty line is neither: the read then says what is wrong)."""
    import csv

    try:
        with open_text(p, TRACE_FILE, encoding="utf-8-sig", errors="replace") as f:
            for raw in f:
                if raw.strip():
                    break
            else:
                return []
    except (ConfigError, *READ_ERRORS):
        return []
    if fmt == "csv":
        return [x.strip() for x in next(csv.reader([raw]), [])]
    try:
        row = json.loads(raw)
    except ValueError:
        return []
    return list(row) if isinstance(row, dict) else []


def detected_layout(cfg: TraceConfig, p: Path, fmt: str) -> str | None:
    """The public layout (:data:`sim.workload_config.TRACE_LAYOUTS`) a trace file's columns are,
    for a trace block that leaves its layout, columns and time unit to the default: every
    column of exactly one layout (Mooncake's with its ``hash_ids``, which alone tells its rows,
    timestamps in ms, from the default custom layout's in s under the same names); None
    otherwise, or for a stream (read once: not peeked at)."""
    from specsched.sim.workload_config import TRACE_LAYOUTS

    if ({"layout", "columns", "time_unit"} & cfg.model_fields_set or cfg.columns is not None
            or cfg.time_unit is not None or not p.is_file()):
        return None
    names = set(_first_names(p, fmt))
    found = [layout for layout, (c, _unit) in TRACE_LAYOUTS.items()
             if {c.timestamp, c.input_len, c.output_len, *([c.hash_ids] if c.hash_ids else [])} <= names]
    return found[0] if len(found) == 1 else None


def read_columns(cfg: TraceConfig, scenario_path: str | Path | None = None) -> Any:
    """The column names a trace block's file is read with (:meth:`TraceConfig.resolved`'s,
    after :func:`detected_layout`), for messages that name a row's column."""
    p = scenario_data_path(cfg.path, scenario_path)
    layout = detected_layout(cfg, p, _format(cfg, p)) if is_input_file(p) else None
    return (cfg.model_copy(update={"layout": layout}) if layout else cfg).resolved()[0]


def load_trace(cfg: TraceConfig, limit: int | None = None, scenario_path: str | Path | None = None,
               output_default: int | None = None) -> Trace:
    """Read a trace once, streaming, up to ``limit`` rows (the same file, unchanged, with the
    same trace block and limit is not read again: :data:`_LAST`; the arrays are read-only).

    Args:
        cfg: the scenario's trace block.
        limit: at most this many requests (None: all rows).
        scenario_path: the scenario file (a relative trace path is looked up beside it).
        output_default: the output length of a JSONL row without one (bench_serving's mooncake
            reader asks 256 then: ``record.get("output_length", 256)``); None: such a row is
            refused.

    Returns:
        A :class:`Trace` (arrivals scaled by ``cfg.time_scale``; an output length of 0 is
        kept: the request is served prefill only, :func:`sim.workload.scheduler_request`;
        a prompt of 0 tokens is kept, and
        the run fails it as SGLang does: sim/served.py ``server_rejections``).

    Raises:
        ConfigError: file missing or empty; a missing column; a row whose timestamp is not a
            number/date, negative or earlier than the previous row's; a length that is not an
            integer >= 0; a JSONL line that is not a JSON object.
    """
    p = scenario_data_path(cfg.path, scenario_path)
    where = str(scenario_path or "<scenario>")
    if not is_input_file(p):   # as sim.agentic_trace says it
        beside = Path(scenario_path).parent / p if scenario_path and not p.is_absolute() else p
        raise ConfigError(where, "workload.trace.path", cfg.path, "is a directory: give the trace file in it"
                          if p.is_dir() or beside.is_dir() else
                          "trace file does not exist (looked for it as given" + (", beside the scenario"
                          if scenario_path and not p.is_absolute() else "") + " and among the shipped examples)")
    fk = file_key(p)
    key = (*fk, cfg.model_dump_json(), limit, output_default)
    if key in _LAST:
        return _LAST[key]
    layout = detected_layout(cfg, p, _format(cfg, p))
    if layout is not None:
        # an Azure trace under the default layout was refused ("say workload.trace.layout:
        # azure"), a Mooncake one ran with its ms timestamps read as s (1000 times slower
        # arrivals) and its hash_ids unread, after a warning
        _warn(key, f"note: {p}: its columns are the {layout} layout's: read as workload.trace.layout: {layout} "
              "(state the layout, or columns and time_unit, to read it otherwise)")
        return load_trace(cfg.model_copy(update={"layout": layout}), limit, scenario_path,   # cached under its own key
                          output_default)
    keep = fk[1] != "stream" and fk[1] >= KEEP_MIN_BYTES   # a stream's bytes are kept already
    columns, unit = cfg.resolved()
    cols = (columns.timestamp, columns.input_len, columns.output_len)
    # block ids named by the user must be in every row; the layout's are used where present
    hashes = (columns.hash_ids, cfg.columns is not None and cfg.columns.hash_ids is not None, cfg.block_size)
    chk = _Checker(str(p), cols, ordered=not cfg.sort)
    read_limit = None if cfg.sort else limit   # sorted: the first N by time may be anywhere in the file
    try:
        if _format(cfg, p) == "csv":
            _read_csv(p, cols, unit, read_limit, chk, hashes)
        else:
            _read_jsonl(p, cols, unit, read_limit, chk, hashes, output_default)
    except UnicodeDecodeError:
        raise ConfigError(str(p), "<file>", p.name, "not a text file (a trace is CSV or JSONL)") from None
    except READ_ERRORS as e:
        raise unreadable(p, e) from None
    if chk.n == 0:
        raise ConfigError(str(p), "<rows>", 0, "the trace has no requests")
    if chk.unended is not None:
        _warn(key, chk.unended)
    # one array at a time, each block list dropped once joined: the peak stays one copy
    t = _joined(chk.t, float)
    _check_epoch_unit(float(t[0]), unit, f"{p}:{chk.first_line}", columns.timestamp, chk.first_raw)
    coarser = _coarser_epoch_unit(float(t[0]), unit)
    if coarser is not None:
        u, date = coarser
        _warn(key, f"warning: {p}:{chk.first_line}: {columns.timestamp} = {_shown(chk.first_raw)} reads as epoch {u} "
              f"({date} UTC); read in {unit}, the trace replays {_UNIT_S[u] / _UNIT_S[unit]:g} times faster: "
              f"set workload.trace.time_unit: {u} if so")
    order = None
    if cfg.sort:
        order = np.argsort(t, kind="stable")[:limit]   # ties in file order; then the first N by time
        t = t[order]
    t -= t[0]
    t *= cfg.time_scale
    if t[-1] >= MAX_ARRIVAL_SPAN_S:   # as a poisson workload's num_requests / request_rate is bounded
        raise ConfigError(f"{p}:{chk.max_line}", columns.timestamp, _shown(chk.max_raw),
                          f"the trace spans {t[-1]:.3g} s from its first row ({unit} x time_scale {cfg.time_scale:g}); "
                          f"at most {MAX_ARRIVAL_SPAN_S:g} s: is time_unit right?")
    ins = _joined(chk.i, np.int64)
    outs = _joined(chk.o, np.int64)
    lines = _joined(chk.lines, np.int64)
    if order is not None:
        ins, outs, lines = ins[order], outs[order], lines[order]
    if cfg.layout == "custom" and cfg.time_unit is None and chk.unread_hash_ids and columns.timestamp == "timestamp":
        # Mooncake's layout (hash_ids) read as a custom one: its ms timestamps as s spread the
        # arrivals 1000 times wider, and its shared prefixes are not read, without a word
        _warn(key, f"warning: {p}: the rows have Mooncake's hash_ids, but the trace is read with layout custom: "
              "timestamps in s (Mooncake writes ms) and no shared prefixes; say layout: mooncake "
              "(or time_unit and columns.hash_ids)")
    zeros = int(np.count_nonzero((outs == 0) & (ins > 0)))   # an empty prompt's row is rejected whole
    if zeros:
        # said once per read (a trace is read once per process): the lengths a run reports differ
        _warn(key, f"warning: {p}: {zeros} of {chk.n} requests have 0 output tokens ({columns.output_len}); they are "
              "sent with max_new_tokens 0 and served prefill only, as SGLang does: no text, counted as completed "
              "with output_len 0 and TTFT 0 (bench_serving saw no token), left out of TPOT")
    empty = int(np.count_nonzero(ins == 0))
    if empty:
        # public traces log failed requests with 0 tokens; SGLang refuses an empty prompt
        _warn(key, f"warning: {p}: {empty} of {chk.n} requests have 0 prompt tokens ({columns.input_len}); "
              f"SGLang rejects an empty prompt ({EMPTY_PROMPT!r}): they run as failed requests, as "
              "bench_serving counts them")
    if limit is not None and chk.n < limit:
        # bench_serving replays the rows there are; the run's request count says it, this says why
        _warn(key, f"warning: {p}: workload.num_requests asks for {limit} requests; the trace has {chk.n} rows, "
              f"all {chk.n} run")
    ids = offsets = None
    if chk.any_hashes:   # views of the reader's buffers: no second copy
        ids = np.frombuffer(chk.hashes, dtype=np.int64)
        offsets = np.frombuffer(chk.offsets, dtype=np.int64)[: chk.n + 1]
        if order is not None:
            ids, offsets = _reordered(ids, offsets, order)
    for a in (t, ins, outs, ids, offsets, lines):
        if a is not None:
            a.setflags(write=False)   # may be shared by every run that replays this file
    trace = Trace(t, ins, outs, ids, offsets, cfg.block_size, lines)
    if keep:
        _LAST.clear()   # one trace kept: a sweep over traces does not pile them up
        _LAST[key] = trace
    return trace


def _check_epoch_unit(first_s: float, unit: str, where: str, col: str, raw: object) -> None:
    """Refuse a first timestamp of :data:`MAX_TIMESTAMP_S` or more (``first_s``: in seconds,
    as read in ``unit``), naming the finer unit that reads it as a date between 1980 and 2100."""
    if unit == "datetime" or first_s < MAX_TIMESTAMP_S:
        return
    value = first_s / _UNIT_S[unit]
    hint = ""
    for u, k in _UNIT_S.items():
        if k < _UNIT_S[unit] and _EPOCH_S[0] <= value * k <= _EPOCH_S[1]:
            date = pd.Timestamp(value * k, unit="s").strftime("%Y-%m-%d %H:%M:%S")
            hint = f"; as epoch {u} it is {date} UTC: set workload.trace.time_unit: {u}"
            break
    raise ConfigError(where, col, _shown(raw), f"read in {unit} it is {first_s / 3.15576e7:.3g} years; "
                      f"timestamps must be under {MAX_TIMESTAMP_S:g} s{hint}")


def _coarser_epoch_unit(first_s: float, unit: str) -> tuple[str, str] | None:
    """(unit, date) when the first timestamp (``first_s``: in seconds as read in ``unit``)
    reads as an epoch time of 1980-2100 in a coarser unit than ``unit`` (epoch seconds under
    Mooncake's ms), else None."""
    if unit == "datetime":
        return None
    value = first_s / _UNIT_S[unit]
    for u, k in _UNIT_S.items():
        if k > _UNIT_S[unit] and _EPOCH_S[0] <= value * k <= _EPOCH_S[1]:
            return u, pd.Timestamp(value * k, unit="s").strftime("%Y-%m-%d %H:%M:%S")
    return None


def _reordered(ids: np.ndarray, offsets: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated per-row block ids (row i's: ``ids[offsets[i]:offsets[i + 1]]``) for the
    rows ``order`` names, in that order."""
    counts = np.diff(offsets)[order]
    new = np.zeros(len(order) + 1, dtype=np.int64)
    np.cumsum(counts, out=new[1:])
    take = np.repeat(offsets[:-1][order] - new[:-1], counts) + np.arange(new[-1], dtype=np.int64)
    return ids[take], new


def _joined(blocks: list[np.ndarray], dtype: type) -> np.ndarray:
    """The blocks as one array, emptying the list while copying (no second full copy)."""
    out = np.empty(sum(len(b) for b in blocks), dtype=dtype)
    k = 0
    blocks.reverse()
    while blocks:
        b = blocks.pop()
        out[k:k + len(b)] = b
        k += len(b)
    return out
