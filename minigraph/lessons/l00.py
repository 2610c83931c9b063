"""Lesson 00 (the tour): the checks of its exercises. Each computes the expected value here,
out of the notebook's sight, and its message hints without giving the answer away."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .. import graph as G
from .. import ops
from ..autodiff import training_graph
from ..graph import Graph
from ..memory.api import MemoryOptions, plan_memory
from ..memory.planners import PLANNERS
from ..models import get_model

SEARCHING = ("ilp", "anneal", "search")     # left out of exercise 1: they search for a while


def mlp_step(batch: int = 64) -> Graph:
    """The three-layer MLP training step of the lesson's section 1, at `batch`."""
    with G.name_scope():
        x, y = G.input("x", (batch, 256)), G.input("y", (batch, 10))
        ws = [G.param("W1", (256, 512)), G.param("W2", (512, 512)), G.param("W3", (512, 10))]
        h = ops.sigmoid(ops.relu(x @ ws[0]) @ ws[1])
        return training_graph(((h @ ws[2] - y) ** 2).mean(), ws, lr=0.1)


def _reaching_minimum() -> set[str]:
    """The planners (not the searching ones) whose arena is the theoretical minimum of the
    U-Net's step with in-place off, at alignment 512."""
    step = get_model("unet").graph
    out = set()
    for p in PLANNERS:
        if p in SEARCHING:
            continue
        rep = plan_memory(step, MemoryOptions(inplace=False, planner=p))
        if rep.arena_bytes == rep.theoretical_minimum:
            out.add(p)
    return out


def exercise_1(answer: Any) -> tuple[bool, str]:
    """All the planners that reach the U-Net's theoretical minimum with in-place off."""
    if isinstance(answer, str) or not isinstance(answer, Iterable):
        return False, "give a list or a set of planner names, e.g. ['refcount', 'ge']"
    try:
        given = set(answer)
    except TypeError:
        return False, "give a list or a set of planner names (strings)"
    unknown = sorted(str(n) for n in given if n not in PLANNERS or n in SEARCHING)
    if unknown:
        return False, (f"not a non-searching planner of mg.memory.PLANNERS: "
                       f"{', '.join(unknown)}")
    right = _reaching_minimum()
    if given == right:
        return True, ("with in-place off these planners pack the U-Net's tensors into "
                      "exactly the bytes alive at its busiest step")
    wrong = sorted(given - right)
    if wrong:
        return False, (f"{', '.join(wrong)} stay(s) above the minimum: compare its "
                       "arena_bytes with theoretical_minimum")
    return False, (f"each of your {len(given)} reaches it, but {len(right - given)} more "
                   "planner(s) do too")


def exercise_2(answer: Any) -> tuple[bool, str]:
    """The factor by which the MLP's minimum (refcount + in-place) grows from batch 64 to
    128."""
    try:
        value = float(answer)
    except (TypeError, ValueError):
        return False, "give a number, e.g. 1.5"

    def minimum(batch: int) -> int:
        return plan_memory(mlp_step(batch), MemoryOptions(inplace=True, planner="refcount")
                           ).theoretical_minimum

    factor = minimum(128) / minimum(64)
    if abs(value - factor) < 0.02:
        return True, ("less than 2: the weight gradients, planned and alive at the "
                      "busiest step, do not grow with the batch; only the activations and "
                      "their gradients do")
    return False, ("too small" if value < factor else "too large") + (
        ": rebuild section 1's graph at batch 128 and divide the two theoretical minima")
