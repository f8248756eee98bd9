"""``specsched profile --analytic`` of a block-quantized FP8 checkpoint at a TP size whose
per-rank shares are not whole quantization blocks.

SGLang 0.5.23 stores such a checkpoint's weights with one scale per ``weight_block_size``
tile (layers/quantization/fp8.py ``Fp8Config``) and stops loading when a rank's share of a
split weight is not whole tiles: ``Fp8MoEMethod.create_weights`` ("The output_size of gate's
and up's weight = 192 is not divisible by weight quantization block_n = 128") and
``Fp8LinearMethod.validate_block_quant_shapes``. Qwen3-30B-A3B-FP8 (128 x 128 blocks,
experts 768 wide) therefore loads at TP 1 and 2 only; a profile at TP 4 or 8 was written
and run without a word. On ROCm, ``SGLANG_USE_AITER=1`` pads the experts to 128 and skips
the experts' check, which a HIP profile assumes and says.

Named invariant INV-FP8-BLOCK-TP: a block-FP8 profile is written only at a TP size whose
every split share is whole blocks (sim/analytic/writer.py ``fp8_block_misfits``).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.analytic.models import load_model
from specsched.sim.analytic.writer import fp8_block_misfits

from specsched.cli import main

QWEN3_30B_A3B_FP8 = {
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 6144,
    "max_position_embeddings": 40960, "max_window_layers": 48, "mlp_only_layers": [], "model_type": "qwen3_moe",
    "moe_intermediate_size": 768, "norm_topk_prob": True, "num_attention_heads": 32, "num_experts": 128,
    "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4, "output_router_logits": False,
    "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001,
    "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
    "use_sliding_window": False, "vocab_size": 151936,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]},
}
"""Qwen/Qwen3-30B-A3B-FP8's config.json (Hugging Face): fine-grained FP8, 128 x 128 blocks."""


def _config(tmp_path, cfg) -> str:
    path = tmp_path / "qwen3-30b-a3b-fp8" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(cfg))
    return str(path)


def _profile(tmp_path, cfg, gpu: str, tp: int) -> tuple[int, str, bool]:
    out = tmp_path / f"p-{gpu}-{tp}.yaml"
    rc = main(["profile", "--analytic", "--model", _config(tmp_path, cfg), "--gpu", gpu, "--tp", str(tp),
               "--out", str(out), "-q"])
    return rc, out, out.exists()


@pytest.mark.parametrize("tp, per_rank", [(4, 192), (8, 96)])
def test_a_tp_that_splits_the_fp8_experts_into_part_blocks_is_one_line(tmp_path, capsys, tp, per_rank):
    rc, _, written = _profile(tmp_path, QWEN3_30B_A3B_FP8, "H100", tp)
    err = capsys.readouterr().err.strip()
    assert rc == 2 and not written
    assert len(err.splitlines()) == 1
    assert f"--tp = {tp}" in err and f"{per_rank} per rank" in err and "block_n 128" in err
    assert "allowed: 1, 2" in err


@pytest.mark.parametrize("tp", [1, 2])
def test_the_fp8_checkpoint_loads_where_its_experts_split_into_whole_blocks(tmp_path, capsys, tp):
    rc, _, written = _profile(tmp_path, QWEN3_30B_A3B_FP8, "H100", tp)
    assert rc == 0 and written


def test_rocm_pads_the_experts_with_aiter_and_the_profile_says_it_assumes_it(tmp_path, capsys):
    rc, _, written = _profile(tmp_path, QWEN3_30B_A3B_FP8, "MI300X", 4)
    err = capsys.readouterr().err
    assert rc == 0 and written
    assert "SGLANG_USE_AITER=1" in err and "192" in err


def test_per_channel_fp8_weights_have_no_blocks_to_split(tmp_path):
    quant = {k: v for k, v in QWEN3_30B_A3B_FP8["quantization_config"].items() if k != "weight_block_size"}
    rc, _, written = _profile(tmp_path, {**QWEN3_30B_A3B_FP8, "quantization_config": quant}, "H100", 8)
    assert rc == 0 and written


@pytest.mark.parametrize("size", [[128], [128, 128, 128], [128, 0], ["128", 128], 128])
def test_a_malformed_weight_block_size_is_one_line(tmp_path, capsys, size):
    cfg = {**QWEN3_30B_A3B_FP8, "quantization_config": {**QWEN3_30B_A3B_FP8["quantization_config"],
                                                        "weight_block_size": size}}
    rc, _, written = _profile(tmp_path, cfg, "H100", 1)
    err = capsys.readouterr().err.strip()
    assert rc == 2 and not written and len(err.splitlines()) == 1
    assert "quantization_config.weight_block_size" in err


def test_deepseek_v3s_dense_layers_stop_a_tp_of_32():
    """DeepSeek-V3's checkpoint is 128 x 128 block FP8: its three dense layers' 18432-wide MLP
    is 576 a rank at TP 32 (SGLang's --moe-dense-tp-size exists for this); TP 16 loads."""
    arch = load_model("deepseek-v3")
    assert arch.fp8_weight_block == (128, 128)
    assert fp8_block_misfits(arch, 16) == []
    assert any("gate_up_proj 576" in m for m in fp8_block_misfits(arch, 32))


@settings(max_examples=200, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8]), block=st.sampled_from([64, 128]), units=st.integers(1, 12),
       extra=st.integers(0, 127))
def test_inv_fp8_block_tp_the_experts_fit_exactly_when_their_share_is_whole_blocks(tp, block, units, extra):
    """INV-FP8-BLOCK-TP on the experts: a share of ``units`` blocks plus ``extra`` columns
    fits exactly when ``extra`` is a multiple of the block (SGLang's check on
    ``intermediate_size_per_partition``); attention and the rest are made to fit."""
    moe = (units * block + extra) * tp
    arch = load_model("qwen3-30b-a3b").model_copy(update={"moe_intermediate_size": moe,
                                                          "fp8_weight_block": (block, block)})
    misfits = fp8_block_misfits(arch, tp)
    assert (misfits == []) == (extra % block == 0)
    assert all("experts" in m for m in misfits)
    assert fp8_block_misfits(arch, tp, "hip") == ([] if block == 128 else misfits)
