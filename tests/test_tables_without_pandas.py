"""A run's tables as numpy columns (sim/tables.py): the summary, the bench_serving line and the
parquet files made from them without pandas equal what the DataFrames give.

Invariants: TAB-1 the pyarrow table built from buffers is ``pa.Table.from_pandas`` of the
DataFrame (types, nulls, values); TAB-2 ``summarize`` of columns equals ``summarize`` of the
DataFrames bit for bit; TAB-3 the bench_serving details (per-request ITL lists) equal the
per-request ``itl_values``; TAB-4 ``specsched run`` imports no pandas and its files read back
as the DataFrames' own ``to_parquet`` files.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.bench_serving import _details_of, bench_line
from specsched.sim.config import load_scenario
from specsched.sim.engine import SimEngine
from specsched.sim.metrics import itl_values, summarize
from specsched.sim.records import TABLE_COLUMNS
from specsched.sim.results import _arrow_table, write_results
from specsched.sim.tables import Columns, RunResult

from tests.conftest import ROOT


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, float) and math.isnan(x):
            assert isinstance(y, float) and math.isnan(y), k
        else:
            assert x == y and type(x) is type(y), (k, x, y)


@st.composite
def columns(draw) -> Columns:
    n = draw(st.integers(0, 30))
    floats = st.one_of(st.floats(allow_nan=False, allow_infinity=False, width=64), st.just(float("nan")))
    data: dict[str, np.ndarray] = {}
    for i, kind in enumerate(draw(st.lists(st.sampled_from("fiO"), min_size=1, max_size=5))):
        if kind == "f":
            data[f"c{i}"] = np.array(draw(st.lists(floats, min_size=n, max_size=n)), dtype=np.float64)
        elif kind == "i":
            data[f"c{i}"] = np.array(draw(st.lists(st.integers(-2**62, 2**62), min_size=n, max_size=n)), dtype=np.int64)
        else:
            words = st.sampled_from(["extend", "decode", "verify", "mixed", "main", "inject", "é", ""])
            data[f"c{i}"] = np.array(draw(st.lists(words, min_size=n, max_size=n)), dtype=object)
    return Columns(data)


@settings(max_examples=150, deadline=None)
@given(columns())
def test_arrow_table_from_buffers_is_the_one_pandas_makes(cols):
    """TAB-1 on random tables: float columns with NaN (-> null), int64, strings, empty ones."""
    got = _arrow_table(cols)
    want = pa.Table.from_pandas(cols.frame(), preserve_index=False).replace_schema_metadata(None)
    assert got.schema.equals(want.schema)
    assert got.equals(want)


@st.composite
def run_tables(draw) -> tuple[Columns, Columns, Columns]:
    """Requests (some unfinished), their deliveries (time-ordered or not, empty chunks
    included) and a steps table with decode and verify rows."""
    n = draw(st.integers(1, 12))
    out = draw(st.lists(st.integers(1, 6), min_size=n, max_size=n))
    start = np.array(draw(st.lists(st.floats(0, 5), min_size=n, max_size=n)))
    rid, t, k, first, fin = [], [], [], np.full(n, np.nan), np.full(n, np.nan)
    for i in range(n):
        cur = start[i]
        chunks = draw(st.lists(st.integers(0, 3), min_size=1, max_size=6))
        got = 0
        for c in chunks:
            cur += draw(st.floats(0.001, 0.5))
            rid.append(i), t.append(cur), k.append(c)
            if c and math.isnan(first[i]):
                first[i] = cur
            got += c
        if draw(st.booleans()) and not math.isnan(first[i]):
            fin[i] = cur
            out[i] = max(got, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(np.array(out) > 1, (fin - first) / (np.array(out) - 1), np.nan)
    order = np.arange(len(t))
    if draw(st.booleans()):
        order = np.argsort(np.array(t), kind="stable")  # time order, as a run records them
    req = Columns({"rid": np.arange(n, dtype=np.int64), "input_len": np.full(n, 7, dtype=np.int64),
                   "output_len": np.array(out, dtype=np.int64), "start_s": start, "first_token_s": first,
                   "finish_s": fin, "ttft_s": first - start, "e2e_s": fin - start,
                   "tpot_s": tpot})
    ch = Columns({"rid": np.array(rid, dtype=np.int64)[order], "time_s": np.array(t)[order],
                  "n_tokens": np.array(k, dtype=np.int64)[order]})
    m = draw(st.integers(0, 8))
    s0 = np.cumsum(draw(st.lists(st.floats(0.001, 0.1), min_size=m, max_size=m)))
    steps = Columns({"step": np.arange(m, dtype=np.int64),
                     "mode": np.array(draw(st.lists(st.sampled_from(["decode", "verify"]), min_size=m, max_size=m)), dtype=object),
                     "part": np.array(["main"] * m, dtype=object),
                     "batch_size": np.array(draw(st.lists(st.integers(1, 3), min_size=m, max_size=m)), dtype=np.int64),
                     "num_extend_tokens": np.zeros(m, dtype=np.int64), "gpu_start_s": s0, "gpu_end_s": s0 + 0.001,
                     "host_blocked_s": np.zeros(m), "accepted_tokens": np.ones(m, dtype=np.int64),
                     "decoding_reqs": np.ones(m, dtype=np.int64)})
    return req, ch, steps


def _details_reference(requests: pd.DataFrame, chunks: pd.DataFrame) -> dict:
    """The per-request lists as bench_record built them with pandas (one itl_values per group)."""
    reqs = requests.sort_values("rid")
    by_rid = {int(r): g for r, g in chunks.groupby("rid", sort=False)}
    itls = [[] if (g := by_rid.get(r)) is None else itl_values(g).tolist() for r in reqs["rid"].astype(int).tolist()]
    done = reqs["finish_s"].notna()
    return {"input_lens": reqs["input_len"].astype(int).tolist(),
            "output_lens": [int(x) if ok else 0 for x, ok in zip(reqs["output_len"], done, strict=True)],
            "ttfts": [float(x) if ok else 0.0 for x, ok in zip(reqs["ttft_s"], done, strict=True)],
            "itls": itls, "generated_texts": [""] * len(reqs), "errors": ["" if ok else "not finished" for ok in done]}


@settings(max_examples=200, deadline=None)
@given(run_tables())
def test_summary_and_details_of_columns_equal_the_dataframes(tables):
    """TAB-2 and TAB-3 on random tables (unfinished requests, empty chunks, rows out of time order)."""
    req, ch, steps = tables
    _same(summarize(req, ch, steps), summarize(req.frame(), ch.frame(), steps.frame()))
    got = _details_of(req, ch)
    want = _details_reference(req.frame(), ch.frame())
    assert json.dumps(got) == json.dumps(want)


@pytest.mark.parametrize("case", [("burst256-ht.yaml", 8, "full"), ("poisson8b-fixed.yaml", 30, "full"),
                                  ("poisson8b-fixed.yaml", 30, "compact")])
def test_a_runs_files_and_line_equal_the_dataframes(tmp_path, case):
    """TAB-4's files: a run written from its columns and the same run written from its
    DataFrames read back equal (pandas and pyarrow), with the same bench_serving line."""
    name, n, records = case
    sc = load_scenario(ROOT / "scenarios" / name)
    sc = type(sc).model_validate({**sc.model_dump(mode="json"), "workload": {**sc.workload.model_dump(mode="json"), "num_requests": n}})
    res = SimEngine(sc, records=records).run()
    held = [res.table(t) for t in TABLE_COLUMNS]   # the run's own columns (read before any frame)
    assert all(type(t) is Columns for t in held)
    cols = RunResult(*held, res.summary, res.scenario)
    frames = RunResult(res.requests, res.chunks, res.steps, res.timeseries, res.summary, res.scenario)
    write_results(cols, tmp_path / "a")
    write_results(frames, tmp_path / "b")
    for t in TABLE_COLUMNS:
        a, b = tmp_path / "a" / f"{t}.parquet", tmp_path / "b" / f"{t}.parquet"
        pd.testing.assert_frame_equal(pd.read_parquet(a), pd.read_parquet(b), check_exact=True)
        assert pq.read_table(a).equals(pq.read_table(b).replace_schema_metadata(None))
    assert (tmp_path / "a" / "bench_serving.jsonl").read_text() == (tmp_path / "b" / "bench_serving.jsonl").read_text()
    assert bench_line(cols) == bench_line(frames)


def test_specsched_run_imports_no_pandas(tmp_path):
    """TAB-4: the run command writes its tables, summary and bench_serving line without pandas."""
    code = ("import sys\nfrom specsched.cli import main\n"
            f"rc = main(['run', 'burst256-ht', '--set', 'workload.num_requests=4', '-q', '--out', {str(tmp_path / 'o')!r}])\n"
            "print(rc, 'pandas' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.stdout.strip().splitlines()[-1] == "0 False", r.stdout + r.stderr
    assert len(pd.read_parquet(tmp_path / "o" / "requests.parquet")) == 4
