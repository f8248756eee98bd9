"""What the host thread did during each launch call, to tell host-side slowdowns apart.

An eager verify (above ``cuda_graph_max_bs``) runs as fast as the host issues its kernels,
and round 7 on H200s saw it at one of two levels, about 16 or 30 ms per cycle, each held
for tens of cycles (docs/measurements/h200-v7.md section 1). The candidate causes leave
different marks, which :class:`HostProbe` records per launch call and per run:

| cause | wall of the call | thread CPU time | involuntary switches | GC seconds | steal |
|---|---|---|---|---|---|
| the thread shares its core (other threads, OpenMP workers) | long | short | many | 0 | - |
| the vCPU is preempted by the hypervisor | long | short or long | few | 0 | grows |
| a slower core clock | long | long | few | 0 | - |
| garbage collection inside the call | long | long | few | > 0 | - |
| more work (allocator, a sync) | long | long (or short: a sync) | few | 0 | - |
| the GPU, not the host | span long, call short | short | few | 0 | - |

Per launch: the call's wall (``time.perf_counter``), the calling thread's CPU time
(``time.thread_time``), its involuntary context switches (``getrusage(RUSAGE_THREAD)``,
Linux; 0 elsewhere), and the seconds the garbage collector ran inside the call
(``gc.callbacks``). Per run: the machine's steal and iowait seconds (``/proc/stat``) and
the CPU clock (``/proc/cpuinfo`` "cpu MHz") at the start and end, and the collections per
generation. Each reading costs about a microsecond; the probe changes no timing that the
simulator is compared on (the GPU marks are recorded inside the call, as before).
"""

from __future__ import annotations

import gc
import os
import resource
import time
from pathlib import Path
from typing import Any

_RUSAGE_THREAD = getattr(resource, "RUSAGE_THREAD", None)


def _switches() -> int:
    """Involuntary context switches of the calling thread so far (0 where not available)."""
    if _RUSAGE_THREAD is None:
        return 0
    return resource.getrusage(_RUSAGE_THREAD).ru_nivcsw


def machine_counters() -> dict[str, float]:
    """Steal and iowait seconds of the whole machine since boot (``/proc/stat``, USER_HZ
    ticks) and the mean "cpu MHz" over ``/proc/cpuinfo``; empty where not readable."""
    out: dict[str, float] = {}
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
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.switches: list[int] = []
        self.gc_s: list[float] = []
        self._gc_total = 0.0
        self._gc_t0 = 0.0
        self._gc_counts = [0, 0, 0]
        self._open: tuple[float, float, int, float] | None = None
        self._machine0: dict[str, float] = {}
        self._machine1: dict[str, float] = {}

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_t0 = time.perf_counter()
        else:
            self._gc_total += time.perf_counter() - self._gc_t0
            self._gc_counts[info.get("generation", 0)] += 1

    def start(self) -> None:
        """Reset and start listening to the garbage collector; read the machine counters."""
        self._reset()
        self._machine0 = machine_counters()
        gc.callbacks.append(self._on_gc)

    def stop(self) -> None:
        """Stop listening; read the machine counters again."""
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        self._machine1 = machine_counters()

    def begin(self) -> None:
        """Mark the start of a launch call."""
        self._open = (time.perf_counter(), time.thread_time(), _switches(), self._gc_total)

    def end(self) -> None:
        """Mark the end of the launch call begun last (ignored without one)."""
        if self._open is None:
            return
        w0, c0, s0, g0 = self._open
        self.wall.append(time.perf_counter() - w0)
        self.cpu.append(time.thread_time() - c0)
        self.switches.append(_switches() - s0)
        self.gc_s.append(self._gc_total - g0)
        self._open = None

    def columns(self, rows: int) -> dict[str, list[float]]:
        """Per-launch columns for a steps table of ``rows`` rows: ``host_launch_s`` (the call's
        wall), ``host_launch_cpu_s`` (the thread's CPU time in it), ``host_launch_switches``
        (involuntary context switches in it), ``host_launch_gc_s`` (GC seconds in it); NaN
        where a row has no reading (a table longer than the launches probed)."""
        nan = float("nan")

        def pad(v: list) -> list[float]:
            return [float(x) for x in v[:rows]] + [nan] * max(0, rows - len(v))

        return {"host_launch_s": pad(self.wall), "host_launch_cpu_s": pad(self.cpu),
                "host_launch_switches": pad(self.switches), "host_launch_gc_s": pad(self.gc_s)}

    def summary(self) -> dict[str, float]:
        """The run's counters: GC collections per generation and seconds, steal and iowait
        seconds of the machine during the run, CPU MHz at the start and end."""
        out: dict[str, float] = {"gc_collections_gen0": self._gc_counts[0], "gc_collections_gen1": self._gc_counts[1],
                                 "gc_collections_gen2": self._gc_counts[2], "gc_s": self._gc_total}
        m0, m1 = self._machine0, self._machine1
        for k in ("steal_s", "iowait_s"):
            if k in m0 and k in m1:
                out[f"machine_{k}"] = m1[k] - m0[k]
        for k in ("cpu_mhz_mean", "cpu_mhz_min"):
            if k in m0:
                out[f"{k}_start"] = m0[k]
            if k in m1:
                out[f"{k}_end"] = m1[k]
        return out


def describe_launches(steps: Any, probe: dict[str, list[float]], graph_max_bs: int,
                      predicted_steps: Any | None = None, slow_ratio: float = 1.4) -> list[str]:
    """Lines (markdown bullets) on the verify launches of one measured run: per kind (graph
    replays; eager cycles above ``graph_max_bs``) the count, the median GPU span (start mark
    to end, ms), and the median wall, thread CPU time, involuntary switches and GC time of
    the launch call. Eager cycles are split into a fast and a slow level: slow when the span
    exceeds ``slow_ratio`` x the predicted run's median eager span at the same batch sizes
    (or, without a prediction, x the measured 10th percentile). A host-bound slow level
    shows a long call; if its CPU time is short too, the thread was off its core (switches
    say whether it was preempted by the kernel; machine steal in the summary whether the
    hypervisor took the vCPU); a GPU-side slow level shows a long span after a short call.

    Args:
        steps: the measured steps table (DataFrame; rows in launch order).
        probe: :meth:`HostProbe.columns` of the same run (row i = steps row i).
        graph_max_bs: the scenario's cuda_graph_max_bs (eager above it).
        predicted_steps: the simulated steps table of the same scenario, or None.

    Returns:
        Zero or more lines; none when the run has no verify or decode steps.
    """
    import numpy as np

    n = len(steps)
    cols = {k: np.asarray(v[:n], dtype=float) for k, v in probe.items()}
    mode = steps["mode"].to_numpy()
    part = steps["part"].to_numpy() if "part" in steps else np.array(["main"] * n)
    bs = steps["batch_size"].to_numpy()
    span = (steps["gpu_end_s"].to_numpy() - steps["gpu_start_s"].to_numpy()) * 1e3
    step_rows = ((mode == "verify") | (mode == "decode")) & (part == "main")
    if not step_rows.any():
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
        return (f"{label}: {k} launches, span {np.median(span[sel]):.2f} ms, call {med('host_launch_s'):.2f} ms "
                f"(thread CPU {med('host_launch_cpu_s'):.2f} ms), {np.nanmean(sw):.2f} involuntary switches per "
                f"call, GC {gc_ms:.1f} ms in all")

    out = []
    graph = step_rows & (bs <= graph_max_bs)
    eager = step_rows & (bs > graph_max_bs)
    if graph.any():
        out.append(line("graph steps", graph))
    if eager.any():
        ref = None
        if predicted_steps is not None and len(predicted_steps):
            p = predicted_steps
            pm = (((p["mode"] == "verify") | (p["mode"] == "decode")) & (p["batch_size"] > graph_max_bs)).to_numpy()
            if pm.any():
                ref = float(np.median((p["gpu_end_s"].to_numpy() - p["gpu_start_s"].to_numpy())[pm])) * 1e3
        base = ref if ref is not None else float(np.percentile(span[eager], 10))
        how = "predicted median" if ref is not None else "measured p10"
        slow = eager & (span > slow_ratio * base)
        out.append(f"eager steps: {int(slow.sum())} of {int(eager.sum())} above {slow_ratio:g} x {base:.2f} ms ({how})")
        out.append(line("  fast level", eager & ~slow))
        out.append(line("  slow level", slow))
    return out
