"""What a forward's results hand to clients: :class:`Delivery` and :class:`Deliveries`.

:meth:`sim.scheduler.Scheduler.process_result` returns one :class:`Deliveries` per forward
(SGLang ``process_batch_result_decode`` / ``stream_output``: the tokens each request got);
the executors record and stream them. Both are importable from :mod:`sim.scheduler`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Delivery:
    """Tokens that reach a client: ``n_tokens`` (>= 1) committed to request ``rid``;
    ``finished`` is True when they complete the request."""

    rid: int
    n_tokens: int
    finished: bool


class Deliveries:
    """The deliveries of one forward's results (one entry per request that got tokens, in
    the plan's order). Iterating yields :class:`Delivery` objects.

    Attributes:
        rid_list, n_list, fin_list: the same as Python lists (what the simulator's
            per-step recording reads: a step delivers to a handful of requests, where
            numpy's per-call overhead is most of the cost).
        rids: int array (n,), request ids.
        n_tokens: int array (n,), tokens delivered (>= 1).
        finished: bool array (n,), True where the tokens complete the request.
    """

    __slots__ = ("rid_list", "n_list", "fin_list")

    def __init__(self, rids: list[int], n_tokens: list[int], finished: list[bool]) -> None:
        self.rid_list, self.n_list, self.fin_list = rids, n_tokens, finished

    @property
    def rids(self) -> np.ndarray:
        return np.array(self.rid_list, dtype=np.int64)

    @property
    def n_tokens(self) -> np.ndarray:
        return np.array(self.n_list, dtype=np.int64)

    @property
    def finished(self) -> np.ndarray:
        return np.array(self.fin_list, dtype=bool)

    def __len__(self) -> int:
        return len(self.rid_list)

    def __getitem__(self, i: int) -> Delivery:
        return Delivery(self.rid_list[i], self.n_list[i], self.fin_list[i])

    def __iter__(self) -> Iterator[Delivery]:
        for r, n, f in zip(self.rid_list, self.n_list, self.fin_list, strict=True):
            yield Delivery(r, n, f)
