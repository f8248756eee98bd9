"""Device profiles measured with the runtime's own code paths: ``specsched profile``.

:func:`profile_device` runs microbenchmarks of the runtime (the proxy model of
:mod:`runtime.model` driven the way :mod:`runtime.engine` drives it, on the streams,
events and graphs of :mod:`runtime.device`) and returns a profile as a plain dict that
validates as :class:`sim.profile.Profile`; :func:`write_profile` writes it atomically.
GPU times come from timing events around each call on the forward stream (median of the
repeats after warm-up; host ``perf_counter`` stamps on CPU); host times from
``time.perf_counter``. Every field's method, shapes, repeats, date and versions go into
``provenance``.

What each field measures (``W`` = spec window, ``c`` = committed context per request):

- Extends and draft injections run as the engine runs them: on CUDA the body replays
  piecewise from graphs at SGLang 0.5.23's token buckets up to ``cuda_graph_max_bs_prefill``
  (runtime/prefill_graph.py), attention eager between pieces; eager on CPU and HIP. Each
  is timed twice apart: device time with the GPU kept busy (``gpu.extend``,
  ``gpu.draft_inject``) and host issue time (``host.launch_per_extend*``,
  ``host.launch_per_inject*``), so the simulator charges each where the loop spends it.
  The device time is taken behind an idle spin, or with ``--extend-lead-ms`` right behind
  that much of the same call back to back, as a busy loop runs it
  (runtime/profile_gpu.py ``_behind_same``; docs/measurements/h200-v32.md).
- ``gpu.extend``: :meth:`ModelRunner.extend` of ``x`` tokens, split into
  ``ceil(x / prompt_len)`` requests of about equal length, all at one prefix ``p``. The
  context axis is the one :meth:`sim.cost_model.CostModel.gpu` queries for an extend:
  mean prefix + half the per-request extend length. Two columns: prefix 0 and prefix
  ``max(contexts)``, each plus ``prompt_len / 2``; every row's prefix is chosen so that its
  batch sits exactly on its column (small batches get a slightly larger prefix).
- ``gpu.draft_inject_per_token_s``: slope of a line through
  ``prepare_inject(sync=False) + inject`` seconds vs tokens (the prefix-0 layouts above).
- ``gpu.verify`` / ``gpu.decode``: one :meth:`ModelRunner.spec_cycle` (forced accept,
  ``graph=True``) / :meth:`ModelRunner.decode` (``graph=True``) by batch size x context,
  committed lengths put back to ``c`` before every step (as :func:`runtime.microbench.bench`).
  Graph buckets sit exactly on the grid's batch sizes and on attention width
  ``round_up(c + W, 64)``; grid points above ``cuda_graph_max_bs`` are graph-replayed too,
  because the simulator multiplies by ``eager_factor`` there.
- ``gpu.attention_tile``: the tile probe (``tile_phase``): graph-replayed decode and spec
  cycle at the largest grid batch <= 64 at five widths (a multiple of 256 at the middle grid
  context, then every 64), each request at ``width - W``; a kernel walking the KV in tiles
  of ``T`` costs width ``w`` as ``round_up(w, T)``
  (:func:`runtime.profile_fit.attention_tile_fit`: 1, 128 or 256).
- ``gpu.attention_padding_cost``: the padding probe (``padding_phase``): graph-replayed
  decode and spec cycle at the same batch with every request at the largest grid context,
  every request at the one below, and one request long with the rest short (its width, the
  short rows reading the padding slot for the rest of it); a padding position's cost as a
  fraction of a real one (:func:`runtime.profile_fit.attention_padding_fit`; 0.72-0.74 on
  an H200 with the 8b proxy by the width sweep, docs/measurements/h200-v29.md).
- ``gpu.eager_factor``: median over (batch, context) of eager / graph spec-cycle time at
  the largest grid batch sizes (those above ``cuda_graph_max_bs`` when there are any).
- ``host.schedule_*`` / ``host.process_*``: intercept + slope (``numpy.polyfit``) of the
  median host time of :meth:`sim.scheduler.Scheduler.schedule` / ``process_result`` with
  ``bs`` running speculative requests.
- ``host.launch_*``: host time of the engine's verify launch (accept draw, forced-accept
  list, ``spec_cycle(graph=True)``, timing events, ring event, result copy) with the GPU
  kept busy by a ``torch.cuda._sleep`` kernel queued first, so the call never waits on
  the device; fitted like the scheduler costs.
- ``host.sync_wakeup_s``: ``Device.host_block`` (``event.synchronize()``) right after a
  tiny kernel minus the same on an already-completed event.
- ``host.cross_queue_penalty_s``: graph-replayed spec cycles with the engine's
  cross-queue wait (schedule stream waits on the previous forward, forward stream waits
  on the schedule stream) minus without; clamped at 0.
- ``host.extend_idle_lead_by_tokens`` / ``extend_idle_lead_s``: per extend-grid token count
  at prefix 0, an extend + injection's idle-queue wall (synchronize, call, synchronize)
  minus its device time with the GPU kept busy: the table, and its median (CPU: 0, no table).
  The simulator charges it to an extend launched with its injection right behind it.
- ``host.extend_own_idle_lead_by_tokens`` / ``host.inject_unprepared_idle_lead_by_tokens``:
  the same idle sequence with timing events before the extend, between the two launches
  and after the inject: the extend's own span and the injection's (its launch prepares it)
  each less its kept-busy device time (runtime/profile_gpu.py ``_idle_lead``; CPU: not
  measured). The simulator charges the extend's own where a slot-expansion block launches
  the injection apart; the injection's is recorded, not charged
  (sim.cost_model.CostModel.idle_lead_s).
- ``host.slot_expansion_s``: the loop's extend, ``prepare_inject(sync=True)``, inject from an
  idle stream; the GPU idle gap between the extend's end and the injection's start (timing
  events) less the wake-up and less ``prepare_inject(sync=False)``'s host time (GPU kept
  busy), which ``host.launch_per_inject_s`` holds; median over the extend tokens at prefix 0.
- ``host.inject_idle_lead_by_tokens``: the same sequence with a timing event after the inject:
  the injection's span on the drained stream less its kept-busy device time, per extend-grid
  token count at prefix 0 (CPU: not measured).
- ``host.ingest_per_request_s``: 0, the runtime has no tokenizer or IPC.

A time budget (``budget_s``) trims repeats (never below 3) if the measurements run long;
on an H200 the 1b preset with ``max_bs`` 64 takes well under it.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from specsched.runtime.device import CPU_THREADS, serve_threads
from specsched.runtime.environment import (
    ALLOW_FLAG,
    check_serializing,
    environment,
    model_sdpa_probe,
)
from specsched.runtime.host_reference import (
    FAST_TERMS,
    PHASE_TERMS,
    REFERENCE_ITERATIONS,
    SLOW_RATIO,
    fast_level,
    launch_term_references,
    speed_summary,
    term_references,
)
from specsched.runtime.model import PRESETS
from specsched.runtime.profile_fit import (
    Fits,
    fit_line,  # noqa: F401  (re-exported)
)
from specsched.runtime.profile_gpu import GpuPhases
from specsched.runtime.profile_harness import (  # noqa: F401  (re-exported)
    CPU_DEFAULTS,
    DEFAULT_BUDGET_S,
    DEFAULT_EXTEND_LEAD_S,
    DEFAULT_PREFILL_GRAPH_TOKENS,
    GPU_DEFAULTS,
    _sig,
    extend_layout,
    grid_batch_sizes,
)
from specsched.runtime.profile_host import HostPhases
from specsched.runtime.profile_level import DEFAULT_RELEVEL_S, LevelPhases
from specsched.runtime.profile_provenance import Provenance
from specsched.sim.cli_types import file_name, nonnegative_int_list, positive_int, positive_int_list
from specsched.sim.errors import ConfigError
from specsched.sim.profile import Profile
from specsched.sim.results import atomic_write_text


class _Profiler(GpuPhases, HostPhases, LevelPhases, Fits, Provenance):
    """One profiling run: the phases in order, the slow host phases again
    (runtime/profile_level.py), then the profile (see :func:`profile_device`)."""

    def __init__(self, *, serializing: dict[str, str], relevel_s: float = DEFAULT_RELEVEL_S, **kw: Any) -> None:
        self.serializing = serializing
        self.relevel_s = relevel_s
        super().__init__(**kw)
        self.sdpa = model_sdpa_probe(self.dev, self.cfg, self.W)
        self.env = environment(self.dev, sdpa=self.sdpa, serializing=self.serializing)
        self.env_line = ("; ".join(f"{k} {v}" for k, v in self.env.items() if k in ("date", "torch", "cuda", "hip"))
                         + f"; {self.env['device']}")

    def run(self) -> dict:
        try:
            for ph in ("extend", "grid", "tile", "extend_after", "eager", "cross_queue", "padding", "launch", "sync", "host"):
                if ph == "padding":  # the last user of the grid's rows; the padding probe reserves its own
                    with self.dev.use("forward"):
                        for row in self.grid_rows:
                            self.runner.free_request(row)
                self._run_phase(ph)
            self._phase("end")
            self.relevel(self.relevel_s)
        finally:
            self.bar.close()
        self.total_s = time.perf_counter() - self.t_start
        return self.assemble()
    def assemble(self) -> dict:
        dev, W = self.dev, self.W
        gpu, host = self.sections()
        prov, model = self.provenance()
        host["reference_work_s"], prov["host.reference_work_s"] = self.speed_record()
        host["reference_work_by_term"], prov["host.reference_work_by_term"] = self.term_speed_record()
        if self.speed.launch_seconds:
            host["launch_reference_work_s"], host["launch_reference_work_by_term"], text = self.launch_speed_record()
            prov["host.launch_reference_work_s"] = text
            prov["host.launch_reference_work_by_term"] = (
                "the launch reference work (host.launch_reference_work_s) at which each launch-path term "
                "(sim/host_speed.py LAUNCH_PATH_TERMS) was measured: its median over the samples of the phase that "
                "measured the term (runtime.host_reference.PHASE_TERMS), the eager issue terms at its fast level; "
                f"a scenario's host.launch_reference_work_s scales each by the run's over its own ({self.env_line})")
        # torch on CPU runs the ops as the launch call issues them; a GPU's launch returns first
        gpu["forward_in_launch"] = not dev.is_gpu
        prov["gpu.forward_in_launch"] = (
            f"{gpu['forward_in_launch']}: the device kind the profile ran on ({self.env_line}); on CPU each forward "
            "runs inside its launch call and the host is busy until it ends (sim/engine.py _launch)")
        gname = (torch.cuda.get_device_name(dev.torch_device) if dev.is_gpu else "cpu")
        slug = re.sub(r"[^a-z0-9]+", "-", gname.lower()).strip("-")
        name = f"{slug}-proxy-{self.preset}-w{W}"
        desc = (f"Measured by `specsched profile` (runtime/profiler.py) on {dev.describe()}: the runtime's "
                f"{self.preset} proxy ({model}), graphs for every grid batch size, host costs of this runtime's "
                f"Python. Times a runtime run (runtime.engine) of the same preset, not a production model.")
        return _sig({"name": name, "device": dev.describe(), "description": desc, "provenance": prov,
                     "gpu": gpu, "host": host})


    def speed_record(self) -> tuple[float, str]:
        """``host.reference_work_s`` (the median of the host-speed samples) and its provenance:
        how many samples, the spread, the slow share and the median per phase, so a reader
        sees whether the host changed speed while the host terms were measured."""
        sp = self.speed
        s = speed_summary(sp.seconds)
        per = ", ".join(f"{ph} {v * 1e3:.3f}" for ph, v in self.phase_medians().items())
        text = (f"host speed while profiling: thread CPU time of runtime.host_reference.reference_work "
                f"({REFERENCE_ITERATIONS} iterations of a pure-Python loop), sampled between measurements "
                f"(at most one per {sp.cadence_s:g} s and one at each phase's start); median of {int(s['samples'])} "
                f"samples, p10 / p90 {s['reference_work_p10_s'] * 1e3:.3f} / {s['reference_work_p90_s'] * 1e3:.3f} ms, "
                f"{s['slow_share']:.0%} of samples above {SLOW_RATIO:g} x the fastest quartile; median per phase "
                f"(ms): {per}; {self.level_text(self.relevel_s)}. A run's summary.json host_speed.reference_work_s "
                f"over this is the run's host speed against this profile's (scenario host.speed_factor conditions a "
                f"prediction on it; {self.env_line})")
        return s["reference_work_s"], text


    def phase_medians(self, seconds: list[float] | None = None) -> dict[str, float]:
        """Median reference-work seconds per profiling phase (phases in order); of
        ``seconds`` (a series sampled with the reference work, e.g. ``speed.launch_seconds``)
        when given."""
        sp = self.speed
        vals = sp.seconds if seconds is None else seconds
        return {ph: float(np.median([c for c, lb in zip(vals, sp.labels, strict=True) if lb == ph]))
                for ph in dict.fromkeys(sp.labels)}

    def launch_speed_record(self) -> tuple[float, dict[str, float], str]:
        """``host.launch_reference_work_s`` (median of the launch reference work's samples,
        runtime.host_reference.LaunchReferenceWork), ``host.launch_reference_work_by_term``
        (runtime.host_reference.launch_term_references: each launch-path term at its phase's
        median, the eager issue terms at the fast level) and the provenance of both."""
        sp = self.speed
        lw = np.asarray(sp.launch_seconds, dtype=float)
        med = self.phase_medians(sp.launch_seconds)
        fast = fast_level(lw)
        by_term = launch_term_references(med, fast)
        per = ", ".join(f"{ph} {v * 1e3:.3f}" for ph, v in med.items())
        ratio = np.asarray(sp.launch_seconds) / np.asarray(sp.seconds)
        text = (f"launch path's speed while profiling: thread CPU time of runtime.host_reference.LaunchReferenceWork "
                f"({sp.launch_work.kind}, queued, never waited for), timed right after each reference-work sample; "
                f"median of {lw.size} samples, p10 / p90 {np.percentile(lw, 10) * 1e3:.3f} / "
                f"{np.percentile(lw, 90) * 1e3:.3f} ms, fast level {fast * 1e3:.3f} ms; median per phase (ms): {per}; "
                f"its ratio to the Python reference work, median {np.median(ratio):.3f} (p10 / p90 "
                f"{np.percentile(ratio, 10):.3f} / {np.percentile(ratio, 90):.3f}). host.launch_reference_work_by_term "
                f"holds each launch-path term (sim/host_speed.py LAUNCH_PATH_TERMS) at its phase's median, the eager "
                f"issue terms at the fast level. A run's summary.json host_speed.launch_reference_work_s over this is "
                f"the run's launch-path speed against this profile's (scenario host.launch_reference_work_s; "
                f"{self.env_line})")
        return float(np.median(lw)), by_term, text

    def term_speed_record(self) -> tuple[dict[str, float], str]:
        """``host.reference_work_by_term`` (runtime.host_reference.term_references: each host
        term at its phase's median reference work, the lower-quartile eager terms at the fast
        level) and its provenance."""
        med, fast = self.phase_medians(), fast_level(self.speed.seconds)
        by_term = term_references(med, fast)
        phases = "; ".join(f"{ph} phase{' (prefix-0 column)' if ph == 'extend' else ''} ({med[ph] * 1e3:.3f} ms): "
                           f"{', '.join(terms)}" for ph, terms in PHASE_TERMS.items() if ph in med)
        text = (f"the reference work (host.reference_work_s) at which each host term was measured: the median of "
                f"the samples of the phase that measured it ({phases}); {', '.join(FAST_TERMS)}: taken as the "
                f"lower quartile of the fast-level eager points / minimum over the eager points, so the fast level, "
                f"the median of the fastest "
                f"quarter of all samples ({fast * 1e3:.3f} ms). A scenario's host.reference_work_s scales each term "
                f"by the run's reference over its own (sim/host_speed.py; {self.env_line})")
        return by_term, text


def profile_device(*, device: str | None, preset: str, spec_window: int, max_bs: int, contexts: list[int],
                   extend_tokens: list[int], cuda_graph_max_bs: int, repeats: int, progress: bool,
                   budget_s: float = DEFAULT_BUDGET_S, batch_sizes: list[int] | None = None,
                   prompt_len: int | None = None, forced_accept: int = 2, seed: int = 0,
                   extend_prefixes: list[int] | None = None, backend: str | None = None,
                   allow_serializing: bool = False,
                   cpu_threads: int | None = CPU_THREADS,
                   cuda_graph_max_bs_prefill: int = DEFAULT_PREFILL_GRAPH_TOKENS,
                   relevel_s: float = DEFAULT_RELEVEL_S, extend_lead_s: float = DEFAULT_EXTEND_LEAD_S) -> dict:
    """Measure a device profile with the runtime's own code paths (module docstring).

    Args:
        device: ``"cuda"``, ``"cpu"`` or None (GPU if available).
        preset: target preset of :data:`runtime.model.PRESETS` (its ``-draft`` is the drafter).
        spec_window: verify window W (>= 2).
        max_bs: largest batch of the verify/decode grids (see :func:`grid_batch_sizes`).
        contexts: committed contexts of the verify/decode grids; the largest is also the
            long prefix of the extend grid.
        extend_tokens: total extend tokens of the extend grid rows; on CUDA the grid also
            takes every prefill graph bucket between the smallest and the largest, up to
            2048 tokens (runtime.profile_harness.extend_grid_tokens: a bucket's cost is not
            linear between rows).
        cuda_graph_max_bs: the server's graph limit (chooses the eager-factor batch sizes
            and is recorded; every grid point is graph-replayed).
        repeats: timed calls per measurement (after :data:`WARMUP` warm-ups).
        progress: show a tqdm progress bar (stderr).
        budget_s: total time budget; repeats are trimmed (not below 3) when it runs short.
        batch_sizes: override the grid batch sizes.
        extend_prefixes: cached prefixes of the extend grid's columns (default 0 and
            ``max(contexts)``); each column's context is prefix + prompt_len / 2.
        allow_serializing: measure even with AMD_SERIALIZE_KERNEL & co. set (stamped in
            provenance); otherwise refused (:func:`runtime.environment.check_serializing`).
        backend: force the device's backend (``"hip"`` on a CUDA or CPU device runs the
            HIP code paths; :class:`runtime.device.Device`).
        prompt_len: per-request extend length of the extend layouts (default
            ``min(1024, max(extend_tokens))``).
        forced_accept: accepted drafts forced per request in the timed spec cycles.
        seed: weight and token seed.
        cuda_graph_max_bs_prefill: largest extend token bucket of the piecewise prefill
            graphs (SGLang 0.5.23's list up to it, runtime/prefill_graph.py); extends and
            injections are timed replayed from them on CUDA as the engine runs them. 0:
            eager extends (a scenario with ``disable_prefill_cuda_graph``). CPU and HIP:
            always eager, as the engine.
        extend_lead_s: > 0: time extends and injections right behind this many seconds of
            the same call back to back, the GPU's state in a busy loop (dense work leaves an
            H200 3-9 % slower for the next forward than the idle spin does,
            docs/measurements/h200-v32.md); the idle-spin times stay in provenance as
            ratios (default :data:`DEFAULT_EXTEND_LEAD_S`, 50 ms). 0: behind the idle spin
            alone. GPU only (CPU: ignored).
        relevel_s: seconds allowed, after every phase ran once, for running a host phase
            again whose reference-work samples sat on the slow level, until they sit on the
            fast one (runtime/profile_level.py; provenance of ``host.reference_work_s``
            says what happened). 0: no re-runs.
        cpu_threads: torch intra-op threads while profiling on CPU (restored afterwards;
            None: leave as is). :data:`runtime.device.CPU_THREADS` (1) by default, as
            ``measure`` and ``validate`` run on CPU: on a loaded CI box OpenMP threads
            spinning against other processes made tiny steps ~100x slower and the timings
            noise. Recorded in provenance (``torch_threads``).

    Returns:
        A plain dict (values to 6 significant digits) that validates with
        ``sim.profile.Profile.model_validate``; ``provenance`` covers every gpu/host field.

    Raises:
        ValueError: bad arguments or preset.
        ConfigError: a serializing variable is set (see ``allow_serializing``).
        RuntimeError: a GPU was asked for and none is available.
    """
    serializing = check_serializing(allow_serializing)
    threads = torch.get_num_threads()
    on_cpu = (device or ("cuda" if torch.cuda.is_available() else "cpu")).startswith("cpu")
    if on_cpu and cpu_threads:
        torch.set_num_threads(cpu_threads)   # the runtime's loop runs with as many (device.serve_threads)
    elif not on_cpu:
        torch.set_num_threads(serve_threads(True))  # as the runtime's loop runs
    try:
        p = _Profiler(device=device, preset=preset, spec_window=spec_window, max_bs=max_bs, contexts=contexts,
                      extend_tokens=extend_tokens, cuda_graph_max_bs=cuda_graph_max_bs, repeats=repeats,
                      progress=progress, budget_s=budget_s, batch_sizes=batch_sizes, prompt_len=prompt_len,
                      extend_prefixes=extend_prefixes, backend=backend, serializing=serializing,
                      forced_accept=forced_accept, seed=seed, cuda_graph_max_bs_prefill=cuda_graph_max_bs_prefill,
                      relevel_s=relevel_s, extend_lead_s=extend_lead_s)
        return p.run()
    finally:
        torch.set_num_threads(threads)


# -------------------------------------------------------------------------------- write
class _FlowListDumper(yaml.SafeDumper):
    """Lists on one line (flow style), mappings as blocks."""


_FlowListDumper.add_representer(
    list, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))


def write_profile(d: dict, path: str | Path) -> Path:
    """Validate ``d`` as a :class:`sim.profile.Profile` and write it as YAML to ``path``
    atomically (a temporary sibling file, fsync, ``os.replace``): readers see the old file
    or the new one, never a partial one; on failure the old file is untouched and the
    temporary file removed. Lists are written in flow style; floats to 6 significant digits.

    Raises:
        pydantic.ValidationError: ``d`` is not a valid profile (nothing written).
    """
    Profile.model_validate(d)
    data = _sig({k: v for k, v in d.items() if k != "path"})
    header = (f"# Device profile written by `specsched profile` (runtime/profiler.py), "
              f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC.\n"
              "# Every value's method, shapes, repeats and versions are in provenance.\n")
    text = header + yaml.dump(data, Dumper=_FlowListDumper, sort_keys=False, width=100, allow_unicode=True)
    out = atomic_write_text(path, text)
    return out


# ---------------------------------------------------------------------------------- CLI
def _fmt_grid(title: str, g: dict) -> str:
    cols = g["context_len"]
    lines = [f"{title} (ms)   " + "".join(f"{'ctx ' + format(c, 'g'):>12}" for c in cols)]
    for x, row in zip(g["x"], g["seconds"], strict=True):
        lines.append(f"  {x:>12g}   " + "".join(f"{v * 1e3:>12.3f}" for v in row))
    return "\n".join(lines)


NOISY_SPREAD = 0.25
"""A grid whose largest (p75-p25)/median is above this is reported by ``specsched profile``."""
FALL_FLOOR = 0.05
"""The least fall of a grid's time from one batch size to the next that is reported (a grid
measured with fewer than 4 repeats per point records no spread)."""


def grid_warning(d: dict, repeats: int) -> str | None:
    """One ``warning:`` line when a verify/decode/draft-step grid of profile ``d`` is noisy: its
    largest (p75-p25)/median (its provenance) is above :data:`NOISY_SPREAD`, or its time
    falls as the batch grows by more than that spread (at least :data:`FALL_FLOOR`, at most
    :data:`NOISY_SPREAD`, so that a noisy grid's falls are named too) in some context column. Either makes the simulator's prices wrong where it reads them (a falling
    segment extrapolated past the grid priced large batches at 0 s); None for a clean profile."""
    found = []
    # draft_step: a difference of two cycles (runtime/profile_gpu.py grid_phase), the
    # noisiest grid; the simulator charges it once per serial step of a chain drafter
    for kind in ("verify", "decode", "draft_step"):
        g = d["gpu"].get(kind)
        if not g:
            continue
        m = re.search(r"Largest \(p75-p25\)/median ([\d.]+) %", str(d.get("provenance", {}).get(f"gpu.{kind}", "")))
        spread = float(m.group(1)) / 100 if m else 0.0
        parts = [f"spread {spread:.0%}"] if spread > NOISY_SPREAD else []
        for j, c in enumerate(g["context_len"]):
            col = [row[j] for row in g["seconds"]]
            for i in range(1, len(col)):
                if col[i - 1] - col[i] > min(max(spread, FALL_FLOOR), NOISY_SPREAD) * col[i - 1]:
                    parts.append(f"ctx {c:g} falls from bs {g['x'][i - 1]:g} {col[i - 1] * 1e3:.3f} ms to bs "
                                 f"{g['x'][i]:g} {col[i] * 1e3:.3f} ms")
        if parts:
            found.append(f"{kind} grid: {', '.join(parts)}")
    if not found:
        return None
    return (f"warning: profile {d['name']} looks noisy ({'; '.join(found)}): the simulator prices steps off these "
            f"points; re-run with more --repeats (now {repeats}) or on a quieter machine")


def add_backend_args(p: argparse.ArgumentParser) -> None:
    """``--backend hip`` (run the HIP code paths on this device: cpu-as-hip, cuda-as-hip) and
    ``--allow-serializing`` (measure with AMD_SERIALIZE_KERNEL & co. set, stamped)."""
    p.add_argument("--backend", choices=("hip",), default=None,
                   help="force the HIP code paths (stream layout, waits, barrier guard) on this device")
    p.add_argument(ALLOW_FLAG, dest="allow_serializing", action="store_true",
                   help="measure even with AMD_SERIALIZE_KERNEL, AMD_SERIALIZE_COPY, HIP_LAUNCH_BLOCKING or "
                        "CUDA_LAUNCH_BLOCKING set (results stamped); refused otherwise")


def cmd_profile(args: argparse.Namespace) -> int:
    """``specsched profile``: measure, write the profile, print a summary."""
    if args.device is None:
        raise ConfigError("<command line>", "--device", None, "required to measure (cuda or cpu); or use --analytic")
    defaults = GPU_DEFAULTS if args.device == "cuda" else CPU_DEFAULTS
    max_bs = args.max_bs or defaults["max_bs"]
    contexts = args.contexts or defaults["contexts"]
    ext = args.extend_tokens or defaults["extend_tokens"]
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("<command line>", "--device", args.device, "torch.cuda.is_available() is False here; use --device cpu")
    if args.relevel_budget < 0:
        raise ConfigError("<command line>", "--relevel-budget", args.relevel_budget, "must be >= 0 seconds")
    if args.window < 2:
        raise ConfigError("<command line>", "--window", args.window, "must be >= 2 (a speculative cycle)")
    if not 0 <= args.extend_lead_ms <= 1000:
        raise ConfigError("<command line>", "--extend-lead-ms", args.extend_lead_ms, "must be between 0 and 1000 ms")
    if args.preset not in PRESETS or args.preset.endswith("-draft"):
        raise ConfigError("<command line>", "--preset", args.preset,
                          f"allowed: {', '.join(k for k in PRESETS if not k.endswith('-draft'))}")
    if args.out:   # before the measurements, not after them
        from specsched.sim.profile import refuse_replacing_non_profile

        refuse_replacing_non_profile(args.out)
    t0 = time.perf_counter()
    from specsched.runtime.cli_commands import device_memory_refused

    try:
        # the device out of memory: one line naming the phase and the flags to lower (exit 2);
        # nothing is written before the profile is whole
        with device_memory_refused("<command line>"):
            d = profile_device(device=args.device, preset=args.preset, spec_window=args.window, max_bs=max_bs,
                               contexts=contexts, extend_tokens=ext, cuda_graph_max_bs=args.graph_max_bs,
                               repeats=args.repeats, progress=not args.no_progress, budget_s=args.budget,
                               prompt_len=args.prompt_len, extend_prefixes=args.extend_prefixes,
                               backend=args.backend, allow_serializing=args.allow_serializing,
                               cuda_graph_max_bs_prefill=(0 if args.disable_prefill_cuda_graph
                                                          else args.graph_max_bs_prefill),
                               relevel_s=args.relevel_budget, extend_lead_s=args.extend_lead_ms / 1e3)
    except KeyboardInterrupt:
        from specsched.runtime.cli_commands import nothing_written

        raise KeyboardInterrupt(f"profiling stopped, {nothing_written(*([Path(args.out)] if args.out else []))}") from None
    if args.name:
        d["name"] = args.name
    out = Path(args.out) if args.out else Path("profiles") / f"{d['name']}.yaml"
    write_profile(d, out)
    g, h = d["gpu"], d["host"]
    print(f"{d['name']}: {d['device']}")
    print(_fmt_grid("extend", g["extend"]))
    print(_fmt_grid("verify", g["verify"]))
    print(_fmt_grid("decode", g["decode"]))
    print(f"draft inject {g['draft_inject_per_token_s'] * 1e6:.4f} us/token; eager factor {g['eager_factor']:.3f}")
    print("host: " + ", ".join(f"{k} {v * 1e6:.2f} us" for k, v in h.items() if isinstance(v, int | float)))
    for key, label in (("extend_idle_lead_by_tokens", "extend + injection"),
                       ("extend_own_idle_lead_by_tokens", "extend own"),
                       ("inject_unprepared_idle_lead_by_tokens", "unprepared injection"),
                       ("inject_idle_lead_by_tokens", "injection")):
        if lead := h.get(key):
            print(f"{label} idle lead: " + ", ".join(f"{t:g} tok {s * 1e3:.3f} ms"
                                                     for t, s in zip(lead["tokens"], lead["seconds"], strict=True)))
    for lead, table in (g.get("extend_after_step") or {}).items():
        print(f"extend after {lead} steps: " + ", ".join(f"{t:g} tok x{r:.3f}"
                                                       for t, r in zip(table["tokens"], table["ratios"], strict=True)))
    print(f"profiled in {time.perf_counter() - t0:.1f} s; wrote {out}")
    if (warning := grid_warning(d, args.repeats)) is not None:
        print(warning, file=sys.stderr)
    return 0


def register_profile_command(sub: Any) -> argparse.ArgumentParser:
    """Register ``specsched profile`` on an argparse subparsers object; returns its parser.

    ``specsched profile --device {cuda,cpu} [--preset 1b] [--window 6] [--max-bs 64]
    [--contexts 1024,4096] [--extend-tokens 256,1024,4096,16384] [--graph-max-bs 256]
    [--repeats 20] [--out profiles/<name>.yaml]``; on ``--device cpu`` the size defaults
    shrink (max-bs 8, contexts 64,256, extend tokens 16,64,256).
    """
    p = sub.add_parser("profile", help="measure a device profile with the runtime's microbenchmarks",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default=None, help="where to measure (required unless --analytic)")
    p.add_argument("--preset", default="1b", help="model preset of runtime.model.PRESETS (default 1b)")
    p.add_argument("--window", type=int, default=6, help="speculative window W = gamma + 1 (default 6)")
    p.add_argument("--max-bs", type=positive_int, default=None, help="largest grid batch size (default 64; cpu 8)")
    p.add_argument("--contexts", type=positive_int_list, default=None,
                   help="committed contexts of the verify/decode grids (default 1024,4096; cpu 64,256)")
    p.add_argument("--extend-tokens", type=positive_int_list, default=None,
                   help="extend grid token counts (default 256,1024,4096,16384; cpu 16,64,256); on CUDA every "
                        "prefill graph bucket between them up to 2048 tokens is added")
    p.add_argument("--prompt-len", type=positive_int, default=None,
                   help="per-request extend length in the extend grid (default min(1024, max extend tokens))")
    p.add_argument("--graph-max-bs", type=positive_int, default=256, help="the server's cuda_graph_max_bs (default 256)")
    p.add_argument("--graph-max-bs-prefill", type=positive_int, default=DEFAULT_PREFILL_GRAPH_TOKENS,
                   help="the server's cuda_graph_max_bs_prefill: largest extend token bucket replayed piecewise "
                        f"(default {DEFAULT_PREFILL_GRAPH_TOKENS}, the default chunked_prefill_size)")
    p.add_argument("--disable-prefill-cuda-graph", action="store_true",
                   help="time extends eager, for scenarios with server.disable_prefill_cuda_graph")
    p.add_argument("--repeats", type=positive_int, default=20, help="timed calls per measurement (default 20)")
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S,
                   help=f"total time budget in seconds; trims repeats if exceeded (default {DEFAULT_BUDGET_S:g})")
    p.add_argument("--relevel-budget", type=float, default=DEFAULT_RELEVEL_S,
                   help="seconds allowed after the phases ran for running a host phase (launch, sync, host, extend) "
                        "again while its reference-work samples sit on the slow level (runtime/profile_level.py; "
                        f"default {DEFAULT_RELEVEL_S:g}: no re-runs)")
    p.add_argument("--name", default=None, type=file_name, help="profile name (default <gpu>-proxy-<preset>-w<window>)")
    p.add_argument("--out", default=None, help="output YAML (default profiles/<name>.yaml)")
    p.add_argument("--extend-prefixes", type=nonnegative_int_list, default=None,
                   help="cached prefixes of the extend grid's columns (default 0 and the largest context)")
    add_backend_args(p)
    p.add_argument("--extend-lead-ms", type=float, default=DEFAULT_EXTEND_LEAD_S * 1e3,
                   help="time extends and injections right behind this many ms of the same call back to back, "
                        f"as a busy loop runs them (default {DEFAULT_EXTEND_LEAD_S * 1e3:g}); 0: behind an idle spin "
                        "(GPU only)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_profile)
    return p


if __name__ == "__main__":
    _ap = argparse.ArgumentParser(prog="python -m specsched.runtime.profiler")
    register_profile_command(_ap.add_subparsers(dest="cmd", required=True))
    _a = _ap.parse_args(["profile", *sys.argv[1:]])
    try:
        sys.exit(_a.func(_a))
    except ConfigError as _e:
        print(f"profile: error: {_e}", file=sys.stderr)
        sys.exit(2)
