"""Every registered planner, on random graphs, with every switch: the plan validates and the
arena run equals the no-reuse run bit for bit (and the differential fuzz: 500 graphs x
planners x orders x options). Then: the validator against a brute-force one, hand-overs
included, in any list order; a plan accepted only by its own graph; a planted bad plan, the
zoo's figures, and planning 20,000 tensors in under 2 s.

The planner list is read from `minigraph.memory.planners.PLANNERS`, so a planner that
registers itself is covered here without editing this file.
"""

from __future__ import annotations

import dataclasses
import itertools
import re

import pytest
from graphgen import bytes_equal, chain_graph, feeds_for, fuzz_case, random_graph
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigraph as mg
from minigraph.memory import Buffer, planners, validate_offsets
from minigraph.memory.orders import ORDERS

ALL_PLANNERS = sorted(planners.PLANNERS)
ALL_ORDERS = sorted(ORDERS)

# Searching planners (those that take a time limit: ilp, anneal, search, ...) get small
# limits, fewer and smaller graphs; the rest the full range. Each takes the limits it has
# an option for (`options_for`): an option a planner does not take is refused.
LIMITS = {"time_limit": 0.1, "iterations": 40, "node_limit": 2000, "seed": 0}
SEARCHING = {p for p in ALL_PLANNERS if "time_limit" in planners.planner_options(p)}
ARGS = {p: planners.options_for(p, LIMITS) for p in SEARCHING}
MAX_OPS = {p: 12 if p == "ilp" else 25 for p in SEARCHING}
EXAMPLES = {p: 4 if p == "ilp" else 8 for p in SEARCHING}
# in-place, colours, alignment (6: not a power of two, nor a multiple of float32's 4)
SWITCHES = list(itertools.product((False, True), (1, 2, 3), (1, 6, 512)))


def _check_all_switches(planner: str, seed: int, n_ops: int, train: bool) -> None:
    g = random_graph(seed, n_ops, train)
    feeds = feeds_for(g, seed)
    reference = mg.Executor(g, device="cpu").run(feeds)
    for inplace, colors, alignment in SWITCHES:
        opts = mg.MemoryOptions(inplace=inplace, planner=planner, colors=colors,
                                alignment=alignment, planner_args=ARGS.get(planner, {}))
        report = mg.plan_memory(g, opts)
        plan = report.plan.validate()
        assert plan.arena_bytes >= report.theoretical_minimum, opts
        assert all(off % alignment == 0 for off in plan.offsets.values())
        got = mg.Executor(g, plan, device="cpu").run(feeds)
        assert bytes_equal(reference, got), (
            f"{planner} {opts}: arena run differs from the no-reuse run on "
            f"random_graph({seed}, {n_ops}, {train})")


@pytest.mark.parametrize("planner", ALL_PLANNERS)
def test_every_plan_validates_and_runs_bitwise_equal(planner):
    n = MAX_OPS.get(planner, 60)

    @settings(max_examples=EXAMPLES.get(planner, 25), deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.integers(0, 2**32 - 1), st.integers(1, n), st.booleans())
    def run(seed, n_ops, train):
        _check_all_switches(planner, seed, n_ops if not train else max(1, n_ops // 2), train)

    run()


@pytest.mark.parametrize("order", ALL_ORDERS)
def test_every_schedule_runs_bitwise_equal(order):
    # The executor runs the plan's schedule: any topological order gives the same bits.
    @settings(max_examples=10, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.booleans())
    def run(seed, n_ops, train):
        g = random_graph(seed, n_ops, train)
        feeds = feeds_for(g, seed)
        reference = mg.Executor(g, device="cpu").run(feeds)
        for inplace in (False, True):
            opts = mg.MemoryOptions(inplace=inplace, planner="refcount", order=order)
            report = mg.plan_memory(g, opts)
            assert report.plan.schedule == tuple(mg.schedule(g, order))
            got = mg.Executor(g, report.plan.validate(), device="cpu").run(feeds)
            assert bytes_equal(reference, got), f"order {order}, in-place {inplace}"

    run()


# --- the validator, against a brute-force one -------------------------------------------------

def named_in(error: Exception) -> frozenset:
    """The two tensors an overlap PlanError names ("a [s,e] at bytes [..) and b [s,e] ...")."""
    m = re.match(r"(\S+) \[\d+,\d+\] at bytes \[\d+,\d+\) and (\S+) \[", str(error))
    assert m, f"not an overlap error: {error}"
    return frozenset(m.groups())


def brute_force_conflicts(buffers, offsets, handovers=()) -> set[frozenset]:
    """Every pair alive at one step with overlapping bytes (hand-overs at their step excepted)."""
    hand = {(a, b) for a, b in handovers} | {(b, a) for a, b in handovers}
    bad = set()
    for a, b in itertools.combinations([b for b in buffers if b.size], 2):
        if not a.overlaps_in_time(b):
            continue
        if offsets[a.id] < offsets[b.id] + b.size and offsets[b.id] < offsets[a.id] + a.size:
            if (a.id, b.id) in hand and (a.end == b.start or b.end == a.start):
                continue
            bad.add(frozenset((a.id, b.id)))
    return bad


@st.composite
def buffer_problems(draw):
    n = draw(st.integers(1, 25))
    bufs, offs = [], {}
    for i in range(n):
        s = draw(st.integers(0, 15))
        bufs.append(Buffer(f"t{i}", s, s + draw(st.integers(0, 6)), draw(st.integers(0, 5)) * 8))
        offs[f"t{i}"] = draw(st.integers(0, 12)) * 8
    return bufs, offs


@settings(max_examples=300, deadline=None, derandomize=True)
@given(buffer_problems())
def test_validator_agrees_with_brute_force(problem):
    bufs, offs = problem
    bad = brute_force_conflicts(bufs, offs)
    if bad:
        with pytest.raises(mg.PlanError) as e:
            validate_offsets(bufs, offs)
        assert named_in(e.value) in bad, (str(e.value), bad)
    else:
        validate_offsets(bufs, offs)


def test_validator_checks_alignment_bounds_and_missing_offsets():
    bufs = [Buffer("a", 0, 1, 64), Buffer("b", 2, 3, 64)]
    with pytest.raises(mg.PlanError, match="not a multiple of 512"):
        validate_offsets(bufs, {"a": 0, "b": 64}, alignment=512)
    with pytest.raises(mg.PlanError, match="run past the arena"):
        validate_offsets(bufs, {"a": 0, "b": 64}, arena_bytes=100)
    with pytest.raises(mg.PlanError, match="negative offset"):
        validate_offsets(bufs, {"a": -64, "b": 0})
    with pytest.raises(mg.PlanError, match="b has no offset"):
        validate_offsets(bufs, {"a": 0})


# --- hand-overs: the verdict agrees with a brute-force one, in any list order ----------------

def brute_force_verdict(buffers, offsets, handovers) -> bool:
    """Valid iff each hand-over (a, b) names two buffers, a is born before b's first step
    and dies at it, at b's offset with b's size, no buffer gives or takes bytes twice, no two
    buffers alive at one step share bytes (a hand-over pair at its step excepted) and
    buffers of different colours never share bytes. Every pair is looked at."""
    by_id = {b.id: b for b in buffers}
    givers = [a for a, _ in handovers]
    takers = [b for _, b in handovers]
    if len(set(givers)) < len(givers) or len(set(takers)) < len(takers):
        return False
    for a, b in handovers:
        if a not in by_id or b not in by_id:
            return False
        x, y = by_id[a], by_id[b]
        if not (x.start < y.start == x.end and offsets[a] == offsets[b] and x.size == y.size):
            return False
    hand = set(handovers)
    for a, b in itertools.permutations([b for b in buffers if b.size], 2):
        share = offsets[a.id] < offsets[b.id] + b.size and offsets[b.id] < offsets[a.id] + a.size
        if share and a.color != b.color:
            return False
        if share and a.overlaps_in_time(b) and (a.id, b.id) not in hand \
                and (b.id, a.id) not in hand:
            return False
    return True


@st.composite
def handover_problems(draw):
    """Buffers at random offsets, and a hand-over list: pairs built to be right (b starts
    where a ends, at a's offset, with a's size), pairs made slightly wrong, random pairs."""
    n = draw(st.integers(2, 12))
    colours = draw(st.integers(1, 2))
    bufs, offs = [], {}
    for i in range(n):
        s = draw(st.integers(0, 8))
        bufs.append(Buffer(f"t{i}", s, s + draw(st.integers(0, 4)), draw(st.integers(0, 3)) * 8,
                           draw(st.integers(0, colours - 1))))
        offs[f"t{i}"] = draw(st.integers(0, 6)) * 8
    pairs = []
    for _ in range(draw(st.integers(0, 4))):
        i, j = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        a = bufs[i]
        how = draw(st.sampled_from(("right", "same start", "random")))
        if how != "random" and i != j:
            start = a.end if how == "right" else a.start
            bufs[j] = Buffer(bufs[j].id, start, start + draw(st.integers(0, 3)), a.size,
                             a.color)
            offs[bufs[j].id] = offs[a.id]
        pairs.append((a.id, bufs[j].id))
    return bufs, offs, pairs


def _verdict(bufs, offs, pairs) -> bool:
    try:
        validate_offsets(bufs, offs, handovers=pairs)
    except mg.PlanError:
        return False
    return True


@settings(max_examples=400, deadline=None, derandomize=True)
@given(handover_problems(), st.randoms(use_true_random=False))
def test_validator_verdict_on_handovers_agrees_with_brute_force_in_any_order(problem, rnd):
    bufs, offs, pairs = problem
    want = brute_force_verdict(bufs, offs, pairs)
    assert _verdict(bufs, offs, pairs) == want
    for _ in range(3):
        b2, p2 = list(bufs), list(pairs)
        rnd.shuffle(b2)
        rnd.shuffle(p2)
        assert _verdict(b2, offs, p2) == want, (b2, p2)


# --- a plan is accepted only by its own graph -----------------------------------------------------

def _lives(graph: mg.Graph, schedule, alignment: int) -> dict | None:
    """Brute force: each tensor's (kind planned or not, aligned bytes, first, last step)
    under `schedule`, or None when the schedule is not a topological order of `graph`."""
    if sorted(schedule) != sorted(n.name for n in graph.nodes):
        return None
    pos = {n: k for k, n in enumerate(schedule)}
    for node in graph.nodes:
        for i in node.inputs:
            p = graph.tensors[i].producer
            if p is not None and pos[p] > pos[node.name]:
                return None
    last = len(schedule) - 1
    out = {}
    for t in graph.tensors.values():
        readers = [pos[n.name] for n in graph.nodes if t.name in n.inputs]
        start = 0 if t.producer is None else pos[t.producer]
        keep = t.producer is None or t.name in graph.outputs
        end = last if keep else max(readers, default=start)
        planned = t.kind in ("activation", "gradient") and t.name not in graph.outputs
        nbytes = 0 if t.alias_of else -(-t.nbytes // alignment) * alignment
        out[t.name] = (planned, t.kind, nbytes, start, end)
    return out


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(1, 20), st.integers(0, 2**32 - 1),
       st.integers(1, 20), st.booleans(), st.sampled_from(ALL_PLANNERS),
       st.sampled_from(("other", "prefix", "same")))
def test_a_plan_is_accepted_only_by_its_own_graph(seed_a, n_a, seed_b, n_b, train, planner,
                                                  pairing):
    # "prefix": the same seed with another op count, so most names and tensors match
    seed_b = {"other": seed_b, "prefix": seed_a, "same": seed_a}[pairing]
    n_b = n_a if pairing == "same" else n_b
    g_a = random_graph(seed_a, min(n_a, 12) if planner in SEARCHING else n_a, train)
    g_b = random_graph(seed_b, min(n_b, 12) if planner in SEARCHING else n_b, train)
    opts = mg.MemoryOptions(inplace=True, planner=planner, alignment=8,
                            planner_args=planners.options_for(planner, LIMITS))
    plan = mg.plan_memory(g_a, opts).plan
    lives_a = _lives(g_a, plan.schedule, 8)
    lives_b = _lives(g_b, plan.schedule, 8)
    try:
        ex = mg.Executor(g_b, plan, device="cpu")
    except mg.PlanError:
        assert lives_b != lives_a, "refused a graph the plan was made for"
        return
    assert lives_b == lives_a, "accepted a graph the plan was not made for"
    feeds = feeds_for(g_b, seed_b)
    assert bytes_equal(mg.Executor(g_b, device="cpu").run(feeds), ex.run(feeds))


# --- the differential fuzz -----------------------------------------------------------------------

def test_differential_fuzz_500_graphs_run_bitwise_equal_to_no_reuse():
    # graphs x planners x orders x options, one case per graph (graphgen.fuzz_case);
    # the long run: python benchmarks/plan_fuzz.py --graphs 5000
    failures = []
    for i in range(500):
        case, problem = fuzz_case(i)
        if problem:
            failures.append(f"case {i}: {case}: {problem}")
    assert not failures, "\n".join(failures[:5])


# --- a planted bad plan ------------------------------------------------------------------------

def _overlapping_pair(plan: mg.MemoryPlan, strict: bool) -> tuple[str, str] | None:
    """Two planned tensors alive at one step (b made while a is still to be read); b is in
    no in-place hand-over (moving it would break that rule first)."""
    ivs = plan.liveness.planned()
    handing = {t for pair in plan.inplace for t in pair}
    for a, b in itertools.permutations(ivs, 2):
        if a.bytes and b.bytes and b.name not in handing and a.start <= b.start <= a.end \
                and (not strict or b.start < a.end):
            return a.name, b.name
    return None


def plant(plan: mg.MemoryPlan, a: str, b: str) -> mg.MemoryPlan:
    """The same plan with b moved onto a's bytes (the arena grows if it must)."""
    offsets = {**plan.offsets, b: plan.offsets[a]}
    arena = max(plan.arena_bytes, plan.offsets[a] + plan.size(b))
    return dataclasses.replace(plan, offsets=offsets, arena_bytes=arena)


def test_planted_overlap_is_caught_and_would_give_a_wrong_answer():
    # x -> a = exp(x) -> b = tanh(x) -> c = a * b: a is read after b is made.
    with mg.name_scope():
        x = mg.input("x", (8, 8))
        a = mg.exp(x)
        b = mg.tanh(x)
        g = mg.Graph([mg.sum(a * b)])
    good = mg.plan_memory(g, mg.MemoryOptions(planner="refcount", alignment=512)).plan
    bad = plant(good, a.name, b.name)
    with pytest.raises(mg.PlanError) as e:
        bad.validate()
    assert named_in(e.value) == {a.name, b.name}
    with pytest.raises(mg.PlanError):
        mg.Executor(g, bad)                   # the executor validates by default
    feeds = feeds_for(g)
    right = mg.Executor(g).run(feeds)
    wrong = mg.Executor(g, bad, validate=False).run(feeds)   # run it anyway
    assert not bytes_equal(right, wrong)                      # silently wrong


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.integers(0, 2**32 - 1), st.integers(2, 60), st.booleans(),
       st.sampled_from(ALL_PLANNERS))
def test_planted_overlap_is_caught_on_random_graphs(seed, n_ops, train, planner):
    g = random_graph(seed, n_ops, train)
    opts = mg.MemoryOptions(inplace=True, planner=planner, planner_args=ARGS.get(planner, {}))
    if planner in MAX_OPS and len(g.nodes) > 2 * MAX_OPS[planner]:
        return
    plan = mg.plan_memory(g, opts).plan
    pair = _overlapping_pair(plan, strict=False)
    if pair is None:
        return
    a, b = pair
    bad = plant(plan, a, b)
    conflicts = brute_force_conflicts(bad.buffers(), bad.offsets, bad.inplace)
    assert frozenset((a, b)) in conflicts
    with pytest.raises(mg.PlanError) as e:
        bad.validate()
    named = named_in(e.value)
    assert named in conflicts and b in named


# --- the zoo -----------------------------------------------------------------------------------

def _zoo():
    models = pytest.importorskip("minigraph.models")
    # resnet50 is for symbolic planning only (gigabytes); the rest run in milliseconds
    return [m for m in models.MODELS if m != "resnet50"]


@pytest.mark.parametrize("name", ["mlp", "cnn", "resnet", "transformer", "lstm", "unet",
                                  "densenet"])
def test_zoo_refcount_inplace_beats_no_reuse_and_never_the_minimum(name):
    models = pytest.importorskip("minigraph.models")
    if name not in _zoo():
        pytest.skip(f"{name} is not in the zoo")
    g = models.get_model(name).graph
    for inplace in (False, True):
        report = mg.plan_memory(g, mg.MemoryOptions(inplace=inplace, planner="refcount"))
        assert report.theoretical_minimum <= report.arena_bytes < report.no_reuse_bytes
        # without in-place, the minimum of the merged problem is the plain one
        if not inplace:
            assert report.theoretical_minimum == report.plan.liveness.theoretical_minimum()


# --- speed ---------------------------------------------------------------------------------------

def test_planning_20000_tensors_with_refcount():
    # Its time is in benchmarks/plan_scaling.py; here: it plans, every tensor placed.
    g = chain_graph(20_000)                  # plain data: relu chain with long skip adds
    report = mg.plan_memory(g, mg.MemoryOptions(inplace=True, planner="refcount"))
    assert len(g.tensors) == 20_001 and len(report.plan.offsets) == 19_999   # - x, output
