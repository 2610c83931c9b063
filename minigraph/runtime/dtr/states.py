"""A tensor's state in a DTR run: the five values `DTRRuntime.state` holds (runtime.py).

    new       not computed yet
    resident  its bytes are in the arena
    evicted   its bytes were given back, its record is kept: it can be recomputed (an
              eviction, or a fake delete of a dead tensor [MegEngine 2021])
    freed     forgotten for good: nothing can need it any more
    external  outside the arena (parameters, inputs, graph outputs): never evicted

A module of its own because the runtime's helpers (eviction.py, coop_inplace.py) and the
no-eviction walk of bounds.py read them too, and runtime.py imports those.
"""

NEW, RES, EVI, FREED, EXT = range(5)
STATE_NAMES = ("new", "resident", "evicted", "freed", "external")
