"""Reference solution of assignment 3 (a DTR eviction heuristic). For instructors: keep
it out of the students' repository. `MINIGRAPH_SOLUTION=<this file>` makes the notebook
use it.

DTR's h_DTR (Kirisame et al.): e*(t) / (memory x staleness), with e* the cost of
recomputing t plus its evicted neighbourhood; as in MegEngine's find_best_tensor
[MegEngine 2021], a pinned tensor is never a candidate.
"""

import math


def my_heuristic(t, now):
    """Score of one resident tensor; the lowest score is evicted first."""
    if t.pinned:
        return math.inf
    return (t.cost + t.neighbor_cost) / (t.size * t.staleness)
