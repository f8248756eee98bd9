"""The accept draws' seed key (acceptance ``seed_key``) and reading it back from a recorded run.

The runtime forces the accept lengths of its seed key on the GPU (runtime/engine.py builds
the same sim.acceptance.AcceptanceModel). Runs recorded before the accept draws had a key of
their own ([seed, 8, rid]) were forced with [seed, 3, rid]; predicted again with today's key
they draw other lengths. Round 27's batch1 runs (docs/measurements/h200-v27/results.tar.xz)
ran these per-request verify counts and first accepted blocks; predicted with the new key
their median ITL moved from cycle / 5 to cycle / 4 (+16..27 %) with p25, p75 and mean ITL
unchanged.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.acceptance import AcceptanceModel, recorded_seed_key, verifies_to_deliver
from specsched.sim.acceptance_config import AcceptanceConfig
from specsched.sim.config import load_scenario

from tests.conftest import ROOT, load_benchmark, tiny_profile

# scenarios/h200/batch1.yaml's acceptance, window 6, seed 1
BATCH1 = AcceptanceConfig(mean_accept_length=3.2394, request_spread=0.2556)
# h200-v27 batch1-base-measured: steps.parquet accepted_tokens of each request's first 8
# verifies, requests.parquet spec_cycles (256 output tokens each, 255 by verifies)
V27_FIRST_BLOCKS = {0: [3, 5, 5, 4, 6, 1, 2, 6], 1: [1, 1, 3, 1, 2, 2, 2, 2],
                    2: [4, 6, 6, 6, 4, 2, 6, 1], 3: [1, 1, 4, 2, 1, 3, 1, 2]}
V27_VERIFIES = [86, 103, 63, 87]


def test_the_shared_key_draws_what_round_27s_gpu_ran():
    m = AcceptanceModel(BATCH1.model_copy(update={"seed_key": "shared"}), 6, 1)
    for rid, blocks in V27_FIRST_BLOCKS.items():
        assert [m.draw(rid, c) for c in range(8)] == blocks
        assert verifies_to_deliver(m, rid, 255) == V27_VERIFIES[rid]
    today = AcceptanceModel(BATCH1, 6, 1)
    assert [today.draw(0, c) for c in range(8)] != V27_FIRST_BLOCKS[0]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**40), key=st.sampled_from(["accept", "shared"]),
       n=st.integers(3, 12), tokens=st.integers(40, 400))
def test_a_run_forced_with_a_key_reads_back_as_that_key(seed, key, n, tokens):
    """INV: the verify counts a key's draws need are read back as that key; counts of no
    forced acceptance (one token a verify) as none."""
    m = AcceptanceModel(BATCH1.model_copy(update={"seed_key": key}), 6, seed)
    rids = np.arange(n)
    toks = np.full(n, tokens)
    counts = np.array([verifies_to_deliver(m, r, tokens) for r in rids])
    for r, c in zip(rids, counts, strict=True):   # the least n whose draws reach the tokens
        s = np.cumsum([m.draw(int(r), i) for i in range(c)])
        assert s[-1] >= tokens and (c == 1 or s[-2] < tokens)
    assert recorded_seed_key(BATCH1, 6, seed, rids, toks, counts) == key
    assert recorded_seed_key(BATCH1, 6, seed, rids, toks, toks) is None


def test_repredict_predicts_a_recorded_run_with_the_key_it_was_forced_with(tmp_path):
    rp = load_benchmark("repredict_h200")
    sc = load_scenario(ROOT / "scenarios" / "h200" / "batch1.yaml")
    assert sc.acceptance.seed_key == "accept"
    pd.DataFrame({"rid": range(4), "output_len": 256, "spec_cycles": V27_VERIFIES}).to_parquet(
        tmp_path / "requests.parquet")
    got = rp.with_recorded_accept_key(sc, tmp_path)
    assert got.acceptance.seed_key == "shared"
    run = rp.run_scenario(got, seed=got.seed, profile=tiny_profile())
    assert run.requests.sort_values("rid").spec_cycles.tolist() == V27_VERIFIES
    (tmp_path / "requests.parquet").unlink()
    assert rp.with_recorded_accept_key(sc, tmp_path).acceptance.seed_key == "accept"
