"""Partly right answers the course tests hand in (nbgrader's round, Gradescope's upload,
A2's scale): one text each, so that every test grades the same code."""

#: A1: the right rules without rounding up to the alignment (only small alignments pass;
#: no hand-overs). The library's own liveness is refused: tests/test_sandbox_imports.py.
A1_PARTIAL = '''import numpy as np


def my_liveness(graph, schedule, alignment=512, inplace=False):
    """Right rules, but no rounding up to the alignment: only small alignments pass."""
    last = len(schedule) - 1
    lives = {n: [[0, last]] if t.producer is None else [] for n, t in graph.tensors.items()}
    for k, name in enumerate(schedule):
        node = graph.node(name)
        for i in node.inputs:
            lives[i][-1][1] = max(lives[i][-1][1], k)
        for o in node.outputs:
            lives[o].append([k, k])
    for o in graph.outputs:
        lives[o][-1][1] = last
    out = {}
    for n, t in graph.tensors.items():
        nbytes = 0 if t.alias_of else int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize
        out[n] = [(s, e, nbytes) for s, e in lives[n]]
    alive = [0] * (len(schedule) + 1)
    for n, t in graph.tensors.items():
        if t.kind in ("activation", "gradient") and n not in graph.outputs:
            for s, e, b in out[n]:
                alive[s] += b
                alive[e + 1] -= b
    best = run = 0
    for d in alive:
        run += d
        best = max(best, run)
    return out, best
'''

#: A2: the notebook's hint typed in (the 60% mark: tests/test_grading_a2.py).
A2_HINT = '''def my_planner(buffers):
    """The notebook's hint: largest first, each at the lowest gap (about 60 points)."""
    offsets, placed = {}, []
    for b in sorted(buffers, key=lambda b: -b.size):
        busy = sorted((o, o + p.size) for p, o in placed
                      if p.start <= b.end and b.start <= p.end)
        offset = 0
        for lo, hi in busy:
            if offset + b.size <= lo:
                break
            offset = max(offset, hi)
        offsets[b.id] = offset
        placed.append((b, offset))
    return offsets
'''


def stack(buffers):
    """A2's trivial valid plan, the notebook's "wasteful" one: every buffer above the last,
    nothing reused (0 on A2's scale)."""
    offsets, top = {}, 0
    for b in buffers:
        offsets[b.id] = top
        top += b.size
    return offsets
