"""specsched.runtime: the scheduler's batch plans executed with PyTorch and measured.

Modules (each one concept):

- :mod:`runtime.device`: everything device-specific (backend detection, the few streams,
  the event ring, host-blocking vs queued waits, pinned result copies, the host-sync
  counter, timing events, graph capture/replay by batch-size bucket).
- :mod:`runtime.model`: a Llama-style decoder proxy with a paged KV cache (SGLang's
  req_to_token_pool + token_to_kv_pool), extend / decode / verify forwards, a block drafter
  and the speculative cycle; model-size presets.
- :mod:`runtime.sync_checker`: records host-syncing torch ops (CPU CI) and wraps
  ``torch.cuda.set_sync_debug_mode`` (CUDA).

Importing this package imports nothing heavy; the submodules need torch (the ``runtime``
extra).
"""
