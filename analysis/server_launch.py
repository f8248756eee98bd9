"""A server log's start-up lines: the launch arguments and the limits the scheduler ran with.

What each SGLang version logs at start-up (each checked in that version's wheel):

- the launch arguments, ``server_args=`` then a Python repr: 0.2.x-0.5.x ``logger.info(f"{server_args=}")``
  (0.2.9-0.4.0 ``srt/server.py`` ``launch_server``, 0.4.6-0.4.9 ``srt/entrypoints/engine.py``), the
  dataclass's repr ``ServerArgs(model_path='...', tp_size=1, ...)``; 0.5.23
  ``entrypoints/engine.py`` ``_server_args_for_logging``: ``ServerArgs.resolved_dict()``, a dict's
  repr ``{'model_path': '...', ...}``. 0.2.x's logger wrote the message alone (no prefix).
- the scheduler's limits, logged by TP rank 0 of each scheduler once its pool is sized: 0.2.9
  ``srt/managers/tp_worker.py`` ``ModelTpServer.__init__`` (``[gpu=0] max_total_num_tokens=N,
  max_prefill_tokens=N, max_running_requests=N, context_len=N``), 0.3.x-0.4.0 ``scheduler.py``
  ``Scheduler.__init__`` (the same four), 0.4.6 on with ``chunked_prefill_size=`` after the pool,
  0.4.9 on with ``available_gpu_mem=`` last (0.5.23 ``managers/scheduler.py``
  ``init_memory_pool_and_cache``).

With pipeline parallelism every stage's first TP rank logs its limits line (prefix ``PP<p>``):
0.4.9 sized each stage's pool on its own, 0.5.23 syncs the stages to their minimum
(``mem_cache/kv_cache_configurator.py`` ``_apply_token_constraints``). The first stage's line
is read, as the first stage's batch lines are (``analysis.server_log.first_pipeline_stage``).
A log of several launches gives the last one (the runs after it measured it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from specsched.sim.arg_text import python_repr_args

_LIMITS = re.compile(r"\bmax_total_num_tokens=(?P<pool>\d+),\s*(?:chunked_prefill_size=(?P<chunk>-?\d+|None),\s*)?"
                     r"max_prefill_tokens=(?P<prefill>\d+),\s*max_running_requests=(?P<running>\d+)")
"""The scheduler's limits line, every version's (module docstring): pool, chunk (0.4.6 on),
prefill budget, running limit (each DP-attention rank's)."""
_STAGE = re.compile(r"\bPP(\d+)\b")
_SERVER_ARGS = "server_args="


def server_args_text(text: str) -> dict[str, object]:
    """The launch arguments of a ``server_args=`` text (the part after ``=``): a dataclass's
    or a dict's repr (module docstring), read by :func:`sim.arg_text.python_repr_args`; values
    that are not Python literals are left out, text that is neither form gives nothing."""
    return python_repr_args(text)


@dataclass
class Launch:
    """The start-up lines of one server log, taken line by line (:meth:`take`), read as
    /server_info (:meth:`server_info`). Keeps the last ``server_args=`` text and, per pipeline
    stage, the last limits line."""

    server_args: str | None = None
    limits: dict[int, re.Match[str]] = field(default_factory=dict)
    """Pipeline stage (0 without pipeline parallelism) -> its last limits line's match."""

    def take(self, text: str) -> None:
        """Keep ``text`` (a logged line) if it is a start-up line."""
        m = _LIMITS.search(text)
        if m is not None:
            stage = _STAGE.search(text, 0, m.start())
            self.limits[int(stage[1]) if stage else 0] = m
            return
        k = text.find(_SERVER_ARGS)
        if k >= 0 and (k == 0 or not (text[k - 1].isalnum() or text[k - 1] == "_")):
            self.server_args = text[k + len(_SERVER_ARGS):].strip()

    def server_info(self) -> dict[str, object] | None:
        """The start-up lines as the ``server_info`` bench_serving embeds from 0.5.5 on
        (/server_info: the server arguments, the scheduler's ``max_total_num_tokens``, and, per
        DP rank, the running limit it runs with,
        ``internal_states[0].effective_max_running_requests_per_dp``), so that
        ``analysis.from_bench`` reads it as it reads a line's. The limits line's
        ``chunked_prefill_size`` (0.4.6 on) and ``max_prefill_tokens`` are the scheduler's
        resolved values and stand over the arguments'. None when the log has neither line (it
        started after them)."""
        info: dict[str, object] = dict(server_args_text(self.server_args)) if self.server_args is not None else {}
        if self.limits:
            m = self.limits[min(self.limits)]   # the first stage's
            info["max_total_num_tokens"] = int(m["pool"])
            if m["chunk"] is not None and m["chunk"] != "None":
                info["chunked_prefill_size"] = int(m["chunk"])
            info["max_prefill_tokens"] = int(m["prefill"])
            info["internal_states"] = [{"effective_max_running_requests_per_dp": int(m["running"])}]
        return info or None
