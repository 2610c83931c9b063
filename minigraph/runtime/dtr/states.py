"""A tensor's state in a DTR run: the six values `DTRRuntime.state` holds (runtime.py).

    new       not computed yet
    resident  its bytes are in the arena
    evicted   its bytes were given back, its record is kept: it can be recomputed (an
              eviction, or a fake delete of a dead tensor [MegEngine 2021])
    freed     forgotten for good: nothing can need it any more
    external  outside the arena (parameters, inputs, graph outputs): never evicted
    swapped   its bytes were copied to host memory and given back: copied back, not
              recomputed, when needed (MegEngine's EvictType::SWAP; only with
              `DTROptions.evict` "swap" or "cheaper", hostswap.py)

A module of its own because the runtime's helpers (eviction.py, coop_inplace.py) and the
no-eviction walk of bounds.py read them too, and runtime.py imports those.
"""

NEW, RES, EVI, FREED, EXT, SWP = range(6)
STATE_NAMES = ("new", "resident", "evicted", "freed", "external", "swapped")
