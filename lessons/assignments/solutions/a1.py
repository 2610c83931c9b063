"""Reference solution of assignment 1 (liveness with recomputation). For instructors: keep
it out of the students' repository. `MINIGRAPH_SOLUTION=<this file>` makes the notebook use
it. It is also A1's oracle: the grader runs it where it is here, and ships only its answers
on the public cases (`minigraph/grading/answers.json`) to the students.

One pass over the steps. Each run of a node makes a fresh copy of its outputs, alive for
now at that step only; each read stretches the latest copy of the input to the step that
reads it. A graph output's last copy stays to the end, a leaf lives for the whole run.
"""

import numpy as np


def my_liveness(graph, schedule, alignment=512):
    """Every tensor's copies [(start, end, bytes), ...] (end inclusive, in the order they
    are made) and the theoretical minimum of the planned copies."""
    last = max(len(schedule) - 1, 0)
    copies = {name: [] for name in graph.tensors}            # name -> [[start, end], ...]
    for t in graph.tensors.values():
        if t.producer is None:                               # inputs, parameters, constants
            copies[t.name].append([0, last])
    for step, run in enumerate(schedule):
        node = graph.node(run)
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

    # Planned copies: of activations and gradients that are not graph outputs.
    alive = [0] * (len(schedule) + 1)
    for name, t in graph.tensors.items():
        if t.kind in ("activation", "gradient") and name not in graph.outputs:
            for start, end, nbytes in intervals[name]:
                alive[start] += nbytes
                alive[end + 1] -= nbytes
    minimum = running = 0
    for delta in alive:
        running += delta
        minimum = max(minimum, running)
    return intervals, minimum
