"""Every option of the DTR runtime in one frozen record, the same in both modes.

`simulate`, `DTRExecutor`, `replay_trace`, the sweeps and `DTRRuntime` itself all take a
`DTROptions` (or its fields as keywords: `heuristic="lru"` is `DTROptions(heuristic="lru")`).
A keyword that is not a field raises `DTROptionError` naming the fields, so a typo never
runs the defaults silently. What is *run* (the graph, its schedule, alignment and costs)
and *how much memory* (a budget or a ratio) are arguments of their own, not options.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from ...errors import SwapError
from ...memory.swap_plan import machine_of
from .allocator import ALLOCATORS, partition_threshold
from .heuristics import DTROptionError, get_heuristic

DEFRAG_MODES = ("first", "last-resort", "never")
EVICT_MODES = ("drop", "swap", "cheaper")   # what an eviction does: hostswap.py

__all__ = ["DEFRAG_MODES", "EVICT_MODES", "DTROptionError", "DTROptions", "dtr_options"]


@dataclass(frozen=True)
class DTROptions:
    """How the DTR runtime runs.

    `heuristic`: a name of `HEURISTICS`, a `Heuristic` or a function `score(t, now)`;
    the default is h_DTR ("dtr") [Kirisame 2021], chosen out of sample: held out one
    trace at a time, no rule that picks among scores (`auto`, which picks h_DTR,
    dtr-live or MSPS per run from two fitted thresholds: heuristics.auto_choice) stayed
    within 1% of h_DTR on every held-out cell (minigraph.dtr_research.holdout,
    benchmarks/dtr_heuristics.py); "auto" remains an option;
    `heuristic_args` are bound to it (megengine's a, b, c, r; coop's `cost`).
    `allocator`: "first-fit" (addresses, fragmentation) or "ideal" (a counter; simulated
    mode only). `defrag`: when the free bytes would suffice but no block is large enough,
    "first" compacts at once, as MegEngine does [MegEngine 2021] (since v1.7 "defrag is on
    by default"); "last-resort" evicts by the heuristic and compacts only when nothing is
    left to evict; "never" only evicts. `dead_first`: a dead tensor kept after a
    rematerialisation is evicted before any live one, unless an evicted live tensor
    reads it (eviction.wanted_back); False scores it like any other (so does the DTR
    authors' simulator [Kirisame 2021], whose other rules differ too:
    `minigraph.dtr_research.SimrdOptions`). `protect`: the inputs that ops waiting below a
    recomputation still need are evicted only when nothing else can go; False offers them like any
    other. `relief`: when nothing can be evicted, let go of the inputs that those waiting
    ops have pinned (they are fetched again when those ops resume); False stops with
    BudgetError at once, as minimal.py does. `sample`: False, True for ~sqrt(N)
    candidates at seeded random strides, or a count; `seed` seeds it (only that: the
    kernels' seed is `DTRExecutor(kernel_seed=)`). `thrash_limit`: stop
    with ThrashError when rematerialisation costs more than this many times the base
    cost. `timeline`: record (clock, bytes in use) after every op. `select`: a function
    `(candidates, need) -> TensorView | None` that replaces the default victim choice.
    Coop's two layout ideas [Zhang 2023], for any heuristic: `partition` (True, or a cost
    per byte) places cheap tensors from the bottom of the arena and the others from the
    top (allocator.py); `recomputable_inplace` lets an in-place capable op write its
    output over an input it is the last reader of, the input becoming evicted but
    recomputable (coop_inplace.py). The DTR authors' simulator's rules over storages are
    not an option of this runtime: they are `minigraph.dtr_research` (`SimrdOptions`,
    `replay_trace`), which runs on this runtime's programs and traces.
    Swap inside DTR (MegEngine's EvictType::SWAP [MegEngine 2021], Capuchin's choice
    [Peng 2020]; hostswap.py): `evict` "drop" (the default: recompute it later), "swap"
    (copy every victim to host memory while `host_limit` allows, drop it otherwise) or
    "cheaper" (per tensor, the cheaper of its recomputation and its two copies);
    `host_limit` bytes of host memory for swapped tensors (None: unlimited); `machine` a
    `memory.swap.Machine` or a name of `swap_plan.MACHINES` (a copy takes latency +
    bytes / bandwidth seconds); `cost_rate` converts those seconds into the runtime's
    cost unit: "flops" (the default, costs are FLOPs) x `machine.compute`, or a number of
    cost units per second (1.0 when the costs are seconds).
    """
    heuristic: Any = "dtr"
    heuristic_args: Mapping[str, Any] | None = None
    allocator: str = "first-fit"
    defrag: str = "first"
    dead_first: bool = True
    protect: bool = True
    relief: bool = True
    sample: bool | int = False
    seed: int = 0
    thrash_limit: float = 10.0
    timeline: bool = True
    select: Callable[[list, int], Any] | None = None
    partition: bool | float = False
    recomputable_inplace: bool = False
    evict: str = "drop"
    host_limit: int | None = None
    machine: Any = "pcie4"
    cost_rate: str | float = "flops"

    def __post_init__(self) -> None:
        get_heuristic(self.heuristic)       # DTROptionError naming the known ones
        checked_thrash_limit(self.thrash_limit)
        if self.allocator not in ALLOCATORS:
            raise DTROptionError(f"allocator must be one of {', '.join(ALLOCATORS)}, "
                                 f"not {self.allocator!r}")
        if self.defrag not in DEFRAG_MODES:
            raise DTROptionError(f"defrag must be one of {', '.join(DEFRAG_MODES)}, "
                                 f"not {self.defrag!r}")
        if partition_threshold(self.partition) is not None and self.allocator != "first-fit":
            raise DTROptionError(f"partition places tensors by address: it needs "
                                 f"allocator='first-fit', not {self.allocator!r}")
        if not isinstance(self.recomputable_inplace, bool):
            raise DTROptionError(f"recomputable_inplace must be True or False, not "
                                 f"{self.recomputable_inplace!r}")
        checked_swap(self)

    def replace(self, **changes: Any) -> DTROptions:
        """A copy with `changes` (option names checked)."""
        return replace(self, **checked_names(changes))


OPTION_NAMES = tuple(f.name for f in fields(DTROptions))


def checked_thrash_limit(t: Any) -> float:
    """`t` if it is a number > 0 (math.inf: never stop), else DTROptionError."""
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not t > 0:
        raise DTROptionError(f"thrash_limit must be a number > 0 (math.inf: never "
                             f"stop), not {t!r}")
    return t


def checked_swap(o: DTROptions) -> None:
    """The swap options (`evict`, `host_limit`, `machine`, `cost_rate`), else
    DTROptionError naming the value."""
    if o.evict not in EVICT_MODES:
        raise DTROptionError(f"evict must be one of {', '.join(EVICT_MODES)}, not "
                             f"{o.evict!r}")
    h = o.host_limit
    if h is not None and (isinstance(h, bool) or not isinstance(h, int) or h < 0):
        raise DTROptionError(f"host_limit must be a number of bytes >= 0 (None: "
                             f"unlimited), not {h!r}")
    try:
        machine_of(o.machine)
    except SwapError as e:
        raise DTROptionError(f"machine: {e}") from None
    r = o.cost_rate
    if r != "flops" and (isinstance(r, bool) or not isinstance(r, (int, float))
                         or not r > 0):
        raise DTROptionError(f"cost_rate must be 'flops' or a number > 0 of cost units "
                             f"per second, not {r!r}")


def checked_names(keywords: Mapping[str, Any]) -> dict[str, Any]:
    """`keywords` as a dict, if every name is an option's, else DTROptionError naming
    the options (a typo never runs the defaults silently)."""
    unknown = [k for k in keywords if k not in OPTION_NAMES]
    if unknown:
        raise DTROptionError(f"unknown DTR option {unknown[0]!r}; the options are "
                             f"{', '.join(OPTION_NAMES)}")
    return dict(keywords)


def dtr_options(options: DTROptions | None = None, **keywords: Any) -> DTROptions:
    """`options` (default `DTROptions()`) with `keywords` replaced: every entry point's
    one way of reading its options."""
    if options is not None and not isinstance(options, DTROptions):
        raise DTROptionError(f"options must be a DTROptions, not {type(options).__name__}")
    base = options if options is not None else DTROptions()
    return base.replace(**keywords) if keywords else base
