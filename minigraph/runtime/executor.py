"""The executor: the only code that touches arrays.

Without a plan every tensor gets its own buffer (no reuse). With a plan, the executor
allocates ONE arena of `plan.arena_bytes` and makes every planned tensor a view at its
offset; kernels write into those views. Inputs, parameters, constants and graph outputs
get their own buffers ("unplanned"); a parameter's update is written over the parameter.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backend import array_module, resolve_device, to_numpy
from ..errors import DeviceError, FeedError, GraphError
from ..graph import Graph
from ..memory.plan import MemoryPlan
from ..ops.registry import KernelContext, get_op, workspace_of


@dataclass
class RunStats:
    """Bytes of one run. `measured_peak`: tracemalloc (NumPy) or the CuPy pool (GPU)."""
    arena_bytes: int
    unplanned_bytes: int
    workspace_bytes: int
    measured_peak: int | None
    seconds: float

    @property
    def expected_peak(self) -> int:
        return self.arena_bytes + self.unplanned_bytes + self.workspace_bytes


class Executor:
    """Runs `graph` (in `plan`'s schedule and arena, if given) on NumPy or CuPy."""

    def __init__(self, graph: Graph, plan: MemoryPlan | Any | None = None,
                 device: str = "auto", seed: int = 0):
        if plan is not None and hasattr(plan, "plan"):   # a MemoryReport is fine too
            plan = plan.plan
        self.graph, self.plan, self.seed = graph, plan, seed
        self.device = resolve_device(device)
        self.xp = array_module(self.device)
        if plan is not None:
            plan.validate()
            for name in plan.offsets:
                t = graph.tensor(name)
                if plan.offsets[name] % np.dtype(t.dtype).itemsize and self.device == "gpu":
                    raise DeviceError(f"tensor {name} at offset {plan.offsets[name]} is not "
                                      f"aligned for {t.dtype}; plan with alignment >= 8")
            self.order = [graph.node(n) for n in plan.schedule]
        else:
            self.order = list(graph.nodes)
        self.last_stats: RunStats | None = None
        self._consts = {t.name: self.xp.asarray(t.value) for t in graph.leaves("const")}

    # Feeds ---------------------------------------------------------------------------------
    def _check_feeds(self, feeds: Mapping[str, Any]) -> None:
        g = self.graph
        wanted = {t.name: t for t in g.leaves("input", "param")}
        unknown = sorted(set(feeds) - set(wanted))
        if unknown:
            raise FeedError(f"unknown feed {unknown[0]!r}: {g.name} takes "
                            f"{', '.join(sorted(wanted))}")
        missing = sorted(set(wanted) - set(feeds))
        if missing:
            hint = " (mg.init_params(graph) makes parameter values)" if any(
                wanted[m].kind == "param" for m in missing) else ""
            raise FeedError(f"missing feed {missing[0]!r} {wanted[missing[0]].spec()} "
                            f"{wanted[missing[0]].dtype}{hint}")
        for name, v in feeds.items():
            t = wanted[name]
            shape = tuple(getattr(v, "shape", np.shape(v)))
            dtype = np.dtype(getattr(v, "dtype", np.asarray(v).dtype))
            if shape != t.shape:
                raise FeedError(f"feed {name!r}: expected shape {list(t.shape)}, "
                                f"got {list(shape)}")
            if dtype != np.dtype(t.dtype):
                raise FeedError(f"feed {name!r}: expected dtype {t.dtype}, got {dtype} "
                                f"(convert with .astype('{t.dtype}'))")

    # Storage ------------------------------------------------------------------------------
    def _storage(self, feeds: Mapping[str, Any]) -> tuple[dict[str, Any], int, int]:
        """Arrays for every tensor: arena views for planned ones, own buffers otherwise."""
        xp, g, plan = self.xp, self.graph, self.plan
        arrays: dict[str, Any] = {}
        unplanned = 0
        for name, v in feeds.items():          # the executor's own copy: the "upload"
            a = xp.empty(g.tensors[name].shape, dtype=g.tensors[name].dtype)
            a[...] = xp.asarray(v)
            arrays[name] = a
            unplanned += a.nbytes
        arrays.update(self._consts)
        arena_bytes = 0
        if plan is not None:
            arena = xp.empty(plan.arena_bytes, dtype=np.uint8)
            arena_bytes = plan.arena_bytes
            for name, off in plan.offsets.items():
                t = g.tensors[name]
                arrays[name] = arena[off:off + t.nbytes].view(t.dtype).reshape(t.shape)
        for t in g.tensors.values():
            if t.name in arrays:
                continue
            if t.alias_of is not None:
                arrays[t.name] = arrays[t.alias_of]
            else:
                arrays[t.name] = xp.empty(t.shape, dtype=t.dtype)
                if plan is not None:   # graph outputs are not planned
                    unplanned += arrays[t.name].nbytes
        return arrays, arena_bytes, unplanned

    # Running ------------------------------------------------------------------------------
    def run(self, feeds: Mapping[str, Any] | None = None, *, step: int = 0,
            measure: bool = False, **kw: Any) -> dict[str, np.ndarray]:
        """Run once. Feeds by name (a dict and/or keywords); returns the graph outputs as
        host arrays. `step` keys dropout's random stream; `measure` records the peak."""
        feeds = {**(feeds or {}), **kw}
        self._check_feeds(feeds)
        measuring = measure and self.device == "cpu"
        if measuring:
            tracemalloc.start()
            tracemalloc.reset_peak()
        pool = self.xp.get_default_memory_pool() if measure and self.device == "gpu" else None
        t0 = time.perf_counter()
        try:
            arrays, arena_bytes, unplanned = self._storage(feeds)
            workspace = self._execute(arrays, step)
            if self.device == "gpu":
                self.xp.cuda.Device().synchronize()
            seconds = time.perf_counter() - t0
            peak = None
            if measuring:
                peak = tracemalloc.get_traced_memory()[1]
            elif pool is not None:
                peak = pool.total_bytes()
        finally:
            if measuring:
                tracemalloc.stop()
        if self.plan is None:
            unplanned = sum(a.nbytes for n, a in arrays.items()
                            if self.graph.tensors[n].kind != "const"
                            and self.graph.tensors[n].alias_of is None)
        self.last_stats = RunStats(arena_bytes, unplanned, workspace, peak, seconds)
        return {o: to_numpy(arrays[o]).copy() for o in self.graph.outputs}

    def _execute(self, arrays: dict[str, Any], step: int) -> int:
        """Run the schedule; returns the largest declared workspace of any op."""
        most = 0
        for node in self.order:
            d = get_op(node.op)
            ctx = KernelContext(self.xp, node.name, step, self.seed)
            try:
                d.forward(ctx, node.attr, [arrays[i] for i in node.inputs],
                          [arrays[o] for o in node.outputs])
            except Exception as e:
                raise GraphError(f"kernel of {node.op} failed at node {node.name} "
                                 f"({', '.join(node.inputs)}): {e}") from e
            most = max(most, workspace_of(self.graph, node), ctx.workspace_bytes)
        return most


def init_params(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Initial values of every parameter of `graph`, from each parameter's `init`."""
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
