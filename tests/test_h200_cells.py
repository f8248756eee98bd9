"""Every H200 cell (scenarios/h200/*.yaml), at its full size and in every arm, loads and is
simulated to completion with the shipped profile (profiles/h200-1b.yaml), and
benchmarks/gpu_validate.py knows exactly these cells: the 11 rounds 1-17 measured are its
default, the ones never measured before are named only with --cells, and a name without a
file is refused before any profiling starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from specsched.sim.config import arm_names, load_scenario
from specsched.sim.engine import run_scenario
from specsched.sim.errors import ConfigError
from specsched.sim.profile import Grid, load_profile

from tests.conftest import load_benchmark

ROOT = Path(__file__).resolve().parent.parent
CELLS = ROOT / "scenarios" / "h200"
NAMES = sorted(p.stem for p in CELLS.glob("*.yaml"))
gv = load_benchmark("gpu_validate", "gv_cells")
CHAIN_STEP = Grid.model_validate({"x": [1, 64], "seconds": [[3e-4], [5e-4]]})
"""A made-up one-token draft step (the 1b proxy's 2-layer drafter is ~0.3 ms), for the chain
arms' run to completion only."""


@pytest.fixture(scope="module")
def profile():
    return load_profile(str(ROOT / "profiles" / "h200-1b.yaml"))


@pytest.mark.parametrize("cell", NAMES)
def test_every_cell_loads_and_simulates_in_every_arm(cell: str, profile) -> None:
    path = CELLS / f"{cell}.yaml"
    arms = arm_names(path)
    assert arms[0] == "base" and len(arms) >= 2  # a second arm: what the cell compares
    for arm in arms:
        sc = load_scenario(path, arm)
        assert sc.profile == "h200-1b"
        algo = sc.server.speculative_algorithm
        if algo.enabled and not algo.is_block and profile.gpu.draft_step is None:
            # a chain arm needs the draft step a fresh `specsched profile` times (gpu_validate
            # profiles the machine first); the shipped h200-1b predates it: one clear refusal
            with pytest.raises(ConfigError, match=r"gpu\.draft_step.*re-profile"):
                run_scenario(sc, seed=sc.seed, profile=profile)
            use = profile.model_copy(update={"gpu": profile.gpu.model_copy(update={"draft_step": CHAIN_STEP})})
            s = run_scenario(sc, seed=sc.seed, profile=use).summary
            assert s["completed"] == sc.workload.num_requests
            continue
        s = run_scenario(sc, seed=sc.seed, profile=profile).summary
        assert s["completed"] == sc.workload.num_requests
        assert s["duration"] > 0 and s["median_ttft_ms"] > 0 and s["output_throughput"] > 0


def test_gpu_validate_knows_every_cell_and_keeps_its_default() -> None:
    assert sorted(gv.KNOWN_CELLS) == NAMES
    assert not set(gv.NEW_CELLS) & set(gv.CELLS)
    # the default --cells is the list rounds 1-17 measured (their commands keep their meaning)
    assert gv.CELLS == ["batch1", "batch8", "batch32", "batch64", "burst66", "poisson-nospec", "chunked-prefix",
                        "window4-lowacc", "kv-retract", "above-graph-bs", "long-context"]
    assert gv.parse_cells("none") == [] and gv.parse_cells("batch8,queue-chunked,") == ["batch8", "queue-chunked"]
    with pytest.raises(ValueError, match="unknown cell 'batch9'.*known: batch1"):
        gv.parse_cells("batch8,batch9")


def test_an_unknown_cell_is_refused_before_profiling(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        gv.main(["--out", str(tmp_path / "r"), "--cells", "batch8,nope", "--device", "cpu"])
    assert e.value.code == 2
    assert "--cells: unknown cell 'nope'" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
    with pytest.raises(SystemExit) as e:
        gv.main(["--out", str(tmp_path / "r"), "--cells", "none", "--poisson-cell", "nope", "--device", "cpu"])
    assert e.value.code == 2 and "--poisson-cell: unknown cell 'nope'" in capsys.readouterr().err


def test_the_new_cells_differ_from_every_measured_one_where_they_say() -> None:
    """What each new cell's header says only it tests holds against the 11 measured cells."""
    old = {c: load_scenario(CELLS / f"{c}.yaml") for c in gv.CELLS}
    new = {c: load_scenario(CELLS / f"{c}.yaml") for c in gv.NEW_CELLS}
    spec_poisson = [c for c, sc in old.items() if sc.workload.kind == "poisson" and sc.server.spec_window > 1]
    assert not spec_poisson and new["poisson-spec"].workload.kind == "poisson"
    assert new["poisson-spec"].server.spec_window > 1
    assert new["window8-highacc"].server.spec_window > max(sc.server.spec_window for sc in old.values())
    assert new["sharegpt-lengths"].workload.input_len.kind == "file" == new["sharegpt-lengths"].workload.output_len.kind
    assert all(sc.workload.output_len.kind == "fixed" for sc in old.values())
    short = new["conc24-short"].workload
    assert short.max_concurrency == 24 and short.output_len.value < min(sc.workload.output_len.value for sc in old.values())
    q = new["queue-chunked"]
    assert q.workload.concurrency >= 2 * q.server.max_running_requests  # a standing queue
    assert q.workload.input_len.value * q.workload.input_len.range_ratio > 2 * q.server.chunked_prefill_size  # 3 chunks
    # round 19's cells, each against every cell measured before it
    before = {**old, **{c: sc for c, sc in new.items() if gv.FIRST_ROUND[c] < 19}}
    assert all(sc.workload.burstiness is None for sc in before.values())
    assert new["gamma-bursty"].workload.burstiness < 1 and new["gamma-bursty"].server.spec_window > 1
    assert new["window2-closed"].server.spec_window < min(sc.server.spec_window for sc in before.values()
                                                          if sc.server.spec_window > 1)
    m8 = new["maxrun8-overload"]
    assert m8.server.max_running_requests < min(sc.server.max_running_requests for sc in before.values())
    assert m8.workload.kind == "poisson" and m8.server.spec_window == 1
    ld = new["long-decode-nospec"]
    assert ld.server.spec_window == 1 and ld.workload.input_len.value * ld.workload.input_len.range_ratio > 6000
    assert not [c for c, sc in before.items() if sc.server.spec_window == 1
                and sc.workload.input_len.value * sc.workload.input_len.range_ratio > 6000]
    # round 20's: one workload, only the window moves across its arms
    arms = {a: load_scenario(CELLS / "window-sweep.yaml", a) for a in arm_names(CELLS / "window-sweep.yaml")}
    assert sorted(sc.server.spec_window for sc in arms.values()) == [2, 3, 4, 6, 8]
    assert len({(sc.workload.model_dump_json(), sc.acceptance.model_dump_json()) for sc in arms.values()}) == 1
    sc512 = new["small-chunk"]
    assert sc512.server.chunked_prefill_size < min(sc.server.chunked_prefill_size for c, sc in before.items()
                                                   if sc.server.spec_window > 1)
    # round 43's, each against every cell measured before it: mixed chunks, and a queue order
    # other than fcfs, each paired with the arm that turns it off
    before = {**old, **{c: sc for c, sc in new.items() if gv.FIRST_ROUND[c] < 43}}
    assert not [c for c, sc in before.items() if sc.server.enable_mixed_chunk]
    mixed = {a: load_scenario(CELLS / "mixed-chunk.yaml", a) for a in ("base", "unmixed")}
    assert mixed["base"].server.enable_mixed_chunk and not mixed["unmixed"].server.enable_mixed_chunk
    m = mixed["base"]
    assert m.workload.input_len.value * m.workload.input_len.range_ratio > m.server.chunked_prefill_size  # 2+ chunks
    assert {sc.server.schedule_policy for sc in before.values()} == {"fcfs"}
    lof = {a: load_scenario(CELLS / "lof-queue.yaml", a) for a in ("base", "fcfs")}
    assert lof["base"].server.schedule_policy == "lof" and lof["fcfs"].server.schedule_policy == "fcfs"
    q = lof["base"]
    assert q.workload.num_requests >= 2 * q.server.max_running_requests and q.workload.output_len.kind == "uniform"
    # round 45's: priority classes with preemption, paired with the arm that never preempts
    before = {**old, **{c: sc for c, sc in new.items() if gv.FIRST_ROUND[c] < 45}}
    assert not [c for c, sc in before.items() if sc.server.enable_priority_scheduling]
    pp = {a: load_scenario(CELLS / "priority-preempt.yaml", a) for a in ("base", "no_preempt")}
    assert all(sc.server.enable_priority_scheduling for sc in pp.values())
    assert not pp["base"].server.disable_priority_preemption and pp["no_preempt"].server.disable_priority_preemption
    prios = pp["base"].workload.priorities
    assert max(prios) - min(prios) > pp["base"].server.priority_scheduling_preemption_threshold
    # round 48's: conversations that resend their history, against every cell measured before it
    before = {**old, **{c: sc for c, sc in new.items() if gv.FIRST_ROUND[c] < 48}}
    assert not [c for c, sc in before.items() if sc.workload.kind == "multi_turn"]
    mt = {a: load_scenario(CELLS / "multi-turn.yaml", a) for a in arm_names(CELLS / "multi-turn.yaml")}
    assert mt["base"].workload.kind == "multi_turn" and not mt["base"].server.disable_radix_cache
    assert mt["no_cache"].server.disable_radix_cache and mt["plain"].server.spec_window == 1
    turns = mt["base"].workload.multi_turn
    assert turns.fixed_turns >= 2 and turns.think_time_dist == "exponential"  # pauses at every phase of a step
