"""Best fit's pool of unplaced buffers answers "the best buffer inside [t0, t1]" exactly
as reading every buffer would, after any removals (its pruning rules, and a tree told of
the removals only when it is next searched, are the risk)."""

import random

import pytest

from minigraph.memory.buffers import Buffer
from minigraph.memory.planners.offset import _Unplaced


def brute(pool: _Unplaced, gone: set[int], t0: int, t1: int) -> int:
    fits = [p for p in range(len(pool.starts))
            if p not in gone and t0 <= pool.starts[p] and pool.ends[p] <= t1]
    return min(fits, key=lambda p: pool.rank[p], default=-1)


@pytest.mark.parametrize("few, scan", [(0, 0), (0, 40), (10, 40), (0, _Unplaced.SCAN),
                                       (_Unplaced.SCAN, _Unplaced.SCAN)])  # tree, NumPy, Python
@pytest.mark.parametrize("seed", range(20))
def test_find_is_the_best_fitting_buffer(seed, few, scan, monkeypatch):
    monkeypatch.setattr(_Unplaced, "FEW", few)
    monkeypatch.setattr(_Unplaced, "SCAN", scan)
    rng = random.Random(seed)
    steps = rng.choice([5, 30, 200])
    items = []
    for k in range(rng.randint(1, 150)):
        s = rng.randrange(steps)
        items.append(Buffer(k, s, min(steps - 1, s + int(rng.expovariate(0.1))),
                            rng.choice([1, 8, 64, 1000])))
    items.sort(key=lambda b: b.start)
    pool, gone = _Unplaced.of([b.start for b in items], [b.end for b in items],
                             [b.size for b in items]), set()
    for _ in range(300):
        t0 = rng.randrange(steps)
        t1 = rng.randrange(t0, steps)
        p = pool.find(t0, t1)
        assert p == brute(pool, gone, t0, t1), (t0, t1)
        if p >= 0 and rng.random() < 0.7:
            pool.remove(p)
            gone.add(p)
    assert sorted(pool.left()) == sorted(set(range(len(items))) - gone)
