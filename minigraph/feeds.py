"""Values to run a graph with: initial parameters and random inputs, fixed by a seed.

Both read only the graph (each parameter's `init`, each input's shape and dtype), so the
same seed gives the same arrays in a lesson, a test, a benchmark and the grader.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from .backend import cupy_module, to_numpy
from .errors import AllocationError, FeedError
from .graph import Graph, fmt_bytes
from .ops.nn import check_index_values
from .ops.registry import index_bounds


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


# --- checking feeds before a run ------------------------------------------------------------

def index_feeds(graph: Graph) -> dict[str, list[tuple[int, str]]]:
    """The fed tensors whose values index something (labels, ids: `index_inputs` of the
    ops that read them): name -> [(bound, reading node)]."""
    fed = {t.name for t in graph.leaves("input", "param")}
    out: dict[str, list[tuple[int, str]]] = {}
    for node in graph.nodes:
        for i, bound in index_bounds(graph, node).items():
            if node.inputs[i] in fed:
                out.setdefault(node.inputs[i], []).append((bound, node.name))
    return out


def check_index_feed(graph: Graph, index: Mapping[str, list[tuple[int, str]]], name: str,
                     value: Any) -> None:
    """FeedError unless every value of feed `name` lies under the bound of each node that
    indexes with it; the message names the feed, the node, the value and its position.
    Done on the host, before the upload: a kernel's own check would read the device back."""
    readers = index.get(name)
    if not readers:
        return
    host = np.asarray(to_numpy(value))
    for bound, node in readers:
        what = "id" if graph.node(node).op.startswith("embedding") else "label"
        try:
            check_index_values(np, host, bound, what)
        except IndexError as e:
            raise FeedError(f"feed {name!r} (read by node {node}): {e}") from None


def check_feeds(graph: Graph, feeds: Mapping[str, Any], partial: bool = False) -> None:
    """FeedError unless `feeds` holds exactly the graph's inputs and parameters (some of
    them with `partial`, as `step()` takes), each of its shape and dtype: a feed is copied
    into a buffer of that shape and dtype, so anything else would be broadcast or cast
    silently. The message names the feed and what was expected."""
    if not isinstance(feeds, Mapping):
        raise FeedError(f"feeds are a dict from input name to array, not "
                        f"{type(feeds).__name__}")
    wanted = {t.name: t for t in graph.leaves("input", "param")}
    unknown = sorted(set(feeds) - set(wanted), key=str)
    if unknown:
        raise FeedError(f"unknown feed {unknown[0]!r}: {graph.name} takes "
                        f"{', '.join(sorted(wanted))}")
    missing = [] if partial else sorted(set(wanted) - set(feeds))
    if missing:
        hint = " (mg.init_params(graph) makes parameter values)" if any(
            wanted[m].kind == "param" for m in missing) else ""
        raise FeedError(f"missing feed {missing[0]!r} {wanted[missing[0]].spec()} "
                        f"{wanted[missing[0]].dtype}{hint}")
    for name, v in feeds.items():
        t = wanted[name]
        try:
            shape = tuple(v.shape) if hasattr(v, "shape") else np.shape(v)
            dtype = np.dtype(v.dtype) if hasattr(v, "dtype") else np.asarray(v).dtype
        except (TypeError, ValueError):    # ragged nested lists: NumPy cannot make an array
            raise FeedError(f"feed {name!r}: not an array (ragged lists?); expected "
                            f"shape {list(t.shape)} {t.dtype}") from None
        if shape != t.shape:
            raise FeedError(f"feed {name!r}: expected shape {list(t.shape)}, "
                            f"got {list(shape)}")
        if dtype != np.dtype(t.dtype):
            raise FeedError(f"feed {name!r}: expected dtype {t.dtype}, got {dtype} "
                            f"(convert with .astype('{t.dtype}'))")
