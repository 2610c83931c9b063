"""The DTR research wing: reproductions and baselines built on the DTR runtime, never part
of it (the runtime imports nothing from here; import-linter holds the arrow one way).

* simrd.py: the DTR authors' simulator's rules over storages [Kirisame 2021]
  (`SimrdOptions`, `SimrdRuntime`), reproduced cell for cell (benchmarks/dtr_reference.py);
* simrd_log.py: that simulator's log format and its reader (`parse_trace`);
  simrd_write.py: a minigraph graph written as such a log (`write_trace`);
  replay.py: a log replayed by either rules (`replay_trace`, `run_replay`);
* tracegen.py: synthetic training logs in that format (`generated_trace`);
* portfolio.py: choosing the option set by simulation, the cheapest of several
  (`replay_best`, `simulate_best`, `PortfolioExecutor`);
* checkpoint.py: static rematerialisation baselines on DTR's cost model, Chen et al.'s
  sqrt(n) [Chen 2016] and Checkmate's optimum [Jain 2020] (`chen_sqrt`, `checkmate`).

Each reuses the runtime's `Program`, budgets and `DTRTrace`, so its numbers stand beside
DTR's in one table.

    from minigraph.dtr_research import SimrdOptions, parse_trace, replay_trace
    tr = replay_trace("model.log", ratio=0.5, options=SimrdOptions("dtr"))
"""

from .checkpoint import (
    StaticResult,
    checkmate,
    chen_at,
    chen_curve,
    chen_sqrt,
    evaluate_sequence,
)
from .portfolio import CANDIDATES, PortfolioChoice, PortfolioExecutor, replay_best, simulate_best
from .replay import replay_trace, run_replay
from .simrd import SIMRD_SCORES, SimrdOptions, SimrdRuntime
from .simrd_log import SimrdLogError, parse_trace
from .simrd_write import write_trace
from .tracegen import GENERATED, generated_trace

__all__ = [
    "StaticResult", "checkmate", "chen_at", "chen_curve", "chen_sqrt", "evaluate_sequence",
    "CANDIDATES", "PortfolioChoice", "PortfolioExecutor", "replay_best", "simulate_best",
    "replay_trace", "run_replay", "SIMRD_SCORES", "SimrdOptions", "SimrdRuntime",
    "SimrdLogError", "parse_trace", "write_trace", "GENERATED", "generated_trace",
]
