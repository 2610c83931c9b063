"""DTR under hostile input (issue 15): long chains that thrash end quickly, `safe` means
what it says, malformed traces and budgets are typed errors naming the line or value."""

import json
import math

import pytest

from minigraph.dtr_research import SimrdLogError, parse_trace, replay_trace
from minigraph.errors import BudgetError, MinigraphError, ThrashError
from minigraph.examples import linear_chain
from minigraph.runtime.dtr import (
    DTROptionError,
    DTROptions,
    DTRRuntime,
    get_heuristic,
    neighbourhood,
    simulate,
)
from minigraph.runtime.dtr.program import as_program


def chain(n):
    return as_program(linear_chain(n), None, 1, "unit")


# --- point 10: thrash detection and bookkeeping stay cheap --------------------------------

@pytest.fixture
def looked(monkeypatch) -> list[int]:
    """`looked[0]`: tensors the evicted-neighbourhood searches visit during the test."""
    count = [0]
    reach = neighbourhood._reach

    def counting(t, edges, evicted, seen):
        before = len(seen)
        found = reach(t, edges, evicted, seen)
        count[0] += len(seen) - before
        return found
    monkeypatch.setattr(neighbourhood, "_reach", counting)
    return count


def test_a_thrashing_chain_looks_at_a_bounded_number_of_tensors_per_replay(looked):
    """At the smallest budget of a 2,000-op chain every tensor but three is evicted; the
    evicted neighbourhood (e*) searches must not walk that whole chain at each eviction
    (they did: n = 10,000 ran for half an hour before ThrashError)."""
    p = chain(2000)
    rt = DTRRuntime(p, p.bounds().lower, "dtr", timeline=False)
    with pytest.raises(ThrashError):
        rt.run()
    assert looked[0] <= 20 * rt.trace.rematerializations


def test_a_chain_just_above_the_smallest_budget_searches_little_per_replay(looked):
    """Two candidates: a stale checkpoint with the whole evicted chain above it and the
    tensor just used. The checkpoint's ancestors do not change while the tensors under it
    come and go, so their cost is cached apart from the rest of its neighbourhood."""
    p = chain(1000)
    rt = DTRRuntime(p, p.bounds().lower + 4, "dtr", timeline=False)
    with pytest.raises(ThrashError):
        rt.run()
    assert looked[0] <= 60 * rt.trace.rematerializations


def test_split_neighbourhood_caches_make_the_decisions_of_a_fresh_search():
    """e* is the cached ancestors' part plus the descendants' part: the same evictions and
    costs as a run that searches e* afresh at every decision, on chains that finish."""
    class Fresh(DTRRuntime):
        def neighbour_cost(self, t):
            p = self.program
            return neighbourhood.evicted_region(t, p.parents, p.children, self.evicted,
                                               self.cost_t)

        def live_neighbour_cost(self, t):
            p = self.program
            return neighbourhood.live_evicted_region(t, p.parents, p.children, self.evicted,
                                                    self.dead, self.cost_t)
    p = chain(300)
    for budget in (24, 40, 80):
        for h in ("dtr", "dtr-live"):
            a = DTRRuntime(p, budget, h, timeline=False).run()
            b = Fresh(p, budget, h, timeline=False).run()
            assert a.evictions > 0
            assert (a.evicted, a.extra_cost) == (b.evicted, b.extra_cost), (budget, h)


def test_the_safe_budget_never_gets_stuck_and_finishes_without_a_thrash_limit():
    """`safe` promises no BudgetError (every op can run), not a bounded recomputation: a
    chain at `safe` recomputes O(n^2) ops, past the default limit of 10x."""
    p = chain(100)
    b = p.bounds()
    for h in ("dtr", "lru"):
        with pytest.raises(ThrashError):
            simulate(p, b.safe, heuristic=h)
        tr = simulate(p, b.safe, heuristic=h, thrash_limit=math.inf)
        assert tr.overhead > 10


# --- point 13: trace input ----------------------------------------------------------------

GOOD = [{"INSTRUCTION": "CONSTANT", "NAME": "x"},
        {"INSTRUCTION": "MEMORY", "NAME": "x", "MEMORY": "4"},
        {"INSTRUCTION": "CALL", "NAME": "neg", "ARGS": ["x"], "RESULT": ["y"], "TIME": "1"},
        {"INSTRUCTION": "MEMORY", "NAME": "y", "MEMORY": "4"},
        {"INSTRUCTION": "ALIAS", "NAME": "y", "ALIAS": "-1"},
        {"INSTRUCTION": "MUTATE", "NAME": "add_", "ARGS": ["y", "x"], "MUTATE": [0],
         "TIME": "1"}]


def text(lines):
    return "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines)


def changed(k, **fields):
    lines = [dict(j) for j in GOOD]
    lines[k].update(fields)
    for key, v in fields.items():
        if v is None:
            del lines[k][key]
    return lines


@pytest.mark.parametrize("lines, line, words", [
    (changed(2, ARGS=None), 3, "ARGS"),
    (changed(0, NAME=None), 1, "NAME"),
    (changed(3, MEMORY="four"), 4, "'four'"),
    (changed(3, MEMORY="-4"), 4, "'-4'"),
    (changed(3, MEMORY=None), 4, "MEMORY"),
    (changed(4, ALIAS="x"), 5, "'x'"),
    (changed(2, TIME="fast"), 3, "'fast'"),
    (changed(2, TIME="nan"), 3, "'nan'"),
    (changed(5, MUTATE=[2]), 6, "index 2"),
    (changed(5, MUTATE=["0"]), 6, "index '0'"),
    (GOOD[:2] + ['"just a string"'] + GOOD[2:], 3, "str"),
    (GOOD[:2] + ["[1, 2]"] + GOOD[2:], 3, "list"),
])
def test_a_malformed_trace_line_is_a_trace_error_naming_its_line(lines, line, words):
    parse_trace(text(GOOD))                     # the unchanged trace is fine
    with pytest.raises(SimrdLogError, match=f"line {line}:") as e:
        parse_trace(text(lines))
    assert words in str(e.value)
    assert isinstance(e.value, MinigraphError)


def test_an_empty_trace_a_directory_or_a_missing_file_is_a_trace_error(tmp_path):
    with pytest.raises(SimrdLogError, match="empty string"):
        replay_trace("", 100)
    with pytest.raises(SimrdLogError, match="directory"):
        replay_trace(str(tmp_path), 100)
    with pytest.raises(SimrdLogError, match="no such file"):
        replay_trace(str(tmp_path / "missing.jsonl"), 100)
    with pytest.raises(SimrdLogError, match="no such file"):
        replay_trace(tmp_path / "missing.jsonl", 100)
    (tmp_path / "blank.jsonl").write_text("\n\n")
    with pytest.raises(SimrdLogError, match="blank.jsonl: no instructions"):
        replay_trace(tmp_path / "blank.jsonl", 100)
    (tmp_path / "bad.jsonl").write_text(text(changed(3, MEMORY="-4")))
    with pytest.raises(SimrdLogError, match="bad.jsonl line 4:"):
        replay_trace(str(tmp_path / "bad.jsonl"), 100)
    (tmp_path / "good.jsonl").write_text(text(GOOD))
    assert replay_trace(str(tmp_path / "good.jsonl"), 100).evictions == 0


# --- point 14: budgets and options --------------------------------------------------------

@pytest.mark.parametrize("budget", [-1, -4.0, math.nan, math.inf, 1.5, "100", True])
def test_a_dtr_budget_must_be_a_whole_number_of_bytes(budget):
    p = chain(10)
    for run in (lambda: simulate(p, budget), lambda: DTRRuntime(p, budget).run()):
        with pytest.raises(BudgetError, match="whole number of bytes") as e:
            run()
        assert repr(budget) in str(e.value)
    simulate(p, float(p.bounds().peak))         # a whole float is a number of bytes


@pytest.mark.parametrize("ratio", [0, -0.5, math.nan, math.inf])
def test_a_dtr_budget_ratio_must_be_finite_and_positive(ratio):
    with pytest.raises(BudgetError, match="ratio") as e:
        simulate(chain(10), ratio=ratio)
    assert repr(float(ratio)) in str(e.value) or repr(ratio) in str(e.value)


def test_an_unknown_heuristic_is_a_dtr_option_error_naming_it():
    for run in (lambda: get_heuristic("dtr2"), lambda: DTROptions(heuristic="dtr2"),
                lambda: simulate(chain(10), 100, heuristic="dtr2")):
        with pytest.raises(DTROptionError, match="'dtr2'.*known: auto, msps-stale, dtr"):
            run()
    with pytest.raises(DTROptionError, match="42"):
        get_heuristic(42)


@pytest.mark.parametrize("limit", [0, -1, math.nan, "10", None])
def test_the_thrash_limit_is_a_positive_number(limit):
    with pytest.raises(DTROptionError, match="thrash_limit"):
        DTROptions(thrash_limit=limit)
