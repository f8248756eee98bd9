"""specsched.runtime: the scheduler's batch plans executed with PyTorch and measured.

Modules (each one concept):

- :mod:`runtime.device`: everything device-specific (backend detection, the few streams,
  host-blocking vs queued waits, pinned result copies, the host-sync counter, timing
  events); :mod:`runtime.events` (CPU stand-ins, the event ring) and
  :mod:`runtime.graphs` (graph capture/replay by batch-size bucket) beside it.
- The model, one concept per module (:mod:`runtime.model` re-exports the public names):
  :mod:`runtime.model_config` (shapes, presets, roofline estimate), :mod:`runtime.layers`
  (layers, attention, the Llama-style proxy), :mod:`runtime.kv_cache` (KV buffers and the
  req_to_token pool), :mod:`runtime.runner` (requests, extend, inject, graphs),
  :mod:`runtime.spec_cycle` (decode, verify, the speculative cycle).
- :mod:`runtime.engine`: the simulator's loop executed on the device.
- The profiler (``specsched profile``): :mod:`runtime.profiler` (entry point, CLI, YAML),
  :mod:`runtime.profile_harness`, :mod:`runtime.profile_gpu`, :mod:`runtime.profile_host`,
  :mod:`runtime.profile_fit`, :mod:`runtime.profile_provenance`.
- :mod:`runtime.sync_checker`: records host-syncing torch ops (CPU CI) and wraps
  ``torch.cuda.set_sync_debug_mode`` (CUDA).

Importing this package imports nothing heavy; the submodules need torch (the ``runtime``
extra).
"""
