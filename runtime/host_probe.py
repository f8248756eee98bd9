"""What the host thread did during each launch call, to tell host-side slowdowns apart.

An eager verify (above ``cuda_graph_max_bs``) runs as fast as the host issues its kernels,
and round 7 on H200s saw it at one of two levels, about 16 or 30 ms per cycle, each held
for tens of cycles (docs/measurements/h200-v7.md section 1). The candidate causes leave
different marks, which :class:`HostProbe` records per launch call and per run:

| cause | call wall | thread CPU | process CPU | switches | GC | run counters |
|---|---|---|---|---|---|---|
| the thread shares its core (OpenMP workers spinning, other threads) | long | short | > thread | many | 0 | - |
| the container's CPU quota throttles the process | long | short | - | few | 0 | cgroup throttled grows |
| the hypervisor takes the vCPU | long | short or long | - | few | 0 | machine steal grows |
| a slower core clock | long | long | = thread | few | 0 | CPU MHz lower |
| garbage collection inside the call | long | long | = thread | few | > 0 | gen-2 collections |
| more work (allocator, a hidden sync) | long | long (short: a sync) | = thread | few | 0 | - |
| the GPU, not the host | short; the GPU span long | short | = thread | few | 0 | - |

Per launch: the call's wall (``time.perf_counter``), the calling thread's CPU time
(``time.thread_time``), the whole process's CPU time (``getrusage(RUSAGE_SELF)``), the
thread's involuntary context switches (``getrusage(RUSAGE_THREAD)``, Linux; 0 elsewhere),
and the seconds the garbage collector ran inside the call (``gc.callbacks``). Per run: the
machine's steal and iowait seconds (``/proc/stat``), the container's CPU quota and CFS
throttling (cgroup ``cpu.stat``), the process's OS threads and CPU seconds against the main
thread's, the CPU clock (``/proc/cpuinfo`` "cpu MHz") at the start and end, and the GC
collections per generation. A launch's readings cost a few microseconds of host time
(about 4 us on a loaded 2-core CI box); the GPU marks are recorded inside the call, as
before.
"""

from __future__ import annotations

import gc
import os
import resource
import time
from pathlib import Path
from typing import Any

from specsched.runtime.host_reference import SpeedSampler, fast_level, speed_summary

_RUSAGE_THREAD = getattr(resource, "RUSAGE_THREAD", None)


def _switches() -> int:
    """Involuntary context switches of the calling thread so far (0 where not available)."""
    if _RUSAGE_THREAD is None:
        return 0
    return resource.getrusage(_RUSAGE_THREAD).ru_nivcsw


def _cgroup_cpu() -> dict[str, float]:
    """The container's CPU quota (CPUs; absent when unlimited) and its CFS throttling so far
    (periods throttled, seconds throttled), cgroup v2 or v1; empty where not readable. A
    quota below the threads that spin (OpenMP workers after a parallel region) stalls every
    thread of the process for the rest of a 100 ms period: slow stretches held for tens of
    cycles."""
    out: dict[str, float] = {}
    for stat, scale in (("/sys/fs/cgroup/cpu.stat", 1e-6), ("/sys/fs/cgroup/cpu/cpu.stat", 1e-9)):
        try:
            kv = dict(line.split() for line in Path(stat).read_text().splitlines() if len(line.split()) == 2)
        except (OSError, ValueError):
            continue
        if "nr_throttled" in kv:
            out["cgroup_nr_throttled"] = float(kv["nr_throttled"])
            out["cgroup_throttled_s"] = float(kv.get("throttled_usec", kv.get("throttled_time", 0))) * scale
            break
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            out["cgroup_cpu_quota"] = float(quota) / float(period)
    except (OSError, ValueError):
        try:
            q = float(Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read_text())
            per = float(Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text())
            if q > 0:
                out["cgroup_cpu_quota"] = q / per
        except (OSError, ValueError):
            pass
    return out


def _os_threads() -> float:
    """OS threads of this process (``/proc/self/status``; torch's OpenMP and CUDA threads
    included), NaN where not readable."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return float("nan")


def _process_cpu() -> float:
    """CPU seconds of every thread of this process so far (user + system)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def machine_counters() -> dict[str, float]:
    """Steal and iowait seconds of the whole machine since boot (``/proc/stat``, USER_HZ
    ticks), the mean "cpu MHz" over ``/proc/cpuinfo``, the container's CPU quota and CFS
    throttling (:func:`_cgroup_cpu`), this process's OS threads and CPU seconds (all
    threads); keys absent where not readable."""
    out: dict[str, float] = {"process_cpu_s": _process_cpu(), "os_threads": _os_threads(), **_cgroup_cpu()}
    try:
        f = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        hz = os.sysconf("SC_CLK_TCK")
        # cpu user nice system idle iowait irq softirq steal ...
        out["iowait_s"] = int(f[5]) / hz
        out["steal_s"] = int(f[8]) / hz if len(f) > 8 else 0.0
    except (OSError, ValueError, IndexError):
        pass
    try:
        mhz = [float(line.split(":")[1]) for line in Path("/proc/cpuinfo").read_text().splitlines()
               if line.startswith("cpu MHz")]
        if mhz:
            out["cpu_mhz_mean"] = sum(mhz) / len(mhz)
            out["cpu_mhz_min"] = min(mhz)
    except (OSError, ValueError, IndexError):
        pass
    return out


class HostProbe:
    """Per-launch host readings of one run (see the module docstring).

    Use: :meth:`start` before the run, :meth:`begin` / :meth:`end` around each launch call
    (rows in launch order), :meth:`stop` after; :meth:`columns` gives the per-launch
    columns (seconds, counts) and :meth:`summary` the run's counters.

    Args:
        speed: a :class:`runtime.host_reference.SpeedSampler` to read the host's speed
            with over the run (one sample at :meth:`start` and :meth:`stop`, and after a
            launch call's readings in :meth:`end` when its cadence has passed); None: no
            reference work (the profiler's timed loops, which it would perturb).
    """

    def __init__(self, speed: SpeedSampler | None = None) -> None:
        self.speed = speed
        self._reset()

    def _reset(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.switches: list[int] = []
        self.proc_cpu: list[float] = []
        self.gc_s: list[float] = []
        self._gc_total = 0.0
        self._gc_t0 = 0.0
        self._gc_counts = [0, 0, 0]
        self._open: tuple[float, float, int, float, float] | None = None
        self._machine0: dict[str, float] = {}
        self._machine1: dict[str, float] = {}
        self._thread_cpu0 = self._thread_cpu1 = 0.0

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_t0 = time.perf_counter()
        else:
            self._gc_total += time.perf_counter() - self._gc_t0
            self._gc_counts[info.get("generation", 0)] += 1

    def start(self) -> None:
        """Reset and start listening to the garbage collector; read the machine counters."""
        self._reset()
        if self.speed is not None:
            self.speed.reset()
            self.speed.sample()
        self._machine0 = machine_counters()
        self._thread_cpu0 = time.thread_time()
        gc.callbacks.append(self._on_gc)

    def stop(self) -> None:
        """Stop listening; read the machine counters again."""
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        self._machine1 = machine_counters()
        self._thread_cpu1 = time.thread_time()
        if self.speed is not None:
            self.speed.sample()

    def begin(self) -> None:
        """Mark the start of a launch call."""
        self._open = (time.perf_counter(), time.thread_time(), _switches(), self._gc_total, _process_cpu())

    def end(self) -> None:
        """Mark the end of the launch call begun last (ignored without one)."""
        if self._open is None:
            return
        w0, c0, s0, g0, p0 = self._open
        self.wall.append(time.perf_counter() - w0)
        self.cpu.append(time.thread_time() - c0)
        self.proc_cpu.append(_process_cpu() - p0)
        self.switches.append(_switches() - s0)
        self.gc_s.append(self._gc_total - g0)
        self._open = None
        if self.speed is not None:  # after the call's readings: outside every launch's figures
            self.speed.maybe_sample()

    def speed_summary(self, reference_s: float | None = None) -> dict[str, float]:
        """The run's host speed (:func:`runtime.host_reference.speed_summary` of its samples,
        the launch reference work's with them; ``speed_factor`` against ``reference_s``, a
        profile's ``host.reference_work_s``); empty without a sampler."""
        if self.speed is None:
            return {}
        return speed_summary(self.speed.seconds, reference_s, launch_seconds=self.speed.launch_seconds)

    def columns(self, rows: int) -> dict[str, list[float]]:
        """Per-launch columns for a steps table of ``rows`` rows: ``host_launch_s`` (the call's
        wall), ``host_launch_cpu_s`` (the thread's CPU time in it), ``host_launch_proc_cpu_s``
        (every thread's of the process: above the thread's, other threads ran beside it),
        ``host_launch_switches`` (involuntary context switches in it), ``host_launch_gc_s``
        (GC seconds in it); NaN where a row has no reading (a table longer than the launches
        probed)."""
        nan = float("nan")

        def pad(v: list) -> list[float]:
            return [float(x) for x in v[:rows]] + [nan] * max(0, rows - len(v))

        return {"host_launch_s": pad(self.wall), "host_launch_cpu_s": pad(self.cpu),
                "host_launch_proc_cpu_s": pad(self.proc_cpu), "host_launch_switches": pad(self.switches), "host_launch_gc_s": pad(self.gc_s)}

    def summary(self) -> dict[str, float]:
        """The run's counters: GC collections per generation and seconds, steal and iowait
        seconds of the machine during the run, CPU MHz at the start and end."""
        out: dict[str, float] = {"gc_collections_gen0": self._gc_counts[0], "gc_collections_gen1": self._gc_counts[1],
                                 "gc_collections_gen2": self._gc_counts[2], "gc_s": self._gc_total}
        m0, m1 = self._machine0, self._machine1
        for k, name in (("steal_s", "machine_steal_s"), ("iowait_s", "machine_iowait_s"),
                        ("process_cpu_s", "process_cpu_s"), ("cgroup_nr_throttled", "cgroup_nr_throttled"),
                        ("cgroup_throttled_s", "cgroup_throttled_s")):
            if k in m0 and k in m1:
                out[name] = m1[k] - m0[k]
        if "process_cpu_s" in m0 and "process_cpu_s" in m1:
            out["main_thread_cpu_s"] = self._thread_cpu1 - self._thread_cpu0
        for k in ("cgroup_cpu_quota", "os_threads"):
            if k in m1:
                out[k] = m1[k]
        for k in ("cpu_mhz_mean", "cpu_mhz_min"):
            if k in m0:
                out[f"{k}_start"] = m0[k]
            if k in m1:
                out[f"{k}_end"] = m1[k]
        return out


SPELL_RATIO = 1.3
"""An extend launch call above this times its run's median extend call ran in a slow spell
of the host (:func:`describe_launches`; benchmarks/extend_path.py ``--slow``)."""


def describe_launches(steps: Any, probe: dict[str, list[float]], graph_max_bs: int,
                      predicted_steps: Any | None = None, slow_ratio: float = 1.4) -> list[str]:
    """Lines (markdown bullets) on the launches of one measured run: per kind (extends and
    injections; decode/verify graph replays; eager cycles above ``graph_max_bs``) the count,
    the median GPU span (start mark to end, ms), and the median wall, thread CPU time,
    involuntary switches and GC time of the launch call. Eager cycles are split into a fast and a slow level: slow when the span
    exceeds ``slow_ratio`` x the run's own fast level (runtime.host_reference.fast_level:
    the median of its fastest quarter of eager spans), not a predicted span: a prediction off
    by more than ``slow_ratio`` hid every slow step (round 29 d: 0 of 170 against the
    prediction where 25 % (base) and 14 % (host_block) ran slow,
    docs/measurements/h200-v29-eager.md). A run whose
    every step ran slow has only that level to go by and reads fast. The predicted run's
    median eager span is printed beside it. A host-bound slow level
    shows a long call; if its CPU time is short too, the thread was off its core (switches
    say whether it was preempted by the kernel; machine steal in the summary whether the
    hypervisor took the vCPU); a GPU-side slow level shows a long span after a short call.

    Args:
        steps: the measured steps table (DataFrame; rows in launch order).
        probe: :meth:`HostProbe.columns` of the same run (row i = steps row i).
        graph_max_bs: the scenario's cuda_graph_max_bs (eager above it).
        predicted_steps: the simulated steps table of the same scenario, or None.

    Returns:
        Zero or more lines; none when the run has no steps.
    """
    import numpy as np

    n = len(steps)
    cols = {k: np.asarray(v[:n], dtype=float) for k, v in probe.items()}
    mode = steps["mode"].to_numpy()
    part = steps["part"].to_numpy() if "part" in steps else np.array(["main"] * n)
    bs = steps["batch_size"].to_numpy()
    span = (steps["gpu_end_s"].to_numpy() - steps["gpu_start_s"].to_numpy()) * 1e3
    step_rows = ((mode == "verify") | (mode == "decode")) & (part == "main")
    ext_rows = ((mode == "extend") | (mode == "mixed")) & (part == "main")
    if not step_rows.any() and not ext_rows.any():
        return []

    def line(label: str, sel: np.ndarray) -> str:
        k = int(sel.sum())
        if k == 0:
            return f"{label}: none"

        def med(name: str, scale: float = 1e3) -> float:
            v = cols[name][sel]
            v = v[np.isfinite(v)]
            return float(np.median(v)) * scale if v.size else float("nan")

        sw = cols["host_launch_switches"][sel]
        gc_ms = float(np.nansum(cols["host_launch_gc_s"][sel])) * 1e3
        proc = f", process CPU {med('host_launch_proc_cpu_s'):.2f} ms" if "host_launch_proc_cpu_s" in cols else ""
        return (f"{label}: {k} launches, span {np.median(span[sel]):.2f} ms, call {med('host_launch_s'):.2f} ms "
                f"(thread CPU {med('host_launch_cpu_s'):.2f} ms{proc}), {np.nanmean(sw):.2f} involuntary switches "
                f"per call, GC {gc_ms:.1f} ms in all")

    out = []
    if ext_rows.any():
        out.append(line("extend launches", ext_rows))
        # a slow spell of the host: extend calls well above the run's own median (every
        # launch call of those milliseconds is slow, the verifies' too); the 4 Hz reference
        # work rarely lands in one, and a prefill's TTFT is host-bound (h200-v22.md,
        # "sharegpt-lengths median TTFT")
        call = cols["host_launch_s"][ext_rows]
        call = call[np.isfinite(call)]
        if call.size:
            med = float(np.median(call))
            spell = call > SPELL_RATIO * med
            out.append(f"  slow spells: {int(spell.sum())} of {call.size} extend calls above {SPELL_RATIO:g} x "
                       f"the run's median {med * 1e3:.2f} ms"
                       + (f" (median {float(np.median(call[spell])) * 1e3:.2f} ms)" if spell.any() else ""))
        inj = part == "inject"
        if inj.any():
            out.append(line("injection launches", inj))
    graph = step_rows & (bs <= graph_max_bs)
    eager = step_rows & (bs > graph_max_bs)
    if graph.any():
        out.append(line("graph steps", graph))
    if eager.any():
        pred = None
        if predicted_steps is not None and len(predicted_steps):
            p = predicted_steps
            pm = (((p["mode"] == "verify") | (p["mode"] == "decode")) & (p["batch_size"] > graph_max_bs)).to_numpy()
            if pm.any():
                pred = float(np.median((p["gpu_end_s"].to_numpy() - p["gpu_start_s"].to_numpy())[pm])) * 1e3
        base = fast_level(span[eager] / 1e3) * 1e3
        slow = eager & (span > slow_ratio * base)
        out.append(f"eager steps: {int(slow.sum())} of {int(eager.sum())} above {slow_ratio:g} x {base:.2f} ms "
                   "(the run's fast level)" + (f"; predicted median {pred:.2f} ms" if pred is not None else ""))
        out.append(line("  fast level", eager & ~slow))
        out.append(line("  slow level", slow))
    return out
