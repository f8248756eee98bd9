"""SGLang's own defaults for the hardware a profile describes.

A scenario that leaves a server argument out gets the value SGLang would pick on the
profile's device, not a fixed one. Rules, as in sglang 0.5.23:

- ``chunked_prefill_size`` and the decode graph's ``cuda_graph_max_bs`` by the memory one GPU
  reports (arg_groups/memory_hook.py ``handle_gpu_memory_settings``): < 20 GiB 2048 / 8;
  < 35 GiB 4096 / 48 (160 at tp >= 4); < 60 GiB 4096 / 32 (160); < 160 GiB 8192 / 256 (512 at
  tp >= 4); larger 16384 / 512; unknown memory 4096 / 160. A default graph size above an
  explicit max_running_requests is cut to it.
- ``disable_prefill_cuda_graph`` where SGLang captures no prefill graphs on CUDA: a multimodal
  model not validated for them, DeepSeek-V3 on SM100 (:func:`multimodal_prefill_graphs_off`,
  :func:`trtllm_mla_prefill_graphs_off`).
- ``page_size``: 1, but 64 on SM100 GPUs (B200, GB200) where the default attention backend is
  trtllm_mha or trtllm_mla (:func:`default_page_size`).
- ``mem_fraction_static`` = (memory - reserved) / memory, reserved = 512 MiB + 1.5 MiB per
  activation token (max(chunked_prefill_size, 2048)) + tp / 8 GiB + the graph reserve (2 MiB
  per decode graph batch; prefill graphs on CUDA: 8 MiB per captured size, 1.5 GiB for MLA;
  with DP attention 3 MiB more per decode graph batch and rank, 4.5 above batch 300),
  at least 10 GiB on GPUs above 60 GiB (same function, ``reserve_for_graph_mb``). A multimodal
  model (the profile's ``hardware.vlm_mem_fraction_factor``) has no prefill graphs unless
  validated for them, its fraction scaled by that factor (``adjust_mem_fraction_for_vlm``), and
  100 MiB less KV budget (:data:`VLM_CACHE_MIB`). A
  disaggregated server reserves by its role: a decode server's activation tokens are
  max(max_running_requests (else the decode graph size) x draft tokens, 2048) and it has no
  prefill graphs; a prefill server has no decode graphs. Each role without a pool of its own
  gets the pool its reserve leaves.
- the KV pool ``max_total_num_tokens`` = (free memory before weights x mem_fraction_static -
  weights) / KV bytes per token (model_runner ``_profile_available_bytes``,
  pool_configurator.py ``calculate_pool_sizes``). A stated pool larger than the profiled
  one is cut to it (kv_cache_configurator.py ``_apply_token_constraints``) here only when no
  memory could hold it (:func:`physical_pool_tokens`); weights that leave no pool at all
  stop SGLang at start (pool_configurator.py ``MemoryPoolConfig``: "Not enough memory"),
  and :func:`sim.limits.check_fits` refuses the run.
- hybrid sliding-window models (the profile's ``hardware.swa_kv_cell_bytes``: gpt-oss and
  the other architectures of :data:`sim.analytic.models.HYBRID_SWA_ARCHS`): two pools
  (model_executor/pool_configurator.py ``HybridSWAPoolConfigurator``). One token of
  ``max_total_num_tokens`` (the full pool) costs the full layers' bytes plus
  ``swa_full_tokens_ratio`` x the windowed layers' bytes (``_recompute_cell_size``), the
  full pool is available bytes // that, page-aligned, and the SWA pool int(full x ratio),
  page-aligned (``_solve_pool_sizes``; :attr:`ServerArgs.swa_max_total_num_tokens`).
  ``sliding_window_size`` is the profile's window, so the run uses the SWA pool; a scenario
  that sets it to null runs one pool of every layer, as ``--disable-hybrid-swa-memory``.
- ``max_running_requests``: the model's own default where SGLang's model hook sets one
  (:data:`MODEL_MAX_RUNNING_REQUESTS`; it runs before the speculative hook, whose reset
  applies only to a value still unset); else 48 with speculative decoding
  (arg_groups/speculative_hook.py, every algorithm's handler); otherwise min(clamp(pool / context_len x 512, 2048, 4096),
  pool // 2) (mem_cache/kv_cache_configurator.py ``resolve_max_num_reqs``), per DP attention
  rank: that function divides a set limit by the ranks, not this one.
- the publish wait (``sync_mode``): a host-blocking synchronize on HIP, an Event.wait queued
  from the schedule stream on CUDA (managers/overlap_utils.py ``resolve_seq_lens_cpu``);
  the host blocks on CPU.
- ``prefill_slot_expansion_sync`` only where the profile's build has it (0.5.23 passes
  output_size, so off).
- overlap scheduling on (``enable_overlap_schedule``), SGLang's default.
- the min-free-slots admission delay for the DFlash family (DSpark, DFlash), automatic in
  SGLang (managers/min_free_slots_delayer.py); off for other algorithms.
- the chunk fill in raw tokens (``semantics_rules.chunk_fill: exact_tokens``) on gfx95 GPUs
  (MI350X/MI355X) under the 0.5.23 preset (managers/schedule_policy.py
  ``_use_exact_chunk_fill``: ``SGLANG_EXACT_CHUNK_FILL``, default on, and
  ``is_gfx95_supported``); :func:`gfx95_exact_chunk_fill`.

Profiles without a ``hardware`` block are matched to a shipped GPU by their ``device``
text; if none matches, the ServerArgs defaults stay.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from specsched.sim.analytic.models import (
    MM_NO_CHUNKED_PREFILL_ARCHS,
    MM_PREFILL_GRAPH_ARCHS,
    NO_BREAKABLE_PREFILL_ARCHS,
    TRTLLM_MLA_ARCHS,
)
from specsched.sim.config import (
    AdmissionDelay,
    Scenario,
    ServerArgs,
    SyncMode,
    dotted_value,
    scenario_file,
)
from specsched.sim.hardware import RESOLVED_KEYS, Hardware, served_context_len  # noqa: F401  (re-exported)
from specsched.sim.input_files import file_key, is_stream
from specsched.sim.profile import Profile, load_profile, resolve_profile_path
from specsched.sim.semantics import DEFAULT_PRESET
from specsched.sim.server_args import (
    BLOCK_DEFAULT_WINDOW,
    CHAIN_PARAM_KEYS,
    auto_speculative_basis,
    auto_speculative_params,
)

SPEC_MAX_RUNNING_REQUESTS = 48
"""SGLang resets max_running_requests to 48 for speculative decoding (speculative_hook.py)."""

MODEL_MAX_RUNNING_REQUESTS = {"DeepseekV4ForCausalLM": 256}
"""max_running_requests SGLang's model hook sets by architecture when the user left it unset
(arg_groups/deepseek_v4_hook.py ``apply_deepseek_v4_defaults``: 256). The resolution pipeline
(arg_groups/pipeline.py ``run_resolution_pipeline``) runs the model hook before
``handle_speculative_decoding``, and every speculative handler resets to 48 only
``if cfg.max_running_requests is None``: a DeepSeek-V4 server with DSpark runs 256."""


MODEL_PAGE_SIZE = {"DeepseekV4ForCausalLM": 256}
"""KV page size SGLang's model override declares by architecture on CUDA and ROCm, given or not
(arg_groups/model_overrides/deepseek_v4.py ``_deepseek_v4_overrides``: ``page_size = 256``, 128
on NPU only, declared unconditionally with the ``dsv4`` attention backend; a declaration is the
last writer over the raw input, arg_groups/model_override_base.py ``ResolvingConfig``), so a
scenario's own page size is changed to it too (:func:`page_size_snap`)."""


def memory_buckets(memory_mib: float | None, tp: int) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) for a GPU reporting ``memory_mib``."""
    if memory_mib is None:
        return 4096, 160
    gib = memory_mib / 1024
    if gib < 20:
        return 2048, 8
    if gib < 35:
        return 4096, 48 if tp < 4 else 160
    if gib < 60:
        return 4096, 32 if tp < 4 else 160
    if gib < 160:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


TRTLLM_MHA_ALWAYS_ARCHS = frozenset({"GptOssForCausalLM"})
"""Architectures whose model override picks trtllm_mha on SM100 whatever the speculative
settings (arg_groups/model_overrides/gpt_oss.py ``_gpt_oss_overrides``)."""


def is_sm100(hw: Hardware) -> bool:
    """Whether ``hw`` is what SGLang calls SM100 (utils/common.py ``is_sm100_supported``: CUDA
    compute capability major 10: B200, GB200, B300; not the RTX 50 series, major 12)."""
    if hw.platform != "cuda" or not hw.gpu:
        return False
    from specsched.sim.analytic.gpus import find_gpu

    spec = find_gpu(hw.gpu)
    return spec is not None and spec.compute_capability is not None and spec.compute_capability // 10 == 10


VLM_CACHE_MIB = 100
"""MiB a multimodal server takes from the KV budget for its embedding cache
(mem_cache/kv_cache_configurator.py ``mm_runtime_reservation_gb``: SGLANG_VLM_CACHE_SIZE_MB,
default 100, srt/environ.py; the feature-transport pool only with a GPU transport, off by default)."""


def multimodal_prefill_graphs_off(hw: Hardware) -> bool:
    """SGLang captures no prefill graphs for this multimodal model (:data:`MM_PREFILL_GRAPH_ARCHS`)."""
    return hw.vlm_mem_fraction_factor is not None and hw.architecture not in MM_PREFILL_GRAPH_ARCHS


def breakable_prefill_graphs_off(hw: Hardware) -> bool:
    """SGLang captures no prefill graphs for this model on CUDA
    (:data:`~sim.analytic.models.NO_BREAKABLE_PREFILL_ARCHS`: DeepSeek-V4; arg_groups/cuda_graph_hook.py
    ``disable_breakable_cudagraph_if_incompatible``), decided before ``handle_gpu_memory_settings``
    reserves memory for them, so none is reserved (:func:`mem_fraction_static`)."""
    return hw.architecture in NO_BREAKABLE_PREFILL_ARCHS


def trtllm_mla_prefill_graphs_off(hw: Hardware) -> bool:
    """A DeepSeek-V3 model on SM100 gets trtllm_mla (:data:`TRTLLM_MLA_ARCHS`), and SGLang then
    turns the prefill graphs off (arg_groups/cuda_graph_hook.py
    ``disable_prefill_cuda_graph_for_deepseek_trtllm_mla``). That runs after
    ``handle_gpu_memory_settings`` (arg_groups/pipeline.py ``run_resolution_pipeline``), so the
    memory reserve still counts them (:func:`mem_fraction_static`)."""
    return hw.mla and hw.architecture in TRTLLM_MLA_ARCHS and is_sm100(hw)


AITER_LONG_CONTEXT_FACTOR = 0.85
"""What SGLang 0.5.23 multiplies mem_fraction_static by when the attention backend is aiter and
the context is longer than :data:`AITER_LONG_CONTEXT`, given or computed alike, to leave room for
aiter's workspace (arg_groups/attention_hook.py ``handle_attention_backend_compatibility``;
SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION, off by default, would keep a given one)."""

AITER_LONG_CONTEXT = 8192
"""Context length (tokens) above which the aiter scaling applies (same function: ``context_len > 8192``)."""

ROCM_OWN_BACKEND_ARCHS = frozenset({"DeepseekV4ForCausalLM"})
"""Architectures whose model override picks their own attention backend on ROCm, not aiter
(arg_groups/model_overrides/deepseek_v4.py: dsv4)."""


def hip_aiter_backend(hw: Hardware) -> bool:
    """Whether SGLang's default attention backend on this ROCm device is aiter
    (arg_groups/model_override_base.py ``get_default_attn_backend``; gpt-oss's override says aiter
    too): every MHA model; an MLA model when its KV heads per rank are 16 or 128
    (``get_num_kv_heads(tp)``: max(1, heads // tp)), else triton. An MLA profile without
    ``num_kv_heads`` is taken as not aiter, and so is a profile that does not name its
    architecture (a measured profile: its model, and so its backend, is not known here)."""
    if hw.platform != "hip" or not hw.architecture or hw.architecture in ROCM_OWN_BACKEND_ARCHS:
        return False
    if not hw.mla:
        return True
    return hw.num_kv_heads is not None and max(1, hw.num_kv_heads // hw.tp_size) in (16, 128)


def aiter_long_context(server: ServerArgs, hw: Hardware) -> bool:
    """Whether SGLang scales this server's mem_fraction_static by
    :data:`AITER_LONG_CONTEXT_FACTOR`: aiter attention (:func:`hip_aiter_backend`) and a served
    context above :data:`AITER_LONG_CONTEXT` tokens."""
    ctx = served_context_len(server.context_length, hw)
    return hip_aiter_backend(hw) and ctx is not None and ctx > AITER_LONG_CONTEXT


PAGE_TREE_SPEC_BACKENDS = frozenset({"flashinfer", "fa3", "triton"})
"""The attention backends on which SGLang 0.5.23 runs a draft tree (``speculative_eagle_topk`` >
1) over pages of more than one token (arg_groups/speculative_hook.py ``_handle_eagle_family``,
``_PAGE_TREE_SPEC_BACKENDS``: the two-pass cascade draft decode)."""

BACKEND_PAGE_SIZES = {"trtllm_mla": (32, 64), "trtllm_mha": (16, 32, 64, 128)}
"""Page sizes each paged-only backend takes; SGLang 0.5.23 changes any other to 64 with a warning
(arg_groups/overrides.py ``_mla_backend_page_constraints``)."""


def page_bound_backend(server: ServerArgs, hw: Hardware, given: set[str]) -> str | None:
    """The attention backend SGLang 0.5.23 picks for this server when it is one whose pages or
    draft trees are constrained (:data:`BACKEND_PAGE_SIZES`, aiter), else None (flashinfer, fa3,
    triton, or a backend not known here).

    On SM100 (:func:`is_sm100`): a DeepSeek-V3 model gets trtllm_mla (model_overrides/deepseek_v2.py)
    and gpt-oss trtllm_mha (model_overrides/gpt_oss.py) whatever the speculative settings; any
    other MHA model gets trtllm_mha (model_override_base.py ``get_default_attn_backend``) when
    ``is_no_spec_infer_or_topk_one`` (topk unset, or topk 1 with pages of one token) and (no
    speculative algorithm, or ``speculative_eagle_topk`` given, or DFLASH). On ROCm: aiter
    (:func:`hip_aiter_backend`). ``given``: the server keys the scenario set (a topk or page size
    SGLang fills later does not count)."""
    if hw.platform == "hip":
        return "aiter" if hip_aiter_backend(hw) else None
    if not is_sm100(hw) or not hw.architecture:
        return None
    if hw.mla:
        return "trtllm_mla" if hw.architecture in TRTLLM_MLA_ARCHS else None
    if hw.architecture in TRTLLM_MHA_ALWAYS_ARCHS:
        return "trtllm_mha"
    topk = server.speculative_eagle_topk if "speculative_eagle_topk" in given else None
    page = server.page_size if "page_size" in given else None
    topk_one = topk is None or (topk == 1 and page in (None, 1))
    algo = server.speculative_algorithm
    if topk_one and (not algo.enabled or topk is not None or algo.value == "dflash"):
        return "trtllm_mha"
    return None


def model_page_size(hw: Hardware) -> int | None:
    """The page size SGLang's model override sets for this profile's model on its platform
    (:data:`MODEL_PAGE_SIZE`), None where it sets none (or the profile names no architecture)."""
    return MODEL_PAGE_SIZE.get(hw.architecture) if hw.platform in ("cuda", "hip") else None


def page_size_snap(server: ServerArgs, hw: Hardware, given: set[str]) -> tuple[int, str] | None:
    """(size, why) where SGLang 0.5.23 runs a ``page_size`` the scenario gives at another size: the
    model's own (:func:`model_page_size`: DeepSeek-V4's 256 replaces any given size,
    arg_groups/model_overrides/deepseek_v4.py ``_deepseek_v4_overrides``), or 64 where the attention
    backend (:func:`page_bound_backend`) does not take the size given (arg_groups/overrides.py
    ``_mla_backend_page_constraints``, with a warning); None otherwise."""
    if "page_size" not in given:
        return None
    own = model_page_size(hw)
    if own is not None:
        if server.page_size == own:
            return None
        return own, (f"SGLang runs {hw.architecture} at page_size {own} whatever is given: its model override "
                     f"declares it with the dsv4 attention backend (arg_groups/model_overrides/deepseek_v4.py "
                     "_deepseek_v4_overrides)")
    backend = page_bound_backend(server, hw, given)
    sizes = BACKEND_PAGE_SIZES.get(backend or "")
    if sizes is None or server.page_size in sizes:
        return None
    return 64, (f"SGLang changes page_size {server.page_size} to 64: its attention backend here is {backend}, "
                f"which takes pages of {', '.join(map(str, sizes))} (arg_groups/overrides.py _mla_backend_page_constraints)")


def draft_tree_refusal(server: ServerArgs, hw: Hardware, given: set[str]) -> str | None:
    """Why SGLang 0.5.23 refuses to start this server's draft tree, or None.

    A chain drafter with ``speculative_eagle_topk`` > 1 (given, or SGLang's automatic choice) is
    refused on trtllm_mha whatever the page size ("trtllm_mha backend only supports topk = 1")
    and, with pages of more than one token, on any backend outside
    :data:`PAGE_TREE_SPEC_BACKENDS` (trtllm_mla, aiter): arg_groups/speculative_hook.py
    ``_handle_eagle_family`` raises ValueError. ``server``: with its page size resolved."""
    algo = server.speculative_algorithm
    topk = server.speculative_eagle_topk or 1
    if not algo.enabled or algo.is_block or topk <= 1:
        return None
    backend = page_bound_backend(server, hw, given)
    if backend == "trtllm_mha":
        return ("SGLang refuses a draft tree here: the attention backend on this GPU is trtllm_mha, which only "
                "supports topk 1 for speculative decoding (arg_groups/speculative_hook.py _handle_eagle_family); "
                "allowed: speculative_eagle_topk 1")
    if backend is not None and server.page_size > 1 and backend not in PAGE_TREE_SPEC_BACKENDS:
        return (f"SGLang refuses a draft tree over pages of {server.page_size} tokens on its attention backend here, "
                f"{backend} (arg_groups/speculative_hook.py _handle_eagle_family: only "
                f"{', '.join(sorted(PAGE_TREE_SPEC_BACKENDS))} run one); allowed: speculative_eagle_topk 1"
                + ("" if backend == "trtllm_mla" else ", or server.page_size 1"))
    return None


MODEL_SPEC_ALGORITHMS = {"DeepseekV4ForCausalLM": ("eagle", "dspark")}
"""Speculative algorithms SGLang's model hook lets a model start with, by architecture
(arg_groups/deepseek_v4_hook.py ``apply_deepseek_v4_defaults``: ``assert speculative_algorithm in
("EAGLE", "DSPARK")``, and EAGLE only ``with topk == 1``). The hook runs in
``handle_model_specific_adjustments``, before the speculative hook aliases NEXTN to EAGLE or makes
its automatic choice (arg_groups/pipeline.py ``run_resolution_pipeline``), so it reads the names and
the topk as launched."""


def model_spec_refusal(server: ServerArgs, hw: Hardware, given: set[str]) -> tuple[str, Any, str] | None:
    """(key, value, why) where SGLang 0.5.23 refuses to start this model with this speculative
    setting (:data:`MODEL_SPEC_ALGORITHMS`), else None. ``given``: the keys the scenario set (a
    topk SGLang would choose later is not there yet when the hook asserts)."""
    allowed = MODEL_SPEC_ALGORITHMS.get(hw.architecture)
    algo = server.speculative_algorithm
    if allowed is None or not algo.enabled:
        return None
    if algo.value not in allowed:
        return ("speculative_algorithm", algo.value,
                f"SGLang refuses {hw.architecture} with it at start (arg_groups/deepseek_v4_hook.py "
                f"apply_deepseek_v4_defaults asserts the launch name is one of {', '.join(a.upper() for a in allowed)}; "
                "NEXTN/MTP is launched as EAGLE there); allowed: " + ", ".join(allowed))
    if algo.value == "eagle" and not ("speculative_eagle_topk" in given and server.speculative_eagle_topk == 1):
        topk = server.speculative_eagle_topk if "speculative_eagle_topk" in given else None
        return ("speculative_eagle_topk", topk,
                f"SGLang refuses EAGLE on {hw.architecture} unless the launch gives --speculative-eagle-topk 1 "
                "(arg_groups/deepseek_v4_hook.py apply_deepseek_v4_defaults asserts it before the automatic choice); "
                "allowed: speculative_eagle_topk: 1 with speculative_num_steps")
    return None


def _each_sglang_server(server: ServerArgs, given: set[str]) -> list[tuple[str, ServerArgs, set[str]]]:
    """(scenario key prefix, server args, keys the scenario gives) of each SGLang server the
    scenario starts: the server, or, disaggregated, also each role's own (the server section's
    keys and the role's)."""
    servers = [("server", server, given)]
    if server.disaggregation is not None:
        for role in ("prefill", "decode"):
            own = set(getattr(server.disaggregation, role).server)
            servers.append((f"server.disaggregation.{role}.server", server.role_server(role), given | own))
    return servers


def _refuse_model_spec(scenario: Scenario, server: ServerArgs, hw: Hardware, given: set[str]) -> None:
    """Raise where :func:`model_spec_refusal` refuses the server or a disaggregated role's (each
    role its own SGLang server, given the section's keys and its own).

    Raises:
        ConfigError: naming the key under the server or the role."""
    from specsched.sim.errors import ConfigError

    for where, srv, keys in _each_sglang_server(server, given):
        if (why := model_spec_refusal(srv, hw, keys)) is not None:
            raise ConfigError(scenario_file(scenario, scenario.name), f"{where}.{why[0]}", why[1], why[2])


def _refuse_draft_trees(scenario: Scenario, server: ServerArgs, hw: Hardware, given: set[str]) -> None:
    """Raise where :func:`draft_tree_refusal` refuses the server or a disaggregated role's
    (each role is its own SGLang server; its given keys are the server section's and its own).

    Raises:
        ConfigError: naming ``speculative_eagle_topk`` under the server or the role."""
    from specsched.sim.errors import ConfigError

    for where, srv, keys in _each_sglang_server(server, given):
        if (why := draft_tree_refusal(srv, hw, keys)) is not None:
            raise ConfigError(scenario_file(scenario, scenario.name), f"{where}.speculative_eagle_topk",
                              srv.speculative_eagle_topk, why)


def default_page_size(server: ServerArgs, hw: Hardware, given: set[str]) -> int:
    """SGLang 0.5.23's KV page size when the scenario gives none: the model's own where its model
    override sets one (:func:`model_page_size`: 256 for DeepSeek-V4), else 1
    (arg_groups/overrides.py ``_page_size_default``) but where the attention backend SGLang
    picks needs pages (:func:`page_bound_backend`, the one place that decides the backend:
    trtllm_mla for a DeepSeek-V3 model on SM100, trtllm_mha for gpt-oss there and for other
    MHA models under ``is_no_spec_infer_or_topk_one``; with speculation and topk unset at that
    point, flashinfer, pages of 1), which take 64 when the page size is not one they support
    (arg_groups/overrides.py ``_mla_backend_page_constraints``). A profile that does not name
    its architecture (a measured one) keeps 1: its backend is not known here, and a given page
    size is not changed either (:func:`page_size_snap`). Not modelled: a model with unequal
    K/V head dims (fa4)."""
    own = model_page_size(hw)
    if own is not None:
        return own
    backend = page_bound_backend(server, hw, given - {"page_size"})
    return 64 if backend in BACKEND_PAGE_SIZES else 1


MLA_PREFILL_GRAPH_MAX_TOKENS = 8192
"""Largest prefill graph bucket SGLang 0.5.23 captures by default for an MLA model
(arg_groups/memory_hook.py ``handle_gpu_memory_settings``: ``prefill_cuda_graph_config.max_bs =
min(8192, cfg.chunked_prefill_size)`` when ``use_mla_backend``; the chunk itself otherwise)."""


def prefill_graph_sizes(max_tokens: int) -> int:
    """How many prefill graph sizes SGLang captures up to ``max_tokens`` tokens
    (cuda_graph_hook.py ``generate_prefill_cuda_graph_batch_sizes``)."""
    # counted per range, not listed: a scenario's chunk of 1e23 tokens listed 2e20 sizes (a
    # MemoryError, or an OverflowError past 2**63, where it is to be refused in one line)
    tops = ((lo, max_tokens if hi is None else min(hi, max_tokens), step) for lo, hi, step in PREFILL_GRAPH_RANGES)
    return sum((top - lo) // step + 1 for lo, top, step in tops if top >= lo)


PREFILL_GRAPH_RANGES = ((4, 32, 4), (48, 256, 16), (288, 512, 32), (576, 1024, 64), (1280, 4096, 256),
                        (4608, None, 512))
"""(first, last, step) of the prefill graph sizes (cuda_graph_hook.py
``generate_prefill_cuda_graph_batch_sizes``; the last range open-ended)."""


def decode_graph_mib_per_bs(graph_max_bs: int, attn_dp_size: int = 1) -> float:
    """MiB SGLang reserves per decode graph batch size (arg_groups/memory_hook.py
    ``reserve_for_graph_mb``): 2, plus with DP attention 3 per rank (4.5 above batch 300)."""
    return 2 + (attn_dp_size * (4.5 if graph_max_bs > 300 else 3) if attn_dp_size > 1 else 0)


def activation_tokens(chunked_prefill_size: int, max_prefill_tokens: int, role: str = "null",
                      decode_tokens: int = 0) -> int:
    """Tokens SGLang reserves activation memory for, 1.5 MiB each (arg_groups/memory_hook.py
    ``handle_gpu_memory_settings``, by serving mode): a decode server's running requests x
    draft tokens (``decode_tokens``), else the chunk (``max_prefill_tokens`` when chunking is
    off); at least 2048."""
    if role == "decode":
        return max(decode_tokens, 2048)
    return max(chunked_prefill_size if chunked_prefill_size > 0 else max_prefill_tokens, 2048)


def mem_fraction_static(hw: Hardware, chunked_prefill_size: int, max_prefill_tokens: int, graph_max_bs: int,
                        role: str = "null", decode_tokens: int = 0, attn_dp_size: int = 1, *,
                        decode_graphs: bool = True, prefill_graphs: bool = True,
                        prefill_graph_count: int | None = None) -> float:
    """SGLang's mem_fraction_static for this device and these settings (3 decimals).

    ``role``: the server's ``disaggregation_mode`` (``null``, ``prefill`` or ``decode``);
    ``decode_tokens``: a decode server's running requests x draft tokens; ``attn_dp_size``:
    DP attention ranks (1 without). arg_groups/memory_hook.py ``handle_gpu_memory_settings``
    (the activation tokens by serving mode) and ``reserve_for_graph_mb`` (decode graphs but on a
    prefill server, DP attention's padding, prefill graphs but on a decode server).
    ``decode_graphs`` / ``prefill_graphs``: False where the server turns that phase's graphs off
    (``--disable-decode-cuda-graph``, ``--disable-prefill-cuda-graph``): ``reserve_for_graph_mb``
    reserves only for a phase whose backend is not DISABLED. ``prefill_graph_count``: the prefill
    graph sizes the server captures where it states them (``cuda_graph_bs_prefill``,
    ``cuda_graph_max_bs_prefill``); None: SGLang's list up to ``chunked_prefill_size``."""
    if hw.memory_mib is None:
        return 0.95
    act = activation_tokens(chunked_prefill_size, max_prefill_tokens, role, decode_tokens)
    reserved = 512 + act * 1.5 + hw.tp_size / 8 * 1024
    if role != "prefill":
        per_bs = decode_graph_mib_per_bs(graph_max_bs, attn_dp_size)
        # DP attention's padding is reserved whether or not decode graphs are captured
        reserved += graph_max_bs * (per_bs if decode_graphs else per_bs - 2)
    # prefill graphs (breakable) are on by default on CUDA only; a DeepSeek-V3 server on SM100 turns
    # them off (cuda_graph_hook.py disable_prefill_cuda_graph_for_deepseek_trtllm_mla) only after
    # handle_gpu_memory_settings has reserved for them (arg_groups/pipeline.py run_resolution_pipeline),
    # a multimodal model not validated for them and DeepSeek-V4 before it (handle_cuda_graph_config)
    # The captured sizes run up to chunked_prefill_size itself, not the activation tokens
    # (``prefill_cuda_graph_config.max_bs = cfg.chunked_prefill_size``): none with chunking off
    # (-1), fewer below 2048. Not modelled: the cap by a given --max-total-tokens (the pool is then
    # given, and this fraction not read for it) and the 4096 cap for "llama-2" model paths.
    if (hw.platform == "cuda" and role != "decode" and prefill_graphs
            and not multimodal_prefill_graphs_off(hw) and not breakable_prefill_graphs_off(hw)):
        count = prefill_graph_sizes(chunked_prefill_size) if prefill_graph_count is None else prefill_graph_count
        reserved += 1536 if hw.mla else count * 8
    if hw.memory_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    mfs = round((hw.memory_mib - reserved) / hw.memory_mib, 3)
    if hw.vlm_mem_fraction_factor is not None and role != "decode":
        # a multimodal server (not a disaggregated decode one) scales it for its vision encoder,
        # unrounded (memory_hook.py adjust_mem_fraction_for_vlm)
        mfs *= hw.vlm_mem_fraction_factor
    return mfs


def stated_prefill_graph_count(server: ServerArgs) -> int | None:
    """How many prefill graph sizes SGLang reserves memory for where the server states them: the
    length of a given ``cuda_graph_bs_prefill`` (arg_groups/memory_hook.py
    ``handle_gpu_memory_settings`` keeps a given list as it is), else SGLang's list up to a given
    ``cuda_graph_max_bs_prefill``; None when neither is stated (the list up to the chunk)."""
    if server.cuda_graph_bs_prefill is not None:
        return len(set(server.cuda_graph_bs_prefill))
    if server.cuda_graph_max_bs_prefill is not None:
        return prefill_graph_sizes(server.cuda_graph_max_bs_prefill)
    return None


def mem_fraction_static_of(server: ServerArgs, hw: Hardware, *, chunked_prefill_size: int | None = None,
                           cuda_graph_max_bs: int | None = None, role: str = "null", decode_tokens: int = 0,
                           given: set[str] | frozenset[str] | None = None) -> float:
    """The mem_fraction_static ``server`` runs at on ``hw``: ``server.mem_fraction_static`` if
    the scenario gives it (SGLang takes it as is), else SGLang's own (:func:`mem_fraction_static`).

    SGLang 0.5.23: server_args.py ``ServerArgs.resolve_once`` runs the resolution pipeline,
    whose arg_groups/memory_hook.py ``handle_gpu_memory_settings`` computes the fraction only
    ``if cfg.mem_fraction_static is None``. Either is then scaled by 0.85 where the default
    attention backend is aiter and the context is above 8192 (:data:`AITER_LONG_CONTEXT_FACTOR`,
    :func:`hip_aiter_backend`). ``chunked_prefill_size``/``cuda_graph_max_bs``:
    values the server is about to get (None: the server's own); ``role``/``decode_tokens``: as
    :func:`mem_fraction_static`; DP attention's ranks are the server's. The server's own graph
    settings count as ``reserve_for_graph_mb`` counts them: no decode-graph reserve with
    ``disable_decode_cuda_graph``, none for prefill graphs with ``disable_prefill_cuda_graph``
    where the scenario states it (``given``, the keys it set; None: every True flag is the
    scenario's, as on a server not yet resolved), and the stated prefill sizes
    (:func:`stated_prefill_graph_count`). A flag :func:`resolve_server` fills for a DeepSeek-V3
    server on SM100 is set after SGLang's reserve, which keeps its prefill graphs."""
    if server.mem_fraction_static is not None:
        mfs = server.mem_fraction_static
    else:
        prefill_off = server.disable_prefill_cuda_graph and (given is None or "disable_prefill_cuda_graph" in given)
        mfs = mem_fraction_static(
            hw,
            server.chunked_prefill_size if chunked_prefill_size is None else chunked_prefill_size,
            server.max_prefill_tokens,
            server.cuda_graph_max_bs if cuda_graph_max_bs is None else cuda_graph_max_bs,
            role=role, decode_tokens=decode_tokens,
            attn_dp_size=server.attn_dp_size,
            decode_graphs=not server.disable_decode_cuda_graph,
            prefill_graphs=not prefill_off,
            prefill_graph_count=stated_prefill_graph_count(server))
    if aiter_long_context(server, hw):
        mfs *= AITER_LONG_CONTEXT_FACTOR   # given or computed (attention_hook.py), see the constant
    return mfs


SWA_FULL_TOKENS_RATIO: float = ServerArgs.model_fields["swa_full_tokens_ratio"].default
"""SGLang's default --swa-full-tokens-ratio (arg_groups/fields/schedule.py, ``fallback=0.8``): the
server field's own default, so the pool sizes and the server agree."""


def kv_token_bytes(hw: Hardware, swa_ratio: float | None = SWA_FULL_TOKENS_RATIO,
                   speculative: bool = False) -> float | None:
    """Bytes one token of ``max_total_num_tokens`` costs on one rank.

    One pool: ``kv_cell_bytes``. A hybrid SWA profile (``swa_kv_cell_bytes``) with the SWA
    pool on: full layers' bytes + ``swa_ratio`` x windowed layers' bytes (sglang 0.5.23
    model_executor/pool_configurator.py ``HybridSWAPoolConfigurator._recompute_cell_size``);
    ``swa_ratio`` None (the pool off): every layer's bytes in one pool
    (``DefaultPoolConfigurator``). ``speculative``: the server runs a drafter, whose KV
    (``draft_kv_cell_bytes``) SGLang adds to every token's cost (``DefaultPoolConfigurator.__init__``
    EAGLE/STANDALONE and DFLASH branches, ``HybridSWAPoolConfigurator._recompute_cell_size``)."""
    if hw.kv_cell_bytes is None:
        return None
    draft = (hw.draft_kv_cell_bytes or 0.0) if speculative else 0.0
    if hw.swa_kv_cell_bytes is None:
        return hw.kv_cell_bytes + draft
    if swa_ratio is None:
        return hw.kv_cell_bytes + hw.swa_kv_cell_bytes + draft
    return hw.kv_cell_bytes + swa_ratio * hw.swa_kv_cell_bytes + draft


def attention_tp_kv_scale(hw: Hardware, attn_dp_size: int) -> float:
    """How many times one token's KV bytes on a GPU grow when DP attention splits the
    profile's TP group into ``attn_dp_size`` ranks: SGLang sizes the KV cell with the KV heads
    per GPU at the attention TP size, ``tp_size // attn_dp_size``
    (model_executor/pool_configurator.py ``DefaultPoolConfigurator``,
    ``HybridSWAPoolConfigurator._recompute_cell_size``: ``get_num_kv_heads(attn_tp_size)``;
    configs/model_config.py ``get_num_kv_heads``: ``max(1, kv_heads // tp)``), while the
    profile's ``kv_cell_bytes`` is one GPU's at the whole TP size. GQA/MHA: ``max(1, kv_heads //
    (tp / dp)) / max(1, kv_heads // tp)`` (Llama-3.1-70B TP8 at dp 4: 4 heads per GPU instead
    of 1, four times the bytes); MLA: 1 (the latent is whole on every rank either way). A
    profile whose heads are unknown is read as :func:`sim.dp_attention.tp_group_kv_ratio`
    reads it (KV heads >= TP: ``attn_dp_size``); one that times a single rank (``tp_size`` 1,
    or a size ``attn_dp_size`` does not divide) already holds one rank's cell: 1."""
    tp = hw.tp_size
    if attn_dp_size < 2 or tp < 2 or tp % attn_dp_size or hw.mla:
        return 1.0
    if hw.num_kv_heads is None:
        return float(attn_dp_size)
    return max(1, hw.num_kv_heads // (tp // attn_dp_size)) / max(1, hw.num_kv_heads // tp)


def attention_tp_hardware(hw: Hardware, attn_dp_size: int) -> Hardware:
    """``hw`` as one GPU of a DP-attention rank holds it; ``hw`` itself without DP attention:

    - the per-token KV cells (target, drafter, SWA) of :func:`attention_tp_kv_scale` (the
      drafter's cell takes the target's ratio: its layers have the target's KV heads; a
      separate draft model with other heads is approximated so);
    - the weights plus ``hardware.dp_attention_weight_bytes[attn_dp_size]``, the attention
      projections split over tp / dp GPUs instead of tp, which the KV pool loses
      (mem_cache/kv_cache_configurator.py sizes the pool from the memory left after loading)."""
    k = attention_tp_kv_scale(hw, attn_dp_size)
    extra_w = (hw.dp_attention_weight_bytes or {}).get(attn_dp_size, 0.0) if attn_dp_size > 1 else 0.0
    update: dict[str, Any] = {}
    if k != 1.0 and hw.kv_cell_bytes is not None:
        update.update({
            "kv_cell_bytes": hw.kv_cell_bytes * k,
            "draft_kv_cell_bytes": None if hw.draft_kv_cell_bytes is None else hw.draft_kv_cell_bytes * k,
            "swa_kv_cell_bytes": None if hw.swa_kv_cell_bytes is None else hw.swa_kv_cell_bytes * k,
        })
    if extra_w and hw.weight_bytes is not None:
        update["weight_bytes"] = hw.weight_bytes + extra_w
    return hw.model_copy(update=update) if update else hw


def loaded_weight_bytes(hw: Hardware, speculative: bool = False) -> float | None:
    """Weights one rank has loaded when SGLang sizes the KV pool: ``weight_bytes`` less the
    drafter's (``draft_weight_bytes``) when the server does not speculate (no draft worker is
    built; mem_cache/kv_cache_configurator.py ``_profile_available_bytes`` charges what is
    resident). None when the profile lacks the weights."""
    if hw.weight_bytes is None:
        return None
    if speculative or not hw.draft_weight_bytes:
        return hw.weight_bytes
    return max(0.0, hw.weight_bytes - hw.draft_weight_bytes)


def mm_reserved_bytes(hw: Hardware) -> float:
    """Bytes a multimodal server takes from the KV budget (:data:`VLM_CACHE_MIB`); 0 for a text model."""
    return VLM_CACHE_MIB * 2**20 if hw.vlm_mem_fraction_factor is not None else 0.0


def kv_pool_tokens(hw: Hardware, mfs: float, page_size: int = 1,
                   swa_ratio: float | None = SWA_FULL_TOKENS_RATIO, speculative: bool = False) -> int | None:
    """KV pool tokens per rank (the full pool of a hybrid SWA model, :func:`kv_token_bytes`;
    ``speculative``: the drafter's KV counted too), or None when the profile lacks the
    weights or KV bytes."""
    cell = kv_token_bytes(hw, swa_ratio, speculative)
    if hw.memory_mib is None or hw.weight_bytes is None or cell is None:
        return None
    pre_load = (hw.memory_mib - hw.context_mib) * 2**20
    rest = pre_load - pre_load * (1 - mfs) - loaded_weight_bytes(hw, speculative) - mm_reserved_bytes(hw)
    if rest <= 0:
        return 0
    return int(rest // cell) // page_size * page_size


def physical_pool_tokens(hw: Hardware, page_size: int = 1,
                         swa_ratio: float | None = SWA_FULL_TOKENS_RATIO, speculative: bool = False) -> int | None:
    """KV tokens per rank that could exist at all: every byte the driver reports, less the
    context taken before loading and the weights (no activation or graph reserve, a
    mem_fraction_static of 1). None when the profile lacks the weights or KV bytes; 0 when
    the weights alone do not fit."""
    cell = kv_token_bytes(hw, swa_ratio, speculative)
    if hw.memory_mib is None or hw.weight_bytes is None or cell is None:
        return None
    rest = (hw.memory_mib - hw.context_mib) * 2**20 - loaded_weight_bytes(hw, speculative)
    return max(0, int(rest // cell) // page_size * page_size)


def auto_max_running_requests(pool: int, context_len: int | None) -> int:
    """SGLang's automatic max_running_requests from the pool (no speculative decoding)."""
    est = int(pool / (context_len or 4096) * 512)
    return max(1, min(max(min(est, 4096), 2048), pool // 2))


def platform_sync_mode(platform: str) -> SyncMode:
    """The publish wait SGLang uses on ``platform``."""
    return {"hip": SyncMode.host_block, "cuda": SyncMode.cross_queue_wait}.get(platform, SyncMode.host_block)


def hardware_of(profile: Profile) -> Hardware | None:
    """The profile's hardware block, or one inferred from its device text (GPU name, TP)."""
    if profile.hardware is not None:
        return profile.hardware
    from specsched.sim.analytic.gpus import find_gpu_in_text

    gpu = find_gpu_in_text(profile.device)
    if gpu is None:
        return None
    return Hardware(platform=gpu.platform, gpu=gpu.name, memory_mib=gpu.memory_mib)


def _scenario_hardware(name: str, relative_to: str | None) -> Hardware | None:
    """The hardware of the profile a scenario names, parsed once per file version (sweeps
    load the same scenario many times)."""
    path = resolve_profile_path(name, relative_to)
    if is_stream(path):   # a piped profile: resolving /dev/fd/N names the pipe, not a file; its inode tells pipes apart
        return _hardware_at(str(path), hash(file_key(path)), relative_to)
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        stamp = 0
    return _hardware_at(str(path.resolve()) if stamp else name, stamp, relative_to)


def scenario_hardware(scenario: Scenario) -> Hardware | None:
    """The hardware of the profile ``scenario`` names (None: unknown, or no profile file)."""
    from specsched.sim.errors import ConfigError

    try:
        return _scenario_hardware(scenario.profile, scenario.path or None)
    except ConfigError:
        return None


@lru_cache(maxsize=64)
def _hardware_at(path: str, stamp: int, relative_to: str | None) -> Hardware | None:
    return hardware_of(load_profile(path, relative_to=relative_to))


@dataclass(frozen=True)
class Resolved:
    """One server argument the scenario left out, the value it got and why."""

    key: str
    value: Any
    why: str


def spec_cap_note(scenario: Any, timeseries: Any) -> str | None:
    """One line when the run's ``max_running_requests`` is SGLang's reset to
    :data:`SPEC_MAX_RUNNING_REQUESTS` for speculative decoding (filled in, not the scenario's)
    and requests queued behind it: a user comparing speculation on and off at load sees TTFT
    rise and reads "speculation hurts", when the cap the reset sets is what queues them
    (a new user's 70B run at 16 req/s: 12.3 s median TTFT with EAGLE, 1.7 s without, at 48
    against 2048 running). The waiting count quoted is the largest while the cap was
    reached, not the prefill ramp's. ``timeseries``: the run's table (``running``, ``waiting``), a
    DataFrame or :class:`sim.tables.Columns` (``specsched run`` does not import pandas)."""
    from specsched.sim.tables import column

    filled = next((r for r in scenario._resolved_defaults if r.key == "max_running_requests"), None)
    if filled is None or filled.value != SPEC_MAX_RUNNING_REQUESTS or not scenario.server.speculative_algorithm.enabled:
        return None
    running, waiting_at = column(timeseries, "running"), column(timeseries, "waiting")
    at_cap = running >= SPEC_MAX_RUNNING_REQUESTS
    if not at_cap.any():
        return None
    # the queue while the cap was reached: the prefill ramp's (many waiting, few running yet)
    # is not the cap's (64 clients: 47 waiting at 17 running, at most 16 at 48)
    waiting = int(waiting_at[at_cap].max())
    if waiting <= 0:
        return None
    return (f"note: max_running_requests {SPEC_MAX_RUNNING_REQUESTS} is SGLang's reset for speculative decoding "
            f"(the scenario leaves it unset): the run held {SPEC_MAX_RUNNING_REQUESTS} running with up to {waiting} "
            "waiting, so this cap sets its queueing; a run without speculation gets a larger one. Set "
            "server.max_running_requests to compare both at one cap")


def kv_pool_note(scenario: Any, summary: dict[str, Any]) -> str | None:
    """One line when the KV pool, not ``max_running_requests``, capped the running batch
    and built the queue: the run's admission passes stopped for lack of KV with requests
    left waiting and fewer than max_running_requests running (the summary's
    ``kv_refused_passes``, counted by the scheduler: :class:`sim.prefill_adder.KVRefusals`).
    SGLang 0.5.23's ``PrefillAdder`` (managers/schedule_policy.py) admits against a budget of
    the available plus evictable KV tokens less the running requests' reserved output;
    ``add_one_req`` answers ``AddReqResult.NO_TOKEN`` when a request's extend, clipped
    output and a page do not fit it (``OTHER`` is the prompt or chunk budget or a cap), and
    the batch stays below the cap. The pool size is among the filled-in defaults, but nothing
    else says it is what bounds the batch (a user's gpt-oss-120b on one H100, 8K-token
    prompts at 6 req/s: ~5 running against 256, TTFT climbing to ~41 s). None when KV never
    kept a request out below the cap."""
    passes = summary.get("kv_refused_passes")
    if not passes:
        return None
    from specsched.sim.prefill_adder import CLIP_MAX_NEW_TOKENS

    srv = scenario.server
    filled = any(r.key == "max_total_num_tokens" for r in scenario._resolved_defaults)
    where = "max_total_num_tokens, SGLang's default from the GPU's memory" if filled else "max_total_num_tokens"
    if srv.swa_max_total_num_tokens:
        where += f"; SWA pool {srv.swa_max_total_num_tokens:,}"
    larger = "server.mem_fraction_static or server.max_total_num_tokens" if filled else "server.max_total_num_tokens"
    # the counts are one scheduler's: a DP-attention rank's (its own pool, max_running_requests /
    # dp_size) or a DP replica's (sim/scheduler_sums.py takes the largest one's peaks)
    cap, on, each = f"max_running_requests {srv.max_running_requests}", "", ""
    if srv.dp_size > 1 and srv.enable_dp_attention:
        from specsched.sim.dp_attention import rank_server_args

        cap += f": {rank_server_args(srv).max_running_requests} a rank"
        on, each = " on one DP-attention rank", " a rank"
    elif srv.dp_size > 1:
        on, each = f" on one of the {srv.dp_size} DP replicas", " a replica"
    # the peaks are those of the passes KV stopped, not the run's: the batch may have reached
    # the cap at another time (short prompts early, long ones later)
    return (f"note: the KV pool, not max_running_requests, capped the running batch: it kept requests out with at "
            f"most {summary['kv_refused_running_peak']} running{on} ({cap}) "
            f"and up to {summary['kv_refused_waiting_peak']} waiting; {passes:,} admission passes stopped for lack "
            f"of KV tokens (SGLang's PrefillAdder: NO_TOKEN) in a pool of {srv.max_total_num_tokens:,} tokens{each} "
            f"({where}). To run more at once: a larger pool ({larger}), shorter prompts or max output tokens (each "
            f"admission reserves its prompt and up to {CLIP_MAX_NEW_TOKENS:,} output tokens), or more GPUs (a "
            "profile with a larger --tp)")


def gfx95_exact_chunk_fill(server: ServerArgs, hw: Hardware) -> bool:
    """Whether sglang 0.5.23 charges the chunked-prefill budgets in raw tokens on this server:
    on a gfx95 GPU (MI350X/MI355X: the analytic table's ``gfx_arch``) under the 0.5.23
    preset with no ``chunk_fill`` rule given. 0.5.23's PrefillAdder does so when
    ``SGLANG_EXACT_CHUNK_FILL`` (default on, srt/environ.py) and ``is_gfx95_supported()``
    (managers/schedule_policy.py ``_use_exact_chunk_fill``): a cut takes the chunk's
    remaining tokens, not floored to a page, and the budgets are charged the raw extend
    (the rule ``exact_tokens``, sim/prefill_adder.py). Other presets keep their build's
    rule (the MI355X reference build's is ``stop_at_max_prefill_tokens``)."""
    if server.sglang_semantics != DEFAULT_PRESET or "chunk_fill" in server.semantics_rules:
        return False
    from specsched.sim.analytic.gpus import find_gpu

    spec = find_gpu(hw.gpu) if hw.gpu else None
    return spec is not None and (spec.gfx_arch or "").startswith("gfx95")


def resolve_server(server: ServerArgs, hw: Hardware | None, given: set[str]) -> tuple[ServerArgs, list[Resolved]]:
    """``server`` with every key of :data:`RESOLVED_KEYS` not in ``given`` set to SGLang's
    default for ``hw``; returns the new args and what was filled. ``hw`` None: unchanged."""
    if hw is None:
        return server, []
    out: list[Resolved] = []
    vals: dict[str, Any] = {}
    where = f"{hw.gpu or hw.platform} ({hw.memory_mib / 1024:.0f} GiB), tp {hw.tp_size}" if hw.memory_mib else f"{hw.gpu or hw.platform}, memory unknown"

    def put(key: str, value: Any, why: str) -> None:
        if key not in given:
            vals[key] = value
            out.append(Resolved(key, value, why))

    stated_page = server.page_size   # the scenario's own, before this server's backend changes it
    page = default_page_size(server, hw, given)
    if page != server.page_size and model_page_size(hw) is not None:
        put("page_size", page, f"SGLang's model override for {hw.architecture} sets it with the dsv4 attention backend "
            "(arg_groups/model_overrides/deepseek_v4.py _deepseek_v4_overrides)")
    elif page != server.page_size:
        backend = "trtllm_mla" if hw.mla else "trtllm_mha"
        put("page_size", page, f"SGLang's default attention backend on {where} is {backend}, which takes pages "
            f"of {page} (arg_groups/overrides.py _mla_backend_page_constraints)")
    if (snap := page_size_snap(server, hw, given)) is not None:
        vals["page_size"] = snap[0]
        out.append(Resolved("page_size", snap[0], snap[1]))
    server = server.model_copy(update={"page_size": vals.get("page_size", server.page_size)})
    chunk, graph = memory_buckets(hw.memory_mib, hw.tp_size)
    put("chunked_prefill_size", chunk, f"SGLang's default on {where}")
    graph_why = f"SGLang's decode graph limit on {where}"
    if "cuda_graph_max_bs" not in given and "max_running_requests" in given and server.max_running_requests < graph:
        # arg_groups/memory_hook.py handle_gpu_memory_settings lowers a default limit to a stated
        # --max-running-requests; said, as the GPU's limit alone read as the reason for the cut
        graph_why += (f" is {graph}, lowered to the given max_running_requests {server.max_running_requests} "
                      "(arg_groups/memory_hook.py handle_gpu_memory_settings)")
        graph = server.max_running_requests
    if server.cuda_graph_bs is None:  # a given list has set it (ServerArgs._graph_max_from_list)
        put("cuda_graph_max_bs", graph, graph_why)
    chunk_v = vals.get("chunked_prefill_size", server.chunked_prefill_size)
    graph_v = vals.get("cuda_graph_max_bs", server.cuda_graph_max_bs)
    mfs = mem_fraction_static_of(server, hw, chunked_prefill_size=chunk_v, cuda_graph_max_bs=graph_v)
    if hw.swa_kv_cell_bytes is not None and hw.sliding_window is not None:
        put("sliding_window_size", hw.sliding_window, "the model's window: SGLang runs a hybrid SWA KV pool for it "
            "(configs/model_config.py is_hybrid_swa_model)")
    swa_on = hw.swa_kv_cell_bytes is not None and vals.get("sliding_window_size", server.sliding_window_size) is not None
    ratio = server.swa_full_tokens_ratio if swa_on else None
    spec = server.speculative_algorithm.enabled
    hw_kv = attention_tp_hardware(hw, server.attn_dp_size)   # a DP-attention rank's KV cell per GPU
    cell = kv_token_bytes(hw_kv, ratio, spec)
    pool = kv_pool_tokens(hw_kv, mfs, server.page_size, ratio, spec)
    if pool is not None and pool > 0:
        split = (f" ({hw_kv.kv_cell_bytes / 1024:.1f} full + {ratio:g} x {hw_kv.swa_kv_cell_bytes / 1024:.1f} SWA; "
                 f"SWA pool {ratio:g} x this)" if swa_on else "")
        if spec and hw_kv.draft_kv_cell_bytes:
            split += f" (the drafter's KV {hw_kv.draft_kv_cell_bytes / 1024:.1f} KiB included)"
        if hw_kv.kv_cell_bytes != hw.kv_cell_bytes:
            split += (f" (KV heads per GPU at the attention TP size {hw.tp_size // server.attn_dp_size} of DP "
                      "attention: model_executor/pool_configurator.py get_num_kv_heads(attn_tp_size))")
        if hw_kv.weight_bytes != hw.weight_bytes:
            split += (f" (weights include {(hw_kv.weight_bytes - hw.weight_bytes) / 2**30:.1f} GiB of attention split "
                      f"over the attention TP size {hw.tp_size // server.attn_dp_size}: hardware.dp_attention_weight_bytes)")
        # SGLang's own fraction reserves activations per chunk token and the decode graphs first:
        # a larger chunk shrinks the pool, which the line says (memory_hook.py)
        given_mfs = (" (given)" if server.mem_fraction_static is not None else
                     f" (SGLang's, for chunked_prefill_size {chunk_v} and cuda_graph_max_bs {graph_v})")
        if aiter_long_context(server, hw):
            given_mfs += (f" (x {AITER_LONG_CONTEXT_FACTOR}: aiter attention above {AITER_LONG_CONTEXT} tokens of "
                          "context, attention_hook.py)")
        put("max_total_num_tokens", pool, f"KV pool: mem_fraction_static {mfs:.6g}{given_mfs} x memory - weights "
            f"{loaded_weight_bytes(hw_kv, spec) / 2**30:.1f} GiB, "
            f"{cell / 1024:.1f} KiB per token{split}")
    physical = physical_pool_tokens(hw_kv, server.page_size, ratio, spec)
    cut_to_profiled = False   # a stated pool no memory holds: each PD role is cut to its own pool below
    if ("max_total_num_tokens" in given and pool and server.mem_fraction_static is not None
            and server.max_total_num_tokens > pool):
        # both given: the user states the memory fraction, so the pool it leaves is the
        # profiled one SGLang takes the smaller of (kv_cache_configurator.py
        # _apply_token_constraints; --max-total-tokens is an upper bound, not a size)
        vals["max_total_num_tokens"] = pool
        out.append(Resolved("max_total_num_tokens", pool,
                            f"capped: SGLang takes the smaller of --max-total-tokens {server.max_total_num_tokens} and "
                            f"the pool mem_fraction_static {server.mem_fraction_static:g} leaves ({pool}; "
                            "kv_cache_configurator.py _apply_token_constraints)"))
    elif ("max_total_num_tokens" in given and pool and physical is not None
            and server.max_total_num_tokens > physical):
        # SGLang takes min(--max-total-tokens, the profiled pool) with a warning
        # (mem_cache/kv_cache_configurator.py _apply_token_constraints). The estimate of the
        # profiled pool is approximate, so only a value no GPU memory could hold is capped.
        vals["max_total_num_tokens"] = pool
        cut_to_profiled = True
        out.append(Resolved("max_total_num_tokens", pool,
                            f"capped: {server.max_total_num_tokens} tokens x {cell / 1024:.1f} KiB do not fit "
                            f"beside {loaded_weight_bytes(hw_kv, spec) / 2**30:.1f} GiB of weights in {where}; SGLang uses the profiled pool"))
    pool_v = vals.get("max_total_num_tokens", server.max_total_num_tokens)
    if hw.architecture in MODEL_MAX_RUNNING_REQUESTS:
        put("max_running_requests", MODEL_MAX_RUNNING_REQUESTS[hw.architecture],
            f"SGLang's default for {hw.architecture} (set before the speculative reset)")
    elif server.speculative_algorithm.enabled:
        put("max_running_requests", SPEC_MAX_RUNNING_REQUESTS, "SGLang's reset for speculative decoding")
    elif pool is not None and pool > 0:
        ctx = served_context_len(server.context_length, hw)
        per_rank, ranks = auto_max_running_requests(pool_v, ctx), server.attn_dp_size
        # with DP attention SGLang divides only a given limit by the ranks; the automatic one is
        # each rank's own (kv_cache_configurator.py resolve_max_num_reqs), and the server's value
        # here is divided per rank (sim/dp_attention.py rank_server_args), so it is per rank x ranks
        put("max_running_requests", per_rank * ranks,
            f"from the KV pool and context length {ctx}" + (
                f": {per_rank} per DP rank x {ranks} ranks (resolve_max_num_reqs divides only a given limit)"
                if ranks > 1 else ""))
    limit_set = ("max_running_requests" in given or hw.architecture in MODEL_MAX_RUNNING_REQUESTS
                 or server.speculative_algorithm.enabled)
    if limit_set and ((pool is not None and pool > 0) or "max_total_num_tokens" in given):
        # a set limit (the scenario's, the model hook's or the speculative reset) is still cut to
        # half the pool per DP rank (kv_cache_configurator.py resolve_max_num_reqs)
        ranks = server.attn_dp_size
        mrr_v = vals.get("max_running_requests", server.max_running_requests)
        per_rank, cap = max(1, mrr_v // ranks), max(1, pool_v // 2)
        if per_rank > cap:
            vals["max_running_requests"] = cap * ranks
            out[:] = [r for r in out if r.key != "max_running_requests"]
            out.append(Resolved("max_running_requests", cap * ranks, (
                f"capped: SGLang takes min({mrr_v}{f' // {ranks} DP ranks' if ranks > 1 else ''}, KV pool "
                f"{pool_v} // 2) (mem_cache/kv_cache_configurator.py resolve_max_num_reqs)")))
    put("sync_mode", platform_sync_mode(hw.platform), f"SGLang's publish wait on {hw.platform}")
    put("prefill_slot_expansion_sync", hw.slot_expansion_sync,
        "the profile's build " + ("blocks in DSpark prefill slot expansion" if hw.slot_expansion_sync else "passes output_size (sglang 0.5.23)"))
    if hw.platform == "cuda" and (multimodal_prefill_graphs_off(hw) or breakable_prefill_graphs_off(hw)
                                  or trtllm_mla_prefill_graphs_off(hw)):
        put("disable_prefill_cuda_graph", True, (
            f"SGLang captures no prefill graphs for {hw.architecture} on {where}: " + (
                "a multimodal model not validated for them (arg_groups/cuda_graph_hook.py "
                "disable_breakable_cudagraph_if_incompatible)" if multimodal_prefill_graphs_off(hw) else
                "its indexer scratch in the capture pool runs out of memory (arg_groups/cuda_graph_hook.py "
                "disable_breakable_cudagraph_if_incompatible; no prefill graph memory reserved either)"
                if breakable_prefill_graphs_off(hw) else
                "trtllm_mla would fall back to FlashAttention under them (arg_groups/cuda_graph_hook.py "
                "disable_prefill_cuda_graph_for_deepseek_trtllm_mla)")))
    if (hw.platform == "cuda" and hw.mla and not vals.get("disable_prefill_cuda_graph", server.disable_prefill_cuda_graph)
            and server.cuda_graph_bs_prefill is None and chunk_v > MLA_PREFILL_GRAPH_MAX_TOKENS):
        put("cuda_graph_max_bs_prefill", MLA_PREFILL_GRAPH_MAX_TOKENS,
            f"SGLang caps an MLA model's prefill graphs at {MLA_PREFILL_GRAPH_MAX_TOKENS} tokens, below the chunk "
            f"{chunk_v} (arg_groups/memory_hook.py handle_gpu_memory_settings): a larger extend runs eagerly")
    if hw.vlm_mem_fraction_factor is not None and hw.architecture in MM_NO_CHUNKED_PREFILL_ARCHS:
        # after the memory settings used the chunk (mfs above), whatever the user gave
        vals["chunked_prefill_size"] = -1
        out.append(Resolved("chunked_prefill_size", -1, (
            f"SGLang cannot chunk a prefill of {hw.architecture} (configs/model_config.py "
            "is_multimodal_chunked_prefill_supported): turned off after the memory settings used the chunk "
            "(arg_groups/model_hook.py _handle_model_capability_adjustments)")))
    put("enable_overlap_schedule", True, "SGLang's default")
    algo = server.speculative_algorithm
    if algo.enabled and not algo.is_block and not given.intersection(CHAIN_PARAM_KEYS):
        arch = hw.architecture
        why = (f"SGLang's choice for {auto_speculative_basis(algo.value, arch)} when no chain setting is given "
               "(arg_groups/speculative_hook.py _auto_choose_speculative_params)")
        for key, value in zip(CHAIN_PARAM_KEYS, auto_speculative_params(algo.value, arch), strict=True):
            put(key, value, why)
    if algo.is_block:
        gamma = BLOCK_DEFAULT_WINDOW[algo.value] - 1
        put("speculative_num_draft_tokens", BLOCK_DEFAULT_WINDOW[algo.value],
            "SGLang's fallback with no draft checkpoint config: " + (
                f"DEFAULT_DSPARK_GAMMA {gamma} + 1 (arg_groups/speculative_hook.py _handle_dspark)" if algo.value == "dspark"
                else "a DFlash block of 16 (arg_groups/speculative_hook.py _handle_dflash)"))
    if server.speculative_algorithm.is_block:
        put("admission_delay", AdmissionDelay.min_free_slots, "automatic for DSpark/DFlash in SGLang")
    if gfx95_exact_chunk_fill(server, hw):
        vals["semantics_rules"] = {**server.semantics_rules, "chunk_fill": "exact_tokens"}
        out.append(Resolved("semantics_rules.chunk_fill", "exact_tokens",
                            f"sglang {DEFAULT_PRESET} on gfx95 ({hw.gpu}): SGLANG_EXACT_CHUNK_FILL is on by default "
                            "(managers/schedule_policy.py _use_exact_chunk_fill)"))
    resolved = server.model_copy(update=vals)
    if resolved.disaggregation is not None:
        resolved = _role_page_snaps(resolved, hw, given, out, stated_page)   # before the pools, which count pages
    if resolved.disaggregation is not None and pool is not None and pool > 0:
        # a stated pool that no memory holds is cut by each role's server to the pool its own
        # reserve leaves (kv_cache_configurator.py _apply_token_constraints runs per server),
        # not to the colocated server's
        resolved = _role_pools(resolved, hw, given, out,
                               server_pool_kept="max_total_num_tokens" in given and not cut_to_profiled)
    if resolved.disaggregation is not None:
        resolved = _role_spec_defaults(resolved, hw, given, out)
    return resolved, out


ROLE_BACKEND_KEYS = frozenset({"page_size", "speculative_algorithm", "speculative_eagle_topk"})
"""A role's own server keys that pick its attention backend or its page size (arg_groups/
model_override_base.py ``get_default_attn_backend`` reads the speculative algorithm and topk)."""


def _role_page_snaps(server: ServerArgs, hw: Hardware, given: set[str], out: list[Resolved],
                     stated_page: int | None = None) -> ServerArgs:
    """``server`` with each disaggregated role's page size as its own SGLang server resolves
    it: each role's attention hook picks its backend from the role's own speculative settings
    (arg_groups/model_override_base.py ``get_default_attn_backend``), fills the page size
    that backend needs when none is given (:func:`default_page_size`) and changes a given
    one it cannot take to 64 (:func:`page_size_snap`, arg_groups/overrides.py
    ``_mla_backend_page_constraints``). A role that states none of
    :data:`ROLE_BACKEND_KEYS` has the section's, already resolved; one that does starts from
    its own page size, else the scenario's (``stated_page``, the section's before its own
    change; default the section's). Each change is appended to ``out``."""
    layout = server.disaggregation
    roles: dict[str, Any] = {}
    for role in ("prefill", "decode"):
        cfg = getattr(layout, role)
        if not ROLE_BACKEND_KEYS.intersection(cfg.server):
            continue
        role_given = given | set(cfg.server)
        rs = server.role_server(role)
        if "page_size" in cfg.server:
            page = rs.page_size
        elif "page_size" in given:
            page = server.page_size if stated_page is None else stated_page
        else:
            page = default_page_size(rs, hw, role_given)
        snap = page_size_snap(rs.model_copy(update={"page_size": page}), hw, role_given)
        if snap is not None:
            page, why = snap[0], f"on the {role} server: {snap[1]}"
        elif "page_size" in cfg.server or page == server.page_size:
            continue   # the role's own page size, which its backend takes, or the section's
        elif "page_size" in given:
            why = (f"on the {role} server: the scenario's page_size {page}, which its attention backend takes "
                   "(the section's backend changed the section's)")
        else:
            why = (f"on the {role} server: SGLang's default attention backend for its speculative settings takes "
                   f"pages of {page} (arg_groups/model_override_base.py get_default_attn_backend)")
        roles[role] = cfg.model_copy(update={"server": {**cfg.server, "page_size": page}})
        out.append(Resolved(f"disaggregation.{role}.server.page_size", page, why))
    return server.model_copy(update={"disaggregation": layout.model_copy(update=roles)}) if roles else server


def _role_spec_defaults(server: ServerArgs, hw: Hardware, given: set[str], out: list[Resolved]) -> ServerArgs:
    """``server`` with each disaggregated role whose speculation differs from the server
    section's given the defaults its own server's hooks choose (each role is its own SGLang
    server):

    - a role that turns on a chain drafter, giving none of :data:`CHAIN_PARAM_KEYS`: SGLang's
      choice for the profile's architecture (arg_groups/speculative_hook.py
      ``_auto_choose_speculative_params``; without this the role kept the architecture-less
      fallback of :meth:`ServerArgs._auto_chain_params`);
    - ``max_running_requests``, where neither the scenario nor the role sets it: 48 on a role
      that speculates (the speculative hook's reset), the pool's own limit on one that does
      not (``resolve_max_num_reqs``), as :func:`resolve_server` fills the section's.

    After :func:`_role_pools`, which reads a role's draft tokens only where the user gave them
    (SGLang's memory hook runs before its speculative hook)."""
    layout = server.disaggregation
    roles: dict[str, Any] = {}
    for role in ("prefill", "decode"):
        cfg = getattr(layout, role)
        rs = server.role_server(role)
        algo, top = rs.speculative_algorithm, server.speculative_algorithm
        if "speculative_algorithm" not in cfg.server or algo is top:
            continue
        chosen: dict[str, Any] = {}
        why: dict[str, str] = {}
        if (algo.enabled and not algo.is_block and not (top.enabled and not top.is_block)
                and not any(k in cfg.server for k in CHAIN_PARAM_KEYS)):   # the section's chain settings not carried
            chosen.update(zip(CHAIN_PARAM_KEYS, auto_speculative_params(algo.value, hw.architecture), strict=True))
            why.update(dict.fromkeys(CHAIN_PARAM_KEYS, (
                f"SGLang's choice for {auto_speculative_basis(algo.value, hw.architecture)} on the {role} server "
                "(arg_groups/speculative_hook.py _auto_choose_speculative_params)")))
        if ("max_running_requests" not in given and "max_running_requests" not in cfg.server
                and hw.architecture not in MODEL_MAX_RUNNING_REQUESTS
                and algo.enabled != top.enabled):
            if algo.enabled:
                chosen["max_running_requests"] = SPEC_MAX_RUNNING_REQUESTS
                why["max_running_requests"] = f"SGLang's reset for speculative decoding on the {role} server"
            else:
                ctx = served_context_len(rs.context_length, hw)
                chosen["max_running_requests"] = auto_max_running_requests(rs.max_total_num_tokens, ctx) * rs.attn_dp_size
                why["max_running_requests"] = f"the {role} server's, from its KV pool and context length {ctx}"
        if "admission_delay" not in given and "admission_delay" not in cfg.server and algo.is_block != top.is_block:
            # the scheduler builds the min-free-slots delayer from its own server's algorithm
            # (managers/scheduler.py resolve_min_free_slots(..., is_dflash_family))
            chosen["admission_delay"] = (AdmissionDelay.min_free_slots if algo.is_block else AdmissionDelay.none).value
            why["admission_delay"] = (f"automatic for DSpark/DFlash in SGLang, on the {role} server" if algo.is_block
                                      else f"none on the {role} server, which runs no block drafter")
        if chosen:
            roles[role] = cfg.model_copy(update={"server": {**cfg.server, **chosen}})
            out.extend(Resolved(f"disaggregation.{role}.server.{k}", v, why[k]) for k, v in chosen.items())
    return server.model_copy(update={"disaggregation": layout.model_copy(update=roles)}) if roles else server


def _role_pools(server: ServerArgs, hw: Hardware, given: set[str], out: list[Resolved],
                server_pool_kept: bool = False) -> ServerArgs:
    """``server`` with each disaggregated role that states no pool of its own given the pool
    its own reserve leaves (:func:`mem_fraction_static` by role: a decode server reserves
    for max(running requests x draft tokens, 2048) activation tokens and no prefill graphs, a
    prefill server no decode graphs; arg_groups/memory_hook.py). The running requests are
    the role's max_running_requests where the scenario sets it, else its decode graph size
    (SGLang: ``max_running_requests or cuda_graph max_bs``); the draft tokens the scenario's
    ``speculative_num_draft_tokens`` where it sets it, else 1 (``speculative_num_draft_tokens or
    1``: the speculative hook that picks a default runs after the memory hook). Each role's pool is appended to
    ``out``. Also called when the scenario's server states a pool no GPU memory could hold:
    every SGLang server takes the smaller of --max-total-tokens and the pool it profiled
    (mem_cache/kv_cache_configurator.py ``_apply_token_constraints``), so each role is cut
    to its own pool, not to the colocated one; likewise a role whose own overrides state a
    pool no memory holds. ``server_pool_kept``: the scenario's server states a pool that
    memory could hold, which the roles without one of their own keep."""
    layout = server.disaggregation
    roles: dict[str, Any] = {}
    for role in ("prefill", "decode"):
        cfg = getattr(layout, role)
        rs = server.role_server(role)
        stated = cfg.server.get("max_total_num_tokens")
        if stated is not None:
            physical = physical_pool_tokens(attention_tp_hardware(hw, rs.attn_dp_size), rs.page_size, None,
                                            rs.speculative_algorithm.enabled)
            if physical is None or stated <= physical:
                continue
        elif server_pool_kept:
            continue
        set_running = "max_running_requests" in given or "max_running_requests" in cfg.server
        running = rs.max_running_requests if set_running else rs.cuda_graph_max_bs
        # SGLang reads speculative_num_draft_tokens before the speculative hook fills it in
        # (arg_groups/pipeline.py: handle_gpu_memory_settings runs first): ``or 1`` when not given
        set_draft = "speculative_num_draft_tokens" in given or "speculative_num_draft_tokens" in cfg.server
        draft = rs.speculative_num_draft_tokens if rs.speculative_algorithm.enabled and set_draft else 1
        mfs = mem_fraction_static_of(rs, hw, role=role, decode_tokens=running * draft, given=given | set(cfg.server))
        pool = kv_pool_tokens(attention_tp_hardware(hw, rs.attn_dp_size), mfs, rs.page_size, None,  # PD: no SWA pool (ServerArgs._check_roles)
                              rs.speculative_algorithm.enabled)
        if pool is None or pool <= 0 or (stated is None and pool == rs.max_total_num_tokens):
            continue
        roles[role] = cfg.model_copy(update={"server": {**cfg.server, "max_total_num_tokens": pool}})
        why = (f"the {role} server's KV pool: mem_fraction_static {mfs:.6g} by its role's reserve "
               "(arg_groups/memory_hook.py handle_gpu_memory_settings, reserve_for_graph_mb)")
        if stated is not None:
            why = (f"capped: the {role} server's {stated} tokens do not fit its GPU memory; SGLang uses the "
                   f"profiled pool (kv_cache_configurator.py _apply_token_constraints), {why}")
        out.append(Resolved(f"disaggregation.{role}.server.max_total_num_tokens", pool, why))
    return server.model_copy(update={"disaggregation": layout.model_copy(update=roles)}) if roles else server


BLOCK_RESET_KEYS = ("speculative_num_steps", "speculative_eagle_topk")
"""The chain drafter's settings a block drafter's server overrides to 1 (:func:`block_drafter_resets`)."""


def block_drafter_resets(server: ServerArgs, given: set[str]) -> tuple[ServerArgs, list[Resolved]]:
    """A block drafter's (DSpark, DFlash) ``speculative_num_steps`` and ``speculative_eagle_topk``
    as SGLang 0.5.23 runs them: a given value other than 1 is overridden to 1 with a warning
    (arg_groups/speculative_hook.py ``_handle_dspark``, ``_handle_dflash``: "only supports
    speculative_num_steps == 1"). The simulator's block drafter reads neither, so a run was
    the same with them silently; the reset is said as a filled value.

    Each disaggregated role is its own SGLang server, whose hook does the same to the values
    its own overrides give (``server.disaggregation.<role>.server``) where the role runs a
    block drafter: those are reset in the role's overrides and said under
    ``disaggregation.<role>.server.<key>``, naming the role."""
    out: list[Resolved] = []
    if server.speculative_algorithm.is_block:
        # a value out of the chain range (0, negative) was held at 1 by ServerArgs._block_drafter_resets
        was = {k: server._block_given.get(k, getattr(server, k)) for k in BLOCK_RESET_KEYS}
        out = [Resolved(k, 1, f"SGLang overrides {k}={was[k]} to 1 for {server.speculative_algorithm.value} "
                        "with a warning (arg_groups/speculative_hook.py _handle_dspark/_handle_dflash)")
               for k in BLOCK_RESET_KEYS if k in given and was[k] != 1]
        server = server.model_copy(update={r.key: 1 for r in out})
        server._block_given = {}
    layout = server.disaggregation
    if layout is None:
        return server, out
    roles: dict[str, Any] = {}
    for role in ("prefill", "decode"):
        cfg = getattr(layout, role)
        own = [k for k in BLOCK_RESET_KEYS if k in cfg.server and cfg.server[k] != 1]
        if not own:
            continue
        algo = server.role_server(role).speculative_algorithm
        if not algo.is_block:
            continue
        out += [Resolved(f"disaggregation.{role}.server.{k}", 1,
                         f"SGLang overrides {k}={cfg.server[k]} to 1 for {algo.value} on the {role} server with a "
                         "warning (arg_groups/speculative_hook.py _handle_dspark/_handle_dflash)") for k in own]
        roles[role] = cfg.model_copy(update={"server": {**cfg.server, **dict.fromkeys(own, 1)}})
    if roles:
        server = server.model_copy(update={"disaggregation": layout.model_copy(update=roles)})
    return server, out


def decode_extra_slots_default(server: ServerArgs, given: set[str], out: list[Resolved]) -> ServerArgs:
    """``server`` with its decode role's ``disaggregation_decode_extra_slots`` filled where
    neither the scenario nor the role gives it, as SGLang 0.5.23 fills it
    (arg_groups/pd_disaggregation_hook.py ``handle_pd_disaggregation``): 2 x the stated
    max_running_requests' share per DP rank (``num_dp_ranks_of``) when that is at most 32,
    else 0. The hook runs in arg_groups/pipeline.py ``run_resolution_pipeline`` before the
    speculative hook's reset to 48, the model hooks' limits and the KV pool's, so only a limit
    the launch states counts: a decode server left to those gets none. Appends the filled
    value to ``out``; ``server`` unchanged when it is not disaggregated or the limit is stated
    (the scheduler then reads the stated limit's per-rank share as SGLang does:
    sim/scheduler_disagg.py ``decode_extra_slots``)."""
    layout = server.disaggregation
    if layout is None:
        return server
    key = "disaggregation_decode_extra_slots"
    cfg = layout.decode
    if key in given or key in cfg.server:
        return server
    if "max_running_requests" in cfg.server or "max_running_requests" in given:
        # stated: the scheduler's own reading of its per-rank limit is SGLang's
        # (sim/scheduler_disagg.py decode_extra_slots); nothing to fill
        return server
    extra = 0
    out.append(Resolved(f"disaggregation.decode.server.{key}", extra,
                        "SGLang's default where max_running_requests is not stated "
                        "(arg_groups/pd_disaggregation_hook.py handle_pd_disaggregation)"))
    return server.model_copy(update={"disaggregation": layout.model_copy(
        update={"decode": cfg.model_copy(update={"server": {**cfg.server, key: extra}})})})


def apply_hardware_defaults(scenario: Scenario, given: set[str] | None = None,
                            profile: Profile | None = None) -> tuple[Scenario, list[Resolved]]:
    """The scenario with SGLang's hardware defaults filled in for the server arguments the
    scenario file (with its arm and overrides) did not set.

    Args:
        given: server keys the user set (default: the fields pydantic saw set).
        profile: the profile that times it (default: the scenario's own, loaded).

    Returns:
        (resolved scenario, the values filled in).

    Raises:
        ConfigError: the scenario's profile cannot be loaded.
    """
    if given is None:
        given = set(scenario.server.model_fields_set)
    hw = hardware_of(profile) if profile is not None else _scenario_hardware(scenario.profile, scenario.path or None)
    server, filled = resolve_server(scenario.server, hw, given)
    server, reset = block_drafter_resets(server, given)
    filled = filled + reset
    server = decode_extra_slots_default(server, given, filled)
    if hw is not None:
        _refuse_model_spec(scenario, server, hw, given)
        _refuse_draft_trees(scenario, server, hw, given)
    if hw is not None and server.disaggregation is not None and any(r.key == "sliding_window_size" for r in filled):
        from specsched.sim.errors import ConfigError

        raise ConfigError(scenario_file(scenario, scenario.name), "server.disaggregation", "{...}",
                          f"not modelled for a hybrid sliding-window model (profile {scenario.profile}: "
                          f"hardware.sliding_window {hw.sliding_window}, SGLang's SWA KV pool): the decode side's "
                          "SWA-tail prealloc is not modelled")
    # validate again: the filled values must pass the same checks as written ones (a
    # refusal names the scenario's file, as one of its written values would)
    from pydantic import ValidationError
    from specsched.sim.config import validation_error

    dumped = server.model_dump()
    try:
        server = ServerArgs.model_validate(dumped)
    except ValidationError as e:
        raise validation_error(scenario_file(scenario, scenario.name), e, dumped) from None
    out = scenario.model_copy(update={"server": server})
    out._resolved_defaults = filled
    out._server_given = frozenset(given)
    return out, filled


def resolve_loaded(scenario: Scenario) -> Scenario:
    """:func:`apply_hardware_defaults` for a scenario just loaded from its file; the filled
    values are kept on ``scenario._resolved_defaults`` for ``specsched run`` to print. A
    profile that cannot be loaded leaves the scenario as it is (running it reports that).

    Raises:
        ConfigError: the filled values cannot run (a hybrid sliding-window profile with
            prefill-decode disaggregation)."""
    from specsched.sim.errors import ConfigError

    try:
        _scenario_hardware(scenario.profile, scenario.path or None)
    except ConfigError:
        return scenario
    check_launch_tp(scenario)
    return apply_hardware_defaults(scenario)[0]


def check_launch_tp(scenario: Scenario) -> None:
    """Refuse a ``tp_size`` (or ``tensor_parallel_size``) in a server block that is not the
    TP size the scenario's profile prices (:func:`sim.sglang_launch_args.tp_size_refusal`):
    the model cannot change it, and a pasted ``tp_size: 8`` over a TP1 profile would predict
    a server it was not. The one it is runs, left out with a note.

    Raises:
        ConfigError: naming the key, the value and the TP size allowed."""
    from specsched.sim.errors import ConfigError
    from specsched.sim.sglang_launch_args import UNMODELLED, tp_size_refusal, unmodelled

    given = {k: v for k, v in scenario._launch_args_values.items() if unmodelled(k.rsplit(".", 1)[-1]) is UNMODELLED["tp_size"]}
    if not given:
        return
    prof = load_profile(scenario.profile, relative_to=scenario.path or None)
    tp = prof.hardware.tp_size if prof.hardware is not None else None
    for key, value in given.items():
        role = key.split(".")[2] if key.startswith("server.disaggregation.") else None
        srv = scenario.server.role_server(role) if role else scenario.server
        ranks = srv.dp_size if srv.enable_dp_attention else 1
        if (why := tp_size_refusal(value, tp, ranks)) is not None:
            raise ConfigError(scenario_file(scenario), key, value, why)


def format_resolved(changed: list[Resolved]) -> str:
    """One short block: the resolved values that the scenario file did not state."""
    if not changed:
        return ""
    lines = ["server defaults for this hardware (not in the scenario file):"]
    for r in changed:
        v = r.value.value if hasattr(r.value, "value") else r.value
        lines.append(f"  {r.key} = {v}  ({r.why})")
    return "\n".join(lines)


DIFFER_LABELS_SHOWN = 4
"""Most points named for one value in :func:`format_differing` (the rest are counted)."""


def _label(label: str | dict[str, Any]) -> str:
    return label if isinstance(label, str) else " ".join(f"{k}={v}" for k, v in label.items())


def _group_name(labels: list[Any], every: list[Any]) -> str:
    """The points of one value: the axis values they share when those pick out exactly
    them (``arm=mtp`` for every point of that arm), else their labels (the first
    :data:`DIFFER_LABELS_SHOWN`, the rest counted)."""
    if all(isinstance(lab, dict) for lab in labels):
        common = {k: v for k, v in labels[0].items() if all(lab.get(k) == v for lab in labels)}
        if common and sum(all(lab.get(k) == v for k, v in common.items()) for lab in every) == len(labels):
            return _label(common)
    named = ", ".join(_label(lab) for lab in labels[:DIFFER_LABELS_SHOWN])
    return named + (f" and {len(labels) - DIFFER_LABELS_SHOWN} more" if len(labels) > DIFFER_LABELS_SHOWN else "")


def format_differing(points: list[tuple[str | dict[str, Any], Any]], between: str = "arms") -> str:
    """One short block naming each server default filled in for the hardware
    (:func:`apply_hardware_defaults`) at some of ``points`` whose value is not the same at
    all of them; empty when there is none.

    ``points``: (label, resolved scenario), e.g. the arms of a comparison or the points of
    a sweep; a label is a name or the point's axis values (a dict), so that the points of
    one value are named by the values they share (``arm=mtp``). Each line is ``key: LABELS: VALUE (why); ...``, one group per value: why is
    the filled value's reason, ``set`` where the point sets the key itself, ``the
    simulator's default`` where SGLang's rule had nothing to go on (e.g. no KV pool size
    in the profile). Such a difference is the server's, not the arms': SGLang resets
    max_running_requests to 48 for speculative decoding, so a speculative arm may admit far
    fewer requests than the base arm at high concurrency.
    """
    filled_at = [{r.key: r for r in sc._resolved_defaults} for _, sc in points]
    keys = list(dict.fromkeys(k for filled in filled_at for k in filled))
    lines = []
    for key in keys:
        groups: dict[tuple[str, str], list[Any]] = {}   # (value, why) -> labels, in point order
        for (label, sc), filled in zip(points, filled_at, strict=True):
            if key in filled:
                value = filled[key].value
                value, why = (value.value if hasattr(value, "value") else value), filled[key].why
            else:
                value = dotted_value(sc.server, key)
                why = "set" if key.split(".")[0] in sc._server_given else "the simulator's default"
            groups.setdefault((str(value), why), []).append(label)
        if len({value for value, _ in groups}) < 2:
            continue
        parts = [f"{_group_name(labels, [lab for lab, _ in points])}: {value} ({why})"
                 for (value, why), labels in groups.items()]
        lines.append(f"  {key}: " + "; ".join(parts))
    if not lines:
        return ""
    return "\n".join([f"server defaults that differ between {between} (not set in the scenario; set them to "
                      "compare like with like):", *lines])
