"""Values to run a graph with: initial parameters and random inputs, fixed by a seed.

Both read only the graph (each parameter's `init`, each input's shape and dtype), so the
same seed gives the same arrays in a lesson, a test, a benchmark and the grader.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from .backend import cupy_module
from .errors import AllocationError
from .graph import Graph, fmt_bytes


def init_params(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Initial values of every parameter of `graph`, from each parameter's `init`."""
    check_fits({t.name: t.nbytes for t in graph.leaves("param")}, "cpu",
               f"the parameters of graph {graph.name!r}")
    rng = np.random.default_rng(seed)
    out = {}
    for t in graph.leaves("param"):
        init, scale = t.init if t.init is not None else ("normal", None)
        if not isinstance(init, str):
            out[t.name] = np.asarray(init, dtype=t.dtype).copy()
        elif init == "zeros":
            out[t.name] = np.zeros(t.shape, t.dtype)
        elif init == "ones":
            out[t.name] = np.ones(t.shape, t.dtype)
        else:
            fan_in = int(np.prod(t.shape[:-1])) if len(t.shape) > 1 else t.shape[0]
            s = scale if scale is not None else 1.0 / np.sqrt(max(fan_in, 1))
            draw = rng.standard_normal(t.shape) if init == "normal" else \
                rng.uniform(-1, 1, t.shape)
            out[t.name] = (draw * s).astype(t.dtype)
    return out


def random_feeds(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Every input and parameter of `graph`: inputs ~ N(0, 1), parameters from `init_params`.

    Integer inputs are labels or indices, so they get valid ones: values below the last
    axis of the activations their readers also take (the logits' classes), else 0 or 1.
    """
    check_fits({t.name: t.nbytes for t in graph.leaves("input", "param")}, "cpu",
               f"the inputs and parameters of graph {graph.name!r}")
    rng = np.random.default_rng(seed)
    out = {}
    for t in graph.leaves("input"):
        if np.dtype(t.dtype).kind in "iu":
            out[t.name] = rng.integers(0, _classes(graph, t.name), t.shape).astype(t.dtype)
        else:
            out[t.name] = rng.standard_normal(t.shape).astype(t.dtype)
    return {**out, **init_params(graph, seed)}


def _classes(graph: Graph, name: str) -> int:
    """The last axis of the activations read next to integer input `name` (default 2)."""
    return max((graph.tensors[c].shape[-1] for n in graph.consumers[name]
                for c in graph.node(n).inputs if graph.tensors[c].kind == "activation"
                and graph.tensors[c].shape), default=2)


# ---------------------------------------------------------------------------------------
# Will it fit? Checked before anything is allocated
# ---------------------------------------------------------------------------------------

def memory_limit(device: str) -> int:
    """Bytes a run may allocate on `device`: all of the GPU's memory, or the host's RAM.

    The rule is "never more than the machine has": a run above it could only fail
    midway (NumPy's MemoryError, or the kernel killing the process), so it is refused
    before the first allocation. Below it a run may still fail when other programs hold
    memory; that failure is an AllocationError too (see `Executor`)."""
    if device == "gpu":
        cp = cupy_module()
        if cp is not None:
            return int(cp.cuda.Device().mem_info[1])
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):   # not POSIX: no limit known
        return 2**63 - 1


def check_fits(sizes: Mapping[str, int], device: str, what: str) -> None:
    """AllocationError unless the buffers `sizes` (name -> bytes), allocated together,
    fit in `memory_limit(device)`; the message names the largest buffer and the total."""
    total = sum(sizes.values())
    limit = memory_limit(device)
    if total <= limit or not sizes:
        return
    big = max(sizes, key=lambda k: sizes[k])
    raise AllocationError(
        f"{what} need {total:,} bytes ({fmt_bytes(total)}) on the {device}, which has "
        f"{limit:,} ({fmt_bytes(limit)}); the largest buffer is {big}: {sizes[big]:,} bytes "
        f"({fmt_bytes(sizes[big])})")
