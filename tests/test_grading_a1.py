"""A1's scale (issue 50, point 3): the redesigned assignment - part A, liveness with
recomputation; part B, in-place hand-overs of the copies - needs more than what lessons
02 and 03 show. The reference scores 100; lesson 02's rules typed in (one life per tensor,
no hand-overs) and lesson 03's on top of them (the library's `liveness` + `inplace_pairs`)
score at most 60; trivial answers at most 20; a lookup of the shipped digests 0. Each
wrong part-B answer is explained by the clause it breaks."""

from __future__ import annotations

import pytest

from minigraph.grading import check_liveness, load_function, reference_solution_path
from minigraph.grading.cases import liveness_case, liveness_cases

#: docs/teaching.md states these caps
SHOWN_CAP, TRIVIAL_CAP = 60, 20


@pytest.fixture(scope="module")
def ref():
    return load_function(reference_solution_path("a1"), "my_liveness")


def _lesson02(graph, schedule, alignment=512, inplace=False):
    """Lesson 02's rules typed in: each tensor one life, from its producer's step to its
    last reader's (first occurrences), no hand-overs."""
    import numpy as np
    last = len(schedule) - 1
    pos = {}
    for k, n in enumerate(schedule):
        pos.setdefault(n, k)
    out = {}
    for name, t in graph.tensors.items():
        start = 0 if t.producer is None else pos[t.producer]
        readers = [pos[c] for c in graph.consumers[name]]
        end = last if (t.producer is None or name in graph.outputs) else max(readers + [start])
        raw = int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize
        nbytes = 0 if t.alias_of else -(-raw // alignment) * alignment
        out[name] = [(start, end, nbytes)]
    alive = [0] * (len(schedule) + 1)
    for name, t in graph.tensors.items():
        if t.kind in ("activation", "gradient") and name not in graph.outputs:
            s, e, b = out[name][0]
            alive[s] += b
            alive[e + 1] -= b
    best = run = 0
    for d in alive:
        run += d
        best = max(best, run)
    return (out, best, []) if inplace else (out, best)


def _library(graph, schedule, alignment=512, inplace=False):
    """Lessons 02 and 03 as the library has them: `liveness`, `inplace_pairs`,
    `merge_inplace` (it refuses a schedule that runs a node twice)."""
    from minigraph.memory import liveness
    from minigraph.memory.inplace import inplace_pairs, merge_inplace
    from minigraph.memory.liveness import PLANNED_KINDS
    lv = liveness(graph, schedule, alignment)
    intervals = {n: [(iv.start, iv.end, iv.bytes)] for n, iv in lv.intervals.items()}
    if not inplace:
        return intervals, lv.theoretical_minimum()
    pairs = inplace_pairs(graph, lv)
    planned = [b for b in lv.buffers()
               if graph.tensors[b.id].kind in PLANNED_KINDS and b.id not in graph.outputs]
    merged, _ = merge_inplace(planned, pairs)
    alive = [0] * (len(schedule) + 1)
    for b in merged:
        alive[b.start] += b.size
        alive[b.end + 1] -= b.size
    best = run = 0
    for d in alive:
        run += d
        best = max(best, run)
    return intervals, best, [((x, 0), (y, 0)) for x, y in pairs]


def _part_a_only(graph, schedule, alignment=512, inplace=False):
    """Part A right, no hand-overs: part B scores only where none is allowed."""
    intervals, minimum = _REF(graph, schedule, alignment)
    return (intervals, minimum, []) if inplace else (intervals, minimum)


def _empty(graph, schedule, alignment=512, inplace=False):
    return ({}, 0, []) if inplace else ({}, 0)


def _whole_run(graph, schedule, alignment=512, inplace=False):
    """Every tensor alive for the whole run, unaligned, no reuse: the trivial answer."""
    import numpy as np
    last = len(schedule) - 1
    out = {n: [(0, last, int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize)]
           for n, t in graph.tensors.items()}
    total = sum(c[0][2] for c in out.values())
    return (out, total, []) if inplace else (out, total)


_REF = None


@pytest.fixture(scope="module")
def scores(ref):
    global _REF
    _REF = ref
    fns = {"reference": ref, "lesson02": _lesson02, "library": _library,
           "part-a-only": _part_a_only, "empty": _empty, "whole-run": _whole_run}
    return {name: check_liveness(fn, shrink=False) for name, fn in fns.items()}


def test_the_reference_scores_100(scores) -> None:
    assert scores["reference"].full_marks, scores["reference"].summary()
    assert scores["reference"].score == 100


def test_what_lessons_02_and_03_show_scores_at_most_60(scores) -> None:
    for name in ("lesson02", "library"):
        report = scores[name]
        assert 0 < report.score <= SHOWN_CAP, (name, report.summary())
    # The library's rules are right exactly where no node runs twice: both parts.
    for case, result in zip(liveness_cases(), scores["library"].cases):
        assert result.passed == (len(set(case.schedule)) == len(case.schedule)), case.name


def test_part_a_alone_is_about_half(scores) -> None:
    report = scores["part-a-only"]
    assert 40 <= report.score <= SHOWN_CAP, report.summary()
    for case, result in zip(liveness_cases(), report.cases):
        if not case.inplace:
            assert result.passed, case.name


def test_trivial_answers_score_at_most_20(scores) -> None:
    for name in ("empty", "whole-run"):
        assert scores[name].score <= TRIVIAL_CAP, (name, scores[name].summary())


# ---------------------------------------------------------------------------------------
# The shipped answers: digests only, part B too
# ---------------------------------------------------------------------------------------

LOOKUP = """
from minigraph.grading.reference import fingerprint, shipped

def my_liveness(graph, schedule, alignment=512, inplace=False):   # a lookup of answers.json
    key = fingerprint(graph, schedule, alignment, inplace)
    entry = next(e for e in shipped()["a1"].values() if e["key"] == key)
    names = {n: [(0, 0, 0)] for n in graph.tensors}
    return (names, entry["digest"], entry.get("copies")) if inplace else (names, entry["digest"])
"""


def _no_reference(monkeypatch) -> None:
    from minigraph.grading import liveness_grader
    monkeypatch.setenv("MINIGRAPH_NO_REFERENCE", "1")
    monkeypatch.setattr(liveness_grader, "_expected", {})


def _part_b(n: int | None = None) -> list:
    cases = [c for c in liveness_cases() if c.inplace]
    return cases if n is None else cases[:n]


@pytest.mark.parametrize("reference", [True, False], ids=["reference", "no-reference"])
def test_a_digest_lookup_scores_0(reference, tmp_path, monkeypatch) -> None:
    from minigraph.grading.reference import shipped
    entries = shipped()["a1"]
    assert {c.name for c in liveness_cases()} == set(entries)
    for c in liveness_cases():      # part B ships the copies' digest too; nothing readable
        assert set(entries[c.name]) == ({"key", "digest", "copies"} if c.inplace
                                        else {"key", "digest"}), c.name
    if not reference:
        _no_reference(monkeypatch)
    path = tmp_path / "lookup.py"
    path.write_text(LOOKUP)
    report = check_liveness(load_function(path, "my_liveness"), shrink=False)
    assert report.score == 0 and report.n_passed == 0, report.summary()


def test_without_the_reference_part_b_grades_the_same(ref, monkeypatch) -> None:
    cases = _part_b()
    with_reference = check_liveness(_part_a_only_with(ref), cases=cases, shrink=False)
    _no_reference(monkeypatch)
    assert check_liveness(ref, cases=cases, shrink=False).full_marks
    report = check_liveness(_part_a_only_with(ref), cases=cases, shrink=False)
    assert 0 < report.score == with_reference.score < 100
    msg = report.first_failure.message
    assert "every copy is right" in msg and "the rules give" not in msg, msg
    assert "expected" not in report.reproducer       # only digests here: nothing to show


def _part_a_only_with(ref):
    def fn(graph, schedule, alignment=512, inplace=False):
        intervals, minimum = ref(graph, schedule, alignment)
        return (intervals, minimum, []) if inplace else (intervals, minimum)
    return fn


# ---------------------------------------------------------------------------------------
# Planted wrong hand-overs: caught, with the clause named
# ---------------------------------------------------------------------------------------

def _with_handovers(ref, change):
    """The reference's answer with its hand-overs changed by `change(graph, schedule,
    intervals, handovers) -> handovers` (the minimum left as the reference's)."""
    def fn(graph, schedule, alignment=512, inplace=False):
        if not inplace:
            return ref(graph, schedule, alignment)
        intervals, minimum, handovers = ref(graph, schedule, alignment, inplace=True)
        return intervals, minimum, change(graph, schedule, intervals, handovers)
    return fn


def _every_declared_pair(graph, schedule, intervals, handovers):
    """The bug: every declared pair of planned tensors of one size, whoever reads later."""
    from minigraph.ops.registry import get_op
    made = {n: 0 for n in graph.tensors}
    latest = {n: 0 for n, t in graph.tensors.items() if t.producer is None}
    out = []
    for run in schedule:
        node = graph.node(run)
        for o, i in get_op(node.op).inplace:
            x, y = node.inputs[i], node.outputs[o]
            if graph.tensors[x].kind in ("activation", "gradient") and \
                    x not in graph.outputs and y not in graph.outputs and \
                    graph.tensors[x].shape == graph.tensors[y].shape and \
                    all(h[1] != (y, made[y]) for h in out):
                out.append(((x, latest[x]), (y, made[y])))
        for o in node.outputs:
            latest[o] = made[o]
            made[o] += 1
    return out


def test_a_handover_over_a_copy_still_read_is_caught(ref) -> None:
    report = check_liveness(_with_handovers(ref, _every_declared_pair), cases=_part_b(),
                            shrink=False)
    assert report.score < 100
    msgs = [c.message for c in report.cases if not c.passed]
    assert any("is read after step" in m and "last reader" in m for m in msgs), msgs[:3]


def test_copy_numbers_are_checked(ref) -> None:
    def always_copy_0(graph, schedule, intervals, handovers):
        return sorted({((x, 0), (y, 0)) for (x, _), (y, _) in handovers})

    cases = [c for c in _part_b() if len(set(c.schedule)) < len(c.schedule)]
    report = check_liveness(_with_handovers(ref, always_copy_0), cases=cases, shrink=False)
    assert report.score < 100
    msgs = " ".join(c.message for c in report.cases if not c.passed)
    assert "the latest made before it" in msgs or "missing" in msgs, msgs[:500]


def test_unplanned_and_undeclared_handovers_are_caught(ref) -> None:
    case = liveness_case("mlp/program+inplace/align512")
    g = case.graph

    def onto_the_input(graph, schedule, intervals, handovers):
        return handovers + [(("x", 0), ("matmul_0", 0))]          # matmul declares none

    def onto_the_parameter(graph, schedule, intervals, handovers):
        return handovers + [(("W1", 0), ("W1_new", 0))]           # W1: a parameter

    def over_a_live_one(graph, schedule, intervals, handovers):
        return handovers + [(("matmul_1", 0), ("pow_0", 0))]      # mul_scalar_1 reads it later

    assert g.tensors["W1"].kind == "param"
    for change, phrase in ((onto_the_input, "does not declare"),
                           (onto_the_parameter, "keeps its own storage"),
                           (over_a_live_one, "its last reader, mul_scalar_1")):
        report = check_liveness(_with_handovers(ref, change), cases=[case], shrink=False)
        assert phrase in report.first_failure.message, report.first_failure.message


def test_a_missing_handover_and_a_wrong_minimum_are_explained(ref) -> None:
    def drops_one(graph, schedule, intervals, handovers):
        return handovers[1:]

    case = liveness_case("chain/recompute+inplace/align1")
    report = check_liveness(_with_handovers(ref, drops_one), cases=[case], shrink=False)
    assert "missing" in report.first_failure.message and "dies at" in \
        report.first_failure.message

    def counts_every_copy(graph, schedule, alignment=512, inplace=False):
        if not inplace:
            return ref(graph, schedule, alignment)
        intervals, _, handovers = ref(graph, schedule, alignment, inplace=True)
        return intervals, ref(graph, schedule, alignment)[1], handovers

    case = liveness_case("residual/program+inplace/align512")   # the hand-overs save bytes
    report = check_liveness(counts_every_copy, cases=[case], shrink=True)
    msg = report.first_failure.message
    assert "theoretical minimum" in msg and "A chain of hand-overs is one buffer" in msg, msg
    assert "inplace=True" in report.reproducer and "expected hand-overs" in report.reproducer


def _two_dying_inputs():
    """y = relu(x) + tanh(x), then neg(y): add may write over either operand (both die
    there); it takes the first pair its op declares."""
    from minigraph import ops
    from minigraph.grading.cases import GraphCase
    from minigraph.graph import Graph, input, name_scope
    with name_scope():
        x = input("x", (2, 4))
        y = ops.add(ops.relu(x), ops.tanh(x))
        g = Graph([ops.neg(y)], name="two-dying")
    return GraphCase("two-dying", g, tuple(n.name for n in g.nodes), 1, inplace=True)


def test_the_declared_order_decides_between_two_legal_handovers(ref) -> None:
    case = _two_dying_inputs()
    _, _, want = ref(case.graph, list(case.schedule), 1, inplace=True)
    add = next(n for n in case.graph.nodes if n.op == "add")
    assert ((add.inputs[0], 0), (add.outputs[0], 0)) in want

    def the_other_one(graph, schedule, intervals, handovers):
        return [((add.inputs[1], 0), h[1]) if h[1][0] == add.outputs[0] else h
                for h in handovers]

    report = check_liveness(_with_handovers(ref, the_other_one), cases=[case], shrink=False)
    assert "in the order its op declares them" in report.first_failure.message


def test_a_private_part_b_case_round_trips(tmp_path, ref) -> None:
    from minigraph.grading.cases import private_liveness_cases, write_graph_case
    case = liveness_case("residual/recompute+inplace/align1")
    (tmp_path / "a1").mkdir()
    write_graph_case(tmp_path / "a1" / "mine.json", case.graph, case.schedule, 1, inplace=True)
    [private] = private_liveness_cases(tmp_path)
    assert private.inplace and private.schedule == case.schedule
    report = check_liveness(ref, cases=[private], shrink=False)
    assert report.full_marks, report.summary()


def main() -> None:
    """`python tests/test_grading_a1.py`: the scale docs/teaching.md states - each answer's
    score over all A1 cases (reference solution here)."""
    global _REF
    _REF = load_function(reference_solution_path("a1"), "my_liveness")
    fns = {"reference solution": _REF, "lesson 02's rules typed in": _lesson02,
           "lessons 02 + 03 (the library)": _library, "part A alone": _part_a_only,
           "empty answer": _empty, "every tensor alive throughout": _whole_run}
    cases = liveness_cases()
    print(f"{len(cases)} cases: {sum(not c.inplace for c in cases)} part A, "
          f"{sum(c.inplace for c in cases)} part B "
          f"({sum(c.source == 'public' for c in cases)} public)")
    for name, fn in fns.items():
        r = check_liveness(fn, cases=cases, shrink=False)
        print(f"{name:32} {r.n_passed:3}/{len(cases)} cases, score {r.score_text}")


if __name__ == "__main__":
    main()
