"""simrd's four heuristics (`SimrdOptions`) checked by hand on a tiny trace, and the
portfolio that keeps the cheapest of its candidates (minigraph/dtr_research/portfolio.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import minigraph as mg
from minigraph.dtr_research.portfolio import (
    CANDIDATES,
    PortfolioExecutor,
    choose,
    replay_best,
    simulate_best,
    trace_arena,
)
from minigraph.dtr_research.replay import replay_trace
from minigraph.dtr_research.simrd import SimrdOptions
from minigraph.dtr_research.simrd_log import parse_trace
from minigraph.dtr_research.tracegen import generated_trace
from minigraph.errors import BudgetError, ThrashError
from minigraph.examples import linear_chain, mlp_training, random_training_graph
from minigraph.feeds import random_feeds
from minigraph.runtime.dtr import DTROptions, simulate
from minigraph.runtime.dtr.heuristics import DTROptionError
from minigraph.runtime.dtr.program import as_program, resolve_budget

OURS = [(k, o) for k, o in CANDIDATES if isinstance(o, DTROptions)]


def _tiny_trace(t1: float, t2: float, t3: float) -> str:
    """Three 4-byte tensors x1, x2, x3 made by ops of cost t1, t2, t3 (no inputs), then an
    8-byte y that does not fit in 16 bytes: one x must go. y is released; each x is read
    once more (a 4-byte result, released), so the evicted one is recomputed: the extra
    cost is its op's. No edges between the x's: no evicted neighbourhood."""
    lines = [{"INSTRUCTION": "ANNOTATE", "ANNOTATION": "START"}]

    def call(op, args, out, t, mem):
        lines.extend([{"INSTRUCTION": "CALL", "NAME": op, "ARGS": args, "RESULT": [out],
                       "TIME": str(t)},
                      {"INSTRUCTION": "MEMORY", "NAME": out, "MEMORY": str(mem)},
                      {"INSTRUCTION": "ALIAS", "NAME": out, "ALIAS": "-1"}])

    for i, t in enumerate((t1, t2, t3), 1):
        call(f"make{i}", [], f"x{i}", t, 4)
    call("big", [], "y", 1, 8)
    lines.append({"INSTRUCTION": "RELEASE", "NAME": "y"})
    for i in (1, 2, 3):
        call("read", [f"x{i}"], f"r{i}", 0, 4)
        lines.append({"INSTRUCTION": "RELEASE", "NAME": f"r{i}"})
    lines += [{"INSTRUCTION": "RELEASE", "NAME": f"x{i}"} for i in (1, 2, 3)]
    return "\n".join(json.dumps(j) for j in lines) + "\n"


# When y comes, the clock is 1 + 20 + 4 + 1 = 26 (simrd's starts at 1); x1, x2, x3 were last
# touched at 21, 25, 26: staleness 5, 1, 0. simrd's scores (lowest evicted):
#   DTR, DTREqClass  c / (size x staleness): 20/(4x5) = 1.0, 4/(4x1) = 1.0, inf (staleness 0)
#                    -> a tie, and simrd keeps the LAST of equal scores: x2 (extra 4)
#   LRU              last access 21, 25, 26 -> x1 (extra 20)
#   MSPS             c / size: 5, 1, 0.25 -> x3 (extra 1)
# Our `dtr` adds 1e-3 to the staleness: 20/(4x5.001) > 4/(4x1.001): x2 as well.
BY_HAND = [("dtr", "x2", 4.0), ("dtr-eqclass", "x2", 4.0), ("lru", "x1", 20.0),
           ("msps", "x3", 1.0)]


@pytest.mark.parametrize("h, victim, extra", BY_HAND)
def test_simrds_four_scores_by_hand(h, victim, extra):
    program = parse_trace(_tiny_trace(20, 4, 1))
    assert program.base_cost == 26.0
    tr = replay_trace(program, 16, options=SimrdOptions(h))
    assert (tr.evicted, tr.extra_cost) == ([victim], extra)


def test_simrd_stops_at_the_first_score_of_zero():
    """x1 and x2 cost nothing: DTR scores both 0 and simrd stops at the first (x1); LRU
    sees two equal last accesses (clock 1, nothing has cost anything yet) and keeps the
    last of them (x2). The real simrd evicts the same (checked outside the tests)."""
    trace = _tiny_trace(0, 0, 1)
    for h, victim in (("dtr", "x1"), ("msps", "x1"), ("lru", "x2")):
        assert replay_trace(trace, 16, options=SimrdOptions(h)).evicted == [victim]


def test_the_portfolio_on_the_tiny_trace_takes_msps():
    c = replay_best(_tiny_trace(20, 4, 1), 16)
    assert (c.label, c.trace.extra_cost, c.trace.evicted) == ("msps", 1.0, ["x3"])
    alone = {h: replay_trace(_tiny_trace(20, 4, 1), 16, heuristic=h).extra_cost
             for h in ("dtr", "dtr-live")}
    assert alone == {"dtr": 4.0, "dtr-live": 4.0}
    # the default (auto) picks h_DTR here: the tiny trace's costs per byte barely vary
    assert c.tried[:4] == [("auto", 30 / 26), ("dtr", 30 / 26), ("dtr-live", 30 / 26),
                           ("msps", 27 / 26)]


# --- the portfolio ---------------------------------------------------------------------------

def _evict_the_costliest(t, now):
    """A deliberately bad rule: the most expensive tensor first."""
    return -t.cost


def _alone(program, budget, options):
    """One candidate's total cost on its own (inf if it thrashes)."""
    try:
        return simulate(program, budget, options=options).total_cost
    except ThrashError:
        return math.inf


@pytest.mark.parametrize("seed", [3, 11])
@pytest.mark.parametrize("ratio", [0.8, 0.6])
def test_the_portfolio_costs_the_least_of_its_candidates(seed, ratio):
    g = random_training_graph(seed, n_ops=24)
    program = as_program(g)
    budget = resolve_budget(program, None, ratio)
    cands = [("bad", DTROptions(heuristic=_evict_the_costliest, thrash_limit=50)),
             *((label, o.replace(thrash_limit=50)) for label, o in OURS)]
    alone = [_alone(program, budget, o) for _, o in cands]
    best = min(alone)
    for prune in (True, False):
        c = choose(program, budget, cands, prune=prune)
        assert c.trace.total_cost == best
        assert c.label == cands[alone.index(best)][0]         # ties: the first listed
        assert c.trace.total_cost <= alone[1]                   # never above the default
        if not prune:
            assert [o for _, o in c.tried] == [x / program.base_cost for x in alone]


@pytest.mark.parametrize("n, want", [(8, "dtr"), (6, "bad")])
def test_the_portfolio_picks_the_cheaper_of_two_by_hand(n, want):
    """linear_chain(n) at 0.7 of its peak (unit costs, 2n ops): evicting the costliest
    tensor first costs 21 where `dtr` costs 20 on 8 links, but 15 where `dtr` costs 16 on
    6; whichever is listed first, the portfolio returns the cheaper run."""
    program = as_program(linear_chain(n), alignment=1)
    budget = resolve_budget(program, None, 0.7)
    bad = DTROptions(heuristic=_evict_the_costliest, thrash_limit=1e6)
    good = DTROptions(thrash_limit=1e6)
    costs = {"bad": _alone(program, budget, bad), "dtr": _alone(program, budget, good)}
    assert costs == ({"bad": 21.0, "dtr": 20.0} if n == 8 else {"bad": 15.0, "dtr": 16.0})
    overheads = {k: v / program.base_cost for k, v in costs.items()}
    for order in ([("bad", bad), ("dtr", good)], [("dtr", good), ("bad", bad)]):
        for prune in (False, True):
            c = choose(program, budget, order, prune=prune)
            assert (c.label, c.trace.total_cost) == (want, costs[want])
            # pruned: a loser listed after the winner is stopped once it costs more (inf)
            lost = prune and order[0][0] == want
            assert c.tried == [(k, math.inf if lost and k != want else overheads[k])
                               for k, _ in order]


@pytest.mark.parametrize("family, size", [("chain", 12), ("unet", 2), ("lstm", 6)])
@pytest.mark.parametrize("ratio", [0.7, 0.5])
def test_on_a_trace_the_portfolio_is_at_or_below_each_of_simrds_four(family, size, ratio):
    """A generated trace (views, multi-output ops, MUTATE, constants): the portfolio's run
    costs exactly the least of its candidates, each replayed alone by `replay_trace`,
    simrd's four as simrd runs them (`SimrdOptions`) among them; where none finishes,
    ThrashError."""
    program = parse_trace(generated_trace(family, size))
    alone = []
    for _, o in CANDIDATES:
        try:
            alone.append(replay_trace(program, ratio=ratio, options=o).total_cost)
        except (ThrashError, BudgetError):
            alone.append(math.inf)
    if min(alone) == math.inf:           # none finishes (unet 2 at 0.5): no choice to make
        with pytest.raises(ThrashError):
            replay_best(program, ratio=ratio)
        return
    c = replay_best(program, ratio=ratio)
    assert c.trace.total_cost == min(alone)
    assert c.label == CANDIDATES[alone.index(min(alone))][0]
    assert c.trace.budget == trace_arena(program, ratio=ratio)   # replay_trace's bytes
    assert len(c.tried) == len(CANDIDATES)


def test_simulate_best_takes_a_graph_and_a_ratio():
    g = mlp_training(depth=4, width=16, batch=32)
    c = simulate_best(g, ratio=0.7, allocator="ideal")
    default = simulate(g, ratio=0.7, allocator="ideal")
    assert c.overhead <= default.overhead
    assert [k for k, _ in c.tried] == [k for k, _ in OURS]     # simrd's rules: traces only


def test_the_portfolio_in_real_mode_gives_the_plain_outputs():
    g = mlp_training(depth=4, width=16, batch=32)
    feeds = random_feeds(g)
    ref = mg.Executor(g).run(feeds)
    ex = PortfolioExecutor(g, ratio=0.7, check_remat=True)
    out = ex.run(feeds)
    for k in ref:
        assert np.array_equal(out[k], ref[k]), k
    tr = ex.last_trace
    assert tr.remat_mismatches == [] and tr.max_used <= tr.budget
    assert tr.total_cost == ex.choice.trace.total_cost      # simulated = real decisions


def test_the_portfolio_says_what_is_wrong():
    program = as_program(mlp_training(depth=2, width=8, batch=4))
    budget = resolve_budget(program, None, 0.9)
    with pytest.raises(DTROptionError, match="needs at least one"):
        choose(program, budget, [])
    with pytest.raises(DTROptionError, match="pair"):
        choose(program, budget, [("dtr", "dtr")])
    with pytest.raises(DTROptionError, match="candidates"):
        PortfolioExecutor(mlp_training(depth=2, width=8, batch=4), ratio=0.9,
                          options=DTROptions())


def test_when_every_candidate_thrashes_the_first_ones_error_is_raised():
    g = random_training_graph(3, n_ops=24)
    program = as_program(g)
    budget = program.bounds().lower
    cands = [(h, DTROptions(heuristic=h, thrash_limit=1e-6)) for h in ("lru", "dtr")]
    with pytest.raises(ThrashError) as alone:
        simulate(program, budget, options=cands[0][1])
    first = str(alone.value)
    with pytest.raises(ThrashError) as info:
        choose(program, budget, cands)
    assert str(info.value) == first
