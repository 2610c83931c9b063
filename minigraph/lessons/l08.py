"""Lesson 08 (the GPU path): the mixed-dtype graph of its alignment section and the checks
of its exercises. A check computes the expected value here, out of the notebook's sight,
and its message hints without giving the answer away."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import graph as G
from .. import ops
from ..graph import Graph
from ..memory.api import MemoryOptions, plan_memory
from ..memory.liveness import liveness
from ..memory.plan import MemoryPlan
from ..memory.planners import plan_buffers
from ..models import get_model

ALIGNMENTS = (1, 2, 4, 8, 16, 64, 512)


def mixed_graph() -> Graph:
    """A float32 and a float64 branch: packed tightly, a float64 tensor can land at an
    offset that is not a multiple of 8."""
    with G.name_scope():
        a = G.input("a", (3,))                      # 3 float32: 12 bytes
        b = G.input("b", (5,), dtype="float64")     # 5 float64: 40 bytes
        ea, eb = ops.exp(a), ops.exp(b)
        return Graph([ops.sum(ea * a), ops.sum(eb * b)], name="mixed")


def misaligned(plan: Any, graph: Graph) -> list[str]:
    """Planned tensors (of a MemoryPlan or a MemoryReport) whose offset is not a multiple
    of their dtype's size."""
    plan = getattr(plan, "plan", plan)
    return [n for n, off in plan.offsets.items()
            if off % np.dtype(graph.tensor(n).dtype).itemsize]


def tight_plan(alignment: int) -> MemoryPlan:
    """refcount's plan of `mixed_graph`'s buffers at `alignment`, as a planner makes it:
    from the buffers alone, which carry no dtype (`plan_memory` would also place every
    offset at a multiple of each tensor's itemsize)."""
    g = mixed_graph()
    live = liveness(g, alignment=alignment)
    _, placed = plan_buffers(live.buffers(), "refcount", alignment)
    return MemoryPlan(live, dict(placed.offsets), placed.arena_bytes, planner="refcount",
                      graph=g, inplace_rule=None)


def _misaligned_at(alignment: int) -> list[str]:
    return misaligned(tight_plan(alignment), mixed_graph())


def exercise_1(answer: Any) -> tuple[bool, str]:
    """The smallest alignment of ALIGNMENTS at which refcount leaves no tensor misaligned."""
    if answer not in ALIGNMENTS:
        return False, f"pick one of {ALIGNMENTS}"
    bad = _misaligned_at(answer)
    if bad:
        return False, (f"at alignment {answer} refcount still puts {len(bad)} tensor(s) at "
                       f"an offset its dtype cannot start at ({', '.join(bad)})")
    smaller = [al for al in ALIGNMENTS if al < answer and not _misaligned_at(al)]
    if smaller:
        return False, (f"every offset is aligned at {answer}, but a smaller alignment of the "
                       "list works too")
    return True, (f"at {answer} every offset is a multiple of its dtype's size, and at every "
                  "smaller alignment of the list one is not")


def _bestfit_arena(alignment: int) -> int:
    step = get_model("cnn", batch=8).graph
    return plan_memory(step, MemoryOptions(inplace=True, planner="bestfit",
                                           alignment=alignment)).arena_bytes


def exercise_2(answer: Any) -> tuple[bool, str]:
    """How many bytes larger bestfit + in-place's arena is at alignment 512 than at 8."""
    if not isinstance(answer, (int, np.integer)) or isinstance(answer, bool):
        return False, "give a whole number of bytes (an int)"
    diff = _bestfit_arena(512) - _bestfit_arena(8)
    if answer == diff:
        return True, ("rounding every tensor up to 512 bytes costs that much arena on this "
                      "CNN")
    how = "too small" if answer < diff else "too large"
    return False, (f"{how}: subtract plan_memory(step, inplace=True, planner='bestfit', "
                   "alignment=8).arena_bytes from the same at alignment=512")
