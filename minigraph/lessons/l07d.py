"""Checks for lesson 07d's exercise (memory swap: choose what to swap): they take the
student's answer and say right or not quite, with a hint that points at the rule (the
step where the most bytes are alive, the host memory used), never at the answer, which is
computed here, when the check runs."""

from __future__ import annotations

from functools import cache
from typing import Any

from ..graph import Graph
from ..memory.liveness import liveness
from ..memory.buffers import live_bytes_per_step
from ..memory.swap import Machine, candidates, choose_swaps, op_seconds, split, uses
from ..models import get_model

MACHINE_1 = Machine()


def exercise_1_graph() -> Graph:
    """Exercise 1's training step: a five-layer MLP, batch 64."""
    return _graph()


@cache
def _graph() -> Graph:
    return get_model("mlp", batch=64, sizes=(64, 256, 256, 256, 256, 10)).graph


@cache
def exercise_1_budget() -> int:
    """Exercise 1's device budget: 80% of the bytes alive at the peak without swapping."""
    return liveness(exercise_1_graph()).theoretical_minimum() * 4 // 5


def exercise_1_host() -> int:
    """Exercise 1's host memory: room for the copies of at most this many bytes."""
    return _greedy_host()


@cache
def _problem() -> tuple[list, dict, list[float]]:
    g = exercise_1_graph()
    live = liveness(g)
    return live.buffers(), uses(g, live.schedule), op_seconds(g, live.schedule, MACHINE_1)


def swaps_for(names: Any) -> list:
    """The swap of each named tensor in its longest window (`swap.candidates`)."""
    bufs, steps, seconds = _problem()
    by = {b.id: b for b in bufs}
    out = []
    for n in names:
        gaps = candidates(by[n], steps[n], seconds, MACHINE_1)
        if gaps:
            out.append(max(gaps, key=lambda s: s.back - s.until))
    return out


@cache
def _greedy_host() -> int:
    """The host bytes of the textbook's greedy choice at the exercise's budget."""
    bufs, steps, seconds = _problem()
    chosen = choose_swaps(bufs, steps, seconds, MACHINE_1, exercise_1_budget(),
                          {b.id for b in bufs})
    return sum(s.bytes for s in chosen)


def exercise_1(names: Any) -> tuple[bool, str]:
    """Right when swapping the named tensors (a list of names) brings the bytes alive at
    every step to at most `exercise_1_budget()` with copies of at most `exercise_1_host()`
    bytes in host memory."""
    bufs, _, seconds = _problem()
    known = {b.id for b in bufs}
    if isinstance(names, str) or not hasattr(names, "__iter__"):
        return False, "give a list of tensor names, e.g. ['relu_0', 'relu_1']"
    names = list(names)
    unknown = [n for n in names if n not in known]
    if unknown:
        return False, f"{unknown[0]!r} is not a planned tensor of this graph"
    swaps = swaps_for(names)
    idle = {s.tensor for s in swaps}
    never = [n for n in names if n not in idle]
    if never:
        return False, f"{never[0]} has no gap between two uses long enough to leave the device"
    live = live_bytes_per_step(split(bufs, swaps), len(seconds))
    peak, host = max(live), sum(s.bytes for s in swaps)
    if host > exercise_1_host():
        return False, (f"the copies need {host} B of host memory, more than the "
                       f"{exercise_1_host()} B there are: swap fewer, larger tensors")
    if peak > exercise_1_budget():
        return False, (f"step {live.index(peak)} still holds {peak} B, above the budget of "
                       f"{exercise_1_budget()} B: which tensors are alive there but idle?")
    return True, (f"the peak is now {peak} B within {exercise_1_budget()} B, with {host} B "
                  "in host memory")
