"""The two modes of the DTR runtime: `simulate` (costs only) and `DTRExecutor` (kernels).

Both build the same `Program` and run the same `DTRRuntime` with the same `DTROptions`;
real mode adds a backend that owns ONE arena of exactly `budget` bytes (NumPy or CuPy),
makes every planned tensor a view at the offset the runtime's first-fit allocator gave it,
runs kernels through the one kernel runner (`minigraph.runtime.kernels`), and carves
declared workspace out of the arena. External tensors (inputs, parameters, constants,
graph outputs) have their own buffers.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...backend import array_module, resolve_device, to_numpy, upload
from ...errors import DeviceError, PlanError
from ...feeds import check_feeds, check_fits, check_index_feed, index_feeds
from ...graph import Graph, as_graph
from ...memory.plan import offset_alignment
from ...ops.registry import KernelContext
from ..kernels import run_kernel
from .bounds import check_budget
from .options import DTROptionError, DTROptions, dtr_options
from .program import CostSpec, Program, as_program, resolve_budget
from .record import DTRTrace
from .runtime import DTRRuntime


class _ArenaContext(KernelContext):
    """A kernel context whose `scratch` comes out of the op's workspace block in the arena
    (declared by the op's `workspace` rule); a request beyond it falls back to a fresh
    array and is counted in `overflow`."""

    def __init__(self, xp: Any, node: str, step: int, seed: int, arena: Any, at: int,
                 nbytes: int):
        super().__init__(xp, node, step, seed)
        self._arena, self._at, self._end = arena, at, at + nbytes if at >= 0 else -1
        self.overflow = 0

    def scratch(self, shape: Sequence[int], dtype: Any) -> Any:
        dt = np.dtype(dtype)
        n = int(np.prod(tuple(shape), dtype=np.int64)) * dt.itemsize
        if self._at >= 0 and self._at + n <= self._end:
            a = self._arena[self._at:self._at + n].view(dt).reshape(tuple(shape))
            self._at += -(-n // 8) * 8
            self.workspace_bytes += n
            return a
        self.overflow += n
        return super().scratch(shape, dtype)


class ArrayBackend:
    """Real mode: the arena and the external buffers; runs kernels, moves bytes."""

    def __init__(self, graph: Graph, device: str, feeds: Mapping[str, Any], step: int,
                 seed: int, check_remat: bool):
        self.graph, self.device = graph, device
        self.xp = array_module(device)
        self.feeds, self.step, self.seed, self.check = feeds, step, seed, check_remat
        self.digests: dict[int, bytes] = {}
        self.host: dict[int, Any] = {}    # swapped tensors' host copies (hostswap.py)
        self.overflow = 0

    def start(self, rt: DTRRuntime) -> None:
        xp, g, p = self.xp, self.graph, rt.program
        self.arena = xp.empty(rt.budget, dtype=np.uint8)
        self.at = rt.arena.physical         # the runtime's offset -> this array's (aligned)
        ext: dict[int, Any] = {}
        for k, t in enumerate(p.tensors):
            if not t.external:
                continue
            info = g.tensors[t.name]
            if t.name in self.feeds:
                a = xp.empty(info.shape, dtype=info.dtype)
                upload(xp, a, self.feeds[t.name])
                ext[k] = a
            elif info.kind == "const":
                ext[k] = xp.asarray(info.value)
            elif info.alias_of is None:
                ext[k] = xp.empty(info.shape, dtype=info.dtype)
        for k, t in enumerate(p.tensors):
            info = g.tensors[t.name]
            if t.external and info.alias_of is not None:
                ext[k] = ext[p.index[info.alias_of]]
        self.ext = ext

    def array(self, rt: DTRRuntime, t: int) -> Any:
        p = rt.program
        if not p.arena[t]:
            return self.ext[t]
        spec = p.tensors[t]
        at = self.at(rt.addr[t])
        n = int(np.prod(spec.shape, dtype=np.int64)) * np.dtype(spec.dtype).itemsize
        return self.arena[at:at + n].view(spec.dtype).reshape(spec.shape)

    def run_op(self, rt: DTRRuntime, k: int, ws_at: int, replay: bool) -> None:
        p = rt.program
        op = p.ops[k]
        node = op.node
        ins = [self.array(rt, i) for i in op.args]
        outs = [self.array(rt, o) for o in op.outputs]
        ctx = _ArenaContext(self.xp, node.name, self.step, self.seed, self.arena,
                            self.at(ws_at) if ws_at >= 0 else -1, op.workspace)
        t0 = time.perf_counter()
        run_kernel(node, ins, outs, ctx, during=" under DTR")
        if self.device == "gpu":
            self.xp.cuda.Device().synchronize()
        dt = time.perf_counter() - t0
        self.overflow += ctx.overflow
        rt.trace.kernel_seconds += dt
        if not replay:
            rt.trace.base_kernel_seconds += dt
        if self.check:
            for o, a in zip(op.outputs, outs):
                if not p.arena[o]:
                    continue
                d = hashlib.blake2b(to_numpy(a).tobytes(), digest_size=16).digest()
                if o not in self.digests:
                    self.digests[o] = d
                else:
                    rt.trace.remat_checked += 1
                    if d != self.digests[o]:
                        rt.trace.remat_mismatches.append(p.tensors[o].name)

    def move(self, old: int, new: int, nbytes: int) -> None:
        self.arena[new:new + nbytes] = self.arena[old:old + nbytes].copy()

    def move_all(self, moves: Sequence[tuple[Any, int, int, int]], staged: bool) -> None:
        """A compaction's moves `(owner, old, new, bytes)`: one by one, in order, or
        `staged` (every source copied out before any destination is written, for moves
        that may cross, as a partitioned arena's do)."""
        moves = [(o, self.at(old), self.at(new), n) for o, old, new, n in moves]
        if not staged:
            for _, old, new, n in moves:
                self.move(old, new, n)
            return
        saved = [(new, n, self.arena[old:old + n].copy()) for _, old, new, n in moves]
        for new, n, a in saved:
            self.arena[new:new + n] = a

    def copy_aside(self, rt: DTRRuntime, tensors: Sequence[int]) -> int:
        """Copy-on-write before a stateful op overwrites external tensors that something
        recomputable still reads: the old value moves to a fresh buffer."""
        n = 0
        for w in tensors:
            self.ext[w] = self.ext[w].copy()
            n += int(self.ext[w].nbytes)
        return n

    def swap_out(self, rt: DTRRuntime, t: int) -> None:
        """Swap in DTR (hostswap.py): t's bytes into a host buffer of its own (NumPy: a
        copy; CuPy: a host array), before its block is given to others."""
        a = self.array(rt, t)
        self.host[t] = a.copy() if self.xp is np else a.get()

    def swap_in(self, rt: DTRRuntime, t: int) -> None:
        """t's host buffer copied back into its new block."""
        upload(self.xp, self.array(rt, t), self.host.pop(t))

    def drop_host(self, rt: DTRRuntime, t: int) -> None:
        self.host.pop(t, None)

    def finish(self, rt: DTRRuntime) -> dict[str, np.ndarray]:
        p = rt.program
        return {o: to_numpy(self.ext[p.index[o]]).copy() for o in self.graph.outputs}


def simulate(source: Graph | Program, budget: int | None = None, *,
             ratio: float | None = None, ratio_of: str = "total",
             schedule: Sequence[str] | None = None, alignment: int = 512,
             costs: CostSpec = "flops", options: DTROptions | None = None,
             **keywords: Any) -> DTRTrace:
    """Simulated mode: run DTR on a graph (or a `Program`) with costs only, no kernels.

    `budget` in bytes of arena, or `ratio` of the total no-rematerialisation peak
    (parameters, inputs and outputs + the arena peak: the DTR paper's definition; the
    arena gets ratio x total - external) or, `ratio_of="arena"`, of the arena peak.
    A graph becomes a program in `schedule` with tensors rounded up to `alignment` and
    `costs` ("flops", "unit", a mapping node -> cost, or a function). `options` (or their
    fields as keywords: `heuristic="lru"`) say how the runtime runs. Returns the
    `DTRTrace`. Raises BudgetError at once below `budget_bounds(...).lower`.

    The runtime is `DTRRuntime` (runtime.py); its textbook version, for reading, is
    `minimal.py`. The DTR authors' simulator's rules run in `minigraph.dtr_research`
    (`replay_trace` with `SimrdOptions`)."""
    # a model (zoo Model, TorchModel): its graph; a Program as it is (it carries a .graph too)
    program = as_program(source if isinstance(source, Program) else as_graph(source),
                         schedule, alignment, costs)
    b = resolve_budget(program, budget, ratio, ratio_of)
    return DTRRuntime(program, b, options=dtr_options(options, **keywords)).run()


class DTRExecutor:
    """Real mode: run a graph's kernels under a byte budget with DTR.

        ex = DTRExecutor(step_graph, ratio=0.5, heuristic="dtr")
        out = ex.run(feeds)          # same outputs as mg.Executor(step_graph).run(feeds)
        ex.last_trace.summary()

    Planned tensors live in ONE arena of exactly the budget's bytes (first-fit offsets);
    inputs, parameters, constants and graph outputs live outside it (see program.py).
    Budget, program and options as in `simulate`; `device` "auto", "cpu" or "gpu".
    `check_remat=True` hashes every tensor when first computed and checks that each
    rematerialisation reproduces it bit for bit (`trace.remat_mismatches`).
    `kernel_seed` seeds the kernels' random streams (dropout), as `Executor(seed=)` does:
    the same seed, the same outputs (`DTROptions.seed` seeds only victim sampling).
    An alignment that could place a tensor at an offset that is not a multiple of its
    itemsize is refused (PlanError): 1 on a float32 graph is fine, on a mixed one not.
    `simulate()` runs the same policy without kernels: same decisions, same events.
    """

    def __init__(self, graph: Graph, budget: int | None = None, *, ratio: float | None = None,
                 ratio_of: str = "total", schedule: Sequence[str] | None = None,
                 alignment: int = 512, costs: CostSpec = "flops", device: str = "auto",
                 check_remat: bool = False, kernel_seed: int = 0,
                 options: DTROptions | None = None, **keywords: Any):
        self.graph = graph
        self.device = resolve_device(device)
        self.options = dtr_options(options, **keywords)
        if self.options.allocator != "first-fit":
            raise DTROptionError("real mode needs addresses: allocator='first-fit'")
        self.program = as_program(graph, schedule, alignment, costs)   # alignment checked
        if self.device == "gpu" and alignment % 8:
            raise DeviceError(f"alignment {alignment} would place tensors at offsets CuPy "
                              "cannot view; use a multiple of 8 on the GPU")
        # Every arena offset is a sum of arena sizes (first fit, compaction; a partitioned
        # arena's top too, `physical`): their gcd must be a multiple of every itemsize.
        need, p = offset_alignment(graph, 1), self.program
        if math.gcd(*(t.size for t in p.tensors), *(op.workspace for op in p.ops)) % need:
            raise PlanError(f"alignment {alignment} would place tensors at offsets that "
                            "are not multiples of their itemsize (unaligned views give other "
                            f"results than Executor's); use a multiple of {need}")
        self.kernel_seed = kernel_seed
        self.budget = resolve_budget(self.program, budget, ratio, ratio_of)
        self.check_remat = check_remat
        self.last_trace: DTRTrace | None = None
        check_budget(self.program, self.budget)

    def run(self, feeds: Mapping[str, Any] | None = None, *, step: int = 0,
            **kw: Any) -> dict[str, np.ndarray]:
        """Run once; returns the graph outputs as host arrays (like `Executor.run`)."""
        feeds = {**(feeds or {}), **kw}
        check_feeds(self.graph, feeds)
        index = index_feeds(self.graph)
        for name, v in feeds.items():
            check_index_feed(self.graph, index, name, v)
        g = self.graph     # the arena and every external buffer, checked before allocating
        sizes = {t.name: g.tensors[t.name].nbytes for t in self.program.tensors
                 if t.external and g.tensors[t.name].alias_of is None}
        check_fits({**sizes, "the arena (the budget)": self.budget}, self.device,
                   f"the buffers of graph {g.name!r} under DTR")
        backend = ArrayBackend(self.graph, self.device, feeds, step, self.kernel_seed,
                               self.check_remat)
        rt = DTRRuntime(self.program, self.budget, options=self.options, backend=backend)
        self.last_trace = rt.run()
        self.last_trace.workspace_overflow = backend.overflow
        return self.last_trace.outputs

    def simulate(self) -> DTRTrace:
        """The same configuration in simulated mode (no kernels)."""
        return DTRRuntime(self.program, self.budget, options=self.options).run()
