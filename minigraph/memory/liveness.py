"""Liveness: every tensor's `[first step, last step]` under a schedule, and its bytes.

A schedule is a topological order of the nodes; step k is the k-th node. A tensor lives
from the step that produces it to the last step that reads it, both inclusive
[Huawei GE, blog §3]. Inputs, parameters, constants and graph outputs are not planned: like GE's
Variables and Consts they keep their own storage for the whole run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from math import prod

import numpy as np

from ..errors import ScheduleError
from ..graph import Graph
from .buffers import Buffer, align_up, live_bytes_per_step, theoretical_minimum

PLANNED_KINDS = ("activation", "gradient")


@cache
def itemsize(dtype: str) -> int:
    """Bytes per element (cached: liveness asks once per tensor, for 20,000 tensors)."""
    return np.dtype(dtype).itemsize


@dataclass(frozen=True)
class Interval:
    """One tensor's life: steps [start, end] inclusive, aligned bytes, kind, planned or not."""
    name: str
    start: int
    end: int
    bytes: int
    kind: str
    planned: bool


@dataclass(frozen=True)
class Liveness:
    """Intervals of every tensor of `graph` under `schedule`, with sizes `alignment`-rounded."""
    schedule: tuple[str, ...]
    alignment: int
    intervals: dict[str, Interval]

    @property
    def steps(self) -> int:
        return len(self.schedule)

    def planned(self) -> list[Interval]:
        return [iv for iv in self.intervals.values() if iv.planned]

    def buffers(self) -> list[Buffer]:
        """The planned tensors as a plain buffer list (what every planner takes)."""
        return [Buffer(iv.name, iv.start, iv.end, iv.bytes) for iv in self.planned()]

    def theoretical_minimum(self) -> int:
        return theoretical_minimum(self.buffers())

    def no_reuse_bytes(self) -> int:
        return sum(iv.bytes for iv in self.planned())

    def unplanned_bytes(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for iv in self.intervals.values():
            if not iv.planned:
                out[iv.kind] = out.get(iv.kind, 0) + iv.bytes
        return out

    def live_bytes(self) -> list[int]:
        return live_bytes_per_step(self.buffers(), self.steps)

    def table(self) -> str:
        rows = [f"{'tensor':24} {'kind':10} {'bytes':>10} {'start':>5} {'end':>5}"]
        for iv in sorted(self.intervals.values(), key=lambda iv: (iv.start, iv.name)):
            rows.append(f"{iv.name:24} {iv.kind:10} {iv.bytes:>10} {iv.start:>5} {iv.end:>5}")
        return "\n".join(rows)

    def __repr__(self) -> str:
        return (f"Liveness({self.steps} steps, {len(self.planned())} planned tensors, "
                f"no reuse {self.no_reuse_bytes()} B, minimum {self.theoretical_minimum()} B)")


def check_schedule(graph: Graph, schedule: Sequence[str]) -> tuple[str, ...]:
    """A schedule must list every node once, each after its producers and control deps.
    ScheduleError (a PlanError and a GraphError) names the first difference."""
    schedule = tuple(schedule)
    known = {n.name for n in graph.nodes}
    seen: set[str] = set()
    for name in schedule:
        if name not in known:
            raise ScheduleError(f"the schedule lists node {name} that this graph does not have")
        if name in seen:
            raise ScheduleError(f"the schedule lists node {name} twice")
        seen.add(name)
    missing = [n.name for n in graph.nodes if n.name not in seen]
    if missing:
        raise ScheduleError(f"the schedule misses node {missing[0]} of this graph")
    pos = {n: k for k, n in enumerate(schedule)}
    for n in graph.nodes:
        for i in n.inputs:
            p = graph.tensors[i].producer
            if p is not None and pos[p] > pos[n.name]:
                raise ScheduleError(f"schedule runs {n.name} (step {pos[n.name]}) before {p} "
                                    f"(step {pos[p]}), which produces its input {i}")
        for d in n.deps:
            if pos[d] > pos[n.name]:
                raise ScheduleError(f"schedule runs {n.name} before its dependency {d}")
    return schedule


def liveness(graph: Graph, schedule: Sequence[str] | None = None,
             alignment: int = 512) -> Liveness:
    """Intervals of every tensor. `schedule` defaults to the graph's program order."""
    if alignment < 1:
        raise ValueError(f"alignment must be >= 1, not {alignment}")
    schedule = check_schedule(graph, schedule) if schedule is not None else \
        tuple(n.name for n in graph.nodes)
    pos = {n: k for k, n in enumerate(schedule)}
    last = max(len(schedule) - 1, 0)
    outputs = set(graph.outputs)
    intervals = {}
    for t in graph.tensors.values():
        if t.producer is None:
            start, end = 0, last
        else:
            start = pos[t.producer]
            readers = [pos[c] for c in graph.consumers[t.name]]
            end = last if t.name in outputs else max(readers, default=start)
        kind = "output" if t.name in outputs and t.kind in PLANNED_KINDS else t.kind
        planned = kind in PLANNED_KINDS
        nbytes = 0 if t.alias_of else align_up(prod(t.shape) * itemsize(t.dtype), alignment)
        intervals[t.name] = Interval(t.name, start, end, nbytes, kind, planned)
    return Liveness(schedule, alignment, intervals)
