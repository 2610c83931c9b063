"""Swap inside DTR: an evicted tensor is dropped (recomputed later) or copied to host
memory (copied back when needed), whichever is cheaper.

MegEngine's DTR evicts a tensor in one of two ways [MegEngine 2021]: `EvictType::DROP`
(its bytes go, `regenerate` re-runs its producer) and `EvictType::SWAP` (its bytes are
copied to host memory first, `regenerate` copies them back). Capuchin [Peng 2020] chooses
per tensor from the costs: swap when the copies are cheaper than the recomputation. Here
`DTROptions.evict` says which:

    drop     every victim is dropped: DTR as in the paper [Kirisame 2021] (the default)
             (a dead victim, kept only for its neighbours' recomputation, always is)
    swap     every victim is copied to host memory while `host_limit` allows; one that
             does not fit there is dropped (counted: `DTRTrace.host_refused`)
    cheaper  a victim is swapped when its two copies cost less than recomputing it now
             (its producer and the evicted ancestors that must come back first: MSPS's
             `ancestor_cost`), `host_limit` allowing; and the heuristic's score is scaled
             by min(1, swap / recompute), so a tensor cheap to copy is a cheap victim (for
             MSPS the score becomes min(recompute, swap) / size: Capuchin's choice)

Costs. A copy takes `machine.transfer(bytes)` seconds (latency + bytes / bandwidth,
`memory/swap.py`'s `Machine`), converted to the runtime's cost unit by `cost_rate`: with
FLOP costs (the default) a second is `machine.compute` FLOPs, the work the machine could
have done meanwhile; with costs in seconds the rate is 1. The runtime has one stream: the
offload is charged when the tensor is evicted, the copy back when it is needed, each to
the clock and to `extra_cost` (an upper bound: no copy overlaps compute; the static swap
plan's copy stream, `swap.copy_stream`, is where overlap is modelled).

A swapped tensor is not *evicted* for the neighbourhood searches (DTR's e*): recomputing
a reader needs its copy back, never its producer. In real mode the backend copies the
bytes to a host buffer of their own and back (`ArrayBackend.swap_out`, `swap_in`), and
the arena bytes in between are reused by others, so a wrong plan gives wrong numbers.
Functions of the running `DTRRuntime` (runtime.py), as coop_inplace.py's are.
"""

from __future__ import annotations

from typing import Any

from ...memory.swap_plan import machine_of
from .heuristics import Heuristic
from .states import RES, SWP


def setup(rt: Any) -> None:
    """The runtime's swap state: its link, the cost of a second, host bytes in use; with
    `evict="cheaper"` the heuristic's score scaled by the swap's share (module doc)."""
    o = rt.options
    rt.machine = machine_of(o.machine)
    rt.cost_rate = rt.machine.compute if o.cost_rate == "flops" else float(o.cost_rate)
    rt.host_used = 0
    h = rt.heuristic
    if o.evict == "cheaper" and not h.window:
        rt.heuristic = Heuristic(f"{h.name}+swap", cheaper_score(rt, h.score), False,
                                 h.params)


def copy_cost(rt: Any, t: int) -> float:
    """One copy of t, either way, in the runtime's cost unit."""
    return rt.cost_rate * rt.machine.transfer(rt.size[t])


def host_room(rt: Any, t: int) -> bool:
    limit = rt.options.host_limit
    return limit is None or rt.host_used + rt.size[t] <= limit


def should_swap(rt: Any, t: int) -> bool:
    """Whether victim t goes to host memory rather than being dropped (module doc)."""
    mode = rt.options.evict
    if mode == "drop" or rt.dead[t]:
        return False          # dead: read again only if a neighbour is recomputed
    if mode == "cheaper" and not 2 * copy_cost(rt, t) < rt.ancestor_cost(t):
        return False
    if not host_room(rt, t):
        rt.trace.host_refused += 1
        return False
    return True


def cheaper_score(rt: Any, score: Any) -> Any:
    """`score` scaled by min(1, swap / recompute) where t would be swapped: a positive
    score (or a tuple's first key) only; a negative one (LRU's -staleness) reads no cost."""
    def scaled(v: Any, now: float) -> Any:
        s = score(v, now)
        t = v.index
        recompute = rt.ancestor_cost(t)
        swap = 2 * copy_cost(rt, t)
        if rt.dead[t] or not (recompute > 0 and swap < recompute) or not host_room(rt, t):
            return s
        f = swap / recompute
        if isinstance(s, tuple):
            return (s[0] * f, *s[1:]) if s[0] > 0 else s
        return s * f if s > 0 else s
    return scaled


def swap_out(rt: Any, t: int) -> None:
    """Victim t: its bytes to host memory, its block given back; state swapped."""
    p, tr = rt.program, rt.trace
    if rt.backend is not None:
        rt.backend.swap_out(rt, t)
    rt.arena.free(rt.addr[t])
    tr.events.append(("free", p.tensors[t].name, rt.size[t]))
    rt.addr[t] = -1
    rt.state[t] = SWP
    rt.candidates.remove(t)
    rt.host_used += rt.size[t]
    tr.host_peak = max(tr.host_peak, rt.host_used)
    tr.bytes_out += rt.size[t]
    tr.evictions += 1
    tr.evicted.append(p.tensors[t].name)
    tr.swapped.append(p.tensors[t].name)
    tr.transfers.append((rt.now, "out", p.tensors[t].name, rt.size[t]))
    charge(rt, copy_cost(rt, t))


def swap_in(rt: Any, t: int) -> None:
    """A swapped t is needed: placed (making room), its bytes copied back; resident."""
    rt._place(t, rt.size[t], rt.program.tensors[t].name)
    if rt.backend is not None:
        rt.backend.swap_in(rt, t)
    rt.state[t] = RES
    rt.candidates.add(t)
    rt.host_used -= rt.size[t]
    rt.trace.bytes_in += rt.size[t]
    rt.trace.swap_ins += 1
    rt.trace.transfers.append((rt.now, "in", rt.program.tensors[t].name, rt.size[t]))
    charge(rt, copy_cost(rt, t))


def drop_host(rt: Any, t: int) -> None:
    """t's host copy is not needed any more (t freed for good, or recomputed anyway)."""
    if rt.backend is not None:
        rt.backend.drop_host(rt, t)
    rt.host_used -= rt.size[t]


def charge(rt: Any, cost: float) -> None:
    """A copy on the one stream: the clock and the extra cost advance by its cost."""
    rt.now += cost
    rt.trace.extra_cost += cost
    rt.trace.transfer_cost += cost
    rt.check_thrash()
