"""Lesson 04's exercise checks accept the right answer and reject wrong ones without
stating the answer (issue 17, point 4)."""

from __future__ import annotations

import re

import minigraph as mg
from minigraph import examples
from minigraph.lessons import l04
from minigraph.memory import color_nodes

OPTS = mg.MemoryOptions(planner="refcount", alignment=1)


def _no_answer_in(why: str, right: int, wrong: object) -> bool:
    """The right number does not stand in the hint (the echoed wrong answer aside)."""
    return re.search(rf"(?<![\w.]){right}(?![\w.])", why.replace(repr(wrong), "")) is None


def test_exercise_1_smallest_number_of_colours_without_hazards():
    g3 = examples.branchy(branches=3, depth=3)
    hazards = [len(mg.plan_memory(g3, OPTS.replace(colors=k)).plan.parallel_hazards(g3))
               for k in (1, 2, 3)]
    assert hazards[0] > hazards[1] > 0 == hazards[2]
    assert l04.exercise_1(3)[0]
    for wrong in (1, 2, 4, 0, -1, "3"):
        ok, why = l04.exercise_1(wrong)
        assert not ok and _no_answer_in(why, 3, wrong)


def test_exercise_2_hazards_with_in_place():
    g = examples.branchy(branches=4, depth=3)
    right = len(mg.plan_memory(g, OPTS.replace(inplace=True)).plan.parallel_hazards(g))
    assert l04.exercise_2(right)[0]
    without = len(mg.plan_memory(g, OPTS).plan.parallel_hazards(g))
    assert without != right
    for wrong in (without, right + 1):
        ok, why = l04.exercise_2(wrong)
        assert not ok and _no_answer_in(why, right, wrong)


def test_exercise_3_length_of_colour_0s_path():
    train = l04.lesson_training_graph()
    colour = color_nodes(train, mg.liveness(train, alignment=1), 2)
    right = sum(1 for c in colour.values() if c == 0)
    assert 1 < right < len(train.nodes)
    assert l04.exercise_3(right)[0]
    for wrong in (right - 1, right + 1, len(train.nodes), "matmul_0"):
        ok, why = l04.exercise_3(wrong)
        assert not ok and _no_answer_in(why, right, wrong)


def test_lesson_training_graph_is_the_lessons_graph():
    with mg.name_scope():
        x = mg.input("x", (4, 8))
        w = mg.param("W", (8, 8))
        h = mg.relu(x @ w)
        train = mg.training_graph(mg.sum(mg.sigmoid(h) * mg.tanh(h)), [w], lr=0.1)
    assert [(n.name, n.op, n.inputs) for n in train.nodes] == \
        [(n.name, n.op, n.inputs) for n in l04.lesson_training_graph().nodes]


def test_exercise_4_bytes_safe_mode_adds():
    g3 = examples.branchy(branches=3, depth=3)
    plain = mg.plan_memory(g3, OPTS).arena_bytes
    safe = mg.plan_memory(g3, OPTS.replace(safe=True))
    assert safe.plan.parallel_hazards(g3) == []
    right = safe.arena_bytes - plain
    # by hand: refcount packs three branches into 4 blocks of 2048 B; safe mode keeps
    # each branch in its own class of 2 blocks: 6 blocks, 4096 B more
    assert (plain, right) == (4 * 2048, 2 * 2048)
    assert l04.exercise_4(right)[0]
    for wrong in (0, right // 2, -right, plain, "4096"):
        ok, why = l04.exercise_4(wrong)
        assert not ok and _no_answer_in(why, right, wrong)


def test_section_5_graph_separates_the_two_colourings():
    g = l04.chain_with_sides()
    live = mg.liveness(g, alignment=1)
    nnvm, by_bytes = color_nodes(g, live, 3, "nnvm"), color_nodes(g, live, 3, "bytes")
    assert (nnvm["s1"], nnvm["s2"], by_bytes["s1"], by_bytes["s2"]) == (1, 1, 1, 2)
    assert {n for n, c in nnvm.items() if c == 0} == {"c0", "c1", "c2", "c3", "c4", "c5",
                                                        "loss"}


def _ancestors(graph, node):
    seen, todo = set(), [node]
    while todo:
        n = graph.node(todo.pop())
        for p in [graph.tensors[t].producer for t in n.inputs] + list(n.deps):
            if p is not None and p not in seen:
                seen.add(p)
                todo.append(p)
    return seen


def _my_hazards(graph, plan, inplace_too=True):
    iv, out = plan.liveness.intervals, []
    names = [n for n in plan.offsets if plan.size(n)]
    for a in names:
        uses = [graph.tensors[a].producer, *graph.consumers[a]]
        for b in names:
            later = iv[b].start > iv[a].end or (inplace_too and (a, b) in plan.inplace)
            if a == b or not later or plan.offsets[a] >= plan.offsets[b] + plan.size(b) or \
                    plan.offsets[b] >= plan.offsets[a] + plan.size(a):
                continue
            pb = graph.tensors[b].producer
            before = _ancestors(graph, pb)
            if any(u != pb and u not in before for u in uses):
                out.append((a, b))
    return out


def test_exercise_5_accepts_the_ancestor_test_written_out():
    ok, why = l04.exercise_5(_my_hazards)
    assert ok, why


def test_exercise_5_refuses_a_test_that_forgets_a_rule():
    ok, why = l04.exercise_5(lambda g, p: _my_hazards(g, p, inplace_too=False))
    assert not ok and "in-place" in why, why
    ok, why = l04.exercise_5(lambda g, p: _my_hazards(g, p) + [("x", "y")])
    assert not ok and "no hazard" in why, why
