"""benchmarks/fit_tree_acceptance.py: a drafter's rank-1 rate and sibling rate from
bench_serving lines measured on several draft trees (sim/draft_tree.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from specsched.sim.draft_tree import tree_mean

from tests.conftest import ROOT, load_benchmark

EAGLE3 = ROOT / "tests" / "data" / "bench" / "sglang-0.5.7-eagle3.jsonl"


def _lines(tmp_path, trees, p=0.7, theta=0.3, extra=()):
    base = json.loads(EAGLE3.read_text().splitlines()[0])
    out = []
    for steps, k, n in trees:
        d = json.loads(json.dumps(base))
        d["server_info"].update(speculative_num_steps=steps, speculative_eagle_topk=k, speculative_num_draft_tokens=n)
        d["accept_length"] = round(tree_mean(np.full(steps, p), theta, k, n), 6)
        out.append(json.dumps(d))
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join([*out, *extra]) + "\n")
    return path


def test_three_trees_give_back_the_drafter_and_check_the_middle_one(tmp_path, capsys):
    fit = load_benchmark("fit_tree_acceptance")
    assert fit.main([str(_lines(tmp_path, [(3, 1, 4), (5, 4, 8), (5, 8, 32)]))]) == 0
    out = capsys.readouterr().out
    assert "per_position_rates: [0.7000, 0.7000, 0.7000, 0.7000, 0.7000]" in out and "sibling_rate: 0.3000" in out
    middle = next(x for x in out.splitlines() if x.startswith("#   5/4/8"))
    measured, modelled = float(middle.split()[2]), float(middle.split("->")[1].split()[0])
    assert modelled == pytest.approx(measured, abs=1e-3)


def test_a_run_without_its_tree_is_left_out_and_one_tree_is_refused_in_one_line(tmp_path, capsys):
    fit = load_benchmark("fit_tree_acceptance")
    no_info = json.dumps({**json.loads(EAGLE3.read_text().splitlines()[0]), "server_info": None})
    path = _lines(tmp_path, [(3, 1, 4)], extra=[no_info])
    assert fit.cli([str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("warning: ") and "left out" in err[0]
    assert len(err) == 2 and "needs two trees of one drafter" in err[1] and "Traceback" not in "".join(err)
