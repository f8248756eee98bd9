"""Scenario configuration: SGLang server args, speculative decoding, acceptance, workload.

Keys follow SGLang's server arguments where the concept exists there
(python/sglang/srt/server_args.py). Everything is validated at load (pydantic, unknown keys
rejected); :func:`load_scenario` applies an arm's overrides before validating, so an arm
can change any key. Errors are :class:`sim.errors.ConfigError` naming file, key, value and
what is allowed.
"""

from __future__ import annotations

import copy
import difflib
import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from specsched.sim.bundled import resolve_scenario_path
from specsched.sim.errors import ConfigError

_STRICT = ConfigDict(extra="forbid", frozen=True)


class SyncMode(StrEnum):
    """Where the overlap loop waits for the previous forward's publish event (spec only).

    host_block: the host blocks (``publish_ready.synchronize()``; SGLang on HIP,
        managers/overlap_utils.py); the GPU idles while the host wakes and launches.
    stream_wait: the wait is queued on the forward stream (``Event.wait()`` there); the
        host never blocks (the MI355X fix, reference/mi355x-dspark-measurements.md).
    cross_queue_wait: the wait is queued from a separate schedule stream (SGLang on CUDA);
        on HIP this slows every graph dispatch by the profile's ``cross_queue_penalty_s``.
    """

    host_block = "host_block"
    stream_wait = "stream_wait"
    cross_queue_wait = "cross_queue_wait"


class AdmissionDelay(StrEnum):
    """Shipped admission-delay policies (module in :mod:`sim.admission`); a scenario may
    also name a class of its own, ``module.path:Class`` or ``file.py:Class``."""

    none = "none"
    min_free_slots = "min_free_slots"
    min_free_slots_waiting_aware = "min_free_slots_waiting_aware"
    demand_observed = "demand_observed"


class SpecAlgorithm(StrEnum):
    """Speculative decoding. ``dspark``/``dflash``: block drafter (one draft forward proposes
    a block, one target forward verifies it). ``eagle``/``mtp``: chain drafter
    (``speculative_num_steps`` serial draft forwards). ``none``: plain decode."""

    none = "none"
    dspark = "dspark"
    dflash = "dflash"
    eagle = "eagle"
    mtp = "mtp"

    @property
    def is_block(self) -> bool:
        return self in (SpecAlgorithm.dspark, SpecAlgorithm.dflash)

    @property
    def enabled(self) -> bool:
        return self is not SpecAlgorithm.none


class ServerArgs(BaseModel):
    """The SGLang server arguments the scheduler model reads (names as in server_args.py)."""

    model_config = _STRICT

    max_running_requests: int = Field(256, ge=1, description="Running-slot limit (requests).")
    max_total_num_tokens: int = Field(724_000, ge=1, description="KV pool capacity, tokens.")
    chunked_prefill_size: int = Field(16384, description="Chunk budget per prefill batch, tokens; <= 0 disables chunking.")
    max_prefill_tokens: int = Field(16384, ge=1, description="Prompt-token budget of one prefill batch.")
    page_size: int = Field(1, ge=1, description="KV page size, tokens.")
    schedule_policy: Literal["fcfs", "lof", "random"] = Field("fcfs", description="Waiting-queue order (managers/schedule_policy.py); prefix-aware policies fall back to fcfs without a radix cache.")
    schedule_conservativeness: float = Field(1.0, gt=0, description="Scales the initial new_token_ratio (0.7 x this).")
    enable_mixed_chunk: bool = Field(False, description="Decode requests ride in extend batches.")
    cuda_graph_max_bs: int = Field(256, ge=1, description="Largest batch replayed as a graph; larger runs eager.")
    speculative_algorithm: SpecAlgorithm = Field(SpecAlgorithm.none, description="SGLang's names, any case (EAGLE = eagle).")
    speculative_num_draft_tokens: int = Field(1, ge=1, le=64, description="Verify window per request (gamma + 1 positions).")
    speculative_num_steps: int | None = Field(None, ge=1, description="Chain drafter: serial draft forwards (defaults to window - 1).")
    admission_delay: str = Field("none", description="Admission-delay policy: a shipped name (AdmissionDelay) or a user class 'module.path:Class' / 'path/file.py:Class' (docs/policies.md).")
    admission_delay_params: dict[str, Any] = Field(default_factory=dict, description="Keyword parameters for the admission-delay class's from_server.")
    min_free_slots: int | None = Field(None, ge=1, description="Explicit delay threshold (None: automatic formula).")
    max_delay_passes: int | None = Field(None, ge=1, description="demand_observed: delayed passes before admitting anyway (None: target running).")
    sync_mode: SyncMode = Field(SyncMode.host_block)
    prefill_slot_expansion_sync: bool = Field(True, description="DSpark prefill's repeat_interleave without output_size blocks the host until the prefill forward drains.")
    enable_overlap_schedule: bool = Field(True, description="Build step N+1 while step N runs (SGLang default).")

    @field_validator("speculative_algorithm", mode="before")
    @classmethod
    def _any_case(cls, v: object) -> object:
        return v.lower() if isinstance(v, str) else v

    @field_validator("admission_delay", mode="before")
    @classmethod
    def _delay_name(cls, v: object) -> object:
        if isinstance(v, AdmissionDelay):
            return v.value
        if isinstance(v, str) and ":" not in v and v not in AdmissionDelay.__members__:
            raise ValueError(f"allowed: {', '.join(AdmissionDelay.__members__)}, or a class "
                             "'module.path:Class' / 'path/file.py:Class' (docs/policies.md)")
        return v

    @model_validator(mode="after")
    def _spec_window(self) -> ServerArgs:
        if self.speculative_algorithm.enabled and self.speculative_num_draft_tokens < 2:
            raise ValueError("speculative_num_draft_tokens must be >= 2 when speculative decoding is on")
        return self

    @property
    def spec_window(self) -> int:
        """Verify window (positions verified per request per cycle); 1 without spec."""
        return self.speculative_num_draft_tokens if self.speculative_algorithm.enabled else 1

    @property
    def num_draft_forwards(self) -> int:
        """Serial draft forwards per cycle: 1 for a block drafter, k for a chain drafter."""
        if not self.speculative_algorithm.enabled:
            return 0
        if self.speculative_algorithm.is_block:
            return 1
        return self.speculative_num_steps or self.speculative_num_draft_tokens - 1


class AcceptanceConfig(BaseModel):
    """Accept length distribution (tokens committed per request per verify cycle, 1..window).

    Either ``mean_accept_length`` (a constant per-position acceptance rate solved so that the
    mean matches), ``per_position_rates`` (P(draft i accepted | drafts < i accepted)), or
    ``histogram`` (P(accept length = k), k = 1..len). Each request draws its own level: a
    shift of the per-position logits by ``request_spread`` x N(0, 1) (real prompts differ).
    """

    model_config = _STRICT

    mean_accept_length: float | None = Field(None, ge=1.0)
    per_position_rates: list[Annotated[float, Field(ge=0.0, le=1.0)]] | None = None
    histogram: list[Annotated[float, Field(ge=0.0)]] | None = None
    request_spread: float = Field(0.0, ge=0.0, le=5.0, description="Std of the per-request logit shift.")

    @model_validator(mode="after")
    def _one_source(self) -> AcceptanceConfig:
        given = [x is not None for x in (self.mean_accept_length, self.per_position_rates, self.histogram)]
        if sum(given) > 1:
            raise ValueError("give only one of mean_accept_length, per_position_rates, histogram")
        if self.histogram is not None and sum(self.histogram) <= 0:
            raise ValueError("histogram must have a positive sum")
        return self


class LengthDist(BaseModel):
    """Token lengths: ``fixed`` (value), ``uniform`` (bench_serving random: uniform integer in
    [value x range_ratio, value]), or ``file`` (a histogram CSV with columns length,weight)."""

    model_config = _STRICT

    kind: Literal["fixed", "uniform", "file"] = "fixed"
    value: int | None = Field(None, ge=1)
    range_ratio: float = Field(1.0, gt=0.0, le=1.0)
    path: str | None = None

    @model_validator(mode="after")
    def _fields(self) -> LengthDist:
        if self.kind in ("fixed", "uniform") and self.value is None:
            raise ValueError(f"kind {self.kind!r} needs 'value'")
        if self.kind == "file" and not self.path:
            raise ValueError("kind 'file' needs 'path'")
        return self


class WorkloadConfig(BaseModel):
    """How requests reach the server (bench_serving semantics).

    burst: ``num_requests`` sent at t=0 (they reach the scheduler spaced by the profile's
        tokenizer/IPC ingest time). closed_loop: ``concurrency`` in flight, each finished
        request replaced at once, ``num_requests`` in all. poisson: exponential gaps at
        ``request_rate`` req/s, at most ``max_concurrency`` in flight; the client timer
        starts when the concurrency slot is acquired.
    """

    model_config = _STRICT

    kind: Literal["burst", "closed_loop", "poisson"]
    num_requests: int = Field(ge=1)
    concurrency: int | None = Field(None, ge=1)
    request_rate: float | None = Field(None, gt=0)
    max_concurrency: int | None = Field(None, ge=1)
    input_len: LengthDist
    output_len: LengthDist

    @model_validator(mode="after")
    def _kind_fields(self) -> WorkloadConfig:
        if self.kind == "closed_loop" and self.concurrency is None:
            raise ValueError("closed_loop needs 'concurrency'")
        if self.kind == "poisson" and self.request_rate is None:
            raise ValueError("poisson needs 'request_rate'")
        return self


class Scenario(BaseModel):
    """A workload plus server settings plus the profile that times it.

    ``arms`` maps an arm name to overrides (same keys, deep-merged) applied by
    :func:`load_scenario`; the resolved scenario has ``arm`` set and ``arms`` kept for reference.
    """

    model_config = _STRICT

    name: str
    description: str = ""
    source: str = ""
    assumptions: list[str] = []
    profile: str
    seed: int = Field(1, ge=0)
    server: ServerArgs = ServerArgs()
    acceptance: AcceptanceConfig = AcceptanceConfig()
    workload: WorkloadConfig
    arms: dict[str, dict[str, Any]] = {}
    arm: str = "base"
    reference: dict[str, dict[str, float]] = Field(default_factory=dict, description="Reference figures per arm, bench_serving keys.")
    path: str = ""

    @model_validator(mode="before")
    @classmethod
    def _policy_files_from_scenario_dir(cls, data: Any) -> Any:
        # a relative policy file (server.admission_delay: rules.py:MyDelay) sits next to the
        # scenario: store it relative to the working directory, as ``path`` is, so that
        # every later reader (engine, runtime, sweep workers) finds it without the scenario
        if not isinstance(data, dict) or not data.get("path") or not isinstance(data.get("server"), dict):
            return data
        spec = data["server"].get("admission_delay")
        if not isinstance(spec, str) or ":" not in spec:
            return data
        target, _, name = spec.rpartition(":")
        if not (target.endswith(".py") or "/" in target) or Path(target).is_absolute() or Path(target).is_file():
            return data
        near = Path(data["path"]).parent / target
        if near.is_file():
            data = {**data, "server": {**data["server"], "admission_delay": f"{near}:{name}"}}
        return data

    @model_validator(mode="after")
    def _policies_load(self) -> Scenario:
        # a user policy class must import and build now, not fail mid-run
        if ":" in self.server.admission_delay:
            from specsched.sim.admission import make_policy

            try:
                make_policy(self.server, self.seed, self.path or None)
            except ConfigError as e:  # "key value allowed": the value written without spaces
                value = e.value if isinstance(e.value, str) else json.dumps(e.value, separators=(",", ":"), default=str)
                raise ValueError(f"{e.key} {value} {e.allowed}") from None
        return self

    @model_validator(mode="after")
    def _acceptance_fits_window(self) -> Scenario:
        m = self.acceptance.mean_accept_length
        w = self.server.spec_window
        if m is not None and self.server.speculative_algorithm.enabled and m > w:
            raise ValueError(f"acceptance.mean_accept_length {m} exceeds the verify window "
                             f"speculative_num_draft_tokens = {w}")
        return self


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Return ``base`` with ``override`` merged in (nested dicts merged, other values replaced)."""
    out = copy.deepcopy(base)
    for k, v in override.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


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
    return type(model).model_validate(data)


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping; ConfigError if the file is missing, unparsable or not a mapping."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(str(p), "<file>", str(p), "file does not exist")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(str(p), "<file>", str(p), f"not valid YAML ({e})") from None
    if not isinstance(data, dict):
        raise ConfigError(str(p), "<top level>", type(data).__name__, "must be a mapping")
    return data


def validation_error(file: str, err: ValidationError, data: dict[str, Any]) -> ConfigError:
    """Turn pydantic's first error into a ConfigError with file, dotted key, value, allowed."""
    first = err.errors()[0]
    loc = tuple(first["loc"])
    key = ".".join(str(x) for x in loc) or "<top level>"
    value: Any = first.get("input", "<missing>")
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "missing":
        value = "<missing>"
    elif isinstance(value, dict):
        value = "{...}"
        head, _, rest = msg.partition(" ")
        if not loc and "." in head:  # a cross-field check names its key first
            key, value, msg = head, rest.split(" ", 1)[0], rest.split(" ", 1)[-1]
    if first["type"] == "extra_forbidden":
        allowed = _allowed_keys(loc[:-1])
        near = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        msg = "unknown key" + (f"; did you mean {near[0]!r}?" if near else "") + (f" allowed: {', '.join(allowed)}" if allowed else "")
    return ConfigError(file, key, value, msg)


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


def load_scenario(path: str | Path, arm: str = "base") -> Scenario:
    """Load and validate a scenario file with ``arm``'s overrides applied.

    Args:
        path: YAML file.
        arm: an arm in the file's ``arms`` (``base`` is always allowed and means no override).

    Returns:
        The validated, frozen :class:`Scenario`.

    Raises:
        ConfigError: missing/unknown/out-of-range key, or an unknown arm.
    """
    path = resolve_scenario_path(path)
    raw = read_yaml(path)
    arms = raw.get("arms") or {}
    if not isinstance(arms, dict):
        raise ConfigError(str(path), "arms", arms, "must be a mapping of arm name -> overrides")
    if arm != "base" and arm not in arms:
        raise ConfigError(str(path), "--arm", arm, f"allowed: {', '.join(['base', *[a for a in arms if a != 'base']])}")
    override = arms.get(arm) or {}
    if not isinstance(override, dict):
        raise ConfigError(str(path), f"arms.{arm}", override, "must be a mapping of overrides")
    for forbidden in ("arms", "arm", "name"):
        if forbidden in override:
            raise ConfigError(str(path), f"arms.{arm}.{forbidden}", override[forbidden], "an arm cannot override this key")
    merged = deep_merge(raw, override)
    merged["arm"] = arm
    merged["path"] = str(path)
    try:
        return Scenario.model_validate(merged)
    except ValidationError as e:
        raise validation_error(str(path), e, merged) from None


def arm_names(scenario_path: str | Path) -> list[str]:
    """Arms a scenario file defines, ``base`` first."""
    raw = read_yaml(resolve_scenario_path(scenario_path))
    names = list((raw.get("arms") or {}).keys())
    return ["base", *[a for a in names if a != "base"]]
