"""Lesson 01's exercise checks accept the right answer and reject wrong ones without
stating the answer (issue 17, point 4)."""

from __future__ import annotations

import minigraph as mg
from minigraph.lessons import l01


def test_exercise_1_counts_one_add_n_per_tensor_read_twice():
    # Built here as a student would: h and s are each read by two nodes.
    with mg.name_scope():
        x = mg.input("x", (4, 3))
        W = mg.param("W", (3, 2))
        h = x @ W
        s = mg.sigmoid(h)
        (dW,) = mg.grad(mg.mean(s * h + s), [W])
    right = sum(1 for n in mg.Graph([dW]).nodes if n.op == "add_n")
    assert right == 2
    assert l01.exercise_1(right)[0]
    for wrong in (1, 3, 0, "2", 2.5, None, True):
        ok, why = l01.exercise_1(wrong)
        assert not ok
        assert "2" not in why.replace(repr(wrong), "")


def test_exercise_2_counts_backward_nodes_that_read_an_activation():
    step = l01.lesson_step()
    readers = [n.name for n in step.nodes if n.role == "backward"
               and any(step.tensors[i].kind == "activation" for i in n.inputs)]
    backward = [n for n in step.nodes if n.role == "backward"]
    assert 0 < len(readers) < len(backward)       # not the count the graph summary prints
    assert l01.exercise_2(len(readers))[0]
    for wrong in (len(backward), len(readers) + 1, len(readers) - 1, "three"):
        ok, why = l01.exercise_2(wrong)
        assert not ok and str(len(readers)) not in why.replace(repr(wrong), "")


def test_lesson_step_is_the_lessons_graph():
    # The check rebuilds section 4's step: the same nodes in the same order as the lesson's.
    with mg.name_scope():
        x = mg.input("x", (4, 3))
        W = mg.param("W", (3, 2))
        h = x @ W
        step = mg.training_graph(mg.mean(mg.sigmoid(h) * h), [W], lr=0.5)
    assert [(n.name, n.op, n.inputs) for n in step.nodes] == \
        [(n.name, n.op, n.inputs) for n in l01.lesson_step().nodes]
