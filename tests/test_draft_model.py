"""``profile --analytic --draft-model``: a separate draft model priced as itself.

SGLang 0.5.23's STANDALONE drafter loads ``--speculative-draft-model-path`` as a whole model
(its own embedding, layers and LM head) and runs it at the target's TP
(speculative/standalone_worker_v2.py builds a TpModelWorker for the draft model). Before,
every drafter was ``--draft-layers`` layers of the target's own shape: a 1B-class draft
model for Llama-3.1-70B was one 70B-shaped layer, twelve kernels where the draft model has
hundreds, so its serial draft steps came out too cheap.
"""

from __future__ import annotations

import pytest
import yaml
from specsched.sim.analytic.gpus import load_gpu
from specsched.sim.analytic.models import load_model
from specsched.sim.analytic.roofline import Parallel, weights_bytes
from specsched.sim.analytic.writer import build_profile, regenerate
from specsched.sim.profile import Profile

from specsched.cli import main


def _step(p, tokens, ctx=1024.0):
    g = p["gpu"]["draft_step"]
    return g["seconds"][g["x"].index(float(tokens))][g["context_len"].index(ctx)]


def _dec(p, bs, ctx=1024.0):
    g = p["gpu"]["decode"]
    return g["seconds"][g["x"].index(float(bs))][g["context_len"].index(ctx)]


def test_a_draft_model_is_priced_as_the_whole_model():
    tgt, drf, gpu = load_model("qwen3-30b-a3b"), load_model("qwen3-0.6b"), load_gpu("H100")
    own = build_profile(tgt, gpu, 1, window=4, drafter="chain", draft_model=drf)
    layer = build_profile(tgt, gpu, 1, window=4, drafter="chain")
    alone = build_profile(drf, gpu, 1)
    # a chain step of one token per request is the draft model's own decode step
    assert abs(_step(own, 1) - _dec(alone, 1)) < 0.05 * _dec(alone, 1)
    assert _step(own, 1) > 3 * _step(layer, 1)           # 28 layers, not one
    # its weights (own embedding and LM head) join the target's, nothing shared
    par = Parallel(tp=1, dtype="bf16")
    assert own["hardware"]["weight_bytes"] == pytest.approx(weights_bytes(tgt, par) + weights_bytes(drf, par), rel=1e-9)
    assert own["analytic"]["draft_model"]["name"] == drf.name
    assert "qwen3-0.6b" in own["provenance"]["drafter"]
    # a calibration's rebuild keeps the draft model
    again = regenerate(Profile.model_validate(own), matmul=0.7)
    assert _step(again, 1) == _step(own, 1)


def test_the_cli_takes_a_draft_model_and_refuses_a_bad_one(tmp_path, capsys):
    out = tmp_path / "p.yaml"
    assert main(["profile", "--analytic", "--model", "llama-3.1-70b", "--gpu", "H100", "--tp", "8", "--drafter", "chain",
                 "--window", "4", "--draft-model", "llama-3.1-8b", "-q", "--out", str(out)]) in (0, None)
    assert yaml.safe_load(out.read_text())["analytic"]["draft_model"]["num_layers"] == 32
    # a draft model whose heads the TP size does not split (Qwen2.5-7B: 28 heads at TP8)
    bad = tmp_path / "b.yaml"
    assert main(["profile", "--analytic", "--model", "llama-3.1-70b", "--gpu", "H100", "--tp", "8",
                 "--draft-model", "qwen2.5-7b", "--out", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--tp" in err[0] and "qwen2.5-7b" in err[0] and not bad.exists()
    assert main(["profile", "--analytic", "--model", "llama-3.1-70b", "--gpu", "H100", "--tp", "8",
                 "--draft-model", "llama-3.1-8b", "--draft-vocab", "32000", "--out", str(bad)]) == 2
    assert "--draft-vocab" in capsys.readouterr().err
    assert main(["profile", "--analytic", "--model", "llama-3.1-70b", "--gpu", "H100", "--draft-model", "nope",
                 "--out", str(bad)]) == 2
    assert "--draft-model = 'nope'" in capsys.readouterr().err


def test_draft_layers_with_a_draft_model_is_refused_not_ignored(tmp_path, capsys):
    # the draft model's layers are its own: --draft-layers 2 beside it changed nothing, silently
    bad = tmp_path / "b.yaml"
    assert main(["profile", "--analytic", "--model", "llama-3.1-70b", "--gpu", "H100", "--tp", "8", "--drafter", "chain",
                 "--draft-model", "llama-3.1-8b", "--draft-layers", "2", "--out", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--draft-layers = 2" in err[0] and "--draft-model" in err[0] and not bad.exists()


def test_a_draft_models_kv_shares_the_pool():
    """SGLang 0.5.23 sizes a STANDALONE (and EAGLE) server's pool with the draft's KV per token
    added: the target's per-layer cell x the draft's layers (model_executor/pool_configurator.py,
    ``_cell_size += int(_cell_size * draft_num_layers / num_layers)``; the draft layers from
    spec_aux_hidden_state.py, the draft config's num_hidden_layers). The pool was sized for the
    target's KV alone: a 28-layer draft model of a 48-layer target left 58 % more tokens."""
    tgt, drf, gpu = load_model("qwen3-30b-a3b"), load_model("qwen3-0.6b"), load_gpu("H100")
    own = build_profile(tgt, gpu, 1, window=4, drafter="chain", draft_model=drf)
    layer = build_profile(tgt, gpu, 1, window=4, drafter="chain")
    cell = layer["hardware"]["kv_cell_bytes"]
    assert own["hardware"]["draft_kv_cell_bytes"] == int(cell * drf.num_layers / tgt.num_layers)
    assert "draft model" in own["provenance"]["hardware.draft_kv_cell_bytes"]
    assert own["kv_transfer"]["bytes_per_token"] == cell   # a prefill rank sends the target's KV only


def test_a_draft_model_is_a_chain_drafter(tmp_path, capsys, monkeypatch):
    """SGLang 0.5.23 runs a separate draft model as STANDALONE, whose worker is an EAGLE worker
    (speculative/standalone_worker_v2.py ``StandaloneWorkerV2(EAGLEWorkerV2)``): chain draft
    steps. ``--draft-model`` with the default drafter priced a block drafter's whole-window
    forward and injection; it now defaults to chain, and an explicit block is refused."""
    monkeypatch.chdir(tmp_path)
    argv = ["profile", "--analytic", "--model", "llama-3.1-70b", "--gpu", "H100", "--tp", "8", "--draft-model", "llama-3.1-8b"]
    assert main(argv) == 0
    written = list((tmp_path / "profiles").glob("*.yaml"))
    assert len(written) == 1 and "draft-llama-3.1-8b" in written[0].name
    assert yaml.safe_load(written[0].read_text())["analytic"]["drafter"] == "chain"
    capsys.readouterr()
    assert main([*argv, "--drafter", "block", "--out", str(tmp_path / "b.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--drafter = 'block'" in err[0] and "chain" in err[0] and not (tmp_path / "b.yaml").exists()


def test_default_names_keep_kv_and_draft_variants_apart(tmp_path, monkeypatch):
    """Without --out, a profile with fp8 KV or a draft model was written under the plain
    profile's name, overwriting it."""
    monkeypatch.chdir(tmp_path)
    base = ["profile", "--analytic", "--model", "llama-3.1-70b", "--gpu", "H100", "--tp", "8"]
    for extra in ([], ["--kv-cache-dtype", "fp8_e4m3"], ["--draft-model", "llama-3.1-8b"], ["--kv-cache-dtype", "bf16"]):
        assert main([*base, *extra]) == 0
    names = sorted(p.name for p in (tmp_path / "profiles").glob("*.yaml"))
    assert names == ["h100-llama-3.1-70b-tp8-bf16-analytic.yaml",
                     "h100-llama-3.1-70b-tp8-bf16-draft-llama-3.1-8b-analytic.yaml",
                     "h100-llama-3.1-70b-tp8-bf16-kv-fp8-e4m3-analytic.yaml"]


def test_default_names_keep_drafter_variants_apart(tmp_path, monkeypatch):
    """Without --out, a chain drafter's profile (or another window, draft depth or draft
    vocabulary) was written under the default block drafter's name, overwriting it."""
    monkeypatch.chdir(tmp_path)
    base = ["profile", "--analytic", "--model", "llama-3.1-8b", "--gpu", "H100"]
    for extra in ([], ["--drafter", "chain"], ["--window", "4"], ["--draft-layers", "2"],
                  ["--drafter", "chain", "--draft-vocab", "32000"], ["--window", "6", "--draft-layers", "1"]):
        assert main([*base, *extra]) == 0
    names = sorted(p.name for p in (tmp_path / "profiles").glob("*.yaml"))
    assert names == ["h100-llama-3.1-8b-tp1-bf16-analytic.yaml",
                     "h100-llama-3.1-8b-tp1-bf16-chain-analytic.yaml",
                     "h100-llama-3.1-8b-tp1-bf16-chain-dv32000-analytic.yaml",
                     "h100-llama-3.1-8b-tp1-bf16-dl2-analytic.yaml",
                     "h100-llama-3.1-8b-tp1-bf16-w4-analytic.yaml"]


def test_standalone_on_a_profile_without_a_draft_model_says_what_it_prices(tmp_path, capsys):
    """speculative_algorithm standalone on an analytic profile written without --draft-model
    ran silently with its draft steps priced as the profile's one target-shaped layer (an
    EAGLE head), not a separate draft model; run and compare now say so in one note, and a
    profile with a draft model gets none."""
    plain, dm = tmp_path / "plain.yaml", tmp_path / "dm.yaml"
    base = ["profile", "--analytic", "--model", "llama-3.1-8b", "--gpu", "H100", "--tp", "1", "-q"]
    assert main([*base, "--out", str(plain)]) in (0, None)
    assert main([*base, "--draft-model", "llama-3.2-1b", "--out", str(dm)]) in (0, None)
    sc = tmp_path / "s.yaml"
    sc.write_text(yaml.safe_dump({
        "name": "s", "profile": str(plain),
        "server": {"speculative_algorithm": "standalone", "speculative_num_steps": 2},
        "acceptance": {"mean_accept_length": 2.0},
        "workload": {"kind": "burst", "num_requests": 2, "input_len": {"kind": "fixed", "value": 64},
                     "output_len": {"kind": "fixed", "value": 8}},
        "arms": {"base": {}, "eagle": {"server": {"speculative_algorithm": "eagle"}}}}))
    capsys.readouterr()
    assert main(["run", str(sc), "-q", "--out", str(tmp_path / "r1")]) in (0, None)
    notes = [x for x in capsys.readouterr().err.splitlines() if "no draft model" in x]
    assert len(notes) == 1 and "--draft-model" in notes[0]
    assert main(["compare", str(sc), "--arms", "base,eagle", "--seeds", "1", "--no-save"]) in (0, None)
    assert sum("no draft model" in x for x in capsys.readouterr().err.splitlines()) == 1
    assert main(["run", str(sc), "-q", "--set", f"profile={dm}", "--out", str(tmp_path / "r2")]) in (0, None)
    assert "no draft model" not in capsys.readouterr().err


def test_a_drafter_of_the_other_kind_than_the_profile_prices_is_said(tmp_path, capsys):
    """An analytic profile written for a block drafter (the default) run with EAGLE-3, a chain
    drafter, priced its draft steps from the block drafter's forward (the whole window on the
    target's LM head) without a word; run and compare now say so in one warning line naming
    the --drafter that fits, and a profile of the scenario's kind gets none."""
    block, chain = tmp_path / "block.yaml", tmp_path / "chain.yaml"
    base = ["profile", "--analytic", "--model", "llama-3.1-8b", "--gpu", "H100", "--tp", "1", "--window", "4", "-q"]
    assert main([*base, "--out", str(block)]) in (0, None)
    assert main([*base, "--drafter", "chain", "--out", str(chain)]) in (0, None)
    sc = tmp_path / "s.yaml"
    sc.write_text(yaml.safe_dump({
        "name": "s", "profile": str(block),
        "server": {"speculative_algorithm": "eagle3", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                   "speculative_num_draft_tokens": 4},
        "acceptance": {"mean_accept_length": 2.0},
        "workload": {"kind": "burst", "num_requests": 2, "input_len": {"kind": "fixed", "value": 64},
                     "output_len": {"kind": "fixed", "value": 8}},
        "arms": {"dspark": {"server": {"speculative_algorithm": "dspark", "speculative_num_steps": None,
                                       "speculative_eagle_topk": None}}}}))
    capsys.readouterr()

    def warned(argv):
        assert main(argv) in (0, None)
        return [x for x in capsys.readouterr().err.splitlines() if "drafter" in x and x.startswith("warning:")]

    (w,) = warned(["run", str(sc), "-q", "--out", str(tmp_path / "r1")])
    assert "eagle3" in w and "--drafter chain" in w, w
    assert len(warned(["compare", str(sc), "--arms", "base,dspark", "--seeds", "1", "--no-save"])) == 1
    assert warned(["run", str(sc), "-q", "--set", f"profile={chain}", "--out", str(tmp_path / "r2")]) == []
    assert warned(["run", str(sc), "-q", "--arm", "dspark", "--out", str(tmp_path / "r3")]) == []
    (w,) = warned(["run", str(sc), "-q", "--arm", "dspark", "--set", f"profile={chain}", "--out", str(tmp_path / "r4")])
    assert "dspark" in w and "--drafter block" in w, w


def test_a_profile_out_holding_a_scenario_is_not_replaced(tmp_path, capsys):
    """`specsched profile --analytic --out my.yaml` and `calibrate --from --out my.yaml` wrote
    a profile over the user's scenario my.yaml without a word; a file that is no profile (no
    gpu) is now refused in one line, exit 2, left as it was; an older profile is replaced."""
    scenario_text = "name: my\nprofile: p.yaml\nworkload: {kind: burst}\n"
    mine = tmp_path / "my.yaml"
    mine.write_text(scenario_text)
    base = ["profile", "--analytic", "--model", "llama-3.1-8b", "--gpu", "H100", "-q"]
    capsys.readouterr()
    assert main([*base, "--out", str(mine)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out" in err[0] and "not a profile" in err[0], err
    assert mine.read_text() == scenario_text
    prof = tmp_path / "p.yaml"
    assert main([*base, "--out", str(prof)]) in (0, None)
    assert main([*base, "--tp", "2", "--out", str(prof)]) in (0, None)   # a profile: replaced
    assert "tp_size: 2" in prof.read_text()


@pytest.mark.parametrize(("args", "said"), [
    ([], "drafter: block (DSpark/DFlash), 1 target-shaped dense layer(s), verify window 6 (the default; an EAGLE/MTP "
         "server: --drafter chain)"),
    (["--drafter", "chain", "--window", "4"],
     "drafter: chain (EAGLE/MTP/STANDALONE), 1 target-shaped dense layer(s), verify window 4 (--drafter chain)"),
    (["--draft-model", "llama-3.1-8b"],
     "drafter: chain (EAGLE/MTP/STANDALONE), the draft model llama-3.1-8b, verify window 6 (--draft-model)"),
])
def test_an_analytic_profile_says_which_drafter_it_assumed(tmp_path, capsys, args, said):
    """An EAGLE user ran ``profile --analytic`` without ``--drafter`` and got a block
    (DSpark) drafter's speculative costs with no word of it: the summary named the drafter's
    KV only. It now says the drafter priced, its size and window, and, when it is the
    default, that an EAGLE/MTP server wants ``--drafter chain``; the file records the same."""
    out = tmp_path / "p.yaml"
    assert main(["profile", "--analytic", "--model", "llama-3.1-70b", "--gpu", "H100", "--tp", "8", *args,
                 "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert said in lines, lines
    analytic = yaml.safe_load(out.read_text())["analytic"]
    assert said.startswith(f"drafter: {analytic['drafter']} ") and f"window {analytic['window']} " in said


def test_an_moe_targets_assumed_drafter_is_said_to_be_moe(tmp_path, capsys):
    """DeepSeek-V3's MTP layer is priced as an MoE layer like the target's (SGLang 0.5.23
    deepseek_nextn.py builds it as a sparse DeepseekV2DecoderLayer; roofline.draft_arch), but
    the summary and the provenance called it dense. A dense target keeps "dense"."""
    out = tmp_path / "p.yaml"
    assert main(["profile", "--analytic", "--model", "deepseek-v3", "--gpu", "H200", "--tp", "8",
                 "--drafter", "chain", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "drafter: chain (EAGLE/MTP/STANDALONE), 1 target-shaped MoE layer(s), verify window 6 (--drafter chain)" in lines
    prov = yaml.safe_load(out.read_text())["provenance"]["drafter"]
    assert "target-shaped MoE decoder layer(s)" in prov and "dense" not in prov


@pytest.mark.parametrize(("given", "kind"), [("eagle", "chain"), ("EAGLE3", "chain"), ("nextn", "chain"),
                                             ("dflash", "block"), ("tree", None)])
def test_an_algorithm_name_as_drafter_is_told_its_kind(tmp_path, capsys, given, kind):
    """An EAGLE user typed ``--drafter eagle`` (SGLang's --speculative-algorithm name) and read
    "allowed: block, chain" with no word which one EAGLE is. The one line now names the
    algorithms of each kind and, for an algorithm's name, the --drafter to give; no file."""
    out = tmp_path / "p.yaml"
    assert main(["profile", "--analytic", "--model", "llama-3.1-8b", "--gpu", "H200", "--drafter", given,
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--drafter = '{given}'" in err[0] and "chain (eagle, eagle3, nextn" in err[0], err
    assert (f"for {given} give --drafter {kind}" in err[0]) if kind else "give --drafter" not in err[0]
    assert not out.exists()
