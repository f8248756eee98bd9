"""The vision tower of a multimodal checkpoint: its parameters, counted from ``vision_config``.

SGLang 0.5.23 builds a multimodal model's vision encoder and projector on every rank beside
the language model and loads their weights before it sizes the KV pool
(mem_cache/kv_cache_configurator.py ``_profile_available_bytes`` charges what is resident),
so those weights shrink the pool even when the server only ever sees text. Only the
language model decodes: the tower's parameters enter the memory estimate
(``hardware.weight_bytes``), never a forward's cost.

How a rank holds them, as the model files build them:

- the encoder layers' linears (qkv, output, MLP) are ``QKVParallelLinear`` /
  ``ColumnParallelLinear`` / ``RowParallelLinear`` inside ``VisionAttention``
  (layers/attention/vision.py: ``tp_size`` is the attention TP size unless the encoder runs
  data-parallel, ``--mm-enable-dp-encoder``, off by default), so each rank holds ``1/tp`` of
  them: models/qwen2_vl.py ``Qwen2VisionBlock``, qwen2_5_vl.py ``Qwen2_5_VisionBlock``,
  qwen3_vl.py ``Qwen3_VisionBlock``, siglip.py ``SiglipEncoderLayer``, clip.py
  ``CLIPEncoderLayer``, pixtral.py ``PixtralHFTransformerBlock``, internvl.py
  ``InternVisionEncoderLayer``, mllama.py ``MllamaVisionEncoderLayer``;
- the Qwen-VL patch mergers are TP-sharded too (``Qwen2_5_VisionPatchMerger``: column then
  row parallel), as are Qwen3-VL's learned position table (``VocabParallelEmbedding``) and
  Mllama's patch convolution (``ColumnParallelConv2dPatch``);
- patch embeddings, position tables, norms and the projectors built from plain ``nn.Linear`` /
  ``nn.Parameter`` are whole on every rank: gemma3_mm.py ``Gemma3MultiModalProjector``,
  llava.py's transformers ``LlavaMultiModalProjector`` / mistral.py's
  ``Mistral3MultiModalProjector``, internvl.py ``mlp1``, mllama.py's ``ReplicatedLinear``
  projector.

Not counted: biases of row-parallel linears (replicated, counted with the shard), any padding
SGLang adds to split heads over ranks (``num_dummy_heads``) and a SigLIP pooling head
(``vision_use_head``; Gemma 3 has none). The tower is priced in bf16 whatever ``--dtype``
says: the FP8 and 4-bit checkpoints of these models leave it unquantized in the usual case
(``modules_to_not_convert`` / ``ignore`` lists name the vision modules; not read here).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from specsched.sim.errors import ConfigError


class VisionTower(NamedTuple):
    """A vision tower's parameters (elements): ``sharded`` split over the TP ranks,
    ``replicated`` whole on each; ``family`` names the encoder as counted."""

    sharded: int
    replicated: int
    family: str

    @property
    def params(self) -> int:
        return self.sharded + self.replicated

    def bytes_per_rank(self, tp: int, element_bytes: float = 2.0) -> float:
        """Bytes one of ``tp`` ranks holds (bf16 by default)."""
        return element_bytes * (self.sharded / tp + self.replicated)


def _int(vc: dict[str, Any], file: str, key: str, default: int | None, *alts: str) -> int:
    for k in (key, *alts):
        v = vc.get(k)
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(file, f"vision_config.{k}", v, "must be a positive integer")
            return v
    if default is None:
        raise ConfigError(file, f"vision_config.{key}", "<missing>", "required to count the vision tower's weights")
    return default


def _linear(i: int, o: int, bias: bool = True) -> int:
    return i * o + (o if bias else 0)


def _layer(h: int, i: int, *, attn_bias: bool, mlp_bias: bool, gated: bool, norm: int) -> tuple[int, int]:
    """(sharded, replicated) of one encoder layer: q, k, v, output projections and the MLP
    (two matrices, three when gated) split over the ranks; its two norms (``norm``
    elements each) whole."""
    attn = 4 * _linear(h, h, attn_bias)
    mlp = (3 if gated else 2) * h * i + ((2 * i + h) if gated else (i + h)) * mlp_bias
    return attn + mlp, 2 * norm


def _qwen2_vl(vc: dict[str, Any], text_hidden: int, file: str) -> VisionTower:
    # models/qwen2_vl.py Qwen2VisionTransformer: LayerNorm, fc1/fc2 of embed_dim x mlp_ratio,
    # a Conv3d patch embedding without bias, a merger of LayerNorm + two linears
    e, depth = _int(vc, file, "embed_dim", 1280), _int(vc, file, "depth", 32)
    i = int(e * vc.get("mlp_ratio", 4)) if isinstance(vc.get("mlp_ratio", 4), int | float) else 4 * e
    patch = _int(vc, file, "in_chans", 3, "in_channels") * _int(vc, file, "temporal_patch_size", 2) \
        * _int(vc, file, "patch_size", 14) ** 2 * e
    m = _int(vc, file, "spatial_merge_size", 2) ** 2 * e
    out = _int(vc, file, "hidden_size", text_hidden)   # Qwen2-VL's vision hidden_size is the merger's output
    s, r = _layer(e, i, attn_bias=True, mlp_bias=True, gated=False, norm=2 * e)
    return VisionTower(depth * s + _linear(m, m) + _linear(m, out), depth * r + patch + 2 * e, "Qwen2-VL ViT")


def _qwen2_5_vl(vc: dict[str, Any], text_hidden: int, file: str) -> VisionTower:
    # models/qwen2_5_vl.py Qwen2_5_VisionTransformer: RMSNorm, a gated MLP whose width is padded
    # to a multiple of 8, a Conv3d patch embedding without bias, an RMSNorm + two-linear merger
    e, depth = _int(vc, file, "hidden_size", 1280), _int(vc, file, "depth", 32)
    i = (_int(vc, file, "intermediate_size", 3420) + 7) // 8 * 8
    patch = _int(vc, file, "in_chans", 3, "in_channels") * _int(vc, file, "temporal_patch_size", 2) \
        * _int(vc, file, "patch_size", 14) ** 2 * e
    m = _int(vc, file, "spatial_merge_size", 2) ** 2 * e
    out = _int(vc, file, "out_hidden_size", text_hidden)
    s, r = _layer(e, i, attn_bias=True, mlp_bias=True, gated=True, norm=e)
    return VisionTower(depth * s + _linear(m, m) + _linear(m, out), depth * r + patch + e, "Qwen2.5-VL ViT")


def _qwen3_vl(vc: dict[str, Any], text_hidden: int, file: str) -> VisionTower:
    # models/qwen3_vl.py: LayerNorm, fc1/fc2, a Conv3d patch embedding with bias, a learned
    # position table (VocabParallelEmbedding), one merger plus one per deepstack_visual_indexes
    # entry (their LayerNorm over the merged width)
    e, depth = _int(vc, file, "hidden_size", 1152), _int(vc, file, "depth", 27)
    i = _int(vc, file, "intermediate_size", 4304)
    patch = _int(vc, file, "in_channels", 3, "in_chans") * _int(vc, file, "temporal_patch_size", 2) \
        * _int(vc, file, "patch_size", 16) ** 2 * e + e
    pos = _int(vc, file, "num_position_embeddings", 2304) * e
    m = _int(vc, file, "spatial_merge_size", 2) ** 2 * e
    out = _int(vc, file, "out_hidden_size", text_hidden)
    deep = vc.get("deepstack_visual_indexes") or []
    deep_n = len(deep) if isinstance(deep, list) else 0
    s, r = _layer(e, i, attn_bias=True, mlp_bias=True, gated=False, norm=2 * e)
    merger = _linear(m, m) + _linear(m, out)
    return VisionTower(depth * s + pos + (1 + deep_n) * merger, depth * r + patch + 2 * e + deep_n * 2 * m,
                       "Qwen3-VL ViT" + (f" + {deep_n} deepstack mergers" if deep_n else ""))


VIT_L_HIDDEN, VIT_L_LAYERS = 1024, 24
"""A ViT-L/14's width and depth: the encoder this module counts a vision_config without its own
sizes as (:data:`_CLIP_L_336`), and what SGLang 0.5.23 reads for a vision_config without
``num_hidden_layers`` / ``hidden_size`` when it scales a multimodal model's memory fraction, as
well as that rule's baseline (arg_groups/memory_hook.py ``adjust_mem_fraction_for_vlm``:
``getattr(vision_config, "num_hidden_layers", 24)``, ``getattr(..., "hidden_size", 1024)``, a
24 x 1024 baseline). The one place these numbers live: models.py and writer.py read them here."""

_CLIP_L_336: tuple[int, int, int | None, int, int] = (VIT_L_HIDDEN, VIT_L_LAYERS, None, 14, 336)
"""(hidden_size, num_hidden_layers, intermediate_size, patch_size, image_size) of a ViT-L/14 at
336 (None: 4 x hidden_size): what an encoder without a config class here is counted as (and
InternViT's)."""

CLIP_VISION_DEFAULTS = (768, 12, 3072, 32, 224)
"""transformers ``CLIPVisionConfig``'s defaults, in :data:`_CLIP_L_336`'s order: what a key
missing from a ``clip_vision_model`` vision_config is (a config.json written by
``save_pretrained`` leaves out the keys at their default)."""

SIGLIP_VISION_DEFAULTS = (768, 12, 3072, 16, 224)
"""transformers ``SiglipVisionConfig``'s defaults, as :data:`CLIP_VISION_DEFAULTS`."""


def _vit(vc: dict[str, Any], file: str, *, cls_token: bool, patch_bias: bool, pre_norm: bool,
         defaults: tuple[int, int, int | None, int, int] = _CLIP_L_336) -> tuple[int, int, int, int]:
    """(sharded, replicated, hidden, layers) of a CLIP / SigLIP style encoder: LayerNorms,
    biased attention and MLP, a learned position table, a Conv2d patch embedding. A size the
    vision_config leaves out is ``defaults``' (hidden, layers, intermediate, patch, image)."""
    dh, dl, di, dp, dimg = defaults
    h, layers = _int(vc, file, "hidden_size", dh), _int(vc, file, "num_hidden_layers", dl)
    i = _int(vc, file, "intermediate_size", 4 * h if di is None else di)
    p, img = _int(vc, file, "patch_size", dp), _int(vc, file, "image_size", dimg)
    tokens = (img // p) ** 2 + cls_token
    embed = _int(vc, file, "num_channels", 3) * p * p * h + h * patch_bias + tokens * h + h * cls_token
    s, r = _layer(h, i, attn_bias=True, mlp_bias=True, gated=False, norm=2 * h)
    return layers * s, layers * r + embed + 2 * h * (1 + pre_norm), h, layers


def _siglip(vc: dict[str, Any], file: str) -> tuple[int, int, int]:
    # models/siglip.py SiglipVisionTransformer: patch Conv2d with bias, one position per patch, post LayerNorm
    s, r, h, _ = _vit(vc, file, cls_token=False, patch_bias=True, pre_norm=False, defaults=SIGLIP_VISION_DEFAULTS)
    return s, r, h


def _clip(vc: dict[str, Any], file: str, defaults: tuple[int, int, int | None, int, int] = _CLIP_L_336) -> tuple[int, int, int]:
    # models/clip.py CLIPVisionTransformer: class token, patch Conv2d without bias, pre and post LayerNorm
    s, r, h, _ = _vit(vc, file, cls_token=True, patch_bias=False, pre_norm=True, defaults=defaults)
    return s, r, h


def _pixtral(vc: dict[str, Any], file: str) -> tuple[int, int, int]:
    # models/pixtral.py PixtralHFVisionModel: patch Conv2d without bias, ln_pre RMSNorm,
    # blocks of RMSNorm, bias-free q/k/v/o and a gated bias-free MLP; rotary positions
    h, layers = _int(vc, file, "hidden_size", 1024), _int(vc, file, "num_hidden_layers", 24)
    i, p = _int(vc, file, "intermediate_size", 4096), _int(vc, file, "patch_size", 16)
    s, r = _layer(h, i, attn_bias=False, mlp_bias=False, gated=True, norm=h)
    return layers * s, layers * r + _int(vc, file, "num_channels", 3) * p * p * h + h, h


def _llava_projector(cfg: dict[str, Any], h: int, text_hidden: int) -> int:
    # transformers LlavaMultiModalProjector (llava.py): linear_1 from the vision features (one
    # hidden per vision_feature_layer listed) to the text width, linear_2 text to text
    layers = cfg.get("vision_feature_layer", -1)
    n = len(layers) if isinstance(layers, list) and layers else 1
    bias = cfg.get("multimodal_projector_bias", True) is not False
    return _linear(h * n, text_hidden, bias) + _linear(text_hidden, text_hidden, bias)


def _mistral3_projector(cfg: dict[str, Any], h: int, text_hidden: int) -> int:
    # transformers Mistral3MultiModalProjector (mistral.py): RMSNorm, a bias-free patch merger
    # of spatial_merge_size^2 patches, then LLaVA's two linears
    merge = cfg.get("spatial_merge_size", 2) if isinstance(cfg.get("spatial_merge_size", 2), int) else 2
    return h + h * merge * merge * h + _llava_projector(cfg, h, text_hidden)


def _encoder_by_type(vc: dict[str, Any], file: str, default_kind: str = "clip_vision_model") -> tuple[int, int, int, str]:
    """A LLaVA-style wrapper's encoder, chosen by ``vision_config.model_type`` as SGLang's
    llava.py resolves it (the transformers config class to its SGLang model); without one, the
    wrapper's config class's (``default_kind``: LlavaConfig's clip_vision_model, Mistral3Config's
    pixtral), whose defaults fill the sizes left out."""
    kind = str(vc.get("model_type", default_kind))
    if kind.startswith("siglip"):
        return (*_siglip(vc, file), "SigLIP")
    if kind == "pixtral":
        return (*_pixtral(vc, file), "Pixtral ViT")
    if kind.startswith("clip"):
        return (*_clip(vc, file, CLIP_VISION_DEFAULTS), "CLIP ViT")
    return (*_clip(vc, file), f"{kind} (counted as a CLIP ViT)")


def _internvl(cfg: dict[str, Any], vc: dict[str, Any], text_hidden: int, file: str) -> VisionTower:
    # models/internvl.py InternVisionModel: class token, patch Conv2d with bias, learned
    # positions, layers with optional q/k norms and two layer scales; mlp1 (plain nn.Linear):
    # LayerNorm + two linears over the pixel-shuffled features (1 / downsample_ratio^2 patches)
    s, r, h, layers = _vit(vc, file, cls_token=True, patch_bias=True, pre_norm=False)
    r += layers * 2 * h - 2 * h   # ls1, ls2 per layer; no post norm
    if vc.get("qk_normalization"):
        r += layers * 2 * h
    ratio = cfg.get("downsample_ratio", 0.5)
    shuffled = int(round(h / ratio ** 2)) if isinstance(ratio, int | float) and ratio > 0 else 4 * h
    mlp1 = 2 * shuffled + _linear(shuffled, text_hidden) + _linear(text_hidden, text_hidden)
    return VisionTower(s, r + mlp1, "InternViT + mlp1 projector")


def _mllama(vc: dict[str, Any], text_hidden: int, file: str) -> VisionTower:
    # models/mllama.py MllamaVisionModel: patch Conv2d (column parallel, no bias), class token,
    # gated position table plus a tile position table per aspect ratio, pre/post tile
    # embeddings, LayerNorms, a local and a gated global encoder (bias-free attention, biased
    # MLP); the projector is a ReplicatedLinear from vision_output_dim to the text width
    h = _int(vc, file, "hidden_size", 1280)
    layers, glob = _int(vc, file, "num_hidden_layers", 32), _int(vc, file, "num_global_layers", 8)
    i, p = _int(vc, file, "intermediate_size", 5120), _int(vc, file, "patch_size", 14)
    tiles, img = _int(vc, file, "max_num_tiles", 4), _int(vc, file, "image_size", 560)
    ratios = vc.get("supported_aspect_ratios")
    n_ratios = len(ratios) if isinstance(ratios, list) and ratios else 8
    patches = (img // p) ** 2 + 1
    s, r = _layer(h, i, attn_bias=False, mlp_bias=True, gated=False, norm=2 * h)
    conv = _int(vc, file, "num_channels", 3) * p * p * h
    positions = patches * h + 1 + (n_ratios + 1) * tiles * patches * h + 2 * ((n_ratios + 1) * tiles * h + 1)
    out = _int(vc, file, "vision_output_dim", 7680)
    return VisionTower((layers + glob) * s + conv,
                       (layers + glob) * r + 2 * glob + h + positions + 4 * h + _linear(out, text_hidden),
                       "Mllama ViT (local + global encoder, tile position tables) + projector")


def vit_size_for_memory(vc: dict[str, Any], file: str) -> tuple[int, int]:
    """(layers, hidden size) of a vision_config as SGLang 0.5.23's memory-fraction rule reads
    them (arg_groups/memory_hook.py ``adjust_mem_fraction_for_vlm``): ``num_hidden_layers`` and
    ``hidden_size``, a ViT-L/14's (:data:`VIT_L_LAYERS`, :data:`VIT_L_HIDDEN`) where absent.

    Raises:
        ConfigError: either is present but not a positive integer.
    """
    return _int(vc, file, "num_hidden_layers", VIT_L_LAYERS), _int(vc, file, "hidden_size", VIT_L_HIDDEN)


def vision_tower(cfg: dict[str, Any], arch: str, text_hidden: int, file: str) -> tuple[VisionTower, str | None]:
    """The vision tower a multimodal config's ``vision_config`` describes, as SGLang 0.5.23's
    model class for ``arch`` builds it, and an assumption line where the count is a guess
    (an encoder family not modelled: counted as a CLIP ViT of its ``num_hidden_layers``,
    ``hidden_size`` and ``intermediate_size``), else None.

    Raises:
        ConfigError: a ``vision_config`` size that is not a positive integer.
    """
    vc = cfg["vision_config"]
    if arch == "Qwen2VLForConditionalGeneration":
        return _qwen2_vl(vc, text_hidden, file), None
    if arch == "Qwen2_5_VLForConditionalGeneration":
        return _qwen2_5_vl(vc, text_hidden, file), None
    if arch in ("Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration"):
        return _qwen3_vl(vc, text_hidden, file), None
    if arch == "Gemma3ForConditionalGeneration":
        # gemma3_mm.py: SiglipVisionModel + Gemma3MultiModalProjector (an nn.Parameter and an RMSNorm)
        s, r, h = _siglip(vc, file)
        return VisionTower(s, r + h * text_hidden + h, "SigLIP + Gemma 3 projector"), None
    if arch == "MllamaForConditionalGeneration":
        return _mllama(vc, text_hidden, file), None
    if arch in ("InternVLChatModel", "InternS1ForConditionalGeneration"):
        return _internvl(cfg, vc, text_hidden, file), None
    if arch == "Mistral3ForConditionalGeneration":
        s, r, h, kind = _encoder_by_type(vc, file, "pixtral")
        return VisionTower(s, r + _mistral3_projector(cfg, h, text_hidden), f"{kind} + Mistral 3 projector"), None
    if arch in ("LlavaForConditionalGeneration", "LlavaLlamaForCausalLM", "LlavaMistralForCausalLM",
                "LlavaQwenForCausalLM"):
        s, r, h, kind = _encoder_by_type(vc, file)
        guess = None if kind in ("CLIP ViT", "SigLIP", "Pixtral ViT") else f"vision_config {kind}"
        return VisionTower(s, r + _llava_projector(cfg, h, text_hidden), f"{kind} + LLaVA projector"), guess
    s, r, h = _clip(vc, file)
    layers = _int(vc, file, "num_hidden_layers", VIT_L_LAYERS, "depth")
    return (VisionTower(s, r, "a CLIP-style ViT"),
            f"{arch}'s vision tower counted as a CLIP-style ViT of {layers} layers of {h} (its encoder is not "
            "modelled; no projector)")
