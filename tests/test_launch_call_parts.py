"""benchmarks/launch_call_parts.py engine --by-position: the verify launch calls are keyed by
their position after the last extend-only launch (CPU, tiny model)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.conftest import TINY_SPEC_SCENARIO as SCENARIO

pytest.importorskip("torch")



def _parts(tmp_path, *extra):
    sc = tmp_path / "s.yaml"
    sc.write_text(SCENARIO)
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "launch_call_parts.py"), "engine", "--device", "cpu",
                        "--preset", "tiny", "--scenario", str(sc), "--by-position", *extra],
                       capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(r.stdout.strip().splitlines()[-1])["parts_us"]


def test_verify_calls_are_keyed_by_position_after_a_prefill(tmp_path):
    parts = _parts(tmp_path)
    assert {"k1", "k2"} <= set(parts) <= {"k1", "k2", "k3", "k4+"}
    assert parts["k1"]["n"] >= 3


def test_the_profiler_variant_times_the_publish_wait_loops_calls_by_batch_size():
    """``profiler``: the stall phase's launch calls keyed by batch size. Its no-overlap loop
    (launches that end through the engine's LoopHost) is left out: its calls end with the
    engine's step record, not the publish-wait loops' call this variant compares."""
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "launch_call_parts.py"), "profiler", "--device", "cpu",
                        "--preset", "tiny", "--window", "3", "--contexts", "64", "--batch-sizes", "1,2"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    parts = out["parts_us"]
    assert set(parts) == {"1", "2"}
    # 2 passes x 2 loops (queued, block) x (warm-up + timed cycles) per batch size, no more
    assert parts["1"]["n"] == parts["2"]["n"] and parts["1"]["n"] % 4 == 0
    assert len(out["stall_us"]) == 2


def test_extends_times_the_extend_only_calls_with_the_runners_extend_as_a_part(tmp_path):
    """``--extends``: one key, ``extend``, one record per extend-only launch, with
    ``ModelRunner.extend`` and the KV sync among its parts, both inside the call."""
    sc = tmp_path / "s.yaml"
    sc.write_text(SCENARIO)
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "launch_call_parts.py"), "engine", "--device", "cpu",
                        "--preset", "tiny", "--scenario", str(sc), "--extends"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    parts = json.loads(r.stdout.strip().splitlines()[-1])["parts_us"]
    assert set(parts) == {"extend"}
    e = parts["extend"]
    assert e["n"] >= 1
    assert 0 < e["ModelRunner.extend"] < e["total"]
    assert 0 < e["RuntimeEngine._sync_kv"] < e["total"] - e["ModelRunner.extend"] + 1.0
