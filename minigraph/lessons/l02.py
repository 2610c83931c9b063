"""Checks for lesson 02's exercises (liveness): each takes the student's answer and says
right or not quite, with a hint that does not give the answer away. The expected values
are computed here, out of the notebook, so no cell shows them."""

from __future__ import annotations

from typing import Any

from .. import ops
from ..examples import named, sigmoid_chain, two_layer_mlp
from ..graph import Graph, input, name_scope
from ..memory.liveness import Liveness, liveness

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


def mlp_liveness() -> Liveness:
    """Lesson 02's two-layer perceptron (`examples.two_layer_mlp()`), alignment 1."""
    return liveness(two_layer_mlp()[0], alignment=1)


def exercise_3(answer: Any) -> tuple[bool, str]:
    """A node that runs at a step where the most planned bytes are alive."""
    live = mlp_liveness()
    per_step = live.live_bytes()
    if answer not in live.schedule:
        return False, (f"{answer!r} is not a node of the perceptron: pick an entry of "
                       "mlp_live.schedule")
    if per_step[live.schedule.index(answer)] == max(per_step):
        return True, ("a weight gradient is made there while the other is still alive, "
                      "beside the gradient it is computed from")
    return False, ("fewer bytes are alive at that step than at the peak: print "
                   "mlp_live.live_bytes() beside mlp_live.schedule")
