"""repredict_h200 --launch-per-req-from-runs: host.launch_per_req_s scaled by the engine's
launch call slope (the runs' host_probe) over the profiler's stall-loop call slope (its
provenance); an estimate, so it must move the term by exactly that ratio and nothing else."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.conftest import load_benchmark, tiny_profile

STALL_TEXT = ("intercept of ... stalls bs 1 635 us, bs 16 905 us, bs 128 1918 us; the launch call in these loops "
              "(wall / thread CPU, medians; runtime.host_probe): bs 1 block 1200 us / 1199 us, queued 1217 us / "
              "1219 us, bs 16 block 1500 us / 1639 us, queued 1804 us / 1805 us, bs 128 block 3740 us / 3195 us, "
              "queued 3156 us / 3155 us; launch_s = ...")


def _profile(per_req: float = 1e-5):
    p = tiny_profile(launch_per_req_s=per_req)
    data = p.model_dump(mode="python")
    data["provenance"] = {**(data.get("provenance") or {}), "host.launch_s": STALL_TEXT}
    return type(p).model_validate(data)


def _probe(slope_s: float, sizes=(8, 32, 64), n: int = 25) -> pd.DataFrame:
    rows = []
    for b in sizes:
        rows += [{"mode": "verify", "part": "main", "batch_size": b, "host_launch_cpu_s": 1e-3 + slope_s * b}] * n
    # extends and injections, and verifies above the graph limit, are not the graph-replayed call
    rows += [{"mode": "extend", "part": "main", "batch_size": 8, "host_launch_cpu_s": 9e-3}] * n
    rows += [{"mode": "verify", "part": "main", "batch_size": 200, "host_launch_cpu_s": 0.02}] * n
    return pd.DataFrame(rows)


@pytest.mark.parametrize("engine_slope_us", [0.0, 2.5, 20.0])
def test_scales_launch_per_req_by_the_ratio_of_the_two_slopes(engine_slope_us: float) -> None:
    rp = load_benchmark("repredict_h200", "rp_launch")
    prof = _profile()
    stall = rp.stall_call_slope(prof)
    assert stall == pytest.approx(np.polyfit([1, 16, 128], [1200e-6, 1500e-6, 3740e-6], 1)[0])
    got = rp.launch_per_req_from_runs(prof, {"a": _probe(engine_slope_us * 1e-6)}, {"a": 128})
    assert got is not None
    new, text = got
    assert new.host.launch_per_req_s == pytest.approx(1e-5 * engine_slope_us * 1e-6 / stall)
    assert "ESTIMATED" in text
    # nothing else moves
    a, b = prof.host.model_dump(), new.host.model_dump()
    assert {k for k in a if a[k] != b[k]} <= {"launch_per_req_s"}


def test_no_estimate_without_both_slopes() -> None:
    rp = load_benchmark("repredict_h200", "rp_launch2")
    plain = tiny_profile()
    assert rp.stall_call_slope(plain) is None
    assert rp.launch_per_req_from_runs(plain, {"a": _probe(1e-6)}, {"a": 128}) is None
    # one batch size only: no slope
    assert rp.launch_per_req_from_runs(_profile(), {"a": _probe(1e-6, sizes=(8,))}, {"a": 128}) is None
