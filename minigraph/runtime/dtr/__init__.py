"""Dynamic Tensor Rematerialization: run a graph under a byte budget, evicting and
recomputing tensors as it goes [Kirisame 2021], with MegEngine's bookkeeping
[MegEngine 2021] and Coop's sliding window [Zhang 2023].

The textbook version is `minimal.py`: the DTR loop in one short file, read top to bottom
(it borrows from its neighbours only the program it runs, program.py; the budget check,
bounds.py; the tensor states, states.py; and e*'s union-find, neighbourhood.py). Everything
else here is the engine room (the full runtime and its options); tests/test_dtr_minimal.py
holds the full runtime, with its extras switched off, equal to `minimal.py` (same
evictions, same overhead).

    from minigraph.runtime.dtr import DTRExecutor, DTROptions, simulate
    trace = simulate(step_graph, ratio=0.5, heuristic="dtr")     # costs only
    out = DTRExecutor(step_graph, ratio=0.5).run(feeds)          # real kernels, one arena

Modules, in reading order: minimal.py (the textbook DTR), program.py (what is executed,
what counts against the budget), bounds.py (the budgets that matter), options.py (every
option, both modes), states.py (a tensor's state in a run), runtime.py (the state
machine), releases.py (fake deletes and real frees), room.py (making room: evict, compact,
relieve), eviction.py (choosing the victims), hostswap.py (a victim dropped or
swapped to host memory, MegEngine's SWAP and Capuchin's choice), heuristics.py (the scores),
neighbourhood.py (evicted neighbourhoods, e*), allocator.py (the arenas, Coop's
partitioned one), coop_inplace.py (Coop's recomputable in-place), record.py (what a run
did), modes.py (the two modes: `simulate` and `DTRExecutor`, with its `ArrayBackend`).

The research built on this runtime (the DTR authors' simulator's rules and log format,
the portfolio, sqrt(n) and Checkmate, trace generators) is `minigraph.dtr_research`, a
layer above; sweeps over budgets are an experiment, `minigraph.experiments.dtr`.
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
from .heuristics import HEURISTICS, Heuristic, TensorView, get_heuristic, register_heuristic
from .minimal import MinimalDTR, run_minimal
from .modes import ArrayBackend, DTRExecutor, simulate
from .options import DTROptionError, DTROptions
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

__all__ = [
    "ALLOCATORS", "CHEAP_DENSITY", "DTRArena", "FirstFitArena", "IdealArena",
    "PartitionedArena", "cheap_tensors", "ArrayBackend", "DTRExecutor", "simulate",
    "HEURISTICS", "Heuristic", "TensorView", "get_heuristic", "register_heuristic", "Bounds",
    "DTROptionError", "DTROptions", "OpSpec", "Program", "TensorSpec", "budget_bounds",
    "node_costs", "program_from_graph", "DTRError", "DTRRuntime", "DTRTrace",
    "MinimalDTR", "run_minimal",
]
