"""The run's append-only records and the result object built from them after the run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

REQUEST_COLUMNS = [
    "rid", "input_len", "output_len", "start_s", "first_token_s", "finish_s",
    "ttft_s", "e2e_s", "tpot_s", "accept_level", "spec_cycles", "retractions",
]
CHUNK_COLUMNS = ["rid", "time_s", "n_tokens"]
STEP_COLUMNS = [
    "step", "mode", "part", "batch_size", "num_extend_tokens", "gpu_start_s", "gpu_end_s",
    "host_blocked_s", "accepted_tokens", "decoding_reqs",
]
TIMESERIES_COLUMNS = ["time_s", "running", "waiting", "kv_used_tokens"]


@dataclass
class RunResult:
    """One run's tables (pandas DataFrames, times in seconds from the run's start) and its
    bench_serving summary (dict). Columns are listed in docs/architecture.md."""

    requests: pd.DataFrame
    chunks: pd.DataFrame
    steps: pd.DataFrame
    timeseries: pd.DataFrame
    summary: dict[str, Any]
    scenario: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


class Recorder:
    """Append-only event log of a run (rows as tuples; tables built once at the end)."""

    def __init__(self) -> None:
        self.requests: dict[int, list[Any]] = {}
        self.chunks: list[tuple[int, float, int]] = []
        self.steps: list[tuple[Any, ...]] = []
        self.timeseries: list[tuple[float, int, int, int]] = []

    def request_sent(self, rid: int, input_len: int, output_len: int, start_s: float) -> None:
        self.requests[rid] = [rid, input_len, output_len, start_s, None, None]

    def delivered(self, rid: int, t: float, n: int, finished: bool) -> None:
        self.chunks.append((rid, t, n))
        row = self.requests[rid]
        if row[4] is None:
            row[4] = t
        if finished:
            row[5] = t

    def tables(self, extra_cols: dict[int, tuple[float, int, int]]) -> tuple[pd.DataFrame, ...]:
        """Build (requests, chunks, steps, timeseries). ``extra_cols``: rid -> (accept_level,
        spec_cycles, retractions)."""
        rows = []
        for rid, (r, i, o, s, f, e) in self.requests.items():
            lvl, cyc, ret = extra_cols.get(rid, (float("nan"), 0, 0))
            ttft = f - s if f is not None else None
            e2e = e - s if e is not None else None
            tpot = (e2e - ttft) / (o - 1) if e2e is not None and o > 1 else None
            rows.append((r, i, o, s, f, e, ttft, e2e, tpot, lvl, cyc, ret))
        req = pd.DataFrame(rows, columns=REQUEST_COLUMNS)
        for c in ("first_token_s", "finish_s", "ttft_s", "e2e_s", "tpot_s"):
            req[c] = req[c].astype(float)
        return (
            req,
            pd.DataFrame(self.chunks, columns=CHUNK_COLUMNS),
            pd.DataFrame(self.steps, columns=STEP_COLUMNS),
            pd.DataFrame(self.timeseries, columns=TIMESERIES_COLUMNS),
        )
