"""Grading assignment 3: an eviction heuristic for DTR (MegEngine's DTR [MegEngine 2021]).

The student writes `fn(t, now) -> float`: the score of one resident tensor `t` at clock
`now`; when memory runs out, the tensor with the LOWEST score is evicted. As in
MegEngine's `find_best_tensor`, the heuristic sees every resident tensor the runtime
could rematerialise, pinned ones included (`t.pinned`: an input or output of the op
being run, or about to be), and must keep the pinned ones out: `math.inf` means "never
evict this one". Everything else `t` offers is the runtime's `TensorView` (size, cost,
staleness, recomputes, neighbour costs...), read-only.

Each case runs a model's training step under a budget, a ratio of the TOTAL
no-rematerialisation peak: everything the step holds (parameters, inputs, outputs + the
arena of activations, gradients and workspace), the DTR paper's definition; the arena gets
ratio x total - external bytes (`Bounds.arena_budget`). The student's heuristic runs in a
child process, simulated (`record_choices`: the same decisions as a real run), and sends
back only its eviction choices; the grader replays them for real, NumPy kernels and all,
in its own runtime (`replay_choices`), where each must be a candidate and not pinned, and
judges that run. It passes when the run finishes, every eviction was of an unpinned
tensor, every score was a number, and the outputs equal a plain run's bit for bit.

A correct run is the gate; its points are a scale of its extra compute (compute overhead
- 1), read in log(extra + 1%) - each halving of the extra compute is worth the same -
between three marks measured on the case (`case_points`): a constant score's (the trivial
answer; it or worse earns 0), the lessons' formula's (the better of h_DTR, lesson 07's,
and MegEngine's, lesson 07b's and the notebook's: `LESSON_SHARE`, 60% of the case) and
the target's, the compute of the instructor's reference solution
(lessons/assignments/solutions/a3.py: 100%). So typing in what a lesson shows earns at
most 60, and the last 40 points pay for beating it. The graded budgets (`MODELS`) are
the tightest two per model where the reference is clearly better than the lessons'
formulas (by `CLEAR`: its extra compute + 1% at least 5% below theirs), in a survey
from 80% down to 30%; elsewhere the reference ties one of them (the chain at every
budget, ResNet-50 at 80, 60 and 50%, the LSTM at 80%) or is beaten (ResNet-50 at 70 and
30%, the Transformer at 80 and 30%), and such a case would give a lesson's answer full
marks. On a case passed in that is not so (the chain, a private case where the reference
does not win, any case without the reference: the students' repository's private ones),
the scale runs from the constant's (0) to the target's (100%) with no mark between
(`case_points`), and the report says so. The
reference runs here where it is (`reference.reference_function`); in the students'
repository its results on the public cases ship as numbers (answers.json), never its
code. DTR, LRU, MegEngine's formula and the constant score are shown for comparison; a
run that thrashes counts as the thrash limit (x10) in the table's geometric mean, and as
the constant's mark when the constant thrashes.
"""

from __future__ import annotations

import functools
import hashlib
import math
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import BudgetError, ThrashError
from ..examples import linear_chain
from ..feeds import random_feeds
from ..graph import Graph
from ..models import get_model
from ..runtime.dtr import DTRRuntime, simulate
from ..runtime.dtr.modes import ArrayBackend
from ..runtime.dtr.program import as_program
from ..runtime.executor import Executor
from .cases import private_dir
from .reference import reference_function, shipped
from .report import CaseResult, GradeReport, finish_report, geometric_mean, run_cases
from .runner import Outcome, Remote, is_number, one_blas_thread, run_case, scaled

SLACK = 0.01          # of the base compute, added to every extra: a tiny gap costs little
LESSON_SHARE = 0.6    # of a case's point for the lessons' formula's compute (issue 50)
CLEAR = 1.05          # the reference's (extra + SLACK) x this <= the lessons': a 3-mark scale
LESSON_FORMULAS = ("dtr", "megengine")   # what lessons 07 and 07b (and the notebook) show
RATIOS = (0.8, 0.6, 0.4)  # the chain's budgets, and any model's without its own
RATIO_OF = "total"    # budgets are a ratio of the total peak (the DTR paper's); or "arena"
BASELINES = ("dtr", "lru", "megengine", "constant")
# (label, zoo name, builder keywords, graded budgets): benchmarks/dtr.py's ResNet-50, a
# smaller version of its Transformer and a longer, wider-batch version of its LSTM - sizes
# at which a real (NumPy) run takes a second or two - each at its two tightest budgets (of
# the total peak, 80% down to 30%) where the reference needs clearly less compute than
# h_DTR and MegEngine's formula (`CLEAR`) and DTR's own heuristic finishes (measured,
# simulated: `python benchmarks/a3_cases.py` prints the survey; the LSTM thrashes below
# 40% with h_DTR, and at 30% the reference is not clear of MegEngine's formula on
# ResNet-50 nor of h_DTR on the Transformer). The
# tiny default zoo models are no use: one tensor is a large share of their memory, and
# DTR thrashes on them even at 60%.
MODELS: tuple[tuple[str, str, dict, tuple[float, ...]], ...] = (
    ("resnet50", "resnet", {"depth": 50, "image": 32, "batch": 8, "width": 8}, (0.4, 0.35)),
    ("transformer", "transformer", {"layers": 8, "seq": 32, "d_model": 32, "batch": 8},
     (0.4, 0.35)),
    ("lstm", "lstm", {"T": 48, "hidden": 32, "batch": 512, "input": 16}, (0.5, 0.4)),
)
TIME_LIMIT = 60.0     # seconds per case, times `time_scale()`
THRASH_LIMIT = 10.0   # the runtime gives up past this many times the base compute
FIELDS = ("name", "kind", "node", "size", "cost", "staleness", "last_access", "recomputes",
          "neighbour_cost", "live_neighbour_cost", "evicted_neighbours", "eqclass_cost",
          "megengine_cost", "ancestor_cost", "address", "free_left", "free_right")


@dataclass
class HeuristicCase:
    """One model at one budget: `ratio` of its no-rematerialisation peak, the total peak
    (`ratio_of="total"`, the DTR paper's) or the arena peak (`"arena"`)."""
    name: str
    graph: Graph = field(repr=False)
    ratio: float
    feeds: Callable[[], dict] = field(repr=False)
    alignment: int = 512
    costs: str = "flops"
    source: str = "public"
    ratio_of: str = RATIO_OF


# ---------------------------------------------------------------------------------------
# What the student's function sees, and the runtime that asks it
# ---------------------------------------------------------------------------------------

class CandidateView:
    """One resident tensor, read-only: the runtime's `TensorView` fields plus `pinned`."""

    __slots__ = ("_t", "pinned")

    def __init__(self, t: Any, pinned: bool):
        object.__setattr__(self, "_t", t)
        object.__setattr__(self, "pinned", pinned)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"tensor views are read-only (tried to set {name!r}): a "
                             "heuristic only scores; the runtime evicts")

    def __getattr__(self, name: str) -> Any:
        if name in FIELDS:
            return getattr(self._t, name)
        raise AttributeError(f"a tensor view has no {name!r}; it has "
                             f"{', '.join(FIELDS + ('pinned',))}")

    def as_dict(self) -> dict[str, Any]:
        out = {}
        for f in FIELDS:
            try:
                out[f] = getattr(self._t, f)
            except Exception:   # noqa: BLE001  e.g. free_left without addresses
                out[f] = None
        out["pinned"] = self.pinned
        return out

    def __repr__(self) -> str:
        return (f"CandidateView({self.name}: {self.size} B, cost {self.cost:g}, staleness "
                f"{self.staleness:g}, recomputed {self.recomputes}x"
                f"{', PINNED' if self.pinned else ''})")


class HeuristicFault(Exception):
    """The heuristic broke the contract: `kind` is "pinned", "score" or "error"."""

    def __init__(self, kind: str, message: str, call: dict | None = None,
                 now: float = 0.0, returned: Any = None, tb: str = ""):
        super().__init__(message)
        self.kind, self.call, self.now, self.returned, self.tb = kind, call, now, returned, tb


def _guarded_runtime_class():

    class GuardedRuntime(DTRRuntime):
        """DTR with the student's scores, through the runtime's public selection hook
        `choose_victim`: every candidate the runtime offers is scored (pinned ones too,
        flagged); the lowest finite score is evicted, and it must not be pinned. The
        runtime offers first the tensors no waiting op needs, then all of them."""

        def __init__(self, program: Any, budget: int, student: Callable, **kw: Any):
            super().__init__(program, budget, "dtr", **kw)
            self.student = student
            self.trace.heuristic = getattr(student, "__name__", "student")
            self.calls = 0
            self.every_inf = False
            self.choices: list[str | None] = []   # each choose_victim's answer, in order

        def _score(self, v: CandidateView, now: float) -> float:
            self.calls += 1
            try:
                s = self.student(v, now)
            except Exception as e:
                raise HeuristicFault("error", f"{type(e).__name__}: {e}", v.as_dict(), now,
                                     tb=traceback.format_exc()) from e
            bad = isinstance(s, (bool, str, bytes)) or s is None
            if not bad:
                try:
                    s = float(s)
                except Exception:   # noqa: BLE001  anything that is not a real number
                    bad = True
            if bad:
                raise HeuristicFault("score", "not a number", v.as_dict(), now,
                                     f"{s!r} ({type(s).__name__})"[:80])
            if math.isnan(s):
                raise HeuristicFault("score", "NaN", v.as_dict(), now, "nan")
            return s

        def choose_victim(self, candidates: list, need: int) -> Any:
            now = self.now
            best, best_s, best_view = None, math.inf, None
            for t in candidates:
                v = CandidateView(t, t.pinned)
                s = self._score(v, now)
                if s < best_s:
                    best, best_s, best_view = t, s, v
            if best is not None:
                if best_view.pinned:
                    raise HeuristicFault("pinned", f"score {best_s:g}", best_view.as_dict(),
                                         now, best_s)
                self.choices.append(best.name)
                return best
            self.every_inf = bool(candidates)
            self.choices.append(None)
            return None

    return GuardedRuntime


def budget_for(program: Any, ratio: float, ratio_of: str = RATIO_OF) -> tuple[int, bool]:
    """Arena bytes for `ratio` of the total no-rematerialisation peak (external bytes +
    arena peak: the arena gets ratio x total - external) or, `ratio_of="arena"`, of the
    arena peak; raised to `Bounds.lower` (below it no op fits, and the runtime refuses at
    once) if below it. Returns (budget, raised)."""
    b = program.bounds()
    want = b.arena_budget(ratio, ratio_of)
    return (want, False) if want >= b.lower else (b.lower, True)


def describe_budget(r: dict, ratio: float, ratio_of: str = RATIO_OF) -> str:
    """'budget ... = 40% of the total peak ...' for messages, from `run_student`'s dict."""
    budget = r.get("budget", 0)
    if ratio_of == "total":
        text = (f"budget {budget:,} B of arena = {ratio:.0%} of the total peak "
                f"{r.get('total', 0):,} B (arena peak {r.get('peak', 0):,} B + "
                f"{r.get('external', 0):,} B of parameters, inputs and outputs)")
    else:
        text = f"budget {budget:,} B = {ratio:.0%} of the arena peak {r.get('peak', 0):,} B"
    return text + (" (raised to the smallest feasible budget)" if r.get("clamped") else "")


@functools.cache
def _program_of(graph: Graph, alignment: int, costs: str) -> Any:
    """The DTR program of a case's graph, built once per process (the child processes
    inherit it: the baselines are computed before any student run)."""
    return as_program(graph, None, alignment, costs)


def case_program(case: HeuristicCase) -> Any:
    return _program_of(case.graph, case.alignment, case.costs)


def _digests(outputs: dict) -> dict[str, str]:
    import numpy as np
    return {k: hashlib.blake2b(np.ascontiguousarray(v).tobytes(), digest_size=16).hexdigest()
            for k, v in outputs.items()}


def case_spec(case: HeuristicCase, thrash_limit: float = THRASH_LIMIT) -> dict[str, Any]:
    """What the student's side needs to run a case: the graph, how to cost it, the budget."""
    budget, _ = budget_for(case_program(case), case.ratio, case.ratio_of)
    return {"graph": case.graph, "alignment": case.alignment, "costs": case.costs,
            "budget": budget, "thrash_limit": thrash_limit}


def record_choices(student: Callable, spec: dict[str, Any]) -> dict:
    """Run a case simulated (the same decisions as a real run, without the kernels) with
    the student's scores, and return the eviction choices it made - the tensor named by
    each `choose_victim` call, None where every candidate scored math.inf - or the fault
    that stopped it. Runs where the student's code runs (a child process); the parent
    replays the choices (`replay_choices`), so an answer earns only what its choices
    earn in the grader's own runtime, and a claimed fault earns 0."""
    program = _program_of(spec["graph"], spec["alignment"], spec["costs"])
    rt = _guarded_runtime_class()(program, spec["budget"], student,
                                  thrash_limit=spec["thrash_limit"])
    try:
        rt.run()
    except HeuristicFault as e:
        return {"fault": e.kind, "message": str(e), "call": e.call, "now": e.now,
                "returned": e.returned, "traceback": e.tb}
    except ThrashError:
        tr, cost = rt.trace, program.base_cost
        extra = f"{tr.extra_cost / cost:.1f}x" if cost else f"{tr.extra_cost:g} units of"
        return {"fault": "thrash", "message": (
            f"stopped after {tr.rematerializations} op replays: recomputation had cost "
            f"{extra} the base compute (the limit is {spec['thrash_limit']:g}x)")}
    except BudgetError as e:
        return {"fault": "stuck", "message": str(e), "every_inf": rt.every_inf}
    return {"choices": rt.choices, "calls": rt.calls}


class ReplayFault(Exception):
    """Eviction choices that do not fit the run they claim to come from."""


def _replay_runtime_class():

    class ReplayRuntime(DTRRuntime):
        """DTR evicting exactly the recorded choices, in order: each must be one of the
        candidates offered at that point and not pinned (the runtime decides the rest)."""

        def __init__(self, program: Any, budget: int, choices: Sequence, **kw: Any):
            super().__init__(program, budget, "dtr", **kw)
            self.choices, self.used = choices, 0

        def choose_victim(self, candidates: list, need: int) -> Any:
            if self.used >= len(self.choices):
                raise ReplayFault(f"the run needed more than the {len(self.choices)} "
                                  "eviction choices that came back")
            name = self.choices[self.used]
            self.used += 1
            if name is None:
                return None
            for t in candidates:
                if t.name == name:
                    if t.pinned:
                        raise HeuristicFault("pinned", "a pinned tensor chosen",
                                             CandidateView(t, True).as_dict(), self.now, "?")
                    return t
            raise ReplayFault(f"choice {self.used} evicts {name!r}, which was not a "
                              "candidate at that point")

    return ReplayRuntime


def replay_choices(case: HeuristicCase, choices: Any,
                   thrash_limit: float = THRASH_LIMIT) -> dict:
    """Run the case's model for real (NumPy kernels) in THIS process, evicting what
    `choices` says; the trace's numbers (overhead, evictions, high-water mark, output
    digests) are the runtime's own, never the student's side's."""
    program = case_program(case)
    budget, clamped = budget_for(program, case.ratio, case.ratio_of)
    b = program.bounds()
    base = {"budget": budget, "clamped": clamped, "peak": b.peak, "total": b.total,
            "external": b.external}
    if not isinstance(choices, list) or not all(c is None or isinstance(c, str)
                                                for c in choices):
        return {**base, "fault": "replay", "message": "the eviction choices that came back "
                "are not a list of tensor names"}
    backend = ArrayBackend(case.graph, "cpu", case.feeds(), 0, 0, False)
    rt = _replay_runtime_class()(program, budget, choices, backend=backend,
                                 thrash_limit=thrash_limit)
    try:
        tr = rt.run()
        if rt.used != len(choices):
            raise ReplayFault(f"{len(choices)} eviction choices came back, the run used "
                              f"{rt.used}")
    except HeuristicFault as e:
        return {**base, "fault": e.kind, "message": str(e), "call": e.call, "now": e.now,
                "returned": e.returned}
    except ReplayFault as e:
        return {**base, "fault": "replay", "message": str(e)}
    except ThrashError:
        return {**base, "fault": "thrash", "message": (
            f"stopped after {rt.trace.rematerializations} op replays (the limit is "
            f"{thrash_limit:g}x the base compute)")}
    except BudgetError as e:
        return {**base, "fault": "stuck", "message": str(e)}
    return {**base, "overhead": tr.overhead, "extra_compute": tr.extra_compute,
            "evictions": tr.evictions, "replays": tr.rematerializations,
            "max_used": tr.max_used, "digests": _digests(tr.outputs)}


def run_student(student: Callable, case: HeuristicCase,
                thrash_limit: float = THRASH_LIMIT) -> dict:
    """Both halves in this process: the choices with the student's scores, then their
    real replay (what `check_heuristic` does across two processes)."""
    r = record_choices(student, case_spec(case, thrash_limit))
    if "fault" in r:
        program = case_program(case)
        budget, clamped = budget_for(program, case.ratio, case.ratio_of)
        b = program.bounds()
        return {"budget": budget, "clamped": clamped, "peak": b.peak, "total": b.total,
                "external": b.external, **r}
    return {**replay_choices(case, r["choices"], thrash_limit), "calls": r["calls"]}


def run_heuristic(fn: Callable, graph: Graph, ratio: float | None = None,
                  budget: int | None = None, alignment: int = 512, costs: str = "flops",
                  thrash_limit: float = 10.0, ratio_of: str = RATIO_OF) -> Any:
    """Try a heuristic on a graph, simulated, in this process: returns the `DTRTrace`, or
    raises HeuristicFault explaining the first bad call (for notebooks; grading runs
    the kernels for real, in a child process). `ratio` (default 0.5) is of the total
    peak, as in the grading, or of the arena peak with `ratio_of="arena"`; or give
    `budget` in bytes of arena."""
    program = as_program(graph, None, alignment, costs)
    if budget is None:
        budget, _ = budget_for(program, 0.5 if ratio is None else ratio, ratio_of)
    rt = _guarded_runtime_class()(program, budget, fn, thrash_limit=thrash_limit)
    try:
        return rt.run()
    except HeuristicFault as e:
        if isinstance(e.__cause__, NotImplementedError):
            raise e.__cause__ from None       # a stub: let the notebook say so
        r = {"fault": e.kind, "message": str(e), "call": e.call, "now": e.now,
             "returned": e.returned, "traceback": e.tb}
        raise HeuristicFault(e.kind, explain_fault(r, f"budget {budget:,} B"), e.call, e.now,
                             e.returned, e.tb) from None


# ---------------------------------------------------------------------------------------
# Cases and baselines
# ---------------------------------------------------------------------------------------

def heuristic_cases(models: Sequence[tuple] = MODELS, ratios: Sequence[float] | None = None,
                    chain: bool = False) -> list[HeuristicCase]:
    """The graded cases: each model at its budgets (`MODELS`: a ratio of the total peak),
    or at `ratios`; with `chain`, the DTR paper's linear chain (unit costs) first, at
    `ratios` or `RATIOS` (not graded by default: every heuristic of note ties on it)."""
    cases = []
    if chain:
        g = _chain()
        cases += [HeuristicCase(f"chain24/{int(r * 100)}%", g, r, lambda g=g: random_feeds(g),
                                alignment=1, costs="unit") for r in ratios or RATIOS]
    for label, name, kw, *own in models:
        m = _model(name, tuple(sorted(kw.items())))
        cases += [HeuristicCase(f"{label}/{int(round(r * 100))}%", m.graph, r,
                                lambda m=m: m.feeds(0))
                  for r in ratios or (own[0] if own else RATIOS)]
    return cases


@functools.cache
def _chain() -> Graph:
    return linear_chain(24)


@functools.cache
def _model(name: str, kw: tuple) -> Any:
    """A zoo model, built once per process (graphs are immutable; results are cached
    per graph)."""
    return get_model(name, **dict(kw))


def private_heuristic_cases(private: Any = None) -> list[HeuristicCase]:
    """`a3/*.json` of the private directory: {"model": name, "ratios": [...],
    "kwargs": {...}, "ratio_of": "total"} (a model of the zoo at another size or budget;
    ratios of the total peak unless "ratio_of" is "arena")."""
    import json

    root, _ = private_dir(private)
    cases = []
    if root is not None and (root / "a3").is_dir():
        for p in sorted((root / "a3").glob("*.json")):
            d = json.loads(p.read_text())
            m = get_model(d["model"], **d.get("kwargs", {}))
            for r in d.get("ratios", RATIOS):
                cases.append(HeuristicCase(f"private/{p.stem}/{int(r * 100)}%", m.graph, r,
                                           lambda m=m: m.feeds(0), source="private",
                                           ratio_of=d.get("ratio_of", RATIO_OF)))
    return cases


_reference_cache: dict[tuple, Any] = {}
_keep_alive: dict[int, Graph] = {}


def constant_score(t: Any, now: float) -> float:
    """The trivial answer, the scale's 0: the same score for every unpinned tensor (the
    runtime then evicts the first candidate it offers)."""
    return math.inf if t.pinned else 0.0


def baseline(name: str, case: HeuristicCase) -> float | None:
    """Compute overhead of a library heuristic on the case, or of `constant_score` for
    "constant" (simulated: the same decisions as a real run), or None when it thrashes or
    gets stuck; cached."""
    key = (name, id(case.graph), case.ratio, case.ratio_of, case.alignment, case.costs)
    _keep_alive[id(case.graph)] = case.graph   # so that no other graph reuses its id
    if key not in _reference_cache:
        program = case_program(case)
        budget, _ = budget_for(program, case.ratio, case.ratio_of)
        try:
            if name == "constant":
                rt = _guarded_runtime_class()(program, budget, constant_score,
                                              thrash_limit=THRASH_LIMIT)
                _reference_cache[key] = rt.run().overhead
            else:
                _reference_cache[key] = simulate(program, budget, heuristic=name,
                                                 thrash_limit=THRASH_LIMIT,
                                                 timeline=False).overhead
        except (ThrashError, BudgetError):
            _reference_cache[key] = None
    return _reference_cache[key]


def reference_overhead(case: HeuristicCase) -> float | None:
    """Compute overhead of the reference solution on the case, recorded as a student's run
    is (simulated; the replay of the same choices gives the same number), or None where it
    does not finish; cached. Raises LookupError where the reference is not here."""
    ref = reference_function("a3")
    if ref is None:
        raise LookupError("no reference solution")
    key = ("reference", id(case.graph), case.ratio, case.ratio_of, case.alignment, case.costs)
    _keep_alive[id(case.graph)] = case.graph
    if key not in _reference_cache:
        program = case_program(case)
        budget, _ = budget_for(program, case.ratio, case.ratio_of)
        rt = _guarded_runtime_class()(program, budget, ref, thrash_limit=THRASH_LIMIT)
        try:
            _reference_cache[key] = rt.run().overhead
        except (ThrashError, BudgetError, HeuristicFault):
            _reference_cache[key] = None
    return _reference_cache[key]


def target(case: HeuristicCase) -> tuple[float, str]:
    """(the compute overhead a case's full marks ask for, whose it is): the reference
    solution's - run here where it is, else its number for a public case, shipped in
    answers.json (with the case's budget: a case changed since gets no old number) - or
    DTR's where neither is there (a private case in the students' repository) or the
    reference does not finish the case."""
    try:
        mine = reference_overhead(case)
    except LookupError:     # the students' repository: the numbers it gave, if still apt
        budget, _ = budget_for(case_program(case), case.ratio, case.ratio_of)
        given = shipped().get("a3", {}).get(case.name) if case.source == "public" else None
        mine = given[1] if given is not None and given[0] == budget else None
    if mine is not None:
        return mine, "reference"
    return baseline("dtr", case), "dtr"


def _log_extra(overhead: float) -> float:
    return math.log(max(overhead - 1.0, 0.0) + SLACK)


def marks(case: HeuristicCase) -> dict[str, Any]:
    """The scale's marks on a case (overheads): "zero" (the constant score's, or the thrash
    limit where it thrashes), "lesson" (the better of `LESSON_FORMULAS`'), "target" and
    whose it is (`target`), and "clear": whether the target is below the lesson's by
    `CLEAR`, so that the case has three marks."""
    goal, whose = target(case)
    shown = [v for v in (baseline(b, case) for b in LESSON_FORMULAS) if v is not None]
    lesson = min(shown) if shown else goal
    zero = baseline("constant", case)
    zero = THRASH_LIMIT if zero is None else zero
    clear = whose == "reference" and \
        (lesson - 1 + SLACK) >= CLEAR * (max(goal - 1, 0.0) + SLACK)
    return {"zero": zero, "lesson": lesson, "target": goal, "whose": whose, "clear": clear}


def case_points(mine: float, m: dict[str, Any]) -> float:
    """A correct run's share of its case, from its compute overhead and the case's
    `marks`, linear in log(extra compute + SLACK): 1 at or below the target; where the
    case is `clear`, LESSON_SHARE at the lessons' formula's compute, and in proportion
    between it and the target; 0 at or above the constant score's, in proportion up to
    the lessons' formula's (or, on a case that is not clear, up to the target: the
    reference scores 100 everywhere, and there a lesson's formula close to it may too)."""
    x = _log_extra(mine)
    top = m["target"]
    if x <= _log_extra(top) + 1e-12:
        return 1.0
    zero = _log_extra(m["zero"])
    if not m["clear"]:
        return 0.0 if x >= zero else (zero - x) / (zero - _log_extra(top))
    lesson, goal = _log_extra(m["lesson"]), _log_extra(m["target"])
    if x <= lesson:
        return LESSON_SHARE + (1 - LESSON_SHARE) * (lesson - x) / (lesson - goal)
    if x >= zero:
        return 0.0
    return LESSON_SHARE * (zero - x) / (zero - lesson)


def reference_digests(case: HeuristicCase) -> dict[str, str]:
    key = ("plain", id(case.graph))
    _keep_alive[id(case.graph)] = case.graph
    if key not in _reference_cache:
        _reference_cache[key] = _digests(Executor(case.graph, device="cpu").run(case.feeds()))
    return _reference_cache[key]


# ---------------------------------------------------------------------------------------
# Grading
# ---------------------------------------------------------------------------------------

@one_blas_thread()
def check_heuristic(fn: Callable, *, cases: Sequence[HeuristicCase] | None = None,
                    private: Any = None, time_limit: float | None = None, mode: str = "auto",
                    max_timeouts: int = 2, baselines: Sequence[str] = BASELINES,
                    progress: bool = True) -> GradeReport:
    """Grade `fn(t, now) -> score` (lowest evicted first; `math.inf` for tensors that
    must stay, pinned ones above all) on three models at two budgets each (`MODELS`, a
    ratio of the total peak), plus private cases (`private`, or
    `MINIGRAPH_PRIVATE_CASES`). Each case runs simulated with the student's scores in a
    child process with `time_limit` seconds (default `TIME_LIMIT` x `time_scale()`),
    which returns its eviction choices; they are replayed here, for real, in the runtime
    (`replay_choices`), and that run is judged. BLAS runs on one thread
    (`one_blas_thread`). `fn` may be a `Submission` (a student's file in its own
    process); `progress` prints each case as it is judged."""
    if time_limit is None:
        time_limit = scaled(TIME_LIMIT)
    if cases is None:
        cases = heuristic_cases() + private_heuristic_cases(private)
    skipped = [c for c in cases if baseline("dtr", c) is None]
    cases = [c for c in cases if baseline("dtr", c) is not None]
    targets = {c.name: target(c) for c in cases}    # before any run of the student's
    unclear = [c.name for c in cases if not marks(c)["clear"]]
    results, outcomes, status = run_cases(
        cases, lambda case: _record(fn, case, time_limit, mode), judge_run, max_timeouts,
        progress, _not_implemented)
    report = GradeReport(
        "A3 eviction heuristic", results, status,
        scoring=f"per correct run, a scale of its extra compute (compute overhead - 1), "
                f"linear in log(extra + {SLACK:.0%}): a constant score's or more 0%, the "
                f"lessons' formula's (the better of h_DTR and MegEngine's) "
                f"{LESSON_SHARE:.0%}, the target's (the reference solution's) or less "
                "100%\n  budgets: " + budget_definition(cases))
    fallback = [name for name, (_, whose) in targets.items() if whose == "dtr"]
    if fallback:
        report.notes.append(f"the target of {', '.join(fallback[:6])}"
                            f"{', ...' if len(fallback) > 6 else ''} is DTR's overhead: the "
                            "reference solution is not here (or did not finish the case)")
    if unclear:
        report.notes.append(f"on {', '.join(unclear[:6])}{', ...' if len(unclear) > 6 else ''}"
                            " the target is not clearly below the lessons' formulas' "
                            "compute: there the scale runs from a constant score's (0%) to "
                            "the target's (100%), with no 60% mark between")
    if skipped:
        report.notes.append(f"{len(skipped)} cases left out because DTR's own heuristic "
                            f"does not finish them within the thrash limit: "
                            f"{', '.join(c.name for c in skipped[:12])}"
                            f"{', ...' if len(skipped) > 12 else ''}")
    if finish_report(report, cases, results, outcomes,
                     lambda case, out: heuristic_reproducer(fn, case, out), _not_implemented):
        return report
    report.comparison = comparison_rows(cases[:len(outcomes)], results,
                                        getattr(fn, "__name__", "you"), baselines)
    kinds = {c.ratio_of for c in cases}
    report.comparison_title = ("Compute overhead (total / base; 1.000 = no recomputation), "
                               "per case" + (f"; budgets as a ratio of the {kinds.pop()} peak"
                                             if len(kinds) == 1 else "") + ":")
    if any(v == "thrash" for row in report.comparison for v in row.values()):
        report.notes.append(f"thrash: the run stopped at {THRASH_LIMIT:g}x the base compute; "
                            f"it counts as x{THRASH_LIMIT:g} in the geometric mean (as does "
                            "a run of yours that failed)")
    return report


def _record(fn: Callable, case: HeuristicCase, time_limit: float, mode: str) -> Outcome:
    """The student's half of a case, where the student's code runs: `record_choices` in
    a forked child, or in the `Submission`'s process."""
    spec = case_spec(case)
    if isinstance(fn, Remote):
        return fn.call(record_choices, (spec,), {}, time_limit)
    return run_case(record_choices, (fn, spec), time_limit=time_limit, mode=mode)


def budget_definition(cases: Sequence[HeuristicCase]) -> str:
    """One line for the report header: what the cases' percentages are a ratio of."""
    kinds = {c.ratio_of for c in cases} or {RATIO_OF}
    parts = []
    if "total" in kinds:
        parts.append("a case's percentage is of the TOTAL no-rematerialisation peak "
                     "(everything the step holds: parameters, inputs, outputs + the arena of "
                     "activations, gradients and workspace; the DTR paper's definition)")
    if "arena" in kinds:
        parts.append(f"{'those marked so, ' if len(kinds) > 1 else ''}of the arena peak "
                     "alone (activations, gradients, workspace)")
    return "; ".join(parts)


def _not_implemented(o: Outcome) -> bool:
    if o.error_type == "NotImplementedError":
        return True
    v = o.value if o.ok else None
    return isinstance(v, dict) and v.get("fault") == "error" and \
        str(v.get("message", "")).startswith("NotImplementedError")


def judge_run(case: HeuristicCase, out: Outcome) -> CaseResult:
    """Judge one case from what the student's side sent: a fault fails it (0 points,
    whatever the fault claims); eviction choices are replayed here, and the replay decides:
    it must finish, fit the budget, give a plain run's outputs bit for bit; its compute
    overhead against the target's (`target`: the reference solution's) gives the points."""
    def fail(msg: str, fault: str = "") -> CaseResult:
        return CaseResult(case.name, case.source, False, 0.0, msg, out.seconds,
                          {"fault": fault} if fault else {}, printed=out.printed)

    if not out.ok:
        return fail(f"the run {out.describe()}" + ("\n" + out.traceback if out.traceback
                                                   else ""))
    sent = out.value
    if not isinstance(sent, dict) or ("fault" not in sent and "choices" not in sent):
        return fail(f"the run sent back {str(sent)[:80]} instead of its eviction choices")
    if "fault" in sent:
        program = case_program(case)
        budget, clamped = budget_for(program, case.ratio, case.ratio_of)
        b = program.bounds()
        now, call = sent.get("now", 0.0), sent.get("call")
        r = {**sent, "budget": budget, "clamped": clamped, "peak": b.peak, "total": b.total,
             "external": b.external, "fault": str(sent["fault"])[:20],
             "message": str(sent.get("message", ""))[:2000],
             "now": float(now) if is_number(now) else 0.0,
             "call": call if isinstance(call, dict) else None}
    else:
        r = replay_choices(case, sent["choices"])
    budget = r["budget"]
    where = describe_budget(r, case.ratio, case.ratio_of)
    fault = r.get("fault")
    if fault:
        ref = baseline("dtr", case) if fault == "thrash" else None
        return fail(explain_fault(r, where) + (f" DTR's own heuristic finishes this case at "
                                               f"x{ref:.3f}." if ref is not None else ""),
                    fault)
    if r["max_used"] > budget:
        return fail(f"the arena reached {r['max_used']:,} B, over the {where}")
    if r["digests"] != reference_digests(case):
        return fail("the outputs differ from a plain run (no rematerialisation): a tensor "
                    "was overwritten while still needed")
    mine = r["overhead"]
    m = marks(case)
    share = case_points(mine, m)
    metrics = {"overhead": mine, "target": m["target"], "lesson": m["lesson"],
               "constant": m["zero"], "dtr": baseline("dtr", case),
               "evictions": r["evictions"], "replays": r["replays"], "budget": budget}
    msg = "" if share >= 1.0 else (
        f"correct, but compute x{mine:.3f} against the target's x{m['target']:.3f} (the "
        f"lessons' formula: x{m['lesson']:.3f}, {LESSON_SHARE:.0%} of the case; a "
        f"constant score: x{m['zero']:.3f}, 0%)" if m["clear"] else
        f"correct, but compute x{mine:.3f} against the target's x{m['target']:.3f} (a "
        f"constant score: x{m['zero']:.3f}, 0%)")
    return CaseResult(case.name, case.source, True, share, msg, out.seconds, metrics)


def explain_fault(r: dict, where: str) -> str:
    fault, call = r["fault"], r.get("call") or {}
    name = call.get("name", "?")
    at = f"at clock {r.get('now', 0):g} ({where})"
    if fault == "pinned":
        return (f"{at} your heuristic gave the lowest score ({r.get('returned')}) to "
                f"{name!r}, which is PINNED: an input or output of the op being run (or "
                "about to be). Evicting it would take its bytes from under the kernel. "
                "MegEngine's find_best_tensor only considers tensors that (1) have a "
                "compute path, (2) are in memory and (3) are not pinned: score pinned "
                "tensors math.inf.")
    if fault == "score":
        return (f"{at} scoring {name!r}, your heuristic returned {r.get('returned')}; a "
                "score must be a number (lowest is evicted first; math.inf: never)")
    if fault == "error":
        tb = _student_frames(r.get("traceback") or "")
        return f"{at} scoring {name!r}, your heuristic raised {r['message']}" + \
            (f"\n{tb}" if tb else "")
    if fault == "thrash":
        return (f"the run thrashed ({where}): {r['message']}. A heuristic that evicts "
                "what is about to be needed recomputes the same tensors over and over.")
    if fault == "replay":
        return (f"the eviction choices your run sent back do not replay ({where}): "
                f"{r['message']}. They must come from running the case with your heuristic.")
    if fault == "stuck":
        hint = (" Your heuristic scored every candidate math.inf, so nothing could be "
                "evicted; only pinned tensors should get math.inf." if r.get("every_inf")
                else "")
        return f"the run got stuck ({where}): {r['message']}.{hint}"
    return f"{fault}: {r.get('message')}"


def _student_frames(tb: str) -> str:
    import os
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    keep, skipping = [], False
    for line in tb.splitlines():
        if line.startswith('  File "'):
            skipping = pkg in line
        if not skipping and not line.startswith("Traceback"):
            keep.append(line)
    return "\n".join(keep[-12:])


def heuristic_reproducer(fn: Callable, case: HeuristicCase, out: Outcome) -> str:
    """The one call that went wrong, as code: the view's values and what came back."""
    if case.source == "private":
        return "(a private case: not shown)"
    r = out.value if out.ok and isinstance(out.value, dict) else {}
    call = r.get("call")
    if not call or not isinstance(call, dict):
        return ""
    name = getattr(fn, "__name__", "fn")
    fields = ", ".join(f"{k}={v!r}" for k, v in call.items())
    lines = ["from types import SimpleNamespace",
             f"t = SimpleNamespace({fields})",
             f"{name}(t, {r.get('now', 0.0)!r})"]
    if r.get("fault") == "pinned":
        lines.append(f"# returned {r.get('returned')}: the lowest score of all candidates, "
                     "for a pinned tensor (expected: math.inf)")
    elif r.get("fault") == "score":
        lines.append(f"# returned {r.get('returned')}, which is not a number")
    else:
        lines.append(f"# raised {r.get('message')}")
    lines.append(f"# (the first bad call while running {case.name})")
    return "\n".join(lines)


def comparison_rows(cases: Sequence[HeuristicCase], results: Sequence[CaseResult],
                    you: str, baselines: Sequence[str] = BASELINES) -> list[dict[str, Any]]:
    """Overhead per case: yours, the target's (`target`) and the baselines'; a run that
    did not finish ("thrash", or "failed" for yours) counts as the thrash limit in the
    geometric mean: a heavy penalty, not a dropped case."""
    rows = []
    cols: dict[str, list[float]] = {f"{you} (you)": [], "target": [],
                                    **{b: [] for b in baselines}}
    for c, r in zip(cases, results):
        mine = r.metrics.get("overhead") if r.passed else None
        thrashed = r.metrics.get("fault") == "thrash"
        values = {f"{you} (you)": mine if mine is not None
                  else "thrash" if thrashed else "failed", "target": target(c)[0]}
        for b in baselines:
            v = baseline(b, c)
            values[b] = v if v is not None else "thrash"
        for k, v in values.items():
            cols[k].append(THRASH_LIMIT if isinstance(v, str) else v)
        rows.append({"case": c.name, **values})
    if rows:
        rows.append({"case": "geometric mean", **{k: geometric_mean(v)
                                                  for k, v in cols.items()}})
    return rows
