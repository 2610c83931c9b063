"""`MemoryPlan`: where every planned tensor lives in the one arena, and the proof it is safe."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..graph import Graph, fmt_bytes
from .buffers import Buffer, validate_offsets
from .liveness import Liveness


@dataclass
class MemoryPlan:
    """Offset and size of every planned tensor of one schedule.

    `arena_bytes` is the end of the highest tensor; `inplace` lists (input, output)
    hand-overs; `planner` names the planner; `note` is what the planner said (for the
    ILP: "optimal" or its gap).
    """
    liveness: Liveness
    offsets: dict[str, int]
    arena_bytes: int
    inplace: list[tuple[str, str]] = field(default_factory=list)
    planner: str = "none"
    note: str = ""
    colors: dict[str, int] = field(default_factory=dict)

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

    def validate(self) -> MemoryPlan:
        """Raise PlanError unless no two tensors alive at one step overlap (in-place
        hand-overs excepted), every offset is aligned and everything fits in the arena."""
        validate_offsets(self.buffers(), self.offsets, self.arena_bytes, self.alignment,
                         self.inplace)
        return self

    def shared_with(self, name: str) -> list[str]:
        """Other tensors that use some of the same bytes (at other times)."""
        lo, hi = self.offsets[name], self.offsets[name] + self.size(name)
        return [o for o, off in self.offsets.items() if o != name and self.size(o)
                and off < hi and lo < off + self.size(o)]

    def parallel_hazards(self, graph: Graph) -> list[tuple[str, str]]:
        """Pairs (a, b) sharing bytes where b's producer is not ordered after every reader
        of a by the graph itself: run concurrently, b could overwrite a while it is read."""
        order = list(self.schedule)
        pos = {n: k for k, n in enumerate(order)}
        anc: dict[str, int] = {}   # ancestor sets as bitsets over schedule positions
        for n in order:
            node = graph.node(n)
            bits = 0
            for i in node.inputs:
                p = graph.tensors[i].producer
                if p is not None:
                    bits |= anc[p] | (1 << pos[p])
            for d in node.deps:
                bits |= anc[d] | (1 << pos[d])
            anc[n] = bits
        inplace = set(self.inplace)
        ivs = self.liveness.intervals
        names = sorted((n for n in self.offsets if self.size(n)), key=lambda n: ivs[n].start)
        hazards = []
        for i, a in enumerate(names):
            lo, hi = self.offsets[a], self.offsets[a] + self.size(a)
            users = [graph.tensors[a].producer, *graph.consumers[a]]
            for b in names[i + 1:]:
                if ivs[b].start <= ivs[a].end and (a, b) not in inplace:
                    continue
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
                f"{len(self.offsets)} tensors, {len(self.inplace)} in place)")
