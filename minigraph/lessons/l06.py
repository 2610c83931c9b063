"""Exercise checks of lesson 06 (offset planning: first fit by start, the online
allocator's best [Sekiyama 2018]).

Each `exercise_N(answer)` returns (right?, why) for `check_answers`; the expected value
is computed here, and a wrong answer gets a hint that does not give it away.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import MinigraphError
from ..memory import PLANNERS, Buffer, plan_memory
from ..memory.buffers import Placement, arena_size, validate_offsets
from ..memory.instances import hard_instance
from ..memory.planners.greedy import lowest_gap
from ..models import get_model

#: The hard instance of the lesson (section 3): its optimum is CAPACITY by construction.
CAPACITY = 4096
PLANNER_NAME = "first-fit-start"


def lesson_instance() -> list[Buffer]:
    """The lesson's hard instance: 30 boxes tiling CAPACITY bytes x some steps."""
    return hard_instance(30, capacity=CAPACITY, seed=0, granule=64)


def _first_fit_offsets(buffers: Sequence[Buffer]) -> dict[Any, int]:
    """The reference: by start step (ties in list order), each at the lowest offset free
    for its whole life among those already placed."""
    offsets: dict[Any, int] = {}
    placed: list[Buffer] = []
    for b in sorted(buffers, key=lambda b: b.start):
        taken = [(offsets[p.id], offsets[p.id] + p.size) for p in placed
                 if p.overlaps_in_time(b)]
        offsets[b.id] = lowest_gap(taken, b.size)
        placed.append(b)
    return offsets


def exercise_1(answer: Any) -> tuple[bool, str]:
    """The student's `first_fit_by_start`, run on the lesson's instance and a second one."""
    if not callable(answer):
        return False, f"pass the function itself (first_fit_by_start), not {answer!r}"
    for buffers in (lesson_instance(), hard_instance(25, capacity=2048, seed=3, granule=64)):
        try:
            result = answer(list(buffers))
        except Exception as e:      # the student's code: say what it raised
            return False, f"it raised {type(e).__name__}: {e}"
        if result is None:
            return False, "it returns None: return Placement.of(buffers, offsets)"
        offsets = getattr(result, "offsets", result)
        try:
            validate_offsets(buffers, offsets)
        except MinigraphError as e:
            return False, f"the plan is not valid: {e}"
        want = _first_fit_offsets(buffers)
        for b in sorted(buffers, key=lambda b: b.start):
            if offsets[b.id] != want[b.id]:
                lower = "lower" if want[b.id] < offsets[b.id] else "higher"
                return False, (f"valid, but buffer {b.id!r} (start {b.start}) is not where "
                               f"first fit by start puts it: place buffers in order of start "
                               f"(ties in list order), each at the lowest gap free for its "
                               f"whole life; the first wrong one belongs {lower}")
        if isinstance(result, Placement) and result.arena_bytes != arena_size(buffers, offsets):
            return False, "the Placement's arena is not measured: use Placement.of"
    return True, "first fit by start on both instances, offset for offset"


#: The zoo model of exercise 2: a recurrent net, whose many short lives a planner that
#: only knows the past handles worst.
EXERCISE_2_MODEL = "lstm"


def _gap(planner: str) -> float:
    """`planner`'s arena over the theoretical minimum on EXERCISE_2_MODEL, in percent."""
    report = plan_memory(get_model(EXERCISE_2_MODEL).graph, inplace=True, planner=planner)
    return 100.0 * (report.arena_bytes - report.theoretical_minimum) / \
        report.theoretical_minimum


def _best_fit_note(gap: float) -> str:
    """What the right answer is told of best-fit's gap, written from the number itself."""
    where = "reaches the minimum there" if gap == 0 else \
        f"stays {gap:.2f}% above the minimum there"
    return f"best-fit, which sees every life in advance, {where}: knowing the future is worth that"


def exercise_2(answer: Any) -> tuple[bool, str]:
    """The registered planner's gap to the theoretical minimum on the zoo LSTM, in %."""
    if PLANNER_NAME not in PLANNERS:
        return False, f"register it first: register({PLANNER_NAME!r})(first_fit_by_start)"
    try:
        gap = float(answer)
    except (TypeError, ValueError):
        return False, f"{answer!r} is not a number (a percentage, e.g. 12.5)"
    reference = "first-fit-start (reference)"
    PLANNERS[reference] = lambda buffers: Placement.of(buffers, _first_fit_offsets(buffers))
    try:
        want = _gap(reference)
    finally:
        del PLANNERS[reference]
    if abs(_gap(PLANNER_NAME) - want) > 0.05:
        return False, ("the registered planner does not place as first fit by start does; "
                       "get exercise 1 right first")
    if abs(gap - want) <= 0.05:
        return True, _best_fit_note(_gap("bestfit"))
    if abs(gap - (100.0 + want)) <= 0.05:
        return False, "that is the arena as a share of the minimum; the gap is what lies above"
    return False, (f"plan it: mg.plan_memory(get_model({EXERCISE_2_MODEL!r}).graph, "
                   f"inplace=True, planner={PLANNER_NAME!r}), then 100 * (arena - minimum) "
                   "/ minimum")
