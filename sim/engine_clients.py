"""The simulated bench_serving clients: SimPy processes that send a workload's requests.

Burst (all at t=0), closed loop (``concurrency`` in flight, each finish replaced at once),
Poisson or trace arrivals (open, or capped by ``max_concurrency``: bench_serving's
semaphore; open arrivals need no process: the host takes them from a list of arrival
times) and multi-turn conversations (one concurrency slot per conversation, think times
between turns). Every request passes the tokenizer FIFO (the profile's
``ingest_per_request_s`` plus ``ingest_per_token_s`` per prompt token) before the
scheduler's next receive sees it.

:class:`Clients` is a mixin of :class:`sim.engine.SimEngine`: it holds no state of its own;
every attribute it reads or writes is the engine's, set in its ``__init__``.
"""

from __future__ import annotations

import math

import numpy as np
import simpy
from specsched.sim.request import Req
from specsched.sim.workload import Conversations, RequestSpec, arrival_times, scheduler_request


class Clients:
    """The client processes of :class:`sim.engine.SimEngine` (a mixin: no state of its own)."""

    def _send(self, spec: RequestSpec) -> simpy.Event:
        """A client sends a request now: its timer starts; it reaches the scheduler after
        the tokenizer FIFO (at once when that takes no time: the scheduler's next receive
        sees it, as the runtime's does). Returns the event fired when its last token is
        delivered."""
        now = self.env.now
        self.rec.request_sent(spec.index, spec.input_len, spec.output_len, now)
        done = self.env.event()
        self._finish_events[spec.index] = done
        self._tokenizer_free = max(now, self._tokenizer_free) + self._ingest_s(spec)
        if spec.tokenizer_reject:   # its error returns when the tokenizer is done with it
            if self._tokenizer_free <= now:
                self._retire_rejected(spec.index)
            else:
                ev = self.env.timeout(self._tokenizer_free - now)
                ev.callbacks.append(lambda _e, rid=spec.index: self._retire_rejected(rid))
            return done
        req = self._req(spec)
        if self._tokenizer_free <= now:
            self._arrive(req)
        else:
            ev = self.env.timeout(self._tokenizer_free - now)
            ev.callbacks.append(lambda _e, r=req: self._arrive(r))
        return done

    def _retire_rejected(self, rid: int) -> None:
        """Request ``rid`` ends now without reaching a scheduler: the tokenizer rejected it
        (``RequestSpec.tokenizer_reject``, sim/served.py ``is_tokenizer_rejection``: SGLang
        0.5.23 tokenizer_manager.py ``_validate_one_request`` raises before
        ``_send_one_request``), so no extend runs and no KV is held for it. The client gets
        its error at once (a closed-loop or max_concurrency slot frees); its row counts as
        failed (:meth:`sim.records.Recorder.mark_aborted`)."""
        ev = self._finish_events.pop(rid, None)
        self._remaining -= 1
        if ev is not None:
            ev.succeed()
        if self._remaining == 0 and not self.all_done.triggered:
            self.all_done.succeed()

    def _ingest_s(self, spec: RequestSpec) -> float:
        """Seconds ``spec`` holds the tokenizer FIFO: ``host.ingest_per_request_s`` plus
        ``host.ingest_per_token_s`` per prompt token. The HTTP server renders the chat
        template over the whole history and encodes it for every request on its one event
        loop (SGLang 0.5.23 entrypoints/openai/serving_chat.py
        ``_render_and_encode_chat_template``; plain prompts: managers/tokenizer_manager.py
        ``_tokenize_texts``), so a late turn of a long conversation waits for its whole
        history to be encoded, and the requests behind it wait too."""
        h = self.profile.host
        return h.ingest_per_request_s + h.ingest_per_token_s * spec.input_len

    def _req(self, spec: RequestSpec) -> Req:
        """The scheduler's request for a sent one (prompt tokens when prefixes are shared)."""
        return scheduler_request(spec, self.scenario.workload.ignore_eos)

    def _arrive(self, req: Req) -> None:
        self.inbox.append(req)
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    def _burst(self):
        for spec in self.specs:
            self._send(spec)
        yield self.env.timeout(0)

    def _closed_loop(self, queue: list[RequestSpec]):
        while queue:
            yield self._send(queue.pop(0))

    def _conversations(self, queue: list[tuple[int, list[RequestSpec]]], pauses: np.ndarray):
        """One multi-turn client (bench_serving's semaphore around
        ``wrap_multi_turn_request_func``): takes the next conversation, sends its turns one
        after another, each when the previous one's last token arrived plus a think time."""
        while queue:
            c, conv = queue.pop(0)
            for t, spec in enumerate(conv):
                if t:
                    pause = float(pauses[c, t - 1])
                    if pause > 0:
                        yield self.env.timeout(pause)
                yield self._send(spec)

    def _conversation_starts(self, convs: list[tuple[int, list[RequestSpec]]], pauses: np.ndarray,
                             times: np.ndarray, slots: simpy.Resource | None):
        """Conversations started at a request rate (bench_serving's ``get_request`` yields
        its multi-turn rows at exponential gaps; each becomes a task that waits for a
        ``--max-concurrency`` slot, then runs its turns)."""
        for item, t in zip(convs, times.tolist(), strict=True):
            if t > self.env.now:
                yield self.env.timeout(self._delay_to(t))
            self.env.process(self._started_conversation(item, pauses, slots))

    def _started_conversation(self, item: tuple[int, list[RequestSpec]], pauses: np.ndarray,
                              slots: simpy.Resource | None):
        if slots is None:
            yield from self._conversations([item], pauses)
            return
        with slots.request() as slot:
            yield slot
            yield from self._conversations([item], pauses)

    def _open_arrivals(self, times: np.ndarray) -> None:
        """Poisson (or trace) sends without a concurrency limit: nobody waits for a reply, so
        every request's arrival time is known now: its send time, then the tokenizer FIFO
        (the times :meth:`_send` gives). The host takes each one when its clock reaches it
        (:meth:`_take_arrivals`): no SimPy process or event per request, and the host never
        hands control to SimPy for an arrival. A request the tokenizer rejects
        (``RequestSpec.tokenizer_reject``) holds the FIFO but never reaches the scheduler:
        it has no arrival, and nobody waits for it."""
        h = self.profile.host
        per_req, per_tok = h.ingest_per_request_s, h.ingest_per_token_s
        free = self._tokenizer_free
        sent = times.tolist()
        arrive = []
        reaching = []
        for spec, t_send in zip(self.specs, sent, strict=True):
            # :meth:`_ingest_s` after max(t_send, free) (written out: builtin max parses its
            # arguments through a tuple on every call in 3.11)
            free = (free if free > t_send else t_send) + per_req + per_tok * spec.input_len
            if spec.tokenizer_reject:
                self._remaining -= 1
                continue
            arrive.append(t_send + (free - t_send))
            reaching.append(spec)
        self._tokenizer_free = free
        self._sent_at, self._arrive_at = sent, arrive
        self._arrive_specs = reaching
        if self._remaining == 0 and not self.all_done.triggered:
            self.all_done.succeed()
        # each client's timer starts at its send time, known now: the rows at once, in the
        # order the requests reach the scheduler (_take_arrivals takes them in index order)
        specs = self.specs
        self.rec.requests_sent([s.index for s in specs], [s.input_len for s in specs],
                               [s.output_len for s in specs], sent)
        self._next_arrival = arrive[0] if arrive else math.inf

    def _take_arrivals(self) -> None:
        """The open arrivals due by the host's clock reach the scheduler's inbox, in arrival
        order (each client's timer started at its send time). A request that arrives at the
        very time of a receive is taken by it."""
        t, i, arrive, specs = self._t, self._arrived, self._arrive_at, self._arrive_specs
        n = len(arrive)
        while i < n and arrive[i] <= t:
            self.inbox.append(self._req(specs[i]))   # its row is already recorded (_open_arrivals)
            i += 1
        self._arrived = i
        self._next_arrival = arrive[i] if i < n else math.inf

    def _poisson_limited(self, times: np.ndarray, slots: simpy.Resource):
        """Poisson sends with max_concurrency: at each send time a client waits for a slot."""
        for spec, t in zip(self.specs, times.tolist(), strict=True):
            if t > self.env.now:
                yield self.env.timeout(self._delay_to(t))
            self.env.process(self._limited_client(spec, slots))

    def _limited_client(self, spec: RequestSpec, slots: simpy.Resource):
        with slots.request() as slot:
            yield slot
            yield self._send(spec)

    def _start_clients(self) -> None:
        w = self.scenario.workload
        if w.kind == "burst":
            self.env.process(self._burst())
        elif w.kind == "closed_loop":
            queue = list(self.specs)
            for _ in range(min(w.concurrency, len(queue))):
                self.env.process(self._closed_loop(queue))
        elif w.kind == "multi_turn":
            # which turns form a conversation, their think times and the conversations' start
            # times: sim.workload.Conversations, which the runtime's clients read too
            conv = Conversations.of(w, self.specs, self.seed)
            convs = list(enumerate(conv.turns))
            if conv.starts is not None:
                slots = simpy.Resource(self.env, conv.slots) if conv.slots else None
                self.env.process(self._conversation_starts(convs, conv.pauses, conv.starts, slots))
                return
            for _ in range(min(conv.slots, len(convs))):
                self.env.process(self._conversations(convs, conv.pauses))
        else:
            times = arrival_times(w, self.specs, self.seed)
            # the offered arrivals' span: with max_concurrency a send waits for a slot, so the
            # requests' start times stretch with the server's pace (analysis.compare.rate_bound)
            self.offered_arrival_span_s = float(times.max() - times.min()) if len(times) else None
            if w.max_concurrency:
                self.env.process(self._poisson_limited(times, simpy.Resource(self.env, w.max_concurrency)))
            else:
                self._open_arrivals(times)
