"""Provenance of ``specsched profile``: the environment stamp and, for every profile field,
the text saying how it was measured (method, shapes, repeats, medians, versions)."""

from __future__ import annotations

import torch
from specsched.runtime.host_reference import fast_level
from specsched.runtime.kv_cache import CTX_ALIGN
from specsched.runtime.model import draft_preset
from specsched.runtime.profile_fit import (
    LEAD_NEIGHBOURHOOD,
    PADDING_SIGNAL_TO_NOISE,
    TILE_RESIDUAL_SHARE,
    TILE_SIGNAL_TO_NOISE,
    issue_in_reference_works,
)
from specsched.runtime.profile_harness import HOST_PROMPT, SPLIT_TAIL, STALL_STEPS, WARMUP, _ms, _us
from specsched.runtime.runner import CTX_BUCKET_STEP

EXT_GPU = ("device time of the forward alone: a torch.cuda._sleep spin queued first keeps the GPU busy until the "
           "host has issued the whole call, then timing events around the call (its host launch time, which a busy "
           "loop overlaps with the previous forward, is host.launch_per_extend_token_s)")
EXT_CPU = "host time of the call (CPU: the forward runs inline)"


class Provenance:
    """Builds the ``provenance`` mapping of a finished run (attributes set by the phases and
    :class:`runtime.profile_fit.Fits`)."""

    @property
    def prefill_text(self) -> str:
        """How the extends and injections ran (piecewise graphs or eager), for provenance."""
        b = self.prefill_buckets
        if not b:
            return ("extends and injections eager (every kernel issued from Python: CPU, HIP or "
                    "disable_prefill_cuda_graph, as the engine runs them there)")
        hit = ", ".join(f"{t}: {self.runner.prefill_bucket(t) or 'eager'}" for t in self.ext_x)
        return (f"extends and injections piecewise as the engine runs them on CUDA (runtime/prefill_graph.py, SGLang "
                f"0.5.23's breakable prefill graphs): non-attention work replayed from graphs at {len(b)} token "
                f"buckets {b[0]}..{b[-1]}, attention eager between pieces; grid tokens -> bucket {hit}")

    def _idle_lead_text(self, env: str, *, table: bool) -> str:
        """Provenance of host.extend_idle_lead_s (``table=False``) or
        host.extend_idle_lead_by_tokens: method, layouts, medians and repeats."""
        pts = getattr(self, "idle_lead_pts", [])
        if not pts:
            return ("absent: not measured on this device (CPU: the forward runs inline, no issue/device "
                    f"split). [{env}]" if table else "0: not measured on this device (CPU: the forward runs inline, no issue/device "
                    f"split, so an idle stream adds nothing). [{env}]")
        how = ("runtime.profile_gpu.GpuPhases._idle_lead: ModelRunner.extend then prepare_inject(sync=False) + "
               "inject, as the loop launches an extend, at the extend grid's tokens at prefix 0 (layouts as "
               "gpu.extend); per repeat, device time with the GPU kept busy (torch.cuda._sleep spin queued first, "
               "timing events around the call) and then the wall time from an idle queue (synchronize, "
               "perf_counter, call, synchronize); lead = median idle wall - median device time, clamped >= 0, then "
               f"the median over the grid points within a factor of {LEAD_NEIGHBOURHOOD:.2f} in tokens (runtime.profile_fit.neighbourhood_median; "
               "the medians below are before it) "
               f"(runtime.profile_fit.idle_lead_fit), {self._reps_text('idle_lead')} after 3 warm-ups. Medians "
               "(tokens: idle / device -> lead): "
               + ", ".join(f"{t}: {_ms(w)} / {_ms(d)} -> {_ms(max(0.0, w - d))}" for t, w, d in pts))
        if table:
            return (f"{how}. Extend + injection together: the simulator charges this table to an extend launched "
                    f"with its injection right behind it (at its total tokens, linear between points, end values "
                    f"outside; sim.cost_model.CostModel.idle_lead_s). [{env}]")
        return f"median of host.extend_idle_lead_by_tokens (which the simulator reads instead). {how}. [{env}]"

    def _split_lead_text(self, env: str, *, inject: bool) -> str:
        """Provenance of host.extend_own_idle_lead_by_tokens (``inject=False``) or
        host.inject_unprepared_idle_lead_by_tokens: the events of the idle-lead sequence."""
        pts = getattr(self, "inject_unprepared_pts" if inject else "extend_own_pts", [])
        if not pts:
            return ("absent: not measured on this device (CPU: the forward runs inline, no issue/device split). "
                    f"[{env}]")
        which = ("the injection's span e1 -> e2 (its launch prepares it: prepare_inject(sync=False) + inject right "
                 "behind its extend, as runtime/engine.py _launch_call launches it without a slot-expansion block; "
                 "e1 is where the engine's inject launch records its start mark)" if inject else
                 "the extend's own span e0 -> e1 (e0 runs as soon as it is recorded on the idle stream, e1 when the "
                 "extend's last kernel ends: the launch call's start to the extend's end, as the engine's step marks "
                 "time it)")
        use = ("Recorded, not charged: charging it predicted worse (sim.cost_model.CostModel.idle_lead_s, "
               "docs/measurements/h200-v19.md)" if inject else
               "The simulator charges it to the extend of a DSpark prefill whose slot-expansion block launches the "
               "injection apart; elsewhere host.extend_idle_lead_by_tokens (sim.cost_model.CostModel.idle_lead_s)")
        return ("runtime.profile_gpu.GpuPhases._idle_lead: ModelRunner.extend then prepare_inject(sync=False) + inject "
                "at the extend grid's tokens at prefix 0 (layouts as gpu.extend), timing events e0 before the extend, "
                "e1 between the two launches, e2 after the inject; per repeat, with the GPU kept busy (torch.cuda._sleep "
                "spin queued first) the events give each forward's device time, and from an idle stream (synchronize, "
                f"sequence, synchronize) {which}; lead = median idle span - median kept-busy device, clamped >= 0, "
                f"then the median over the grid points within a factor of {LEAD_NEIGHBOURHOOD:.2f} in tokens "
                "(runtime.profile_fit.neighbourhood_median; the medians below are before it) "
                f"(runtime.profile_fit.span_lead_fit), {self._reps_text('idle_lead')} after {WARMUP} warm-ups. Medians "
                "(tokens: idle span / device -> lead): "
                + ", ".join(f"{t}: {_ms(sp)} / {_ms(d)} -> {_ms(max(0.0, sp - d))}" for t, sp, d in pts)
                + f". {use}. "
                f"[{env}]")

    def _inject_prepare_text(self, env: str) -> str:
        """Provenance of host.inject_prepare_s: the slot-expansion phase's preparation medians."""
        pts = getattr(self, "slot_pts", [])
        if not pts:
            return f"0: not measured (no extend points). [{env}]"
        return ("runtime.profile_gpu.GpuPhases._slot_expansion: host time (perf_counter) of "
                "ModelRunner.prepare_inject(sync=False) with the GPU kept busy, the preparation that "
                "host.launch_per_inject_s holds; median over the extend grid's tokens at prefix 0 "
                "(runtime.profile_fit.inject_prepare_fit); medians (tokens: preparation): "
                + ", ".join(f"{t}: {_ms(q)}" for t, _, q in pts)
                + ". After a slot-expansion block the loop's inject launch reuses the batch prepared inside "
                "the block (runtime/engine.py _host_block): the simulator issues it without this "
                f"(sim.cost_model.CostModel.issue). [{env}]")

    def _split_text(self, env: str) -> str:
        """``gpu.extend_split``'s provenance: what was timed, how, and each layout's time."""
        lead = (f", then behind {self.extend_lead_s * 1e3:g} ms of itself as the grid's rows" if self.dev.is_gpu
                and self.extend_lead_s > 0 else "")
        pts = "; ".join("+".join(f"{e}@{p}" for e, p in zip(lens, pre, strict=True)) + f" {_ms(sec)}"
                        for lens, pre, sec in self.split_s)
        return (f"unequal two-request extends (runtime/profile_gpu.py split_phase): per token count the last 1/"
                f"{SPLIT_TAIL} of one prompt at the first and the last prefix column's prefix, then the next prompt's "
                f"first {SPLIT_TAIL - 1}/{SPLIT_TAIL} at prefix 0, as chunked prefill fills a chunk, run by "
                "ModelRunner.extend as the loop runs a multi-request extend; timed as the "
                + (EXT_GPU if self.dev.is_gpu else EXT_CPU) + lead
                + f" ({self.spin_retries.get('extend_split', 0)} calls found the spin finished), "
                + (f"kept busy {self._reps_text('extend_split')}, behind the lead {self._reps_text('extend_split_lead')}"
                   if lead else self._reps_text('extend_split')) + f": {pts or 'none'}. An empirical term of the runtime's dense [B, Q, C] "
                "extend attention (mechanism unknown): sim.cost_model reads what a padded request adds beyond the "
                f"grid's dense reading. [{env}]")

    def _padding_text(self, env: str) -> str:
        """Provenance of gpu.attention_padding_cost: the padding probe's layouts, medians and
        per-kind estimates."""
        t = getattr(self, "padding_t", {})
        if not t:
            return (f"{self.padding_cost:g}: not measured (the padding probe needs two grid contexts): a padding "
                    f"position priced as a real one. [{env}]")
        big, small, mean = self.padding_lens
        per = ", ".join(f"{k} {v:.3f}" if v == v else f"{k} left out (noise)" for k, v in self.padding_per_kind.items())
        return (f"{self.padding_cost:.3f}: the padding probe (runtime/profile_gpu.py padding_phase): graph-replayed "
                f"decode and spec cycle at batch {self.tile_bs}, every request at {big:g} tokens (full), every request "
                f"at {small:g} (short), one at {big:g} and the rest at {small:g} (half, mean {mean:.1f}), KV reserved "
                "to each request's length plus the window so the rest of the width reads the padding slot; medians "
                "(full, short, half): " + "; ".join(f"{k} " + ", ".join(_ms(x) for x in v) for k, v in t.items())
                + f". Per kind (runtime.profile_fit.attention_padding_fit): {per}; the mean of the kinds kept, "
                f"clipped to [0, 1]; a kind is kept where its moved positions exceed {PADDING_SIGNAL_TO_NOISE:g} x "
                f"the noise. {self._reps_text('padding')}. [{env}]")

    def _slot_expansion_text(self, env: str) -> str:
        """Provenance of host.slot_expansion_s: method, per-token medians, repeats."""
        pts = getattr(self, "slot_pts", [])
        if not pts:
            return f"0: not measured (no extend points). [{env}]"
        return ("runtime.profile_gpu.GpuPhases._slot_expansion: the loop's DSpark prefill under "
                "prefill_slot_expansion_sync as runtime/engine.py runs it, from an idle stream: ModelRunner.extend, a "
                "timing event, prepare_inject(sync=True) (repeat_interleave without output_size: the first waits for "
                "the extend to drain, the second is another device round trip), a timing event, inject; the events' "
                "difference is the GPU idle gap between the extend's end and the injection's start. Then, GPU kept "
                "busy, the host time of prepare_inject(sync=False) (the preparation, host.inject_prepare_s: the "
                "loop prepares inside the block and its inject launch reuses the batch). "
                "Value: median over the extend grid's tokens at prefix 0 of gap - host.sync_wakeup_s, "
                f"clamped >= 0 (runtime.profile_fit.slot_expansion_fit), {self._reps_text('slot_expansion')} after "
                f"{WARMUP} warm-ups; medians (tokens: gap / preparation): "
                + ", ".join(f"{t}: {_ms(g)} / {_ms(q)}" for t, g, q in pts)
                + ". The simulator holds the host this long after a slot-expansion block, the GPU idle "
                "(sim.engine; docs/measurements/h200-v15.md \"burst66 TTFT\": 0.8-1.8 ms idle there in the "
                f"loops of rounds 13 and 15). [{env}]")

    def _eager_refs_text(self) -> str:
        """The eager points' reference work and the issue in reference works
        (runtime.profile_fit.issue_in_reference_works) at the fast level, for provenance; empty
        for a run that did not sample them."""
        refs = getattr(self, "eager_issue_refs", [])
        if not refs or len(refs) != len(self.eager_issue):
            return ""
        text = ("; reference work at each point (sampled right before and after it, median): "
                + ", ".join(f"bs {b} ctx {c}: {r * 1e3:.3f}" for (b, c, _), r in zip(self.eager_issue, refs, strict=True))
                + " ms")
        works = issue_in_reference_works([h for _, _, h in self.eager_issue], refs)
        if works is None:
            return text
        fast = fast_level(self.speed.seconds)
        return (text + f"; per point issue over its reference work, median {works:.1f} works: {_ms(works * fast)} at "
                f"the fast level ({fast * 1e3:.3f} ms; a cross-check, not used)")

    def _lead_text(self, loaded: list[list[float]], spin: list[list[float]], group: str) -> str:
        """The provenance sentence of a lead-timed grid (runtime/profile_gpu.py
        ``_behind_same``): what it was timed behind and each point's ratio to the idle-spin
        time; empty when the grid was timed behind the spin alone."""
        if self.extend_lead_s <= 0 or not self.reps.get(f"{group}_lead"):
            return ""
        ratios = [f"{t:g} tok @ctx {c:g} x{lo / sp:.3f}" for i, t in enumerate(self.ext_x)
                  for j, c in enumerate(self.ext_cols)
                  if (lo := loaded[i][j]) > 0 and (sp := spin[i][j]) > 0]
        dry = [x for x in self.lead_dry if x.startswith(group)]
        return (f" Timed behind {self.extend_lead_s * 1e3:g} ms of the same call back to back (a busy loop's "
                f"GPU state, docs/measurements/h200-v32.md; runtime/profile_gpu.py _behind_same), "
                f"{self._reps_text(group + '_lead')}; against the same call behind an idle spin: {', '.join(ratios)}"
                + (f"; the host could not keep ahead of these, timed behind the spin alone: {', '.join(dry)}" if dry else "")
                + ".")

    def _after_step_text(self, env: str) -> str:
        """``gpu.extend_after_step``'s provenance: the leads, each point's ratio, and why none
        where the table is absent."""
        ratios = self.after_step_ratios()
        if not ratios:
            why = ("no extend lead (--extend-lead-ms 0)" if self.extend_lead_s <= 0 else
                   "a CPU profile (the forward runs inline: no clock state to carry)" if not self.dev.is_gpu else
                   "the host could not keep ahead of the GPU behind the leads, or of the extend behind itself")
            return f"absent: {why}; every extend is priced by gpu.extend alone. [{env}]"
        pts = "; ".join(f"after {kind}: " + ", ".join(f"{t} tok x{r:.3f}" for t, r in p)
                        for kind, p in ratios.items())
        dry = [x for x in self.lead_dry if x.startswith("after-")]
        col = self.ext_cols[0]
        dry += [f"extend {t} tok (its grid point timed behind the spin)" for t in self.after_tokens
                if f"extend {t} tok @ctx {col:g}" in self.lead_dry]
        return (f"ModelRunner.extend of the gpu.extend points of the first column (their layouts, the --extend-tokens "
                f"counts) timed right "
                f"behind {self.extend_lead_s * 1e3:g} ms of {self.after_lead} (runtime/profile_gpu.py "
                f"extend_after_phase, _behind), {self._reps_text('extend_after')}; each as a ratio to the gpu.extend "
                f"point (timed behind the same extend): {pts}"
                + (f"; left out (the host could not keep ahead of the GPU): {', '.join(dry)}" if dry else "")
                + f". The simulator multiplies a pure extend after a decode step or verify cycle by it. [{env}]")

    def _loop_calls_text(self, calls: list[tuple[float, ...]], block: str, queued: str) -> str:
        """The stall loops' launch calls per batch size (wall / thread CPU medians of the
        ``block`` and ``queued`` loop), as runtime.host_reference.launch_call_reference reads
        them back."""
        return ("; the launch call in these loops (wall / thread CPU, medians; runtime.host_probe, as "
                "benchmarks/gpu_validate.py reports the engine's): "
                + ", ".join(f"bs {b} {block} {_us(c[0])} / {_us(c[1])}, {queued} {_us(c[2])} / {_us(c[3])}"
                            for b, c in zip(self.launch_bs, calls, strict=True)))

    def provenance(self) -> tuple[dict[str, str], str]:
        """``(provenance, model description)``; call after :meth:`Fits.sections`."""
        dev, W, env = self.dev, self.W, self.env_line
        cfg, dcfg = self.cfg, self.dcfg
        icpt0, inj_slope = self._inject_slope(0)
        inj_long = self._inject_slope(len(self.ext_cols) - 1)[1]
        model = (f"target {self.preset} ({cfg.num_layers} layers, hidden {cfg.hidden_size}, {cfg.num_heads}/"
                 f"{cfg.num_kv_heads} heads, MLP {cfg.intermediate_size}, vocab {cfg.vocab_size}), drafter "
                 f"{draft_preset(self.preset)} ({dcfg.num_layers} layers), {str(dev.dtype).removeprefix('torch.')}, "
                 f"random weights (runtime.model.LlamaProxy), DSpark-style block drafter in gpu.verify, window {W}; "
                 "as a chain drafter, its serial step in gpu.draft_step and its cycle without them in gpu.verify_chain")
        timing = ("CUDA/HIP timing events around each call on the forward stream" if dev.is_gpu
                  else "host perf_counter stamps around each call (CPU)")

        def grid_text(kind: str, what: str) -> str:
            g = self.grid[kind]
            pts = "; ".join(f"ctx {c}: " + ", ".join(f"bs {b} {_ms(g[i][j])}" for i, b in enumerate(self.bs))
                            for j, c in enumerate(self.contexts))
            return (f"{what}, timed by runtime.microbench.time_calls ({timing}), {self._reps_text(kind)} after "
                    f"{WARMUP} warm-ups (the first captures the graph). Batch sizes {self.bs} (graph buckets exactly "
                    f"there, no padding) x committed context {self.contexts}; committed lengths put back to the "
                    f"context before every step (one index_fill_ kernel, included; as runtime.microbench.bench). "
                    f"Attention width round_up(context + {W if kind in ('spec', 'chain_verify') or (kind == 'draft_step' and W >= 3) else 1}, 64) (the engine pads to "
                    f"multiples of {CTX_BUCKET_STEP}; docs/decode-width.md). Points above cuda_graph_max_bs={self.graph_max_bs} were "
                    f"graph-replayed too: the simulator applies gpu.eager_factor there. Largest (p75-p25)/median "
                    f"{self.grid_spread[kind] * 100:.1f} %. Values: {pts}. [{env}]")

        prov = {
            "model": model,
            "environment": "; ".join(f"{k}: {v}" for k, v in self.env.items()),
            "method": (f"runtime/profiler.py profile_device(preset={self.preset!r}, spec_window={W}, max_bs="
                       f"{self.max_bs}, contexts={self.contexts}, extend_tokens={self.ext_x}, prompt_len={self.prompt}, "
                       f"cuda_graph_max_bs={self.graph_max_bs}, repeats={self.repeats}, budget_s={self.budget.total:g}, "
                       f"cuda_graph_max_bs_prefill={self.prefill_buckets[-1] if self.prefill_buckets else 0}); "
                       f"{self.prefill_text}; "
                       f"total {self.total_s:.1f} s; KV buffers {self.kv_bytes / 2**30:.2f} GiB"
                       + (f"; peak GPU memory allocated {torch.cuda.max_memory_allocated(dev.torch_device) / 2**30:.2f} GiB, "
                          f"reserved {torch.cuda.max_memory_reserved(dev.torch_device) / 2**30:.2f} GiB" if dev.is_gpu else "")
                       + (f"; repeats trimmed by the time budget: {', '.join(self.budget.trimmed)}" if self.budget.trimmed else "")
                       + (f"; never queued whole behind a busy GPU, so timed with the issue gaps in the device time "
                          f"(runtime/profile_gpu.py _issued_as_run): {', '.join(self.queue_full)}" if self.queue_full else "")),
            "gpu.extend": (
                f"specsched.runtime.model.ModelRunner.extend (target forward, greedy first token; {self.prefill_text}) by total extend tokens "
                f"x = {self.ext_x}, timed as the " + (EXT_GPU if dev.is_gpu else EXT_CPU) + f" ({self.spin_retries.get('extend', 0) + self.spin_retries.get('inject', 0)} calls found the spin finished and were repeated with a longer one), {self._reps_text('extend')} "
                f"after {WARMUP} warm-ups. Each batch: ceil(x / {self.prompt}) requests of near-equal length, all at one "
                f"prefix (KV reserved, values zero). context_len is the context sim.cost_model.CostModel.gpu queries "
                f"for an extend: mean prefix + half the per-request extend length; columns {self.ext_cols} = prefix "
                f"{self.ext_prefixes} + {self.prompt / 2:g}; each row's prefix is chosen to sit on its column "
                f"(tokens: requests x length @ prefix): {'; '.join(self.ext_layouts)}. Input ids from the host as "
                f"in the engine. Largest (p75-p25)/median {self.ext_spread * 100:.1f} %.{self._lead_text(self.ext_s, self.ext_spin_s, 'extend')} [{env}]"),
            "gpu.draft_inject": (
                f"device time (as gpu.extend: GPU kept busy while the host issues the call) of "
                f"ModelRunner.prepare_inject(sync=False) + ModelRunner.inject after the extend of the same layout, "
                f"by tokens {self.ext_x} and the extend grid's context columns; "
                f"{self._reps_text('inject')}. The simulator uses this grid instead of the per-token slope.{self._lead_text(self.inj_s, self.inj_spin_s, 'inject')} [{env}]"),
            "gpu.draft_inject_per_token_s": (
                f"slope of np.polyfit(tokens, seconds, 1) of runtime.model.ModelRunner.prepare_inject(sync=False) + "
                f"ModelRunner.inject (drafter {draft_preset(self.preset)} over the prompt tokens) on the prefix-0 "
                f"layouts of gpu.extend, tokens {self.ext_x}: {', '.join(_ms(r[0]) for r in self.inj_s)}; "
                f"intercept {_ms(icpt0)} not represented (the simulator's inject cost goes through the origin); "
                f"slope at the long-prefix column: {_us(inj_long)}/token. {self._reps_text('inject')}, {timing}. [{env}]"),
            "gpu.verify": grid_text("spec", (
                f"one runtime.model.ModelRunner.spec_cycle(rows, forced_accept=[{self.forced}] * bs, graph=True): "
                f"drafter forward over 2 x {W} positions per request + target verify of {W} + accept/commit"))
                + (" PLUS, per batch size, the excess of a verify as the engine issues it (queued loop of "
                   f"{STALL_STEPS} launches with lengths growing, so each also reserves the next window's KV "
                   "slots, draws accepts, records events and copies results) over the bare replay at the loop's own "
                   f"attention width, {self.launch_bucket} (the line through the grid's last two columns; "
                   "runtime.profile_fit.verify_excess_fit), interpolated over batch size: "
                   + ", ".join(f"bs {b} +{_us(e)}" for b, e in zip(self.launch_bs, self.verify_excess, strict=True))),
            "gpu.decode": grid_text("decode", "one runtime.model.ModelRunner.decode(rows, graph=True)"),
            "gpu.draft_step": grid_text("draft_step", (
                (f"median over alternated calls of (spec_cycle(rows, forced, graph=True, as_chain=True) - the next "
                 f"call, the same with draft_steps=False) / {W - 2}: "
                 f"what the {W - 2} serial one-token steps of the drafter {draft_preset(self.preset)} add to a chain "
                 f"cycle at window {W}, per step (the per-call work around a forward, which a cycle pays once, "
                 "cancels; a step called alone would charge it per step)"
                 if W >= 3 and not getattr(self, "draft_step_alone", False) else
                 f"one runtime.model.ModelRunner.draft_step(rows, graph=True): the drafter {draft_preset(self.preset)} "
                 "over one token per request at its committed length " + (
                     "(window 2 has no serial step to difference)" if W < 3 else
                     f"({self._reps_text('draft_step_alone')}): the chain cycle with its {W - 2} serial steps less the "
                     "same without them was not above 0 at any point (their noise above the step), so each point is "
                     "the step called alone, which charges the per-call work around a forward once per step: high"))
                + " (x = batch = tokens), the serial step a chain "
                "drafter (eagle/mtp, topk 1) runs speculative_num_steps - 1 times per cycle, on top of "
                + ("gpu.verify_chain (the chain cycle without them)" if "chain_verify" in self.grid else
                   f"gpu.verify, which holds the block drafter's forward over 2 x {W} positions per request where a "
                   f"chain drafter's draft extend runs over {W}"))),
            "gpu.draft_step_tokens_per_request": ("1: each row of gpu.draft_step is one request's one token "
                                                  f"(runtime/spec_cycle.py _draft_step_dev). [{env}]"),
            "gpu.eager_factor": (
                f"median over (bs, context) of spec_cycle(graph=False) / spec_cycle(graph=True) (the gpu.verify "
                f"point), at batch sizes {self.eager_bs} (the largest grid sizes{' above cuda_graph_max_bs' if self.eager_bs[0] > self.graph_max_bs else ''}) x "
                f"contexts {self.contexts}: "
                + ", ".join(f"bs {b} ctx {c}: eager {_ms(te)} = {r:.3f}x" for b, c, te, r in self.eager_ratios)
                + f"; clamped to >= 1. The simulator applies it above cuda_graph_max_bs={self.graph_max_bs}; eager "
                f"launch overhead shrinks relative to GPU time as the batch grows. {self._reps_text('eager')}; eager "
                f"times are device time alone (a torch.cuda._sleep spin queued first keeps the GPU busy until the "
                f"host has issued the whole call; its host issue time is gpu.eager_host_issue_s)"
                + (f", but for {sum(q.startswith('eager') for q in self.queue_full)} points never queued whole "
                   f"(timed with the issue gaps in: see method)" if any(q.startswith("eager") for q in self.queue_full) else "")
                + f"; {self.spin_retries.get('eager', 0)} calls found the spin finished and were repeated. [{env}]"),
            "gpu.verify_window": f"{W}: the window every spec cycle of gpu.verify was timed at (spec_window={W}). [{env}]",
            "gpu.attention_width": ("padded_max: the runtime's decode/verify attention is dense over one width for "
                                    "the batch (runtime/layers.py AttnBatch [B, C], C the graph context bucket covering "
                                    "the longest request, runtime/spec_cycle.py _prepare), over every padded graph row; "
                                    f"the grids were timed at uniform contexts. Layout of the code, not a fit. [{env}]"),
            "gpu.attention_bucket": (f"{CTX_BUCKET_STEP}: runtime/engine.py captures graph context buckets every "
                                     f"{CTX_BUCKET_STEP} positions (runtime.runner.CTX_BUCKET_STEP). [{env}]"),
            "gpu.attention_grid_align": (f"{self.grid_align}: the grids' graphs were captured at context buckets "
                                         "round_up(context + spec_window, runtime.kv_cache.CTX_ALIGN) "
                                         "(runtime/profile_harness.py), so each column (a multiple of it) ran attention "
                                         f"over round_up(context + window, {CTX_ALIGN}) positions (1: the columns are not "
                                         f"all multiples of {CTX_ALIGN}, read as context + window). Layout of the code, not "
                                         f"a fit. [{env}]"),
            "gpu.attention_tile": (
                f"{self.tile}: the tile probe (runtime/profile_gpu.py tile_phase): graph-replayed decode and spec "
                f"cycle at batch {self.tile_bs}, every request at width - {W}, at widths {self.tile_widths}: "
                + "; ".join(f"{k} " + ", ".join(_ms(t) for t in ts) for k, ts in self.tile_t.items())
                + ". Fitted as a line in round_up(width, tile) per kind (runtime.profile_fit.attention_tile_fit); "
                "summed residual over spread: " + ", ".join(f"tile {t} {v:.3f}" for t, v in self.tile_scores.items())
                + f"; a tile is kept where its residual is at most {TILE_RESIDUAL_SHARE:g} x the linear model's and 64 "
                f"positions of the slope exceed {TILE_SIGNAL_TO_NOISE:g} x the repeats' noise (1: no tile). "
                f"{self._reps_text('tile')}. [{env}]"),
            "gpu.attention_padding_cost": self._padding_text(env),
            "gpu.extend_attention": ("padded_max: the runtime's extend (and draft injection) attention is dense over "
                                     "[B, Q, C]: queries padded to the longest extend, keys req_to_token[rows, :C] with C "
                                     "the longest prefix + extend rounded up, a position mask (runtime/runner.py _ragged, "
                                     f"runtime/layers.py paged_attention). Layout of the code, not a fit. [{env}]"),
            "gpu.mixed_forward": ("extend_then_decode: a mixed step (enable_mixed_chunk) runs the chunk's extend, then "
                                  "the running rows' decode step, graph-replayed where they fit (runtime/engine.py "
                                  f"_launch_call). Layout of the code, not a fit. [{env}]"),
            "gpu.extend_layout_len": (f"{self.prompt}: gpu.extend's rows were timed as ceil(x / {self.prompt}) requests of "
                                      "near-equal length (runtime.profile_harness.extend_layout), so a row's dense keys per "
                                      f"token are its column + half a request's length. [{env}]"),
            "gpu.extend_attention_bucket": (f"{CTX_ALIGN}: _ragged rounds C up to runtime.kv_cache.CTX_ALIGN. [{env}]"),
            "gpu.extend_split": self._split_text(env),
            "gpu.extend_after_step": self._after_step_text(env),
            "gpu.dp_attention_sync_s": ("0: one device, no DP-attention ranks to gather across (used only with "
                                        f"server.enable_dp_attention and dp_size > 1). [{env}]"),
            "gpu.verify_chain": (grid_text("chain_verify", (
                f"one ModelRunner.spec_cycle(rows, forced_accept=[{self.forced}] * bs, graph=True, as_chain=True, "
                f"draft_steps=False): target verify of {W} + accept/commit + the chain drafter's draft extend over "
                f"the {W} verified positions (one logit row per request), the without-steps calls of the "
                "gpu.draft_step pairs (their median per point)")) + " PLUS the same per-batch issue excess as gpu.verify"
                if "chain_verify" in self.grid else
                f"not written: at window {W} a chain cycle has no serial step to time it beside (the simulator "
                "reads gpu.verify for chain drafters too)"),
            "gpu.verify_includes_draft": ("true: gpu.verify times ModelRunner.spec_cycle, the block drafter's forward "
                                          f"and the target verify together. [{env}]"),
            "gpu.eager_overhead_s": (
                "smallest spec_cycle(graph=False) - spec_cycle(graph=True) at the same batch and context over the "
                "gpu.eager_factor points (what an eager cycle adds where the GPU bounds it; runtime.profile_fit.eager_fit): "
                + ", ".join(f"bs {b} ctx {c}: +{_ms(te - te / r)}" for b, c, te, r in self.eager_ratios)
                + f"; clamped >= 0. Used instead of gpu.eager_factor above cuda_graph_max_bs. [{env}]"),
            "gpu.eager_host_issue_s": (
                "lower quartile of the gpu.eager_factor points on the host's fast level (within runtime.host_reference.SLOW_RATIO "
                "of the fastest point: slow-host periods only inflate points; runtime.profile_fit.fast_level_issue) "
                "of the host time (perf_counter) to issue "
                "spec_cycle(graph=False): per point the smaller of its median with the GPU kept busy by a "
                "torch.cuda._sleep spin queued first and its median issued onto an idle stream (each can only be "
                "inflated, by a launch queue filled behind the spin or by device-bound kernels piling up: "
                "runtime.profile_fit.issue_estimate); kept busy / idle: "
                + ", ".join(f"bs {b} ctx {c}: {_ms(h)} / {_ms(i)}" for b, c, h, i in
                            getattr(self, "eager_issue_parts", []))
                + self._eager_refs_text()
                + "; the host issues an eager cycle's kernels one by one and they run as they arrive, so an eager "
                f"cycle lasts max(graph + eager_overhead_s, this) (runtime.profile_fit.eager_fit); null on CPU. [{env}]"),
            "host.launch_per_extend_s": (
                "Theil-Sen intercept (runtime.profile_fit.extend_issue_fit) of the host time to issue an extend "
                "(without its draft injection: host.launch_per_inject_s), GPU kept busy, against extend tokens (medians "
                f"under host.launch_per_extend_token_s): the per-launch kernel issue, nearly flat in tokens. [{env}]"),
            "host.launch_per_inject_s": (
                "Theil-Sen intercept (runtime.profile_fit.extend_issue_fit) of the host time (perf_counter) of "
                "ModelRunner.prepare_inject(sync=False) + inject after the extend, per token count the smaller of "
                "its median with the GPU kept busy and its median issued onto an idle stream "
                "(runtime.profile_fit.issue_estimate: each can only be inflated), against extend tokens "
                f"(medians under host.launch_per_inject_token_s): the drafter injection's kernel issue. [{env}]"),
            "host.launch_per_extend_eager_s": (
                "not written (None): the runtime's extends are timed as it runs them, so host.launch_per_extend_s "
                "is already the issue of every extend; only analytic CUDA profiles, whose launch_per_extend_s is the "
                f"piecewise prefill graph's, give the eager runner's issue apart. [{env}]"),
            "host.launch_per_inject_eager_s": (
                "not written (None): as host.launch_per_extend_eager_s, for the drafter's prompt injection, whose "
                f"measured issue is host.launch_per_inject_s. [{env}]"),
            "host.launch_per_inject_token_s": (
                f"Theil-Sen slope (clamped >= 0) of the same against extend tokens {self.ext_x} at prefix 0: medians "
                + ", ".join(f"{t}: {_ms(self.inj_host[i][0])}"
                            + (f" (idle stream {_ms(self.inj_idle[i])})" if getattr(self, "inj_idle", [None] * (i + 1))[i]
                               is not None else "")
                            for i, t in enumerate(self.ext_x))
                + (" (CPU: inline, 0)" if not dev.is_gpu else "") + f". [{env}]"),
            "host.slot_expansion_s": self._slot_expansion_text(env),
            "host.inject_prepare_s": self._inject_prepare_text(env),
            "host.inject_idle_lead_by_tokens": (
                ("runtime.profile_gpu.GpuPhases._slot_expansion: a timing event after the inject of the loop's "
                 "slot-expansion sequence (extend, prepare_inject(sync=True), inject, from an idle stream) gives the "
                 "injection's span on the drained stream; less its kept-busy device time (gpu.draft_inject, prefix 0), "
                 f"clamped >= 0, then the median over the grid points within a factor of {LEAD_NEIGHBOURHOOD:.2f} in tokens "
                 "(runtime.profile_fit.neighbourhood_median, runtime.profile_fit.span_lead_fit); medians before it "
                 "(tokens: span / device): "
                 + ", ".join(f"{t}: {_ms(s)} / {_ms(d)}" for t, s, d in getattr(self, "inject_idle_pts", []))
                 + f". {self._reps_text('slot_expansion')}. [{env}]")
                if getattr(self, "inject_idle_pts", []) else
                f"null: not measured on this device (CPU: the forward runs inline, no idle-stream lead). [{env}]"),
            "gpu.eager_spec_issue_s": ("null: gpu.eager_host_issue_s was measured on the whole spec_cycle (the "
                                       f"block drafter's forward included), so it is the eager cycle's issue. [{env}]"),
            "gpu.eager_draft_overhead_s": ("0: not measured: an eager chain draft step's launch cost above "
                                           "cuda_graph_max_bs is not timed (gpu.draft_step is graph-replayed only), "
                                           f"so eager chain cycles are priced low by that much. [{env}]"),
            "host.extend_idle_lead_s": self._idle_lead_text(env, table=False),
            "host.extend_idle_lead_by_tokens": self._idle_lead_text(env, table=True),
            "host.extend_own_idle_lead_by_tokens": self._split_lead_text(env, inject=False),
            "host.inject_unprepared_idle_lead_by_tokens": self._split_lead_text(env, inject=True),
            "host.launch_per_extend_token_s": (
                f"Theil-Sen slope (runtime.profile_fit.extend_issue_fit, clamped >= 0) of the host time (perf_counter around the call, GPU kept "
                f"busy so the call never waits on it) of ModelRunner.extend "
                f"against extend tokens {self.ext_x} at prefix 0: medians "
                + ", ".join(f"{t}: {_ms(self.ext_host[i][0])}" for i, t in enumerate(self.ext_x))
                + (" (CPU: the forward runs inline, its time is all in gpu.extend, so 0)" if not dev.is_gpu else "")
                + f". The host time is kernel launches and graph replays (eager attention between pieces when "
                f"piecewise), nearly flat in tokens: host.launch_per_extend_s carries it. [{env}]"),
            "host.ingest_per_request_s": ("0: the runtime has no tokenizer or IPC; runtime.engine.RuntimeEngine "
                                          "hands each request to the scheduler directly at Recv"),
            "host.ingest_per_token_s": ("0: the runtime has no tokenizer or chat template; runtime.engine.RuntimeEngine "
                                        "hands each request's token ids to the scheduler directly at Recv"),
        }
        sched_txt = (f"np.polyfit over batch sizes {self.host_bs} of the median host time (perf_counter) of "
                     f"{{fn}} on a sim.scheduler.Scheduler holding bs running {{held}}, {self.host_n} calls per size "
                     f"after {WARMUP} warm-ups, verify and decode plans alternating per size; medians {{meds}}; "
                     f"intercept and slope clamped >= 0. Host: {self.env['host']}, python {self.env['python']}. [{env}]")
        verify_held = f"DSpark requests (window {W}, {HOST_PROMPT}-token prompts, admission none, verify plans)"
        decode_held = (f"requests of a plain-decoding server ({HOST_PROMPT}-token prompts, admission none, decode "
                       f"plans; charged in place of host.schedule_* / process_* when no speculative algorithm runs)")
        for key, fn, meds, held in (
                ("schedule", "Scheduler.schedule()", self.sched_med, verify_held),
                ("process", "Scheduler.process_result(plan, output)", self.proc_med, verify_held),
                ("decode_schedule", "Scheduler.schedule()", self.decode_sched_med, decode_held),
                ("decode_process", "Scheduler.process_result(plan, output)", self.decode_proc_med, decode_held)):
            txt = sched_txt.format(fn=fn, held=held,
                                   meds=", ".join(f"bs {b} {_us(m)}" for b, m in zip(self.host_bs, meds, strict=True)))
            prov[f"host.{key}_s"] = f"intercept of {txt}"
            prov[f"host.{key}_per_req_s"] = f"slope of {txt}"
        busy = (f"a torch.cuda._sleep kernel queued first on the forward stream keeps the GPU busy (finally "
                f"{_ms(self.launch_busy_s)} of spinning per call; {self.launch_idle} of {self.launch_total} calls found "
                f"it finished, i.e. the GPU idle, and doubled it)" if self.busy_available else
                "CPU: no device to keep busy, the call runs the work inline" if not dev.is_gpu else
                "torch.cuda._sleep unavailable: the GPU was not kept busy (the call may include waits)")
        launch_txt = (f"np.polyfit over batch sizes {self.launch_bs} of the median host time (perf_counter) of the "
                      f"engine's verify launch (runtime.engine.RuntimeEngine._launch for a VERIFY plan): "
                      f"DeviceTokens.step(plan) accept draws, the forced-accept list, ModelRunner.spec_cycle(rows, "
                      f"forced, graph=True) (KV reserve of the new window, h2d of rows and forced accepts, graph "
                      f"replay, output clones), one timing event, Device.record('forward') (also the end mark) and "
                      f"Device.copy_to_host({{'committed'}}); lengths grow from context {self.launch_ctx} as in the "
                      f"engine; {busy}; {self._reps_text('launch')} after {WARMUP} warm-ups; medians "
                      + ", ".join(f"bs {b} {_us(m)}" for b, m in zip(self.launch_bs, self.launch_med, strict=True))
                      + ("" if dev.is_gpu else
                         "; on CPU each call less the forward it ran inline (ModelRunner.spec_cycle, timed in the same "
                         "call: medians " + ", ".join(f"bs {b} {_us(f)}" for b, f in
                                                      zip(self.launch_bs, self.launch_forward_med, strict=False))
                         + "), which is device time (gpu.verify) and not a host term")
                      + f"; intercept and slope clamped >= 0. [{env}]")
        stall_txt = ("np.polyfit over batch sizes " + str(self.launch_bs) + " of the publish-wait stall per verify: "
                     "the wall per cycle of a loop of the engine's verify cycle (launch, wait for the previous result copy, "
                     "Scheduler.process_result on it, Scheduler.schedule() of the next plan: runtime.profile_host.stall_phase) "
                     "that blocks the host on the previous forward's event before each launch, minus the same loop with "
                     "the previous result processed after the next launch (overlap, queued), best of 2 alternating runs "
                     "each; stalls "
                     + ", ".join(f"bs {b} {_us(m)}" for b, m in zip(self.launch_bs, self.stall_med, strict=True))
                     + self._loop_calls_text(self.stall_calls, "block", "queued")
                     + f"; launch_s = intercept - host.sync_wakeup_s (clamped >= 0). The host time of the whole "
                     f"launch call, which also overlaps the GPU once the graph is queued, was: {launch_txt} [{env}]")
        prov["host.launch_s"] = f"intercept of {stall_txt}"
        prov["host.launch_per_req_s"] = f"slope of {stall_txt}"
        dstall = ("np.polyfit over batch sizes " + str(self.launch_bs) + " of the same loops on decode plans of a "
                  "plain-decoding server (runtime.profile_host.stall_phase modes dqueued / dblock: the engine's decode "
                  "launch, no accept draw, one position per request), dblock - dqueued, best of 2 alternating runs each: "
                  + ", ".join(f"bs {b} {_us(m)}" for b, m in zip(self.launch_bs, self.decode_stall_med, strict=True))
                  + self._loop_calls_text(self.decode_stall_calls, "dblock", "dqueued")
                  + "; decode_launch_s = intercept - host.sync_wakeup_s (clamped >= 0); charged in place of "
                  f"host.launch_* on a server without speculative decoding [{env}]")
        prov["host.decode_launch_s"] = f"intercept of {dstall}"
        prov["host.decode_launch_per_req_s"] = f"slope of {dstall}"
        tail_txt = ("np.polyfit over batch sizes " + str(self.launch_bs) + " of the whole verify launch call's host "
                    "time minus its part before the forward is queued (host.launch_s's stall less "
                    "host.sync_wakeup_s), clamped >= 0: "
                    + ", ".join(f"bs {b} {_us(t)}" for b, t in zip(self.launch_bs, self.tail_points, strict=True))
                    + "; the rest of the call (length bounds, timing and ring events, result copy) runs while the GPU "
                    "runs the forward, and the loop processes the previous step's results only after it; applied to "
                    "every graph-replayed decode/verify launch (a decode launch is the same call without the accept "
                    f"draw). The whole call: {launch_txt}")
        prov["host.launch_tail_s"] = f"intercept of {tail_txt}"
        prov["host.launch_tail_per_req_s"] = f"slope of {tail_txt}"
        if getattr(self, "serial_excess", None):
            def us(xs: list[float]) -> str:
                return ", ".join(f"bs {b} {_us(x)}" for b, x in zip(self.launch_bs, xs, strict=True))

            path_txt = ("the loop's result path per step, from a forward's results to the next schedule pass: the "
                        "wall per cycle of the engine's loop without overlap (runtime.profile_host.stall_phase, serial: "
                        "sim/loop.py scheduler_loop with enable_overlap_schedule off, each verify launched onto an idle "
                        "stream after the previous one's Results (copy-done wait, timing reads), "
                        "Scheduler.process_result, Deliver, Recv, Scheduler.schedule() and the pass's stamp, run by "
                        "runtime.engine.LoopHost, the engine's own code) minus the publish-wait loop's (best of 2 "
                        "alternating runs each; the wake-up is in both): " + us(self.serial_excess)
                        + "; less host.process_* and host.schedule_* at each size (charged apart), clamped >= 0: "
                        + us(self.result_path_total)
                        + ". The loop's host stamps per cycle (medians: the Results call with its wait / process_result "
                        "to Deliver / Deliver to the pass's stamp, schedule() included): "
                        + ", ".join(f"bs {b} {_us(t[0])} / {_us(t[1])} / {_us(t[2])}"
                                    for b, t in zip(self.launch_bs, getattr(self, "serial_parts", []), strict=False)
                                    if len(t) == 3)
                        + "; split at the delivery's stamp: after it (the last stamp part less host.schedule_*, clamped "
                        "to [0, the path]; host.recv_path_*, charged with host.schedule_*) " + us(self.recv_path_points)
                        + ", before it (the rest; host.result_path_*, charged with host.process_*, before the delivery) "
                        + us(self.result_path_points)
                        + ". On the critical path only when the GPU has nothing queued (sim.cost_model.CostModel.host). "
                        f"{STALL_STEPS} cycles per run after {WARMUP} warm-ups; a closed loop of bs clients, all requests "
                        f"in flight (Recv finds none); lengths grow from context {self.launch_ctx} as in the engine. "
                        f"[{env}]")
            for key, part in (("result_path", "before the delivery's stamp"), ("recv_path", "after the delivery's stamp")):
                fit = f"np.polyfit over batch sizes {self.launch_bs} of the part {part}; intercept and slope clamped >= 0"
                prov[f"host.{key}_s"] = f"intercept of {fit}, of {path_txt}"
                prov[f"host.{key}_per_req_s"] = f"slope of {fit}, of {path_txt}"
        prov["host.sync_wakeup_s"] = (
            f"median host time of runtime.device.Device.host_block (event.synchronize() on a ring event) recorded "
            f"right after a tiny kernel (x.add_(1) on an idle GPU), {_us(self.sync_tiny)}, minus the same on an "
            f"already-completed event, {_us(self.sync_done)}; {self.sync_n} interleaved pairs; clamped >= 0"
            + (" (CPU: events are complete when recorded, so ~0)" if not dev.is_gpu else "") + f". [{env}]")
        prov["host.cross_queue_penalty_s"] = (
            f"median over batch sizes {self.cq_bs} (context {self.contexts[0]}) of the per-step GPU time of a "
            f"graph-replayed spec_cycle with the engine's cross_queue_wait sequence before each step "
            f"(Device.stream_wait('schedule', previous forward's event), then Device.wait_stream('forward', "
            f"'schedule')) minus without: "
            + ", ".join(f"bs {b}: {_ms(m1)} vs {_ms(m0)} (IQR/median {s1 * 100:.1f} % / {s0 * 100:.1f} %)"
                        for b, m0, m1, s0, s1 in self.cq)
            + f"; clamped at 0 (0 expected on CUDA). Blocks plain / wait / plain / wait of "
            f"{min(self.reps['cross_queue'])}-{max(self.reps['cross_queue'])} timed calls each after {WARMUP} "
            f"warm-ups, pooled per variant; {timing}. [{env}]")
        return prov, model
