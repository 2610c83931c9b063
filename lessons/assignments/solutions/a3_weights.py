"""The survey behind the reference solution's one tuned number (a3.py's weight 3), withheld
with it from students:

    python lessons/assignments/solutions/a3_weights.py

Per graded case (`heuristic_cases()`), the compute overhead of (k x ancestor_cost + e*) /
(bytes x staleness) for each k of `WEIGHTS`, on simulated runs (the same decisions as the
grader's real replay); "thrash": past the thrash limit.
"""

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from a3_cases import cell, overhead  # noqa: E402

from minigraph.grading.heuristic_grader import heuristic_cases  # noqa: E402

WEIGHTS = (1, 2, 3, 5, 10)


def weighted(k):
    """(k x ancestor_cost + e*) / (bytes x staleness); pinned tensors never evicted."""
    def score(t, now):
        if t.pinned:
            return math.inf
        return (k * t.ancestor_cost + t.neighbour_cost) / (t.size * t.staleness)
    return score


if __name__ == "__main__":
    print("| case | " + " | ".join(f"k={k}" for k in WEIGHTS) + " |")
    print("|---" * (len(WEIGHTS) + 1) + "|")
    for case in heuristic_cases():
        print(f"| {case.name} | " + " | ".join(cell(overhead(weighted(k), case))
                                               for k in WEIGHTS) + " |", flush=True)
