"""Data-parallel attention: ``dp_size`` schedulers whose forwards run in lock-step.

What SGLang 0.5.23 does with ``--enable-dp-attention`` (``--dp-size N``):

- **One scheduler per rank.** Each DP rank runs its own scheduler process with its own
  waiting queue, running batch, KV pool and prefix cache (managers/data_parallel_controller.py
  ``launch_dp_attention_schedulers``). Here: one :class:`~sim.scheduler.Scheduler` per rank,
  so every scheduling rule stays written once.
- **Per-rank budgets.** ``chunked_prefill_size`` is divided by the DP size
  (arg_groups/parallel_hook.py ``_handle_data_parallelism``, which also scales
  ``schedule_conservativeness`` by 0.3), and so is ``max_running_requests``
  (mem_cache/kv_cache_configurator.py ``resolve_max_num_reqs``: max(1, N // dp)). The KV pool
  is each rank's own: ``max_total_num_tokens`` is per rank (the value SGLang logs per rank).
  ``max_prefill_tokens`` is not divided. See :func:`rank_server_args`.
- **Dispatch.** The data-parallel controller sends each request to a rank when it arrives;
  the default with DP attention is round robin (``round_robin_scheduler``: a counter over the
  active ranks, blind to the prompt, so a multi-turn conversation's next turn lands on the
  rank holding its history 1 time in N).
- **Lock-step forwards.** Every iteration the ranks all-gather their batch's token counts
  (scheduler_components/dp_attn.py ``prepare_mlp_sync_batch_raw``); if any rank has work,
  the ranks without any run an idle batch (``get_idle_batch``), because the MoE layers
  gather/scatter every rank's tokens and each rank waits for the slowest. A forward of the
  group therefore lasts as long as its slowest rank's batch plus the cross-rank exchange
  (profile ``gpu.dp_attention_sync_s``), and all ranks' forwards start and end together.
- **Speculative decoding.** Unless SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION is set
  (``server.dp_spec_prefill_coordination``), prefill and decode are never mixed in one
  step: the gather happens right after the prefill pass (managers/scheduler.py
  ``get_next_batch_to_run``, "makes sure prefill and decode batches will not be mixed when
  spec and dp-attn is enabled"), and when any rank has a new prefill batch every rank
  without one runs an idle batch instead of its decode.

The group has the interfaces of one scheduler (:class:`DPGroup`), one cost model
(:class:`DPCost`) and one device (:class:`DPDevice`), so the loop (:mod:`sim.loop`) and the
engine run it unchanged: one group iteration is one host pass (the ranks' hosts meet at the
gather every iteration, so the pass lasts as long as the slowest rank's host work, and a
rank's host block, e.g. the DSpark slot expansion, holds every rank's next forward) and one
launch on one forward stream.

A forward's cost: with a per-rank profile (a measured rank, as the agentic one), the slowest
rank's own batch; with an analytic profile of the whole TP group (``specsched profile
--analytic --tp N``, ``dp_size`` dividing N), the group's forward: the MLP/MoE over every
rank's tokens, each rank's attention over its own requests (:meth:`DPCost._group_gpu`), the
routed experts read once for padded rows that compute one hidden state (:class:`PadRouting`: DeepSeek-V4 on ROCm zeroes them).
Not modelled: the MoE's work as a function of every rank's tokens for a per-rank profile,
load-balance methods other than round robin, the decode-to-extend conversion of prefill CUDA graphs, and the graph vote (a rank
that extends makes every rank's decode eager; with speculative decoding no decode runs
beside an extend anyway).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from specsched.sim import seed_streams
from specsched.sim.admission import make_policy
from specsched.sim.cost_model import CostModel, GpuCost, attention_context
from specsched.sim.device_tokens import DeviceTokens
from specsched.sim.grid_range import RangeNote
from specsched.sim.plan import BatchPlan, ForwardMode, StepOutput
from specsched.sim.request import Req
from specsched.sim.scheduler import Deliveries, Scheduler
from specsched.sim.scheduler_sums import GroupKV, SchedulerSums
from specsched.sim.server_args import ServerArgs

DP_CONSERVATIVENESS = 0.3
"""arg_groups/parallel_hook.py ``_handle_data_parallelism``: schedule_conservativeness x 0.3 under DP attention."""


def rank_server_args(server: ServerArgs) -> ServerArgs:
    """One rank's server arguments under DP attention (module docstring, "Per-rank budgets").

    ``dp_size`` 1 leaves every value as it is. Raises nothing: ServerArgs validation already
    refused a chunk that would fall below a page per rank.
    """
    n = server.dp_size
    if n == 1:
        return server
    c = server.chunked_prefill_size
    return server.model_copy(update={
        "chunked_prefill_size": c if c == -1 else c // n,
        "max_running_requests": max(1, server.max_running_requests // n),
        "schedule_conservativeness": server.schedule_conservativeness * DP_CONSERVATIVENESS,
    })


def tp_group_kv_ratio(profile, dp_size: int) -> float | None:
    """How many times a request's KV read on one GPU grows when DP attention splits an
    analytic profile's TP group into ``dp_size`` attention ranks: ``min(tp, kv_heads) /
    min(tp / dp, kv_heads)`` for GQA/MHA (each GPU holds more KV heads of fewer requests), 1
    for MLA (the latent is replicated on every TP rank, so each GPU reads its own requests'
    whole latent either way). None when the profile does not time a TP group that ``dp_size``
    divides: such a profile is read per rank (as the shipped agentic one, ``tp_size: 1``).

    A measured profile whose ``hardware.tp_size`` is above 1 timed the whole TP group's
    forward too (the MI355X TP4 profile): read per rank, each rank's batch ran as if it had
    the group's GPUs to itself and DP attention on 4 ranks more than doubled a burst's
    throughput. Its model's heads are not known, so the ratio is 1 when ``hardware.mla``
    says the latent is replicated and ``dp_size`` otherwise (KV heads >= TP, so a GPU reads
    the same bytes per step whichever way the requests are split)."""
    a = profile.analytic or {}
    model, tp = a.get("model") or {}, int(a.get("tp") or 0)
    if not a:
        hw = profile.hardware
        tp = hw.tp_size if hw is not None else 1
        if dp_size < 2 or tp < 2 or tp % dp_size:
            return None
        return 1.0 if hw.mla else float(dp_size)
    if dp_size < 2 or tp < dp_size or tp % dp_size:
        return None
    if model.get("kv_lora_rank"):
        return 1.0
    kvh = int(model.get("num_kv_heads") or model.get("num_heads") or tp)
    return min(tp, kvh) / min(tp // dp_size, kvh)


def dp_attention_weight_read_s(profile, dp_size: int) -> float:
    """Seconds a decode or verify forward of an analytic TP-group profile spends reading the
    attention weights each GPU holds beyond the profile's under DP attention
    (``hardware.dp_attention_weight_bytes[dp_size]``: the projections split over tp / dp GPUs,
    models/deepseek_v2.py, qwen3_moe.py ``num_heads // attn_tp_size``), at the datasheet HBM
    bandwidth x the profile's HBM efficiency (sim/analytic/roofline.py reads weights so). The
    group's step times those weights at the TP split only. 0 without the figure (measured
    profiles) or DP attention. Extends are compute-bound and left as they are."""
    hw = profile.hardware
    extra = (hw.dp_attention_weight_bytes or {}).get(dp_size) if hw is not None and dp_size > 1 else None
    a = profile.analytic or {}
    bw = (a.get("gpu") or {}).get("hbm_tbps")
    if not extra or not bw:
        return 0.0
    from specsched.sim.analytic.roofline import Efficiency

    eff = (a.get("efficiency") or {}).get("hbm", Efficiency.model_fields["hbm"].default)
    return extra / (bw * 1e12 * eff)


PAD_ROWS_ZEROED_ARCHS = frozenset({"DeepseekV4ForCausalLM"})
"""Architectures whose MoE input has every DP-attention padded row zeroed on ROCm: only the
DeepSeek-V4 models route their TP MoE gather through models/deepseek_common/moe_transport.py
(imported by deepseek_v4.py, deepseek_v4_boundary.py, deepseek_v4_platform_stage.py alone), whose
``MoeRowTransport`` calls ``_mask_dp_pad_rows`` under ``_is_hip`` ("pad rows are not refreshed
during graph replay"). Other MoE models (deepseek_v2.py's DeepseekV3ForCausalLM, qwen3_moe.py)
gather their padded rows as they are, on ROCm as on CUDA."""

CUSTOM_ALL_REDUCE_V2_MAX_BYTES = 16 * 1024 * 1024
"""The largest buffer SGLang 0.5.23's custom all-reduce V2 takes on CUDA (environ.py
``SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB``, 16 x 1024 KiB, below every tuned Hopper/Blackwell
workspace at eight GPUs: distributed/device_communicators/configs/custom_all_reduce_v2.py; V2 is
the default, ``SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2``): a decode gather of every rank's bf16
hidden states that fits it runs SUM_LEN (layers/dp_attention.py
``_decode_sum_len_fits_custom_all_reduce``)."""


NO_ATTENTION_DP_LAYOUT = {"LlamaForCausalLM": "llama.py", "Qwen2ForCausalLM": "qwen2.py",
                          "MixtralForCausalLM": "mixtral.py"}
"""Architectures whose SGLang 0.5.23 model file (srt/models/, the value) never reads the
attention TP size (no ``attn_tp_size`` / ``get_attention_tp_size``): their attention is split by
the whole TP size whatever ``enable_dp_attention`` says, where the DP-aware files
(deepseek_v2.py, qwen3.py, qwen3_moe.py, qwen2_moe.py, gpt_oss.py, ...) give each rank
``num_heads // attn_tp_size`` heads."""


def dp_attention_layout_note(scenario, profile) -> str | None:
    """One line when a scenario runs DP attention on an analytic profile whose model SGLang
    0.5.23 does not lay out for it (:data:`NO_ATTENTION_DP_LAYOUT`): the run prices the
    DP-aware layout (each rank's attention on ``tp / dp`` GPUs, :class:`DPCost`), which such a
    server does not have, so its figures are a what-if of a layout SGLang lacks. None otherwise."""
    srv = scenario.server
    if not srv.enable_dp_attention or srv.attn_dp_size <= 1:
        return None
    analytic = getattr(profile, "analytic", None) or {}
    model, tp = analytic.get("model") or {}, int(analytic.get("tp") or 0)
    for arch in model.get("architectures") or []:
        if arch in NO_ATTENTION_DP_LAYOUT:
            return (f"note: enable_dp_attention on {model.get('name', arch)} ({arch}): SGLang 0.5.23's "
                    f"models/{NO_ATTENTION_DP_LAYOUT[arch]} has no attention-DP layout (it splits attention by the "
                    f"whole TP size); this run prices the layout DP-aware models have (attention over tp / dp = "
                    f"{tp // srv.attn_dp_size} GPU{'' if tp == srv.attn_dp_size else 's'} a rank), a what-if rather "
                    "than that server")
    return None


def decode_pads_to_max_len(tokens: list[int], spec: bool, row_bytes: int, ca_bytes: int | None) -> bool:
    """Whether a decode or verify forward of the DP group pads every rank to the largest rank's
    tokens before the gather (MAX_LEN) rather than gathering each rank's own (SUM_LEN), as
    SGLang 0.5.23 chooses (layers/dp_attention.py ``DpPaddingMode.get_dp_padding_mode``, no
    extend in the batch): SUM_LEN when every rank has tokens, no speculative algorithm runs and
    the summed hidden states (``row_bytes`` a token) fit the custom all-reduce V2
    (``_decode_sum_len_fits_custom_all_reduce``; ``ca_bytes`` its size, None where V2 does not
    serve the group: ROCm, PCIe-only GPUs, a group across nodes outside one NVLink domain); else the cheaper collective:
    MAX_LEN when ``2 x sum >= max x dp``.

    ``tokens``: each rank's token count as gathered (aligned to the attention TP size)."""
    if min(tokens) > 0 and not spec and ca_bytes is not None and sum(tokens) * row_bytes <= ca_bytes:
        return False
    return 2 * sum(tokens) >= max(tokens) * len(tokens)


def moe_rows(tokens: list[int], align: int, graph_rows: int | None, *, spec: bool = False, row_bytes: int = 0,
             ca_bytes: int | None = None, zeroes_pads: bool = False) -> tuple[int, int]:
    """(rows every GPU's MoE runs, independent top-k draws among them) for one decode or verify
    forward of the DP group, from each rank's tokens (0: an idle rank).

    What SGLang 0.5.23 gathers into the MoE (TP MoE, the default ``moe_a2a_backend`` none):

    - A replayed decode graph (``graph_rows`` tokens a rank: the captured size above the largest
      rank's request count) runs every rank at that size and gathers all of it
      (model_executor/runner/decode_cuda_graph_runner.py ``load_batch``, ``_max_dp_batch_size``;
      cuda_graph_buffer_registry.py ``_global_num_tokens_post_fill``). It copies in only the
      rank's own rows: ``input_ids`` is a FOREACH_COPY slot ("the padded tail is not read"),
      so its tail holds the tokens of that rank's earlier, larger batches, while positions,
      request rows and KV slots are zeroed. The eager padding below never runs under a replay
      (model_runner.py ``_forward_raw`` returns from the replay before
      ``_prepare_eager_forward_batch``), so a graph's padded rows are these stale tokens, which
      route as tokens do: one draw each.
    - Eager (``graph_rows`` None): each rank is padded with zero rows (input id 0, position 0,
      the padding request row 0 whose KV slot is 0) to its gathered length: its token count
      aligned to the attention TP size ``tp / dp`` (``align``), and in MAX_LEN mode
      (:func:`decode_pads_to_max_len`) the largest rank's (model_executor/forward_batch_info.py
      ``prepare_mlp_sync_batch``, ``_pad_inputs_to_size``). On a rank with requests the zero
      rows are one token at one position attending the KV only zero rows write: one hidden
      state, one top-k for all of them. An idle rank runs ForwardMode.IDLE, whose attention
      returns an uninitialised tensor (layers/attention/base_attn_backend.py ``forward``), so
      its rows have no defined value: each is counted as a draw of its own (the most experts
      they can read).
    - No padded row is masked from routing: ``ForwardBatch.moe_num_token_non_padded`` is None
      when ``attn_dp_size != 1``, and the TP path (models/deepseek_v2.py ``forward_normal``)
      calls the top-k with no other bound; ``mask_dp_pad_moe_topk_ids`` runs only with expert
      parallelism and SGLANG_OPT_MASK_DP_PAD_MOE (off; token_dispatcher/standard.py).

    DeepSeek-V4 on ROCm (``zeroes_pads``, :data:`PAD_ROWS_ZEROED_ARCHS`): every padded row's MoE
    input is zeroed before the gather, graph and eager alike (models/deepseek_common/
    moe_transport.py ``MoeRowTransport``, ``_mask_dp_pad_rows``, under forward_batch_info.py
    ``_dp_tp_moe_masks_pad_rows``): all padded rows are one draw. Elsewhere only eager zero rows
    on busy ranks collapse, which happens above the captured graph sizes, where a batch reads
    nearly every expert anyway."""
    real = sum(tokens)
    a = [-(-n // align) * align for n in tokens]   # each rank's count aligned to the attention TP size
    if graph_rows is not None:
        rows = max(graph_rows, max(a)) * len(tokens)
        return rows, (real + int(rows > real)) if zeroes_pads else rows
    target = [max(a)] * len(a) if decode_pads_to_max_len(a, spec, row_bytes, ca_bytes) else a
    rows = sum(target)
    if zeroes_pads:
        return rows, real + int(rows > real)
    idle_rows = sum(t for t, n in zip(target, tokens, strict=True) if n == 0)
    busy_zero = any(t > n > 0 for t, n in zip(target, tokens, strict=True))
    return rows, real + idle_rows + int(busy_zero)


class PadRouting:
    """The routed experts' weight reads of a DP group's decode or verify forward, for an analytic
    MoE profile of the TP group: the group's step grid prices its rows as independently routed
    tokens (sim/analytic/roofline.py :func:`~sim.analytic.roofline.routed_experts_s`), while
    padded rows that compute the same hidden state pick the same experts (:func:`moe_rows`).
    :meth:`saving_s` is what the grid's read holds beyond the experts the rows pick.

    Built from the profile's ``analytic`` section (model, GPU, TP, dtype, efficiency) as
    :class:`RankAttention` is; ``cost`` is the per-rank cost model (its captured graph sizes,
    verify window and speculative algorithm)."""

    def __init__(self, analytic: dict, dp_size: int, cost: CostModel) -> None:
        from specsched.sim.analytic.gpus import GpuSpec
        from specsched.sim.analytic.models import ModelArch
        from specsched.sim.analytic.roofline import Efficiency, Parallel

        self.arch, self.gpu = ModelArch.model_validate(analytic["model"]), GpuSpec.model_validate(analytic["gpu"])
        self.eff = Efficiency.model_validate(analytic.get("efficiency") or {})
        tp = int(analytic["tp"])
        self.par, self.align = Parallel(tp=tp, dtype=analytic["dtype"]), tp // dp_size
        # the DP gather buffer holds bf16 hidden states (layers/dp_attention.py set_metadata)
        self.row_bytes = 2 * self.arch.hidden_size
        # the custom all-reduce V2: CUDA only, over NVLink (custom_all_reduce.py
        # dispatch_custom_allreduce, custom_all_reduce_v2.py can_use_custom_all_reduce_v2)
        cuda_ar = self.gpu.platform == "cuda" and not self.gpu.pcie_only and self.gpu.custom_allreduce(tp)
        self.ca_bytes = CUSTOM_ALL_REDUCE_V2_MAX_BYTES if cuda_ar else None
        self.zeroes_pads = self.gpu.platform == "hip" and bool(PAD_ROWS_ZEROED_ARCHS & set(self.arch.architectures))
        self.cost = cost

    def rows(self, plan: GroupPlan) -> tuple[int, int]:
        """:func:`moe_rows` of the group's decode or verify forward ``plan``."""
        w = self.cost.window
        loads = [p.batch_size if p is not None else 0 for p in plan.parts]
        pad = self.cost.padded_batch(max(loads))
        return moe_rows([n * w for n in loads], self.align, None if pad is None else pad * w, spec=self.cost.spec,
                        row_bytes=self.row_bytes, ca_bytes=self.ca_bytes, zeroes_pads=self.zeroes_pads)

    def saving_s(self, plan: GroupPlan, priced_rows: int) -> float:
        """Seconds of expert weight reads the group's step at ``priced_rows`` tokens holds for
        rows that pick no experts of their own (0 when every priced row is routed on its own)."""
        from specsched.sim.analytic.roofline import routed_experts_s

        routed = self.rows(plan)[1]
        if routed >= priced_rows:
            return 0.0
        args = (self.arch, self.gpu, self.par, self.eff, float(priced_rows))
        return routed_experts_s(*args) - routed_experts_s(*args, routed=float(routed))


class RankAttention:
    """An extend's attention under DP attention, for an analytic profile of the TP group:
    each rank attends its own requests' tokens with ``tp / dp`` attention-TP GPUs
    (``num_heads // attn_tp_size`` heads on each: models/deepseek_v2.py, qwen3_moe.py), while
    the group's extend grid spreads every token's attention over all ``tp`` GPUs. The two
    agree when the ranks extend equal work; a lone long prompt on one rank costs that rank
    ``dp`` times the grid's attention (a 32K-token prompt of DeepSeek-V3 on 8 x H200 at dp 8:
    5.2 s of attention on its rank's GPU, 0.65 s spread over eight).

    Built from the profile's ``analytic`` section (model, GPU, TP, dtype, efficiency), priced
    by the roofline's own attention term (sim/analytic/roofline.py ``extend``,
    ``ForwardCost.attention_s``)."""

    def __init__(self, analytic: dict, dp_size: int) -> None:
        from specsched.sim.analytic.gpus import GpuSpec
        from specsched.sim.analytic.models import ModelArch
        from specsched.sim.analytic.roofline import Efficiency, Parallel, extend

        self._extend = extend
        self.arch, self.gpu = ModelArch.model_validate(analytic["model"]), GpuSpec.model_validate(analytic["gpu"])
        self.eff = Efficiency.model_validate(analytic.get("efficiency") or {})
        tp, dtype = int(analytic["tp"]), analytic["dtype"]
        self.group_par, self.rank_par = Parallel(tp=tp, dtype=dtype), Parallel(tp=tp // dp_size, dtype=dtype)

    def _attention_s(self, par, lens: list[int], prefixes: list[int]) -> float:
        tokens = sum(lens)
        if tokens <= 0:
            return 0.0
        keys = attention_context(lens, prefixes)
        return self._extend(self.arch, self.gpu, par, self.eff, tokens, keys).attention_s

    def extra_s(self, ranks: list[tuple[list[int], list[int]]]) -> float:
        """Seconds the slowest rank's own attention adds over what the group's extend grid
        gives every GPU for all ranks' tokens (0 when the ranks are balanced or the grid's
        share is larger). ``ranks``: per rank with extend rows, (extend lengths, prefixes)."""
        lens = [e for r in ranks for e in r[0]]
        pre = [q for r in ranks for q in r[1]]
        spread = self._attention_s(self.group_par, lens, pre)
        own = max((self._attention_s(self.rank_par, e, q) for e, q in ranks), default=0.0)
        return max(0.0, own - spread)


@dataclass(frozen=True, slots=True)
class GroupPlan:
    """One lock-step forward of the group.

    Attributes:
        step: 0-based index of the group's forward.
        parts: per rank, its :class:`BatchPlan` or None (the rank runs an idle batch).
        mode: EXTEND when only extends run, MIXED when extends and decodes share the
            forward (no speculative decoding, or with prefill coordination), else the
            decode mode (DECODE / VERIFY).
        batch_size, num_extend, num_extend_tokens: summed over the ranks (requests,
            extend requests, prompt tokens).
    """

    step: int
    parts: tuple[BatchPlan | None, ...]
    mode: ForwardMode = field(init=False)
    batch_size: int = field(init=False)
    num_extend: int = field(init=False)
    num_extend_tokens: int = field(init=False)

    def __post_init__(self) -> None:
        live = [p for p in self.parts if p is not None]
        n_ext = sum(p.num_extend for p in live)
        bs = sum(p.batch_size for p in live)
        if n_ext == 0:
            mode = live[0].mode
        else:
            mode = ForwardMode.EXTEND if n_ext == bs and all(p.mode is ForwardMode.EXTEND for p in live) else ForwardMode.MIXED
        object.__setattr__(self, "mode", mode)
        object.__setattr__(self, "batch_size", bs)
        object.__setattr__(self, "num_extend", n_ext)
        object.__setattr__(self, "num_extend_tokens", sum(p.num_extend_tokens for p in live))

    @property
    def is_prefill(self) -> bool:
        return self.num_extend > 0

    @property
    def live(self) -> list[tuple[int, BatchPlan]]:
        """(rank, plan) of the ranks that run a batch of their own."""
        return [(i, p) for i, p in enumerate(self.parts) if p is not None]


@dataclass(frozen=True, slots=True)
class GroupOutput:
    """A group forward's output: each rank's :class:`StepOutput` (None for idle ranks), and
    ``committed``: every rank's extend entries first, then every rank's decode entries (the
    order :class:`GroupPlan` counts ``num_extend`` in)."""

    parts: tuple[StepOutput | None, ...]
    committed: np.ndarray

    def counts(self) -> list[int]:
        """``committed`` as a list of int (as :meth:`StepOutput.counts`)."""
        return self.committed.tolist()


class DPGroup(SchedulerSums):
    """``server.dp_size`` schedulers behind the scheduler interface the loop and engine use.

    Args:
        server: the server arguments (``enable_dp_attention``); each rank gets
            :func:`rank_server_args` of them and its own admission policy.
        seed: seeds the ranks' ``random`` schedule policy and their admission policies.
        scenario_path: the scenario file (a user policy's module is found beside it).

    Attributes:
        ranks: the rank schedulers (rank i's state is its own: queue, batch, KV, cache).
        rank_of: rid -> the rank the request was dispatched to.
    """

    def __init__(self, server: ServerArgs, seed: int = 0, scenario_path: str | None = None) -> None:
        self.server = server
        self.rank_server = rank_server_args(server)
        rs = self.rank_server
        self.ranks = [Scheduler(rs, make_policy(rs, seed, scenario_path), seed, scenario_path) for _ in range(server.dp_size)]
        self.spec = server.speculative_algorithm.enabled
        self.split_spec = self.spec and not server.dp_spec_prefill_coordination
        self.rank_of: dict[int, int] = {}
        self.reqs: dict[int, Req] = {}
        self.kv = GroupKV(self.ranks)
        self.window = server.spec_window
        self._rr = 0
        self.step = 0
        self.mode = server.disaggregation_mode
        # a prefill server's controller follows the router's random bootstrap_room
        self._rooms = seed_streams.rng("dp_rooms", seed) if self.mode == "prefill" else None

    # ------------------------------------------------------------------ inputs
    def add_request(self, req: Req) -> None:
        """Dispatch ``req`` round robin (data_parallel_controller.py ``round_robin_scheduler``);
        on a prefill server of a disaggregated deployment, to ``bootstrap_room % dp_size``
        with the router's random room (``follow_bootstrap_room_scheduler``, the PD prefill
        default of arg_groups/serving_hook.py ``handle_load_balance_method``).

        Raises:
            UnschedulableRequest: it can never fit its rank's KV pool.
        """
        if self._rooms is not None:
            rank = int(self._rooms.integers(len(self.ranks)))
        else:
            rank = self._rr
            self._rr = (rank + 1) % len(self.ranks)
        self.ranks[rank].add_request(req)
        self.rank_of[req.rid] = rank
        self.reqs[req.rid] = req

    @property
    def has_work(self) -> bool:
        return any(r.has_work for r in self.ranks)

    @property
    def num_running(self) -> int:
        return sum(r.num_running for r in self.ranks)

    @property
    def waiting(self) -> _Count:
        return _Count(sum(len(r.waiting) for r in self.ranks))

    @property
    def decode_batch_reqs(self) -> list[Req]:
        return [q for r in self.ranks for q in r.decode_batch_reqs]

    @property
    def handoff(self):
        return self.ranks[0].handoff

    @handoff.setter
    def handoff(self, fn) -> None:
        """The executor's callback for a decode rank's reserved request (sim/scheduler_disagg.py)."""
        for r in self.ranks:
            r.handoff = fn

    def take_pass_deliveries(self) -> Deliveries | None:
        """Every rank's deliveries of the last pass made while it was built
        (:meth:`sim.scheduler.Scheduler.take_pass_deliveries`), rank by rank (or None)."""
        parts = [d for d in (r.take_pass_deliveries() for r in self.ranks) if d]
        if not parts:
            return None
        return Deliveries([x for d in parts for x in d.rid_list], [x for d in parts for x in d.n_list],
                          [x for d in parts for x in d.fin_list])

    @property
    def schedulers(self) -> list[Scheduler]:
        """The ranks, which :class:`sim.scheduler_sums.SchedulerSums` sums over."""
        return self.ranks

    # ---------------------------------------------------------------- schedule
    def schedule(self) -> GroupPlan | None:
        """Every rank's pass, gathered (SGLang ``get_next_batch_to_run`` on each rank with
        ``prepare_mlp_sync_batch``): each rank tries a prefill; with speculative decoding
        and no prefill coordination, one prefill anywhere idles every rank that has none,
        otherwise those ranks decode. None when no rank has anything to run."""
        parts = [r.prefill_pass() for r in self.ranks]
        if not (self.split_spec and any(p is not None for p in parts)):
            parts = [p if p is not None else r.decode_pass() for r, p in zip(self.ranks, parts, strict=True)]
        runs = any(p is not None for p in parts)  # ranks without a part run an idle batch
        parts = [r.finish_pass(p, runs) for r, p in zip(self.ranks, parts, strict=True)]
        if all(p is None for p in parts):
            return None
        plan = GroupPlan(self.step, tuple(parts))
        self.step += 1
        return plan

    def process_result(self, plan: GroupPlan, output: GroupOutput) -> Deliveries:
        """Each rank applies its part of the forward (SGLang ``process_batch_result`` per
        rank); the deliveries of all ranks, rank by rank."""
        rid: list[int] = []
        n: list[int] = []
        fin: list[bool] = []
        for i, p in plan.live:
            d = self.ranks[i].process_result(p, output.parts[i])
            rid += d.rid_list
            n += d.n_list
            fin += d.fin_list
        return Deliveries(rid, n, fin)

    def decode_stretch(self, *args, **kwargs) -> None:
        """No collapsed stretches across a group (the engine runs it step by step)."""
        return None


class _Count:
    """``len()`` of the group's waiting requests (what the engine's pass records read)."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


class DPDevice:
    """The ranks' devices: one :class:`DeviceTokens` (counts are per request id, and ids are
    unique across ranks) stepped once per rank part."""

    def __init__(self, device: DeviceTokens) -> None:
        self.device = device

    def step(self, plan: GroupPlan) -> GroupOutput:
        """Commit every rank's part of one forward."""
        outs: list[StepOutput | None] = [None] * len(plan.parts)
        ext: list[np.ndarray] = []
        dec: list[np.ndarray] = []
        for i, p in plan.live:
            o = outs[i] = self.device.step(p)
            ext.append(o.committed[: p.num_extend])
            dec.append(o.committed[p.num_extend:])
        return GroupOutput(tuple(outs), np.concatenate(ext + dec))


class DPCost:
    """Times a lock-step forward: its slowest rank's batch (the per-rank cost model) plus
    the profile's ``gpu.dp_attention_sync_s`` for a main forward; host work of a pass is the
    slowest rank's (the ranks meet at the gather each pass).

    Args:
        cost: the per-rank cost model (built with the per-rank server arguments).
        sync_s: profile ``gpu.dp_attention_sync_s``.
    """

    def __init__(self, cost: CostModel, sync_s: float, dp_size: int = 1) -> None:
        self.cost = cost
        self.sync_s = sync_s
        self.padded_attention = cost.padded_attention
        self.profile = cost.profile
        self.dp = dp_size
        # an analytic profile times one forward of its whole TP group: under DP attention
        # the same GPUs run every rank's requests, so a forward is not one rank's batch
        self.kv_ratio = tp_group_kv_ratio(cost.profile, dp_size)
        self.attn_weight_s = dp_attention_weight_read_s(cost.profile, dp_size)
        self.group = None
        # a rank's extend attention on its own tp / dp GPUs (analytic TP-group profiles whose
        # section names the model and GPU, as `specsched profile --analytic` writes it)
        a = cost.profile.analytic or {}
        self.rank_attention = (RankAttention(a, dp_size) if self.kv_ratio is not None and a.get("model")
                               and a.get("gpu") and a.get("tp") and a.get("dtype") else None)
        # padded rows that route alike (analytic MoE profiles of the TP group)
        self.pad_routing = (PadRouting(a, dp_size, cost) if self.rank_attention is not None
                            and (a["model"].get("num_experts") or 0) > 0 else None)
        if self.kv_ratio is not None:
            # the group's graphs: each rank's captured sizes (clamped to its running limit) x dp
            srv, sizes = cost.server, cost.server.graph_batch_sizes
            self.group = CostModel(cost.profile, srv.model_copy(update={
                "cuda_graph_bs": [dp_size * b for b in sizes], "cuda_graph_max_bs": dp_size * sizes[-1],
                "max_running_requests": dp_size * srv.max_running_requests}))

    def range_notes(self) -> list[RangeNote]:
        """Both cost models' :meth:`sim.cost_model.CostModel.range_notes` (the per-rank
        one's and, for an analytic profile, the TP group's)."""
        return self.cost.range_notes() + (self.group.range_notes() if self.group is not None else [])

    def gpu(self, plan: GroupPlan, part: str = "main", cross_queue: bool = False) -> GpuCost:
        """GPU seconds of the group's forward plus the sync for the main forward (the inject
        launch is the drafter's, after the target forward): the slowest rank's own batch
        (a per-rank profile), or, for an analytic profile of the TP group, the group's
        forward (:meth:`_group_gpu`).

        The injection (``part`` ``inject``) is the prefilling ranks' only: under
        ``dp_spec_prefill_coordination`` a decoding rank's draft extend in the same forward
        runs over its verified tokens (0.5.23 speculative/dp_spec_prefill_coordination.py
        ``DPSpecPrefillCoordinationPlan.phase_counts``, ``draft_extend``: ``n x
        verify_width``), which its verify's cost already holds, so it injects no prompt."""
        cost = self._group_gpu(plan, part, cross_queue) if self.group is not None else None
        if cost is None:
            live = [p for _, p in plan.live if part == "main" or p.num_extend]
            cost = max((self.cost.gpu(p, part, cross_queue) for p in live), key=lambda c: c.total_s,
                       default=GpuCost())
        if part == "main":
            return GpuCost(cost.extend_s, cost.decode_s, cost.penalty_s + self.sync_s)
        return cost

    def _group_gpu(self, plan: GroupPlan, part: str, cross_queue: bool) -> GpuCost | None:
        """One forward of the whole TP group under DP attention (analytic profiles), or None
        where the per-rank reading stays (speculative verifies beside extends).

        Every layer but attention runs over all ranks' tokens, gathered and padded to the
        largest rank's batch (scheduler_components/dp_attn.py ``prepare_mlp_sync_batch_raw``;
        the MLP/MoE stay tensor-parallel over the group). Attention runs per rank on its own
        requests with ``tp / dp`` attention-TP ranks, so a request's KV read on one GPU grows
        by :func:`tp_group_kv_ratio` (GQA heads sharded over fewer ranks; 1 for MLA, whose
        latent every rank reads whole either way). Decode/verify: the group's step at
        ``dp x`` the largest rank batch, at the context giving the slowest rank's KV bytes,
        less the expert weights it reads for padded rows that pick the same experts as one
        another (:class:`PadRouting`, MoE models). Extends: one extend forward over every rank's rows, plus what the slowest rank's own
        attention on its ``tp / dp`` GPUs adds over the grid's share (:class:`RankAttention`:
        the same when the ranks are balanced, ``dp`` times the grid's for a lone prompt)."""
        live = [p for _, p in plan.live]
        if plan.num_extend == 0 and part == "main":
            b = max(p.batch_size for p in live)
            kv = max(sum(p.prefix_lens) for p in live) * self.kv_ratio
            bs = self.dp * b
            # + the attention weights each GPU holds split over tp / dp, read by every step
            t = self.group.step_s(bs, kv / bs) + self.attn_weight_s
            if self.pad_routing is not None:
                # - the experts the grid reads for padded rows that pick the same top-k
                t -= self.pad_routing.saving_s(plan, (self.group.padded_batch(bs) or bs) * self.cost.window)
            pen = self.group.h.cross_queue_penalty_s if cross_queue and b <= self.cost.graph_max else 0.0
            return GpuCost(0.0, t, pen)
        if plan.num_extend == plan.batch_size or (not self.cost.spec and plan.mode is ForwardMode.MIXED):
            ext = [(p.extend_lens[i], p.prefix_lens[i]) for p in live for i in range(p.num_extend)]
            dec = [(p.extend_lens[i], p.prefix_lens[i]) for p in live for i in range(p.num_extend, p.batch_size)]
            # each rank attends its own extend rows on its tp / dp GPUs (RankAttention)
            extra = (self.rank_attention.extra_s([(list(p.extend_lens[:p.num_extend]), list(p.prefix_lens[:p.num_extend]))
                                                  for p in live if p.num_extend])
                     if part == "main" and self.rank_attention is not None else 0.0)
            if dec and not self.group.mixed_split:
                # the running rows' tokens ride in the group's extend; each rank reads its own
                # rows' KV, as its decode step would: the slowest rank's, over dp x its rows
                b = max(p.batch_size - p.num_extend for p in live)
                kv = max(sum(p.prefix_lens[p.num_extend:]) for p in live) * self.kv_ratio
                return GpuCost(self.group.mixed_extend_s(tuple(e for e, _ in ext), tuple(q for _, q in ext),
                                                         tuple(q for _, q in dec), read=(self.dp * b, kv / (self.dp * b)))
                               + extra)
            rows = ext + dec
            merged = BatchPlan(plan.step, plan.mode, tuple(range(len(rows))), tuple(r[0] for r in rows),
                               tuple(r[1] for r in rows), num_extend=len(ext))
            cost = self.group.gpu(merged, part, cross_queue)
            return GpuCost(cost.extend_s + extra, cost.decode_s, cost.penalty_s)
        return None

    def after_step_ratio(self, plan: GroupPlan, previous: ForwardMode | None) -> float:
        """:meth:`sim.cost_model.CostModel.ratio_after` of the group's forward: an analytic
        profile's is one extend over every rank's tokens, a per-rank profile's the rank
        extending the most (the one the lock-step forward waits for)."""
        tokens = (plan.num_extend_tokens if self.group is not None else
                  max((p.num_extend_tokens for _, p in plan.live), default=0))
        return self.cost.ratio_after(plan.mode, tokens, previous)

    def host(self, kind: str, plan: GroupPlan) -> float:
        """Host seconds of ``kind`` for the pass: the slowest rank's."""
        return max(self.cost.host(kind, p) for _, p in plan.live)

    def issue(self, plan: GroupPlan, part: str = "main", prepared: bool = False) -> float:
        """Host seconds issuing the forward's kernels: the slowest rank's (``prepared``: as
        :meth:`sim.cost_model.CostModel.issue`, the injection prepared inside the block)."""
        return max(self.cost.issue(p, part, prepared) for _, p in plan.live)

    def launch_tail(self, plan: GroupPlan, part: str = "main") -> float:
        """Host seconds of the launch call after the forward is queued: the slowest rank's."""
        return max(self.cost.launch_tail(p, part) for _, p in plan.live)

    def idle_lead_s(self, plan: GroupPlan, part: str = "main") -> float:
        """How long an extend launched onto an idle stream trails its launch: the slowest rank's."""
        return max(self.cost.idle_lead_s(p, part) for _, p in plan.live)

    def eager_issue_s(self, n_dec: int) -> float:
        return self.cost.eager_issue_s(n_dec)
