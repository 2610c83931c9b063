"""Checks for lesson 03's exercises (in-place and refcount): each takes the student's answer
and says right or not quite, with a hint that does not give the answer away. The expected
values are computed here, out of the notebook, so no cell shows them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import examples, ops
from ..examples import named
from ..graph import Graph, input, name_scope  # noqa: A004 (minigraph's input)
from ..memory.api import MemoryOptions, plan_memory
from ..memory.buffers import Buffer
from ..memory.inplace import inplace_pairs, inplace_refusal
from ..memory.instances import ge_worked_example
from ..memory.liveness import liveness
from ..memory.planners import plan_buffers
from ..models import get_model
from . import try_student


def _not_a_graph(answer: Any, n: int) -> str:
    return f"ANSWER_{n} must be an mg.Graph, not {type(answer).__name__}"


def exercise_1(graph: Any) -> tuple[bool, str]:
    """A pair the last-reader rule takes and the strict rule refuses, with no parallel
    hazard: the graph orders the op after every other reader of its input."""
    if not isinstance(graph, Graph):
        return False, _not_a_graph(graph, 1)
    live = liveness(graph, alignment=1)
    loose = set(inplace_pairs(graph, live))
    only_loose = loose - set(inplace_pairs(graph, live, rule="strict"))
    if not only_loose:
        return False, ("no pair is handed over by the last-reader rule and refused by the "
                       "strict one: the input needs another reader besides the op")
    plan = plan_memory(graph, MemoryOptions(planner="none", alignment=1, inplace=True)).plan
    hazards = set(plan.parallel_hazards(graph))
    safe = sorted(p for p in only_loose if p in set(plan.inplace) and p not in hazards)
    if safe:
        x, y = safe[0]
        return True, (f"{x} -> {y}: every other reader of {x} is an ancestor of the op "
                      f"making {y}, so no schedule runs them at once")
    return False, ("the last-reader rule's extra pairs are all hazards: the input's other "
                   "reader must feed the op that overwrites it, directly or not")


def exercise_2_buffers() -> list[Buffer]:
    """The CANN worked example [Huawei GE] with D of 2048 bytes instead of 512."""
    return [Buffer(b.id, b.start, b.end, 2048 if b.id == "D" else b.size)
            for b in ge_worked_example()]


def _arena(match_range: int) -> int:
    return plan_buffers(exercise_2_buffers(), "refcount", 1, match_range=match_range)[1] \
        .arena_bytes


def exercise_2(answer: Any) -> tuple[bool, str]:
    """(arena with match_range 1, arena with match_range 2) on `exercise_2_buffers()`."""
    try:
        one, two = (int(a) for a in answer)
    except (TypeError, ValueError):
        return False, f"ANSWER_2 must be two byte counts (with 1, with 2), not {answer!r}"
    right_one, right_two = _arena(1), _arena(2)
    if (one, two) == (right_one, right_two):
        return True, "with 2, E grows a block that with 1 it may not touch"
    hints = []
    if one != right_one:
        hints.append("with match_range 1 a tensor takes only a free block of exactly its size")
    if two != right_two:
        hints.append("with 2 the largest free block of at least half the size is grown; "
                     "blocks return to the pool only after the step of their last reader")
    return False, "; ".join(hints)


def exercise_3(graph: Any) -> tuple[bool, str]:
    """A relu whose input is an activation or gradient it reads last, yet not in place."""
    if not isinstance(graph, Graph):
        return False, _not_a_graph(graph, 3)
    live = liveness(graph)
    pairs = set(inplace_pairs(graph, live))
    found = []
    for n in graph.nodes:
        if n.op != "relu":
            continue
        x, y = n.inputs[0], n.outputs[0]
        iv = live.intervals[x]
        if iv.kind in ("activation", "gradient") and iv.end == live.schedule.index(n.name) \
                and (x, y) not in pairs:
            found.append(f"{x} -> {y} (is {y} planned? {live.intervals[y].planned})")
    if found:
        return True, ", ".join(found)
    return False, ("every relu whose input is an activation it reads last went in place: "
                   "look at the clauses about the output, not the input")


def _triple_read() -> Graph:
    """add_n reading one tensor through three operands (the lesson's rule 5)."""
    with name_scope():
        a = named(ops.tanh(input("x", (2, 3))), "a")
        return Graph([named(ops.sum(named(ops.add_n(a, a, a), "s")), "loss")])


def exercise_4_cases() -> list[tuple[str, Graph]]:
    """The graphs exercise 4's check runs `my_inplace_pairs` on (program order)."""
    return [("three sigmoids", examples.sigmoid_chain(3, shape=(4, 8))),
            ("the counter-example", examples.inplace_counterexample()),
            ("the counter-example, F first", examples.inplace_counterexample(f_first=True)),
            ("add_n(a, a, a)", _triple_read()),
            ("the two-layer perceptron", examples.two_layer_mlp()[0]),
            ("the zoo transformer", get_model("transformer").graph)]


def exercise_4(fn: Callable[..., Any]) -> tuple[bool, str]:
    """The student's `my_inplace_pairs(graph, live)`: the last-reader rule's (input,
    output) pairs in schedule order, against `inplace_pairs` on every case."""
    if not callable(fn):
        return False, f"ANSWER_4 must be your function my_inplace_pairs, not {fn!r}"
    for name, graph in exercise_4_cases():
        live = liveness(graph, alignment=1)
        ok, got = try_student(fn, "my_inplace_pairs", name, graph, live)
        if not ok:
            return False, got
        try:
            got = [(str(x), str(y)) for x, y in got]
        except (TypeError, ValueError):
            return False, f"on {name}: return a list of (input, output) pairs"
        want = inplace_pairs(graph, live)
        for x, y in got:
            if (x, y) not in want:
                if x in {a for a, _ in got if (a, y) != (x, y)} or \
                        y in {b for a, b in got if (a, b) != (x, y)}:
                    return False, (f"on {name}: one input gives its bytes to one output, "
                                   "and one output takes one input")
                why = inplace_refusal(graph, live, x, y) if x in graph.tensors and \
                    y in graph.tensors else f"{x} or {y} is not a tensor of this graph"
                return False, f"on {name}: ({x}, {y}) breaks a clause: {why}"
        missing = [p for p in want if p not in got]
        if missing:
            return False, (f"on {name}: {len(missing)} pair(s) missing: take each op's "
                           "declared pairs (`get_op(node.op).inplace`, (output index, input "
                           "index)) and keep those no clause forbids")
        if got != want:
            return False, f"on {name}: the right pairs, but list them in schedule order"
    return True, (f"the same pairs as inplace_pairs on all {len(exercise_4_cases())} graphs")
