"""Planning at the scale of training graphs (issue 19): the realistic generator, and the
engine room's indexes behind greedy-size and GE level 2 (`planners/engine/boxes.py`),
each of which must answer like the textbook's scan of every placed box
(`greedy.PlacedBoxes`). The planners built on them are held equal to the textbook ones in
tests/test_planner_tiers.py."""

from __future__ import annotations

import random

import numpy as np
import pytest

from minigraph.errors import PlanError
from minigraph.memory.buffers import Buffer, theoretical_minimum, validate_offsets
from minigraph.memory.instances import hard_instance, random_buffers, realistic_buffers
from minigraph.memory.planners import get_planner
from minigraph.memory.planners.engine.boxes import (
    FEW,
    BoxTable,
    FreeSpace,
    box_index,
    lowest_free,
    lowest_gap_of,
)
from minigraph.memory.planners.greedy import PlacedBoxes, lowest_gap


def _index_for(bufs, **change):
    return box_index([(b.start, b.end) for b in bufs], [b.size for b in bufs], **change)


def test_the_dense_index_is_chosen_for_a_training_graph_and_not_for_sparse_lists():
    assert isinstance(_index_for(random_buffers(FEW, seed=0)), PlacedBoxes)     # small
    assert isinstance(_index_for(realistic_buffers(20_000, seed=0)), FreeSpace)  # ~1700 a box
    assert isinstance(_index_for(random_buffers(3000, seed=0)), BoxTable)      # ~30 a box
    assert isinstance(_index_for(hard_instance(3000, 1 << 20, 300, seed=0)), BoxTable)  # ~100
    # beyond what the table's int64 keys hold: FreeSpace, in Python's own integers
    spans = [(k, k + 5) for k in range(FEW)]

    def index(first, big, span=(2, 9)):
        return box_index(spans + [span], [first] * FEW + [big])
    assert isinstance(index(1 << 40, 1 << 30), BoxTable)
    assert isinstance(index(1 << 40, 1 << 62), BoxTable)            # counted in 2**40s
    assert isinstance(index((1 << 40) + 1, 1 << 62), FreeSpace)
    assert isinstance(index(3, (1 << 62) - 1), FreeSpace)
    assert isinstance(index(1, 1, (2, 1 << 60)), FreeSpace)


def test_lowest_free_jumps_past_ranges_of_several_sets():
    # set A: [0,100) [300,400); set B: [100,250). For 50 bytes: 0..250 is taken (A then
    # B), [250,300) is free and fits 50 exactly -> 250. For 60 bytes it does not fit
    # there; above A's [300,400) all is free -> 400.
    sets = [([0, 300], [100, 400]), ([100], [250])]
    assert lowest_free(sets, 50) == 250
    assert lowest_free(sets, 60) == 400
    assert lowest_free([], 10) == 0
    assert lowest_free([([10], [20])], 10) == 0      # [0,10) fits before [10,20)


@pytest.mark.parametrize("index_class", [BoxTable, FreeSpace])
@pytest.mark.parametrize("unit", [1, 64])
def test_each_index_answers_like_a_scan_of_every_box(index_class, unit):
    # the scan: the textbook's PlacedBoxes, told the same boxes
    rng = random.Random(3)
    spans = [(s, s + rng.randrange(40)) for s in (rng.randrange(300) for _ in range(400))]
    spans += [(-50, -40), (-45, 10)]                    # steps before 0 are steps too
    sizes = [unit * rng.choice((1, 5, 64, 300)) for _ in spans]
    index, scan = index_class(spans, sizes), PlacedBoxes(spans, sizes)
    for k in range(len(spans)):
        query = [k] + ([rng.randrange(len(spans))] if rng.random() < 0.3 else [])
        for fit in ("lowest", "best"):
            for size in (sizes[k], rng.randrange(1, 400 * unit)):
                assert index.lowest(query, size, fit) == scan.lowest(query, size, fit)
        want = scan.lowest([k], sizes[k])
        index.add([k], want)
        scan.add([k], want)


# --- the realistic generator -------------------------------------------------------------

def test_realistic_buffers_look_like_a_training_step():
    bufs = realistic_buffers(20_000, seed=0)
    assert len(bufs) == 20_000 and [b.id for b in bufs] == list(range(20_000))
    assert realistic_buffers(20_000, seed=0) == bufs and realistic_buffers(500, 1) != bufs[:500]
    sizes = [b.size for b in bufs]
    assert max(sizes) / min(sizes) >= 1e6 and all(s % 256 == 0 for s in sizes)
    top = max(b.end for b in bufs)
    lives = sorted(b.end - b.start + 1 for b in bufs)
    assert lives[len(lives) // 2] <= 2                       # most lives are short
    long = [b for b in bufs if b.end - b.start > top // 4]
    assert 0.05 * len(bufs) < len(long) < 0.3 * len(bufs)     # a few long ones
    # an activation held for backward lives from forward step i to the mirrored step
    mirrored = sum(1 for b in long if b.start + b.end == top - 1)
    assert mirrored > 0.8 * len(long)
    # the peak of live bytes is at the turn from forward to backward
    live_at = {t: 0 for t in (top // 4, top // 2)}
    for b in bufs:
        for t in live_at:
            live_at[t] += b.size if b.start <= t <= b.end else 0
    assert live_at[top // 2] > 1.5 * live_at[top // 4]


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "10"])
def test_realistic_buffers_refuses_a_bad_count(bad):
    with pytest.raises(PlanError, match="realistic_buffers"):
        realistic_buffers(bad)


# --- scale ------------------------------------------------------------------------------

def test_bestfit_and_greedy_size_are_near_max_live_on_a_training_graph():
    bufs = realistic_buffers(20_000, seed=1)
    low = theoretical_minimum(bufs)
    for planner in ("bestfit", "greedy-size"):
        placed = get_planner(planner)(bufs)
        validate_offsets(bufs, placed.offsets)
        assert placed.arena_bytes <= 1.005 * low, planner


def test_lowest_free_ignores_a_range_that_ends_where_the_answer_starts():
    # [0,64) and [64,128) in two sets touch: 1 byte fits only at 128 (half-open ranges)
    assert lowest_free([([0], [64]), ([64], [128])], 1) == 128
    assert lowest_free([([0], [64]), ([65], [128])], 1) == 64


@pytest.mark.parametrize("fit", ["lowest", "best"])
def test_the_numpy_scan_finds_the_gap_of_the_python_scan(fit):
    rng = random.Random(5)
    for _ in range(500):
        taken = [(lo, lo + rng.choice((1, 3, 40, 100))) for lo in
                 (rng.randrange(300) for _ in range(rng.randrange(0, 12)))]
        size = rng.choice((1, 2, 10, 50, 200))
        taken.sort()
        lo = np.array([a for a, _ in taken], dtype=np.int64)
        hi = np.array([b for _, b in taken], dtype=np.int64)
        assert lowest_gap_of(lo, hi, size, fit) == lowest_gap(list(taken), size, fit)


def test_the_box_table_reads_each_box_once_and_only_boxes_in_the_way():
    # Box k at bytes [k, k+1), so a box is named by its range. A GE-like block: spans 3
    # steps apart, so long-lived boxes overlap many of them; and spans before step 0.
    bufs = random_buffers(2_000, seed=1) + [Buffer("early", -9, -2, 1)]
    queries = [[(s, s + 1) for s in range(0, 600, 3)], [(100, 140)], [(-3, 1)], [(-20, -10)],
               [(700, 710), (0, 5)]]
    spans = [(b.start, b.end) for b in bufs] + [q for query in queries for q in query]
    table = BoxTable(spans, [1] * len(spans))
    for k in range(len(bufs) - 1):
        if k % 3:                                   # a third is not placed yet
            table.add([k], k)
    table.add([len(bufs) - 1], 5000)
    number = len(bufs)
    for query in queries:
        numbers = list(range(number, number + len(query)))
        number += len(query)
        got = (table._box[table.in_the_way(numbers)] >> table._bits).tolist()
        want = [k for k, b in enumerate(bufs[:-1]) if k % 3 and
                any(b.start <= e and s <= b.end for s, e in query)]
        want += [5000] if any(s <= -2 and -9 <= e for s, e in query) else []
        assert len(got) == len(set(got)) and sorted(got) == want
