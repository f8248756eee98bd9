"""Prefill-decode disaggregation: the scenario's layout and the profile's KV-transfer cost.

SGLang 0.5.23 serves a model disaggregated by starting separate servers with
``--disaggregation-mode prefill`` and ``--disaggregation-mode decode`` (arg_groups/fields/
disagg.py ``Disagg.disaggregation_mode``) behind a router that sends every request to one
prefill and one decode server at once (the KV moves between them, tagged by the request's
``bootstrap_room``). Each server is a whole SGLang server with its own arguments: its own
chunking, KV pool, DP attention. A scenario names the layout under ``server.disaggregation``::

    server:
      ...                         # arguments both roles share
      disaggregation:
        prefill: {instances: 2, server: {dp_size: 8, chunked_prefill_size: 16384}}
        decode:  {instances: 2, server: {max_total_num_tokens: 3000000}}
        router_policy: round_robin

Each role's servers run the scenario's ``server`` arguments with that role's ``server``
overrides applied (and ``disaggregation_mode`` set to the role). The profile's
``kv_transfer`` section prices moving a prompt's KV (:class:`KVTransferCost`).

What runs is in :mod:`sim.disaggregation` (the deployment) and :mod:`sim.scheduler_disagg`
(the scheduler's prefill and decode modes).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from specsched.sim.sglang_launch_args import as_server_keys, drop_inert

_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

ROLES = ("prefill", "decode")
FORCED_ROLE_KEYS = ("disaggregation", "disaggregation_mode")
"""Server keys a role's overrides may not set: the layout sets them itself."""


class DisaggRole(BaseModel):
    """One role of the layout: how many servers run it and their argument overrides."""

    model_config = _STRICT

    instances: int = Field(1, ge=1, le=64, description="Servers of this role (each a whole SGLang server: with DP attention, dp_size ranks).")
    server: dict[str, Any] = Field(default_factory=dict, description="Server-argument overrides for this role (any server key but disaggregation and disaggregation_mode), applied over the scenario's server section.")

    @field_validator("server", mode="before")
    @classmethod
    def _leave_out_inert_launch_args(cls, v: Any) -> Any:
        """Inert SGLang launch arguments (sim/sglang_launch_args.py) are left out here too,
        as from the scenario's own server block: the saved scenario holds none. The
        unmodelled ones at a value the model runs are left out by the scenario's server block,
        which knows the server this one reaches (:func:`sim.sglang_launch_args.drop_inert`).
        SGLang's names of server keys (``attn_dp_size``) are read as those keys, so that the
        overrides name server keys only (:func:`sim.sglang_launch_args.as_server_keys`)."""
        return as_server_keys(drop_inert(v, inert_only=True))


class Disaggregation(BaseModel):
    """A prefill-decode disaggregated deployment (SGLang ``--disaggregation-mode``).

    The router (SGLang's model gateway in PD mode) picks one prefill and one decode server
    per request by ``router_policy`` and sends the request to both at once.
    """

    model_config = _STRICT

    prefill: DisaggRole = Field(DisaggRole(), description="The prefill servers (--disaggregation-mode prefill).")
    decode: DisaggRole = Field(DisaggRole(), description="The decode servers (--disaggregation-mode decode).")
    router_policy: Literal["round_robin", "random"] = Field(
        "round_robin", description="How the router picks a prefill and a decode server per request: round_robin (each role's counter) or random (seeded).")


class KVTransferCost(BaseModel):
    """What moving one request's KV from a prefill rank to a decode rank costs (profile
    ``kv_transfer``).

    A prefill rank sends each chunk's KV once its forward's results are processed
    (disaggregation/prefill.py ``process_batch_result_disagg_prefill`` -> ``send_kv_chunk``
    per chunk under overlap); the sends of one rank queue on its link (one NIC per GPU), so
    a chunk's KV arrives ``latency_s + tokens x bytes_per_token / link_bytes_per_s`` after
    the link is free. The decode side sees the request once its last chunk has arrived
    (decode.py ``DecodeTransferQueue.pop_transferred``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    bytes_per_token: float = Field(gt=0, le=1e9, description="KV bytes per prompt token sent (all layers, both caches a drafter keeps).")
    link_bytes_per_s: float = Field(gt=0, le=1e15, description="Bytes per second one prefill rank's link moves.")
    latency_s: float = Field(0.0, ge=0, le=60, description="Seconds a transfer adds regardless of size (handshake, completion poll).")

    def seconds(self, tokens: int) -> float:
        """Link seconds of ``tokens`` prompt tokens' KV (without the latency)."""
        return tokens * self.bytes_per_token / self.link_bytes_per_s
