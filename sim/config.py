"""Scenario configuration: the :class:`Scenario` model and loading it from YAML.

Keys follow SGLang's server arguments where the concept exists there
(python/sglang/srt/server_args.py). Everything is validated at load (pydantic, unknown keys
rejected); :func:`load_scenario` applies an arm's overrides before validating, so an arm
can change any key. Errors are :class:`sim.errors.ConfigError` naming file, key, value and
what is allowed.

The blocks a scenario holds live in their own modules and are re-exported here, so
``from specsched.sim.config import ServerArgs`` keeps working: :mod:`sim.server_args`
(``server``), :mod:`sim.acceptance_config` (``acceptance``), :mod:`sim.workload_config`
(``workload``).
"""

from __future__ import annotations

import copy
import difflib
import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pydantic
from pydantic import BaseModel, Field, ValidationError, model_validator
from specsched.sim.acceptance_config import (
    ACCEPTANCE_SOURCES,
    HISTOGRAM_SUM_TOLERANCE,
    AcceptanceConfig,
)
from specsched.sim.atomic import is_path_component
from specsched.sim.bundled import resolve_scenario_path
from specsched.sim.errors import ConfigError, FieldError
from specsched.sim.host_speed import HostConditions
from specsched.sim.server_args import (
    MAX_PREFILL_CUDA_GRAPH_PADDING_FACTOR,
    AdmissionDelay,
    ServerArgs,
    SpecAlgorithm,
    SyncMode,
    chain_window_reset,
    prefill_graph_bucket,
    prefill_token_buckets,
)
from specsched.sim.sglang_launch_args import (
    SGLANG_ARGS_ELSEWHERE,
    elsewhere_line,
    inert_keys_in,
    launch_arg_hint,
    launch_args_in,
    without_respelled,
)
from specsched.sim.strict import STRICT as _STRICT
from specsched.sim.workload_config import (
    MAX_ARRIVAL_SPAN_S,
    TRACE_LAYOUTS,
    AgenticTraceConfig,
    LengthDist,
    MultiTurnConfig,
    SharedPrefixConfig,
    TraceColumns,
    TraceConfig,
    WorkloadConfig,
)
from specsched.sim.yaml_io import read_yaml_file

__all__ = [
    "HISTOGRAM_SUM_TOLERANCE", "MAX_ARRIVAL_SPAN_S", "MAX_PREFILL_CUDA_GRAPH_PADDING_FACTOR", "TRACE_LAYOUTS",
    "AcceptanceConfig", "AdmissionDelay", "AgenticTraceConfig", "LengthDist", "MultiTurnConfig", "Scenario", "ServerArgs",
    "SGLANG_ARGS_ELSEWHERE", "SharedPrefixConfig", "SpecAlgorithm", "SyncMode", "TraceColumns", "TraceConfig",
    "WorkloadConfig", "arm_names", "elsewhere_line", "deep_merge", "load_scenario", "prefill_graph_bucket", "prefill_token_buckets", "read_yaml",
    "validation_error", "with_value",
]


class Scenario(BaseModel):
    """A workload plus server settings plus the profile that times it.

    ``arms`` maps an arm name to overrides (same keys, deep-merged) applied by
    :func:`load_scenario`; the resolved scenario has ``arm`` set and ``arms`` kept for reference.
    """

    model_config = _STRICT

    name: str = Field(description="Scenario name (results go to results/<name>/).")
    description: str = Field("", description="Free text.")
    source: str = Field("", description="Where the scenario's settings and reference figures come from.")
    assumptions: list[str] = Field([], description="What the scenario assumes that the source does not say.")
    profile: str = Field(description="Profile name (profiles/) or path: absolute, else from the current directory, "
                         "else from the scenario file's folder (--set profile=my.yaml reads ./my.yaml); ~/ is the "
                         "user's home; profiles/NAME.yaml that is no file there is the bundled NAME.")
    seed: int = Field(1, ge=0, description="Seed of lengths, arrivals and accept lengths (run --seed overrides it).")
    server: ServerArgs = Field(ServerArgs(), description="SGLang server arguments.")
    acceptance: AcceptanceConfig = Field(AcceptanceConfig(), description="Accept-length distribution.")
    host: HostConditions = Field(HostConditions(), description="The host the prediction is for (its speed against the profile's).")
    workload: WorkloadConfig = Field(description="Client workload (bench_serving semantics).")
    arms: dict[str, dict[str, Any]] = Field({}, description="Arm name -> overrides of any keys above (deep-merged); every arm is validated at load.")
    arm: str = "base"
    reference: dict[str, dict[str, float]] = Field(default_factory=dict, description="Reference figures per arm, bench_serving keys.")
    path: str = ""
    # server arguments the loader filled with SGLang's hardware defaults (sim.defaults)
    # (a default, copied for each instance, not default_factory=list: pydantic reads a factory's
    # signature at each instance, and list's is parsed from text, ~3 ms on a run's first load)
    _resolved_defaults: list[Any] = pydantic.PrivateAttr(default=[])
    # the server keys the file, its arm and overrides set (before the defaults were filled)
    _server_given: frozenset[str] = pydantic.PrivateAttr(default_factory=frozenset)
    # inert SGLang launch arguments the server blocks named, left out (sim.sglang_launch_args)
    _launch_args_left_out: tuple[str, ...] = pydantic.PrivateAttr(default=())
    # every launch argument left out (the inert ones, and the unmodelled ones at a value the
    # model runs: server.tp_size), dotted key -> value as given
    _launch_args_values: dict[str, Any] = pydantic.PrivateAttr(default_factory=dict)
    # loaded with command-line overrides (--set, a sweep's point): refusals say so (scenario_file)
    _with_overrides: bool = pydantic.PrivateAttr(default=False)
    # speculative_num_draft_tokens values written that SGLang's chain-window reset replaces,
    # dotted key -> value as written (chain_window_resets_in)
    _window_given: dict[str, int] = pydantic.PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _remember_inert_launch_args(cls, data: Any, handler: Any) -> Scenario:
        """The validated scenario, remembering the inert SGLang launch arguments its server
        blocks named (dropped by :class:`ServerArgs` before validation) for the run's note."""
        out = handler(data)
        if isinstance(data, dict):
            out._launch_args_left_out = tuple(inert_keys_in(data))
            out._launch_args_values = launch_args_in(data)
            out._window_given = chain_window_resets_in(data)
        return out

    @model_validator(mode="before")
    @classmethod
    def _policy_files_from_scenario_dir(cls, data: Any) -> Any:
        # a relative policy file (server.admission_delay: rules.py:MyDelay) sits next to the
        # scenario: store it relative to the working directory, as ``path`` is, so that
        # every later reader (engine, runtime, sweep workers) finds it without the scenario
        if not isinstance(data, dict) or not data.get("path") or not isinstance(data.get("server"), dict):
            return data
        for key in ("admission_delay", "schedule_policy"):
            spec = data["server"].get(key)
            if not isinstance(spec, str) or ":" not in spec:
                continue
            target, _, name = spec.rpartition(":")
            if not (target.endswith(".py") or "/" in target) or Path(target).is_absolute() or Path(target).is_file():
                continue
            near = Path(data["path"]).parent / target
            if near.is_file():
                data = {**data, "server": {**data["server"], key: f"{near}:{name}"}}
        return data

    @model_validator(mode="after")
    def _names_are_folder_names(self) -> Scenario:
        """The scenario name and each arm name become folders (results/<name>/<arm>-seed<N>):
        one plain path component each. A name with a separator or ``..`` wrote outside
        results/ (``name: ../../x`` ran into ../x/base-seed1)."""
        for key, value in (("name", self.name), *((f"arms.{a}", a) for a in self.arms), ("arm", self.arm)):
            if not is_path_component(value) or value != value.strip():
                raise FieldError(key, value, "must be a folder name (results/<name>/<arm>-seed<N>): not empty, "
                                 "no / or \\, not . or .., no leading or trailing spaces")
        return self

    @model_validator(mode="after")
    def _reference_arms_are_arms(self) -> Scenario:
        """Each ``reference`` arm is ``base`` or one of ``arms``: a misspelt one dropped its
        figures from every comparison without a word."""
        allowed = ["base", *(a for a in self.arms if a != "base")]
        for arm in self.reference:
            if arm not in allowed:
                raise FieldError(f"reference.{arm}", arm, f"not an arm of the scenario; allowed: {', '.join(allowed)}")
        return self

    @model_validator(mode="after")
    def _role_only_from_the_layout(self) -> Scenario:
        """``disaggregation_mode`` is a role's, set by ``server.disaggregation``
        (:meth:`ServerArgs.role_server`). Written on a scenario's own server, it made one
        server a lone prefill or decode server with no peer: the run stalled with a traceback
        (a decode server waits for KV no prefill server sends)."""
        if self.server.disaggregation is None and self.server.disaggregation_mode != "null":
            raise FieldError("server.disaggregation_mode", self.server.disaggregation_mode,
                             "set per role by server.disaggregation (prefill and decode servers behind a router), "
                             "not by hand; allowed here: null")
        return self

    @model_validator(mode="after")
    def _dp_ranks_once(self) -> Scenario:
        """``workload.multi_turn.dp_ranks`` stands for DP ranks the run does not simulate: the
        simulated server is one of them, and a later turn finds its history there with
        probability 1 / dp_ranks. With ``server.enable_dp_attention`` the server's ranks are
        simulated, round-robin dispatch included (sim/dp_attention.py; SGLang 0.5.23
        data_parallel_controller.py ``round_robin_scheduler``), so both together counted the
        lost history twice: Qwen3-30B-A3B at dp_size 2 with dp_ranks 2 hit 0.33 of prompt
        tokens against 0.66 with the server's ranks alone."""
        mt = self.workload.multi_turn
        servers = [("server", self.server)]
        if self.server.disaggregation is not None:
            servers += [(f"server.disaggregation.{r}.server", self.server.role_server(r)) for r in ("prefill", "decode")]
        if mt is not None and mt.dp_ranks > 1:
            for where, srv in servers:
                if srv.dp_size > 1:
                    kind = "DP attention" if srv.enable_dp_attention else "data-parallel replicas"
                    raise FieldError("workload.multi_turn.dp_ranks", mt.dp_ranks,
                                     f"stands for DP ranks a run does not simulate; {where} runs {kind} "
                                     f"(dp_size {srv.dp_size}), whose ranks and round-robin dispatch are simulated: "
                                     "leave dp_ranks at 1")
        return self

    @model_validator(mode="after")
    def _policies_load(self) -> Scenario:
        # a user policy class must import and build now, not fail mid-run; so must a shipped
        # one given parameters (none takes any: from_server refuses them)
        s = self.server
        if (":" in s.admission_delay or ":" in s.schedule_policy or s.admission_delay_params
                or s.schedule_policy_params):
            from specsched.sim.admission import make_policy
            from specsched.sim.schedule_policy import make_queue_order

            try:
                make_policy(self.server, self.seed, self.path or None)
                make_queue_order(self.server, self.seed, self.path or None)
            except ConfigError as e:  # "key value allowed": the value written without spaces
                value = e.value if isinstance(e.value, str) else json.dumps(e.value, separators=(",", ":"), default=str)
                raise ValueError(f"{e.key} {value} {e.allowed}") from None
        return self

    @model_validator(mode="after")
    def _acceptance_fits_window(self) -> Scenario:
        # the window and tree the accept lengths are drawn at (ServerArgs.verifying_server)
        srv = self.server.verifying_server()
        role = "" if self.server.disaggregation is None else "server.disaggregation.decode.server."
        m = self.acceptance.mean_accept_length
        w = srv.accept_window
        acc, spec = self.acceptance, srv.speculative_algorithm.enabled
        d = acc.rate_decay
        if spec and m is None and acc.per_position_rates is None and acc.histogram is None:
            # without a distribution every draft would be rejected (accept length 1): a
            # speculative what-if would silently answer "slower than no speculation"
            raise FieldError("acceptance", "<missing>", "speculative decoding ("
                             f"server.speculative_algorithm={self.server.speculative_algorithm.value}) needs "
                             "an accept-length distribution: set acceptance.mean_accept_length (the accept "
                             "length your server logs), per_position_rates or histogram")
        if acc.window is not None:  # measured at acc.window: cut or continued to the run's window
            w, spec = acc.window, True
            what, whose = "acceptance.window", "the verify window it was measured at"
        elif w < srv.spec_window:  # a draft tree: its depth bounds the accepted path
            what, whose = f"{role}speculative_num_steps + 1", "the draft tree's depth + 1"
        else:
            what, whose = f"{role}speculative_num_draft_tokens", "the verify window"
        if spec and acc.per_position_rates is not None and len(acc.per_position_rates) > w - 1:
            raise FieldError("acceptance.per_position_rates", acc.per_position_rates, "at most "
                             f"{what} - 1 = {w - 1} rates (one per draft position)")
        if spec and acc.histogram is not None and len(acc.histogram) > w:
            raise FieldError("acceptance.histogram", acc.histogram, f"at most {what} = {w} "
                             f"entries (accept lengths 1..{w})")
        if spec and m is not None and d < 1.0 and m > 1.0 + sum(d ** (i * (i + 1) / 2) for i in range(w - 1)) - 1e-6:
            raise FieldError("acceptance.mean_accept_length", m, f"out of reach at {what} = {w} with "
                             f"rate_decay {d} (even a first-position rate of 1 gives less)")
        tree = acc.tree or draft_tree(srv)
        if spec and m is not None and acc.sibling_rate is not None and tree is not None and tree[0] > 1:
            from specsched.sim.draft_tree import TREE_TOP_TOLERANCE, top_tree_mean

            top = top_tree_mean(w - 1, d, acc.sibling_rate, tree[0], tree[1])
            if m > top + TREE_TOP_TOLERANCE:
                raise FieldError("acceptance.mean_accept_length", m, f"out of reach on the draft tree it was "
                                 f"measured on (topk {tree[0]}, {tree[1]} draft tokens, depth {w - 1}: at most "
                                 f"{top:.6g} even when every rank-1 draft is accepted)")
        if m is not None and spec and m > w:
            if acc.window is not None:
                raise ValueError(f"acceptance.mean_accept_length {m} exceeds {whose}, acceptance.window = {w}")
            raise ValueError(f"acceptance.mean_accept_length {m} exceeds {whose}, {what} = {w}")
        return self


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Return ``base`` with ``override`` merged in (nested dicts merged, other values replaced).

    A length distribution whose ``kind`` the override changes keeps only the keys the new
    kind reads (``--set workload.input_len={kind: fixed, value: 9}`` over a uniform one with
    a range_ratio, or ``--set workload.input_len.kind=fixed``: the range_ratio is the old
    kind's, not carried into a block that refuses it); keys the override gives are its own.
    A server key the override gives under SGLang's name, or the other way round
    (``disable_overlap_schedule`` over ``enable_overlap_schedule``), is the override's too
    (:func:`sim.sglang_launch_args.without_respelled`)."""
    out = copy.deepcopy(base)
    for k, v in override.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(without_respelled(_for_new_length_kind(out[k], v), v), v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _for_new_length_kind(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``base`` without the keys a length distribution's new kind (``override``'s) does not
    read, when ``override`` changes the kind (the kinds are length kinds only: a workload's
    kinds are other words); else ``base``."""
    from specsched.sim.workload_config import LENGTH_KEYS_READ_BY

    def kind(d: dict[str, Any]) -> object:
        k = d.get("kind", "fixed")
        return "uniform" if k == "random" else k

    new = kind(override)
    if "kind" not in override or new not in ("fixed", "uniform", "file") or kind(base) == new:
        return base
    return {k: x for k, x in base.items() if new in LENGTH_KEYS_READ_BY.get(k, (new,))}


def with_value(model: BaseModel, dotted: str, value: Any) -> BaseModel:
    """A copy of a frozen config ``model`` with the field at ``dotted`` (e.g.
    ``host.launch_s``) set to ``value``, validated again.

    Raises:
        pydantic.ValidationError: the new value is not allowed.
    """
    data = model.model_dump()
    node = data
    keys = dotted.split(".")
    for k in keys[:-1]:
        node = node[k]
    node[keys[-1]] = value
    out = type(model).model_validate(data)
    if isinstance(model, Scenario):
        out._with_overrides, out._window_given = model._with_overrides, dict(model._window_given)
    return out


def _reset_window(server: Any) -> int | None:
    """The ``speculative_num_draft_tokens`` a raw server mapping writes when SGLang's chain
    reset replaces it (:func:`sim.server_args.chain_window_reset`: a chain drafter without a
    tree given its steps verifies ``speculative_num_steps + 1``), else None."""
    if not isinstance(server, dict):
        return None
    window = server.get("speculative_num_draft_tokens")
    run = chain_window_reset(server.get("speculative_algorithm", "none"), server.get("speculative_num_steps"),
                             server.get("speculative_eagle_topk"))
    if run is not None and isinstance(window, int) and not isinstance(window, bool) and window != run:
        return window
    return None


def chain_window_resets_in(data: dict[str, Any]) -> dict[str, int]:
    """Dotted key -> value of each ``speculative_num_draft_tokens`` a raw scenario mapping
    writes that SGLang 0.5.23 replaces with ``speculative_num_steps + 1`` (a chain drafter
    without a tree: arg_groups/speculative_hook.py ``_handle_eagle_family`` resets it with a
    logged warning): the top-level server's, and a disaggregated role's that writes its own.
    Kept on the scenario, as validation replaces the value, for the run's warning."""
    server = data.get("server")
    if not isinstance(server, dict):
        return {}
    out = {}
    if (w := _reset_window(server)) is not None:
        out["server.speculative_num_draft_tokens"] = w
    layout = server.get("disaggregation")
    for role in ("prefill", "decode"):
        over = layout.get(role, {}).get("server") if isinstance(layout, dict) and isinstance(layout.get(role), dict) else None
        if isinstance(over, dict) and "speculative_num_draft_tokens" in over:
            if (w := _reset_window({**server, **over})) is not None:
                out[f"server.disaggregation.{role}.server.speculative_num_draft_tokens"] = w
    return out


def scenario_file(scenario: Scenario, default: str = "<scenario>") -> str:
    """The name a refusal of ``scenario``'s values gives: its file (``default`` when it has
    none), with " (with overrides)" when it was loaded with command-line overrides, as the
    value refused may be one of them and not the file's."""
    where = scenario.path or default
    return f"{where} (with overrides)" if scenario._with_overrides else where


SCENARIO_FILE = "a YAML scenario (see docs/scenario-reference.md)"
"""What a scenario file holds, as the refusal of an empty one says it."""


def read_yaml(path: str | Path, expected: str = SCENARIO_FILE) -> dict[str, Any]:
    """Read a YAML mapping strictly (:func:`sim.yaml_io.read_yaml_file`: no YAML 1.1
    coercions, no repeated keys, bounded aliases); ``expected`` names what the file holds,
    for the refusal of an empty one.

    Raises:
        ConfigError: the file is missing, a directory, binary, empty, not valid YAML or not a
            mapping.
    """
    data = read_yaml_file(path, expected)
    if data is None:
        raise ConfigError(str(path), "<file>", "", "the file is empty; expected a mapping of keys (see docs/scenario-reference.md)")
    if not isinstance(data, dict):
        raise ConfigError(str(path), "<top level>", type(data).__name__, "must be a mapping of keys (see docs/scenario-reference.md)")
    return data


_SCALAR_TAGS = frozenset({"int", "float", "str", "bool"})
"""pydantic's loc entry for a union's scalar branch (``num_turns.int``)."""
_UNION_TAG = re.compile(r"^function-(?:after|before|wrap|plain)\[.*\]$")
"""pydantic's loc entry for a union's validated model branch (``function-after[_fields(), LengthDist]``)."""


def _is_union_tag(x: object) -> bool:
    """Whether a loc entry names a union branch (a validated model, or a model class such as
    ``LengthDist``) rather than a key of the scenario (a user's mapping key, such as an arm's
    name, is never a model class name here)."""
    if not isinstance(x, str):
        return False
    if _UNION_TAG.match(x):
        return True
    seen, todo = set(), [BaseModel]
    while todo:
        for c in todo.pop().__subclasses__():
            if c.__name__ not in seen:
                seen.add(c.__name__)
                todo.append(c)
    return x in seen and x[:1].isupper()


_BOUNDS = {"greater_than": ("gt", ">"), "greater_than_equal": ("ge", ">="),
           "less_than": ("lt", "<"), "less_than_equal": ("le", "<=")}
"""pydantic's bound error types -> (its ctx key, the bound as the scenario reference writes it)."""

_TYPE_WORDS = {"int_type": "must be an integer", "int_parsing": "must be an integer",
               "int_from_float": "must be an integer (no fractional part)",
               "float_type": "must be a number", "float_parsing": "must be a number",
               "finite_number": "must be a finite number",
               "bool_type": "must be true or false", "bool_parsing": "must be true or false",
               "string_type": "must be a string", "list_type": "must be a list",
               "dict_type": "must be a mapping (key: value)", "model_type": "must be a mapping (key: value)",
               "model_attributes_type": "must be a mapping (key: value)"}
"""pydantic's type error types -> the wording of the project's own checks (pydantic says
"Input should be a valid integer")."""


_LEADING_ZERO = re.compile(r"^[-+]?0[0-9_]+$")
"""Digits with a leading zero (``010``), which the YAML reader leaves a string: YAML 1.1 reads
them as octal, 1.2 as decimal (sim/yaml_io.py)."""


def _unquoted_fits(text: str, error_type: str) -> bool:
    """Whether ``text``, a string where pydantic's ``error_type`` wanted another type, is that
    type's YAML spelling in quotes (``"0.85"`` for a number, ``"true"`` for a boolean)."""
    t = text.strip()
    if error_type.startswith("bool"):
        return t.lower() in ("true", "false")
    if _LEADING_ZERO.match(t):   # unquoted too: the YAML reader keeps it a string (sim/yaml_io.py)
        return False
    try:
        v = float(t) if error_type.startswith(("float", "finite")) else int(t)
    except ValueError:
        return False
    return math.isfinite(v)


def _choice_text(value: Any, expected: str) -> str:
    """An enum's or literal's refusal in the project's words: ``allowed: a, b, c``, and the
    closest allowed value when the value looks like a typo of one (``stream-wait``)."""
    choices = re.findall(r"'([^']*)'", expected) or [expected]
    near = difflib.get_close_matches(str(value), choices, n=1)
    return "allowed: " + ", ".join(choices) + (f"; did you mean {near[0]!r}?" if near else "")


def nested_home(parent: tuple[Any, ...] | list[str], key: str, root: type[BaseModel] | None = None) -> str | None:
    """The dotted key one block down from ``parent`` where ``key`` is a field
    (``chunked_prefill_size`` at the top level -> ``server.chunked_prefill_size``), for an
    unknown key that was written one level too high; None when no block (or more than one) has it."""
    homes = [block for block in _allowed_keys(tuple(parent), root)
             if key in _allowed_keys((*parent, block), root)]
    return ".".join(str(x) for x in (*parent, homes[0])) + f".{key}" if len(homes) == 1 else None


def validation_error(file: str, err: ValidationError, data: dict[str, Any],
                     root: type[BaseModel] | None = None) -> ConfigError:
    """Turn pydantic's first error into a ConfigError with file, dotted key, value, allowed.

    ``root`` is the model ``data`` was validated as (default :class:`Scenario`): an unknown
    key's allowed list is read from it, so a profile's error lists the profile's keys."""
    errors = err.errors()
    first = errors[0]
    if (isinstance(first.get("input"), dict) and first["type"].endswith("_type") and first["loc"]
            and first["loc"][-1] in _SCALAR_TAGS):
        # a mapping given to a union such as ``int | LengthDist``: the scalar branch's type
        # error says nothing; the mapping's own branch names the key at fault
        head = tuple(first["loc"][:-1])
        first = next((e for e in errors[1:] if tuple(e["loc"][:len(head)]) == head), first)
    loc = tuple(x for x in first["loc"] if not _is_union_tag(x))
    if loc and loc[-1] in _SCALAR_TAGS and any(
            len(e["loc"]) > len(loc) - 1 and tuple(e["loc"][:len(loc) - 1]) == loc[:-1] and _is_union_tag(e["loc"][len(loc) - 1])
            for e in errors):
        # a scalar that fits no branch of ``int | LengthDist``: the key is the union's, not ``num_turns.int``
        loc = loc[:-1]
    if len(loc) >= 2 and loc[-1] == "[key]":   # a mapping's key itself (pydantic: ``...prefill.[key]``)
        loc = loc[:-2] + (f"[{loc[-2]!r}]",)
    key = ".".join(str(x) for x in loc).replace(".[", "[") or "<top level>"
    value: Any = first.get("input", "<missing>")
    msg = first["msg"].removeprefix("Value error, ")
    bound = _BOUNDS.get(first["type"])
    if bound is not None and bound[0] in (first.get("ctx") or {}):   # "Input should be greater than 0"
        msg = f"must be {bound[1]} {first['ctx'][bound[0]]}"
    msg = _TYPE_WORDS.get(first["type"], msg)
    if first["type"] in _TYPE_WORDS and isinstance(value, str) and _unquoted_fits(value, first["type"]):
        # mem_fraction_static: "0.85": YAML reads a quoted value as a string, which "must be a number" does not say
        msg += f" (the value is quoted: write {value.strip()} without quotes)"
    if first["type"] in _TYPE_WORDS and isinstance(value, str) and _LEADING_ZERO.match(value.strip()):
        msg += (f" (a leading zero: YAML 1.1 reads {value.strip()} as octal, 1.2 as decimal; "
                f"write {int(value.strip().replace('_', ''))} for the decimal number)")
    if first["type"] == "model_type" and (first.get("ctx") or {}).get("class_name") == "LengthDist" \
            and isinstance(value, (int, float)) and not isinstance(value, bool):
        msg += f", e.g. {{kind: fixed, value: {value}}} (or kind uniform with range_ratio, or kind file)"
    if first["type"] in ("enum", "literal_error"):  # pydantic: "Input should be 'a', 'b' or 'c'"
        msg = _choice_text(value, str((first.get("ctx") or {}).get("expected", "")))
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, FieldError):  # a check across fields names its own key
        own = cause.key if not cause.key.startswith(".") else (key if loc else "") + cause.key
        return ConfigError(file, own.lstrip("."), cause.value, cause.allowed)
    if first["type"] == "missing":  # pydantic: "Field required"
        value = "<missing>"
        msg = "required" + (" (specsched schema lists every key: type, default, allowed values)"
                            if root in (None, Scenario) else "")
    elif isinstance(value, dict):
        value = "{...}"
        head, _, rest = msg.partition(" ")
        if not loc and "." in head:  # a cross-field check names its key first
            key, value, msg = head, rest.split(" ", 1)[0], rest.split(" ", 1)[-1]
    elsewhere = elsewhere_line(tuple(str(x) for x in loc)) if first["type"] == "extra_forbidden" else None
    if elsewhere is not None:
        return ConfigError(file, key, value, elsewhere)
    if first["type"] == "extra_forbidden":
        allowed = _allowed_keys(loc[:-1], root)
        near = nearest_key(str(loc[-1]), allowed) or [nested_home(loc[:-1], str(loc[-1]), root)]
        pasted = launch_arg_hint(str(loc[-1]), near[0]) if len(loc) >= 2 and str(loc[-2]) == "server" else None
        hint = pasted or (f"; did you mean {near[0]!r}?" if near[0] else "")
        msg = "unknown key" + hint + allowed_keys_text(loc[:-1], allowed, root)
    return ConfigError(file, key, value, msg)


def nearest_key(key: str, allowed) -> list[str]:
    """The allowed key an unknown ``key`` most likely meant, as a list of at most one: the
    one ``key`` is a short form of (``rate`` for ``request_rate``: ends with ``_key`` or
    starts with ``key_``, where exactly one does), else the nearest spelling
    (``difflib.get_close_matches``). A short form is a likelier intent than the nearest
    spelling (``rate`` is spelled nearer ``trace``)."""
    allowed = list(allowed)
    hits = [a for a in allowed if a.endswith("_" + key) or a.startswith(key + "_")]
    return hits if len(hits) == 1 else difflib.get_close_matches(key, allowed, n=1)


LONG_ALLOWED = 160
"""Characters of an unknown key's allowed list past which a scenario's error points at
``specsched schema`` instead of listing them (``server`` alone has ~50 keys: one line of
a thousand characters)."""


def allowed_keys_text(parent: tuple[Any, ...] | list[str], allowed: list[str],
                      root: type[BaseModel] | None = None) -> str:
    """The tail of an unknown key's message: the allowed keys, or, for a scenario block
    whose list is longer than :data:`LONG_ALLOWED`, where to read them (a profile's keys
    have no reference page, so they are always listed). ``parent`` is the block's key path
    from ``root`` (default :class:`Scenario`); the text starts with "; " (or is empty when
    nothing is allowed)."""
    listed = ", ".join(allowed)
    if not allowed:
        return ""
    if len(listed) <= LONG_ALLOWED or root not in (None, Scenario):
        return f"; allowed: {listed}"
    block = ".".join(map(str, parent)) or "the top level"
    return (f"; the {len(allowed)} keys allowed in {block}: specsched schema "
            "(or docs/scenario-reference.md)")


def _allowed_keys(parent: tuple[Any, ...], root: type[BaseModel] | None = None) -> list[str]:
    """Field names of the model at ``parent`` (a loc path from the scenario root)."""
    model: Any = root or Scenario
    for part in parent:
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return []
        ann = field.annotation
        cands = [ann, *getattr(ann, "__args__", ())]
        model = next((c for c in cands if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if model is None:
            return []
    return list(getattr(model, "model_fields", {}))


def load_scenario(path: str | Path, arm: str = "base", resolve_defaults: bool = True) -> Scenario:
    """Load and validate a scenario file with ``arm``'s overrides applied.

    Args:
        path: YAML file.
        arm: an arm in the file's ``arms`` (``base`` is always allowed and means no override).
        resolve_defaults: fill the server arguments the file leaves out with SGLang's
            defaults for the profile's hardware (:func:`sim.defaults.resolve_loaded`).

    Returns:
        The validated, frozen :class:`Scenario`.

    Raises:
        ConfigError: missing/unknown/out-of-range key, or an unknown arm.
    """
    path = resolve_scenario_path(path)
    raw = read_yaml(path)
    from specsched.sim.profile import model_config_refusal

    refusal = model_config_refusal(path, raw)
    if refusal is not None:
        raise refusal
    if "gpu" in raw and not {"workload", "server", "profile"} & raw.keys():
        # a profile given where a scenario goes (`profile --analytic --out my.yaml`, then `run my.yaml`):
        # say so, not "profile = '<missing>': required" (sim/profile.py load_profile names the reverse)
        raise ConfigError(str(path), "<file>", str(path), "a profile (it has gpu), not a scenario; give a scenario "
                          f"(a bundled name such as h200/batch8, or a file with workload and server) and this "
                          f"profile with it: --set profile={path}")
    arms = raw.get("arms") or {}
    if not isinstance(arms, dict):
        raise ConfigError(str(path), "arms", arms, "must be a mapping of arm name -> overrides")
    if arm != "base" and arm not in arms:
        names = ["base", *[str(a) for a in arms if a != "base"]]
        near = difflib.get_close_matches(str(arm), names, n=1)
        raise ConfigError(str(path), "--arm", arm,
                          (f"did you mean {near[0]!r}? " if near else "") + f"allowed: {', '.join(names)}")
    chosen = _resolve_arm(path, raw, arm)
    for other in arms:  # a typo in an arm not chosen now fails now, not in next week's run
        if other != arm:
            _resolve_arm(path, raw, other)
    if not resolve_defaults:
        return chosen
    from specsched.sim.defaults import resolve_loaded

    return resolve_loaded(chosen)


WINDOW_KEYS = ("speculative_num_draft_tokens", "speculative_num_steps", "speculative_eagle_topk")
"""Server keys that can change the verify window a scenario's acceptance was stated at."""


def replace_acceptance_source(override: dict[str, Any]) -> dict[str, Any]:
    """``override`` (a nested mapping) with the other acceptance sources set to None when it
    states exactly one of :data:`sim.acceptance_config.ACCEPTANCE_SOURCES`.

    An arm, ``--set`` or sweep axis that gives the acceptance another way (a histogram
    measured on the server where the file states a mean accept length) replaces the file's
    source; deep-merged beside it, the scenario held two and was refused. Two sources in the
    override itself are left for the validation to name."""
    acc = override.get("acceptance")
    if not isinstance(acc, dict):
        return override
    given = [k for k in ACCEPTANCE_SOURCES if acc.get(k) is not None]
    if len(given) != 1:
        return override
    return deep_merge(override, {"acceptance": {k: None for k in ACCEPTANCE_SOURCES if k != given[0]}})


def _states_acceptance(override: dict[str, Any], pinned: str) -> bool:
    """Whether ``override`` (a nested mapping) states an acceptance of its own: one of
    :data:`sim.acceptance_config.ACCEPTANCE_SOURCES`, or the ``pinned`` key a pin would
    write. Other acceptance keys (``request_spread``, ``sibling_rate``, ``rate_decay``)
    change how the file's acceptance is drawn, not where it was measured."""
    acc = override.get("acceptance")
    if acc is None:
        return False
    if not isinstance(acc, dict):
        return True   # a whole acceptance block replaced: the validation names what it holds
    return any(acc.get(k) is not None for k in (*ACCEPTANCE_SOURCES, pinned))


def pin_acceptance_window(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``override`` (a nested mapping) with ``acceptance.window`` set to ``base``'s verify
    window when the override moves the window and ``base`` states its acceptance without
    one (and the override states no acceptance source or window of its own: another
    acceptance key, e.g. ``request_spread``, still reads the file's acceptance).

    A scenario's acceptance was measured with the drafter at the scenario's window, so a
    what-if at another window (an arm, ``--set``, a sweep axis) carries its per-position
    rates from there (sim/acceptance.py), as ``acceptance.window`` does when given. Left
    unset, the mean accept length was taken at every window as given: a window sweep on
    the H200 low-acceptance cell (1.6 at window 4) drew 1.6 at window 2 and at window 8, and
    the high-acceptance cell (6.0 at window 8) refused window 4 as 'exceeds the verify window'."""
    acc, srv = base.get("acceptance"), base.get("server")
    over_srv = override.get("server")
    if (not isinstance(acc, dict) or not acc or acc.get("window") is not None
            or _states_acceptance(override, "window")
            or not isinstance(srv, dict) or not isinstance(over_srv, dict)
            or not any(k in over_srv for k in WINDOW_KEYS)):
        return override
    try:
        w0 = ServerArgs.model_validate(srv).accept_window
        w1 = ServerArgs.model_validate(deep_merge(srv, over_srv)).accept_window
    except (ValidationError, ValueError, TypeError):
        return override  # the merged scenario's validation names what is wrong
    if w0 < 2 or w1 < 2 or w0 == w1:
        return override
    return deep_merge(override, {"acceptance": {"window": w0}})


def draft_tree(server: Any) -> list[int] | None:
    """``[speculative_eagle_topk, speculative_num_draft_tokens]`` a validated server's chain
    drafter runs (topk 1 where unset; the window after SGLang's chain reset), else None (no
    speculative decoding, or a block drafter, which drafts no tree)."""
    algo = server.speculative_algorithm
    if not algo.enabled or algo.is_block:
        return None
    return [server.speculative_eagle_topk or 1, server.speculative_num_draft_tokens]


def pin_acceptance_tree(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``override`` (a nested mapping) with ``acceptance.tree`` set to ``base``'s draft tree
    (:func:`draft_tree`) when the override moves ``speculative_eagle_topk`` or
    ``speculative_num_draft_tokens`` of a chain drafter off it and ``base`` states its
    acceptance without a tree (and the override states no acceptance source or tree of its
    own: ``sibling_rate`` or ``request_spread`` beside it still reads the file's).

    The acceptance was measured on the file's draft; a what-if on a wider or narrower tree
    carries it unchanged (per-depth rates), so the run can say that its accept length is
    the file's, not the new tree's (:class:`sim.grid_range.AcceptanceTreeShape`): a sweep over
    topk 1 -> 4 at 16 draft tokens on an EAGLE cell priced every candidate and kept the
    accept length at 2.59, silently, the tree coming out only slower."""
    acc, srv = base.get("acceptance"), base.get("server")
    over_srv = override.get("server")
    if (not isinstance(acc, dict) or not acc or acc.get("tree") is not None or _states_acceptance(override, "tree")
            or not isinstance(srv, dict) or not isinstance(over_srv, dict)
            or not any(k in over_srv for k in ("speculative_eagle_topk", "speculative_num_draft_tokens"))):
        return override
    try:
        t0 = draft_tree(ServerArgs.model_validate(srv))
        t1 = draft_tree(ServerArgs.model_validate(deep_merge(srv, over_srv)))
    except (ValidationError, ValueError, TypeError):
        return override  # the merged scenario's validation names what is wrong
    if t0 is None or t1 is None or t0 == t1:
        return override
    return deep_merge(override, {"acceptance": {"tree": t0}})


def _resolve_arm(path: Path, raw: dict[str, Any], arm: str) -> Scenario:
    """The scenario with ``arm``'s overrides merged in, validated; errors inside an arm's
    overrides are named ``arms.<arm>.<key>``."""
    override = (raw.get("arms") or {}).get(arm) or {}
    if not isinstance(override, dict):
        raise ConfigError(str(path), f"arms.{arm}", override, "must be a mapping of overrides")
    for forbidden in ("arms", "arm", "name"):
        if forbidden in override:
            raise ConfigError(str(path), f"arms.{arm}.{forbidden}", override[forbidden], "an arm cannot override this key")
    merged = deep_merge(raw, replace_acceptance_source(pin_acceptance_tree(raw, pin_acceptance_window(raw, override))))
    merged["arm"] = arm
    merged["path"] = str(path)
    try:
        return Scenario.model_validate(merged)
    except ValidationError as e:
        err = validation_error(str(path), e, merged)
        if arm != "base" and _sets(override, err.key):
            raise ConfigError(err.file, f"arms.{arm}.{err.key}", err.value, err.allowed) from None
        if arm != "base":
            raise ConfigError(err.file, err.key, err.value, f"{err.allowed} (with arm {arm})") from None
        raise err from None


def dotted_value(obj: Any, dotted: str, default: Any = None) -> Any:
    """The value at ``dotted`` (e.g. ``server.max_running_requests``,
    ``disaggregation.decode.server.max_total_num_tokens``) under ``obj``, a model or a mapping
    at each level (a resolved scenario, or one read back as YAML); an enum as its value;
    ``default`` where the path is absent or the value None."""
    cur = obj
    for part in dotted.split("."):
        if cur is None:
            return default
        cur = cur.get(part) if isinstance(cur, Mapping) else getattr(cur, part, None)
    if cur is None:
        return default
    return getattr(cur, "value", cur)


def _sets(override: dict[str, Any], dotted: str) -> bool:
    """Whether the arm's overrides contain the dotted key (or a parent of it)."""
    node: Any = override
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def arm_names(scenario_path: str | Path) -> list[str]:
    """Arms a scenario file defines, ``base`` first."""
    raw = read_yaml(resolve_scenario_path(scenario_path))
    names = list((raw.get("arms") or {}).keys())
    return ["base", *[a for a in names if a != "base"]]
