"""The run's append-only records and the result object built from them after the run.

Rows are kept in typed columns (:mod:`sim.typed_columns`: 8 bytes a value, no Python
object per row) and turned into DataFrames once, at the end. Deliveries arrive one array per
``Deliver`` (a whole step's tokens) or one block per collapsed decode run
(:mod:`sim.decode_run`), never one tuple per token chunk.

Two levels of detail (``Recorder(level)``):

- ``full``: every delivery (``chunks``), forward (``steps``) and scheduling pass
  (``timeseries``) is a row; the tables of docs/architecture.md.
- ``compact``: for runs too large to keep a row per chunk (100,000 requests x 256 tokens).
  The ``requests`` table is complete; ``chunks``, ``steps`` and ``timeseries`` come back
  empty (same columns). What the summary needs from them is kept exactly instead
  (:mod:`sim.compact_records`): inter-token latencies as (value, multiplicity) pairs
  (:class:`ItlSamples`; every ITL value is the same float the chunk table would give) and
  the step totals as running sums (:class:`StepTotals`). Summary figures then equal the
  full run's (order statistics exactly, sums to float rounding, ~1e-15 relative).
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Any

import numpy as np
from specsched.sim.compact_records import ItlSamples, StepTotals
from specsched.sim.metrics import request_latencies
from specsched.sim.tables import Columns, RunResult  # noqa: F401  (RunResult re-exported)
from specsched.sim.typed_columns import column_view, extend_column, new_column

if TYPE_CHECKING:
    import pandas as pd

REQUEST_COLUMNS = [
    "rid", "input_len", "output_len", "start_s", "first_token_s", "finish_s",
    "ttft_s", "e2e_s", "tpot_s", "accept_level", "spec_cycles", "retractions", "preemptions",
]
CHUNK_COLUMNS = ["rid", "time_s", "n_tokens"]
STEP_COLUMNS = [
    "step", "mode", "part", "batch_size", "num_extend_tokens", "gpu_start_s", "gpu_end_s",
    "host_blocked_s", "accepted_tokens", "decoding_reqs",
]
TIMESERIES_COLUMNS = ["time_s", "running", "waiting", "kv_used_tokens"]
TABLE_COLUMNS: dict[str, list[str]] = {
    "requests": REQUEST_COLUMNS, "chunks": CHUNK_COLUMNS, "steps": STEP_COLUMNS, "timeseries": TIMESERIES_COLUMNS,
}
"""Table name -> the columns a run writes (the parquet file is ``<name>.parquet``)."""
OPTIONAL_COLUMNS: dict[str, tuple[str, ...]] = {"steps": ("part", "decoding_reqs"),
                                                "requests": ("error", "oom_abort_asked_len", "preemptions")}
"""Columns added after the format's first version: a reader does not require them. A run
writes ``requests.error`` only when the server rejected a request (the error text; "" for
the others): :meth:`Recorder.mark_aborted`; ``requests.oom_abort_asked_len`` only when the
server aborted a request out of memory (the output it asked; -1 for the others):
:meth:`Recorder.end_early`. ``requests.preemptions`` is always written; results written
before it counted a request's priority preemptions in ``retractions``."""
LEVELS = ("full", "compact")
MODES = ("extend", "decode", "verify", "mixed")
_NAN = float("nan")
PARTS = ("main", "inject")
_MODE_CODE = {m: i for i, m in enumerate(MODES)}
_PART_CODE = {p: i for i, p in enumerate(PARTS)}


def empty_table(name: str) -> pd.DataFrame:
    """An empty table ``name`` (requests, chunks, steps or timeseries) with its columns, for a
    run that has no such rows (a client-side bench_serving result has no steps)."""
    import pandas as pd

    return pd.DataFrame({c: pd.Series(dtype="float64") for c in TABLE_COLUMNS[name]})


def delivery_arrays(deliveries: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rids int64, n_tokens int64, finished bool) arrays of a ``Deliver`` op's deliveries:
    the scheduler's :class:`~specsched.sim.scheduler.Deliveries` (already arrays) or any
    iterable of objects with ``rid``, ``n_tokens`` and ``finished``."""
    if all(hasattr(deliveries, a) for a in ("rids", "n_tokens", "finished")):
        return deliveries.rids, deliveries.n_tokens, deliveries.finished
    ds = list(deliveries)
    return (np.array([d.rid for d in ds], dtype=np.int64), np.array([d.n_tokens for d in ds], dtype=np.int64),
            np.array([d.finished for d in ds], dtype=bool))


class Recorder:
    """Append-only event log of a run; tables built once at the end.

    Args:
        level: ``full`` or ``compact`` (module docstring).

    Request ids are non-negative integers (the run's counter); per-request values live in
    arrays indexed by a row assigned at :meth:`request_sent`.
    """

    def __init__(self, level: str = "full") -> None:
        if level not in LEVELS:
            raise ValueError(f"record level must be one of {LEVELS}, got {level!r}")
        self.level = level
        self.full = level == "full"
        # per-request columns in typed Python arrays: the hot paths (one step's or one
        # closed-form stretch's handful of requests) read and write single values, which
        # array.array does without numpy's per-call overhead; the vectorised paths take
        # numpy views (:meth:`_v`)
        self._row_of = new_column("q")   # rid -> row (-1: not sent)
        self._n = 0
        self._int_starts = True  # SimPy's clock starts as the int 0: a burst's starts stay ints
        self._rid, self._in, self._out = new_column("q"), new_column("q"), new_column("q")
        self._start = new_column("d")
        self._first, self._finish = new_column("d"), new_column("d")   # NaN until known
        self._last = new_column("d")  # last delivery time (compact ITL), NaN before the first
        self._aborted: dict[int, str] = {}   # rid -> the error the server returned (mark_aborted)
        self._oom_asked: dict[int, int] = {}   # rid -> the output it asked, aborted out of memory (end_early)
        self._no_text: set[int] = set()   # rids served prefill only, no text to the client (mark_no_text)
        # full: row columns
        self._c_rid, self._c_t, self._c_n = new_column("q"), new_column("d"), new_column("q")
        self._s_int = [new_column("q") for _ in range(6)]   # step, mode, part, bs, ext tokens, (spare)
        self._s_f = [new_column("d") for _ in range(3)]      # start, end, blocked
        self._s_acc, self._s_dec = new_column("q"), new_column("q")
        self._ts_t, self._ts_run, self._ts_wait, self._ts_kv = new_column("d"), new_column("q"), new_column("q"), new_column("q")
        # rows of several writers sharing this recorder (a deployment's decode servers): where
        # each writer's rows start, as (chunk rows, step rows, timeseries rows, writer) at every
        # change of writer (:meth:`write_as`); the tables group the rows by writer
        self._writer = 0
        self._writer_starts: list[tuple[int, int, int, int]] = []
        # the column naming each row's writer (:meth:`_grouped_by_writer`): a disaggregated
        # deployment's decode server, or a data-parallel replica's rank (sim/dp_replicas.py)
        self.writer_column = "decode_server"
        # compact: exact statistics instead of rows
        self.itl = ItlSamples()
        self.step_totals = StepTotals()
        self.num_steps = 0
        self.num_passes = 0

    # -------------------------------------------------------------- requests
    @staticmethod
    def _v(col: array, dtype: str = "f8") -> np.ndarray:
        """A writable numpy view of a per-request column (do not keep it: the column cannot
        grow while a view exists)."""
        return np.frombuffer(col, dtype=dtype) if len(col) else np.zeros(0, dtype=dtype)

    def rows(self, rids: np.ndarray) -> np.ndarray:
        """Rows of request ids (int array)."""
        return self._v(self._row_of, "i8")[rids]

    def request_sent(self, rid: int, input_len: int, output_len: int, start_s: float) -> None:
        """A client sent request ``rid`` at ``start_s`` (its timer starts)."""
        if rid < 0:
            raise ValueError(f"request ids must be >= 0, got {rid}")
        row_of = self._row_of
        if rid >= len(row_of):
            row_of.extend([-1] * max(rid + 1 - len(row_of), len(row_of)))
        if self._int_starts and not isinstance(start_s, int):
            self._int_starts = False
        row_of[rid] = self._n
        self._rid.append(rid)
        self._in.append(input_len)
        self._out.append(output_len)
        self._start.append(start_s)
        self._first.append(_NAN)
        self._finish.append(_NAN)
        self._last.append(_NAN)
        self._n += 1

    def requests_sent(self, rids: list[int], input_lens: list[int], output_lens: list[int],
                      starts_s: list[float]) -> None:
        """:meth:`request_sent` for many requests, in this order, at once (open arrivals: every
        send time is known before the run, sim/engine_clients.py): the same rows, filled
        column by column instead of a call per request."""
        if not rids:
            return
        if min(rids) < 0:
            raise ValueError(f"request ids must be >= 0, got {min(rids)}")
        row_of = self._row_of
        top = max(rids)
        if top >= len(row_of):
            row_of.extend([-1] * max(top + 1 - len(row_of), len(row_of)))
        if self._int_starts and not all(isinstance(s, int) for s in starts_s):
            self._int_starts = False
        for row, rid in enumerate(rids, self._n):
            row_of[rid] = row
        self._rid.fromlist(rids)
        self._in.fromlist(input_lens)
        self._out.fromlist(output_lens)
        self._start.fromlist(starts_s)
        nan = [_NAN] * len(rids)
        self._first.fromlist(nan)
        self._finish.fromlist(nan)
        self._last.fromlist(nan)
        self._n += len(rids)

    def end_early(self, output_lens: dict[int, int]) -> None:
        """Requests the server ended before their output was complete (rid -> the output
        tokens their client got; the scheduler's ``oom_aborted``): their rows' ``output_len``,
        as bench_serving counts a stream that ends early (set when the run ends). A request
        that got no token keeps the output length it asked for: SGLang 0.5.23's client
        (benchmark/serving.py ``async_request_sglang_generate``) starts ``output_len`` at the
        request's ``max_new_tokens`` and updates it only on a chunk with text, so a stream
        ended before its first token is a success of that length with TTFT 0.0 (its row has
        no first token: :func:`sim.metrics.request_latencies`). The output each asked is kept
        in the requests table's ``oom_abort_asked_len`` (-1 for the other rows), for the
        clients that count such a request otherwise (:func:`sim.bench_serving.client_counting`)."""
        if output_lens:
            out = self._v(self._out, "i8")
            self._oom_asked.update({rid: int(out[self._row_of[rid]]) for rid in output_lens})
        got = {rid: n for rid, n in output_lens.items() if n > 0}
        if got:
            rids = np.fromiter(got, np.int64, len(got))
            self._v(self._out, "i8")[self.rows(rids)] = np.fromiter(got.values(), np.int64, len(got))

    def mark_aborted(self, errors: dict[int, str]) -> None:
        """Requests the server rejects (rid -> the error text it returns; set before the run,
        :func:`sim.served.trace_aborts`). They run as SGLang runs an aborted request, but a
        client counts them as failed, as bench_serving's ``sglang-oai`` client does (``success``
        False; its native client counts them completed, its ``sglang-oai-chat`` client the
        scheduler's aborts: :func:`sim.bench_serving.client_counting`): their rows
        have no first token and no finish (so no latency and not ``completed``), their
        deliveries are dropped, and the requests table gains an ``error`` column."""
        self._aborted.update(errors)

    def mark_no_text(self, rids: Any) -> None:
        """Requests the server serves prefill only though their client asked for output (SGLang
        cut their ``max_new_tokens`` to 0: sim/served.py ``auto_truncated``; set before the run):
        the prefill's token is capped at ``finished_len`` 0 (schedule_batch.py
        ``Req.check_finished``), so their stream brings no text. Their rows keep the output
        length asked (bench_serving's client starts ``output_len`` there and changes it only on
        a chunk with text) and the finish, with no first token (TTFT 0.0,
        :func:`sim.metrics.request_latencies`), and their deliveries are dropped."""
        self._no_text.update(rids)

    # ------------------------------------------------------------ deliveries
    def delivered(self, rid: int, t: float, n: int, finished: bool) -> None:
        """``n`` tokens of ``rid`` reached its client at ``t`` (one chunk)."""
        self.deliver(t, np.array([rid], np.int64), np.array([n], np.int64), np.array([finished]))

    def deliver(self, t: float, rids: np.ndarray, n: np.ndarray, finished: np.ndarray) -> None:
        """One ``Deliver``: chunks of ``n`` tokens (int array) to ``rids`` (int array) at ``t`` s;
        ``finished`` (bool array) marks chunks that complete their request. A finishing entry
        of 0 tokens ends its request without a chunk (the server aborted it: the stream's last
        message brings no token, so bench_serving records no inter-token latency for it)."""
        if not n.all():
            ends = (n == 0) & finished
            self.finish(rids[ends], np.full(int(ends.sum()), t))
            keep = n > 0
            rids, n, finished = rids[keep], n[keep], finished[keep]
        rows = self.rows(rids)
        if self.full:
            extend_column(self._c_rid, rids, "i8")
            extend_column(self._c_t, np.full(len(rids), t), "f8")
            extend_column(self._c_n, n, "i8")
        else:
            last = self._v(self._last)
            prev = last[rows]
            later = ~np.isnan(prev)
            if later.any():
                nn = n[later]
                self.itl.add((t - prev[later]) / nn, nn)
            last[rows] = t
            del last
        first = self._v(self._first)
        new = np.isnan(first[rows])
        if new.any():
            first[rows[new]] = t
        if finished.any():
            self._v(self._finish)[rows[finished]] = t

    def deliver_step(self, t: float, rids: list[int], n: list[int], finished: list[bool]) -> None:
        """:meth:`deliver` for Python lists (one forward's few deliveries): the same columns,
        times and ITL samples, element by element instead of through numpy's small-array
        calls."""
        if not len(rids) == len(n) == len(finished):
            raise ValueError(f"deliver_step: {len(rids)} ids, {len(n)} counts, {len(finished)} finish flags")
        if 0 in n:   # an end without tokens (see deliver)
            self.deliver(t, np.array(rids, np.int64), np.array(n, np.int64), np.array(finished, bool))
            return
        if self.full:
            # fromlist: a list's values straight into the typed column (extend iterates)
            self._c_rid.fromlist(rids)
            self._c_t.fromlist([t] * len(rids))
            self._c_n.fromlist(n)
        row_of, first, last, finish = self._row_of, self._first, self._last, self._finish
        compact = not self.full
        st: list[float] = []   # the ITL stream's piece (ItlSamples.add_stream)
        sc: list[int] = []
        for i, rid in enumerate(rids):   # by index: zip(..., strict=True) builds a keyword dict per call
            k = n[i]
            row = row_of[rid]
            if compact:
                prev = last[row]
                last[row] = t
                if prev == prev:  # not NaN: a gap from the request's previous chunk (so its first is set)
                    if k == 1:    # (t - prev) / 1 is t - prev: the two times
                        st.append(prev)
                        st.append(t)
                    else:         # the pair (v, k) as the times (0.0, v)
                        st.append(0.0)
                        st.append((t - prev) / k)
                    sc.append(k)
                    sc.append(0)
                elif first[row] != first[row]:
                    first[row] = t
            elif first[row] != first[row]:
                first[row] = t
            if finished[i]:
                finish[row] = t
        if sc:
            self.itl.add_stream(st, sc, len(sc) >> 1)

    def deliver_run(self, times: np.ndarray, rids: np.ndarray, n: np.ndarray, single_tokens: bool = False) -> None:
        """The deliveries of a collapsed decode run: ``n[j, i]`` tokens (int, 0 = none) of
        request ``rids[i]`` at ``times[j]`` s, rows in order. Each request's non-zero entries
        must be consecutive rows (a decoding request delivers at every step until it
        finishes); ``single_tokens``: every non-zero entry is 1. Finishes are marked with
        :meth:`finish`."""
        if single_tokens and not self.full:
            self._deliver_run_single(times, rids, n)
            return
        has = n > 0
        rows = self.rows(rids)
        any_r = has.any(axis=0)
        first_j = has.argmax(axis=0)
        if self.full:
            # the rows in (time, request) order, by masks (no (row, column) index pairs:
            # gathering through them costs several times more on a stretch's grid)
            extend_column(self._c_rid, np.broadcast_to(rids, n.shape)[has], "i8")
            extend_column(self._c_t, np.repeat(times, has.sum(axis=1)), "f8")
            extend_column(self._c_n, n[has], "i8")
        idx = np.flatnonzero(any_r)
        fj = first_j[idx]
        ridx = rows[idx]
        if not self.full:
            # each request's first chunk of the run: the gap from its previous chunk
            lastv = self._v(self._last)
            prev = lastv[ridx]
            n0 = n[fj, idx]
            later = prev == prev   # not NaN
            if later.all():
                self.itl.add((times[fj] - prev) / n0, n0)
            elif later.any():
                self.itl.add((times[fj[later]] - prev[later]) / n0[later], n0[later])
            # later chunks come at consecutive rows: gap times[j] - times[j - 1]
            if single_tokens:
                counts = has.sum(axis=1) - np.bincount(fj, minlength=len(times))
                sel = counts[1:] > 0
                self.itl.add((times[1:] - times[:-1])[sel], counts[1:][sel])
            elif len(times) > 1:
                cont = has.copy()
                cont[fj, idx] = False
                jj, ii = np.nonzero(cont)
                if len(jj):
                    nv = n[jj, ii]
                    w = int(nv.max()) + 1
                    counts = np.bincount(jj * w + nv, minlength=len(times) * w).reshape(len(times), w)
                    kj, kn = np.nonzero(counts)
                    self.itl.add((times[kj] - times[kj - 1]) / kn, counts[kj, kn] * kn)
            last_j = len(times) - 1 - has[::-1].argmax(axis=0)
            lastv[ridx] = times[last_j[idx]]
            del lastv
        first = self._v(self._first)
        new = np.isnan(first[ridx])
        if new.any():
            first[ridx[new]] = times[fj[new]]

    def _deliver_run_single(self, times: np.ndarray, rids: np.ndarray, n: np.ndarray) -> None:
        """:meth:`deliver_run` in compact records when every chunk is one token."""
        has = n > 0
        k = len(times)
        first_j = has.argmax(axis=0)
        last_j = (k - 1) - has[::-1].argmax(axis=0)
        got = has[first_j, np.arange(len(rids))]
        rows = self.rows(rids[got])
        fj = first_j[got]
        lastv = self._v(self._last)
        prev = lastv[rows]
        later = prev == prev   # not NaN: the first chunk of the run continues an earlier one
        t_first = times[fj]
        self.itl.add((t_first - prev)[later], np.ones(int(later.sum()), dtype=np.int64))
        counts = has.sum(axis=1)
        counts -= np.bincount(fj, minlength=k)
        sel = counts[1:] > 0
        self.itl.add((times[1:] - times[:-1])[sel], counts[1:][sel])
        lastv[rows] = times[last_j[got]]
        del lastv
        new = ~later
        if new.any():
            first = self._v(self._first)
            new &= np.isnan(first[rows])
            first[rows[new]] = t_first[new]

    def deliver_ones(self, times: list[float], spans: list[tuple[int, int, int]], both: list[int]) -> None:
        """The deliveries of a closed-form decode run (:mod:`sim.plain_run`) in compact records:
        for each (rid, first, last) of ``spans``, request rid gets one token at each
        ``times[j]`` (s), first <= j <= last;
        ``both[j - 1]`` requests get one at both j - 1 and j (j >= 1). The same ITL samples and
        times as :meth:`deliver_run` with ``single_tokens``, without the (iterations x
        requests) grid or any array: a handful of requests, one value per iteration.
        Finishes are marked with :meth:`finish_one`."""
        row_of, lastd, firstd = self._row_of, self._last, self._first
        # the ITL stream's piece (ItlSamples.add_stream): each request's first gap of the
        # run as the two times (prev, ta), counts (1, 0), then the run's times with their
        # gaps' counts
        st: list[float] = []
        for rid, a, b in spans:
            row = row_of[rid]
            prev = lastd[row]
            ta = times[a]
            if prev == prev:     # not NaN: the first chunk of the run continues an earlier one
                st.append(prev)
                st.append(ta)
            elif firstd[row] != firstd[row]:
                firstd[row] = ta
            lastd[row] = times[b]
        pairs = len(st) >> 1
        sc = [1, 0] * pairs
        st.extend(times)
        sc.extend(both)       # times[j] - times[j - 1], j >= 1
        sc.append(0)
        self.itl.add_stream(st, sc, pairs + len(times))

    def finish_one(self, rid: int, t: float) -> None:
        """Request ``rid`` completed at ``t`` (s)."""
        self._finish[self._row_of[rid]] = t

    def finish(self, rids: np.ndarray, times: np.ndarray) -> None:
        """Requests ``rids`` completed at ``times`` (s)."""
        self._v(self._finish)[self.rows(rids)] = times

    # ----------------------------------------------------------------- steps
    def step(self, step: int, mode: str, part: str, batch_size: int, extend_tokens: int,
             start: float, end: float, blocked: float, accepted: int, decoding: int) -> None:
        """One launch (a row of the steps table)."""
        self.num_steps += 1
        if self.full:
            s = self._s_int
            s[0].append(step)
            s[1].append(_MODE_CODE[mode])
            s[2].append(_PART_CODE[part])
            s[3].append(batch_size)
            s[4].append(extend_tokens)
            f = self._s_f
            f[0].append(start)
            f[1].append(end)
            f[2].append(blocked)
            self._s_acc.append(accepted)
            self._s_dec.append(decoding)
        else:
            self.step_totals.add_one(mode, part, batch_size, start, end, blocked, accepted, decoding)

    def set_step_times(self, index: int, start: float, end: float) -> None:
        """Set the GPU start and end (s) of the ``index``-th recorded step (full records):
        for a caller that learns a forward's times after launching it (the runtime's timing
        events are resolved after the run)."""
        self._s_f[0][index] = start
        self._s_f[1][index] = end

    def step_run(self, first_step: int, mode: str, bs: np.ndarray, start: np.ndarray, end: np.ndarray,
                 blocked: np.ndarray, accepted: np.ndarray, decoding: np.ndarray) -> None:
        """Consecutive main launches of one mode (steps first_step, first_step + 1, ...)."""
        k = len(bs)
        self.num_steps += k
        if self.full:
            s = self._s_int
            extend_column(s[0], np.arange(first_step, first_step + k), "i8")
            extend_column(s[1], np.full(k, _MODE_CODE[mode]), "i8")
            extend_column(s[2], np.zeros(k), "i8")
            extend_column(s[3], bs, "i8")
            extend_column(s[4], np.zeros(k), "i8")
            extend_column(self._s_f[0], start, "f8")
            extend_column(self._s_f[1], end, "f8")
            extend_column(self._s_f[2], blocked, "f8")
            extend_column(self._s_acc, accepted, "i8")
            extend_column(self._s_dec, decoding, "i8")
        else:
            self.step_totals.add(mode, "main", bs, start, end, blocked, accepted, decoding)

    def count_pass(self) -> None:
        """A scheduling pass that built a batch, counted without its state: compact records
        keep no timeseries row, so the engine does not read the state for one."""
        self.num_passes += 1

    def pass_state(self, t: float, running: int, waiting: int, kv_used: int) -> None:
        """A scheduling pass that built a batch (a row of the timeseries table)."""
        self.num_passes += 1
        if self.full:
            self._ts_t.append(t)
            self._ts_run.append(running)
            self._ts_wait.append(waiting)
            self._ts_kv.append(kv_used)

    def pass_run(self, t: np.ndarray, running: np.ndarray, waiting: int, kv_used: np.ndarray) -> None:
        """Consecutive scheduling passes (arrays of equal length)."""
        self.num_passes += len(t)
        if self.full:
            extend_column(self._ts_t, t, "f8")
            extend_column(self._ts_run, running, "i8")
            extend_column(self._ts_wait, np.full(len(t), waiting), "i8")
            extend_column(self._ts_kv, kv_used, "i8")

    def write_as(self, writer: int) -> None:
        """The rows appended from now on are ``writer``'s (an int >= 0; 0, the recorder's own
        rows, until first called): a server of a deployment whose servers share this
        recorder (:class:`sim.disagg_records.StreamRecorder`) says so before each write, and
        :meth:`tables` returns each writer's rows together, in the order that writer
        appended them."""
        if writer != self._writer:
            self._writer = writer
            self._writer_starts.append((len(self._c_rid), len(self._s_int[0]), len(self._ts_t), writer))

    def _by_writer(self, which: int, n: int) -> np.ndarray | None:
        """Row order of table ``which`` (0 chunks, 1 steps, 2 timeseries; ``n`` rows) grouping
        the rows by writer, ascending, each writer's in the order appended (a stable sort on
        the writer); None when one writer appended them all."""
        of_row = self._writer_of_rows(which, n)
        return None if of_row is None else np.argsort(of_row, kind="stable")

    def _writer_of_rows(self, which: int, n: int) -> np.ndarray | None:
        """The writer of each of table ``which``'s ``n`` rows, in the order appended (int64
        (n,)); None when one writer appended them all."""
        marks = self._writer_starts
        if not marks or not n:
            return None
        starts = np.array([0] + [m[which] for m in marks] + [n], dtype=np.int64)
        writers = np.array([0] + [m[3] for m in marks], dtype=np.int64)
        of_row = np.repeat(writers, np.diff(starts))
        return None if (of_row == of_row[0]).all() else of_row

    # ---------------------------------------------------------------- tables
    def tables(self, extra_cols: dict[int, tuple[float, int, int, int]]) -> tuple[Columns, ...]:
        """Build (requests, chunks, steps, timeseries) as :class:`~sim.tables.Columns` (no
        pandas; :class:`~sim.tables.RunResult` makes DataFrames of them when asked).
        ``extra_cols``: rid -> (accept_level, spec_cycles, retractions, preemptions): a
        request's retractions (decode out of KV) and priority preemptions apart, as the
        summary's ``num_retractions`` and ``num_preemptions``. Requests come in
        send order. Chunks, steps and timeseries rows come in the order they were appended,
        grouped by writer where several wrote them (:meth:`write_as`: a deployment's decode
        servers, in server order, each server's rows in its own event order); the grouping
        makes the order a property of each server's mechanism, the same whether its decode
        runs were collapsed or stepped, where an order by time would interleave servers by
        sums that differ in the last bits between the two paths."""
        n = self._n
        v = self._v
        rid = v(self._rid, "i8").copy()
        start, first, fin, out = v(self._start), v(self._first), v(self._finish), v(self._out, "i8")
        silent = np.isin(rid, np.fromiter(self._no_text, np.int64, len(self._no_text))) if self._no_text else None
        if silent is not None:   # served prefill only (mark_no_text): no text, so no first token
            first = first.copy()
            first[silent] = np.nan
        ttft, e2e, tpot = request_latencies(start, first, fin, out)
        lvl = np.full(n, np.nan)
        cyc = np.zeros(n, np.int64)
        ret = np.zeros(n, np.int64)
        pre = np.zeros(n, np.int64)
        for i, r in enumerate(rid.tolist()):
            x = extra_cols.get(r)
            if x is not None:
                lvl[i], cyc[i], ret[i], pre[i] = x
        # a column of Python ints (every start at SimPy's initial clock 0) is int64, as a
        # DataFrame built from rows would make it
        starts = start.astype(np.int64) if self._int_starts and n else start.copy()
        cols = {
            "rid": rid, "input_len": v(self._in, "i8").copy(), "output_len": out.copy(), "start_s": starts,
            "first_token_s": first.copy(), "finish_s": fin.copy(), "ttft_s": ttft, "e2e_s": e2e, "tpot_s": tpot,
            "accept_level": lvl, "spec_cycles": cyc, "retractions": ret, "preemptions": pre,
        }
        # the chunks, steps and timeseries columns are views of the recorder's own storage,
        # not copies: the tables are made once the run is over, and a copy was fresh memory
        # to write (a burst's three chunk columns ~2 MB each: ~1,100 page faults of its run);
        # the records cannot be appended to while the views exist (BufferError)
        chunk_cols = {
            "rid": column_view(self._c_rid, "i8"), "time_s": column_view(self._c_t, "f8"),
            "n_tokens": column_view(self._c_n, "i8"),
        }
        order = self._by_writer(0, len(chunk_cols["rid"]))
        if order is not None:
            chunk_cols = {k: c[order] for k, c in chunk_cols.items()}
        if silent is not None:
            keep = ~np.isin(chunk_cols["rid"], rid[silent])
            chunk_cols = {k: c[keep] for k, c in chunk_cols.items()}
        if self._aborted:
            # failed requests (mark_aborted): no latency, not completed, no deliveries
            failed = np.isin(rid, np.fromiter(self._aborted, np.int64, len(self._aborted)))
            for c in ("first_token_s", "finish_s", "ttft_s", "e2e_s", "tpot_s"):
                cols[c][failed] = np.nan
            cols["error"] = np.array([self._aborted.get(r, "") for r in rid.tolist()], dtype=object)
            keep = ~np.isin(chunk_cols["rid"], rid[failed])
            chunk_cols = {k: c[keep] for k, c in chunk_cols.items()}
        if self._oom_asked:
            cols["oom_abort_asked_len"] = np.array([self._oom_asked.get(r, -1) for r in rid.tolist()], dtype=np.int64)
        req = Columns(cols)
        chunks = Columns(chunk_cols)
        s, f = self._s_int, self._s_f
        steps = Columns({
            "step": column_view(s[0], "i8"),
            "mode": np.array(MODES, dtype=object)[column_view(s[1], "i8")],
            "part": np.array(PARTS, dtype=object)[column_view(s[2], "i8")],
            "batch_size": column_view(s[3], "i8"), "num_extend_tokens": column_view(s[4], "i8"),
            "gpu_start_s": column_view(f[0], "f8"), "gpu_end_s": column_view(f[1], "f8"),
            "host_blocked_s": column_view(f[2], "f8"), "accepted_tokens": column_view(self._s_acc, "i8"),
            "decoding_reqs": column_view(self._s_dec, "i8"),
        })
        steps = self._grouped_by_writer(1, steps)
        ts = Columns({
            "time_s": column_view(self._ts_t, "f8"), "running": column_view(self._ts_run, "i8"),
            "waiting": column_view(self._ts_wait, "i8"), "kv_used_tokens": column_view(self._ts_kv, "i8"),
        })
        ts = self._grouped_by_writer(2, ts)
        return req, chunks, steps, ts

    def _grouped_by_writer(self, which: int, table: Columns) -> Columns:
        """``table`` (1 steps, 2 timeseries) with its rows grouped by writer (:meth:`_by_writer`)
        and a :attr:`writer_column` where several wrote them (``decode_server``: the
        deployment's decode server that wrote each row; ``dp_rank``: the data-parallel replica),
        from 0 (writer i + 1, :class:`sim.disagg_records.StreamRecorder`; -1 for rows the
        deployment wrote itself). Each server is its own forward stream and pass sequence, so
        a reader needs the column to split them (one timeline per server); unchanged where one
        writer wrote them all."""
        of_row = self._writer_of_rows(which, len(table))
        if of_row is None:
            return table
        order = np.argsort(of_row, kind="stable")
        return Columns({**{k: c[order] for k, c in table.data.items()}, self.writer_column: of_row[order] - 1})
