"""Per-server step sums of a prefill-decode deployment, and the summary figures read from them.

Each server of a deployment (:mod:`sim.disaggregation`) has its own GPU forward stream, but
the decode servers write into the deployment's one :class:`~sim.records.Recorder` (the
clients' requests, deliveries and ``steps.parquet``; the tables group its rows by server,
:meth:`~sim.records.Recorder.write_as`), where their forwards interleave in time. The
colocated summary's step figures (:func:`sim.metrics._step_summary_from_totals`) assume one
stream: read over interleaved rows, the busy time of N servers is summed (a "fraction" up
to N) and the steady verify window breaks wherever another server's forward comes between
two verifies of one server. So every server records through a :class:`StreamRecorder`: all
calls go to its recorder as before, and its launches are also summed into the server's own
:class:`~sim.compact_records.StepTotals` (at any record level), from which
:func:`deployment_step_summary` computes the figures per server.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from specsched.sim.compact_records import StepTotals
from specsched.sim.records import Recorder

_ROW_WRITES = frozenset({"delivered", "deliver", "deliver_step", "deliver_run", "deliver_ones", "pass_state",
                         "pass_run"})
"""The :class:`~sim.records.Recorder` calls that append chunk or timeseries rows (the step
rows' calls, :meth:`StreamRecorder.step` and :meth:`StreamRecorder.step_run`, say so
themselves)."""


class _TeeTotals:
    """``rec.step_totals`` as a stream's closed-form decode stretch sees it
    (:func:`sim.stretch_records.plain_run`, compact records): ``busy_s`` is the stream's own
    running sum (the stretch's timeline continues it and hands back the new absolute sum),
    and :meth:`add_decode_run` adds the stretch to both the stream and the shared sums."""

    def __init__(self, shared: StepTotals, own: StepTotals) -> None:
        self._shared, self._own = shared, own

    @property
    def busy_s(self) -> float:
        return self._own.busy_s

    def add_decode_run(self, n: int, first_start: float, last_end: float, busy: float, blocked: float,
                       last_bs: int, pieces: list[tuple[int, int, float, float]]) -> None:
        """:meth:`StepTotals.add_decode_run` on both sums (``busy``: the stream's new absolute sum)."""
        added = busy - self._own.busy_s
        self._shared.add_decode_run(n, first_start, last_end, self._shared.busy_s + added, blocked, last_bs, pieces)
        self._own.add_decode_run(n, first_start, last_end, busy, blocked, last_bs, pieces)


class StreamRecorder:
    """One server's view of a recorder: every attribute and call is the wrapped
    :class:`~sim.records.Recorder`'s, and each launch (:meth:`step`, :meth:`step_run`,
    a compact stretch's ``step_totals.add_decode_run``) is also added to :attr:`stream`,
    this server's own step sums (one GPU forward stream).

    Args:
        shared: the recorder the server writes its rows to (the deployment's, or its own).
        writer: this server's number in ``shared``'s tables, whose rows come grouped by
            writer (:meth:`sim.records.Recorder.write_as`; a deployment's decode server i
            is i + 1, 0 the deployment's own rows).
    """

    def __init__(self, shared: Recorder, writer: int = 0) -> None:
        object.__setattr__(self, "_shared", shared)
        object.__setattr__(self, "stream", StepTotals())
        object.__setattr__(self, "writer", writer)

    def __getattr__(self, name: str) -> Any:
        if name in _ROW_WRITES:
            # the rows this call appends are this server's (Recorder.write_as: the tables
            # group a shared recorder's rows by server)
            self._shared.write_as(self.writer)
        return getattr(self._shared, name)

    def __setattr__(self, name: str, value: Any) -> None:
        # counters the stretch paths bump (rec.num_steps += n) are the shared recorder's
        setattr(self._shared, name, value)

    @property
    def step_totals(self) -> Any:
        return _TeeTotals(self._shared.step_totals, self.stream)

    def step(self, step: int, mode: str, part: str, batch_size: int, extend_tokens: int,
             start: float, end: float, blocked: float, accepted: int, decoding: int) -> None:
        """:meth:`Recorder.step`, also summed into :attr:`stream`."""
        self._shared.write_as(self.writer)
        self._shared.step(step, mode, part, batch_size, extend_tokens, start, end, blocked, accepted, decoding)
        self.stream.add_one(mode, part, batch_size, start, end, blocked, accepted, decoding)

    def step_run(self, first_step: int, mode: str, bs: np.ndarray, start: np.ndarray, end: np.ndarray,
                 blocked: np.ndarray, accepted: np.ndarray, decoding: np.ndarray) -> None:
        """:meth:`Recorder.step_run`, also summed into :attr:`stream`."""
        self._shared.write_as(self.writer)
        self._shared.step_run(first_step, mode, bs, start, end, blocked, accepted, decoding)
        self.stream.add(mode, "main", np.asarray(bs), np.asarray(start, float), np.asarray(end, float),
                        np.asarray(blocked, float), np.asarray(accepted), np.asarray(decoding))


def busy_fractions(streams: list[StepTotals], t0: float, t1: float) -> list[float]:
    """Each stream's GPU busy fraction over the deployment's window ``[t0, t1]`` (s): its summed
    forward time / (t1 - t0), in [0, 1] when the window holds every forward (a stream runs
    one forward at a time). A server that ran nothing gives 0."""
    span = t1 - t0
    out = []
    for st in streams:
        st.flush()
        out.append(st.busy_s / span if span > 0 else 0.0)
    return out


def deployment_window(streams: list[StepTotals], first_start: float, last_finish: float) -> tuple[float, float]:
    """(start, end) s of the deployment's run: the first request sent or forward started to the
    last request finished or forward ended, over every server's ``streams``."""
    t0 = min([first_start, *(s.first_start_s for s in streams if s.num_steps)])
    t1 = max([last_finish, *(s.last_end_s for s in streams if s.num_steps)])
    return t0, t1


def deployment_step_summary(prefill: list[StepTotals], decode: list[StepTotals], first_start: float,
                            last_finish: float, out: dict[str, float]) -> None:
    """Set the step figures of a deployment's summary ``out`` from its servers' streams
    (docs/disaggregation.md "Summary figures"):

    - ``gpu_busy_fraction`` / ``prefill_busy_fraction``: the mean over decode / prefill
      servers of each server's forward time / the deployment's window
      (:func:`deployment_window`); each in [0, 1].
    - ``verify_cycles_per_s``, ``decode_throughput``, ``verify_wall_ms``: the colocated
      definition (consecutive main verify steps at the stream's largest verify batch,
      :meth:`StepTotals.steady_window`) taken per decode server, pooled: total steady
      intervals / total steady seconds over the decode servers (so per server: one decode
      server's cycle rate and tokens/s, weighted by its time in the steady window). NaN
      when no decode server has a steady window (no speculative decoding).
    - ``decode_steps_per_s``, ``decode_step_ms``: the same for plain decode steps
      (:meth:`StepTotals.steady_decode_window`), pooled the same way; NaN with speculative
      decoding.
    - ``accept_length``: tokens committed by verifies / requests decoding in them, summed
      over decode servers; ``host_blocked_s``: summed over decode servers.
    """
    t0, t1 = deployment_window(prefill + decode, first_start, last_finish)
    out["prefill_busy_fraction"] = float(np.mean(busy_fractions(prefill, t0, t1))) if prefill else 0.0
    out["gpu_busy_fraction"] = float(np.mean(busy_fractions(decode, t0, t1))) if decode else 0.0
    n = secs = toks = 0.0
    for st in decode:
        wn, ws, wt = st.steady_window()
        n, secs, toks = n + wn, secs + ws, toks + wt
    out["verify_cycles_per_s"] = n / secs if secs > 0 else float("nan")
    out["decode_throughput"] = toks / secs if secs > 0 else float("nan")
    out["verify_wall_ms"] = 1000.0 * secs / n if n else float("nan")
    n, secs = 0, 0.0
    for st in decode:
        wn, ws = st.steady_decode_window()
        n, secs = n + wn, secs + ws
    # math.nan itself (one object): a speculative run's summaries still compare equal
    out["decode_steps_per_s"] = n / secs if secs > 0 else math.nan
    out["decode_step_ms"] = 1000.0 * secs / n if n else math.nan
    acc, dec = sum(st.verify_accepted for st in decode), sum(st.verify_decoding for st in decode)
    out["accept_length"] = acc / dec if dec else float("nan")
    out["host_blocked_s"] = float(sum(st.host_blocked_s for st in decode))
