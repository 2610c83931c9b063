"""Traces: what an online allocator sees, one alloc/free event at a time.

A trace is a list of `("alloc", id, size)` and `("free", id, size)` tuples, in the order a
program asks. A static planner sees every lifetime at once (Chainer-Opt's 2D
strip packing [Sekiyama 2018]); an online allocator sees only this sequence and must place each
tensor when it is asked for, without knowing when it will be freed ([Zhang 2023], [Steiner 2023]:
that is where fragmentation comes from). The DTR runtime's `result.events` use the same tuples.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any

from ...errors import MinigraphError
from ...graph import Graph
from ..api import MemoryOptions, planning_buffers
from ..buffers import Buffer
from ..liveness import Liveness, liveness
from ..orders import schedule as make_schedule

Event = tuple[str, Hashable, int]
KINDS = ("alloc", "free")


class TraceError(MinigraphError, ValueError):
    """A trace breaks its rules: unknown event, double alloc, free of a tensor not alive."""


def as_trace(events: Any) -> list[Event]:
    """Check and normalise a trace: a list of tuples, or anything with `.events` (a DTR run).

    A free may be written `("free", id)`, `("free", id, 0)` or `("free", id, size)` with
    the alloc's size; its size is taken from the alloc. An id is hashable and not None.
    Raises TraceError naming the event index and the tensor.
    """
    events = getattr(events, "events", events)
    if isinstance(events, (str, bytes, dict)) or not isinstance(events, Iterable):
        raise TraceError(f"a trace is a list of (kind, id, size) events, not "
                         f"{type(events).__name__}")
    out: list[Event] = []
    live: dict[Hashable, int] = {}
    for k, ev in enumerate(events):
        if not isinstance(ev, (tuple, list)) or len(ev) not in (2, 3):
            raise TraceError(f"event {k}: {ev!r} is not (kind, id, size)")
        kind, tid = ev[0], ev[1]
        if tid is None or not isinstance(tid, Hashable) or isinstance(tid, bool):
            raise TraceError(f"event {k}: {kind} of id {tid!r}; an id is a name or a "
                             "number (None marks a free block)")
        if kind == "alloc":
            size = ev[2] if len(ev) == 3 else None
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise TraceError(f"event {k}: alloc of {tid!r} has size {size!r}; a size is "
                                 "a non-negative integer number of bytes")
            if tid in live:
                raise TraceError(f"event {k}: alloc of {tid!r}, which is already alive "
                                 f"({live[tid]} bytes); free it first")
            live[tid] = size
            out.append(("alloc", tid, size))
        elif kind == "free":
            if tid not in live:
                raise TraceError(f"event {k}: free of {tid!r}, which is not alive")
            if len(ev) == 3 and ev[2] not in (0, live[tid]) or isinstance(ev[-1], bool):
                raise TraceError(f"event {k}: free of {tid!r} with {ev[2]!r} bytes; its "
                                 f"alloc had {live[tid]} (0, or no size, means the alloc's)")
            out.append(("free", tid, live.pop(tid)))
        else:
            raise TraceError(f"event {k}: unknown kind {kind!r}; expected one of {KINDS}")
    return out


def trace_from_buffers(buffers: Iterable[Buffer]) -> list[Event]:
    """The events of a buffer list: at each step first the allocs of buffers starting
    there, then the frees of buffers whose last reader ran there (`end` is inclusive)."""
    starts: dict[int, list[Buffer]] = {}
    ends: dict[int, list[Buffer]] = {}
    for b in buffers:
        starts.setdefault(b.start, []).append(b)
        ends.setdefault(b.end, []).append(b)
    out: list[Event] = []
    for t in sorted(set(starts) | set(ends)):
        out.extend(("alloc", b.id, b.size) for b in starts.get(t, ()))
        out.extend(("free", b.id, b.size) for b in ends.get(t, ()))
    return out


def trace_from_schedule(graph_or_liveness: Graph | Liveness, schedule: Sequence[str] | None
                        = None, *, order: str = "program", alignment: int = 1,
                        inplace: bool = False, planned_only: bool = True) -> list[Event]:
    """The alloc/free events of running a schedule op by op with an online allocator.

    A tensor is allocated at the step that produces it (before that step's frees, since
    an op's inputs are still read while it writes its output) and freed after its last
    reader. `alignment=1` keeps raw byte sizes (the allocator rounds them itself).
    `inplace=True` lets an output take its input's block (the in-place pass decides
    which; the chain is one alloc and one free). `planned_only=False` adds the tensors no
    planner touches: inputs, parameters and constants alive from the start, graph outputs
    from their producer, all freed at the end.
    """
    if isinstance(graph_or_liveness, Liveness):
        if inplace:
            raise TraceError("inplace=True needs the graph, not only its liveness")
        live, graph = graph_or_liveness, None
    else:
        graph = graph_or_liveness
        live = liveness(graph, schedule if schedule is not None else
                        make_schedule(graph, order), alignment)
    if inplace:
        buffers, _, _, _ = planning_buffers(graph, live, MemoryOptions(inplace=True))
    else:
        buffers = live.buffers()
    buffers = [b for b in buffers if b.size]
    if not planned_only:
        last = max(live.steps - 1, 0)
        for iv in live.intervals.values():
            if not iv.planned and iv.bytes:
                start = -1 if iv.kind in ("input", "param", "const") else iv.start
                buffers.append(Buffer(iv.name, start, last, iv.bytes))
    return trace_from_buffers(buffers)


def peak_live(trace: Iterable[Event]) -> int:
    """The largest sum of sizes alive at once: no allocator can reserve less."""
    live = best = 0
    for kind, _, size in trace:
        live += size if kind == "alloc" else -size
        best = max(best, live)
    return best


def total_allocated(trace: Iterable[Event]) -> int:
    """Bytes of every alloc together: what no reuse at all would reserve."""
    return sum(size for kind, _, size in trace if kind == "alloc")


def buffers_from_trace(trace: Iterable[Event]) -> list[Buffer]:
    """The trace as rectangles for a static planner: each alloc/free pair is a buffer alive
    from its alloc event to its free event (event indices as steps). A tensor allocated
    again after a free (DTR recomputes it) is a new buffer `(id, k)`."""
    open_: dict[Hashable, tuple[int, int, int]] = {}
    seen: dict[Hashable, int] = {}
    out: list[Buffer] = []
    events = as_trace(trace)
    for k, (kind, tid, size) in enumerate(events):
        if kind == "alloc":
            n = seen.get(tid, 0)
            seen[tid] = n + 1
            open_[tid] = (k, size, n)
        else:
            start, size, n = open_.pop(tid)
            if size:
                out.append(Buffer((tid, n), start, k, size))
    last = len(events)
    for tid, (start, size, n) in open_.items():   # never freed: alive to the end
        if size:
            out.append(Buffer((tid, n), start, last, size))
    return out
