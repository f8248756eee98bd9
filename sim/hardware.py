"""What a profile knows about the machine it times: the inputs of SGLang's hardware defaults.

A profile's ``hardware`` block (optional) names the platform, the GPU, the TP size, the
memory the driver reports and, when the model is known, the weights and KV cache bytes per
rank. :mod:`sim.defaults` turns it into SGLang's defaults (chunked_prefill_size,
cuda_graph_max_bs, mem_fraction_static, the KV pool, max_running_requests, the publish
wait). ``specsched profile --analytic`` writes it; measured profiles may carry it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

RESOLVED_KEYS = ("page_size", "chunked_prefill_size", "cuda_graph_max_bs", "sliding_window_size", "max_total_num_tokens",
                 "max_running_requests", "sync_mode", "prefill_slot_expansion_sync",
                 "enable_overlap_schedule", "admission_delay", "disable_prefill_cuda_graph")
"""Server arguments :mod:`sim.defaults` fills from the hardware when a scenario leaves them out."""


class Hardware(BaseModel):
    """The device behind a profile (per GPU figures; one TP group).

    platform: ``cuda``, ``hip`` (ROCm) or ``cpu``: selects the publish wait SGLang uses
        (managers/overlap_utils.py: a queued Event.wait on CUDA, a host-blocking
        synchronize on HIP).
    gpu: the GPU's name (a key of the analytic GPU table when it is one).
    tp_size: tensor-parallel ranks.
    memory_mib: total memory one GPU reports (nvidia-smi/amd-smi), MiB; SGLang's
        handle_gpu_memory_settings buckets on it.
    weight_bytes: weights one rank holds (target plus draft model), bytes.
    draft_weight_bytes: the drafter's part of ``weight_bytes``, bytes: SGLang loads a drafter
        only when the server speculates (managers/tp_worker.py: the draft worker exists only
        with a speculative algorithm), and sizes the KV pool from the memory left after what
        is loaded (mem_cache/kv_cache_configurator.py ``_profile_available_bytes``), so a
        scenario without speculation has these bytes for its pool. None: not known (older
        profiles); all of ``weight_bytes`` counts whatever the server runs.
    kv_cell_bytes: KV cache bytes per token on one rank (all layers; with
        ``swa_kv_cell_bytes``, the full-attention layers only).
    draft_kv_cell_bytes: the drafter's KV bytes per token on one rank, in the same pool: SGLang
        adds them to a token's cost only when the server speculates
        (model_executor/pool_configurator.py ``DefaultPoolConfigurator.__init__``: EAGLE/STANDALONE
        and DFLASH-family branches; ``HybridSWAPoolConfigurator``'s draft layers), so a
        scenario without speculation on the same profile gets the target's pool. None: no
        drafter KV (older profiles, or a measured profile that does not know it).
    swa_kv_cell_bytes: a hybrid sliding-window model's SWA-pool KV bytes per token on one
        rank (its windowed layers), SGLang's second pool (model_executor/pool_configurator.py
        ``HybridSWAPoolConfigurator``); None: one pool.
    sliding_window: the window of those layers (tokens), the server's
        ``sliding_window_size`` unless a scenario sets it; only with ``swa_kv_cell_bytes``.
    context_len: the model's maximum context (max_running_requests formula).
    mla: the model uses MLA attention (SGLang reserves more memory for MLA prefill graphs).
    context_mib: memory already taken when SGLang measures free memory before loading
        weights (driver context, communication buffers; mem_cache/kv_cache_configurator.py
        ``_profile_available_bytes``): not a server argument. An analytic profile writes the
        GPU table's figure (sim/analytic/data/gpus.yaml ``context_mib``, an assumption stated
        there); a profile that states none is read at 1 GiB, the same assumption.
    slot_expansion_sync: the server build's DSpark prefill expands slots with
        repeat_interleave without output_size (HIP unified-KV backend before sglang 0.5.23),
        which blocks the host until the prefill forward drains.
    vlm_mem_fraction_factor: set for a model SGLang serves as multimodal (configs/model_config.py
        ``multimodal_model_archs``): the factor SGLang scales its own mem_fraction_static by
        (arg_groups/memory_hook.py ``adjust_mem_fraction_for_vlm``; 1 without a vision_config).
        Such a server also takes SGLANG_VLM_CACHE_SIZE_MB (100 MiB) from the KV budget
        (mem_cache/kv_cache_configurator.py ``mm_runtime_reservation_gb``) and captures no
        prefill graphs unless its architecture is validated for them. None: a text model.
    num_kv_heads: the model's KV heads (config.json ``num_key_value_heads``, all ranks), where
        known: on ROCm an MLA model's default attention backend depends on them
        (:func:`sim.defaults.hip_aiter_backend`).
    dp_attention_weight_bytes: per DP-attention size d (a divisor of ``tp_size`` above 1), the
        weight bytes one GPU holds beyond ``weight_bytes`` when the server runs
        ``--enable-dp-attention --dp-size d``: the attention projections are split over the
        attention TP size tp / d instead of tp (models/deepseek_v2.py, qwen3_moe.py:
        ``num_heads // attn_tp_size``), so each GPU holds d times its split share (the
        replicated parts, MLA's q_a / kv_a, unchanged). The KV pool loses them and every
        forward reads them. None: not known (measured profiles).
    architecture: the model's Hugging Face architecture name (config.json
        ``architectures[0]``), when known: SGLang's model hook sets some defaults by it
        (arg_groups/model_hook.py ``handle_model_specific_adjustments``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    platform: Literal["cuda", "hip", "cpu"]
    gpu: str = ""
    tp_size: int = Field(1, ge=1)
    memory_mib: float | None = Field(None, gt=0)
    weight_bytes: float | None = Field(None, ge=0)
    draft_weight_bytes: float | None = Field(None, ge=0)
    kv_cell_bytes: float | None = Field(None, gt=0)
    draft_kv_cell_bytes: float | None = Field(None, ge=0)
    swa_kv_cell_bytes: float | None = Field(None, gt=0)
    sliding_window: int | None = Field(None, ge=1)
    context_len: int | None = Field(None, ge=1)
    mla: bool = False
    context_mib: float = Field(1024.0, ge=0)
    slot_expansion_sync: bool = False
    vlm_mem_fraction_factor: float | None = Field(None, gt=0, le=1.05)
    num_kv_heads: int | None = Field(None, ge=1)
    dp_attention_weight_bytes: dict[int, float] | None = None
    architecture: str = ""


def served_context_len(context_length: int | None, hw: Hardware | None) -> int | None:
    """The context length a server runs with: its ``--context-length`` (``server.context_length``)
    when given, which replaces the model's own (sglang 0.5.23 configs/model_config.py
    ``ModelConfig._derive_context_length``), else the profile's ``hardware.context_len``; None
    when neither says."""
    if context_length is not None:
        return context_length
    return hw.context_len if hw is not None else None
