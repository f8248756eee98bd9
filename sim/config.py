"""Scenario configuration: SGLang server args, speculative decoding, acceptance, workload.

Keys follow SGLang's server arguments where the concept exists there
(python/sglang/srt/server_args.py). Everything is validated at load (pydantic, unknown keys
rejected); :func:`load_scenario` applies an arm's overrides before validating, so an arm
can change any key. Errors are :class:`sim.errors.ConfigError` naming file, key, value and
what is allowed.
"""

from __future__ import annotations

import bisect
import copy
import difflib
import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from specsched.sim.bundled import resolve_scenario_path
from specsched.sim.disagg_config import FORCED_ROLE_KEYS, ROLES, Disaggregation
from specsched.sim.errors import ConfigError, FieldError
from specsched.sim.yaml_io import read_yaml_file

# strict: YAML's true/1.0/"16" are not silently an int or a bool; no NaN/inf unless a field says so
_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


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


class SpecAlgorithm(StrEnum):
    """Speculative decoding, SGLang's ``--speculative-algorithm`` names in any case.

    ``dspark``/``dflash``: block drafter (one draft forward proposes a block, one target
    forward verifies it). Chain drafters (``speculative_num_steps`` serial draft forwards,
    the first inside the profile's verify cost, the rest priced by its ``draft_step`` grid,
    then one target verify): ``eagle`` and ``eagle3`` (EAGLE heads on the target's hidden
    states), ``nextn``/``mtp`` (the model's own multi-token-prediction layer, SGLang's NEXTN),
    ``standalone`` (a separate small draft model run autoregressively). A draft tree
    (``speculative_eagle_topk`` > 1) is priced by its width (each draft step runs over batch x
    topk tokens); its acceptance is the scenario's. ``none``: plain decode.
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


class ServerArgs(BaseModel):
    """The SGLang server arguments the scheduler model reads (names as in server_args.py)."""

    model_config = _STRICT

    max_running_requests: int = Field(256, ge=1, description="Running-slot limit (requests).")
    max_total_num_tokens: int = Field(724_000, ge=1, description="KV pool capacity, tokens.")
    chunked_prefill_size: int = Field(16384, description="Chunk budget per prefill batch, tokens; -1 disables chunking (SGLang's value).")
    max_prefill_tokens: int = Field(16384, ge=1, description="Prompt-token budget of one prefill batch.")
    page_size: int = Field(1, ge=1, description="KV page size, tokens.")
    schedule_policy: str = Field("fcfs", description="Waiting-queue order: SGLang's names (fcfs, lof, random, shortest-prefill-first, lpm, dfs-weight; sim/schedule_policy.py) or a user class 'module.path:Class' / 'path/file.py:Class' (docs/policies.md).")
    schedule_policy_params: dict[str, Any] = Field(default_factory=dict, description="Keyword parameters for the schedule-policy class's from_server.")
    enable_priority_scheduling: bool = Field(False, description="fcfs and lof order by request priority first (higher values first).")
    schedule_low_priority_values_first: bool = Field(False, description="With priority scheduling, lower values go first.")
    disable_priority_preemption: bool = Field(False, description="With priority scheduling, never preempt running requests for a waiting one.")
    priority_scheduling_preemption_threshold: int = Field(10, ge=0, description="Priority difference above which a waiting request preempts running ones.")
    prefill_max_requests: int | None = Field(None, ge=1, description="Requests one prefill batch may admit (None: no limit).")
    prefill_decode_interval: int = Field(0, ge=0, description="Decode rounds after a prefill before the next prefill is tried (0: off).")
    prefill_decode_interval_min_bs: int = Field(0, ge=0, description="Apply prefill_decode_interval only while at least this many requests run.")
    disable_radix_cache: bool = Field(False, description="Turn the radix prefix cache off (prompts that share prefixes recompute them).")
    sglang_semantics: str = Field("0.5.23", description="Which SGLang build's scheduling rules apply (sim/semantics.py): 0.5.23 or mi355x-dsv41.")
    semantics_rules: dict[str, Any] = Field(default_factory=dict, description="Single rules overriding the preset's (sim/semantics.py SemanticsRules).")
    schedule_conservativeness: float = Field(1.0, gt=0, description="Scales the initial new_token_ratio (0.7 x this).")
    enable_mixed_chunk: bool = Field(False, description="Decode requests ride in extend batches.")
    cuda_graph_max_bs: int = Field(256, ge=1, description="Largest batch replayed as a graph; larger runs eager.")
    speculative_algorithm: SpecAlgorithm = Field(SpecAlgorithm.none, strict=False, description="SGLang's names, any case (EAGLE = eagle).")
    speculative_num_draft_tokens: int = Field(1, ge=1, le=64, description="Verify window per request (gamma + 1 positions).")
    speculative_num_steps: int | None = Field(None, ge=1, description="Chain drafter: serial draft forwards (defaults to window - 1).")
    speculative_eagle_topk: int | None = Field(None, ge=1, le=64, description="Chain drafter: candidates per draft step (tree width); each draft step runs over batch x topk tokens (sim/cost_model.py). None: 1.")
    cuda_graph_bs: list[Annotated[int, Field(ge=1)]] | None = Field(None, description="Captured decode/verify graph batch sizes; a batch is padded to the smallest one >= it (sim/cost_model.py). None: SGLang's default list for cuda_graph_max_bs (graph_batch_sizes).")
    disable_prefill_cuda_graph: bool = Field(False, description="Run extends (and the drafter's prompt injection) eagerly instead of piecewise graphs at token buckets (SGLang's switch; the runtime reads it; the simulator then charges extends their real token count instead of the padded bucket, CUDA profiles only).")
    cuda_graph_max_bs_prefill: int | None = Field(None, ge=1, description="Largest extend token count replayed from piecewise graphs (SGLang's name: for prefill the 'batch size' is tokens). None: chunked_prefill_size capped by max_total_num_tokens, as SGLang 0.5.23 resolves it.")
    cuda_graph_bs_prefill: list[Annotated[int, Field(ge=1)]] | None = Field(None, description="Captured extend token buckets; an extend is padded to the smallest one >= its tokens, eager above the largest or when that more than doubles the tokens. None: SGLang 0.5.23's default list up to cuda_graph_max_bs_prefill (prefill_graph_tokens).")
    admission_delay: str = Field("none", description="Admission-delay policy: a shipped name (AdmissionDelay) or a user class 'module.path:Class' / 'path/file.py:Class' (docs/policies.md).")
    admission_delay_params: dict[str, Any] = Field(default_factory=dict, description="Keyword parameters for the admission-delay class's from_server.")
    min_free_slots: int | None = Field(None, ge=1, description="Explicit delay threshold (None: automatic formula).")
    max_delay_passes: int | None = Field(None, ge=1, description="demand_observed: delayed passes before admitting anyway (None: target running).")
    sync_mode: SyncMode = Field(SyncMode.host_block, strict=False, description="Where the overlap loop waits for the previous forward's publish event (spec only): host_block, stream_wait or cross_queue_wait.")
    prefill_slot_expansion_sync: bool = Field(True, description="DSpark prefill's repeat_interleave without output_size blocks the host until the prefill forward drains.")
    enable_overlap_schedule: bool = Field(True, description="Build step N+1 while step N runs (SGLang default).")
    sliding_window_size: int | None = Field(None, ge=1, description="Hybrid sliding-window models (e.g. DeepSeek-V4, window 128): the model's attention window, tokens (SGLang ModelConfig.sliding_window_size). Set, the KV has a separate SWA pool whose per-request use is capped by the window (docs/sglang-semantics.md). None: no SWA layers.")
    swa_full_tokens_ratio: float = Field(0.8, gt=0, le=1, description="SWA pool tokens / full pool tokens (SGLang --swa-full-tokens-ratio, in (0, 1]); the SWA pool is int(max_total_num_tokens x ratio), page-aligned. Read only with sliding_window_size.")
    swa_eviction_interval: int = Field(128, ge=1, description="A request's SWA tokens behind the window are freed once this many have slid out (SGLang SGLANG_SWA_EVICTION_INTERVAL). Read only with sliding_window_size.")
    enable_dp_attention: bool = Field(False, description="Data-parallel attention (SGLang --enable-dp-attention): dp_size ranks, each its own scheduler, waiting queue, running batch and KV pool, run their forwards in lock-step (sim/dp_attention.py, docs/dp-attention.md). max_total_num_tokens is per rank; chunked_prefill_size and max_running_requests are the server's and divided by dp_size as SGLang does.")
    dp_size: int = Field(1, ge=1, le=1024, description="Data-parallel ranks (SGLang --dp-size); > 1 needs enable_dp_attention (independent replicas are not modelled). Requests go to the ranks round-robin (data_parallel_controller.py round_robin_scheduler).")
    dp_spec_prefill_coordination: bool = Field(False, description="DP attention with speculative decoding (SGLang SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION): False (0.5.23's default), a prefill on any rank makes every rank without one run an idle batch instead of its decode; True, each rank runs its own prefill or decode in the same forward.")
    disaggregation: Disaggregation | None = Field(None, description="Prefill-decode disaggregation (SGLang --disaggregation-mode prefill / decode behind a router): the layout of prefill and decode servers, each role's server overrides (sim/disagg_config.py, docs/disaggregation.md). None: one colocated server.")
    disaggregation_mode: Literal["null", "prefill", "decode"] = Field("null", description="This server's role (SGLang --disaggregation-mode); set per role by server.disaggregation, not by hand.")
    num_reserved_decode_tokens: int = Field(512, ge=0, le=1_000_000, description="Decode server: tokens reserved per active request when preallocating KV for a new one (SGLang --num-reserved-decode-tokens).")

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

    @field_validator("sglang_semantics")
    @classmethod
    def _preset(cls, v: str) -> str:
        from specsched.sim.semantics import PRESETS

        if v not in PRESETS:
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
        if self.speculative_algorithm.enabled and self.speculative_num_draft_tokens < 2:
            raise ValueError("speculative_num_draft_tokens must be >= 2 when speculative decoding is on")
        if self.page_size > self.max_total_num_tokens:
            raise FieldError("server.page_size", self.page_size, "must be <= server.max_total_num_tokens "
                             f"({self.max_total_num_tokens}), the KV pool it pages")
        c = self.chunked_prefill_size
        if c == 0 or c < -1:
            raise FieldError("server.chunked_prefill_size", c, "must be -1 (chunking off, as in SGLang) or >= 1")
        if c != -1 and c < self.page_size:
            raise FieldError("server.chunked_prefill_size", c, f"must be >= server.page_size ({self.page_size}): "
                             "a chunk is cut at page boundaries, so a smaller one never advances")
        if self.sliding_window_size is not None and self.sliding_window_size + self.page_size >= self.swa_max_total_num_tokens:
            # model_executor/pool_configurator.py validate_swa_pool_size
            raise FieldError("server.swa_full_tokens_ratio", self.swa_full_tokens_ratio,
                             f"the SWA pool (int(max_total_num_tokens x ratio) = {self.swa_max_total_num_tokens} tokens) "
                             f"must exceed sliding_window_size + page_size = {self.sliding_window_size + self.page_size}")
        if self.dp_size > 1 and not self.enable_dp_attention:
            raise FieldError("server.dp_size", self.dp_size, "independent data-parallel replicas are not modelled: "
                             "set server.enable_dp_attention: true (lock-step DP attention) or dp_size: 1")
        if self.enable_dp_attention and c != -1 and c // self.dp_size < self.page_size:
            raise FieldError("server.chunked_prefill_size", c, f"must be >= dp_size x page_size = {self.dp_size * self.page_size} "
                             "with DP attention: each rank's chunk is chunked_prefill_size // dp_size")
        if self.disaggregation is not None:
            self._check_roles()
        steps = self.speculative_num_steps
        if steps is not None:
            if not self.speculative_algorithm.enabled or self.speculative_algorithm.is_block:
                raise FieldError("server.speculative_num_steps", steps, "only a chain drafter (eagle, eagle3, nextn, mtp, "
                                 f"standalone) has serial draft steps; remove it for {self.speculative_algorithm.value}")
            if steps > self.speculative_num_draft_tokens - 1:
                raise FieldError("server.speculative_num_steps", steps, "a chain proposes one token per step: at most "
                                 f"speculative_num_draft_tokens - 1 = {self.speculative_num_draft_tokens - 1}")
        return self

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
        data = {**self.model_dump(exclude={"disaggregation"}), **over, "disaggregation_mode": role}
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
                msg = "unknown server key"
            raise FieldError(f"server.disaggregation.{role}.server.{key}", value, msg) from None

    def _check_roles(self) -> None:
        if self.disaggregation_mode != "null":
            raise FieldError("server.disaggregation_mode", self.disaggregation_mode,
                             "leave it out: server.disaggregation sets each role's mode")
        if self.sliding_window_size is not None:
            raise FieldError("server.disaggregation", "{...}", "not modelled with a hybrid sliding-window KV "
                             "(server.sliding_window_size): the decode side's SWA-tail prealloc is not modelled")
        for role in ROLES:
            self.role_server(role)

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
        if self.cuda_graph_bs is not None:
            bs = [b for b in self.cuda_graph_bs if b <= top]
        elif self.speculative_algorithm.enabled:
            bs = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8), *range(272, top + 1, 16)]
        else:
            bs = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), *range(512, top + 1, 32)]
        bs = [b for b in bs if b <= top] + [top]
        mrr = self.max_running_requests
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
    def spec_window(self) -> int:
        """Verify window (positions verified per request per cycle); 1 without spec."""
        return self.speculative_num_draft_tokens if self.speculative_algorithm.enabled else 1

    @property
    def swa_max_total_num_tokens(self) -> int:
        """Slots of the SWA pool of a hybrid sliding-window model, 0 without one: full pool x
        swa_full_tokens_ratio, page-aligned (sglang 0.5.23 model_executor/pool_configurator.py
        ``HybridSWAPoolConfigurator._solve_pool_sizes``)."""
        if self.sliding_window_size is None:
            return 0
        p = self.page_size
        return int(self.max_total_num_tokens // p * p * self.swa_full_tokens_ratio) // p * p

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


HISTOGRAM_SUM_TOLERANCE = 1e-3
"""How far an acceptance histogram's sum may be from 1 (measured fractions are rounded)."""


class AcceptanceConfig(BaseModel):
    """Accept length distribution (tokens committed per request per verify cycle, 1..window).

    Either ``mean_accept_length`` (per-position rates p_i = p_1 x rate_decay^(i-1) with p_1
    solved so that the mean at ``window`` matches), ``per_position_rates`` (P(draft i
    accepted | drafts < i accepted)), or ``histogram`` (P(accept length = k), k = 1..len).
    With ``window`` set, a run at another verify window reuses the same per-position rates
    (cut when shorter; continued with ``rate_decay`` past the last one when longer), so a
    longer window adds ever less (sim/acceptance.py). Each request draws its own level: a
    shift of the per-position logits by ``request_spread`` x N(0, 1) (real prompts differ).
    """

    model_config = _STRICT

    mean_accept_length: float | None = Field(None, ge=1.0, description="Mean accept length (committed tokens per request per verify, bonus token included).")
    per_position_rates: list[Annotated[float, Field(ge=0.0, le=1.0)]] | None = Field(None, min_length=1, description="P(draft i accepted | drafts < i accepted), i = 1..window - 1.")
    histogram: list[Annotated[float, Field(ge=0.0)]] | None = Field(None, min_length=1, description="P(accept length = k), k = 1..len (<= window); sums to 1.")
    request_spread: float = Field(0.0, ge=0.0, le=5.0, description="Std of the per-request logit shift.")
    window: int | None = Field(None, ge=2, le=64, description="Verify window the acceptance was measured at (None: the scenario's window, and the acceptance does not carry to other windows).")
    rate_decay: float = Field(1.0, gt=0.0, le=1.0, description="p_(i+1) / p_i of the rates derived from a mean accept length and of rates continued past the last given one (1: a constant rate, i.e. a truncated geometric accept length).")

    @model_validator(mode="after")
    def _one_source(self) -> AcceptanceConfig:
        given = [x is not None for x in (self.mean_accept_length, self.per_position_rates, self.histogram)]
        if sum(given) > 1:
            raise ValueError("give only one of mean_accept_length, per_position_rates, histogram")
        if self.histogram is not None and abs(sum(self.histogram) - 1.0) > HISTOGRAM_SUM_TOLERANCE:
            raise FieldError("acceptance.histogram", self.histogram, "P(accept length = k) must sum to 1 "
                             f"(within {HISTOGRAM_SUM_TOLERANCE}); it sums to {sum(self.histogram):.6g}")
        return self


class LengthDist(BaseModel):
    """Token lengths: ``fixed`` (value), ``uniform`` (bench_serving random: uniform integer in
    [max(1, int(value x range_ratio)), value], SGLang benchmark/datasets/common.py
    compute_random_lens; range_ratio 0 draws from [1, value]), or ``file`` (a histogram CSV
    with columns length,weight)."""

    model_config = _STRICT

    kind: Literal["fixed", "uniform", "file"] = Field("fixed", description="fixed, uniform (bench_serving's 'random' dataset; 'random' is accepted as a synonym) or file.")
    value: int | None = Field(None, ge=1, description="fixed: the length; uniform: the largest length.")
    range_ratio: float = Field(1.0, ge=0.0, le=1.0, description="uniform: the smallest length is max(1, int(value x range_ratio)); 0 = from 1.")
    path: str | None = Field(None, description="file: CSV with columns length,weight (relative to the scenario file).")

    @field_validator("kind", mode="before")
    @classmethod
    def _bench_serving_name(cls, v: object) -> object:
        return "uniform" if v == "random" else v

    @model_validator(mode="after")
    def _fields(self) -> LengthDist:
        if self.kind in ("fixed", "uniform") and self.value is None:
            raise ValueError(f"kind {self.kind!r} needs 'value'")
        if self.kind == "file" and not self.path:
            raise ValueError("kind 'file' needs 'path'")
        return self


class SharedPrefixConfig(BaseModel):
    """bench_serving's generated-shared-prefix dataset (sim/prefix_workload.py): ``num_groups``
    system prompts of ``system_prompt_len`` tokens, ``prompts_per_group`` requests each (the
    system prompt + a question of ``question_len`` tokens); lengths uniform in
    [len x range_ratio, len]; shuffled unless ``ordered``."""

    model_config = _STRICT

    num_groups: int = Field(ge=1)
    prompts_per_group: int = Field(ge=1)
    system_prompt_len: int = Field(ge=1)
    question_len: int = Field(ge=1)
    range_ratio: float = Field(1.0, gt=0.0, le=1.0)
    ordered: bool = False


class MultiTurnConfig(BaseModel):
    """Multi-turn conversations that resend their history (sim/prefix_workload.py
    ``multi_turn_conversations``; bench_serving's multi-turn replay,
    ``wrap_multi_turn_request_func``): turn 0's prompt is a shared system prompt of
    ``system_prompt_len`` tokens plus ``first_prompt_len`` tokens of its own; turn k's prompt
    is turn k-1's prompt + its output + ``user_len`` new tokens (a user message or tool
    result). A conversation holds one concurrency slot from its first send to its last
    token (bench_serving's semaphore wraps the whole conversation); between a turn's last
    token and the next turn's send the client thinks for ``think_time_s`` (fixed, or
    exponential with that mean). Output lengths per turn come from ``workload.output_len``."""

    model_config = _STRICT

    num_conversations: int = Field(ge=1, description="Conversations sent in all (workload.num_requests = num_conversations x num_turns).")
    num_turns: int = Field(ge=1, description="Turns (requests) per conversation.")
    system_prompt_len: int = Field(0, ge=0, description="Tokens of a system prompt every conversation starts with (shared: one radix-tree prefix).")
    first_prompt_len: LengthDist = Field(description="Turn 0's own prompt tokens after the system prompt (one draw per conversation).")
    user_len: LengthDist = Field(description="New tokens appended to the history at each later turn (one draw per turn).")
    think_time_s: float = Field(0.0, ge=0.0, description="Client pause between a turn's last token and the next turn's send (s).")
    think_time_dist: Literal["fixed", "exponential"] = Field("fixed", description="fixed: every pause is think_time_s; exponential: pauses drawn with mean think_time_s (seeded).")
    dp_ranks: int = Field(1, ge=1, description="The simulated instance is one of this many DP-attention ranks behind SGLang's default round-robin dispatch (0.5.23 data_parallel_controller.py round_robin_scheduler, which ignores prefixes): a later turn lands on the rank that holds its history with probability 1 / dp_ranks; otherwise only the shared system prompt can hit.")


class TraceColumns(BaseModel):
    """Column (CSV) or key (JSONL) names of a trace's arrival time, prompt and output length."""

    model_config = _STRICT

    timestamp: str = Field("timestamp", description="Arrival time column.")
    input_len: str = Field("input_length", description="Prompt length column (tokens).")
    output_len: str = Field("output_length", description="Output length column (tokens).")
    hash_ids: str | None = Field(None, description="Column of prompt block ids (Mooncake's hash_ids: a JSON list per row; in a CSV a JSON list or ids separated by spaces/semicolons): requests sharing leading ids share those prompt blocks in the prefix cache. None: prompts share nothing.")


TRACE_LAYOUTS: dict[str, tuple[TraceColumns, str]] = {
    "azure": (TraceColumns(timestamp="TIMESTAMP", input_len="ContextTokens", output_len="GeneratedTokens"), "datetime"),
    "mooncake": (TraceColumns(timestamp="timestamp", input_len="input_length", output_len="output_length",
                              hash_ids="hash_ids"), "ms"),
    "burstgpt": (TraceColumns(timestamp="Timestamp", input_len="Request tokens", output_len="Response tokens"), "s"),
}
"""Public production trace layouts: the Azure LLM inference traces (CSV, TIMESTAMP as a date
and time) and Mooncake's (JSONL, timestamp in ms, hash_ids = ids of the prompt's 512-token
blocks, fed to the radix prefix cache; a row without hash_ids shares nothing) and BurstGPT's
(CSV: Timestamp in s from the trace's start, Request tokens, Response tokens; its other
columns, Model, Total tokens and Log Type, are not read; a failed request's 0 response
tokens is sent as 1)."""


class TraceConfig(BaseModel):
    """A request trace to replay (:mod:`sim.trace`): one request per row, in arrival order.

    ``layout`` picks the column names and time unit of a public trace (``azure``,
    ``mooncake``); ``columns``/``time_unit`` given explicitly win over the layout's.
    Arrival = (timestamp - first timestamp) x ``time_scale`` (bench_serving's
    ``--slowdown-factor`` semantics: 2 replays at half the rate). The file is read once,
    streamed, at most ``workload.num_requests`` rows.
    """

    model_config = _STRICT

    path: str = Field(description="CSV or JSONL file: beside the scenario, as given, or a shipped example by name.")
    format: Literal["auto", "csv", "jsonl"] = Field("auto", description="auto: by suffix (.jsonl/.json -> jsonl, else csv).")
    layout: Literal["custom", "azure", "mooncake", "burstgpt"] = Field("custom", description="azure: TIMESTAMP (date-time), ContextTokens, GeneratedTokens; mooncake: timestamp (ms), input_length, output_length, hash_ids; burstgpt: Timestamp (s), Request tokens, Response tokens; custom: columns.")
    columns: TraceColumns | None = Field(None, description="Column names (default: the layout's).")
    time_unit: Literal["s", "ms", "us", "datetime"] | None = Field(None, description="Unit of the timestamp column (default: the layout's, else s).")
    time_scale: float = Field(1.0, gt=0, description="Multiplies every arrival time (2 = half the rate).")
    block_size: int = Field(512, ge=1, description="Prompt tokens per hash_ids block (Mooncake: 512).")

    def resolved(self) -> tuple[TraceColumns, str]:
        """(columns, time unit) after applying the layout."""
        cols, unit = TRACE_LAYOUTS.get(self.layout, (TraceColumns(), "s"))
        return self.columns or cols, self.time_unit or unit


MAX_ARRIVAL_SPAN_S = 1e9
"""Longest expected arrival span (num_requests / request_rate) a scenario may ask for (s)."""


class WorkloadConfig(BaseModel):
    """How requests reach the server (bench_serving semantics).

    burst: ``num_requests`` sent at t=0 (they reach the scheduler spaced by the profile's
        tokenizer/IPC ingest time). closed_loop: ``concurrency`` in flight, each finished
        request replaced at once, ``num_requests`` in all. poisson: gaps at ``request_rate``
        req/s, exponential, or gamma with shape ``burstiness`` and mean 1/request_rate when
        burstiness is given (vLLM benchmark_serving's --burstiness; SGLang 0.5.23's
        bench_serving has none), at most ``max_concurrency`` in flight; the client timer
        starts when the concurrency slot is acquired. trace: arrival times and lengths from
        ``trace`` (:class:`TraceConfig`), at most ``num_requests`` rows, at most
        ``max_concurrency`` in flight. multi_turn: ``concurrency`` conversations in flight,
        each a closed loop of turns that resend their history (``multi_turn``,
        :class:`MultiTurnConfig`).
    """

    model_config = _STRICT

    kind: Literal["burst", "closed_loop", "poisson", "trace", "multi_turn"] = Field(description="Client behaviour: burst, closed_loop, poisson, trace or multi_turn (see above).")
    num_requests: int | None = Field(None, ge=1, description="Requests sent in all (trace: the first N rows, default all).")
    concurrency: int | None = Field(None, ge=1, description="closed_loop: requests kept in flight; multi_turn: conversations in flight.")
    request_rate: float | None = Field(None, gt=0, allow_inf_nan=True, description="Poisson arrival rate, requests/s; .inf sends every request at t=0 (bench_serving's --request-rate inf), still capped by max_concurrency.")
    burstiness: float | None = Field(None, gt=0, description="poisson: gamma shape of the gaps, mean 1/request_rate (vLLM's --burstiness; 1 = exponential).")
    max_concurrency: int | None = Field(None, ge=1, description="poisson, trace: most requests in flight (None: no cap).")
    input_len: LengthDist | None = Field(None, description="Prompt lengths (not for trace; or shared_prefix).")
    output_len: LengthDist | None = Field(None, description="Output lengths (every request generates exactly this many tokens: ignore_eos; not for trace).")
    trace: TraceConfig | None = Field(None, description="trace: the file to replay and its columns.")
    shared_prefix: SharedPrefixConfig | None = Field(None, description="Prompts that share prefixes, bench_serving's generated-shared-prefix dataset (replaces input_len).")
    multi_turn: MultiTurnConfig | None = Field(None, description="multi_turn: the conversations (replaces input_len).")
    priorities: list[int] | None = Field(None, min_length=1, description="Request priorities, one drawn uniformly per request (seeded); read with server.enable_priority_scheduling.")
    ignore_eos: bool = Field(True, description="Requests sent with ignore_eos (bench_serving's random and shared-prefix datasets do): every request generates its output length, and sglang 0.5.23 reserves its remaining output at ratio 1.0.")

    @model_validator(mode="before")
    @classmethod
    def _bench_serving_names(cls, data: Any) -> Any:
        if isinstance(data, dict) and "num_prompts" in data and "num_requests" not in data:
            data = {("num_requests" if k == "num_prompts" else k): v for k, v in data.items()}
        mt = data.get("multi_turn") if isinstance(data, dict) else None
        if isinstance(mt, dict) and data.get("num_requests") is None:
            c, t = mt.get("num_conversations"), mt.get("num_turns")
            if isinstance(c, int) and isinstance(t, int) and c >= 1 and t >= 1:
                # num_requests defaults to every turn of every conversation; a bad count is
                # left for the block's own validation to name
                data = {**data, "num_requests": c * t}
        return data

    @model_validator(mode="after")
    def _kind_fields(self) -> WorkloadConfig:
        if self.kind == "trace":
            if self.trace is None:
                raise ValueError("kind 'trace' needs a 'trace' block (path; layout or columns)")
            if self.shared_prefix is not None:
                raise ValueError("'shared_prefix' does not apply to kind 'trace'")
            return self
        mt = self.multi_turn
        if (mt is None) != (self.kind != "multi_turn"):
            raise ValueError("kind 'multi_turn' needs a 'multi_turn' block" if mt is None
                             else f"'multi_turn' is read only by kind 'multi_turn' (kind is {self.kind!r})")
        if mt is not None:
            if self.input_len is not None or self.shared_prefix is not None:
                raise ValueError("multi_turn gives the prompts: drop 'input_len' / 'shared_prefix'")
            if self.concurrency is None:
                raise ValueError("multi_turn needs 'concurrency' (conversations in flight)")
            n = mt.num_conversations * mt.num_turns
            if self.num_requests != n:
                raise ValueError(f"multi_turn makes {n} requests (num_conversations x num_turns); "
                                 f"num_requests must equal it")
            if self.output_len is None:
                raise ValueError("kind 'multi_turn' needs 'output_len' (per turn)")
            return self
        sp = self.shared_prefix
        if sp is not None:
            if self.input_len is not None:
                raise ValueError("give one of 'input_len' and 'shared_prefix', not both")
            if self.num_requests != sp.num_groups * sp.prompts_per_group:
                raise ValueError(f"shared_prefix makes {sp.num_groups * sp.prompts_per_group} requests "
                                 f"(num_groups x prompts_per_group); num_requests must equal it")
        for key in ("num_requests", "output_len") + (("input_len",) if sp is None else ()):
            if getattr(self, key) is None:
                raise ValueError(f"kind {self.kind!r} needs '{key}'")
        if self.trace is not None:
            raise ValueError(f"'trace' is read only by kind 'trace' (kind is {self.kind!r})")
        if self.kind == "closed_loop" and self.concurrency is None:
            raise ValueError("closed_loop needs 'concurrency'")
        if self.kind == "poisson" and self.request_rate is None:
            raise ValueError("poisson needs 'request_rate'")
        if self.burstiness is not None and self.kind != "poisson":
            raise ValueError("'burstiness' applies to kind 'poisson' only")
        rate = self.request_rate
        if rate is not None and rate != rate:
            raise FieldError("workload.request_rate", rate, "must be a number > 0 (or .inf)")
        if rate is not None and self.num_requests / rate > MAX_ARRIVAL_SPAN_S:
            raise FieldError("workload.request_rate", rate, f"{self.num_requests} requests would arrive over about "
                             f"{self.num_requests / rate:.3g} s; at most {MAX_ARRIVAL_SPAN_S:.0e} s is simulated")
        return self


class Scenario(BaseModel):
    """A workload plus server settings plus the profile that times it.

    ``arms`` maps an arm name to overrides (same keys, deep-merged) applied by
    :func:`load_scenario`; the resolved scenario has ``arm`` set and ``arms`` kept for reference.
    """

    model_config = _STRICT

    name: str = Field(description="Scenario name (results go to results/<name>/).")
    description: str = Field("", description="Free text.")
    source: str = Field("", description="Where the scenario's settings and reference figures come from.")
    assumptions: list[str] = Field([], description="What the scenario assumes that the source does not say.")
    profile: str = Field(description="Profile name (profiles/) or path (relative to the scenario file).")
    seed: int = Field(1, ge=0, description="Seed of lengths, arrivals and accept lengths (run --seed overrides it).")
    server: ServerArgs = Field(ServerArgs(), description="SGLang server arguments.")
    acceptance: AcceptanceConfig = Field(AcceptanceConfig(), description="Accept-length distribution.")
    workload: WorkloadConfig = Field(description="Client workload (bench_serving semantics).")
    arms: dict[str, dict[str, Any]] = Field({}, description="Arm name -> overrides of any keys above (deep-merged); every arm is validated at load.")
    arm: str = "base"
    reference: dict[str, dict[str, float]] = Field(default_factory=dict, description="Reference figures per arm, bench_serving keys.")
    path: str = ""
    # server arguments the loader filled with SGLang's hardware defaults (sim.defaults)
    _resolved_defaults: list[Any] = pydantic.PrivateAttr(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _policy_files_from_scenario_dir(cls, data: Any) -> Any:
        # a relative policy file (server.admission_delay: rules.py:MyDelay) sits next to the
        # scenario: store it relative to the working directory, as ``path`` is, so that
        # every later reader (engine, runtime, sweep workers) finds it without the scenario
        if not isinstance(data, dict) or not data.get("path") or not isinstance(data.get("server"), dict):
            return data
        for key in ("admission_delay", "schedule_policy"):
            spec = data["server"].get(key)
            if not isinstance(spec, str) or ":" not in spec:
                continue
            target, _, name = spec.rpartition(":")
            if not (target.endswith(".py") or "/" in target) or Path(target).is_absolute() or Path(target).is_file():
                continue
            near = Path(data["path"]).parent / target
            if near.is_file():
                data = {**data, "server": {**data["server"], key: f"{near}:{name}"}}
        return data

    @model_validator(mode="after")
    def _policies_load(self) -> Scenario:
        # a user policy class must import and build now, not fail mid-run
        if ":" in self.server.admission_delay or ":" in self.server.schedule_policy:
            from specsched.sim.admission import make_policy
            from specsched.sim.schedule_policy import make_queue_order

            try:
                make_policy(self.server, self.seed, self.path or None)
                make_queue_order(self.server, self.seed, self.path or None)
            except ConfigError as e:  # "key value allowed": the value written without spaces
                value = e.value if isinstance(e.value, str) else json.dumps(e.value, separators=(",", ":"), default=str)
                raise ValueError(f"{e.key} {value} {e.allowed}") from None
        return self

    @model_validator(mode="after")
    def _acceptance_fits_window(self) -> Scenario:
        m = self.acceptance.mean_accept_length
        w = self.server.spec_window
        acc, spec = self.acceptance, self.server.speculative_algorithm.enabled
        d = acc.rate_decay
        if acc.window is not None:  # measured at acc.window: cut or continued to the run's window
            w, spec = acc.window, True
            what, whose = "acceptance.window", "the verify window it was measured at"
        else:
            what, whose = "speculative_num_draft_tokens", "the verify window"
        if spec and acc.per_position_rates is not None and len(acc.per_position_rates) > w - 1:
            raise FieldError("acceptance.per_position_rates", acc.per_position_rates, "at most "
                             f"{what} - 1 = {w - 1} rates (one per draft position)")
        if spec and acc.histogram is not None and len(acc.histogram) > w:
            raise FieldError("acceptance.histogram", acc.histogram, f"at most {what} = {w} "
                             f"entries (accept lengths 1..{w})")
        if spec and m is not None and d < 1.0 and m > 1.0 + sum(d ** (i * (i + 1) / 2) for i in range(w - 1)) - 1e-6:
            raise FieldError("acceptance.mean_accept_length", m, f"out of reach at {what} = {w} with "
                             f"rate_decay {d} (even a first-position rate of 1 gives less)")
        if m is not None and spec and m > w:
            if acc.window is not None:
                raise ValueError(f"acceptance.mean_accept_length {m} exceeds {whose}, acceptance.window = {w}")
            raise ValueError(f"acceptance.mean_accept_length {m} exceeds the verify window "
                             f"speculative_num_draft_tokens = {w}")
        return self


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Return ``base`` with ``override`` merged in (nested dicts merged, other values replaced)."""
    out = copy.deepcopy(base)
    for k, v in override.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def with_value(model: BaseModel, dotted: str, value: Any) -> BaseModel:
    """A copy of a frozen config ``model`` with the field at ``dotted`` (e.g.
    ``host.launch_s``) set to ``value``, validated again.

    Raises:
        pydantic.ValidationError: the new value is not allowed.
    """
    data = model.model_dump()
    node = data
    keys = dotted.split(".")
    for k in keys[:-1]:
        node = node[k]
    node[keys[-1]] = value
    return type(model).model_validate(data)


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping strictly (:func:`sim.yaml_io.read_yaml_file`: no YAML 1.1
    coercions, no repeated keys, bounded aliases).

    Raises:
        ConfigError: the file is missing, a directory, binary, empty, not valid YAML or not a
            mapping.
    """
    data = read_yaml_file(path)
    if data is None:
        raise ConfigError(str(path), "<file>", "", "the file is empty; expected a mapping of keys (see docs/scenario-reference.md)")
    if not isinstance(data, dict):
        raise ConfigError(str(path), "<top level>", type(data).__name__, "must be a mapping of keys (see docs/scenario-reference.md)")
    return data


def validation_error(file: str, err: ValidationError, data: dict[str, Any]) -> ConfigError:
    """Turn pydantic's first error into a ConfigError with file, dotted key, value, allowed."""
    first = err.errors()[0]
    loc = tuple(first["loc"])
    key = ".".join(str(x) for x in loc) or "<top level>"
    value: Any = first.get("input", "<missing>")
    msg = first["msg"].removeprefix("Value error, ")
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, FieldError):  # a check across fields names its own key
        return ConfigError(file, cause.key, cause.value, cause.allowed)
    if first["type"] == "missing":
        value = "<missing>"
    elif isinstance(value, dict):
        value = "{...}"
        head, _, rest = msg.partition(" ")
        if not loc and "." in head:  # a cross-field check names its key first
            key, value, msg = head, rest.split(" ", 1)[0], rest.split(" ", 1)[-1]
    if first["type"] == "extra_forbidden":
        allowed = _allowed_keys(loc[:-1])
        near = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        msg = "unknown key" + (f"; did you mean {near[0]!r}?" if near else "") + (f" allowed: {', '.join(allowed)}" if allowed else "")
    return ConfigError(file, key, value, msg)


def _allowed_keys(parent: tuple[Any, ...], root: type[BaseModel] | None = None) -> list[str]:
    """Field names of the model at ``parent`` (a loc path from the scenario root)."""
    model: Any = root or Scenario
    for part in parent:
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return []
        ann = field.annotation
        cands = [ann, *getattr(ann, "__args__", ())]
        model = next((c for c in cands if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if model is None:
            return []
    return list(getattr(model, "model_fields", {}))


def load_scenario(path: str | Path, arm: str = "base", resolve_defaults: bool = True) -> Scenario:
    """Load and validate a scenario file with ``arm``'s overrides applied.

    Args:
        path: YAML file.
        arm: an arm in the file's ``arms`` (``base`` is always allowed and means no override).
        resolve_defaults: fill the server arguments the file leaves out with SGLang's
            defaults for the profile's hardware (:func:`sim.defaults.resolve_loaded`).

    Returns:
        The validated, frozen :class:`Scenario`.

    Raises:
        ConfigError: missing/unknown/out-of-range key, or an unknown arm.
    """
    path = resolve_scenario_path(path)
    raw = read_yaml(path)
    arms = raw.get("arms") or {}
    if not isinstance(arms, dict):
        raise ConfigError(str(path), "arms", arms, "must be a mapping of arm name -> overrides")
    if arm != "base" and arm not in arms:
        raise ConfigError(str(path), "--arm", arm, f"allowed: {', '.join(['base', *[a for a in arms if a != 'base']])}")
    chosen = _resolve_arm(path, raw, arm)
    for other in arms:  # a typo in an arm not chosen now fails now, not in next week's run
        if other != arm:
            _resolve_arm(path, raw, other)
    if not resolve_defaults:
        return chosen
    from specsched.sim.defaults import resolve_loaded

    return resolve_loaded(chosen)


def _resolve_arm(path: Path, raw: dict[str, Any], arm: str) -> Scenario:
    """The scenario with ``arm``'s overrides merged in, validated; errors inside an arm's
    overrides are named ``arms.<arm>.<key>``."""
    override = (raw.get("arms") or {}).get(arm) or {}
    if not isinstance(override, dict):
        raise ConfigError(str(path), f"arms.{arm}", override, "must be a mapping of overrides")
    for forbidden in ("arms", "arm", "name"):
        if forbidden in override:
            raise ConfigError(str(path), f"arms.{arm}.{forbidden}", override[forbidden], "an arm cannot override this key")
    merged = deep_merge(raw, override)
    merged["arm"] = arm
    merged["path"] = str(path)
    try:
        return Scenario.model_validate(merged)
    except ValidationError as e:
        err = validation_error(str(path), e, merged)
        if arm != "base" and _sets(override, err.key):
            raise ConfigError(err.file, f"arms.{arm}.{err.key}", err.value, err.allowed) from None
        if arm != "base":
            raise ConfigError(err.file, err.key, err.value, f"{err.allowed} (with arm {arm})") from None
        raise err from None


def _sets(override: dict[str, Any], dotted: str) -> bool:
    """Whether the arm's overrides contain the dotted key (or a parent of it)."""
    node: Any = override
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def arm_names(scenario_path: str | Path) -> list[str]:
    """Arms a scenario file defines, ``base`` first."""
    raw = read_yaml(resolve_scenario_path(scenario_path))
    names = list((raw.get("arms") or {}).keys())
    return ["base", *[a for a in names if a != "base"]]
