"""The runtime's newest paths on a GPU with graphs, against the simulator's plans.

Draft trees (EAGLE topk > 1), prefixes shared through the radix cache and multi-turn
conversations run in tiny form (the ``tiny`` preset, bursts and conversations all in flight, so
no timing decides a plan): each case's runtime run with graphs captured and replayed must make
the simulator's plans step for step and report its cache hit rate. The CPU tests
(tests/test_runtime_draft_tree.py, test_runtime_radix.py, test_runtime_multi_turn.py) run the
same cases eagerly; this is the graph-replay check a GPU round runs (docs/measurements/NEXT-ROUND.md).

    python benchmarks/cuda_plan_check.py [--device cuda]

Prints one line per case (OK, DIFFER or ERROR with its traceback); exit 1 if any is not OK.
"""
import argparse
import sys
import traceback

import specsched.runtime._requires_torch  # noqa: F401  (one line without torch)
from specsched.runtime.engine import RuntimeEngine
from specsched.sim.config import Scenario
from specsched.sim.engine import SimEngine
from specsched.sim.profile import Profile


def tiny_profile():
    return Profile.model_validate({"name": "tiny", "device": "synthetic", "gpu": {
        "extend": {"x": [1, 1000], "seconds": [[1e-6], [1e-3]]}, "draft_inject_per_token_s": 1e-7,
        "verify": {"x": [1, 100], "seconds": [[2e-3], [12e-3]]}, "decode": {"x": [1, 100], "seconds": [[1e-3], [6e-3]]},
        "draft_step": {"x": [1, 100], "seconds": [[2e-4], [4e-4]]}},
        "host": dict(ingest_per_request_s=0.0, schedule_s=1e-4, launch_s=2e-4, process_s=1e-4, sync_wakeup_s=5e-5,
                     cross_queue_penalty_s=1e-3)})

SERVER = {"max_running_requests": 3, "chunked_prefill_size": 64, "max_prefill_tokens": 96, "max_total_num_tokens": 5000}
TREE = {"speculative_algorithm": "eagle", "speculative_num_steps": 3, "speculative_eagle_topk": 2, "speculative_num_draft_tokens": 6}
DSPARK = {"speculative_algorithm": "dspark", "speculative_num_draft_tokens": 4}
BURST = {"kind": "burst", "num_requests": 5, "input_len": {"kind": "uniform", "value": 48, "range_ratio": 0.5},
         "output_len": {"kind": "uniform", "value": 24, "range_ratio": 0.5}}
SHARED = {"kind": "burst", "output_len": {"kind": "fixed", "value": 8},
          "shared_prefix": {"num_groups": 2, "prompts_per_group": 4, "system_prompt_len": 48, "question_len": 16}}
MULTI = {"kind": "multi_turn", "concurrency": 3, "output_len": {"kind": "fixed", "value": 8},
         "multi_turn": {"num_conversations": 3, "num_turns": 3, "system_prompt_len": 16,
                        "first_prompt_len": {"kind": "fixed", "value": 24},
                        "user_len": {"kind": "uniform", "value": 12, "range_ratio": 0.5}}}
CASES = {"tree-burst": (TREE, BURST), "shared-dspark": (DSPARK, SHARED), "shared-tree": (TREE, SHARED),
         "multi-turn-dspark": (DSPARK, MULTI), "multi-turn-tree": (TREE, MULTI), "multi-turn-nospec": ({}, MULTI)}
COLS = ["mode", "part", "batch_size", "num_extend_tokens", "accepted_tokens", "decoding_reqs"]
ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--device", default="cuda", help="cuda (default), or cpu for a dry run")
device = ap.parse_args().device
bad = 0
for name, (spec, wl) in CASES.items():
    try:
        sc = Scenario.model_validate({"name": name, "profile": "tiny", "seed": 1, "server": {**SERVER, **spec}, "workload": wl,
                                      "acceptance": {"mean_accept_length": 2.2, "request_spread": 0.3}})
        eng = RuntimeEngine(sc, preset="tiny", device=device)
        m = eng.run()
        s = SimEngine(sc, tiny_profile()).run()
        same = m.steps[COLS].reset_index(drop=True).equals(s.steps[COLS].reset_index(drop=True))
        hit = (m.summary.get("cache_hit_rate"), s.summary.get("cache_hit_rate"))
        ok = same and hit[0] == hit[1] and m.summary["completed"] == s.summary["completed"]
        print(f"{name}: {'OK' if ok else 'DIFFER'} plans_equal={same} hit={hit} completed={m.summary['completed']}/{s.summary['completed']} "
              f"steps={len(m.steps)} graphs={eng.graphs}", flush=True)
        bad += not ok
    except Exception:
        bad += 1
        print(f"{name}: ERROR", flush=True)
        traceback.print_exc()
sys.exit(1 if bad else 0)
