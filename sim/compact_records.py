"""What the compact record level keeps instead of rows (``Recorder("compact")``).

For runs too large to keep a row per chunk, the summary's inputs are kept exactly:
inter-token latencies as (value, multiplicity) pairs (:class:`ItlSamples`) and the steps
table's totals as running sums (:class:`StepTotals`, also filled from a full run's steps
table so both levels' figures come from the same sums). Re-exported by :mod:`sim.records`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from specsched.sim.tables import column
from specsched.sim.typed_columns import column_view, extend_column, new_column

PAIR_TIMES = 1 << 12
"""The ITL stream is turned into its pairs once it holds this many times (:meth:`ItlSamples.add_stream`)."""


class ItlSamples:
    """Inter-token latencies as (value s, multiplicity) pairs: a chunk of n tokens arriving
    dt after the request's previous chunk adds n gaps of dt / n (bench_serving); equal
    values may be stored once with their summed multiplicity. Small appends are batched
    before they are copied into the typed columns: arrays through :meth:`add`, and Python
    values through :meth:`add_stream`, in the order they were added (at each copy, the
    arrays first, then the stream).

    The stream is a sequence of times, each with a count: consecutive times t_i, t_{i+1}
    give the pair (t_{i+1} - t_i, c_i) unless c_i is 0. A single pair (v, w) is the two
    times (0.0, v) with counts (w, 0) (v - 0.0 is v), a gap between two delivery times
    (prev, t) the times themselves, and a run of delivery times one time each (the gaps of
    a closed-form stretch): no Python float per gap, and numpy subtracts them (the same
    float64 subtraction) a part at a time. The stream is held in Python lists until it holds
    4,096 times (:meth:`add_stream`), then packed with :mod:`struct` (the same float64 and
    int32 values) and turned into its pairs, which wait for the copy: a piece is a list
    extend, where a typed column's ``fromlist`` parses every value through ``PyArg_Parse``
    (~230 instructions a value against ~100 for the pack, docs/performance.md)."""

    __slots__ = ("values", "weights", "_pending", "_pending_w", "_times", "_counts", "_queued", "_paired")

    def __init__(self) -> None:
        self.values = new_column("d")
        self.weights = new_column("i")   # multiplicities fit 32 bits (tokens of one step)
        self._pending: list[np.ndarray] = []
        self._pending_w: list[np.ndarray] = []
        self._times: list[float] = []    # the stream (class docstring): times (s) ...
        self._counts: list[int] = []     # ... and the count of each one's gap to the next
        self._queued = 0                 # pairs and run times in the stream since the last copy
        self._paired: list[tuple[np.ndarray, np.ndarray]] = []   # the stream's earlier pairs (add_stream)

    def add(self, values: np.ndarray, weights: np.ndarray) -> None:
        """Append ITL values (s, float array) with their multiplicities (int array, > 0)."""
        self._pending.append(values)
        self._pending_w.append(weights)
        if len(self._pending) >= 512:
            self._flush()

    def add_stream(self, times: list[float], counts: list[int], items: int) -> None:
        """Append a piece of the stream (class docstring): ``times`` (s) and, for each, the
        multiplicity of its gap to the next (the last count must be 0: no gap reaches
        into the next piece). ``items``: single pairs plus run times in it (the copy
        happens once they reach 65,536 since the last one).

        The stream is turned into its pairs once it holds 4,096 times (:data:`PAIR_TIMES`,
        at the end of a piece), and they wait for the copy behind the arrays, where the copy
        puts the stream's pairs: no gap spans two pieces (a piece's last count is 0), so the
        pairs of the stream in parts are those of the whole (each value the same two times
        subtracted), in the same order. Done while the float objects are still in the CPU's
        caches, and on arrays of ~4,096 values: the copy of ~80,000 times at once took ~6
        ms of a 10k-request run's ~0.85 s, most of it cache misses and the page faults of
        its stream-sized temporaries, fresh memory at every copy (docs/performance.md)."""
        self._times += times
        self._counts += counts
        self._queued += items
        if self._queued >= 1 << 16:
            self._flush()
        elif len(self._times) >= PAIR_TIMES:
            self._paired.append(self._stream_pairs())

    def add_pair(self, value: float, weight: int) -> None:
        """Append one pair (s, > 0) after what the stream holds."""
        self.add_stream([0.0, value], [weight, 0], 1)

    def add_gaps(self, times: list[float], counts: list[int]) -> None:
        """Append the gaps ``times[j] - times[j - 1]`` (s) with multiplicities ``counts[j - 1]``
        (j = 1 .. len(times) - 1; a zero count adds nothing) after what the stream holds."""
        self.add_stream(times, [*counts, 0], len(times))

    def _flush(self) -> None:
        if self._pending:
            extend_column(self.values, np.concatenate(self._pending), "f8")
            extend_column(self.weights, np.concatenate(self._pending_w), "i4")
            self._pending.clear()
            self._pending_w.clear()
        if self._times:
            self._paired.append(self._stream_pairs())
        for v, w in self._paired:
            extend_column(self.values, v, "f8")
            extend_column(self.weights, w, "i4")
        self._paired.clear()
        self._queued = 0

    def _stream_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """The stream's pairs (values s, multiplicities), in order; the stream is left empty."""
        n = len(self._times)
        t = np.frombuffer(struct.pack(f"{n}d", *self._times), dtype=np.float64)
        # the last count is 0 (add_stream); the counts as one byte each while they fit
        # (a step's multiplicities: batch sizes, tokens of a chunk), which ``bytes``
        # checks value by value: half the instructions of the int32 pack, the same
        # integers once widened to int32 in the column
        try:
            c = np.frombuffer(bytes(self._counts), dtype=np.uint8)[:-1]
        except ValueError:   # a count above 255
            c = np.frombuffer(struct.pack(f"{n}i", *self._counts), dtype=np.int32)[:-1]
        keep = c != 0
        self._times = []
        self._counts = []
        return (t[1:] - t[:-1])[keep], c[keep]

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(values s, multiplicities), unsorted (read-only views of the stored columns)."""
        self._flush()
        return column_view(self.values, "f8"), column_view(self.weights, "i4")


@dataclass
class StepTotals:
    """What the summary needs from the steps table, as running sums (compact records).

    Attributes:
        num_steps: rows (launches, inject parts included).
        busy_s: sum of gpu_end_s - gpu_start_s. first_start_s / last_end_s: the span.
        host_blocked_s: sum of host_blocked_s.
        verify_accepted / verify_decoding: sums over verify main rows (accept length).
        windows: per verify batch size, (intervals, seconds, tokens) over consecutive main
            verify rows of that size (:func:`sim.metrics.steady_verify_windows`).
        max_decode_bs / decode_windows: the same for plain decode (main ``decode`` rows):
            the largest decode batch, and per batch size (intervals, seconds) over
            consecutive main decode rows of that size (:meth:`steady_decode_window`). A
            run of k such rows counts k - 1 intervals and its last GPU end less its first
            (one subtraction a run, so a closed-form stretch, which knows only where its
            batch size changes, adds the very same floats as its rows one by one).
    """

    num_steps: int = 0
    busy_s: float = 0.0
    first_start_s: float = float("inf")
    last_end_s: float = float("-inf")
    host_blocked_s: float = 0.0
    verify_accepted: int = 0
    verify_decoding: int = 0
    max_verify_bs: int = 0
    windows: dict[int, list[float]] = field(default_factory=dict)
    max_decode_bs: int = 0
    decode_windows: dict[int, list[float]] = field(default_factory=dict)
    _decode_run: list | None = None  # the open run of main decode rows: [bs, rows, first end, last end]
    _prev_main: tuple[bool, int, float] | None = None  # (is verify, batch size, gpu end)
    _pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)

    def busy_fraction(self) -> float:
        """GPU busy fraction of this stream: summed forward time over the span of its own
        forwards (first start to last end); NaN where the span is empty."""
        self.flush()
        span = self.last_end_s - self.first_start_s
        return self.busy_s / span if span > 0 else float("nan")

    def flush(self) -> None:
        """Fold deferred non-verify rows into the sums (done before the sums are read)."""
        if self._pending:
            start = np.concatenate([p[0] for p in self._pending])
            end = np.concatenate([p[1] for p in self._pending])
            self.busy_s += float((end - start).sum())
            self.host_blocked_s += float(np.concatenate([p[2] for p in self._pending]).sum())
            self._pending.clear()

    def add(self, mode: str, part: str, bs: np.ndarray, start: np.ndarray, end: np.ndarray,
            blocked: np.ndarray, acc: np.ndarray | None, dec: np.ndarray | None) -> None:
        """Add rows of one mode and part (arrays of equal length, launch order; ``acc`` and
        ``dec`` are only read for verify rows)."""
        n = len(bs)
        if n == 0:
            return
        self.num_steps += n
        # launches are in stream order: starts and ends increase
        if start[0] < self.first_start_s:
            self.first_start_s = float(start[0])
        if end[-1] > self.last_end_s:
            self.last_end_s = float(end[-1])
        verify = mode == "verify"
        if part == "main":
            if mode == "decode":
                cut = np.flatnonzero(bs[1:] != bs[:-1]) + 1
                for a, b in zip([0, *cut.tolist()], [*cut.tolist(), n], strict=True):
                    self._decode_rows(int(bs[a]), b - a, float(end[a]), float(end[b - 1]))
            elif self._decode_run is not None:
                self._close_decode_run()
        if not verify and part == "main":
            self._pending.append((start, end, blocked))     # summed in blocks (flush)
            if len(self._pending) >= 512:
                self.flush()
            self._prev_main = (False, int(bs[-1]), float(end[-1]))
            return
        self.busy_s += float((end - start).sum())
        self.host_blocked_s += float(blocked.sum())
        if part != "main":
            return
        if verify:
            self.verify_accepted += int(acc.sum())
            self.verify_decoding += int(dec.sum())
            self.max_verify_bs = max(self.max_verify_bs, int(bs.max()))
            prev = self._prev_main
            pbs, pend = np.empty(n, dtype=np.int64), np.empty(n)
            pbs[1:], pend[1:] = bs[:-1], end[:-1]
            pbs[0], pend[0] = (prev[1], prev[2]) if prev is not None and prev[0] else (-1, 0.0)
            ok = pbs == bs
            if ok.any():
                dt, tok, b = (end - pend)[ok], acc[ok], bs[ok]
                for size in sorted(set(b.tolist())):   # np.unique's values (it imports numpy.ma)
                    sel = b == size
                    w = self.windows.setdefault(size, [0, 0.0, 0.0])
                    w[0] += int(sel.sum())
                    w[1] += float(dt[sel].sum())
                    w[2] += float(tok[sel].sum())
        self._prev_main = (verify, int(bs[-1]), float(end[-1]))

    def _decode_rows(self, bs: int, k: int, first_end: float, last_end: float) -> None:
        """``k`` consecutive main decode rows of batch size ``bs``, the first and the last
        ending at ``first_end`` and ``last_end`` (s): they continue the open run of decode
        rows if it has that batch size, else close it and open their own."""
        if bs > self.max_decode_bs:
            self.max_decode_bs = bs
        r = self._decode_run
        if r is not None and r[0] == bs:
            r[1] += k
            r[3] = last_end
            return
        if r is not None:
            self._close_decode_run()
        self._decode_run = [bs, k, first_end, last_end]

    def _close_decode_run(self) -> None:
        """Fold the open run of main decode rows into :attr:`decode_windows`."""
        bs, k, first_end, last_end = self._decode_run
        self._decode_run = None
        if k > 1:
            w = self.decode_windows.setdefault(bs, [0, 0.0])
            w[0] += k - 1
            w[1] += last_end - first_end

    def steady_decode_window(self) -> tuple[int, float]:
        """(intervals, seconds) of the steady plain-decode window: consecutive main decode
        steps at the run's largest decode batch, with no other main launch between (the
        plain counterpart of :meth:`steady_window`; an open run of such rows is counted as
        its closing would count it). (0, 0.0) when no two decode steps at that batch
        follow each other (a speculative run has none)."""
        n, secs = self.decode_windows.get(self.max_decode_bs, (0, 0.0))
        r = self._decode_run
        if r is not None and r[0] == self.max_decode_bs and r[1] > 1:
            n, secs = n + r[1] - 1, secs + (r[3] - r[2])
        return int(n), float(secs)

    def add_decode_run(self, n: int, first_start: float, last_end: float, busy: float, blocked: float,
                       last_bs: int, pieces: list[tuple[int, int, float, float]]) -> None:
        """Add n rows of main decode launches (a closed-form stretch): the first row's GPU
        start and the last row's end (s), ``busy``: :attr:`busy_s` with each row's
        gpu_end_s - gpu_start_s already added in launch order (the sums of :meth:`add_one`,
        taken by the stretch's timeline); ``blocked``: the rows' host_blocked_s summed;
        ``last_bs``: the last row's batch size; ``pieces``: the rows' runs of one batch
        size in order, each (batch size, rows, first row's GPU end s, last row's GPU end s)
        (:attr:`sim.plain_timeline.PlainTimes.pieces`), rows summing to n."""
        for bs, k, first_end, piece_end in pieces:
            self._decode_rows(bs, k, first_end, piece_end)
        self.num_steps += n
        if first_start < self.first_start_s:
            self.first_start_s = first_start
        if last_end > self.last_end_s:
            self.last_end_s = last_end
        self.busy_s = busy
        self.host_blocked_s += blocked
        self._prev_main = (False, last_bs, last_end)

    def add_table(self, steps: Any) -> None:
        """Add a whole steps table (a DataFrame or :class:`~sim.tables.Columns` with the
        columns of :data:`sim.records.STEP_COLUMNS`; rows in launch order): the full records' figures
        come from the same sums as the compact records'."""
        n = len(steps)
        if n == 0:
            return
        mode = column(steps, "mode", object)
        part = column(steps, "part", object) if "part" in steps else np.full(n, "main", dtype=object)
        bs = column(steps, "batch_size", np.int64)
        start, end = column(steps, "gpu_start_s", float), column(steps, "gpu_end_s", float)
        blocked = column(steps, "host_blocked_s", float)
        acc = column(steps, "accepted_tokens", np.int64)
        dec = column(steps, "decoding_reqs", np.int64) if "decoding_reqs" in steps else bs
        cut = np.flatnonzero((mode[1:] != mode[:-1]) | (part[1:] != part[:-1])) + 1
        for a, b in zip(np.r_[0, cut].tolist(), np.r_[cut, n].tolist(), strict=True):
            self.add(mode[a], part[a], bs[a:b], start[a:b], end[a:b], blocked[a:b], acc[a:b], dec[a:b])

    def steady_window(self) -> tuple[int, float, float]:
        """(intervals, seconds, tokens) of the steady verify window: consecutive main verify
        steps at the run's largest verify batch (see :func:`sim.metrics.steady_verify_windows`)."""
        n, secs, toks = self.windows.get(self.max_verify_bs, (0, 0.0, 0.0))
        return int(n), float(secs), float(toks)

    def add_one(self, mode: str, part: str, bs: int, start: float, end: float, blocked: float,
                acc: int, dec: int) -> None:
        """Add one row (scalars); same sums as :meth:`add`."""
        self.num_steps += 1
        self.busy_s += end - start
        if start < self.first_start_s:
            self.first_start_s = start
        if end > self.last_end_s:
            self.last_end_s = end
        self.host_blocked_s += blocked
        if part != "main":
            return
        if mode == "decode":
            r = self._decode_run   # inline :meth:`_decode_rows` for one row (the common case)
            if r is not None and r[0] == bs:
                r[1] += 1
                r[3] = end
            else:
                self._decode_rows(bs, 1, end, end)
        elif self._decode_run is not None:
            self._close_decode_run()
        verify = mode == "verify"
        if verify:
            self.verify_accepted += acc
            self.verify_decoding += dec
            if bs > self.max_verify_bs:
                self.max_verify_bs = bs
            prev = self._prev_main
            if prev is not None and prev[0] and prev[1] == bs:
                w = self.windows.setdefault(bs, [0, 0.0, 0.0])
                w[0] += 1
                w[1] += end - prev[2]
                w[2] += acc
        self._prev_main = (verify, bs, end)
