"""The decode step and the speculative cycle of :class:`runtime.runner.ModelRunner`:
the device-side steps (decode, draft, verify, commit) and their host entry points, which
reserve each row's KV for the step first (:meth:`SpecCycle._prepare`).

Two drafter kinds, as SGLang 0.5.23 runs them:

- **block** (DSpark/DFlash, speculative/dflash_worker_v2.py): one parallel drafter forward
  per cycle catches up the previous window's KV and proposes the whole block.
- **chain** (EAGLE/EAGLE3/NEXTN/MTP with ``speculative_eagle_topk`` 1,
  speculative/eagle_worker_v2.py): the first draft comes from the previous cycle's draft
  extend, ``speculative_num_steps - 1`` serial one-token drafter forwards propose the rest
  (``draft_forward``), and after the verify the draft extend runs the drafter over the
  verified window (``_draft_extend_for_decode``). Trees (topk > 1) are simulated only.

Random weights accept nothing, so :meth:`SpecCycle.spec_cycle` takes ``forced_accept``
(SGLang's SGLANG_SIMULATE_ACC_LEN): every draft/verify kernel still runs, only the
committed count is forced.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from specsched.runtime.kv_cache import PAD_SLOT, ReqToTokenPool
from specsched.runtime.layers import AttnBatch, LlamaProxy, position_mask

if TYPE_CHECKING:
    from specsched.runtime.device import Device
    from specsched.runtime.kv_cache import KVBuffers


@dataclass(slots=True)
class VerifyOut:
    """Result of a teacher-forced :meth:`ModelRunner.verify`.

    Attributes:
        greedy: ``[B, W]`` int64 target argmax at each window position (position j
            predicts the token at n + j + 1).
        logits: ``[B, W, vocab]`` float32 or None.
    """

    greedy: torch.Tensor
    logits: torch.Tensor | None


@dataclass(slots=True)
class StepOut:
    """Per-request outputs of a decode step or a speculative cycle (device tensors,
    fresh per call: safe to copy to the host while the next step runs).

    Attributes:
        tokens: ``[B, W]`` int64 committed tokens in order; entries past
            ``committed - 1`` are -1 (W = 1 for decode).
        accept: ``[B]`` int64 accepted draft tokens (0 for decode).
        committed: ``[B]`` int64 tokens committed = accept + 1 (SGLang's accept length).
    """

    tokens: torch.Tensor
    accept: torch.Tensor
    committed: torch.Tensor

    def as_dict(self) -> dict[str, torch.Tensor]:
        return {"tokens": self.tokens, "accept": self.accept, "committed": self.committed}



class SpecCycle:
    """Decode, verify and the speculative cycle; mixed into :class:`runtime.runner.ModelRunner`
    (which owns the attributes annotated here and the graph replay ``_run``)."""

    target: LlamaProxy
    drafter: LlamaProxy | None
    device: Device
    pool: ReqToTokenPool
    kv: KVBuffers
    draft_kv: KVBuffers | None
    window: int
    gamma: int
    mask_token: int
    external_kv: bool
    chain: bool

    # ------------------------------------------------------------- device steps
    def _uniform_attn(self, rows_t: torch.Tensor, q_pos: torch.Tensor, out_loc: torch.Tensor, ctx: int) -> AttnBatch:
        b, qn = q_pos.shape
        return AttnBatch(
            slots=self.pool.req_to_token[rows_t, :ctx],
            mask=position_mask(q_pos, ctx),
            out_loc=out_loc.reshape(-1),
            q_index=None,
            tok_index=None,
            batch=b,
            q_len=qn,
        )

    def _decode_dev(self, rows_t: torch.Tensor, ctx: int) -> StepOut:
        pool = self.pool
        n = pool.seq_lens[rows_t]
        ids = pool.last_token[rows_t]
        loc = pool.req_to_token[rows_t, n]
        attn = self._uniform_attn(rows_t, n[:, None], loc, ctx)
        hidden = self.target(ids, n, attn, self.kv)
        tok = torch.argmax(self.target.compute_logits(hidden), dim=-1)
        pool.seq_lens[rows_t] = n + 1
        pool.last_token[rows_t] = tok
        pool.reset_padding()
        zero = torch.zeros_like(tok)
        return StepOut(tok[:, None], zero, zero + 1)

    def _verify_dev(self, rows_t: torch.Tensor, window: torch.Tensor, ctx: int, want_logits: bool) -> VerifyOut:
        b, w = window.shape
        n = self.pool.seq_lens[rows_t]
        pos = n[:, None] + self._arange(w)[None, :]
        loc = self.pool.req_to_token[rows_t[:, None], pos]
        attn = self._uniform_attn(rows_t, pos, loc, ctx)
        hidden = self.target(window.reshape(-1), pos.reshape(-1), attn, self.kv)
        logits = self.target.compute_logits(hidden).view(b, w, -1)
        return VerifyOut(torch.argmax(logits, dim=-1), logits if want_logits else None)

    def _commit_dev(self, rows_t: torch.Tensor, accept: torch.Tensor, bonus: torch.Tensor, window: torch.Tensor) -> None:
        pool = self.pool
        n = pool.seq_lens[rows_t]
        pool.seq_lens[rows_t] = n + accept + 1
        pool.last_token[rows_t] = bonus
        pool.prev_window[rows_t] = window
        pool.prev_start[rows_t] = n
        pool.prev_accept[rows_t] = accept
        pool.reset_padding()

    def _draft_dev(self, rows_t: torch.Tensor, ctx: int) -> torch.Tensor:
        """One parallel drafter forward: KV catch-up of the previous window + new block.

        Per request (n = committed length, a' = previous accept): the previous verify
        window's accepted tokens (positions prev_start .. prev_start + a') get their draft
        KV written (the rest go to the padding slot), and the block
        ``[anchor, mask x gamma]`` at positions n .. n + gamma proposes drafts from its
        first gamma outputs (LM shift: output j predicts position n + j + 1; DFlash trains
        mask positions to predict themselves, same compute shape). 2W positions per request.
        """
        assert self.drafter is not None and self.draft_kv is not None
        pool, w, g = self.pool, self.window, self.gamma
        b = rows_t.shape[0]
        j = self._arange(w)[None, :]
        n = pool.seq_lens[rows_t]
        p_pos = pool.prev_start[rows_t][:, None] + j
        p_ok = j <= pool.prev_accept[rows_t][:, None]
        p_loc = torch.where(p_ok, pool.req_to_token[rows_t[:, None], p_pos], PAD_SLOT)
        b_pos = n[:, None] + j
        b_loc = pool.req_to_token[rows_t[:, None], b_pos]
        anchor = pool.last_token[rows_t]
        b_tok = torch.cat([anchor[:, None], torch.full((b, g), self.mask_token, dtype=anchor.dtype, device=anchor.device)], 1)
        ids = torch.cat([pool.prev_window[rows_t], b_tok], 1).reshape(-1)
        rope_pos = torch.cat([p_pos, b_pos], 1).reshape(-1)
        q_pos = torch.cat([torch.where(p_ok, p_pos, -1), b_pos], 1)
        attn = self._uniform_attn(rows_t, q_pos, torch.cat([p_loc, b_loc], 1), ctx)
        hidden = self.drafter(ids, rope_pos, attn, self.draft_kv).view(b, 2 * w, -1)
        # contiguous [B * gamma, hidden] first: on a strided 3-D view cuBLAS picked a skinny
        # kernel re-reading the LM head per 8 tokens (15.9 ms instead of ~1 ms at batch 64, H200)
        block = hidden[:, w : w + g].reshape(b * g, hidden.shape[-1])
        return torch.argmax(self.drafter.compute_logits(block), dim=-1).view(b, g)

    def _chain_draft_dev(self, rows_t: torch.Tensor, ctx: int, steps: bool = True) -> torch.Tensor:
        """A chain drafter's draft phase with topk 1 (speculative/eagle_worker_v2.py
        ``draft_forward``): ``[B, gamma]`` draft tokens.

        The first draft is ``pool.draft_next`` (the previous draft extend's proposal);
        each of the ``gamma - 1`` serial steps runs the drafter over one token per request:
        step i feeds draft i at draft-KV position n + i - 1 (EAGLE pairs the feature of
        position p with the token at p + 1) and proposes draft i + 1. Every position it
        writes lies in the verify window the cycle reserved (n .. n + gamma).
        ``steps=False`` skips the serial steps (the drafts are the first one repeated):
        the profiler's ``gpu.draft_step`` is a cycle with its steps less one without them,
        over their number.
        """
        assert self.drafter is not None and self.draft_kv is not None
        pool, g = self.pool, self.gamma
        d = pool.draft_next[rows_t]
        if not steps:
            return d[:, None].expand(-1, g).contiguous()
        n = pool.seq_lens[rows_t]
        drafts = [d]
        for i in range(g - 1):
            d = self._draft_step_dev(rows_t, n + i, d, ctx)
            drafts.append(d)
        return torch.stack(drafts, 1)

    def _draft_step_dev(self, rows_t: torch.Tensor, pos: torch.Tensor, tok: torch.Tensor, ctx: int) -> torch.Tensor:
        """One chain draft step: the drafter over ``tok`` (``[B]``) at draft-KV positions
        ``pos`` (``[B]``), its KV written there; returns the proposed next token ``[B]``."""
        assert self.drafter is not None and self.draft_kv is not None
        loc = self.pool.req_to_token[rows_t, pos]
        attn = self._uniform_attn(rows_t, pos[:, None], loc, ctx)
        hidden = self.drafter(tok, pos, attn, self.draft_kv)
        return torch.argmax(self.drafter.compute_logits(hidden), dim=-1)

    def _draft_extend_dev(self, rows_t: torch.Tensor, n: torch.Tensor, tokens: torch.Tensor,
                          accept: torch.Tensor, ctx: int) -> None:
        """A chain drafter's draft extend after the verify (speculative/eagle_worker_v2.py
        ``_draft_extend_for_decode``; one extend row of ``speculative_num_draft_tokens``
        tokens per request, eagle_worker_common.py ``prepare_for_draft_extend``).

        Per request (n = its length before the verify, ``tokens`` ``[B, W]`` the committed
        tokens, -1 past them): the drafter runs over all W positions n .. n + W - 1 with
        the committed tokens as inputs (EAGLE's shift: position p's feature with the token
        at p + 1); the KV of the accepted positions n .. n + accept is kept, the rest goes
        to the padding slot. The output at position n + accept proposes the next cycle's
        first draft (``pool.draft_next``).
        """
        assert self.drafter is not None and self.draft_kv is not None
        pool = self.pool
        b, w = tokens.shape
        j = self._arange(w)[None, :]
        pos = n[:, None] + j
        ok = j <= accept[:, None]
        loc = torch.where(ok, pool.req_to_token[rows_t[:, None], pos], PAD_SLOT)
        ids = torch.where(tokens >= 0, tokens, self.mask_token).reshape(-1)
        attn = self._uniform_attn(rows_t, torch.where(ok, pos, -1), loc, ctx)
        hidden = self.drafter(ids, pos.reshape(-1), attn, self.draft_kv).view(b, w, -1)
        last = hidden.gather(1, accept.view(b, 1, 1).expand(b, 1, hidden.shape[-1])).reshape(b, hidden.shape[-1])
        pool.draft_next[rows_t] = torch.argmax(self.drafter.compute_logits(last), dim=-1)

    def _spec_dev(self, rows_t: torch.Tensor, ctx: int, forced: torch.Tensor | None, steps: bool = True,
                  chain: bool | None = None) -> StepOut:
        pool, g = self.pool, self.gamma
        b = rows_t.shape[0]
        anchor = pool.last_token[rows_t]
        chain = self.chain if chain is None else chain and self.drafter is not None
        if self.drafter is None:
            drafts = torch.full((b, g), self.mask_token, dtype=anchor.dtype, device=anchor.device)
        elif chain:
            drafts = self._chain_draft_dev(rows_t, ctx, steps)
        else:
            drafts = self._draft_dev(rows_t, ctx)
        window = torch.cat([anchor[:, None], drafts], 1)
        greedy = self._verify_dev(rows_t, window, ctx, want_logits=False).greedy
        accept = (drafts == greedy[:, :g]).long().cumprod(1).sum(1)
        if forced is not None:
            accept = forced.clamp(0, g)
        bonus = greedy.gather(1, accept[:, None]).squeeze(1)
        j = self._arange(self.window)[None, :]
        tokens = torch.cat([drafts, bonus[:, None]], 1)
        tokens = torch.where(j < accept[:, None], tokens, torch.where(j == accept[:, None], bonus[:, None], -1))
        n = pool.seq_lens[rows_t]
        self._commit_dev(rows_t, accept, bonus, window)
        if chain:
            self._draft_extend_dev(rows_t, n, tokens, accept, ctx)
            pool.reset_padding()
        return StepOut(tokens, accept, accept + 1)

    def _draft_only_dev(self, rows_t: torch.Tensor, ctx: int) -> StepOut:
        """One chain draft step at each row's committed length (the profiler's
        ``gpu.draft_step``): the drafter over ``draft_next``; nothing is committed."""
        pool = self.pool
        tok = self._draft_step_dev(rows_t, pool.seq_lens[rows_t], pool.draft_next[rows_t], ctx)
        zero = torch.zeros_like(tok)
        return StepOut(tok[:, None], zero, zero)

    # ---------------------------------------------------------------- public steps
    def _prepare(self, rows: Sequence[int], width: int) -> int:
        if not rows:
            raise ValueError("empty batch")
        bounds = [self.pool.len_bound[r] for r in rows]
        upto = [n + width for n in bounds]
        if self.external_kv:
            self.pool.covers(rows, upto)
        else:
            self.pool.reserve(rows, upto)
        return self.context_bucket(max(bounds) + width)

    @torch.no_grad()
    def decode(self, rows: Sequence[int], *, graph: bool = False) -> StepOut:
        """One decode step (SGLang ForwardMode.DECODE): feed each row's last token,
        write its KV, sample greedily, commit 1 token.

        Args:
            rows: request rows (prefill complete).
            graph: replay a captured graph for the (batch, context) bucket (captured on
                first use after warm-up; CPU: eager on the same static buffers). Batches
                above the largest bucket run eagerly.

        Returns:
            :class:`StepOut` with W = 1.
        """
        ctx = self._prepare(rows, 1)
        out = self._run("decode", rows, ctx, None) if graph else self._decode_dev(self.device.h2d(rows), ctx)
        for r in rows:
            self.pool.len_bound[r] += 1
        return out

    @torch.no_grad()
    def verify(self, rows: Sequence[int], window: torch.Tensor, *, return_logits: bool = True) -> VerifyOut:
        """Teacher-forced target verify (SGLang ForwardMode.TARGET_VERIFY) of a given
        window per request, at positions n .. n + W - 1, causal within the window.

        Writes the window's KV but commits nothing (rollback = not advancing; follow
        with :meth:`commit` to advance).

        Args:
            rows: request rows.
            window: ``[B, W]`` int64 tokens (anchor first).
            return_logits: return ``[B, W, vocab]`` logits.
        """
        ctx = self._prepare(rows, window.shape[1])
        win = self._to_device(window)
        return self._verify_dev(self.device.h2d(rows), win, ctx, return_logits)

    @torch.no_grad()
    def commit(self, rows: Sequence[int], accept: Sequence[int], bonus: torch.Tensor, window: torch.Tensor) -> None:
        """Commit ``accept[b] + 1`` tokens of the last verified window of each row:
        ``seq_lens += accept + 1``, ``last_token = bonus`` (the target's token after the
        accepted prefix); the rest of the window is rolled back (its KV stays in reserved
        slots and is overwritten later).

        Args:
            rows: request rows.
            accept: accepted draft tokens per row (0 .. W - 1).
            bonus: ``[B]`` int64 next token per row.
            window: ``[B, W]`` the verified window (drafter catch-up reads it).
        """
        rows_t = self.device.h2d(rows)
        self._commit_dev(rows_t, self.device.h2d(accept), self._to_device(bonus), self._to_device(window))
        for r, a in zip(rows, accept, strict=True):
            self.pool.len_bound[r] += a + 1

    @torch.no_grad()
    def spec_cycle(self, rows: Sequence[int], forced_accept: Sequence[int] | None = None, *, graph: bool = False,
                   draft_steps: bool = True, as_chain: bool = False) -> StepOut:
        """One speculative cycle: the drafter proposes gamma tokens (a block drafter in one
        parallel forward, speculative/dflash_worker_v2.py; a chain drafter in
        ``gamma - 1`` serial steps after the previous draft extend's first proposal,
        speculative/eagle_worker_v2.py), one target forward verifies ``[anchor, drafts]``,
        accept = the longest prefix of drafts equal to the target's greedy tokens, commit
        ``accept + 1`` tokens (accepted drafts + the target's bonus token); a chain
        drafter then runs its draft extend over the verified window.

        Args:
            rows: request rows (prefill complete).
            forced_accept: per row, accepted draft tokens to force (0..gamma; SGLang's
                SGLANG_SIMULATE_ACC_LEN; :class:`sim.acceptance.AcceptanceModel` draws an
                accept *length* L, pass L - 1). All drafting and verifying still runs;
                only the committed count is forced. None: real greedy matching.
            graph: replay a captured graph (see :meth:`decode`).
            draft_steps: False skips a chain drafter's serial draft steps; no effect on a
                block drafter.
            as_chain: run the cycle as a chain drafter's whatever this runner's drafter
                kind (the profiler times a chain cycle with and without its serial steps
                on its block drafter's runner: ``gpu.draft_step``).

        Returns:
            :class:`StepOut`: ``tokens[B, W]`` committed tokens (drafts[:accept] then the
            bonus), ``accept``, ``committed = accept + 1``.

        Raises:
            RuntimeError: ``spec_window < 2``.
        """
        if self.window < 2:
            raise RuntimeError("spec_cycle needs spec_window >= 2")
        ctx = self._prepare(rows, self.window)
        chain = self.chain or (as_chain and self.drafter is not None)
        steps = draft_steps or not chain
        if graph:
            if chain and not self.chain:
                kind = "chain_spec" if steps else "chain_no_steps"
            else:
                kind = "spec" if steps else "spec_no_steps"
            out = self._run(kind, rows, ctx, forced_accept)
        else:
            forced = self.device.h2d(forced_accept) if forced_accept is not None else None
            out = self._spec_dev(self.device.h2d(rows), ctx, forced, steps, chain)
        for i, r in enumerate(rows):
            self.pool.len_bound[r] += (min(max(forced_accept[i], 0), self.gamma) + 1) if forced_accept is not None else self.window
        return out

    @torch.no_grad()
    def draft_step(self, rows: Sequence[int], *, graph: bool = False) -> StepOut:
        """One serial draft step of a chain drafter alone: the drafter over each row's
        ``draft_next`` at its committed length. Commits nothing; ``tokens[B, 1]`` is the
        proposed next draft. A block drafter's runner runs the same one-token drafter
        forward. The profiler times ``gpu.draft_step`` with it only at window 2 (no serial
        step inside a cycle to difference): a lone call also pays the per-call work a
        cycle pays once.

        Raises:
            RuntimeError: no drafter.
        """
        if self.drafter is None:
            raise RuntimeError("draft_step needs a drafter")
        ctx = self._prepare(rows, 1)
        return self._run("draft_step", rows, ctx, None) if graph else self._draft_only_dev(self.device.h2d(rows), ctx)
