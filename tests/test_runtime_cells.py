"""Every H200 validation cell runs in a tiny form on CPU, in the runtime and the simulator.

The cells in scenarios/h200/ differ on the axes the cost model has (no speculation with
Poisson arrivals, prompts longer than a chunk, a short window with low acceptance, a KV pool
that retracts, batches above cuda_graph_max_bs, long contexts; and, never measured before
round 18, Poisson arrivals with speculation, a long window with high acceptance, long-tailed
lengths from a histogram file, short outputs at a fixed --max-concurrency, a standing queue
with chunked prompts; and before round 19, bursty gamma arrivals, window 2, overload into 8
slots, plain decode past 6K context, 512-token chunks beside verifies; and before round 43,
mixed chunks, a longest-output-first queue); here each is shrunk (tiny
model, short prompts and outputs, a pool scaled with them) and run to completion by both
engines. Where the decisions do not depend on time (bursts: every request is there at 0),
both engines must make the same batch plans.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from specsched.analysis.overrides import load_scenario_with_overrides  # noqa: E402
from specsched.runtime.engine import RuntimeEngine  # noqa: E402
from specsched.sim.config import arm_names  # noqa: E402
from specsched.sim.engine import SimEngine  # noqa: E402

from tests.conftest import load_benchmark, tiny_profile  # noqa: E402

CELLS = Path(__file__).resolve().parent.parent / "scenarios" / "h200"
SMALL = {"workload.input_len.value": 40, "workload.output_len.value": 24}
TINY = {
    "poisson-nospec": {**SMALL, "workload.num_requests": 5, "workload.request_rate": 400.0},
    "chunked-prefix": {"workload.num_requests": 4, "workload.concurrency": 2, "workload.input_len.value": 160,
                       "workload.output_len.value": 16, "server.chunked_prefill_size": 64,
                       "server.max_prefill_tokens": 64},
    "window4-lowacc": {**SMALL, "workload.num_requests": 5, "workload.concurrency": 3},
    # the retracting burst scaled down (8 x (16 + 96) tokens, 4 slots, 320 KV slots: under
    # sglang 0.5.23's batch_is_full latch admission over-commits only after a request leaves)
    "kv-retract": {"workload.num_requests": 8, "workload.input_len.value": 16, "workload.output_len.value": 96,
                   "server.max_running_requests": 4, "server.max_total_num_tokens": 320,
                   "server.speculative_num_draft_tokens": 4,
                   # the cell's acceptance as stated, at this window (a window what-if would
                   # carry it from the cell's window 6: fewer accepted, no retraction here)
                   "acceptance.window": 4,
                   # whether this tiny burst retracts rides on the accept draws: seeds 2-8
                   # retract in both arms, seed 1 did only with the draws before their key
                   # moved (sim/seed_streams.py ACCEPT)
                   "seed": 2},
    "above-graph-bs": {**SMALL, "workload.num_requests": 6, "workload.concurrency": 5,
                       "server.cuda_graph_max_bs": 2},
    "long-context": {"workload.num_requests": 3, "workload.concurrency": 2, "workload.input_len.value": 600,
                     "workload.output_len.value": 16},
    "very-long-context": {"workload.num_requests": 3, "workload.concurrency": 2, "workload.input_len.value": 600,
                          "workload.output_len.value": 16, "server.chunked_prefill_size": 384,
                          "server.max_prefill_tokens": 384},
    "poisson-spec": {**SMALL, "workload.num_requests": 5, "workload.request_rate": 400.0},
    "window8-highacc": {**SMALL, "workload.num_requests": 5, "workload.concurrency": 3},
    # the lengths stay the cell's own histograms (the runtime reads the file beside the scenario)
    "sharegpt-lengths": {"workload.num_requests": 4, "workload.concurrency": 2},
    "conc24-short": {"workload.num_requests": 8, "workload.max_concurrency": 3, "workload.input_len.value": 80,
                     "workload.output_len.value": 8},
    # a queue: 16 sent into 8 slots (automatic delay threshold 2), 3 chunks a prompt
    "queue-chunked": {"workload.num_requests": 16, "workload.concurrency": 16, "server.max_running_requests": 8,
                      "workload.input_len.value": 160, "workload.output_len.value": 32,
                      "server.chunked_prefill_size": 64, "server.max_prefill_tokens": 64},
    # round 19's cells
    "gamma-bursty": {**SMALL, "workload.num_requests": 6, "workload.request_rate": 400.0},
    "window2-closed": {**SMALL, "workload.num_requests": 5, "workload.concurrency": 3},
    "maxrun8-overload": {**SMALL, "workload.num_requests": 8, "workload.request_rate": 4000.0,
                         "server.max_running_requests": 2},
    "long-decode-nospec": {"workload.num_requests": 3, "workload.concurrency": 2, "workload.input_len.value": 160,
                           "workload.output_len.value": 16, "server.chunked_prefill_size": 64,
                           "server.max_prefill_tokens": 64},
    "small-chunk": {"workload.num_requests": 4, "workload.request_rate": 400.0, "workload.input_len.value": 160,
                    "workload.output_len.value": 16, "server.chunked_prefill_size": 48,
                    "server.max_prefill_tokens": 48},
    "window-sweep": {**SMALL, "workload.num_requests": 5, "workload.concurrency": 3},
    # round 43's: prompts of 2-3 chunks whose extends carry the running decodes (mixed), and
    # a burst twice the slots admitted longest output first
    "mixed-chunk": {"workload.num_requests": 5, "workload.request_rate": 400.0, "workload.input_len.value": 160,
                    "workload.output_len.value": 16, "server.chunked_prefill_size": 64,
                    "server.max_prefill_tokens": 64},
    "lof-queue": {"workload.num_requests": 8, "server.max_running_requests": 4, "workload.input_len.value": 40,
                  "workload.output_len.value": 48, "workload.output_len.range_ratio": 0.25},
    # round 45's: two priority classes behind 3 slots; base preempts, no_preempt does not. The
    # arrivals are ~25 ms apart and the outputs long, so the first priority-20 arrival after three
    # priority-0 ones finds them running under either clock (all at once, the priority order
    # alone would admit the 20s first and nothing would be preempted)
    "priority-preempt": {"workload.input_len.value": 40, "workload.output_len.value": 300,
                         "workload.num_requests": 10, "workload.request_rate": 40.0,
                         "server.max_running_requests": 3},
    # a chain drafter (eagle, topk 1): serial draft steps and a draft extend in the runtime,
    # gpu.draft_step in the simulator; the last arm takes two more steps (window 6)
    "eagle-chain": {**SMALL, "workload.num_requests": 5, "workload.concurrency": 3},
    # round 46's: shared system prompts with the radix cache on (the runtime shares the cached
    # KV between requests); the last arm turns the cache off
    "shared-prefix": {"workload.concurrency": 3, "workload.output_len.value": 8,
                      "workload.shared_prefix.num_groups": 2, "workload.shared_prefix.prompts_per_group": 3,
                      "workload.shared_prefix.system_prompt_len": 48, "workload.shared_prefix.question_len": 16},
    # round 48's: conversations that resend their history (a later turn extends its own
    # earlier turn's KV in the tree), exponential pauses; the last arm turns the cache off
    "multi-turn": {"workload.concurrency": 2, "workload.output_len.value": 8,
                   "workload.multi_turn.num_conversations": 3, "workload.multi_turn.num_turns": 3,
                   "workload.multi_turn.system_prompt_len": 32, "workload.multi_turn.first_prompt_len.value": 24,
                   "workload.multi_turn.user_len.value": 16},
    # a closed loop swept over the client's concurrency, speculation on and off (nospec)
    "closed-loop-crossover": {**SMALL, "workload.num_requests": 6, "workload.max_concurrency": 3},
}
PLAN_COLS = ["mode", "part", "batch_size", "num_extend_tokens", "accepted_tokens", "decoding_reqs"]


def test_every_new_cell_has_a_tiny_form():
    names = {p.stem for p in CELLS.glob("*.yaml")}
    assert set(TINY) <= names
    assert set(load_benchmark("gpu_validate").NEW_CELLS) <= set(TINY)


def test_retracting_burst_device_pool_holds_what_the_ledger_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kv-retract cell crashed the runtime (PoolExhausted from spec_cycle -> pool.reserve):
    the device pool kept retracted requests' slots. Now, before every forward, the device
    holds exactly the ledger's slots per request, never above max_total_num_tokens."""
    sc = load_scenario_with_overrides(CELLS / "kv-retract.yaml", "base", TINY["kv-retract"])
    eng = RuntimeEngine(sc, preset="tiny", device="cpu", warmup=False)
    pool, sync, seen = eng.runner.pool, eng._sync_kv, []

    def checked(plan):
        sync(plan)
        held = {rid: pool.reserved[row] for rid, row in eng.rows.items()}
        ledger = {rid: eng.sched.reqs[rid].kv_allocated for rid in eng.rows}
        seen.append((held == ledger, sum(held.values()), eng.sched.kv.used))

    monkeypatch.setattr(eng, "_sync_kv", checked)
    res = eng.run()
    assert res.summary["num_retractions"] >= 1
    assert seen and all(same and total == used for same, total, used in seen)
    assert max(total for _, total, _ in seen) <= sc.server.max_total_num_tokens
    assert pool.num_free_slots == pool.free_slots.numel()
    # a second pass (a GPU run measures after an unmeasured one; gpu_validate runs several
    # arms on one engine) starts from an empty pool: the first pass's rows were returned
    again = eng.run()
    assert again.summary["num_retractions"] == res.summary["num_retractions"]
    assert pool.num_free_slots == pool.free_slots.numel()


@pytest.mark.parametrize("cell", sorted(TINY))
def test_cell_runs_in_both_engines(cell: str) -> None:
    path = CELLS / f"{cell}.yaml"
    arm = arm_names(path)[-1]  # the arm that differs from base: both sync paths get covered
    for a in ("base", arm):
        sc = load_scenario_with_overrides(path, a, TINY[cell])
        measured = RuntimeEngine(sc, preset="tiny", device="cpu", warmup=False).run()
        simulated = SimEngine(sc, tiny_profile(ingest_per_request_s=0.0)).run()
        n = sc.workload.num_requests
        assert measured.summary["completed"] == simulated.summary["completed"] == n
        assert (measured.requests.sort_values("rid")["output_len"].to_numpy()
                == measured.chunks.groupby("rid")["n_tokens"].sum().sort_index().to_numpy()).all()
        if sc.workload.kind == "burst":
            assert measured.steps[PLAN_COLS].reset_index(drop=True).equals(
                simulated.steps[PLAN_COLS].reset_index(drop=True))
            assert measured.summary["num_retractions"] == simulated.summary["num_retractions"]
        if cell == "kv-retract":
            assert measured.summary["num_retractions"] >= 1
        if cell == "priority-preempt":  # a waiting priority-20 request preempts a running 0 in base only
            for res in (measured, simulated):
                assert (res.summary.get("num_preemptions", 0) >= 1) == (a == "base")
        if cell in ("shared-prefix", "multi-turn"):  # cache hits in base only, the same rate in both engines
            hit = measured.summary.get("cache_hit_rate", 0.0)
            assert (hit > 0) == (a == "base")
            assert hit == pytest.approx(simulated.summary.get("cache_hit_rate", 0.0))
        if cell == "chunked-prefix":  # prompts of ~160 tokens in 64-token chunks: extends over a prefix
            assert (measured.steps["num_extend_tokens"] == 64).sum() >= 4
        if cell == "queue-chunked":  # the delay holds admissions in base only; prompts go in 3 chunks
            delayed = measured.summary["num_delayed_passes"]
            assert (delayed > 0) == (a == "base") and (simulated.summary["num_delayed_passes"] > 0) == (a == "base")
            assert (measured.steps["num_extend_tokens"] == 64).sum() >= 2 * n


def test_the_engine_accepts_another_client_concurrency_but_not_other_requests():
    """RuntimeEngine.accepts: bench_serving's --max-concurrency only times the sends, so a
    concurrency sweep reuses one engine (benchmarks/measure_sweep.py --concurrencies); other
    requests need a new one."""
    from specsched.analysis.overrides import load_scenario_with_overrides as load

    path = CELLS / "conc24-short.yaml"
    tiny = TINY["conc24-short"]
    eng = RuntimeEngine(load(path, "base", tiny), preset="tiny", device="cpu", warmup=False)
    assert eng.accepts(load(path, "base", {**tiny, "workload.max_concurrency": 1}))
    assert not eng.accepts(load(path, "base", {**tiny, "workload.num_requests": 4}))
    assert not eng.accepts(load(path, "base", {**tiny, "workload.output_len.value": 9}))


def test_the_engine_accepts_another_rate_but_not_another_window():
    """RuntimeEngine.accepts: what set_scenario can take without resizing the model."""
    from specsched.analysis.overrides import load_scenario_with_overrides as load

    path = CELLS / "window-sweep.yaml"
    sc = load(path, "base", TINY["window-sweep"])
    eng = RuntimeEngine(sc, preset="tiny", device="cpu", warmup=False)
    assert eng.accepts(sc)
    assert not eng.accepts(load(path, "w3", TINY["window-sweep"]))
    with pytest.raises(ValueError, match="build a new engine"):
        eng.set_scenario(load(path, "w8", TINY["window-sweep"]))

