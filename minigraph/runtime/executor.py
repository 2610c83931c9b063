"""The executor: runs a static plan on real arrays (DTR's real mode has its own, modes.py).

Without a plan every tensor gets its own buffer (no reuse). With a plan, the executor
allocates ONE arena of `plan.arena_bytes` and makes every planned tensor a view at its
offset; kernels write into those views. Inputs, parameters, constants and graph outputs
get their own buffers ("unplanned"); a parameter's update is written over the parameter.
"""

from __future__ import annotations

import time
import tracemalloc
from array import array
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..backend import PoolMeter, array_module, empty, resolve_device, to_numpy, upload
from ..errors import FeedError, PlanTypeError
from ..feeds import check_feeds, check_fits, check_index_feed, index_feeds, init_params  # noqa: F401
from ..graph import Graph, as_graph
from ..memory.api import MemoryReport
from ..memory.plan import MemoryPlan
from ..memory.swap_plan import SwapPlan
from ..ops.registry import index_bounds, workspace_of
from .kernels import kernel_context, run_kernel
from .measure import DeviceClock, RunStats, Tracemalloc, numpy_traced_bytes
from .swapping import SwapSteps


class Executor:
    """Runs `graph` (in `plan`'s schedule and arena, if given) on NumPy or CuPy. A plan
    made for another graph is refused (PlanError naming the first difference).
    `validate=False` skips the plan's validation (overlaps, hand-overs): only to show what
    an unsafe plan does (a wrong answer, silently); never for real work."""

    def __init__(self, graph: Graph, plan: MemoryPlan | MemoryReport | None = None,
                 device: str = "auto", seed: int = 0, validate: bool = True):
        graph = as_graph(graph)              # a model (zoo Model, TorchModel): its graph
        if isinstance(plan, MemoryReport):
            plan = plan.plan
        elif plan is not None and not isinstance(plan, MemoryPlan):
            raise PlanTypeError(f"Executor takes a MemoryPlan, a MemoryReport or None, not "
                                f"{type(plan).__name__} {_short_repr(plan)} "
                                "(plan_memory(graph, options) makes one)")
        self.graph, self.plan, self.seed = graph, plan, seed
        self.device = resolve_device(device)
        self.xp = array_module(self.device)
        if plan is not None:
            # Bound first, always: a plan made for another graph (same names, other sizes or
            # edges or schedule) would run silently wrong even with validate=False.
            if validate:
                plan.validate(graph)            # bound_to(graph) first, then the proof
            else:                               # an unaligned view is wrong on any device
                plan.bound_to(graph).check_itemsizes(graph)
            self.order = [graph.node(n) for n in plan.schedule]
        else:
            self.order = list(graph.nodes)
        self.last_stats: RunStats | None = None
        self._consts = {t.name: self.xp.asarray(t.value) for t in graph.leaves("const")}
        self._prepare()

    def _prepare(self) -> None:
        """What does not change from run to run, worked out once: the fed tensors, each
        planned tensor's arena view, the tensors with their own buffers, the aliases."""
        g, plan = self.graph, self.plan
        self._wanted = {t.name: t for t in g.leaves("input", "param")}
        offsets = plan.offsets if plan is not None else {}
        self._views = [(name, off, g.tensors[name].nbytes, np.dtype(g.tensors[name].dtype),
                        g.tensors[name].shape) for name, off in offsets.items()]
        self._own: list[tuple[str, tuple[int, ...], str]] = []
        self._aliases: list[tuple[str, str]] = []
        for t in g.tensors.values():
            if t.name in self._wanted or t.name in self._consts or t.name in offsets:
                continue
            if t.alias_of is not None:
                self._aliases.append((t.name, t.alias_of))
            else:
                self._own.append((t.name, t.shape, t.dtype))
        self._steps: list[tuple[Any, dict, int]] | None = None   # filled on the first run
        self._swap = SwapSteps(plan, g, self.xp, self.device == "gpu") \
            if isinstance(plan, SwapPlan) else None          # host buffers, made once
        self._fits = False                                          # checked on the first run
        # Fed labels and ids are checked on the host as they are uploaded; the kernels that
        # read only such feeds then skip their own check (on a GPU, a read-back each step).
        self._index_feeds = index_feeds(g)
        self._checked_nodes = {
            node.name for node in self.order
            if (bounds := index_bounds(g, node))
            and all(node.inputs[i] in self._wanted for i in bounds)}

    def _check_memory(self) -> None:
        """AllocationError before the first allocation when the run's buffers (fed copies,
        constants, arena, own buffers, the largest declared workspace) exceed the device."""
        if self._fits:
            return
        g = self.graph
        sizes = {name: g.tensors[name].nbytes for name in (*self._wanted, *self._consts)}
        sizes.update((name, g.tensors[name].nbytes) for name, _, _ in self._own)
        if self.plan is not None and self.plan.offsets:
            top = max(self.plan.offsets, key=lambda n: g.tensors[n].nbytes)
            sizes[f"the arena (its largest tensor: {top}, {g.tensors[top].nbytes:,} bytes)"] \
                = self.plan.arena_bytes
        ws = max(self._kernel_steps(), key=lambda s: s[2], default=None)
        if ws is not None and ws[2]:
            sizes[f"the workspace of {ws[0].name}"] = ws[2]
        check_fits(sizes, self.device, f"the buffers of graph {g.name!r}")
        self._fits = True

    # Storage ------------------------------------------------------------------------------
    def _storage(self, feeds: Mapping[str, Any]) -> tuple[dict[str, Any], int, int]:
        """Arrays for every tensor: arena views for planned ones, own buffers otherwise."""
        xp, plan = self.xp, self.plan
        arrays: dict[str, Any] = {}
        unplanned = 0
        for name, v in feeds.items():          # the executor's own copy: the "upload"
            t = self._wanted[name]
            a = empty(xp, name, t.shape, t.dtype)
            self._upload(name, a, v)
            arrays[name] = a
            unplanned += a.nbytes
        arrays.update(self._consts)
        arena_bytes = 0
        if plan is not None:
            arena = empty(xp, "the arena", plan.arena_bytes, np.uint8)
            arena_bytes = plan.arena_bytes
            for name, off, nbytes, dtype, shape in self._views:
                arrays[name] = arena[off:off + nbytes].view(dtype).reshape(shape)
            if self._swap is not None:
                self._swap.storage(arena, arrays)
        for name, shape, dtype in self._own:
            arrays[name] = a = empty(xp, name, shape, dtype)
            if plan is not None:   # graph outputs are not planned
                unplanned += a.nbytes
        for name, alias_of in self._aliases:
            arrays[name] = arrays[alias_of]
        return arrays, arena_bytes, unplanned

    # Running ------------------------------------------------------------------------------
    def run(self, feeds: Mapping[str, Any] | None = None, *, step: int = 0,
            measure: bool = False, **kw: Any) -> dict[str, np.ndarray]:
        """Run once. Feeds by name (a dict and/or keywords); returns the graph outputs as
        host arrays. `step` keys dropout's random stream; `measure` records the peak.
        FeedError for a feed of another shape or dtype; AllocationError, before anything is
        allocated, when the run's buffers exceed the device's memory (`feeds.memory_limit`)."""
        feeds = {**(feeds or {}), **kw}
        check_feeds(self.graph, feeds)
        self._check_memory()
        measuring = measure and self.device == "cpu"
        steps = self._kernel_steps()
        # On NumPy tracemalloc also sees Python objects: those held during the run are
        # counted once, after storage is set up, and taken off the peak (per-kernel extras
        # go into a buffer made before). On a GPU a hook on CuPy's pool sees arrays only.
        extras = array("q", bytes(8 * len(steps))) if measure else None
        objects = 0
        meter = Tracemalloc() if measuring else (
            PoolMeter() if measure and self.device == "gpu" else None)
        t0 = time.perf_counter()
        try:
            if meter is not None:
                meter.__enter__()
            arrays, arena_bytes, unplanned = self._storage(feeds)
            if measuring:
                objects = tracemalloc.get_traced_memory()[0] - numpy_traced_bytes()
            workspace, peak = self._execute(arrays, step, extras, meter)
            if self.device == "gpu":
                self.xp.cuda.Device().synchronize()
            seconds = time.perf_counter() - t0
            if meter is not None:
                peak = max(peak, meter.peak()) - objects
        finally:
            if meter is not None:
                meter.__exit__(None, None, None)
        pool_peak = meter.peak_rounded if isinstance(meter, PoolMeter) else None
        if self.plan is None:
            unplanned = sum(a.nbytes for n, a in arrays.items()
                            if self.graph.tensors[n].kind != "const"
                            and self.graph.tensors[n].alias_of is None)
        undeclared = {node.name: int(x) for (node, _, _), x in zip(steps, extras or ()) if x > 0}
        measured_ws = max((d + x for (_, _, d), x in zip(steps, extras or ())), default=0)
        self.last_stats = RunStats(arena_bytes, unplanned, workspace, peak, seconds,
                                   undeclared, measured_ws, pool_peak)
        return {o: to_numpy(arrays[o]).copy() for o in self.graph.outputs}

    # Resident training loop ----------------------------------------------------------------
    def load(self, feeds: Mapping[str, Any] | None = None, **kw: Any) -> None:
        """Upload inputs and parameters once and keep the storage (arena included), so that
        `step()` runs with no allocation and no host transfer; each step writes the new
        parameter values over the parameters, as a training loop on a device does."""
        feeds = {**(feeds or {}), **kw}
        check_feeds(self.graph, feeds)
        self._check_memory()
        self._resident, _, _ = self._storage(feeds)

    def step(self, feeds: Mapping[str, Any] | None = None, *, step: int = 0) -> dict[str, Any]:
        """One run on the loaded storage; `feeds` (e.g. a new batch) are copied in first.
        Returns the graph outputs as device arrays (no copy to the host)."""
        arrays = self._loaded("step")
        feeds = feeds or {}
        check_feeds(self.graph, feeds, partial=True)   # as run(): no broadcast, no casting
        for name, v in feeds.items():
            self._upload(name, arrays[name], v)
        self._execute(arrays, step)
        return {o: arrays[o] for o in self.graph.outputs}

    def _loaded(self, method: str) -> dict[str, Any]:
        if getattr(self, "_resident", None) is None:
            raise FeedError(f"Executor.{method}() needs Executor.load(feeds) first")
        return self._resident

    def _upload(self, name: str, dst: Any, value: Any) -> None:
        """Copy one feed in, a feed of labels or ids checked first (`check_index_feed`)."""
        check_index_feed(self.graph, self._index_feeds, name, value)
        upload(self.xp, dst, value)

    def profile(self, step: int = 0) -> list[tuple[str, str, float]]:
        """One step on the loaded storage (`load` first) with each kernel timed on the
        device's own clock (CUDA events on a GPU): (node, op, milliseconds), in schedule
        order. Where a step's time goes, op by op."""
        arrays = self._loaded("profile")
        clock = DeviceClock(self.xp)
        marks = [clock.mark()]
        self._execute(arrays, step, on_kernel=lambda: marks.append(clock.mark()))
        ms = clock.elapsed(marks)
        return [(node.name, node.op, t) for (node, _, _), t in zip(self._kernel_steps(), ms)]

    def _kernel_steps(self) -> list[tuple[Any, dict, int]]:
        """Per node of the schedule: the node, its attrs and its declared workspace (once)."""
        if self._steps is None:
            self._steps = [(node, node.attr, workspace_of(self.graph, node, self.device))
                           for node in self.order]
        return self._steps

    def _execute(self, arrays: dict[str, Any], step: int, extras: Any = None,
                 meter: Any = None, on_kernel: Any = None) -> tuple[int, int | None]:
        """Run the schedule; returns the largest declared workspace of any op, and (with
        `extras` and a `meter`) the measured peak, kept here as each kernel resets the
        meter's: the bytes kernel k allocated beyond its declared workspace go into
        `extras[k]`."""
        most = 0
        xp, seed, checked = self.xp, self.seed, self._checked_nodes
        peak = 0
        swap = self._swap                   # offloads and prefetches around the ops
        if swap is not None:
            swap.start(arrays)
        for k, (node, _attrs, declared) in enumerate(self._kernel_steps()):
            if swap is not None:
                swap.before(k, arrays)
            ctx = kernel_context(xp, node, step, seed)
            ctx.indices_checked = node.name in checked
            if extras is not None:
                before, so_far = meter.now(), meter.peak()
                peak = max(peak, so_far)
                meter.reset_peak()
            run_kernel(node, [arrays[i] for i in node.inputs],
                       [arrays[o] for o in node.outputs], ctx)
            if swap is not None:
                swap.after(k, arrays)
            if on_kernel is not None:
                on_kernel()
            most = max(most, declared, ctx.workspace_bytes)
            if extras is not None:
                top = meter.peak()
                peak = max(peak, top)
                extras[k] = max(0, top - before - max(declared, ctx.workspace_bytes))
        if swap is not None:
            swap.finish()
        return most, (peak if extras is not None else None)


def _short_repr(v: Any, limit: int = 60) -> str:
    r = repr(v)
    return r if len(r) <= limit else r[:limit - 3] + "..."
