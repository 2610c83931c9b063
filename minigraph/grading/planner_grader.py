"""Grading assignment 2: an offset planner.

The student writes `fn(buffers) -> {buffer id: offset}` (a `Placement` is fine too).
Nothing they return is trusted: the validator (`validate_offsets`) decides whether the
plan is safe, and where the buffers come from a graph, the graph is also RUN in one
arena laid out by their offsets and its outputs compared bit for bit with a run that
has no reuse at all.

A valid plan is the gate; a case's point is then a scale of its arena between three
marks measured on the case (`marks`, `case_points`), linear in bytes between them: the
trivial answer's, a plan that reuses nothing (every buffer above the last: the sum of the
sizes; it or more earns 0), what the lessons show (the smaller arena of greedy by size,
the notebook's hint - as the library's "greedy-size" breaks ties and as a student who
keeps the list's order does (`hint_offsets`) - and of best fit, lesson 06's `greedy.py`
and `bestfit.py`: `lesson_arena`, `LESSON_SHARE` = 60% of the case) and the target, the
arena of the instructor's reference solution (lessons/assignments/solutions/a2.py: 100%).
So typing in what a lesson shows earns at most 60, and the last 40 points pay for beating
it. MXNet's refcount planner [Chen 2016], the old full-marks mark, is still shown.

The graded cases are those where the reference is clearly better than the lessons'
planners (`CLEAR`: an arena at least 2% smaller). Elsewhere (most graph cases, the edge
cases, most random lists: there greedy by size or best fit already reaches the
theoretical minimum or ties the reference) a public or generated case of the default
set is a check only: a valid plan must be given, a failed one counts as a case with 0
points, and a passed one is left out of the score (the report's note counts them) -
scored, such a case would give a lesson's answer full marks. A private case that is not
clear, a case passed in (`cases=`) that is not, or a case without the reference (the
students' repository's private ones) runs from no reuse (0) to the target (100%, the
lessons' arena where there is no reference) with no mark between, as in A3.
The reference runs here where it is (`reference.reference_function`); in the students'
repository its arenas on the public cases of seed 0 ship as numbers (answers.json, with a
digest of the case's buffers), never its code.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from ..errors import PlanError
from ..memory.buffers import Buffer, arena_size, theoretical_minimum, validate_offsets
from ..memory.liveness import liveness
from ..memory.plan import MemoryPlan
from ..memory.planners import PLANNERS, plan_buffers
from ..memory.planners.greedy import place_in_order
from ..runtime.executor import Executor
from .cases import BufferCase, planner_cases, private_planner_cases
from .reference import reference_function, shipped
from .report import CaseResult, GradeReport, finish_report, geometric_mean, run_cases
from .runner import (
    DEFAULT_TIME_LIMIT,
    Garbage,
    Outcome,
    ddmin,
    one_blas_thread,
    run_case,
    scaled,
)

BASELINE = "refcount"     # MXNet's planner [Chen 2016]: shown beside each arena
LESSON_PLANNERS = ("greedy-size", "bestfit")   # the notebook's hint; lesson 06's modules
LESSON_SHARE = 0.6        # of a case's point for the lessons' arena (issue 50)
CLEAR = 0.98              # the reference's arena <= this x the lessons': a 3-mark scale


@one_blas_thread()
def check_planner(fn: Callable, *, cases: Sequence[BufferCase] | None = None,
                  private: Any = None, seed: int = 0, time_limit: float | None = None,
                  mode: str = "auto", shrink: bool = True, max_timeouts: int = 2,
                  baseline: str = BASELINE, leaderboard: bool | Sequence[str] = True,
                  execute: bool = True, progress: bool = False) -> GradeReport:
    """Grade `fn(buffers) -> {id: offset}` on the public cases (graphs' liveness buffers,
    edge cases, hard instances with a known optimum, random lists; `seed` picks the
    generated ones), plus private cases (`private`, or `MINIGRAPH_PRIVATE_CASES`).
    `leaderboard`: True for every library planner, a list of names, or False. Each case
    runs in a child process with `time_limit` seconds (default `DEFAULT_TIME_LIMIT` x
    `time_scale()`); BLAS runs on one thread (`one_blas_thread`). `fn` may be a
    `Submission` (a student's file in its own process); `progress` prints each case as
    it is judged. A valid plan's points: `case_points` on the case's `marks`; in the
    default set, a public or generated case that is not `clear` is a check only (left
    out of the score when passed, 0 points when failed)."""
    if time_limit is None:
        time_limit = scaled(DEFAULT_TIME_LIMIT)
    library_planners()   # import every planner module once, before any fork
    gate_only = cases is None        # the default set: unclear cases are checks only
    if cases is None:
        cases = planner_cases(seed) + private_planner_cases(private)
    base = {c.name: _library_arena(baseline, c) for c in cases}
    scale = {c.name: marks(c) for c in cases}    # before any run of the student's
    results, outcomes, status = run_cases(
        cases, lambda case: _run(fn, case.buffers, time_limit, mode),
        lambda case, out: judge_plan(case, out, base[case.name], baseline, execute,
                                     scale[case.name])[0],
        max_timeouts, progress)
    checks = [r.name for r in results if gate_only and r.passed and r.source != "private"
              and not scale[r.name]["clear"]]
    if gate_only and len(checks) < len(results):
        keep = [k for k, r in enumerate(results) if r.name not in checks]
        cases = [cases[k] for k in keep]
        results = [results[k] for k in keep]
        outcomes = [outcomes[k] for k in keep if k < len(outcomes)]
    else:
        checks = []
    report = GradeReport(
        "A2 planner", results, status,
        scoring=f"per valid case, a scale of its arena, linear in bytes: no reuse (the sum "
                f"of the sizes) 0%, the lessons' planners' (the best of greedy by size, "
                f"the hint, and best fit) {LESSON_SHARE:.0%}, the target's (the "
                "reference solution's) or less 100%")
    if checks:
        report.notes.append(f"{len(checks)} more cases passed as checks only (a valid plan "
                            "is asked; not scored: there the reference is not clearly "
                            "better than the lessons' planners): " + ", ".join(checks[:4])
                            + (", ..." if len(checks) > 4 else ""))
    unclear = [c.name for c in cases if not scale[c.name]["clear"]
               and (not gate_only or c.source == "private")]
    if unclear:
        report.notes.append(f"on {', '.join(unclear[:6])}{', ...' if len(unclear) > 6 else ''}"
                            " the target is not clearly below the lessons' planners' "
                            "arena: there the scale runs from no reuse (0%) to the target "
                            "(100%), with no 60% mark between")
    fallback = [n for n, m in scale.items() if m["whose"] != "reference"]
    if fallback:
        report.notes.append(f"the target of {', '.join(fallback[:6])}"
                            f"{', ...' if len(fallback) > 6 else ''} is the lessons' "
                            "planners' arena: the reference solution is not here")
    if finish_report(report, cases, results, outcomes,
                     lambda case, out: _reproducer(fn, case, out, time_limit, mode, shrink)):
        return report
    if leaderboard:
        names = None if leaderboard is True else list(leaderboard)
        report.comparison = leaderboard_rows(cases, results, getattr(fn, "__name__", "you"),
                                             names)
        report.comparison_title = ("Leaderboard (valid cases; arena / theoretical minimum, "
                                   "geometric mean over the cases every row planned):")
    return report


# ---------------------------------------------------------------------------------------
# Judging one plan
# ---------------------------------------------------------------------------------------

def _run(fn: Callable, buffers: list[Buffer], time_limit: float, mode: str) -> Outcome:
    return run_case(fn, (list(buffers),), time_limit=time_limit, mode=mode)


def parse_offsets(value: Any) -> tuple[dict[Hashable, int] | None, str]:
    """The offsets dict a solution returned (a dict, or a `Placement`), or a message."""
    if isinstance(value, dict) and "__type__" in value:
        if "offsets" in value and isinstance(value["offsets"], dict):
            value = value["offsets"]
        else:
            return None, (f"expected a dict {{buffer id: offset}}, got a {value['__type__']}")
    if not isinstance(value, dict):
        what = f"a {value.type_name} ({value.text})" if isinstance(value, Garbage) else \
            f"a {type(value).__name__}" if value is not None else "None"
        return None, f"expected a dict {{buffer id: offset}}, got {what}"
    return value, ""


def judge_plan(case: BufferCase, out: Outcome, base_arena: int | None = None,
               baseline: str = BASELINE, execute: bool = True,
               scale: dict[str, Any] | None = None) -> tuple[CaseResult, dict | None]:
    """Score one answer: validity (the validator, then re-execution), then its arena on
    the case's `marks` (`scale`; measured here when not given)."""
    def fail(msg: str) -> tuple[CaseResult, None]:
        return CaseResult(case.name, case.source, False, 0.0, msg, out.seconds,
                          printed=out.printed), None

    if not out.ok:
        msg = f"your function {out.describe()}"
        return fail(msg + ("\n" + out.traceback if out.traceback else ""))
    offsets, problem = parse_offsets(out.value)
    if problem:
        return fail(problem)
    problem = validity_problem(case, offsets)
    if problem:
        return fail(problem)
    if execute and case.graph is not None:
        problem = execution_problem(case, offsets)
        if problem:
            return fail(problem)
    arena = arena_size(case.buffers, offsets)
    minimum = theoretical_minimum(case.buffers)
    base_arena = _library_arena(baseline, case) if base_arena is None else base_arena
    m = marks(case) if scale is None else scale
    points = case_points(arena, m)
    metrics = {"arena": arena, "minimum": minimum, baseline: base_arena,
               "lessons": m["lesson"], "target": m["target"],
               "ratio": arena / minimum if minimum else 1.0}
    if case.known_optimum is not None:
        metrics["optimum"] = case.known_optimum
    msg = "" if points >= 1.0 else (f"valid, but the arena {arena} B is larger than the "
                                    f"target's {m['target']} B (the lessons' planners: "
                                    f"{m['lesson']} B)")
    return CaseResult(case.name, case.source, True, points, msg, out.seconds, metrics), \
        offsets


# ---------------------------------------------------------------------------------------
# The scale: no reuse, the lessons' planners, the reference
# ---------------------------------------------------------------------------------------

_reference_cache: dict[tuple[str, int], int | None] = {}


def case_digest(case: BufferCase) -> str:
    """A digest of a case's buffers and alignment (answers.json: a case changed since its
    target was shipped gets no old number)."""
    text = f"{_fingerprint(case)}/{case.alignment}"
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def reference_arena(case: BufferCase) -> int | None:
    """The reference solution's arena on the case (None where its plan is not valid);
    cached. Raises LookupError where the reference is not here."""
    ref = reference_function("a2")
    if ref is None:
        raise LookupError("no reference solution")
    key = (_fingerprint(case), case.alignment)
    if key not in _reference_cache:   # trusted: run here, no child process
        out = run_case(ref, (list(case.buffers),), mode="inline")
        offsets, problem = parse_offsets(out.value) if out.ok else (None, "failed")
        problem = problem or validity_problem(case, offsets)
        _reference_cache[key] = None if problem else arena_size(case.buffers, offsets)
    return _reference_cache[key]


def target(case: BufferCase) -> tuple[int, str]:
    """(the arena a case's full marks ask for, whose it is): the reference solution's -
    run here where it is, else its number for a case of seed 0, shipped in answers.json
    (with the case's digest) - or the lessons' planners' where neither is there."""
    try:
        mine = reference_arena(case)
    except LookupError:
        given = shipped().get("a2", {}).get(case.name) if case.source != "private" else None
        mine = given[1] if given is not None and given[0] == case_digest(case) else None
    if mine is not None:
        return mine, "reference"
    return lesson_arena(case), "lessons"


def hint_offsets(buffers: Sequence[Buffer]) -> list[int]:
    """The notebook's hint as a student types it in: largest first (ties in the list's
    order, as Python's `sorted` keeps them), each at the lowest offset free over its life
    (`greedy.place_in_order`; the library's "greedy-size" breaks ties by lifetime)."""
    return place_in_order(buffers, sorted(range(len(buffers)), key=lambda i: -buffers[i].size))


def lesson_arena(case: BufferCase) -> int:
    """The smallest arena of `LESSON_PLANNERS` and of the hint as written
    (`hint_offsets`)."""
    shown = [a for a in (_library_arena(p, case) for p in LESSON_PLANNERS) if a is not None]
    hint = hint_offsets(case.buffers)
    shown.append(arena_size(case.buffers, {b.id: o for b, o in zip(case.buffers, hint)}))
    return min(shown)


def marks(case: BufferCase) -> dict[str, Any]:
    """The scale's marks on a case (arenas, bytes): "zero" (no reuse: the sum of the
    sizes), "lesson" (`lesson_arena`), "target" and whose it is (`target`), and "clear":
    whether the target is at most `CLEAR` x the lesson's, so that the case has three
    marks."""
    goal, whose = target(case)
    lesson = lesson_arena(case)
    clear = whose == "reference" and goal < lesson and goal <= CLEAR * lesson
    return {"zero": sum(b.size for b in case.buffers), "lesson": lesson, "target": goal,
            "whose": whose, "clear": clear}


def case_points(arena: int, m: dict[str, Any]) -> float:
    """A valid plan's share of its case, from its arena and the case's `marks`, linear
    in bytes: 1 at or below the target; where the case is `clear`, LESSON_SHARE at the
    lessons' arena and in proportion between it and the target; 0 at or above no reuse's,
    in proportion up to the lessons' arena (or, on a case that is not clear, up to the
    target). Where no reuse is possible (no reuse's arena at or below the target), a
    valid plan no larger than no reuse's earns the point."""
    zero, goal = m["zero"], m["target"]
    if arena <= goal:
        return 1.0
    if zero <= goal:
        return 1.0 if arena <= zero else 0.0
    if arena >= zero:
        return 0.0
    lesson = m["lesson"]
    if not m["clear"] or not goal < lesson < zero:
        return (zero - arena) / (zero - goal)
    if arena <= lesson:
        return LESSON_SHARE + (1 - LESSON_SHARE) * (lesson - arena) / (lesson - goal)
    return LESSON_SHARE * (zero - arena) / (zero - lesson)


def validity_problem(case: BufferCase, offsets: dict) -> str:
    """What the validator says about these offsets ("" when the plan is safe)."""
    ids = {b.id for b in case.buffers}
    extra = [k for k in offsets if k not in ids]
    if extra:
        return (f"offset given for {extra[0]!r}, which is not one of the buffers (ids are "
                f"the buffers' `id` fields: {sorted(map(repr, ids))[:4]}...)")
    try:
        validate_offsets(case.buffers, offsets, alignment=case.alignment)
    except PlanError as e:
        msg = f"the validator rejects the plan: {e}"
        if "not a multiple" in str(e):
            msg += (f"\n(these buffers come from a graph planned with alignment "
                    f"{case.alignment}: every size is a multiple of it, and so must every "
                    "offset be)")
        return msg
    except Exception as e:   # noqa: BLE001  a value the validator cannot even compare
        return f"the validator cannot read the plan: {type(e).__name__}: {e}"
    return ""


_unplanned_cache: dict[str, dict[str, np.ndarray]] = {}
_keep_alive: dict[int, Any] = {}


def _execute(case: BufferCase, offsets: dict, check: bool = True) -> dict[str, np.ndarray]:
    live = liveness(case.graph, case.schedule, case.alignment)
    arena = arena_size(live.buffers(), offsets)
    plan = MemoryPlan(live, dict(offsets), arena, planner="student")
    # check=False runs an unsafe plan on purpose, to show the damage it does.
    return Executor(case.graph, plan, device="cpu", validate=check).run(case.feeds())


def _reference_outputs(case: BufferCase) -> dict[str, np.ndarray]:
    key = f"{id(case.graph)}/{case.name}"
    _keep_alive[id(case.graph)] = case.graph   # so that no other graph reuses its id
    if key not in _unplanned_cache:
        _unplanned_cache[key] = Executor(case.graph, device="cpu").run(case.feeds())
    return _unplanned_cache[key]


def _diff(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> str:
    for name, w in want.items():
        g = got[name]
        if g.shape != w.shape or g.tobytes() != w.tobytes():
            with np.errstate(all="ignore"):
                d = np.abs(g.astype(np.float64) - w.astype(np.float64))
            worst = np.nanmax(d) if d.size and not np.all(np.isnan(d)) else float("nan")
            return f"output {name} differs from the run without reuse (max abs diff {worst:.3g})"
    return ""


def execution_problem(case: BufferCase, offsets: dict) -> str:
    """Run the graph in the student's arena; compare with no reuse, bit for bit."""
    try:
        got = _execute(case, offsets)
    except Exception as e:   # noqa: BLE001
        return f"running the graph in your arena failed: {type(e).__name__}: {e}"
    d = _diff(got, _reference_outputs(case))
    return f"the plan passes the validator, but running the graph in it: {d}" if d else ""


def damage_note(case: BufferCase, offsets: dict) -> str:
    """For an invalid plan of a graph: what running it anyway would have done."""
    if case.graph is None or not all(isinstance(v, int) and v >= 0 for v in offsets.values()):
        return ""
    if set(offsets) != {b.id for b in case.buffers}:
        return ""
    try:
        got = _execute(case, offsets, check=False)
    except Exception as e:   # noqa: BLE001
        return f"Running the graph in that arena anyway fails: {type(e).__name__}: {e}"
    d = _diff(got, _reference_outputs(case))
    if d:
        return f"Running the graph in that arena anyway gives wrong results: {d}."
    return ("Running the graph in that arena anyway happens to give the right outputs here, "
            "but only by luck of the values: the overlap is still a bug.")


# ---------------------------------------------------------------------------------------
# Reproducer
# ---------------------------------------------------------------------------------------

def _category(out: Outcome, case: BufferCase) -> str:
    if out.status == "error":
        return f"error:{out.error_type}"
    if out.status != "ok":
        return out.status
    offsets, problem = parse_offsets(out.value)
    if problem:
        return "type"
    return "invalid" if validity_problem(case, offsets) else "ok"


def _reproducer(fn: Callable, case: BufferCase, out: Outcome, time_limit: float, mode: str,
                shrink: bool) -> str:
    if case.source == "private":
        return "(a private case: its buffers are not shown)"
    note = ""
    if out.ok:
        offsets, _ = parse_offsets(out.value)
        if offsets is not None and validity_problem(case, offsets):
            note = damage_note(case, offsets)
    small = case.buffers
    want = _category(out, case)
    if shrink and want not in ("ok", "timeout", "crash") and len(small) > 1:
        def fails(bufs: list[Buffer]) -> bool:
            c = BufferCase(case.name, bufs, case.alignment)
            return _category(_run(fn, bufs, min(time_limit, scaled(5.0)), mode), c) == want

        small = ddmin(list(small), fails)
    name = getattr(fn, "__name__", "fn")
    lines = ["from minigraph.memory import Buffer", "buffers = ["]
    lines += [f"    {b!r}," for b in small]
    lines += ["]", f"offsets = {name}(buffers)"]
    o = _run(fn, small, time_limit, mode)
    if o.ok:
        lines.append(f"# you return: {_short(o.value)}")
        offsets, problem = parse_offsets(o.value)
        c = BufferCase(case.name, small, case.alignment)
        problem = problem or validity_problem(c, offsets)
        if problem:
            lines.append("# " + problem.splitlines()[0])
    else:
        lines.append(f"# your function {o.describe()}")
    if len(small) < len(case.buffers):
        lines.append(f"# (shrunk from {len(case.buffers)} to {len(small)} buffers)")
    if note:
        lines.append(f"# On the full case ({case.name}): {note}")
    return "\n".join(lines)


def _short(v: Any, limit: int = 300) -> str:
    s = repr(v)
    return s if len(s) <= limit else s[:limit] + " ..."


# ---------------------------------------------------------------------------------------
# The library's planners, for the baseline and the leaderboard
# ---------------------------------------------------------------------------------------

_library_cache: dict[tuple[str, str, int], tuple[dict | None, float, str]] = {}


def _fingerprint(case: BufferCase) -> str:
    return repr([(b.id, b.start, b.end, b.size, b.color) for b in case.buffers])


# Settings that keep the slow planners quick enough for a leaderboard (each planner's own
# options: plan_buffers refuses an option a planner does not take).
LEADERBOARD_ARGS: dict[str, dict[str, Any]] = {"anneal": {"iterations": 100, "seed": 0},
                                               "ilp": {"time_limit": 0.1}}
LEADERBOARD_BUDGET = 3.0   # seconds of one library planner over all cases


def _plan_with_library(name: str, buffers: list[Buffer], alignment: int) -> dict:
    _, placement = plan_buffers(buffers, name, alignment, **LEADERBOARD_ARGS.get(name, {}))
    return placement.offsets


def library_plan(name: str, case: BufferCase) -> tuple[dict | None, float, str]:
    """(offsets or None, seconds, problem) of library planner `name` on the case; cached."""
    key = (name, _fingerprint(case), case.alignment)
    if key not in _library_cache:   # the library is trusted: run it here, no child process
        out = run_case(_plan_with_library, (name, list(case.buffers), case.alignment),
                       mode="inline")
        if not out.ok:
            _library_cache[key] = (None, out.seconds, out.describe())
        else:
            offsets, problem = parse_offsets(out.value)
            problem = problem or validity_problem(case, offsets)
            _library_cache[key] = (None if problem else offsets, out.seconds, problem)
    return _library_cache[key]


def _library_arena(name: str, case: BufferCase) -> int | None:
    offsets, _, _ = library_plan(name, case)
    return None if offsets is None else arena_size(case.buffers, offsets)


def library_planners() -> list[str]:
    return sorted(PLANNERS)


def leaderboard_rows(cases: Sequence[BufferCase], results: Sequence[CaseResult],
                     you: str = "you", names: Sequence[str] | None = None
                     ) -> list[dict[str, Any]]:
    """One row per planner: valid cases, arena over the minimum, seconds; best first.
    A library planner that has used up `LEADERBOARD_BUDGET` seconds skips the rest."""
    names = library_planners() if names is None else list(names)
    rows: list[dict[str, Any]] = []
    mins = {c.name: theoretical_minimum(c.buffers) for c in cases}
    mine = {r.name: r for r in results}
    n = len(cases)
    for label, get in [(f"{you} (you)", None)] + [(p, p) for p in names]:
        ratios, valid, secs, skipped = {}, 0, 0.0, 0
        for c in cases:
            if get is not None and secs > LEADERBOARD_BUDGET:
                skipped += 1
                continue
            if get is None:
                r = mine.get(c.name)
                ok = r is not None and r.passed
                secs += r.seconds if r is not None else 0.0
                arena = r.metrics.get("arena") if ok else None
            else:
                offsets, s, problem = library_plan(get, c)
                secs += s
                ok = offsets is not None
                arena = arena_size(c.buffers, offsets) if ok else None
            valid += ok
            if ok and mins[c.name]:
                ratios[c.name] = arena / mins[c.name]
        rows.append({"planner": label, "valid": f"{valid}/{n - skipped}", "_ratios": ratios,
                     "seconds": round(secs, 3),
                     **({"note": f"{skipped} cases skipped (slow)"} if skipped else {})})
    full = [r for r in rows if "note" not in r] or rows
    common = set.intersection(*(set(r["_ratios"]) for r in full)) if full else set()
    for r in rows:
        ratios = r.pop("_ratios")
        mine_ = [ratios[k] for k in common if k in ratios]
        r["x minimum"] = geometric_mean(mine_) if mine_ else math.nan
        r["worst"] = max(mine_, default=math.nan)
    def rank(r: dict[str, Any]) -> tuple[bool, float, float]:
        ok, ran = map(int, r["valid"].split("/"))   # rows that skipped cases go last
        return ("note" in r, -(ok / ran) if ran else 0.0,
                r["x minimum"] if not math.isnan(r["x minimum"]) else math.inf)

    rows.sort(key=rank)
    cols = ("planner", "valid", "x minimum", "worst", "seconds", "note")
    return [{c: r.get(c, "") for c in cols} for r in rows]
