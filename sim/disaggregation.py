"""Prefill-decode disaggregation: a deployment of prefill and decode servers behind a router.

What SGLang 0.5.23 does with ``--disaggregation-mode prefill|decode`` (layout:
:mod:`sim.disagg_config`; the scheduler's two modes: :mod:`sim.scheduler_disagg`):

1. **Router.** The router (SGLang's model gateway in PD mode) picks one prefill and one
   decode server per request (``server.disaggregation.router_policy``) and sends the request
   to both at once, tagged with a random ``bootstrap_room``. The client's stream comes from
   the decode server (bench_serving measures TTFT and ITL there); the prefill server's reply
   goes to the router only.
2. **Bootstrap.** The decode server reserves KV for the prompt first
   (``DecodePreallocQueue.pop_preallocated``); only then does the prefill server's bootstrap
   queue release the request to its waiting queue (``PrefillBootstrapQueue.pop_bootstrapped``,
   ``KVPoll.WaitingForInput``; the default ``early`` allocation policy). A decode server short
   of KV therefore holds prefills back.
3. **Prefill.** The prefill server runs only prefill batches, chunked as its own arguments say
   (with DP attention: to the rank ``bootstrap_room % dp_size``); the extend that completes
   a prompt samples the first token (``process_batch_result_disagg_prefill``).
4. **KV transfer.** Each chunk's KV is sent once its results are processed (``send_kv_chunk``,
   per chunk under overlap); the sends of one prefill rank queue on its link, priced by the
   profile's ``kv_transfer`` (:class:`sim.disagg_config.KVTransferCost`). The prefill server
   frees the prompt's KV (into its radix cache) when the transfer is done
   (``process_disagg_prefill_inflight_queue``); the decode server polls it
   (``DecodeTransferQueue.pop_transferred``).
5. **Decode.** The decode server streams the first token when the request joins its running
   batch (``process_batch_result_prebuilt``) and decodes it with no extend, never stopping
   for a prefill (``event_loop_overlap_disagg_decode``).

Every server is a :class:`sim.scheduler.Scheduler` (or a DP-attention group of them) in its
mode, driven by the one loop (:func:`sim.loop.scheduler_loop`) on its own host and forward
stream (:class:`_Server`); they share the SimPy clock, the clients and the device-side token
counts (the first token is committed by the prefill's extend, the rest by the decode
server's forwards). Cross-server signals (bootstrap, transfer done) are SimPy events at the
sending host's clock.

Results: requests, chunks (deliveries) and steps are the client's and the decode servers'
(``steps.parquet`` holds the decode servers' forwards); the step figures (busy fractions,
verify cycles/s, accept length) are per server stream, aggregated over a role's servers
(:func:`sim.disagg_records.deployment_step_summary`); the summary adds
``prefill_busy_fraction`` (mean over prefill servers), ``prefill_kv_peak_tokens``,
``decode_kv_peak_tokens`` and ``mean_kv_transfer_ms`` (last chunk's KV ready to the decode
side's receipt).

Not modelled: cache-aware routing, the ``prefill_complete`` allocation policy, a decode-side
radix cache, transfer failures and retries, the draft KV a block drafter's prompt injection
adds to the last chunk's send.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from specsched.sim import seed_streams
from specsched.sim.config import Scenario, ServerArgs
from specsched.sim.defaults import attention_tp_kv_scale, hardware_of
from specsched.sim.disagg_records import deployment_step_summary
from specsched.sim.engine import SimEngine
from specsched.sim.errors import ConfigError
from specsched.sim.member_server import MemberServer
from specsched.sim.ops import Launch
from specsched.sim.prefill_adder import KVRefusals
from specsched.sim.profile import Profile
from specsched.sim.request import Req
from specsched.sim.tables import column


class _Server(MemberServer):
    """One server of the deployment in its role (:class:`sim.member_server.MemberServer`):
    decode servers write the deployment's records, a prefill server its own steps."""

    def __init__(self, deploy: PDEngine, server: ServerArgs, role: str, index: int) -> None:
        self.role = role
        super().__init__(deploy, server, index, deploy.device_tokens, deploy.fast_forward_asked,
                         writes_rows=role == "decode")
        self._final_chunk: dict[int, tuple[int, int]] = {}   # prefill: rid -> (rank, tokens)

    def rank_of(self, rid: int) -> int:
        """The DP rank holding ``rid`` on this server (0 without DP attention)."""
        return self.sched.rank_of[rid] if self.server.enable_dp_attention else 0

    def _launch(self, op: Launch) -> tuple[Any, float]:
        handle, busy = super()._launch(op)
        if self.role == "prefill" and op.part == "main":
            self.deploy.chunks_launched(self, op.plan, handle.end)
        return handle, busy

    def _deliver(self, deliveries: Any):
        if self.role == "decode":
            return (yield from super()._deliver(deliveries))
        # a prefill server's first tokens go to the router: the last chunk's KV is sent now
        for rid, fin in zip(deliveries.rid_list, deliveries.fin_list, strict=True):
            if fin:
                self.deploy.last_chunk_sent(self, rid, self._t)
        return None


class PDEngine(SimEngine):
    """A prefill-decode disaggregated run (module docstring): ``SimEngine(scenario)`` builds
    one when ``scenario.server.disaggregation`` is set.

    Raises:
        ConfigError: the profile has no ``kv_transfer`` section.
    """

    def __init__(self, scenario: Scenario, profile: Profile | None = None, seed: int | None = None,
                 *, fast_forward: bool = True, records: str = "auto") -> None:
        self.fast_forward_asked = fast_forward
        super().__init__(scenario, profile, seed, fast_forward=fast_forward, records=records)
        layout = self.server.disaggregation
        if self.profile.kv_transfer is None:
            raise ConfigError(self.profile.path or self.profile.name, "kv_transfer", None,
                              "a disaggregated scenario (server.disaggregation) needs the profile's KV-transfer "
                              "cost: kv_transfer: {bytes_per_token, link_bytes_per_s, latency_s}")
        self.transfer = self.profile.kv_transfer
        self.device_tokens = self.device if not self.server.enable_dp_attention else self.device.device
        self.prefill = [_Server(self, self.server.role_server("prefill"), "prefill", i)
                        for i in range(layout.prefill.instances)]
        self.decode = [_Server(self, self.server.role_server("decode"), "decode", i)
                       for i in range(layout.decode.instances)]
        for d in self.decode:
            d.sched.handoff = lambda req, d=d: self._bootstrapped(d, req)
        self.policy = layout.router_policy
        self._rng = seed_streams.rng("disagg_router", self.seed)
        self._rr = {"prefill": 0, "decode": 0}
        self._pair: dict[int, tuple[_Server, _Server, Req, Req]] = {}
        self._rejected = {s.index for s in self.specs if s.abort is not None}   # sim/served.py trace_aborts
        self._link_free: dict[tuple[int, int], float] = {}
        self._kv_scale: dict[int, float] = {}   # id(prefill server) -> its GPU's KV bytes over the profile's
        self._ready_s: dict[int, float] = {}  # rid -> when its last chunk's send began
        self.transfer_s: list[float] = []
        self.sched = _Roles(self.prefill, self.decode)

    # ----------------------------------------------------------------- router
    def _pick(self, servers: list[_Server], role: str) -> _Server:
        if self.policy == "random":
            return servers[int(self._rng.integers(len(servers)))]
        i = self._rr[role]
        self._rr[role] = (i + 1) % len(servers)
        return servers[i]

    def _arrive(self, req: Req) -> None:
        """The router sends the request to a prefill and a decode server at once; the decode
        server's copy is the client's (it streams the tokens), the prefill server's asks for
        the first token only, with the client's priority and routing key (both servers get
        the same GenerateReqInput)."""
        # the router picks the pair before either server sees the request (the pair's
        # bootstrap address is in it), a request the servers reject too
        p, d = self._pick(self.prefill, "prefill"), self._pick(self.decode, "decode")
        if req.rid in self._rejected:
            # both servers reject it at their queue's door, before any KV, bootstrap or
            # forward (SGLang 0.5.23 disaggregation/prefill.py PrefillBootstrapQueue.add,
            # decode.py DecodePreallocQueue.add: is_unadmitted_reject ->
            # managers/scheduler.py retire_unadmitted_request, which streams the abort):
            # the client gets its error at once, its row counts as failed
            self._retire_rejected(req.rid)
            return
        preq = Req(req.rid, req.input_len, 1, tokens=req.tokens, ignore_eos=req.ignore_eos, priority=req.priority,
                   routing_key=req.routing_key)
        self._pair[req.rid] = (p, d, preq, req)
        d._arrive(req)

    def _open_arrivals(self, times: np.ndarray) -> None:
        """Open arrivals reach the router (not one host's inbox): a process routes each at its
        arrival time (after the tokenizer FIFO, :meth:`SimEngine._open_arrivals`' times)."""
        super()._open_arrivals(times)
        arrive = self._arrive_at
        self._sent_at, self._arrive_at, self._next_arrival = [], [], math.inf
        self.env.process(self._route_open(arrive))

    def _route_open(self, arrive: list[float]):
        for spec, t in zip(self.specs, arrive, strict=True):
            if t > self.env.now:
                yield self.env.timeout(self._delay_to(t))
            self._arrive(self._req(spec))   # its row is recorded (SimEngine._open_arrivals)

    def _at(self, t: float, fn) -> None:
        """Run ``fn`` at time ``t`` (>= now) on the shared clock."""
        if t <= self.env.now:
            fn()
        else:
            self.env.timeout(self._delay_to(t)).callbacks.append(lambda _e: fn())

    def _bootstrapped(self, d: _Server, req: Req) -> None:
        """The decode server reserved the request's KV (at its host's clock): the prefill
        server may start it."""
        p, _, preq, _ = self._pair[req.rid]
        self._at(d._t, lambda: p._arrive(preq))

    # ----------------------------------------------------------- KV transfer
    def _link_send(self, p: _Server, rank: int, start: float, tokens: int) -> float:
        """Queue ``tokens`` tokens' KV on the prefill rank's link from ``start``; returns when
        they are through.

        The profile's ``kv_transfer.bytes_per_token`` is one GPU's shard at the profile's TP
        size; a DP-attention rank's GPU holds the KV heads of its attention TP size (tp / dp),
        :func:`sim.defaults.attention_tp_kv_scale` times as many bytes, and sends them over its
        own link (disaggregation/mooncake/conn.py: each prefill TP rank sends its own heads)."""
        key = (id(p), rank)
        scale = self._kv_scale.get(id(p))
        if scale is None:
            hw = hardware_of(self.profile)
            scale = self._kv_scale[id(p)] = (attention_tp_kv_scale(hw, p.server.attn_dp_size)
                                             if hw is not None else 1.0)
        end = max(self._link_free.get(key, 0.0), start) + self.transfer.seconds(tokens) * scale
        self._link_free[key] = end
        return end

    def chunks_launched(self, p: _Server, plan: Any, end: float) -> None:
        """A prefill forward ending at ``end`` was launched: its chunks that do not complete a
        prompt are sent at its end; a completing chunk is sent with the first token
        (:meth:`last_chunk_sent`)."""
        parts = plan.live if hasattr(plan, "live") else [(0, plan)]
        for rank, part in parts:
            new = set(part.new_rids)
            for i in range(part.num_extend):
                rid, n = part.rids[i], part.extend_lens[i]
                if rid in new:
                    p._final_chunk[rid] = (rank, n)
                else:
                    self._link_send(p, rank, end, n)

    def last_chunk_sent(self, p: _Server, rid: int, t: float) -> None:
        """The prompt's last chunk and first token were processed at ``t`` on the prefill
        host: its KV goes out; when through, both servers see the transfer done."""
        rank, n = p._final_chunk.pop(rid)
        done = self._link_send(p, rank, t, n) + self.transfer.latency_s
        self.transfer_s.append(done - t)
        _, d, preq, dreq = self._pair[rid]

        def arrived() -> None:
            preq.kv_transferred = dreq.kv_transferred = True
            for s in (p, d):
                if s._wake is not None and not s._wake.triggered:
                    s._wake.succeed()
        self._at(done, arrived)

    # -------------------------------------------------------------------- run
    def _host(self):
        """Every server's host loop (the deployment itself has none)."""
        for s in self.prefill + self.decode:
            self.env.process(s._host())
        yield self.env.timeout(0)

    def _stall_detail(self) -> str:
        """Every server's non-empty queues (a :class:`sim.engine.Stalled` message's tail)."""
        parts = []
        for srv in self.prefill + self.decode:
            for i, r in enumerate(getattr(srv.sched, "ranks", [srv.sched])):
                queues = {"prealloc": list(r.prealloc_queue), "transfer": r.transfer_queue, "retracted": r.retracted_queue,
                          "waiting": list(r.waiting), "running": r.running, "inflight": r.inflight}
                held = ", ".join(f"{k} {[q.rid for q in v]}" for k, v in queues.items() if v)
                if held:
                    parts.append(f"{srv.role} {srv.index} rank {i}: {held}")
        return f" ({'; '.join(parts) or 'every queue empty'})"

    def cost_models(self) -> list[Any]:
        """Every server's cost model (each prices its own forwards; their range notes are
        the deployment's, written once: :meth:`SimEngine.range_notes`)."""
        return [s.cost for s in self.prefill + self.decode]

    def run(self):
        result = super().run()
        s = result.summary
        if s.get("completed"):
            start, finish = column(result.requests, "start_s", float), column(result.requests, "finish_s", float)
            deployment_step_summary([p.rec.stream for p in self.prefill], [d.rec.stream for d in self.decode],
                                    float(np.nanmin(start)), float(np.nanmax(finish)), s)
            s["host_blocked_s"] = float(sum(d.host_blocked_s for d in self.decode))
        else:
            s["prefill_busy_fraction"] = 0.0
        # each server collapses its own decode stretches (EngineStretch._stretch_applied
        # counts them on that server): the deployment's counts are their sums
        servers = self.prefill + self.decode
        result.extra.update(fast_forward_runs=sum(srv.ff_runs for srv in servers),
                            fast_forward_iterations=sum(srv.ff_iterations for srv in servers))
        s.update(prefill_kv_peak_tokens=max(srv.sched.kv.peak for srv in self.prefill),
                 decode_kv_peak_tokens=max(srv.sched.kv.peak for srv in self.decode),
                 mean_kv_transfer_ms=float(np.mean(self.transfer_s)) * 1e3 if self.transfer_s else 0.0)
        return result


class _Roles:
    """What the run's summary reads of "the scheduler", over the deployment's servers: the
    decode servers' requests (verify cycles and retractions happen there), the prefill
    servers' delayed passes, passes the KV pool stopped and cache hits, the decode servers' KV peak."""

    def __init__(self, prefill: list[_Server], decode: list[_Server]) -> None:
        self._p, self._d = [s.sched for s in prefill], [s.sched for s in decode]

    @property
    def reqs(self) -> dict[int, Req]:
        out: dict[int, Req] = {}
        for s in self._d:
            out.update(s.reqs)
        return out

    @property
    def num_retractions(self) -> int:
        return sum(s.num_retractions for s in self._d + self._p)

    @property
    def oom_aborted(self) -> dict[int, int]:
        return {rid: n for s in self._d + self._p for rid, n in s.oom_aborted.items()}

    @property
    def num_preemptions(self) -> int:
        return sum(s.num_preemptions for s in self._d + self._p)

    @property
    def num_delayed_passes(self) -> int:
        return sum(s.num_delayed_passes for s in self._p)

    @property
    def kv_refusals(self) -> KVRefusals:
        return KVRefusals.over(s.kv_refusals for s in self._p)

    @property
    def cache_hit_tokens(self) -> int:
        return sum(s.cache_hit_tokens for s in self._p)

    @property
    def prefix_cache_on(self) -> bool:
        return any(s.prefix_cache_on for s in self._p)

    @property
    def cache_input_tokens(self) -> int:
        return sum(s.cache_input_tokens for s in self._p)

    @property
    def kv(self):
        return max((s.kv for s in self._d), key=lambda k: k.peak)
