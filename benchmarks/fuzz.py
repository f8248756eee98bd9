"""Fuzz the simulator: random scenarios and profiles, every run checked against the named
invariants and for non-finite figures.

    python benchmarks/fuzz.py --minutes 30            # nice it on a shared machine
    python benchmarks/fuzz.py --minutes 1 --seed 7 --out fuzz-report.json
    python benchmarks/fuzz.py --cases 400 --kinds pd,dp,replicas  # deployments: disaggregated, DP attention, replicas
    python benchmarks/fuzz.py --cases 400 --kinds client  # no ignore_eos, priorities, intervals, multi-turn

The scenarios come from hypothesis strategies (:func:`cases`) built to reach the corners a
uniform draw misses: chunks as small as a page, pages of 1-64 tokens, mixed chunk with a
small chunk, a KV pool just larger than one request (so requests are retracted), every
admission-delay policy, waiting-queue order, speculative algorithm and sync mode, eager
batches above ``cuda_graph_max_bs``, ``request_rate: .inf``, and random profiles (random
positive grids, zero host costs, a draft-step grid for chain drafters). The same
strategies drive tests/test_fuzz.py. ``--kinds`` picks what is drawn (:data:`KINDS`): ``plain``
one server, ``dp`` one DP-attention server (2-4 ranks, :func:`dp_cases`), ``replicas`` 2-4
data-parallel replicas of one server (:func:`replica_cases`), ``pd`` a
prefill-decode deployment (1-3 servers per role, either role maybe with DP attention,
num_reserved_decode_tokens 0 to 512, tight decode pools, a KV transfer: :func:`pd_cases`),
``client`` one server with what the others leave at its default (requests without ignore_eos,
priorities and preemption, the recv and stream intervals, gamma arrivals, the prefill cadence
knobs, multi-turn and shared-prefix workloads: :func:`client_cases`).
A scenario the models refuse (ConfigError) is counted, not failed, and so is a request the
run refuses as never schedulable (UnschedulableRequest, counted apart); any other exception
(Stalled included), an invariant violation, a non-finite summary figure or a run past its
bound on simulated events or wall seconds (Hung: :func:`bounded_run`) is a failure:
hypothesis shrinks it and the report keeps the smallest example.

Invariants (names as in docs/architecture.md; docs/reliability.md lists them with their tests):
INV-1 running <= max_running_requests; INV-2 KV within capacity; INV-3 KV balance (nothing
held at the end but the radix cache's unlocked prefixes); INV-4 each request finishes once with exactly its output length; INV-5
tokens conserved (device commits == client deliveries, but for the tokens the forward in flight committed for a request aborted out of memory, which the server drops: INV-OOM); INV-7 fast path == step by step;
and here also TIMES (0 < TTFT <= E2E), CLIENT-CAP (requests in flight, from the requests
table's send and finish times, never above workload.concurrency / max_concurrency), GPU-SERIAL (launches never overlap on the stream),
ACCEPT-RANGE (accept length within 1..window) and FINITE (every numeric summary figure is
finite, or null where it is undefined, e.g. TPOT of one-token outputs). INV-2, INV-3 and
DRAINED (no request left in any queue) hold for every scheduler of the run
(:func:`schedulers`: each server of a deployment, each DP rank); INV-PD-HANDOFF
(:func:`_check_handoff`) conserves requests across the prefill->decode handoff.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from specsched.sim.cli_types import positive_int, positive_number
from specsched.sim.config import AdmissionDelay, Scenario, ServerArgs, SpecAlgorithm, SyncMode
from specsched.sim.disaggregation import PDEngine
from specsched.sim.dp_replicas import ReplicaEngine
from specsched.sim.engine import SimEngine
from specsched.sim.errors import ConfigError
from specsched.sim.limits import check_fits
from specsched.sim.pool_fit import INPUT_MARGIN, topup_beside_chunk_tokens
from specsched.sim.prefill_adder import CLIP_MAX_NEW_TOKENS, ceil_page
from specsched.sim.profile import Profile
from specsched.sim.schedule_policy import SHIPPED as SHIPPED_ORDERS
from specsched.sim.scheduler import Scheduler
from specsched.sim.scheduler_decode import UnschedulableRequest

SCHEDULE_POLICIES = list(SHIPPED_ORDERS)  # schedule_policy is a str: shipped names or a user class
# summary keys that are undefined (null/NaN) for some legitimate runs, e.g. no decode step
MAY_BE_UNDEFINED = ("tpot", "itl", "verify", "decode", "accept", "steady", "busy", "host_blocked", "cycles")


def _rarely(draw: Any, one_in: int) -> bool:
    """True about once in ``one_in`` draws: the largest value of ``st.integers(0, one_in - 1)``.
    Hypothesis favours a strategy's simplest value (0, also inside ``st.randoms``), so the
    hostile draws written as ``== 0`` came true for a third of the cases, not a tenth, and
    their refusals at validation took runs from the valid ones (measured over 200 cases:
    60 all-zero profiles with ``== 0``, 21 with this)."""
    return draw(st.integers(0, one_in - 1)) == one_in - 1


@st.composite
def profiles(draw: Any, chain: bool, hostile: bool = False) -> dict[str, Any]:
    """A random profile: positive GPU grids, host costs that may be zero. ``hostile``: also
    all-zero GPU grids and profiles missing the grid the scenario needs (which validation
    must refuse, not crash on)."""
    zero = hostile and _rarely(draw, 10)

    def grid(lo: float, hi: float, xs: list[float]) -> dict[str, Any]:
        if zero:
            return {"x": xs, "seconds": [[0.0] for _ in xs]}
        base = draw(st.floats(lo, hi))
        slope = draw(st.floats(0, hi / 10))
        ctx = draw(st.sampled_from([[0.0], [0.0, 4096.0]]))
        return {"x": xs, "context_len": ctx,
                "seconds": [[base + slope * i + 1e-7 * j for j in range(len(ctx))] for i in range(len(xs))]}

    gpu: dict[str, Any] = {
        "extend": grid(1e-5, 5e-2, [1.0, 16384.0]),
        "verify": grid(1e-4, 5e-2, [1.0, 64.0]),
        "decode": grid(1e-4, 5e-2, [1.0, 64.0]),
        "draft_inject_per_token_s": draw(st.sampled_from([0.0, 1e-7])),
        "eager_factor": draw(st.floats(1.0, 3.0)),
    }
    if chain:
        gpu["draft_step"] = grid(1e-5, 1e-2, [1.0, 64.0])
    if draw(st.booleans()):   # an extend behind decode / verify steps at another clock
        gpu["extend_after_step"] = {k: {"tokens": [64.0, 8192.0], "ratios": [draw(st.floats(0.5, 2.0)),
                                                                           draw(st.floats(0.5, 2.0))]}
                                    for k in draw(st.sampled_from([["decode"], ["verify"], ["decode", "verify"]]))}
    if hostile and _rarely(draw, 10):
        del gpu[draw(st.sampled_from(["verify", "decode", "draft_step"] if chain else ["verify", "decode"]))]
    host = {k: draw(st.sampled_from([0.0, 1e-5, 1e-4, 1e-3])) for k in (
        "ingest_per_request_s", "schedule_s", "schedule_per_req_s", "launch_s", "launch_per_req_s",
        "process_s", "process_per_req_s", "sync_wakeup_s", "cross_queue_penalty_s", "result_path_s",
        "result_path_per_req_s", "recv_path_s", "recv_path_per_req_s")}
    # per prompt token (host.ingest_per_token_s): up to 1 ms per 1K tokens
    host["ingest_per_token_s"] = draw(st.sampled_from([0.0, 1e-8, 1e-6]))
    return {"name": "fuzz", "device": "synthetic", "gpu": gpu, "host": host}


@st.composite
def cases(draw: Any, hostile_profiles: bool = False, swa: bool = False) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """(scenario dict, profile dict, also run step by step?) reaching small chunks, pages,
    mixed chunk, tight KV, retraction and every policy; with ``swa``, a quarter of the cases
    run a hybrid sliding-window KV pool (window, SWA ratio down to pools of a few windows,
    radix cache on or off)."""
    algo = draw(st.sampled_from([a.value for a in SpecAlgorithm]))
    spec = algo != "none"
    chain = spec and algo not in ("dspark", "dflash")
    window = draw(st.integers(2, 8)) if spec else 1
    page = draw(st.sampled_from([1, 1, 4, 16, 64]))
    # whole pages: SGLang refuses to start otherwise (arg_groups/validation_hook.py check_server_args)
    chunk = draw(st.one_of(st.just(-1), st.integers(1, 4).map(lambda n: n * page),
                           st.sampled_from([256, 1024, 8192]).map(lambda c: max(c // page, 1) * page)))
    n = draw(st.integers(1, 40))
    i_max = draw(st.integers(1, 1500))
    o_max = draw(st.integers(1, 150))
    topk = draw(st.integers(1, 8)) if chain and draw(st.integers(0, 3)) == 0 else None
    # a chain (topk 1) has window - 1 steps (SGLang resets the window to steps + 1); a tree
    # may be shallower than its node count, down to the depth whose topk + (steps - 1) x topk^2
    # candidates still fill it (ServerArgs._check_tree_candidates). A chain always states its
    # steps: SGLang refuses a window or topk without them (_handle_eagle_family)
    tree = (topk or 1) > 1
    shallowest = next((s for s in range(1, window) if (topk or 1) * (1 + (s - 1) * (topk or 1)) >= window - 1), window - 1)
    steps = (draw(st.integers(shallowest, window - 1)) if tree else window - 1) if chain else None
    # the KV pool: tight (one request fits with a little room: retraction) or loose; the
    # speculative reservation kept ahead of each request (sglang 0.5.23's top-up) included
    ahead = ServerArgs(speculative_algorithm=algo, speculative_num_draft_tokens=max(window, 2) if spec else 1,
                       speculative_num_steps=steps, speculative_eagle_topk=topk, page_size=page).spec_kv_reserve
    need = ceil_page(i_max, page) + min(o_max, CLIP_MAX_NEW_TOKENS) + page + max(2 * window, ahead) + 1
    # SGLang aborts a prompt of pool - 6 tokens or more (sim/pool_fit.py longest_prompt)
    need = max(need, i_max + o_max, page, i_max + INPUT_MARGIN + 1)
    # a lone request's top-up beside a chunked prompt (sim/pool_fit.py topup_beside_chunk_tokens; max_running_requests
    # is drawn below, so the bound is taken as if it allowed two)
    beside = ServerArgs(speculative_algorithm=algo, speculative_num_draft_tokens=max(window, 2) if spec else 1,
                        speculative_num_steps=steps, speculative_eagle_topk=topk, page_size=page,
                        chunked_prefill_size=chunk, max_running_requests=2)
    need = max(need, topup_beside_chunk_tokens(beside, i_max, o_max))
    pool = draw(st.one_of(st.integers(need, need + 4 * page + 64), st.integers(need, 400_000)))
    server: dict[str, Any] = {
        "max_running_requests": draw(st.integers(1, 48)),
        "max_total_num_tokens": pool,
        "chunked_prefill_size": chunk,
        "max_prefill_tokens": draw(st.sampled_from([1, 64, 512, 2048, 16384])),
        "page_size": page,
        "schedule_policy": draw(st.sampled_from(SCHEDULE_POLICIES)),
        "schedule_conservativeness": draw(st.sampled_from([0.3, 1.0, 2.0])),
        "enable_mixed_chunk": draw(st.booleans()),
        "cuda_graph_max_bs": draw(st.sampled_from([1, 4, 256])),
        "speculative_algorithm": algo,
        "speculative_num_draft_tokens": window,
        "admission_delay": draw(st.sampled_from([a.value for a in AdmissionDelay])),
        "min_free_slots": draw(st.one_of(st.none(), st.integers(1, 8))),
        "max_delay_passes": draw(st.one_of(st.none(), st.integers(1, 8))),
        "sync_mode": draw(st.sampled_from([m.value for m in SyncMode])),
        "prefill_slot_expansion_sync": draw(st.booleans()),
        "enable_overlap_schedule": draw(st.booleans()),
    }
    if swa and draw(st.integers(0, 3)) == 0:
        server["sliding_window_size"] = draw(st.sampled_from([16, 64, 128, 256]))
        server["swa_full_tokens_ratio"] = draw(st.sampled_from([0.005, 0.02, 0.1, 0.5, 1.0]))
        server["swa_eviction_interval"] = draw(st.sampled_from([1, 16, 128]))
        # shortest-prefill-first needs the prefix cache (refused without it, as SGLang does)
        server["disable_radix_cache"] = server["schedule_policy"] != "shortest-prefill-first" and draw(st.booleans())
    if steps is not None:
        server["speculative_num_steps"] = steps
    if topk is not None:
        server["speculative_eagle_topk"] = topk
    if draw(st.integers(0, 3)) == 0:
        server["cuda_graph_bs"] = sorted(set(draw(st.lists(st.integers(1, 64), min_size=1, max_size=6))))
    kind = draw(st.sampled_from(["burst", "closed_loop", "poisson"]))
    workload: dict[str, Any] = {"kind": kind, "num_requests": n,
                                "input_len": {"kind": "uniform", "value": i_max, "range_ratio": draw(st.sampled_from([0.05, 0.5, 1.0]))},
                                "output_len": {"kind": "uniform", "value": o_max, "range_ratio": draw(st.sampled_from([0.05, 0.5, 1.0]))}}
    if kind == "closed_loop":
        workload["concurrency"] = draw(st.integers(1, 16))
    if kind == "poisson":
        workload["request_rate"] = draw(st.one_of(st.floats(0.5, 500), st.just(math.inf)))
        workload["max_concurrency"] = draw(st.one_of(st.none(), st.integers(1, 16)))
    acceptance: dict[str, Any] = {"request_spread": draw(st.sampled_from([0.0, 0.5, 2.0]))}
    if spec and draw(st.integers(0, 3)) == 0:  # measured at another window, carried to this one
        acceptance["window"] = window = draw(st.integers(2, 8))
        acceptance["rate_decay"] = draw(st.sampled_from([1.0, 0.9, 0.6]))
    if spec and "window" not in acceptance and chain and steps is not None:
        # a tree accepts at most its depth + 1 (speculative_num_steps + 1) tokens per verify,
        # whatever its node count: a longer distribution is refused at load (sim/config.py)
        window = min(window, steps + 1)
    if spec:
        source = draw(st.sampled_from(["mean", "rates", "histogram"]))
        if source == "mean":
            # always reachable: with a rate decay the largest reachable mean at window 2 is
            # exactly 2.0 (every draft accepted), which sim/config.py refuses within 1e-6
            reach = float(window) if acceptance.get("rate_decay", 1.0) == 1.0 else 2.0 - 1e-3
            acceptance["mean_accept_length"] = draw(st.floats(1.0, reach))
        elif source == "rates":
            acceptance["per_position_rates"] = draw(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=window - 1))
        else:
            h = draw(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=window).filter(lambda v: sum(v) > 0.01))
            acceptance["histogram"] = [x / sum(h) for x in h]
        if chain and source != "histogram" and draw(st.integers(0, 2)) == 0:
            # the draft tree's accept length (sim/draft_tree.py) instead of the stated rates per depth
            acceptance["sibling_rate"] = draw(st.floats(0.0, 1.0))
    scenario = {"name": "fuzz", "profile": "fuzz", "seed": draw(st.integers(0, 2**31 - 1)),
                "server": server, "workload": workload, "acceptance": acceptance}
    return scenario, draw(profiles(chain, hostile_profiles)), draw(st.integers(0, 4)) == 0



KINDS = ("plain", "pd", "dp", "replicas", "client")
"""What :func:`kind_cases` draws: ``plain`` one colocated server (:func:`cases`), ``dp`` one
DP-attention server (:func:`dp_cases`), ``pd`` a prefill-decode deployment (:func:`pd_cases`),
``client`` one server with the client and scheduler features the others leave at their
defaults (:func:`client_cases`)."""


def _dp_server(draw: Any, server: dict[str, Any]) -> dict[str, Any]:
    """Keys turning ``server`` (a plain server's arguments) into a DP-attention server:
    ``dp_size`` 2-4 and, where a rank's chunk (chunked_prefill_size // dp_size) would fall
    below a page (ServerArgs refuses less) or not be whole pages (SGLang refuses to start:
    sim/limits.py ``check_chunk_pages``), the nearest chunk of whole pages per rank, at
    least one."""
    n = draw(st.sampled_from([2, 2, 3, 4]))
    out: dict[str, Any] = {"enable_dp_attention": True, "dp_size": n}
    c, page = server["chunked_prefill_size"], server["page_size"]
    if c != -1 and (c // n < page or c // n % page):
        out["chunked_prefill_size"] = n * page * max(1, round(c / n / page))
    if server["speculative_algorithm"] != "none":
        out["dp_spec_prefill_coordination"] = draw(st.booleans())
    return out


@st.composite
def dp_cases(draw: Any, hostile_profiles: bool = False) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """A :func:`cases` case on one DP-attention server (sim/dp_attention.py): 2-4 ranks in
    lock-step, each with its own KV pool of ``max_total_num_tokens`` (tight ones retract)
    and ``max_running_requests // dp_size`` slots; a lock-step exchange cost in the profile."""
    scenario, profile, slow = draw(cases(hostile_profiles))
    scenario["server"].update(_dp_server(draw, scenario["server"]))
    profile["gpu"]["dp_attention_sync_s"] = draw(st.sampled_from([0.0, 1e-5, 1e-3]))
    return scenario, profile, slow


@st.composite
def replica_cases(draw: Any, hostile_profiles: bool = False) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """A :func:`cases` case on 2-4 data-parallel replicas of its server (sim/dp_replicas.py:
    ``dp_size`` without DP attention; SGLang refuses replicas of a DP-attention server),
    dispatched by any method the model runs (sim/dp_dispatch.py)."""
    scenario, profile, slow = draw(cases(hostile_profiles))
    srv = scenario["server"]
    srv["dp_size"] = draw(st.sampled_from([2, 2, 3, 4]))
    srv["enable_dp_attention"] = False
    srv["load_balance_method"] = draw(st.sampled_from(["auto", "round_robin", "total_requests", "total_tokens"]))
    return scenario, profile, slow


@st.composite
def pd_cases(draw: Any, hostile_profiles: bool = False) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """A :func:`cases` case as a prefill-decode deployment (sim/disaggregation.py): 1-3
    prefill and 1-3 decode servers, either role maybe with DP attention, the decode servers'
    pool tight (a prompt, its reservation and a little: they retract) or loose, and
    ``num_reserved_decode_tokens`` 0, small or SGLang's 512 (docs/disaggregation.md
    INV-PD-PROGRESS); a KV transfer from fast to slow, with or without a fixed latency."""
    scenario, profile, slow = draw(cases(hostile_profiles))
    srv = scenario["server"]
    reserve = draw(st.sampled_from([0, 1, 4, 32, 128, 512]))
    srv["num_reserved_decode_tokens"] = reserve
    page = srv["page_size"]
    base = srv["max_total_num_tokens"]
    decode: dict[str, Any] = {"max_total_num_tokens": draw(st.one_of(
        st.integers(base, base + reserve + 4 * page + 64), st.integers(base, 400_000)))}
    prefill: dict[str, Any] = {}
    if draw(st.integers(0, 2)) == 0:
        prefill["chunked_prefill_size"] = draw(st.sampled_from([-1, 256, 4096])) if page <= 256 else -1
    if draw(st.integers(0, 2)) == 0:
        decode["max_running_requests"] = draw(st.integers(1, 48))
    for role in (prefill, decode):
        if draw(st.integers(0, 3)) == 0:
            role.update(_dp_server(draw, {**srv, **role}))
    srv["disaggregation"] = {"prefill": {"instances": draw(st.integers(1, 3)), "server": prefill},
                             "decode": {"instances": draw(st.integers(1, 3)), "server": decode},
                             "router_policy": draw(st.sampled_from(["round_robin", "random"]))}
    if not (hostile_profiles and _rarely(draw, 20)):   # hostile: no kv_transfer (refused)
        profile["kv_transfer"] = {"bytes_per_token": draw(st.sampled_from([1e3, 1e5, 1e6])),
                                  "link_bytes_per_s": draw(st.sampled_from([1e9, 5e10, 1e12])),
                                  "latency_s": draw(st.sampled_from([0.0, 1e-4, 2e-3]))}
    if draw(st.booleans()):
        profile["gpu"]["dp_attention_sync_s"] = draw(st.sampled_from([0.0, 1e-4]))
    return scenario, profile, slow


@st.composite
def client_cases(draw: Any, hostile_profiles: bool = False) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """A :func:`cases` case (one server, maybe with DP attention) with what the other kinds
    leave at its default: requests sent without ``ignore_eos`` (admission reserves the
    decayed new_token_ratio, so tight pools retract), priorities with priority scheduling
    and its preemption knobs, ``scheduler_recv_interval`` and ``stream_interval`` above 1,
    gamma arrivals (``burstiness``), ``prefill_decode_interval`` and
    ``prefill_max_requests``, and the ``multi_turn`` and ``shared_prefix`` workloads, whose
    shared prefixes the radix cache keeps (INV-3 counts what it holds at the end)."""
    scenario, profile, slow = draw(cases(hostile_profiles))
    srv, w = scenario["server"], scenario["workload"]
    if draw(st.booleans()):
        w["ignore_eos"] = False
    if draw(st.integers(0, 2)) == 0:
        srv.update(enable_priority_scheduling=True,
                   priority_scheduling_preemption_threshold=draw(st.sampled_from([0, 1, 10])),
                   disable_priority_preemption=draw(st.booleans()),
                   schedule_low_priority_values_first=draw(st.booleans()),
                   retraction_policy=draw(st.sampled_from(["length", "priority"])))
        w["priorities"] = draw(st.lists(st.integers(-5, 30), min_size=1, max_size=4))
        if srv["schedule_policy"] not in ("fcfs", "lof"):   # the orders priority scheduling reads
            srv["schedule_policy"] = "fcfs"
    if draw(st.integers(0, 3)) == 0:
        srv["scheduler_recv_interval"] = draw(st.sampled_from([2, 5, 50]))
    if draw(st.integers(0, 3)) == 0:
        srv["stream_interval"] = draw(st.sampled_from([2, 3, 16]))
    if draw(st.integers(0, 3)) == 0:
        srv["prefill_decode_interval"] = draw(st.sampled_from([1, 3]))
        srv["prefill_decode_interval_min_bs"] = draw(st.sampled_from([0, 2]))
    if draw(st.integers(0, 3)) == 0:
        srv["prefill_max_requests"] = draw(st.integers(1, 4))
    if w["kind"] == "poisson" and draw(st.booleans()):
        w["burstiness"] = draw(st.sampled_from([0.05, 0.5, 3.0]))
        if w["request_rate"] == math.inf:
            w["request_rate"] = 50.0
    shape = draw(st.sampled_from(["lengths", "lengths", "multi_turn", "shared_prefix"]))
    if shape == "multi_turn":
        for key in ("num_requests", "input_len", "max_concurrency", "request_rate", "burstiness"):
            w.pop(key, None)
        w.update(kind="multi_turn", concurrency=draw(st.integers(1, 6)), multi_turn={
            "num_conversations": draw(st.integers(1, 6)), "num_turns": draw(st.integers(1, 4)),
            "system_prompt_len": draw(st.sampled_from([0, 7, 100])),
            "first_prompt_len": {"kind": "uniform", "value": draw(st.integers(1, 300)), "range_ratio": 0.5},
            "user_len": {"kind": "uniform", "value": draw(st.integers(1, 100)), "range_ratio": 0.5},
            "think_time_s": draw(st.sampled_from([0.0, 0.01]))})
    elif shape == "shared_prefix":
        w.pop("num_requests"), w.pop("input_len")
        w["shared_prefix"] = {"num_groups": draw(st.integers(1, 4)), "prompts_per_group": draw(st.integers(1, 8)),
                              "system_prompt_len": draw(st.integers(1, 400)), "question_len": draw(st.integers(1, 100))}
    if draw(st.integers(0, 4)) == 0:
        srv.update(_dp_server(draw, srv))
    return scenario, profile, slow


def kind_cases(kinds: tuple[str, ...] = ("plain",), hostile_profiles: bool = False,
               swa: bool = False) -> st.SearchStrategy:
    """Cases of the ``kinds`` (names in :data:`KINDS`), each kind drawn equally often."""
    made = {"plain": lambda: cases(hostile_profiles, swa), "pd": lambda: pd_cases(hostile_profiles),
            "dp": lambda: dp_cases(hostile_profiles), "replicas": lambda: replica_cases(hostile_profiles),
            "client": lambda: client_cases(hostile_profiles)}
    return st.one_of(*[made[k]() for k in kinds])


def _finite_or_undefined(summary: dict[str, Any]) -> list[str]:
    bad = []
    for k, v in summary.items():
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)):
            continue
        if math.isinf(v) or (math.isnan(v) and not any(s in k for s in MAY_BE_UNDEFINED)):
            bad.append(f"{k}={v}")
    return bad


def schedulers(eng: SimEngine) -> list[tuple[str, str, Scheduler]]:
    """Every scheduler of a run, as (label, role, scheduler): the one server's, each DP rank
    of a DP-attention server, each replica, each server (and rank) of a disaggregated deployment. ``role``
    is ``plain``, ``prefill`` or ``decode``; labels read like ``decode 1 rank 0``."""
    if isinstance(eng, PDEngine):
        servers = [(s.role, f"{s.role} {s.index}", s.sched) for s in eng.prefill + eng.decode]
    elif isinstance(eng, ReplicaEngine):
        servers = [("plain", f"replica {r.index}", r.sched) for r in eng.replicas]
    else:
        servers = [("plain", "server", eng.sched)]
    out = []
    for role, label, sched in servers:
        ranks = getattr(sched, "ranks", [sched])
        out += [(f"{label} rank {i}" if len(ranks) > 1 else label, role, r) for i, r in enumerate(ranks)]
    return out


def _check_scheduler(label: str, role: str, r: Scheduler, need: Any) -> None:
    """One scheduler's invariants at the end of a run: INV-2 (its KV peak within its own
    pool; the SWA pool too), INV-3 (nothing held but what the radix cache keeps: on a
    prefill server, through the requests' allocations; on a colocated server, the prefixes
    its tree still stores, every one unlocked, i.e. evictable: multi-turn histories, shared
    system prompts) and every queue drained (no request left waiting, running, in flight,
    preallocated, in transfer or retracted)."""
    kv = r.kv
    need(kv.peak <= kv.capacity, f"INV-2 KV peak within capacity ({label}: {kv.peak} > {kv.capacity})")
    cache = getattr(r, "cache", None)
    if role == "prefill":
        held = sum(q.kv_allocated for q in r.reqs.values())
    elif cache is not None:
        held = cache.total_size
        need(cache.evictable_size == held, f"INV-3 KV balance: the radix cache unlocked at the end "
             f"({label}: {cache.evictable_size} of {held} evictable)")
    else:
        held = 0
    need(kv.used == held, f"INV-3 KV balance: nothing held at the end ({label}: {kv.used} held, "
         f"{held} in the radix cache)")
    if r.server.sliding_window_size is not None:
        need(kv.swa_used == 0 and kv.swa_peak <= kv.swa_capacity, f"INV-8 SWA pool: within capacity, empty at the end ({label})")
    # a finished request may still sit in the running batch: the next pass filters it
    # (update_running_batch), and a deployment's run can end before one of its decode servers,
    # whose collapsed stretch finished its last request, wakes for that pass
    left = {q: [x.rid for x in getattr(r, q, []) if not (q == "running" and x.status.name == "FINISHED")] for q in
            ("waiting", "running", "inflight", "prealloc_queue", "transfer_queue", "retracted_queue")}
    left = {q: rids for q, rids in left.items() if rids}
    need(not left, f"DRAINED every queue empty at the end ({label}: {left})")


def _check_handoff(eng: PDEngine, rids: set[int], need: Any) -> None:
    """INV-PD-HANDOFF, conservation across the prefill->decode handoff: each request was
    routed once, held by exactly one prefill and one decode scheduler (the pair the router
    picked), prefilled there for its first token only, and its KV transferred once."""
    need(set(eng._pair) == rids, "INV-PD-HANDOFF every request routed once")
    held: dict[str, dict[int, int]] = {"prefill": {}, "decode": {}}
    for _, role, r in schedulers(eng):
        for rid in r.reqs:
            held[role][rid] = held[role].get(rid, 0) + 1
    for role in ("prefill", "decode"):
        extra = sorted(rid for rid, k in held[role].items() if k != 1)
        need(set(held[role]) == rids and not extra, f"INV-PD-HANDOFF each request on one {role} scheduler "
             f"(missing {sorted(rids - set(held[role]))[:5]}, duplicated {extra[:5]})")
    for rid, (p, d, preq, dreq) in eng._pair.items():
        for srv, copy in ((p, preq), (d, dreq)):
            need(any(r.reqs.get(rid) is copy for r in getattr(srv.sched, "ranks", [srv.sched])),
                 f"INV-PD-HANDOFF rid {rid} on the {srv.role} server the router picked")
        need(preq.output_len == 1 and preq.kv_transferred and dreq.kv_transferred,
             f"INV-PD-HANDOFF rid {rid} prefilled for its first token and its KV transferred")
    need(len(eng.transfer_s) == len(rids), f"INV-PD-HANDOFF one KV transfer per request ({len(eng.transfer_s)})")


def check_run(sc: Scenario, eng: SimEngine, res: Any) -> list[str]:
    """The invariants one finished run must satisfy, over every scheduler of the run (each
    server of a disaggregated deployment, each DP rank); returns the violations (empty:
    all hold)."""
    v: list[str] = []
    req, chunks, steps, ts = res.requests, res.chunks, res.steps, res.timeseries

    def need(ok: Any, name: str) -> None:
        if not bool(ok):
            v.append(name)

    rids = set(range(sc.workload.num_requests)) if sc.workload.kind not in ("trace", "multi_turn") else set(req["rid"])
    need(len(req) == sc.workload.num_requests and req["finish_s"].notna().all(), "INV-4 every request finishes")
    need(req["rid"].is_unique and set(req["rid"]) == rids, "INV-4 each request reported exactly once")
    if len(chunks):
        per_rid = chunks.groupby("rid")["n_tokens"].sum().reindex(req["rid"]).to_numpy()
        need((per_rid == req["output_len"].to_numpy()).all(), "INV-4 exactly its output length")
    device = getattr(eng.device, "device", eng.device)   # a DP group's device wraps the one count
    # a request SGLang aborted out of memory (INV-OOM) ends with what it was delivered; the
    # forward in flight at the abort may have committed more on the device, which the server drops
    aborted = eng.sched.oom_aborted
    outs = dict(zip(req["rid"].tolist(), req["output_len"].tolist(), strict=True))
    need(all(n == outs.get(rid, 0) or (rid in aborted and n >= outs.get(rid, 0))
             for rid, n in device.committed.items()), "INV-5 tokens conserved")
    for label, role, r in schedulers(eng):
        _check_scheduler(label, role, r, need)
    if isinstance(eng, PDEngine):
        _check_handoff(eng, rids, need)
    if len(ts):
        # a time-series row is one recording server's state (the decode servers' in a
        # deployment): its running and KV summed over its ranks
        rec = eng.decode if isinstance(eng, PDEngine) else eng.replicas if isinstance(eng, ReplicaEngine) else [eng]
        per = [getattr(s.sched, "ranks", [s.sched]) for s in rec]
        mrr = max(sum(r.server.max_running_requests for r in ranks) for ranks in per)
        cap = max(sum(r.kv.capacity for r in ranks) for ranks in per)
        need((ts["running"] <= mrr).all(), "INV-1 running <= max_running_requests")
        need((ts["kv_used_tokens"] <= cap).all(), "INV-2 KV within capacity")
    # a request aborted out of memory before its first token has none: its TTFT is
    # bench_serving's untouched 0.0 (INV-OOM, sim/metrics.py request_latencies)
    first = req[~(req["rid"].isin(list(aborted)) & (req["output_len"] == 0))]
    need((first["ttft_s"] > 0).all() and (first["ttft_s"] <= first["e2e_s"] + 1e-12).all(), "TIMES 0 < TTFT <= E2E")
    w = sc.workload
    cap = w.concurrency if w.kind in ("closed_loop", "multi_turn") else w.max_concurrency
    if cap and len(req):
        # CLIENT-CAP: a client sends its next request no earlier than the last token of the
        # one it waited for, so the requests table never shows more in flight than the cap
        # (a finish and a send at one instant: the finish first)
        t = np.concatenate([req["start_s"].to_numpy(float), req["finish_s"].to_numpy(float)])
        step = np.concatenate([np.ones(len(req), np.int64), -np.ones(len(req), np.int64)])
        order = np.lexsort((step, t))
        need(np.cumsum(step[order]).max() <= cap, f"CLIENT-CAP in flight <= {cap}")
    if len(steps):
        # one forward stream writes the steps table unless several decode servers share it
        # (each replica its own stream: the steps table's dp_rank column)
        if not isinstance(eng, PDEngine) or len(eng.decode) == 1:
            for _, s in (steps.groupby("dp_rank") if "dp_rank" in steps else [(0, steps)]):
                s = s.sort_values("gpu_start_s")
                need((s["gpu_start_s"].to_numpy()[1:] >= s["gpu_end_s"].to_numpy()[:-1] - 1e-12).all(), "GPU-SERIAL")
        ver = steps[(steps["mode"] == "verify") & (steps["decoding_reqs"] > 0)]
        if sc.server.speculative_algorithm.enabled and len(ver):
            per_req = ver["accepted_tokens"] / ver["decoding_reqs"]
            need((per_req >= 1).all() and (per_req <= sc.server.spec_window).all(), "ACCEPT-RANGE")
    bad = _finite_or_undefined(res.summary)
    if bad:
        v.append("FINITE " + ", ".join(bad[:5]))
    return v


class Hung(AssertionError):
    """A run went past its bound on simulated events or wall seconds (:func:`bounded_run`)."""


EVENTS_PER_UNIT = 20
"""SimPy events allowed per unit of a case's work (:func:`event_bound`): a host pass, a
launch and a delivery are a few events each, so a run that keeps its invariants stays far
below (at most about 1 per unit over a few hundred fuzzed cases of every kind); a run
that decodes forever crosses it."""

WALL_LIMIT_S = 20.0
"""Wall seconds one case may run before it counts as hung (a case takes well under one)."""


def event_bound(sc: Scenario) -> int:
    """The most SimPy events a run of ``sc`` may process: :data:`EVENTS_PER_UNIT` x (each
    request's output tokens, prompt chunks and one) x its servers, plus a constant."""
    w = sc.workload
    o = max(w.output_len.value, 1) if w.output_len is not None else 1
    i = max(w.input_len.value, 1) if w.input_len is not None else 1
    c = sc.server.chunked_prefill_size
    chunks = -(-i // max(c, sc.server.page_size)) if c != -1 else 1
    layout = sc.server.disaggregation
    servers = 1 if layout is None else layout.prefill.instances + layout.decode.instances
    return 10_000 + EVENTS_PER_UNIT * w.num_requests * (o + chunks + 1) * servers


def bounded_run(eng: SimEngine, max_events: int, wall_s: float = WALL_LIMIT_S) -> Any:
    """``eng.run()``, failing with :class:`Hung` once it has processed ``max_events`` SimPy
    events or run ``wall_s`` wall seconds (a SIGALRM, main thread only; elsewhere the event
    bound alone), so a run that never ends is a reported failure, not a stuck fuzzer."""
    env, count = eng.env, [0]
    step = env.step

    def counted() -> None:
        count[0] += 1
        if count[0] > max_events:
            raise Hung(f"HANG: more than {max_events} simulated events at t={env.now:.6f}s "
                       f"with {eng._remaining} requests left")
        step()

    env.step = counted
    use_alarm = threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGALRM")
    if use_alarm:
        def alarm(_sig: int, _frame: Any) -> None:
            raise Hung(f"HANG: more than {wall_s:g} wall seconds at t={env.now:.6f}s with {eng._remaining} requests left")
        old = signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, wall_s)
    try:
        return eng.run()
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)


def run_case(scenario: dict[str, Any], profile: dict[str, Any], step_by_step: bool,
             reached: dict[str, int] | None = None) -> str:
    """Validate and simulate one case; returns "refused", "unschedulable" or "ran". ``reached`` counts the
    corners the run reached (retraction, small chunk, mixed chunk with a small chunk, eager
    batches, each policy, ...).

    Raises:
        AssertionError: an invariant broke (the message lists which), or the fast path and
            the step-by-step path disagree (INV-7).
        Exception: anything the simulator raised that is not a ConfigError.
    """
    try:
        sc = Scenario.model_validate(scenario)
        prof = Profile.model_validate(profile)
    except (ConfigError, ValueError):
        return "refused"
    try:
        check_fits(sc)  # what the CLI refuses before a run
    except ConfigError:
        return "refused"
    try:
        eng = SimEngine(sc, prof, sc.seed)
    except ConfigError:  # the profile lacks what the scenario needs: refused in one line
        return "refused"
    try:
        res = bounded_run(eng, event_bound(sc))
    except UnschedulableRequest:
        # a request the server can never serve, reported in one line by the CLI: e.g. a
        # decode server whose preallocations (admitted by SGLang's own budget, which leaves
        # out the speculative top-up) leave its lone running request no room to grow, where
        # SGLang's decode would run out of memory. Counted apart, so a rise shows.
        return "unschedulable"
    violations = check_run(sc, eng, res)
    assert not violations, violations
    if reached is not None:
        srv = sc.server
        small = 0 < srv.chunked_prefill_size <= 4 * srv.page_size
        tags = [f"policy {srv.schedule_policy}", f"delay {srv.admission_delay}", f"spec {srv.speculative_algorithm.value}",
                f"sync {srv.sync_mode.value}", f"workload {sc.workload.kind}"]
        tags += [t for t, on in (("retraction", res.summary.get("num_retractions", 0) > 0), ("small chunk", small),
                                 ("mixed chunk + small chunk", small and srv.enable_mixed_chunk),
                                 ("page > 1", srv.page_size > 1), ("overlap off", not srv.enable_overlap_schedule),
                                 ("eager batches", len(res.steps) and (res.steps["batch_size"] > srv.cuda_graph_max_bs).any()),
                                 ("request_rate inf", sc.workload.request_rate == math.inf),
                                 ("swa pool", srv.sliding_window_size is not None),
                                 ("dp attention", srv.enable_dp_attention),
                                 ("pd", srv.disaggregation is not None),
                                 ("pd reserve <= 32", srv.disaggregation is not None and srv.num_reserved_decode_tokens <= 32),
                                 ("pd retraction", srv.disaggregation is not None and res.summary.get("num_retractions", 0) > 0),
                                 ("pd dp role", srv.disaggregation is not None and any(
                                     getattr(srv.disaggregation, role).server.get("enable_dp_attention") for role in ("prefill", "decode"))),
                                 ("step by step compared", step_by_step)) if on]
        for t in tags:
            reached[t] = reached.get(t, 0) + 1
    if step_by_step:
        slow_eng = SimEngine(sc, prof, sc.seed, fast_forward=False)
        slow = bounded_run(slow_eng, 4 * event_bound(sc))
        cols = ["rid", "first_token_s", "finish_s", "output_len"]
        a, b = res.requests[cols].to_numpy(), slow.requests[cols].to_numpy()
        assert a.shape == b.shape and np.allclose(a, b, rtol=1e-9, atol=1e-12), "INV-7 fast path == step by step"
    return "ran"


def fuzz(minutes: float, first_seed: int = 0, batch: int = 50, hostile_profiles: bool = True,
         swa: bool = False, kinds: tuple[str, ...] = ("plain",), max_cases: int | None = None) -> dict[str, Any]:
    """Run batches of :func:`kind_cases` until ``minutes`` have passed or ``max_cases``
    cases were drawn (ran or refused); returns the report."""
    counts = {"ran": 0, "refused": 0, "unschedulable": 0}
    reached: dict[str, int] = {}
    failures: list[dict[str, Any]] = []

    def one(case: tuple[dict[str, Any], dict[str, Any], bool]) -> None:
        counts[run_case(*case, reached=reached)] += 1

    deadline = time.monotonic() + minutes * 60
    k = first_seed
    batches = 0
    while time.monotonic() < deadline and (max_cases is None or sum(counts.values()) < max_cases):
        left = batch if max_cases is None else min(batch, max_cases - sum(counts.values()))
        test = settings(max_examples=left, deadline=None, database=None, derandomize=False,
                        phases=[Phase.generate, Phase.shrink], print_blob=False,
                        suppress_health_check=list(HealthCheck))(seed(k)(given(kind_cases(kinds, hostile_profiles, swa))(one)))
        try:
            test()
        except Exception as e:  # hypothesis has shrunk it; keep the smallest example
            failures.append({"seed": k, "error": f"{type(e).__name__}: {e}"[:2000],
                             "example": "\n".join(getattr(e, "__notes__", []))[:4000]})
            print(f"failure (batch seed {k}): {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
        k += 1
        batches += 1
    return {"minutes": minutes if math.isfinite(minutes) else None, "kinds": list(kinds), "batches": batches, "first_seed": first_seed, "runs": counts["ran"],
            "refused": counts["refused"], "unschedulable": counts["unschedulable"], "reached": dict(sorted(reached.items())), "failures": failures}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/fuzz.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=positive_number, default=None,
                   help="how long to fuzz (default 1, or no limit with --cases)")
    p.add_argument("--cases", type=int, default=None, help="stop after this many cases (ran or refused)")
    p.add_argument("--kinds", default="plain",
                   help=f"comma-separated case kinds: {', '.join(KINDS)} (default plain)")
    p.add_argument("--seed", type=int, default=0, help="first batch seed (default 0)")
    p.add_argument("--batch", type=positive_int, default=50, help="cases per hypothesis batch (default 50)")
    p.add_argument("--no-hostile-profiles", action="store_true",
                   help="only valid profiles (default: also all-zero grids and missing grids)")
    p.add_argument("--swa", action="store_true", help="also hybrid sliding-window KV pools (a quarter of the cases)")
    p.add_argument("--out", type=Path, default=None, help="write the report as JSON")
    a = p.parse_args(argv)
    kinds = tuple(k.strip() for k in a.kinds.split(",") if k.strip())
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        p.error(f"--kinds {a.kinds}: allowed: a comma-separated list of {', '.join(KINDS)}")
    if a.cases is not None and a.cases < 1:
        p.error(f"--cases {a.cases}: must be >= 1")
    minutes = a.minutes if a.minutes is not None else (math.inf if a.cases else 1.0)
    t0 = time.monotonic()
    report = fuzz(minutes, a.seed, a.batch, not a.no_hostile_profiles, a.swa, kinds, a.cases)
    report["wall_s"] = round(time.monotonic() - t0, 1)
    print(f"kinds {','.join(kinds)}: {report['runs']} runs, {report['refused']} refused at validation, "
          f"{report['unschedulable']} refused mid-run (UnschedulableRequest), {len(report['failures'])} failing "
          f"batch(es) in {report['wall_s']} s")
    print("reached: " + ", ".join(f"{k} {v}" for k, v in report["reached"].items()))
    if a.out:
        a.out.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
