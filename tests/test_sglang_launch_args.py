"""SGLang launch arguments pasted into a scenario's server block (sim/sglang_launch_args.py):
the inert ones run, left out with a note; the others are refused saying where they live, what
they change, or that the model has no setting for them; a typo keeps "did you mean"."""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.config import load_scenario
from specsched.sim.dp_dispatch import resolve_method
from specsched.sim.errors import ConfigError
from specsched.sim.server_args import ServerArgs
from specsched.sim.sglang_launch_args import (
    ALIASES,
    FIELDS,
    INERT_ARGS,
    INERT_TYPES,
    SGLANG_ARGS_ELSEWHERE,
    accepted_note,
    left_out_note,
)

from specsched.cli import main
from tests.conftest import ROOT

NOTE = "note: SGLang launch arguments with no effect on the prediction, left out:"


def _scenario(tmp_path, server=None, arms=None, name="s.yaml"):
    sc = {"name": "x", "profile": "h200-1b", "server": {"max_running_requests": 4, **(server or {})},
          "workload": {"kind": "burst", "num_requests": 6, "input_len": {"kind": "fixed", "value": 40},
                       "output_len": {"kind": "fixed", "value": 12}}}
    if arms:
        sc["arms"] = arms
    path = tmp_path / name
    path.write_text(yaml.safe_dump(sc))
    return path


def _summary(out):
    s = json.loads((out / "summary.json").read_text())
    return {k: v for k, v in s.items() if isinstance(v, (int, float)) and "wall" not in k}


@pytest.mark.parametrize("how", ["file", "arm", "set"])
def test_an_inert_argument_runs_with_the_note_and_the_same_results(tmp_path, capsys, how):
    inert = {"enable_metrics": True, "log_level": "debug", "port": 30000, "watchdog_timeout": 600}
    plain = _scenario(tmp_path, name="plain.yaml")
    assert main(["run", str(plain), "-q", "--out", str(tmp_path / "a")]) == 0
    assert NOTE not in capsys.readouterr().err
    argv = ["-q", "--out", str(tmp_path / "b")]
    if how == "file":
        path = _scenario(tmp_path, inert)
    elif how == "arm":
        path = _scenario(tmp_path, arms={"m": {"server": inert}})
        argv += ["--arm", "m"]
    else:
        path = plain
        argv += [a for k, v in inert.items() for a in ("--set", f"server.{k}={json.dumps(v)}")]
    assert main(["run", str(path), *argv]) == 0
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if line.startswith(NOTE)]
    assert len(notes) == 1 and all(f"server.{k}" in notes[0] for k in inert), err
    assert _summary(tmp_path / "a") == _summary(tmp_path / "b")
    saved = yaml.safe_load((tmp_path / "b" / "scenario.yaml").read_text())
    assert not set(inert) & set(saved["server"])
    # the results' scenario.yaml loads and runs again, to the same figures
    assert main(["run", str(tmp_path / "b" / "scenario.yaml"), "-q", "--out", str(tmp_path / "c")]) == 0
    assert _summary(tmp_path / "c") == _summary(tmp_path / "a")


@pytest.mark.parametrize("how", ["file", "set"])
@pytest.mark.parametrize("key, value, needle", [
    ("kv_cache_dtype", "fp8_e4m3", "specsched profile --analytic --kv-cache-dtype"),
    ("dtype", "bfloat16", "the dtype is the profile's"),
    ("enable_hierarchical_cache", True, "not modelled: prefixes evicted from the GPU"),
    ("pp_size", 2, "not modelled: pipeline parallelism"),
    ("speculative_accept_threshold_single", 0.5, "not modelled: it changes the accept length"),
])
def test_an_argument_that_lives_elsewhere_is_refused_naming_where(tmp_path, capsys, how, key, value, needle):
    path = _scenario(tmp_path, {key: value} if how == "file" else None)
    argv = ["--set", f"server.{key}={json.dumps(value)}"] if how == "set" else []
    assert main(["run", str(path), "-q", "--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"server.{key} = " in err[0] and needle in err[0], err
    assert "did you mean" not in err[0] and not (tmp_path / "o").exists()


@pytest.mark.parametrize("how", ["file", "set"])
@pytest.mark.parametrize("key", ["nnodes", "enable_dp_lm_head", "sleep_on_idle", "numa_node"])
def test_any_other_sglang_argument_gets_its_line(tmp_path, capsys, how, key):
    path = _scenario(tmp_path, {key: 3} if how == "file" else None)   # 3: none's default
    argv = ["--set", f"server.{key}=3"] if how == "set" else []
    assert main(["run", str(path), "-q", "--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "an SGLang 0.5.23 launch argument the model has no setting for" in err[0], err
    assert "may change timing" in err[0] and "unknown key" not in err[0]


@pytest.mark.parametrize("how", ["file", "set"])
def test_a_typo_of_a_modelled_key_still_gets_did_you_mean(tmp_path, capsys, how):
    path = _scenario(tmp_path, {"chunked_prefil_size": 512} if how == "file" else None)
    argv = ["--set", "server.chunked_prefil_size=512"] if how == "set" else []
    assert main(["run", str(path), "-q", "--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown key" in err[0] and "did you mean" in err[0] and "chunked_prefill_size" in err[0]


def test_a_disaggregated_role_takes_inert_arguments_and_refuses_the_others(tmp_path):
    layout = {"disaggregation": {"prefill": {"server": {"log_level": "debug"}}, "decode": {"server": {"port": 1}}}}
    sc = load_scenario(_scenario(tmp_path, {**layout, "enable_metrics": True}), resolve_defaults=False)
    assert sc._launch_args_left_out == ("server.enable_metrics", "server.disaggregation.prefill.server.log_level",
                                        "server.disaggregation.decode.server.port")
    assert sc.server.disaggregation.prefill.server == {} and sc.server.disaggregation.decode.server == {}
    layout["disaggregation"]["decode"]["server"] = {"nnodes": 2}
    with pytest.raises(ConfigError) as e:
        load_scenario(_scenario(tmp_path, layout), resolve_defaults=False)
    assert e.value.key == "server.disaggregation.decode.server.nnodes"
    assert "launch argument the model has no setting for" in e.value.allowed


def test_the_note_names_each_key_once():
    assert left_out_note([]) is None
    assert left_out_note(["server.port", "server.port", "server.host"]) == f"{NOTE} server.port, server.host"


def test_every_inert_name_is_a_real_sglang_argument_the_model_does_not_read():
    for name in INERT_ARGS:
        assert name in FIELDS or ALIASES.get(name) in FIELDS, name
    assert not INERT_ARGS & set(ServerArgs.model_fields)
    assert not INERT_ARGS & set(SGLANG_ARGS_ELSEWHERE)
    assert set(SGLANG_ARGS_ELSEWHERE) <= FIELDS | set(ALIASES)
    assert not set(SGLANG_ARGS_ELSEWHERE) & set(ServerArgs.model_fields)


_VALUES = st.one_of(st.booleans(), st.integers(-10**6, 10**6), st.text(max_size=20),
                    st.lists(st.integers(0, 100), max_size=3), st.none())
_SCALARS = {"bool": st.booleans(), "int": st.integers(-10**6, 10**6), "str": st.text(max_size=20),
            "float": st.one_of(st.integers(0, 10**6), st.floats(0, 1e6))}


def _of_type(spec: str):
    """Values of an SGLang type as :data:`INERT_TYPES` writes it."""
    import ast

    if spec.startswith("Optional["):
        return st.one_of(st.none(), _of_type(spec[9:-1]))
    if spec.startswith("List["):
        return st.lists(_of_type(spec[5:-1]), max_size=3)
    if spec.startswith("Dict["):
        return st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2)
    if spec.startswith("Literal["):
        return st.sampled_from(ast.literal_eval(f"({spec[8:-1]},)"))
    return _SCALARS[spec]


_TYPED = {n: t for t, names in INERT_TYPES.items() for n in names}
_TYPED.update({a: _TYPED[f] for a, f in ALIASES.items() if f in _TYPED})


@settings(max_examples=60, deadline=None)
@given(picked=st.dictionaries(st.sampled_from(sorted(INERT_ARGS)), st.data(), min_size=1, max_size=5),
       running=st.integers(1, 512))
def test_inert_arguments_never_change_the_validated_server(picked, running):
    """Whatever inert arguments a server block adds, with any value of the type SGLang
    declares, the server the model reads is the one without them (names from the list,
    checked above against SGLang's fields)."""
    picked = {k: d.draw(_of_type(_TYPED[k]) if k in _TYPED else _VALUES) for k, d in picked.items()}
    base = {"max_running_requests": running}
    assert ServerArgs.model_validate({**base, **picked}) == ServerArgs.model_validate(base)


def test_every_typed_inert_argument_is_inert_and_typed_once():
    names = [n for group in INERT_TYPES.values() for n in group]
    assert len(names) == len(set(names)) and set(names) <= INERT_ARGS
    # the two without a command-line form (a callable, a mapping of classes) take anything
    assert {n for n in INERT_ARGS if n not in _TYPED} == {"custom_sigquit_handler", "stat_loggers"}


@pytest.mark.parametrize("how", ["file", "set", "role"])
@pytest.mark.parametrize(("key", "value", "allowed"), [
    ("log_level", 7, "declares it str: allowed: a string"),
    ("enable_metrics", "maybe", "declares it bool: allowed: true or false"),
    ("port", 30000.5, "declares it int: allowed: an integer"),
    ("log_requests_level", 5, "allowed: one of 0, 1, 2, 3"),
    ("log_requests_format", "xml", "allowed: one of text, json"),
    ("watchdog_timeout", "long", "declares it float: allowed: a number"),
    ("random_seed", True, "allowed: an integer or null"),
    ("bucket_time_to_first_token", ["a"], "allowed: a list of numbers or null"),
])
def test_an_inert_argument_of_the_wrong_type_is_refused_in_one_line(tmp_path, capsys, how, key, value, allowed):
    """Left out though it is, an inert argument's value is checked against the type SGLang
    0.5.23's ServerArgs declares for it (arg_groups/fields/*.py): ``log_level: 7`` was taken."""
    if how == "role":
        path = _scenario(tmp_path, {"disaggregation": {"decode": {"server": {key: value}}}})
        where = f"server.disaggregation.decode.server.{key}"
    else:
        path = _scenario(tmp_path, {key: value} if how == "file" else None)
        where = f"server.{key}"
    argv = ["--set", f"server.{key}={json.dumps(value)}"] if how == "set" else []
    assert main(["run", str(path), "-q", "--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{where} = " in err[0] and allowed in err[0], err
    assert "Traceback" not in err[0] and not (tmp_path / "o").exists()


ACCEPTED = "note: SGLang launch arguments at the value the model runs"


@pytest.mark.parametrize(("server", "profile"), [
    ({"tp_size": 1}, "h200-1b"),                              # no hardware block: one GPU
    ({"tensor_parallel_size": 4}, "mi355x-dsv41-flash-tp4"),  # the profile's hardware.tp_size
    ({"load_balance_method": "round_robin", "pp_size": 1, "enable_two_batch_overlap": False}, "h200-1b"),
    ({"tp_size": 4, "enable_dp_attention": True, "dp_size": 4}, "mi355x-dsv4pro-agentic"),  # per-rank profile
])
def test_an_unmodelled_argument_at_the_value_the_model_runs_is_accepted_with_a_note(tmp_path, capsys, server,
                                                                                      profile):
    """tp_size 1 (the profile's TP), load_balance_method round_robin (the model's routing) and
    an unmodelled argument at SGLang's default were refused although the model runs exactly
    them; they run, left out, named in one note, and predict what the block without them does."""
    plain = _scenario(tmp_path, {k: v for k, v in server.items() if k in ServerArgs.model_fields}, name="p.yaml")
    path = _scenario(tmp_path, server)
    for f in (plain, path):
        sc = yaml.safe_load(f.read_text())
        f.write_text(yaml.safe_dump({**sc, "profile": profile}))
    sc = load_scenario(path)
    assert sc.server == load_scenario(plain).server
    assert sc._launch_args_values == {f"server.{k}": v for k, v in server.items() if k not in ServerArgs.model_fields}
    if profile == "h200-1b":   # the others price speculative decoding only: the note as the run prints it
        assert main(["run", str(path), "-q", "--out", str(tmp_path / "o")]) == 0
        notes = [n for n in capsys.readouterr().err.splitlines() if n.startswith(ACCEPTED)]
    else:
        notes = [accepted_note(sc._launch_args_values)]
    assert len(notes) == 1 and all(f"server.{k}" in notes[0] for k in server if k not in ServerArgs.model_fields)


@pytest.mark.parametrize("how", ["file", "set"])
@pytest.mark.parametrize(("server", "profile", "key", "allowed"), [
    ({"tp_size": 8}, "h200-1b", "server.tp_size", "allowed: 1 (the profile states no tensor-parallel size"),
    ({"tp_size": 1}, "mi355x-dsv41-flash-tp4", "server.tp_size", "allowed: 4 (the profile's hardware.tp_size)"),
    ({"tp_size": 0}, "h200-1b", "server.tp_size", "allowed: the profile's tensor-parallel size"),
    ({"load_balance_method": "total_tokens", "enable_dp_attention": True, "dp_size": 2}, "h200-1b",
     "server.load_balance_method", "allowed: auto, or what it resolves to"),
    ({"pp_size": 2}, "h200-1b", "server.pp_size", "allowed: 1 (SGLang's default, what the model runs)"),
    ({"enable_two_batch_overlap": True}, "h200-1b", "server.enable_two_batch_overlap", "allowed: false"),
])
def test_a_value_the_model_does_not_run_is_refused_saying_what_is_allowed(tmp_path, capsys, how, server, profile,
                                                                          key, allowed):
    name = key.rsplit(".", 1)[-1]
    rest = {k: v for k, v in server.items() if k != name}
    path = _scenario(tmp_path, server if how == "file" else rest)
    sc = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**sc, "profile": profile}))
    argv = ["--set", f"{key}={json.dumps(server[name])}"] if how == "set" else []
    assert main(["run", str(path), "-q", "--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{key} = " in err[0] and allowed in err[0], err
    assert not (tmp_path / "o").exists()


def test_unmodelled_arguments_have_one_table():
    """The arguments a scenario refuses as not modelled and the ones ``scenario from-bench``
    names in an assumption line are one table (:data:`UNMODELLED`): from-bench's own copy of
    their defaults is gone, and a scenario accepts each at the default from-bench compares with."""
    from specsched.analysis import from_bench
    from specsched.sim.sglang_launch_args import UNMODELLED

    assert not hasattr(from_bench, "UNMODELLED_SETTINGS")
    for key, u in UNMODELLED.items():
        assert SGLANG_ARGS_ELSEWHERE[key].startswith(u.refusal), key
        if key != "tp_size":   # the profile's, checked when the profile is read
            ServerArgs.model_validate({key: u.default})


def test_the_references_sglang_column_names_only_0523_launch_arguments():
    """docs/scenario-reference.md's SGLang column: every ``--flag`` of a server key is an SGLang
    0.5.23 argument (it said --max-total-num-tokens and --cuda-graph-max-bs, which 0.5.23 does
    not take: --max-total-tokens, --cuda-graph-max-bs-decode)."""
    import re

    from specsched.sim.schema import render_markdown

    rows = [r for r in render_markdown().splitlines() if r.startswith("| `server.")]
    assert len(rows) > 30
    flags = [f for r in rows for f in re.findall(r"--([a-z0-9-]+)", r.split("|")[6])]
    assert "max-total-tokens" in flags and "max-total-num-tokens" not in flags
    modern = [f.replace("-", "_") for f in flags]
    old = {"cuda_graph_max_bs", "cuda_graph_bs"}   # named as the flags of builds before 0.5.14
    assert all(f in FIELDS or ALIASES.get(f) in FIELDS or f in old for f in modern), modern


@pytest.mark.parametrize(("key", "meant", "model_key"), [
    ("enable_metricz", "'enable_metrics' (an SGLang launch argument with no effect", None),
    ("log_levl", "'log_level' (an SGLang launch argument with no effect", None),
    ("chunked_prefil_size", None, "chunked_prefill_size"),   # a modelled key stays the suggestion
])
def test_a_misspelt_launch_argument_is_matched_against_sglangs_names_too(tmp_path, capsys, key, meant, model_key):
    """An unknown server key nearer an SGLang 0.5.23 argument than any modelled key names that
    argument (``enable_metricz`` was answered with "did you mean 'enable_mixed_chunk'"), in a file
    and by --set alike."""
    f = _scenario(tmp_path, {key: 1}, name="typo.yaml")
    with pytest.raises(ConfigError) as e:
        load_scenario(f)
    code = main(["run", str(_scenario(tmp_path)), "-q", "--set", f"server.{key}=1", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    for text in (str(e.value), err):
        assert "unknown key" in text
        if meant:
            assert meant in text and "enable_mixed_chunk" not in text
        else:
            assert model_key in text and "SGLang launch argument" not in text


@pytest.mark.parametrize("how", ["file", "set"])
@pytest.mark.parametrize("key, needle", [
    ("tp-size", "tp_size; as tp_size: not a server key here: the tensor-parallel size is the profile's"),
    ("log-level", "log_level (accepted and left out"),
    ("chunked-prefill-size", "chunked_prefill_size (server.chunked_prefill_size)"),
    ("enable-hierarchical-cache", "as enable_hierarchical_cache: not a server key here: not modelled"),
])
def test_a_dashed_sglang_argument_gets_its_yaml_spelling(tmp_path, capsys, how, key, needle):
    """A flag pasted with its dashes (``tp-size: 8``) was answered "did you mean
    'server.dp_size'?" (``log-level``: "unknown key")."""
    path = _scenario(tmp_path, {key: 8} if how == "file" else None)
    argv = ["--set", f"server.{key}=8"] if how == "set" else []
    assert main(["run", str(path), "-q", "--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"server.{key} = 8" in err[0] and needle in err[0], err
    assert "did you mean" not in err[0] and "unknown key" not in err[0]


SAME = "will predict the same"


def test_compare_arms_that_differ_only_in_inert_arguments_get_one_note(tmp_path, capsys):
    """Arms told apart only by arguments that never reach the model (log_level, port; tp_size
    at the profile's) ran as two silently identical arms; they still run (a control), with one
    note naming them and the arguments. An arm that also changes a modelled key gets none."""
    path = _scenario(tmp_path, arms={"quiet": {"server": {"log_level": "debug", "port": 1, "tp_size": 1}},
                                     "loud": {"server": {"log_level": "debug", "max_running_requests": 2}}})
    assert main(["compare", str(path), "--arms", "base,quiet,loud", "--seeds", "1", "--no-save"]) == 0
    notes = [n for n in capsys.readouterr().err.splitlines() if SAME in n]
    assert notes == ["note: arms base, quiet differ only in SGLang launch arguments that do not reach the model "
                     "(server.log_level, server.port, server.tp_size, left out): they will predict the same "
                     "(run anyway, e.g. as a control)"], notes


def test_a_sweep_axis_of_an_inert_argument_gets_one_note(tmp_path, capsys):
    path = _scenario(tmp_path)
    out = tmp_path / "sweep.parquet"
    assert main(["sweep", str(path), "--grid", "server.log_level=info,debug", "--seeds", "1", "--workers", "1",
                 "--out", str(out)]) == 0
    notes = [n for n in capsys.readouterr().err.splitlines() if SAME in n]
    assert len(notes) == 1 and "sweep axis server.log_level (info, debug)" in notes[0], notes
    capsys.readouterr()
    # an unmodelled argument at two values the model runs (either sampling backend): the same
    assert main(["sweep", str(path), "--grid", "server.sampling_backend=flashinfer,pytorch", "--seeds", "1",
                 "--workers", "1", "--out", str(tmp_path / "sb.parquet")]) == 0
    notes = [n for n in capsys.readouterr().err.splitlines() if SAME in n]
    assert len(notes) == 1 and "sweep axis server.sampling_backend (flashinfer, pytorch)" in notes[0], notes
    assert main(["sweep", str(path), "--grid", "server.pp_size=1,2", "--seeds", "1", "--workers", "1",
                 "--out", str(tmp_path / "pp.parquet")]) == 2   # pp_size 2 refused, with no note before
    assert SAME not in capsys.readouterr().err
    assert main(["sweep", str(path), "--grid", "server.max_running_requests=2,4", "--seeds", "1", "--workers", "1",
                 "--out", str(tmp_path / "other.parquet")]) == 0
    assert SAME not in capsys.readouterr().err


_PD = {"enable_dp_attention": True, "dp_size": 2,
       "disaggregation": {"prefill": {"instances": 1}, "decode": {"instances": 1}}}


def _pd_scenario(tmp_path, top=None, prefill=None, decode=None):
    layout = {"prefill": {"instances": 1, "server": prefill or {}}, "decode": {"instances": 1, "server": decode or {}}}
    return _scenario(tmp_path, {**_PD, **(top or {}), "disaggregation": layout})


def _load_roles(path):
    sc = load_scenario(path)
    return sc, [sc.server.role_server(r) for r in ("prefill", "decode")]


@pytest.mark.parametrize(("top", "prefill", "decode"), [
    ({"load_balance_method": "auto"}, None, None),
    (None, {"load_balance_method": "follow_bootstrap_room"}, None),   # what auto resolves to on a PD prefill
    (None, None, {"load_balance_method": "round_robin"}),
    ({"load_balance_method": "round_robin"}, {"load_balance_method": "follow_bootstrap_room"}, None),
    (None, {"dp_size": 1, "enable_dp_attention": False, "load_balance_method": "total_tokens"}, None),
])
def test_load_balance_method_is_accepted_where_the_server_it_reaches_routes_by_it(tmp_path, top, prefill, decode):
    """A disaggregated prefill server with DP attention routes by the router's bootstrap room
    (sim/dp_attention.py; SGLang's auto resolves to follow_bootstrap_room there), a decode
    server round-robin: each is accepted where it is what the model runs (a server key,
    server.load_balance_method: sim/dp_dispatch.py)."""
    _sc, roles = _load_roles(_pd_scenario(tmp_path, top, prefill, decode))
    for r in roles:
        assert r.dp_size == 1 or resolve_method(r.load_balance_method, r.disaggregation_mode) == \
            resolve_method("auto", r.disaggregation_mode), (r.disaggregation_mode, r.load_balance_method)


@pytest.mark.parametrize(("top", "prefill", "decode", "key"), [
    # the role block inherits dp_size 2 from the scenario's: it was read as dp_size 1 (any method)
    (None, {"load_balance_method": "total_tokens"}, None, "server.disaggregation.prefill.server.load_balance_method"),
    # the model routes a PD prefill by bootstrap room, not round-robin (was accepted)
    (None, {"load_balance_method": "round_robin"}, None, "server.disaggregation.prefill.server.load_balance_method"),
    (None, None, {"load_balance_method": "follow_bootstrap_room"},
     "server.disaggregation.decode.server.load_balance_method"),
    # the scenario's block reaches the prefill role too
    ({"load_balance_method": "round_robin"}, None, None, "server.load_balance_method"),
])
def test_load_balance_method_is_refused_where_the_server_it_reaches_routes_otherwise(tmp_path, top, prefill, decode,
                                                                                     key):
    with pytest.raises(ConfigError) as e:
        _load_roles(_pd_scenario(tmp_path, top, prefill, decode))
    assert key in str(e.value) and "allowed: auto" in str(e.value), str(e.value)


POISSON = ROOT / "scenarios" / "poisson8b-fixed.yaml"
SPELLED = [   # SGLang 0.5.23's name, a value, the server keys it is read as
    ("cuda_graph_max_bs_decode", 128, {"cuda_graph_max_bs": 128}),
    ("cuda_graph_bs_decode", [1, 2, 4, 8], {"cuda_graph_bs": [1, 2, 4, 8]}),
    ("disable_overlap_schedule", True, {"enable_overlap_schedule": False}),
    ("disable_cuda_graph", True, {"disable_decode_cuda_graph": True, "disable_prefill_cuda_graph": True}),
    ("max_total_tokens", 100000, {"max_total_num_tokens": 100000}),
    ("attn_dp_size", 2, {"enable_dp_attention": True, "dp_size": 2}),
    ("attention_data_parallel_size", 2, {"enable_dp_attention": True, "dp_size": 2}),
]


@pytest.mark.parametrize("how", ["file", "set"])
@pytest.mark.parametrize(("name", "value", "keys"), SPELLED)
def test_sglang_0523_names_of_server_keys_are_read_as_those_keys(tmp_path, how, name, value, keys):
    """0.5.23's own names (arg_groups/fields/*.py) of settings the model has under another key
    were refused with "write X"; they are read as X, in a file and by --set, where --set
    replaces the file's own X (poisson8b-fixed states cuda_graph_max_bs and the pool)."""
    from specsched.analysis.overrides import load_scenario_with_overrides

    raw = yaml.safe_load(POISSON.read_text())
    if how == "file":
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump({**raw, "server": {**{k: v for k, v in raw["server"].items() if k not in keys},
                                                          name: value}}))
        got = load_scenario(path)
    else:
        got = load_scenario_with_overrides(str(POISSON), "base", {f"server.{name}": value})
    want = load_scenario_with_overrides(str(POISSON), "base", {f"server.{k}": v for k, v in keys.items()})
    assert got.server == want.server
    assert got._launch_args_values == {f"server.{name}": value}


def test_a_pasted_0523_name_runs_and_only_a_reading_that_is_not_a_rename_is_noted(tmp_path, capsys):
    """The tester's case: `--set server.cuda_graph_max_bs_decode=128` on a bundled scenario ran
    nothing; it runs (a rename: no line), and disable_cuda_graph (two keys) says what it is read as."""
    small = ["-q", "--set", "workload.num_requests=30"]
    assert main(["run", str(POISSON), *small, "--set", "server.cuda_graph_max_bs_decode=128",
                 "--out", str(tmp_path / "a")]) == 0
    assert "note: SGLang 0.5.23 arguments read as" not in capsys.readouterr().err
    saved = yaml.safe_load((tmp_path / "a" / "scenario.yaml").read_text())["server"]
    assert saved["cuda_graph_max_bs"] == 128 and "cuda_graph_max_bs_decode" not in saved
    assert main(["run", str(POISSON), *small, "--set", "server.disable_cuda_graph=true",
                 "--out", str(tmp_path / "b")]) == 0
    notes = [n for n in capsys.readouterr().err.splitlines() if n.startswith("note: SGLang 0.5.23 arguments read as")]
    assert notes == ["note: SGLang 0.5.23 arguments read as the server keys they set: server.disable_cuda_graph true as "
                     "disable_decode_cuda_graph: true, disable_prefill_cuda_graph: true (arg_groups/cuda_graph_hook.py "
                     "parse_cuda_graph_config: true disables both phases' graphs; false leaves them to the per-phase "
                     "switches)"], notes


@pytest.mark.parametrize(("server", "named"), [
    ({"max_total_tokens": 5000, "max_total_num_tokens": 6000}, ("server.max_total_tokens = 5000", "max_total_num_tokens 6000")),
    ({"disable_overlap_schedule": True, "enable_overlap_schedule": True},
     ("server.disable_overlap_schedule = True", "enable_overlap_schedule true")),
    ({"cuda_graph_max_bs_decode": 64, "cuda_graph_max_bs": 32}, ("server.cuda_graph_max_bs_decode = 64", "cuda_graph_max_bs 32")),
    ({"disable_cuda_graph": True, "disable_prefill_cuda_graph": False},
     ("server.disable_cuda_graph = True", "disable_prefill_cuda_graph false")),
    # SGLang 0.5.23 refuses replicas beside attention DP (parallel_hook.py handle_data_parallelism)
    ({"attn_dp_size": 2, "dp_size": 4, "enable_dp_attention": True}, ("server.attn_dp_size = 2", "dp_size 4")),
])
def test_a_name_and_its_key_given_with_different_values_are_refused_naming_both(tmp_path, capsys, server, named):
    path = _scenario(tmp_path, server)
    assert main(["run", str(path), "-q", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and all(n in err[0] for n in named) and "write server." not in err[0], err


@pytest.mark.parametrize(("server", "keys"), [
    ({"max_total_tokens": 5000, "max_total_num_tokens": 5000}, {"max_total_num_tokens": 5000}),
    ({"disable_overlap_schedule": True, "enable_overlap_schedule": False}, {"enable_overlap_schedule": False}),
    ({"disable_cuda_graph": True, "disable_prefill_cuda_graph": True},
     {"disable_decode_cuda_graph": True, "disable_prefill_cuda_graph": True}),
    # a 0.5.23 dump (ServerArgs.resolved_dict): attention DP over 2 ranks, one replica
    ({"attn_dp_size": 2, "dp_size": 1, "enable_dp_attention": True}, {"enable_dp_attention": True, "dp_size": 2}),
    ({"max_total_tokens": None, "max_total_num_tokens": 5000}, {"max_total_num_tokens": 5000}),   # SGLang's unset
])
def test_a_name_and_its_key_given_alike_are_one_setting(tmp_path, server, keys):
    assert load_scenario(_scenario(tmp_path, server)).server == load_scenario(_scenario(tmp_path, keys, name="k.yaml")).server


@pytest.mark.parametrize("key", ["disable_overlap", "max_total_token", "cuda_graph_max_bs_decoding"])
def test_names_sglang_does_not_have_are_still_refused(tmp_path, capsys, key):
    assert main(["run", str(_scenario(tmp_path, {key: 1})), "-q", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown key" in err[0], err


DEFAULT_NOTE = "note: SGLang launch arguments at SGLang 0.5.23's default"
AT_DEFAULT = {"radix_eviction_policy": "lru", "ep_size": 1, "moe_runner_backend": "auto",
              "disable_custom_all_reduce": False, "enable_dp_lm_head": False,
              "expert_parallel_size": 1, "kv_cache_dtype": "auto", "attn_dp_size": 1}


@pytest.mark.parametrize("how", ["file", "set"])
def test_arguments_at_sglangs_default_run_with_one_note_and_change_nothing(tmp_path, capsys, how):
    """SGLang 0.5.23 launches the same server with an argument given at its declared default as
    without it (argparse fills the default), so each was refused as 'may change timing' for
    nothing; they run, left out with one note, and predict what the block without them does."""
    plain = _scenario(tmp_path, name="plain.yaml")
    assert main(["run", str(plain), "-q", "--out", str(tmp_path / "a")]) == 0
    capsys.readouterr()
    argv = ["-q", "--out", str(tmp_path / "b")]
    if how == "file":
        path = _scenario(tmp_path, AT_DEFAULT)
    else:
        path = plain
        argv += [a for k, v in AT_DEFAULT.items() for a in ("--set", f"server.{k}={json.dumps(v)}")]
    assert main(["run", str(path), *argv]) == 0
    notes = [n for n in capsys.readouterr().err.splitlines() if n.startswith(DEFAULT_NOTE)]
    assert len(notes) == 1 and all(f"server.{k} " in notes[0] for k in AT_DEFAULT), notes
    assert _summary(tmp_path / "a") == _summary(tmp_path / "b")
    assert not set(AT_DEFAULT) & set(yaml.safe_load((tmp_path / "b" / "scenario.yaml").read_text())["server"])


@pytest.mark.parametrize(("key", "value", "default"), [
    ("grammar_backend", "outlines", "null"),   # declared None; xgrammar is what it resolves to
    ("radix_eviction_policy", "lfu", "lru"),
    ("ep_size", 2, "1"),
    ("moe_runner_backend", "triton", "auto"),
])
def test_an_argument_at_another_value_is_still_refused_naming_sglangs_default(tmp_path, capsys, key, value, default):
    assert main(["run", str(_scenario(tmp_path)), "-q", "--set", f"server.{key}={value}",
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"server.{key} = " in err[0] and "may change timing" in err[0], err
    assert f"or give SGLang's default, {default}, the same server" in err[0]


@pytest.mark.parametrize("backend", ["flashinfer", "pytorch"])
def test_a_named_sampling_backend_runs_with_a_note(tmp_path, capsys, backend):
    """sampling_backend flashinfer, what SGLang resolves its None to on a platform with
    flashinfer (arg_groups/overrides.py ``_sampling_backend_default``; pytorch elsewhere), was
    refused as "may change timing"; the sampling kernels are inside the profile's forwards, so
    either backend runs, named in the note; another value is refused naming what runs."""
    assert main(["run", str(_scenario(tmp_path)), "--set", f"server.sampling_backend={backend}",
                 "--out", str(tmp_path / "o")]) == 0
    notes = [n for n in capsys.readouterr().err.splitlines() if "server.sampling_backend" in n]
    assert len(notes) == 1 and notes[0].startswith("note:") and backend in notes[0], notes
    assert main(["run", str(_scenario(tmp_path)), "-q", "--set", "server.sampling_backend=ascend",
                 "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "flashinfer or pytorch" in err[0], err


def test_the_defaults_table_is_the_one_unmodelled_arguments_compare_with():
    """SGLang 0.5.23's declared defaults are one table (LAUNCH_ARGS, read from
    arg_groups/fields/*.py): the unmodelled arguments' defaults are its values."""
    from specsched.sim.sglang_launch_args import SGLANG_DEFAULTS, UNMODELLED, same_setting

    assert set(SGLANG_DEFAULTS) == FIELDS
    for key, u in UNMODELLED.items():
        assert same_setting(u.default, SGLANG_DEFAULTS[key]), key
    assert {k: SGLANG_DEFAULTS[k] for k in ("radix_eviction_policy", "ep_size", "moe_runner_backend",
                                            "disable_custom_all_reduce", "enable_dp_lm_head", "sampling_backend")} \
        == {"radix_eviction_policy": "lru", "ep_size": 1, "moe_runner_backend": "auto",
            "disable_custom_all_reduce": False, "enable_dp_lm_head": False, "sampling_backend": None}


def test_model_path_runs_left_out_as_an_argument_with_no_effect(tmp_path, capsys):
    """model_path only names the weights, whose costs the profile holds: it was refused
    ("the model is the profile's"); it runs, named in the inert note, as from-bench counts it."""
    plain = _scenario(tmp_path, name="plain.yaml")
    assert main(["run", str(plain), "-q", "--out", str(tmp_path / "a")]) == 0
    path = _scenario(tmp_path, {"model_path": "meta-llama/Llama-3.2-1B-Instruct", "model": "x"})
    capsys.readouterr()
    assert main(["run", str(path), "-q", "--out", str(tmp_path / "b")]) == 0
    notes = [n for n in capsys.readouterr().err.splitlines() if n.startswith(NOTE)]
    assert len(notes) == 1 and "server.model_path" in notes[0] and "server.model" in notes[0], notes
    assert _summary(tmp_path / "a") == _summary(tmp_path / "b")


@pytest.mark.parametrize("server", [
    {"uvicorn_access_log_exclude_prefixes": None},   # inert, declared List[str]: refused as not a list
    {"allowed_media_domains": None},                 # declared [], not a server key: refused as not the default
    {"prefill_decode_interval": None},               # a server key, declared Optional[int] = None: "must be an integer"
])
def test_nulls_a_server_info_dump_holds_run_as_sglangs_unset(tmp_path, capsys, server):
    """A pasted /server_info reports arguments nobody gave as null: an inert list argument, a
    declared-empty list, an argument SGLang resolves at start. Each was refused; each is what
    leaving it out runs (the same results as without it)."""
    assert main(["run", str(_scenario(tmp_path, server)), "-q", "--out", str(tmp_path / "a")]) == 0
    assert main(["run", str(_scenario(tmp_path, name="plain.yaml")), "-q", "--out", str(tmp_path / "b")]) == 0
    assert _summary(tmp_path / "a") == _summary(tmp_path / "b")
    # a value that is not null is still checked
    key = next(iter(server))
    bad = {"uvicorn_access_log_exclude_prefixes": 7, "allowed_media_domains": ["x.org"], "prefill_decode_interval": "x"}
    assert main(["run", str(_scenario(tmp_path, {key: bad[key]}, name="bad.yaml")), "-q",
                 "--out", str(tmp_path / "c")]) == 2


def test_a_pasted_server_info_runs_but_for_what_changes_kernel_times(tmp_path, capsys):
    """SGLang 0.5.23's whole /server_info (552 keys) pasted as the server block: its state keys
    (version, startup_time, internal_states, ...), a cuda_graph_config of empty parts, the
    tokenizer's path and the nulls it reports for unset arguments were each refused, one run at
    a time. Now what is left is what the model must not drop silently: the attention backend,
    torch.compile and the draft model, whose kernel and draft costs the profile holds."""
    line = json.loads((ROOT / "tests" / "data" / "bench" / "sglang-0.5.23-full-server-info.jsonl").read_text()
                      .splitlines()[0])
    info = dict(line.get("server_info") or line["extra"]["server_info"])
    sc = {"name": "dump", "profile": "h100-llama-3.1-8b-eagle3-analytic", "server": info,
          "acceptance": {"mean_accept_length": 3.1},
          "workload": {"kind": "burst", "num_requests": 4, "input_len": {"kind": "fixed", "value": 100},
                       "output_len": {"kind": "fixed", "value": 10}}}
    refused = []
    for _ in range(6):
        p = tmp_path / "dump.yaml"
        p.write_text(yaml.safe_dump(sc))
        if main(["run", str(p), "-q", "--out", str(tmp_path / "o")]) == 0:
            break
        (err,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("specsched: error")]
        key = err.split("server.", 1)[1].split(" ", 1)[0]
        refused.append(key)
        sc["server"].pop(key)
    else:
        pytest.fail(f"still refused after {refused}")
    assert sorted(refused) == ["attention_backend", "enable_torch_compile", "speculative_draft_model_path"]
