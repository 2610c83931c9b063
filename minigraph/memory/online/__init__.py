"""Online allocation: replay a program's alloc/free events through allocator simulators,
measure what each one reserves, and see the fragmentation a static plan avoids.

    from minigraph.memory.online import trace_from_schedule, replay_allocator
    trace = trace_from_schedule(step)                # ("alloc"|"free", tensor, bytes) tuples
    replay_allocator(trace, "caching").summary()      # reserved vs peak, fragmentation, mallocs

Reading order: trace.py (the events), base.py (segments, blocks, the books and their
invariants), arena.py (first fit, best fit), caching.py (PyTorch's caching allocator,
CuPy's pool), expandable.py (PyTorch's expandable segments), stitching.py (GMLake).
Comparing them with the static planners is an experiment (`minigraph.experiments.allocators`,
`minigraph.experiments.pool` for the real CuPy pool); the pictures are in
`minigraph.viz.allocator_plots`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ...errors import MinigraphError
from .arena import ArenaAllocator, BestFitAllocator, FirstFitAllocator  # noqa: F401
from .base import (  # noqa: F401
    AllocatorResult,
    Block,
    FreePool,
    HistoryRow,
    InvariantError,
    KiB,
    MiB,
    OnlineAllocator,
    OutOfMemoryError,
    Rect,
    Segment,
)
from .caching import CachingAllocator, CupyPoolAllocator, roundup_power2_next_division  # noqa: F401
from .expandable import ExpandableAllocator, FinePageExpandableAllocator  # noqa: F401
from .stitching import StitchingAllocator  # noqa: F401
from .trace import (  # noqa: F401
    Event,
    TraceError,
    as_trace,
    buffers_from_trace,
    peak_live,
    total_allocated,
    trace_from_buffers,
    trace_from_schedule,
)

#: name -> allocator class; `replay_allocator(trace, name, **options)` builds one, replays.
ALLOCATORS: dict[str, Callable[..., OnlineAllocator]] = {
    "first-fit": FirstFitAllocator,
    "best-fit": BestFitAllocator,
    "caching": CachingAllocator,
    "cupy-pool": CupyPoolAllocator,
    "expandable": ExpandableAllocator,
    "expandable-2m": FinePageExpandableAllocator,
    "gmlake": StitchingAllocator,
}


class AllocatorOptionError(MinigraphError, ValueError):
    """An allocator name or option `make_allocator` does not know; names the known ones."""


def make_allocator(name: str, **options: Any) -> OnlineAllocator:
    """A fresh allocator by name (see `ALLOCATORS`), with its options (AllocatorOptionError
    for an unknown name or option)."""
    cls = ALLOCATORS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise AllocatorOptionError(f"unknown allocator {name!r}; known: "
                                   f"{', '.join(ALLOCATORS)}")
    try:
        return cls(**options)
    except TypeError as e:          # an unexpected keyword, here or in a base class
        if "unexpected keyword" not in str(e):
            raise
        takes = [p.name for p in inspect.signature(cls).parameters.values()
                 if p.kind is p.KEYWORD_ONLY or p.kind is p.POSITIONAL_OR_KEYWORD]
        raise AllocatorOptionError(f"allocator {name!r}: {e}; its options include "
                                   f"{', '.join(takes)}") from None


def replay_allocator(trace: Any, allocator: str | OnlineAllocator = "caching", *,
                     check: bool = False, **options: Any) -> AllocatorResult:
    """Replay `trace` (tuples, or a DTR run with `.events`) through an allocator."""
    a = make_allocator(allocator, **options) if isinstance(allocator, str) else allocator
    return a.replay(trace, check=check)
