"""Memory and time of reading a large trace (issue 9: "a 100 MB trace streams without
loading twice"): writes a synthetic Mooncake-layout JSONL of about ``--mb`` MB (prompts of
about 12K tokens, 24 hash_ids each, sessions sharing prefixes; ``--layout azure``: an Azure
LLM inference trace CSV instead, TIMESTAMP as a date and time with 7 fractional digits),
then, each in a fresh process, reads it with ``sim.trace.load_trace`` and builds the run's
requests (``sim.workload.make_requests``, which holds each prompt's block ids, not its
tokens), and prints the peak resident memory of each against a process that only imports,
and the bytes the process read meanwhile (``rchar`` of /proc/self/io, Linux) over the
file's size: about 1 = the file was read once (its first bytes are also sniffed for gzip
and, for a CSV, its header line read first; a few KB).

    python benchmarks/trace_stream.py --mb 100
    python benchmarks/trace_stream.py --mb 100 --layout azure

Results are in docs/real-servers.md. Nothing here is a test: memory and time depend on the
machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from specsched.sim.cli_types import positive_number

CHILD = """
import os, resource, sys, time
from specsched.sim.config import TraceConfig, WorkloadConfig
from specsched.sim.trace import load_trace
from specsched.sim.workload import make_requests
mode, path, layout = sys.argv[1], sys.argv[2], sys.argv[3]
def rchar():
    try:
        with open("/proc/self/io") as f:
            return next(int(x.split()[1]) for x in f if x.startswith("rchar"))
    except OSError:
        return -1
r0 = rchar()
t0 = time.perf_counter()
if mode == "load":
    tr = load_trace(TraceConfig(path=path, layout=layout))
    n, extra = len(tr), f"hash ids {len(tr.hash_ids)}" if tr.hash_ids is not None else ""
elif mode == "requests":
    specs = make_requests(WorkloadConfig(kind="trace", trace=TraceConfig(path=path, layout=layout)), 1)
    n, extra = len(specs), f"prompt tokens {sum(s.input_len for s in specs)}"
else:
    n, extra = 0, ""
dt = time.perf_counter() - t0
read = (rchar() - r0) / os.path.getsize(path) if r0 >= 0 else float("nan")
print(n, dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, read, extra)
"""


def write_trace(path: Path, mb: float, seed: int = 0) -> int:
    """A Mooncake-layout trace of about ``mb`` MB; returns its rows."""
    rng = np.random.default_rng(seed)
    rows, size, t = 0, 0, 0
    next_id = 10_000
    sessions: list[list[int]] = [list(range(s * 40, s * 40 + 8)) for s in range(200)]   # shared system prompts
    with open(path, "w") as f:
        while size < mb * 1e6:
            s = int(rng.integers(0, len(sessions)))
            n_in = int(np.clip(rng.lognormal(np.log(12_000), 0.5), 64, 128_000))
            blocks = -(-n_in // 512)
            ids = sessions[s][:blocks]
            ids = ids + list(range(next_id, next_id + blocks - len(ids)))
            next_id += blocks
            if rng.random() < 0.5:
                sessions[s] = ids     # the session's next turn resends this prompt
            t += int(rng.exponential(50))
            line = json.dumps({"timestamp": t, "input_length": n_in, "output_length": int(rng.integers(1, 1000)),
                               "hash_ids": ids}) + "\n"
            f.write(line)
            size += len(line)
            rows += 1
    return rows


def write_azure(path: Path, mb: float, seed: int = 0) -> int:
    """An Azure-layout CSV (TIMESTAMP, ContextTokens, GeneratedTokens) of about ``mb`` MB."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    rows, size, t = 0, 0, pd.Timestamp("2023-11-16 18:15:46").value
    with open(path, "w") as f:
        f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        while size < mb * 1e6:
            n = 100_000
            t = t + np.cumsum(rng.exponential(0.2e9, n).astype(np.int64))
            stamps = pd.to_datetime(t).strftime("%Y-%m-%d %H:%M:%S.%f")
            ins = np.clip(rng.lognormal(np.log(2000), 0.8, n), 1, 100_000).astype(int)
            outs = rng.integers(0, 800, n)
            block = "".join(f"{s}0,{i},{o}\n" for s, i, o in zip(stamps, ins.tolist(), outs.tolist(), strict=True))
            f.write(block)
            size += len(block)
            rows += n
            t = t[-1]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=positive_number, default=100.0, help="trace size in MB (default 100)")
    ap.add_argument("--keep", help="write the trace here and keep it (default: a temporary file)")
    ap.add_argument("--layout", choices=("mooncake", "azure"), default="mooncake",
                    help="mooncake: JSONL with hash_ids (default); azure: the Azure trace CSV")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.keep) if args.keep else Path(tmp) / ("trace.jsonl" if args.layout == "mooncake" else "trace.csv")
        t0 = time.perf_counter()
        rows = (write_trace if args.layout == "mooncake" else write_azure)(path, args.mb)
        size = path.stat().st_size / 2**20
        print(f"trace: {path.name} {size:.1f} MiB, {rows} rows (written in {time.perf_counter() - t0:.1f} s)")
        for mode in ("imports", "load", "requests"):
            out = subprocess.run([sys.executable, "-c", CHILD, mode, str(path), args.layout], capture_output=True,
                                 text=True, check=True)
            n, dt, rss, read, *extra = out.stdout.strip().split(maxsplit=4)
            print(f"{mode:9s} rows {int(n):8d}  {float(dt):6.2f} s  peak RSS {float(rss):7.1f} MiB  "
                  f"bytes read / file size {float(read):5.2f}  {' '.join(extra)}")


if __name__ == "__main__":
    main()
