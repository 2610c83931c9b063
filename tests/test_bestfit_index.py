"""Best fit's pool of unplaced buffers in the engine room (`planners/engine/skyline.py`)
answers "the best buffer inside [t0, t1]" exactly as the textbook's list read from the best
down (`bestfit.Unplaced`), after any placements (its pruning rules, and a tree told of the
placements only when it is next searched, are the risk)."""

import random

import pytest

from minigraph.memory.buffers import Buffer
from minigraph.memory.planners import bestfit
from minigraph.memory.planners.engine.skyline import Unplaced


@pytest.mark.parametrize("few, scan", [(0, 0), (0, 40), (10, 40), (0, Unplaced.SCAN),
                                       (Unplaced.SCAN, Unplaced.SCAN)])  # tree, NumPy, Python
@pytest.mark.parametrize("seed", range(20))
def test_find_is_the_best_fitting_buffer_of_the_textbook_list(seed, few, scan, monkeypatch):
    monkeypatch.setattr(Unplaced, "FEW", few)
    monkeypatch.setattr(Unplaced, "SCAN", scan)
    rng = random.Random(seed)
    steps = rng.choice([5, 30, 200])
    items = []
    for k in range(rng.randint(1, 150)):
        s = rng.randrange(steps)
        items.append(Buffer(k, s, min(steps - 1, s + int(rng.expovariate(0.1))),
                            rng.choice([0, 1, 8, 64, 1000])))     # 0 bytes: never a candidate
    pool, plain = Unplaced(items), bestfit.Unplaced(items)
    for _ in range(300):
        t0 = rng.randrange(steps)
        t1 = rng.randrange(t0, steps)
        i = pool.find(t0, t1)
        assert i == plain.find(t0, t1), (t0, t1)
        if i >= 0 and rng.random() < 0.7:
            offset = rng.randrange(1000)
            pool.place(i, offset)
            plain.place(i, offset)
    assert pool.offsets == plain.offsets
