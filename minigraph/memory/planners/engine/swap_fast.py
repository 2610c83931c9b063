"""The textbook swap choice (`memory/swap.py`, `choose_swaps`), with the live bytes kept.

See swap.py: the same greedy rule (at the first step where the most bytes are alive, swap
the largest tensor idle there; ties to the longer window, then the later name, then the
first gap), the same candidates in the same order, the same answer
(tests/test_swap_engine.py). What changes is how: the textbook rebuilds the bytes alive
at every step after each choice; here they sit in one array that each choice lowers over
its window, and the idle candidates are found with one vectorised mask.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ....errors import SwapError
from ...buffers import Buffer, live_bytes_per_step
from ...swap import Machine, Swap, candidates


def choose_swaps_fast(buffers: Sequence[Buffer], use_steps: Mapping[str, Sequence[int]],
                      seconds: Sequence[float], machine: Machine, target: int,
                      swappable: set[str]) -> list[Swap]:
    """`swap.choose_swaps`, the same swaps, without rebuilding the live bytes each time."""
    live = np.array(live_bytes_per_step(buffers, len(seconds)), dtype=np.int64)
    cands = [s for b in buffers if str(b.id) in swappable
             for s in candidates(b, use_steps[str(b.id)], seconds, machine)]
    lo = np.array([s.until + 1 for s in cands], dtype=np.int64)
    hi = np.array([s.back - 1 for s in cands], dtype=np.int64)
    size = np.array([s.bytes for s in cands], dtype=np.int64)
    length = np.array([s.back - s.until for s in cands], dtype=np.int64)
    names = sorted({s.tensor for s in cands})
    rank_of = {n: k for k, n in enumerate(names)}
    rank = np.array([rank_of[s.tensor] for s in cands], dtype=np.int64)
    first = -np.arange(len(cands), dtype=np.int64)     # ties: the first candidate wins
    open_ = np.ones(len(cands), dtype=bool)
    chosen: list[Swap] = []
    while True:
        peak = int(live.max()) if len(live) else 0
        if peak <= target:
            return sorted(chosen, key=lambda s: (s.after, s.tensor))
        step = int(live.argmax())
        idle = np.flatnonzero(open_ & (lo <= step) & (step <= hi))
        if not len(idle):
            raise SwapError(f"swap cannot bring the bytes alive at step {step} below "
                            f"{peak} B: budget {target} B is below what swapping reaches "
                            "(every tensor alive there is in use or already swapped)", peak)
        order = np.lexsort((first[idle], rank[idle], length[idle], size[idle]))
        k = int(idle[order[-1]])
        best = cands[k]
        chosen.append(best)
        live[lo[k]:hi[k] + 1] -= size[k]
        open_[rank == rank[k]] = False
