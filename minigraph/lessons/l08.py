"""Lesson 08 (the GPU path): the mixed-dtype graph of its alignment section and the checks
of its exercises. A check computes the expected value here, out of the notebook's sight,
and its message hints without giving the answer away."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import graph as G
from .. import ops
from ..graph import Graph
from ..memory.api import MemoryOptions, MemoryReport, plan_memory
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


def misaligned(rep: MemoryReport, graph: Graph) -> list[str]:
    """Planned tensors whose offset is not a multiple of their dtype's size."""
    return [n for n, off in rep.plan.offsets.items()
            if off % np.dtype(graph.tensor(n).dtype).itemsize]


def _misaligned_at(alignment: int) -> list[str]:
    g = mixed_graph()
    return misaligned(plan_memory(g, MemoryOptions(planner="refcount", alignment=alignment)), g)


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
