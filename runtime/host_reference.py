"""The host's speed, read as the time of a fixed reference work, while profiling and serving.

On rented H200 virtual machines the same Python work took 1.1 or 2.0 ms of the thread's own
CPU time in periods of seconds, with no steal, throttling, clock change or preemption a
guest can see (docs/measurements/h200-v10.md, benchmarks/host_speed_probe.py): the only way
to read the host's speed is to time fixed work. :func:`reference_work` is that work (a
pure-Python loop, no allocation that survives it, no I/O, no GPU), and
:class:`SpeedSampler` times it in the calling thread's CPU time (``time.thread_time``: a
thread off its core is not counted, so the reading is the core's speed for this thread,
not the machine's load), at most once per ``cadence_s``:

- the profiler samples between its measurements and stores the median as the profile's
  ``host.reference_work_s``;
- the runtime's loop samples right after a launch call returns (:class:`runtime.host_probe.HostProbe`),
  where the GPU is busy with the forward just queued; at the default cadence (0.25 s)
  and about 0.3 ms a sample the loop loses about 0.1 % of its host time;
- a run's ``summary.json`` ``host_speed`` holds the samples' median, spread and slow share,
  and the factor against a profile's reference (:func:`speed_summary`), which conditions a
  prediction (scenario ``host.speed_factor``, sim/host_speed.py).

The launch path has a speed of its own. The engine's launch call is torch dispatch and the
driver's kernel launch more than the interpreter's arithmetic, and across two H200 machines
its serial host path ran 1.3-1.5x further apart than the Python reference work said
(docs/measurements/h200-v39.md). :class:`LaunchReferenceWork` is a second fixed work of
that kind (small torch ops and host-to-device copies on the device the run uses, queued,
never waited for); a sampler given one times it beside the Python work at every sample
(``launch_seconds``), the profiler stores its median as ``host.launch_reference_work_s``,
a run's ``host_speed`` its ``launch_reference_work_s``, and a scenario's
``host.launch_reference_work_s`` conditions the launch path's terms on it
(sim/host_speed.py ``LAUNCH_PATH_TERMS``).
"""

from __future__ import annotations

import time

import numpy as np

REFERENCE_ITERATIONS = 5000
"""Iterations of :func:`reference_work`: about 0.27 ms at the fast level of an H200 host's
2.1 GHz Xeon (a quarter of benchmarks/host_speed_probe.py's loop), short enough to sample
often and long enough to time in thread CPU (ns resolution on Linux)."""

DEFAULT_CADENCE_S = 0.25
"""Seconds between two samples in a measured run: several per second, so a slow stretch of
seconds shows, at about 0.1 % of the loop's host time."""

SLOW_RATIO = 1.4
"""A sample is slow when above this multiple of the run's fastest-quartile median (the two
levels seen on H200 hosts are 1.8x apart)."""


def reference_work(iterations: int = REFERENCE_ITERATIONS) -> int:
    """The fixed work: ``iterations`` rounds of integer arithmetic in the interpreter (the
    kind of work a scheduler and a launch call do). Returns its checksum."""
    s = 0
    for i in range(iterations):
        s += i * i % 7
    return s


LAUNCH_REFERENCE_ROUNDS = 2
"""Rounds of :class:`LaunchReferenceWork`'s op block (18 torch calls each): about 0.2-0.3 ms
of thread CPU on an H200 host's CPU, the Python reference work's order."""

LAUNCH_REFERENCE_NUMEL = 256
"""Elements of each tensor the launch reference work touches: small enough that its kernels
take microseconds of GPU time (it runs at most once per sampler cadence)."""


class LaunchReferenceWork:
    """The launch path's fixed reference work: torch dispatch and kernel launches, timed by
    :class:`SpeedSampler` in thread CPU beside :func:`reference_work`.

    Each call issues :data:`LAUNCH_REFERENCE_ROUNDS` rounds of 2 host-to-device copies
    (``non_blocking`` from pinned memory on a GPU), 12 elementwise ops and 4 ``index_select``
    on preallocated tensors of :data:`LAUNCH_REFERENCE_NUMEL` elements, into ``out=`` buffers
    (no allocation), on a stream of its own on a GPU, so they queue beside the run's forwards
    and neither waits for nor delays them by more than their few microseconds of kernels. It
    never synchronizes: what it costs the host is the engine's launch call's kind of work
    (Python to ATen dispatch, the driver's launch, the copy engine's enqueue). On CPU the ops
    run inline (a CPU run's launch path is the same ops' CPU kernels).

    Args:
        device: the ``torch.device`` the run's forwards use.
        dtype: the activations' dtype.
    """

    def __init__(self, device, dtype) -> None:
        import torch

        self._torch = torch
        gpu = device.type == "cuda"
        n = LAUNCH_REFERENCE_NUMEL
        self.a = torch.ones(n, device=device, dtype=dtype)
        self.b = torch.full((n,), 0.5, device=device, dtype=dtype)
        self.c = torch.empty(n, device=device, dtype=dtype)
        self.d = torch.empty(n // 4, device=device, dtype=dtype)
        self.idx = torch.arange(0, n, 4, device=device)
        self.host = torch.zeros(n, dtype=dtype, pin_memory=gpu)
        self.stream = torch.cuda.Stream(device) if gpu else None
        self.kind = (f"{LAUNCH_REFERENCE_ROUNDS} x (2 host-to-device copies, 12 elementwise ops, 4 index_select) "
                     f"of {n} {str(dtype).removeprefix('torch.')} elements on {device.type}")

    def __call__(self) -> None:
        t = self._torch
        if self.stream is None:
            self._ops(t)
            return
        with t.cuda.stream(self.stream):
            self._ops(t)

    def _ops(self, t) -> None:
        a, b, c, d, idx, host = self.a, self.b, self.c, self.d, self.idx, self.host
        for _ in range(LAUNCH_REFERENCE_ROUNDS):
            c.copy_(host, non_blocking=True)
            for _ in range(3):
                t.add(a, b, out=c)
                t.mul(c, b, out=c)
                t.sub(c, a, out=c)
                t.add(c, a, alpha=0.5, out=c)
            for _ in range(4):
                t.index_select(c, 0, idx, out=d)
            c.copy_(host, non_blocking=True)


class SpeedSampler:
    """Samples of :func:`reference_work`'s thread CPU time, at most one per ``cadence_s``.

    Use :meth:`sample` to take one now, :meth:`maybe_sample` from a loop (takes one when
    ``cadence_s`` has passed since the last), :attr:`times` / :attr:`seconds` to read them
    (``perf_counter`` start, thread CPU seconds), :meth:`reset` between runs.

    Args:
        cadence_s: seconds between two samples of :meth:`maybe_sample`.
        label: the label of the next samples (:attr:`labels`; the profiler's phase).
        launch_work: a :class:`LaunchReferenceWork` (or any callable) to time right after the
            Python work at every sample: :attr:`launch_seconds`, one per sample. None: not
            timed (:attr:`launch_seconds` stays empty).
    """

    def __init__(self, cadence_s: float = DEFAULT_CADENCE_S, label: str = "", launch_work=None) -> None:
        self.cadence_s = cadence_s
        self.label = label
        self.launch_work = launch_work
        self.reset()

    def reset(self) -> None:
        """Drop every sample."""
        self.times: list[float] = []
        self.seconds: list[float] = []
        self.launch_seconds: list[float] = []
        self.labels: list[str] = []
        self._next = 0.0

    def sample(self) -> float:
        """Time one reference work now (thread CPU seconds) and keep it; then the launch
        reference work's, when the sampler has one."""
        w0, c0 = time.perf_counter(), time.thread_time()
        reference_work()
        c = time.thread_time() - c0
        if self.launch_work is not None:
            c1 = time.thread_time()
            self.launch_work()
            self.launch_seconds.append(time.thread_time() - c1)
        self.times.append(w0)
        self.seconds.append(c)
        self.labels.append(self.label)
        self._next = w0 + self.cadence_s
        return c

    def maybe_sample(self) -> None:
        """Take a sample when ``cadence_s`` has passed since the last one."""
        if time.perf_counter() >= self._next:
            self.sample()


PHASE_TERMS = {
    "extend": ("host.launch_per_extend_s", "host.launch_per_extend_token_s", "host.launch_per_inject_s",
               "host.launch_per_inject_token_s", "host.extend_idle_lead_s", "host.extend_idle_lead_by_tokens",
               "host.slot_expansion_s", "host.inject_prepare_s", "host.inject_idle_lead_by_tokens",
               "host.extend_own_idle_lead_by_tokens", "host.inject_unprepared_idle_lead_by_tokens",
               "host.launch_per_extend_eager_s", "host.launch_per_inject_eager_s"),
    "launch": ("host.launch_s", "host.launch_per_req_s", "host.decode_launch_s", "host.decode_launch_per_req_s",
               "host.launch_tail_s", "host.launch_tail_per_req_s",
               "host.result_path_s", "host.result_path_per_req_s", "host.recv_path_s", "host.recv_path_per_req_s"),
    "sync": ("host.sync_wakeup_s",),
    "host": ("host.schedule_s", "host.schedule_per_req_s", "host.process_s", "host.process_per_req_s",
             "host.decode_schedule_s", "host.decode_schedule_per_req_s", "host.decode_process_s",
             "host.decode_process_per_req_s"),
}
"""The profiler phase (runtime/profiler.py ``_Profiler.run``) that measures each host term,
the medians or fits of its repeats: the term sits at that phase's median reference work.
The extend phase times the extend and injection issue, the idle-queue lead and the slot
expansion, all at its prefix-0 column (runtime/profile_gpu.py ``extend_phase``; the samples
of its other columns, GPU time only, are labelled "extend prefix columns" and left out); the
launch phase the verify launch call and the publish-wait stall (runtime/profile_host.py
``launch_phase``, ``stall_phase``)."""

FAST_TERMS = ("gpu.eager_host_issue_s", "gpu.eager_overhead_s")
"""Terms taken as the lower quartile of the eager phase's fast-level points or the minimum over
its points (runtime/profile_fit.py ``eager_fit``, ``fast_level_issue``): the fast points, so the
profile's fast level."""


def fast_level(seconds) -> float:
    """The host's fast level from reference-work samples: the median of the fastest
    quarter (at least one sample). Raises ValueError when there is none."""
    a = np.sort(np.asarray(seconds, dtype=float))
    a = a[np.isfinite(a)]
    if a.size == 0:
        raise ValueError("no reference-work samples")
    return float(np.median(a[: max(1, a.size // 4)]))


def term_references(phase_medians: dict[str, float], fast_s: float) -> dict[str, float]:
    """``host.reference_work_by_term`` of a profile: per host term (:data:`PHASE_TERMS`), the
    median reference work of the phase that measured it; ``fast_s`` (:func:`fast_level`) for
    :data:`FAST_TERMS`. Phases without samples leave their terms out (they then sit at the
    profile's ``host.reference_work_s``)."""
    out = {t: float(phase_medians[ph]) for ph, terms in PHASE_TERMS.items() if ph in phase_medians for t in terms}
    out.update(dict.fromkeys(FAST_TERMS, float(fast_s)))
    return out


def launch_term_references(phase_medians: dict[str, float], fast_s: float) -> dict[str, float]:
    """``host.launch_reference_work_by_term`` of a profile: :func:`term_references` of the
    launch reference work's samples (``phase_medians`` and ``fast_s`` of
    :attr:`SpeedSampler.launch_seconds`), for the launch path's terms only
    (sim/host_speed.py ``LAUNCH_PATH_TERMS``: the terms a scenario's
    ``host.launch_reference_work_s`` conditions)."""
    from specsched.sim.host_speed import LAUNCH_PATH_TERMS

    return {t: v for t, v in term_references(phase_medians, fast_s).items() if t in LAUNCH_PATH_TERMS}


def term_references_from_provenance(profile) -> dict[str, float] | None:
    """:func:`term_references` read back from the provenance text of ``host.reference_work_s``
    of a profile written before the structured field (rounds 11-13): its "median per phase
    (ms): ..." list, and its p10 as the fast level (the fastest quarter's median is not in
    the text; the p10 sits in that quarter). None when the text has no per-phase medians."""
    import re

    text = (getattr(profile, "provenance", None) or {}).get("host.reference_work_s", "")
    num = r"\d+(?:\.\d+)?"
    m = re.search(rf"median per phase \(ms\): ((?:[a-z_]+ {num}(?:, )?)+)", text)
    p10 = re.search(rf"p10 / p90 ({num}) / ({num}) ms", text)
    if not m or not p10:
        return None
    phases = {ph: float(v) * 1e-3 for ph, v in re.findall(rf"([a-z_]+) ({num})", m.group(1))}
    return term_references(phases, float(p10.group(1)) * 1e-3)


def speed_summary(seconds: list[float] | np.ndarray, reference_s: float | None = None,
                  launch_seconds: list[float] | np.ndarray | None = None,
                  launch_reference_s: float | None = None) -> dict[str, float]:
    """A run's host speed from its samples: ``samples``, ``reference_work_s`` (median),
    ``reference_work_p10_s`` / ``_p90_s``, ``slow_share`` (share of samples above
    :data:`SLOW_RATIO` x the fastest quartile's median) and, given the profile's
    ``reference_s``, ``speed_factor`` (median / reference: > 1 means host work took longer
    than when the profile was measured). Given ``launch_seconds`` (the
    :class:`LaunchReferenceWork` samples), ``launch_reference_work_s`` (median) and its
    ``_p10_s`` / ``_p90_s``; with the profile's ``launch_reference_s`` also
    ``launch_path_factor`` (median / that). Empty without samples."""
    a = np.asarray(seconds, dtype=float)
    a = a[np.isfinite(a)]
    if a.size == 0:
        return {}
    out = {"samples": float(a.size), **_spread(a, "reference_work"),
           "slow_share": float(np.mean(a > SLOW_RATIO * fast_level(a)))}
    if reference_s:
        out["speed_factor"] = out["reference_work_s"] / reference_s
    la = np.asarray(launch_seconds if launch_seconds is not None else [], dtype=float)
    la = la[np.isfinite(la)]
    if la.size:
        out.update(_spread(la, "launch_reference_work"))
        if launch_reference_s:
            out["launch_path_factor"] = out["launch_reference_work_s"] / launch_reference_s
    return out


def _spread(a: np.ndarray, name: str) -> dict[str, float]:
    """``{name}_s`` (median), ``{name}_p10_s`` and ``{name}_p90_s`` of samples ``a``."""
    return {f"{name}_s": float(np.median(a)), f"{name}_p10_s": float(np.percentile(a, 10)),
            f"{name}_p90_s": float(np.percentile(a, 90))}


def launch_call_reference(profile, mode: str = "verify") -> tuple[np.ndarray, np.ndarray] | None:
    """The profile's own timing of the engine's launch call per batch size, as (batch sizes,
    seconds); None when the profile does not carry it (analytic or hand-written ones, and for
    ``mode="decode"`` profiles made before the decode stall loop's calls were recorded).

    ``mode="verify"``: the medians its provenance of ``host.launch_s`` gives after "engine's
    verify launch" (runtime/profile_provenance.py writes "medians bs B T us, ..."): the same
    call the runtime's loop makes for every graph-replayed verify. ``mode="decode"``: the
    thread CPU medians of the decode launch calls in the queued stall loop (provenance of
    ``host.decode_launch_s``: "bs B dblock W / C, dqueued W / C"), the call a plain-decoding
    server's loop makes for every graph-replayed decode step. A run's call times over these,
    at the same batch size, read the run's host speed against the profile's without a
    reference work. The launch path is torch and driver work more than Python: on two H200
    machines it ran 1.3-1.5x further apart than the reference work said
    (docs/measurements/h200-v39.md). The engine's call holds different work in its overlap
    and no-overlap loops (2.34 and 3.27 ms of thread CPU on one machine), so this reading
    sits beside the reference work's in checks.md; nothing is conditioned on it.

    Raises:
        ValueError: ``mode`` is neither "verify" nor "decode"."""
    import re

    prov = getattr(profile, "provenance", None) or {}
    if mode == "verify":
        _, _, tail = prov.get("host.launch_s", "").partition("engine's verify launch")
        m = re.search(r"medians ((?:bs \d+ [\d.e+]+ us(?:, )?)+)", tail)
        pairs = re.findall(r"bs (\d+) ([\d.e+]+) us", m.group(1)) if m else []
    elif mode == "decode":
        _, _, tail = prov.get("host.decode_launch_s", "").partition("the launch call in these loops")
        pairs = re.findall(r"bs (\d+) dblock [\d.e+]+ us / [\d.e+]+ us, dqueued [\d.e+]+ us / ([\d.e+]+) us", tail)
    else:
        raise ValueError(f"mode = {mode!r}: allowed: verify, decode")
    if not pairs:
        return None
    bs = np.array([float(b) for b, _ in pairs])
    s = np.array([float(t) * 1e-6 for _, t in pairs])
    order = np.argsort(bs)
    return bs[order], s[order]


def launch_speed_factor(mode, part, batch_size, cpu_s, graph_max_bs: int,
                        reference: tuple[np.ndarray, np.ndarray], step_mode: str = "verify") -> float | None:
    """A run's host speed from its own launch calls: the median over its graph-replayed
    launches of ``step_mode`` (``mode == step_mode``, ``part == "main"``, batch <=
    ``graph_max_bs``) of the call's thread CPU seconds over the profile's call at the same
    batch size (:func:`launch_call_reference` of the same mode, linear between its sizes, end
    values outside). None when the run has no such call. Arrays are per launch
    (runtime/host_probe.py columns)."""
    mode, part = np.asarray(mode), np.asarray(part)
    bs, cpu = np.asarray(batch_size, dtype=float), np.asarray(cpu_s, dtype=float)
    sel = (mode == step_mode) & (part == "main") & (bs <= graph_max_bs) & np.isfinite(cpu)
    if not sel.any():
        return None
    return float(np.median(cpu[sel] / np.interp(bs[sel], *reference)))
