"""Find host syncs: torch ops that make the host wait for the device.

A host sync inside the overlap loop's launch path stalls the host until every queued
kernel finishes, so the GPU idles while the host prepares the next step: exactly the
effect specsched models. The loop issues such waits on purpose (``HostBlock`` ops); any
other sync is a bug. Ops that block (hip-vs-cuda.md item 8): ``repeat_interleave``
without ``output_size`` (reads the repeats back to size its output), ``.item()`` /
``bool()`` / ``int()`` of a device tensor (``aten._local_scalar_dense``), ``nonzero``
(and ``torch.where(cond)``, ``argwhere``), ``masked_select``, ``unique``, ``torch.equal``,
``.tolist()``, blocking copies to the CPU, and (on GPU) copies from pageable host
memory to the device (including ``t[i] = scalar`` on a device tensor).

Two tools:

- :class:`SyncChecker` (any backend, made for CPU CI): a ``TorchDispatchMode`` that
  records those aten ops, plus a ``TorchFunctionMode`` for host reads that never reach
  the dispatcher on CPU (``.cpu()``, ``.tolist()``, ``.numpy()``, ``.to("cpu")`` of a CPU
  tensor are no-ops there, but would be device-to-host copies if the tensor lived on a
  GPU). On CPU every such host read is flagged (the checker cannot know which CPU tensor
  stands for a device tensor); pass ``cpu_reads=False`` to ignore them.
- :func:`cuda_sync_debug`: ``torch.cuda.set_sync_debug_mode`` for a block (CUDA; a
  prototype API, unverified on ROCm per hip-vs-cuda.md item 8).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Literal

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten

_ALWAYS = {
    aten._local_scalar_dense.default: "item()/bool()/int(): reads one value back",
    aten.nonzero.default: "nonzero: output size depends on the data",
    aten.masked_select.default: "masked_select: output size depends on the data",
    aten._unique2.default: "unique: output size depends on the data",
    aten.unique_consecutive.default: "unique_consecutive: output size depends on the data",
    aten.unique_dim.default: "unique_dim: output size depends on the data",
    aten.equal.default: "equal: returns a host bool",
    aten.is_nonzero.default: "is_nonzero: returns a host bool",
}

_HOST_READS = {
    torch.Tensor.cpu: "Tensor.cpu",
    torch.Tensor.tolist: "Tensor.tolist",
    torch.Tensor.numpy: "Tensor.numpy",
}


class HostSyncError(AssertionError):
    """Raised by :meth:`SyncChecker.assert_none` (or at the op with ``raise_on_sync``)."""


def _dev(x: Any) -> str:
    return x.device.type if isinstance(x, torch.Tensor) else "?"


def _copy_detail(src: Any, dst: str, non_blocking: bool) -> str | None:
    """Why a copy from ``src`` to a ``dst`` device type blocks the host, or None."""
    s = _dev(src)
    gpu = ("cpu", "meta", "?")
    if dst == "cpu" and s not in gpu and not non_blocking:
        return f"copy {s} -> cpu (blocking)"
    if s == "cpu" and dst not in gpu and not (non_blocking and src.is_pinned()):
        # also ``t[i] = 0`` on a device tensor: a pageable 0-dim CPU source; graph capture rejects it
        return f"copy cpu -> {dst} from pageable memory (synchronous; use pinned + non_blocking, or fill_)"
    return None


class _Dispatch(TorchDispatchMode):
    def __init__(self, owner: SyncChecker) -> None:
        super().__init__()
        self.owner = owner

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        detail = None
        if func is aten.repeat_interleave.Tensor:
            if kwargs.get("output_size") is None:
                detail = "repeat_interleave without output_size: reads the repeats back"
        elif func in _ALWAYS:
            detail = f"{_ALWAYS[func]} ({_dev(args[0]) if args else '?'} tensor)"
        elif func is aten._to_copy.default:
            dst = kwargs.get("device")
            detail = _copy_detail(args[0], torch.device(dst).type if dst is not None else _dev(args[0]), bool(kwargs.get("non_blocking")))
        elif func is aten.copy_.default:
            nb = args[2] if len(args) > 2 else kwargs.get("non_blocking", False)
            detail = _copy_detail(args[1], _dev(args[0]), bool(nb))
        if detail is not None:
            self.owner._record(str(func), detail)
        return func(*args, **kwargs)


class _Function(TorchFunctionMode):
    def __init__(self, owner: SyncChecker) -> None:
        super().__init__()
        self.owner = owner

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        if self.owner.cpu_reads and args and isinstance(args[0], torch.Tensor) and args[0].device.type == "cpu":
            name = _HOST_READS.get(func)
            if name is None and func is torch.Tensor.to:
                target = _to_target(args[1:], kwargs)
                if target is not None and target.type == "cpu":
                    name = "Tensor.to(cpu)"
            if name is not None:
                self.owner._record(name, f"host read of a tensor (a device-to-host copy on GPU), shape {tuple(args[0].shape)}")
        return func(*args, **kwargs)


def _to_target(args: tuple, kwargs: dict) -> torch.device | None:
    dev = kwargs.get("device")
    if dev is None and args:
        a = args[0]
        if isinstance(a, (str, torch.device)):
            dev = a
        elif isinstance(a, torch.Tensor):
            dev = a.device
    return torch.device(dev) if dev is not None else None


class SyncChecker:
    """Context manager recording host-syncing torch ops.

    Usage::

        with SyncChecker() as chk:
            runner.spec_cycle(rows)
        assert chk.events == []

    Args:
        cpu_reads: also flag ``.cpu()``/``.tolist()``/``.numpy()``/``.to("cpu")`` of CPU
            tensors (see module docstring).
        raise_on_sync: raise :class:`HostSyncError` at the first syncing op instead of
            recording it.

    Attributes:
        events: ``(op, detail)`` in order, e.g.
            ``("aten.repeat_interleave.Tensor", "repeat_interleave without output_size: ...")``;
            host reads on CPU appear as ``("Tensor.cpu", ...)`` etc.
    """

    def __init__(self, *, cpu_reads: bool = True, raise_on_sync: bool = False) -> None:
        self.cpu_reads = cpu_reads
        self.raise_on_sync = raise_on_sync
        self.events: list[tuple[str, str]] = []
        self._modes: tuple[_Function, _Dispatch] | None = None

    def _record(self, op: str, detail: str) -> None:
        if self.raise_on_sync:
            raise HostSyncError(f"host sync: {op}: {detail}")
        self.events.append((op, detail))

    def __enter__(self) -> SyncChecker:
        f, d = _Function(self), _Dispatch(self)
        f.__enter__()
        try:
            d.__enter__()
        except BaseException:
            f.__exit__(None, None, None)
            raise
        self._modes = (f, d)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._modes is not None
        f, d = self._modes
        self._modes = None
        try:
            d.__exit__(*exc)
        finally:
            f.__exit__(*exc)

    def ops(self) -> list[str]:
        """The op names of :attr:`events`."""
        return [op for op, _ in self.events]

    def assert_none(self) -> None:
        """Raise :class:`HostSyncError` listing the recorded syncs, if any."""
        if self.events:
            lines = "\n".join(f"  {op}: {d}" for op, d in self.events)
            raise HostSyncError(f"{len(self.events)} host sync(s):\n{lines}")


@contextlib.contextmanager
def cuda_sync_debug(mode: Literal["warn", "error"] = "error") -> Iterator[None]:
    """Run the block under ``torch.cuda.set_sync_debug_mode(mode)``, restoring the old mode.

    ``"error"`` turns every synchronizing CUDA call made by an op (``.item()``, ``nonzero``,
    ``repeat_interleave`` without ``output_size``, blocking copies) into a RuntimeError;
    ``"warn"`` emits a warning. Explicit syncs (``Event.synchronize()``,
    ``torch.cuda.synchronize()``) are not flagged.

    Raises:
        RuntimeError: CUDA is not available.
    """
    if not torch.cuda.is_available():
        raise RuntimeError("cuda_sync_debug needs CUDA; use SyncChecker on CPU")
    prev = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode(mode)
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(prev)
