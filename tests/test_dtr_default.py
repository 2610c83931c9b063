"""DTR's default eviction rule, chosen out of sample (issue 46): h_DTR, because `auto` (issue
38: one run, its score picked before it starts among h_DTR, dtr-live and MSPS with ties to
the stalest, `heuristics.auto_choice`) loses to h_DTR on traces it was not fitted to
(`minigraph.dtr_research.holdout`). `auto` stays an option; its record is tested here."""

from __future__ import annotations

import math

import numpy as np
import pytest

import minigraph as mg
from minigraph.dtr_research.holdout import (
    NO_DEAD_FIRST,
    Cell,
    against_dtr,
    fit,
    leave_one_out,
    measure,
)
from minigraph.dtr_research.replay import replay_trace
from minigraph.dtr_research.simrd import SimrdOptions
from minigraph.dtr_research.simrd_log import parse_trace
from minigraph.dtr_research.tracegen import generated_trace
from minigraph.errors import BudgetError, ThrashError
from minigraph.examples import mlp_training
from minigraph.feeds import random_feeds
from minigraph.runtime.dtr import HEURISTICS, DTRExecutor, DTROptions, DTRRuntime, simulate
from minigraph.runtime.dtr.heuristics import (
    AUTO_CV,
    AUTO_RATIO,
    DTROptionError,
    auto_choice,
    cost_per_byte_cv,
    get_heuristic,
    msps_stale,
)
from minigraph.runtime.dtr.minimal import run_minimal
from minigraph.runtime.dtr.program import program_from_graph

SMALL = (("chain", 12), ("unet", 2), ("resnet", 3), ("lstm", 6))
SIMRD_FOUR = ("dtr", "dtr-eqclass", "lru", "msps")
LIMIT = 1.0        # stop at 2x the base compute, as the benchmark and simrd's evaluation


def _cell(program, ratio, **kw):
    try:
        return replay_trace(program, ratio=ratio, thrash_limit=LIMIT, **kw).overhead
    except (ThrashError, BudgetError):
        return math.inf


@pytest.fixture(scope="module")
def small_cells():
    """(trace, ratio) -> (auto's, h_DTR's, the best of simrd's four's) overhead."""
    out = {}
    for family, n in SMALL:
        program = parse_trace(generated_trace(family, n), name=f"{family}-{n}")
        for ratio in (0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3):
            best = min(_cell(program, ratio, options=SimrdOptions(h)) for h in SIMRD_FOUR)
            out[family, n, ratio] = (_cell(program, ratio, heuristic="auto"),
                                     _cell(program, ratio, heuristic="dtr"), best)
    return out


def test_the_default_is_h_dtr_and_auto_says_what_it_picked():
    assert DTROptions().heuristic == "dtr"
    assert "auto" not in HEURISTICS and "msps-stale" not in HEURISTICS   # not swept alone
    tr = replay_trace(parse_trace(generated_trace("lstm", 6)), ratio=0.7, heuristic="auto")
    assert tr.heuristic == "auto:msps-stale"
    with pytest.raises(DTROptionError):
        get_heuristic("auto", a=2.0)
    # simrd's rules keep their own four: the default there is their h_DTR
    assert SimrdOptions().heuristic == "dtr"


def test_auto_picks_dtr_family_where_cost_per_byte_barely_varies_dtr_live_when_tight():
    conv = program_from_graph(mg.models.get_model("resnet").graph)
    lstm = parse_trace(generated_trace("lstm", 6))
    assert cost_per_byte_cv(conv) < AUTO_CV < cost_per_byte_cv(lstm)
    peak = conv.bounds().peak
    assert auto_choice(conv, peak, DTROptions()) == "dtr"
    assert auto_choice(conv, math.ceil(AUTO_RATIO * peak), DTROptions()) == "dtr"
    assert auto_choice(conv, math.ceil(AUTO_RATIO * peak) - 1, DTROptions()) == "dtr-live"
    assert auto_choice(lstm, 10**12, DTROptions()) == "msps-stale"
    # the textbook loop (extras off) keeps the textbook's score
    off = DTROptions(dead_first=False, protect=False, relief=False)
    assert auto_choice(lstm, 10**12, off) == "dtr"


def test_msps_stale_breaks_msps_ties_by_staleness():
    class View:
        def __init__(self, anc, size, stale):
            self.ancestor_cost, self.size, self.staleness = anc, size, stale

    a, b, c = View(25.0, 100, 1.0), View(50.0, 200, 9.0), View(10.0, 100, 0.5)
    assert min((a, b, c), key=lambda v: msps_stale(v, 0.0)) is c       # lowest MSPS first
    assert min((a, b), key=lambda v: msps_stale(v, 0.0)) is b           # tie: the stalest


def test_with_the_extras_off_the_default_and_auto_are_the_textbook_dtr():
    g = mlp_training(depth=6, width=16, batch=64)
    program = program_from_graph(g)
    b = program.bounds()
    budget = (b.lower + b.live) // 2
    textbook = DTROptions(allocator="ideal", dead_first=False, protect=False, relief=False,
                          thrash_limit=math.inf, timeline=False)
    run = run_minimal(program, budget, score="dtr")
    full = DTRRuntime(program, budget, options=textbook).run()
    auto = DTRRuntime(program, budget, options=textbook.replace(heuristic="auto")).run()
    assert (full.heuristic, auto.heuristic) == ("dtr", "auto:dtr")
    assert (full.evicted, full.overhead) == (run.evicted, run.overhead)
    assert (auto.evicted, auto.overhead) == (run.evicted, run.overhead)


def test_auto_never_fails_where_one_of_simrds_four_finishes(small_cells):
    failed = [k for k, (auto, _, best) in small_cells.items()
              if best < math.inf and auto == math.inf]
    assert failed == []


def test_in_sample_auto_is_at_or_below_simrds_best_far_more_often_than_h_dtr(small_cells):
    def above(i):
        return [k for k, v in small_cells.items() if v[2] < math.inf and v[i] > v[2] + 1e-9]
    auto, dtr = above(0), above(1)
    cells = sum(v[2] < math.inf for v in small_cells.values())
    assert cells >= 20
    assert len(auto) <= 3 < len(dtr), (auto, dtr)       # measured: 3 and 15 of 22
    assert sum(min(v[0], 2.0) for v in small_cells.values()) < \
        sum(min(v[1], 2.0) for v in small_cells.values())


@pytest.mark.parametrize("where", ["ratio 0.75", "lower"])
def test_real_runs_of_the_default_give_bitwise_the_plain_executors_outputs(where):
    g = mlp_training(depth=4, width=16, batch=32)
    feeds = random_feeds(g)
    ref = mg.Executor(g).run(feeds)
    ex = DTRExecutor(g, ratio=0.75, check_remat=True) if where != "lower" else \
        DTRExecutor(g, program_from_graph(g).bounds().lower, check_remat=True)
    out = ex.run(feeds)
    assert ex.last_trace.heuristic == "dtr"
    for k in ref:
        assert np.array_equal(out[k], ref[k]), k
    assert ex.last_trace.remat_mismatches == []
    assert where != "lower" or ex.last_trace.rematerializations > 0
    # the same decisions as a simulation at the same bytes
    sim = simulate(g, ex.last_trace.budget)
    assert sim.evicted == ex.last_trace.evicted


# --- the default, out of sample ------------------------------------------------------------

def _cells(trace, *rows):
    """Hand-made cells of one trace: (ratio, cv, share, dtr, dtr-live, msps-stale)."""
    return [Cell(trace, r, cv, share, {"dtr": d, "dtr-live": live, "msps-stale": m})
            for r, cv, share, d, live, m in rows]


def test_a_rule_counts_only_on_the_trace_it_was_not_fitted_to():
    """By hand: a and b both have a high cost-per-byte dispersion (cv 9, 9.5), c a lower
    one (5); MSPS is cheapest on a, h_DTR on b and c. Each fold's thresholds are fitted on
    the other two traces alone; fitted on a and c, the rule sends a high cv to MSPS, and
    b's held-out cell is then worse than h_DTR (1.3 against 1.1). On c, MSPS fails where
    h_DTR finishes."""
    a = _cells("a", (0.5, 9.0, 0.5, 1.5, 1.5, 1.2))
    b = _cells("b", (0.5, 9.5, 0.5, 1.1, 1.1, 1.3))
    c = _cells("c", (0.5, 5.0, 0.9, 1.0, 2.0, math.inf))
    folds = {f.trace: f for f in leave_one_out(a + b + c)}
    for t, rest in (("a", b + c), ("b", a + c), ("c", a + b)):
        assert (folds[t].cv_at, folds[t].share_at) == fit(rest)
    assert [h for _, h in folds["b"].picked] == ["msps-stale"]   # fitted on a and c
    rec = against_dtr(folds["b"].picked)
    assert (rec.cells, rec.worse, rec.failed, rec.better) == (1, 1, 0, 0)
    assert rec.worst == pytest.approx(1.3 / 1.1) and not rec.passes
    failed = against_dtr([(c[0], "msps-stale")])
    assert (failed.worse, failed.failed, failed.passes) == (1, 1, False)


def test_held_out_auto_loses_to_h_dtr_so_h_dtr_is_the_default():
    """Measured on the four small generated traces: fitted on three, auto's kind of rule
    is more than 1% worse than h_DTR on a cell of the fourth (lstm 6 at 0.6: 1.266 against
    1.204), so the default is h_DTR, with dead-first (off: never better here)."""
    cells = [c for family, n in SMALL for c in
             measure(parse_trace(generated_trace(family, n), name=f"{family}-{n}"),
                     (0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3), thrash_limit=LIMIT)]
    held = against_dtr([pc for f in leave_one_out(cells) for pc in f.picked])
    assert held.cells == len(cells) == 28
    assert not held.passes and held.worse >= 1
    assert DTROptions().heuristic == "dtr" and DTROptions().dead_first
    off = against_dtr([(c, NO_DEAD_FIRST) for c in cells])
    assert off.better == 0 and off.failed >= 1
