"""Model architectures for analytic profiles: a Hugging Face style config.json or a shipped name.

:class:`ModelArch` holds what the roofline needs (layers, hidden size, heads, KV heads, head
dim, MLP and MoE sizes, MLA ranks, sliding window, vocab). :func:`load_model` reads either a
path to a config.json or a name from the shipped table ``data/models.yaml`` (same key names
as config.json, each entry with its source). The key names and defaults follow the
transformers configs SGLang loads (python/sglang/srt/configs/model_config.py reads
``num_key_value_heads``, ``head_dim``, ``kv_lora_rank`` ... the same way).
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict
from specsched.sim.analytic.vision import vision_tower, vit_size_for_memory
from specsched.sim.errors import ConfigError
from specsched.sim.input_files import is_input_file, is_stream, read_input

_FROZEN = ConfigDict(frozen=True, extra="forbid")

HYBRID_SWA_ARCHS = frozenset({
    # configs/model_config.py SWA_SINK_ARCHS
    "GptOssForCausalLM", "GraniteSWAForCausalLM", "GraniteMoeSWAForCausalLM", "IQuestQ1ForCausalLM",
    # the is_hybrid_swa_model entries whose layers get_hybrid_layer_ids reads from layer_types
    "BeamForCausalLM", "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration", "EmbeddingGemma2Model",
    "Gemma4UnifiedForConditionalGeneration", "LagunaForCausalLM", "MellumForCausalLM",
    "MuseGlimmerForCausalLM", "MuseGlimmerForConditionalGeneration", "Step3p5ForCausalLM",
    "Step3p7ForConditionalGeneration",
})
"""Architectures SGLang 0.5.23 serves with a hybrid SWA KV pool whose split between
full-attention and sliding-window layers follows ``layer_types`` (configs/model_config.py
``is_hybrid_swa_model`` and ``get_hybrid_layer_ids``). A config with ``is_hybrid_swa: true``
opts in the same way. Not here: DeepSeek-V4 (its own pool, DSV4PoolConfigurator), MiMo-V2
(layer split from other keys), Llama 4 (its split is fixed by layer index:
:data:`LOCAL_ATTENTION_ARCHS`), and Gemma 2/3, whose hybrid pool SGLang turns off
(arg_groups/model_overrides/gemma2_gemma3.py: ``disable_hybrid_swa_memory``)."""

LOCAL_ATTENTION_ARCHS = frozenset({"Llama4ForConditionalGeneration"})
"""Architectures SGLang 0.5.23 serves with chunked local attention and a hybrid SWA KV pool
whose split is fixed by layer index, not by ``layer_types``: configs/model_config.py
``is_local_attention_model`` (the FA3 backend builds local-attention metadata only for these:
layers/attention/flashattention_backend.py ``_maybe_init_local_attn_builder``),
``is_hybrid_swa_model`` (listed) and ``get_hybrid_layer_ids`` (layer ``i`` is a local, SWA-pool
layer unless ``(i + 1) % 4 == 0``; every fourth layer is global, in the full pool). The SWA
pool's window is ``attention_chunk_size`` (model_runner_components/load_model_utils.py
``resolve_sliding_window_size``). models/llama4.py ``Llama4Attention`` uses the same rule
(``use_rope = (layer_id + 1) % 4 != 0``: the local layers are the RoPE ones), whatever the
config's ``no_rope_layers`` says. ``Llama4ForCausalLM`` is in neither list: one pool, every
layer global."""

LOCAL_ATTENTION_GLOBAL_EVERY = 4
"""Every this-many-th layer of a :data:`LOCAL_ATTENTION_ARCHS` model attends globally
(configs/model_config.py ``get_hybrid_layer_ids``: ``(i + 1) % 4 == 0``)."""

DSA_ARCHS = frozenset({
    "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration",
    "GlmMoeDsaForCausalLM", "Glm5NextForConditionalGeneration", "HYV4ForCausalLM", "HYV4ForCausalLMNextN",
    "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN", "Dots3NoteForCausalLM",
})
"""Architectures SGLang 0.5.23 gives DeepSeek sparse attention's KV default: those in both
configs/model_config.py ``is_deepseek_dsa`` (with ``index_topk`` in the config) and
arg_groups/overrides.py ``_DEEPSEEK_FAMILY_ARCHS`` (``_dsa_kv_cache_dtype_default`` returns at
once for another architecture)."""

FULL_ATTENTION_ARCHS = frozenset({
    "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen2MoeForCausalLM", "Qwen3ForCausalLM",
    "Qwen3MoeForCausalLM", "Phi3ForCausalLM", "InternLM3ForCausalLM", "IQuestCoderForCausalLM",
    "Mistral3ForConditionalGeneration", "MixtralForCausalLM", "QuantMixtralForCausalLM", "PhiMoEForCausalLM",
    "Starcoder2ForCausalLM",
})
"""Architectures whose SGLang 0.5.23 model attends every position whatever the config's
``sliding_window`` says: models/llama.py (its ``EntryClass``: ``LlamaForCausalLM``,
``Phi3ForCausalLM``, ``InternLM3ForCausalLM``, ``IQuestCoderForCausalLM``; mistral.py's
``MistralForCausalLM`` and ``Mistral3ForConditionalGeneration`` subclass or wrap it), qwen2.py,
qwen2_moe.py, qwen3.py, qwen3_moe.py, mixtral.py, mixtral_quant.py, phimoe.py and
starcoder2.py build ``RadixAttention`` without ``sliding_window_size``. Mistral-7B-v0.1's
config carries ``sliding_window: 4096`` with no ``use_sliding_window: false``, Phi-3-mini-4k's
``sliding_window: 2047``, Starcoder2's 4096: their attention reads the whole context there (a
Phi-3-mini decode at batch 64 was priced flat from 2K context on, 2.5x too cheap at 8K). A
config's own ``is_hybrid_swa: true`` (this project's opt-in) keeps the window."""

TIED_ARCHS = frozenset({"GemmaForCausalLM", "Gemma2ForCausalLM"})
"""Architectures whose SGLang 0.5.23 model computes its logits from the input embedding,
whatever ``tie_word_embeddings`` says (models/gemma.py and gemma2.py pass
``self.model.embed_tokens`` to the logits processor and skip ``lm_head.weight`` when
loading): no separate LM head's weights. Gemma 2's config.json states no
``tie_word_embeddings``; read as untied, a Gemma-2-9B at TP2 held 0.92 GB per rank more
weights than its checkpoint."""

TIED_BY_DEFAULT_ARCHS = frozenset({"Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"})
"""Architectures whose transformers config defaults ``tie_word_embeddings`` to true (Gemma 3's
text config), which SGLang's models/gemma3_causal.py reads: tied when the config.json does
not say (every other config is read with Llama's default, untied)."""

KV_HEADS_DEFAULTS = {"MistralForCausalLM": 8, "MixtralForCausalLM": 8, "Qwen2ForCausalLM": 32,
                     "Qwen3ForCausalLM": 32, "GemmaForCausalLM": 16}
"""``num_key_value_heads`` where a config.json leaves the key out, by architecture: the
default of the transformers config class SGLang loads it with (``MistralConfig`` and
``MixtralConfig`` 8, ``Qwen2Config`` and ``Qwen3Config`` 32, ``GemmaConfig`` 16); an explicit
``null`` means ``num_attention_heads`` in each of them, and so does a missing key under
``LlamaConfig`` and every architecture not listed. Read as ``num_attention_heads``, a Mistral
config without the key held 4x the KV per token (512 KiB for a Mistral-7B shape)."""

MULTIMODAL_ARCHS = frozenset({
    "CLIPModel", "Cohere2VisionForConditionalGeneration", "Cosmos3EdgeForConditionalGeneration",
    "DeepseekVL2ForCausalLM", "Ernie4_5_VLMoeForConditionalGeneration", "MiniMaxM3SparseForConditionalGeneration",
    "Gemma3ForConditionalGeneration", "Gemma3nForConditionalGeneration", "Gemma4ForConditionalGeneration",
    "EmbeddingGemma2Model", "Gemma4UnifiedForConditionalGeneration", "DiffusionGemmaForBlockDiffusion",
    "Glm4vForConditionalGeneration", "Glm4vMoeForConditionalGeneration", "Glm5NextForConditionalGeneration",
    "GlmOcrForConditionalGeneration", "GlmAsrForConditionalGeneration", "GlmImageForConditionalGeneration",
    "Grok1VForCausalLM", "Grok1AForCausalLM", "LlavaLlamaForCausalLM", "Llama4ForConditionalGeneration",
    "LlavaMistralForCausalLM", "LlavaQwenForCausalLM", "LlavaForConditionalGeneration", "LlavaVidForCausalLM",
    "Lfm2VlForConditionalGeneration", "LightOnOCRForConditionalGeneration", "MiMoV2ASRForCausalLM", "MiniCPMO",
    "MiniCPMV", "Mistral3ForConditionalGeneration", "MultiModalityCausalLM", "MllamaForConditionalGeneration",
    "MossVLForConditionalGeneration", "NemotronH_Nano_VL_V2", "NemotronH_Nano_Omni_Reasoning_V3",
    "NemotronH_Omni_Reasoning_V3", "MuseGlimmerForConditionalGeneration", "MuseSparkForConditionalGeneration",
    "PixtralForConditionalGeneration", "Qwen2AudioForConditionalGeneration", "Qwen2VLForConditionalGeneration",
    "Qwen2_5_VLForConditionalGeneration", "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration", "Qwen4ExpForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
    "Qwen3ASRForConditionalGeneration", "Qwen3OmniMoeForConditionalGeneration", "KimiVLForConditionalGeneration",
    "LocateAnythingForConditionalGeneration", "InternVLChatModel", "InternS1ForConditionalGeneration",
    "InternS1ProForConditionalGeneration", "Phi4MMForCausalLM", "VoxtralForConditionalGeneration",
    "WhisperForConditionalGeneration", "Step3VLForConditionalGeneration", "POINTSV15ChatModel", "DotsVLMForCausalLM",
    "Dots3NoteForCausalLM", "DotsOCRForCausalLM", "Sarashina2VisionForCausalLM", "NVILAForConditionalGeneration",
    "NVILALiteForConditionalGeneration", "DeepseekOCRForCausalLM", "UnlimitedOCRForCausalLM",
    "JetVLMForConditionalGeneration", "PaddleOCRVLForConditionalGeneration", "MiDashengLMModel",
    "StepVLForConditionalGeneration", "Step3p7ForConditionalGeneration", "KimiK25ForConditionalGeneration",
    "BailingMMNativeForConditionalGeneration", "BailingMM2NativeForConditionalGeneration",
    "BailingMoeV3VLForConditionalGeneration",
})
"""Architectures SGLang 0.5.23 serves as multimodal (configs/model_config.py
``multimodal_model_archs``, ``is_multimodal_model``; the MiMo-V2 multimodal names are not listed)."""

VISION_OFF_WHEN_TEXT_ONLY_ARCHS = frozenset({"Llama4ForConditionalGeneration"})
"""Multimodal architectures whose SGLang 0.5.23 model builds no vision tower unless
--enable-multimodal is given (models/mllama4.py ``Llama4ForConditionalGeneration``:
``has_vision = has_vision_weights and enable_multimodal``): their ``vision_config`` costs no
memory. Gemma 3, also text-only by default, builds its SigLIP tower and projector whatever
(gemma3_mm.py ``Gemma3ForConditionalGeneration.__init__``)."""

TEXT_CONFIG_KEYS = ("thinker_config", "llm_config", "language_config", "text_config")
"""Where a multimodal config keeps its language model, in SGLang 0.5.23's order of preference
(utils/hf_transformers/common.py ``get_hf_text_config``: thinker_config > llm_config >
language_config > text_config). InternVL's ``llm_config`` was refused for a missing
``hidden_size``."""

MULTIMODAL_OFF_ARCHS = frozenset({"Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration",
                                  "Step3VLForConditionalGeneration", "InklingForConditionalGeneration"})
"""Multimodal architectures SGLang serves text-only unless --enable-multimodal is given
(configs/model_config.py ``ModelConfig.__init__``: ``mm_disabled_models``)."""

TRTLLM_MLA_ARCHS = frozenset({"DeepseekV3ForCausalLM"})
"""Architectures SGLang serves with the trtllm_mla attention backend on SM100 when no backend is
given (arg_groups/model_overrides/deepseek_v2.py: the DeepSeek V3/R1/V3.1 branch sets
``attention_backend = "trtllm_mla"`` ``if get_platform().is_sm100``). Other architectures that
override registers are not in the analytic table and keep page 1 here."""

NO_BREAKABLE_PREFILL_ARCHS = frozenset({"DeepseekV4ForCausalLM"})
"""Architectures whose breakable prefill graph SGLang 0.5.23 turns off on CUDA too
(arg_groups/cuda_graph_hook.py ``disable_breakable_cudagraph_if_incompatible``: DeepSeek-V4's
indexer scratch pinned in the capture pool runs out of memory; prefill context parallel,
which re-enables it, is not modelled). That hook runs in ``handle_cuda_graph_config``, before
``handle_gpu_memory_settings`` (arg_groups/pipeline.py ``run_resolution_pipeline``), so the memory
reserve has no prefill graphs either (sim/defaults.py ``mem_fraction_static``)."""

MM_PREFILL_GRAPH_ARCHS = frozenset({
    "MiniMaxM3SparseForConditionalGeneration", "Cohere2VisionForConditionalGeneration",
    "Glm5NextForConditionalGeneration", "InternS2MobiusForConditionalGeneration", "PaddleOCRVLForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration", "Qwen4ExpForConditionalGeneration",
    "MuseGlimmerForConditionalGeneration", "MuseSparkForConditionalGeneration", "KimiK3ForConditionalGeneration",
    "KimiK25ForConditionalGeneration", "MiniMaxM3SparseForCausalLM",
})
"""Multimodal architectures that keep the breakable prefill graphs (sglang 0.5.23
configs/model_config.py ``multimodal_breakable_cuda_graph_supported_model_archs``); every other
multimodal model has them turned off (arg_groups/cuda_graph_hook.py
``disable_breakable_cudagraph_if_incompatible``, run before ``handle_gpu_memory_settings``)."""

MM_NO_CHUNKED_PREFILL_ARCHS = frozenset({"Grok1VForCausalLM", "Grok1AForCausalLM", "LlavaLlamaForCausalLM",
                                         "MllamaForConditionalGeneration", "MossVLForConditionalGeneration",
                                         "CLIPModel"})
"""Multimodal architectures SGLang 0.5.23 cannot chunk a prefill of (configs/model_config.py
``is_multimodal_chunked_prefill_supported``): served as multimodal, they get
``--chunked-prefill-size -1`` (arg_groups/model_hook.py ``_handle_model_capability_adjustments``,
run after ``handle_gpu_memory_settings`` has sized the memory with the default chunk)."""

NON_GENERATIVE_ARCHS = frozenset({
    "LlamaEmbeddingModel", "MistralModel", "LlamaForSequenceClassification",
    "LlamaForSequenceClassificationWithNormal_Weights", "InternLM2ForRewardModel", "Qwen2ForRewardModel",
    "Qwen3ForRewardModel", "Qwen2ForSequenceClassification", "Qwen3ForSequenceClassification", "Qwen3Model",
    "CLIPModel", "BertModel", "Contriever", "BertForSequenceClassification", "XLMRobertaModel",
    "XLMRobertaForSequenceClassification", "Gemma2ForSequenceClassification", "EmbeddingGemma2Model",
    "Lfm2BidirectionalModel",
})
"""Architectures SGLang 0.5.23 serves as embedding, reward or classification models, which
never decode (configs/model_config.py ``is_generation_model``)."""

NON_GENERATIVE_HEADS = ("ForSequenceClassification", "ForTokenClassification", "ForMaskedLM", "ForQuestionAnswering",
                        "ForMultipleChoice", "ForRewardModel", "EmbeddingModel")
"""Class-name endings of transformers' task heads that score or embed rather than generate
(the same kinds as :data:`NON_GENERATIVE_ARCHS`, under other model names)."""

ENCODER_MODEL_TYPES = frozenset({"bert", "roberta", "xlm-roberta", "distilbert", "albert", "electra", "deberta",
                                 "deberta-v2", "modernbert", "camembert", "mpnet", "nomic_bert"})
"""``model_type`` values of encoder-only (bidirectional) transformers: no causal decoder to price."""


@cache
def sglang_architectures() -> frozenset[str]:
    """The architectures SGLang 0.5.23 implements natively (``data/sglang_architectures.yaml``,
    read from its models/registry.py ``import_model_classes``), and the names its config classes
    replace by one of those (``renamed``: configs/olmo3.py reads ``Olmo3ForCausalLM`` as
    ``Olmo2ForCausalLM``)."""
    table = yaml.safe_load((_tables() / "sglang_architectures.yaml").read_text())
    return frozenset(table["architectures"]) | frozenset(table["renamed"])


def _check_architectures(cfg: dict[str, Any], archs: list[str], file: str, assumptions: list[str]) -> None:
    """Refuse a config that names no generative decoder; say how one SGLang has no class for is priced.

    A non-generative architecture (:data:`NON_GENERATIVE_ARCHS`, a task head of
    :data:`NON_GENERATIVE_HEADS`) or an encoder-only ``model_type`` (:data:`ENCODER_MODEL_TYPES`)
    is refused: SGLang serves the first as an embedding model, which never decodes. An
    ``architectures`` list naming none of SGLang's native classes (:func:`sglang_architectures`),
    or a config without one, adds an assumption (printed as one ``note:`` line): the roofline
    prices it as a Llama-style dense decoder from the config's fields; SGLang itself would run
    such a name through its Transformers backend or refuse it (model_loader/utils.py
    ``get_model_architecture``, ``resolve_transformers_arch``).

    Raises:
        ConfigError: a non-generative architecture or an encoder-only model_type.
    """
    for a in archs:
        if a in NON_GENERATIVE_ARCHS or a.endswith(NON_GENERATIVE_HEADS):
            raise ConfigError(file, "architectures", a, "a non-generative (embedding, reward or classification) model: "
                              "SGLang serves it without decoding (configs/model_config.py is_generation_model); "
                              "allowed: a generative decoder (e.g. LlamaForCausalLM)")
    model_type = str(cfg.get("model_type", "")).lower()
    if model_type in ENCODER_MODEL_TYPES:
        raise ConfigError(file, "model_type", cfg["model_type"], "an encoder-only (bidirectional) model, which "
                          "does not decode; allowed: a generative decoder's config (e.g. model_type llama)")
    if not archs:
        assumptions.append("no architectures in the config (SGLang picks its model class by it: models/registry.py): "
                           "priced as a Llama-style dense decoder from the config's fields")
    elif not sglang_architectures() & set(archs):
        assumptions.append(f"architectures {', '.join(archs)} is not a model SGLang 0.5.23 implements (models/registry.py;"
                           " it would try its Transformers backend): priced as a Llama-style dense decoder from the "
                           "config's fields")


REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "intermediate_size")
"""config.json keys without which no shape can be derived."""


class ModelArch(BaseModel):
    """One decoder-only transformer's shape (units: elements, not bytes).

    MLA (DeepSeek-V2/V3/V4) when ``kv_lora_rank`` is set: the KV cache holds
    ``kv_lora_rank + qk_rope_head_dim`` elements per token per layer, shared by all heads
    and replicated on every TP rank (SGLang pool_configurator.py ``_compute_cell_size``).
    MoE when ``num_experts`` > 0: layers from ``first_k_dense`` on (every ``moe_layer_step``-th
    of them; the rest have a dense MLP of ``dense_mlp_width``) route each token to
    ``experts_per_token`` of ``num_experts`` experts of ``moe_intermediate_size`` plus
    ``shared_experts`` always-on experts. ``sliding_window``: attention reads at most that
    many past tokens (on ``swa_layer_fraction`` of the layers); ``kv_compress_ratio``: beyond
    the window, a compressed history of one entry per that many tokens is read.
    ``swa_pool_layers``: set when SGLang keeps the windowed layers' KV in a separate SWA
    pool (:data:`HYBRID_SWA_ARCHS`): how many layers it holds; the other
    ``num_layers - swa_pool_layers`` keep every token in the full pool. None: one pool.
    """

    # built at first use: `specsched run` imports this module for its architecture tables only
    model_config = ConfigDict(**_FROZEN, defer_build=True)

    name: str
    source: str = ""
    assumptions: list[str] = []
    architectures: list[str] = []
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    intermediate_size: int
    vocab_size: int
    context_len: int = 4096
    tie_word_embeddings: bool = False
    num_experts: int = 0
    experts_per_token: int = 0
    shared_experts: int = 0
    shared_expert_intermediate_size: int = 0
    moe_intermediate_size: int = 0
    first_k_dense: int = 0
    moe_layer_step: int = 1
    """From ``first_k_dense`` on, layer ``i`` is an MoE layer when ``(i + 1) % moe_layer_step
    == 0``, a dense one otherwise (Llama 4's ``interleave_moe_layer_step``: Scout 1, every
    layer; Maverick 2, every second layer; SGLang 0.5.23 models/llama4.py
    ``Llama4DecoderLayer._is_moe_layer``). 1: every layer from ``first_k_dense`` on."""
    dense_intermediate_size: int | None = None
    """The dense layers' MLP width where it is not ``intermediate_size`` (Llama 4's
    ``intermediate_size_mlp``; its ``intermediate_size`` is the experts' width: models/llama4.py
    ``Llama4DecoderLayer``). None: ``intermediate_size``."""
    attention_chunk_size: int | None = None
    """Chunked local attention (Llama 4): a local layer's query attends only the positions of
    its own ``attention_chunk_size``-token chunk (layers/attention/local_attention.py), not a
    sliding window. ``sliding_window`` holds the same value (the SWA pool's window)."""
    cross_attention_layers: int = 0
    """Layers that attend to the encoder's (image) tokens rather than the text (Mllama's
    ``cross_attention_layers``). Their KV still takes a share of every pool slot (SGLang sizes
    the cell over all ``num_layers``), but a text token's attention does not read the text
    context on them (:func:`roofline.forward_cost`)."""
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    sliding_window: int | None = None
    swa_layer_fraction: float = 1.0
    kv_compress_ratio: int | None = None
    swa_pool_layers: int | None = None
    fp8_native: bool = False
    multimodal: bool = False
    vision_layers: int | None = None
    vision_hidden: int | None = None
    vision_params_sharded: int = 0
    """Vision tower parameters each TP rank holds a ``1/tp`` share of (encoder linears, ...;
    :mod:`sim.analytic.vision`): loaded beside the language model, priced in the memory
    estimate only (the language model is what decodes)."""
    vision_params_replicated: int = 0
    """Vision tower parameters every rank holds whole (patch and position embeddings, norms,
    ``nn.Linear`` projectors)."""
    vision_family: str | None = None
    """The vision encoder as counted (``Qwen2.5-VL ViT``, ``SigLIP + Gemma 3 projector``, ...)."""
    fp8_routed_experts_only: bool = False
    fp8_weight_block: tuple[int, int] | None = None
    """``[block_n, block_k]`` of a block-quantized FP8 checkpoint (``quant_method: fp8`` with
    ``weight_block_size``, as SGLang 0.5.23 layers/quantization/fp8.py ``Fp8Config`` reads it):
    each weight carries one scale per block_n x block_k tile, so every TP rank's share of a split
    weight must be whole tiles (:func:`~sim.analytic.writer.check_fp8_blocks`). None: per-tensor
    or per-channel scales, or no fp8 checkpoint."""
    kv_cache_bytes: int = 2
    """Bytes of one KV cache element: 2 for SGLang's ``--kv-cache-dtype auto`` on a bf16 model
    (and ``bf16``), 1 for ``fp8_e4m3`` / ``fp8_e5m2`` (``profile --analytic --kv-cache-dtype``;
    model_executor/pool_configurator.py ``_compute_cell_size``: the dtype's element size)."""
    kv_cache_quant_algo: str | None = None
    """The KV cache quantization the checkpoint's ``quantization_config`` declares, as SGLang
    0.5.23's quantization config reads it (:func:`checkpoint_kv_cache_quant`); None: none.
    ``--kv-cache-dtype auto`` follows it (:func:`auto_kv_cache_dtype`)."""
    dsa: bool = False
    """DeepSeek sparse attention (:data:`DSA_ARCHS` with ``index_topk``): SGLang picks its KV
    type by GPU."""
    learnable_sink: bool = False
    """A DSA config's ``learnable_sink``: SGLang keeps such a model's KV in bf16."""
    index_topk: int | None = None
    """DeepSeek sparse attention (``dsa``): KV entries each query's MLA attention reads, the
    top-k its lightning indexer selects (all of them when the context is shorter). SGLang
    0.5.23 configs/model_config.py ``get_dsa_index_topk``; the attention kernels read only
    ``topk_indices`` (layers/attention/dsa_backend.py ``forward_extend`` / ``forward_decode``),
    and ``topk_transform`` selects every valid position when ``kv_len <= index_topk``
    (layers/attention/dsa/dsa_indexer.py ``_should_skip_logits_computation``). None: dense."""
    index_n_heads: int | None = None
    """The lightning indexer's heads (``get_dsa_index_n_heads``): its ``wq_b`` is a
    ReplicatedLinear (dsa_indexer.py ``Indexer.__init__``), so every TP rank scores every
    position with all of them."""
    index_head_dim: int | None = None
    """The indexer's key width (``get_dsa_index_head_dim``), stored in fp8 with a 4-byte scale
    per 128 (:func:`~sim.analytic.roofline.indexer_cell_bytes`)."""
    index_shared_layers: int = 0
    """DSA layers that reuse the previous layer's top-k instead of running the indexer
    (configs/model_config.py ``dsa_layer_skips_topk``: ``indexer_types`` "shared",
    ``cli_factor``, ``index_topk_pattern`` "S", ``index_topk_freq``); their index-K buffer has
    no rows (mem_cache/kv_cache_configurator.py ``_should_elide_dsa_index_k``). 0 for
    DeepSeek-V3.2."""
    weight_format: str | None = None
    """A 4-bit checkpoint's format (``mxfp4``, ``nvfp4``: :func:`fp4_format`; ``int4``, AWQ/GPTQ
    w4a16: :func:`int4_format`); None otherwise.
    Which modules it covers and its bits per weight: roofline.py ``FP4_BITS``."""

    @property
    def checkpoint_dtype(self) -> str:
        """The weights' format when ``--dtype`` is not given: the 4-bit format, else fp8 for
        an fp8 checkpoint (all its linears; one of fp8 routed experts only keeps bf16 here,
        roofline.py prices those experts at 1 byte), else bf16."""
        return self.weight_format or ("fp8" if self.fp8_native and not self.fp8_routed_experts_only else "bf16")

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def sparse_attention(self) -> bool:
        """DeepSeek sparse attention priced (an ``index_topk``: DSA's top-k MLA and indexer)."""
        return self.index_topk is not None

    @property
    def indexer_layers(self) -> int:
        """Layers that run the lightning indexer and hold its keys (0 without DSA)."""
        return self.num_layers - self.index_shared_layers if self.sparse_attention else 0

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def moe_layers(self) -> int:
        """MoE layers: from ``first_k_dense`` on, every ``moe_layer_step``-th."""
        if not self.is_moe:
            return 0
        step = max(1, self.moe_layer_step)
        return sum(1 for i in range(self.first_k_dense, self.num_layers) if (i + 1) % step == 0)

    @property
    def dense_layers(self) -> int:
        """Layers with a dense MLP (all of them for a dense model)."""
        return self.num_layers - self.moe_layers

    @property
    def dense_mlp_width(self) -> int:
        """A dense layer's MLP width."""
        return self.dense_intermediate_size or self.intermediate_size

    @property
    def self_attention_layers(self) -> int:
        """Layers whose attention reads the text context (all but the cross-attention ones)."""
        return self.num_layers - self.cross_attention_layers

    @property
    def qk_head_dim(self) -> int:
        """Query/key width per head (MLA: nope + rope)."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.is_mla else self.head_dim

    def kv_heads_per_rank(self, tp: int) -> int:
        """KV heads one TP rank stores: heads split over ranks, replicated when fewer than
        ranks (SGLang ModelConfig.get_num_kv_heads)."""
        return max(1, self.num_kv_heads // tp)


def _tables() -> Path:
    return Path(str(resources.files("specsched.sim.analytic") / "data"))


@cache
def shipped_models() -> dict[str, dict[str, Any]]:
    """The shipped model table (name -> config.json-style mapping)."""
    return yaml.safe_load((_tables() / "models.yaml").read_text())


def _get(cfg: dict[str, Any], file: str, key: str, *alts: str, default: Any = ..., kind: type = int) -> Any:
    for k in (key, *alts):
        if k in cfg and cfg[k] is not None:
            v = cfg[k]
            if kind is int and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ConfigError(file, k, v, "must be a non-negative integer")
            return v
    if default is ...:
        raise ConfigError(file, key, "<missing>", "required to derive the model's shape")
    return default


CONTEXT_LENGTH_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length",
                       "max_position_embeddings")
"""config.json keys SGLang reads the context length from, first found wins (sglang 0.5.23
utils/hf_transformers/common.py ``CONTEXT_LENGTH_KEYS``; none: 2048)."""


def _context_len(cfg: dict[str, Any], file: str) -> int:
    """The model's context length as SGLang derives it (utils/hf_transformers/common.py
    ``get_context_length``, read by configs/model_config.py ``_derive_context_length``): the
    first of :data:`CONTEXT_LENGTH_KEYS` present, times ``rope_scaling.factor`` unless
    ``rope_scaling`` names ``original_max_position_embeddings`` or ``rope_type`` llama3 (then
    1); 2048 when no key is present.

    A Gemma 3 language model (``model_type: gemma3_text``) takes no factor: transformers
    5.19.0's ``Gemma3TextConfig.convert_rope_params_to_dict`` moves ``rope_scaling`` into
    ``rope_parameters["full_attention"]`` and ``config.rope_scaling`` returns the whole
    ``rope_parameters`` (configuration_utils.py), a mapping by layer kind with no ``factor`` of
    its own: gemma-3-27b-it (131072 positions, linear factor 8) is served at 131072, not
    1048576."""
    rope = cfg.get("rope_scaling")
    factor: float = 1
    if rope is not None and not isinstance(rope, dict):
        raise ConfigError(file, "rope_scaling", rope, "must be a mapping (or null)")
    if rope and cfg.get("model_type") == "gemma3_text":
        rope = None
    if rope:
        factor = rope.get("factor", 1)
        if isinstance(factor, bool) or not isinstance(factor, int | float) or not 0 < factor < 1e6:
            raise ConfigError(file, "rope_scaling.factor", factor, "must be a positive number below 1e6")
        if "original_max_position_embeddings" in rope or rope.get("rope_type") == "llama3":
            factor = 1
    for key in CONTEXT_LENGTH_KEYS:
        if cfg.get(key) is not None:
            n = _get(cfg, file, key)
            if n == 0:
                raise ConfigError(file, key, 0, "must be >= 1")
            return max(1, int(factor * n))
    return 2048


def _strings(v: Any, file: str = "config.json", key: str = "architectures") -> list[str]:
    """A config list of names (``architectures``, ``assumptions``); one string is one name,
    not a list of its characters; null is none.

    Raises:
        ConfigError: ``v`` is neither a list, a string nor null (a number was a TypeError
            traceback).
    """
    if isinstance(v, str):
        return [v]
    if v is not None and not isinstance(v, list | tuple):
        raise ConfigError(file, key, v, "must be a list of names (or one name)")
    return [str(a) for a in v or [] if isinstance(a, str)]


UNMODELLED_LAYER_KEYS = (
    ("full_attention_interval", "a linear-attention hybrid (Qwen3-Next, Qwen3.5: Gated DeltaNet layers between "
     "full-attention ones, whose recurrent state SGLang keeps in a separate mamba pool, configs/hybrid_arch.py "
     "hybrid_gdn_config)"),
    ("linear_attn_config", "a linear-attention hybrid (Kimi Linear's KDA layers, configs/hybrid_arch.py)"),
    ("hybrid_override_pattern", "a Mamba hybrid (Nemotron-H: Mamba-2 layers, configs/hybrid_arch.py mamba2_config)"),
    ("layers_block_type", "a Mamba or linear-attention hybrid (configs/hybrid_arch.py)"),
    ("hidden_size_per_layer_input", "Gemma 3n (per-layer input embeddings of vocab_size_per_layer_input rows, "
     "AltUp streams, KV shared by its last num_kv_shared_layers layers: models/gemma3n_causal.py)"),
    ("num_kv_shared_layers", "Gemma 3n (KV shared by its last num_kv_shared_layers layers: models/gemma3n_causal.py)"),
)
"""config.json keys of layer designs the roofline does not price, each refused in one line
naming it rather than priced as a stack of full-attention layers: Qwen3-Next-80B-A3B was
given 48 layers of KV (96 KiB a token) where 12 full-attention layers hold KV and 36 hold a
fixed recurrent state; Gemma 3n's per-layer ``intermediate_size`` list was refused as "must be
a non-negative integer" and its 2.1B per-layer embedding parameters have no place in the
shape."""

LAYER_KINDS = ("sliding_attention", "full_attention")
"""The ``layer_types`` kinds the roofline prices (:func:`_swa_layers`)."""


def _refuse_unmodelled(cfg: dict[str, Any], file: str) -> None:
    """Refuse a config whose layers the roofline cannot price (:data:`UNMODELLED_LAYER_KEYS`, or
    a ``layer_types`` kind other than :data:`LAYER_KINDS`, such as ``linear_attention``).

    Raises:
        ConfigError: naming the key, its value and the design it marks.
    """
    for key, what in UNMODELLED_LAYER_KEYS:
        if cfg.get(key) not in (None, 0, [], ""):
            v = cfg[key]
            raise ConfigError(file, key, v if not isinstance(v, list | dict) else f"[{type(v).__name__}]",
                              f"marks {what}: not modelled by the analytic roofline, so no profile is written")
    types = cfg.get("layer_types")
    if isinstance(types, list):
        other = sorted({k for k in types if isinstance(k, str) and k not in LAYER_KINDS})
        if other:
            raise ConfigError(file, "layer_types", f"[... {', '.join(other)} ...]",
                              f"{other[0]} layers are not modelled (only {' and '.join(LAYER_KINDS)}: a "
                              "linear-attention or state-space hybrid keeps a recurrent state SGLang sizes apart "
                              "from the KV pool); no profile is written")


def _swa_layers(cfg: dict[str, Any], file: str, window: int | None) -> tuple[int | None, float, int | None]:
    """(sliding window, share of the layers it applies to) from a config.json.

    ``layer_types`` (transformers' per-layer list, "sliding_attention" / "full_attention")
    decides which layers are windowed, as SGLang reads it (sglang 0.5.23
    configs/model_config.py ``get_hybrid_layer_ids``; models/gemma3_causal.py and
    models/gpt_oss.py build each layer from ``config.layer_types[layer_id]``): Gemma 3 has
    five windowed layers to one global, gpt-oss alternates, a list without a sliding layer
    has no window. Gemma 2's configs carry no list; SGLang windows its even layers
    (models/gemma2.py ``use_sliding_window = layer_id % 2 == 0``). Without either, a window
    applies to every layer, unless ``swa_layer_fraction`` gives the share (an architecture
    SGLang builds without a window, :data:`FULL_ATTENTION_ARCHS`, has none whatever the
    config says).
    Another kind (linear attention, say) is refused before this (:func:`_refuse_unmodelled`).

    The SWA pool: for :data:`HYBRID_SWA_ARCHS` (or ``is_hybrid_swa: true``) with a window,
    SGLang puts the ``sliding_attention`` layers' KV in the SWA pool and the
    ``full_attention`` layers' in the full pool (configs/model_config.py
    ``get_hybrid_layer_ids``). A list without a full layer (all-SWA: SGLang's pool is then
    the SWA pool alone) is kept in one pool here.

    Raises:
        ConfigError: ``layer_types`` is not a list of those names, its length is not
            ``num_hidden_layers`` (SGLang indexes it by layer id), or ``swa_layer_fraction``
            is not a number in [0, 1].
    """
    layers = cfg["num_hidden_layers"]
    types = cfg.get("layer_types")
    if types is not None:
        kinds = ("sliding_attention", "full_attention")
        if not isinstance(types, list) or not types or not all(isinstance(k, str) for k in types):
            raise ConfigError(file, "layer_types", types if not isinstance(types, list) else "[...]",
                              f"must be a non-empty list of layer kinds ({', '.join(kinds)})")
        if len(types) != layers:
            raise ConfigError(file, "layer_types", f"[{len(types)} kinds]",
                              f"must name one kind per layer: num_hidden_layers is {layers}")
        sliding = sum(k == "sliding_attention" for k in types)
        if window is None or not sliding:
            return None, 1.0, None
        hybrid = (bool(HYBRID_SWA_ARCHS & set(_strings(cfg.get("architectures")))) or cfg.get("is_hybrid_swa") is True)
        full = sum(k == "full_attention" for k in types)
        return window, sliding / layers, sliding if hybrid and full else None
    if window is not None and "Gemma2ForCausalLM" in _strings(cfg.get("architectures")):
        return window, ((layers + 1) // 2) / layers, None
    f = cfg.get("swa_layer_fraction", 1.0)
    if isinstance(f, bool) or not isinstance(f, int | float) or not 0 <= f <= 1:
        raise ConfigError(file, "swa_layer_fraction", f, "must be a number in [0, 1] (the share of layers with the window)")
    return window, float(f), None


GEMMA3_TEXT_DEFAULTS = {"vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                        "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                        "max_position_embeddings": 131_072, "sliding_window": 4096}
"""transformers 5.19.0's ``Gemma3TextConfig`` defaults (models/gemma3/configuration_gemma3.py;
the version SGLang 0.5.23 requires), which fill the keys a Gemma 3 config.json leaves out:
Gemma-3-27b-it's ``text_config`` states no ``vocab_size``, Gemma-3-4b-it's no heads or
``head_dim`` either."""


LLAMA_DEFAULTS = {"vocab_size": 32_000, "hidden_size": 4096, "intermediate_size": 11_008, "num_hidden_layers": 32,
                  "num_attention_heads": 32, "max_position_embeddings": 2048}
"""transformers' ``LlamaConfig`` defaults (models/llama/configuration_llama.py), which fill the
keys a ``model_type: llama`` config leaves out: llava-hf/llava-1.5-7b-hf's ``text_config``
states only its vocabulary and context (a Vicuna-7B: the defaults are its shape), and was
refused for its missing ``hidden_size``."""


DEEPSEEK_DEFAULTS: dict[str, tuple[str, dict[str, int]]] = {
    "deepseek_v2": ("DeepseekV2Config", {"kv_lora_rank": 512, "moe_intermediate_size": 1407, "n_routed_experts": 64,
                                         "n_shared_experts": 2, "first_k_dense_replace": 0}),
    "deepseek_v3": ("DeepseekV3Config", {"kv_lora_rank": 512, "moe_intermediate_size": 2048, "n_routed_experts": 256,
                                         "n_shared_experts": 1, "first_k_dense_replace": 3, "num_experts_per_tok": 8}),
}
"""transformers 5.19.0's ``DeepseekV2Config`` / ``DeepseekV3Config`` defaults
(models/deepseek_v2/configuration_deepseek_v2.py, deepseek_v3/configuration_deepseek_v3.py;
the version SGLang 0.5.23 requires, whose models/deepseek_v2.py reads them off the loaded
config) for the keys that decide the shape, by ``model_type``: a config without
``kv_lora_rank`` was priced as multi-head attention (DeepSeek-V2-Lite: 216 KiB of KV a token,
not 30.4), one without ``moe_intermediate_size`` gave every expert the dense MLP's width
(224.8 GiB of weights, not 30.3). The MLA head sizes follow (:data:`MLA_DEFAULTS`)."""

CONFIG_CLASS_DEFAULTS: dict[str, tuple[str, dict[str, int]]] = {"llama": ("LlamaConfig", LLAMA_DEFAULTS),
                                                                  **DEEPSEEK_DEFAULTS}
"""``model_type`` -> (the transformers config class, the defaults it fills for missing keys)."""

_SPELLINGS = {"n_routed_experts": ("n_routed_experts", "num_experts", "num_local_experts")}
"""Keys a config may give under other names (``DeepseekV2Config.attribute_map`` maps
``num_experts``, V3's ``num_local_experts``): one of them given, the class default is not filled."""


def _listed(values: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in values.items())


MLA_DEFAULTS = {"qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "q_lora_rank": 1536}
"""transformers' ``DeepseekV2Config`` / ``DeepseekV3Config`` defaults for the MLA head sizes
(models/deepseek_v2/configuration_deepseek_v2.py, deepseek_v3/configuration_deepseek_v3.py;
SGLang 0.5.23 models/deepseek_v2.py ``DeepseekV2AttentionMLA`` reads them off the loaded
config), which fill the keys an MLA config (one with ``kv_lora_rank``) leaves out. A key given
as null stays null: DeepSeek-V2-Lite states ``q_lora_rank: null`` (no query compression).
Without them a missing ``qk_rope_head_dim`` read as 0 and shrank the KV cache by 1/9."""


def _mla_defaults(cfg: dict[str, Any], assumptions: list[str]) -> dict[str, Any]:
    """``cfg`` with :data:`MLA_DEFAULTS` filled in where an MLA config (``kv_lora_rank`` set)
    leaves a key out, each default named in ``assumptions``; other configs unchanged."""
    if cfg.get("kv_lora_rank") is None:
        return cfg
    missing = {k: v for k, v in MLA_DEFAULTS.items() if k not in cfg}
    if missing:
        assumptions.append("MLA keys missing from the config, taken at DeepseekV2Config's defaults: "
                           + _listed(missing))
    return {**cfg, **missing}


CHATGLM_KEYS = {"num_hidden_layers": ("num_layers", 28), "vocab_size": ("padded_vocab_size", 65024),
                "intermediate_size": ("ffn_hidden_size", 13696), "head_dim": ("kv_channels", 128),
                "num_key_value_heads": ("multi_query_group_num", 1)}
"""transformers key -> (its ChatGLM name, ChatGLMConfig's default), as SGLang 0.5.23 reads a
``model_type: chatglm`` config (GLM-4-9B-chat, ChatGLM2/3): configs/chatglm.py ``ChatGLMConfig``
(``attribute_map`` num_hidden_layers -> num_layers; ``vocab_size = padded_vocab_size``) and
configs/model_config.py ``get_total_num_kv_heads`` (``multi_query_group_num``); the context is
``seq_length`` (``max_position_embeddings = seq_length``)."""


def _chatglm_keys(cfg: dict[str, Any]) -> dict[str, Any]:
    """A ChatGLM config with the transformers names :data:`CHATGLM_KEYS` maps, each missing
    one at ChatGLMConfig's default (named in an assumption line)."""
    out = dict(cfg)
    missing = {}
    for key, (name, default) in CHATGLM_KEYS.items():
        if key in cfg:
            continue
        if name in cfg:
            out[key] = cfg[name]
        else:
            out[key] = missing[key] = default
    if "max_position_embeddings" not in cfg and "seq_length" not in cfg:
        out["seq_length"] = missing["seq_length"] = 2048
    if missing:
        out["assumptions"] = [*_strings(cfg.get("assumptions"), "config.json", "assumptions"),
                              f"keys missing from the chatglm config, taken at ChatGLMConfig's defaults: {_listed(missing)}"]
    return out


def _config_class_defaults(cfg: dict[str, Any], file: str) -> dict[str, Any]:
    """``cfg`` as the transformers config class SGLang loads it with fills it in, for the
    classes whose published configs lean on their defaults (``model_type: gemma3_text``: a
    Gemma 3 language model, alone or as a multimodal model's ``text_config``; ``llama``:
    :data:`LLAMA_DEFAULTS`; ``deepseek_v2`` / ``deepseek_v3``: :data:`DEEPSEEK_DEFAULTS`; each
    named in an assumption line).

    The class also derives ``layer_types`` from the legacy ``sliding_window_pattern`` (default
    6) where the file has no list: layer ``i`` is ``sliding_attention`` unless ``(i + 1)`` is a
    multiple of it (``Gemma3TextConfig.__post_init__``), the list SGLang's
    models/gemma3_causal.py builds each layer from. Without it every layer of a Gemma 3 was
    windowed, so its global layers' KV read stopped growing past the window.

    Raises:
        ConfigError: ``sliding_window_pattern`` is not a positive integer.
    """
    if cfg.get("model_type") == "chatglm":
        cfg = _chatglm_keys(cfg)
    if cfg.get("model_type") in CONFIG_CLASS_DEFAULTS:
        cls, defaults = CONFIG_CLASS_DEFAULTS[cfg["model_type"]]
        missing = {k: v for k, v in defaults.items() if not any(a in cfg for a in _SPELLINGS.get(k, (k,)))}
        if not missing:
            return cfg
        said = f"keys missing from the {cfg['model_type']} config, taken at {cls}'s defaults: {_listed(missing)}"
        return {**cfg, **missing, "assumptions": [*_strings(cfg.get("assumptions"), file, "assumptions"), said]}
    if cfg.get("model_type") == "olmo3" and cfg.get("layer_types") is None and isinstance(cfg.get("num_hidden_layers"), int):
        # sglang 0.5.23 configs/olmo3.py Olmo3Config: every 4th layer full, the others windowed
        return {**cfg, "layer_types": ["sliding_attention" if (i + 1) % 4 else "full_attention"
                                       for i in range(cfg["num_hidden_layers"])],
                "assumptions": [*_strings(cfg.get("assumptions"), file, "assumptions"),
                                "layer_types from Olmo3Config's default: every 4th layer attends globally, "
                                "the others in the window"]}
    if cfg.get("model_type") != "gemma3_text":
        return cfg
    missing = {k: v for k, v in GEMMA3_TEXT_DEFAULTS.items()
               if cfg.get(k) is None and not (k == "sliding_window" and k in cfg)}
    said = ([f"keys missing from the gemma3_text config, taken at Gemma3TextConfig's defaults: {_listed(missing)}"]
            if missing else [])
    cfg = {**GEMMA3_TEXT_DEFAULTS, **{k: v for k, v in cfg.items() if v is not None or k == "sliding_window"}}
    if cfg.get("layer_types") is None and isinstance(cfg.get("num_hidden_layers"), int):
        pattern = _get(cfg, file, "sliding_window_pattern", default=6)
        if pattern == 0:
            raise ConfigError(file, "sliding_window_pattern", 0, "must be >= 1 (every n-th layer attends globally)")
        cfg["layer_types"] = ["sliding_attention" if (i + 1) % pattern else "full_attention"
                              for i in range(cfg["num_hidden_layers"])]
        said.append(f"layer_types from sliding_window_pattern {pattern}"
                    f"{'' if 'sliding_window_pattern' in cfg else ' (the default)'}: every {pattern}th layer "
                    "attends globally, the others in the window")
    if said:   # named as the llama and deepseek defaults are: gemma-3-4b-it's heads were all defaults, unsaid
        cfg["assumptions"] = [*_strings(cfg.get("assumptions"), file, "assumptions"), *said]
    return cfg


def _attention_chunk_size(cfg: dict[str, Any], file: str) -> int | None:
    """The config's ``attention_chunk_size`` (tokens per chunk of Llama 4's local attention;
    SGLang 0.5.23 configs/model_config.py reads it off the text config), or None.

    Raises:
        ConfigError: it is present but not a positive integer.
    """
    v = cfg.get("attention_chunk_size")
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
        raise ConfigError(file, "attention_chunk_size", v,
                          "must be a positive integer (tokens per local-attention chunk), or null for none")
    return v


def _local_attention_layers(layers: int, chunk: int) -> tuple[int | None, float, int | None]:
    """(window, share of windowed layers, SWA-pool layers) of a :data:`LOCAL_ATTENTION_ARCHS`
    model of ``layers`` layers: every :data:`LOCAL_ATTENTION_GLOBAL_EVERY`-th layer global (full
    pool), the others local with a window of ``chunk`` (SWA pool), as SGLang 0.5.23's
    configs/model_config.py ``get_hybrid_layer_ids`` splits them and
    model_runner_components/load_model_utils.py ``resolve_sliding_window_size`` sizes the
    window. A model too short to have a global layer keeps one pool (the SWA pool alone)."""
    local = sum(1 for i in range(layers) if (i + 1) % LOCAL_ATTENTION_GLOBAL_EVERY)
    return chunk, local / layers, local if local < layers else None


def _moe_layer_pattern(cfg: dict[str, Any], file: str) -> tuple[int, int | None]:
    """(MoE layer step, dense layers' MLP width) from Llama 4's ``interleave_moe_layer_step``
    and ``intermediate_size_mlp`` (SGLang 0.5.23 models/llama4.py
    ``Llama4DecoderLayer._is_moe_layer``: layer ``i`` is MoE when ``(i + 1) % step == 0``, every
    layer when the step is 0; a dense layer's ``LlamaMLP`` is ``intermediate_size_mlp`` wide).
    Absent: (1, None), every layer from ``first_k_dense_replace`` on is MoE.

    Raises:
        ConfigError: either is present but not an integer of the allowed range.
    """
    step = cfg.get("interleave_moe_layer_step", 1)
    if step is None:
        step = 1
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ConfigError(file, "interleave_moe_layer_step", step,
                          "must be a non-negative integer (every n-th layer is MoE; 0 or 1: every layer)")
    width = cfg.get("intermediate_size_mlp")
    if width is not None and (isinstance(width, bool) or not isinstance(width, int) or width < 1):
        raise ConfigError(file, "intermediate_size_mlp", width, "must be a positive integer (the dense layers' MLP "
                          "width), or absent")
    return max(1, step), width


def _cross_attention_layers(cfg: dict[str, Any], file: str) -> int:
    """How many layers Mllama's ``cross_attention_layers`` lists (SGLang 0.5.23 models/mllama.py
    ``MllamaTextModel``: those layer ids are ``MllamaCrossAttentionDecoderLayer``, whose
    attention reads the encoder's tokens); 0 when absent.

    Raises:
        ConfigError: not a list of distinct layer ids in ``[0, num_hidden_layers)``.
    """
    ids = cfg.get("cross_attention_layers")
    if ids is None:
        return 0
    layers = cfg["num_hidden_layers"]
    if (not isinstance(ids, list) or len(set(map(repr, ids))) != len(ids)
            or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers for i in ids)):
        shown = ids if not isinstance(ids, list) or len(ids) <= 12 else f"[{len(ids)} entries]"
        raise ConfigError(file, "cross_attention_layers", shown,
                          f"must be a list of distinct layer ids 0..{layers - 1} (num_hidden_layers is {layers})")
    return len(ids)


def from_hf_config(cfg: dict[str, Any], name: str, file: str) -> ModelArch:
    """A :class:`ModelArch` from a config.json mapping (transformers key names).

    Raises:
        ConfigError: a required key is missing or not a non-negative integer, a size is 0,
            ``num_key_value_heads`` does not divide ``num_attention_heads``, ``head_dim`` is
            missing where ``hidden_size / num_attention_heads`` is not whole, or
            ``num_experts_per_tok`` exceeds the experts (names file, key, value, what is
            allowed).
    """
    outer_archs = _strings(cfg.get("architectures"), file)
    multimodal = bool(MULTIMODAL_ARCHS & set(outer_archs)) and outer_archs[0] not in MULTIMODAL_OFF_ARCHS
    has_tower = bool(MULTIMODAL_ARCHS & set(outer_archs[:1]))
    if (has_tower or multimodal) and cfg.get("vision_config") is not None and not isinstance(cfg["vision_config"], dict):
        raise ConfigError(file, "vision_config", cfg["vision_config"], "must be a mapping (or null)")
    outer = cfg
    vision = cfg.get("vision_config") if multimodal else None
    vision_layers = vision_hidden = None
    if vision is not None:   # SGLang's getattr fallbacks (a ViT-L/14): vision.py owns them
        vision_layers, vision_hidden = vit_size_for_memory(vision, file)
    text_key = next((k for k in TEXT_CONFIG_KEYS if isinstance(cfg.get(k), dict)), "text_config")
    text_cfg = cfg.get(text_key)
    if text_cfg is not None and not isinstance(text_cfg, dict) and "hidden_size" not in cfg:
        raise ConfigError(file, "text_config", text_cfg, "must be a mapping (a multimodal config's language model)")
    if isinstance(text_cfg, dict) and "hidden_size" not in cfg:
        cfg = {**cfg, **text_cfg}  # multimodal wrappers keep the language model inside
    cfg = _config_class_defaults(cfg, file)
    _refuse_unmodelled(cfg, file)
    assumptions = _strings(cfg.get("assumptions"), file, "assumptions")
    _check_architectures(outer, outer_archs, file, assumptions)
    cfg = _mla_defaults(cfg, assumptions)
    for k in REQUIRED:
        _get(cfg, file, k)
        if cfg[k] == 0:
            raise ConfigError(file, k, 0, "must be >= 1")
    hidden, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    kv_lora = _get(cfg, file, "kv_lora_rank", default=None)
    v_head = _get(cfg, file, "v_head_dim", default=None)
    head_dim = _get(cfg, file, "head_dim", default=None)
    if head_dim is None and kv_lora is None and hidden % heads:
        raise ConfigError(file, "head_dim", "<missing>", f"required when hidden_size {hidden} is not a multiple of "
                          f"num_attention_heads {heads}")
    head_dim = hidden // heads if head_dim is None else head_dim
    for key, v in (("head_dim", head_dim), ("v_head_dim", v_head), ("kv_lora_rank", kv_lora)):
        if v == 0:
            raise ConfigError(file, key, 0, "must be >= 1")
    archs = _strings(cfg.get("architectures"), file)
    kv_default = heads if "num_key_value_heads" in cfg else KV_HEADS_DEFAULTS.get(archs[0] if archs else "", heads)
    kv_heads = _get(cfg, file, "num_key_value_heads", default=kv_default)
    if kv_heads < 1 or heads % kv_heads:
        divisors = [d for d in range(1, heads + 1) if heads % d == 0]
        why = ("" if cfg.get("num_key_value_heads") is not None
               else f" (the {archs[0]} config's default where the key is missing; state it)")
        raise ConfigError(file, "num_key_value_heads", kv_heads, f"must divide num_attention_heads {heads} "
                          f"(grouped-query attention){why}; allowed: {', '.join(map(str, divisors[:12]))}")
    num_experts = _get(cfg, file, "n_routed_experts", "num_experts", "num_local_experts", default=0)
    shared = _get(cfg, file, "n_shared_experts", default=0)
    shared_inter = _get(cfg, file, "shared_expert_intermediate_size", default=0)
    if shared_inter and not shared:
        shared = 1
    window = _get(cfg, file, "sliding_window", default=None)
    if cfg.get("use_sliding_window") is False:
        window = None
    if window == 0:
        raise ConfigError(file, "sliding_window", 0, "must be >= 1 (tokens a windowed layer attends), or null for none")
    archs = _strings(cfg.get("architectures"), file)
    # SGLang names the model by the outer config's architectures (hf_config.architectures[0]: its
    # model hooks, speculative defaults, multimodal rules); the layer rules here read the
    # language model's own (``archs``), which a multimodal text_config may name
    served_archs = [*outer_archs, *(a for a in archs if a not in outer_archs)] if multimodal else archs
    if window is not None and FULL_ATTENTION_ARCHS & set(archs[:1]) and cfg.get("is_hybrid_swa") is not True:
        assumptions.append(f"sliding_window {window} not applied: SGLang's {archs[0]} attends every position "
                           "(its RadixAttention has no sliding_window_size)")
        window = None
    if _get(cfg, file, "max_position_embeddings", "max_sequence_length", default=1) == 0:
        raise ConfigError(file, "max_position_embeddings", 0, "must be >= 1 (the model's context length)")
    window, swa_fraction, swa_pool_layers = _swa_layers(cfg, file, window)
    chunk = _attention_chunk_size(cfg, file)
    if chunk is not None and LOCAL_ATTENTION_ARCHS & set(outer_archs):
        window, swa_fraction, swa_pool_layers = _local_attention_layers(cfg["num_hidden_layers"], chunk)
    elif chunk is not None:
        assumptions.append(f"attention_chunk_size {chunk} not applied: SGLang runs chunked local attention for "
                           f"{', '.join(sorted(LOCAL_ATTENTION_ARCHS))} only (configs/model_config.py "
                           "is_local_attention_model); every layer is priced as global attention")
        chunk = None
    moe_step, dense_inter = _moe_layer_pattern(cfg, file)
    cross = _cross_attention_layers(cfg, file)
    llama4 = str(cfg.get("model_type", "")).startswith("llama4") or any(a.startswith("Llama4") for a in served_archs)
    if llama4 and num_experts and not shared:
        # models/llama4.py Llama4MoE: a shared_expert LlamaMLP of intermediate_size beside the routed experts
        shared, shared_inter = 1, cfg["intermediate_size"]
    tower = None
    if has_tower and isinstance(outer.get("vision_config"), dict):
        if outer_archs[0] in VISION_OFF_WHEN_TEXT_ONLY_ARCHS:
            assumptions.append(f"vision_config not loaded: SGLang builds {outer_archs[0]}'s vision model only with "
                               "--enable-multimodal (models/mllama4.py has_vision); the language model alone is priced")
        else:
            tower, guess = vision_tower(outer, outer_archs[0], hidden, file)
            assumptions.append(
                f"vision tower ({tower.family}) counted from vision_config: {tower.params / 1e6:.0f}M parameters in "
                f"bf16, {tower.sharded / 1e6:.0f}M split over the TP ranks and {tower.replicated / 1e6:.0f}M whole on "
                "each; loaded on every rank, so it shrinks the KV pool; its encoder time is not priced")
            if guess:
                assumptions.append(guess)
    elif has_tower and outer_archs[0] not in VISION_OFF_WHEN_TEXT_ONLY_ARCHS:
        # SGLang builds the tower from the class's default vision config then; its size is not
        # read here, so say the KV pool is sized without it rather than pass silently
        assumptions.append(f"no vision_config: {outer_archs[0]}'s vision tower is not counted, so the KV pool is "
                           "sized as if its weights were absent (state vision_config to count them)")
    quant = cfg.get("quantization_config") or {}
    method = str(quant.get("quant_method", "")).lower() if isinstance(quant, dict) else str(quant).lower()
    fp8 = method in ("fp8", "mxfp8") or fp8_checkpoint(quant)
    fp4 = fp4_format(quant) or int4_format(quant)
    if fp4 == "int4" and isinstance(quant, dict) and quant.get("group_size", INT4_GROUP) not in (INT4_GROUP, -1):
        assumptions.append(f"quantization_config group_size {quant.get('group_size')!r} priced as {INT4_GROUP} "
                           "(int4 weights at roofline.FP4_BITS['int4'] bits each)")
    if method and not fp8 and not fp4:
        # only bf16, fp8 and 4-bit fp (mxfp4, nvfp4) weights are priced (roofline.py weight_bytes_per_element)
        assumptions.append(f"quantization_config {method!r} is not modelled: weights priced as bf16 "
                           "(--dtype fp8 for an 8-bit estimate)")
    tied = cfg.get("tie_word_embeddings")
    if tied is not None and not isinstance(tied, bool):
        # a string "false" read as truthy priced an untied LM head as tied
        raise ConfigError(file, "tie_word_embeddings", tied, "must be true or false (JSON booleans), or absent")
    if num_experts and not _get(cfg, file, "num_experts_per_tok", default=0):
        raise ConfigError(file, "num_experts_per_tok", "<missing>", "required for a mixture-of-experts model")
    if num_experts and cfg["num_experts_per_tok"] > num_experts:
        raise ConfigError(file, "num_experts_per_tok", cfg["num_experts_per_tok"],
                          f"must be 1..{num_experts} (the routed experts)")
    if num_experts and _get(cfg, file, "moe_intermediate_size", default=1) == 0:
        raise ConfigError(file, "moe_intermediate_size", 0, "must be >= 1")
    if num_experts and _get(cfg, file, "first_k_dense_replace", default=0) > cfg["num_hidden_layers"]:
        # a larger count left a negative number of MoE layers: a 382-error pydantic traceback
        raise ConfigError(file, "first_k_dense_replace", cfg["first_k_dense_replace"],
                          f"must be 0..{cfg['num_hidden_layers']} (the dense layers before the MoE ones, "
                          "at most num_hidden_layers)")
    dsa = bool(DSA_ARCHS & set(archs[:1])) and cfg.get("index_topk") is not None
    return ModelArch(
        name=name,
        source=str(cfg.get("source", file)),
        architectures=served_archs,
        assumptions=assumptions,
        hidden_size=hidden,
        num_layers=cfg["num_hidden_layers"],
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        v_head_dim=v_head if v_head is not None else head_dim,
        intermediate_size=cfg["intermediate_size"],
        vocab_size=cfg["vocab_size"],
        context_len=_context_len(cfg, file),
        multimodal=multimodal,
        vision_layers=vision_layers,
        vision_hidden=vision_hidden,
        vision_params_sharded=tower.sharded if tower else 0,
        vision_params_replicated=tower.replicated if tower else 0,
        vision_family=tower.family if tower else None,
        tie_word_embeddings=bool(TIED_ARCHS & set(archs[:1]))
        or bool(cfg.get("tie_word_embeddings", bool(TIED_BY_DEFAULT_ARCHS & set(archs[:1])))),
        num_experts=num_experts,
        experts_per_token=_get(cfg, file, "num_experts_per_tok", default=0),
        shared_experts=shared,
        shared_expert_intermediate_size=shared_inter,
        moe_intermediate_size=_get(cfg, file, "moe_intermediate_size", default=cfg["intermediate_size"]) if num_experts else 0,
        first_k_dense=_get(cfg, file, "first_k_dense_replace", default=0) if num_experts else 0,
        moe_layer_step=moe_step,
        dense_intermediate_size=dense_inter,
        attention_chunk_size=chunk,
        cross_attention_layers=cross,
        q_lora_rank=_get(cfg, file, "q_lora_rank", default=None),
        kv_lora_rank=kv_lora,
        qk_nope_head_dim=_get(cfg, file, "qk_nope_head_dim", default=0),
        qk_rope_head_dim=_get(cfg, file, "qk_rope_head_dim", default=0),
        sliding_window=window,
        swa_layer_fraction=swa_fraction,
        kv_compress_ratio=_get(cfg, file, "kv_compress_ratio", default=None),
        swa_pool_layers=swa_pool_layers,
        fp8_native=fp8,
        fp8_routed_experts_only=fp8 and isinstance(quant, dict) and quant.get("scope") == "routed_experts",
        fp8_weight_block=_fp8_weight_block(quant, method, file),
        weight_format=fp4,
        kv_cache_quant_algo=checkpoint_kv_cache_quant(quant),
        dsa=dsa,
        learnable_sink=bool(cfg.get("learnable_sink", False)),
        **_dsa_indexer(cfg, file, dsa),
    )


def _dsa_indexer(cfg: dict[str, Any], file: str, dsa: bool) -> dict[str, int]:
    """The DSA fields of :class:`ModelArch` from a config (none unless ``dsa``).

    SGLang 0.5.23 reads ``index_topk``, ``index_n_heads`` and ``index_head_dim`` off the
    config with no default (configs/model_config.py ``get_dsa_index_topk``,
    ``get_dsa_index_n_heads``, ``get_dsa_index_head_dim``: ``config.index_head_dim``), so a
    DSA config without one is refused. The layers that reuse the previous layer's top-k
    follow ``dsa_layer_skips_topk``: an ``indexer_types`` list ("shared"), else ``cli_factor``
    (LongCat: fresh top-k every ``cli_factor`` layers), else ``index_topk_pattern`` ("S"),
    else ``index_topk_freq`` with ``index_skip_topk_offset``.

    Raises:
        ConfigError: a DSA config lacks one of the three keys, or one is not a positive integer.
    """
    if not dsa:
        return {}
    out = {}
    for key in ("index_topk", "index_n_heads", "index_head_dim"):
        v = _get(cfg, file, key, default=None)
        if v is None or v < 1:
            raise ConfigError(file, key, "<missing>" if v is None else v,
                              "required, a positive integer, for DeepSeek sparse attention (an index_topk config of a "
                              "DSA architecture: SGLang reads config.index_topk, index_n_heads and index_head_dim, "
                              "configs/model_config.py get_dsa_index_*)")
        out[key] = v
    layers = cfg["num_hidden_layers"]
    types, cli = cfg.get("indexer_types"), cfg.get("cli_factor") or 1
    pattern, freq = cfg.get("index_topk_pattern"), cfg.get("index_topk_freq") or 1
    offset = cfg.get("index_skip_topk_offset")
    for key, v in (("cli_factor", cli), ("index_topk_freq", freq), ("index_skip_topk_offset", offset)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ConfigError(file, key, v, "must be a positive integer (configs/model_config.py dsa_layer_skips_topk)")

    def skips(i: int) -> bool:
        if isinstance(types, list):
            return i < len(types) and types[i] == "shared"
        if cli > 1:
            return i % cli != 0
        if pattern is not None:
            return i < len(pattern) and pattern[i] == "S"
        if offset is not None:
            return max(i - offset + 1, 0) % freq != 0
        return max(i - 1, 0) % freq != 0

    out["index_shared_layers"] = sum(skips(i) for i in range(layers))
    return out


def checkpoint_kv_cache_quant(quant: Any) -> str | None:
    """The KV cache quantization a config.json ``quantization_config`` declares, read as SGLang
    0.5.23's quantization configs read it (their ``kv_cache_quant_algo``), or None.

    - ``quant_method: fp8`` (``Fp8Config.from_config``, layers/quantization/fp8.py): the
      ``kv_cache_quant_algo`` key.
    - NVIDIA ModelOpt (``quant_method`` ``modelopt``, ``modelopt_fp8``, ``modelopt_fp4``,
      ``modelopt_mixed``, or none with a ``quant_algo``; configs/model_config.py
      ``_parse_quant_hf_config`` sends a config without ``quant_method`` to the ModelOpt
      parser): a ``kv_cache_scheme`` mapping ``{type: float, num_bits: 8}`` is FP8
      (``num_bits: 4`` NVFP4, another ``auto``), a ``kv_cache_scheme`` string FP8/FLOAT8 is FP8,
      else the ``kv_cache_quant_algo`` key (layers/quantization/modelopt_quant.py
      ``ModelOptFp8Config.from_config``, ``ModelOptFp4Config.from_config``,
      ``ModelOptMixedPrecisionConfig.from_config``).
    - Any other method (compressed-tensors, mxfp4, awq, gptq, ...): None. Their config classes
      carry no ``kv_cache_quant_algo``, so ``--kv-cache-dtype auto`` keeps the model's dtype
      even where the file has a ``kv_cache_scheme`` (mem_cache/kv_cache_dtype.py
      ``configure_kv_cache_dtype`` reads only ``quant_config.kv_cache_quant_algo``).
    """
    if not isinstance(quant, dict):
        return None
    method = str(quant.get("quant_method", "")).lower()
    if method == "fp8":
        algo = quant.get("kv_cache_quant_algo")
        return str(algo) if algo else None
    if method not in ("", "modelopt", "modelopt_fp8", "modelopt_fp4", "modelopt_mixed"):
        return None
    section = quant if quant.get("quant_algo") is not None else quant.get("quantization")
    if not isinstance(section, dict):
        return None
    scheme = section.get("kv_cache_scheme")
    if isinstance(scheme, dict):
        if scheme.get("type") == "float" and scheme.get("num_bits") == 8:
            return "FP8"
        return "NVFP4" if scheme.get("type") == "float" and scheme.get("num_bits") == 4 else "auto"
    if isinstance(scheme, str):
        name = scheme.strip().upper()
        return "FP8" if name in ("FP8", "FLOAT8") else "NVFP4" if name in ("FP4", "FLOAT4", "NVFP4") else "auto"
    algo = section.get("kv_cache_quant_algo")
    return str(algo) if algo else None


def auto_kv_cache_dtype(arch: ModelArch, compute_capability: int | None, platform: str) -> tuple[str, str]:
    """What SGLang 0.5.23 turns ``--kv-cache-dtype auto`` into for ``arch`` on a GPU of
    ``compute_capability`` (SM x 10; None on ROCm) and ``platform``, and why.

    In SGLang's order: the server-argument overrides first (they replace ``auto`` before the
    model loads), then the checkpoint's quantization at load time.

    1. ``DeepseekV4ForCausalLM``: fp8_e4m3 on every GPU (arg_groups/overrides.py
       ``_deepseek_v4_kv_cache_dtype``; bf16 only on NPU).
    2. DeepSeek sparse attention (:data:`DSA_ARCHS` with ``index_topk``): fp8_e4m3 when the
       GPU's major compute capability is 10 or more and the config has no ``learnable_sink``,
       else bf16 (``_dsa_kv_cache_dtype_default``: ``torch.cuda.get_device_capability()``;
       ROCm's gfx9 parts report major 9).
    3. A checkpoint whose quantization declares FP8 KV (:func:`checkpoint_kv_cache_quant`):
       fp8_e4m3 (mem_cache/kv_cache_dtype.py ``configure_kv_cache_dtype``:
       ``kv_cache_quant_algo.upper() == "FP8"``; fnuz on HIP, the same byte). NVFP4 or
       anything else there keeps the model's dtype.
    4. Otherwise the model's dtype: bf16.
    """
    arch_name = arch.architectures[0] if arch.architectures else ""
    if arch_name == "DeepseekV4ForCausalLM":
        return "fp8_e4m3", ("SGLang's default for DeepseekV4ForCausalLM on GPUs "
                            "(arg_groups/overrides.py _deepseek_v4_kv_cache_dtype)")
    if arch.dsa:
        major = (compute_capability or 0) // 10 if platform == "cuda" else 9
        sm = f"SM{major}" if platform == "cuda" else "ROCm (gfx9: major 9)"
        if arch.learnable_sink:
            return "bf16", (f"SGLang's default for DeepSeek sparse attention with learnable_sink on {sm} "
                            "(arg_groups/overrides.py _dsa_kv_cache_dtype_default)")
        return ("fp8_e4m3" if major >= 10 else "bf16"), (
            f"SGLang's default for DeepSeek sparse attention ({arch_name}, index_topk) on {sm}: fp8_e4m3 from "
            "compute capability 10 (arg_groups/overrides.py _dsa_kv_cache_dtype_default)")
    if arch.kv_cache_quant_algo and arch.kv_cache_quant_algo.upper() == "FP8":
        return "fp8_e4m3", ("the checkpoint's quantization_config declares an FP8 KV cache (kv_cache_quant_algo "
                            "FP8 as SGLang's quantization config reads it; mem_cache/kv_cache_dtype.py "
                            "configure_kv_cache_dtype)")
    said = f" (its quantization_config's KV quantization {arch.kv_cache_quant_algo!r} is not FP8)" \
        if arch.kv_cache_quant_algo else ""
    return "bf16", f"the model's dtype{said} (mem_cache/kv_cache_dtype.py configure_kv_cache_dtype)"


def fp4_format(quant: Any) -> str | None:
    """The 4-bit floating-point format of a config.json ``quantization_config``, or None.

    ``mxfp4``: ``quant_method: mxfp4`` (gpt-oss; SGLang 0.5.23 layers/quantization/mxfp4.py
    ``Mxfp4Config``). ``nvfp4``: ``quant_method: modelopt_fp4``, or ``modelopt`` (or none) with
    ``quant_algo: NVFP4`` at the top or under ``quantization`` (NVIDIA ModelOpt checkpoints, an
    ``hf_quant_config.json`` among them; layers/quantization/modelopt_quant.py
    ``ModelOptFp4Config``; configs/model_config.py ``_parse_quant_hf_config``).
    """
    if isinstance(quant, str):
        quant = {"quant_method": quant}
    if not isinstance(quant, dict):
        return None
    method = str(quant.get("quant_method", "")).lower()
    if method == "mxfp4":
        return "mxfp4"
    if method == "modelopt_fp4":
        return "nvfp4"
    section = quant if quant.get("quant_algo") is not None else quant.get("quantization")
    if method in ("", "modelopt") and isinstance(section, dict) and str(section.get("quant_algo", "")).upper() == "NVFP4":
        return "nvfp4"
    return None


INT4_GROUP = 128
"""The quantization group the ``int4`` format is priced at (AWQ's and GPTQ's usual
``group_size``; roofline.py ``FP4_BITS``)."""


def _compressed_tensors_weights(quant: dict[str, Any]) -> list[Any]:
    """The ``weights`` scheme of each ``config_groups`` entry of a compressed-tensors
    ``quantization_config`` (compressed_tensors/compressed_tensors.py); empty without groups."""
    groups = quant.get("config_groups")
    return [g.get("weights") for g in groups.values() if isinstance(g, dict)] if isinstance(groups, dict) else []


def _fp8_weight_block(quant: Any, method: str, file: str) -> tuple[int, int] | None:
    """``quantization_config.weight_block_size`` of a ``quant_method: fp8`` checkpoint as
    ``(block_n, block_k)``, or None without one. SGLang 0.5.23 ``Fp8Config.__init__``
    (layers/quantization/fp8.py) refuses a size that is not two-dimensional ("The quantization
    block size of weight must have 2 dimensions").

    Raises:
        ConfigError: a ``weight_block_size`` that is not two positive integers.
    """
    if method != "fp8" or not isinstance(quant, dict) or quant.get("weight_block_size") is None:
        return None
    size = quant["weight_block_size"]
    if (not isinstance(size, list) or len(size) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in size)):
        raise ConfigError(file, "quantization_config.weight_block_size", size,
                          "two positive integers [block_n, block_k] (SGLang 0.5.23 layers/quantization/fp8.py "
                          "Fp8Config: the quantization block size of weight must have 2 dimensions)")
    return size[0], size[1]


def fp8_checkpoint(quant: Any) -> bool:
    """Whether a config.json ``quantization_config`` other than ``quant_method: fp8`` stores
    8-bit floating-point weights, as SGLang 0.5.23 loads them.

    - NVIDIA ModelOpt FP8: ``quant_method: modelopt_fp8``, or ``modelopt`` (or none) with
      ``quant_algo: FP8`` at the top or under ``quantization`` (layers/quantization/
      modelopt_quant.py ``ModelOptFp8Config``; configs/model_config.py
      ``_parse_quant_hf_config`` sends a config without ``quant_method`` to that parser).
    - compressed-tensors whose every ``config_groups`` entry has ``weights: {type: float,
      num_bits: 8}`` (compressed_tensors/compressed_tensors.py: the W8A8 FP8 scheme, or W8A16
      FP8 without activation quantization).
    - ``fbgemm_fp8`` (Meta's FP8 Llama checkpoints; fp8 weights per output channel).

    These were priced as bf16 with a note: a Llama-3.1-70B FP8 checkpoint on two H100s held
    twice its weights and was said not to start.
    """
    if not isinstance(quant, dict):
        return False
    method = str(quant.get("quant_method", "")).lower()
    if method in ("modelopt_fp8", "fbgemm_fp8"):
        return True
    if method in ("", "modelopt"):
        section = quant if quant.get("quant_algo") is not None else quant.get("quantization")
        return isinstance(section, dict) and str(section.get("quant_algo", "")).upper() == "FP8"
    if method == "compressed-tensors":
        weights = _compressed_tensors_weights(quant)
        return bool(weights) and all(isinstance(w, dict) and str(w.get("type", "")).lower() == "float"
                                     and w.get("num_bits") == 8 for w in weights)
    return False


def int4_format(quant: Any) -> str | None:
    """``int4`` for a config.json ``quantization_config`` of 4-bit integer weights with 16-bit
    activations (w4a16), else None: ``quant_method`` ``awq``/``awq_marlin`` (``bits`` 4, AWQ's
    only width), ``gptq``/``gptq_marlin`` with ``bits: 4``, or compressed-tensors whose every
    ``config_groups`` entry has ``weights: {type: int, num_bits: 4}``.

    SGLang 0.5.23 gives every ``LinearBase`` (and ``FusedMoE``) not in
    ``modules_to_not_convert`` the 4-bit method (layers/quantization/awq/awq.py
    ``AWQConfig.get_quant_method``, gptq/gptq.py), whose weights are 4-bit values packed in
    int32 plus, per ``group_size`` input rows, one zero point (4-bit, packed) and one scale in
    the activation dtype (awq/schemes/awq_linear.py ``create_weights``: ``qweight``,
    ``qzeros``, ``scales``); the LM head and embeddings stay 16-bit.
    """
    if not isinstance(quant, dict):
        return None
    method = str(quant.get("quant_method", "")).lower()
    if method in ("awq", "awq_marlin") and quant.get("bits", quant.get("w_bit", 4)) == 4:
        return "int4"
    if method in ("gptq", "gptq_marlin") and quant.get("bits") == 4:
        return "int4"
    if method == "compressed-tensors":
        weights = _compressed_tensors_weights(quant)
        if weights and all(isinstance(w, dict) and str(w.get("type", "")).lower() == "int" and w.get("num_bits") == 4
                           for w in weights):
            return "int4"
    return None


_FP8_TAG = r"(w8a8-)?fp8(-dynamic|-static|-block)?"
"""The tags of a Hugging Face id that name a checkpoint of FP8 weights: ``-FP8``
(``nvidia/Llama-3.1-8B-Instruct-FP8``, ``Qwen/Qwen3-30B-A3B-FP8``), ``-FP8-dynamic`` and
``-W8A8-FP8`` (llm-compressor's compressed-tensors exports), ``-FP8-static``, ``-FP8-block``.
A bare ``-W8A8`` is int8 (:data:`_INT8_TAGS`: refused, saying what to give)."""

_INT4_TAGS = ("awq", "gptq", "int4", "w4a16")
"""Tags of a Hugging Face id that name 4-bit integer weights with 16-bit activations:
``-AWQ`` (``Qwen/Qwen2.5-7B-Instruct-AWQ``), ``-GPTQ-Int4``, ``-AWQ-INT4``, ``-W4A16``; a bare
``-GPTQ`` is read as 4-bit, its usual width (said in the note)."""

_INT8_TAGS = ("int8", "w8a16", "w8a8")
"""Tags that name 8-bit integer weights (``-GPTQ-Int8``, ``-W8A8``), which the roofline does
not price: such a name is refused with what to give instead (:func:`load_model`)."""

_TUNE_TAGS = re.compile(rf"(-(instruct|chat|it|base|hf|bf16|{_FP8_TAG}|{'|'.join(_INT4_TAGS + _INT8_TAGS)}"
                        r"|\d{4}|v\d+\.\d+))+$")
"""Trailing tags of a Hugging Face id that name a tune, a weight format, a release date or a
weights release of the same architecture (``Llama-3.1-8B-Instruct``,
``Qwen3-30B-A3B-Instruct-2507``, ``Mixtral-8x7B-Instruct-v0.1``,
``DeepSeek-V3-FP8`` is not shipped but reads as ``deepseek-v3``): the shapes a profile is
built from do not change with them; a format tag sets the weights' format
(:func:`stated_weight_format`)."""


def shipped_key(name: str) -> str | None:
    """The shipped model a name denotes: itself (case-insensitive), or a Hugging Face id of
    the same architecture (``meta-llama/Llama-3.1-8B-Instruct``, ``Meta-Llama-3.1-8B``,
    ``Qwen/Qwen3-30B-A3B``: the part after the organisation, a leading ``meta-`` and the
    trailing tags of :data:`_TUNE_TAGS` dropped); None when neither is shipped."""
    table = shipped_models()
    key = name.lower()
    if key in table:
        return key
    base = _TUNE_TAGS.sub("", key.rsplit("/", 1)[-1]).removeprefix("meta-")
    return base if base in table else None


def stated_weight_format(name: str) -> str | None:
    """The weight format a Hugging Face id's trailing tags state (:data:`_TUNE_TAGS`): ``fp8``
    for an FP8 tag (:data:`_FP8_TAG`), ``int4`` for an AWQ/GPTQ/Int4 tag (:data:`_INT4_TAGS`),
    ``int8`` for an 8-bit integer one (:data:`_INT8_TAGS`), ``bf16`` for ``-BF16``; None when they
    state none.

    Such a tag names the checkpoint, and SGLang 0.5.23 serves a checkpoint's weights in the
    format its quantization config states (configs/model_config.py ``_verify_quantization``:
    the ``quant_method`` ``_parse_quant_hf_config`` reads from config.json's
    ``quantization_config``, or from a ModelOpt ``hf_quant_config.json`` beside it, ``quant_algo:
    FP8`` read as ``modelopt_fp8``), not as bf16; a ``--quantization`` other than the
    checkpoint's is refused there unless it is a listed compatible one."""
    words = _format_words(name)
    if "fp8" in words:
        return "fp8"
    if any(w in _INT8_TAGS for w in words):
        return "int8"
    if any(w in _INT4_TAGS for w in words):
        return "int4"
    return "bf16" if "bf16" in words else None


def _format_words(name: str) -> list[str]:
    """The trailing tags of a Hugging Face id (:data:`_TUNE_TAGS`), lower case, one word each."""
    tags = _TUNE_TAGS.search(name.lower().rsplit("/", 1)[-1])
    return tags.group().split("-")[1:] if tags else []


def stated_format_tag(name: str) -> str:
    """The tag(s) of ``name`` that state its weight format, as written (``AWQ``, ``GPTQ-Int4``,
    ``FP8-dynamic``), for a note to quote; empty when none does."""
    fmt = {"fp8", "bf16", *_INT4_TAGS, *_INT8_TAGS}
    last = name.rsplit("/", 1)[-1]
    tags = _TUNE_TAGS.search(last.lower())
    if not tags:
        return ""
    words = last[tags.start():].split("-")[1:]
    return "-".join(w for w in words if w.lower() in fmt or w.lower() in ("dynamic", "static", "block"))


def with_stated_format(arch: ModelArch, name: str) -> ModelArch:
    """``arch`` (a shipped model read from the Hugging Face id ``name``) with the weight
    format the name states (:func:`stated_weight_format`) where the shipped entry prices
    another: an FP8 tag makes bf16 weights fp8 (``fp8_native``, as a ``quant_method: fp8``
    config does), a BF16 tag makes quantized weights bf16 (a bf16 conversion carries no
    ``quantization_config``). The source says which name set it."""
    fmt = stated_weight_format(name)
    said = f"; {fmt} weights, as the name {name} states"
    if fmt == "fp8" and not arch.fp8_native and arch.weight_format is None:
        return arch.model_copy(update={"fp8_native": True, "source": arch.source + said})
    if fmt == "int4" and arch.weight_format != "int4":
        # AWQ/GPTQ w4a16: every decoder linear and routed expert at 4 bits (roofline FP4_BITS["int4"]),
        # as a config.json with quant_method awq/gptq bits 4 is priced (:func:`int4_format`)
        return arch.model_copy(update={"fp8_native": False, "fp8_routed_experts_only": False, "weight_format": "int4",
                                       "kv_cache_quant_algo": None, "source": arch.source + said})
    if fmt == "bf16" and (arch.fp8_native or arch.weight_format is not None):
        return arch.model_copy(update={"fp8_native": False, "fp8_routed_experts_only": False, "weight_format": None,
                                       "kv_cache_quant_algo": None, "source": arch.source + said})
    return arch


def load_model(name_or_path: str, option: str = "--model") -> ModelArch:
    """A shipped model by name (case-insensitive; a Hugging Face id of a shipped
    architecture too, :func:`shipped_key`) or a config.json path, or the checkpoint's folder
    holding one (what SGLang's --model-path names) (``option``: the command-line option an
    unknown name is reported under). A shipped name comes first, then a file of that path,
    then a Hugging Face id of a shipped architecture.

    Raises:
        ConfigError: unknown name (lists the shipped ones), unreadable or invalid JSON,
            or a missing/invalid key.
    """
    table = shipped_models()
    p = Path(name_or_path)
    if p.is_dir() and (p / "config.json").is_file():   # a checkpoint's folder, as SGLang's --model-path
        p = p / "config.json"
    key = name_or_path.lower()
    if key not in table:
        key = None if is_input_file(p) else shipped_key(name_or_path)
    if key is not None:
        if stated_weight_format(name_or_path) == "int8":
            raise ConfigError("<command line>", option, name_or_path,
                              f"its {stated_format_tag(name_or_path)} tag names 8-bit integer weights, which the analytic "
                              f"roofline does not price (it prices bf16, fp8, mxfp4, nvfp4 and 4-bit AWQ/GPTQ as int4); "
                              f"give the checkpoint's config.json (an unpriced format is priced as bf16 and said), or "
                              f"{key} with --dtype fp8 for an 8-bit estimate")
        return with_stated_format(from_hf_config(table[key], key, f"shipped model {key}"), name_or_path)
    if p.is_dir():
        raise ConfigError("<command line>", option, name_or_path,
                          "a folder with no config.json in it: give the checkpoint's folder or its config.json")
    if not is_input_file(p):
        raise ConfigError("<command line>", option, name_or_path,
                          f"not a config.json file nor a shipped model; shipped: {', '.join(table)}")
    cfg = _json_object(p, "a model's config.json")
    return from_hf_config(with_hf_quant_config(cfg, p), config_model_name(cfg, p), str(p))


def _json_object(p: Path, what: str) -> dict[str, Any]:
    """The JSON object in the file ``p`` (``what`` names it in a read error).

    Raises:
        ConfigError: unreadable, not JSON, or not an object at the top level.
    """
    try:
        obj = json.loads(read_input(p, what).decode("utf-8-sig"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(str(p), "<file>", str(p), f"not valid JSON ({e.__class__.__name__})") from None
    if not isinstance(obj, dict):
        raise ConfigError(str(p), "<top level>", type(obj).__name__, "must be a JSON object")
    return obj


def with_hf_quant_config(cfg: dict[str, Any], p: Path) -> dict[str, Any]:
    """``cfg`` (read from the file ``p``) with the ``hf_quant_config.json`` beside it as its
    ``quantization_config``, where ``p`` is a checkpoint's ``config.json`` that states no
    quantization (neither ``quantization_config`` nor ``compression_config``).

    NVIDIA ModelOpt checkpoints (``nvidia/Llama-3.1-8B-Instruct-FP8``) keep their format
    there, not in config.json: ``{"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo":
    "FP8"}}``. SGLang 0.5.23 reads that file from a local checkpoint folder
    (configs/model_config.py ``_parse_quant_hf_config``: ``quant_algo`` FP8 serves as
    ``modelopt_fp8``, NVFP4 as ``modelopt_fp4``) and gives the whole file to the quantization
    config (model_loader/weight_utils.py ``get_quant_config``;
    ``ModelOptFp8Config.from_config`` reads ``kv_cache_quant_algo`` from its ``quantization``
    section), so the weights are fp8 and ``--kv-cache-dtype auto`` follows its KV entry.
    Without the file, such a config.json was priced as a bf16 model."""
    if (cfg.get("quantization_config") is not None or cfg.get("compression_config") is not None
            or p.name.lower() != "config.json" or is_stream(p)):
        return cfg
    side = p.parent / "hf_quant_config.json"
    if not side.is_file():
        return cfg
    quant = _json_object(side, "a ModelOpt hf_quant_config.json")
    return {**cfg, "quantization_config": quant,
            "source": f"{cfg.get('source', p)} (its quantization from {side.name} beside it, as SGLang's "
                      "_parse_quant_hf_config reads it)"}


def config_model_name(cfg: dict[str, Any], p: Path) -> str:
    """The model's name for a config.json read from ``p``: the last part of its
    ``_name_or_path`` (a Hub id ``Qwen/Qwen2-1.5B`` or the local folder the checkpoint was
    saved from), else the folder of a file named ``config.json``, else the file's stem. The
    name goes into the profile's name and default file name, so it holds no path separator:
    ``Qwen/Qwen2-1.5B`` wrote ``profiles/h200-Qwen/Qwen2-1.5B-tp1-bf16-analytic.yaml``, a
    folder the user never asked for, and two configs beside each other in one folder
    (``mistral.json``, ``qwen.json``) were both named after that folder and overwrote each
    other's profile."""
    hub = cfg.get("_name_or_path")
    if isinstance(hub, str):
        last = hub.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
        if last.strip(". "):
            return last
    folder = "" if is_stream(p) else p.parent.name   # a pipe's folder (/dev/fd) names no model
    if p.name.lower() == "config.json" and folder:
        return folder
    return p.stem or folder or "model"
