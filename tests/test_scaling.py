"""Planning at the scale of training graphs (issue 19): the realistic generator, and the
fast index behind greedy-size and GE level 2, which must give the offsets of the plain
one it replaced (kept below as the reference: read every box in the way, sort, scan)."""

from __future__ import annotations

import random

import pytest

from minigraph.errors import PlanError
from minigraph.memory.buffers import Buffer, align_up, theoretical_minimum, validate_offsets
from minigraph.memory.instances import hard_instance, random_buffers, realistic_buffers
from minigraph.memory.planners import get_planner
from minigraph.memory.planners.ge import ge_offsets, reuse_blocks
from minigraph.memory.planners.offset import (
    FreeSpace,
    TimeIndex,
    box_index,
    lowest_free,
    place_in_order,
    size_order,
)

# --- the reference: the implementation before issue 19 -----------------------------------


def _old_lowest_gap(taken, size, fit="lowest"):
    taken.sort()
    top = 0
    best, best_gap = None, None
    for lo, hi in taken:
        gap = lo - top
        if fit == "lowest" and gap >= size:
            return top
        if fit == "best" and gap >= size and (best_gap is None or gap < best_gap):
            best, best_gap = top, gap
        top = max(top, hi)
    return top if best is None else best


def _in_the_way(placed, start, end):
    return [(lo, hi) for s, e, lo, hi in placed if s <= end and start <= e]


def _old_greedy(buffers, fit="lowest"):
    placed, offsets = [], [0] * len(buffers)
    for i in size_order(buffers):
        b = buffers[i]
        if b.size:
            offsets[i] = _old_lowest_gap(_in_the_way(placed, b.start, b.end), b.size, fit)
            placed.append((b.start, b.end, offsets[i], offsets[i] + b.size))
    return offsets


def _old_ge(buffers, alignment=512, holes=True):
    blocks = [bl for bl in reuse_blocks(buffers, lambda b: b.size) if bl[0].size]
    spans = [[(b.start, b.end) for b in bl] if holes else
             [(bl[0].start, max(b.end for b in bl))] for bl in blocks]
    size = [align_up(bl[0].size, alignment) for bl in blocks]
    placed, offsets = [], {b.id: 0 for b in buffers}
    for k in sorted(range(len(blocks)), key=lambda k: (-size[k], blocks[k][0].start, k)):
        taken = [r for s, e in spans[k] for r in _in_the_way(placed, s, e)]
        off = _old_lowest_gap(taken, size[k])
        placed += [(s, e, off, off + size[k]) for s, e in spans[k]]
        for b in blocks[k]:
            offsets[b.id] = off
    return offsets


def _problems():
    """Many small random problems of every kind, dense and sparse, some with zero sizes
    and steps far apart (the index ranks them)."""
    out = []
    for seed in range(12):
        out.append(random_buffers(150, seed=seed))
        out.append(random_buffers(60, seed=seed, family="mixed"))
        out.append(hard_instance(120, 1 << 12, 30, seed=seed))
        out.append(realistic_buffers(300, seed=seed))
        rng = random.Random(seed)
        out.append([Buffer(k, 7 * s, 7 * s + rng.choice((0, 3, 50, 700)),
                           rng.choice((0, 1, 512, 4096, 1 << 20)))
                    for k, s in enumerate(rng.randrange(200) for _ in range(200))])
    return out


@pytest.mark.parametrize("fit", ["lowest", "best"])
def test_greedy_size_gives_the_offsets_of_the_reference(fit, monkeypatch):
    # both indexes, forced in turn, on every problem
    for dense in (0, 10**9):
        monkeypatch.setattr("minigraph.memory.planners.offset.DENSE", dense)
        for bufs in _problems():
            assert place_in_order(bufs, size_order(bufs), fit) == _old_greedy(bufs, fit)


@pytest.mark.parametrize("holes", [True, False])
def test_ge_gives_the_offsets_of_the_reference(holes, monkeypatch):
    for dense in (0, 10**9):
        monkeypatch.setattr("minigraph.memory.planners.offset.DENSE", dense)
        for bufs in _problems():
            assert ge_offsets(bufs, 512, holes)[0] == _old_ge(bufs, 512, holes)


def test_the_dense_index_is_chosen_for_a_training_graph_and_not_for_sparse_lists():
    spans = [(b.start, b.end) for b in realistic_buffers(3000, seed=0)]
    assert isinstance(box_index(spans), FreeSpace)
    spans = [(b.start, b.end) for b in random_buffers(3000, seed=0)]
    assert isinstance(box_index(spans), TimeIndex)


def test_lowest_free_jumps_past_ranges_of_several_sets():
    # set A: [0,100) [300,400); set B: [100,250). For 50 bytes: 0..250 is taken (A then
    # B), [250,300) is free and fits 50 exactly -> 250. For 60 bytes it does not fit
    # there; above A's [300,400) all is free -> 400.
    sets = [([0, 300], [100, 400]), ([100], [250])]
    assert lowest_free(sets, 50) == 250
    assert lowest_free(sets, 60) == 400
    assert lowest_free([], 10) == 0
    assert lowest_free([([10], [20])], 10) == 0      # [0,10) fits before [10,20)


def test_free_space_answers_like_a_scan_of_every_box():
    rng = random.Random(3)
    spans = [(s, s + rng.randrange(40)) for s in (rng.randrange(300) for _ in range(400))]
    index, placed = FreeSpace(spans), []
    for s, e in spans:
        size = rng.choice((1, 5, 64, 300))
        query = [(s, e)] + ([rng.choice(spans)] if rng.random() < 0.3 else [])
        want = _old_lowest_gap([r for a, b in query for r in _in_the_way(placed, a, b)], size)
        assert index.lowest(query, size) == want
        index.add(s, e, want, want + size)
        placed.append((s, e, want, want + size))


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


def _longest_list(index: TimeIndex) -> int:
    return max(len(starts) for buckets in index._starts.values() for starts in buckets.values())


def test_an_insertion_into_the_time_index_shifts_a_bounded_list():
    # With ~30 buffers alive per step, the entries an insertion shifts (its bucket) must
    # not grow with n: one start-sorted list per lifetime class, as before, grew 8x from
    # 5,000 to 40,000 buffers and made the insertions quadratic.
    longest = {}
    for n in (5_000, 40_000):
        index = TimeIndex()
        for b in random_buffers(n, seed=0):
            index.add(b.start, b.end, 0, b.size)
        longest[n] = _longest_list(index)
    assert longest[40_000] < 2 * longest[5_000] < 5_000 // 2


def test_the_time_index_finds_boxes_across_buckets_and_before_step_zero():
    index = TimeIndex()
    width = TimeIndex.BUCKET << 2               # bucket width of lifetimes 2..3 steps
    index.add(width - 1, width + 1, 0, 10)      # starts in bucket 0, ends in bucket 1
    index.add(-5, -3, 10, 20)                   # starts before step 0
    index.add(width + 5, width + 6, 20, 30)
    assert sorted(index.in_the_way(width, width)) == [(0, 10)]
    assert sorted(index.in_the_way(-4, width + 5)) == [(0, 10), (10, 20), (20, 30)]
    assert index.in_the_way(-2, width - 2) == []


def test_a_query_over_many_spans_reads_each_box_once():
    # Boxes k = 0..1999 at bytes [k, k+1), so a box is named by its range. A GE-like block:
    # spans 3 steps apart, so long-lived boxes overlap many of them.
    bufs = random_buffers(2_000, seed=1)
    index = TimeIndex()
    for k, b in enumerate(bufs):
        index.add(b.start, b.end, k, k + 1)
    spans = [(s, s + 1) for s in range(0, 600, 3)]
    got = index.in_the_way_of(spans)
    want = {(k, k + 1) for k, b in enumerate(bufs)
            if any(b.start <= e and s <= b.end for s, e in spans)}
    assert len(got) == len(set(got)) and set(got) == want
    per_span = sum(len(index.in_the_way(s, e)) for s, e in spans)
    assert per_span > 2 * len(got)          # read one span at a time, boxes repeat
