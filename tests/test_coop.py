"""Coop's two layout ideas beside its sliding window [Zhang 2023]: cheap-tensor
partitioning (`DTROptions(partition=True)`) and recomputable in-place
(`DTROptions(recomputable_inplace=True)`), each on a small example worked out by hand,
then real runs compared bitwise with the plain executor."""

from __future__ import annotations

import numpy as np
import pytest

import minigraph as mg
from minigraph.examples import mlp_training
from minigraph.feeds import random_feeds
from minigraph.runtime.dtr import (
    CHEAP_DENSITY,
    DTRExecutor,
    DTROptionError,
    DTROptions,
    DTRRuntime,
    OpSpec,
    PartitionedArena,
    Program,
    TensorSpec,
    program_from_graph,
    simulate,
)


def _program(sizes, ops, steps):
    """A hand-written program: `sizes` name -> bytes (0: external), `ops` as
    (name, inputs, outputs, cost, in-place (input, output) pairs), producers found from
    the outputs."""
    names = list(sizes)
    producer = {o: k for k, (_, _, outs, _, _) in enumerate(ops) for o in outs}
    tensors = [TensorSpec(n, sizes[n], sizes[n] == 0, producer.get(n, -1)) for n in names]
    ix = {n: k for k, n in enumerate(names)}
    specs = [OpSpec(name, tuple(ix[i] for i in ins), tuple(ix[o] for o in outs), cost,
                    inplace=tuple((ix[x], ix[y]) for x, y in pairs))
             for name, ins, outs, cost, pairs in ops]
    return Program(tensors, specs, [(s, ix[x] if s == "release" else x) for s, x in steps],
                   "hand")


def _c0(t, now):
    """Coop's window summing only each tensor's own cost: easy to add up by hand."""
    return t.cost


def _layout(rt):
    names = [t.name for t in rt.program.tensors]
    return [(start, names[owner]) for start, _, owner in rt.arena.blocks()
            if owner is not None]


# --- cheap-tensor partitioning ------------------------------------------------------------

def test_the_partitioned_arena_places_cheap_blocks_low_and_expensive_ones_high():
    # 1000 bytes; owners starting with "e" are expensive.
    a = PartitionedArena(1000, lambda owner: owner.startswith("e"))
    assert a.alloc(100, "c1") == 0          # first fit: the bottom
    assert a.alloc(200, "e1") == 800        # the top: 1000 - 200
    assert a.alloc(100, "c2") == 100        # above c1
    assert a.alloc(100, "e2") == 700        # below e1: 800 - 100
    a.free(0)
    a.free(800)
    # compaction: cheap blocks slide down (c2 100 -> 0), expensive ones up (e2 700 -> 900)
    assert a.compact() == [("c2", 100, 0, 100), ("e2", 700, 900, 100)]
    assert [(s, n, o) for s, n, o in a.blocks()] == [(0, 100, "c2"), (100, 800, None),
                                                     (900, 100, "e2")]
    assert a.side(900) == "top" and a.side(0) == "bottom"


def _alternating_chain():
    """x -> a -> b -> c -> d -> e in a 400-byte arena, every tensor kept to the end.

    a and c are cheap (cost 10 for 100 B: 0.1 per byte < CHEAP_DENSITY), b and d dear
    (cost 1000: 10 per byte). e (200 B, cost 1: cheap) needs 200 B when a..d fill the
    arena; d is e's input, so pinned."""
    sizes = dict(x=0, a=100, b=100, c=100, d=100, e=200)
    ops = [("A", ["x"], ["a"], 10.0, []), ("B", ["a"], ["b"], 1000.0, []),
           ("C", ["b"], ["c"], 10.0, []), ("D", ["c"], ["d"], 1000.0, []),
           ("E", ["d"], ["e"], 1.0, [])]
    return _program(sizes, ops, [("call", k) for k in range(5)])


@pytest.mark.parametrize("partition", [False, True])
def test_partitioning_puts_the_cheap_tensors_side_by_side_for_the_window(partition):
    """By hand. First fit alone places a b c d at 0, 100, 200, 300: the window's runs of
    evictable blocks (d is pinned) are [a b c]; the 200-byte windows cost a+b = 1010 and
    b+c = 1010, the first wins: a and b go, e takes 0..200.
    Partitioned: a at the bottom (0), b at the top (300), c above a (100), d below b
    (200): layout a c d b. The runs are [a c] and [b]; the window a+c costs 20: a and c
    go, e (cheap) takes 0..200, and both expensive tensors stay."""
    rt = DTRRuntime(_alternating_chain(), 400, "coop", heuristic_args={"cost": _c0},
                    defrag="last-resort", partition=partition)
    tr = rt.run()
    assert CHEAP_DENSITY * 100 > 10 and CHEAP_DENSITY * 100 < 1000   # a, c cheap; b, d not
    if partition:
        assert tr.evicted == ["a", "c"]
        assert _layout(rt) == [(0, "e"), (200, "d"), (300, "b")]
    else:
        assert tr.evicted == ["a", "b"]
        assert _layout(rt) == [(0, "e"), (200, "c"), (300, "d")]
    assert tr.frag_forced_evictions == 0      # no free byte at all when e came


# --- recomputable in-place -------------------------------------------------------------------

def _relu_after_a():
    """z = h(x) (100 B, cost 1000), a = f(x) (100 B, cost 10), b = relu(a) (100 B,
    cost 1; relu may write over a, its last reader), y = k(z, b) outside the arena.
    Arena 200 B."""
    sizes = dict(x=0, z=100, a=100, b=100, y=0)
    ops = [("H", ["x"], ["z"], 1000.0, []), ("F", ["x"], ["a"], 10.0, []),
           ("R", ["a"], ["b"], 1.0, [("a", "b")]), ("K", ["z", "b"], ["y"], 1.0, [])]
    steps = [("call", 0), ("call", 1), ("call", 2), ("release", "a"), ("call", 3),
             ("release", "z"), ("release", "b")]
    return _program(sizes, ops, steps)


@pytest.mark.parametrize("inplace", [False, True])
def test_an_in_place_relu_needs_no_second_block(inplace):
    """By hand. z at 0, a at 100: the arena is full when R runs.
    Out of place, b needs 100 B while a (R's input) is pinned: z, the only candidate, is
    evicted and b takes 0..100; a is released (its bytes freed, it is kept for b's sake);
    K needs z back: one replay of H, extra cost 1000.
    In place, b takes a's block 100..200 and a is marked evicted: nothing is evicted,
    nothing replayed."""
    rt = DTRRuntime(_relu_after_a(), 200, "dtr", recomputable_inplace=inplace)
    tr = rt.run()
    if inplace:
        assert (tr.evictions, tr.extra_cost, tr.inplace) == (0, 0.0, 1)
        assert ("free", "a", 100) in tr.events and ("alloc", "b", 100) in tr.events
    else:
        assert (tr.evictions, tr.extra_cost, tr.inplace) == (1, 1000.0, 0)
        assert tr.evicted == ["z"]


def test_with_a_partition_a_hand_over_stays_within_one_class():
    """By hand: make a dear (F costs 1000 for 100 B: 10 per byte) and b cheap (1 for
    100 B). Without a partition relu takes a's block; with one it does not, since a cheap
    b in a's block at the top would sit among the dear tensors."""
    sizes = dict(x=0, a=100, b=100, y=0)
    ops = [("F", ["x"], ["a"], 1000.0, []), ("R", ["a"], ["b"], 1.0, [("a", "b")]),
           ("K", ["b"], ["y"], 1.0, [])]
    steps = [("call", 0), ("call", 1), ("release", "a"), ("call", 2), ("release", "b")]
    for partition, taken in ((False, 1), (True, 0)):
        tr = DTRRuntime(_program(sizes, ops, steps), 300, "dtr", partition=partition,
                        recomputable_inplace=True).run()
        assert tr.inplace == taken, partition


def test_the_overwritten_input_is_recomputed_when_a_neighbour_needs_it():
    """By hand, arena 300 B: a = f(x) (100 B, cost 10) at 0; b = relu(a) takes a's block
    in place (a evicted); c = g(x) (300 B) needs the whole arena: b, the only candidate,
    is evicted; c is released; k(b) needs b: b needs a, which was overwritten but is
    recomputable: replay F (10) then R (1, out of place): extra cost 11, 2 replays."""
    sizes = dict(x=0, a=100, b=100, c=300, y=0, w=0)
    ops = [("F", ["x"], ["a"], 10.0, []), ("R", ["a"], ["b"], 1.0, [("a", "b")]),
           ("G", ["x"], ["c"], 5.0, []), ("W", ["c"], ["w"], 1.0, []),
           ("K", ["b"], ["y"], 1.0, [])]
    steps = [("call", 0), ("call", 1), ("release", "a"), ("call", 2), ("call", 3),
             ("release", "c"), ("call", 4), ("release", "b")]
    tr = DTRRuntime(_program(sizes, ops, steps), 300, "dtr", recomputable_inplace=True).run()
    assert tr.inplace == 1 and tr.evicted == ["b"]
    assert (tr.extra_cost, tr.rematerializations, tr.remat_tensors) == (11.0, 2, 2)


def test_the_program_lists_the_pairs_the_in_place_rules_allow():
    x = mg.input("x", (64,))
    a = mg.exp(x)
    b = mg.relu(a)                    # a is read again by the add: no pair (a, b)
    c = mg.add(b, a)                  # the add is b's last reader: pair (b, c)
    g = mg.Graph([mg.sum(c)])
    p = program_from_graph(g, alignment=8)
    names = [t.name for t in p.tensors]
    pairs = {(names[x], names[y]) for op in p.ops for x, y in op.inplace}
    assert pairs == {(b.name, c.name)}


# --- options and real runs ----------------------------------------------------------------------

def test_the_options_refuse_what_they_cannot_do():
    with pytest.raises(DTROptionError, match="first-fit"):
        DTROptions(partition=True, allocator="ideal")
    with pytest.raises(DTROptionError, match="partition"):
        DTROptions(partition=-1.0)
    with pytest.raises(DTROptionError, match="recomputable_inplace"):
        DTROptions(recomputable_inplace="yes")
    assert DTROptions(partition=0.5).partition == 0.5


@pytest.fixture(scope="module")
def mlp():
    g = mlp_training(depth=4, width=16, batch=32)
    return g, random_feeds(g), mg.Executor(g).run(random_feeds(g))


@pytest.mark.parametrize("heuristic", ["dtr", "coop"])
@pytest.mark.parametrize("defrag", ["first", "last-resort"])
@pytest.mark.parametrize("layout", [dict(partition=True), dict(recomputable_inplace=True),
                                    dict(partition=True, recomputable_inplace=True)])
def test_real_runs_give_bitwise_the_plain_executors_outputs(mlp, heuristic, defrag, layout):
    g, feeds, ref = mlp
    for ratio in (1.0, 0.8):
        ex = DTRExecutor(g, ratio=ratio, heuristic=heuristic, defrag=defrag,
                         check_remat=True, **layout)
        out = ex.run(feeds)
        for k in ref:
            assert np.array_equal(out[k], ref[k]), (k, ratio)
        tr = ex.last_trace
        assert tr.remat_mismatches == [] and tr.max_used <= tr.budget
        assert ex.simulate().events == tr.events          # same decisions without kernels
        live, used = {}, 0                  # the events balance and stay within the budget
        for kind, name, size in tr.events:
            if kind == "alloc":
                assert name not in live
                live[name], used = size, used + size
                assert used <= tr.budget
            else:
                used -= live.pop(name)
        if layout.get("recomputable_inplace"):
            assert tr.inplace > 0
        assert (tr.rematerializations > 0) == (ratio < 1.0)


def test_a_partitioned_compaction_keeps_the_values_it_moves(mlp):
    g, feeds, ref = mlp
    ex = DTRExecutor(g, ratio=0.8, heuristic="dtr", defrag="first", partition=True)
    out = ex.run(feeds)
    assert ex.last_trace.defrags > 0 and ex.last_trace.moved_bytes > 0
    for k in ref:
        assert np.array_equal(out[k], ref[k])


def test_in_place_removes_the_second_block_of_each_pair_from_a_run():
    g = mlp_training(depth=4, width=16, batch=32)
    plain = simulate(g, ratio=1.0)
    inpl = simulate(g, ratio=1.0, recomputable_inplace=True)
    allocs = sum(1 for e in plain.events if e[0] == "alloc")
    assert sum(1 for e in inpl.events if e[0] == "alloc") == allocs   # a free + an alloc each
    assert inpl.max_used < plain.max_used
