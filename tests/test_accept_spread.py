"""Per-request acceptance read from a detailed bench_serving line's streamed chunks
(analysis/accept_spread.py), and the request spread solved from it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.analysis.accept_spread import (
    MIN_REQUESTS,
    ChunkAcceptance,
    acceptance_from_chunks,
    chunk_acceptance,
    request_spread_for,
)
from specsched.sim.bench_serving import parse_run

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "docs/measurements/h100-v55-spec-holdout/bench_serving/rate20-seed1-rep1.jsonl"
"""A runtime run on an H100 whose acceptance was forced at request_spread 0.2556 (the
scenario scenarios/h200/poisson-spec.yaml), 128 requests of 256 tokens."""


def _line(blocks: list[list[int]], backend: str = "sglang", accept: float | None = None) -> dict:
    """A detailed line whose request i streamed chunks of blocks[i] tokens after its first,
    each chunk's gap split evenly over its tokens as the sglang client writes it."""
    itls, outs = [], []
    for k, req in enumerate(blocks):
        gaps = []
        for j, n in enumerate(req):
            gaps += [(0.010 + 0.0001 * ((k * 7 + j) % 13)) / n] * n
        itls.append(gaps)
        outs.append(1 + sum(req))
    n = len(blocks)
    acc = accept if accept is not None else sum(sum(b) for b in blocks) / sum(len(b) for b in blocks)
    return {"backend": backend, "completed": n, "request_rate": 10.0, "duration": 10.0, "accept_length": acc,
            "input_lens": [100] * n, "output_lens": outs, "ttfts": [0.05] * n, "itls": itls,
            "generated_texts": [""] * n, "errors": [""] * n}


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.integers(1, 6), min_size=8, max_size=40), min_size=MIN_REQUESTS, max_size=30))
def test_invariant_chunks_are_read_back_from_split_gaps(blocks):
    """Invariant: a request's accept length read from its split ITLs is its tokens after the
    first over its chunks after the first, whatever the chunk sizes (each chunk's gap differs
    from its neighbours', as measured timings do)."""
    blocks = [b for b in blocks if 1 + sum(b) >= 16]
    if len(blocks) < MIN_REQUESTS:
        return
    got = chunk_acceptance(parse_run(_line(blocks), "m.jsonl:1"))
    assert got is not None
    want = np.array([sum(b) / len(b) for b in blocks])
    assert np.allclose(got.accept, want)
    assert got.verify_weighted == pytest.approx(sum(map(sum, blocks)) / sum(map(len, blocks)))


def test_simulated_lines_and_short_runs_give_no_estimate():
    blocks = [[3] * 10] * MIN_REQUESTS
    assert chunk_acceptance(parse_run(_line(blocks, backend="specsched-sim"), "s.jsonl:1")) is None
    assert chunk_acceptance(parse_run(_line(blocks[:-1]), "m.jsonl:1")) is None


def test_chunks_that_are_not_verifies_give_no_acceptance_block():
    """A client that received several verifies as one chunk reads accept lengths above the
    server's: the chunks disagree with the line's accept_length and nothing is estimated."""
    blocks = [[3] * 10] * MIN_REQUESTS
    assert acceptance_from_chunks(parse_run(_line(blocks, accept=3.0), "m.jsonl:1"), 3.0, 6) is not None
    assert acceptance_from_chunks(parse_run(_line(blocks, accept=2.5), "m.jsonl:1"), 2.5, 6) is None


def test_the_solved_spread_grows_with_the_measured_one():
    rng = np.random.default_rng(3)
    outs = np.full(96, 200)
    solved = [request_spread_for(ChunkAcceptance(3.0 + rng.normal(0, sd, 96), outs, 3.0), 3.0, 6)
              for sd in (0.05, 0.3, 0.6)]
    assert solved[0] == 0.0 and 0 < solved[1] < solved[2]


def test_a_measured_lines_spread_is_found_near_the_one_its_run_was_forced_at():
    """The runtime forced request_spread 0.2556 on an H100 run (round 55); reading its chunks
    gives 0.22 (one draw of 128 requests: the spread's sampling error is ~6 %, and the run's
    own draw accepted 3.12 against the 3.18 expected), and without the estimate a line-built
    scenario had no spread at all."""
    run = parse_run(json.loads(MEASURED.read_text().splitlines()[0]), f"{MEASURED.name}:1")
    block, note = acceptance_from_chunks(run, run.summary["accept_length"], 6)
    assert 0.17 < block["request_spread"] < 0.33
    assert block["mean_accept_length"] == pytest.approx(3.171, abs=0.002)
    assert "128 requests' streamed chunks" in note


def test_from_bench_takes_the_chunks_acceptance(tmp_path, capsys):
    from specsched.cli import main

    out = tmp_path / "s.yaml"
    assert main(["scenario", "from-bench", str(MEASURED), "--profile", "h200-1b", "--out", str(out)]) == 0
    import yaml

    acc = yaml.safe_load(out.read_text())["acceptance"]
    assert acc["request_spread"] > 0.1 and acc["mean_accept_length"] == pytest.approx(3.171, abs=0.002)
