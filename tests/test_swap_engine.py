"""The engine room's swap choice is the textbook's: the same swaps on every zoo model at
every budget between the swap floor and the no-swap minimum, and on random graphs."""

from __future__ import annotations

import pytest
from graphgen import random_graph

import minigraph as mg
from minigraph import models
from minigraph.errors import SwapError
from minigraph.memory.planners.engine.swap_fast import choose_swaps_fast
from minigraph.memory.swap import Machine, choose_swaps, op_seconds, uses
from minigraph.memory.swap_plan import plan_swap

ZOO = [m for m in models.MODELS if m != "resnet50"]


def _problem(g, machine):
    live = mg.liveness(g)
    bufs = live.buffers()
    aliased = {t.alias_of for t in g.tensors.values() if t.alias_of}
    swappable = {b.id for b in bufs if b.size and b.id not in aliased}
    return bufs, uses(g, live.schedule), op_seconds(g, live.schedule, machine), swappable


def _both(args, target):
    """What the textbook and the fast choice answer: the swaps, or the error's words."""
    bufs, steps, seconds, swappable, machine = args
    out = []
    for fn in (choose_swaps, choose_swaps_fast):
        try:
            out.append(fn(bufs, steps, seconds, machine, target, swappable))
        except SwapError as e:
            out.append(("error", str(e), e.minimum))
    return out


@pytest.mark.parametrize("name", ZOO)
@pytest.mark.parametrize("machine", [Machine(), Machine(bandwidth=2e9, latency=50e-6)])
def test_the_fast_swap_choice_is_the_textbook_choice_on_the_zoo(name, machine):
    g = models.get_model(name).graph
    bufs, steps, seconds, swappable = _problem(g, machine)
    top = mg.liveness(g).theoretical_minimum()
    args = (bufs, steps, seconds, swappable, machine)
    for frac in (1.0, 0.9, 0.75, 0.6, 0.45, 0.3, 0.0):
        textbook, fast = _both(args, int(top * frac))
        assert textbook == fast, (name, frac)


def _compare_on_random_graph(seed):
    """Assert the two choices equal on random graph `seed`; the number of swaps made."""
    g = random_graph(seed)
    machine = Machine(bandwidth=1e9, latency=0.0, launch=1e-6)
    bufs, steps, seconds, swappable = _problem(g, machine)
    top = mg.liveness(g).theoretical_minimum()
    args = (bufs, steps, seconds, swappable, machine)
    swapped = 0
    for frac in (0.8, 0.5, 0.2):
        textbook, fast = _both(args, int(top * frac))
        assert textbook == fast, (seed, frac)
        swapped += isinstance(textbook, list) and len(textbook)
    return swapped


def test_the_fast_swap_choice_is_the_textbook_choice_on_random_graphs():
    swapped = sum(_compare_on_random_graph(seed) for seed in range(12))
    assert swapped > 12           # they do swap: the comparison is not of empty lists


def test_plan_swap_with_the_fast_choice_gives_the_textbook_plan():
    g = models.get_model("resnet").graph
    opts = mg.MemoryOptions(planner="bestfit", inplace=True)
    budget = mg.plan_memory(g, opts).theoretical_minimum // 2
    a = plan_swap(g, budget, opts)
    b = plan_swap(g, budget, opts, chooser=choose_swaps_fast)
    assert a.swaps and a.swaps == b.swaps
    assert a.plan.offsets == b.plan.offsets and a.plan.back_offsets == b.plan.back_offsets
