"""A user policy that never admits, measured and simulated (docs/policies.md): ``specsched
run`` reports the stall in one line; the runtime's loop spun forever on it (the host clock
moves, so the simulator's same-instant spin count never tripped). A policy that holds the
queue until more requests arrive is no stall: SGLang's idle loop keeps polling
``recv_requests`` (managers/scheduler.py ``event_loop_overlap``: no batch, loop again), so the
server waits for the next send, and both sides must run it."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from specsched.cli import main

pytest.importorskip("torch")

RULES = textwrap.dedent('''
    from specsched.sim.admission import AdmissionDelayBase


    class Never(AdmissionDelayBase):
        name = "never"
        stateless = True

        def should_delay(self, state):
            return True


    class WaitForThree(AdmissionDelayBase):
        name = "wait_for_three"
        stateless = True

        def should_delay(self, state):
            return state.running_bs == 0 and state.waiting_bs < 3
''')


@pytest.fixture(autouse=True)
def _deadline(deadline):
    """Fail, rather than hang the suite, where a run never ends (the bug under test)."""
    yield


def _scenario(tmp_path, delay: str, workload: dict) -> str:
    (tmp_path / "rules.py").write_text(RULES)
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({
        "name": "stall-tiny", "profile": "h200-1b", "seed": 1,
        "server": {"max_running_requests": 4, "max_total_num_tokens": 5000, "chunked_prefill_size": 64,
                   "max_prefill_tokens": 96, "speculative_algorithm": "dspark", "speculative_num_draft_tokens": 4,
                   "admission_delay": delay},
        "acceptance": {"mean_accept_length": 2.5, "request_spread": 0.3},
        "workload": {"num_requests": 6, "input_len": {"kind": "fixed", "value": 16},
                     "output_len": {"kind": "fixed", "value": 4}, **workload}}))
    return str(p)


@pytest.mark.parametrize("workload", [{"kind": "burst"}, {"kind": "closed_loop", "concurrency": 2},
                                      {"kind": "poisson", "request_rate": 2000.0}])
def test_a_policy_that_never_admits_is_one_line_exit_2_when_measured(tmp_path, capsys, monkeypatch, workload):
    monkeypatch.chdir(tmp_path)
    s = _scenario(tmp_path, "rules.py:Never", workload)
    before = set(tmp_path.iterdir())
    assert main(["measure", s, "--preset", "tiny", "--device", "cpu", "--out", "out", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "rules.py:Never" in err and "stalls the server" in err
    assert set(tmp_path.iterdir()) == before


def test_a_policy_that_waits_for_more_arrivals_runs_simulated_and_measured(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = _scenario(tmp_path, "rules.py:WaitForThree", {"kind": "poisson", "request_rate": 2000.0})
    assert main(["run", s, "--out", "sim", "--quiet"]) == 0, capsys.readouterr().err
    assert main(["measure", s, "--preset", "tiny", "--device", "cpu", "--out", "rt", "--quiet"]) == 0
    import json

    for d in ("sim", "rt"):
        summary = json.loads((tmp_path / d / "summary.json").read_text())
        assert summary["completed"] == 6, (d, summary.get("completed"))


@pytest.mark.parametrize("workload", [{"kind": "burst"}, {"kind": "closed_loop", "concurrency": 2},
                                      {"kind": "poisson", "request_rate": 2000.0}])
def test_a_policy_that_never_admits_is_one_line_exit_2_when_simulated(tmp_path, capsys, monkeypatch, workload):
    """The simulator idles until the next send, a client's zero-delay step included (the
    burst's), and reports the stall once nothing is left to come."""
    monkeypatch.chdir(tmp_path)
    s = _scenario(tmp_path, "rules.py:Never", workload)
    assert main(["run", s, "--out", "sim", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "stalls the server" in err, err
    assert not (tmp_path / "sim").exists()


def test_the_stall_names_the_stalled_runs_policy_not_another_arms(tmp_path, capsys, monkeypatch):
    """The message named every user policy loaded in the process: an arm's own
    (other_rules.py:WaitForThree, validated with the scenario but not run) beside the one that
    stalled."""
    monkeypatch.chdir(tmp_path)
    s = _scenario(tmp_path, "rules.py:Never", {"kind": "burst"})
    doc = yaml.safe_load(open(s))
    (tmp_path / "other_rules.py").write_text(RULES)
    doc["arms"] = {"patient": {"server": {"admission_delay": "other_rules.py:WaitForThree"}}}
    open(s, "w").write(yaml.safe_dump(doc))
    assert main(["run", s, "--out", "sim", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "under the user policy rules.py:Never:" in err and "WaitForThree" not in err, err
