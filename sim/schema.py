"""The scenario reference, generated from the pydantic models of :mod:`sim.config`.

Every key of a scenario file (dotted, nested sections included) with its type, default,
allowed values, unit and the SGLang server argument or bench_serving option it mirrors.
``specsched schema`` prints it; docs/scenario-reference.md is :func:`render_markdown`'s
output (a test regenerates it and compares), so a field added to the models appears here
without anyone editing the page.
"""

from __future__ import annotations

import enum
import types
import typing
from dataclasses import dataclass
from typing import Any

import annotated_types
from pydantic import BaseModel
from pydantic_core import PydanticUndefined
from specsched.sim.config import AdmissionDelay, Scenario
from specsched.sim.hardware import RESOLVED_KEYS as HARDWARE_DEFAULTS
from specsched.sim.server_args import ServerArgs
from specsched.sim.sglang_launch_args import FIELDS as LAUNCH_ARG_FIELDS

SGLANG_SERVER_ARGS = frozenset(k for k in ServerArgs.model_fields if k in LAUNCH_ARG_FIELDS)
"""server.* keys that are SGLang 0.5.23 server arguments of the same name
(sim.sglang_launch_args.FIELDS, read from its ``ServerArgs``); the renamed ones are in
:data:`MIRRORS`."""

MIRRORS: dict[str, str] = {
    "server.max_total_num_tokens": "--max-total-tokens",
    "server.cuda_graph_max_bs": "--cuda-graph-max-bs-decode (before 0.5.14: --cuda-graph-max-bs)",
    "server.cuda_graph_bs": "--cuda-graph-bs-decode (before 0.5.14: --cuda-graph-bs)",
    "server.enable_overlap_schedule": "the inverse of --disable-overlap-schedule",
    "workload.num_requests": "bench_serving --num-prompts (num_prompts is accepted here too)",
    "workload.request_rate": "bench_serving --request-rate (inf: all at t=0)",
    "workload.max_concurrency": "bench_serving --max-concurrency",
    "workload.steady_state_concurrency_ratio": "steady_state_serving --steady-state-concurrency-ratio",
    "workload.burstiness": "vLLM benchmark_serving --burstiness (SGLang 0.5.23 has none)",
    "workload.trace.time_scale": "bench_serving --slowdown-factor (trace replay)",
    "workload.input_len.value": "bench_serving --random-input-len",
    "workload.output_len.value": "bench_serving --random-output-len",
    "workload.input_len.range_ratio": "bench_serving --random-range-ratio",
    "workload.output_len.range_ratio": "bench_serving --random-range-ratio",
    "workload.input_len.kind": "bench_serving --dataset-name random = uniform",
    "workload.output_len.kind": "bench_serving --dataset-name random = uniform",
    "server.sync_mode": "none (SGLang: host block on HIP, queued wait on CUDA)",
    "acceptance.mean_accept_length": "bench_serving's reported accept length only with request_spread 0 (with a spread the reported figure comes out lower)",
}
"""Keys that mirror something other than a same-named SGLang server argument."""

UNITS: dict[str, str] = {
    "seed": "", "server.max_running_requests": "requests", "server.max_total_num_tokens": "tokens",
    "server.context_length": "tokens",
    "server.chunked_prefill_size": "tokens", "server.max_prefill_tokens": "tokens",
    "server.page_size": "tokens", "server.cuda_graph_max_bs": "requests",
    "server.speculative_num_draft_tokens": "tokens", "server.speculative_num_steps": "forwards",
    "server.min_free_slots": "requests", "server.max_delay_passes": "passes",
    "acceptance.mean_accept_length": "tokens per verify", "acceptance.request_spread": "logit std",
    "workload.num_requests": "requests", "workload.concurrency": "requests",
    "workload.request_rate": "requests/s", "workload.max_concurrency": "requests",
    "workload.input_len.value": "tokens", "workload.output_len.value": "tokens",
}
"""Units of numeric keys whose name does not say (a ``_s`` suffix means seconds)."""

CROSS_FIELD: dict[str, str] = {
    "server.admission_delay": ", ".join(m.value for m in AdmissionDelay) + ", or a class 'module.path:Class' / 'file.py:Class'",
    "server.chunked_prefill_size": "-1 (off) or 1 to 2**31 - 1; >= page_size",
    "server.page_size": "<= max_total_num_tokens",
    "server.speculative_num_draft_tokens": ">= 2 when speculative_algorithm is not none; with speculative_eagle_topk k > 1 and speculative_num_steps s, <= k + (s - 1) x k^2 + 1 (the draft candidates + the verified token); without one, outside 1-64 (0 included) or null it is ignored, as SGLang does",
    "server.speculative_num_steps": "chain drafters only (ignored without one, null too; required with speculative_eagle_topk or speculative_num_draft_tokens, as SGLang refuses either without it; a block drafter's, any integer, 0 and negatives included, is reset to 1 with a warning, as SGLang does); with speculative_eagle_topk 1 it sets the window to num_steps + 1; a tree may draft deeper than its speculative_num_draft_tokens - 1 nodes reach",
    "server.speculative_eagle_topk": "chain drafters; a block drafter's, any integer, is reset to 1 with a warning, as SGLang does; without a drafter, outside 1-64 (0 included) it is ignored",
    "acceptance.mean_accept_length": "<= speculative_num_draft_tokens; one of the three sources",
    "acceptance.per_position_rates": "at most speculative_num_draft_tokens - 1 entries",
    "acceptance.histogram": "sums to 1 (within 0.001); at most speculative_num_draft_tokens entries",
    "workload.request_rate": ".inf allowed; num_requests / request_rate <= 1e9 s",
    "workload.num_requests": "<= --max-requests (default 2000000)",
    "workload.input_len.value": "prompt + a page (+ verify slots under the window rule) < max_total_num_tokens",
    "workload.output_len.value": "prompt + output <= max_total_num_tokens",
}
"""Rules checked across fields (model validators, sim/limits.py), stated beside the key."""

HIDDEN = frozenset({"arm", "path"})
"""Fields the loader fills in (a file cannot set them)."""


@dataclass(frozen=True)
class Key:
    """One documented key: dotted name, type, default, allowed values, unit, SGLang name."""

    key: str
    type: str
    default: str
    allowed: str
    unit: str
    sglang: str
    description: str


def _plain(text: str) -> str:
    return text.replace("``", "")


def _type_name(ann: Any) -> str:
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        parts = [_type_name(a) for a in args if a is not type(None)]
        return " | ".join(parts) + (" | null" if type(None) in args else "")
    if origin is typing.Literal:
        return "string"
    if origin in (list, tuple):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return "mapping"
    if isinstance(ann, type):
        if issubclass(ann, enum.Enum):
            return "string"
        if issubclass(ann, BaseModel):
            return "section"
        return {int: "integer", float: "number", bool: "boolean", str: "string"}.get(ann, ann.__name__)
    return str(ann)


def _choices(ann: Any) -> list[str]:
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if origin is typing.Annotated:
        return _choices(args[0])
    if origin in (typing.Union, types.UnionType):
        return [c for a in args for c in _choices(a)]
    if origin is typing.Literal:
        return [str(a) for a in args]
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        return [m.value for m in ann]
    return []


_BOUNDS = ((annotated_types.Ge, ">="), (annotated_types.Gt, ">"), (annotated_types.Le, "<="),
           (annotated_types.Lt, "<"), (annotated_types.MinLen, "at least"), (annotated_types.MaxLen, "at most"))


def _constraints(metadata: list[Any]) -> list[str]:
    out = []
    for m in metadata:
        for cls, word in _BOUNDS:
            if isinstance(m, cls):
                v = getattr(m, m.__dataclass_fields__.__iter__().__next__()) if hasattr(m, '__dataclass_fields__') else m
                out.append(f"{word} {v} items" if "least" in word or "most" in word else f"{word} {v}")
    return out


def _item_constraints(ann: Any) -> list[str]:
    """Bounds on list items (``list[Annotated[float, Field(ge=0)]]``)."""
    for a in typing.get_args(ann):
        if typing.get_origin(a) in (list, tuple):
            inner = typing.get_args(a)[0]
            if typing.get_origin(inner) is typing.Annotated:
                meta = [m for x in typing.get_args(inner)[1:] for m in getattr(x, "metadata", [x])]
                return [f"each {c}" for c in _constraints(meta)]
    return []


def _default(field: Any) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    v = field.default_factory() if field.default_factory is not None else field.default
    if isinstance(v, enum.Enum):
        v = v.value
    if isinstance(v, BaseModel):
        return "(section)"
    if v is None:
        return "null"
    if isinstance(v, bool):
        return str(v).lower()
    return repr(v) if isinstance(v, str) else str(v)


def _unit(key: str) -> str:
    if key in UNITS:
        return UNITS[key]
    return "s" if key.endswith("_s") else ""


def _sglang(key: str) -> str:
    if key in MIRRORS:
        return MIRRORS[key]
    top, _, name = key.partition(".")
    if top == "server" and name in SGLANG_SERVER_ARGS:
        return "--" + name.replace("_", "-")
    return ""


def _model_of(ann: Any) -> type[BaseModel] | None:
    for a in (ann, *typing.get_args(ann)):
        if isinstance(a, type) and issubclass(a, BaseModel):
            return a
    return None


def keys(model: type[BaseModel] = Scenario, prefix: str = "") -> list[Key]:
    """Every key of ``model`` (nested sections flattened to dotted keys), in field order."""
    out: list[Key] = []
    for name, f in model.model_fields.items():
        if not prefix and name in HIDDEN:
            continue
        key = prefix + name
        ann = f.annotation
        choices = _choices(ann)
        allowed = ", ".join(choices) if choices else "; ".join(_constraints(f.metadata) + _item_constraints(ann))
        if key.endswith(".kind") and "uniform" in choices:
            allowed += " (random = uniform)"
        doc = " ".join((f.description or "").split())
        sub = _model_of(ann)
        if sub is not None and not choices:
            first = (sub.__doc__ or "").split("\n\n")[0]
            out.append(Key(key, "section", "", "", "", "", " ".join(_plain(f"{doc} {first}".strip()).split())))
            out.extend(keys(sub, key + "."))
            continue
        if key in CROSS_FIELD:
            allowed = "; ".join(x for x in (allowed, CROSS_FIELD[key]) if x)
        default = _default(f)
        if prefix == "server." and name in HARDWARE_DEFAULTS:  # sim/defaults.py fills it per GPU
            default = f"SGLang's for the profile's hardware (else {default})"
        out.append(Key(key, _type_name(ann), default, allowed, _unit(key), _sglang(key), doc))
    return out


HEADER = """# Scenario reference

Generated from the pydantic models in `sim/config.py` by `specsched schema --markdown`; do not
edit by hand (a test regenerates this page and compares). A scenario is a YAML mapping; every
key below can also be set per arm (`arms: {NAME: {...}}`) or on the command line
(`--set server.chunked_prefill_size=8192`). Values are strict: `true`/`false` are the only
booleans, integers are decimal (`0x10`, `yes`, `1.0` for an integer key are errors), numbers are
finite (except `workload.request_rate: .inf`). Unknown keys, repeated keys and a misspelt key
inside any arm fail at load with one line naming the file, key, value and what is allowed.

SGLang launch arguments pasted into `server` (or a disaggregated role's `server`), by kind
(sim/sglang_launch_args.py, read from SGLang 0.5.23's `ServerArgs`): 0.5.23's names of settings
that have a key here are read as that key (`max_total_tokens`: `max_total_num_tokens`;
`cuda_graph_max_bs_decode`, `cuda_graph_bs_decode`: `cuda_graph_max_bs`, `cuda_graph_bs`;
`disable_overlap_schedule`: the inverse of `enable_overlap_schedule`; `data_parallel_size`:
`dp_size`; with a `note:` line, `disable_cuda_graph: true`: both `disable_*_cuda_graph`, and
`attn_dp_size: N`: `enable_dp_attention: true, dp_size: N`) and refused beside that key at
another value; the ones that cannot change the prediction (logging, metrics, tracing, host and
ports, API keys, served model name, the model's path, seeds, watchdogs and timeouts, warmup,
...) are accepted and left out, named in one `note:` line of `run`, `compare` and `sweep`, and
absent from the results' `scenario.yaml`; their values are checked against the type `ServerArgs`
declares (`log_level: 7` is refused); the ones that live elsewhere here (`kv_cache_dtype`,
`dtype`: the profile's) are refused with a line saying where; the ones the model does not have
(`tp_size`: the profile's; `pp_size`, `enable_hierarchical_cache`,
`enable_two_batch_overlap`, `speculative_accept_threshold_single`) are accepted, with a note, at
the value the model runs (the profile's TP size; SGLang's default) and refused at any other, with
a line saying what it changes and what is allowed; any other SGLang argument, and one that lives
elsewhere, is accepted at 0.5.23's declared default (`ep_size: 1`, `radix_eviction_policy: lru`,
`sampling_backend: null`, `dtype: auto`: the same server as without it), left out with a `note:`
line, and refused at any other value, as one the model has no setting for, which may change
timing, or saying where it lives.

Speculative algorithms (SGLang's `--speculative-algorithm` names, any case): `dspark` and
`dflash` are block drafters (one draft forward proposes the window, one target forward verifies
it: the profile's `gpu.verify`). `eagle`, `eagle3` (EAGLE heads on the target's hidden states),
`nextn`/`mtp` (the model's multi-token-prediction layer; SGLang's NEXTN) and `standalone` (a
separate small draft model) are chain drafters: `speculative_num_steps` serial draft forwards
(the first inside `gpu.verify`, the others priced by `gpu.draft_step`) then one verify; a draft
tree (`speculative_eagle_topk` > 1) is priced by its width, and accepts at most
`speculative_num_steps` + 1 tokens per verify (its depth + the bonus token) whatever its node
count `speculative_num_draft_tokens`. `NGRAM` is refused: its draft is a
host-side n-gram lookup that no profile prices.

Workloads use bench_serving's semantics: `burst` sends every request at t=0, `closed_loop` keeps
`concurrency` in flight, `poisson` draws exponential gaps at `request_rate` (`.inf`: all at t=0,
as `--request-rate inf`) with at most `max_concurrency` in flight; `multi_turn` keeps
`concurrency` conversations in flight, each sending its turns one after another (turn k resends
turn k-1's prompt and output plus new text, after a think time; see `workload.multi_turn`);
lengths `uniform` are bench_serving's `random` dataset (`kind: random` is accepted).

"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown() -> str:
    """docs/scenario-reference.md: the header and one table row per key."""
    rows = ["| key | type | default | allowed | unit | SGLang / bench_serving | description |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for k in keys():
        if k.type == "section":
            rows.append(f"| **{k.key}** | section | | | | | {_cell(k.description)} |")
            continue
        rows.append("| " + " | ".join(_cell(x) for x in (f"`{k.key}`", k.type, f"`{k.default}`" if k.default else "",
                                                        k.allowed, k.unit, k.sglang, k.description)) + " |")
    return HEADER + "\n".join(rows) + "\n"


def render_text() -> str:
    """The same keys as plain text for a terminal (``specsched schema``)."""
    out = []
    for k in keys():
        if k.type == "section":
            out.append(f"\n{k.key}:  {k.description}")
            continue
        bits = [k.type, f"default {k.default}"]
        if k.allowed:
            bits.append(f"allowed: {k.allowed}")
        if k.unit:
            bits.append(f"unit: {k.unit}")
        if k.sglang:
            bits.append(f"mirrors {k.sglang}")
        out.append(f"  {k.key}  ({'; '.join(bits)})" + (f"\n      {k.description}" if k.description else ""))
    return "\n".join(out).lstrip("\n") + "\n"
