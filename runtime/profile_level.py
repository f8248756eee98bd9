"""Profiling on one host level: ``specsched profile`` re-runs a host phase that sat on the
slow level until it sits on the fast one.

Why: a rented H200 host runs the same Python work at two speeds about 1.8x apart, in
stretches of seconds (docs/measurements/h200-v10.md), and a profile's phases run one after
another for minutes. Round 11's profile measured its launch, sync and scheduler terms on
the fast level and its extend terms on the slow one; round 12's the reverse
(docs/measurements/h200-v11.md). A host term measured on the slow level holds the slow
host's time; a run on the fast level is then predicted too slow, and one factor per run
cannot correct terms measured at different levels.

How: after every phase ran once, the fast level is the median of the fastest quarter of
all reference-work samples (runtime.host_reference.fast_level). A phase of
:data:`RELEVEL_PHASES` whose samples' median lies above ``SLOW_RATIO`` x that level (most of
its samples slow) is run again, each attempt given about the time the first took, up to
:data:`RELEVEL_TRIES` times while ``relevel_s`` seconds last; the attempt with the fastest
median is kept (its measurements and its samples, labelled with the phase's name; the others'
samples stay, labelled "PHASE #k not kept"). What happened goes into provenance
(``host.reference_work_s``). The eager phase is not re-run: its host terms are taken as a
lower quartile or minimum over points (the fast points already, runtime/profile_fit.py
``eager_fit``), and it needs the grid's rows back. Phases without host terms (grid,
cross_queue) are not re-run either.
"""

from __future__ import annotations

import statistics
import time

from specsched.runtime.host_reference import SLOW_RATIO, fast_level
from specsched.runtime.memory import allocating
from specsched.runtime.profile_harness import Harness, _Budget

RELEVEL_PHASES = ("launch", "sync", "host", "extend")
"""Phases re-run when slow, cheapest first (so a short allowance levels the most terms); each
measures host terms of runtime.host_reference.PHASE_TERMS and can run again on its own."""

RELEVEL_TRIES = 3
"""Re-runs of one phase at most."""

DEFAULT_RELEVEL_S = 0.0
"""Default seconds allowed for re-runs (``specsched profile --relevel-budget``): none, as
before; on a GPU host that switches levels, 30-60 s re-runs the launch, sync and scheduler
phases (a few seconds each) and, with more, the extend phase."""


class LevelPhases(Harness):
    """Runs the phases timed (:meth:`_run_phase`) and re-runs the slow ones (:meth:`relevel`)."""

    def _run_phase(self, name: str) -> None:
        """Run phase ``name`` (method ``{name}_phase``) once, recording how long it took and
        how many budget ticks it used (a re-run gets the same share)."""
        ticks0 = self.budget.left
        t0 = time.perf_counter()
        self._phase(name)
        with allocating(self.phase_allocation(name)):   # a device out of memory names the phase
            getattr(self, f"{name}_phase")()
        self.phase_time = getattr(self, "phase_time", {})
        self.phase_ticks = getattr(self, "phase_ticks", {})
        self.phase_time[name] = time.perf_counter() - t0
        self.phase_ticks[name] = max(1, ticks0 - self.budget.left)

    def _restore(self, before: dict) -> None:
        """Put the attributes back as they were in ``before`` (a shallow copy of ``__dict__``
        taken before a re-run: the phases assign their results anew, so this brings back the
        earlier attempt's measurements)."""
        for k in set(self.__dict__) - set(before):
            delattr(self, k)
        self.__dict__.update(before)

    def _median_of(self, idx: list[int]) -> float:
        return float(statistics.median(self.speed.seconds[i] for i in idx))

    def relevel(self, relevel_s: float) -> None:
        """Re-run each slow phase of :data:`RELEVEL_PHASES` (module docstring) within
        ``relevel_s`` seconds; sets :attr:`level_notes` (one line per phase looked at)."""
        sp = self.speed
        self.level_notes: list[str] = []
        if not sp.seconds:
            return
        fast = fast_level(sp.seconds)
        left = float(relevel_s)
        for ph in RELEVEL_PHASES:
            idx = [i for i, lb in enumerate(sp.labels) if lb == ph]
            if not idx or ph not in getattr(self, "phase_time", {}):
                continue
            attempts = [(idx, self._median_of(idx))]
            kept = 0
            why = ""
            while attempts[kept][1] > SLOW_RATIO * fast:
                if len(attempts) > RELEVEL_TRIES:
                    why = f"still slow after {RELEVEL_TRIES} re-runs"
                    break
                need = self.phase_time[ph]
                if need > left:
                    why = f"not re-run further: needs about {need:.1f} s, {max(left, 0.0):.1f} s of --relevel-budget left"
                    break
                before = dict(self.__dict__)
                own_budget = self.budget
                self.budget = _Budget(need, self.phase_ticks[ph])
                i0 = len(sp.seconds)
                t0 = time.perf_counter()
                self._phase(f"{ph} #{len(attempts) + 1}")
                try:
                    getattr(self, f"{ph}_phase")()
                except Exception as e:  # noqa: BLE001  (a failed re-run must not lose the measured profile)
                    self._restore(before)
                    for i in range(i0, len(sp.seconds)):
                        sp.labels[i] = f"{ph} #{len(attempts) + 1} failed"
                    why = f"re-run #{len(attempts) + 1} failed ({type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}); kept the earlier"
                    break
                left -= time.perf_counter() - t0
                own_budget.trimmed += self.budget.trimmed
                new_idx = [i for i in range(i0, len(sp.seconds)) if sp.labels[i] == f"{ph} #{len(attempts) + 1}"]
                attempts.append((new_idx, self._median_of(new_idx)))
                if attempts[-1][1] < attempts[kept][1]:
                    kept = len(attempts) - 1
                else:  # the earlier attempt stays: its measurements back
                    self._restore(before)
                self.budget = own_budget
            for a, (ix, _) in enumerate(attempts):
                for i in ix:
                    sp.labels[i] = ph if a == kept else f"{ph} #{a + 1} not kept"
            if len(attempts) == 1 and not why:
                continue
            meds = ", ".join(f"{m * 1e3:.3f}" for _, m in attempts)
            state = "fast" if attempts[kept][1] <= SLOW_RATIO * fast else "slow"
            self.level_notes.append(f"{ph}: attempts' medians {meds} ms, kept #{kept + 1} ({state})"
                                    + (f"; {why}" if why else ""))
        self.level_fast = fast

    def level_text(self, relevel_s: float) -> str:
        """The provenance sentence on re-runs (:meth:`relevel`), after each phase's first
        duration (what a re-run costs)."""
        took = "seconds per phase (first run): " + ", ".join(
            f"{ph} {t:.1f}" for ph, t in getattr(self, "phase_time", {}).items())
        if relevel_s <= 0:
            return took + "; phases were not re-run (--relevel-budget 0)"
        notes = getattr(self, "level_notes", [])
        head = (f"{took}; phases {', '.join(RELEVEL_PHASES)} re-run while their median sat above {SLOW_RATIO:g} x the "
                f"fast level ({getattr(self, 'level_fast', float('nan')) * 1e3:.3f} ms), within {relevel_s:g} s")
        return head + (": " + "; ".join(notes) if notes else ": none was slow")
