"""Write the shipped synthetic example traces (scenarios/trace-example-azure.csv and
scenarios/trace-example-mooncake.jsonl). Synthetic: nothing here comes from a real trace.

Arrivals: gamma gaps (shape 0.5, i.e. burstier than Poisson) at 4 req/s on average; prompt
and output lengths: discretised lognormals (prompt median ~ 700 tokens, output median ~ 180),
clipped to [16, 8192] and [1, 2048]. The Mooncake file's hash_ids share a system prompt of 1-3
blocks among the requests of each of 8 synthetic applications. Seeded; run ``python benchmarks/make_example_trace.py``
to regenerate the same files.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

N = 400
APPS = 8
OUT = Path(__file__).resolve().parents[1] / "scenarios"


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    rng = np.random.default_rng(20260101)
    gaps = rng.gamma(0.5, 1.0 / (4.0 * 0.5), size=N)
    t = np.cumsum(gaps) - gaps[0]
    ins = np.clip(np.rint(rng.lognormal(np.log(700), 0.9, N)), 16, 8192).astype(int)
    outs = np.clip(np.rint(rng.lognormal(np.log(180), 0.8, N)), 1, 2048).astype(int)
    start = pd.Timestamp("2024-05-01 10:00:00")
    stamps = [(start + pd.Timedelta(seconds=float(x))).strftime("%Y-%m-%d %H:%M:%S.%f") + "0" for x in t]
    pd.DataFrame({"TIMESTAMP": stamps, "ContextTokens": ins, "GeneratedTokens": outs}).to_csv(
        OUT / "trace-example-azure.csv", index=False)
    # Mooncake layout: the same requests; hash_ids give each request one of APPS synthetic
    # applications' system prompt (its first 1-3 blocks of 512 tokens, as far as the prompt
    # reaches), then blocks of its own (a separate stream: lengths and times stay as above)
    hrng = np.random.default_rng(20260102)
    app = hrng.integers(0, APPS, size=N)
    sys_blocks = hrng.integers(1, 4, size=APPS)
    with open(OUT / "trace-example-mooncake.jsonl", "w") as f:
        for k in range(N):
            blocks = int(np.ceil(ins[k] / 512))
            shared = [int(app[k]) * 10 + j for j in range(int(sys_blocks[app[k]]))]
            ids = (shared + list(range(1000 + k * 100, 1000 + k * 100 + blocks)))[:blocks]
            f.write(json.dumps({"timestamp": int(round(t[k] * 1000)), "input_length": int(ins[k]),
                                "output_length": int(outs[k]), "hash_ids": ids}) + "\n")


if __name__ == "__main__":
    main()
