"""Peak memory of a trace replay against its requests' output lengths: the measurement behind
``sim.limits.BYTES_PER_REQUEST`` and ``sim.limits.BYTES_PER_OUTPUT_TOKEN``.

Writes synthetic traces (Poisson arrivals at ``--rate`` req/s, prompts of ``--input-len``
tokens, every output ``O`` tokens), and for each output length ``O`` in ``--outputs`` and each
request count ``N`` in ``--requests`` runs ``specsched run`` on it in a fresh process (the
8B roofline profile, no speculative decoding: one token per delivery, the most ITL records a
token can make; default record level, so compact records above ``AUTO_COMPACT_TOKENS``), and
prints the process's peak resident memory (``ru_maxrss``, what ``/usr/bin/time -v`` calls
"Maximum resident set size"). The bytes a request adds at an output length are the slope
between the two request counts; the bytes a token adds the slope of those against ``O``.

    python benchmarks/run_memory.py --requests 2000 8000 --outputs 128 1024 4096 16384 32768

Results are in docs/real-servers.md ("Large traces"). Nothing here is a test: memory
depends on the machine and the Python build.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from specsched.sim.cli_types import positive_int, positive_number

CHILD = """
import resource, sys
from specsched.cli import main
rc = main(["run", sys.argv[1], "--out", sys.argv[2], "-q", "--max-requests", "100000000"])
print(rc, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""

SCENARIO = """\
name: run-memory
profile: h200-llama8b-roofline
seed: 1
server:
  max_running_requests: 1024
  max_total_num_tokens: 800000
  chunked_prefill_size: 8192
  max_prefill_tokens: 16384
  cuda_graph_max_bs: 256
  speculative_algorithm: none
  admission_delay: none
workload:
  kind: trace
  trace:
    path: {path}
"""


def write_trace(path: Path, n: int, output_len: int, input_len: int, rate: float, seed: int = 0) -> None:
    """A CSV trace of ``n`` rows: Poisson arrivals at ``rate`` req/s, fixed lengths."""
    t = np.cumsum(np.random.default_rng(seed).exponential(1.0 / rate, n))
    with open(path, "w") as f:
        f.write("timestamp,input_length,output_length\n")
        f.writelines(f"{x:.6f},{input_len},{output_len}\n" for x in t)


def measure(d: Path, n: int, output_len: int, input_len: int, rate: float) -> tuple[float, float]:
    """(peak RSS in MiB, seconds) of ``specsched run`` on a trace of ``n`` requests."""
    trace = d / f"t-{n}-{output_len}.csv"
    write_trace(trace, n, output_len, input_len, rate)
    sc = d / f"s-{n}-{output_len}.yaml"
    sc.write_text(SCENARIO.format(path=trace.name))
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, str(sc), str(d / f"out-{n}-{output_len}")],
                         capture_output=True, text=True, check=True)
    rc, rss = out.stdout.split()[-2:]
    if rc != "0":
        raise SystemExit(f"run failed ({rc}): {out.stderr.strip()[-300:]}")
    return float(rss), time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=positive_int, nargs=2, default=[2000, 8000], metavar="N",
                    help="the two request counts whose difference gives bytes a request")
    ap.add_argument("--outputs", type=positive_int, nargs="+", default=[128, 1024, 4096, 16384, 32768],
                    help="output lengths (tokens a request)")
    ap.add_argument("--input-len", type=positive_int, default=512)
    ap.add_argument("--rate", type=positive_number, default=8.0, help="arrivals (requests/s)")
    a = ap.parse_args(argv)
    n1, n2 = a.requests
    if n1 == n2:
        ap.error(f"--requests {n1} {n2}: give two different counts (bytes a request is their RSS difference over theirs)")
    print(f"{'output':>7} {'N':>6} {'peak RSS MiB':>12} {'time s':>7}  bytes/request (slope)  bytes/token")
    with tempfile.TemporaryDirectory() as tmp:
        for o in a.outputs:
            (r1, t1), (r2, t2) = (measure(Path(tmp), n, o, a.input_len, a.rate) for n in (n1, n2))
            per_req = (r2 - r1) * 2**20 / (n2 - n1)
            print(f"{o:>7} {n1:>6} {r1:>12.1f} {t1:>7.1f}")
            print(f"{o:>7} {n2:>6} {r2:>12.1f} {t2:>7.1f}  {per_req:>21,.0f}  {per_req / o:>11.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
