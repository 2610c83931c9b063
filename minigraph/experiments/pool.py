"""The real thing: run a graph op by op on the GPU with CuPy's memory pool (no arena) and
read what the pool reserved (`total_bytes`) and handed out (`used_bytes`) after each op,
beside the `CupyPoolAllocator` simulation of the same trace.

No arena here: each output is a fresh `cupy.empty`, and each tensor is dropped after its
last reader, so the pool sees exactly the alloc/free events of `trace_from_schedule`
(plus the temporaries kernels make themselves, which the simulation does not know about).
Without CuPy and a CUDA device it raises `DeviceError` at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..backend import cupy_module
from ..errors import DeviceError
from ..feeds import random_feeds
from ..graph import Graph, fmt_bytes
from ..memory.liveness import liveness
from ..memory.online.base import AllocatorResult
from ..memory.online.caching import CupyPoolAllocator
from ..memory.orders import schedule as make_schedule
from ..runtime.kernels import kernel_context, run_kernel


@dataclass
class PoolMeasurement:
    """Per step: bytes the pool handed out (`used`) and held (`total`) after that op, less
    what inputs, parameters and graph outputs held before the first op (`base_*`); and
    what the `CupyPoolAllocator` simulation of the same events predicts after each op."""
    schedule: tuple[str, ...]
    used: list[int]
    total: list[int]
    base_used: int
    base_total: int
    predicted_used: list[int]
    predicted_total: list[int]
    predicted: AllocatorResult = field(repr=False)

    @property
    def peak_used(self) -> int:
        return max(self.used, default=0)

    @property
    def peak_total(self) -> int:
        return max(self.total, default=0)

    def summary(self) -> str:
        p = self.predicted
        return (f"CuPy pool, {len(self.schedule)} ops: peak used {fmt_bytes(self.peak_used)}, "
                f"peak reserved {fmt_bytes(self.peak_total)}; simulated cupy-pool: peak "
                f"allocated {fmt_bytes(p.peak_allocated)}, reserved "
                f"{fmt_bytes(p.peak_reserved)}")

    def __repr__(self) -> str:
        return f"PoolMeasurement({self.summary()})"


def measure_cupy_pool(graph: Graph, schedule: Sequence[str] | None = None, *,
                      feeds: Mapping[str, Any] | None = None, order: str = "program",
                      seed: int = 0) -> PoolMeasurement:
    """Run `graph` op by op on a fresh `cupy.cuda.MemoryPool` (the class of CuPy's default
    pool, new so that nothing is cached from before) and record the pool after each op.
    Raises DeviceError without CuPy or a CUDA device."""
    cp = cupy_module()
    if cp is None:
        raise DeviceError("measure_cupy_pool needs CuPy and a CUDA device; neither is "
                          "visible here (the simulators in minigraph.memory.online run "
                          "anywhere)")
    sched = tuple(schedule) if schedule is not None else tuple(make_schedule(graph, order))
    live = liveness(graph, sched, alignment=1)
    feeds = dict(feeds) if feeds is not None else random_feeds(graph, seed)
    pool = cp.cuda.MemoryPool()
    used: list[int] = []
    total: list[int] = []
    with cp.cuda.using_allocator(pool.malloc):
        arrays: dict[str, Any] = {n: cp.asarray(v) for n, v in feeds.items()}
        for t in graph.leaves("const"):
            arrays[t.name] = cp.asarray(t.value)
        for o in graph.outputs:          # graph outputs are not part of the trace
            t = graph.tensors[o]
            if t.alias_of is None and o not in arrays:
                arrays[o] = cp.empty(t.shape, dtype=t.dtype)
        cp.cuda.Device().synchronize()
        base_used, base_total = pool.used_bytes(), pool.total_bytes()
        ends: dict[int, list[str]] = {}
        for iv in live.planned():
            ends.setdefault(iv.end, []).append(iv.name)
        for step, name in enumerate(sched):
            node = graph.node(name)
            for o in node.outputs:
                t = graph.tensors[o]
                if o in arrays:
                    continue
                arrays[o] = arrays[t.alias_of] if t.alias_of else \
                    cp.empty(t.shape, dtype=t.dtype)
            run_kernel(node, [arrays[i] for i in node.inputs],
                       [arrays[o] for o in node.outputs], kernel_context(cp, node, 0, seed))
            for n in ends.get(step, ()):
                arrays.pop(n, None)
            cp.cuda.Device().synchronize()
            used.append(pool.used_bytes() - base_used)
            total.append(pool.total_bytes() - base_total)
        arrays.clear()
    pool.free_all_blocks()
    sim = CupyPoolAllocator()
    pred_used, pred_total = [], []
    for events in _events_by_step(live):
        for ev in events:
            sim.step(ev)
        pred_used.append(sim.allocated)
        pred_total.append(sim.reserved)
    return PoolMeasurement(sched, used, total, base_used, base_total, pred_used, pred_total,
                           sim.result())


def _events_by_step(live) -> list[list[tuple[str, str, int]]]:
    """The events of `trace_from_schedule`, grouped by the step whose op makes them."""
    out: list[list[tuple[str, str, int]]] = [[] for _ in range(live.steps)]
    planned = [iv for iv in live.planned() if iv.bytes]
    for iv in planned:
        out[iv.start].append(("alloc", iv.name, iv.bytes))
    for iv in planned:
        out[iv.end].append(("free", iv.name, iv.bytes))
    return out
