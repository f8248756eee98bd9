"""``specsched validate --out DIR`` keeps every validation it appends to validate.csv: a run
with another seed or ``--set`` overrides is written beside the plain one
(``<scenario>-<arm>-seed<N>[+<overrides>]-measured``, the suffix ``measure`` and ``run``
use), not over it. It replaced the plain run's directories silently while validate.csv kept
both rows, so the earlier rows pointed at results that were gone."""

from __future__ import annotations

import json

import pytest

from specsched.cli import main

pytest.importorskip("torch")

SC = "scenarios/h200/batch8.yaml"
SMALL = ["--set", "workload.num_requests=2", "--set", "workload.output_len.value=4",
         "--set", "workload.input_len.value=16"]


def _validate(out, *extra: str) -> int:
    return main(["validate", SC, "--device", "cpu", "--preset", "tiny", "--profile", "h200-1b", "--quiet",
                 "--out", str(out), *SMALL, *extra])


def test_a_validation_with_another_seed_or_overrides_keeps_the_earlier_one(tmp_path, capsys):
    out = tmp_path / "v"
    assert _validate(out) == 0
    assert _validate(out, "--seed", "2") == 0
    assert _validate(out, "--set", "server.max_running_requests=1") == 0
    capsys.readouterr()
    measured = sorted(p.name for p in out.glob("*-measured"))
    assert len(measured) == 3 and len(list(out.glob("*-predicted"))) == 3, measured
    seeds = sorted(json.loads((out / m / "summary.json").read_text())["seed"] for m in measured)
    assert seeds == [1, 1, 2]
    # the names measure gives: <arm>-seed<N>[+<overrides>], after the scenario's name
    assert all(m.startswith("h200-batch8-base-seed") for m in measured), measured
