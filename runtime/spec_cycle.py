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
  verified window (``_draft_extend_for_decode``).
- **tree** (the same drafters with ``speculative_eagle_topk`` K > 1): each serial step runs
  the drafter over the K branches a request keeps (one query group of K over its prefix),
  keeps the K best of their K x K continuations by cumulative log-probability
  (``select_top_k_tokens``), the target verifies ``speculative_num_draft_tokens`` tree
  nodes under a tree mask (``TARGET_VERIFY`` with the tree's custom mask), one root-to-leaf
  path of at most ``speculative_num_steps`` drafts is accepted, and the draft extend runs
  over the tree's width as the chain's over its window. The proxy's tree has a fixed shape
  (:func:`draft_tree_shape`: the best path as its spine, the other nodes as siblings along
  it), since random weights make every tree's content arbitrary; its cost is a tree's of
  that many nodes.

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


@dataclass(frozen=True, slots=True)
class TreeShape:
    """The fixed shape of the proxy's draft tree (host lists; the runner keeps device copies).

    Node 0 is the root (the last committed token); nodes ``1 .. spine`` form the spine,
    each the child of the one before (the path a verify can accept); the other nodes hang
    off the spine as siblings, node j at ``depth[j]`` under spine node ``depth[j] - 1``.

    Attributes:
        parent: ``[N]`` parent node of each node (-1 for the root).
        depth: ``[N]`` depth of each node (its rope position is n + depth).
        spine: the spine's length, ``min(num_steps, N - 1)``: the most drafts one verify
            can accept.
    """

    parent: tuple[int, ...]
    depth: tuple[int, ...]
    spine: int

    def ancestors(self) -> list[list[bool]]:
        """``[N][N]``: ``a[j][i]`` is True when node i is node j or one of its ancestors
        (what node j's query may see of the tree in the verify)."""
        n = len(self.parent)
        out = [[False] * n for _ in range(n)]
        for j in range(n):
            i = j
            while i >= 0:
                out[j][i] = True
                i = self.parent[i]
        return out


def draft_tree_shape(num_steps: int, num_draft_tokens: int) -> TreeShape:
    """The proxy's draft tree of ``num_draft_tokens`` nodes and depth at most ``num_steps``.

    SGLang builds each request's tree from the top ``num_draft_tokens - 1`` of its scored
    candidates (speculative/eagle_utils.py ``build_tree_kernel_efficient`` over
    ``organize_draft_results``): the best path runs to the full depth and the rest are the
    next-best continuations along it. Here: a spine of ``min(num_steps, N - 1)`` drafts
    and the remaining nodes as siblings of the spine, spread over depths 1..spine in turn.

    Raises:
        ValueError: ``num_steps`` < 1 or ``num_draft_tokens`` < 2.
    """
    if num_steps < 1 or num_draft_tokens < 2:
        raise ValueError(f"a draft tree needs num_steps >= 1 and num_draft_tokens >= 2, got {num_steps}, {num_draft_tokens}")
    spine = min(num_steps, num_draft_tokens - 1)
    parent, depth = [-1], [0]
    for j in range(1, spine + 1):
        parent.append(j - 1)
        depth.append(j)
    for k in range(num_draft_tokens - 1 - spine):
        d = 1 + k % spine
        parent.append(d - 1)
        depth.append(d)
    return TreeShape(tuple(parent), tuple(depth), spine)


def tree_mask(shape_anc: torch.Tensor, n: torch.Tensor, context: int) -> torch.Tensor:
    """``[B, 1, N, C]`` bool verify mask of a draft tree: node j of request b (written at
    key position ``n[b] + j``) sees the request's committed prefix (positions below
    ``n[b]``), key position 0 (as :func:`layers.position_mask`) and the tree nodes that are
    itself or its ancestors (``shape_anc[j, i]``), nothing else.

    Args:
        shape_anc: ``[N, N]`` bool, :meth:`TreeShape.ancestors` on the device.
        n: ``[B]`` int64 committed lengths.
        context: C, the attention width.
    """
    nodes = shape_anc.shape[0]
    kp = torch.arange(context, device=n.device)
    rel = kp[None, :] - n[:, None]                                   # [B, C]
    in_tree = (rel >= 0) & (rel < nodes)
    tree = shape_anc[:, rel.clamp(0, nodes - 1)].permute(1, 0, 2)    # [B, N, C]
    seen = (rel < 0) | (kp == 0)[None, :]
    return (seen[:, None, :] | (in_tree[:, None, :] & tree)).unsqueeze(1)


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
    topk: int
    num_steps: int
    accept_max: int
    tree: TreeShape | None
    tree_anc: torch.Tensor | None
    tree_depth: torch.Tensor | None

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
        tok = pool.forced(rows_t, n + 1, torch.argmax(self.target.compute_logits(hidden), dim=-1))
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
        logits = self.drafter.compute_logits(last)
        if self.tree is None:
            pool.draft_next[rows_t] = torch.argmax(logits, dim=-1)
            return
        # a tree's next cycle starts from the K best first drafts and their log-probs
        # (eagle_worker_v2.py: the draft extend's topk_p / topk_index)
        lp, ids = torch.log_softmax(logits.float(), dim=-1).topk(self.topk, dim=-1)
        pool.draft_topk[rows_t] = ids
        pool.draft_logp[rows_t] = lp
        pool.draft_next[rows_t] = ids[:, 0]

    def _tree_draft_dev(self, rows_t: torch.Tensor, ctx: int, steps: bool = True) -> torch.Tensor:
        """A draft tree's draft phase (speculative/eagle_worker_v2.py ``draft_forward`` with
        topk K > 1): ``[B, N - 1]`` draft tokens in the order of :attr:`tree`'s nodes.

        Step i runs the drafter over the K tokens each request keeps, at rope position
        n + i, as one query group of K over the request's prefix; the K x K continuations
        (log-softmax top K of each) are scored by cumulative log-probability and the best K
        kept (``select_top_k_tokens``); all ``num_steps - 1`` steps run, also for a tree of
        fewer drafts than steps. The tree takes the best kept token of each step as
        its spine and the best-scored candidates of all steps as the other nodes
        (``build_tree_kernel_efficient``'s top ``N - 1``). The branches' draft KV is not
        kept: they attend the prefix only (SGLang gives each branch its own slots, so a
        step also reads the at most ``num_steps - 1`` branch tokens above it).
        ``steps=False`` skips the serial steps (the profiler's cycle without them).
        """
        assert self.drafter is not None and self.draft_kv is not None and self.tree is not None
        pool, k, tree = self.pool, self.topk, self.tree
        tok = pool.draft_topk[rows_t]                       # [B, K]
        b = tok.shape[0]
        if not steps:
            return tok[:, :1].expand(-1, len(tree.parent) - 1).contiguous()
        score = pool.draft_logp[rows_t]
        cand_tok, cand_score, spine = [tok], [score], [tok[:, 0]]
        n = pool.seq_lens[rows_t]
        q_pos = (n - 1)[:, None].expand(b, k)
        pad = torch.full((b * k,), PAD_SLOT, dtype=torch.int64, device=tok.device)
        # every one of the num_steps - 1 serial steps runs, however few drafts the tree keeps
        # (draft_forward's loop breaks at the last step only); the spine takes the first ones
        for i in range(self.num_steps - 1):
            attn = self._uniform_attn(rows_t, q_pos, pad, ctx)
            rope = (n + i)[:, None].expand(b, k).reshape(-1)
            hidden = self.drafter(tok.reshape(-1), rope, attn, self.draft_kv)
            lp, ids = torch.log_softmax(self.drafter.compute_logits(hidden).float(), dim=-1).topk(k, dim=-1)
            total = (score[:, :, None] + lp.view(b, k, k)).view(b, k * k)
            score, best = total.topk(k, dim=-1)
            tok = ids.view(b, k * k).gather(1, best)
            cand_tok.append(ids.view(b, k * k))
            cand_score.append(total)
            spine.append(tok[:, 0])
        drafts = torch.stack(spine[: tree.spine], 1)
        extra = len(tree.parent) - 1 - tree.spine
        if extra:
            all_score, all_tok = torch.cat(cand_score, 1), torch.cat(cand_tok, 1)
            top = all_score.topk(min(extra, all_score.shape[1]), dim=-1).indices
            more = all_tok.gather(1, top)
            if more.shape[1] < extra:   # fewer candidates than nodes: repeat (the shape is what costs)
                more = more.repeat(1, -(-extra // more.shape[1]))[:, :extra]
            drafts = torch.cat([drafts, more], 1)
        return drafts

    def _tree_verify_dev(self, rows_t: torch.Tensor, window: torch.Tensor, ctx: int) -> torch.Tensor:
        """The target over a draft tree's ``N`` nodes (``[B, N]`` tokens, root first) under
        the tree mask (:func:`tree_mask`): node j's KV at key position n + j, its rope
        position n + depth(j). Returns ``[B, N]`` greedy tokens (node j's prediction of
        its child)."""
        assert self.tree_anc is not None and self.tree_depth is not None
        b, w = window.shape
        n = self.pool.seq_lens[rows_t]
        key_pos = n[:, None] + self._arange(w)[None, :]
        loc = self.pool.req_to_token[rows_t[:, None], key_pos]
        attn = AttnBatch(slots=self.pool.req_to_token[rows_t, :ctx], mask=tree_mask(self.tree_anc, n, ctx),
                         out_loc=loc.reshape(-1), q_index=None, tok_index=None, batch=b, q_len=w)
        rope = (n[:, None] + self.tree_depth[None, :]).reshape(-1)
        hidden = self.target(window.reshape(-1), rope, attn, self.kv)
        return torch.argmax(self.target.compute_logits(hidden).view(b, w, -1), dim=-1)

    def _spec_dev(self, rows_t: torch.Tensor, ctx: int, forced: torch.Tensor | None, steps: bool = True,
                  chain: bool | None = None) -> StepOut:
        pool, g = self.pool, self.gamma
        b = rows_t.shape[0]
        anchor = pool.last_token[rows_t]
        chain = self.chain if chain is None else chain and self.drafter is not None
        tree = chain and self.tree is not None
        if self.drafter is None:
            drafts = torch.full((b, g), self.mask_token, dtype=anchor.dtype, device=anchor.device)
        elif tree:
            drafts = self._tree_draft_dev(rows_t, ctx, steps)
        elif chain:
            drafts = self._chain_draft_dev(rows_t, ctx, steps)
        else:
            drafts = self._draft_dev(rows_t, ctx)
        m = self.accept_max
        n = pool.seq_lens[rows_t]
        if pool.token_ids is not None:
            # where the workload knows the tokens (a multi-turn turn's output, which the next
            # turn resends), the accepted path's drafts are those tokens: the KV the verify
            # keeps is theirs (the accept lengths are forced, so no plan changes)
            head = pool.forced(rows_t, n[:, None] + 1 + self._arange(m)[None, :], drafts[:, :m])
            drafts = torch.cat([head, drafts[:, m:]], 1)
        window = torch.cat([anchor[:, None], drafts], 1)
        if tree:
            greedy = self._tree_verify_dev(rows_t, window, ctx)
        else:
            greedy = self._verify_dev(rows_t, window, ctx, want_logits=False).greedy
        # the accepted path: drafts 1 .. accept_max in a row (a tree's spine)
        accept = (drafts[:, :m] == greedy[:, :m]).long().cumprod(1).sum(1)
        if forced is not None:
            accept = forced.clamp(0, m)
        bonus = pool.forced(rows_t, n + accept + 1, greedy.gather(1, accept[:, None]).squeeze(1))
        j = self._arange(self.window)[None, :]
        tokens = torch.cat([drafts, bonus[:, None]], 1)
        tokens = torch.where(j < accept[:, None], tokens, torch.where(j == accept[:, None], bonus[:, None], -1))
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
            self.pool.len_bound[r] += (min(max(forced_accept[i], 0), self.accept_max) + 1 if forced_accept is not None
                                       else self.accept_max + 1)
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
