"""Scenario overrides with dotted keys, as used by sweeps and the CLI.

``server.chunked_prefill_size=8192`` sets ``server: {chunked_prefill_size: 8192}``; each value
is parsed as YAML (``8192`` -> int, ``true`` -> bool, ``[0.9, 0.8]`` -> list, ``null`` ->
None, anything else a string). Overrides are deep-merged on top of the scenario (with its arm
applied, see :func:`sim.config.load_scenario`) and the result is validated again, so a bad
key or value is a :class:`sim.errors.ConfigError` naming the key, the value and what is
allowed.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from specsched.sim.arg_text import split_top_level
from specsched.sim.config import (
    Scenario,
    allowed_keys_text,
    deep_merge,
    elsewhere_line,
    load_scenario,
    nearest_key,
    nested_home,
    pin_acceptance_tree,
    pin_acceptance_window,
    replace_acceptance_source,
    validation_error,
)
from specsched.sim.errors import ConfigError
from specsched.sim.server_args import ServerArgs, chain_window_reset
from specsched.sim.sglang_launch_args import ANY_VALUE, launch_arg_hint, taken
from specsched.sim.yaml_io import load_yaml_text

FORBIDDEN_KEYS = ("arms", "arm", "name", "path")
"""Top-level keys an override may not set (the arm is chosen separately)."""

_CLI = "<command line>"


_INF = {"inf", "+inf", "infinity", "+infinity"}
"""Bare spellings of infinity read as the float (bench_serving's ``--request-rate inf``;
YAML itself knows only ``.inf``)."""


def parse_value(text: str, key: str = "<value>") -> Any:
    """Parse one override value as YAML (``"8192"`` -> 8192, ``"host_block"`` -> str); a bare
    ``inf`` (any case, as bench_serving's ``--request-rate inf``) is the float infinity, which
    only fields that allow it (``workload.request_rate``) accept.

    Raises:
        ConfigError: the text is not valid YAML.
    """
    if text.strip().lower() in _INF:
        return float("inf")
    try:
        return load_yaml_text(text, _CLI) if text.strip() else None
    except ConfigError as e:
        raise ConfigError(_CLI, key, text, f"not a valid YAML value ({e.allowed})") from None


def split_values(text: str) -> list[str]:
    """Split ``"v1,v2,[1, 2],'a,b'"`` at the commas outside brackets, braces and quotes
    (:func:`sim.arg_text.split_top_level`, the one splitter of argument text).

    Returns:
        The stripped parts (``["v1", "v2", "[1, 2]", "'a,b'"]``).
    """
    return [part.strip() for part in split_top_level(text, brackets=("[{", "]}"))]


def _split_assignment(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(_CLI, item, item, "expected key=value (dotted key, e.g. server.chunked_prefill_size=8192)")
    return key, value


def parse_overrides(items: Iterable[str]) -> dict[str, Any]:
    """Parse ``["server.x=1", "seed=3"]`` into ``{"server.x": 1, "seed": 3}`` (YAML values).

    Raises:
        ConfigError: an item without ``=`` or with an unparsable value.
    """
    out: dict[str, Any] = {}
    for item in items:
        key, value = _split_assignment(item)
        out[key] = parse_value(value, key)
    return out


def parse_grid(items: Iterable[str]) -> dict[str, list[Any]]:
    """Parse sweep axes ``["server.chunked_prefill_size=8192,16384", "arm=base,fix"]``.

    Returns:
        Dotted key -> list of YAML-parsed values, in the order given.

    Raises:
        ConfigError: an item without ``=``, an empty value list, a repeated key, a repeated
            value within one axis, or an unparsable value.
    """
    grid: dict[str, list[Any]] = {}
    for item in items:
        key, text = _split_assignment(item)
        if key in grid:
            raise ConfigError(_CLI, key, item, "axis given twice; list all its values once: key=v1,v2")
        raw = split_values(text)
        if not text.strip() or any(not r for r in raw):
            raise ConfigError(_CLI, key, text, "expected a comma-separated list of values: key=v1,v2")
        values = [parse_value(r, key) for r in raw]
        if len({repr(v) for v in values}) != len(values):
            raise ConfigError(_CLI, key, text, "values of one axis must be distinct")
        grid[key] = values
    return grid


def _unwrap(annotation: Any) -> Any:
    """``X | None`` / ``Annotated[X, ...]`` -> X (the part that can hold sub-keys); a union
    of one model with plain types (``int | LengthDist``: workload.multi_turn.num_turns, a
    count or a distribution) -> the model, whose keys are the ones a dotted key can name."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _unwrap(args[0])
        models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        return models[0] if len(models) == 1 else annotation
    return annotation


_NO_VALUE = object()


def check_key(dotted: str, file: str = _CLI, value: Any = _NO_VALUE) -> None:
    """Check that ``dotted`` names a scenario field (e.g. ``server.chunked_prefill_size``).

    Raises:
        ConfigError: an unknown key (the message lists the allowed ones), a key below a
            field that is not a mapping, or a key in :data:`FORBIDDEN_KEYS`.
    """
    shown = "<key>" if value is _NO_VALUE else value  # the value given, never the key again
    parts = dotted.split(".")
    if any(not p for p in parts):
        raise ConfigError(file, dotted, shown, "empty part in dotted key")
    if parts[0] in FORBIDDEN_KEYS:
        raise ConfigError(file, dotted, shown, f"an override cannot set {parts[0]!r} (choose the arm with --arm / grid axis 'arm')")
    model: Any = Scenario
    for i, part in enumerate(parts):
        if isinstance(model, type) and issubclass(model, BaseModel):
            fields = model.model_fields
            if part not in fields:
                where = ".".join(parts[:i]) or "<top level>"
                if model is ServerArgs and i == len(parts) - 1 and taken(
                        part, ANY_VALUE if value is _NO_VALUE else value):
                    # an SGLang launch argument with no effect on the prediction, one whose value
                    # the model may run (tp_size), SGLang's name of a server key, or one at its
                    # default: left out with a note or read as the key, or refused when loaded
                    return
                if (elsewhere := elsewhere_line(parts)) is not None:
                    raise ConfigError(file, dotted, shown, elsewhere)
                near = nearest_key(part, fields)
                home = nested_home(parts[:i], part) if not near and i == len(parts) - 1 else None
                pasted = launch_arg_hint(part, near[0] if near else None) if model is ServerArgs else None
                hint = pasted or (f"; did you mean {'.'.join([*parts[:i], near[0]])!r}?" if near
                                  else f"; did you mean {home!r}?" if home else "")
                raise ConfigError(file, dotted, shown,
                                  f"unknown key under {where}{hint}{allowed_keys_text(parts[:i], list(fields))}")
            model = _unwrap(fields[part].annotation)
        elif typing.get_origin(model) is dict or model is dict:
            return  # free-form mapping (e.g. reference): anything below is allowed
        else:
            raise ConfigError(file, dotted, shown, f"{'.'.join(parts[:i])} is not a mapping")


def nest(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``{"server.x": 1, "server.y": 2}`` -> ``{"server": {"x": 1, "y": 2}}``.

    Raises:
        ConfigError: two keys conflict (``server=...`` and ``server.x=...``).
    """
    out: dict[str, Any] = {}
    for dotted, value in overrides.items():
        parts = dotted.split(".")
        cur = out
        for p in parts[:-1]:
            nxt = cur.setdefault(p, {})
            if not isinstance(nxt, dict):
                raise ConfigError(_CLI, dotted, value, f"conflicts with an override of {p!r}")
            cur = nxt
        if parts[-1] in cur and isinstance(cur[parts[-1]], dict) and not isinstance(value, dict):
            raise ConfigError(_CLI, dotted, value, "conflicts with an override of one of its sub-keys")
        cur[parts[-1]] = value
    return out


def _rederive_turn_count(data: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` without its multi-turn ``workload.num_requests`` unless an override sets it.

    A multi_turn workload's request count is num_conversations x num_turns (the workload
    fills it in when the file leaves it out, and refuses any other value). The loaded
    scenario carries that count, so ``--set workload.multi_turn.num_conversations=4`` was
    refused against the file's old product; dropped, it is derived again from the
    overridden conversations and turns. A shared_prefix workload's count (num_groups x
    prompts_per_group) likewise. An override of num_requests (or num_prompts) is still
    checked against the product."""
    wl, over = data.get("workload"), nest(overrides).get("workload")
    derived = isinstance(wl, dict) and (wl.get("kind") == "multi_turn" or wl.get("shared_prefix") is not None)
    if (not derived or "num_requests" not in wl
            or (isinstance(over, dict) and ("num_requests" in over or "num_prompts" in over))):
        return data
    return {**data, "workload": {k: v for k, v in wl.items() if k != "num_requests"}}


class Layered(dict):
    """A point's dotted overrides (every key, the point's own winning) that also remember the
    layer they start from (``fixed``: a sweep's ``--set`` keys), so that every check that loads
    the point (:func:`load_scenario_with_overrides`) merges the two layers as the run does."""

    def __init__(self, point: Mapping[str, Any], fixed: Mapping[str, Any]) -> None:
        super().__init__({**fixed, **point})
        self.fixed = dict(fixed)


def _merge_layer(data: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` (a scenario's dump) with one layer of dotted overrides merged in: a moved verify
    window or draft tree carries the acceptance ``data`` states from where ``data`` runs
    (:func:`sim.config.pin_acceptance_window`, :func:`sim.config.pin_acceptance_tree`), and
    an acceptance source given replaces the one stated."""
    over = nest(overrides)
    return deep_merge(data, replace_acceptance_source(pin_acceptance_tree(data, pin_acceptance_window(data, over))))


def load_scenario_with_overrides(
    path: str | Path, arm: str = "base", overrides: Mapping[str, Any] | Iterable[str] | None = None
) -> Scenario:
    """Load a scenario, apply ``arm`` (as :func:`sim.config.load_scenario`), then the overrides.

    Args:
        path: the scenario YAML file.
        arm: an arm of the file (``base`` = no arm override).
        overrides: dotted key -> value (already parsed), or ``"key=value"`` strings (values
            YAML-parsed). Overrides win over the arm's settings. :class:`Layered` overrides
            are merged in two layers, their ``fixed`` keys first: a sweep's ``--set`` keys,
            which make the scenario every grid point starts from. A grid point that moves
            the verify window then carries the acceptance from the window of the file with
            the ``fixed`` keys in it: ``--set speculative_algorithm=dspark --set acceptance.mean_accept_length=3``
            with a window axis took 3.0 at every window (the override stated the acceptance
            with the window beside it), where the same keys written in the file carried it
            from the file's window. A key both set: the point's value wins, the ``fixed``
            one still places the acceptance (``--set ...num_draft_tokens=6`` with a window
            axis carries it from window 6).

    Returns:
        The validated, frozen Scenario (``arm`` set, ``path`` = the file).

    Raises:
        ConfigError: bad file, unknown arm, unknown/forbidden key, or a value the scenario
            model rejects (the message names the dotted key and the value).
    """
    from specsched.sim.defaults import resolve_loaded

    scenario = load_scenario(path, arm, resolve_defaults=False)
    if overrides is not None and not isinstance(overrides, Mapping):
        overrides = parse_overrides(overrides)
    fixed = dict(getattr(overrides, "fixed", None) or {})
    overrides = {k: v for k, v in (overrides or {}).items() if k not in fixed or fixed[k] != v}
    layers = [layer for layer in (fixed, overrides) if layer]
    if not layers:
        return resolve_loaded(scenario)
    overrides = {**fixed, **overrides}   # every key set, for the checks and notes below
    for key, value in overrides.items():
        check_key(key, f"{path} (--set {key})", value)   # the override is the user's mistake, not the file
    data = scenario.model_dump(mode="json", exclude_unset=True)
    merged = _rederive_turn_count(data, overrides)
    for layer in layers:
        merged = _merge_layer(merged, layer)
    left_out = scenario._launch_args_left_out   # the file's: the dump above no longer has them
    window_given = scenario._window_given        # the file's written windows, reset in the dump
    values = scenario._launch_args_values
    try:
        scenario = Scenario.model_validate(merged)
    except ValidationError as e:
        raise validation_error(f"{path} (with overrides)", e, merged) from None
    scenario._launch_args_left_out = tuple(dict.fromkeys((*left_out, *scenario._launch_args_left_out)))
    scenario._launch_args_values = {**values, **scenario._launch_args_values}
    scenario._with_overrides = True   # every later refusal names the file "(with overrides)"
    # an overridden window gets the "changes nothing" note instead (unread_overrides)
    scenario._window_given = {k: v for k, v in window_given.items() if k not in overrides}
    try:
        return resolve_loaded(scenario)  # hardware defaults after the overrides they depend on
    except ConfigError as e:
        if e.file != str(scenario.path or ""):
            raise
        # refused at the hardware's rules: the file with the overrides, as the model's refusals
        raise ConfigError(f"{path} (with overrides)", e.key, e.value, e.allowed) from None


def _servers(s: Any) -> tuple[Any, ...]:
    """The scenario's server and, under disaggregation, its prefill and decode roles' servers."""
    srv = s.server
    roles = [srv.role_server(r) for r in ("prefill", "decode")] if srv.disaggregation is not None else []
    return (srv, *roles)


def _spec_on(s: Any) -> bool:
    """Speculative decoding on this server or on a disaggregated role's."""
    return any(x.speculative_algorithm.enabled for x in _servers(s))


def _block_on(s: Any) -> bool:
    """A block drafter (dspark, dflash) on this server or on a disaggregated role's."""
    return any(x.speculative_algorithm.enabled and x.speculative_algorithm.is_block for x in _servers(s))


def _window_read(s: Any) -> bool:
    """Whether some drafting server reads ``speculative_num_draft_tokens``: a block drafter, a
    draft tree (``speculative_eagle_topk`` > 1), or a chain given no ``speculative_num_steps``
    (SGLang's own choice of all three; a window given without them is refused at load). A
    chain without a tree given its steps verifies
    ``speculative_num_steps + 1`` positions whatever the window says: sglang 0.5.23
    arg_groups/speculative_hook.py ``_handle_eagle_family`` resets it (sim/server_args.py
    ``_chain_window_from_steps``)."""
    def fixed_by_steps(x: Any) -> bool:
        return ("speculative_num_steps" in x.model_fields_set
                and chain_window_reset(x.speculative_algorithm, x.speculative_num_steps, x.speculative_eagle_topk)
                is not None)

    drafting = [x for x in _servers(s) if x.speculative_algorithm.enabled]
    return not drafting or not all(fixed_by_steps(x) for x in drafting)


def _priority_read(s: Any) -> bool:
    """Whether some server reads the requests' priorities: priority scheduling
    (``enable_priority_scheduling``) or a schedule-policy class of the user's own on the
    server or on a disaggregated role's server (``server.disaggregation.<role>.server``: a
    decode server's prealloc queue and prebuilt batch, a prefill server's waiting queue,
    each ordered by priority on its own server's flag)."""
    return any(x.enable_priority_scheduling or ":" in x.schedule_policy for x in _servers(s))


_SHIPPED_DELAYS = ("none", "min_free_slots", "min_free_slots_waiting_aware", "demand_observed")

def _profile_knows_hardware(s: Any) -> bool:
    """Whether the scenario's profile has a ``hardware`` block, from which the KV pool follows
    the memory fraction (sim/defaults.py); True when the profile does not load (the run names
    what is wrong with it)."""
    from specsched.sim.profile import load_profile

    try:
        return load_profile(s.profile, s.path or None).hardware is not None
    except ConfigError:
        return True


UNREAD_WITHOUT: list[tuple[str, Any, str]] = [
    ("server.swa_full_tokens_ratio", lambda s: s.server.sliding_window_size is not None,
     "read only with server.sliding_window_size (a hybrid sliding-window KV), which is not set"),
    ("server.swa_eviction_interval", lambda s: s.server.sliding_window_size is not None,
     "read only with server.sliding_window_size (a hybrid sliding-window KV), which is not set"),
    ("server.dp_spec_prefill_coordination", lambda s: s.server.enable_dp_attention and _spec_on(s),
     "read only with server.enable_dp_attention and speculative decoding"),
    ("server.num_reserved_decode_tokens", lambda s: s.server.disaggregation is not None,
     "read only by a decode server of server.disaggregation, which is not set"),
    ("server.disaggregation_decode_extra_slots", lambda s: s.server.disaggregation is not None,
     "read only by a decode server of server.disaggregation, which is not set"),
    ("server.min_free_slots", lambda s: s.server.admission_delay != "none",
     "read only by an admission delay; server.admission_delay is none"),
    ("server.max_delay_passes", lambda s: s.server.admission_delay not in _SHIPPED_DELAYS[:3],
     "read only by server.admission_delay demand_observed"),
    ("acceptance", _spec_on, "read only with speculative decoding; server.speculative_algorithm is none"),
    *((f"server.{k}", _spec_on, "read only with speculative decoding; server.speculative_algorithm is none")
      for k in ("speculative_num_draft_tokens", "speculative_eagle_topk", "speculative_num_steps")),
    ("server.speculative_num_draft_tokens", _window_read,
     "a chain drafter without a tree (speculative_eagle_topk 1) verifies speculative_num_steps + 1 positions, "
     "the window SGLang resets it to (arg_groups/speculative_hook.py _handle_eagle_family): vary "
     "server.speculative_num_steps, or give a tree (speculative_eagle_topk > 1)"),
    ("server.sync_mode", _spec_on, "the publish wait of a speculative cycle (a plain decode step waits for none); "
     "server.speculative_algorithm is none"),
    ("server.prefill_slot_expansion_sync", lambda s: _spec_on(s) and _block_on(s),
     "read only by a block drafter's prefill (dspark, dflash); this run has none"),
    ("workload.concurrency", lambda s: s.workload.kind in ("closed_loop", "multi_turn"),
     "read only by workload.kind closed_loop and multi_turn (bench_serving's cap on a poisson or trace "
     "workload is workload.max_concurrency)"),
    ("workload.max_concurrency", lambda s: s.workload.kind in ("poisson", "trace"),
     "read only by workload.kind poisson and trace (a closed loop or multi-turn run holds workload.concurrency)"),
    *((f"workload.{k}", lambda s: s.workload.kind != "trace",
       "read by every workload.kind but trace: the trace gives each request's prompt and output length")
      for k in ("input_len", "output_len")),
    ("workload.request_rate", lambda s: s.workload.kind in ("poisson", "multi_turn"),
     "read only by workload.kind poisson and multi_turn (conversation starts)"),
    ("workload.priorities", _priority_read,
     "read only with server.enable_priority_scheduling (or a schedule-policy class of your own), on the "
     "server or on a disaggregated role's server"),
    *((k, lambda s: s.server.schedule_policy == "routing-key" or ":" in s.server.schedule_policy,
       "read only with server.schedule_policy routing-key (or a schedule-policy class of your own)")
      for k in ("workload.routing_keys", "workload.shared_prefix.send_routing_key")),
    ("server.mem_fraction_static", _profile_knows_hardware,
     "read only with a profile that knows its GPU's memory (a hardware block: `specsched profile --analytic` "
     "writes one); this profile's KV pool is server.max_total_num_tokens"),
]
"""(key, whether the scenario reads it, why not): keys whose value changes nothing unless
another key turns their part of the model on (each one's description in the schema says
so). A what-if on one of them alone would return the unchanged run."""


def unread_overrides(scenario: Any, keys: Iterable[str]) -> list[str]:
    """One note per overridden key that ``scenario`` (loaded with the overrides) does not
    read, naming the key, the reason and the kind or key that would make it count; empty
    when every key counts. A key under a listed block (``acceptance.mean_accept_length``)
    counts as the block."""
    notes = []
    for key in dict.fromkeys(keys):
        for name, reads, why in UNREAD_WITHOUT:
            if (key == name or key.startswith(name + ".")) and not reads(scenario):
                kind = f" (workload.kind is {scenario.workload.kind})" if "workload.kind" in why else ""
                notes.append(f"note: {key} changes nothing in this run: {why}{kind}")
                break
    return notes


FILE_NOTE_KEYS = ("workload.request_rate", "workload.concurrency", "workload.max_concurrency", "workload.priorities",
                  "workload.routing_keys", "workload.input_len", "workload.output_len")
"""Keys a scenario file (or its arm) sets that :func:`unread_in_file` names when the run does
not read them: the arrival keys of another workload kind, priorities without priority
scheduling. The server keys a file states for completeness (a sync mode on a plain-decoding
cell) are left unsaid. The file's ``acceptance`` block is named too (:func:`unread_in_file`):
it is a measurement the file states for this run, and a file that gives one but leaves
``server.speculative_algorithm`` at none ran without speculation, without a word."""


def unread_in_file(scenario: Any, given: Iterable[str] = ()) -> list[str]:
    """Notes of :func:`unread_overrides` for :data:`FILE_NOTE_KEYS` that the scenario file
    itself sets (its workload's explicitly set fields, the arm's included), naming the file;
    keys in ``given`` (the command line's ``--set``, which get their own note) left out. A
    burst with a ``request_rate`` ran silently as a burst."""
    given = set(given)
    keys = [k for k in FILE_NOTE_KEYS if k.split(".", 1)[1] in scenario.workload.model_fields_set
            and k not in given and not any(g.startswith(k + ".") for g in given)]   # --set key.sub: its own note
    if ("acceptance" in scenario.model_fields_set and "acceptance" not in given
            and not any(g.startswith("acceptance.") for g in given)):
        keys.append("acceptance")
    where = scenario.path or "<scenario>"
    return [n.replace("note: ", f"note: {where}: ", 1) for n in unread_overrides(scenario, keys)]


def window_reset_warnings(scenario: Any) -> list[str]:
    """One warning per ``speculative_num_draft_tokens`` the scenario file (or its arm) writes
    that the run replaces, naming the file, the key, the value written, the window run and
    why: a chain drafter without a tree (``speculative_eagle_topk`` 1 or unset) given
    ``speculative_num_steps`` verifies ``num_steps + 1`` positions, as sglang 0.5.23
    arg_groups/speculative_hook.py ``_handle_eagle_family`` resets the window with a logged
    warning (sim/server_args.py ``_chain_window_from_steps``). A file with steps 3 and 32
    draft tokens ran at window 4 silently. A window given with ``--set`` has its own note."""
    out = []
    for key, written in scenario._window_given.items():
        parts = key.split(".")
        srv = scenario.server.role_server(parts[2]) if parts[1] == "disaggregation" else scenario.server
        run = srv.speculative_num_draft_tokens
        if run == written:
            continue
        out.append(f"warning: {scenario.path or '<scenario>'}: {key} {written} runs as {run}: SGLang resets the "
                   f"verify window of a chain drafter without a tree (speculative_eagle_topk 1) to "
                   f"speculative_num_steps + 1 = {run} (arg_groups/speculative_hook.py _handle_eagle_family); "
                   f"give {run}, or speculative_eagle_topk > 1 for a tree of {written} tokens")
    return out


def fixed_uniform_notes(scenario: Any) -> list[str]:
    """A note per workload length of kind ``uniform`` whose ``range_ratio`` the file leaves
    out: the scenario's default 1.0 draws every length at ``value``, while bench_serving's
    ``--random-range-ratio`` defaults to 0.0 (lengths from 1 to ``value``; SGLang
    benchmark/datasets/common.py ``compute_random_lens``), so "uniform" read with
    bench_serving's meaning runs twice the tokens it would send (a new user's 50 prompts of
    "uniform 8000" were all 8000 tokens, unremarked)."""
    notes = []
    where = scenario.path or "<scenario>"
    for key in ("input_len", "output_len"):
        d = getattr(scenario.workload, key, None)
        if getattr(d, "kind", None) == "uniform" and "range_ratio" not in d.model_fields_set:
            notes.append(f"note: {where}: workload.{key} is kind uniform without range_ratio: every length is "
                         f"{d.value} (range_ratio 1.0); bench_serving's --random-range-ratio defaults to 0.0 "
                         f"(lengths from 1 to {d.value}): state range_ratio to draw a spread")
    return notes


UNREAD_CHECK_POINTS = 256
"""Most grid points whose scenarios :func:`unread_everywhere` loads (a larger grid is not checked)."""


def unread_everywhere(path: str | Path, points: Iterable[tuple[str, Mapping[str, Any]]], keys: Iterable[str]) -> list[str]:
    """The notes of :func:`unread_overrides` that hold at every (arm, overrides) point: a key
    that one arm or one grid point reads (an arm turning speculative decoding on, an axis
    setting sliding_window_size) gets none. Empty for more than UNREAD_CHECK_POINTS points."""
    points = list(points)
    if not points or len(points) > UNREAD_CHECK_POINTS:
        return []
    keys = list(keys)
    common: list[str] | None = None
    for arm, over in points:
        notes = unread_overrides(load_scenario_with_overrides(path, arm, over), keys)
        common = notes if common is None else [n for n in common if n in notes]
        if not common:
            return []
    return common or []
