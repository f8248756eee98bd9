"""What a collapsed decode stretch writes to the records: the rows (full records) or the
exact statistics (compact records) the step-by-step path would have written for the same
iterations (:mod:`sim.records`), from a :class:`~sim.decode_run.DecodeRun` and its
:class:`~sim.host_timeline.Timeline`, or from a :class:`~sim.plain_run.PlainRun` and the
:class:`~sim.plain_timeline.PlainTimes` of :func:`sim.plain_timeline.walk`. The engine (:mod:`sim.engine`) keeps its own
counters (host blocked time, finish events); these functions return the requests that
finished, to be marked there.
"""

from __future__ import annotations

import numpy as np
from specsched.sim.decode_run import DecodeRun
from specsched.sim.host_timeline import Timeline
from specsched.sim.plain_run import PlainRun
from specsched.sim.plain_timeline import PlainTimes
from specsched.sim.records import Recorder


def grid_run(rec: Recorder, run: DecodeRun, tl: Timeline, n: int, blocked0: float, waiting: int) -> list[int]:
    """Record the first n iterations of ``run`` timed by ``tl``.

    Args:
        blocked0: host seconds blocked since the last launch before the run (s).
        waiting: requests in the waiting queue (the passes' timeseries rows).

    Returns:
        The requests that finished in those iterations (their finish times are recorded).
    """
    bs = run.batch_size[:n]
    T = tl.T
    pw, rw = tl.pw[:n], tl.rw[:n]
    blocked = np.empty(n)
    blocked[0] = blocked0
    blocked[1:] = 0.0 + rw[:-1]
    blocked += pw
    delivered, commits = run.delivered_and_commits(n)
    mode = "verify" if run.spec else "decode"
    if rec.full:
        rec.pass_run(T[:n], bs, waiting, run.kv_scheduled(n))
        rec.step_run(run.first_step, mode, bs, tl.S[:n], tl.E[:n], blocked,
                     commits.sum(axis=1), np.count_nonzero(commits, axis=1))
    else:
        rec.num_passes += n
        acc = dec = None
        if run.spec:
            acc, dec = commits.sum(axis=1), np.count_nonzero(commits, axis=1)
        rec.step_run(run.first_step, mode, bs, tl.S[:n], tl.E[:n], blocked, acc, dec)
    rec.deliver_run(T[1 : n + 1], run.rids, delivered, single_tokens=not run.spec)
    fi = run.finish_iter()
    done = (fi >= 0) & (fi < n)
    if not done.any():
        return []
    rids = run.rids[done]
    rec.finish(rids, T[fi[done] + 1])
    return rids.tolist()


def plain_run(rec: Recorder, run: PlainRun, tm: PlainTimes, blocked0: float, waiting: int) -> list[int]:
    """Record the first ``tm.n`` iterations of a closed-form ``run`` timed by
    :func:`sim.plain_timeline.walk` (``detail`` for full records). Compact records take
    Python values and the walk's running sums (no per-iteration array or loop here); full
    records get every row.

    Args and returns: as :func:`grid_run`.
    """
    n, T = tm.n, tm.T
    o = run.outcome(n)
    if rec.full:
        bs, times = np.array(run.batch_sizes(n)), np.array(T[: n + 1])
        acc = np.array(run.commits(n))
        rec.pass_run(times[:n], bs, waiting, run.kv_scheduled(n))
        rec.step_run(run.first_step, "decode", bs, np.array(tm.S[:n]), np.array(tm.E[:n]),
                     np.array([blocked0, *tm.RW[: n - 1]]), acc, acc)
        rec.deliver_run(times[1:], run.rids, run.delivered(n), single_tokens=True)
    else:
        rec.num_passes += n
        rec.num_steps += n
        rec.step_totals.add_decode_run(n, tm.s0, tm.e_last, tm.busy, blocked0 + tm.blocked_rows,
                                       o.plan.batch_size, tm.pieces)
        rec.deliver_ones(T[1 : n + 1], *o.deliver)
    done = []
    rids, fin = run.rid_list, run.fin
    for i in o.finished:
        rec.finish_one(rids[i], T[fin[i] + 1])
        done.append(rids[i])
    return done
