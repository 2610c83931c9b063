"""Checks for lesson 09's exercises (online allocators): each takes the student's answer and
says right or not quite, with a hint that does not give the answer away. The expected
values are computed here, out of the notebook, so no cell shows them."""

from __future__ import annotations

from typing import Any

from ..errors import MinigraphError
from ..memory.online import CachingAllocator, MiB, replay_allocator

#: Lesson 09's section 2 trace (MODeL's hole too small [Steiner 2023]); the lesson writes
#: the same list out (a test keeps the two equal).
HOLE = [("alloc", "A", 4 * MiB), ("alloc", "B", 2 * MiB), ("free", "A", 0),
        ("alloc", "C", 6 * MiB), ("free", "B", 0), ("free", "C", 0)]

#: Exercise 2's prefix: after it the caching allocator holds one segment with free bytes
#: in two places.
PREFIX = [("alloc", "a", 8 * MiB), ("alloc", "b", 8 * MiB), ("alloc", "c", 2 * MiB),
          ("free", "a", 0)]

MAX_EVENTS_1 = 8


def reserves_less(trace: Any, better: tuple[str, str], worse: tuple[str, str],
                  max_events: int, hint: str) -> tuple[bool, str]:
    """Right when allocator `better` reserves less than `worse` on the student's short
    trace (each an (allocator, name to print) pair); wrong answers get `hint`."""
    if not isinstance(trace, (list, tuple)) or len(trace) > max_events:
        return False, f"TRACE_1 must be a list of at most {max_events} events"
    try:
        low = replay_allocator(trace, better[0]).peak_reserved
        high = replay_allocator(trace, worse[0]).peak_reserved
    except MinigraphError as e:
        return False, f"the trace does not replay: {e}"
    sizes = f"{better[1]} {low / MiB:g} MiB, {worse[1]} {high / MiB:g} MiB"
    return (True, sizes) if low < high else (False, f"{sizes}: {hint}")


def exercise_1(trace: Any) -> tuple[bool, str]:
    """Right when best fit reserves less than first fit on the student's short trace."""
    return reserves_less(trace, ("best-fit", "best fit"), ("first-fit", "first fit"),
                         MAX_EVENTS_1, "leave two holes of different sizes, then ask for "
                         "the small size and then for the large one")


def _after_prefix() -> CachingAllocator:
    a = CachingAllocator()
    a.replay(PREFIX)
    return a


def exercise_2(size: Any) -> tuple[bool, str]:
    """Right when a request of `size` bytes fits in the free bytes after PREFIX (rounded
    as the caching allocator rounds it) yet still makes it ask the device for a segment."""
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        return False, f"SIZE_2 must be a positive number of bytes, not {size!r}"
    a = _after_prefix()
    free, calls = a.free_bytes(), a.device_mallocs
    if a.round_size(size) > free:
        return False, ("that request is larger than all the free bytes together: of course "
                       "it needs a new segment; look for one that does not")
    a.malloc("d", size)
    if a.device_mallocs > calls and a.pool_of(a.round_size(size)) == "small":
        return True, ("a small request never takes a block of the large pool, whatever is "
                      "free there: it gets a small segment of its own. There is a second "
                      "reason for larger requests: find it too")
    if a.device_mallocs > calls:
        return True, ("the free bytes are in two separate blocks, and a tensor needs one "
                      "contiguous block: fragmentation")
    return False, ("the cache served that request from one of its free blocks; where do "
                   "the free bytes lie in the segment?")


def exercise_3(answer: Any) -> tuple[bool, str]:
    """Right when `answer` is the bytes the caching allocator reserves for HOLE."""
    truth = replay_allocator(HOLE, "caching").peak_reserved
    if answer == truth:
        return True, "A gets a whole segment, and B and C fit in the rest of it"
    hint = ("count bytes, not MiB" if isinstance(answer, (int, float)) and answer * MiB == truth
            else "how big a segment does the first request get (section 4's rules)? Does "
                 "anything after it need a second one?")
    return False, hint
