"""`MemoryPlan`: where every planned tensor lives in the one arena, and the proof it is safe."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import PlanError
from ..graph import Graph, fmt_bytes
from .buffers import Buffer, validate_offsets
from .coloring import producers
from .inplace import check_rule, inplace_refusal
from .liveness import PLANNED_KINDS, Interval, Liveness, check_schedule, itemsize, liveness


def offset_alignment(graph: Graph, alignment: int) -> int:
    """The alignment `plan_memory` places offsets at: `alignment`, raised to a multiple of
    every planned tensor's itemsize (1 on a float32 graph places at 4, 3 at 12): NumPy's
    kernels round differently on an unaligned array (other bits than the run without
    reuse), CuPy cannot view one. Sizes stay rounded to `alignment` alone."""
    outputs = set(graph.outputs)
    sizes = {itemsize(t.dtype) for t in graph.tensors.values()
             if t.kind in PLANNED_KINDS and t.name not in outputs}
    return math.lcm(alignment, *sizes)


@dataclass
class MemoryPlan:
    """Offset and size of every planned tensor of one schedule of one graph.

    `arena_bytes` is the end of the highest tensor; `inplace` lists (input, output)
    hand-overs, `inplace_rule` the rule they keep ("last-reader" or "strict", `inplace.py`;
    None: made without in-place, so none); `note` is what the planner said (the ILP's gap);
    `graph` the graph it was planned for (None for a plan made by hand).

    A plan is bound to its `liveness`: the schedule, every tensor's interval and aligned
    bytes, which tensors are external (never in `offsets`). `bound_to` refuses any other
    graph, naming the first difference; the Executor asks it first."""
    liveness: Liveness
    offsets: dict[str, int]
    arena_bytes: int
    inplace: list[tuple[str, str]] = field(default_factory=list)
    planner: str = "none"
    note: str = ""
    colors: dict[str, int] = field(default_factory=dict)
    graph: Graph | None = field(default=None, repr=False, compare=False)
    inplace_rule: str | None = "last-reader"

    @property
    def schedule(self) -> tuple[str, ...]:
        return self.liveness.schedule

    @property
    def alignment(self) -> int:
        return self.liveness.alignment

    def size(self, name: str) -> int:
        return self.liveness.intervals[name].bytes

    @property
    def no_reuse_bytes(self) -> int:
        return self.liveness.no_reuse_bytes()

    def buffers(self) -> list[Buffer]:
        """One buffer per planned tensor (not merged): what the validator checks."""
        return [Buffer(iv.name, iv.start, iv.end, iv.bytes, self.colors.get(iv.name, 0))
                for iv in self.liveness.planned()]

    def bound_to(self, graph: Graph) -> MemoryPlan:
        """Raise PlanError, naming the first difference, unless this plan was made for
        `graph`: its schedule a topological order of `graph`'s nodes, every tensor's
        interval, bytes and kind as when planned, offsets for the planned tensors only."""
        check_schedule(graph, self.schedule)            # ScheduleError is a PlanError
        _same_tensors(self.liveness, liveness(graph, self.schedule, self.alignment))
        self._offsets_name_planned_tensors()
        return self

    def validate(self, graph: Graph | None = None) -> MemoryPlan:
        """Raise PlanError unless no two tensors alive at one step overlap (in-place
        hand-overs excepted), every offset is aligned (with a graph, to its itemsize too)
        and everything fits in the arena. Against `graph` (default: the one it was planned
        for) the plan must be `bound_to` it and every hand-over keep `inplace_rule`
        (`inplace_refusal`); without a graph a plan with hand-overs is refused."""
        graph = graph if graph is not None else self.graph
        if graph is not None:
            self.bound_to(graph)
        return self.prove(graph)

    def prove(self, graph: Graph | None) -> MemoryPlan:
        """`validate` once the plan is known to be bound to `graph` (`plan_memory` has just
        made its liveness from the graph, so it skips `bound_to`'s second liveness pass)."""
        self._offsets_name_planned_tensors()
        self._check_rule()
        if graph is not None:
            self.check_itemsizes(graph)
        if graph is None and self.inplace:
            a, b = self.inplace[0]
            raise PlanError(f"in-place {a} -> {b} cannot be checked without the graph: "
                            "plan.validate(graph)")
        for a, b in self.inplace if graph is not None else ():
            why = inplace_refusal(graph, self.liveness, a, b, self.colors, self.inplace_rule)
            if why:
                raise PlanError(f"in-place {a} -> {b} is refused ({self.inplace_rule} rule): "
                                f"{why}")
        validate_offsets(self.buffers(), self.offsets, self.arena_bytes, self.alignment,
                         self.inplace)
        return self

    def check_itemsizes(self, graph: Graph) -> MemoryPlan:
        """Raise PlanError unless every offset is a multiple of its tensor's itemsize (the
        executor views the arena there as the dtype; why, `offset_alignment`)."""
        for name, off in self.offsets.items():
            dtype = graph.tensors[name].dtype
            k = itemsize(dtype)
            if off % k:
                raise PlanError(f"tensor {name} ({dtype}) at offset {off} is not a multiple "
                                f"of its itemsize {k}: its elements would be read unaligned "
                                f"(other results than without reuse); plan at an alignment "
                                f"that is a multiple of {k} (plan_memory does so itself)")
        return self

    def _check_rule(self) -> None:
        """The recorded rule is a known one, or None for a plan with no hand-overs."""
        if self.inplace_rule is None:
            if self.inplace:
                a, b = self.inplace[0]
                raise PlanError(f"in-place {a} -> {b} in a plan whose in-place rule is None "
                                "(made without in-place)")
        else:
            check_rule(self.inplace_rule)

    def _offsets_name_planned_tensors(self) -> None:
        """Offsets for planned tensors only: an external tensor (a graph input, say) given an
        offset would be read from the arena instead of its own storage."""
        ivs = self.liveness.intervals
        for name in self.offsets:
            iv = ivs.get(name)
            if iv is None:
                raise PlanError(f"offsets list {name}, which is not a tensor of the graph the "
                                "plan was made for")
            if not iv.planned:
                raise PlanError(f"offsets list graph {iv.kind} {name}: inputs, parameters, "
                                "constants and graph outputs keep their own storage")

    def shared_with(self, name: str) -> list[str]:
        """Other tensors that use some of the same bytes (at other times)."""
        lo, hi = self.offsets[name], self.offsets[name] + self.size(name)
        return [o for o, off in self.offsets.items() if o != name and self.size(o)
                and off < hi and lo < off + self.size(o)]

    def parallel_hazards(self, graph: Graph) -> list[tuple[str, str]]:
        """Pairs (a, b) sharing bytes where b's producer is not ordered after every reader
        of a by the graph itself: run concurrently, b could overwrite a while it is read.
        Only a's in-place successor and the tensors born after a dies, up to step `last`,
        are compared with a: after `last` every node descends from each use of a, so
        nothing born there can be a hazard (on a chain, O(n) pairs instead of all)."""
        order = list(self.schedule)
        pos = {n: k for k, n in enumerate(order)}
        anc, desc = ancestor_bits(graph, order), descendant_bits(graph, order)
        full = (1 << len(order)) - 1
        gives: dict[str, list[str]] = {}
        for x, y in self.inplace:
            gives.setdefault(x, []).append(y)
        ivs = self.liveness.intervals
        names = sorted((n for n in self.offsets if self.size(n)), key=lambda n: ivs[n].start)
        starts = [ivs[n].start for n in names]
        index = {n: j for j, n in enumerate(names)}
        hazards = []
        for i, a in enumerate(names):
            lo, hi = self.offsets[a], self.offsets[a] + self.size(a)
            users = [graph.tensors[a].producer, *graph.consumers[a]]
            after = full
            for u in users:
                after &= desc[u]
            last = (full & ~after).bit_length() - 1     # the last node not after every use
            first = bisect.bisect_right(starts, ivs[a].end)      # born after a dies
            hand = sorted(j for b in gives.get(a, ()) if i < (j := index.get(b, -1)) < first)
            for j in [*hand, *range(first, bisect.bisect_right(starts, last))]:
                b = names[j]
                off = self.offsets[b]
                if off >= hi or lo >= off + self.size(b):
                    continue
                pb = graph.tensors[b].producer
                if any(u != pb and not (anc[pb] >> pos[u]) & 1 for u in users):
                    hazards.append((a, b))
        return hazards

    def table(self, limit: int | None = 60) -> str:
        """Per-tensor layout, in the spirit of the GE blog's --dump-memory-layout [Huawei GE]."""
        inplace_of = {y: x for x, y in self.inplace}
        rows = [f"{'tensor':24} {'bytes':>10} {'start':>5} {'end':>5} {'offset':>10}  shares"]
        ivs = sorted(self.liveness.planned(), key=lambda iv: (self.offsets[iv.name], iv.start))
        for iv in ivs[:limit]:
            note = f"in place of {inplace_of[iv.name]}" if iv.name in inplace_of else \
                ", ".join(self.shared_with(iv.name)[:3])
            rows.append(f"{iv.name:24} {iv.bytes:>10} {iv.start:>5} {iv.end:>5} "
                        f"{self.offsets[iv.name]:>10}  {note}")
        if limit is not None and len(ivs) > limit:
            rows.append(f"... {len(ivs) - limit} more tensors")
        rows.append(f"arena {self.arena_bytes} B ({fmt_bytes(self.arena_bytes)}), "
                    f"no reuse {self.no_reuse_bytes} B")
        return "\n".join(rows)

    def __repr__(self) -> str:
        return (f"MemoryPlan({self.planner}: arena {fmt_bytes(self.arena_bytes)}, "
                f"{len(self.offsets)} tensors, {len(self.inplace)} in place"
                + (f", {self.inplace_rule} rule)" if self.inplace else ")"))


def ancestor_bits(graph: Graph, order: Sequence[str]) -> dict[str, int]:
    """Every node's ancestors through data and control edges, as a bitset over `order`."""
    pos = {n: i for i, n in enumerate(order)}
    anc: dict[str, int] = {}
    for n in order:
        bits = 0
        for p in [*producers(graph, n), *graph.node(n).deps]:
            bits |= anc[p] | (1 << pos[p])
        anc[n] = bits
    return anc


def descendant_bits(graph: Graph, order: Sequence[str]) -> dict[str, int]:
    """Every node's descendants through data and control edges, as a bitset over `order`."""
    pos = {n: i for i, n in enumerate(order)}
    desc = dict.fromkeys(order, 0)
    for n in reversed(order):
        for p in [*producers(graph, n), *graph.node(n).deps]:
            desc[p] |= desc[n] | (1 << pos[n])
    return desc


def _same_tensors(made: Liveness, here: Liveness) -> None:
    """PlanError naming the first tensor whose life, bytes or kind differ between the
    liveness a plan was made with and the one of the graph it is given."""
    for name, iv in here.intervals.items():
        old = made.intervals.get(name)
        if old is None:
            raise PlanError(f"this graph's tensor {name} is not in the plan: the plan was "
                            "made for another graph")
        if old != iv:
            raise PlanError(_difference(old, iv))
    extra = [n for n in made.intervals if n not in here.intervals]
    if extra:
        raise PlanError(f"the plan was made for tensor {extra[0]}, which this graph does not "
                        "have")


def _difference(old: Interval, new: Interval) -> str:
    """"plan was made for tensor h1 of 4096 bytes; this graph's h1 has 8192" and the like."""
    n = old.name
    if old.kind != new.kind or old.planned != new.planned:
        return f"plan was made for tensor {n} of kind {old.kind}; this graph's {n} is {new.kind}"
    if old.bytes != new.bytes:
        return f"plan was made for tensor {n} of {old.bytes} bytes; this graph's {n} has " \
            f"{new.bytes}"
    return (f"plan was made for tensor {n} alive over steps [{old.start}, {old.end}]; in this "
            f"graph {n} is alive over [{new.start}, {new.end}]")
