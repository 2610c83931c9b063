"""What one DTR run did: `DTRTrace`, the record both modes return.

Costs (base and extra compute), counts (evictions, fake deletes, frees, replays,
defragmentations), fragmentation samples, and the alloc/free events an allocator simulator
can replay (`minigraph.memory.online`). Pictures of it are drawn by `minigraph.viz`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...memory.footprint import Footprint


@dataclass
class DTRTrace:
    """What one DTR run did: costs, counts, fragmentation, and the alloc/free events.

    `events`: ("alloc" | "free", tensor name, bytes) in order, recomputations included
    (workspace blocks are named "<node>#workspace"); an allocator simulator can replay it.
    Defragmentation moves are not in `events` (they move blocks, sizes do not change).

    Bytes are counted as for every technique (`minigraph/memory/footprint.py`): `budget`
    is working memory (the planned tensors and the running op's workspace, in one range);
    `max_used` the most of it in use at once, `peak_workspace` the workspace in it then;
    `external` the bytes outside (parameters, inputs, outputs); `live` the working
    minimum of the program (no run that recomputes nothing holds less); `peak` the
    working memory of a run that never evicts, under the first-fit allocator.

    Swap inside DTR (`DTROptions.evict`, runtime/dtr/hostswap.py): `swapped` names the
    victims copied to host memory (in `evicted` too, in order), `swap_ins` counts the
    copies back, `bytes_out` / `bytes_in` the bytes moved each way, `host_peak` the most
    host bytes held at once (`footprint.host`), `host_refused` the victims dropped because
    `host_limit` was reached, `transfer_cost` the copies' cost (in `extra_cost` too),
    `transfers` each copy as (clock when it began, "out" | "in", tensor name, bytes), for a
    timeline (in `events` a swap-out is a "free" and a copy back an "alloc", as for drop).
    """
    program: str
    heuristic: str
    mode: str
    budget: int
    peak: int                     # no-rematerialisation working memory, first fit
    lower: int                    # smallest budget that could work
    safe: int                     # budget at which the runtime never gets stuck (compacting)
    base_cost: float              # cost of running every op once
    external: int = 0             # bytes outside the arena (params, inputs, outputs)
    extra_cost: float = 0.0       # cost of rematerialisations
    evictions: int = 0            # tensors evicted to make room (kept dead ones too)
    fake_deletes: int = 0         # releases at a tensor's last use, metadata kept
    frees: int = 0                # tensors really freed
    rematerializations: int = 0   # op re-executions
    remat_tensors: int = 0        # tensors brought back by them
    defrags: int = 0
    moved_bytes: int = 0          # bytes copied by defragmentation
    reliefs: int = 0              # times pinned inputs of waiting frames were let go
    inplace: int = 0              # outputs written over their input (recomputable_inplace)
    frag_samples: list[float] = field(default_factory=list, repr=False)
    frag_forced_evictions: int = 0
    search_seconds: float = 0.0
    seconds: float = 0.0
    kernel_seconds: float = 0.0       # real mode: time inside kernels (all executions)
    base_kernel_seconds: float = 0.0  # real mode: time inside first executions
    max_used: int = 0                 # most working memory in use at once (tensors + workspace)
    peak_workspace: int = 0           # the workspace in use at that moment
    live: int = 0                     # the working minimum (`Bounds.live`)
    external_copy_bytes: int = 0
    workspace_overflow: int = 0       # real mode: scratch bytes beyond declared workspace
    events: list[tuple[str, str, int]] = field(default_factory=list, repr=False)
    evicted: list[str] = field(default_factory=list, repr=False)   # names, in order
    timeline: list[tuple[float, int]] = field(default_factory=list, repr=False)
    outputs: dict[str, Any] = field(default_factory=dict, repr=False)
    swapped: list[str] = field(default_factory=list, repr=False)   # names, in order
    swap_ins: int = 0
    bytes_out: int = 0
    bytes_in: int = 0
    host_peak: int = 0
    host_refused: int = 0
    transfer_cost: float = 0.0
    transfers: list[tuple[float, str, str, int]] = field(default_factory=list, repr=False)
    remat_checked: int = 0
    remat_mismatches: list[str] = field(default_factory=list)

    @property
    def total_cost(self) -> float:
        return self.base_cost + self.extra_cost

    @property
    def overhead(self) -> float:
        """Total compute / base compute (1.0 = no rematerialisation)."""
        return self.total_cost / self.base_cost if self.base_cost else 1.0

    @property
    def extra_compute(self) -> float:
        """Extra compute / base compute."""
        return self.extra_cost / self.base_cost if self.base_cost else 0.0

    @property
    def ratio(self) -> float:
        """Budget over the working peak without rematerialisation (`ratio_of="arena"`)."""
        return self.budget / self.peak if self.peak else 1.0

    @property
    def total_ratio(self) -> float:
        """(budget + external) over (arena peak + external): the DTR paper's budget
        ratio, of the total peak memory of the unmodified run (`ratio_of="total"`)."""
        t = self.peak + self.external
        return (self.budget + self.external) / t if t else 1.0

    @property
    def footprint(self) -> Footprint:
        """This run in the one counting: working memory reached (`max_used`), split into
        the tensors' and the workspace's bytes at that moment, and the bytes outside."""
        return Footprint(self.max_used - self.peak_workspace, self.peak_workspace,
                         self.external, self.max_used, host=self.host_peak)

    @property
    def below_working_minimum(self) -> bool:
        """The run held less working memory than any run that recomputes nothing."""
        return 0 < self.max_used < self.live

    @property
    def fragmentation(self) -> float:
        """Mean free bytes / budget at eviction decisions (Coop's measure); 0 if none."""
        s = self.frag_samples
        return sum(s) / len(s) if s else 0.0

    @property
    def measured_overhead(self) -> float | None:
        if not self.base_kernel_seconds:
            return None
        return self.kernel_seconds / self.base_kernel_seconds

    def summary(self) -> str:
        t = self.peak + self.external
        lines = [f"DTR {self.heuristic} ({self.mode}) on {self.program}: budget "
                 f"{self.budget:,} B of working memory (tensors + workspace), "
                 f"{self.external:,} B outside",
                 f"  budget + outside = {self.total_ratio:.2f} x total peak {t:,} B; budget = "
                 f"{self.ratio:.2f} x working peak {self.peak:,} B (both: the run without "
                 f"rematerialisation)",
                 f"  used at most {self.max_used:,} B (working minimum {self.live:,} B, "
                 f"smallest budget that could work {self.lower:,} B, safe {self.safe:,} B)",
                 f"  compute x{self.overhead:.3f} ({self.rematerializations} op replays, "
                 f"{self.remat_tensors} tensors rematerialised), {self.evictions} evictions "
                 f"({self.frag_forced_evictions} forced by fragmentation), "
                 f"{self.fake_deletes} fake deletes, {self.defrags} defrags "
                 f"({self.moved_bytes:,} B moved)",
                 f"  fragmentation {self.fragmentation:.3f}, search "
                 f"{self.search_seconds * 1000:.1f} ms, run {self.seconds * 1000:.1f} ms"]
        if self.swapped or self.host_refused:
            lines.append(f"  {len(self.swapped)} of the evictions swapped to host memory "
                         f"({self.swap_ins} copied back; {self.bytes_out:,} B out, "
                         f"{self.bytes_in:,} B in, host peak {self.host_peak:,} B; "
                         f"{self.host_refused} dropped for want of host memory), copies "
                         f"cost {self.transfer_cost:g} of the extra")
        if self.inplace:
            lines.append(f"  {self.inplace} outputs written over their input (recomputable "
                         f"in-place)")
        if self.measured_overhead is not None:
            lines.append(f"  kernels {self.kernel_seconds * 1000:.1f} ms, measured x"
                         f"{self.measured_overhead:.3f}")
        if self.remat_checked:
            lines.append(f"  {self.remat_checked} rematerialised tensors checked, "
                         f"{len(self.remat_mismatches)} differ from their first value")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"DTRTrace({self.heuristic}, {self.mode}, ratio {self.ratio:.2f}: compute "
                f"x{self.overhead:.3f}, {self.evictions} evictions, {self.rematerializations}"
                f" replays)")

    def _repr_html_(self) -> str:
        return f"<pre>{self.summary()}</pre>"
