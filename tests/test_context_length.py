"""A request longer than the model's context length, where the profile knows it
(``hardware.context_len``: an analytic profile's ``max_position_embeddings``): SGLang 0.5.23
rejects it (managers/tokenizer_manager.py ``_validate_one_request``), and every command that
simulates refuses the scenario in one line, exit 2, nothing written, as ``run`` does; the
commands that predict a real server's runs (``validate --measured``, ``validate-bench``,
``calibrate --from``) did not check and simulated the rejected requests. A profile that does
not know the context (a measured grid profile) is not checked, and no warning is printed."""

from __future__ import annotations

import json

import pytest
import yaml

from specsched.cli import main
from tests.conftest import ROOT

ANALYTIC = "h100-llama-3.1-8b-eagle3-analytic"   # hardware.context_len 131072
LINE = ROOT / "tests" / "data" / "bench" / "sglang-0.5.23.jsonl"   # line 1: random, 1024 in / 8 out, 3 requests


def _long_line(tmp_path, random_input_len: int) -> str:
    run = json.loads(LINE.read_text().splitlines()[0])
    run["random_input_len"] = random_input_len
    p = tmp_path / "runs.jsonl"
    p.write_text(json.dumps(run) + "\n")
    return str(p)


def _scenario(tmp_path, input_len: int, profile: str = ANALYTIC) -> str:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({
        "name": "s", "profile": profile, "server": {"speculative_algorithm": "none"},
        "workload": {"kind": "burst", "num_requests": 3, "input_len": {"kind": "fixed", "value": input_len},
                     "output_len": {"kind": "fixed", "value": 8}}}))
    return str(p)


@pytest.mark.parametrize("command", ["run", "validate-measured", "validate-bench", "calibrate"])
def test_a_prompt_past_a_known_context_is_refused_by_every_command(tmp_path, capsys, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    line = _long_line(tmp_path, 140_000)
    argv = {
        "run": ["run", _scenario(tmp_path, 140_000), "--out", "out"],
        "validate-measured": ["validate", "--measured", line, "--profile", ANALYTIC, "--seeds", "1", "--out", "out"],
        "validate-bench": ["validate-bench", line, "--profile", ANALYTIC, "--seeds", "1", "--out", "out"],
        "calibrate": ["calibrate", "--from", line, "--profile", ANALYTIC, "--params", "decode", "--seeds", "1",
                      "--max-evals", "1", "--out", "out.yaml"],
    }[command]
    before = set(tmp_path.iterdir())
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "workload.input_len" in err[0] and "140000" in err[0] and "context length 131072" in err[0], err[0]
    if command != "run":   # a built scenario is a temporary file: the line it was built from is named
        assert err[0].startswith(f"specsched: error: {line}:1: "), err[0]
    assert set(tmp_path.iterdir()) == before


def test_a_given_scenario_past_the_context_is_refused_by_validate(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = _scenario(tmp_path, 140_000)
    for argv in (["validate", "--measured", f"{LINE}:1", "--scenario", s, "--seeds", "1", "--out", "out"],
                 ["validate-bench", f"{LINE}:1", "--scenario", s, "--seeds", "1", "--out", "out"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"specsched: error: {s}: workload.input_len = 140000"), err
    assert not (tmp_path / "out").exists()


def test_within_the_context_validate_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "--measured", _long_line(tmp_path, 4000), "--profile", ANALYTIC, "--seeds", "1",
                 "--out", "out"]) == 0
    assert (tmp_path / "out" / "validate.csv").is_file()


def test_an_unknown_context_is_not_checked_and_not_warned_about(tmp_path, capsys, monkeypatch):
    """h200-1b (a measured grid profile) states no context length: a 200K-token prompt runs,
    and nothing on stderr speaks of a context length (the README's first command and the
    bundled scenarios print no new line)."""
    monkeypatch.chdir(tmp_path)
    s = _scenario(tmp_path, 200_000, profile="h200-1b")
    assert main(["run", s, "--set", "server.max_total_num_tokens=1000000", "--out", "out"]) == 0
    assert "context length" not in capsys.readouterr().err   # the grid's range notes may speak of its context axis
    assert main(["run", "burst256-ht", "--out", "b"]) == 0
    assert capsys.readouterr().err == ""


def test_the_runtimes_validate_refuses_before_measuring(tmp_path, capsys, monkeypatch):
    """``specsched validate S --profile P --device cpu``: the prediction with P's model would
    hold requests SGLang rejects; refused before the runtime measures anything."""
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    s = _scenario(tmp_path, 140_000, profile="h200-1b")
    assert main(["validate", s, "--profile", ANALYTIC, "--device", "cpu", "--preset", "tiny", "--out", "out"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "context length 131072" in err[0] and f"profile {ANALYTIC}" in err[0], err
    assert not (tmp_path / "out").exists()


def test_the_servers_context_length_replaces_the_models(tmp_path, capsys, monkeypatch):
    """``server.context_length`` (SGLang's ``--context-length``: configs/model_config.py
    ``ModelConfig._derive_context_length`` sets ``context_len`` to it) is the limit SGLang
    checks requests against: a prompt the model's 131072 would take is refused under 4096,
    and a grid profile that states no context is checked against it."""
    monkeypatch.chdir(tmp_path)
    for profile in (ANALYTIC, "h200-1b"):
        s = _scenario(tmp_path, 8000, profile=profile)
        assert main(["run", s, "--set", "server.context_length=4096", "--out", "out"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "workload.input_len = 8000" in err[0], err
        assert "context length 4096 (server.context_length)" in err[0], err[0]
        assert main(["run", s, "--set", "server.context_length=16384", "--set", "server.max_total_num_tokens=200000",
                     "--out", "out"]) == 0
        capsys.readouterr()


def test_a_bench_lines_server_info_context_length_is_the_limit(tmp_path, capsys, monkeypatch):
    """A bench_serving line whose server_info carries ``context_length`` (the server was
    launched with --context-length) is predicted under that limit: its 4000-token prompts are
    refused at 2048, in one line naming the line."""
    monkeypatch.chdir(tmp_path)
    run = json.loads(LINE.read_text().splitlines()[0])
    run["random_input_len"] = 4000
    run["server_info"] = {**(run.get("server_info") or {}), "context_length": 2048}
    p = tmp_path / "runs.jsonl"
    p.write_text(json.dumps(run) + "\n")
    assert main(["validate", "--measured", str(p), "--profile", ANALYTIC, "--seeds", "1", "--out", "out"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "context length 2048 (server.context_length)" in err[0], err


def test_the_max_running_requests_default_uses_the_servers_context_length():
    """SGLang's default max_running_requests (from the KV pool over context_len x 512) reads
    ModelConfig.context_len, which --context-length sets: a shorter context gives more slots."""
    from specsched.sim.config import Scenario
    from specsched.sim.defaults import apply_hardware_defaults

    def resolved(server: dict) -> tuple[int, str]:
        sc = Scenario.model_validate({"name": "t", "profile": ANALYTIC, "server": {"speculative_algorithm": "none", **server},
                                      "workload": {"kind": "burst", "num_requests": 2,
                                                   "input_len": {"kind": "fixed", "value": 100},
                                                   "output_len": {"kind": "fixed", "value": 8}}})
        out, filled = apply_hardware_defaults(sc, given=set(server))
        why = next(r.why for r in filled if r.key == "max_running_requests")
        return out.server.max_running_requests, why

    model, why_model = resolved({})
    short, why_short = resolved({"context_length": 8192})
    assert "context length 131072" in why_model and "context length 8192" in why_short
    assert short > model


@pytest.mark.parametrize("context_length, warned", [(None, False), (4096, False), (131072, False), (200_000, True)])
def test_a_context_length_past_the_models_is_warned_about(tmp_path, capsys, monkeypatch, context_length, warned):
    """SGLang 0.5.23 stops at start when ``--context-length`` is above the model's own
    (configs/model_config.py ``ModelConfig._derive_context_length``: "User-specified
    context_length ... is greater than the derived context_length") unless
    SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1; the run took 200000 on a 131072-token Llama
    without a word. It still runs (as with the variable set), with one warning line saying so;
    at or below the model's length nothing is said."""
    monkeypatch.chdir(tmp_path)
    s = _scenario(tmp_path, 1000)
    over = ["--set", f"server.context_length={context_length}"] if context_length else []
    assert main(["run", s, *over, "--out", "out"]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" in line]
    assert len(err) == int(warned), err
    if warned:
        assert err[0].startswith("warning: server.context_length 200000 is above the model's context length 131072")


def test_a_disaggregated_roles_context_length_past_the_models_is_warned_about_once(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = _scenario(tmp_path, 1000)
    assert main(["run", s, "--set", "server.disaggregation.prefill.instances=1",
                 "--set", "server.disaggregation.decode.server.context_length=150000", "--out", "out"]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" in line]
    assert len(err) == 1 and "server.disaggregation.decode.server.context_length 150000" in err[0], err
