"""Dynamic Tensor Rematerialization: run a graph under a byte budget, evicting and
recomputing tensors as it goes [Kirisame 2021], with MegEngine's bookkeeping
[MegEngine 2021] and Coop's sliding window [Zhang 2023].

The textbook version is `minimal.py`: DTR in one short file, read top to bottom. Everything
else here is the engine room (the full runtime and its options, the simrd rules, the
portfolio, the static baselines); tests/test_dtr_minimal.py holds the full runtime, with
its extras switched off, equal to `minimal.py` (same evictions, same overhead).

    from minigraph.runtime.dtr import DTRExecutor, DTROptions, simulate
    trace = simulate(step_graph, ratio=0.5, heuristic="dtr")     # costs only
    out = DTRExecutor(step_graph, ratio=0.5).run(feeds)          # real kernels, one arena

Modules, in reading order: minimal.py (the textbook DTR), program.py (what is executed,
what counts against the budget), bounds.py (the budgets that matter), options.py (every
option, both modes), states.py (a tensor's state in a run), runtime.py (the state
machine), eviction.py (choosing the victims), heuristics.py (the scores), neighborhood.py
(evicted neighbourhoods, e*), allocator.py (the arenas, Coop's partitioned one),
coop_inplace.py (Coop's recomputable in-place), record.py (what a run did), modes.py (the
two modes: `simulate`, which picks the runtime, and `DTRExecutor`), checkpoint.py (static
baselines), simrd.py (the DTR authors' simulator's rules, over storages:
`DTROptions.simrd()`), simrd_log.py (that simulator's log format), tracegen.py (synthetic
training logs in it), portfolio.py (choosing the option set by simulation: the cheapest of
several). Sweeps over budgets are an experiment: `minigraph.experiments.dtr`.
"""

from .allocator import (
    ALLOCATORS,
    CHEAP_DENSITY,
    DTRArena,
    FirstFitArena,
    IdealArena,
    PartitionedArena,
    cheap_tensors,
)
from .bounds import Bounds
from .checkpoint import (
    StaticResult,
    checkmate,
    chen_at,
    chen_curve,
    chen_sqrt,
    evaluate_sequence,
)
from .heuristics import HEURISTICS, Heuristic, TensorView, get_heuristic, register_heuristic
from .minimal import MinimalDTR, run_minimal
from .modes import ArrayBackend, DTRExecutor, run_program, simulate
from .options import DTROptionError, DTROptions
from .portfolio import PortfolioExecutor, replay_best, simulate_best
from .program import (
    OpSpec,
    Program,
    TensorSpec,
    budget_bounds,
    node_costs,
    program_from_graph,
)
from .record import DTRTrace
from .runtime import DTRError, DTRRuntime
from .simrd import SIMRD_SCORES, SimrdRuntime
from .simrd_log import SimrdLogError, parse_trace, replay_trace, write_trace
from .tracegen import generated_trace

__all__ = [
    "ALLOCATORS", "CHEAP_DENSITY", "DTRArena", "FirstFitArena", "IdealArena",
    "PartitionedArena", "cheap_tensors", "StaticResult", "checkmate", "chen_at",
    "chen_curve", "chen_sqrt", "evaluate_sequence", "ArrayBackend", "DTRExecutor", "simulate",
    "HEURISTICS", "Heuristic", "TensorView", "get_heuristic", "register_heuristic", "Bounds",
    "DTROptionError", "DTROptions", "OpSpec", "Program", "TensorSpec", "budget_bounds",
    "node_costs", "program_from_graph", "DTRError", "DTRRuntime", "DTRTrace",
    "SimrdLogError", "parse_trace", "replay_trace", "write_trace", "SIMRD_SCORES",
    "SimrdRuntime", "run_program", "generated_trace", "PortfolioExecutor", "replay_best",
    "simulate_best", "MinimalDTR", "run_minimal",
]
