"""Two tiers, one answer: each planner of the engine room gives the offsets of its textbook
twin (docs/ARCHITECTURE.md, "Two tiers: the textbook and the engine room").

The textbook modules (greedy.py, bestfit.py, ge.py, anneal.py, ilp.py) are what a lesson
points at; the registry's plain names run the engine room's versions (planners/engine/),
which call the same loops with faster structures behind the same methods, and (anneal,
ilp) a time limit around them. For each family of problems -
random, hard (a guillotine tiling), realistic (a training step's lifetimes) and challenging
(a tiling with obstructions) - 200 random problems of 5 to 120 buffers get the same offsets
from both tiers, with each of the engine's structures forced in turn (on problems this
small the engine would pick the textbook's own list, and prove nothing).

Every pair is compared offset by offset, none by the arena alone: both tiers break every
tie the same way. Greedy-size's order is total (size, lifetime, start, index), and the lowest
gap, or the smallest one (the lowest of equal ones), is one offset whichever structure
finds it; best fit's lowest line is the leftmost of the lowest, and its buffers are ranked
totally (lifetime, size, start, index); GE's blocks are ordered totally (size, start,
number).
"""

from __future__ import annotations

import random
from functools import cache

import pytest

from minigraph.errors import PlanError
from minigraph.memory.buffers import Buffer
from minigraph.memory.challenge import challenge_instance
from minigraph.memory.instances import (
    GRADER_FAMILIES,
    hard_instance,
    random_buffers,
    realistic_buffers,
)
from minigraph.memory.planners import (
    PLANNERS,
    TEXTBOOK,
    bestfit,
    check_options,
    ge,
    get_planner,
    greedy,
    plan_buffers,
    planner_options,
)
from minigraph.memory.planners.engine import boxes, heuristics
from minigraph.memory.planners.engine.budget import Deadline, OutOfTime
from minigraph.memory.planners.engine.skyline import Unplaced

COUNT = 200         # problems per family


def _random(rng: random.Random, n: int, seed: int) -> list[Buffer]:
    family = rng.choice(("log-uniform",) + GRADER_FAMILIES)    # the grader's: 0-byte and odd
    steps = rng.choice((None, 3 * n)) if family == "log-uniform" else rng.choice((None, 8, 40))
    return random_buffers(n, seed=seed, steps=steps, family=family)


def _hard(rng: random.Random, n: int, seed: int) -> list[Buffer]:
    return hard_instance(n, rng.choice((1 << 12, 1 << 16)), rng.choice((None, 20, 4 * n)),
                         seed=seed, granule=rng.choice((1, 64)))


def _challenging(rng: random.Random, n: int, seed: int) -> list[Buffer]:
    n = max(n, 22)                                  # one obstruction needs 22 buffers
    return challenge_instance(n, seed=seed, obstructions=1 if n < 60 else rng.choice((1, 2)))


FAMILIES = {
    "random": _random,
    "hard": _hard,
    "realistic": lambda rng, n, seed: realistic_buffers(n, seed=seed),
    "challenging": _challenging,
}


@cache
def problems(family: str) -> tuple[tuple[Buffer, ...], ...]:
    """`COUNT` problems of `family`, 5 to 120 buffers each, fixed."""
    rng = random.Random(family)
    return tuple(tuple(FAMILIES[family](rng, rng.randint(5, 120), seed))
                 for seed in range(COUNT))


# The engine's placed boxes, each forced in turn: (FEW, DENSE) that makes box_index pick it.
INDEXES = {"BoxTable": (0, 10**9), "FreeSpace": (0, 0)}


def force_index(monkeypatch: pytest.MonkeyPatch, index: str) -> None:
    few, dense = INDEXES[index]
    monkeypatch.setattr(boxes, "FEW", few)
    monkeypatch.setattr(boxes, "DENSE", dense)


# The ways the engine's pool reads a line's candidates, each forced in turn: (FEW, SCAN).
POOL_READS = {"tree": (0, 0), "numpy": (0, 10**9), "python": (10**9, 10**9)}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("fit", ["lowest", "best"])
def test_greedy_size_takes_the_same_gap_with_every_index(family, fit, monkeypatch):
    """Largest first, each buffer at the lowest gap (`fit="lowest"`) or the smallest gap
    (`fit="best"`) free over its lifetime: the engine's indexes find the gap the
    textbook's scan of every placed box finds."""
    for bufs in problems(family):
        order = greedy.size_order(bufs)
        want = greedy.place_in_order(bufs, order, fit)
        for index in INDEXES:
            force_index(monkeypatch, index)
            assert heuristics.place_in_order(bufs, order, fit) == want, (index, bufs)


@pytest.mark.parametrize("family", FAMILIES)
def test_bestfit_puts_the_same_buffer_on_the_same_line(family, monkeypatch):
    """On the lowest line (the leftmost on ties), the longest-lived unplaced buffer that
    fits under it, else the line rises to its lower neighbour: the engine's heap and tree
    choose the line and the buffer that the textbook's lists choose."""
    for bufs in problems(family):
        want = bestfit.bestfit_offsets(bufs)
        for few, scan in POOL_READS.values():
            monkeypatch.setattr(Unplaced, "FEW", few)
            monkeypatch.setattr(Unplaced, "SCAN", scan)
            assert heuristics.bestfit_offsets(bufs) == want, bufs


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("holes", [True, False])
def test_ge_level_2_finds_the_same_lowest_offset_with_every_index(family, holes, monkeypatch):
    """GE: level 1 blocks of one size, level 2 each block (largest first) at the lowest
    offset free at all its steps (`holes=False`: over its hull): the same with the
    engine's indexes as with the textbook's scan, aligned or not."""
    for k, bufs in enumerate(problems(family)):
        alignment = (1, 512)[k % 2]
        want = ge.ge_offsets(bufs, alignment, holes)[0]
        for index in INDEXES:
            force_index(monkeypatch, index)
            assert heuristics.ge_offsets(bufs, alignment, holes)[0] == want, (index, bufs)


# --- the registry: a student asks for the textbook version by name -------------------------

PLAIN = {"greedy-size": [{}, {"fit": "best"}], "bestfit": [{}], "ge": [{}, {"holes": False}]}
# The searching planners: the engine's takes a budget its textbook twin does not (anneal: a
# time limit beside the moves; ilp: the solver's node limit beside the time limit).
SEARCHING = {"anneal": {"time_limit"}, "ilp": {"node_limit"}}


def test_each_fast_planner_has_a_textbook_name_with_the_same_options():
    assert set(TEXTBOOK) == {f"{name}:textbook" for name in [*PLAIN, *SEARCHING]}
    for name in [*PLAIN, *SEARCHING]:
        textbook = f"{name}:textbook"
        assert textbook not in PLANNERS      # a table of every planner shows it once
        extra = SEARCHING.get(name, set())
        assert set(planner_options(textbook)) | extra == set(planner_options(name))
        assert get_planner(textbook) is not get_planner(name)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("start", ["best", "greedy-size", "bestfit"])
def test_anneal_without_a_time_limit_makes_the_textbooks_moves(family, start):
    """The engine's "anneal" with a count of moves and no time limit: the textbook's
    loop, from the same start, the same offsets and the same note."""
    for k, bufs in enumerate(problems(family)[:12]):
        options = {"iterations": 60 + 10 * k, "seed": k, "start": start}
        fast = plan_buffers(bufs, "anneal", 1, **options)[1]
        plain = plan_buffers(bufs, "anneal:textbook", 1, **options)[1]
        assert plain.offsets == fast.offsets and plain.note == fast.note


def test_the_ilp_wrapper_finds_the_textbooks_arena_where_both_prove_it():
    """Where both finish (small problems, proved optimal), the engine's "ilp" and the
    textbook's model solved once give one arena; the engine's note adds the pairs."""
    for family in ("hard", "challenging"):
        for bufs in [p for p in problems(family) if len(p) <= 24][:3]:
            fast = plan_buffers(bufs, "ilp", 1, time_limit=30.0)[1]
            plain = plan_buffers(bufs, "ilp:textbook", 1, time_limit=30.0)[1]
            assert fast.note.startswith("optimal") and plain.note.startswith("optimal")
            assert plain.arena_bytes == fast.arena_bytes


@pytest.mark.parametrize("name", PLAIN)
def test_the_textbook_name_plans_what_the_plain_name_plans(name):
    for family in FAMILIES:
        for bufs in problems(family)[:10]:
            for options in PLAIN[name]:
                for alignment in (1, 512):
                    fast = plan_buffers(bufs, name, alignment, **options)[1]
                    plain = plan_buffers(bufs, f"{name}:textbook", alignment, **options)[1]
                    assert plain.offsets == fast.offsets
                    assert plain.note == fast.note and plain.blocks == fast.blocks


def test_a_textbook_name_refuses_an_option_it_does_not_take():
    with pytest.raises(PlanError, match="'bestfit:textbook' has no option 'fit'"):
        check_options("bestfit:textbook", {"fit": "best"})
    with pytest.raises(PlanError, match="fit must be 'lowest' or 'best'"):
        plan_buffers(problems("random")[0], "greedy-size:textbook", 1, fit="worst")


# --- deadlines (the engine's alone): a cut loop keeps the textbook's offsets so far ------

class AfterCalls(Deadline):
    """A deadline that passes after `calls` questions (a clock would make it flaky)."""

    __slots__ = ("calls",)

    def __init__(self, calls: int):
        super().__init__(0.0)
        self.calls = calls

    def passed(self) -> bool:
        self.calls -= 1
        return self.calls < 0


@pytest.mark.parametrize("heuristic", heuristics.HEURISTICS)
def test_a_deadline_cuts_the_loop_and_keeps_the_offsets_placed_before_it(heuristic):
    bufs = problems("random")[3]
    full = heuristics.heuristic_offsets(bufs, heuristic)
    for calls in (0, 7, 30):
        with pytest.raises(OutOfTime) as cut:
            heuristics.heuristic_offsets(bufs, heuristic, AfterCalls(calls))
        partial = cut.value.partial
        placed = [k for k, o in enumerate(partial) if o >= 0 and bufs[k].size]
        assert 0 < len(placed) or calls == 0
        assert all(partial[k] == full[k] for k in placed)
        assert all(partial[k] == -1 for k, b in enumerate(bufs) if b.size and k not in placed)
        assert all(partial[k] == 0 for k, b in enumerate(bufs) if not b.size)
