"""Choosing the eviction rule by simulation: a portfolio of option sets, the cheapest kept.

No single eviction rule wins at every budget: DTR's h_DTR [Kirisame 2021] is best at most,
Capuchin's MSPS (as the DTR paper evaluates it) at some mid-range budgets, `dtr-live`
when memory is tight. Simulated mode costs no kernels, so instead of guessing we try them
all: `choose` runs each candidate option set on the program at the budget and keeps the
lowest total compute (ties: the first listed). A candidate that thrashes or cannot fit
counts as infinitely expensive. By construction the choice is at or below every candidate,
including the simrd-compatible configurations of the DTR authors' four heuristics, wherever
those reproduce simrd.

Its time is the SUM of the candidates' simulations (at most len(candidates) runs; a
candidate is stopped as soon as it costs more than the best so far). A real run
(`PortfolioExecutor`) pays that once, in simulation, then runs only the chosen option set
with real kernels.

    from minigraph.runtime.dtr.portfolio import replay_best, simulate_best
    best = replay_best("model.log", ratio=0.5)          # a DTR simulator trace
    best.label, best.overhead, best.tried                # what won, and every candidate
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import BudgetError, ThrashError
from ...graph import Graph
from .heuristics import DTROptionError
from .modes import DTRExecutor, simulate
from .options import OPTION_NAMES, DTROptions
from .program import CostSpec, Program, as_program, resolve_budget
from .record import DTRTrace
from .runtime import DTRRuntime
from .simrd_log import parse_trace

Candidate = tuple[str, DTROptions]


# Our three best rules (any program), then simrd's four as simrd runs them (`rules="simrd"`:
# traces only, left out on a graph's program).
CANDIDATES: tuple[Candidate, ...] = (
    ("dtr", DTROptions()),
    ("dtr-live", DTROptions(heuristic="dtr-live")),
    ("msps", DTROptions(heuristic="msps")),
    ("simrd DTR", DTROptions.simrd("dtr")),
    ("simrd DTREqClass", DTROptions.simrd("dtr-eqclass")),
    ("simrd LRU", DTROptions.simrd("lru")),
    ("simrd MSPS", DTROptions.simrd("msps")),
)


@dataclass
class PortfolioChoice:
    """The cheapest candidate: its `label`, `options` and `trace`; `tried` lists every
    candidate's (label, overhead), `math.inf` where it thrashed, did not fit, or was
    stopped once it cost more than the best so far (`prune`)."""
    label: str
    options: DTROptions
    trace: DTRTrace
    tried: list[tuple[str, float]] = field(default_factory=list)

    @property
    def overhead(self) -> float:
        return self.trace.overhead


def _candidates(candidates: Iterable[Candidate] | None, keywords: Mapping[str, Any],
                program: Program) -> list[Candidate]:
    """The candidates (default `CANDIDATES`) with `keywords` replaced in each; on a graph's
    program the default's `rules="simrd"` ones are left out (they replay traces only)."""
    if candidates is None:
        candidates = [c for c in CANDIDATES
                      if program.storage is not None or c[1].rules == "minigraph"]
    out = []
    for item in candidates:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
                and isinstance(item[1], DTROptions)):
            raise DTROptionError(f"a portfolio candidate is a (label, DTROptions) pair, "
                                 f"not {item!r}")
        out.append((item[0], item[1].replace(**keywords) if keywords else item[1]))
    if not out:
        raise DTROptionError("a portfolio needs at least one candidate")
    return out


def _run(program: Program, budget: int, options: DTROptions,
         best: DTRTrace | None) -> DTRTrace | None:
    """One candidate's run; with `best` (the cheapest so far), stopped as soon as its
    rematerialisation costs more than best's (it can no longer win), None when best has
    no rematerialisation at all (nothing can cost strictly less)."""
    if best is not None and best.extra_cost <= 0:
        return None
    if best is None or best.base_cost <= 0:
        return simulate(program, budget, options=options)
    limit = best.extra_cost / best.base_cost * (1 + 1e-9)
    if limit >= options.thrash_limit:
        return simulate(program, budget, options=options)
    if options.rules != "minigraph":       # simrd's rules stop on cost only
        return simulate(program, budget, options=options.replace(thrash_limit=limit))
    rt = DTRRuntime(program, budget, options=options.replace(thrash_limit=limit))
    # prune by cost only: the replay-count guard stays the candidate's own
    rt._limit_replays = options.thrash_limit * max(program.calls, 1) + 100
    return rt.run()


def choose(program: Program, budget: int, candidates: Iterable[Candidate] | None = None, *,
           prune: bool = True, **keywords: Any) -> PortfolioChoice:
    """Simulate every candidate on `program` at `budget` arena bytes and keep the lowest
    total cost (ties: the first listed). `keywords` are options replaced in every
    candidate (e.g. `allocator="ideal"`). A candidate that thrashes or does not fit scores
    inf; with `prune`, a candidate is stopped once its rematerialisation costs more than
    the best so far (the choice is the same, only faster; `tried` then shows inf for it).
    If every candidate fails, the first one's error is raised."""
    best: PortfolioChoice | None = None
    tried: list[tuple[str, float]] = []
    first_error: Exception | None = None
    for label, options in _candidates(candidates, keywords, program):
        try:
            trace = _run(program, budget, options, best.trace if best and prune else None)
        except (ThrashError, BudgetError) as e:
            first_error = first_error or e
            trace = None
        tried.append((label, trace.overhead if trace is not None else math.inf))
        if trace is not None and (best is None or trace.total_cost < best.trace.total_cost):
            best = PortfolioChoice(label, options, trace)
    if best is None:
        assert first_error is not None
        raise first_error
    best.tried = tried
    return best


def simulate_best(source: Graph | Program, budget: int | None = None, *,
                  ratio: float | None = None, ratio_of: str = "total",
                  schedule: Sequence[str] | None = None, alignment: int = 512,
                  costs: CostSpec = "flops", candidates: Iterable[Candidate] | None = None,
                  prune: bool = True, **keywords: Any) -> PortfolioChoice:
    """`simulate` with the portfolio: the same program and budget for every candidate."""
    program = as_program(source, schedule, alignment, costs)
    b = resolve_budget(program, budget, ratio, ratio_of)
    return choose(program, b, candidates, prune=prune, **keywords)


def replay_best(source: Any, budget: int | None = None, *, ratio: float | None = None,
                ratio_of: str = "baseline", alignment: int = 1, constants: str = "inside",
                candidates: Iterable[Candidate] | None = None, prune: bool = True,
                **keywords: Any) -> PortfolioChoice:
    """`replay_trace` with the portfolio: the trace is parsed once and every candidate runs
    at the same bytes (by default the authors' budget, as `replay_trace`)."""
    program = source if isinstance(source, Program) else \
        parse_trace(source, alignment, constants=constants)
    b = trace_arena(program, budget, ratio, ratio_of)
    return choose(program, b, candidates, prune=prune, **keywords)


def trace_arena(program: Program, budget: int | None = None, ratio: float | None = None,
                ratio_of: str = "baseline") -> int:
    """The bytes `replay_trace` gives `program` (by default the authors' budget)."""
    return resolve_budget(program, budget, ratio, ratio_of)


class PortfolioExecutor:
    """Real mode with the portfolio: the candidates are simulated on the graph at the
    budget (first-fit arena, as real runs use), then the cheapest runs with real kernels.

        ex = PortfolioExecutor(step_graph, ratio=0.5)
        ex.choice.label, ex.choice.tried          # decided at construction, by simulation
        out = ex.run(feeds)                       # the chosen option set's DTRExecutor

    Arguments as for `DTRExecutor`, plus `candidates` (default `CANDIDATES`); option
    keywords are replaced in every candidate. Construction costs the candidates' summed
    simulations.
    """

    def __init__(self, graph: Graph, budget: int | None = None, *, ratio: float | None = None,
                 candidates: Iterable[Candidate] | None = None, prune: bool = True,
                 **kwargs: Any):
        if "options" in kwargs:
            raise DTROptionError("PortfolioExecutor takes `candidates` (label, DTROptions) "
                                 "pairs, not one `options`")
        keywords = {k: v for k, v in kwargs.items() if k in OPTION_NAMES}
        rest = {k: v for k, v in kwargs.items() if k not in OPTION_NAMES}
        first = DTRExecutor(graph, budget, ratio=ratio, **rest)   # program and arena bytes
        self.choice = choose(first.program, first.budget, candidates, prune=prune, **keywords)
        self.executor = DTRExecutor(graph, first.budget, options=self.choice.options, **rest)

    @property
    def last_trace(self) -> DTRTrace | None:
        return self.executor.last_trace

    def run(self, feeds: Mapping[str, Any] | None = None, **kw: Any) -> dict[str, np.ndarray]:
        """Run the chosen option set once with real kernels (as `DTRExecutor.run`)."""
        return self.executor.run(feeds, **kw)
