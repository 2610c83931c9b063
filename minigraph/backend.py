"""NumPy or CuPy: the one place that decides which array module (`xp`) kernels get."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .errors import AllocationError, DeviceError


def cupy_module() -> Any | None:
    """CuPy if it imports and sees a CUDA device, else None (CuPy is an optional extra)."""
    try:
        import cupy  # type: ignore
    except Exception:
        return None
    try:
        return cupy if cupy.cuda.is_available() else None
    except Exception:
        return None


def gpu_available() -> bool:
    """True when CuPy imports and sees a CUDA device: what `resolve_device("auto")` and
    the tests that need a GPU ask before choosing it."""
    return cupy_module() is not None


def on_cupy(xp: Any) -> bool:
    """True when the array module is CuPy itself (not NumPy, nor a stand-in for CuPy): a
    kernel takes its GPU path (a fused kernel, cuBLAS) only then."""
    return getattr(xp, "__name__", "") == "cupy"


def resolve_device(device: str = "auto") -> str:
    """"auto" means the GPU only when CuPy sees one (or MINIGRAPH_DEVICE says so)."""
    if device == "auto":
        device = os.environ.get("MINIGRAPH_DEVICE", "auto")
    if device == "auto":
        return "gpu" if gpu_available() else "cpu"
    if device not in ("cpu", "gpu"):
        raise DeviceError(f"device must be 'auto', 'cpu' or 'gpu', not {device!r}")
    if device == "gpu" and not gpu_available():
        raise DeviceError("device='gpu' but CuPy with a CUDA device is not available; "
                          "pip install 'minigraph[gpu]' on a machine with an NVIDIA GPU")
    return device


def array_module(device: str) -> Any:
    return cupy_module() if device == "gpu" else np


def empty(xp: Any, name: str, shape: Any, dtype: Any) -> Any:
    """`xp.empty`, with the device running out of memory as an AllocationError naming the
    buffer: the check before the run counts the machine's memory, other programs may hold
    part of it."""
    try:
        return xp.empty(shape, dtype=dtype)
    except MemoryError:
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        raise AllocationError(f"out of memory allocating {name}: {nbytes:,} bytes") from None


def to_numpy(a: Any) -> np.ndarray:
    """A host copy of an array from either module."""
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else np.asarray(a)


def upload(xp: Any, dst: Any, value: Any) -> None:
    """Copy a feed into its device buffer `dst`. A host array goes straight across
    (`set`): `xp.asarray` would first make a device temporary of the same size."""
    if xp is np or not isinstance(value, np.ndarray):
        dst[...] = xp.asarray(value)
    else:
        dst.set(np.ascontiguousarray(value, dtype=dst.dtype))


class PoolMeter:
    """Bytes that CuPy's memory pool hands out while the meter is on (`with PoolMeter():`):
    live now and the peak since `reset_peak()`, from a memory hook that sees every
    allocation and release [CuPy CUDA]. `requested` counts the bytes asked for; `rounded`
    the bytes the pool really reserves for them (a multiple of 512)."""

    def __init__(self) -> None:
        import cupy  # type: ignore
        meter = self

        class _Hook(cupy.cuda.memory_hook.MemoryHook):
            name = "minigraph-pool-meter"

            def malloc_postprocess(self, **kw: Any) -> None:
                meter._malloc(kw["mem_ptr"], kw["size"], kw["mem_size"])

            def free_postprocess(self, **kw: Any) -> None:
                meter._free(kw["mem_ptr"])

        self._hook = _Hook()
        self._live: dict[int, tuple[int, int]] = {}
        self.requested = self.rounded = 0
        self.peak_requested = self.peak_rounded = 0
        self.sizes: list[int] = []          # every allocation's requested bytes, in order

    def __enter__(self) -> PoolMeter:
        self._hook.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._hook.__exit__(*exc)

    def now(self) -> int:
        return self.requested

    def peak(self) -> int:
        return self.peak_requested

    def reset_peak(self) -> None:
        self.peak_requested = self.requested

    @property
    def allocations(self) -> int:
        return len(self.sizes)

    def _malloc(self, ptr: int, size: int, mem_size: int) -> None:
        self.sizes.append(size)
        self._live[ptr] = (size, mem_size)
        self.requested += size
        self.rounded += mem_size
        self.peak_requested = max(self.peak_requested, self.requested)
        self.peak_rounded = max(self.peak_rounded, self.rounded)

    def _free(self, ptr: int) -> None:
        size, mem_size = self._live.pop(ptr, (0, 0))
        self.requested -= size
        self.rounded -= mem_size
