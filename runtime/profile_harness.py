"""The profiling harness of ``specsched profile``: constants, timing helpers, the time
budget, the GPU-busy spinner, and :class:`Harness`, which builds the models and the
runner and times calls (warm-up, budget-limited repeats, idle-queue latencies).
The phases are in :mod:`runtime.profile_gpu` and :mod:`runtime.profile_host`, the fits in
:mod:`runtime.profile_fit`, the provenance text in :mod:`runtime.profile_provenance`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from specsched.runtime.device import Device, default_bs_buckets
from specsched.runtime.host_reference import LaunchReferenceWork, SpeedSampler
from specsched.runtime.kv_cache import round_up
from specsched.runtime.memory import Allocation, allocating
from specsched.runtime.microbench import time_calls
from specsched.runtime.model import CTX_ALIGN, PRESETS, LlamaProxy, ModelRunner, draft_preset
from specsched.runtime.prefill_graph import prefill_token_buckets
from specsched.runtime.profile_fit import grid_widths
from tqdm.auto import tqdm

PROFILE_LOWER_FLAGS = ("--max-bs", "--contexts", "--extend-tokens")
"""The ``specsched profile`` flags a device out of memory is told to lower (the sizing flag of
what was being allocated first): the grids' batch sizes and contexts (the KV pool holds
``--max-bs`` rows of the largest grid context, and a decode/verify graph is captured at every
grid batch size and context bucket) and the extend grid's token counts. ``--graph-max-bs``
shrinks nothing (grid points above it are graph-replayed too; it picks the eager phase's
sizes); on CUDA ``--graph-max-bs-prefill`` is added, whose token buckets the extend grid
times and captures."""
PHASE_WORDS = {
    "grid": "the verify/decode grid's steps", "tile": "the attention-tile probe's steps",
    "extend_after": "the extends behind decode and verify steps",
    "eager": "the eager steps", "cross_queue": "the cross-queue steps", "padding": "the padding probe's steps",
    "launch": "the launch and stall loops' steps", "sync": "the sync probe's steps", "host": "the host phase's steps",
}
"""What each decode/verify phase of the profile allocates, as the out-of-memory line names it."""
STALL_STEPS = 40
"""Verify launches per timed loop of the stall phase (lengths grow by up to W each)."""
WARMUP = 3
"""Untimed calls before every measurement (the first captures the graph)."""
MIN_REPEATS = 3
"""The time budget never trims a measurement below this many repeats."""
DEFAULT_BUDGET_S = 210.0
"""Default total time budget (seconds) of :func:`profile_device`."""
DEFAULT_EXTEND_LEAD_S = 0.05
"""Default lead (seconds of the same call back to back) behind which extends and draft
injections are timed on a GPU: a busy loop launches them while the GPU is still running the
forwards before. With it, profiles made on two H200s predicted poisson-spec's three-run means
20 of 20 figures within 5 %; the same cells with an idle-spin profile 12 of 20, and 48 earlier
cells x 5 figures 215 against 201 of 240 (docs/measurements/h200-v35.md)."""
HOST_BATCH_SIZES = (1, 4, 16, 64, 256)
"""Batch sizes of the scheduler host-cost fits (plus ``max_bs``)."""
HOST_PROMPT = 1024
"""Prompt length of the scheduler's requests in the host-cost fits."""
# the grids take every graph bucket up to this batch size, powers of two above it (the
# buckets every 8 above 64 would double the grid's time for the largest batches)
GRID_ALL_BUCKETS_UP_TO = 64
EXTEND_ALL_BUCKETS_UP_TO = 2048
"""The extend grid takes every piecewise prefill token bucket up to this many tokens
(:func:`extend_grid_tokens`); above it only the rows asked for (buckets 256 and 512 apart)."""
# the attention-tile probe (GpuPhases.tile_phase): widths base, base + 64, ..., base + 256,
# base a multiple of TILE_PROBE_BASE, so tiles of 128 and 256 positions start on it
TILE_PROBE_BASE = 256
TILE_PROBE_POINTS = 5
# the tile probe's batch: the largest grid batch size up to this (the full-batch steps where
# round 13's decode/verify bias showed; docs/decode-width.md)
TILE_PROBE_MAX_BS = 64
DEFAULT_PREFILL_GRAPH_TOKENS = 16384
"""Largest extend token bucket of the profiler's piecewise prefill graphs: the server default
(``cuda_graph_max_bs_prefill`` = ``chunked_prefill_size`` 16384, sim/config.py)."""
GPU_DEFAULTS = {"max_bs": 64, "contexts": [1024, 4096], "extend_tokens": [64, 256, 1024, 4096, 16384]}
"""The profile command's defaults on a GPU. The extend grid starts at 64 tokens: below its first
row an extend is extrapolated (sim/grid_range.py), and on an H200 (8b proxy, round 40) short
prompts, which ShareGPT-like traffic is full of, ran 14-28 % longer than a grid starting at 256
said (one-request extends of <= 64 tokens 8.4 ms measured against 6.0 predicted,
docs/measurements/h200-v40.md): the forward's time flattens toward its weight reads there."""
CPU_DEFAULTS = {"max_bs": 8, "contexts": [64, 256], "extend_tokens": [16, 64, 256]}


# ------------------------------------------------------------------------------ helpers
def launch_loop_width(launch_ctx: int, spec_window: int, repeats: int) -> int:
    """The attention width (context bucket) the launch and stall phases' verify loops run
    at: rows start at ``launch_ctx`` and grow by up to one window per call, for at most
    ``max(WARMUP + repeats, WARMUP + STALL_STEPS) + 2`` calls (and the next window's
    reservation), inside one bucket of their own above every grid bucket."""
    steps = max(WARMUP + repeats + 2, WARMUP + STALL_STEPS + 2)
    return round_up(launch_ctx + spec_window * (steps + 2))


def _sig(v: Any) -> Any:
    """Six significant digits (floats only, recursively): timings are not better than that."""
    if isinstance(v, float):
        return float(f"{v:.6g}")
    if isinstance(v, dict):
        return {k: _sig(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_sig(x) for x in v]
    return v


def _ms(s: float) -> str:
    return f"{s * 1e3:.4g} ms"


def _us(s: float) -> str:
    return f"{s * 1e6:.4g} us"


def power_of_two_sizes(max_bs: int) -> list[int]:
    """Powers of two up to ``max_bs``, and ``max_bs``: the batch sizes the profiler's other
    phases (eager, launch, cross-queue) pick from.

    Raises:
        ValueError: max_bs < 1.
    """
    if max_bs < 1:
        raise ValueError(f"max_bs must be >= 1, got {max_bs}")
    out, b = [], 1
    while b < max_bs:
        out.append(b)
        b *= 2
    return [*out, max_bs]


def grid_batch_sizes(max_bs: int) -> list[int]:
    """Batch sizes of the verify/decode grids: powers of two up to ``max_bs`` and ``max_bs``
    (:func:`power_of_two_sizes`), and every graph bucket of
    :func:`runtime.graphs.default_bs_buckets` (SGLang's ``cuda_graph_bs``: 12, 24, 40, 48,
    56) up to :data:`GRID_ALL_BUCKETS_UP_TO`.

    Every one of them is a bucket of the engine's graphs, so the grid measures bucket sizes
    without padding, and a graph-replayed step up to that size is read at its own row, not
    interpolated: the step's cost is not linear between powers of two (H200, the runtime's
    loop against the interpolated grid: batch 12/24/40/56 0.8-2.9 % slower, 48 2.1 % faster,
    docs/decode-width.md; at 32 req/s in docs/measurements/h200-v15-holdout, steps at batch
    17-24 and 33-40 4.5 and 4.2 % slower, the median ITL -7.8 %).

    Raises:
        ValueError: max_bs < 1.
    """
    pow2 = power_of_two_sizes(max_bs)
    buckets = [b for b in default_bs_buckets(max_bs) if b <= GRID_ALL_BUCKETS_UP_TO]
    return sorted({*pow2, *buckets})


def extend_grid_tokens(extend_tokens: Sequence[int], buckets: Sequence[int],
                       up_to: int = EXTEND_ALL_BUCKETS_UP_TO) -> list[int]:
    """Token counts of the extend grid's rows: ``extend_tokens`` and every prefill graph
    bucket from the smallest of them up to the largest (at most ``up_to``), ascending.

    On CUDA an extend replays piecewise graphs at its token bucket (SGLang 0.5.23
    model_executor/runner/prefill_cuda_graph_runner.py ``replay``; runtime/prefill_graph.py),
    so its token work costs the bucket's, and that cost is not linear between grid rows: the
    serving loop's one-request extends on H200 (8b proxy, four machines, rounds 27-29) against
    a grid with rows at 256 and 1024 tokens ran +6-7 % at bucket 576, +2 % at 640, +7-9 % at
    704, +2 % at 768, +11-13 % at 832, +5-7 % at 896, +3-4 % at 960 and 0-1 % at 1024, the
    same on every machine (docs/measurements/h200-extend-buckets.md). With a row at each
    bucket an extend is read between the two buckets around it and pays its own bucket's row
    (sim/cost_model.py ``CostModel.extend_s``), as :func:`grid_batch_sizes` does for the
    decode graphs' batch sizes. ``buckets`` empty (eager extends: CPU, HIP): the rows asked for.

    Raises:
        ValueError: ``extend_tokens`` empty.
    """
    rows = sorted({int(t) for t in extend_tokens})
    if not rows:
        raise ValueError("extend_tokens must be non-empty")
    hi = min(rows[-1], up_to)
    return sorted({*rows, *(int(b) for b in buckets if rows[0] <= b <= hi)})


def extend_layout(tokens: int, context: float, prompt_len: int) -> tuple[list[int], int]:
    """The extend batch measured for grid point (``tokens``, ``context``).

    ``n = ceil(tokens / prompt_len)`` requests of near-equal lengths, all at prefix
    ``p = round(context - tokens / (2 n))`` (>= 0), so that the cost model's extend context,
    mean prefix + tokens / (2 n), equals ``context`` (within 0.5 token) when ``context >=
    tokens / (2 n)``.

    Returns:
        (extend lengths, prefix).

    Raises:
        ValueError: tokens or prompt_len < 1.
    """
    if tokens < 1 or prompt_len < 1:
        raise ValueError(f"tokens and prompt_len must be >= 1, got {tokens}, {prompt_len}")
    n = -(-tokens // prompt_len)
    q, r = divmod(tokens, n)
    lens = [q + 1 if i < r else q for i in range(n)]
    return lens, max(0, round(context - tokens / (2 * n)))


SPLIT_TOKENS = (256, 512, 1024, 2048)
"""Token counts of the profiler's unequal two-request extends (``gpu.extend_split``): the
smaller prefill chunks (chunked_prefill_size 512-2048) whose chunks often hold the end of one
prompt and the start of the next."""

SPLIT_TAIL = 8
"""The first request of a split holds ``T / SPLIT_TAIL`` of its ``T`` tokens (a prompt's end)."""


def split_layouts(grid_tokens: Sequence[int], prefixes: Sequence[int], prompt_len: int) -> list[tuple[list[int], list[int]]]:
    """The unequal two-request extends the profiler times (``(extend lens, prefix lens)``):
    for each of :data:`SPLIT_TOKENS` within the grid's rows (the largest row when none is),
    ``[T / 8, T - T / 8]`` tokens at prefixes ``[p, 0]``, ``p`` the first and the last of
    ``prefixes``; a layout longer than a grid batch's request (``p + prompt_len``) is left
    out, as the runner's rows hold no more."""
    lo, hi = min(grid_tokens), max(grid_tokens)
    tokens = [t for t in SPLIT_TOKENS if lo <= t <= hi] or [hi]
    out = []
    for t in tokens:
        tail = max(1, round(t / SPLIT_TAIL))
        if tail >= t:
            continue
        for p in sorted({prefixes[0], prefixes[-1]}):
            if max(p + tail, t - tail) <= prefixes[-1] + prompt_len:
                out.append(([tail, t - tail], [p, 0]))
    return out


def _iqr_rel(times: Sequence[float]) -> float:
    if len(times) < 4:
        return float("nan")
    q1, q3 = np.percentile(times, [25, 75])
    m = statistics.median(times)
    return float((q3 - q1) / m) if m > 0 else float("nan")


class _Budget:
    """Splits what is left of the total time evenly over the measurements still to run."""

    def __init__(self, total_s: float, tasks: int) -> None:
        self.t0 = time.perf_counter()
        self.total = total_s
        self.left = tasks
        self.trimmed: list[str] = []

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def repeats(self, label: str, per_call_s: float, want: int) -> int:
        share = (self.total - self.elapsed) / max(self.left, 1)
        n = want if per_call_s <= 0 else int(share / per_call_s)
        n = max(MIN_REPEATS, min(want, n))
        if n < want:
            self.trimmed.append(f"{label}: {n}")
        return n

    def done(self) -> None:
        self.left -= 1


class _GpuBusy:
    """Keeps the GPU busy for a while: a ``torch.cuda._sleep`` (spin) kernel of calibrated
    length on the current stream. Unavailable on CPU (and if torch lacks ``_sleep``)."""

    def __init__(self, dev: Device) -> None:
        self.dev = dev
        self.cycles_per_s: float | None = None
        if not dev.is_gpu or not hasattr(torch.cuda, "_sleep"):
            return
        with dev.use("forward"):
            torch.cuda._sleep(1000)
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            cycles = 10_000_000
            a.record()
            torch.cuda._sleep(cycles)
            b.record()
            b.synchronize()
            self.cycles_per_s = cycles / (a.elapsed_time(b) / 1e3)

    @property
    def available(self) -> bool:
        return self.cycles_per_s is not None

    def occupy(self, seconds: float) -> Any:
        """Queue ``seconds`` of spinning on the current stream; returns an event recorded
        after it (query() is False while the GPU still spins), or None when unavailable."""
        if self.cycles_per_s is None:
            return None
        torch.cuda._sleep(int(seconds * self.cycles_per_s))
        ev = torch.cuda.Event()
        ev.record()
        return ev



# ----------------------------------------------------------------------------- profiler
class Harness:
    """State of one profiling run (see :func:`runtime.profiler.profile_device`) and its timing plumbing."""

    def __init__(self, *, device: str | None, preset: str, spec_window: int, max_bs: int,
                 contexts: Sequence[int], extend_tokens: Sequence[int], cuda_graph_max_bs: int,
                 repeats: int, progress: bool, budget_s: float, batch_sizes: Sequence[int] | None,
                 prompt_len: int | None, forced_accept: int, seed: int,
                 extend_prefixes: Sequence[int] | None = None, backend: str | None = None,
                 cuda_graph_max_bs_prefill: int = DEFAULT_PREFILL_GRAPH_TOKENS,
                 extend_lead_s: float = DEFAULT_EXTEND_LEAD_S) -> None:
        if preset not in PRESETS or preset.endswith("-draft"):
            raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(k for k in PRESETS if not k.endswith('-draft'))}")
        if spec_window < 2:
            raise ValueError(f"spec_window must be >= 2 (a speculative cycle), got {spec_window}")
        if max_bs < 1 or cuda_graph_max_bs < 1 or repeats < 1:
            raise ValueError("max_bs, cuda_graph_max_bs and repeats must be >= 1")
        if not contexts or min(contexts) < 1:
            raise ValueError(f"contexts must be non-empty and >= 1, got {list(contexts)}")
        if not extend_tokens or min(extend_tokens) < 1:
            raise ValueError(f"extend_tokens must be non-empty and >= 1, got {list(extend_tokens)}")
        if not 0.0 <= extend_lead_s <= 1.0:
            raise ValueError(f"extend_lead_s must be between 0 and 1 second, got {extend_lead_s}")
        # > 0: extends and injections timed behind this much of the same call back to back
        # (GpuPhases._behind_same), the GPU's state in a busy loop; 0: behind an idle spin
        self.extend_lead_s = float(extend_lead_s)
        self.t_start = time.perf_counter()
        self.preset, self.W, self.repeats, self.seed = preset, spec_window, repeats, seed
        self.graph_max_bs = cuda_graph_max_bs
        self.contexts = sorted({int(c) for c in contexts})
        self.ext_x = sorted({int(t) for t in extend_tokens})
        self.extend_tokens_given = list(self.ext_x)   # the flag's value (buckets are added below)
        self.bs = sorted({int(b) for b in batch_sizes}) if batch_sizes else grid_batch_sizes(max_bs)
        if self.bs[0] < 1:
            raise ValueError(f"batch sizes must be >= 1, got {self.bs}")
        self.max_bs = self.bs[-1]
        self.prompt = int(prompt_len) if prompt_len else min(1024, self.ext_x[-1])
        self.forced = min(max(forced_accept, 0), spec_window - 1)
        self.ext_prefixes = (sorted({0, *(int(q) for q in extend_prefixes)}) if extend_prefixes
                             else [0] if self.contexts[-1] == 0 else [0, self.contexts[-1]])
        self.ext_cols = [p + self.prompt / 2 for p in self.ext_prefixes]
        # the other phases pick from the default grid's powers of two (as before the grid took
        # every graph bucket up to 64); from every size a caller gave
        pow2 = self.bs if batch_sizes else power_of_two_sizes(self.max_bs)
        cands = [b for b in pow2 if b > cuda_graph_max_bs] or pow2
        self.eager_bs = cands[-3:]
        self.launch_bs = sorted({pow2[0], pow2[len(pow2) // 2], pow2[-1]})
        self.cq_bs = sorted({self.bs[0], self.bs[-1]})
        self.host_bs = sorted({*HOST_BATCH_SIZES, self.max_bs})
        # the attention-tile probe: widths every CTX_ALIGN positions from a multiple of
        # TILE_PROBE_BASE at the middle grid context, at the largest grid batch <= 64
        mid = self.contexts[len(self.contexts) // 2]
        base = round_up(mid + spec_window, TILE_PROBE_BASE)
        self.tile_widths = [base + CTX_ALIGN * i for i in range(TILE_PROBE_POINTS)]
        self.tile_bs = max([b for b in self.bs if b <= TILE_PROBE_MAX_BS] or [self.bs[0]])
        # the grid's rows hold KV for the longest of the grid's and the probe's contexts
        self.grid_ctx = max(self.contexts[-1] + spec_window, self.tile_widths[-1])
        # the launch measurement lets lengths grow (as in the engine) inside its own context
        # bucket, above every grid bucket, so no capture happens while it is timed
        widths = grid_widths(self.contexts, spec_window)
        self.launch_ctx = widths[-1] + 1
        self.launch_bucket = launch_loop_width(self.launch_ctx, spec_window, repeats)

        self.dev = Device(device, measure=True, ring_size=256, backend=backend)
        dev = self.dev
        # extends and injections run as the engine runs them (RuntimeEngine._prefill_buckets):
        # piecewise at SGLang's token buckets on CUDA, eager on CPU and HIP
        self.prefill_buckets = (prefill_token_buckets(cuda_graph_max_bs_prefill)
                                if dev.is_gpu and not dev.is_hip and cuda_graph_max_bs_prefill > 0 else [])
        # the extend grid's rows: every bucket an extend between them replays (extend_grid_tokens)
        self.ext_x = extend_grid_tokens(self.ext_x, self.prefill_buckets)
        self.split_layouts = split_layouts(self.ext_x, self.ext_prefixes, self.prompt)
        # the extend-after-step phase's token counts (profile_gpu.extend_after_phase): the
        # --extend-tokens given, each a row of the grid (extend_grid_tokens keeps them)
        self.after_tokens = list(self.extend_tokens_given) if self.extend_lead_s > 0 and dev.is_gpu else []
        n_tasks = sum(self.task_counts().values())
        self.budget = _Budget(budget_s, n_tasks)
        self.queue_full: list[str] = []  # calls never queued whole behind a busy GPU (profile_gpu._issued_as_run)
        self.spin_retries: dict[str, int] = {}  # by group: calls that found the spin finished (profile_gpu._kept_busy)
        self.lead_dry: list[str] = []  # calls the host could not keep ahead of behind their lead (profile_gpu._behind)
        self.bar = tqdm(total=n_tasks, desc="profile", unit="bench", disable=not progress, leave=False)
        # the host's speed through profiling (runtime/host_reference.py): sampled between
        # measurements, never inside one; the profile's host.reference_work_s
        # the launch path's speed beside it (LaunchReferenceWork: torch ops queued on the device,
        # sampled with each Python sample): the profile's host.launch_reference_work_s
        self.speed = SpeedSampler(launch_work=LaunchReferenceWork(dev.torch_device, dev.dtype))
        self.reps: dict[str, list[int]] = {}
        if dev.is_gpu:
            torch.cuda.reset_peak_memory_stats(dev.torch_device)
        self.cfg, self.dcfg = PRESETS[preset], PRESETS[draft_preset(preset)]
        ext_rows = max(-(-t // self.prompt) for t in self.ext_x)
        max_ctx = max(self.launch_bucket, self.ext_prefixes[-1] + self.prompt + 2, self.grid_ctx + 1)
        ext_need = max(-(-t // self.prompt) * (self.ext_prefixes[-1] + self.prompt + 2) for t in self.ext_x)
        grid_need = self.max_bs * self.grid_ctx
        launch_need = self.launch_bs[-1] * self.launch_bucket
        # the extend-after-step phase runs its extends beside the grid's rows
        after_need = grid_need + max((-(-t // self.prompt) * (self.prompt + 2) for t in self.after_tokens), default=0)
        slots = max(ext_need, grid_need, launch_need, after_need) + 1  # each phase frees its rows
        ctx_buckets = sorted({*widths, self.launch_bucket, *self.tile_widths})
        self._progress("build models")
        # the extend-after-step phase's extends run beside every grid row
        after_rows = max((-(-t // self.prompt) for t in self.after_tokens), default=0)
        max_reqs = max(2 * self.max_bs, ext_rows, self.max_bs + after_rows)
        # the pool is sized by the largest of the phases' needs: named by the flag that sizes it
        by_extend = ext_need > max(grid_need, launch_need)
        pool = self._allocation(f"the KV pool of {slots - 1} tokens (and its {max_reqs} request rows of {max_ctx} "
                                f"positions) for the {'extend' if by_extend else 'verify/decode'} grid's largest cell",
                                "--extend-tokens" if by_extend else "--max-bs",
                                self.extend_tokens_given if by_extend else self.max_bs)
        with dev.use("forward"):
            with allocating(self._allocation(f"the weights of preset {preset} and its drafter", "--preset", preset)):
                target = LlamaProxy(self.cfg, seed=seed, device=dev.torch_device, dtype=dev.dtype)
                drafter = LlamaProxy(self.dcfg, seed=seed + 1, device=dev.torch_device, dtype=dev.dtype)
            with allocating(pool):
                self.runner = ModelRunner(target, dev, max_reqs=max_reqs, max_context=max_ctx,
                                          num_slots=slots, drafter=drafter, spec_window=spec_window,
                                          bs_buckets=default_bs_buckets(self.max_bs), ctx_buckets=ctx_buckets,
                                          prefill_graph_tokens=self.prefill_buckets)
        self.kv_bytes = self.runner.kv.nbytes + (self.runner.draft_kv.nbytes if self.runner.draft_kv else 0)
        self.gen = torch.Generator().manual_seed(seed)

    def task_counts(self) -> dict[str, int]:
        """Measurements each phase ticks off (one :meth:`_tick` each), by phase: the time
        budget's and the progress bar's total. Must match the phases' loops (a test runs a
        CPU profile and counts): the launch phase ticks each batch size twice (its launch
        loop and its stall loops), the padding probe three layouts x two kinds and only
        with two grid contexts or more."""
        per_extend_cell = 4 if self.extend_lead_s > 0 and self.dev.is_gpu else 2
        return {
            "extend": (per_extend_cell * len(self.ext_x) * len(self.ext_cols) + 2 * len(self.ext_x)
                       + per_extend_cell // 2 * len(self.split_layouts)),
            # spec, decode and the draft step (chain cycles with and without their steps, alternated)
            "grid": 3 * len(self.bs) * len(self.contexts),
            "tile": 2 * len(self.tile_widths),
            # decode and verify leads per token count (GPU with a lead only)
            "extend_after": 2 * len(self.after_tokens),
            "padding": 6 if len(self.contexts) >= 2 else 0,
            "eager": len(self.eager_bs) * len(self.contexts),
            "cross_queue": 4 * len(self.cq_bs),
            "launch": 2 * len(self.launch_bs),
            "sync": 1,
            "host": len(self.host_bs),
        }

    # ------------------------------------------------------------------ plumbing
    def _allocation(self, what: str, flag: str, value: object) -> Allocation:
        """What a block of the profile allocates (:class:`runtime.memory.allocating`), sized by
        ``flag`` = ``value``: a device out-of-memory error raised in it is said at the command
        boundary (runtime/profiler.py ``cmd_profile``) with these words and the flags to lower
        (:data:`PROFILE_LOWER_FLAGS`; for the weights, a smaller ``--preset``)."""
        if flag == "--preset":
            lower: tuple[str, ...] = ("a smaller --preset",)
        else:
            lower = PROFILE_LOWER_FLAGS + (("--graph-max-bs-prefill",) if self.prefill_buckets else ())
        return Allocation(what, flag, value, lower, self.dev.torch_device)

    def phase_allocation(self, name: str) -> Allocation:
        """What phase ``name`` allocates (:meth:`_allocation`): the extend phase, extends up to
        the extend grid's largest token count (and on CUDA its piecewise prefill graphs), sized by
        ``--extend-tokens``; every other phase, decode steps and speculative cycles (and their
        graphs) at its own largest batch and context, sized by ``--max-bs`` (and
        ``--contexts``)."""
        if name == "extend":
            graphs = (f"; piecewise prefill graphs up to {self.prefill_buckets[-1]} tokens"
                      if self.prefill_buckets else "")
            return self._allocation(f"the extend grid's forwards (up to {self.ext_x[-1]} tokens at cached prefixes "
                                    f"up to {self.ext_prefixes[-1]}{graphs})", "--extend-tokens",
                                    self.extend_tokens_given)
        words = PHASE_WORDS.get(name, f"the {name} phase's steps")
        graphs = " and their graphs" if self.dev.is_gpu else ""
        # the phase's own largest batch and context (runtime/profile_gpu.py, profile_host.py)
        batch = {"tile": self.tile_bs, "extend_after": self.tile_bs, "eager": self.eager_bs[-1], "cross_queue": self.cq_bs[-1],
                 "launch": self.launch_bs[-1], "host": self.host_bs[-1]}.get(name, self.max_bs)
        ctx = {"tile": self.tile_widths[-1], "launch": self.launch_bucket}.get(name, self.contexts[-1] + self.W)
        return self._allocation(f"{words}{graphs} (batches up to {batch}, contexts up to {ctx} positions)",
                                "--max-bs", self.max_bs)

    def _progress(self, label: str) -> None:
        self.bar.set_postfix_str(label, refresh=True)

    def _tick(self) -> None:
        self.bar.update(1)
        self.budget.done()
        self.speed.maybe_sample()

    def _phase(self, name: str) -> None:
        """A phase starts: its host-speed samples carry its name; one sample now."""
        self.speed.label = name
        self.speed.sample()

    def _warm_and_plan(self, label: str, fn: Callable[[], object], want: int) -> int:
        """Warm ``fn`` up, time one call from an idle queue, and return how many repeats
        the time budget allows (at most ``want``)."""
        self._progress(label)
        dev = self.dev
        with dev.use("forward"):
            for _ in range(WARMUP):
                fn()
            dev.synchronize("profile")
            t0 = time.perf_counter()
            fn()
            dev.synchronize("profile")
            est = time.perf_counter() - t0
        return self.budget.repeats(label, est, want)

    def _measure(self, label: str, group: str, fn: Callable[[], object], repeats: int | None = None) -> list[float]:
        """Warm up, estimate one call, then time budget-limited repeats: seconds per call."""
        n = self._warm_and_plan(label, fn, repeats or self.repeats)
        times = time_calls(self.dev, fn, repeats=n)
        self.reps.setdefault(group, []).append(n)
        self._tick()
        return times

    def _latency(self, label: str, group: str, fn: Callable[[], object]) -> list[float]:
        """Seconds from the host issuing ``fn`` on an idle queue to the device finishing it
        (synchronize, perf_counter, call, synchronize): an eager forward issued after a host
        block costs its host launch time when that exceeds its GPU time, as in the loop."""
        dev = self.dev
        n = self._warm_and_plan(label, fn, self.repeats)
        with dev.use("forward"):
            times = []
            for _ in range(n):
                dev.synchronize("profile")
                t0 = time.perf_counter()
                fn()
                dev.synchronize("profile")
                times.append(time.perf_counter() - t0)
        self.reps.setdefault(group, []).append(n)
        self._tick()
        return times

    def _reps_text(self, group: str) -> str:
        r = self.reps.get(group, [])
        if not r:
            return "no repeats"
        lo, hi = min(r), max(r)
        return f"median of {lo} repeats" if lo == hi else f"median of {lo}-{hi} repeats (time budget)"

    def _timing_event(self) -> Any:
        """As the engine records around each launch (runtime.device.Device.timing_mark)."""
        return self.dev.timing_mark()

    def _new_rows(self, n: int, context: int) -> tuple[list[int], torch.Tensor]:
        """``n`` fresh rows holding ``context`` committed tokens (KV reserved, values zero)."""
        return self._rows_at([context] * n, [context] * n)

    def _padding_rows(self, lens: list[int]) -> tuple[list[int], torch.Tensor]:
        """Fresh rows holding ``lens`` committed tokens each, KV reserved for each length plus
        the window as the engine reserves a running request's (the rest of a wider batch's
        width reads the padding slot): the padding probe's rows."""
        return self._rows_at(lens, [n + self.W for n in lens])

    def _rows_at(self, lens: list[int], reserve: list[int]) -> tuple[list[int], torch.Tensor]:
        """Fresh rows, row ``i`` holding ``lens[i]`` committed tokens with ``reserve[i]`` KV
        slots reserved (values zero)."""
        r, pool, n = self.runner, self.runner.pool, len(lens)
        rows = [r.add_request() for _ in range(n)]
        pool.reserve(rows, reserve)
        rows_t = self.dev.h2d(rows)
        pool.seq_lens.index_copy_(0, rows_t, self.dev.h2d(lens))
        pool.last_token[rows_t] = torch.randint(0, self.cfg.vocab_size - 1, (n,), generator=self.gen).to(self.dev.torch_device)
        pool.prev_accept.index_fill_(0, rows_t, -1)
        pool.prev_start.index_fill_(0, rows_t, 0)
        r.observe_lengths(rows, lens)
        return rows, rows_t

    def _step_fn(self, kind: str, rows: list[int], rows_t: torch.Tensor, context: int | list[int],
                 graph: bool) -> Callable[[], object]:
        """A decode step, spec cycle (``chain_spec`` / ``chain_no_steps``: a chain drafter's,
        with or without its serial steps) or draft step of ``rows``, their committed lengths put back before
        every call: ``context`` for every row, or each row's own when a list (the padding
        probe's mixed layouts)."""
        runner, pool = self.runner, self.runner.pool
        forced = [self.forced] * len(rows)
        ctx = list(context) if isinstance(context, list) else [context] * len(rows)
        ctx_t = self.dev.h2d(ctx) if isinstance(context, list) else None

        def step() -> object:
            if ctx_t is None:
                pool.seq_lens.index_fill_(0, rows_t, context)
            else:
                pool.seq_lens.index_copy_(0, rows_t, ctx_t)
            runner.observe_lengths(rows, ctx)
            if kind == "decode":
                return runner.decode(rows, graph=graph)
            if kind == "draft_step":
                return runner.draft_step(rows, graph=graph)
            if kind in ("chain_spec", "chain_no_steps"):
                return runner.spec_cycle(rows, forced, graph=graph, draft_steps=kind == "chain_spec", as_chain=True)
            return runner.spec_cycle(rows, forced, graph=graph)

        return step

