"""The key to the lesson exercises, for instructors only.

`course/` is left out of the student release (`course/student_repo.py`), so this file is
the one place where the right answers of the lesson notebooks are written down. Each
answer is set beside its exercise's check (`minigraph/lessons/lNN.py`), which computes the
expected value itself when it runs; `tests/test_lesson_key.py` runs every check on every
answer here, so the key cannot drift from the lessons.

    python course/lesson_key.py            # the key as Markdown, each answer checked
    python course/lesson_key.py --no-check # the same without running the checks

A value answer is written as the value; an answer the student writes as code (a function,
a graph, a trace) is the reference solution below, written as a student would from the
exercise's words, with the same names the notebook uses.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import minigraph as mg  # noqa: E402
from minigraph.errors import BudgetError  # noqa: E402
from minigraph.examples import named  # noqa: E402
from minigraph.memory import PLANNERS  # noqa: E402
from minigraph.memory.buffers import Placement  # noqa: E402
from minigraph.memory.planners.greedy import lowest_gap  # noqa: E402
from minigraph.ops.registry import get_op  # noqa: E402

MiB = 2**20


# --- solutions written as code ------------------------------------------------------------

def my_intervals(graph, schedule):
    """02.4: {tensor: (start, end)} of the planned tensors."""
    pos = {n: k for k, n in enumerate(schedule)}
    out = {}
    for name, t in graph.tensors.items():
        if t.kind not in ("activation", "gradient") or name in graph.outputs:
            continue
        start = pos[t.producer]
        out[name] = (start, max((pos[c] for c in graph.consumers[name]), default=start))
    return out


def pair_without_hazard():
    """03.1: f = a * sigmoid(a): a's other reader (the sigmoid) feeds f, so the graph
    orders it before f overwrites a."""
    with mg.name_scope():
        a = named(mg.tanh(mg.input("x", (4, 4))), "a")
        c = named(mg.sigmoid(a), "c")
        return mg.Graph([mg.sum(named(mg.mul(a, c), "f"))])


def relu_output_not_planned():
    """03.3: the relu's output is the graph output: not planned, so not in place."""
    with mg.name_scope():
        a = named(mg.tanh(mg.input("x", (4, 4))), "a")
        return mg.Graph([named(mg.relu(a), "r")])


def my_inplace_pairs(graph, live):
    """03.4: the last-reader rule, clause by clause."""
    pairs, taken_in, taken_out = [], set(), set()
    for step, name in enumerate(live.schedule):
        node = graph.node(name)
        for out_k, in_k in get_op(node.op).inplace:
            if out_k >= len(node.outputs) or in_k >= len(node.inputs):
                continue
            x, y = node.inputs[in_k], node.outputs[out_k]
            ix, iy = live.intervals[x], live.intervals[y]
            tx, ty = graph.tensors[x], graph.tensors[y]
            if x in taken_in or y in taken_out or not (ix.planned and iy.planned):
                continue
            if ix.end != step or ix.start >= step or node.inputs.count(x) != 1:
                continue
            if tx.dtype != ty.dtype or tx.nbytes != ty.nbytes:
                continue
            pairs.append((x, y))
            taken_in.add(x)
            taken_out.add(y)
    return pairs


def ancestors(graph, node):
    """Lesson 04, section 4: every node `node` depends on through the graph's edges."""
    seen, todo = set(), [node]
    while todo:
        n = graph.node(todo.pop())
        for p in [graph.tensors[t].producer for t in n.inputs] + list(n.deps):
            if p is not None and p not in seen:
                seen.add(p)
                todo.append(p)
    return seen


def my_hazards(graph, plan):
    """04.5: pairs sharing bytes at different times, not ordered by the graph."""
    iv, out = plan.liveness.intervals, []
    names = [n for n in plan.offsets if plan.size(n)]
    for a in names:
        uses = [graph.tensors[a].producer, *graph.consumers[a]]
        for b in names:
            if a == b or not (iv[b].start > iv[a].end or (a, b) in plan.inplace):
                continue
            if plan.offsets[a] >= plan.offsets[b] + plan.size(b) or \
                    plan.offsets[b] >= plan.offsets[a] + plan.size(a):
                continue
            pb = graph.tensors[b].producer
            before = ancestors(graph, pb)
            if any(u != pb and u not in before for u in uses):
                out.append((a, b))
    return out


def ge_misses_the_minimum():
    """05.2: a small block whose life overlaps two larger ones that could share."""
    B = mg.Buffer
    return [B("A", 1, 2, 100), B("B", 2, 4, 200), B("C", 0, 1, 400), B("D", 0, 0, 200)]


def my_reuse_blocks(buffers, range_of):
    """05.3: GE's reuse step: by start, the lowest-numbered free block of its range."""
    blocks, ranges = [], []
    for b in sorted(buffers, key=lambda b: b.start):
        r = range_of(b)
        for k, block in enumerate(blocks):
            if ranges[k] == r and block[-1].end < b.start:
                block.append(b)
                break
        else:
            blocks.append([b])
            ranges.append(r)
    return [[b.id for b in block] for block in blocks]


def first_fit_by_start(buffers):
    """06.1: by start step, each at the lowest offset free for its whole life."""
    offsets, placed = {}, []
    for b in sorted(buffers, key=lambda b: b.start):
        taken = [(offsets[p.id], offsets[p.id] + p.size) for p in placed
                 if p.start <= b.end and b.start <= p.end]
        offsets[b.id] = lowest_gap(taken, b.size)
        placed.append(b)
    return Placement.of(buffers, offsets)


def registered_gap():
    """06.2 needs exercise 1's planner registered first, as the notebook does."""
    PLANNERS["first-fit-start"] = first_fit_by_start
    return 29.95


def my_place(dtr, nbytes):
    """07.1: minimal.py's eviction loop."""
    while dtr.used + nbytes > dtr.budget:
        candidates = [t for t in dtr.resident if not dtr.pins[t]]
        if not candidates:
            raise BudgetError("nothing left to evict")
        dtr.evict(min(candidates, key=lambda t: dtr.score(dtr, t)))
    dtr.used += nbytes
    dtr.peak = max(dtr.peak, dtr.used)


def my_score(t, now):
    """07.2: h_DTR: own cost and the evicted neighbourhood's, over bytes and staleness."""
    return (t.cost + t.neighbour_cost) / (t.size * t.staleness)


def best_fit_wins():
    """09.1: holes of 1 and 2 MiB; best fit keeps the 2 MiB hole for the 2 MiB request."""
    return [("alloc", "a", 2 * MiB), ("alloc", "x", MiB), ("alloc", "b", MiB),
            ("alloc", "y", MiB), ("free", "a"), ("free", "b"), ("alloc", "c", MiB),
            ("alloc", "d", 2 * MiB)]


def gmlake_stitches_a_hole():
    """09b.1: a hole inside the segment too small for the next request: the expandable
    segment extends its end, GMLake stitches the hole and asks only for what is missing."""
    return [("alloc", "a", 12 * MiB), ("alloc", "b", 12 * MiB), ("alloc", "x", 12 * MiB),
            ("free", "b"), ("alloc", "c", 13 * MiB)]


def own_torch_model():
    """10.1: two linear layers with biases and a ReLU, cross-entropy (needs PyTorch)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    torch.manual_seed(0)
    x, y = torch.randn(5, 6), torch.randint(0, 3, (5,))
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)), (x,), \
        F.cross_entropy, (y,)


# --- the key -------------------------------------------------------------------------------

#: lesson -> exercise -> (the answer, or a function making it, and why it is right).
KEY: dict[str, dict[int, tuple[Any, str]]] = {
    "00": {1: ({"bestfit", "greedy-size"},
               "with in-place off only these pack the U-Net into its busiest step's bytes"),
           2: (1.076, "only activations and their gradients grow with the batch")},
    "01": {1: (2, "h and s are each read twice: one add_n each"),
           2: (3, "the backward nodes reading a forward activation")},
    "02": {1: ((2, 3), "Op2 runs third, Op4 reads T2 last"),
           2: (256, "two 128-byte sigmoid outputs alive at each step"),
           3: ("matmul_5", "d(W1) is made while d(fc1) and d(W2) are alive"),
           4: (lambda: my_intervals, "the rules of section 1")},
    "03": {1: (pair_without_hazard, "a -> f: the sigmoid reads a before f, by the edges"),
           2: ((9216, 7168), "with 2, E grows B's 2048-byte block"),
           3: (relu_output_not_planned, "a graph output is not planned"),
           4: (lambda: my_inplace_pairs, "the six clauses of section 2")},
    "04": {1: (3, "one colour per branch"),
           2: (0, "each branch is one in-place chain, one buffer"),
           3: (9, "the heaviest path crosses into the backward pass"),
           4: (4096, "no branch may take another's bytes"),
           5: (lambda: my_hazards, "the ancestor test, pair by pair")},
    "05": {1: (7680, "A and C share; D's range is theirs but C is alive; B, E alone"),
           2: (ge_misses_the_minimum, "D overlaps the blocks that C and A/B could share"),
           3: (lambda: my_reuse_blocks, "section 2's reuse step")},
    "05b": {1: ("bfs", "the lowest theoretical minimum of the zoo CNN")},
    "06": {1: (lambda: first_fit_by_start, "first fit by start, offset for offset"),
           2: (registered_gap, "first fit by start on the zoo LSTM, in percent")},
    "07": {1: (lambda: my_place, "minimal.py's loop"),
           2: (lambda: my_score, "h_DTR, with the neighbourhood's cost"),
           3: (3, "a backward op holds two inputs and its output")},
    "07b": {1: ((16.0, 5.0), "DTR-eq: classes {b, c} and {e, f}; MegEngine: only the input side, "
                "max({b, c}, c)")},
    "07bb": {1: ("s", "its free neighbours on both sides join into one block")},
    "07c": {1: (["c", "e"], "partitioned: a c e from the bottom, b d f from the top; f "
                "is pinned, c+e the cheapest pair of neighbours")},
    "07d": {1: (["matmul_6", "matmul_8"], "the greedy rule: the largest idle tensor at the "
                "peak step, twice")},
    "07e": {1: (1.3, "the optimum at 60% needs only 20 B, within 55%'s 20 B; a smaller "
                "budget never pays less")},
    "08": {1: (8, "the largest itemsize among the mixed dtypes"),
           2: (1608, "best-fit's arena at 512 minus at 8")},
    "09": {1: (best_fit_wins, "best fit reserves less than first fit"),
           2: (8 * MiB + 512, "above the largest free block, within the free bytes"),
           3: (20 * MiB, "A gets a whole 20 MiB segment, B and C fit in the rest")},
    "09b": {1: (gmlake_stitches_a_hole, "GMLake reserves less than expandable-2m"),
            2: (40 * MiB, "two whole 20 MiB pages of the large pool")},
    "10": {1: (own_torch_model, "every op maps; minigraph's loss is PyTorch's"),
           2: (0.7, "the smallest ratio of RATIOS_2 at which DTR finishes")},
    "10b": {1: (2.0, "the smallest device of DEVICES_1 on which DTR pays at most "
                     "MAX_OVERHEAD_1 on ResNet-50's training step")},
}


def answer(lesson: str, number: int) -> Any:
    """The answer to exercise `number` of lesson `lesson`, built if it is code."""
    value = KEY[lesson][number][0]
    return value() if callable(value) else value


def check(lesson: str, number: int) -> tuple[bool, str]:
    """The lesson's own check run on the key's answer."""
    import importlib
    module = importlib.import_module(f"minigraph.lessons.l{lesson}")
    return getattr(module, f"exercise_{number}")(answer(lesson, number))


def _shown(value: Any) -> str:
    if callable(value) and not inspect.isfunction(value):
        return repr(value)
    if inspect.isfunction(value):
        return f"`{value.__name__}` (below)"
    return f"`{value!r}`"


def markdown(run_checks: bool = True) -> str:
    lines = ["# The lesson exercises: the key", "",
             "| lesson | exercise | answer | why | its check |", "|---|---|---|---|---|"]
    code: list[Callable[..., Any]] = []
    for lesson, exercises in KEY.items():
        for number, (value, why) in exercises.items():
            shown = value() if callable(value) and value.__name__ == "<lambda>" else value
            if inspect.isfunction(shown):
                code.append(shown)
            verdict = "-"
            if run_checks:
                try:
                    ok, said = check(lesson, number)
                    verdict = "right" if ok else f"NOT right: {said}"
                except ImportError as e:          # lesson 10 without PyTorch
                    verdict = f"not run ({e.name} missing)"
            lines.append(f"| {lesson} | {number} | {_shown(shown)} | {why} | {verdict} |")
    lines += ["", "## The answers written as code", ""]
    for fn in dict.fromkeys(code):
        lines += ["```python", inspect.getsource(fn).rstrip(), "```", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(run_checks="--no-check" not in sys.argv[1:]))
