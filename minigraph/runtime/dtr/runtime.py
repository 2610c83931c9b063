"""The DTR state machine: one policy for both modes (simulated and real).

Dynamic Tensor Rematerialization [Kirisame 2021], with MegEngine's bookkeeping
[MegEngine 2021]. The runtime walks a `Program` step by step:

* **call op**: make its inputs resident, in the order `Program.bounds` assumes, pinning
  each one as it comes (an evicted input is rematerialised by re-running its producer,
  whose own evicted inputs are rematerialised first: an explicit stack of frames, never
  Python recursion, so a 10,000-op chain is fine); then allocate its outputs and its
  workspace, evicting tensors until each fits in the arena; run it; unpin.
* **release tensor** (its last reader ran): *fake delete* as MegEngine's `free` does: the
  bytes are released at once, but the tensor stays known (state "evicted") while an
  evicted neighbour may still need it to be recomputed; it is *really freed* when no
  tensor that might be recomputed from it is left (MegEngine's `ref_cnt` / `recursive_free`,
  here `hold`). A dead tensor brought back to recompute a neighbour stays resident, as in
  the DTR paper, until memory is short (releases.py).
* **eviction** (eviction.py chooses the victims): the heuristic scores the resident,
  unpinned, replayable tensors; the lowest goes (or Coop's window of contiguous ones).
  Parameters, inputs, graph outputs (external), pinned tensors and outputs of stateful ops
  are never evicted; stateful ops never re-run.
* the arena is one range of exactly `budget` bytes with a first-fit allocator, so an output
  may not fit although enough bytes are free (fragmentation): then more is evicted, or the
  arena is compacted (MegEngine's defragmentation, `DTROptions.defrag`, counted in
  `defrags`): room.py.
* **in place**: DTR runs every op out of place (an input may be needed again to recompute
  something), unless `recomputable_inplace` (Coop [Zhang 2023], coop_inplace.py): then an
  output may take the block of an input it is the last reader of, and that input is
  marked evicted, recomputable. A stateful op writing over an *external* tensor
  (`sgd_update` over the parameter) copies the old value aside first if something that
  may be recomputed reads it (outside the budget, `external_copy_bytes`).
Tensor states: states.py. Real and simulated runs with the same costs decide the same (the
backend only runs kernels and moves bytes). The textbook loop, no extras: minimal.py.
"""

from __future__ import annotations

import time
from typing import Any

from ...errors import MinigraphError, ThrashError
from .allocator import make_arena
from .bounds import budget_bytes, check_budget
from .coop_inplace import overwritten, take_inputs
from .eviction import Candidates, ScoreInputs, lowest_score
from .heuristics import Heuristic, TensorView, get_heuristic
from .hostswap import drop_host, setup, should_swap, swap_in, swap_out
from .options import DTROptions, dtr_options
from .program import Program
from .record import DTRTrace
from .releases import free, release, unpin
from .room import make_room
from .states import EVI, EXT, FREED, NEW, RES, STATE_NAMES, SWP


class DTRError(MinigraphError, RuntimeError):
    """An internal invariant of the DTR runtime broke (a bug, not a user error)."""


class DTRRuntime:
    """Runs a `Program` under `budget` bytes of arena with `DTROptions` (or their fields as
    keywords; `heuristic` may come third); `backend` (real mode) runs kernels, None simulates.

    Candidate selection: `choose_victim(candidates, need)` returns the tensor to evict
    among the views of every resident, replayable tensor (pinned ones included, flagged
    `t.pinned`), or None; by default the lowest heuristic score among the unpinned ones.
    Override it in a subclass, or give `select=fn` with the same signature.
    """

    def __init__(self, program: Program, budget: int, heuristic: Any = None, *,
                 options: DTROptions | None = None, backend: Any = None, **keywords: Any):
        if heuristic is not None:
            keywords["heuristic"] = heuristic
        self.options = o = dtr_options(options, **keywords)
        self.program, self.budget, self.backend = program, budget_bytes(budget), backend
        h = get_heuristic(o.heuristic, **(o.heuristic_args or {}))
        self.heuristic: Heuristic = h.pick(program, self.budget, o) if h.pick else h  # auto
        setup(self)                     # swap inside DTR (`evict`): hostswap.py
        self.arena = make_arena(o.allocator, o.partition, self.budget, program)
        self.bounds = program.bounds()
        self._init_state()
        self.candidates = Candidates(o.sample, o.seed)   # resident, replayable tensors
        self.scores = ScoreInputs(self)
        b, p = self.bounds, program
        self.trace = DTRTrace(p.name, self.heuristic.name, "real" if backend is not None else "sim",
                              self.budget, b.peak, b.lower, b.safe, p.base_cost, b.external,
                              live=b.live)
        self._limit_cost = o.thrash_limit * p.base_cost
        self._limit_replays = o.thrash_limit * max(p.calls, 1) + 100

    # Running --------------------------------------------------------------------------------
    def run(self) -> DTRTrace:
        """Execute every step; returns the trace. Raises BudgetError at once when the budget
        is below `bounds.lower`, ThrashError past the thrash limit."""
        check_budget(self.program, self.budget)
        t0 = time.perf_counter()
        if self.backend is not None:
            self.backend.start(self)
        for kind, x in self.program.steps:
            if kind == "call":
                self._call(x)
            elif kind == "release":
                release(self, x)
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
        p, state, pins, protect = self.program, self.state, self.pins, self.protect
        arena, order_of = p.arena, p.order
        # A frame: [op index (-1: just fetch `want`), its input order, position]
        frames: list[list[Any]] = [[top, order_of[top] if top >= 0 else [want], 0]]
        self.frames, self.reliefs_here = frames, 0
        for i in frames[0][1]:
            protect[i] += 1
        while frames:
            f = frames[-1]
            k, order, pos = f
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
                    break                # rematerialise i first: push its producer
                if st == SWP:
                    swap_in(self, i)     # copied back from host memory: now resident
                    continue
                raise DTRError(f"{p.tensors[i].name} is {STATE_NAMES[st]} but "
                               f"{p.ops[k].name if k >= 0 else 'the end'} needs it")
            f[2] = pos
            if pos < len(order):
                q = p.tensors[order[pos]].producer
                frames.append([q, order_of[q], 0])
                for j in order_of[q]:
                    protect[j] += 1
                continue
            if k >= 0:
                below = frames[-2] if len(frames) > 1 else None
                self._execute(k, replay=below is not None,
                              wanted=below[1][below[2]] if below else None)
            for i in order:
                if arena[i]:
                    unpin(self, i)
            for i in order:
                protect[i] -= 1
            frames.pop()

    def _execute(self, k: int, replay: bool, wanted: int | None) -> None:
        """Place op k's outputs and workspace (evicting as needed), run it, count it."""
        p, tr = self.program, self.trace
        op = p.ops[k]
        before = []
        self.taken = taken = take_inputs(self, k) if op.inplace and not replay and \
            self.options.recomputable_inplace else {}
        for o in op.outputs:
            st = self.state[o] if p.arena[o] else EXT
            before.append(st)
            if st == EXT:
                continue
            if st != RES and o not in taken:
                self._place(o, self.size[o], p.tensors[o].name)
            self.pins[o] += 1
        ws_at = -1
        if op.workspace:
            ws_at = self._place(("ws", k), op.workspace, f"{op.name}#workspace")
        if self.backend is not None:
            self.backend.run_op(self, k, ws_at, replay)
        if taken:
            overwritten(self, taken)
            self.taken = {}
        self.now += op.cost
        if replay:
            self._count_replay(op.cost)
        if self.arena.used_bytes > tr.max_used:    # working memory: tensors + workspace
            tr.max_used, tr.peak_workspace = self.arena.used_bytes, op.workspace
        if ws_at >= 0:
            self.arena.free(ws_at)
            tr.events.append(("free", f"{op.name}#workspace", op.workspace))
        for o, st in zip(op.outputs, before):
            if st != EXT:
                self._written(k, o, st, wanted)
        if self.options.timeline:
            tr.timeline.append((self.now, self.arena.used_bytes))

    def _written(self, k: int, o: int, before: int, wanted: int | None) -> None:
        """Output o of op k was just written; `before` was its state."""
        p = self.program
        self.pins[o] -= 1
        self.last[o] = self.now
        if before == RES:
            return
        if before == FREED:          # written only because the op writes all its outputs
            self.arena.free(self.addr[o])
            self.addr[o] = -1
            self.trace.events.append(("free", p.tensors[o].name, self.size[o]))
            return
        self.state[o] = RES
        if p.replayable[o]:
            self.candidates.add(o)
        if before == NEW:
            if p.replayable[o]:
                for i in p.ops[k].inputs:
                    self.hold[i] += 1
            return
        if before == SWP:            # recomputed with its siblings: the host copy goes
            drop_host(self, o)
        self.recomputes[o] += 1      # EVI (or SWP): rematerialised
        self.trace.remat_tensors += 1
        self.un_evict(o)
        if self.dead[o] and o != wanted and self.pins[o] == 0 and self.hold[o] == 0:
            free(self, o)

    def _count_replay(self, cost: float) -> None:
        self.trace.extra_cost += cost
        self.trace.rematerializations += 1
        self.check_thrash()

    def check_thrash(self) -> None:
        """ThrashError past the thrash limit (extra cost, or op replays)."""
        tr, p = self.trace, self.program
        if tr.extra_cost > self._limit_cost and p.base_cost > 0 or \
                tr.rematerializations > self._limit_replays:
            raise ThrashError(
                f"DTR {self.heuristic.name} on {p.name}: rematerialisation cost "
                f"{tr.extra_cost:g} exceeds {self.options.thrash_limit:g} x the base cost "
                f"{p.base_cost:g} ({tr.rematerializations} op replays) at budget "
                f"{self.budget:,} B; the budget is too small for this heuristic")

    def _place(self, owner: Any, nbytes: int, name: str) -> int:
        """Allocate `nbytes` for `owner` (a tensor or workspace key), evicting till it fits."""
        make_room(self, nbytes)
        at = self.arena.alloc(nbytes, owner)
        if at is None:
            raise DTRError(f"allocator refused {nbytes} B for {name} after make_room")
        if isinstance(owner, int):
            self.addr[owner] = at
        self.trace.events.append(("alloc", name, nbytes))
        return at

    # Eviction (room.py makes room; eviction.py chooses the victims) ------------------------
    def choose_victim(self, candidates: list[TensorView], need: int) -> TensorView | None:
        """The public hook for candidate selection: which of `candidates` (views of the
        resident, replayable tensors, pinned ones included: `t.pinned`) to evict so that
        `need` bytes may fit; None if none may go. Default: `select(candidates, need)` if
        given, else the unpinned one with the lowest heuristic score (the first on ties).
        Must never return a pinned tensor (DTRError)."""
        select = self.options.select
        if select is None:
            return lowest_score(self, candidates, need)
        v = select(candidates, need)
        if v is not None and self.pins[v.index]:
            raise DTRError(f"select chose {v.name}, which is pinned")
        return v

    def evict(self, t: int, fake: bool = False) -> None:
        """t leaves the arena and stays known, recomputable (a fake delete if `fake`); or,
        with `evict` "swap" or "cheaper", its bytes go to host memory (hostswap.py)."""
        if not fake and self.options.evict != "drop" and should_swap(self, t):
            swap_out(self, t)
            return
        p = self.program
        self.arena.free(self.addr[t])
        self.trace.events.append(("free", p.tensors[t].name, self.size[t]))
        self.addr[t] = -1
        self.state[t] = EVI
        self.candidates.remove(t)
        self.evicted[t] = True
        self.scores.evicted(t)
        if fake:
            self.trace.fake_deletes += 1
        else:
            self.trace.evictions += 1
            self.trace.evicted.append(p.tensors[t].name)

    def un_evict(self, t: int) -> None:
        """t is no longer evicted (recomputed, or freed for good)."""
        self.evicted[t] = False
        self.scores.returned(t)

    # State ----------------------------------------------------------------------------------
    def _init_state(self) -> None:
        """Per tensor: its state, bytes, pins, clock of last access, and the counts."""
        p = self.program
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
        self.hold = [0] * n          # replayable tensors computed from it, not yet freed
        self.last = [0.0] * n
        self.recomputes = [0] * n
        self.addr = [-1] * n
        self.evicted = [False] * n   # state == EVI, for the region searches
        self.now = 0.0
        self.frames: list[list[Any]] = []
        self.reliefs_here = 0             # reliefs during the current op's call
        self.taken: dict[int, int] = {}   # in-place hand-overs of the op being placed

    # What a heuristic reads (TensorView): see eviction.ScoreInputs ---------------------------
    # (methods, so that a subclass may replace one: the tests check the caches this way)
    def neighbour_cost(self, t: int) -> float:
        return self.scores.neighbour_cost(t)

    def live_neighbour_cost(self, t: int) -> float:
        return self.scores.live_neighbour_cost(t)

    def evicted_neighbours(self, t: int) -> int:
        return self.scores.evicted_neighbours(t)

    def eqclass_cost(self, t: int) -> float:
        return self.scores.eqclass_cost(t)

    def megengine_cost(self, t: int) -> float:
        return self.scores.megengine_cost(t)

    def ancestor_cost(self, t: int) -> float:
        return self.scores.ancestor_cost(t)

