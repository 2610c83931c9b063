"""One way to count a training step's bytes, the same for every technique: `Footprint`.

A static plan, a DTR run, the widget's bars, the tour's table and every lesson report the
same three quantities, under the same names (docs/glossary.md):

    arena      the planned tensors (activations and gradients), each at its offset
    workspace  the scratch an op takes while it runs and gives back when it returns
    outside    inputs, parameters, constants and outputs: buffers of their own for the
               whole run, never reused, never evicted; exact bytes (`outside_bytes`)

and two sums of them:

    working    the most bytes of arena and workspace held at once: all that a technique
               manages. A static plan holds its whole arena for the whole step and the
               executor takes each op's workspace beside it: arena + the largest
               workspace. DTR holds tensors and workspace in one range of `budget` bytes:
               the most it had in use at once.
    total      working + outside: the step's peak memory on the device.

and one quantity off the device:

    host       bytes in host memory that hold device tensors for a while: the copies of
               swapped tensors (`memory/swap.py`), one host buffer each. Not in `total`,
               which counts the device; bytes moved each way are the swap report's.

Two floors, both for one schedule and without recomputation:

    theoretical minimum  the most planned tensor bytes alive at one step: no arena of
                         this schedule is smaller
    working minimum      at each step, the planned bytes alive plus the running op's
                         workspace; the largest such sum. No run of this schedule that
                         recomputes nothing holds less working memory, a static plan or
                         DTR (`Bounds.live` is the same number for DTR's program, which
                         makes no in-place hand-overs). A DTR run below it has recomputed.

A DTR budget is working memory. A budget *ratio* r is a fraction of the total peak of the
run without rematerialisation (the DTR paper's): budget = r x (outside + peak) - outside,
defined once, in `minigraph.runtime.dtr.bounds.Bounds.arena_budget`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..graph import Graph
from ..graph import fmt_bytes as _fmt
from ..ops.registry import workspace_of
from .buffers import Buffer, align_up, live_bytes_per_step
from .liveness import PLANNED_KINDS


@dataclass(frozen=True)
class Footprint:
    """A technique's bytes in the one counting: `arena`, `workspace`, `outside`, and
    `working`, the most of arena and workspace held at once (arena + workspace when the
    workspace sits beside the arena, as in a static plan; DTR's own count when the two
    share one budget). `total` = working + outside, the device's; `host` the bytes held
    in host memory for the device (swapped tensors), counted apart."""
    arena: int
    workspace: int
    outside: int
    working: int | None = None
    host: int = 0

    def __post_init__(self) -> None:
        if self.working is None:
            object.__setattr__(self, "working", self.arena + self.workspace)

    @property
    def total(self) -> int:
        return self.working + self.outside

    def __str__(self) -> str:
        return (f"working {_fmt(self.working)} (arena {_fmt(self.arena)} + workspace "
                f"{_fmt(self.workspace)}), outside {_fmt(self.outside)}, total "
                f"{_fmt(self.total)}" + (f"; host {_fmt(self.host)}" if self.host else ""))


def outside_bytes(graph: Graph) -> int:
    """Bytes outside the arena: every tensor that is not planned (inputs, parameters,
    constants, graph outputs), at its exact size (each is a buffer of its own, not packed
    in the arena); a parameter's updated value is written over the parameter, no byte more.
    """
    outputs = set(graph.outputs)
    return sum(t.nbytes for name, t in graph.tensors.items() if t.alias_of is None and
               (t.kind not in PLANNED_KINDS or name in outputs))


def step_workspace(graph: Graph, schedule: Sequence[str], alignment: int = 1) -> list[int]:
    """The workspace of the op at each step, rounded up to `alignment` (as DTR rounds it)."""
    out = []
    for name in schedule:
        ws = workspace_of(graph, graph.node(name))
        out.append(align_up(ws, alignment) if ws else 0)
    return out


def working_minimum(buffers: Sequence[Buffer], workspace: Sequence[int]) -> int:
    """The largest sum, over the steps, of the bytes of `buffers` alive there plus that
    step's `workspace` (`step_workspace`): the working minimum of one schedule."""
    live = live_bytes_per_step(buffers, len(workspace))
    return max((a + w for a, w in zip(live, workspace)), default=0)
