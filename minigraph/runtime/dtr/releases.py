"""When a tensor dies in a DTR run: MegEngine's fake delete and real free [MegEngine 2021].

A *release* (the tensor's last reader ran) frees its bytes at once, but the tensor stays
known (state "evicted") while an evicted neighbour may still need it to be recomputed: a
*fake delete*, MegEngine's `do_drop`. It is *really freed* when no tensor that might be
recomputed from it is left (`hold` counts them: MegEngine's `ref_cnt`), and freeing it
may free its own inputs in turn (an explicit worklist: MegEngine's `recursive_free`). A
dead tensor brought back to recompute a neighbour stays resident, as in the DTR paper,
until memory is short. Functions of the running `DTRRuntime` (runtime.py), as
coop_inplace.py's are.
"""

from __future__ import annotations

from typing import Any

from .hostswap import drop_host
from .states import EVI, EXT, FREED, RES, SWP


def release(rt: Any, t: int) -> None:
    """t's last reader ran: t is dead; resident and unpinned, its bytes go now (a fake
    delete, or a real free if nothing holds it); evicted and held by nothing, freed."""
    if rt.state[t] == EXT:
        return
    rt.dead[t] = True
    st = rt.state[t]
    if st == EVI:
        rt.scores.changed(t)       # a cached live neighbourhood may have counted it
    if st == RES and rt.pins[t] == 0:
        drop_dead(rt, t)
    elif st in (EVI, SWP) and rt.hold[t] == 0:
        free(rt, t)       # a swapped one still held waits on the host for its neighbours


def drop_dead(rt: Any, t: int) -> None:
    """A dead, resident, unpinned tensor: free it for good if nothing can need it,
    else release its bytes and keep its metadata (MegEngine's do_drop)."""
    if rt.hold[t] == 0:
        free(rt, t)
    elif rt.program.replayable[t]:
        rt.evict(t, fake=True)
    # else: not replayable and still needed by a neighbour's recomputation: stays.


def free(rt: Any, t: int) -> None:
    """Really free t, then every parent that nothing holds any more (an explicit
    worklist; MegEngine's recursive_free)."""
    p, state, hold = rt.program, rt.state, rt.hold
    work = [t]
    while work:
        x = work.pop()
        st = state[x]
        if st == RES:
            if rt.pins[x]:
                continue              # freed when unpinned
            rt.arena.free(rt.addr[x])
            rt.trace.events.append(("free", p.tensors[x].name, rt.size[x]))
            rt.addr[x] = -1
            rt.candidates.remove(x)
        elif st == EVI:
            rt.un_evict(x)
        elif st == SWP:
            drop_host(rt, x)
        else:
            continue
        state[x] = FREED
        rt.trace.frees += 1
        if p.replayable[x]:
            for i in p.ops[p.tensors[x].producer].inputs:
                hold[i] -= 1
                if hold[i] == 0 and rt.dead[i] and state[i] in (RES, EVI, SWP):
                    work.append(i)


def unpin(rt: Any, i: int) -> None:
    """An op no longer needs i: a dead tensor the last pin let go of is dropped."""
    rt.pins[i] -= 1
    if rt.pins[i] == 0 and rt.dead[i] and rt.state[i] == RES:
        if rt.hold[i] == 0:
            free(rt, i)
        elif not rt.recomputes[i]:     # a kept dead tensor waits for pressure
            drop_dead(rt, i)
