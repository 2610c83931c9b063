"""Lesson 05's exercise checks accept the right answer and reject wrong ones without
stating the answer (issue 17, point 4)."""

from __future__ import annotations

import minigraph as mg
from minigraph.lessons import l05
from minigraph.memory import theoretical_minimum
from minigraph.memory.instances import ge_worked_example
from minigraph.memory.planners import plan_buffers
from minigraph.models import get_model


def test_exercise_1_binary_block_bytes_on_the_worked_example():
    right = plan_buffers(ge_worked_example(), "ge-binary", alignment=1)[1].arena_bytes
    # Not one of the numbers the lesson prints: no reuse, Max block, GE, the minimum.
    assert right not in (8704, 6656, 4608)
    assert l05.exercise_1(right)[0]
    for wrong in (6656, 4608, 8704, right + 512, "7680", None):
        ok, why = l05.exercise_1(wrong)
        assert not ok and str(right) not in why.replace(repr(wrong), "")


def test_exercise_2_lowest_order_on_the_cnn():
    g = get_model("cnn").graph
    mins = {o: mg.plan_memory(g, mg.MemoryOptions(planner="none", alignment=1, order=o))
            .theoretical_minimum for o in mg.memory.ORDERS if o != "best"}
    low = min(mins.values())
    winners = [o for o, m in mins.items() if m == low]
    assert winners and all(l05.exercise_2(o)[0] for o in winners)
    for wrong in [o for o in mins if o not in winners] + ["best", "fifo", 3]:
        ok, why = l05.exercise_2(wrong)
        assert not ok
        assert not any(repr(w) in why for w in winners) and f"{low:,}" not in why


def test_exercise_3_accepts_a_list_where_ge_misses_the_minimum():
    B = mg.Buffer
    misses = [B("A", 1, 2, 100), B("B", 2, 4, 200), B("C", 0, 1, 400), B("D", 0, 0, 200)]
    arena = plan_buffers(misses, "ge", alignment=1)[1].arena_bytes
    assert arena > theoretical_minimum(misses)
    assert l05.exercise_3(misses)[0]
    assert not l05.exercise_3(ge_worked_example())[0]     # GE reaches the minimum there
    for bad in ([], [1, 2], "buffers", None):
        assert not l05.exercise_3(bad)[0]


def _my_reuse_blocks(buffers, range_of, by_start=True):
    blocks, ranges = [], []
    for b in (sorted(buffers, key=lambda b: b.start) if by_start else buffers):
        r = range_of(b)
        for k, block in enumerate(blocks):
            if ranges[k] == r and block[-1].end < b.start:
                block.append(b)
                break
        else:
            blocks.append([b])
            ranges.append(r)
    return [[b.id for b in block] for block in blocks]


def test_exercise_4_accepts_ges_reuse_step_written_out():
    ok, why = l05.exercise_4(_my_reuse_blocks)
    assert ok, why


def test_exercise_4_refuses_a_reuse_that_ignores_a_rule():
    ok, why = l05.exercise_4(lambda bufs, r: [[b.id] for b in bufs])      # never reuses
    assert not ok and "blocks" in why, why
    ok, why = l05.exercise_4(lambda bufs, r: _my_reuse_blocks(bufs, lambda b: 0))
    assert not ok, why                                                  # one range for all
