"""Work budgets: the same input gives the same plan at any load, and a limited search never
ends above the plain heuristics it started from.

A searching planner takes a work budget (anneal: `iterations` moves; search: `node_limit`
nodes; ilp: the solver's `node_limit`) beside its wall-clock `time_limit`. Under a work
budget alone the plan is a function of the input: here each runs twice, the second time
with a busy thread beside it (which slows it down, as a loaded machine would), and returns
the same offsets and the same note. And whatever the limit, the plan is never above the
best of best fit, greedy-size and GE: those start plans always run to their end.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from minigraph.examples import linear_chain
from minigraph.memory import MemoryOptions, plan_memory
from minigraph.memory.buffers import Buffer, validate_offsets
from minigraph.memory.challenge import challenge_instance
from minigraph.memory.instances import hard_instance, random_buffers
from minigraph.memory.planners import plan_buffers


@contextmanager
def busy_thread() -> Iterator[None]:
    """A thread that spins in Python beside the block: the planner gets about half the
    interpreter, as on a loaded machine."""
    stop = threading.Event()

    def spin() -> None:
        x = 0
        while not stop.is_set():
            x = (x * 31 + 7) % 1_000_003

    t = threading.Thread(target=spin, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()


WORK = {
    "search": {"time_limit": None, "node_limit": 3000},
    "anneal": {"iterations": 800, "seed": 2},
    "ilp": {"time_limit": 600.0, "node_limit": 50},
}


def _without_seconds(note: str) -> str:
    return re.sub(r"\d+\.\d+ s\b", "~ s", note)


@pytest.mark.parametrize("planner", list(WORK))
def test_a_work_budget_gives_the_same_plan_with_a_busy_thread_beside_it(planner):
    bufs = challenge_instance(60, seed=1) if planner != "ilp" else hard_instance(24, 4096, 24,
                                                                                 seed=5)
    quiet = plan_buffers(bufs, planner, 1, **WORK[planner])[1]
    with busy_thread():
        loaded = plan_buffers(bufs, planner, 1, **WORK[planner])[1]
    assert loaded.offsets == quiet.offsets
    assert _without_seconds(loaded.note) == _without_seconds(quiet.note)


def test_a_node_limit_fixes_the_search_at_scale_even_beside_a_distant_time_limit():
    """From `REPAIR_FROM` buffers the search repairs its start first: with a node limit the
    repair's ruins are counted too, so a time limit far away changes nothing."""
    bufs = random_buffers(1200, seed=6)
    budget = {"time_limit": 600.0, "node_limit": 2000}
    quiet = plan_buffers(bufs, "search", 1, **budget)[1]
    with busy_thread():
        loaded = plan_buffers(bufs, "search", 1, **budget)[1]
    assert loaded.offsets == quiet.offsets
    assert _without_seconds(loaded.note) == _without_seconds(quiet.note)


def _best_plain(bufs: list[Buffer]) -> int:
    return min(plan_buffers(bufs, p, 1)[1].arena_bytes for p in ("bestfit", "greedy-size", "ge"))


LIMITED: list[tuple[str, dict]] = [
    ("search", {"time_limit": 1e-3}), ("search", {"time_limit": None, "node_limit": 1}),
    ("anneal", {"time_limit": 1e-3}), ("anneal", {"iterations": 1}),
]


@pytest.mark.parametrize(("planner", "budget"), LIMITED)
@pytest.mark.parametrize("problem", ["chain", "random", "hard"])
def test_a_limited_search_never_ends_above_the_best_plain_heuristic(planner, budget, problem):
    make: dict[str, Callable[[], list[Buffer]]] = {
        "chain": lambda: [Buffer(f"x{i}", i, 4000 - i, 4 + i % 7) for i in range(2000)],
        "random": lambda: random_buffers(2000, seed=3),
        "hard": lambda: hard_instance(400, 1 << 20, 800, seed=1),
    }
    bufs = make[problem]()
    aligned, placed = plan_buffers(bufs, planner, 1, **budget)
    validate_offsets(aligned, placed.offsets)
    assert placed.arena_bytes <= _best_plain(bufs), placed.note


def test_a_2000_node_chain_planned_with_a_tiny_limit_is_no_worse_than_best_fit():
    graph = linear_chain(2000)
    fit = plan_memory(graph, MemoryOptions(planner="bestfit", alignment=1)).arena_bytes
    for planner in ("search", "anneal"):
        report = plan_memory(graph, MemoryOptions(planner=planner, alignment=1,
                                                  planner_args={"time_limit": 1e-3}))
        assert report.arena_bytes <= fit, report.plan.note


@pytest.mark.parametrize(("planner", "rate", "budget"), [
    ("search", "TABLE_ENTRIES_PER_SECOND", {"time_limit": 600.0, "node_limit": 3000}),
    ("anneal", "PAIRS_PER_SECOND", {"time_limit": 600.0, "iterations": 300, "seed": 1}),
])
def test_under_a_work_budget_whether_to_build_the_tables_does_not_read_the_clock(
        monkeypatch, planner, rate, budget):
    """The tables (overlap lists) are built or refused by their size alone when a work
    budget is given: a machine that seems to build them a million times slower (the rate
    that turns the time left into entries) plans the same offsets with the same note."""
    from minigraph.memory.planners.engine import anneal, search
    module = {"search": search, "anneal": anneal}[planner]
    bufs = challenge_instance(60, seed=1)
    quiet = plan_buffers(bufs, planner, 1, **budget)[1]
    monkeypatch.setattr(module, rate, 1)
    slow = plan_buffers(bufs, planner, 1, **budget)[1]
    assert slow.offsets == quiet.offsets
    assert _without_seconds(slow.note) == _without_seconds(quiet.note)
    assert "would hold" not in slow.note
