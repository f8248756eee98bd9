"""`specsched profile --analytic`: what the command takes and refuses for a model, a GPU and a
weight format, as SGLang 0.5.23 would serve them."""

from __future__ import annotations

import json

import pytest
from specsched.sim.analytic.models import shipped_models
from specsched.sim.profile import load_profile

from specsched.cli import main


def _run(tmp_path, capsys, *args):
    """(exit code, stdout, stderr, the profile written or None) of one profile command."""
    out = tmp_path / "p.yaml"
    out.unlink(missing_ok=True)
    code = main(["profile", "--analytic", *args, "--out", str(out)])
    cap = capsys.readouterr()
    return code, cap.out, cap.err.strip(), load_profile(str(out)) if out.exists() else None


def _refused(tmp_path, capsys, *args):
    code, _, err, prof = _run(tmp_path, capsys, *args)
    assert code == 2 and prof is None and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("gpu", ["MI355X", "MI300X"])
def test_nvfp4_weights_are_refused_on_rocm_and_taken_on_cuda_sm80_and_up(tmp_path, capsys, gpu):
    """SGLang 0.5.23 builds no NVFP4 linear off CUDA: the FP4 GEMM backend resolves to
    flashinfer_cutlass there (layers/quantization/fp4_utils.py initialize_fp4_gemm_config) and
    ModelOptFp4LinearMethod.process_weights_after_loading raises unless the GPU is Blackwell or
    the backend is Marlin (CUDA SM80-SM90). ModelOptFp4Config.get_min_capability is 80, so an
    H100 or A100 serves NVFP4 as weight-only Marlin: taken there. An MI355X nvfp4 profile was
    written at its MXFP4 peak."""
    err = _refused(tmp_path, capsys, "--model", "llama-3.1-8b", "--gpu", gpu, "--dtype", "nvfp4")
    assert "--dtype = 'nvfp4'" in err and f"not on {gpu}" in err and f"allowed on {gpu}: bf16, fp8, mxfp4, int4" in err
    # a checkpoint that is NVFP4 itself is refused the same way, naming its quantization_config
    cfg = {**shipped_models()["llama-3.1-8b"], "quantization_config": {"quant_method": "modelopt_fp4"}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    err = _refused(tmp_path, capsys, "--model", str(path), "--gpu", gpu)
    assert "quantization_config = 'nvfp4'" in err and "give --dtype" in err
    assert _run(tmp_path, capsys, "--model", str(path), "--gpu", gpu, "--dtype", "mxfp4")[0] == 0
    for cuda in ("H100", "A100-80G", "B200"):
        assert _run(tmp_path, capsys, "--model", "llama-3.1-8b", "--gpu", cuda, "--dtype", "nvfp4")[0] == 0


def _config(tmp_path, **over):
    """llama-3.1-8b's config.json with ``over`` (a value None: the key left out)."""
    cfg = {k: v for k, v in {**shipped_models()["llama-3.1-8b"], **over}.items() if k != "source" and v is not None}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return str(path)


@pytest.mark.parametrize("over, key", [({"architectures": ["BertModel"]}, "architectures = 'BertModel'"),
                                       ({"architectures": ["Qwen3ForRewardModel"]}, "architectures"),
                                       ({"architectures": ["FooForSequenceClassification"]}, "architectures"),
                                       ({"architectures": ["FooModel"], "model_type": "xlm-roberta"}, "model_type")])
def test_a_non_generative_or_encoder_only_config_is_refused(tmp_path, capsys, over, key):
    """An embedding, reward or classification model (SGLang 0.5.23 configs/model_config.py
    is_generation_model) or an encoder-only one never decodes: it was priced as a Llama decoder."""
    err = _refused(tmp_path, capsys, "--model", _config(tmp_path, **over), "--gpu", "H200")
    assert key in err and "generative decoder" in err


@pytest.mark.parametrize("over, said", [({"architectures": ["FooBarForCausalLM"]}, "architectures FooBarForCausalLM"),
                                        ({"architectures": None}, "no architectures in the config")])
def test_an_architecture_sglang_has_no_class_for_is_priced_as_a_llama_decoder_and_said(tmp_path, capsys, over, said):
    """A name none of SGLang 0.5.23's model classes carries (models/registry.py), or none at all,
    was priced silently as a Llama decoder: one note line says so; a native name says nothing."""
    code, _, err, prof = _run(tmp_path, capsys, "--model", _config(tmp_path, **over), "--gpu", "H200")
    notes = [line for line in err.splitlines() if "Llama-style dense decoder" in line]
    assert code == 0 and prof is not None and len(notes) == 1 and notes[0].startswith("note:") and said in notes[0]
    for native in ("LlamaForCausalLM", "MistralForCausalLM", "Olmo3ForCausalLM"):   # Olmo3: SGLang's Olmo2 class
        err = _run(tmp_path, capsys, "--model", _config(tmp_path, architectures=[native]), "--gpu", "H200")[2]
        assert "Llama-style dense decoder" not in err


def test_a_draft_model_of_another_vocabulary_is_refused_as_sglang_refuses_it(tmp_path, capsys):
    """SGLang 0.5.23 stops at start when a STANDALONE draft model's vocab_size differs from the
    target's (speculative/standalone_worker_v2.py _validate_vocab_compatibility): Qwen3-0.6B
    (151936) drafting for Qwen2.5-72B (152064) was written silently."""
    err = _refused(tmp_path, capsys, "--model", "qwen2.5-72b", "--gpu", "H100", "--tp", "4",
                   "--draft-model", "qwen3-0.6b")
    assert "--draft-model = 'qwen3-0.6b'" in err and "151936" in err and "152064" in err
    code, _, err, _ = _run(tmp_path, capsys, "--model", "qwen3-32b", "--gpu", "H100", "--tp", "4",
                           "--draft-model", "qwen3-0.6b")
    assert code == 0 and "vocab" not in err


def test_more_draft_layers_than_the_target_has_is_warned_once(tmp_path, capsys):
    """--draft-layers prices a drafter of that many target-shaped layers; one deeper than the
    target itself (llama-3.2-1b has 16) was taken silently. One warning line; 16 says nothing."""
    for layers, warned in ((17, True), (16, False)):
        code, _, err, prof = _run(tmp_path, capsys, "--model", "llama-3.2-1b", "--gpu", "H100",
                                  "--draft-layers", str(layers))
        lines = [line for line in err.splitlines() if "--draft-layers" in line]
        assert code == 0 and prof is not None and len(lines) == int(warned)
        assert not warned or (lines[0].startswith("warning:") and "16 layers" in lines[0])


@pytest.mark.parametrize("given, dtype", [("FP8", "fp8"), ("BF16", "bf16"), ("bfloat16", "bf16"), ("Int4", "int4"),
                                          ("modelopt_fp8", "fp8"), ("awq", "int4"), ("MODELOPT_FP4", "nvfp4")])
def test_dtype_is_read_in_any_case_and_in_sglangs_own_spellings(tmp_path, capsys, given, dtype):
    """--gpu h100 was taken while --dtype FP8 or bfloat16 (SGLang's own --dtype spelling) was
    refused; the --quantization names of one weight format (arg_groups/choices.py) are taken too."""
    code, _, _, prof = _run(tmp_path, capsys, "--model", "llama-3.1-8b", "--gpu", "h100", "--dtype", given)
    assert code == 0 and prof.analytic["dtype"] == dtype and prof.name == f"h100-llama-3.1-8b-tp1-{dtype}-analytic"


@pytest.mark.parametrize("given", ["float8", "fp8_e4m3", "gptq", "int8"])
def test_a_dtype_spelling_sglang_does_not_use_for_weights_is_refused_with_the_allowed_list(tmp_path, capsys, given):
    err = _refused(tmp_path, capsys, "--model", "llama-3.1-8b", "--gpu", "H100", "--dtype", given)
    assert f"--dtype = {given!r}" in err and "allowed: bf16, fp8, mxfp4, nvfp4, int4" in err and "bfloat16" in err


@pytest.mark.parametrize("name, shipped, tag", [("Qwen/Qwen2.5-7B-Instruct-AWQ", "qwen2.5-7b", "AWQ"),
                                                ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4", "qwen2.5-7b", "GPTQ-Int4"),
                                                ("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", "llama-3.1-8b",
                                                 "AWQ-INT4"),
                                                ("TheBloke/Llama-3.1-8B-GPTQ", "llama-3.1-8b", "GPTQ")])
def test_an_awq_or_gptq_hub_id_of_a_shipped_model_prices_int4_weights(tmp_path, capsys, name, shipped, tag):
    """-AWQ, -GPTQ(-Int4), -Int4 ids of a shipped model were refused as "not a shipped model" while
    -FP8 ids were read; the roofline prices AWQ/GPTQ w4a16 as int4 (a config.json with quant_method
    awq or gptq bits 4), so the id prices the same weights as --dtype int4 on the shipped name."""
    code, out, _, prof = _run(tmp_path, capsys, "--model", name, "--gpu", "H100")
    assert code == 0 and prof.analytic["dtype"] == "int4" and f"as its {tag} tag states" in out
    assert ("4-bit assumed" in out) == (tag == "GPTQ")
    as_int4 = _run(tmp_path, capsys, "--model", shipped, "--gpu", "H100", "--dtype", "int4")[3]
    assert prof.hardware.weight_bytes == as_int4.hardware.weight_bytes
    assert prof.gpu.decode.seconds == as_int4.gpu.decode.seconds
    # another --dtype contradicts the checkpoint's format, as with an FP8 id
    err = _refused(tmp_path, capsys, "--model", name, "--gpu", "H100", "--dtype", "fp8")
    assert "--dtype = 'fp8'" in err and "allowed: int4, or no --dtype" in err


@pytest.mark.parametrize("name", ["Qwen/Qwen2.5-7B-Instruct-GPTQ-Int8", "RedHatAI/Llama-3.1-8B-Instruct-W8A8"])
def test_an_int8_hub_id_of_a_shipped_model_says_it_is_not_priced_and_what_to_give(tmp_path, capsys, name):
    err = _refused(tmp_path, capsys, "--model", name, "--gpu", "H100")
    assert f"--model = {name!r}" in err and "8-bit integer weights" in err and "config.json" in err
    assert "--dtype fp8" in err and "not a config.json file nor a shipped model" not in err
