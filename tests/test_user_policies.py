"""User-written policies loaded from outside the package (docs/policies.md): a policy file
next to a scenario runs from the scenario and shows up in ``specsched compare``; bad specs
fail at load with one line naming the key, value and what is allowed (exit 2)."""

from __future__ import annotations

import textwrap

import pytest
import yaml
from specsched.sim.admission import SHIPPED, make_policy, policy_class
from specsched.sim.admission.base import REQUIRED_METHODS
from specsched.sim.config import ServerArgs, load_scenario
from specsched.sim.errors import ConfigError
from specsched.sim.policy_loader import PolicyLoadError, load_policy_class

from specsched.cli import main

POLICY = textwrap.dedent('''
    from specsched.sim.admission import AdmissionDelayBase, AdmissionState


    class HoldForFour(AdmissionDelayBase):
        name = "hold_for_four"
        stateless = True

        def __init__(self, free_slots: int = 4):
            self.free_slots = free_slots
            self.calls = 0

        def should_delay(self, state: AdmissionState) -> bool:
            self.calls += 1
            if state.running_bs == 0 or state.waiting_bs == 0:
                return False
            return state.num_allocatable_reqs < min(self.free_slots, state.waiting_bs)


    class NoShouldDelay:
        name = "broken"


    from specsched.sim.schedule_policy import QueueOrderBase


    class LongestPromptFirst(QueueOrderBase):
        name = "longest_prompt_first"

        def order(self, waiting, ctx):
            return sorted(waiting, key=lambda r: -r.input_len)
''')


def scenario(tmp_path, arms: dict, base_delay: str = "min_free_slots") -> str:
    (tmp_path / "my_rules.py").write_text(POLICY)
    doc = {
        "name": "userpol", "profile": "mi355x-dsv41-flash-tp4", "seed": 1,
        "server": {"max_running_requests": 16, "max_total_num_tokens": 400_000, "chunked_prefill_size": 4096,
                   "max_prefill_tokens": 4096, "speculative_algorithm": "dspark",
                   "speculative_num_draft_tokens": 4, "admission_delay": base_delay},
        "acceptance": {"mean_accept_length": 2.5},
        "workload": {"kind": "burst", "num_requests": 24, "input_len": {"kind": "fixed", "value": 600},
                     "output_len": {"kind": "fixed", "value": 60}},
        "arms": arms,
    }
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(doc))
    return str(p)


def test_policy_file_is_short():
    assert len(POLICY.split("class NoShouldDelay")[0].strip().splitlines()) < 40


def test_user_policy_file_next_to_scenario_runs_and_shows_in_compare(tmp_path, monkeypatch, capsys):
    path = scenario(tmp_path, {"mine": {"server": {"admission_delay": "my_rules.py:HoldForFour",
                                                   "admission_delay_params": {"free_slots": 8}}}})
    monkeypatch.chdir(tmp_path.parent)  # not the scenario's folder: the file is found next to it
    sc = load_scenario(path, "mine")
    pol = make_policy(sc.server)
    assert type(pol).__name__ == "HoldForFour" and pol.free_slots == 8 and pol.server is sc.server
    out = tmp_path / "cmp.md"
    assert main(["compare", path, "--arms", "base,mine", "--seeds", "2", "--markdown", str(out)]) == 0
    text = capsys.readouterr().out + out.read_text()
    assert "mine" in text and "base" in text


def test_module_path_policy_through_sys_path(tmp_path, monkeypatch):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "rules.py").write_text(POLICY)
    monkeypatch.syspath_prepend(str(tmp_path))
    cls = load_policy_class("mypkg.rules:HoldForFour", REQUIRED_METHODS)
    p = cls.from_server(ServerArgs(), free_slots=2)
    from specsched.sim.admission import AdmissionState

    assert p.should_delay(AdmissionState(10, 1, 5, 10)) is True
    assert p.should_delay(AdmissionState(10, 1, 1, 10)) is False


def test_shipped_policies_have_the_same_interface():
    for name, cls in SHIPPED.items():
        assert all(callable(getattr(cls, m, None)) for m in REQUIRED_METHODS), name
        p = cls.from_server(ServerArgs(admission_delay=name, speculative_algorithm="dspark",
                                       speculative_num_draft_tokens=4))
        assert p.name == name and isinstance(p.stateless, bool)
        assert policy_class(name) is cls


@pytest.mark.parametrize(("spec", "params", "key", "fragment"), [
    ("nope_mod.rules:X", {}, "server.admission_delay", "not found"),
    ("missing_file.py:X", {}, "server.admission_delay", "not found"),
    ("my_rules.py:Absent", {}, "server.admission_delay", "has no class Absent"),
    ("my_rules.py:NoShouldDelay", {}, "server.admission_delay", "lacks from_server, should_delay"),
    ("my_rules.py:HoldForFour", {"bogus": 1}, "server.admission_delay_params", "rejected"),
    ("fastest", {}, "server.admission_delay", "allowed: none, min_free_slots"),
    # a shipped policy given parameters: refused at load (was a run-time error naming
    # '<server>' instead of the file, after the run's header was printed)
    ("min_free_slots", {"free_slots": 8}, "server.admission_delay_params", "shipped policies take no parameters"),
])
def test_bad_policy_is_one_line_exit_2(tmp_path, capsys, spec, params, key, fragment):
    path = scenario(tmp_path, {}, base_delay=spec)
    if params:
        doc = yaml.safe_load(open(path))
        doc["server"]["admission_delay_params"] = params
        open(path, "w").write(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as e:
        load_scenario(path)
    assert e.value.key == key and fragment in str(e.value)
    assert main(["run", path, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and key in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_import_error_inside_the_policy_file_is_reported(tmp_path):
    (tmp_path / "bad.py").write_text("import not_a_module_anywhere\n")
    with pytest.raises(PolicyLoadError, match="ModuleNotFoundError"):
        load_policy_class(f"{tmp_path / 'bad.py'}:X", REQUIRED_METHODS)


def test_user_queue_order_from_a_scenario(tmp_path):
    path = scenario(tmp_path, {"mine": {"server": {"schedule_policy": "my_rules.py:LongestPromptFirst",
                                                   "prefill_max_requests": 1}}})
    doc = yaml.safe_load(open(path))
    doc["workload"]["input_len"] = {"kind": "uniform", "value": 600, "range_ratio": 0.2}
    open(path, "w").write(yaml.safe_dump(doc))
    from specsched.sim.engine import run_scenario

    res = run_scenario(load_scenario(path, "mine")).requests.sort_values("first_token_s")
    # one request per prefill pass, longest prompt first among those waiting
    assert res["input_len"].iloc[1] >= res["input_len"].iloc[2:6].max()


def test_bad_queue_order_is_one_line_exit_2(tmp_path, capsys):
    path = scenario(tmp_path, {"mine": {"server": {"schedule_policy": "my_rules.py:NoShouldDelay"}}})
    assert main(["run", path, "--arm", "mine", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "server.schedule_policy" in err and "lacks from_server, order" in err


RAISES = textwrap.dedent('''
    from specsched.sim.admission import AdmissionDelayBase
    from specsched.sim.schedule_policy import QueueOrderBase


    class DividesByWaiting(AdmissionDelayBase):
        def should_delay(self, state):
            return 1 / (state.waiting_bs - state.waiting_bs) > 0


    class OrderFails(QueueOrderBase):
        def order(self, waiting, ctx):
            raise KeyError("no such request")
''')


@pytest.mark.parametrize(("key", "spec", "fragment"), [
    ("admission_delay", "raising.py:DividesByWaiting", "ZeroDivisionError"),
    ("schedule_policy", "raising.py:OrderFails", "KeyError"),
])
@pytest.mark.parametrize("command", ["run", "compare"])
def test_a_user_policy_that_raises_mid_run_is_one_line_exit_2(tmp_path, capsys, key, spec, fragment, command):
    """The user's own policy code raising mid-run is bad input: one line naming the policy,
    the exception and the line of the user's file, exit 2. It ended in a traceback through
    the event loop (run) or the worker's formatted one (compare)."""
    path = scenario(tmp_path, {"other": {"server": {"sync_mode": "stream_wait"}}})
    (tmp_path / "raising.py").write_text(RAISES)
    doc = yaml.safe_load(open(path))
    doc["server"][key] = spec
    open(path, "w").write(yaml.safe_dump(doc))
    argv = (["run", path, "--out", str(tmp_path / "out")] if command == "run"
            else ["compare", path, "--arms", "base,other", "--seeds", "1"])
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert spec in err and fragment in err and "raising.py line" in err


BAD_ANSWERS = textwrap.dedent('''
    from specsched.sim.admission import AdmissionDelayBase
    from specsched.sim.schedule_policy import QueueOrderBase


    class Twice(QueueOrderBase):
        def order(self, waiting, ctx):
            return list(waiting) + list(waiting)[:1]


    class Nothing(QueueOrderBase):
        def order(self, waiting, ctx):
            return None


    class HoldsAll(QueueOrderBase):
        def order(self, waiting, ctx):
            return []


    class AlwaysDelays(AdmissionDelayBase):
        def should_delay(self, state):
            return True
''')


@pytest.mark.parametrize(("key", "spec", "fragment"), [
    ("schedule_policy", "answers.py:Twice", "twice"),            # corrupted the KV ledger mid-run
    ("schedule_policy", "answers.py:Nothing", "returned NoneType"),  # TypeError traceback
    ("schedule_policy", "answers.py:HoldsAll", "stalls the server"),  # Stalled traceback
    ("admission_delay", "answers.py:AlwaysDelays", "stalls the server"),
])
def test_a_user_policy_answer_the_scheduler_cannot_use_is_one_line_exit_2(tmp_path, capsys, monkeypatch, key, spec,
                                                                          fragment):
    """SGLang sorts its waiting queue in place (SchedulePolicy.calc_priority): an order
    cannot admit a request twice. A user order that returned one ended in 'stretch KV: ...'
    (a ledger check) deep in the run; None in a TypeError; one that never admits, or a delay
    that always delays, in 'Stalled' tracebacks. The idle passes before a stall is called are
    cut to 1,000: at the 100,000 of a run the holding order took 30 s of the suite."""
    from specsched.sim import engine

    monkeypatch.setattr(engine, "IDLE_PASSES", 1_000)
    path = scenario(tmp_path, {})
    (tmp_path / "answers.py").write_text(BAD_ANSWERS)
    doc = yaml.safe_load(open(path))
    doc["server"][key] = spec
    open(path, "w").write(yaml.safe_dump(doc))
    capsys.readouterr()
    assert main(["run", path, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert spec in err and fragment in err and "<scenario>" not in err


def test_config_errors_survive_a_rebuild_from_their_args():
    """SimPy re-raises a process's exception as type(e)(*e.args), and a process pool
    pickles it the same way: a ConfigError raised mid-run (checked_order) came out as
    'ConfigError.__init__() missing 3 required positional arguments'."""
    import pickle

    e = ConfigError("s.yaml", "server.schedule_policy", "x.py:Y", "must be fine")
    for again in (type(e)(*e.args), pickle.loads(pickle.dumps(e))):
        assert str(again) == str(e) == "s.yaml: server.schedule_policy = 'x.py:Y': must be fine"
        assert (again.file, again.key, again.value, again.allowed) == (e.file, e.key, e.value, e.allowed)


def test_a_delay_policy_that_returns_nothing_is_one_line_exit_2(tmp_path, capsys):
    """A should_delay without its return statement answered None, which the pass read as
    'admit': the user's delay silently never delayed."""
    path = scenario(tmp_path, {})
    (tmp_path / "forgot.py").write_text(textwrap.dedent('''
        from specsched.sim.admission import AdmissionDelayBase


        class Forgot(AdmissionDelayBase):
            def should_delay(self, state):
                state.num_allocatable_reqs < 4
    '''))
    doc = yaml.safe_load(open(path))
    doc["server"]["admission_delay"] = "forgot.py:Forgot"
    open(path, "w").write(yaml.safe_dump(doc))
    capsys.readouterr()
    assert main(["run", path, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "forgot.py:Forgot" in err and "returned None" in err
    assert err.startswith(f"specsched: error: {path}: server.admission_delay = ")  # the file, not a placeholder


def test_shipped_order_given_parameters_is_refused_at_load(tmp_path, capsys):
    path = scenario(tmp_path, {})
    doc = yaml.safe_load(open(path))
    doc["server"].update(schedule_policy="lpm", schedule_policy_params={"page_size": 16})
    open(path, "w").write(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as e:
        load_scenario(path)
    assert e.value.key == "server.schedule_policy_params" and "shipped orders take no parameters" in str(e.value)
    assert path in str(e.value)
    assert main(["run", path, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err


SEEDED = textwrap.dedent('''
    import random

    from specsched.sim.admission import AdmissionDelayBase
    from specsched.sim.schedule_policy import QueueOrderBase


    class CoinDelay(AdmissionDelayBase):
        stateless = False

        @classmethod
        def from_server(cls, server, seed=0, **params):
            obj = super().from_server(server, seed, **params)
            obj.seed, obj.rng = seed, random.Random(seed)
            return obj

        def should_delay(self, state):
            return state.running_bs > 0 and self.rng.random() < 0.5


    class Shuffled(QueueOrderBase):
        def order(self, waiting, ctx):
            out = list(waiting)
            self.rng.shuffle(out)
            return out
''')


def test_a_module_path_policy_beside_the_scenario_runs_in_worker_processes(tmp_path, monkeypatch, capsys):
    # a module path not on sys.path is found beside the scenario at load; a worker process of
    # `compare --workers` (spawned: only the scenario reaches it) looked in its working
    # directory only and every run failed with a traceback
    pkg = tmp_path / "i10_worker_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "rules.py").write_text(SEEDED)
    path = scenario(tmp_path, {"coin": {"server": {"admission_delay": "i10_worker_pkg.rules:CoinDelay",
                                                   "schedule_policy": "i10_worker_pkg.rules:Shuffled"}}})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    out = tmp_path / "cmp"
    assert main(["compare", path, "--arms", "base,coin", "--seeds", "2", "--workers", "2", "--out", str(out)]) == 0
    assert "coin" in capsys.readouterr().out
    assert (out / "coin-seed2" / "summary.json").is_file()


def test_a_user_admission_policy_gets_the_runs_seed(tmp_path):
    # from_server(server, seed, ...): the engine passed seed 0 to every run's admission policy,
    # so a policy drawing random numbers drew the same ones under every seed
    from specsched.sim.engine import SimEngine

    (tmp_path / "seeded.py").write_text(SEEDED)
    path = scenario(tmp_path, {"coin": {"server": {"admission_delay": "seeded.py:CoinDelay"}}})
    sc = load_scenario(path, "coin")
    assert [SimEngine(sc, seed=s).sched.admission.seed for s in (3, 7)] == [3, 7]


@pytest.mark.parametrize(("key", "shipped_name", "kind"), [
    ("admission_delay", "min_free_slots", "policies"), ("schedule_policy", "lpm", "orders")])
def test_both_kinds_of_policy_are_built_and_checked_by_one_function(monkeypatch, key, shipped_name, kind):
    """The admission delay and the queue order a scenario names are built, and their
    parameters checked, by one function (sim/policy_loader.py make_named_policy): the two
    copies of the shipped-parameters and from_server checks are gone, their messages kept."""
    from specsched.sim import policy_loader
    from specsched.sim.admission import make_policy
    from specsched.sim.schedule_policy import make_queue_order

    server = ServerArgs(**{key: shipped_name, f"{key}_params": {"x": 1}})
    make = make_policy if key == "admission_delay" else make_queue_order
    with pytest.raises(ConfigError) as e:
        make(server, 0, "s.yaml")
    assert (e.value.file, e.value.key) == ("s.yaml", f"server.{key}_params")
    assert f"the shipped {kind} take no parameters" in e.value.allowed and f"named by server.{key}" in e.value.allowed
    seen = []
    monkeypatch.setattr(policy_loader, "make_named_policy", lambda server, k, *a, **kw: seen.append(k))
    make(ServerArgs(**{key: shipped_name}), 0, None)
    assert seen == [key]


def test_a_sweep_names_the_user_policys_line_that_failed(tmp_path, capsys):
    """A user policy raising inside a sweep's runs was reported as 'ZeroDivisionError: division
    by zero', no file or line, where `run` names both: the run's worker now says it the same way."""
    path = scenario(tmp_path, {})
    (tmp_path / "boom.py").write_text(textwrap.dedent('''
        from specsched.sim.admission import AdmissionDelayBase


        class Boom(AdmissionDelayBase):
            name = "boom"
            stateless = True

            def should_delay(self, state):
                return 1 / 0 > 0
    '''))
    capsys.readouterr()
    main(["sweep", path, "--grid", "server.max_running_requests=8,16", "--set", "server.admission_delay=boom.py:Boom",
          "--seeds", "1", "--out", str(tmp_path / "sw.parquet"), "--quiet"])
    failed = [x for x in capsys.readouterr().err.splitlines() if x.startswith("failed ")]
    assert len(failed) == 2, failed
    assert all("boom.py:Boom raised ZeroDivisionError" in x and "boom.py line 10, in should_delay" in x
               for x in failed), failed


def test_a_sweep_does_not_resume_runs_of_an_edited_policy_file(tmp_path, capsys):
    """Editing a policy class and sweeping again into the same file resumed the runs made with
    the old class ('0 run(s) done now'): the sweep records the policy file's hash and refuses."""
    path = scenario(tmp_path, {})
    out = tmp_path / "sw.parquet"
    argv = ["sweep", path, "--grid", "server.max_running_requests=8,16", "--set",
            "server.admission_delay=my_rules.py:HoldForFour", "--out", str(out), "--quiet", "--workers", "1"]
    assert main(argv) == 0
    assert main(argv) == 0 and "0 run(s) done now, 2 already there" in capsys.readouterr().err
    rules = tmp_path / "my_rules.py"
    rules.write_text(rules.read_text().replace("free_slots: int = 4", "free_slots: int = 12"))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "my_rules.py" in err and "different version of this file" in err, err
