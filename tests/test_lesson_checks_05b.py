"""Lesson 05b's exercise check accepts the right answer and rejects wrong ones without
stating the answer."""

from __future__ import annotations

import minigraph as mg
from minigraph.lessons import l05b
from minigraph.models import get_model


def test_exercise_1_lowest_order_on_the_cnn():
    g = get_model("cnn").graph
    mins = {o: mg.plan_memory(g, mg.MemoryOptions(planner="none", alignment=1, order=o))
            .theoretical_minimum for o in mg.memory.ORDERS if o != "best"}
    low = min(mins.values())
    winners = [o for o, m in mins.items() if m == low]
    assert winners and all(l05b.exercise_1(o)[0] for o in winners)
    for wrong in [o for o in mins if o not in winners] + ["best", "fifo", 3]:
        ok, why = l05b.exercise_1(wrong)
        assert not ok
        assert not any(repr(w) in why for w in winners) and f"{low:,}" not in why
