"""Reference solution of assignment 1 (liveness with recomputation; in-place hand-overs).
For instructors: keep it out of the students' repository. `MINIGRAPH_SOLUTION=<this file>`
makes the notebook use it. It is also A1's oracle: the grader runs it where it is here,
and ships only digests of its answers on the public cases (`minigraph/grading/answers.json`)
to the students.

Part A, one pass over the steps. Each run of a node makes a fresh copy of its outputs,
alive for now at that step only; each read stretches the latest copy of the input to the
step that reads it. A graph output's last copy stays to the end, a leaf lives for the
whole run.

Part B, a second pass over the runs, once every copy's end is known (a copy dies where
its last reader runs, which the first pass finds only at the end). At each run, each pair
(output, input) its op declares in-place capable [Chen 2016], in the op's order, hands
the input's copy over to the new copy of the output where the last-reader rule holds
[NNVM 2016]: both tensors planned, the same dtype and element count, one operand, and the
copy read here dies here (it was the latest copy, made before this step). Each copy gives
and takes at most once. The minimum then counts each chain of copies once: one buffer
from the first copy's birth to the last copy's death.
"""

import numpy as np

from minigraph.ops.registry import get_op  # which (output, input) pairs an op declares

PLANNED = ("activation", "gradient")


def my_liveness(graph, schedule, alignment=512, inplace=False):
    """Every tensor's copies [(start, end, bytes), ...] (end inclusive, in the order they
    are made) and the theoretical minimum of the planned copies; with `inplace`, also
    the hand-overs [((input, copy), (output, copy)), ...] and the minimum counts each
    chain of handed-over copies once."""
    last = max(len(schedule) - 1, 0)
    copies = {name: [] for name in graph.tensors}            # name -> [[start, end], ...]
    for t in graph.tensors.values():
        if t.producer is None:                               # inputs, parameters, constants
            copies[t.name].append([0, last])
    reads = []                                               # per run: {input: its copy}
    for step, run in enumerate(schedule):
        node = graph.node(run)
        reads.append({i: len(copies[i]) - 1 for i in node.inputs})
        for i in node.inputs:                                # a run reads the latest copy
            copies[i][-1][1] = max(copies[i][-1][1], step)
        for o in node.outputs:                               # and makes a new one
            copies[o].append([step, step])
    for o in graph.outputs:
        copies[o][-1][1] = last

    intervals = {}
    for t in graph.tensors.values():
        if t.alias_of is not None:                           # written over its parameter
            nbytes = 0
        else:
            raw = int(np.prod(t.shape, dtype=np.int64)) * np.dtype(t.dtype).itemsize
            nbytes = -(-raw // alignment) * alignment
        intervals[t.name] = [(start, end, nbytes) for start, end in copies[t.name]]

    def planned(name):
        return graph.tensors[name].kind in PLANNED and name not in graph.outputs

    handovers, gives, takes = [], set(), set()
    if inplace:
        made = {name: 0 for name in graph.tensors}           # copies made so far, per tensor
        for step, run in enumerate(schedule):
            node = graph.node(run)
            for out_k, in_k in get_op(node.op).inplace:
                if out_k >= len(node.outputs) or in_k >= len(node.inputs):
                    continue
                x, y = node.inputs[in_k], node.outputs[out_k]
                cx, cy = (x, reads[step][x]), (y, made[y])
                tx, ty = graph.tensors[x], graph.tensors[y]
                if (cx in gives or cy in takes or not planned(x) or not planned(y)
                        or tx.dtype != ty.dtype
                        or np.prod(tx.shape, dtype=np.int64) != np.prod(ty.shape, dtype=np.int64)
                        or node.inputs.count(x) != 1 or copies[x][cx[1]][1] != step):
                    continue
                handovers.append((cx, cy))
                gives.add(cx)
                takes.add(cy)
            for o in node.outputs:
                made[o] += 1

    # Buffers: a chain of handed-over copies is one; every other planned copy its own.
    head = {}                                                # copy -> first copy of its chain
    for cx, cy in handovers:                                 # in run order: cx's head is final
        head[cy] = head.get(cx, cx)
    span = {}                                                # head -> [start, end, bytes]
    for name in graph.tensors:
        if not planned(name):
            continue
        for k, (start, end, nbytes) in enumerate(intervals[name]):
            h = head.get((name, k), (name, k))
            s = span.setdefault(h, [start, end, nbytes])
            s[0], s[1], s[2] = min(s[0], start), max(s[1], end), max(s[2], nbytes)
    alive = [0] * (len(schedule) + 1)
    for start, end, nbytes in span.values():
        alive[start] += nbytes
        alive[end + 1] -= nbytes
    minimum = running = 0
    for delta in alive:
        running += delta
        minimum = max(minimum, running)
    if inplace:
        return intervals, minimum, handovers
    return intervals, minimum
