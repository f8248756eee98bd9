"""``specsched doctor``: a first-run check of a machine before trusting its measurements.

Runs in a few minutes on a GPU (seconds on CPU) and prints, for each check, its figure and
what it means for a profile (hip-vs-cuda.md; the same commands on CUDA and ROCm, since
ROCm keeps the ``torch.cuda`` API):

1. backend and versions (torch, CUDA/HIP, driver, cuDNN), queue settings, stream
   priorities, serializing variables;
2. graph capture of the proxy's decode and speculative cycle under
   ``torch.cuda.set_sync_debug_mode("error")`` (ROCm before 7.0 could accept a syncing op
   during capture that CUDA rejects);
3. which SDPA backend runs for the proxy's masked attention on its real shapes;
4. event record cost with and without timing (on HIP every record is a barrier packet);
5. host-block vs queued wait per step on a graph (what ``sync_mode`` changes);
6. ``repeat_interleave`` without and with ``output_size`` behind queued work (the DSpark
   slot-expansion sync);
7. the cross-queue penalty: a graph replayed with a wait pending on the schedule stream vs
   without, with the stream-to-queue settings that decide it on HIP.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from specsched.runtime.device import Device, default_bs_buckets
from specsched.runtime.environment import check_serializing, environment, model_sdpa_probe
from specsched.runtime.memory import Allocation, allocating, is_device_oom
from specsched.runtime.model import PRESETS, LlamaProxy, ModelRunner, draft_preset
from specsched.runtime.sync_checker import SyncChecker, cuda_sync_debug
from specsched.sim.atomic import atomic_write_text


def _median_s(fn: Callable[[], float], n: int) -> float:
    return statistics.median(fn() for _ in range(n))


class Doctor:
    """The checks of :mod:`runtime.doctor` on one device (results in :attr:`rows`)."""

    def __init__(self, device: str, preset: str, backend: str | None, repeats: int, allow_serializing: bool) -> None:
        self.serializing = check_serializing(allow_serializing)
        self.dev = Device(device, backend=backend, measure=True)
        self.preset, self.n = preset, repeats
        self.rows: list[tuple[str, str, str]] = []
        self.window = 6
        cfg, dcfg = PRESETS[preset], PRESETS[draft_preset(preset)]
        self.cfg = cfg
        with self.dev.use("forward"), allocating(self.allocation(
                f"the proxy models of preset {preset} (target and drafter) and their KV pool of 16 request rows "
                "of 1088 positions")):
            t = LlamaProxy(cfg, seed=0, device=self.dev.torch_device, dtype=self.dev.dtype)
            d = LlamaProxy(dcfg, seed=1, device=self.dev.torch_device, dtype=self.dev.dtype)
            self.runner = ModelRunner(t, self.dev, max_reqs=16, max_context=1024 + 64, drafter=d,
                                      spec_window=self.window, bs_buckets=default_bs_buckets(16),
                                      ctx_buckets=[1024 + 64])
            self.rows_ = [self.runner.add_request() for _ in range(8)]
            self.runner.pool.reserve(self.rows_, [1024] * 8)
            rt = self.dev.h2d(self.rows_)
            self.runner.pool.seq_lens.index_fill_(0, rt, 512)
            self.runner.observe_lengths(self.rows_, [512] * 8)

    def allocation(self, what: str) -> Allocation:
        """What a block of the checks allocates (:class:`runtime.memory.allocating`): the
        checks' shapes are fixed (8 requests, contexts up to 1024), so a device out of memory is
        said with ``--preset`` to lower (:func:`cmd_doctor`)."""
        return Allocation(what, "--preset", self.preset, ("a smaller --preset",), self.dev.torch_device)

    def add(self, check: str, figure: str, meaning: str) -> None:
        self.rows.append((check, figure, meaning))

    def _step(self) -> None:
        r = self.runner
        r.pool.seq_lens.index_fill_(0, self.dev.h2d(self.rows_), 512)
        r.observe_lengths(self.rows_, [512] * 8)
        r.spec_cycle(self.rows_, [2] * 8, graph=True)

    # ------------------------------------------------------------------ checks
    def versions(self) -> None:
        env = environment(self.dev, serializing=self.serializing)
        self.add("backend", f"{env['backend']} ({env['device']})",
                 "cuda-as-hip / cpu-as-hip run the HIP code paths on this device; hip is a ROCm build")
        self.add("versions", f"torch {env['torch']}, cuda {env['cuda']}, hip {env['hip']}, driver {env['driver']}, "
                 f"cudnn {env.get('cudnn', 'n/a')}", "record with every profile: a penalty measured on one runtime "
                 "version may not carry to another")
        self.add("queue settings", env["queue_settings"], "on HIP, GPU_MAX_HW_QUEUES (default 4) hardware queues per "
                 "priority: more streams than queues share one and serialize")
        self.add("stream priorities", env["stream_priorities"], "schedule/forward/copy streams, created once")
        self.add("serializing variables", env["serializing_vars"], "any set: overlap disappears; measurements refused "
                 "unless --allow-serializing")

    def capture(self) -> None:
        ok, why = True, ""
        try:
            if self.dev.is_gpu:
                with cuda_sync_debug("error"):
                    self.runner.capture("spec", 8, 1024, forced=True)
                    self.runner.capture("decode", 8, 1024, forced=False)
            else:
                with SyncChecker(raise_on_sync=True):
                    self.runner.capture("spec", 8, 1024, forced=True)
        except Exception as e:  # a syncing op in the captured step, or a capture failure
            if is_device_oom(e):
                raise   # not the step's syncing: the device is full (cmd_doctor says it)
            ok, why = False, f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
        self.add("graph capture under sync checker", "ok" if ok else f"FAILED ({why})",
                 "a step that syncs the host cannot be replayed as a graph; fix before profiling")

    def sdpa(self) -> None:
        got = model_sdpa_probe(self.dev, self.cfg, self.window)
        self.add("SDPA backend that ran", ", ".join(f"{k} {v}" for k, v in got.items()),
                 "math means no fused kernel: attention timings then overstate a real server's (with a boolean mask "
                 "flash is never eligible on ROCm)")

    def event_cost(self) -> None:
        dev = self.dev
        if not dev.is_gpu:
            self.add("event record cost", "n/a on CPU", "")
            return
        res = {}
        with dev.use("forward"):
            x = torch.zeros(1, device=dev.torch_device)
            for timing in (False, True):
                evs = [torch.cuda.Event(enable_timing=timing) for _ in range(64)]

                def rec(evs=evs) -> float:
                    x.add_(1)
                    t0 = time.perf_counter()
                    for e in evs:
                        e.record()
                    return (time.perf_counter() - t0) / len(evs)

                res[timing] = _median_s(rec, self.n)
                dev.synchronize("doctor")
        self.add("event record (host)", f"{res[False] * 1e6:.2f} us plain, {res[True] * 1e6:.2f} us timing",
                 "per record; on HIP each record is also a barrier packet with a cache flush: the engine counts records "
                 "per step (summary event_records_per_step)")

    def host_block_vs_queued(self) -> None:
        dev = self.dev
        self.runner.capture("spec", 8, 1024, forced=True)
        walls = {}
        with dev.use("forward"):
            for mode in ("queued", "block", "queued", "block"):
                for _ in range(3):
                    self._step()
                dev.synchronize("doctor")
                prev = None
                t0 = time.perf_counter()
                for _ in range(self.n):
                    if mode == "block" and prev is not None:
                        dev.host_block(prev, "doctor")
                    self._step()
                    prev = dev.record("forward")
                dev.synchronize("doctor")
                walls.setdefault(mode, []).append((time.perf_counter() - t0) / self.n)
        q, b = min(walls["queued"]), min(walls["block"])
        self.add("host_block vs queued wait per step (bs 8, ctx 512, graph)", f"{b * 1e3:.3f} vs {q * 1e3:.3f} ms "
                 f"(+{(b - q) * 1e3:.3f} ms)", "blocking costs GPU + host per step, queued max(GPU, host): the profile's "
                 "host.launch_s + sync_wakeup_s model this stall")

    def repeat_interleave(self) -> None:
        dev = self.dev
        if not dev.is_gpu or not hasattr(torch.cuda, "_sleep"):
            self.add("repeat_interleave sync", "n/a on CPU", "")
            return
        rep = torch.full((64,), 4, device=dev.torch_device, dtype=torch.int64)
        vals = torch.arange(64, device=dev.torch_device)
        out = {}
        with dev.use("forward"):
            for size in (None, 256):
                def f(size=size) -> float:
                    torch.cuda._sleep(5_000_000)
                    t0 = time.perf_counter()
                    torch.repeat_interleave(vals, rep, output_size=size)
                    dt = time.perf_counter() - t0
                    dev.synchronize("doctor")
                    return dt
                out[size] = _median_s(f, max(3, self.n // 4))
        self.add("repeat_interleave behind queued work", f"{out[None] * 1e3:.3f} ms without output_size, "
                 f"{out[256] * 1e3:.3f} ms with", "without output_size the host blocks until the queue drains (DSpark "
                 "slot expansion: prefill_slot_expansion_sync)")

    def cross_queue(self) -> None:
        dev = self.dev
        if not dev.is_gpu:
            self.add("cross-queue penalty", "n/a on CPU", "")
            return
        dev.allow_schedule_barrier = True  # measured on purpose
        res = {}
        with dev.use("forward"):
            for mode in ("plain", "wait", "plain", "wait"):
                ts = []
                for _ in range(self.n):
                    a = torch.cuda.Event(enable_timing=True)
                    b = torch.cuda.Event(enable_timing=True)
                    if mode == "wait":
                        ev = dev.record("forward")
                        dev.stream_wait("schedule", ev)
                        dev.wait_stream("forward", "schedule")
                    a.record()
                    self._step()
                    b.record()
                    b.synchronize()
                    ts.append(a.elapsed_time(b) / 1e3)
                res.setdefault(mode, []).extend(ts)
        dev.allow_schedule_barrier = False
        p, w = statistics.median(res["plain"]), statistics.median(res["wait"])
        env = environment(dev)
        self.add("cross-queue penalty (graph step with a schedule-stream wait pending)",
                 f"{w * 1e3:.3f} vs {p * 1e3:.3f} ms ({(w - p) * 1e3:+.3f} ms); {env['queue_settings']}; "
                 f"priorities {env['stream_priorities']}",
                 "the profile's host.cross_queue_penalty_s; expected ~0 on CUDA, measured non-zero on HIP")

    def run(self) -> list[tuple[str, str, str]]:
        checks = (self.versions, self.capture, self.sdpa, self.event_cost, self.host_block_vs_queued,
                  self.repeat_interleave, self.cross_queue)
        for i, check in enumerate(checks, 1):
            # seconds each on a CPU, minutes in all with the 1b proxy: say which one runs (stderr)
            print(f"doctor: check {i}/{len(checks)} {check.__name__}", file=sys.stderr, flush=True)
            try:
                with allocating(self.allocation(f"check {i}/{len(checks)} {check.__name__} (the proxy's steps and "
                                                "graphs of 8 requests, contexts up to 1024)")):
                    check()
            except Exception as e:  # one failing check must not hide the others
                if is_device_oom(e):
                    # the device is full: the later checks would fail on it too, each read as
                    # the machine's fault; one line at the command boundary instead (cmd_doctor)
                    raise
                self.add(check.__name__, f"FAILED: {type(e).__name__}: {str(e).splitlines()[0][:160]}", "")
        return self.rows


def format_rows(rows: list[tuple[str, str, str]]) -> str:
    """Markdown table of the checks."""
    out = ["| check | figure | what it means for a profile |", "|---|---|---|"]
    out += [f"| {c} | {f} | {m} |" for c, f, m in rows]
    return "\n".join(out)


def cmd_doctor(args: argparse.Namespace) -> int:
    """``specsched doctor``: run the checks, print a table, optionally write it."""
    from specsched.runtime.cli_commands import check_device_and_preset
    from specsched.sim.errors import ConfigError

    if args.device.split("-as-")[0] == "cuda" and not torch.cuda.is_available():
        raise ConfigError("<command line>", "--device", args.device, "torch.cuda.is_available() is False here; use --device cpu")
    t0 = time.perf_counter()
    # the 1b proxy's checks take many minutes on a CPU; tiny exercises the same code paths
    preset = args.preset or ("tiny" if args.device.split("-as-")[0] == "cpu" else "1b")
    # as measure and validate: `--device bogus` was torch's traceback from inside the first check
    check_device_and_preset(argparse.Namespace(device=args.device, preset=preset))
    if args.out:   # found before the checks, not by the write after them
        from specsched.sim.atomic import refuse_file_out

        refuse_file_out(args.out, "the table", "doctor.md")
    from specsched.runtime.cli_commands import device_memory_refused

    with device_memory_refused("<command line>"):   # out of device memory: one line, exit 2, no --out
        rows = Doctor(args.device, preset, args.backend, args.repeats, args.allow_serializing).run()
    text = format_rows(rows)
    print(text)
    print(f"doctor: {len(rows)} checks in {time.perf_counter() - t0:.1f} s")
    if args.out:
        atomic_write_text(Path(args.out), f"# specsched doctor --device {args.device}\n\n{text}\n")
    return 0


def register_doctor_command(sub: Any) -> None:
    """Register ``specsched doctor``."""
    from specsched.runtime.profiler import add_backend_args
    from specsched.sim.cli_types import positive_int

    p = sub.add_parser("doctor", help="first-run check of a machine: backend, versions, capture, SDPA, sync costs",
                       description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--device", default="cuda", help="cuda (also on ROCm), cpu, or <device>-as-hip (default cuda)")
    p.add_argument("--preset", default=None,
                   help="proxy model preset for the capture and wait checks (default 1b; tiny with --device cpu)")
    p.add_argument("--repeats", type=positive_int, default=40, help="timed repeats per check (default 40)")
    p.add_argument("--out", default=None, help="also write the table (markdown) here")
    add_backend_args(p)
    p.set_defaults(func=cmd_doctor)
