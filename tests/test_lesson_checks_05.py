"""Lesson 05's exercise checks accept the right answer and reject wrong ones without
stating the answer (issue 17, point 4)."""

from __future__ import annotations

import minigraph as mg
from minigraph.lessons import l05
from minigraph.memory import theoretical_minimum
from minigraph.memory.instances import ge_worked_example
from minigraph.memory.planners import plan_buffers


def test_exercise_1_binary_block_bytes_on_the_worked_example():
    right = plan_buffers(ge_worked_example(), "ge-binary", alignment=1)[1].arena_bytes
    # Not one of the numbers the lesson prints: no reuse, Max block, GE, the minimum.
    assert right not in (8704, 6656, 4608)
    assert l05.exercise_1(right)[0]
    for wrong in (6656, 4608, 8704, right + 512, "7680", None):
        ok, why = l05.exercise_1(wrong)
        assert not ok and str(right) not in why.replace(repr(wrong), "")


def test_exercise_2_accepts_a_list_where_ge_misses_the_minimum():
    B = mg.Buffer
    misses = [B("A", 1, 2, 100), B("B", 2, 4, 200), B("C", 0, 1, 400), B("D", 0, 0, 200)]
    arena = plan_buffers(misses, "ge", alignment=1)[1].arena_bytes
    assert arena > theoretical_minimum(misses)
    assert l05.exercise_2(misses)[0]
    assert not l05.exercise_2(ge_worked_example())[0]     # GE reaches the minimum there
    for bad in ([], [1, 2], "buffers", None):
        assert not l05.exercise_2(bad)[0]


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


def test_exercise_3_accepts_ges_reuse_step_written_out():
    ok, why = l05.exercise_3(_my_reuse_blocks)
    assert ok, why


def test_exercise_3_refuses_a_reuse_that_ignores_a_rule():
    ok, why = l05.exercise_3(lambda bufs, r: [[b.id] for b in bufs])      # never reuses
    assert not ok and "blocks" in why, why
    ok, why = l05.exercise_3(lambda bufs, r: _my_reuse_blocks(bufs, lambda b: 0))
    assert not ok, why                                                  # one range for all
