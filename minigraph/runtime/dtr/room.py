"""Making room for an allocation in a DTR run: evict, compact, relieve, or stop.

While the bytes asked for do not fit in the arena: if enough bytes are free but no block
is large enough (fragmentation), compact the arena at once (`defrag="first"`, MegEngine's
defragmentation [MegEngine 2021]); else evict the victims eviction.py chooses; when
nothing is evictable, compact anyway (unless `defrag="never"`), then let go of the
inputs that ops waiting below a recomputation have pinned (`relief`), and only then stop
with BudgetError naming what is pinned. Functions of the running `DTRRuntime`
(runtime.py), as coop_inplace.py's are.
"""

from __future__ import annotations

import time
from typing import Any

from .bounds import RELIEF_SLACK, stuck_error
from .coop_inplace import follow
from .eviction import choose_victims
from .releases import unpin
from .states import RES


def make_room(rt: Any, need: int) -> None:
    """Evict or compact until `need` bytes fit in the arena (the module doc's order)."""
    arena, tr, defrag = rt.arena, rt.trace, rt.options.defrag
    while not arena.can_fit(need):
        free = arena.free_bytes
        if free >= need and defrag == "first":
            compact(rt)
            continue
        t0 = time.perf_counter()
        victims = choose_victims(rt, need)
        tr.search_seconds += time.perf_counter() - t0
        if not victims:
            if free >= need and defrag != "never":
                compact(rt)
                continue
            if rt.options.relief and relieve(rt):
                continue
            stuck(rt, need)
        tr.frag_samples.append(free / rt.budget if rt.budget else 0.0)
        if free >= need:
            tr.frag_forced_evictions += len(victims)
        for v in victims:
            rt.evict(v)


def relieve(rt: Any) -> bool:
    """Nothing is evictable: let go of the inputs that frames *below* the running one
    have pinned (they are re-checked, and rematerialised if need be, when those frames
    resume). Returns whether anything was unpinned."""
    done, arena = False, rt.program.arena
    for f in rt.frames[:-1]:
        if f[2] > 0:
            for i in f[1][:f[2]]:
                if arena[i]:
                    unpin(rt, i)
            f[2] = 0
            done = True
    if done:
        rt.trace.reliefs += 1
        rt.reliefs_here += 1      # in one op's call: bounded, or it could cycle
        if rt.reliefs_here > rt.program.calls + RELIEF_SLACK:
            stuck(rt, 0, cycling=True)
    return done


def stuck(rt: Any, need: int, cycling: bool = False) -> None:
    """Stop: BudgetError saying what is pinned and what is free (bounds.stuck_error)."""
    pinned = sum(rt.size[t] for t in range(len(rt.size))
                 if rt.state[t] == RES and (rt.pins[t] or not rt.program.replayable[t]))
    raise stuck_error(rt.program.name, need, rt.budget, pinned,
                      rt.arena.free_bytes, rt.bounds, rt.options.defrag, cycling)


def compact(rt: Any) -> None:
    """Move every block down (the arena's `compact`; the backend moves the bytes too)."""
    moves = rt.arena.compact()
    if rt.backend is not None:
        rt.backend.move_all(moves, rt.arena.staged_moves)
    for owner, _old, new, nbytes in moves:
        if isinstance(owner, int):
            rt.addr[owner] = new
        rt.trace.moved_bytes += nbytes
    follow(rt, rt.taken)
    rt.trace.defrags += 1
