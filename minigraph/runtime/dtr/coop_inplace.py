"""Coop's recomputable in-place [Zhang 2023]: an op may write its output over its input,
and the input stays recomputable.

DTR runs every op out of place: the input must stay intact, because an evicted tensor
computed from it may need it again [Kirisame 2021]. Out of place, `y = relu(x)` (x's last
reader) needs a second block while x is still resident, and x's block becomes a hole
when x is released a moment later. In place, y takes x's block: no allocation, no hole,
y sits where x was. What makes it safe under DTR is that the runtime records what
happened: x is marked evicted, exactly as if it had been evicted after the op, so a
recomputation that needs x again re-runs x's producer (x itself is never lost).

The pairs that may share come from the program (`program.op_inplace_pairs`: the in-place
rule of `minigraph.memory.inplace`, and this op is x's last reader). At run time a pair is
taken on the op's first execution only (a replay runs out of place), when x is resident
and pinned by this op alone, and x can be recomputed (y, computed from x, holds it). In a
partitioned arena (allocator.py) a pair is taken only when x and y are of one class, cheap or dear:
a cheap output in a dear tensor's block would undo the partition. Parameters here live
outside the arena (program.py), so the other half of Coop's in-place, parameter updates
that must not split the arena, is given already.
"""

from __future__ import annotations

from typing import Any

from .states import EVI, NEW, RES


def take_inputs(rt: Any, k: int) -> dict[int, int]:
    """Give each output of op k that may share its input's block that block (the arena's
    `give`, and the events an allocator simulator replays: x freed, y allocated).
    Returns {output: input} for the pairs taken."""
    p = rt.program
    dear = getattr(rt.arena, "expensive", None)      # a partitioned arena's classes
    taken: dict[int, int] = {}
    for x, y in p.ops[k].inplace:
        if rt.state[y] != NEW or rt.state[x] != RES or rt.pins[x] != 1 or \
                not p.replayable[x] or (dear is not None and dear(x) != dear(y)):
            continue
        at = rt.addr[x]
        rt.arena.give(at, y)
        rt.addr[y] = at
        ev = rt.trace.events
        ev.append(("free", p.tensors[x].name, rt.size[x]))
        ev.append(("alloc", p.tensors[y].name, rt.size[y]))
        taken[y] = x
    return taken


def overwritten(rt: Any, taken: dict[int, int]) -> None:
    """After the op ran: each input whose block an output took is evicted (its bytes
    now hold the output; its metadata stays, so it can be recomputed)."""
    for x in taken.values():
        rt.addr[x] = -1
        rt.state[x] = EVI
        rt.evicted[x] = True
        rt.candidates.remove(x)
        rt.scores.evicted(x)
        rt.trace.inplace += 1


def follow(rt: Any, taken: dict[int, int]) -> None:
    """After a compaction between the hand-over and the kernel: each input is still read
    from the block its output now owns."""
    for y, x in taken.items():
        rt.addr[x] = rt.addr[y]
