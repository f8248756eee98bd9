"""Rules that differ between SGLang builds, as switches, and the presets that name them.

A scenario names a preset with ``server.sglang_semantics`` and may override single rules
with ``server.semantics_rules`` (e.g. ``{chunk_fill: exact}``). The Scheduler and the
prefill adder read the resolved :class:`SemanticsRules`; nothing else branches on a
version.

Presets:

- ``0.5.23``: the released sglang 0.5.23 source (managers/scheduler.py,
  schedule_policy.py, schedule_batch.py). The default.
- ``mi355x-dsv41``: the build behind the MI355X DeepSeek-V4.1 reference measurements
  (docs/reference-data.md). Under it a 256-request burst settles at 253 running and 3 waiting,
  as measured. That split needs the older chunk-fill rule: a later request that does not fit
  max_prefill_tokens ends the pass. Under 0.5.23's exact fill, most ramp passes end with a
  chunked request in flight, and the min-free-slots gate is skipped while one is. The SWA
  eviction cadence is the token cadence: the measured SWA peak (about 28 % of the 724K
  pool) is what it gives; the older forward cadence would peak at 42 %. For the rules the
  measurements do not settle, the preset takes the older code's behaviour.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError


class SemanticsRules(BaseModel):
    """One value per build-dependent rule (see each field's description for the source)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    chunk_fill: Literal["exact", "exact_tokens", "stop_at_max_prefill_tokens"] = "exact"
    """2nd and later requests of a prefill pass with chunking on: ``exact`` (0.5.23
    ``PrefillAdder._select_prefill_admission``: max_prefill_tokens is checked only with
    chunking off, so a later request is cut to fill the chunk, at a page boundary) or
    ``stop_at_max_prefill_tokens`` (older: such a request ends the pass).
    ``exact_tokens`` is ``exact`` as 0.5.23 runs on gfx95 GPUs (MI350/MI355X), where
    SGLANG_EXACT_CHUNK_FILL (on by default) makes the chunk and prompt budgets take the raw
    extend instead of the page-rounded one and cuts a request without a page floor
    (``_use_exact_chunk_fill``, ``_update_prefill_budget``); the same as ``exact`` with
    page_size 1."""
    retraction_order: Literal["length", "spec_batch_tail"] = "length"
    """``length`` (0.5.23 ``ScheduleBatch._get_decode_retraction_order``): least output
    first, ties the longest prompt, for every request. ``spec_batch_tail`` (older): spec
    requests from the back of the batch, other requests by length."""
    retraction_stop: Literal["next_step_fits", "decode_steps_headroom"] = "next_step_fits"
    """When retraction stops. ``next_step_fits`` (0.5.23 ``retract_decode``): at least one
    request goes, then it stops once the next step's KV fits. ``decode_steps_headroom``
    (older): it stops once 20 x bs tokens (plus spec headroom) are free."""
    ignore_eos_full_reservation: bool = True
    """Running requests sent with ignore_eos reserve their remaining output at ratio 1.0
    (0.5.23 ``PrefillAdder._get_running_request_total_token_offset``). Older code always
    used new_token_ratio."""
    filter_finished_before_delay: bool = True
    """Finished requests leave the running batch at the top of every pass, before the
    min-free-slots gate sees running_bs (0.5.23 ``get_next_batch_to_run``). Older code
    filtered them only when building a decode, so the gate counted them."""
    skip_finishing_decode: bool = True
    """Overlap scheduling: a request whose in-flight step will commit its last token is left
    out of the next decode (0.5.23 ``Scheduler._reqs_finishing_inflight``). Older code let
    it ride one more step."""
    spec_kv_reservation: Literal["topup", "window"] = "topup"
    """Speculative decoding's KV per running request (sim/kv_ledger.py). ``topup`` (0.5.23
    speculative/dflash_info_v2.py ``DFlashDraftInputV2.prepare_for_decode``,
    speculative/eagle_utils.py ``eagle_prepare_for_decode``): each pass tops the request up
    to committed + ``ServerArgs.spec_kv_reserve`` positions (page-aligned: 2 x
    num_draft_tokens for DSpark/DFlash, 2 x max(num_steps x topk, num_draft_tokens) for
    EAGLE), and the unused part is kept until the request leaves. ``window`` (older): a pass
    reserves one verify window per request and returns the rejected positions after it.
    The prefill budget adds no spec headroom under either."""
    waiting_prefix_refresh: bool = True
    """With the radix cache on, LRU eviction and a cache-agnostic order (fcfs, lof, random;
    lpm above 128 waiting), the first admission pass and then every 32nd bumps the LRU time
    of the cached prefixes of the first 128 waiting requests, the head of the queue last
    (0.5.23 managers/schedule_policy.py ``SchedulePolicy._touch_waiting_prefixes``, on by
    SGLANG_ENABLE_WAITING_PREFIX_REFRESH; mem_cache/common.py ``touch_waiting_prefix``). So
    under KV pressure the prefixes queued requests will reuse are evicted last. Off: only
    a request the admission loop reaches (``init_next_round_input``) touches its prefix."""
    processed_tokens_decode: Literal["stale_extend", "none"] = "stale_extend"
    """What a decode/verify forward adds to the prefill-token counter hrrn ages by
    (``Scheduler.processed_tokens``). ``stale_extend`` (0.5.23): ``run_batch`` adds
    ``batch.extend_num_tokens`` for every forward (managers/scheduler.py), and the running
    batch is the object of the prefill batch that found it empty (``running_batch =
    last_batch`` in ``get_next_batch_to_run``; ``merge_batch`` and ``prepare_for_decode``
    leave the field as it was, schedule_batch.py), so every decode forward adds that
    prefill's extend tokens again until the running batch empties (a mixed chunk's batch,
    which leaves the running batch empty, carries its extend rows plus one per decode row).
    ``none``: a decode forward adds nothing, what the comment there says is meant
    ("Decode / prebuilt batches contribute 0"). Not modelled: a chain drafter's draft extend
    after each verify sets the field on the batch it is handed
    (speculative/eagle_worker_common.py ``prepare_for_draft_extend``); whether that is the
    scheduler's running batch was not settled, so EAGLE runs carry the prefill's count too."""
    min_free_slots_explicit: Literal["wins", "capped_at_auto"] = "wins"
    """An explicit ``server.min_free_slots`` (SGLang ``--min-free-slots-delay``). ``wins``
    (0.5.23 managers/min_free_slots_delayer.py ``resolve_min_free_slots``): the threshold is
    min(explicit, max_running_requests), so a value above the automatic one holds
    admissions for more free slots. ``capped_at_auto`` (older): the threshold is
    min(explicit, automatic value min(4, max(2, (max_running_requests + 5) // 6))), so an
    explicit value can only lower the automatic threshold, and the delay stays off below 8
    running requests. Either way a threshold <= 1 turns the delay off. Unset, both take the
    automatic value for DFLASH and DSPARK and leave the delay off for other algorithms."""
    swa_eviction_cadence: Literal["tokens", "forward_interval"] = "tokens"
    """Hybrid sliding-window models: when a request's SWA slots behind the window are freed
    (sim/kv_ledger.py ``evict_swa``). ``tokens`` (0.5.23 schedule_batch.py
    ``_swa_eviction_trigger``): once swa_eviction_interval tokens slid out of the window.
    ``forward_interval`` (the older cadence, which 0.5.23 keeps for AMD's MegaMoE DSV4 path):
    every swa_eviction_interval-th forward, for every decoding request at once."""


PRESETS: dict[str, SemanticsRules] = {
    "0.5.23": SemanticsRules(),
    "mi355x-dsv41": SemanticsRules(
        chunk_fill="stop_at_max_prefill_tokens",
        retraction_order="spec_batch_tail",
        retraction_stop="decode_steps_headroom",
        ignore_eos_full_reservation=False,
        filter_finished_before_delay=False,
        skip_finishing_decode=False,
        spec_kv_reservation="window",
        waiting_prefix_refresh=False,
        processed_tokens_decode="none",   # no hrrn order in that build: the counter is read by none
        # the measured SWA peak (about 28 % of the 724K pool on the 256 x 4K burst) is the
        # token cadence's (28.7 % in the model); the forward cadence peaks at 42 %
        swa_eviction_cadence="tokens",
        min_free_slots_explicit="capped_at_auto",   # the reference cells set no explicit value
    ),
}
"""Named presets (``server.sglang_semantics``)."""
DEFAULT_PRESET = "0.5.23"


def resolve_rules(preset: str, overrides: dict[str, Any] | None = None) -> SemanticsRules:
    """The rules of ``preset`` with ``overrides`` applied.

    Raises:
        ValueError: an unknown preset, an unknown rule, or a value a rule does not allow.
            The message names the rule and what is allowed.
    """
    if preset not in PRESETS:
        raise ValueError(f"unknown preset; allowed: {', '.join(PRESETS)}")
    base = PRESETS[preset]
    if not overrides:
        return base
    try:
        return SemanticsRules.model_validate({**base.model_dump(), **overrides})
    except ValidationError as e:
        first = e.errors()[0]
        rule = ".".join(str(x) for x in first["loc"])
        if first["type"] == "extra_forbidden":
            raise ValueError(f"unknown rule {rule!r}; rules: {', '.join(SemanticsRules.model_fields)}") from None
        raise ValueError(f"rule {rule}: {first['msg']}") from None
