"""Exercise checks of lesson 04 (colouring: sharing memory without losing parallelism).

Each `exercise_N(answer)` returns (right?, why) for `check_answers`; the expected value
is computed here, and a wrong answer gets a hint that does not give it away.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import examples
from ..autodiff import training_graph
from ..errors import PlanError
from ..graph import Graph, input, name_scope, param  # noqa: A004 (minigraph's input)
from ..memory import MemoryOptions, color_nodes, liveness, plan_memory
from ..models import get_model, named
from ..ops import add, exp, neg, relu, sigmoid, tanh
from ..ops import sum as sum_  # noqa: A004
from . import try_student
from .l01 import _count

#: The lesson's planner settings: refcount, exact bytes.
OPTS = MemoryOptions(planner="refcount", alignment=1)


def _hazards(graph: Graph, options: MemoryOptions) -> int:
    """Parallel hazards of the plan `options` make for `graph` [Chen 2016]."""
    return len(plan_memory(graph, options).plan.parallel_hazards(graph))


def _colours_for_no_hazards(branches: int, depth: int = 3) -> int:
    """The smallest k whose colouring leaves no parallel hazard on `branchy`: at most
    one colour per branch plus one for the input and the join."""
    g = examples.branchy(branches=branches, depth=depth)
    for k in range(1, branches + 2):
        if not _hazards(g, OPTS.replace(colors=k)):
            return k
    raise PlanError(f"branchy({branches}, {depth}) keeps parallel hazards with "
                    f"{branches + 1} colours")


def exercise_1(answer: Any) -> tuple[bool, str]:
    """The fewest colours with no hazard on branchy(branches=3, depth=3)."""
    k = _count(answer)
    if k is None:
        return False, f"{answer!r} is not a whole number of colours"
    if k == _colours_for_no_hazards(3):
        return True, "one colour per branch: no branch waits on another's bytes"
    if k < 1:
        return False, "k counts colours: 1 or more"
    return False, ("plan the exercise's three-branch graph (`examples.branchy`) with "
                   "`OPTS.replace(colors=k)` for k = 1, 2, ... and count the plan's "
                   "`parallel_hazards` of that graph; the answer is the first k with none")


def exercise_2(answer: Any) -> tuple[bool, str]:
    """Hazards on branchy(4, 3) with refcount, in-place on, one colour."""
    n = _count(answer)
    if n is None:
        return False, f"{answer!r} is not a whole number of hazards"
    if n == _hazards(examples.branchy(branches=4, depth=3), OPTS.replace(inplace=True)):
        return True, ("each branch is one in-place chain, one buffer, shared with no "
                      "other branch")
    return False, ("plan `g` with `OPTS.replace(inplace=True)` and count its parallel "
                   "hazards; then look at the layout: how many buffers does one branch "
                   "use once every activation writes over its input?")


def lesson_training_graph() -> Graph:
    """The small training graph of the lesson's section 4 (same names, same shapes)."""
    with name_scope():
        x = input("x", (4, 8))
        w = param("W", (8, 8))
        h = relu(x @ w)
        return training_graph(sum_(sigmoid(h) * tanh(h)), [w], lr=0.1)


def _colour0_path(graph: Graph, k: int = 2) -> list[str]:
    """The nodes of colour 0 (the heaviest path) in schedule order."""
    live = liveness(graph, alignment=1)
    colour = color_nodes(graph, live, k)
    return [n for n in live.schedule if colour[n] == 0]


def exercise_3(answer: Any) -> tuple[bool, str]:
    """How many nodes lie on colour 0's path of section 4's `train` with k=2?"""
    n = _count(answer)
    if n is None:
        return False, f"{answer!r} is not a whole number of nodes"
    path = _colour0_path(lesson_training_graph())
    if n == len(path):
        return True, f"the heaviest path: {' -> '.join(path)}"
    return False, ("colour `train` with `color_nodes(train, mg.liveness(train, "
                   "alignment=1), 2)` and count the nodes whose colour is 0; the path "
                   "crosses from the forward pass into the backward pass")


def chain_with_sides() -> Graph:
    """Section 5's graph: a chain c0 .. c5 -> loss; s1 = exp(x) joins it at c2 = c1 + s1,
    s2 = -c2 rejoins it at c5 = c4 + s2. nnvm's second path runs s1 -> c2 -> s2."""
    with name_scope():
        x = input("x", (4, 4))
        c1 = named(tanh(named(relu(x), "c0")), "c1")
        c2 = named(add(c1, named(exp(x), "s1")), "c2")
        c4 = named(relu(named(sigmoid(c2), "c3")), "c4")
        c5 = named(add(c4, named(neg(c2), "s2")), "c5")
        return Graph([named(sum_(c5), "loss")])


def _safe_cost(branches: int = 3, depth: int = 3) -> int:
    """Bytes safe mode adds to the plain refcount plan of `branchy(branches, depth)`."""
    g = examples.branchy(branches=branches, depth=depth)
    return plan_memory(g, OPTS.replace(safe=True)).arena_bytes - \
        plan_memory(g, OPTS).arena_bytes


def exercise_4(answer: Any) -> tuple[bool, str]:
    """How many bytes does safe mode add on branchy(3, 3) (refcount, alignment 1)?"""
    n = _count(answer)
    if n is None:
        return False, f"{answer!r} is not a whole number of bytes"
    if n == _safe_cost():
        return True, "the price of zero hazards: no branch takes another branch's bytes"
    if n < 0:
        return False, "safe mode never lets a tensor share more: the answer is not negative"
    return False, ("plan `examples.branchy(branches=3, depth=3)` with `OPTS` and with "
                   "`OPTS.replace(safe=True)` and subtract the two `arena_bytes`")


def exercise_5_cases() -> list[tuple[str, Graph, MemoryOptions]]:
    """The plans exercise 5's check runs `my_hazards` on."""
    return [("four branches, one colour", examples.branchy(branches=4, depth=3), OPTS),
            ("four branches, two colours", examples.branchy(branches=4, depth=3),
             OPTS.replace(colors=2)),
            ("section 4's training graph", lesson_training_graph(),
             OPTS.replace(inplace=True)),
            ("the zoo cnn", get_model("cnn").graph, OPTS.replace(inplace=True))]


def exercise_5(fn: Callable[..., Any]) -> tuple[bool, str]:
    """The student's `my_hazards(graph, plan)`: the pairs (a, b) sharing bytes that the
    graph's edges leave unordered, as `plan.parallel_hazards(graph)` finds them."""
    if not callable(fn):
        return False, f"ANSWER_5 must be your function my_hazards, not {fn!r}"
    for name, graph, options in exercise_5_cases():
        plan = plan_memory(graph, options).plan
        ok, got = try_student(fn, "my_hazards", name, graph, plan)
        if not ok:
            return False, got
        try:
            got = {(str(a), str(b)) for a, b in got}
        except (TypeError, ValueError):
            return False, f"on {name}: return a list of (a, b) pairs"
        want = set(plan.parallel_hazards(graph))
        extra, missing = sorted(got - want), sorted(want - got)
        if extra:
            a, b = extra[0]
            return False, (f"on {name}: ({a}, {b}) is no hazard: either the two never share "
                           "bytes at different times, or every use of the first (its "
                           "producer and each reader) is an ancestor of the second's "
                           "producer")
        if missing:
            return False, (f"on {name}: {len(missing)} hazard(s) missing: a pair sharing "
                           "bytes is one when some use of the first tensor is not an "
                           "ancestor of the second's producer; in-place hand-overs count "
                           "too")
    return True, f"the same hazards as parallel_hazards on all {len(exercise_5_cases())} plans"
