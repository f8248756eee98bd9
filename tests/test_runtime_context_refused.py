"""A request longer than the server's context length (``server.context_length``, SGLang's
``--context-length``) is refused by ``specsched measure`` as ``specsched run`` and ``validate``
refuse it (sim/limits.py ``check_context``: SGLang rejects such a prompt). The runtime checked
the KV pool only (``check_pool``) and measured 40-token prompts under a 32-token context."""

from __future__ import annotations

import pytest
import yaml

from specsched.cli import main

pytest.importorskip("torch")


def _scenario(tmp_path, inp: int, out: int) -> str:
    p = tmp_path / "ctx.yaml"
    p.write_text(yaml.safe_dump({
        "name": "ctx-tiny", "profile": "tiny", "seed": 1,
        "server": {"max_running_requests": 4, "max_total_num_tokens": 5000, "chunked_prefill_size": 64,
                   "max_prefill_tokens": 96, "speculative_algorithm": "dspark", "speculative_num_draft_tokens": 4,
                   "context_length": 32},
        "acceptance": {"mean_accept_length": 2.5, "request_spread": 0.3},
        "workload": {"kind": "burst", "num_requests": 2, "input_len": {"kind": "fixed", "value": inp},
                     "output_len": {"kind": "fixed", "value": out}}}))
    return str(p)


def _refused_alike(tmp_path, capsys, s: str, said: str) -> None:
    """``run`` and ``measure`` refuse the scenario ``s`` with the same one line, which holds
    ``said``, and measure writes nothing."""
    assert main(["run", s]) == 2
    said_by_run = capsys.readouterr().err.strip()
    before = set(tmp_path.iterdir())
    assert main(["measure", s, "--preset", "tiny", "--device", "cpu", "--out", "out", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0] == said_by_run and said in err[0], err
    assert set(tmp_path.iterdir()) == before


def _with(s: str, server: dict, workload: dict | None = None) -> str:
    raw = yaml.safe_load(open(s))
    raw["server"].update(server)
    raw["workload"].update(workload or {})
    open(s, "w").write(yaml.safe_dump(raw))
    return s


@pytest.mark.parametrize("inp, out, key", [(40, 4, "workload.input_len = 40"), (20, 16, "workload.output_len = 16")])
def test_a_request_past_the_context_is_refused_by_measure_as_by_run(tmp_path, capsys, monkeypatch, inp, out, key):
    monkeypatch.chdir(tmp_path)
    s = _scenario(tmp_path, inp, out)
    _refused_alike(tmp_path, capsys, s, f"{s}: {key}:")


def test_a_request_within_the_context_is_measured(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["measure", _scenario(tmp_path, 20, 8), "--preset", "tiny", "--device", "cpu", "--out", "out", "-q"]) == 0
    assert (tmp_path / "out" / "summary.json").is_file()


def test_a_chunk_of_part_pages_is_refused_by_measure_as_by_run(tmp_path, capsys, monkeypatch):
    """SGLang refuses to start with a chunk that is not whole pages (arg_groups/validation_hook.py
    ``check_server_args``); ``measure`` (and so ``validate``) ran such a server, which ``run``
    refuses (sim/limits.py ``check_chunk_pages``)."""
    monkeypatch.chdir(tmp_path)
    s = _with(_scenario(tmp_path, 8, 4), {"page_size": 16, "chunked_prefill_size": 100})
    _refused_alike(tmp_path, capsys, s, "server.chunked_prefill_size = 100")


def test_a_cut_output_past_the_pool_is_named_by_measure_as_by_run(tmp_path, capsys, monkeypatch):
    """An output SGLang cuts to what the pool holds and that still does not fit is named as the
    scenario asks for it, with the cut, by ``measure`` as by ``run``: measure named the cut
    (``workload.output_len = 26``), a value the scenario nowhere states."""
    monkeypatch.chdir(tmp_path)
    s = _with(_scenario(tmp_path, 32, 48), {"max_total_num_tokens": 60, "context_length": 4096}, {"ignore_eos": False})
    _refused_alike(tmp_path, capsys, s, "workload.output_len = 48: SGLang cuts it to")
