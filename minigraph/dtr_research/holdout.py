"""Choosing DTR's default out of sample: leave one trace out.

`auto` picks h_DTR, `dtr-live` or MSPS (ties to the stalest) once per run, from two
thresholds: the cost-per-byte dispersion of the program (`cost_per_byte_cv`) and the
budget's share of the no-eviction peak (`heuristics.auto_choice`). Thresholds fitted on
the traces they are then scored on prove nothing. Here a rule counts only by its score on
a trace it was not fitted to: for each trace, the thresholds are fitted on all the
others (`fit`: the lowest summed log overhead, a failed run counted at the overhead it
was stopped at), then applied to that trace's cells (`leave_one_out`). The fitted rule is
compared cell by cell with h_DTR, the rule it would replace (`against_dtr`): the target
is never more than 1% worse on a held-out cell, and never failing where h_DTR finishes.

A `Cell` is one trace at one budget: the two features the rule reads and the overhead
(total compute / base compute) of each score it may pick. `measure` runs them; a
benchmark that has run them already builds the cells itself.

    cells = [c for p in programs for c in measure(p, (0.8, 0.6, 0.4))]
    held_out = [pc for fold in leave_one_out(cells) for pc in fold.picked]
    against_dtr(held_out).passes          # False: the fitted rule loses somewhere
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..errors import BudgetError, ThrashError
from ..runtime.dtr.heuristics import cost_per_byte_cv
from ..runtime.dtr.modes import simulate
from ..runtime.dtr.program import Program, resolve_budget

#: The scores `auto` picks from (heuristics.auto_choice), and the measured variant of the
#: default with dead-first off (the one other rule a default could drop).
SCORES = ("dtr", "dtr-live", "msps-stale")
NO_DEAD_FIRST = "dtr, dead_first=False"
WORSE = 1.01           # "worse than h_DTR": more than 1% more total compute


@dataclass
class Cell:
    """One trace at one budget: `cv` (the program's cost-per-byte dispersion), `share`
    (budget / no-eviction peak) and `overhead`: score -> total / base compute (math.inf
    where the run thrashed or could not fit)."""
    trace: str
    ratio: float
    cv: float
    share: float
    overhead: dict[str, float] = field(default_factory=dict)


def measure(program: Program, ratios: Sequence[float], thrash_limit: float = 1.0,
            ratio_of: str = "baseline") -> list[Cell]:
    """The cells of `program` at `ratios` (of the baseline peak by default, as
    `replay_trace`): each score of `SCORES` and `NO_DEAD_FIRST` run once, stopped at
    `thrash_limit` x the base compute; a ratio below the smallest budget is left out."""
    cv, peak, out = cost_per_byte_cv(program), program.bounds().peak, []
    runs = [(h, {"heuristic": h}) for h in SCORES] + \
        [(NO_DEAD_FIRST, {"heuristic": "dtr", "dead_first": False})]
    for r in ratios:
        try:
            budget = resolve_budget(program, None, r, ratio_of)
        except BudgetError:
            continue
        cell = Cell(program.name, r, cv, budget / peak if peak else math.inf)
        for label, kw in runs:
            try:
                cell.overhead[label] = simulate(program, budget, thrash_limit=thrash_limit,
                                                **kw).overhead
            except (ThrashError, BudgetError):
                cell.overhead[label] = math.inf
        out.append(cell)
    return out


def auto_rule(cv_at: float, share_at: float) -> Callable[[Cell], str]:
    """auto's kind of rule with thresholds `cv_at` and `share_at`: MSPS-stale where the
    cost per byte varies (cv >= cv_at), else h_DTR at a generous budget (share >=
    share_at), `dtr-live` below it."""
    def pick(c: Cell) -> str:
        if c.cv >= cv_at:
            return "msps-stale"
        return "dtr" if c.share >= share_at else "dtr-live"
    return pick


def _cuts(values: Sequence[float]) -> list[float]:
    """Thresholds that split `values` every way: below all, between neighbours, above all."""
    v = sorted(set(values))
    return [-math.inf] + [(a + b) / 2 for a, b in zip(v, v[1:])] + [math.inf]


def fit(cells: Sequence[Cell], cap: float = 2.0) -> tuple[float, float]:
    """The thresholds (cv_at, share_at) with the lowest summed log overhead over `cells`
    (a failed run counts as `cap`, the overhead it was stopped at); ties: the first in
    order of cv_at, then share_at, ascending."""
    best, best_loss = (math.inf, -math.inf), math.inf
    for cv_at in _cuts([c.cv for c in cells]):
        for share_at in _cuts([c.share for c in cells]):
            pick = auto_rule(cv_at, share_at)
            loss = sum(math.log(min(c.overhead[pick(c)], cap)) for c in cells)
            if loss < best_loss - 1e-12:
                best, best_loss = (cv_at, share_at), loss
    return best


@dataclass
class Fold:
    """One held-out trace: the thresholds fitted on the others and what they picked on
    it, cell by cell (`picked`: (cell, score))."""
    trace: str
    cv_at: float
    share_at: float
    picked: list[tuple[Cell, str]]


def leave_one_out(cells: Sequence[Cell], cap: float = 2.0) -> list[Fold]:
    """For each trace, `fit` on every other trace's cells and apply to its own."""
    traces = list(dict.fromkeys(c.trace for c in cells))
    folds = []
    for t in traces:
        cv_at, share_at = fit([c for c in cells if c.trace != t], cap)
        pick = auto_rule(cv_at, share_at)
        folds.append(Fold(t, cv_at, share_at,
                          [(c, pick(c)) for c in cells if c.trace == t]))
    return folds


@dataclass
class Record:
    """A rule against h_DTR over some cells: `worse` (more than 1% more compute, or
    failed where h_DTR finished; `failed` counts the latter alone), `better` (more than
    1% less), `cells`, and the worst ratio rule / h_DTR where both finished."""
    cells: int = 0
    worse: int = 0
    better: int = 0
    failed: int = 0
    worst: float = 1.0

    @property
    def passes(self) -> bool:
        """The held-out target: never worse than h_DTR by more than 1%, never failing
        where h_DTR finishes."""
        return self.worse == 0 and self.failed == 0


def against_dtr(picked: Sequence[tuple[Cell, str]]) -> Record:
    """The `Record` of the score picked in each cell against h_DTR's run of that cell."""
    r = Record()
    for c, h in picked:
        x, d = c.overhead[h], c.overhead["dtr"]
        r.cells += 1
        if d < math.inf and x == math.inf:
            r.failed += 1
            r.worse += 1
        elif d < math.inf and x > d * WORSE:
            r.worse += 1
        elif x < math.inf and x * WORSE < d:
            r.better += 1
        if x < math.inf and d < math.inf:
            r.worst = max(r.worst, x / d)
    return r
