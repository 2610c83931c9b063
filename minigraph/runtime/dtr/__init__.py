"""Dynamic Tensor Rematerialization: run a graph under a byte budget, evicting and
recomputing tensors as it goes (Kirisame et al., ICLR 2021; MegEngine's DTR, seed 003;
Coop's sliding window, seed 002).

    from minigraph.runtime.dtr import DTRExecutor, simulate, sweep
    trace = simulate(step_graph, ratio=0.5, heuristic="dtr")     # costs only
    out = DTRExecutor(step_graph, ratio=0.5).run(feeds)          # real kernels, one arena

Modules, in reading order: program.py (what is executed, what counts against the budget),
allocator.py (first-fit arena), neighborhood.py (evicted neighbourhoods, e*),
heuristics.py (the scores), runtime.py (the state machine), executor.py (the two modes),
checkpoint.py (static baselines), sweep.py, trace.py (the DTR simulator's log format).
"""

from .allocator import ALLOCATORS, FirstFitArena, IdealArena
from .checkpoint import (
    StaticResult,
    checkmate,
    chen_at,
    chen_curve,
    chen_sqrt,
    evaluate_sequence,
)
from .executor import ArrayBackend, DTRExecutor, simulate
from .heuristics import HEURISTICS, Heuristic, TensorView, get_heuristic, register_heuristic
from .program import (
    Bounds,
    OpSpec,
    Program,
    TensorSpec,
    budget_bounds,
    node_costs,
    program_from_graph,
)
from .runtime import DTRError, DTRRuntime, DTRTrace
from .sweep import SweepRow, format_rows, plot_sweep, sweep
from .trace import TraceError, parse_trace, replay_trace, write_trace

__all__ = [
    "ALLOCATORS", "FirstFitArena", "IdealArena", "StaticResult", "checkmate", "chen_at",
    "chen_curve", "chen_sqrt", "evaluate_sequence", "ArrayBackend", "DTRExecutor", "simulate",
    "HEURISTICS", "Heuristic", "TensorView", "get_heuristic", "register_heuristic", "Bounds",
    "OpSpec", "Program", "TensorSpec", "budget_bounds", "node_costs", "program_from_graph",
    "DTRError", "DTRRuntime", "DTRTrace", "SweepRow", "format_rows", "plot_sweep", "sweep",
    "TraceError", "parse_trace", "replay_trace", "write_trace",
]
