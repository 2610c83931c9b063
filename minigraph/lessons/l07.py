"""Checks for lesson 07's exercises (DTR): each takes the student's answer and says right or
not quite, with a hint that points at the rule, never at the value. The expected values
are computed here, when the check runs, out of the notebook."""

from __future__ import annotations

import math
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import BudgetError, ThrashError
from ..examples import linear_chain, mlp_training
from ..models import get_model
from ..runtime.dtr import Program, budget_bounds, program_from_graph, simulate
from ..runtime.dtr.minimal import MinimalDTR

UNIT = 4                  # bytes of a one-element float32 tensor (alignment 1)
CHAIN = 200               # exercise 2's chain length: budget sqrt(CHAIN) tensors
SECONDS = 20              # a student's loop that never ends is stopped after this


class _TooLong(Exception):
    pass


@contextmanager
def _time_limit(seconds: int) -> Iterator[None]:
    """Stop the block after `seconds` (SIGALRM, where the main thread can take it)."""
    usable = hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def stop(*_: Any) -> None:
        raise _TooLong

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# Exercise 1: the eviction loop -------------------------------------------------------
def exercise_1_cases() -> list[tuple[str, Program, list[int]]]:
    """(name, program, budgets) that exercise 1's check runs: budgets at which minimal.py
    finishes, from the smallest that could work up to the working minimum."""
    cases = [("linear_chain(30), unit costs", program_from_graph(
                 linear_chain(30), costs="unit", alignment=1)),
             ("an 8-layer MLP's step", program_from_graph(mlp_training(depth=8, width=32,
                                                                       batch=64))),
             ("the zoo transformer's step", program_from_graph(get_model("transformer").graph))]
    out = []
    for name, p in cases:
        b = p.bounds()
        budgets = sorted({b.lower + (b.live - b.lower) * k // 4 for k in (1, 2, 4)})
        out.append((name, p, budgets))
    return out


def _outcome(program: Program, budget: int, place: Callable[..., Any] | None) -> Any:
    """(evicted, replays, overhead, peak) of MinimalDTR, with `place` as its loop."""
    class Run(MinimalDTR):
        pass

    if place is not None:
        Run.place = lambda self, nbytes: place(self, nbytes)      # noqa: E731
    try:
        run = Run(program, budget, "dtr").run()
    except BudgetError:
        return "BudgetError"
    return run.evicted, run.replays, round(run.overhead, 9), run.peak


def exercise_1(place: Any) -> tuple[bool, str]:
    """Right when MinimalDTR with the student's `my_place(dtr, nbytes)` makes the same
    evictions, replays, compute and peak as minimal.py on every case."""
    if not callable(place):
        return False, f"ANSWER_1 must be your function my_place(dtr, nbytes), not {place!r}"
    for name, program, budgets in exercise_1_cases():
        for budget in budgets:
            want = _outcome(program, budget, None)
            try:
                with _time_limit(SECONDS):
                    got = _outcome(program, budget, place)
            except NotImplementedError:
                return False, "my_place still raises NotImplementedError: write its body"
            except _TooLong:
                return False, (f"on {name} it ran for {SECONDS} s without finishing: each "
                               "turn of the loop must evict one tensor, and the loop stops "
                               "once the bytes fit")
            except Exception as e:          # the student's code: say what it raised
                return False, f"on {name}: it raised {type(e).__name__}: {e}"
            if got == want:
                continue
            if got == "BudgetError":
                return False, (f"on {name}: BudgetError where minimal.py finishes: evict "
                               "only while the bytes do not fit, and only tensors that no "
                               "running op has pinned")
            if want == "BudgetError":
                return False, (f"on {name}: minimal.py stops with BudgetError here: when "
                               "no resident, unpinned tensor is left, raise it")
            if got[0] != want[0]:
                return False, (f"on {name}: other evictions: while used + nbytes exceeds "
                               "the budget, evict the resident, unpinned tensor with the "
                               "lowest dtr.score(dtr, t)")
            return False, (f"on {name}: the same evictions but another count: after the "
                           "loop the bytes are resident (dtr.used) and dtr.peak remembers "
                           "the most ever")
    return True, ("MinimalDTR with your loop makes minimal.py's evictions, replays and "
                  "peak on every case")


# Exercise 2: a score that beats LRU -----------------------------------------------------
def _chain_overhead(score: Any, n: int = CHAIN) -> float:
    """Compute overhead of `score` on `linear_chain(n)` with sqrt(n) unit tensors of budget
    (math.inf when it thrashes): the DTR paper's first experiment [Kirisame 2021]."""
    budget = int(math.sqrt(n)) * UNIT
    try:
        return simulate(linear_chain(n), budget, heuristic=score, costs="unit",
                        alignment=1).overhead
    except ThrashError:
        return math.inf


def exercise_2(score: Callable[..., float]) -> tuple[bool, str]:
    """Right when the student's score(t, now) needs less compute than LRU on the chain."""
    if not callable(score):
        return False, f"ANSWER_2 must be your function score(t, now), not {score!r}"
    try:
        mine = _chain_overhead(score)
    except NotImplementedError:
        return False, "my_score still raises NotImplementedError: write its body first"
    except Exception as e:          # the student's code: say what it raised
        return False, f"your score failed: {type(e).__name__}: {e}"
    lru = _chain_overhead("lru")
    mine_s = "thrashes" if math.isinf(mine) else f"x{mine:.3f}"
    if mine < lru:
        return True, f"yours {mine_s}, lru x{lru:.3f}"
    return False, (f"yours {mine_s}, lru x{lru:.3f}: cheap to recompute, big and stale is "
                   "not enough on a chain, where every tensor costs the same; what makes "
                   "a victim dear is the evicted run it would join: add the cost of its "
                   "evicted neighbourhood (t.neighbour_cost) to its own")


# Exercise 3: the chain's smallest budget ----------------------------------------------
def exercise_3(answer: Any) -> tuple[bool, str]:
    """Right when `answer` is budget_bounds(linear_chain(n)).lower in unit tensors (the
    same for every n >= 2; checked on a chain of 50)."""
    truth = budget_bounds(linear_chain(50), costs="unit", alignment=1).lower // UNIT
    if answer == truth:
        return True, "a backward op holds its two inputs and its output at once"
    return False, ("count what the largest single op must hold at once: its inputs, its "
                   "outputs and its workspace")
