"""Checks for lesson 02's exercises (liveness): each takes the student's answer and says
right or not quite, with a hint that does not give the answer away. The expected values
are computed here, out of the notebook, so no cell shows them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import examples, ops
from ..examples import named, sigmoid_chain, two_layer_mlp
from ..graph import Graph, input, name_scope
from ..memory.liveness import Liveness, liveness
from ..models import get_model
from . import try_student

#: Exercise 1's schedule of the blog's four ops: Op3 (T3) before Op2 (T2).
OTHER_ORDER = ["T1", "T3", "T2", "Output"]


def blog_graph() -> Graph:
    """The GE blog's four ops [Huawei GE], as lesson 02 builds them (4x4 float32)."""
    with name_scope():
        x = input("Input", (4, 4))
        t1 = named(ops.relu(x), "T1")
        t2 = named(ops.tanh(t1), "T2")
        t3 = named(ops.transpose(t1), "T3")
        return Graph([named(ops.add(t2, t3), "Output")], name="blog_cnn_liveness")


def _pair(answer: Any) -> tuple[int, int] | None:
    """`answer` as (start, end) if it is two integers, else None."""
    try:
        start, end = answer
        return int(start), int(end)
    except (TypeError, ValueError):
        return None


def exercise_1(answer: Any) -> tuple[bool, str]:
    """T2's life (start, end) under `OTHER_ORDER`."""
    given = _pair(answer)
    if given is None:
        return False, f"ANSWER_1 must be two step numbers (start, end), not {answer!r}"
    iv = liveness(blog_graph(), OTHER_ORDER).intervals["T2"]
    if given == (iv.start, iv.end):
        return True, "T2 is made at Op2's new step and read by Op4 at the next one"
    if given[0] != iv.start:
        return False, "the start is the step where T2's producer (Op2) now runs"
    return False, "the end is the step of T2's last reader, ends inclusive"


def exercise_2(answer: Any) -> tuple[bool, str]:
    """The theoretical minimum of sigmoid_chain(5) without in-place, alignment 1."""
    right = liveness(sigmoid_chain(5, shape=(4, 8)), alignment=1).theoretical_minimum()
    if answer == right:
        return True, "at every step a sigmoid reads one output and writes the next"
    return False, ("count the planned tensors alive at the busiest step (an op's input and "
                   "its output are both alive); A, the input, and the loss are not planned")


def _mlp_liveness() -> Liveness:
    """Lesson 02's two-layer perceptron (`examples.two_layer_mlp()`), alignment 1."""
    return liveness(two_layer_mlp()[0], alignment=1)


def exercise_3(answer: Any) -> tuple[bool, str]:
    """A node that runs at a step where the most planned bytes are alive."""
    live = _mlp_liveness()
    per_step = live.live_bytes()
    if answer not in live.schedule:
        return False, (f"{answer!r} is not a node of the perceptron: pick an entry of "
                       "mlp_live.schedule")
    if per_step[live.schedule.index(answer)] == max(per_step):
        return True, ("a weight gradient is made there while the other is still alive, "
                      "beside the gradient it is computed from")
    return False, ("fewer bytes are alive at that step than at the peak: print "
                   "mlp_live.live_bytes() beside mlp_live.schedule")


def exercise_4_cases() -> list[tuple[str, Graph, list[str]]]:
    """(name, graph, schedule) of the graphs exercise 4's check runs `my_intervals` on: the
    blog's four ops in two orders, a sigmoid chain, the perceptron, four branches, the zoo
    CNN's training step."""
    blog = blog_graph()
    cases = [("blog, program order", blog, [n.name for n in blog.nodes]),
             ("blog, Op3 first", blog, list(OTHER_ORDER))]
    for name, g in (("sigmoid chain", sigmoid_chain(4, shape=(4, 8))),
                    ("two-layer perceptron", two_layer_mlp()[0]),
                    ("four branches", examples.branchy(branches=4, depth=2)),
                    ("zoo cnn", get_model("cnn").graph)):
        cases.append((name, g, [n.name for n in g.nodes]))
    return cases


def exercise_4(fn: Callable[..., Any]) -> tuple[bool, str]:
    """The student's `my_intervals(graph, schedule)` -> {tensor: (start, end)} for the
    planned tensors, against `mg.liveness` on every case of `exercise_4_cases`."""
    if not callable(fn):
        return False, f"ANSWER_4 must be your function my_intervals, not {fn!r}"
    for name, graph, order in exercise_4_cases():
        ok, got = try_student(fn, "my_intervals", name, graph, list(order))
        if not ok:
            return False, got
        if not isinstance(got, dict):
            return False, f"on {name}: return a dict {{tensor name: (start, end)}}"
        live = liveness(graph, order, alignment=1)
        want = {iv.name: (iv.start, iv.end) for iv in live.planned()}
        missing = sorted(set(want) - set(got))
        extra = sorted(set(got) - set(want))
        if extra:
            if extra[0] not in live.intervals:
                return False, f"on {name}: {extra[0]!r} is not a tensor of this graph"
            return False, (f"on {name}: {extra[0]!r} (kind {live.intervals[extra[0]].kind})"
                           " is not planned: only activations and gradients are, and a "
                           "graph output is not")
        if missing:
            return False, (f"on {name}: {missing[0]!r} is missing: every activation and "
                           "gradient that is not a graph output is planned")
        for t, (start, end) in want.items():
            pair = got[t]
            try:
                s, e = (int(v) for v in pair)
            except (TypeError, ValueError):
                return False, f"on {name}: give {t!r} a pair (start, end), not {pair!r}"
            if s != start:
                return False, (f"on {name}: {t!r} starts at the step of the node that "
                               "produces it (its position in the schedule)")
            if e != end:
                return False, (f"on {name}: {t!r} ends at the step of its last reader, "
                               "that step included; a tensor no node reads ends where it "
                               "starts")
    return True, (f"the same lives as mg.liveness on all {len(exercise_4_cases())} "
                  "graphs and schedules")
