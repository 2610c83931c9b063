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
candidate is stopped as soon as it costs more than the best so far), and `time_limit`
(`PORTFOLIO_SECONDS` by default) covers the whole call: a candidate still running at the
deadline is stopped, the ones after it are not started (`cut` lists them), and the best
finished one is kept (TimeLimitError when none finished). A real run
(`PortfolioExecutor`) pays that once, in simulation, then runs only the chosen option set
with real kernels.

    from minigraph.dtr_research.portfolio import replay_best, simulate_best
    best = replay_best("model.log", ratio=0.5)          # a DTR simulator trace
    best.label, best.overhead, best.tried                # what won, and every candidate
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import BudgetError, ThrashError, TimeLimitError
from ..graph import Graph
from ..runtime.dtr.heuristics import DTROptionError
from ..runtime.dtr.modes import DTRExecutor
from ..runtime.dtr.options import OPTION_NAMES, DTROptions
from ..runtime.dtr.program import CostSpec, Program, as_program, resolve_budget
from ..runtime.dtr.record import DTRTrace
from ..runtime.dtr.runtime import DTRRuntime
from .simrd import SimrdOptions, SimrdRuntime
from .simrd_log import parse_trace

Candidate = tuple[str, DTROptions | SimrdOptions]

#: The default time limit of one portfolio call, in seconds (its candidates together).
PORTFOLIO_SECONDS = 60.0


# The default (`auto`), our three best rules (any program), then simrd's four as simrd runs
# them (`SimrdOptions`: traces only, left out on a graph's program).
CANDIDATES: tuple[Candidate, ...] = (
    ("auto", DTROptions()),
    ("dtr", DTROptions(heuristic="dtr")),
    ("dtr-live", DTROptions(heuristic="dtr-live")),
    ("msps", DTROptions(heuristic="msps")),
    ("simrd DTR", SimrdOptions("dtr")),
    ("simrd DTREqClass", SimrdOptions("dtr-eqclass")),
    ("simrd LRU", SimrdOptions("lru")),
    ("simrd MSPS", SimrdOptions("msps")),
)


@dataclass
class PortfolioChoice:
    """The cheapest candidate: its `label`, `options` and `trace`; `tried` lists every
    candidate's (label, overhead), `math.inf` where it thrashed, did not fit, was
    stopped once it cost more than the best so far (`prune`) or by the time limit
    (those are also in `cut`)."""
    label: str
    options: DTROptions | SimrdOptions
    trace: DTRTrace
    tried: list[tuple[str, float]] = field(default_factory=list)
    cut: list[str] = field(default_factory=list)     # stopped or skipped at the deadline

    @property
    def overhead(self) -> float:
        return self.trace.overhead


def _candidates(candidates: Iterable[Candidate] | None, keywords: Mapping[str, Any],
                program: Program) -> list[Candidate]:
    """The candidates (default `CANDIDATES`) with `keywords` replaced in each; on a graph's
    program the default's `SimrdOptions` ones are left out (they replay traces only)."""
    if candidates is None:
        candidates = [c for c in CANDIDATES
                      if program.storage is not None or isinstance(c[1], DTROptions)]
    out = []
    for item in candidates:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
                and isinstance(item[1], (DTROptions, SimrdOptions))):
            raise DTROptionError(f"a portfolio candidate is a (label, DTROptions or "
                                 f"SimrdOptions) pair, not {item!r}")
        out.append((item[0], item[1].replace(**keywords) if keywords else item[1]))
    if not out:
        raise DTROptionError("a portfolio needs at least one candidate")
    return out


class _Stop(Exception):
    """A candidate's run reached the portfolio's deadline (caught in `choose`)."""


class _TimedRuntime(DTRRuntime):
    """`DTRRuntime` that checks the deadline `stop_at` before every op it executes."""
    stop_at = math.inf

    def _execute(self, k: int, replay: bool, wanted: int | None) -> None:
        if time.perf_counter() > self.stop_at:
            raise _Stop
        super()._execute(k, replay, wanted)


class _TimedSimrd(SimrdRuntime):
    """`SimrdRuntime` that checks the deadline `stop_at` before every op and eviction."""
    stop_at = math.inf

    def _compute(self, t: int, k: int, remat: bool) -> None:
        if time.perf_counter() > self.stop_at:
            raise _Stop
        super()._compute(t, k, remat)

    def _choose(self) -> int:
        if time.perf_counter() > self.stop_at:
            raise _Stop
        return super()._choose()


def _run(program: Program, budget: int, options: DTROptions | SimrdOptions,
         best: DTRTrace | None,
         stop_at: float = math.inf) -> DTRTrace | None:
    """One candidate's run (what `replay.run_replay` runs), stopped at `stop_at` (`_Stop`); with
    `best` (the cheapest so far), stopped as soon as its rematerialisation costs more
    than best's (it can no longer win), None when best has no rematerialisation at all
    (nothing can cost strictly less)."""
    if best is not None and best.extra_cost <= 0:
        return None
    limit = options.thrash_limit
    if best is not None and best.base_cost > 0:
        limit = min(limit, best.extra_cost / best.base_cost * (1 + 1e-9))
    if isinstance(options, SimrdOptions):       # simrd's rules stop on cost only
        rs = _TimedSimrd(program, budget, options.replace(thrash_limit=limit))
        rs.stop_at = stop_at
        return rs.run()
    rt = _TimedRuntime(program, budget, options=options.replace(thrash_limit=limit))
    # prune by cost only: the replay-count guard stays the candidate's own
    rt._limit_replays = options.thrash_limit * max(program.calls, 1) + 100
    rt.stop_at = stop_at
    return rt.run()


def choose(program: Program, budget: int, candidates: Iterable[Candidate] | None = None, *,
           prune: bool = True, time_limit: float | None = PORTFOLIO_SECONDS,
           **keywords: Any) -> PortfolioChoice:
    """Simulate every candidate on `program` at `budget` arena bytes and keep the lowest
    total cost (ties: the first listed). `keywords` are options replaced in every
    candidate (e.g. `allocator="ideal"`). A candidate that thrashes or does not fit scores
    inf; with `prune`, a candidate is stopped once its rematerialisation costs more than
    the best so far (the choice is the same, only faster; `tried` then shows inf for it).
    `time_limit` (seconds, None: none) covers the call: a candidate running at the
    deadline is stopped and the rest skipped (`cut`). If every candidate fails, the first
    one's error is raised; TimeLimitError if none finished in time."""
    stop_at = time.perf_counter() + _seconds(time_limit)
    best: PortfolioChoice | None = None
    tried: list[tuple[str, float]] = []
    cut: list[str] = []
    first_error: Exception | None = None
    for label, options in _candidates(candidates, keywords, program):
        try:
            trace = None if cut else _run(program, budget, options,
                                          best.trace if best and prune else None, stop_at)
        except (ThrashError, BudgetError) as e:
            first_error = first_error or e
            trace = None
        except _Stop:
            trace = None
        if trace is None and (cut or time.perf_counter() > stop_at):
            cut.append(label)
        tried.append((label, trace.overhead if trace is not None else math.inf))
        if trace is not None and (best is None or trace.total_cost < best.trace.total_cost):
            best = PortfolioChoice(label, options, trace)
    if best is None:
        if cut:
            raise TimeLimitError(f"DTR portfolio on {program.name}: no candidate finished "
                                 f"within the time limit of {time_limit:g} s (stopped: "
                                 f"{', '.join(cut)})")
        assert first_error is not None
        raise first_error
    best.tried, best.cut = tried, cut
    return best


def _seconds(time_limit: Any) -> float:
    """A portfolio's time limit in seconds (None: no limit, inf); DTROptionError for
    anything that is not a number > 0."""
    if time_limit is None:
        return math.inf
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or \
            not time_limit > 0:
        raise DTROptionError(f"time_limit must be a number of seconds > 0 or None, not "
                             f"{time_limit!r}")
    return float(time_limit)


def simulate_best(source: Graph | Program, budget: int | None = None, *,
                  ratio: float | None = None, ratio_of: str = "total",
                  schedule: Sequence[str] | None = None, alignment: int = 512,
                  costs: CostSpec = "flops", candidates: Iterable[Candidate] | None = None,
                  prune: bool = True, time_limit: float | None = PORTFOLIO_SECONDS,
                  **keywords: Any) -> PortfolioChoice:
    """`simulate` with the portfolio: the same program and budget for every candidate
    (`time_limit` as in `choose`)."""
    program = as_program(source, schedule, alignment, costs)
    b = resolve_budget(program, budget, ratio, ratio_of)
    return choose(program, b, candidates, prune=prune, time_limit=time_limit, **keywords)


def replay_best(source: Any, budget: int | None = None, *, ratio: float | None = None,
                ratio_of: str = "baseline", alignment: int = 1, constants: str = "inside",
                candidates: Iterable[Candidate] | None = None, prune: bool = True,
                time_limit: float | None = PORTFOLIO_SECONDS,
                **keywords: Any) -> PortfolioChoice:
    """`replay_trace` with the portfolio: the trace is parsed once and every candidate runs
    at the same bytes (by default the authors' budget, as `replay_trace`). `time_limit`
    (seconds, None: none) covers the call, parsing included (see `choose`)."""
    t0 = time.perf_counter()
    program = source if isinstance(source, Program) else \
        parse_trace(source, alignment, constants=constants)
    b = trace_arena(program, budget, ratio, ratio_of)
    parsed = time.perf_counter() - t0
    left = None if time_limit is None else max(_seconds(time_limit) - parsed, 1e-3)
    try:
        return choose(program, b, candidates, prune=prune, time_limit=left, **keywords)
    except TimeLimitError as e:
        raise TimeLimitError(f"{e}; {time_limit:g} s were asked for, of which parsing the "
                             f"trace took {parsed:.2f} s") from None


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
                 time_limit: float | None = PORTFOLIO_SECONDS, **kwargs: Any):
        if "options" in kwargs:
            raise DTROptionError("PortfolioExecutor takes `candidates` (label, DTROptions) "
                                 "pairs, not one `options`")
        keywords = {k: v for k, v in kwargs.items() if k in OPTION_NAMES}
        rest = {k: v for k, v in kwargs.items() if k not in OPTION_NAMES}
        first = DTRExecutor(graph, budget, ratio=ratio, **rest)   # program and arena bytes
        self.choice = choose(first.program, first.budget, candidates, prune=prune,
                             time_limit=time_limit, **keywords)
        self.executor = DTRExecutor(graph, first.budget, options=self.choice.options, **rest)

    @property
    def last_trace(self) -> DTRTrace | None:
        return self.executor.last_trace

    def run(self, feeds: Mapping[str, Any] | None = None, **kw: Any) -> dict[str, np.ndarray]:
        """Run the chosen option set once with real kernels (as `DTRExecutor.run`)."""
        return self.executor.run(feeds, **kw)
