"""NumPy or CuPy: the one place that decides which array module (`xp`) kernels get."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .errors import DeviceError


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
    return cupy_module() is not None


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


def to_numpy(a: Any) -> np.ndarray:
    """A host copy of an array from either module."""
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else np.asarray(a)
