"""Lesson 07c's exercise check accepts the tensors Coop's window evicts in the
partitioned arena and rejects others without naming them."""

from __future__ import annotations

from minigraph.lessons import l07c
from minigraph.runtime.dtr import DTRRuntime


def _run(partition: bool) -> tuple[list, list]:
    """(the layout once a..f are made, the tensors evicted for g)."""
    ops = l07c.chain_ops(l07c.EXERCISE_1_COSTS)
    sizes, arena = l07c.EXERCISE_1_SIZES, l07c.EXERCISE_1_ARENA
    opts = dict(heuristic_args=l07c.OWN_COST, defrag="last-resort", partition=partition)
    six = DTRRuntime(l07c.hand_program(sizes, ops[:-1], [("call", k) for k in range(6)]),
                     arena, "coop", **opts)
    six.run()
    trace = DTRRuntime(l07c.exercise_1_program(), arena, "coop", **opts).run()
    return [t for _, _, t in l07c.layout(six)], list(trace.evicted)


def test_exercise_1_the_partitioned_window():
    laid, right = _run(True)
    # the partition: cheap a, c, e from the bottom, dear b, d, f from the top
    assert laid == ["a", "c", "e", "f", "d", "b"]
    assert len(right) == 2 and "f" not in right
    ok, why = l07c.exercise_1(right)
    assert ok
    assert l07c.exercise_1(list(reversed(right)))[0]           # order does not matter
    first_fit_laid, first_fit = _run(False)
    assert first_fit_laid == ["a", "b", "c", "d", "e", "f"] and first_fit != right
    for wrong in (first_fit, ["a", "c"], ["e", "f"], ["a"], ["z"], "ce", 3, []):
        ok, why = l07c.exercise_1(wrong)
        assert not ok
        assert str(right) not in why and str(sorted(right)) not in why
        assert f"'{right[0]}', '{right[1]}'" not in why


def test_hand_program_shapes_the_runtime_input():
    p = l07c.exercise_1_program()
    assert [t.name for t in p.tensors] == list(l07c.EXERCISE_1_SIZES)
    assert [op.cost for op in p.ops] == list(l07c.EXERCISE_1_COSTS.values())
    assert p.tensors[0].size == 0 and p.tensors[0].external
