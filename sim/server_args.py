"""The ``server`` block of a scenario: SGLang's server arguments the scheduler model reads.

Names as in SGLang's python/sglang/srt/server_args.py. Also owns the value types of those
arguments (:class:`SyncMode`, :class:`AdmissionDelay`, :class:`SpecAlgorithm`) and the
graph batch/token buckets derived from them (SGLang 0.5.23 arg_groups/cuda_graph_hook.py).
Re-exported by :mod:`sim.config`.
"""

from __future__ import annotations

import bisect
import math
import typing
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)
from specsched.sim.disagg_config import FORCED_ROLE_KEYS, ROLES, Disaggregation
from specsched.sim.errors import FieldError
from specsched.sim.sglang_launch_args import (
    RENAMED,
    SGLANG_DEFAULTS,
    as_server_keys,
    drop_inert,
    launch_arg_line,
)
from specsched.sim.strict import STRICT as _STRICT


def _sglang_unset(key: str, value: Any) -> bool:
    """Whether ``key: value`` is SGLang's unset form of one of this block's keys that takes no
    null itself: null where SGLang 0.5.23 declares the argument's default None (resolved at
    start, e.g. ``prefill_decode_interval``: off unless a profiled model turns it on), as a
    pasted /server_info reports an argument nobody gave. Such a key is left to the model's
    default, which stands for SGLang's resolution."""
    if value is not None or key not in SGLANG_DEFAULTS or SGLANG_DEFAULTS[key] is not None:
        return False
    field = ServerArgs.model_fields.get(key)
    return field is not None and type(None) not in typing.get_args(field.annotation)


class SyncMode(StrEnum):
    """Where the overlap loop waits for the previous forward's publish event (spec only).

    host_block: the host blocks (``publish_ready.synchronize()``; SGLang on HIP,
        managers/overlap_utils.py); the GPU idles while the host wakes and launches.
    stream_wait: the wait is queued on the forward stream (``Event.wait()`` there); the
        host never blocks (the MI355X fix, reference/mi355x-dspark-measurements.md).
    cross_queue_wait: the wait is queued from a separate schedule stream (SGLang on CUDA);
        on HIP this slows every graph dispatch by the profile's ``cross_queue_penalty_s``.
    """

    host_block = "host_block"
    stream_wait = "stream_wait"
    cross_queue_wait = "cross_queue_wait"


class AdmissionDelay(StrEnum):
    """Shipped admission-delay policies (module in :mod:`sim.admission`); a scenario may
    also name a class of its own, ``module.path:Class`` or ``file.py:Class``."""

    none = "none"
    min_free_slots = "min_free_slots"
    min_free_slots_waiting_aware = "min_free_slots_waiting_aware"
    demand_observed = "demand_observed"


MAX_DRAFT_TOKENS = 64
"""Largest verify window a scenario may state (``speculative_num_draft_tokens``)."""
MAX_CHUNK_TOKENS = 2**31 - 1
"""Largest ``chunked_prefill_size`` a scenario may state. SGLang 0.5.23 types it a plain int
(arg_groups/fields/schedule.py; <= 0 turns chunking off, scheduler.py ``init_chunked_prefill``)
with no upper bound, but each token of a chunk takes a KV slot whose index SGLang keeps as int32
(mem_cache/memory_pool.py ``ReqToTokenPool``: ``req_to_token`` int32), so no pool, and no chunk
of it, reaches 2**31 tokens."""
MAX_RUNNING_REQUESTS = MAX_CHUNK_TOKENS
"""Largest ``max_running_requests`` (and ``context_length``) a scenario may state. SGLang types
both plain ints, but a running request holds at least one KV slot and a context is a row of KV
slot indices, both int32 (mem_cache/memory_pool.py ``ReqToTokenPool``: ``req_to_token`` is an
int32 table of max_running_requests rows by context length), so neither reaches 2**31."""
MAX_POOL_TOKENS = 2**63 - 1
"""Largest ``max_total_num_tokens`` a scenario (or a result line's server_info) may state: the
pool is an int64 token count wherever the simulator computes with it (sim/served.py
``output_cut``); 2**63 raised OverflowError mid-run, a traceback."""
PRIORITY_POLICIES = frozenset({"fcfs", "lof"})
"""The shipped schedule policies SGLang 0.5.23 runs with priority scheduling
(arg_groups/validation_hook.py ``check_server_args`` asserts one of them at start-up); a
policy class of the user's own is the user's to order by priority."""
CHAIN_PARAM_KEYS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
"""The chain drafter's settings SGLang chooses itself when none of them is given."""
AUTO_SPEC_WIDE_ARCHS = frozenset({"LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM"})
"""Architectures SGLang 0.5.23 gives a 5-step, topk-4, 8-token draft tree when no chain setting
is given (arg_groups/speculative_hook.py ``_auto_choose_speculative_params``)."""


BLOCK_DEFAULT_WINDOW = {"dspark": 8, "dflash": 16}
"""The verify window SGLang 0.5.23 gives a block drafter when neither the scenario nor a draft
checkpoint states one (arg_groups/speculative_hook.py): ``_handle_dspark`` falls back to
``DEFAULT_DSPARK_GAMMA`` 7 (speculative/dspark_components/dspark_config.py), window gamma + 1;
``_handle_dflash`` to a block size of 16. A scenario names no draft checkpoint whose config
could say otherwise."""


def auto_speculative_params(algorithm: str, architecture: str | None) -> tuple[int, int, int]:
    """(speculative_num_steps, speculative_eagle_topk, speculative_num_draft_tokens) SGLang
    0.5.23 picks for a chain drafter given none of them (arg_groups/speculative_hook.py
    ``_handle_eagle_family``: when ``speculative_num_steps`` is None it asserts the other two
    are None too and calls ``_auto_choose_speculative_params``): (3, 1, 4) for STANDALONE;
    (5, 4, 8) for Llama and Grok (:data:`AUTO_SPEC_WIDE_ARCHS`, the target's
    ``architectures[0]``); (3, 1, 4) for DeepSeek, GLM, gpt-oss and every other model,
    including an unknown one."""
    if str(algorithm).lower() == "standalone":
        return 3, 1, 4
    return (5, 4, 8) if architecture in AUTO_SPEC_WIDE_ARCHS else (3, 1, 4)


def auto_speculative_basis(algorithm: str, architecture: str | None) -> str:
    """What :func:`auto_speculative_params`'s choice depends on, for the note that prints it:
    STANDALONE's (3, 1, 4) is the same for every model (sglang 0.5.23
    arg_groups/speculative_hook.py ``_auto_choose_speculative_params`` returns it before it
    reads the architecture); the others follow the target's ``architectures[0]``."""
    if str(algorithm).lower() == "standalone":
        return "STANDALONE, whatever the model"
    return architecture or "a model of unknown architecture"


class SpecAlgorithm(StrEnum):
    """Speculative decoding, SGLang's ``--speculative-algorithm`` names in any case.

    ``dspark``/``dflash``: block drafter (one draft forward proposes a block, one target
    forward verifies it). Chain drafters (``speculative_num_steps`` serial draft forwards,
    the first inside the profile's verify cost, the rest priced by its ``draft_step`` grid,
    then one target verify): ``eagle`` and ``eagle3`` (EAGLE heads on the target's hidden
    states), ``nextn``/``mtp`` (the model's own multi-token-prediction layer, SGLang's NEXTN),
    ``standalone`` (a separate small draft model run autoregressively). A draft tree
    (``speculative_eagle_topk`` > 1) is priced by its width (each draft step runs over batch x
    topk tokens); its acceptance is the scenario's, cut at ``speculative_num_steps + 1``
    accepted tokens (the tree's depth + the bonus token: ``ServerArgs.accept_window``).
    ``none``: plain decode.
    SGLang's NGRAM (no draft forward: a host-side n-gram lookup) is refused: no profile prices
    its lookup and every verify grid includes a draft forward.
    """

    none = "none"
    dspark = "dspark"
    dflash = "dflash"
    eagle = "eagle"
    eagle3 = "eagle3"
    nextn = "nextn"
    mtp = "mtp"
    standalone = "standalone"

    @property
    def is_block(self) -> bool:
        return self in (SpecAlgorithm.dspark, SpecAlgorithm.dflash)

    @property
    def enabled(self) -> bool:
        return self is not SpecAlgorithm.none

    @property
    def supports_mixed_chunk(self) -> bool:
        """Whether ``enable_mixed_chunk`` stays on with this algorithm: sglang 0.5.23
        speculative/spec_info.py ``SpeculativeAlgorithm.supports_mixed_chunk`` (EAGLE, EAGLE3,
        DFLASH, DSPARK; NEXTN and MTP are EAGLE there) and plain decoding; STANDALONE is not
        among them, and arg_groups/speculative_hook.py ``_handle_eagle_family`` turns mixed
        chunks off for it."""
        return self is not SpecAlgorithm.standalone


def prefill_token_buckets(max_tokens: int) -> list[int]:
    """SGLang 0.5.23's prefill (extend) graph token buckets up to ``max_tokens``
    (arg_groups/cuda_graph_hook.py ``generate_prefill_cuda_graph_batch_sizes``): 4..32 step 4,
    48..256 step 16, 288..512 step 32, 576..1024 step 64, 1280..4096 step 256, then step 512.
    Ascending; empty when ``max_tokens < 4``."""
    sizes = [*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32), *range(576, 1025, 64),
             *range(1280, 4097, 256), *range(4608, max_tokens + 1, 512)]
    return [s for s in sizes if s <= max_tokens]


MAX_PREFILL_CUDA_GRAPH_PADDING_FACTOR = 2
"""An extend whose bucket exceeds this many times its tokens runs eagerly (SGLang 0.5.23
model_executor/runner/prefill_cuda_graph_runner.py ``_MAX_PREFILL_CUDA_GRAPH_PADDING_FACTOR``)."""


def prefill_graph_bucket(tokens: int, buckets: list[int]) -> int | None:
    """The token bucket an extend of ``tokens`` replays its piecewise graphs at, or None
    when it runs eagerly.

    SGLang 0.5.23 model_executor/runner/prefill_cuda_graph_runner.py ``can_replay_locally``:
    eager when ``tokens`` exceeds the largest captured bucket (``cuda_graph_max_bs_prefill``)
    or when the padded count (base_cuda_graph_runner.py ``_pad_to_bucket``: the smallest
    bucket >= tokens) exceeds ``MAX_PREFILL_CUDA_GRAPH_PADDING_FACTOR`` x tokens.
    ``buckets`` ascending (:attr:`ServerArgs.prefill_graph_tokens`); empty: always eager.
    """
    i = bisect.bisect_left(buckets, tokens)
    if tokens < 1 or i == len(buckets):
        return None
    b = buckets[i]
    return b if b <= MAX_PREFILL_CUDA_GRAPH_PADDING_FACTOR * tokens else None


def swa_pool_tokens(max_total_num_tokens: int, page_size: int, ratio: float) -> int:
    """Slots of a hybrid sliding-window model's SWA pool beside a full pool of
    ``max_total_num_tokens`` at ``swa_full_tokens_ratio`` ``ratio``: the page-aligned full pool
    x ratio, page-aligned (sglang 0.5.23 model_executor/pool_configurator.py
    ``HybridSWAPoolConfigurator._solve_pool_sizes``)."""
    p = page_size
    return int(max_total_num_tokens // p * p * ratio) // p * p


def chunk_pages_refusal(chunk: int, page: int, ranks: int, mode: str = "null") -> str | None:
    """Why SGLang 0.5.23 refuses to start with ``chunked_prefill_size`` ``chunk`` over pages of
    ``page`` tokens, or None: arg_groups/validation_hook.py ``check_server_args`` asserts the
    chunk divisible by page_size when chunking is on and the server is not a disaggregated
    decode server (``mode``). It checks the resolved value, which with DP attention over
    ``ranks`` ranks is each rank's ``chunk // ranks`` (arg_groups/parallel_hook.py
    ``_handle_data_parallelism`` divides it first)."""
    if chunk <= 0 or mode == "decode":
        return None
    per_rank = chunk // ranks
    if per_rank % page == 0:
        return None
    lo, hi = per_rank // page * page * ranks, (per_rank // page + 1) * page * ranks
    where = f" (each of the {ranks} DP-attention ranks gets {per_rank})" if ranks > 1 else ""
    return (f"must be a multiple of server.page_size ({page}){where}, as SGLang refuses to start otherwise "
            "(chunked_prefill_size must be divisible by page_size); allowed e.g. "
            + (f"{lo} or {hi}" if lo > 0 else f"{hi}"))


def chain_window_reset(algorithm: Any, steps: Any, topk: Any) -> int | None:
    """The verify window SGLang 0.5.23 gives a chain drafter without a tree in place of its
    ``speculative_num_draft_tokens``, ``speculative_num_steps + 1``, else None: a chain
    (``algorithm`` enabled, not a block drafter) given integer ``steps`` in 1..MAX_DRAFT_TOKENS
    - 1 and ``speculative_eagle_topk`` 1 or unset (``topk``) verifies its steps + 1 positions
    whatever the window says (arg_groups/speculative_hook.py ``_handle_eagle_family`` resets it
    with a logged warning). ``algorithm``: a name in any case, or a :class:`SpecAlgorithm`
    (None when it names none)."""
    try:
        algo = SpecAlgorithm(str(algorithm if algorithm is not None else "none").lower())
    except ValueError:
        return None   # the field's own validator names the value
    if (algo.enabled and not algo.is_block and isinstance(steps, int) and not isinstance(steps, bool)
            and 1 <= steps < MAX_DRAFT_TOKENS and topk in (None, 1)):
        return steps + 1
    return None


class ServerArgs(BaseModel):
    """The SGLang server arguments the scheduler model reads (names as in server_args.py); SGLang launch arguments that cannot change the prediction (log_level, enable_metrics, port, ...) are accepted and left out, the others refused saying why (sim/sglang_launch_args.py)."""

    model_config = _STRICT
    _block_given: dict[str, int] = PrivateAttr(default_factory=dict)
    """A block drafter's ``speculative_num_steps`` / ``speculative_eagle_topk`` as given where
    out of the chain drafter's range (0, negative; topk above 64): held at 1 here and said as
    SGLang's reset by :func:`sim.defaults.block_drafter_resets` (:meth:`_block_drafter_resets`)."""

    max_running_requests: int = Field(256, ge=1, le=MAX_RUNNING_REQUESTS, description="Running-slot limit (requests); at most 2**31 - 1 (each holds an int32-indexed KV slot).")
    max_total_num_tokens: int = Field(724_000, ge=1, le=MAX_POOL_TOKENS, description="KV pool capacity, tokens. At most 2**63 - 1 (a token count is an int64).")
    context_length: int | None = Field(None, ge=1, le=MAX_RUNNING_REQUESTS, description="SGLang's --context-length (at most 2**31 - 1: a context is a row of int32 KV slot indices): the model's context length as the server runs it (configs/model_config.py ModelConfig._derive_context_length: it replaces the one derived from the model's config; a larger one needs SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 there). A trace row longer than it fails as SGLang rejects it (a generated workload's is refused before the run), and the max_running_requests default is computed with it. None: the profile's hardware.context_len, if any.")
    allow_auto_truncate: bool = Field(False, description="SGLang's --allow-auto-truncate: a trace row's prompt past the context length or max_req_input_len (min(context_len, pool) - 6) is truncated to it, and its max_new_tokens to what the context and SGLang's cut on the prompt before the truncation leave (at least the one token the prefill makes), where without it SGLang rejects the request (managers/tokenizer_manager.py _validate_one_request, managers/utils.py validate_input_length; sim/served.py served_requests). Co-located servers' traces.")
    mem_fraction_static: float | None = Field(None, gt=0, lt=1, description="Fraction of the GPU's memory for weights and the KV pool (SGLang --mem-fraction-static): with a profile that knows its hardware, the default KV pool is this fraction of the memory less the weights, over the KV bytes per token; left out, SGLang's own from the memory, chunked_prefill_size and the graphs (arg_groups/memory_hook.py handle_gpu_memory_settings). Not read when max_total_num_tokens is given or the profile has no hardware block.")
    chunked_prefill_size: int = Field(16384, description="Chunk budget per prefill batch, tokens; -1 disables chunking (SGLang's value). At most 2**31 - 1 (SGLang's KV slot index is int32). Without enable_mixed_chunk a long prompt's chunks run back to back, the running decodes waiting for the last (a prefill batch goes before decode: scheduler.py get_next_batch_to_run), so the size moves TTFT and ITL little; with it every chunk carries the running decodes.")
    max_prefill_tokens: int = Field(16384, ge=1, description="Prompt-token budget of one prefill batch.")
    page_size: int = Field(1, ge=1, description="KV page size, tokens.")
    schedule_policy: str = Field("fcfs", description="Waiting-queue order: SGLang's names (fcfs, lof, random, shortest-prefill-first, lpm, dfs-weight, hrrn, routing-key; sim/schedule_policy.py) or a user class 'module.path:Class' / 'path/file.py:Class' (docs/policies.md).")
    schedule_policy_params: dict[str, Any] = Field(default_factory=dict, description="Keyword parameters for the schedule-policy class's from_server.")
    enable_priority_scheduling: bool = Field(False, description="fcfs and lof order by request priority first (higher values first).")
    schedule_low_priority_values_first: bool = Field(False, description="With priority scheduling, lower values go first.")
    disable_priority_preemption: bool = Field(False, description="With priority scheduling, never preempt running requests for a waiting one.")
    priority_scheduling_preemption_threshold: int = Field(10, ge=0, description="Priority difference above which a waiting request preempts running ones.")
    retraction_policy: Literal["length", "priority"] = Field("length", description="Which running requests a decode pass short of KV retracts first (SGLang --retraction-policy, schedule_batch.py _get_decode_retraction_order): length, the least output first, ties the longest prompt; priority (needs enable_priority_scheduling), the lowest priority first, then by length.")
    prefill_max_requests: int | None = Field(None, ge=1, description="Requests one prefill batch may admit (None: no limit).")
    scheduler_recv_interval: int = Field(1, ge=1, le=1_000_000, description="SGLang --scheduler-recv-interval: above 1, a pass receives new requests only when a counter (+1 after a decode, a verify or a pass without a batch, +1000 after an extend or a mixed batch) reaches it (0.5.23 recv_skipper.py SchedulerRecvSkipper). A request arriving mid-decode waits up to this many steps to be received. Runs with it above 1 go step by step.")
    stream_interval: int = Field(1, ge=1, le=1_000_000, description="SGLang --stream-interval: a streaming request's tokens go out at once at 1; otherwise the first token at once, then whenever at least this many are unsent, and at the finish (0.5.23 output_streamer.py OutputStreamer.accept). Changes the chunks a client sees (ITL), not TTFT, TPOT or throughput; runs with it above 1 go step by step (no collapsed decode stretches).")
    prefill_decode_interval: int = Field(0, ge=0, description="Decode rounds after a prefill before the next prefill is tried (0: off).")
    prefill_decode_interval_min_bs: int = Field(0, ge=0, description="Apply prefill_decode_interval only while at least this many requests run.")
    disable_radix_cache: bool = Field(False, description="Turn the radix prefix cache off (prompts that share prefixes recompute them).")
    sglang_semantics: str = Field("0.5.23", description="Which SGLang build's scheduling rules apply (sim/semantics.py): 0.5.23 or mi355x-dsv41.")
    semantics_rules: dict[str, Any] = Field(default_factory=dict, description="Single rules overriding the preset's (sim/semantics.py SemanticsRules).")
    schedule_conservativeness: float = Field(1.0, ge=0, description="Scales the initial new_token_ratio (0.7 x this, at most 1); 0 reserves nothing for the running requests' outputs at admission, until a retraction raises the ratio, which then stays (no decay from 0). Non-negative, as SGLang asserts (arg_groups/validation_hook.py check_server_args).")
    enable_mixed_chunk: bool = Field(False, description="Decode requests ride in extend batches. Turned off with speculative_algorithm standalone, as SGLang does (its STANDALONE cannot mix).")
    cuda_graph_max_bs: int = Field(256, ge=1, description="Largest batch replayed as a graph; larger runs eager.")
    speculative_algorithm: SpecAlgorithm = Field(SpecAlgorithm.none, strict=False, description="SGLang's names, any case (EAGLE = eagle).")
    speculative_num_draft_tokens: int = Field(1, ge=1, le=MAX_DRAFT_TOKENS, description="Verify window per request (gamma + 1 positions). Left out with a block drafter: SGLang 0.5.23's fallback with no draft checkpoint config, 8 for DSpark (DEFAULT_DSPARK_GAMMA 7 + 1) and 16 for DFlash (arg_groups/speculative_hook.py _handle_dspark, _handle_dflash).")
    speculative_num_steps: int | None = Field(None, ge=1, description="Chain drafter: serial draft forwards; required with speculative_eagle_topk or speculative_num_draft_tokens, as SGLang refuses either without it at start-up (arg_groups/speculative_hook.py _handle_eagle_family); with none of the three given, SGLang's own choice: 5/4/8 for Llama, 3/1/4 otherwise (_auto_choose_speculative_params). Given with speculative_eagle_topk 1 (or unset), the verify window becomes num_steps + 1 whatever speculative_num_draft_tokens says, as SGLang resets it (arg_groups/speculative_hook.py _handle_eagle_family).")
    speculative_eagle_topk: int | None = Field(None, ge=1, le=64, description="Chain drafter: candidates per draft step (tree width); each draft step runs over batch x topk tokens (sim/cost_model.py). None: 1.")
    cuda_graph_bs: list[Annotated[int, Field(ge=1)]] | None = Field(None, min_length=1, description="Captured decode/verify graph batch sizes; a batch is padded to the smallest one >= it (sim/cost_model.py), a batch above the largest runs eagerly: given, cuda_graph_max_bs becomes its largest entry, as SGLang sets it. None: SGLang's default list for cuda_graph_max_bs (graph_batch_sizes).")
    disable_decode_cuda_graph: bool = Field(False, description="Run every decode step and speculative cycle eagerly, at any batch size (SGLang's switch, arg_groups/cuda_graph_hook.py: decode backend disabled); the simulator then charges each the eager cost (sim/cost_model.py).")
    disable_prefill_cuda_graph: bool = Field(False, description="Run extends (and the drafter's prompt injection) eagerly instead of piecewise graphs at token buckets (SGLang's switch; the runtime reads it; the simulator then charges extends their real token count instead of the padded bucket, CUDA profiles only).")
    cuda_graph_max_bs_prefill: int | None = Field(None, ge=1, le=MAX_CHUNK_TOKENS, description="Largest extend token count replayed from piecewise graphs (SGLang's name: for prefill the 'batch size' is tokens); at most 2**31 - 1, as chunked_prefill_size. None: chunked_prefill_size capped by max_total_num_tokens, as SGLang 0.5.23 resolves it.")
    cuda_graph_bs_prefill: list[Annotated[int, Field(ge=1)]] | None = Field(None, description="Captured extend token buckets; an extend is padded to the smallest one >= its tokens, eager above the largest or when that more than doubles the tokens. None: SGLang 0.5.23's default list up to cuda_graph_max_bs_prefill (prefill_graph_tokens).")
    admission_delay: str = Field("none", description="Admission-delay policy: a shipped name (AdmissionDelay) or a user class 'module.path:Class' / 'path/file.py:Class' (docs/policies.md).")
    admission_delay_params: dict[str, Any] = Field(default_factory=dict, description="Keyword parameters for the admission-delay class's from_server.")
    min_free_slots: int | None = Field(None, ge=1, description="Explicit delay threshold (None: automatic formula).")
    max_delay_passes: int | None = Field(None, ge=1, description="demand_observed: delayed passes before admitting anyway (None: target running).")
    sync_mode: SyncMode = Field(SyncMode.host_block, strict=False, description="Where the overlap loop waits for the previous forward's publish event (spec only): host_block, stream_wait or cross_queue_wait.")
    prefill_slot_expansion_sync: bool = Field(True, description="DSpark prefill's repeat_interleave without output_size blocks the host until the prefill forward drains.")
    enable_overlap_schedule: bool = Field(True, description="Build step N+1 while step N runs (SGLang default).")
    sliding_window_size: int | None = Field(None, ge=1, description="Hybrid sliding-window models (e.g. DeepSeek-V4, gpt-oss, window 128): the model's attention window, tokens (SGLang ModelConfig.sliding_window_size). Set, the KV has a separate SWA pool whose per-request use is capped by the window (docs/sglang-semantics.md). A profile with hardware.sliding_window (an analytic profile of such a model) sets it; null then runs one pool of every layer (SGLang --disable-hybrid-swa-memory). None: no SWA layers.")
    swa_full_tokens_ratio: float = Field(0.8, gt=0, le=1, description="SWA pool tokens / full pool tokens (SGLang --swa-full-tokens-ratio, in (0, 1]); the SWA pool is int(max_total_num_tokens x ratio), page-aligned. Read only with sliding_window_size.")
    swa_eviction_interval: int = Field(128, ge=1, description="A request's SWA tokens behind the window are freed once this many have slid out (SGLang SGLANG_SWA_EVICTION_INTERVAL). Read only with sliding_window_size.")
    enable_dp_attention: bool = Field(False, description="Data-parallel attention (SGLang --enable-dp-attention): dp_size ranks, each its own scheduler, waiting queue, running batch and KV pool, run their forwards in lock-step (sim/dp_attention.py, docs/dp-attention.md). max_total_num_tokens is per rank; chunked_prefill_size and max_running_requests are the server's and divided by dp_size as SGLang does.")
    dp_size: int = Field(1, ge=1, le=1024, description="Data-parallel size (SGLang --dp-size). Without enable_dp_attention: that many independent replicas of this server, each a whole server of the profile's GPUs with its own queue, batch, KV pool and forward stream (sim/dp_replicas.py, docs/dp-replicas.md). With it: lock-step DP-attention ranks (sim/dp_attention.py). Requests go to them by load_balance_method (round-robin in arrival order by default: data_parallel_controller.py round_robin_scheduler).")
    load_balance_method: Literal["auto", "round_robin", "follow_bootstrap_room", "total_requests", "total_tokens"] = Field("auto", description="How the DP controller picks a data-parallel replica for each request (SGLang --load-balance-method; sim/dp_dispatch.py, docs/dp-replicas.md): auto resolves to round_robin (follow_bootstrap_room on a disaggregated prefill server); round_robin, the next replica in turn; total_requests, the replica with the fewest running + waiting requests; total_tokens, the fewest KV tokens in use + waiting tokens; both load-aware methods read the replicas' published load snapshots at most every 20 ms and count their own dispatches in between. With dp_size 1 any value (no DP controller); DP attention and follow_bootstrap_room run what auto resolves to only.")
    dp_spec_prefill_coordination: bool = Field(False, description="DP attention with speculative decoding (SGLang SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION): False (0.5.23's default), a prefill on any rank makes every rank without one run an idle batch instead of its decode; True, each rank runs its own prefill or decode in the same forward (refused with dflash, as SGLang refuses it).")
    disaggregation: Disaggregation | None = Field(None, description="Prefill-decode disaggregation (SGLang --disaggregation-mode prefill / decode behind a router): the layout of prefill and decode servers, each role's server overrides (sim/disagg_config.py, docs/disaggregation.md). None: one colocated server.")
    disaggregation_mode: Literal["null", "prefill", "decode"] = Field("null", description="This server's role (SGLang --disaggregation-mode); set per role by server.disaggregation, not by hand.")
    num_reserved_decode_tokens: int = Field(512, ge=0, le=1_000_000, description="Decode server: tokens reserved per active request when preallocating KV for a new one (SGLang --num-reserved-decode-tokens).")
    disaggregation_decode_extra_slots: int | None = Field(None, ge=0, le=1_000_000, description="Decode server: req_to_token slots beyond max_running_requests (per DP rank) for requests whose KV is in transfer (SGLang --disaggregation-decode-extra-slots). None: SGLang's default, 2 x the stated max_running_requests' per-rank share when that is at most 32, else 0; a limit the launch leaves to SGLang counts as none (arg_groups/pd_disaggregation_hook.py handle_pd_disaggregation runs before the hooks that fill it).")

    @model_validator(mode="before")
    @classmethod
    def _leave_out_inert_launch_args(cls, data: Any) -> Any:
        """SGLang launch arguments that cannot change the prediction (``log_level``,
        ``enable_metrics``, ``port``: :data:`sim.sglang_launch_args.INERT_ARGS`) are accepted
        and left out, so a server's pasted arguments load; the scenario names them in a note
        (:meth:`sim.config.Scenario._remember_inert_launch_args`)."""
        return drop_inert(data)

    @model_validator(mode="before")
    @classmethod
    def _graph_max_from_list(cls, data: Any) -> Any:
        """An explicit ``cuda_graph_bs`` sets ``cuda_graph_max_bs`` to its largest entry,
        whatever ``cuda_graph_max_bs`` says: sglang 0.5.23 arg_groups/memory_hook.py
        ``_handle_gpu_memory_settings`` (``decode_cuda_graph_config.max_bs =
        max(decode_cuda_graph_config.bs)`` when the list is given), and the decode runner
        replays graphs only up to ``max(capture_bs)`` (decode_cuda_graph_runner.py
        ``can_run_graph``). A batch above the list's largest size runs eagerly; it is not
        padded to a ``cuda_graph_max_bs`` graph that was never captured."""
        if isinstance(data, dict):
            bs = data.get("cuda_graph_bs")
            if (isinstance(bs, list) and bs and all(isinstance(b, int) and not isinstance(b, bool) for b in bs)
                    and max(bs) >= 1):
                data = {**data, "cuda_graph_max_bs": max(bs)}
        return data

    @model_validator(mode="wrap")
    @classmethod
    def _auto_chain_params(cls, data: Any, handler: Any) -> ServerArgs:
        """A chain drafter given none of :data:`CHAIN_PARAM_KEYS` gets SGLang's own choice
        (:func:`auto_speculative_params`) instead of a refusal. Without the target's
        architecture that is SGLang's fallback (3, 1, 4); the three keys are left out of
        the fields the scenario set, so ``sim/defaults.py`` fills them again by the
        profile's ``hardware.architecture`` (5, 4, 8 for Llama) and prints what it chose.
        A chain drafter given ``speculative_eagle_topk`` or ``speculative_num_draft_tokens``
        but no ``speculative_num_steps`` is refused: SGLang 0.5.23 stops at start-up
        (arg_groups/speculative_hook.py ``_handle_eagle_family``: with the steps None, and
        ``speculative_adaptive`` off, it asserts the other two are None before choosing all
        three). A block drafter given no ``speculative_num_draft_tokens`` gets SGLang's
        fallback window the same way (:data:`BLOCK_DEFAULT_WINDOW`).

        Raises:
            FieldError: the partial chain, on the first of the two keys given.
        """
        auto: tuple[str, ...] = ()
        if isinstance(data, dict):
            try:
                algo = SpecAlgorithm(str(data.get("speculative_algorithm", "none")).lower())
            except ValueError:
                algo = SpecAlgorithm.none   # the field's own validator names the value
            given = [k for k in CHAIN_PARAM_KEYS[1:] if k in data]
            if algo.enabled and not algo.is_block and given and "speculative_num_steps" not in data:
                raise FieldError(f"server.{given[0]}", data[given[0]], (
                    f"given without server.speculative_num_steps ({algo.value}: "
                    + ", ".join(f"{k} {data[k]}" for k in given) + "), which SGLang 0.5.23 refuses at start-up "
                    "(arg_groups/speculative_hook.py _handle_eagle_family: with speculative_num_steps None it "
                    "asserts speculative_eagle_topk and speculative_num_draft_tokens are None too); allowed: give "
                    "speculative_num_steps as well, or leave all three out for SGLang's own choice "
                    "(_auto_choose_speculative_params)"))
            if algo.enabled and not algo.is_block and not any(k in data for k in CHAIN_PARAM_KEYS):
                auto = CHAIN_PARAM_KEYS
                data = {**data, **dict(zip(CHAIN_PARAM_KEYS, auto_speculative_params(algo.value, None), strict=True))}
            elif algo.is_block and "speculative_num_draft_tokens" not in data:
                # the block fallbacks read the window alone (a topk, forced to 1, does not stop them)
                auto = ("speculative_num_draft_tokens",)
                data = {**data, "speculative_num_draft_tokens": BLOCK_DEFAULT_WINDOW[algo.value]}
        m = handler(data)
        if auto:
            m.__pydantic_fields_set__.difference_update(auto)
        return m

    @model_validator(mode="wrap")
    @classmethod
    def _block_drafter_resets(cls, data: Any, handler: Any) -> ServerArgs:
        """A block drafter's (DSpark, DFlash) ``speculative_num_steps`` or
        ``speculative_eagle_topk`` given as any integer other than 1 is overridden to 1 with a
        warning by SGLang 0.5.23 (arg_groups/speculative_hook.py ``_handle_dspark``,
        ``_handle_dflash``: ``int(value) != 1``), 0 and negatives included; the fields' own
        range (>= 1, topk <= 64) is the chain drafters', whose hook takes no such value. An
        integer outside that range is held at 1 here, the value given kept in
        ``_block_given`` for :func:`sim.defaults.block_drafter_resets` to say the reset; one
        within it stays as given until that reset. Chain drafters keep the fields' range."""
        given: dict[str, int] = {}
        if isinstance(data, dict):
            try:
                algo = SpecAlgorithm(str(data.get("speculative_algorithm", "none")).lower())
            except ValueError:
                algo = SpecAlgorithm.none   # the field's own validator names the value
            if algo.is_block:
                for key, top in (("speculative_num_steps", None), ("speculative_eagle_topk", 64)):
                    v = data.get(key)
                    if isinstance(v, int) and not isinstance(v, bool) and (v < 1 or (top is not None and v > top)):
                        given[key] = v
                if given:
                    data = {**data, **dict.fromkeys(given, 1)}
        m = handler(data)
        if given:
            m._block_given = given
        return m

    @model_validator(mode="wrap")
    @classmethod
    def _draft_params_as_sglang_reads_them(cls, data: Any, handler: Any) -> ServerArgs:
        """The speculative keys as SGLang 0.5.23 reads them where it ignores them (a wrap
        validator defined after the other two: pydantic runs it first, so they see which keys
        are given as SGLang does).

        - None in ``speculative_algorithm``, ``speculative_num_steps``, ``speculative_eagle_topk``
          or ``speculative_num_draft_tokens`` is SGLang's unset (each an ``Optional`` field whose
          default is None, arg_groups/fields/spec.py): dropped, so the key counts as not given
          (no algorithm; a chain's own choice, :meth:`_auto_chain_params`; a block drafter's
          fallback window). A pasted server-arguments dump writes them so.
        - ``speculative_num_steps`` given without a speculative algorithm is dropped, whatever
          integer it is (0 and negatives too): the field is an unchecked ``Optional[int]``,
          arg_groups/speculative_hook.py ``handle_speculative_decoding`` dispatches per
          algorithm only, and nothing else reads it, so this field's range (>= 1, a chain's)
          applies only with one. With a block drafter it is kept as given, as
          ``speculative_eagle_topk`` is: SGLang overrides a value other than 1 to 1 with a
          logged warning (``_handle_dspark``, ``_handle_dflash``: "only supports
          speculative_num_steps == 1"), which :func:`sim.defaults.block_drafter_resets`
          applies and prints as a filled value. A block drafter reads neither field (its one
          draft forward is :attr:`num_draft_forwards`), so the chain's step limits do not
          apply to it (:meth:`_spec_window`).
        - ``speculative_eagle_topk`` and ``speculative_num_draft_tokens`` without a speculative
          algorithm at a value outside the fields' range (0, negatives, topk above 64, a window
          above :data:`MAX_DRAFT_TOKENS`) are dropped: SGLang checks them only in the
          per-algorithm hooks, and its readers outside them take 0 as unset
          (arg_groups/memory_hook.py and model_executor/pool_configurator.py
          ``speculative_num_draft_tokens or 1``); a value within the range stays as given (the
          model reads neither without an algorithm: :attr:`spec_window` is 1). Said in no
          line, as SGLang logs nothing for them."""
        if not isinstance(data, dict):
            return handler(data)
        unset = [k for k in ("speculative_algorithm", *CHAIN_PARAM_KEYS) if k in data and data[k] is None]
        if unset:
            data = {k: v for k, v in data.items() if k not in unset}
        try:
            algo = SpecAlgorithm(str(data.get("speculative_algorithm", "none")).lower())
        except ValueError:
            return handler(data)   # the field's own validator names the value
        if algo.enabled:
            return handler(data)
        ranges = {"speculative_num_steps": (None, None), "speculative_eagle_topk": (1, 64),
                  "speculative_num_draft_tokens": (1, MAX_DRAFT_TOKENS)}
        ignored = [k for k, (lo, hi) in ranges.items()
                   if isinstance(v := data.get(k), int) and not isinstance(v, bool)
                   and (lo is None or not lo <= v <= hi)]
        return handler({k: v for k, v in data.items() if k not in ignored} if ignored else data)

    @model_validator(mode="before")
    @classmethod
    def _chain_window_from_steps(cls, data: Any) -> Any:
        """A chain drafter without a tree (``speculative_eagle_topk`` 1 or unset) verifies
        ``speculative_num_steps + 1`` positions whatever ``speculative_num_draft_tokens``
        says: sglang 0.5.23 arg_groups/speculative_hook.py ``_handle_eagle_family`` resets
        the window to ``num_steps + 1`` when topk is 1 (with a logged warning) and runs. A
        longer window would price verifies SGLang never runs and draw accepts from drafts
        never made; a shorter one, refuse a server SGLang starts."""
        if not isinstance(data, dict):
            return data
        window = chain_window_reset(data.get("speculative_algorithm", "none"), data.get("speculative_num_steps"),
                                    data.get("speculative_eagle_topk"))
        if window is not None:
            data = {**data, "speculative_num_draft_tokens": window}
        return data

    @model_validator(mode="before")
    @classmethod
    def _mixed_chunk_off_where_unsupported(cls, data: Any) -> Any:
        """``enable_mixed_chunk`` with an algorithm that cannot mix
        (:attr:`SpecAlgorithm.supports_mixed_chunk`) is turned off, as sglang 0.5.23
        arg_groups/speculative_hook.py ``_handle_eagle_family`` resets it (with a logged
        warning) and runs: every extend is then a plain extend and the running batch waits
        for the next verify."""
        if not isinstance(data, dict) or data.get("enable_mixed_chunk") is not True:
            return data
        try:
            algo = SpecAlgorithm(str(data.get("speculative_algorithm", "none")).lower())
        except ValueError:
            return data   # the field's own validator names the value
        return data if algo.supports_mixed_chunk else {**data, "enable_mixed_chunk": False}

    @model_validator(mode="wrap")
    @classmethod
    def _sglang_names(cls, data: Any, handler: Any) -> ServerArgs:
        """SGLang 0.5.23's names of settings this block has under its own keys
        (:data:`sim.sglang_launch_args.SPELLINGS`: ``max_total_tokens``, ``disable_overlap_schedule``,
        ``attn_dp_size``, ...) read as those keys (:func:`sim.sglang_launch_args.as_server_keys`),
        before any other validator sees the block (the last wrap validator defined: pydantic
        runs it first). A value refused for a renamed key (``max_total_tokens: 0``) names the
        name given, not the key it was read as."""
        if not isinstance(data, dict):
            return handler(data)
        renamed = {RENAMED[k]: k for k in data if k in RENAMED}
        data = {k: v for k, v in data.items() if not _sglang_unset(k, v)}
        try:
            return handler(as_server_keys(data))
        except ValidationError as e:
            first = e.errors()[0]
            if first["type"] != "extra_forbidden" and (unknown := cls._unknown_keys(as_server_keys(data))):
                # an unknown key (a typo) before any check across fields: a check that stops
                # before the fields are read (a chain window given without the steps, where
                # the steps' key is the one mistyped) named the key given right, not the typo
                raise ValidationError.from_exception_data(e.title, [
                    {"type": "extra_forbidden", "loc": (k,), "input": v} for k, v in unknown.items()]) from None
            if not first["loc"] or first["loc"][0] not in renamed:
                raise
            moved = {"type": first["type"], "loc": (renamed[first["loc"][0]], *first["loc"][1:]),
                     "input": first["input"], **({"ctx": first["ctx"]} if "ctx" in first else {})}
            raise ValidationError.from_exception_data(e.title, [moved]) from None

    @classmethod
    def _unknown_keys(cls, data: dict[str, Any]) -> dict[str, Any]:
        """The keys of the server block ``data`` (SGLang's names already read as this block's)
        that are no field and no launch argument left out (:func:`drop_inert`), with their values."""
        try:
            kept = drop_inert(data)
        except FieldError:   # an inert argument's bad value: its own refusal stands
            return {}
        return {k: v for k, v in kept.items() if k not in cls.model_fields} if isinstance(kept, dict) else {}

    @field_validator("speculative_algorithm", mode="before")
    @classmethod
    def _any_case(cls, v: object) -> object:
        if isinstance(v, str) and v.lower() == "ngram":
            raise ValueError("NGRAM is not modelled (its draft is a host-side n-gram lookup no profile "
                             "prices); allowed: " + ", ".join(a.value for a in SpecAlgorithm))
        return v.lower() if isinstance(v, str) else v

    @field_validator("admission_delay", mode="before")
    @classmethod
    def _delay_name(cls, v: object) -> object:
        if isinstance(v, AdmissionDelay):
            return v.value
        if isinstance(v, str) and ":" not in v and v not in AdmissionDelay.__members__:
            raise ValueError(f"allowed: {', '.join(AdmissionDelay.__members__)}, or a class "
                             "'module.path:Class' / 'path/file.py:Class' (docs/policies.md)")
        return v

    @field_validator("schedule_policy", mode="before")
    @classmethod
    def _policy_name(cls, v: object) -> object:
        from specsched.sim.schedule_policy import SHIPPED

        if isinstance(v, str) and ":" not in v and v not in SHIPPED:
            raise ValueError(f"allowed: {', '.join(SHIPPED)}, or a class 'module.path:Class' / "
                             "'path/file.py:Class' (docs/policies.md)")
        return v

    @field_validator("sglang_semantics", mode="before")
    @classmethod
    def _preset(cls, v: object) -> object:
        # before the string check: ``sglang_semantics: 0.5`` (YAML reads a number) names
        # the presets too, not only "must be a string"
        from specsched.sim.semantics import PRESETS

        if not isinstance(v, str) or v not in PRESETS:
            raise ValueError(f"allowed: {', '.join(PRESETS)}")
        return v

    @field_validator("semantics_rules")
    @classmethod
    def _rules(cls, v: dict[str, Any]) -> dict[str, Any]:
        from specsched.sim.semantics import DEFAULT_PRESET, resolve_rules

        resolve_rules(DEFAULT_PRESET, v)  # every preset has the same rules
        return v

    @property
    def rules(self):
        """The resolved scheduling rules (:class:`sim.semantics.SemanticsRules`)."""
        from specsched.sim.semantics import resolve_rules

        return resolve_rules(self.sglang_semantics, self.semantics_rules)

    @model_validator(mode="after")
    def _spec_window(self) -> ServerArgs:
        algo = self.speculative_algorithm
        if self.speculative_algorithm.enabled and self.speculative_num_draft_tokens < 2:
            left_out = "" if self.speculative_num_draft_tokens != 1 or algo.is_block else (
                " (1 is its value when left out: with speculative_num_steps or speculative_eagle_topk given, give it "
                "too, steps + 1 at topk 1, or leave all three out for SGLang's automatic choice, "
                "arg_groups/speculative_hook.py _auto_choose_speculative_params)")
            raise FieldError("server.speculative_num_draft_tokens", self.speculative_num_draft_tokens,
                             f"must be >= 2 (gamma + 1) with speculative_algorithm {algo.value}: the verify window "
                             "of one target token and its drafts" + left_out)
        if self.page_size > self.max_total_num_tokens:
            raise FieldError("server.page_size", self.page_size, "must be <= server.max_total_num_tokens "
                             f"({self.max_total_num_tokens}), the KV pool it pages")
        c = self.chunked_prefill_size
        if c == 0 or c < -1:
            raise FieldError("server.chunked_prefill_size", c, f"must be -1 (chunking off, as in SGLang) or in [1, {MAX_CHUNK_TOKENS}]")
        if c > MAX_CHUNK_TOKENS:
            raise FieldError("server.chunked_prefill_size", c, f"must be -1 (chunking off) or in [1, {MAX_CHUNK_TOKENS}]: "
                             "a chunk's tokens each take a KV slot, which SGLang indexes as int32")
        if c != -1 and c < self.page_size:
            raise FieldError("server.chunked_prefill_size", c, f"must be >= server.page_size ({self.page_size}): "
                             "a chunk is cut at page boundaries, so a smaller one never advances")
        if self.sliding_window_size is not None and self.sliding_window_size + self.page_size >= self.swa_max_total_num_tokens:
            self._refuse_small_swa_pool()
        if self.retraction_policy == "priority" and not self.enable_priority_scheduling:
            raise FieldError("server.retraction_policy", self.retraction_policy,
                             "priority needs server.enable_priority_scheduling: true (as SGLang requires); or length")
        if self.enable_priority_scheduling and self.schedule_policy not in PRIORITY_POLICIES and ":" not in self.schedule_policy:
            # sglang 0.5.23 arg_groups/validation_hook.py check_server_args: "To use priority
            # scheduling, schedule_policy must be 'fcfs' or 'lof'" (an assert at start-up)
            raise FieldError("server.schedule_policy", self.schedule_policy,
                             "cannot run with server.enable_priority_scheduling: true, as SGLang refuses to start "
                             "(priority scheduling takes fcfs or lof only); pick fcfs or lof, or turn priority "
                             "scheduling off")
        if self.schedule_policy == "shortest-prefill-first" and self.disable_radix_cache:
            # sglang 0.5.23 schedule_policy.py SchedulePolicy._validate_and_adjust_policy: lpm and
            # dfs-weight fall back to fcfs without a tree cache, shortest-prefill-first refuses to start
            raise FieldError("server.schedule_policy", self.schedule_policy,
                             "shortest-prefill-first requires prefix caching, as SGLang refuses it with "
                             "server.disable_radix_cache: true; turn the cache on or pick another order "
                             "(fcfs, lof, random; lpm, dfs-weight and hrrn run as fcfs without the cache)")
        if self.dp_replicas > 1 and (self.disaggregation is not None or self.disaggregation_mode != "null"):
            raise FieldError("server.dp_size", self.dp_size,
                             "data-parallel replicas of a disaggregated server are not modelled: give each role's "
                             "server count as server.disaggregation.<role>.instances (or set "
                             "enable_dp_attention: true for DP attention)")
        self._check_load_balance_method()
        if (self.dp_spec_prefill_coordination and self.attn_dp_size > 1
                and self.speculative_algorithm is SpecAlgorithm.dflash):
            # sglang 0.5.23 arg_groups/speculative_hook.py _handle_dflash stops at start: "DFLASH
            # with dp attention requires SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION=0"
            raise FieldError("server.dp_spec_prefill_coordination", True,
                             "DFLASH under DP attention needs it off, as SGLang refuses to start with it on; "
                             "set false, or use dspark")
        if self.attn_dp_size > 1 and self.speculative_algorithm is SpecAlgorithm.standalone:
            # sglang 0.5.23 arg_groups/speculative_hook.py _handle_eagle_family stops at start:
            # "Currently standalone speculative decoding does not support dp attention."
            raise FieldError("server.speculative_algorithm", self.speculative_algorithm.value,
                             "standalone (a separate draft model) cannot run under DP attention, as SGLang refuses "
                             "to start; use eagle, eagle3 or nextn, or enable_dp_attention: false")
        if self.enable_dp_attention and c != -1 and c // self.dp_size < self.page_size:
            raise FieldError("server.chunked_prefill_size", c, f"must be >= dp_size x page_size = {self.dp_size * self.page_size} "
                             "with DP attention: each rank's chunk is chunked_prefill_size // dp_size")
        if self.disaggregation is not None:
            self._check_roles()
        steps = self.speculative_num_steps
        if steps is not None and not algo.is_block:   # a block drafter's is reset to 1 (_draft_params_as_sglang_reads_them)
            if steps >= MAX_DRAFT_TOKENS and self.speculative_eagle_topk in (None, 1):
                # the window would be reset to steps + 1 (_chain_window_from_steps), past its limit
                raise FieldError("server.speculative_num_steps", steps, f"at most {MAX_DRAFT_TOKENS - 1}: with "
                                 "speculative_eagle_topk 1 the verify window becomes num_steps + 1, and "
                                 f"speculative_num_draft_tokens is at most {MAX_DRAFT_TOKENS}")
            # a tree (topk > 1) may draft deeper than its draft tokens: SGLang 0.5.23 runs it
            # (_handle_eagle_family checks no such bound; organize_draft_results keeps the
            # num_draft_tokens - 1 best candidates, at most that deep: accept_window); a chain's
            # window is reset to steps + 1 (_chain_window_from_steps)
            self._check_tree_candidates(steps)
        return self

    def _check_tree_candidates(self, steps: int) -> None:
        """A draft tree's verified nodes are the ``speculative_num_draft_tokens - 1`` best-scored
        of its candidates: ``topk`` at the first step and ``topk x topk`` at each later one
        (sglang 0.5.23 speculative/spec_utils.py ``select_top_k_tokens``), so at most
        ``topk + (steps - 1) x topk**2`` (speculative/eagle_utils.py ``organize_draft_results``
        takes ``torch.topk(score_list, num_draft_tokens - 1)`` over them and fails on more: the
        server stops at its first draft). Chains (topk 1) are reset to steps + 1 instead.

        Raises:
            FieldError: on ``server.speculative_num_draft_tokens``, naming the largest allowed.
        """
        topk = self.speculative_eagle_topk or 1
        if topk == 1:
            return
        candidates = topk + (steps - 1) * topk * topk
        if self.speculative_num_draft_tokens - 1 > candidates:
            raise FieldError("server.speculative_num_draft_tokens", self.speculative_num_draft_tokens,
                             f"at most {candidates + 1} with speculative_num_steps {steps} and "
                             f"speculative_eagle_topk {topk}: the tree verifies the num_draft_tokens - 1 best of "
                             f"topk + (steps - 1) x topk^2 = {candidates} draft candidates (SGLang fails on more)")

    def _check_load_balance_method(self) -> None:
        """The DP controller's methods the model runs (sim/dp_dispatch.py): with one DP rank any
        (no controller: managers/load_snapshot.py "dp_size == 1: no DataParallelController
        exists"); data-parallel replicas, auto, round_robin and the load-aware ones
        (follow_bootstrap_room asserts on a request without a bootstrap room, i.e. any not sent
        by a PD router: data_parallel_controller.py ``follow_bootstrap_room_scheduler``); DP
        attention, auto or what it resolves to (sim/dp_attention.py routes by that only)."""
        from specsched.sim.dp_dispatch import LOAD_AWARE, resolve_method

        m = self.load_balance_method
        if self.dp_size == 1:
            return
        if self.dp_replicas > 1:
            if m == "follow_bootstrap_room":
                raise FieldError("server.load_balance_method", m,
                                 "data-parallel replicas of a colocated server cannot route by the bootstrap room (SGLang "
                                 "asserts on a request without one); allowed: auto, round_robin, "
                                 + ", ".join(LOAD_AWARE))
            return
        if m != "auto" and m != resolve_method("auto", self.disaggregation_mode):
            raise FieldError("server.load_balance_method", m,
                             "not modelled with DP attention: its ranks take requests by what auto resolves to "
                             "(sim/dp_attention.py); allowed: auto, or what it resolves to: "
                             + resolve_method("auto", self.disaggregation_mode))

    def _refuse_small_swa_pool(self) -> None:
        """The SWA pool does not exceed sliding_window_size + page_size (sglang 0.5.23
        model_executor/pool_configurator.py ``validate_swa_pool_size``). The message shows
        the arithmetic from the user's values: the full pool (page-aligned when that changes
        it) x the ratio, int() of it, then its page-aligned size (the pool) when that is
        smaller, and the least ratio that passes (a pool of the next page above window + page).

        Raises:
            FieldError: always, on ``server.swa_full_tokens_ratio``.
        """
        p, mt, r = self.page_size, self.max_total_num_tokens, self.swa_full_tokens_ratio
        full = mt // p * p
        raw, pool = int(full * r), self.swa_max_total_num_tokens
        need = self.sliding_window_size + self.page_size
        full_s = f"{mt}" if full == mt else f"{mt} page-aligned to {full}"
        pool_s = f"{raw} tokens" if pool == raw else f"{raw} tokens, page-aligned to {pool}"
        least = (need // p + 1) * p   # the smallest page-aligned pool above window + page
        if least <= full:
            r_least = math.ceil(least / full * 1e6) / 1e6
            while int(full * r_least) // p * p < least:   # int() of a float product can fall a token short
                r_least = round(r_least + 1e-6, 6)
            hint = f"; allowed: a ratio >= {r_least:g} (a pool of {least})"
        else:
            # no ratio is sought above 1: at a window of 2**63 the search's steps of 1e-6 fell
            # below the float spacing of a ratio near 2e13 and never ended (a hang)
            hint = f"; no ratio <= 1 gives more than {need} with max_total_num_tokens {mt}"
        raise FieldError("server.swa_full_tokens_ratio", r,
                         f"the SWA pool (int({full_s} x {r}) = {pool_s}) must exceed "
                         f"sliding_window_size + page_size = {self.sliding_window_size} + {p} = {need}{hint}")

    def verifying_server(self) -> ServerArgs:
        """The arguments of the servers that run the verifies, whose verify window and draft
        tree a run's accept lengths are drawn at: these, or under prefill-decode
        disaggregation the decode role's (a prefill server returns the first token only, and a
        decode role may speculate where the server section does not:
        ``server.disaggregation.decode.server.speculative_algorithm``).

        Raises:
            FieldError: as :meth:`role_server`.
        """
        return self if self.disaggregation is None else self.role_server("decode")

    def role_server(self, role: str) -> ServerArgs:
        """A disaggregated role's server arguments: these with ``server.disaggregation.<role>.server``
        applied and ``disaggregation_mode`` set to the role (``prefill`` or ``decode``).

        Raises:
            FieldError: an override is unknown or out of range (named with its full key).
        """
        layout = self.disaggregation
        over = getattr(layout, role).server
        for key in FORCED_ROLE_KEYS:
            if key in over:
                raise FieldError(f"server.disaggregation.{role}.server.{key}", over[key], "set by the layout, not per role")
        base = self.model_dump(exclude={"disaggregation"})
        if "speculative_algorithm" in over:
            try:
                algo = SpecAlgorithm(str(over["speculative_algorithm"]).lower())
            except ValueError:
                algo = None   # the field's own validator names the value
            top = self.speculative_algorithm
            if algo is not None and (algo.enabled != top.enabled or algo.is_block != top.is_block):
                # another kind of drafter (or none) on this role: the server's drafter settings
                # are not its own; its server's speculative hook chooses them (_auto_chain_params)
                for key in CHAIN_PARAM_KEYS:
                    base.pop(key, None)
        data = {**base, **over, "disaggregation_mode": role}
        if role == "decode":
            data["disable_radix_cache"] = True  # arg_groups/pd_disaggregation_hook.py (decode radix cache off)
        try:
            return ServerArgs.model_validate(data)
        except ValidationError as e:
            first = e.errors()[0]
            cause = (first.get("ctx") or {}).get("error")
            if isinstance(cause, FieldError):
                key = cause.key.removeprefix("server.")
                raise FieldError(f"server.disaggregation.{role}.server.{key}", cause.value, cause.allowed) from None
            key = ".".join(str(x) for x in first["loc"])
            value = first.get("input", "<missing>")
            msg = first["msg"].removeprefix("Value error, ")
            if first["type"] == "extra_forbidden":
                msg = launch_arg_line(key) or "unknown server key"
            raise FieldError(f"server.disaggregation.{role}.server.{key}", value, msg) from None

    def _check_roles(self) -> None:
        if self.disaggregation_mode != "null":
            raise FieldError("server.disaggregation_mode", self.disaggregation_mode,
                             "leave it out: server.disaggregation sets each role's mode")
        no_swa = "the decode side's SWA-tail prealloc is not modelled"
        if self.sliding_window_size is not None:
            raise FieldError("server.disaggregation", "{...}", "not modelled with a hybrid sliding-window KV "
                             f"(server.sliding_window_size): {no_swa}")
        for role in ROLES:
            swa = getattr(self.disaggregation, role).server.get("sliding_window_size")
            if swa is not None:  # the same refusal for a role's own server
                raise FieldError(f"server.disaggregation.{role}.server.sliding_window_size", swa,
                                 f"not modelled with prefill-decode disaggregation (a hybrid sliding-window KV): "
                                 f"{no_swa}; remove it")
            self.role_server(role)
        pages = {role: self.role_server(role).page_size for role in ROLES}
        if pages["prefill"] != pages["decode"]:
            # disaggregation/common/conn.py CommonKVManager.try_ensure_parallel_info: the decode
            # side refuses a prefill server of another page size ("Page size mismatch")
            role = next((r for r in ("decode", "prefill") if "page_size" in getattr(self.disaggregation, r).server),
                        "decode")
            raise FieldError(f"server.disaggregation.{role}.server.page_size", pages[role],
                             f"the prefill server's page_size is {pages['prefill']} and the decode server's "
                             f"{pages['decode']} (each as its attention backend takes it); SGLang 0.5.23 refuses the "
                             "KV transfer between them (disaggregation/common/conn.py try_ensure_parallel_info: "
                             "'Page size mismatch'): give both roles the same page_size")

    @property
    def graph_batch_sizes(self) -> list[int]:
        """Batch sizes with a captured decode/verify graph, ascending; a batch of ``bs <=
        cuda_graph_max_bs`` runs padded to the smallest of them >= bs, a larger one eagerly.

        ``cuda_graph_bs`` when given, else SGLang 0.5.23's default
        (arg_groups/cuda_graph_hook.py ``generate_decode_cuda_graph_batch_sizes``: with
        speculative decoding 1..8, 10..32 step 2, 40..64 step 4, 72..256 step 8, then step
        16; without it 1, 2, 4, 8, 12, 16..256 step 8, 272..496 step 16, then step 32; always
        ending at cuda_graph_max_bs), clamped to max_running_requests as
        model_executor/runner/base_cuda_graph_runner.py ``get_batch_sizes_to_capture`` does.
        """
        top = self.cuda_graph_max_bs
        mrr = self.max_running_requests
        # the default list is listed no further than max_running_requests, where it is cut
        # anyway: a server_info's cuda_graph_max_bs of 2**63 listed 2.9e17 sizes (MemoryError)
        end = min(top, mrr) + 1
        if self.cuda_graph_bs is not None:
            bs = [b for b in self.cuda_graph_bs if b <= top]
        elif self.speculative_algorithm.enabled:
            bs = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8), *range(272, end, 16)]
        else:
            bs = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), *range(512, end, 32)]
        bs = [b for b in bs if b <= top] + [top]
        if max(bs) > mrr:
            bs.append(mrr)
        return sorted({b for b in bs if b <= mrr})

    @property
    def prefill_graph_tokens(self) -> list[int]:
        """Extend token buckets replayed from piecewise graphs, ascending; empty when
        ``disable_prefill_cuda_graph``.

        ``cuda_graph_bs_prefill`` when given (clamped to ``cuda_graph_max_bs_prefill``),
        else SGLang 0.5.23's list (arg_groups/cuda_graph_hook.py
        ``generate_prefill_cuda_graph_batch_sizes``, runtime/prefill_graph.py) up to
        ``cuda_graph_max_bs_prefill``, whose default is ``chunked_prefill_size`` capped by
        ``max_total_num_tokens`` (arg_groups/memory_hook.py; -1, chunking off, leaves no
        bucket there either).
        """
        if self.disable_prefill_cuda_graph:
            return []
        top = self.cuda_graph_max_bs_prefill
        if top is None:
            top = min(self.chunked_prefill_size, self.max_total_num_tokens)
        if self.cuda_graph_bs_prefill is not None:
            return sorted({b for b in self.cuda_graph_bs_prefill if b <= top})
        return prefill_token_buckets(top)

    @property
    def attn_dp_size(self) -> int:
        """DP attention ranks: ``dp_size`` with ``enable_dp_attention``, else 1 (SGLang's
        ``attn_dp_size``, arg_groups/memory_hook.py ``reserve_for_graph_mb``)."""
        return self.dp_size if self.enable_dp_attention else 1

    @property
    def dp_replicas(self) -> int:
        """Data-parallel replicas: ``dp_size`` without ``enable_dp_attention`` (each a whole
        server behind SGLang's DP controller: sim/dp_replicas.py), else 1."""
        return 1 if self.enable_dp_attention else self.dp_size

    @property
    def spec_window(self) -> int:
        """Verify window (positions verified per request per cycle); 1 without spec."""
        return self.speculative_num_draft_tokens if self.speculative_algorithm.enabled else 1

    @property
    def accept_window(self) -> int:
        """Most tokens one verify can commit per request (accepted drafts + the bonus token);
        1 without spec.

        A block drafter proposes ``speculative_num_draft_tokens - 1`` drafts in a row: the
        verify window. A chain drafter proposes one draft per serial step, so at most
        ``speculative_num_steps + 1``, however wide its tree: with ``speculative_eagle_topk``
        > 1 the verify scores ``speculative_num_draft_tokens`` tree nodes, but the accepted
        path is one root-to-leaf branch of depth ``num_steps`` (SGLang 0.5.23
        speculative/eagle_utils.py: ``verify_tree_greedy_func`` fills an accept_index of
        width ``spec_steps + 1``), and no deeper than its ``num_draft_tokens - 1`` drafts (a
        tree of fewer drafts than steps). With topk 1 the two are equal (see ``_spec_window``).
        """
        if not self.speculative_algorithm.enabled:
            return 1
        if self.speculative_algorithm.is_block:
            return self.speculative_num_draft_tokens
        return min(self.speculative_num_draft_tokens, self.num_draft_forwards + 1)

    @property
    def swa_max_total_num_tokens(self) -> int:
        """Slots of the SWA pool of a hybrid sliding-window model, 0 without one: full pool x
        swa_full_tokens_ratio, page-aligned (sglang 0.5.23 model_executor/pool_configurator.py
        ``HybridSWAPoolConfigurator._solve_pool_sizes``)."""
        if self.sliding_window_size is None:
            return 0
        return swa_pool_tokens(self.max_total_num_tokens, self.page_size, self.swa_full_tokens_ratio)

    @property
    def spec_kv_reserve(self) -> int:
        """KV positions sglang 0.5.23 keeps reserved past each running request's committed
        KV under speculative decoding (the ``topup`` rule of sim/semantics.py); 0 without.

        DSpark/DFlash: 2 x speculative_num_draft_tokens (speculative/dflash_info_v2.py
        ``DFlashDraftInputV2.prepare_for_decode``). Chain drafters: 2 x
        max(num_steps x topk, num_draft_tokens), and with page_size > 1 and topk > 1
        2 x max(ceil((2 x (page - 1) + num_steps) / page) x page x topk, num_draft_tokens)
        (mem_cache/allocation_sizing.py ``get_alloc_len_per_decode``,
        ``get_alloc_reserve_per_decode``: the 2x absorbs the overlap loop's one-step lag of
        the committed length).
        """
        if not self.speculative_algorithm.enabled:
            return 0
        n = self.speculative_num_draft_tokens
        if self.speculative_algorithm.is_block:
            return 2 * n
        steps, topk, p = self.num_draft_forwards, self.speculative_eagle_topk or 1, self.page_size
        if p == 1 or topk == 1:
            return 2 * max(steps * topk, n)
        return 2 * max((2 * (p - 1) + steps) // p * p * topk, n)

    @property
    def num_draft_forwards(self) -> int:
        """Serial draft forwards per cycle: 1 for a block drafter, k for a chain drafter."""
        if not self.speculative_algorithm.enabled:
            return 0
        if self.speculative_algorithm.is_block:
            return 1
        return self.speculative_num_steps or self.speculative_num_draft_tokens - 1
