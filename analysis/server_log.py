"""SGLang server logs: the scheduler's "Prefill batch" and "Decode batch" lines.

SGLang 0.5.23 logs them from ``srt/managers/scheduler_components/metrics_reporter.py``
(``report_prefill_stats``, ``report_decode_stats``; older versions from
``scheduler_metrics_mixin.py`` / ``scheduler.py`` with the same fields), one decode line every
``decode_log_interval`` (default 40) decode steps::

    [2026-01-01 10:00:00 TP0] Prefill batch, #new-seq: 3, #new-token: 3072, #cached-token: 0,
        token usage: 0.01, #running-req: 5, #queue-req: 2, #pending-token: 0, cuda graph: False,
        input throughput (token/s): 12345.67
    [2026-01-01 10:00:01 TP0] Decode batch, #running-req: 8, #token: 9000, token usage: 0.02,
        accept len: 3.10, accept rate: 0.42, cuda graph: True, gen throughput (token/s): 2500.00,
        #queue-req: 0

(``token usage`` is ``full token usage`` on hybrid-SWA models; ``accept len`` only with
speculative decoding; ``[N]`` after "batch" with forward-iteration logging.) Fields are read
by name, so added or reordered fields do not matter. "gen throughput" is the tokens generated
since the previous decode line over the wall time since it (prefill work in between
included), so a decode line preceded by a decode line and with an empty queue times pure
decode steps: seconds per step = running-req x accept len / gen throughput.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
from specsched.sim.errors import ConfigError

_LINE = re.compile(r"(?:\[(?P<time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})[^\]]*\]\s*)?(?P<kind>Prefill|Decode) batch(?: \[\d+\])?,\s*(?P<rest>.*)$")
_FIELD = re.compile(r"(?P<key>#?[A-Za-z][A-Za-z\- ()/]*?):\s*(?P<value>-?[0-9.]+(?:e[-+]?\d+)?|True|False)")
_NAMES = {
    "#new-seq": "new_seq", "#new-token": "new_token", "#cached-token": "cached_token", "token usage": "token_usage",
    "full token usage": "token_usage", "#running-req": "running_req", "#queue-req": "queue_req", "#token": "token",
    "#full token": "token", "accept len": "accept_len", "gen throughput (token/s)": "gen_throughput",
    "input throughput (token/s)": "input_throughput", "#pending-token": "pending_token",
}
COLUMNS = ("line", "time", "kind", "new_seq", "new_token", "cached_token", "token_usage", "running_req",
           "queue_req", "token", "accept_len", "gen_throughput", "input_throughput")


def parse_server_log(path: str | Path) -> pd.DataFrame:
    """One row per "Prefill batch"/"Decode batch" line of an SGLang server log.

    Returns:
        DataFrame with :data:`COLUMNS` (``kind`` "prefill"/"decode", ``line`` the line number,
        ``time`` the logged timestamp or NaT; fields a line lacks are NaN).

    Raises:
        ConfigError: missing/unreadable file, or no such line in it (not an SGLang log).
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(str(p), "<file>", str(p), "no such server log")
    rows = []
    with open(p, errors="replace") as f:
        for i, raw in enumerate(f, start=1):
            if "batch" not in raw:
                continue
            m = _LINE.search(raw)
            if not m:
                continue
            row: dict[str, object] = {"line": i, "time": m.group("time"), "kind": m.group("kind").lower()}
            for fm in _FIELD.finditer(m.group("rest")):
                name = _NAMES.get(fm.group("key").strip())
                if name and fm.group("value") not in ("True", "False"):
                    row[name] = float(fm.group("value"))
            rows.append(row)
    if not rows:
        raise ConfigError(str(p), "<lines>", 0, "no 'Prefill batch' or 'Decode batch' line: not an SGLang server log")
    df = pd.DataFrame(rows).reindex(columns=list(COLUMNS))
    df["time"] = pd.to_datetime(df["time"], errors="coerce")
    return df


def decode_step_samples(log: pd.DataFrame) -> pd.DataFrame:
    """Decode lines that time pure decode steps: the previous logged line was a decode line,
    the queue is empty, throughput > 0. Columns ``running_req``, ``context`` (mean KV tokens
    per request = #token / running), ``tokens_per_step`` (running x accept len, or running
    without speculative decoding), ``step_s`` (= tokens_per_step / gen throughput)."""
    prev_decode = log["kind"].shift(1).eq("decode")
    d = log[(log["kind"] == "decode") & prev_decode & (log["queue_req"].fillna(0) == 0)
            & (log["gen_throughput"] > 0) & (log["running_req"] > 0)].copy()
    acc = d["accept_len"].where(d["accept_len"] > 0, 1.0).fillna(1.0)
    d["context"] = d["token"] / d["running_req"]
    d["tokens_per_step"] = d["running_req"] * acc
    d["step_s"] = d["tokens_per_step"] / d["gen_throughput"]
    return d[["line", "running_req", "context", "tokens_per_step", "step_s"]].reset_index(drop=True)


def prefill_summary(log: pd.DataFrame) -> dict[str, float]:
    """Batch composition of the prefill lines: count, mean/max new sequences and new tokens
    per prefill batch, cached-token share, max running and queued requests."""
    p = log[log["kind"] == "prefill"]
    if p.empty:
        return {"prefill_batches": 0}
    new = p["new_token"].fillna(0)
    cached = p["cached_token"].fillna(0)
    total = float(new.sum() + cached.sum())
    return {
        "prefill_batches": int(len(p)),
        "mean_new_seq": float(p["new_seq"].mean()),
        "mean_new_token": float(new.mean()),
        "max_new_token": float(new.max()),
        "cached_share": float(cached.sum() / total) if total else float("nan"),
        "max_running_req": float(log["running_req"].max()),
        "max_queue_req": float(log["queue_req"].max()),
        "decode_lines": int((log["kind"] == "decode").sum()),
        "mean_accept_len": float(np.nanmean(log.loc[log["kind"] == "decode", "accept_len"])) if log["accept_len"].notna().any() else float("nan"),
    }
