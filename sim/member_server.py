"""One server of a deployment whose servers share a clock: its own scheduler, host and forward stream.

A deployment of several servers (prefill-decode disaggregation, :mod:`sim.disaggregation`;
data-parallel replicas, :mod:`sim.dp_replicas`) is one :class:`sim.engine.SimEngine` that
owns the workload, the clients, the SimPy clock, the device-side token counts and the
records; each of its servers is a :class:`MemberServer`: a ``SimEngine`` built without
``SimEngine.__init__`` (no workload or clients of its own) whose host loop
(:meth:`sim.engine.SimEngine._host`) drives its own scheduler and forward stream on the
deployment's clock. Its launches are also summed into its own stream's step totals
(:class:`sim.disagg_records.StreamRecorder`), from which the deployment's step figures are
computed per server (one stream's busy time and verify window; interleaved rows of several
streams would sum them).
"""

from __future__ import annotations

from typing import Any

import simpy
from specsched.sim.config import ServerArgs
from specsched.sim.disagg_records import StreamRecorder
from specsched.sim.engine import SimEngine
from specsched.sim.records import Recorder


class MemberServer(SimEngine):
    """One server of ``deploy`` (a :class:`sim.engine.SimEngine` that holds the workload).

    Args:
        deploy: the deployment: its ``scenario``, ``seed``, ``profile``, ``acceptance``,
            ``env``, ``rec``, ``_finish_events``, ``all_done`` and ``_remaining`` are shared.
        server: this server's arguments (the scheduler, cost model and loop are built from them).
        index: its number among the deployment's servers of its kind (0-based).
        device: the deployment's device-side token counts (one per deployment: request ids
            are unique across its servers).
        fast_forward: collapse this server's decode stretches (identical results).
        writes_rows: True: its chunk, step and timeseries rows go to the deployment's
            records, as writer ``index + 1`` (:meth:`sim.records.Recorder.write_as`); False:
            to a recorder of its own (a prefill server: its first tokens are the router's).
    """

    shares_clock = True
    """Other hosts run on this clock: this host never assumes it is SimPy's only process."""

    def __init__(self, deploy: SimEngine, server: ServerArgs, index: int, device: Any, fast_forward: bool,
                 writes_rows: bool = True) -> None:
        # no SimEngine.__init__: the workload, clients and clock are the deployment's
        self.deploy = deploy
        self.index = index
        self.scenario, self.seed, self.profile = deploy.scenario, deploy.seed, deploy.profile
        self.acceptance = deploy.acceptance
        self.env = deploy.env
        self.rec = (StreamRecorder(deploy.rec, writer=index + 1) if writes_rows
                    else StreamRecorder(Recorder(deploy.rec.level)))
        self._finish_events = deploy._finish_events
        self.all_done = deploy.all_done
        self._finish_reacts = deploy._finish_reacts
        self._owes = deploy   # whose count of unfinished requests this server's finishes lower
        self._init_host(server, device, fast_forward)

    @property
    def _remaining(self) -> int:  # requests the deployment (or this server alone) still owes
        return self._owes._remaining

    @_remaining.setter
    def _remaining(self, n: int) -> None:
        self._owes._remaining = n

    def own_clock(self, owed: int) -> None:
        """Give this server a clock of its own: it is sent ``owed`` requests, all as open
        arrivals already in its lists (``_arrive_at``), and nothing it does reaches another
        server or a client (nobody waits for an open arrival's reply). Then it is SimPy's
        only process and moves its clock without SimPy as a lone server does
        (:meth:`sim.engine.SimEngine._host`): its decode stretches are not cut at other
        servers' events. Run it with :meth:`sim.engine.SimEngine._run_clock`; its rows
        still go to the deployment's records."""
        self.env = simpy.Environment()
        self.all_done = self.env.event()
        self.shares_clock = False
        self._owes = _Owed(owed)


class _Owed:
    """A count of unfinished requests owned by one server (:meth:`MemberServer.run_alone`)."""

    __slots__ = ("_remaining",)

    def __init__(self, n: int) -> None:
        self._remaining = n
