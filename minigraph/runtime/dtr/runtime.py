"""The DTR state machine: one policy for both modes (simulated and real).

Dynamic Tensor Rematerialization (Kirisame et al., ICLR 2021), with MegEngine's bookkeeping
(seed 003). The runtime walks a `Program` step by step:

* **call op**: make its inputs resident, in the order `Program.bounds` assumes, pinning
  each one as it comes (an evicted input is rematerialised by re-running its producer,
  whose own evicted inputs are rematerialised first: an explicit stack of frames, never
  Python recursion, so a 10,000-op chain is fine); then allocate its outputs and its
  workspace, evicting tensors until each fits in the arena; run it; unpin.
* **release tensor** (its last reader ran): *fake delete* as MegEngine's `free` does: the
  bytes are released at once, but the tensor stays known (state "evicted") while an
  evicted neighbour may still need it to be recomputed; it is *really freed* when no
  tensor that might be recomputed from it is left (MegEngine's `ref_cnt` / `recursive_free`,
  here `hold`).
* **eviction**: the heuristic scores the resident, unpinned, replayable tensors; the lowest
  goes (or Coop's window of contiguous ones). Parameters, inputs, graph outputs (external),
  pinned tensors and outputs of stateful ops are never evicted; stateful ops never re-run.
* the arena is one range of exactly `budget` bytes with a first-fit allocator, so an output
  may not fit although enough bytes are free (fragmentation): then more is evicted. Only
  when nothing can be evicted and the free bytes would suffice is the arena compacted
  (MegEngine's defragmentation, counted in `defrags`).
* **in place**: DTR runs every op out of place (an input must stay intact: it may be needed
  to recompute something). The one exception is a stateful op writing over an *external*
  tensor (`sgd_update` writing the new parameter over the parameter): if anything that
  may still be recomputed reads the old value, the real backend first copies it aside
  (copy-on-write, outside the budget, reported as `external_copy_bytes`).

A real run and a simulated run with the same costs make the same decisions: the backend
only executes kernels and moves bytes; everything else is here.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...errors import BudgetError, MinigraphError, ThrashError
from .allocator import ALLOCATORS
from .heuristics import Heuristic, TensorView, get_heuristic
from .neighborhood import DSU, evicted_ancestors, evicted_region, live_evicted_region
from .program import Program

NEW, RES, EVI, FREED, EXT = range(5)   # tensor states: not yet computed, resident,
STATE_NAMES = ("new", "resident", "evicted", "freed", "external")   # evicted, freed, external


@dataclass
class DTRTrace:
    """What one DTR run did: costs, counts, fragmentation, and the alloc/free events.

    `events`: ("alloc" | "free", tensor name, bytes) in order, recomputations included
    (workspace blocks are named "<node>#workspace"); an allocator simulator can replay it.
    Defragmentation moves are not in `events` (they move blocks, sizes do not change).
    """
    program: str
    heuristic: str
    mode: str
    budget: int
    peak: int                     # no-rematerialisation arena, first fit (arena ratio 1.0)
    lower: int                    # smallest budget that could work
    safe: int                     # budget at which the runtime is guaranteed to finish
    base_cost: float              # cost of running every op once
    external: int = 0             # bytes outside the arena (params, inputs, outputs)
    extra_cost: float = 0.0       # cost of rematerialisations
    evictions: int = 0            # tensors evicted to make room (kept dead ones too)
    fake_deletes: int = 0         # releases at a tensor's last use, metadata kept
    frees: int = 0                # tensors really freed
    rematerializations: int = 0   # op re-executions
    remat_tensors: int = 0        # tensors brought back by them
    defrags: int = 0
    moved_bytes: int = 0          # bytes copied by defragmentation
    reliefs: int = 0              # times pinned inputs of waiting frames were let go
    frag_samples: list[float] = field(default_factory=list, repr=False)
    frag_forced_evictions: int = 0
    search_seconds: float = 0.0
    seconds: float = 0.0
    kernel_seconds: float = 0.0       # real mode: time inside kernels (all executions)
    base_kernel_seconds: float = 0.0  # real mode: time inside first executions
    max_used: int = 0                 # high-water mark of the arena
    external_copy_bytes: int = 0
    workspace_overflow: int = 0       # real mode: scratch bytes beyond declared workspace
    events: list[tuple[str, str, int]] = field(default_factory=list, repr=False)
    evicted: list[str] = field(default_factory=list, repr=False)   # names, in order
    timeline: list[tuple[float, int]] = field(default_factory=list, repr=False)
    outputs: dict[str, Any] = field(default_factory=dict, repr=False)
    remat_checked: int = 0
    remat_mismatches: list[str] = field(default_factory=list)

    @property
    def total_cost(self) -> float:
        return self.base_cost + self.extra_cost

    @property
    def overhead(self) -> float:
        """Total compute / base compute (1.0 = no rematerialisation)."""
        return self.total_cost / self.base_cost if self.base_cost else 1.0

    @property
    def extra_compute(self) -> float:
        """Extra compute / base compute."""
        return self.extra_cost / self.base_cost if self.base_cost else 0.0

    @property
    def peak_bytes(self) -> int:
        """The most arena bytes in use at once during this run (<= budget)."""
        return self.max_used

    @property
    def recompute_ratio(self) -> float:
        """Extra compute / base compute (the same as `extra_compute`)."""
        return self.extra_compute

    @property
    def ratio(self) -> float:
        """Budget over the arena peak (`ratio_of="arena"`)."""
        return self.budget / self.peak if self.peak else 1.0

    @property
    def total_ratio(self) -> float:
        """(budget + external) over (arena peak + external): the DTR paper's budget
        ratio, of the total peak memory of the unmodified run (`ratio_of="total"`)."""
        t = self.peak + self.external
        return (self.budget + self.external) / t if t else 1.0

    @property
    def fragmentation(self) -> float:
        """Mean free bytes / budget at eviction decisions (Coop's measure); 0 if none."""
        s = self.frag_samples
        return sum(s) / len(s) if s else 0.0

    @property
    def measured_overhead(self) -> float | None:
        if not self.base_kernel_seconds:
            return None
        return self.kernel_seconds / self.base_kernel_seconds

    def summary(self) -> str:
        lines = [f"DTR {self.heuristic} ({self.mode}) on {self.program}: arena budget "
                 f"{self.budget:,} B = {self.total_ratio:.2f} x total peak "
                 f"{self.peak + self.external:,} B = {self.ratio:.2f} x arena peak "
                 f"{self.peak:,} B (lower bound {self.lower:,}, safe {self.safe:,})",
                 f"  compute x{self.overhead:.3f} ({self.rematerializations} op replays, "
                 f"{self.remat_tensors} tensors rematerialised), {self.evictions} evictions "
                 f"({self.frag_forced_evictions} forced by fragmentation), "
                 f"{self.fake_deletes} fake deletes, {self.defrags} defrags "
                 f"({self.moved_bytes:,} B moved)",
                 f"  fragmentation {self.fragmentation:.3f}, arena high-water "
                 f"{self.max_used:,} B, search {self.search_seconds * 1000:.1f} ms, run "
                 f"{self.seconds * 1000:.1f} ms"]
        if self.measured_overhead is not None:
            lines.append(f"  kernels {self.kernel_seconds * 1000:.1f} ms, measured x"
                         f"{self.measured_overhead:.3f}")
        if self.remat_checked:
            lines.append(f"  {self.remat_checked} rematerialised tensors checked, "
                         f"{len(self.remat_mismatches)} differ from their first value")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"DTRTrace({self.heuristic}, {self.mode}, ratio {self.ratio:.2f}: compute "
                f"x{self.overhead:.3f}, {self.evictions} evictions, {self.rematerializations}"
                f" replays)")

    def _repr_html_(self) -> str:
        return f"<pre>{self.summary()}</pre>"

    def plot(self, ax: Any = None) -> Any:
        """Arena bytes in use against the runtime clock, with the budget line."""
        import matplotlib.pyplot as plt
        if ax is None:
            _, ax = plt.subplots(figsize=(7, 3))
        if self.timeline:
            xs, ys = zip(*self.timeline)
            ax.step(xs, ys, where="post", lw=1, label="arena in use")
        ax.axhline(self.budget, color="r", ls="--", lw=1, label="budget")
        ax.axhline(self.peak, color="gray", ls=":", lw=1, label="no-remat peak")
        ax.set_xlabel("clock (cost units)")
        ax.set_ylabel("bytes")
        ax.set_title(f"{self.heuristic}: x{self.overhead:.2f} compute")
        ax.legend(loc="upper right", fontsize=8)
        return ax


class DTRError(MinigraphError, RuntimeError):
    """An internal invariant of the DTR runtime broke (a bug, not a user error)."""


class DTRRuntime:
    """Runs a `Program` under `budget` bytes with one heuristic. `backend` (real mode)
    runs kernels and moves bytes; None simulates.

    Options: `allocator` "first-fit" (addresses, fragmentation) or "ideal" (a counter);
    `sample` (False, True for ~sqrt(N) candidates with seeded random strides, or a count);
    `thrash_limit`: stop with ThrashError when rematerialisation cost exceeds this many
    times the base cost; `defrag`: when the free bytes would suffice but no block is large
    enough, "first" (the default) compacts the arena at once, as MegEngine does (seed 003:
    since v1.7 "defrag is on by default; when memory is short and fragmented the fragments
    are merged"; in 1.4 `auto_evict` evicts by byte count and an allocation that then
    fails triggers defragmentation); "last-resort" evicts by the heuristic and compacts
    only when nothing is left to evict (what address-aware heuristics are compared under);
    "never" only evicts.

    Candidate selection: `choose_victim(candidates, need)` returns the tensor to evict
    among the views of every resident, replayable tensor (pinned ones included, flagged
    `t.pinned`), or None; by default the lowest heuristic score among the unpinned ones.
    Override it in a subclass, or pass `select=fn` with the same signature.
    """

    def __init__(self, program: Program, budget: int, heuristic: Any = "dtr", *,
                 heuristic_args: dict | None = None, allocator: str = "first-fit",
                 sample: bool | int = False, seed: int = 0, thrash_limit: float = 10.0,
                 defrag: bool | str = "first", backend: Any = None,
                 timeline: bool = True, keep_dead: bool = True, dead_first: bool = True,
                 select: Callable[[list[TensorView], int], TensorView | None] | None = None):
        self.program, self.budget = program, int(budget)
        self.heuristic: Heuristic = get_heuristic(heuristic, **(heuristic_args or {}))
        if allocator not in ALLOCATORS:
            raise ValueError(f"allocator must be one of {', '.join(ALLOCATORS)}, "
                             f"not {allocator!r}")
        self.arena = ALLOCATORS[allocator](self.budget)
        self.sample, self.rng = sample, random.Random(seed)
        if defrag is True or defrag is False:
            defrag = "last-resort" if defrag else "never"
        if defrag not in ("last-resort", "first", "never"):
            raise ValueError(f"defrag must be 'last-resort', 'first' or 'never', not {defrag!r}")
        self.thrash_limit, self.defrag, self.backend = thrash_limit, defrag, backend
        self.select = select
        self._frames: list[list[Any]] = []
        self.record_timeline = timeline
        # A dead tensor (its last reader ran) that is rematerialised to recompute a
        # neighbour stays resident, as in the DTR paper, instead of being dropped at once;
        # under memory pressure such tensors are evicted before any live one. Dropping them
        # at once makes every later recomputation that needs them replay a whole chain.
        # `dead_first=False` scores them like any other tensor, as the DTR authors'
        # simulator (simrd) does; benchmarks/dtr_reference.py measures the difference.
        self.keep_dead, self.dead_first = keep_dead, dead_first
        p = program
        n = len(p.tensors)
        self.size = [t.size for t in p.tensors]
        self.cost_t = p.cost_t
        self.state = [EXT if t.external else NEW for t in p.tensors]
        self.dead = [False] * n
        self.pins = [0] * n
        # inputs of the op being run and of every op waiting below it in a recomputation
        # (resolved or not): evicting one only to fetch it back a moment later is the
        # first step of thrashing, so they go only when nothing else can
        self.protect = [0] * n
        self.hold = [0] * n
        self.last = [0.0] * n
        self.recomputes = [0] * n
        self.addr = [-1] * n
        self.now = 0.0
        self._cand: list[int] = []            # resident, replayable tensors
        self._cpos: dict[int, int] = {}
        self._views: list[TensorView | None] = [None] * n
        self.evicted = [False] * n            # state == EVI, for the region searches
        # Cached neighbourhood costs; each entry is dropped when a tensor it looked at
        # is evicted or comes back (`_watch`: tensor -> cache keys that looked at it).
        self._cache: dict[tuple[str, int], float] = {}
        self._watch: dict[int, list[tuple[str, int]]] = {}
        self.dsu_eq = DSU(n, self.cost_t)
        self.dsu_mge = DSU(n, self.cost_t)
        self._mge_adj: list[list[int]] | None = None
        self.bounds = p.bounds()
        mode = "real" if backend is not None else "sim"
        self.trace = DTRTrace(p.name, self.heuristic.name, mode, self.budget,
                              self.bounds.peak, self.bounds.lower, self.bounds.safe,
                              p.base_cost, self.bounds.external)
        self._limit_cost = thrash_limit * p.base_cost
        self._limit_replays = thrash_limit * max(p.calls, 1) + 100

    # Running --------------------------------------------------------------------------------
    def run(self) -> DTRTrace:
        """Execute every step; returns the trace. Raises BudgetError at once when the budget
        is below `bounds.lower`, ThrashError past the thrash limit."""
        self._check_budget()
        t0 = time.perf_counter()
        if self.backend is not None:
            self.backend.start(self)
        for kind, x in self.program.steps:
            if kind == "call":
                self._call(x)
            elif kind == "release":
                self._release(x)
            elif kind == "get":
                continue                 # fetched together at the end, in a safe order
            else:
                raise DTRError(f"unknown program step {kind!r}")
        for t in self.program.get_order:
            self._get(t)
        if self.backend is not None:
            self.trace.outputs = self.backend.finish(self)
        self.trace.seconds = time.perf_counter() - t0
        return self.trace

    def _check_budget(self) -> None:
        b = self.bounds
        if self.budget < b.lower:
            raise BudgetError(
                f"budget {self.budget:,} B is below the smallest budget that could work for "
                f"{self.program.name}: {b.lower:,} B (the largest op footprint, inputs + "
                f"outputs + workspace resident at once, plus bytes that can never be "
                f"evicted)", minimum=b.lower)

    def _call(self, k: int) -> None:
        op = self.program.ops[k]
        if op.overwrites and self.backend is not None:
            held = [w for w in op.overwrites if self.hold[w] > 0]
            if held:
                self.trace.external_copy_bytes += self.backend.copy_aside(self, held)
        self._resolve(k, None)

    def _get(self, t: int) -> None:
        """Make t resident and keep it pinned to the end (a trace's live outputs)."""
        if self.state[t] == EXT:
            return
        self._resolve(-1, t)
        self.pins[t] += 1

    # The frame machine: make inputs resident (rematerialising), then execute ---------------
    def _resolve(self, top: int, want: int | None) -> None:
        p, state, pins = self.program, self.state, self.pins
        arena, order_of = p.arena, p.order
        # A frame: [op index (-1: just fetch `want`), its input order, position]
        frames: list[list[Any]] = [[top, order_of[top] if top >= 0 else [want], 0]]
        self._frames = frames
        protect = self.protect
        for i in frames[0][1]:
            protect[i] += 1
        while frames:
            f = frames[-1]
            k, order, pos = f
            pushed = False
            while pos < len(order):
                i = order[pos]
                st = state[i]
                if st == RES or st == EXT:
                    if arena[i]:
                        pins[i] += 1
                    self.last[i] = self.now
                    pos += 1
                    continue
                if st == EVI and p.replayable[i]:
                    f[2] = pos
                    q = p.tensors[i].producer
                    frames.append([q, order_of[q], 0])
                    for j in order_of[q]:
                        protect[j] += 1
                    pushed = True
                    break
                raise DTRError(f"{p.tensors[i].name} is {STATE_NAMES[st]} but "
                               f"{p.ops[k].name if k >= 0 else 'the end'} needs it")
            if pushed:
                continue
            f[2] = pos
            if k >= 0:
                wanted = None
                if len(frames) > 1:
                    below = frames[-2]
                    wanted = below[1][below[2]]
                self._execute(k, replay=len(frames) > 1, wanted=wanted)
            for i in order:
                if arena[i]:
                    self._unpin(i)
            for i in order:
                protect[i] -= 1
            frames.pop()

    def _unpin(self, i: int) -> None:
        self.pins[i] -= 1
        if self.pins[i] == 0 and self.dead[i] and self.state[i] == RES:
            if self.hold[i] == 0:
                self._free(i)
            elif not (self.keep_dead and self.recomputes[i]):
                self._drop_dead(i)

    def _execute(self, k: int, replay: bool, wanted: int | None) -> None:
        p = self.program
        op = p.ops[k]
        arena, state, size = p.arena, self.state, self.size
        before = []
        for o in op.outputs:
            if not arena[o]:
                before.append(EXT)
                continue
            st = state[o]
            before.append(st)
            if st != RES:
                self._place(o, size[o], p.tensors[o].name)
            self.pins[o] += 1
        ws_at = -1
        if op.workspace:
            ws_at = self._place(("ws", k), op.workspace, f"{op.name}#workspace")
        if self.backend is not None:
            self.backend.run_op(self, k, ws_at, replay)
        self.now += op.cost
        tr = self.trace
        if replay:
            tr.extra_cost += op.cost
            tr.rematerializations += 1
            if tr.extra_cost > self._limit_cost and p.base_cost > 0 or \
                    tr.rematerializations > self._limit_replays:
                raise ThrashError(
                    f"DTR {self.heuristic.name} on {p.name}: rematerialisation cost "
                    f"{tr.extra_cost:g} exceeds {self.thrash_limit:g} x the base cost "
                    f"{p.base_cost:g} ({tr.rematerializations} op replays) at budget "
                    f"{self.budget:,} B; the budget is too small for this heuristic")
        if ws_at >= 0:
            self.arena.free(ws_at)
            tr.events.append(("free", f"{op.name}#workspace", op.workspace))
        used = self.arena.used_bytes
        if used > tr.max_used:
            tr.max_used = used
        for o, st in zip(op.outputs, before):
            if st == EXT:
                continue
            self.pins[o] -= 1
            self.last[o] = self.now
            if st == RES:
                continue
            if st == FREED:          # written only because the op writes all its outputs
                self.arena.free(self.addr[o])
                self.addr[o] = -1
                tr.events.append(("free", p.tensors[o].name, size[o]))
                continue
            state[o] = RES
            if p.replayable[o]:
                self._cand_add(o)
            if st == NEW:
                if p.replayable[o]:
                    for i in p.ops[k].inputs:
                        self.hold[i] += 1
            else:                    # EVI: rematerialised
                self.recomputes[o] += 1
                tr.remat_tensors += 1
                self._un_evict(o)
                if self.dead[o] and o != wanted and self.pins[o] == 0:
                    if self.hold[o] == 0:
                        self._free(o)
                    elif not self.keep_dead:
                        self._drop_dead(o)
        if self.record_timeline:
            tr.timeline.append((self.now, self.arena.used_bytes))

    def _place(self, owner: Any, nbytes: int, name: str) -> int:
        """Allocate `nbytes` for `owner` (a tensor index or a workspace key), evicting as
        the heuristic says until a block fits."""
        self._make_room(nbytes)
        at = self.arena.alloc(nbytes, owner)
        if at is None:
            raise DTRError(f"allocator refused {nbytes} B for {name} after make_room")
        if isinstance(owner, int):
            self.addr[owner] = at
        self.trace.events.append(("alloc", name, nbytes))
        return at

    # Releases: fake delete and real free --------------------------------------------------
    def _release(self, t: int) -> None:
        if self.state[t] == EXT:
            return
        self.dead[t] = True
        st = self.state[t]
        if st == EVI:
            self._changed(t)             # a cached live neighbourhood may have counted it
        if st == RES and self.pins[t] == 0:
            self._drop_dead(t)
        elif st == EVI and self.hold[t] == 0:
            self._free(t)

    def _drop_dead(self, t: int) -> None:
        """A dead, resident, unpinned tensor: free it for good if nothing can need it,
        else release its bytes and keep its metadata (MegEngine's do_drop)."""
        if self.hold[t] == 0:
            self._free(t)
        elif self.program.replayable[t]:
            self._evict(t, fake=True)
        # else: not replayable and still needed by a neighbour's recomputation: stays.

    def _free(self, t: int) -> None:
        """Really free t, then every parent that nothing holds any more (an explicit
        worklist; MegEngine's recursive_free)."""
        p, state, hold = self.program, self.state, self.hold
        work = [t]
        while work:
            x = work.pop()
            st = state[x]
            if st == RES:
                if self.pins[x]:
                    continue              # freed when unpinned
                self.arena.free(self.addr[x])
                self.trace.events.append(("free", p.tensors[x].name, self.size[x]))
                self.addr[x] = -1
                self._cand_remove(x)
            elif st == EVI:
                self._un_evict(x)
            else:
                continue
            state[x] = FREED
            self.trace.frees += 1
            if p.replayable[x]:
                for i in p.ops[p.tensors[x].producer].inputs:
                    hold[i] -= 1
                    if hold[i] == 0 and self.dead[i] and state[i] in (RES, EVI):
                        work.append(i)

    # Eviction ------------------------------------------------------------------------------
    def _evict(self, t: int, fake: bool = False) -> None:
        p = self.program
        self.arena.free(self.addr[t])
        self.trace.events.append(("free", p.tensors[t].name, self.size[t]))
        self.addr[t] = -1
        self.state[t] = EVI
        self._cand_remove(t)
        self.evicted[t] = True
        self._changed(t)
        self.dsu_eq.add(t, p.adj[t])
        self.dsu_mge.add(t, self._mge_neighbours(t))
        if fake:
            self.trace.fake_deletes += 1
        else:
            self.trace.evictions += 1
            self.trace.evicted.append(p.tensors[t].name)

    def _un_evict(self, t: int) -> None:
        self.evicted[t] = False
        self._changed(t)
        self.dsu_eq.remove(t)
        self.dsu_mge.remove(t)

    def _make_room(self, need: int) -> None:
        arena, tr = self.arena, self.trace
        while not arena.can_fit(need):
            free = arena.free_bytes
            if free >= need and self.defrag == "first":
                self._compact()
                continue
            t0 = time.perf_counter()
            victims = self._choose(need)
            tr.search_seconds += time.perf_counter() - t0
            if not victims:
                if free >= need and self.defrag != "never":
                    self._compact()
                    continue
                if self._relieve():
                    continue
                self._stuck(need)
            tr.frag_samples.append(free / self.budget if self.budget else 0.0)
            if free >= need:
                tr.frag_forced_evictions += len(victims)
            for v in victims:
                # a dead tensor kept after a rematerialisation is evicted like any other
                # (MegEngine's auto_evict drops it the same way): counted as an eviction
                self._evict(v)

    def _relieve(self) -> bool:
        """Nothing is evictable: let go of the inputs that frames *below* the running one
        have pinned (they are re-checked, and rematerialised if need be, when those frames
        resume). Returns whether anything was unpinned."""
        done = False
        arena = self.program.arena
        for f in self._frames[:-1]:
            if f[2] > 0:
                for i in f[1][:f[2]]:
                    if arena[i]:
                        self._unpin(i)
                f[2] = 0
                done = True
        if done:
            self.trace.reliefs += 1
        return done

    def _stuck(self, need: int) -> None:
        pinned = sum(self.size[t] for t in range(len(self.size))
                     if self.state[t] == RES and (self.pins[t] or
                                                  not self.program.replayable[t]))
        raise BudgetError(
            f"DTR on {self.program.name}: cannot place {need:,} B in a budget of "
            f"{self.budget:,} B: {pinned:,} B are pinned or cannot be evicted and "
            f"{self.arena.free_bytes:,} B are free. A budget of {self.bounds.safe:,} B "
            f"always works", minimum=self.bounds.safe)

    def _compact(self) -> None:
        moves = self.arena.compact()
        for owner, old, new, nbytes in moves:
            if isinstance(owner, int):
                self.addr[owner] = new
            if self.backend is not None:
                self.backend.move(old, new, nbytes)
            self.trace.moved_bytes += nbytes
        self.trace.defrags += 1

    def _candidates(self) -> list[int]:
        cand = self._cand
        n = len(cand)
        if not self.sample or n <= 4:
            return cand
        k = self.sample if not isinstance(self.sample, bool) else math.isqrt(n - 1) + 1
        if k >= n:
            return cand
        rng, out = self.rng, []
        at = rng.randrange(n)
        span = max(1, 2 * n // k)
        for _ in range(k):
            out.append(cand[at % n])
            at += rng.randint(1, span)
        return out

    def _choose(self, need: int) -> list[int]:
        """The victims of one eviction decision: `choose_victim` over the candidates (a
        sample when sampling; the whole set if the sample gives none), or Coop's window.
        Each set is offered twice: first without the unpinned inputs that waiting ops
        still need (`protect`), then with them. With `keep_dead` and `dead_first`, the dead
        tensors kept after a rematerialisation are offered before anything else."""
        if self.heuristic.window and self.arena.tracks_addresses:
            return self._choose_window(need)
        now, protect, pins = self.now, self.protect, self.pins
        if self.keep_dead and self.dead_first:
            dead = [self._view(t, now) for t in self._cand if self.dead[t] and not pins[t]]
            v = self.choose_victim(dead, need) if dead else None
            if v is not None:
                return [v.index]
        pool = self._candidates()
        for cands in ((pool, self._cand) if pool is not self._cand else (pool,)):
            for strict in (True, False):
                v = self.choose_victim([self._view(t, now) for t in cands
                                        if not (strict and protect[t] and not pins[t])],
                                       need)
                if v is not None:
                    return [v.index]
        return []

    def choose_victim(self, candidates: list[TensorView], need: int) -> TensorView | None:
        """The public hook for candidate selection: which of `candidates` (views of the
        resident, replayable tensors, pinned ones included: `t.pinned`) to evict so that
        `need` bytes may fit; None if none may go. Default: `select(candidates, need)` if
        given, else the unpinned one with the lowest heuristic score (the first on ties).
        Must never return a pinned tensor (DTRError)."""
        if self.select is not None:
            v = self.select(candidates, need)
            if v is not None and self.pins[v.index]:
                raise DTRError(f"select chose {v.name}, which is pinned")
            return v
        h, now, pins = self.heuristic, self.now, self.pins
        score = h.score
        if h.window:        # no addresses: a window rule's cost per byte
            size, cost = self.size, h.score
            score = lambda v, now: cost(v, now) / size[v.index]   # noqa: E731
        best, best_s = None, math.inf
        for v in candidates:
            if pins[v.index]:
                continue
            s = score(v, now)
            if best is None or s < best_s:
                best, best_s = v, s
        return best

    def _choose_window(self, need: int) -> list[int]:
        """Coop's sliding window: over blocks in address order, the contiguous run of free
        blocks and evictable tensors with at least `need` bytes and the lowest summed cost.
        Two pointers per run between unevictable blocks; costs are >= 0, so for each right
        end the shortest window that is big enough is also the cheapest."""
        now, pins, cost = self.now, self.pins, self.heuristic.score
        state, replayable = self.state, self.program.replayable
        blocks = list(self.arena.blocks())
        best_c, best = math.inf, []

        def flush(run: list[tuple[int, float, int]]) -> None:
            nonlocal best_c, best
            lo, have, c = 0, 0, 0.0
            for hi, (nb, cc, _) in enumerate(run):
                have += nb
                c += cc
                while lo < hi and have - run[lo][0] >= need:
                    have -= run[lo][0]
                    c -= run[lo][1]
                    lo += 1
                if have >= need and c < best_c:
                    best_c, best = c, [t for _, _, t in run[lo:hi + 1] if t >= 0]

        run: list[tuple[int, float, int]] = []
        for _start, nb, owner in blocks:
            if owner is None:
                run.append((nb, 0.0, -1))
            elif isinstance(owner, int) and state[owner] == RES and replayable[owner] \
                    and not pins[owner]:
                run.append((nb, max(0.0, cost(self._view(owner, now), now)), owner))
            else:
                flush(run)
                run = []
        flush(run)
        if best:
            return best
        # No window: unevictable blocks cut the arena into runs that are all too short.
        # If the free bytes would do, compact (the caller does); else free bytes greedily,
        # the cheapest per byte first, until they would.
        if self.arena.free_bytes >= need:
            return []
        best_t, best_s = -1, math.inf
        for t in self._cand:
            if not pins[t]:
                s = cost(self._view(t, now), now) / self.size[t]
                if best_t < 0 or s < best_s:
                    best_t, best_s = t, s
        return [best_t] if best_t >= 0 else []

    # Heuristic inputs ----------------------------------------------------------------------
    def _view(self, t: int, now: float) -> TensorView:
        v = self._views[t]
        if v is None:
            v = self._views[t] = TensorView(self, t)
        v.now = now
        return v

    def _cand_add(self, t: int) -> None:
        if t not in self._cpos:
            self._cpos[t] = len(self._cand)
            self._cand.append(t)

    def _cand_remove(self, t: int) -> None:
        k = self._cpos.pop(t, None)
        if k is None:
            return
        last = self._cand.pop()
        if last != t:
            self._cand[k] = last
            self._cpos[last] = k

    def _mge_neighbours(self, t: int) -> list[int]:
        if self._mge_adj is None:
            p = self.program
            adj: list[list[int]] = [[] for _ in p.tensors]
            for op in p.ops:
                ins = [i for i in op.inputs if p.arena[i]]
                outs = [o for o in op.outputs if p.arena[o]]
                for o in outs:
                    adj[o] = ins + [s for s in outs if s != o]
            self._mge_adj = adj
        return self._mge_adj[t]

    def _changed(self, t: int) -> None:
        for key in self._watch.pop(t, ()):
            self._cache.pop(key, None)

    def _cached(self, kind: str, t: int, fn: Callable[[list[int]], float]) -> float:
        key = (kind, t)
        c = self._cache.get(key)
        if c is None:
            watched: list[int] = []
            c = self._cache[key] = fn(watched)
            watch = self._watch
            for y in watched:
                lst = watch.get(y)
                if lst is None:
                    watch[y] = [key]
                else:
                    lst.append(key)
        return c

    def neighbor_cost(self, t: int) -> float:
        """Cost of t's evicted neighbourhood (DTR's e* without c0); cached until a tensor
        the search looked at changes state."""
        p = self.program
        return self._cached("e", t, lambda w: evicted_region(
            t, p.parents, p.children, self.evicted, self.cost_t, w))

    def live_neighbor_cost(self, t: int) -> float:
        """`neighbor_cost` without dead evicted descendants that no live evicted tensor
        needs (see `live_evicted_region`); cached the same way."""
        p = self.program
        return self._cached("l", t, lambda w: live_evicted_region(
            t, p.parents, p.children, self.evicted, self.dead, self.cost_t, w))

    def evicted_neighbors(self, t: int) -> int:
        p, ev = self.program, self.evicted
        return sum(1 for n in p.adj[t] if ev[n])

    def eqclass_cost(self, t: int) -> float:
        """Summed cost of the distinct union-find classes of t's evicted neighbours."""
        d = self.dsu_eq
        roots = {d.find(d.node[n]) for n in self.program.adj[t] if d.node[n] >= 0}
        return sum(d.total[r] for r in roots)

    def megengine_cost(self, t: int) -> float:
        """MegEngine 1.4's estimate_neighbor_cost: for each evicted input of t's producer
        and each evicted sibling output, max(its class cost, its own cost)."""
        d, cost = self.dsu_mge, self.cost_t
        s = 0.0
        for n in self._mge_neighbours(t):
            k = d.node[n]
            if k >= 0:
                s += max(d.total[d.find(k)], cost[n])
        return s

    def ancestor_cost(self, t: int) -> float:
        """c0(t) plus every evicted ancestor that recomputing t would need (cached)."""
        p = self.program
        return self._cached("a", t, lambda w: evicted_ancestors(
            t, p.parents, self.evicted, self.cost_t, w))
