"""Which committed tokens the server streams to the client at once: ``--stream-interval``.

SGLang 0.5.23 ``managers/scheduler_components/output_streamer.py`` ``OutputStreamer.accept``
decides, after each forward's results, whether a streaming request's new tokens go out now:

- at the default interval of 1, every step's tokens at once;
- otherwise the first token at once (``send_token_offset == 0``), then whenever at least
  ``stream_interval`` tokens are unsent (``len(output_ids) - send_token_offset``; a
  speculative step can append several and pass a multiple of the interval without landing on
  it), and always at the finish.

Tokens held back reach the client with the next chunk that goes out, so a client sees fewer,
larger chunks: bench_serving's ITL (one gap per chunk, or the chunk's gap split over its
tokens, by backend: sim/bench_serving.py) and the chunks table change; TTFT, TPOT, E2E and
throughput do not (the first token goes out at once, the last at the finish). The choice sits
in the scheduler's result processing, so the simulator and the runtime stream alike.

Not modelled: the host time a larger interval saves in ``stream_output`` (the result
processing's per-request term, ``host.process_per_req_s``, is charged per step either way).
"""

from __future__ import annotations

from typing import Any


def streamed(reqs: dict[int, Any], rids: list[int], n_tokens: list[int], finished: list[bool],
             interval: int) -> tuple[list[int], list[int], list[bool]]:
    """The deliveries of one forward's results that go out under ``interval`` (SGLang
    ``OutputStreamer.accept``), each carrying every token of its request not yet sent.

    Args:
        reqs: rid -> request (:class:`sim.request.Req`); ``output_len`` already counts the
            step's tokens, ``sent_len`` (SGLang ``send_token_offset``) is advanced here.
        rids, n_tokens, finished: the step's committed tokens per request (same length).
        interval: ``server.stream_interval`` (>= 1).

    Returns:
        (rids, n_tokens, finished) of the chunks sent now, in the same order; ``n_tokens``
        counts the held-back tokens too, so the tokens a request is sent over its life equal
        those it committed.
    """
    out_rid: list[int] = []
    out_n: list[int] = []
    out_fin: list[bool] = []
    for rid, fin in zip(rids, finished, strict=True):
        r = reqs[rid]
        unsent = r.output_len - r.sent_len
        if fin or interval == 1 or unsent >= interval or (r.sent_len == 0 and unsent > 0):
            out_rid.append(rid)
            out_n.append(unsent)
            out_fin.append(fin)
            r.sent_len = r.output_len
    return out_rid, out_n, out_fin
