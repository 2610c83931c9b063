"""Tests of the grader itself (minigraph.grading): right solutions get full marks, planted
wrong ones are caught with a message that names the rule, and a solution that raises,
hangs, crashes or returns garbage is reported without breaking the grader."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import pytest
from partial_answers import stack

from minigraph.grading import (
    check_heuristic,
    check_liveness,
    check_planner,
    load_function,
    reference_solution_path,
)
from minigraph.grading.cases import (
    BufferCase,
    liveness_cases,
    planner_cases,
    random_graph,
    random_schedule,
    write_buffer_case,
    write_graph_case,
)
from minigraph.grading.heuristic_grader import heuristic_cases
from minigraph.grading.report import NOT_IMPLEMENTED
from minigraph.grading.runner import ddmin, one_blas_thread, run_case, time_scale
from minigraph.grading.sandbox import ASSIGNMENTS, grade
from minigraph.memory import Buffer
from minigraph.memory.instances import random_buffers

ROOT = Path(__file__).resolve().parents[1]
ASSIGN = ROOT / "lessons" / "assignments"
FAST_BOARD = ("refcount",)


def reference(assignment: str):
    return load_function(reference_solution_path(assignment), ASSIGNMENTS[assignment][1])


@pytest.fixture(scope="module")
def my_liveness():
    return reference("a1")


@pytest.fixture(scope="module")
def my_planner():
    return reference("a2")


@pytest.fixture(scope="module")
def my_heuristic():
    return reference("a3")


@pytest.fixture(scope="module")
def chain_cases():
    return heuristic_cases(models=(), chain=True)   # ungraded since issue 50: quick


# ---------------------------------------------------------------------------------------
# Reproducible cases
# ---------------------------------------------------------------------------------------

def test_cases_are_the_same_every_time() -> None:
    a = [(c.name, c.schedule, c.alignment) for c in liveness_cases(seed=3)]
    b = [(c.name, c.schedule, c.alignment) for c in liveness_cases(seed=3)]
    assert a == b
    p = [(c.name, c.buffers) for c in planner_cases(seed=3)]
    q = [(c.name, c.buffers) for c in planner_cases(seed=3)]
    assert p == q
    assert [c.name for c in liveness_cases(seed=4)] != [c.name for c in liveness_cases(seed=3)]


def test_random_schedules_are_topological() -> None:
    from minigraph.memory.liveness import check_schedule
    for s in range(20):
        g = random_graph(s, nodes=10)
        check_schedule(g, random_schedule(g, s))


def test_ddmin_finds_the_culprits() -> None:
    items = list(range(40))
    assert ddmin(items, lambda xs: 7 in xs and 23 in xs) == [7, 23]


# ---------------------------------------------------------------------------------------
# Correct solutions: full marks
# ---------------------------------------------------------------------------------------

def test_reference_liveness_gets_full_marks(my_liveness) -> None:
    report = check_liveness(my_liveness)
    assert report.full_marks, report.summary()
    assert report.total >= 30 and report.first_failure is None


def test_reference_planner_gets_full_marks_and_a_leaderboard(my_planner) -> None:
    report = check_planner(my_planner, leaderboard=("refcount", "greedy-size", "none"))
    assert report.full_marks, report.summary()
    rows = {r["planner"]: r for r in report.comparison}
    assert set(rows) == {"my_planner (you)", "refcount", "greedy-size", "none"}
    assert rows["my_planner (you)"]["x minimum"] <= rows["refcount"]["x minimum"]
    assert rows["none"]["x minimum"] > rows["refcount"]["x minimum"]
    assert "Leaderboard" in report.summary()


def test_reference_heuristic_gets_full_marks(my_heuristic) -> None:
    report = check_heuristic(my_heuristic)
    assert report.full_marks, report.summary()
    # Every case is graded: DTR's own heuristic finishes the three models at their two
    # budgets each (heuristic_grader.MODELS), so none is left out.
    assert [c.name for c in report.cases] == [
        "resnet50/40%", "resnet50/35%", "transformer/40%", "transformer/35%", "lstm/50%",
        "lstm/40%"], report.summary()
    assert not any("left out" in note for note in report.notes), report.summary()
    assert "TOTAL no-rematerialisation peak" in report.summary()
    # A baseline that thrashes is shown, and counted as the thrash limit in the mean.
    rows = {r["case"]: r for r in report.comparison}
    mean = rows.pop("geometric mean")
    assert any(r["lru"] == "thrash" for r in rows.values())
    # The reference is the target, and beats DTR's h_DTR.
    assert mean["lru"] > mean["dtr"] > mean["target"] == mean["my_heuristic (you)"]
    assert "counts as x10" in report.summary()


def test_heuristic_runs_real_kernels_and_compares_outputs(my_heuristic) -> None:
    from minigraph.examples import mlp_training
    from minigraph.feeds import random_feeds
    from minigraph.grading.heuristic_grader import HeuristicCase, run_student
    g = mlp_training(3, width=16, batch=4)
    case = HeuristicCase("mlp3/90%", g, 0.9, lambda: random_feeds(g))
    report = check_heuristic(my_heuristic, cases=[case])
    assert report.full_marks, report.summary()
    r = run_student(my_heuristic, case)
    assert r["evictions"] > 0 and r["max_used"] <= r["budget"]


# ---------------------------------------------------------------------------------------
# The package does not answer A1 or A3 as it stands (docs/teaching.md states the marks)
# ---------------------------------------------------------------------------------------

LIBRARY_MARK_A1 = 25      # the library's liveness, copied: 10 (part A without recomputation)


def test_the_librarys_liveness_scores_below_the_stated_mark(my_liveness) -> None:
    from minigraph.memory import liveness

    def library(graph, schedule, alignment=512):
        lv = liveness(graph, schedule, alignment)
        return ({n: [(iv.start, iv.end, iv.bytes)] for n, iv in lv.intervals.items()},
                lv.theoretical_minimum())

    report = check_liveness(library, shrink=False)
    assert 0 < report.score < LIBRARY_MARK_A1, report.summary()
    # It is right exactly where the schedule runs no node twice: lesson 02's rules (part A;
    # part B passes `inplace`, which it lacks: tests/test_grading_a1.py grades lesson 03's).
    for case, result in zip(liveness_cases(), report.cases):
        if not case.inplace:
            assert result.passed == (len(set(case.schedule)) == len(case.schedule)), case.name
    assert "lists node" in report.first_failure.message          # liveness refuses a repeat
    assert check_liveness(my_liveness).full_marks


TRIVIAL_MARK = 20        # issue 50: the trivial answer scores at most this


def test_a_plan_that_reuses_nothing_scores_at_most_20(my_planner) -> None:
    # A2's score is a scale from the plan that reuses nothing (0) through the lessons'
    # planners' arena (60%) to the reference's (100%) on the graded cases; it scored 87.6
    # when validity paid 0.7 of each case, 17 on a scale up to refcount's arena.
    report = check_planner(stack, leaderboard=False, shrink=False)
    assert report.n_passed == report.total, report.summary()          # valid everywhere
    assert report.score <= TRIVIAL_MARK, report.summary()
    assert all(c.points == 0 or c.metrics["arena"] <= c.metrics["refcount"]
               for c in report.cases)
    assert check_planner(my_planner, leaderboard=False).score == 100


# A2's marks (no reuse, the lessons' planners, the reference): tests/test_grading_a2.py


# A3's marks (constant, h_DTR, the library's heuristics): tests/test_grading_a3.py


def test_the_shipped_answers_are_the_reference_solutions() -> None:
    # answers.json: what the students' repository grades with (no reference solution
    # there); it must be what the reference solutions answer now.
    from minigraph.grading.answers import main
    assert main(["--check"]) == 0, "run `python -m minigraph.grading.answers`"


def test_without_the_reference_the_public_cases_grade_the_same(my_liveness, my_heuristic,
                                                                chain_cases,
                                                                monkeypatch) -> None:
    # As in the students' repository: the expected answers and the targets come from
    # answers.json; the scores are the same; cases it has no answer for are refused.
    from minigraph.errors import GradingError
    from minigraph.grading import liveness_grader
    from minigraph.grading.cases import liveness_case
    wrong = [c for c in liveness_cases() if len(set(c.schedule)) < len(c.schedule)][:3]

    def stale_copy(graph, schedule, alignment=512):     # one copy per tensor: wrong
        intervals, minimum = my_liveness(graph, schedule, alignment)
        return {n: c[:1] for n, c in intervals.items()}, minimum

    with_reference = check_liveness(stale_copy, cases=wrong, shrink=False)
    monkeypatch.setenv("MINIGRAPH_NO_REFERENCE", "1")
    monkeypatch.setattr(liveness_grader, "_expected", {})
    assert check_liveness(my_liveness).full_marks
    report = check_liveness(stale_copy, cases=wrong)
    assert report.score == with_reference.score == 0
    for mine, theirs in zip(report.cases, with_reference.cases):   # the same rule, named
        rule = next(ln for ln in theirs.message.splitlines() if "each run makes" in ln)
        assert rule.lstrip("- ") in mine.message, (mine.message, theirs.message)
        assert "the rules give" not in mine.message    # only a digest here: no right value
    assert f"liveness_case({wrong[0].name!r})" in report.reproducer       # no shrinking
    assert "expected" not in report.reproducer
    with pytest.raises(GradingError, match="reference solution"):
        check_liveness(my_liveness, seed=5)
    assert liveness_case(wrong[0].name).schedule == wrong[0].schedule
    report = check_heuristic(my_heuristic, cases=heuristic_cases()[:1], progress=False)
    assert report.full_marks and not report.notes, report.summary()


LOOKUP_A1 = """
from minigraph.grading.reference import fingerprint, shipped

def my_liveness(graph, schedule, alignment=512):   # issue 50's lookup of the shipped answers
    entry = next(e for e in shipped()["a1"].values()
                 if e["key"] == fingerprint(graph, schedule, alignment))
    return entry["intervals"], entry["minimum"]
"""


@pytest.mark.parametrize("reference", [True, False], ids=["reference", "no-reference"])
def test_a_lookup_of_the_shipped_answers_scores_0(reference, tmp_path, monkeypatch) -> None:
    # answers.json holds A1's answers only as digests: nothing a submission can copy.
    from minigraph.grading import liveness_grader
    from minigraph.grading.reference import shipped
    assert all(set(e) in ({"key", "digest"}, {"key", "digest", "copies"})   # copies: part B
               for e in shipped()["a1"].values())
    if not reference:
        monkeypatch.setenv("MINIGRAPH_NO_REFERENCE", "1")
        monkeypatch.setattr(liveness_grader, "_expected", {})
    path = tmp_path / "lookup.py"
    path.write_text(LOOKUP_A1)
    report = check_liveness(load_function(path, "my_liveness"), shrink=False)
    assert report.score == 0 and report.n_passed == 0, report.summary()
    assert "KeyError: 'intervals'" in report.first_failure.message


def test_the_rules_the_digest_grader_explains_with_are_the_references(my_liveness) -> None:
    # Without the reference, copies and their starts come from the graph and schedule
    # alone (`copy_starts`); they must be what the reference solution says, on every case.
    from minigraph.grading.liveness_grader import copy_starts
    for case in liveness_cases():
        intervals, _ = my_liveness(case.graph, list(case.schedule), case.alignment)
        for name, copies in intervals.items():
            assert [c[0] for c in copies] == copy_starts(case, name), (case.name, name)


# ---------------------------------------------------------------------------------------
# Planted wrong solutions: caught, with the rule named
# ---------------------------------------------------------------------------------------

def test_off_by_one_liveness_is_caught(my_liveness) -> None:
    def exclusive_end(graph, schedule, alignment=512):
        intervals, minimum = my_liveness(graph, schedule, alignment)
        out = {}
        for name, copies in intervals.items():
            t = graph.tensors[name]
            out[name] = [(s, e - 1 if t.producer is not None and e > s and
                          (name not in graph.outputs or k < len(copies) - 1) else e, b)
                         for k, (s, e, b) in enumerate(copies)]   # the bug: ends exclusive
        return out, minimum

    report = check_liveness(exclusive_end)
    assert report.score < 20 and not report.full_marks
    msg = report.first_failure.message
    assert "off by one" in msg and "INCLUSIVE" in msg and "last reader" in msg
    assert "Graph.from_nodes" in report.reproducer
    # The reproducer is shrunk: far fewer nodes than the failing graph had.
    assert report.reproducer.count("Node(") <= 4


def test_liveness_without_alignment_is_explained(my_liveness) -> None:
    def unaligned(graph, schedule, alignment=512):
        return my_liveness(graph, schedule, 1)

    report = check_liveness(unaligned, shrink=False)
    assert "did not round up to the alignment" in report.first_failure.message


def test_wrong_minimum_is_explained(my_liveness) -> None:
    def counts_everything(graph, schedule, alignment=512):
        intervals, _ = my_liveness(graph, schedule, alignment)
        return intervals, sum(b for copies in intervals.values() for _, _, b in copies)

    report = check_liveness(counts_everything, shrink=False)
    assert "theoretical minimum" in report.first_failure.message
    assert "Planned tensors are activations and gradients" in report.first_failure.message


def test_recomputation_rules_are_explained(my_liveness) -> None:
    def one_copy(graph, schedule, alignment=512):
        intervals, minimum = my_liveness(graph, schedule, alignment)
        return {n: [(c[0][0], c[-1][1], c[0][2])] for n, c in intervals.items()}, minimum

    def old_copy_lives_on(graph, schedule, alignment=512):
        intervals, minimum = my_liveness(graph, schedule, alignment)
        return {n: [(s, max(e, c[-1][1]) if k == 0 else e, b)
                    for k, (s, e, b) in enumerate(c)] for n, c in intervals.items()}, minimum

    def rerun_reads_nothing(graph, schedule, alignment=512):
        # the bug: only the first run of a node reads its inputs
        step, copies = {}, {n: [] for n in graph.tensors}
        last = len(schedule) - 1
        for n, t in graph.tensors.items():
            if t.producer is None:
                copies[n].append([0, last])
        for k, name in enumerate(schedule):
            node = graph.node(name)
            if name not in step:
                for i in node.inputs:
                    copies[i][-1][1] = max(copies[i][-1][1], k)
            step[name] = k
            for o in node.outputs:
                copies[o].append([k, k])
        for o in graph.outputs:
            copies[o][-1][1] = last
        right, minimum = my_liveness(graph, schedule, alignment)
        return {n: [(s, e, right[n][0][2]) for s, e in c] for n, c in copies.items()}, minimum

    cases = [c for c in liveness_cases() if len(set(c.schedule)) < len(c.schedule)]
    for fn, phrase in ((one_copy, "each run makes a new copy"),
                       (old_copy_lives_on, "a run reads the LATEST copy made before it"),
                       (rerun_reads_nothing, "a node that runs again reads its inputs again")):
        report = check_liveness(fn, cases=cases[:6])
        assert report.score < 100 and phrase in report.first_failure.message, \
            report.first_failure.message
        assert "expected copies" in report.reproducer and "Node(" in report.reproducer


def test_overlapping_live_buffers_are_caught(my_planner) -> None:
    def ignores_last_step(buffers):
        # the bug: lifetimes taken as [start, end), so buffers that touch share bytes
        shorter = [Buffer(b.id, b.start, max(b.start, b.end - 1), b.size) for b in buffers]
        return my_planner(shorter)

    report = check_planner(ignores_last_step, leaderboard=FAST_BOARD)
    assert not report.full_marks and report.n_passed < report.total
    msg = report.first_failure.message
    assert "validator rejects" in msg and "overlap at step" in msg
    assert "Buffer(" in report.reproducer and "shrunk" in report.reproducer
    assert report.reproducer.count("Buffer(id=") <= 3


def test_plan_that_breaks_the_arena_run_is_caught() -> None:
    # Valid-looking to a careless eye, but outside the arena for a graph case: the graph's
    # re-execution catches what is wrong, the validator says why.
    case = next(c for c in planner_cases() if c.graph is not None)

    def everything_at_zero(buffers):
        return {b.id: 0 for b in buffers}

    report = check_planner(everything_at_zero, cases=[case], leaderboard=False)
    assert report.score == 0
    assert "overlap" in report.first_failure.message
    assert "Running the graph in that arena anyway" in report.reproducer


def test_misaligned_offsets_are_rejected(my_planner) -> None:
    case = next(c for c in planner_cases() if c.alignment == 64)

    def off_by_eight(buffers):
        return {k: v + 8 for k, v in my_planner(buffers).items()}

    report = check_planner(off_by_eight, cases=[case], leaderboard=False, shrink=False)
    assert "not a multiple of 64" in report.first_failure.message


def test_a_valid_plan_is_never_refused_for_a_tensors_itemsize(tmp_path) -> None:
    # A graph case at alignment 1 with a float32 and a float64 branch: buffers packed end
    # to end at alignment 1 put a float64 tensor at an offset that is no multiple of 8,
    # which the executor refuses. A2 poses graph cases at offset_alignment(graph, 1) = 8:
    # every size a multiple of 8, so such a plan is aligned, valid and run.
    from minigraph import graph as G
    from minigraph import ops
    from minigraph.grading.cases import private_planner_cases
    from minigraph.graph import Graph
    from minigraph.memory.plan import offset_alignment
    with G.name_scope():
        a, b = G.input("a", (3,)), G.input("b", (5,), dtype="float64")
        g = Graph([ops.sum(ops.exp(a) * a), ops.sum(ops.exp(b) * b)], name="mixed")
    (tmp_path / "a2").mkdir()
    write_graph_case(tmp_path / "a2" / "mixed.json", g, None, alignment=1)
    case, = private_planner_cases(tmp_path)
    assert case.alignment == offset_alignment(g, 1) == 8
    assert all(buf.size % 8 == 0 for buf in case.buffers)

    def end_to_end(buffers):
        offsets, top = {}, 0
        for buf in buffers:
            offsets[buf.id] = top
            top += buf.size
        return offsets

    report = check_planner(end_to_end, cases=[case], leaderboard=False)
    # Valid and run (it passes); it reuses nothing, so its arena earns nothing.
    assert report.n_passed == 1 and report.cases[0].passed, report.summary()
    assert "valid, but a larger arena" in report.cases[0].message, report.summary()


def test_pinned_evictions_are_caught(my_heuristic, chain_cases) -> None:
    def most_recent_first(t, now):
        return 1.0 / t.staleness          # the bug: no `if t.pinned: return math.inf`

    report = check_heuristic(most_recent_first, cases=chain_cases)
    assert not report.full_marks
    msg = report.first_failure.message
    assert "PINNED" in msg and "find_best_tensor" in msg
    assert "pinned=True" in report.reproducer and "most_recent_first(t," in report.reproducer


def test_heuristic_that_never_evicts_is_explained(chain_cases) -> None:
    report = check_heuristic(lambda t, now: math.inf, cases=chain_cases[:1])
    assert "scored every candidate math.inf" in report.first_failure.message


def test_worse_heuristic_passes_with_fewer_points(chain_cases) -> None:
    def lru(t, now):
        return math.inf if t.pinned else -t.staleness

    report = check_heuristic(lru, cases=chain_cases)
    assert report.n_passed == report.total and 50 < report.score < 100
    assert "against the target's" in report.summary()


def test_thrashing_heuristic_fails_the_case_and_counts_as_the_limit() -> None:
    from minigraph.grading.heuristic_grader import MODELS, THRASH_LIMIT

    def lru(t, now):
        return math.inf if t.pinned else -t.staleness

    lstm = [m for m in MODELS if m[0] == "lstm"]
    cases = heuristic_cases(models=lstm, ratios=(0.4,), chain=False)
    report = check_heuristic(lru, cases=cases)
    assert report.score == 0
    msg = report.first_failure.message
    assert "thrashed" in msg and "40% of the total peak" in msg
    assert "DTR's own heuristic finishes this case" in msg
    mine, dtr = report.comparison[-1]["lru (you)"], report.comparison[-1]["dtr"]
    assert report.comparison[0]["lru (you)"] == "thrash"
    assert mine == pytest.approx(THRASH_LIMIT) and dtr < 2


# ---------------------------------------------------------------------------------------
# Solutions that raise, hang, crash or return garbage: reported, never fatal
# ---------------------------------------------------------------------------------------

def test_stubs_are_reported_as_not_implemented(chain_cases) -> None:
    def stub(*args):
        raise NotImplementedError

    for report in (check_liveness(stub), check_planner(stub),
                   check_heuristic(stub, cases=chain_cases)):
        assert report.status == NOT_IMPLEMENTED and report.score == 0
        assert "not implemented yet" in report.summary()


def test_a_stub_prints_no_failed_case_lines(chain_cases, capsys) -> None:
    # The progress lines of a check (on by default for A3, and on the command line) hold
    # back the stub's cases: a stub's check prints only "not implemented yet".
    def stub(*args):
        raise NotImplementedError

    check_heuristic(stub, cases=chain_cases, progress=True)
    check_liveness(stub, progress=True)
    assert capsys.readouterr().out == ""

    def mlp_only_later(graph, schedule, alignment=512):
        if graph.name == "mlp":
            raise NotImplementedError
        return {}, 0

    cases = liveness_cases()[:6]                   # 3 of the mlp, then 3 of another graph
    check_liveness(mlp_only_later, cases=cases, shrink=False, progress=True)
    lines = capsys.readouterr().out.splitlines()  # shown once a case is not the stub's
    assert len(lines) == 6 and lines[0].startswith("  [1/6] mlp/"), lines


def test_a_progress_line_is_cut_between_words() -> None:
    from minigraph.grading.report import CaseResult, clip, progress_line
    assert clip("the run got stuck (arena too small for the op)", 24) == "the run got stuck..."
    line = progress_line(1, 12, CaseResult("chain24/80%", "public", False, 0.0,
                                           "x " * 32 + "(arena not implemented yet"), 0.1)
    assert line.endswith(" x...") and "(are" not in line    # the word is not cut


def test_exceptions_are_reported_per_case() -> None:
    def fails_on_big_graphs(graph, schedule, alignment=512):
        if len(schedule) > 12:
            raise ValueError(f"too many nodes: {len(schedule)}")
        return {}, 0

    report = check_liveness(fails_on_big_graphs, shrink=False)
    assert report.status == "graded"
    raised = [c for c in report.cases if "raised ValueError: too many nodes" in c.message]
    assert raised and "fails_on_big_graphs" in raised[0].message   # the student's frame


def test_hanging_solution_is_stopped() -> None:
    def hangs(buffers):
        while True:
            pass

    cases = planner_cases()[:5]
    report = check_planner(hangs, cases=cases, time_limit=0.5, leaderboard=False)
    # Stopped after 2 time-outs: the other 3 cases never ran (what the limit produced,
    # whatever the machine's load; no clock read here).
    assert report.status.startswith("stopped: 2 time-outs, 3 cases not run")
    timed_out = [c for c in report.cases if "did not finish within the time limit of 0.5 s"
                 in c.message]
    not_run = [c for c in report.cases if c.message.startswith("not run (stopped after")]
    assert len(timed_out) == 2 and len(not_run) == 3, report.summary()
    assert report.score == 0 and report.total == 5


def test_hanging_heuristic_is_stopped(chain_cases) -> None:
    def slow(t, now):
        time.sleep(10)
        return 0.0

    report = check_heuristic(slow, cases=chain_cases[:1], time_limit=1.0)
    assert "time limit" in report.first_failure.message


@pytest.mark.parametrize("garbage, expected", [
    (None, "expected a dict {buffer id: offset}, got None"),
    ([0, 1, 2], "expected a dict {buffer id: offset}, got a list"),
    ((x for x in ()), "got a generator"),
    ({"nope": 0}, "not one of the buffers"),
])
def test_garbage_plans_are_reported(garbage, expected) -> None:
    case = BufferCase("three", [Buffer("a", 0, 1, 8), Buffer("b", 1, 2, 8),
                                Buffer("c", 0, 2, 8)])
    report = check_planner(lambda buffers: garbage, cases=[case], leaderboard=False)
    assert expected in report.first_failure.message


def test_float_offsets_are_rejected() -> None:
    case = BufferCase("one", [Buffer("a", 0, 1, 8)])
    report = check_planner(lambda bs: {"a": 0.0}, cases=[case], leaderboard=False)
    assert "not an integer" in report.first_failure.message


@pytest.mark.parametrize("garbage, expected", [
    (None, "expected a pair (intervals, minimum), got None"),
    ("nope", "expected a pair"),
    (({}, 0, 1), "got a tuple of length 3"),
    (([], 0), "intervals must be a dict"),
    (({"x": [(0, 1)]}, 0), "a copy of 'x' must be (start, end, bytes)"),
    (({"x": (0, 1, 8)}, 0), "a list of (start, end, bytes), one per copy; you gave one"),
    (({"x": [(0.0, 1, 8)]}, 0), "start of 'x' is 0.0"),
])
def test_garbage_liveness_is_reported(garbage, expected) -> None:
    case = liveness_cases()[0]
    report = check_liveness(lambda *a: garbage, cases=[case], shrink=False)
    assert expected in report.first_failure.message


@pytest.mark.parametrize("score, expected", [
    (lambda t, now: None, "returned None (NoneType)"),
    (lambda t, now: "low", "returned 'low' (str)"),
    (lambda t, now: float("nan"), "returned nan"),
    (lambda t, now: 1 / 0, "raised ZeroDivisionError"),
    (lambda t, now: t.secret, "a tensor view has no 'secret'"),
])
def test_garbage_scores_are_reported(score, expected, chain_cases) -> None:
    report = check_heuristic(score, cases=chain_cases[:1])
    assert expected in report.first_failure.message


def test_crash_and_prints_are_reported() -> None:
    def exits(buffers):
        print("placing", len(buffers), "buffers")
        if len(buffers) > 2:
            os._exit(3)
        return {b.id: 0 for b in buffers}

    cases = [BufferCase("two", [Buffer("a", 0, 1, 8), Buffer("b", 1, 2, 8)]),
             BufferCase("three", [Buffer(k, k, k, 8) for k in range(3)])]
    report = check_planner(exits, cases=cases, leaderboard=False, shrink=False)
    overlap, crash = report.cases
    assert "overlap at step 1" in overlap.message and "placing 2 buffers" in overlap.printed
    assert "crashed the worker process (exit code 3)" in crash.message
    assert "your function printed:" in report.summary()


def test_thread_mode_reports_a_hang_too() -> None:
    out = run_case(time.sleep, (5,), time_limit=0.3, mode="thread")
    assert out.status == "timeout"


def test_default_time_limits_scale_with_the_machine_and_explicit_ones_do_not(
        monkeypatch) -> None:
    # A busy machine gets longer default limits (MINIGRAPH_TIME_SCALE; the suite sets it
    # while grading reference solutions); a limit given by the caller is exact.
    monkeypatch.setenv("MINIGRAPH_TIME_SCALE", "0.05")
    assert time_scale() == 0.05
    out = run_case(time.sleep, (5,))
    assert out.status == "timeout" and out.error == "0.5 s"       # 10 s x 0.05
    monkeypatch.setenv("MINIGRAPH_TIME_SCALE", "100")
    out = run_case(time.sleep, (5,), time_limit=0.3)
    assert out.status == "timeout" and out.error == "0.3 s"


@pytest.mark.parametrize("value", ["0", "-2", "nan", "inf", "fast"])
def test_a_bad_time_scale_is_refused_with_its_value(value, monkeypatch) -> None:
    from minigraph.errors import GradingError
    monkeypatch.setenv("MINIGRAPH_TIME_SCALE", value)
    with pytest.raises(GradingError, match=f"MINIGRAPH_TIME_SCALE='{value}'"):
        run_case(len, ((),))


def test_grading_runs_blas_on_one_thread_and_restores_it() -> None:
    # OpenBLAS threads spinning against a busy machine made the A3 check 5x slower.
    from minigraph.grading.runner import _OPENBLAS_THREADS, _openblas_libraries
    getters = [getattr(lib, get) for lib in _openblas_libraries()
               for _, get in _OPENBLAS_THREADS if hasattr(lib, get)]
    if not getters:
        pytest.skip("no OpenBLAS loaded in this process")
    before = [g() for g in getters]
    with one_blas_thread():
        assert [g() for g in getters] == [1] * len(getters)
        assert run_case(lambda: [g() for g in getters]).value == [1] * len(getters)
    assert [g() for g in getters] == before


# ---------------------------------------------------------------------------------------
# Private cases, files, the command line
# ---------------------------------------------------------------------------------------

def test_private_cases_are_graded_but_not_shown(tmp_path, my_liveness, my_planner,
                                                monkeypatch) -> None:
    (tmp_path / "a1").mkdir()
    (tmp_path / "a2").mkdir()
    g = random_graph(99, nodes=8)
    write_graph_case(tmp_path / "a1" / "g99.json", g, random_schedule(g, 99), 64)
    write_buffer_case(tmp_path / "a2" / "hidden.csv", random_buffers(12, 5, family="mixed"))
    write_graph_case(tmp_path / "a2" / "graph.json", g, None, 64)
    (tmp_path / "seed").write_text("1234\n")
    monkeypatch.setenv("MINIGRAPH_PRIVATE_CASES", str(tmp_path))

    from minigraph.grading.cases import private_liveness_cases, private_planner_cases
    some_public = liveness_cases()[:3]
    report = check_liveness(my_liveness, cases=some_public + private_liveness_cases())
    private = [c for c in report.cases if c.source == "private"]
    assert len(private) == 13 and all(c.passed for c in private)
    assert "private 13/13" in report.summary()

    report = check_planner(my_planner, cases=private_planner_cases(), leaderboard=False)
    assert report.total == 10 and report.full_marks

    def bad(buffers):
        return {b.id: 0 for b in buffers}

    report = check_planner(bad, cases=_private_planner_cases(tmp_path)[:1],
                           leaderboard=False)
    assert report.reproducer == "(a private case: its buffers are not shown)"


def _private_planner_cases(root):
    from minigraph.grading.cases import private_planner_cases
    return private_planner_cases(root)


def test_grade_loads_py_and_notebook_files(tmp_path) -> None:
    few = liveness_cases(generated=2)[-4:]
    assert grade("a1", cases=few).full_marks
    # A student's notebook: the stub cell replaced by the reference solution.
    nb = json.loads((ASSIGN / "A1_liveness.ipynb").read_text())
    solution = reference_solution_path("a1").read_text()
    for cell in nb["cells"]:
        if "solution" in cell.get("metadata", {}).get("tags", []):
            cell["source"] = solution
    path = tmp_path / "student.ipynb"
    path.write_text(json.dumps(nb))
    assert grade("a1", path, cases=few).full_marks
    # The untouched notebook is the stub.
    assert grade("a1", ASSIGN / "A1_liveness.ipynb", cases=few).status == NOT_IMPLEMENTED


def test_command_line_exit_status(tmp_path, capsys) -> None:
    from minigraph.grading.sandbox.command import main
    stub = tmp_path / "stub.py"
    stub.write_text("def my_liveness(graph, schedule, alignment=512, inplace=False):\n"
                    "    raise NotImplementedError\n")
    out = tmp_path / "report.json"
    assert main(["a1", str(stub), "--json", str(out)]) == 1
    assert json.loads(out.read_text())["status"] == NOT_IMPLEMENTED
    assert main(["a1", str(reference_solution_path("a1"))]) == 0
    assert "score 100.0/100" in capsys.readouterr().out
    assert main(["a1", str(tmp_path / "missing.py")]) == 1


# ---------------------------------------------------------------------------------------
# A student's file is imported and run only in a child process: forging the grader,
# exiting, hanging or sending garbage scores 0 with the reason, and exits 1
# ---------------------------------------------------------------------------------------

FORGED_A2 = """
import minigraph.grading.planner_grader as planner
planner.validity_problem = lambda case, offsets: ""     # the grader's checks, replaced
planner.execution_problem = lambda case, offsets: ""

def my_planner(buffers):
    return {b.id: 0 for b in buffers}                   # every buffer at offset 0
"""
HIDDEN_A2 = """
import sys   # (importing the grader's modules is refused: tests/test_sandbox_imports.py)
grading = sys.modules["minigraph." + "grading.planner_grader"]
exec("grading.validity_problem = lambda case, offsets: ''")   # out of the source's sight

def my_planner(buffers):
    return {b.id: 0 for b in buffers}
"""
BYPASS_A2 = """
exec(\"\"\"
import sys
s, p = (sys.modules[m] for m in ("minigraph.grading.sandbox.submission",
                                 "minigraph.grading.planner_grader"))
s.changed_names = lambda *a, **k: []                 # the detector, switched off first
p.validity_problem = lambda case, offsets: ''
p.execution_problem = lambda case, offsets: ''
\"\"\")

def my_planner(buffers):
    return {b.id: 0 for b in buffers}
"""
HONEST_A2 = """
def my_planner(buffers):
    return {b.id: 0 for b in buffers}
"""
EXITS_A2 = "import os\nos._exit(0)\n\ndef my_planner(buffers):\n    return {}\n"
HANGS_A2 = "while True:\n    pass\n\ndef my_planner(buffers):\n    return {}\n"
GARBAGE_A2 = """
import os
for fd in range(3, 12):          # wherever the answers go: write garbage there first
    try:
        os.write(fd, b"{not json\\n")
    except OSError:
        pass

def my_planner(buffers):
    return {b.id: 0 for b in buffers}
"""


def _submission(tmp_path: Path, code: str, fmt: str, stem: str = "sub") -> Path:
    """`code` as a .py, or as the solution cell of the A2 notebook."""
    if fmt == "py":
        path = tmp_path / f"{stem}.py"
        path.write_text(code)
        return path
    nb = json.loads((ASSIGN / "A2_planner.ipynb").read_text())
    cells = [c for c in nb["cells"] if "solution" in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1
    cells[0]["source"] = code
    path = tmp_path / f"{stem}.ipynb"
    path.write_text(json.dumps(nb))
    return path


@pytest.fixture(scope="module")
def graph_plan_cases():
    return [c for c in planner_cases() if c.graph is not None][:3]


@pytest.mark.parametrize("fmt", ["py", "ipynb"])
@pytest.mark.parametrize("kind, code, reason", [
    ("forged", FORGED_A2, "changes minigraph itself ("),
    ("hidden", HIDDEN_A2, "changes minigraph itself (it replaced "
                          "minigraph.grading.planner_grader.validity_problem"),
    ("exits", EXITS_A2, "ended while loading your file (exit code 0"),
    ("hangs", HANGS_A2, "loading your file did not finish within"),
    ("garbage", GARBAGE_A2, "sent garbage"),
], ids=["forged", "hidden", "exits", "hangs", "garbage"])
def test_a_submission_cannot_fool_the_grader(kind, code, reason, fmt, tmp_path,
                                             graph_plan_cases, monkeypatch) -> None:
    if kind == "hangs":    # the load limit is 60 s x the scale: 3 s here
        monkeypatch.setenv("MINIGRAPH_TIME_SCALE", "0.05")
    path = _submission(tmp_path, code, fmt)
    report = grade("a2", path, cases=graph_plan_cases, leaderboard=False, shrink=False)
    assert report.score == 0 and report.n_passed == 0 and not report.full_marks
    text = report.summary()
    assert reason in text, text
    assert report.status.startswith("not graded:"), text
    if kind == "forged":   # the line at fault, numbered in a .py file
        line = "line 3: " if fmt == "py" else "("
        assert f"{line}planner.validity_problem = lambda" in text, text
    if kind == "hangs":    # the load limit (3 s here) ended it: the process was killed
        assert "did not finish within 3 s: the grading process was killed" in text, text


def test_forging_the_grader_gains_nothing_on_the_command_line(tmp_path, capsys) -> None:
    # The submission (the grader's checks replaced, every buffer at offset 0) used
    # to score 100/100: now it is caught and scores 0. One that switches the detector off
    # first is not caught, and still gains nothing: the checks run in the grader's process,
    # so it scores what the same planner scores honestly.
    from minigraph.grading.sandbox.command import main
    scores, tests = {}, {}
    for stem, code in (("forged", FORGED_A2), ("bypass", BYPASS_A2), ("honest", HONEST_A2)):
        out = tmp_path / f"{stem}.json"
        rc = main(["a2", str(_submission(tmp_path, code, "py", stem)), "--quiet",
                   "--gradescope", str(out)])
        assert rc == 1
        results = json.loads(out.read_text())
        scores[stem] = results["score"]
        tests[stem] = [(t["name"], t["score"], t["output"]) for t in results["tests"]]
        _assert_gradescope_format(results)
    assert scores["forged"] == 0
    # All at offset 0 scores 0 (it fails every scored case: A2's checks-only cases that
    # it passes are not scored); the bypass is judged case for case as the honest file.
    assert scores["bypass"] == scores["honest"] < 10
    assert tests["bypass"] == tests["honest"] and tests["honest"]
    printed = capsys.readouterr().out
    assert "changes minigraph itself" in printed and "the validator rejects the plan" in printed


@pytest.mark.parametrize("code, reason", [
    (EXITS_A2, "exit code 0"),
    (HANGS_A2, "did not finish within"),
], ids=["exits", "hangs"])
def test_exiting_and_hanging_files_exit_1_with_a_report(code, reason, tmp_path, capsys,
                                                        monkeypatch) -> None:
    from minigraph.grading.sandbox.command import main
    monkeypatch.setenv("MINIGRAPH_TIME_SCALE", "0.05")
    out = tmp_path / "results.json"
    assert main(["a2", str(_submission(tmp_path, code, "py")), "--quiet",
                 "--gradescope", str(out)]) == 1
    printed = capsys.readouterr().out
    assert "score 0.0/100 (not graded:" in printed and reason in printed, printed
    results = json.loads(out.read_text())
    _assert_gradescope_format(results)
    assert results["score"] == 0 and all(t["score"] == 0 for t in results["tests"])
    assert reason in results["tests"][0]["output"]


@pytest.mark.parametrize("code, caught", [
    ("import minigraph.grading.planner_grader as P\nP.validity_problem = None\n", "line 2"),
    ("from minigraph.grading import planner\nsetattr(planner, 'x', 1)\n", "line 2"),
    ("import sys\nsys.modules['minigraph.grading'].check_planner = None\n", "line 2"),
    ("import minigraph\nvars(minigraph.grading.planner_grader)['x'] = 1\n", "line 2"),
    ("import importlib\nm = importlib.import_module('minigraph.memory')\ndel m.plan\n", "line 3"),
    ("from minigraph.grading.planner_grader import validity_problem\nvalidity_problem = 1\n", None),
    ("import minigraph as mg\ng = mg.Graph([])\ng.name = 'mine'\nd = {}\nd['k'] = 1\n", None),
], ids=["attribute", "setattr", "sys.modules", "vars", "import_module", "local", "own"])
def test_the_source_check_finds_changes_to_minigraph_and_only_those(code, caught) -> None:
    from minigraph.grading.sandbox.tamper import source_tampering
    found = source_tampering(code)
    assert (found is None) if caught is None else found.startswith(caught), found


def _assert_gradescope_format(results: dict) -> None:
    """Gradescope's results.json: a score, and tests with name, score, max_score, output."""
    assert isinstance(results["score"], (int, float))
    assert results["tests"]
    for t in results["tests"]:
        assert isinstance(t["name"], str) and isinstance(t["output"], str)
        assert 0 <= t["score"] <= t["max_score"]
    assert sum(t["score"] for t in results["tests"]) == pytest.approx(results["score"],
                                                                      abs=0.01)
    assert sum(t["max_score"] for t in results["tests"]) == pytest.approx(100, abs=0.01)


def test_gradescope_results_of_the_reference(tmp_path) -> None:
    from minigraph.grading.sandbox.command import main
    out = tmp_path / "results.json"
    assert main(["a1", "--quiet", "--gradescope", str(out)]) == 0
    results = json.loads(out.read_text())
    _assert_gradescope_format(results)
    assert results["score"] == 100 and all(t["status"] == "passed" for t in results["tests"])


def test_forged_eviction_choices_are_replayed_and_rejected(tmp_path, chain_cases) -> None:
    # A3 runs the student's heuristic in the child, which sends back only its eviction
    # choices; the grader replays them in its own runtime. A child that replaces the
    # recording to claim a perfect run with no evictions fails every case (even one that
    # first switches off the check for changes to minigraph, out of the source's sight).
    path = tmp_path / "forged_a3.py"
    path.write_text(
        'exec("""\n'
        "import sys\n"   # (importing them is refused: tests/test_sandbox_imports.py)
        "s = sys.modules['minigraph.grading.sandbox.submission']\n"
        "h = sys.modules['minigraph.grading.heuristic_grader']\n"
        "s.changed_names = lambda *a, **k: []\n"
        "h.record_choices = lambda student, spec: {'choices': [], 'overhead': 1.0}\n"
        "h.judge_run = lambda case, out: None\n"
        '""")\n'
        "def my_heuristic(t, now):\n    return 0.0\n")
    report = grade("a3", path, cases=chain_cases)
    assert report.score == 0 and report.status == "graded"
    assert "do not replay" in report.first_failure.message
    assert "needed more than the 0 eviction choices" in report.first_failure.message


def test_replayed_choices_must_be_candidates_and_not_pinned(my_heuristic, chain_cases) -> None:
    from minigraph.grading.heuristic_grader import case_spec, record_choices, replay_choices
    case = chain_cases[-1]
    choices = record_choices(my_heuristic, case_spec(case))["choices"]
    assert replay_choices(case, choices)["overhead"] > 1
    named = [k for k, c in enumerate(choices) if c is not None]
    bad = list(choices)
    bad[named[0]] = "no-such-tensor"
    assert "not a candidate" in replay_choices(case, bad)["message"]
    assert "came back, the run used" in replay_choices(case, choices + ["x"])["message"]
    assert replay_choices(case, [1, 2])["fault"] == "replay"


@pytest.mark.skipif(os.name != "posix", reason="RLIMIT_AS is POSIX")
def test_the_submission_runs_under_a_memory_limit(tmp_path) -> None:
    from minigraph.grading.sandbox.submission import MEMORY_LIMIT
    path = tmp_path / "sub.py"
    path.write_text("import resource\n"
                    "def my_planner(buffers):\n"
                    "    print('RLIMIT_AS', resource.getrlimit(resource.RLIMIT_AS)[0])\n")
    case = BufferCase("one", [Buffer("a", 0, 1, 8)])
    report = grade("a2", path, cases=[case], leaderboard=False, shrink=False)
    assert f"RLIMIT_AS {MEMORY_LIMIT}" in report.cases[0].printed
    assert "got None" in report.cases[0].message


def test_wire_format_round_trips_and_refuses_garbage() -> None:
    from minigraph.errors import GradingError
    from minigraph.grading.runner import Garbage
    from minigraph.grading.sandbox.submission import from_wire, outcome_from_wire, to_wire
    value = ({"a": (0, 1, 512), 3: [1.5, None, True], ("x", 1): "s"}, 7,
             Garbage("generator", "<gen>"), float("inf"))
    assert from_wire(json.loads(json.dumps(to_wire(value)))) == value
    for bad in ({"x": 1}, {"d": [[[], 1]]}, {"t": 3}, {"g": [1, 2]}):
        with pytest.raises(GradingError):
            from_wire(bad)
    with pytest.raises(GradingError):
        outcome_from_wire({"status": "perfect", "value": 1})


# ---------------------------------------------------------------------------------------
# Property tests (hypothesis): the judge agrees with the validator on any buffer list
# ---------------------------------------------------------------------------------------

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies


@st.composite
def buffer_lists(draw):
    n = draw(st.integers(0, 12))
    out = []
    for k in range(n):
        s = draw(st.integers(0, 9))
        e = draw(st.integers(s, 10))
        out.append(Buffer(f"b{k}", s, e, draw(st.integers(0, 64))))
    return out


@hypothesis.settings(max_examples=40, deadline=None, derandomize=True)
@hypothesis.given(buffer_lists())
def test_judge_agrees_with_the_validator(buffers) -> None:
    from minigraph.grading.planner_grader import judge_plan
    from minigraph.grading.runner import Outcome
    from minigraph.memory import validate_offsets
    from minigraph.memory.planners import plan_buffers
    case = BufferCase("h", buffers)
    _, placement = plan_buffers(buffers, "refcount")
    res, _ = judge_plan(case, Outcome("ok", dict(placement.offsets)))
    assert res.passed and 0.0 <= res.points <= 1.0
    zero = {b.id: 0 for b in buffers}
    try:
        validate_offsets(buffers, zero)
        valid = True
    except Exception:
        valid = False
    res, _ = judge_plan(case, Outcome("ok", zero))
    assert res.passed == valid


# ---------------------------------------------------------------------------------------
# The notebooks: they run with the stub (reporting "not implemented yet") and with the
# reference solution filled in (full marks)
# ---------------------------------------------------------------------------------------

NOTEBOOKS = ["A1_liveness", "A2_planner", "A3_eviction"]


def _check_output(run_notebook, name: str, solution: str | None) -> str:
    """What the notebook's check cell prints, run with `solution` (None: the stub)."""
    nb, seconds = run_notebook(ASSIGN / f"{name}.ipynb", MINIGRAPH_PRIVATE_CASES=None,
                               MINIGRAPH_SOLUTION=solution)
    print(f"{name}: {seconds:.1f} s")
    check = [c for c in nb.cells if "check" in c.get("metadata", {}).get("tags", [])]
    assert len(check) == 1
    return "".join(o.get("data", {}).get("text/plain", "") + o.get("text", "")
                   for o in check[0].outputs)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_with_the_stub(name, run_notebook) -> None:
    out = _check_output(run_notebook, name, None)
    assert "not implemented yet" in out, out


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_with_the_reference_solution(name, run_notebook) -> None:
    key = "a" + name[1]
    out = _check_output(run_notebook, name, str(reference_solution_path(key)))
    assert "score 100.0/100" in out, out


def test_notebooks_keep_their_solution_and_check_tags() -> None:
    # That each notebook is its source's build is tests/test_lessons.py's check.
    for name in NOTEBOOKS:
        nb = json.loads((ASSIGN / f"{name}.ipynb").read_text())
        tags = [c.get("metadata", {}).get("tags", []) for c in nb["cells"]]
        assert ["solution"] in tags and ["check"] in tags
