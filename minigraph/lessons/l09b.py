"""Checks for lesson 09b's exercises (virtual memory against fragmentation: GMLake's
stitching [Guo 2024], PyTorch's expandable segments [PyTorch CUDA]): each takes the
student's answer and says right or not quite, with a hint that does not give the answer
away. The expected values are computed here, out of the notebook, so no cell shows them."""

from __future__ import annotations

from typing import Any

from ..errors import MinigraphError
from ..memory.online import MiB, replay_allocator
from .l09 import reserves_less

MAX_EVENTS_1 = 6

#: Exercise 2's trace: one tensor of 21 MiB, allocated and freed.
ONE_21 = [("alloc", "t", 21 * MiB), ("free", "t", 0)]


def exercise_1(trace: Any) -> tuple[bool, str]:
    """Right when GMLake reserves less than `expandable-2m` on the student's short trace."""
    return reserves_less(trace, ("gmlake", "gmlake"), ("expandable-2m", "expandable-2m"),
                         MAX_EVENTS_1, "the expandable segment serves a large request from "
                         "one free block or extends its end; GMLake may also use free bytes "
                         "that lie apart. Leave such bytes, then ask for more than any one "
                         "block holds")


def exercise_2(answer: Any) -> tuple[bool, str]:
    """Right when `answer` is the bytes `expandable` reserves for ONE_21."""
    truth = replay_allocator(ONE_21, "expandable").peak_reserved
    if answer == truth:
        return True, "the large pool maps whole 20 MiB pages: 21 MiB needs a second one"
    if isinstance(answer, (int, float)) and not isinstance(answer, bool) and \
            answer * MiB == truth:
        return False, "count bytes, not MiB"
    return False, ("how big is a page of the large pool (section 3), and how many whole "
                   "pages does a 21 MiB tensor need?")
