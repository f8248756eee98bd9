"""Profiles: the measured costs that time a forward and the host's work, with provenance.

A profile is a YAML file (``profiles/<name>.yaml``). GPU times are grids of measured (or
fitted) seconds interpolated linearly (and extrapolated linearly from the two nearest points
at the edges); host times are per step plus per request. Every value's source is recorded
in ``provenance`` (dotted key -> text). The MI355X profile is fitted to the reference
measurements; GPU profiles are written by ``specsched profile`` from microbenchmarks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from specsched.sim.bundled import profiles_dir
from specsched.sim.config import read_yaml, validation_error
from specsched.sim.errors import ConfigError
from specsched.sim.hardware import Hardware

_STRICT = ConfigDict(extra="forbid", frozen=True)


class Grid(BaseModel):
    """Seconds on a grid of (x, context_len): ``seconds[i][j]`` at ``x[i]``, ``context_len[j]``.

    ``x`` is the batch size (verify, decode, draft step) or the batch's extend tokens
    (extend). Axes strictly increasing; a single-point axis means no dependence.
    """

    model_config = _STRICT

    x: list[float] = Field(min_length=1)
    context_len: list[float] = Field(default=[0.0], min_length=1)
    seconds: list[list[float]]

    @model_validator(mode="after")
    def _shape(self) -> Grid:
        if len(self.seconds) != len(self.x) or any(len(row) != len(self.context_len) for row in self.seconds):
            raise ValueError(f"seconds must be {len(self.x)} rows x {len(self.context_len)} columns")
        for name, axis in (("x", self.x), ("context_len", self.context_len)):
            if any(b <= a for a, b in zip(axis, axis[1:], strict=False)):
                raise ValueError(f"{name} must be strictly increasing")
        if any(v < 0 for row in self.seconds for v in row):
            raise ValueError("seconds must be >= 0")
        return self

    def interpolator(self) -> GridInterp:
        return GridInterp(self)


class GridInterp:
    """Bilinear interpolation of a :class:`Grid`, linear extrapolation at the edges,
    clamped at 0 seconds. Cached per (x, context) pair (steps repeat shapes)."""

    __slots__ = ("x", "c", "v", "_cache")

    def __init__(self, g: Grid) -> None:
        self.x = np.asarray(g.x, dtype=float)
        self.c = np.asarray(g.context_len, dtype=float)
        self.v = np.asarray(g.seconds, dtype=float)
        self._cache: dict[tuple[float, float], float] = {}

    @staticmethod
    def _axis(axis: np.ndarray, q: float) -> tuple[int, int, float]:
        if len(axis) == 1:
            return 0, 0, 0.0
        i = int(np.clip(np.searchsorted(axis, q) - 1, 0, len(axis) - 2))
        w = (q - axis[i]) / (axis[i + 1] - axis[i])
        return i, i + 1, float(w)

    def __call__(self, x: float, context: float = 0.0) -> float:
        key = (x, round(context, -1))
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        i0, i1, wx = self._axis(self.x, x)
        j0, j1, wc = self._axis(self.c, key[1])
        v = self.v
        lo = v[i0, j0] * (1 - wc) + v[i0, j1] * wc
        hi = v[i1, j0] * (1 - wc) + v[i1, j1] * wc
        out = max(0.0, float(lo * (1 - wx) + hi * wx))
        if len(self._cache) < 200_000:
            self._cache[key] = out
        return out


class GpuProfile(BaseModel):
    """GPU seconds per forward.

    extend: target prefill forward, by the batch's extend tokens and mean context.
    draft_inject_per_token_s: DSpark prefill: injecting target hidden states into the draft
        KV, per prompt token (a separate launch after slot expansion).
    draft_inject: the same as a grid by the batch's extend tokens and context (used instead
        of the per-token cost when given: it keeps a measured per-launch intercept).
    verify: one speculative cycle's GPU work (draft forward + target verify of the window),
        by batch size and mean context, graph-replayed.
    draft_step: one extra serial draft forward (chain drafters: k - 1 of them per cycle).
    decode: one non-speculative decode forward, by batch size and mean context.
    eager_factor: multiplier for decode/verify batches above cuda_graph_max_bs (no graph).
    """

    model_config = _STRICT

    extend: Grid
    draft_inject_per_token_s: float = Field(0.0, ge=0)
    draft_inject: Grid | None = None
    verify: Grid | None = None
    draft_step: Grid | None = None
    decode: Grid | None = None
    eager_factor: float = Field(1.0, ge=1.0)


class HostProfile(BaseModel):
    """Host seconds.

    ingest_per_request_s: tokenizer + IPC per request before the scheduler sees it (a FIFO).
    schedule_*: building a batch. launch_*: preparing inputs and launching/replaying
    (the part that runs after the publish wait). process_*: processing a step's results.
    sync_wakeup_s: wake-up after a host block that really waited.
    cross_queue_penalty_s: added to every graph-replayed forward when a wait is queued from
    a separate schedule stream (0 on CUDA; measured non-zero on HIP).
    """

    model_config = _STRICT

    ingest_per_request_s: float = Field(0.0, ge=0)
    schedule_s: float = Field(0.0, ge=0)
    schedule_per_req_s: float = Field(0.0, ge=0)
    launch_s: float = Field(0.0, ge=0)
    launch_per_req_s: float = Field(0.0, ge=0)
    process_s: float = Field(0.0, ge=0)
    process_per_req_s: float = Field(0.0, ge=0)
    sync_wakeup_s: float = Field(0.0, ge=0)
    cross_queue_penalty_s: float = Field(0.0, ge=0)


class Profile(BaseModel):
    """A device profile: GPU and host costs plus where each came from.

    ``hardware``: the device (platform, GPU, TP, memory, weights and KV bytes) from which
    :mod:`sim.defaults` derives SGLang's defaults. ``analytic``: for profiles written by
    ``specsched profile --analytic``, the inputs (model shape, GPU figures, TP, dtype,
    efficiency factors) that regenerate it (:func:`sim.analytic.writer.regenerate`).
    """

    model_config = _STRICT

    name: str
    device: str
    description: str = ""
    provenance: dict[str, str] = {}
    gpu: GpuProfile
    host: HostProfile = HostProfile()
    hardware: Hardware | None = None
    analytic: dict[str, Any] | None = None
    path: str = ""


def resolve_profile_path(name_or_path: str, relative_to: str | Path | None = None) -> Path:
    """A profile given as a path (absolute, or relative to the scenario file / cwd) or as a
    name in the bundled ``profiles/`` folder."""
    p = Path(name_or_path)
    candidates = [p]
    if relative_to is not None:
        candidates.append(Path(relative_to).resolve().parent / p)
    bundled = profiles_dir()
    candidates += [bundled / p, bundled / f"{name_or_path}.yaml"]
    for c in candidates:
        if c.is_file():
            return c
    return p


def load_profile(name_or_path: str, relative_to: str | Path | None = None) -> Profile:
    """Load and validate a profile.

    Raises:
        ConfigError: file missing, or a missing/unknown/out-of-range key.
    """
    path = resolve_profile_path(name_or_path, relative_to)
    if not path.is_file():
        raise ConfigError(str(relative_to or "<scenario>"), "profile", name_or_path,
                          f"no such profile file; bundled: {', '.join(sorted(q.stem for q in profiles_dir().glob('*.yaml')))}")
    raw = read_yaml(path)
    raw["path"] = str(path)
    try:
        return Profile.model_validate(raw)
    except ValidationError as e:
        raise validation_error(str(path), e, raw) from None
