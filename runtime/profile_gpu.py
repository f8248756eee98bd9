"""GPU phases of ``specsched profile``: extend and draft injection, the verify/decode
grids, eager vs graph, and the cross-queue wait (see :mod:`runtime.profiler`'s docstring
for what each measures)."""

from __future__ import annotations

import statistics
from typing import Any

import torch
from specsched.runtime.profile_harness import MIN_REPEATS, Harness, _iqr_rel, extend_layout


class GpuPhases(Harness):
    """The device-time measurements of a profiling run."""

    def extend_phase(self) -> None:
        r = self.runner
        self.ext_s = [[0.0] * len(self.ext_cols) for _ in self.ext_x]
        self.inj_s = [[0.0] * len(self.ext_cols) for _ in self.ext_x]
        self.ext_layouts: list[str] = []
        self.ext_spread = 0.0
        for j, col in enumerate(self.ext_cols):
            for i, t in enumerate(self.ext_x):
                lens, p = extend_layout(t, col, self.prompt)
                n = len(lens)
                pre = [p] * n
                with self.dev.use("forward"):
                    rows = [r.add_request() for _ in range(n)]
                    if p:
                        r.pool.reserve(rows, pre)
                toks = torch.randint(0, self.cfg.vocab_size - 1, (t,), generator=self.gen)
                hold: dict[str, Any] = {}

                def ext(rows=rows, pre=pre, lens=lens, toks=toks, hold=hold) -> None:
                    hold["e"] = r.extend(rows, pre, lens, toks)

                def inj(rows=rows, pre=pre, lens=lens, hold=hold) -> None:
                    r.inject(r.prepare_inject(rows, pre, lens, sync=False), hold["e"].tokens)

                te = self._latency(f"extend {t} tok @ctx {col:g}", "extend", ext)
                ti = self._latency(f"inject {t} tok @ctx {col:g}", "inject", lambda inj=inj, ext=ext: (ext(), self.dev.synchronize("profile"), inj()))
                # the inject call above also re-ran the extend: time the extend alone and subtract
                ti = [max(0.0, a - statistics.median(te)) for a in ti]
                self.ext_s[i][j] = statistics.median(te)
                self.inj_s[i][j] = statistics.median(ti)
                self.ext_spread = max(self.ext_spread, _iqr_rel(te) if len(te) >= 4 else 0.0)
                self.ext_layouts.append(f"{t}: {n} x {lens[0]}{'' if len(set(lens)) == 1 else '/' + str(lens[-1])} @ prefix {p}")
                with self.dev.use("forward"):
                    for row in rows:
                        r.free_request(row)

    def grid_phase(self) -> None:
        with self.dev.use("forward"):
            self.grid_rows, self.grid_rows_t = self._new_rows(self.max_bs, self.contexts[-1] + self.W)
        self.grid: dict[str, list[list[float]]] = {}
        self.grid_spread = {}
        for kind in ("spec", "decode"):
            g = [[0.0] * len(self.contexts) for _ in self.bs]
            spread = 0.0
            for j, c in enumerate(self.contexts):
                for i, b in enumerate(self.bs):
                    with self.dev.use("forward"):
                        rows_t = self.dev.h2d(self.grid_rows[:b])
                    fn = self._step_fn(kind, self.grid_rows[:b], rows_t, c, graph=True)
                    ts = self._measure(f"{kind} bs {b} @ctx {c}", kind, fn)
                    g[i][j] = statistics.median(ts)
                    spread = max(spread, _iqr_rel(ts) if len(ts) >= 4 else 0.0)
            self.grid[kind], self.grid_spread[kind] = g, spread

    def eager_phase(self) -> None:
        self.eager_ratios: list[tuple[int, int, float, float]] = []
        for c in self.contexts:
            for b in self.eager_bs:
                with self.dev.use("forward"):
                    rows_t = self.dev.h2d(self.grid_rows[:b])
                fn = self._step_fn("spec", self.grid_rows[:b], rows_t, c, graph=False)
                te = statistics.median(self._measure(f"eager spec bs {b} @ctx {c}", "eager", fn))
                tg = self.grid["spec"][self.bs.index(b)][self.contexts.index(c)]
                self.eager_ratios.append((b, c, te, te / tg if tg > 0 else 1.0))
        self.eager_factor = max(1.0, float(statistics.median(r[3] for r in self.eager_ratios)))

    def cross_queue_phase(self) -> None:
        dev, c = self.dev, self.contexts[0]
        self.cq: list[tuple[int, float, float, float, float]] = []
        for b in self.cq_bs:
            with dev.use("forward"):
                rows_t = dev.h2d(self.grid_rows[:b])
            step = self._step_fn("spec", self.grid_rows[:b], rows_t, c, graph=True)

            def with_wait(step=step) -> None:
                # the engine's cross_queue_wait: StreamWait(prev, "schedule"), then at the
                # launch forward.wait_stream(schedule), then the graph replay
                ev = dev.record("forward")
                dev.stream_wait("schedule", ev)
                dev.wait_stream("forward", "schedule")
                step()

            half = max(MIN_REPEATS, -(-self.repeats // 2))
            # blocks A B A B: slow drift hits both variants alike; within a block every step
            # has the wait pending while the previous graph runs, as in the engine
            plain: list[float] = []
            waited: list[float] = []
            for k in range(2):
                plain += self._measure(f"spec bs {b} no cross-queue wait ({k + 1}/2)", "cross_queue", step, half)
                waited += self._measure(f"spec bs {b} with cross-queue wait ({k + 1}/2)", "cross_queue", with_wait, half)
            m0, m1 = statistics.median(plain), statistics.median(waited)
            self.cq.append((b, m0, m1, _iqr_rel(plain), _iqr_rel(waited)))
        self.cq_penalty = max(0.0, float(statistics.median(m1 - m0 for _, m0, m1, _, _ in self.cq)))
