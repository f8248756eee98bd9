"""Mooncake hash_ids as shared prompt prefixes: the token ids they stand for, the trace's own
reuse, and the radix cache's hits in a run (SGLang's cache hit rate), on small synthetic
traces."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.config import TraceConfig
from specsched.sim.engine import SimEngine
from specsched.sim.errors import ConfigError
from specsched.sim.trace import load_trace
from specsched.sim.trace_prefix import BlockTokens, prefix_reuse

from tests.conftest import make_scenario, tiny_profile

# (arrival ms, input_length, hash_ids): a shared 2-block system prompt, a session that
# grows, and an unrelated request; 10 s apart, so each finishes before the next arrives
ROWS = [(0, 1500, [0, 1, 2]), (10_000, 1400, [0, 1, 3]), (20_000, 2000, [0, 1, 2, 4]), (30_000, 300, [5])]
REUSED = 0 + 2 * 512 + 1500 + 0        # leading tokens an earlier request had (request 0's third block is partial)


def _write(tmp_path, rows, name="mc.jsonl", **extra):
    p = tmp_path / name
    p.write_text("".join(json.dumps({"timestamp": t, "input_length": n, "output_length": 4, "hash_ids": h, **extra})
                         + "\n" for t, n, h in rows))
    return p


def _scenario(path, **server):
    return make_scenario(workload={"kind": "trace", "trace": {"path": str(path), "layout": "mooncake"},
                                   "input_len": None, "output_len": None},
                         server={"speculative_algorithm": "none", "speculative_num_draft_tokens": 1, **server})


def test_block_tokens_share_exactly_the_shared_blocks():
    a = np.asarray(BlockTokens(np.array([7, 8, 9]), 1300, 0, 512))
    b = np.asarray(BlockTokens(np.array([7, 8, 2]), 1200, 1, 512))
    first_diff = int(np.flatnonzero(a[:1200] != b)[0])
    assert first_diff == 1024 and len(a) == 1300 and len(set(a.tolist())) == 1300
    c = BlockTokens(np.array([7]), 700, 2, 512)                       # longer than its blocks: a unique tail
    assert np.array_equal(np.asarray(c)[:512], a[:512]) and not set(c[512:].tolist()) & set(a.tolist())
    assert np.array_equal(c[100:600], np.asarray(c)[100:600]) and c[5] == a[5] and len(c[::7]) == 100


def test_trace_reuse_and_the_simulated_cache_hit_rate_agree(tmp_path):
    p = _write(tmp_path, ROWS)
    tr = load_trace(TraceConfig(path=str(p), layout="mooncake"))
    total = sum(n for _, n, _ in ROWS)
    assert tr.prefix_reuse() == pytest.approx(REUSED / total)
    res = SimEngine(_scenario(p), tiny_profile()).run()
    assert res.summary["cache_hit_rate"] == pytest.approx(REUSED / total)
    # the same trace without the radix cache computes every prompt token, and takes longer to first token
    off = SimEngine(_scenario(p, disable_radix_cache=True), tiny_profile()).run()
    assert "cache_hit_rate" not in off.summary
    ttft = res.requests.sort_values("rid")["ttft_s"].to_numpy()
    ttft_off = off.requests.sort_values("rid")["ttft_s"].to_numpy()
    assert ttft[0] == pytest.approx(ttft_off[0]) and (ttft[1:3] < ttft_off[1:3]).all()


def test_rows_without_hash_ids_share_nothing_and_a_named_column_is_required(tmp_path):
    p = tmp_path / "mixed.jsonl"
    p.write_text(json.dumps({"timestamp": 0, "input_length": 600, "output_length": 4, "hash_ids": [1, 2]}) + "\n"
                 + json.dumps({"timestamp": 5, "input_length": 600, "output_length": 4}) + "\n")
    tr = load_trace(TraceConfig(path=str(p), layout="mooncake"))
    assert tr.hash_offsets.tolist() == [0, 2, 2] and tr.prefix_reuse() == 0.0
    with pytest.raises(ConfigError) as e:
        load_trace(TraceConfig(path=str(p), layout="mooncake", columns={"timestamp": "timestamp",
                               "input_len": "input_length", "output_len": "output_length", "hash_ids": "hash_ids"}))
    assert e.value.file.endswith("mixed.jsonl:2") and e.value.key == "hash_ids"
    plain = load_trace(TraceConfig(path=str(p), time_unit="ms"))       # custom layout: no block ids read
    assert plain.hash_ids is None and plain.prompt_tokens(0) is None


def test_block_ids_in_a_csv_and_cut_to_the_prompt(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text('ts,in,out,blocks\n0,1000,5,"[4, 5, 6, 7]"\n1,513,5,4 5\n2,10,5,\n')
    cols = {"timestamp": "ts", "input_len": "in", "output_len": "out", "hash_ids": "blocks"}
    tr = load_trace(TraceConfig(path=str(p), columns=cols))
    assert tr.hash_ids.tolist() == [4, 5, 4, 5] and tr.hash_offsets.tolist() == [0, 2, 4, 4]


@pytest.mark.parametrize("value", ['"x"', "[1, -2]", "[1.5]", "[true]", "7"])
def test_bad_block_ids_name_file_line_key_value(tmp_path, value):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1]}\n'
                 f'{{"timestamp": 1, "input_length": 5, "output_length": 1, "hash_ids": {value}}}\n')
    with pytest.raises(ConfigError) as e:
        load_trace(TraceConfig(path=str(p), layout="mooncake"))
    assert e.value.file.endswith("bad.jsonl:2") and e.value.key == "hash_ids" and "integers >= 0" in e.value.allowed


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3000), st.lists(st.integers(0, 3), min_size=1, max_size=6)), min_size=1, max_size=12))
def test_invariant_reuse_is_the_longest_shared_token_prefix(rows):
    """Invariant: a request's reuse equals the longest common prefix of its token ids with
    any earlier request's (capped at input - 1): hash blocks and token ids agree."""
    block = 64
    ns = np.array([n for n, _ in rows])
    ids = [np.array(h[: -(-n // block)]) for n, h in rows]
    offsets = np.r_[0, np.cumsum([len(h) for h in ids])]
    toks = [np.asarray(BlockTokens(h, n, i, block)) for i, (h, (n, _)) in enumerate(zip(ids, rows, strict=True))]
    want = 0
    for i, t in enumerate(toks):
        best = 0
        for u in toks[:i]:
            m = min(len(t), len(u))
            d = np.flatnonzero(t[:m] != u[:m])
            best = max(best, int(d[0]) if len(d) else m)
        want += min(best, len(t) - 1)
    got = prefix_reuse(ns, np.concatenate(ids), offsets, block)
    assert got == pytest.approx(want / ns.sum())
