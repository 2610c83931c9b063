"""Online allocators: the trace format, each allocator's rules, the books balancing after
every event of random traces, and GMLake never reserving more than the caching allocator."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigraph as mg
from minigraph.backend import gpu_available
from minigraph.errors import DeviceError
from minigraph.examples import wide_mlp
from minigraph.experiments.allocators import (
    compare_allocators,
    dtr_rows,
    dtr_runs,
    format_rows,
)
from minigraph.experiments.pool import measure_cupy_pool
from minigraph.memory import liveness
from minigraph.memory.online import (
    ALLOCATORS,
    BestFitAllocator,
    CachingAllocator,
    CupyPoolAllocator,
    FirstFitAllocator,
    InvariantError,
    MiB,
    OutOfMemoryError,
    StitchingAllocator,
    TraceError,
    as_trace,
    buffers_from_trace,
    make_allocator,
    peak_live,
    replay_allocator,
    roundup_power2_next_division,
    total_allocated,
    trace_from_buffers,
    trace_from_schedule,
)

KB = 1000


@pytest.fixture(scope="module")
def small_graph():
    return wide_mlp(widths=(512, 1024, 256, 512), batch=128, name="small-mlp")


# The trace -------------------------------------------------------------------------------

def test_trace_allocates_at_producer_before_that_steps_frees(small_graph):
    g = small_graph
    live = liveness(g, alignment=1)
    trace = trace_from_schedule(g)
    planned = {iv.name: iv for iv in live.planned() if iv.bytes}
    assert {t for k, t, _ in trace if k == "alloc"} == set(planned)
    assert sum(1 for k, *_ in trace if k == "free") == len(planned)
    pos = {(k, t): i for i, (k, t, _) in enumerate(trace)}
    for name, iv in planned.items():
        assert pos[("alloc", name)] < pos[("free", name)]
        for other, jv in planned.items():
            if jv.end == iv.start:            # freed at the step that makes `name`
                assert pos[("alloc", name)] < pos[("free", other)]


def test_trace_peak_is_the_theoretical_minimum(small_graph):
    for alignment in (1, 512):
        live = liveness(small_graph, alignment=alignment)
        trace = trace_from_schedule(small_graph, alignment=alignment)
        assert peak_live(trace) == live.theoretical_minimum()
        assert total_allocated(trace) == live.no_reuse_bytes()


def test_trace_from_liveness_equals_trace_from_graph(small_graph):
    assert trace_from_schedule(liveness(small_graph, alignment=1)) == \
        trace_from_schedule(small_graph)


def test_inplace_trace_is_one_alloc_per_chain():
    x = mg.input("x", (256, 1024))
    W = mg.param("W", (1024, 1024))
    h = mg.sigmoid(mg.sigmoid(mg.sigmoid(x @ W)))
    g = mg.training_graph(mg.mean(h * h), [W], lr=0.1)
    plain = trace_from_schedule(g)
    fused = trace_from_schedule(g, inplace=True)
    assert len(fused) < len(plain)
    assert peak_live(fused) <= peak_live(plain)


def test_unplanned_tensors_join_the_trace_when_asked(small_graph):
    full = trace_from_schedule(small_graph, planned_only=False)
    assert peak_live(full) > peak_live(trace_from_schedule(small_graph))
    assert as_trace(full) == full


def test_trace_rules_are_enforced():
    with pytest.raises(TraceError, match="already alive"):
        as_trace([("alloc", "a", 10), ("alloc", "a", 10)])
    with pytest.raises(TraceError, match="not alive"):
        as_trace([("free", "a", 10)])
    with pytest.raises(TraceError, match="unknown kind"):
        as_trace([("evict", "a", 10)])
    with pytest.raises(TraceError, match="size"):
        as_trace([("alloc", "a", -1)])


def test_a_dtr_style_run_with_events_is_accepted():
    class Run:
        events = [("alloc", "a", 3 * MiB), ("free", "a"), ("alloc", "a", 3 * MiB),
                  ("free", "a", 3 * MiB)]
    assert as_trace(Run()) == [("alloc", "a", 3 * MiB), ("free", "a", 3 * MiB)] * 2
    r = replay_allocator(Run(), "caching", check=True)
    assert r.peak_requested == 3 * MiB and r.device_mallocs == 1
    b = buffers_from_trace(Run())
    assert [x.id for x in b] == [("a", 0), ("a", 1)] and b[0].end < b[1].start


def test_trace_from_buffers_puts_allocs_before_frees_of_the_same_step():
    b = [mg.Buffer("a", 0, 1, 100), mg.Buffer("b", 1, 2, 100)]
    assert trace_from_buffers(b) == [("alloc", "a", 100), ("alloc", "b", 100),
                                     ("free", "a", 100), ("free", "b", 100)]


# First fit and best fit -----------------------------------------------------------------

HOLE = [("alloc", "A", 4 * MiB), ("alloc", "B", 2 * MiB), ("free", "A", 0),
        ("alloc", "C", 6 * MiB), ("free", "B", 0), ("free", "C", 0)]


def test_first_fit_cannot_use_a_hole_too_small_and_grows_the_arena():
    # MODeL's figure 4: A is freed, C is larger than A's hole, so the arena grows.
    r = replay_allocator(HOLE, "first-fit", check=True)
    assert r.peak_requested == 8 * MiB
    assert r.peak_reserved == 12 * MiB
    assert r.fragmentation == 4 * MiB
    assert r.device_mallocs == 3


def test_growth_extends_a_free_block_at_the_top():
    trace = [("alloc", "A", 2 * MiB), ("alloc", "B", 2 * MiB), ("free", "B", 0),
             ("alloc", "C", 3 * MiB)]
    r = replay_allocator(trace, "first-fit", check=True)
    assert r.peak_reserved == 5 * MiB            # B's 2 MiB at the top grew by 1 MiB


def test_best_fit_takes_the_smallest_hole_first_fit_the_lowest():
    trace = [("alloc", "a", 3 * MiB), ("alloc", "x", 512), ("alloc", "b", 1 * MiB),
             ("alloc", "y", 512), ("free", "a", 0), ("free", "b", 0), ("alloc", "c", MiB)]
    ff, bf = FirstFitAllocator(), BestFitAllocator()
    ff.replay(trace, check=True)
    bf.replay(trace, check=True)
    assert ff.live["c"][0].addr == 0
    assert bf.live["c"][0].addr == 3 * MiB + 512


def test_arena_capacity_is_enforced():
    with pytest.raises(OutOfMemoryError, match="cannot grow"):
        replay_allocator(HOLE, "first-fit", capacity=10 * MiB)


# The caching allocator -------------------------------------------------------------------

def test_rounding_rules_follow_pytorch():
    c = CachingAllocator()
    assert c.round_size(1) == 512 and c.round_size(1200) == 1536
    c4 = CachingAllocator(roundup_power2_divisions=4)
    assert c4.round_size(1200) == 1536            # below 512 * divisions: plain rounding
    assert c4.round_size(4100) == 5120 and c.round_size(4100) == 4608
    assert roundup_power2_next_division(1200, 4) == 1280
    assert roundup_power2_next_division(1024, 4) == 1024
    assert roundup_power2_next_division(5 * MiB + 1, 4) == 6 * MiB
    assert c.pool_of(MiB) == "small" and c.pool_of(MiB + 512) == "large"
    assert c.allocation_size(100 * KB) == 2 * MiB
    assert c.allocation_size(5 * MiB) == 20 * MiB
    assert c.allocation_size(11 * MiB) == 12 * MiB


def test_small_requests_share_one_2mib_segment():
    r = replay_allocator([("alloc", k, 300 * KB) for k in range(6)], "caching", check=True)
    assert r.device_mallocs == 1 and r.peak_reserved == 2 * MiB


def test_mid_size_requests_share_one_20mib_segment():
    trace = [("alloc", k, 3 * MiB) for k in range(6)]
    r = replay_allocator(trace, "caching", check=True)
    assert r.device_mallocs == 1 and r.peak_reserved == 20 * MiB


def test_freed_blocks_are_cached_not_given_back():
    trace = [("alloc", "a", 30 * MiB), ("free", "a", 0), ("alloc", "b", 20 * MiB)]
    c = CachingAllocator()
    r = c.replay(trace, check=True)
    assert r.device_mallocs == 1 and r.device_frees == 0
    assert c.reserved == 30 * MiB


def test_a_small_remainder_of_a_large_block_is_not_split():
    c = CachingAllocator()
    c.replay([("alloc", "a", 12 * MiB), ("free", "a", 0), ("alloc", "b", 11 * MiB + 512)],
             check=True)
    assert c.live["b"][0].size == 12 * MiB       # 0.5 MiB left: not worth a block


def test_max_split_size_keeps_oversize_blocks_whole():
    trace = [("alloc", "big", 40 * MiB), ("free", "big", 0), ("alloc", "mid", 3 * MiB)]
    assert replay_allocator(trace, "caching").peak_reserved == 40 * MiB
    r = replay_allocator(trace, "caching", max_split_size=32 * MiB, check=True)
    assert r.peak_reserved == 60 * MiB and r.device_mallocs == 2


def test_out_of_memory_frees_the_cache_and_retries():
    trace = [("alloc", "a", 30 * MiB), ("free", "a", 0), ("alloc", "b", 35 * MiB)]
    c = CachingAllocator(capacity=40 * MiB)
    r = c.replay(trace, check=True)
    assert r.device_frees == 1 and r.ooms_recovered == 1 and c.reserved == 36 * MiB


def test_out_of_memory_is_a_typed_error_naming_the_tensor():
    c = CachingAllocator(capacity=40 * MiB)
    with pytest.raises(OutOfMemoryError, match="'b'"):
        c.replay([("alloc", "a", 30 * MiB), ("alloc", "b", 20 * MiB)])
    c.check()


def test_cupy_pool_makes_exact_segments_in_one_pool():
    r = replay_allocator([("alloc", "a", 100 * KB), ("alloc", "b", 3 * MiB)], "cupy-pool",
                         check=True)
    assert r.peak_reserved == 100352 + 3 * MiB and r.device_mallocs == 2


# GMLake stitching ------------------------------------------------------------------------

STITCH = [("alloc", "a", 12 * MiB), ("alloc", "b", 12 * MiB), ("alloc", "x", 12 * MiB),
          ("free", "a", 0), ("free", "b", 0), ("alloc", "c", 20 * MiB)]


def test_stitching_serves_a_request_from_noncontiguous_free_blocks():
    g = StitchingAllocator()
    r = g.replay(STITCH, check=True)
    assert r.stitches == 1 and g.states["S3 stitch"] == 1
    assert len(g.live["c"]) == 2
    assert r.peak_reserved == 36 * MiB
    assert replay_allocator(STITCH, "caching").peak_reserved == 56 * MiB


def test_stitching_grows_by_the_shortfall_only():
    g = StitchingAllocator()
    g.replay([("alloc", "a", 12 * MiB), ("alloc", "b", 4 * MiB), ("free", "a", 0),
              ("alloc", "c", 15 * MiB)], check=True)
    assert g.states["S4 grow"] == 3 and g.reserved == 20 * MiB
    assert sum(b.size for b in g.live["c"]) == 15 * MiB


def test_invariant_check_catches_a_corrupted_book():
    c = CachingAllocator()
    c.replay([("alloc", "a", 3 * MiB)])
    c.allocated += 512
    with pytest.raises(InvariantError):
        c.check()


# Properties on random traces ---------------------------------------------------------------

SIZES = st.one_of(
    st.integers(1, 4 * KB),
    st.integers(1, 2 * MiB),
    st.integers(MiB - 2 * KB, MiB + 2 * KB),
    st.integers(2 * MiB, 24 * MiB),
    st.sampled_from([512, MiB, 2 * MiB, 10 * MiB - 512, 10 * MiB, 20 * MiB]),
)


@st.composite
def traces(draw, max_events: int = 60):
    """Valid traces: each step allocates a new tensor or frees a live one."""
    n = draw(st.integers(1, max_events))
    live: list[int] = []
    out, next_id = [], 0
    for _ in range(n):
        if live and draw(st.booleans()):
            tid = live.pop(draw(st.integers(0, len(live) - 1)))
            out.append(("free", tid, 0))
        else:
            out.append(("alloc", next_id, draw(SIZES)))
            live.append(next_id)
            next_id += 1
    if draw(st.booleans()):
        out += [("free", t, 0) for t in live]
    return out


OPTIONS = st.fixed_dictionaries({}, optional={
    "max_split_size": st.sampled_from([4 * MiB, 16 * MiB, 40 * MiB]),
    "roundup_power2_divisions": st.sampled_from([2, 4, 8]),
})

FAST = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(traces())
def test_every_allocator_keeps_its_books_after_every_event(trace):
    for name in ALLOCATORS:
        a = make_allocator(name)
        for ev in as_trace(trace):
            a.step(ev)
            a.check()            # no overlap; allocated + free == reserved; pools exact
            assert a.requested <= a.allocated <= a.reserved
        r = a.result()
        assert r.peak_requested == peak_live(as_trace(trace))
        assert r.peak_reserved >= r.peak_allocated >= r.peak_requested


@FAST
@given(traces(), OPTIONS)
def test_stitching_never_reserves_more_than_caching(trace, options):
    c, g = CachingAllocator(**options), StitchingAllocator(**options)
    for ev in as_trace(trace):
        c.step(ev)
        g.step(ev)
        assert g.reserved <= c.reserved
    g.check()
    c.check()


@FAST
@given(traces(), st.integers(8, 80))
def test_under_a_capacity_an_allocator_finishes_or_raises_out_of_memory(trace, cap_mib):
    for name in ALLOCATORS:
        a = make_allocator(name, capacity=cap_mib * MiB)
        try:
            for ev in as_trace(trace):
                a.step(ev)
                assert a.reserved <= cap_mib * MiB
        except OutOfMemoryError:
            pass
        a.check()


# Comparisons -------------------------------------------------------------------------------

def test_compare_allocators_has_every_kind_of_row(small_graph):
    rows = compare_allocators(small_graph, planners=["refcount", "greedy-size"])
    methods = [r.method for r in rows]
    assert methods[0] == "no reuse" and methods[-1] == "minimum"
    for m in ("first-fit", "best-fit", "caching", "expandable", "expandable-2m", "gmlake",
              "refcount", "greedy-size"):
        assert m in methods
    minimum = rows[-1].reserved
    assert minimum == liveness(small_graph).theoretical_minimum()
    for r in rows:
        assert r.reserved >= minimum and r.peak == minimum
    by = {r.method: r for r in rows}
    assert by["gmlake"].reserved <= by["caching"].reserved
    assert "| gmlake |" in format_rows(rows)
    assert by["expandable"].pages is not None and by["caching"].pages is None
    assert f"{by['expandable'].device_calls} ({by['expandable'].pages} pages)" in format_rows(rows)


def test_compare_allocators_takes_dtr_runs_and_plans_them_offline():
    class Run:     # a rematerialising run: "h" is freed, then recomputed
        events = [("alloc", "h", 6 * MiB), ("alloc", "y", 3 * MiB), ("free", "h", 0),
                  ("alloc", "z", 7 * MiB), ("alloc", "h", 6 * MiB), ("free", "y", 0),
                  ("free", "z", 0), ("free", "h", 0)]
    rows = dtr_rows("toy", "dtr", Run(), planners=["greedy-size"])
    by = {r.method: r for r in rows}
    assert by["minimum"].reserved == 16 * MiB
    assert by["greedy-size"].reserved >= 16 * MiB
    assert by["no reuse"].reserved == 22 * MiB
    assert all(r.trace == "dtr" for r in rows)


def test_planners_left_out_for_big_graphs_are_reported_as_skipped(small_graph):
    rows = compare_allocators(small_graph, planners=None, slow_above=0, allocators=())
    skipped = [r for r in rows if r.note.startswith("skipped")]
    assert {r.method for r in skipped} <= {"ilp", "anneal"} and skipped


def test_pictures_draw(small_graph):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from minigraph.experiments.allocators import static_plan
    from minigraph.viz.allocator_plots import (
        plot_allocator_timeline,
        plot_allocators,
        plot_arena,
        plot_static,
    )
    trace = trace_from_schedule(small_graph)
    r = replay_allocator(trace, "gmlake")
    assert plot_arena(r) is not None
    plan = static_plan(trace, "greedy-size")
    assert plan.placement.arena_bytes >= peak_live(trace) and plan.events == len(trace)
    assert plot_static(plan) is not None
    assert plot_allocator_timeline([r]) is not None
    assert plot_allocators(compare_allocators(small_graph, planners=["refcount"])) is not None


def test_inplace_comparison_uses_the_fused_minimum():
    x = mg.input("x", (256, 1024))
    W = mg.param("W", (1024, 1024))
    g = mg.training_graph(mg.mean(mg.sigmoid(mg.sigmoid(x @ W)) ** 2), [W], lr=0.1)
    rows = compare_allocators(g, inplace=True, planners=["greedy-size"])
    by = {r.method: r for r in rows}
    assert by["greedy-size"].reserved >= by["minimum"].reserved
    assert by["first-fit"].reserved >= by["minimum"].reserved


def test_dtr_runs_replay_through_every_allocator():
    g = wide_mlp(widths=(1024, 2048, 1024, 512), batch=128, name="dtr-mlp")
    notes: list[str] = []
    runs = dtr_runs(g, ratios=(0.9,), notes=notes)
    if not runs:
        pytest.skip(f"DTR gave no run: {notes}")
    (label, events), = runs.items()
    assert label.startswith("dtr@") and events
    c, s = CachingAllocator(), StitchingAllocator()
    for ev in events:
        c.step(ev)
        s.step(ev)
        assert s.reserved <= c.reserved
    for name in ALLOCATORS:
        replay_allocator(events, name, check=True)
    rows = compare_allocators(g, planners=["greedy-size"], dtr=runs)
    assert any(r.trace == label and r.method == "gmlake" for r in rows)


# The real pool -----------------------------------------------------------------------------

@pytest.mark.skipif(gpu_available(), reason="checks the message shown without a GPU")
def test_measuring_the_cupy_pool_without_a_gpu_says_so(small_graph):
    with pytest.raises(DeviceError, match="CuPy"):
        measure_cupy_pool(small_graph)


class _StandInPool:
    """Counts the bytes of live arrays made through `_StandInCupy.empty` (512-rounded)."""

    def __init__(self):
        self.used = self.total = 0

    def malloc(self, n):
        return n

    def used_bytes(self):
        return self.used

    def total_bytes(self):
        return self.total

    def free_all_blocks(self):
        pass

    def take(self, n):
        self.used += n
        self.total = max(self.total, self.used)

    def give(self, n):
        self.used -= n


class _StandInCupy:
    """NumPy dressed as CuPy, so the measuring loop runs here: arrays made by `empty` and
    `asarray` count in the pool until they are garbage."""

    def __init__(self):
        import contextlib
        import types
        import weakref

        import numpy as np
        self._np, self._weakref = np, weakref
        self.pool = _StandInPool()
        self.cuda = types.SimpleNamespace(
            MemoryPool=lambda: self.pool,
            using_allocator=lambda _: contextlib.nullcontext(),
            Device=lambda: types.SimpleNamespace(synchronize=lambda: None))

    def _count(self, a):
        n = -(-a.nbytes // 512) * 512
        self.pool.take(n)
        self._weakref.finalize(a, self.pool.give, n)
        return a

    def empty(self, shape, dtype=None):
        return self._count(self._np.empty(shape, dtype=dtype))

    def asarray(self, v):
        return self._count(self._np.array(v))

    def __getattr__(self, name):
        return getattr(self._np, name)


def test_the_measuring_loop_matches_its_simulation_on_a_stand_in_pool(small_graph, monkeypatch):
    import minigraph.experiments.pool as measure
    fake = _StandInCupy()
    monkeypatch.setattr(measure, "cupy_module", lambda: fake)
    m = measure.measure_cupy_pool(small_graph)
    assert len(m.used) == len(m.schedule) == len(m.predicted_used)
    assert m.used == m.predicted_used          # same events, same 512-byte rounding
    assert m.base_used > 0 and m.peak_used == max(m.predicted_used)


@pytest.mark.gpu
def test_cupy_pool_measurement_sits_beside_its_simulation(small_graph):
    m = measure_cupy_pool(small_graph)
    assert len(m.used) == len(m.schedule) == len(m.predicted_used)
    assert all(t >= u >= 0 for u, t in zip(m.used, m.total))
    assert m.peak_used >= max(m.predicted_used) > 0
    assert isinstance(CupyPoolAllocator().replay([]).peak_reserved, int)


def test_online_first_fit_places_every_block_where_the_one_first_fit_arena_does():
    """One first fit: the online simulator asks `FirstFitArena` (the arena DTR runs in)
    where each block goes, and grows it at the top when nothing fits."""
    from minigraph.memory.online.arena import FirstFitArena
    trace = [("alloc", "a", 1024), ("alloc", "b", 2048), ("alloc", "c", 512),
             ("free", "a", 1024), ("alloc", "d", 512), ("free", "c", 512),
             ("alloc", "e", 4096), ("alloc", "f", 1024)]
    r = replay_allocator(trace, "first-fit", alignment=512, check=True)
    big, addr = FirstFitArena(1 << 20), {}
    for kind, tid, size in trace:
        if kind == "alloc":
            addr[tid] = big.alloc(size, tid)
        else:
            big.free(addr[tid])
    assert {x.owner: x.addr for x in r.rects} == addr
    assert r.peak_reserved == big.high_water
