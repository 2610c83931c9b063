"""PyTorch's expandable segments (`memory/online/expandable.py`): the hand-checked traces of
lesson 09 against the caching allocator and GMLake, each rule that differs from the caching
allocator, unmapping whole free pages, and GMLake's large pool never larger than the
expandable one."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minigraph.errors import MinigraphError
from minigraph.examples import wide_mlp
from minigraph.experiments.allocators import compare_allocators
from minigraph.memory.online import (
    ALLOCATORS,
    ExpandableAllocator,
    MiB,
    OutOfMemoryError,
    StitchingAllocator,
    as_trace,
    replay_allocator,
    trace_from_schedule,
)

#: Two 12 MiB holes, then a 20 MiB request (lesson 09, section 5).
STITCH = [("alloc", "a", 12 * MiB), ("alloc", "b", 12 * MiB), ("alloc", "x", 12 * MiB),
          ("free", "a", 0), ("free", "b", 0), ("alloc", "c", 20 * MiB)]

#: The batch grows by one: four 12 MiB tensors, then four of 13 MiB (PyTorch's note).
BATCH = ([("alloc", f"n{i}", 12 * MiB) for i in range(4)]
         + [("free", f"n{i}", 0) for i in range(4)]
         + [("alloc", f"m{i}", 13 * MiB) for i in range(4)]
         + [("free", f"m{i}", 0) for i in range(4)])


def test_stitch_trace_caching_56_expandable_40_gmlake_36():
    """Worked out by hand (all requests >= 10 MiB go to the large pool):

    caching: a, b, x each miss the cache and get a segment of exactly 12 MiB (a request of
      10 MiB or more gets its size rounded to 2 MiB); freeing a and b leaves two 12 MiB
      blocks in *different* segments, so c (20 MiB) fits in neither: a fourth segment of
      20 MiB. Reserved 12 + 12 + 12 + 20 = 56 MiB, 4 cudaMalloc calls.
    expandable (20 MiB pages): a maps one page [0, 20) and splits it: a [0, 12), free 8.
      b: the free 8 MiB at the end plus 4 MiB more -> map one more page, [0, 40) mapped;
      b [12, 24), free [24, 40). x [24, 36), free [36, 40). Freeing a and b coalesces
      [0, 24) into one free block (same segment): c takes [0, 20). Reserved 40 MiB,
      2 map calls of one page each.
    expandable (2 MiB pages): a, b, x map exactly 12 MiB each (6 pages, 3 map calls);
      c fits in the coalesced [0, 24). Reserved 36 MiB.
    gmlake: grows by 12 MiB three times; c is stitched from the two 12 MiB holes (12 + 8).
      Reserved 36 MiB, 3 device allocations, 1 stitch.
    """
    caching = replay_allocator(STITCH, "caching", check=True)
    e = ExpandableAllocator()
    expandable = e.replay(STITCH, check=True)
    e2 = ExpandableAllocator(large_page=2 * MiB)
    fine = e2.replay(STITCH, check=True)
    gmlake = replay_allocator(STITCH, "gmlake", check=True)
    assert (caching.peak_reserved, caching.device_mallocs) == (56 * MiB, 4)
    assert (expandable.peak_reserved, expandable.device_mallocs, e.pages_mapped) == (
        40 * MiB, 2, 2)
    assert [(b.addr, b.size) for b in e.live["c"]] == [(0, 20 * MiB)]
    assert [(s.addr, s.size) for s in e.segments.values()] == [(0, 40 * MiB)]
    assert (fine.peak_reserved, fine.device_mallocs, e2.pages_mapped) == (36 * MiB, 3, 18)
    assert (gmlake.peak_reserved, gmlake.device_mallocs, gmlake.stitches) == (36 * MiB, 3, 1)


def test_batch_grows_by_one_caching_104_expandable_60_gmlake_52():
    """PyTorch's own motivation [PyTorch CUDA], worked out by hand:

    caching: four 12 MiB segments; after they are freed, a 13 MiB request fits in none,
      so four new segments of 14 MiB (13 rounded to 2 MiB): 48 + 56 = 104 MiB.
    expandable (20 MiB pages): n0 maps [0, 20) (free 8 left), n1 maps [20, 40) and takes
      [12, 24), n2 takes [24, 36) (free 4 left), n3 maps [40, 60) and takes [36, 48):
      60 MiB in 3 map calls. Freed, [0, 60) is one free block, and the four 13 MiB tensors
      (52 MiB) tile it: no map call. 60 MiB.
    expandable (2 MiB pages): 4 x 12 = 48 mapped, then 39 MiB fit and the last 13 MiB
      request extends the 9 MiB free at the end by 4 MiB: 52 MiB.
    gmlake: 48 MiB, then stitches the 13 MiB requests from 12 MiB holes until 9 MiB are
      left, and grows by the 4 MiB shortfall: 52 MiB.
    """
    assert replay_allocator(BATCH, "caching", check=True).peak_reserved == 104 * MiB
    e = replay_allocator(BATCH, "expandable", check=True)
    assert (e.peak_reserved, e.device_mallocs) == (60 * MiB, 3)
    assert replay_allocator(BATCH, "expandable", large_page=2 * MiB).peak_reserved == 52 * MiB
    assert replay_allocator(BATCH, "gmlake", check=True).peak_reserved == 52 * MiB


def test_a_single_tensor_pays_for_a_whole_page():
    """The price of 20 MiB pages: one 12 MiB tensor maps 20 MiB; caching cuts a 12 MiB
    segment; with 2 MiB pages expandable maps 12 MiB."""
    one = [("alloc", "t", 12 * MiB), ("free", "t", 0)]
    assert replay_allocator(one, "caching").peak_reserved == 12 * MiB
    assert replay_allocator(one, "expandable").peak_reserved == 20 * MiB
    assert replay_allocator(one, "expandable", large_page=2 * MiB).peak_reserved == 12 * MiB


def test_best_fit_takes_the_growable_block_at_the_end_last():
    """a [0, 8), b [8, 14) in one 20 MiB page; a freed: free blocks [0, 8) and [14, 20).
    Plain best fit would give c (5 MiB) the 6 MiB block at the end; PyTorch counts that
    block as everything it could grow to and takes [0, 8)."""
    a = ExpandableAllocator()
    a.replay([("alloc", "a", 8 * MiB), ("alloc", "b", 6 * MiB), ("free", "a", 0),
              ("alloc", "c", 5 * MiB)], check=True)
    assert a.live["c"][0].addr == 0
    assert a.reserved == 20 * MiB


def test_every_block_is_split_when_512_bytes_are_left():
    """The caching allocator keeps a large block whole when 1 MiB or less would be left;
    expandable splits it, in both pools."""
    tr = [("alloc", "a", 19 * MiB + 512 * 1024)]
    e = ExpandableAllocator()
    e.replay(tr, check=True)
    assert e.live["a"][0].size == 19 * MiB + 512 * 1024
    assert e.free_bytes() == 512 * 1024


def test_small_requests_map_2mib_pages_in_their_own_range():
    e = ExpandableAllocator()
    e.replay([("alloc", "s", 1000), ("alloc", "t", 3000), ("alloc", "L", 4 * MiB)],
             check=True)
    assert e.mapped_bytes("small") == 2 * MiB and e.mapped_bytes("large") == 20 * MiB
    assert e.live["t"][0].addr == e.live["s"][0].end        # packed in one page
    assert e.live["s"][0].addr >= e.base["small"] > e.live["L"][0].end


def test_empty_cache_unmaps_whole_free_pages_and_the_hole_is_refilled_first():
    """2 MiB pages: a, b, c map 12 MiB each; b freed; empty_cache unmaps [12, 24): two
    runs, 24 MiB mapped. d (6 MiB) and e (6 MiB) are mapped into the hole, lowest address
    first, and the second mapping joins the two runs again."""
    a = ExpandableAllocator(large_page=2 * MiB)
    a.replay([("alloc", "a", 12 * MiB), ("alloc", "b", 12 * MiB), ("alloc", "c", 12 * MiB),
              ("free", "b", 0)], check=True)
    assert a.empty_cache() == 12 * MiB
    assert (a.reserved, len(a.segments), a.device_frees, a.pages_unmapped) == (
        24 * MiB, 2, 1, 6)
    a.step(("alloc", "d", 6 * MiB))
    a.check()
    assert (a.live["d"][0].addr, a.reserved, len(a.segments)) == (12 * MiB, 30 * MiB, 2)
    a.step(("alloc", "e", 6 * MiB))
    a.check()
    assert (a.live["e"][0].addr, a.reserved, len(a.segments)) == (18 * MiB, 36 * MiB, 1)


def test_partial_pages_stay_mapped_after_empty_cache():
    """20 MiB pages: a (8 MiB) and b (30 MiB) map [0, 40); b freed leaves [8, 40) free; only
    the page [20, 40) lies wholly inside it, so [8, 20) stays mapped and free."""
    a = ExpandableAllocator()
    a.replay([("alloc", "a", 8 * MiB), ("alloc", "b", 30 * MiB), ("free", "b", 0)],
             check=True)
    assert a.empty_cache() == 20 * MiB
    a.check()
    assert (a.reserved, a.free_bytes()) == (20 * MiB, 12 * MiB)


def test_out_of_memory_unmaps_the_cache_and_retries():
    """Capacity 40 MiB: a cached small page (2 MiB) and a 20 MiB large page are mapped; a
    30 MiB request needs 20 MiB more (the free 12 MiB at the end plus one page): 42 MiB do
    not fit, so every free page is unmapped (the small one and nothing else whole) and
    the retry fits."""
    a = ExpandableAllocator(capacity=40 * MiB)
    a.replay([("alloc", "s", 1000), ("free", "s", 0), ("alloc", "x", 8 * MiB),
              ("alloc", "y", 30 * MiB)], check=True)
    assert (a.ooms_recovered, a.reserved, a.mapped_bytes("small")) == (1, 40 * MiB, 0)
    with pytest.raises(OutOfMemoryError, match="'z'"):
        a.step(("alloc", "z", 4 * MiB))


def test_bad_page_is_a_typed_error_naming_it():
    with pytest.raises(MinigraphError, match="large_page=0"):
        ExpandableAllocator(large_page=0)


def test_expandable_is_registered_and_compared():
    assert "expandable" in ALLOCATORS
    step = wide_mlp(widths=(512, 1024, 256, 512), batch=128, name="small-mlp")
    rows = compare_allocators(step, allocators=("caching", "expandable", "gmlake"),
                              planners=("greedy-size",))
    by = {r.method: r for r in rows}
    e = replay_allocator(trace_from_schedule(step), "expandable")
    assert by["expandable"].reserved == e.peak_reserved
    assert by["expandable"].device_calls == e.device_mallocs


LARGE = st.integers(MiB + 1, 48 * MiB)
SMALL = st.integers(1, MiB)


@st.composite
def traces(draw):
    live, out = [], []
    for k in range(draw(st.integers(1, 30))):
        if live and draw(st.booleans()):
            out.append(("free", live.pop(draw(st.integers(0, len(live) - 1))), 0))
        else:
            out.append(("alloc", k, draw(st.one_of(SMALL, LARGE))))
            live.append(k)
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces(), st.sampled_from([2 * MiB, 4 * MiB, 20 * MiB]))
def test_gmlake_large_pool_never_exceeds_the_expandable_one(trace, page):
    """GMLake's large pool is the live large bytes rounded up to 2 MiB at their highest;
    an expandable segment holds every live large byte in pages that are multiples of
    2 MiB, and (without a capacity) never unmaps. So, after every event, GMLake's large
    pool is no bigger."""
    e, g = ExpandableAllocator(large_page=page), StitchingAllocator()
    for ev in as_trace(trace):
        e.step(ev)
        g.step(ev)
        large = sum(s.size for s in g.segments.values() if s.pool == "large")
        assert large <= e.mapped_bytes("large")
    e.check()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces(), st.sampled_from([2 * MiB, 20 * MiB]))
def test_empty_cache_at_any_point_keeps_the_books(trace, page):
    """Unmapping after any event leaves the books balanced, maps only whole pages, and
    leaves no whole free page mapped."""
    a = ExpandableAllocator(large_page=page)
    for ev in as_trace(trace):
        a.step(ev)
        a.empty_cache()
        a.check()
        for pool, fp in a.pool.items():
            p = a.page[pool]
            assert all(s.size % p == 0 and (s.addr - a.base[pool]) % p == 0
                       for s in a.runs[pool])
            assert all(b.size < 2 * p for b in fp)
