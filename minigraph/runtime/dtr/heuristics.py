"""Eviction heuristics: one small function each, chosen by name, or your own.

A heuristic scores a resident, evictable tensor; the runtime evicts the LOWEST score first:

    def score(t: TensorView, now: float) -> float

`t` is a read-only view of one tensor at the moment of the decision (every property is
computed on demand, so a score that only reads `t.staleness` costs only that):

    t.name          tensor name                    t.size          bytes it occupies (aligned)
    t.cost          c0: cost of its producer op    t.staleness     now - t.last_access (> 0)
    t.last_access   clock of the last read/write   t.recomputes    times it was rematerialised
    t.neighbour_cost evicted neighbourhood cost: evicted ancestors and descendants reachable
                    through evicted tensors: DTR's e*(t), t's own cost c0 not included
    t.live_neighbour_cost  the same without dead evicted descendants that nothing live
                    needs any more (dtr-live)
    t.eqclass_cost  the same through union-find classes over inputs and readers (DTR-eq)
    t.megengine_cost MegEngine 1.4's estimate_neighbor_cost (inputs and sibling outputs)
    t.ancestor_cost c0 plus every evicted ancestor needed to recompute it (MSPS)
    t.evicted_neighbours  how many of its neighbours are evicted
    t.address       offset in the arena (None with the ideal allocator)
    t.free_left, t.free_right  free bytes right next to it in the arena
    t.kind          "activation" or "gradient"     t.node          producer node name
    t.pinned        in use by the running op (the runtime never evicts it anyway)

Costs are in the runtime's cost unit (FLOPs by default, or the times you gave) and `now`
is the runtime's clock in the same unit: it advances by an op's cost each time one runs.

`coop` is not a score but a *window* rule (Coop [Zhang 2023]): it slides over the arena in
address order and evicts the contiguous run of evictable tensors and free blocks that frees
enough bytes with the lowest summed cost. Any per-tensor cost can drive it:
`get_heuristic("coop", cost=my_cost)` with `my_cost(t, now) -> float >= 0`.

`auto` (the default, `DTROptions()`) is not one score but a choice of one, made once per
run from what is known before it (`auto_choice`): where the cost per byte barely varies,
h_DTR at a generous budget and `dtr-live` at a tight one; elsewhere `msps-stale` (MSPS,
ties to the stalest).
A score may return a tuple: compared in order (the next key decides ties).

Register your own with `register_heuristic("mine", score)` or pass the function itself as
`heuristic=score` to the runtime. Ties go to the first candidate scanned; when every
candidate scores `math.inf` the first one is still evicted (the runtime must make room).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...errors import MinigraphError

STALENESS_EPS = 1e-3   # MegEngine adds 1e-3 so a tensor touched just now is not divided by 0


class DTROptionError(MinigraphError, ValueError):
    """An unknown DTR option, or a value an option does not take (an unknown heuristic)."""


class TensorView:
    """What a heuristic may read about one candidate tensor (read-only, lazily computed)."""

    __slots__ = ("_rt", "index", "now")

    def __init__(self, rt: Any, index: int):
        self._rt, self.index, self.now = rt, index, 0.0

    @property
    def name(self) -> str:
        return self._rt.program.tensors[self.index].name

    @property
    def kind(self) -> str:
        return self._rt.program.tensors[self.index].kind

    @property
    def node(self) -> str:
        p = self._rt.program
        return p.ops[p.tensors[self.index].producer].name

    @property
    def size(self) -> int:
        return self._rt.size[self.index]

    @property
    def cost(self) -> float:
        return self._rt.cost_t[self.index]

    @property
    def last_access(self) -> float:
        return self._rt.last[self.index]

    @property
    def staleness(self) -> float:
        return self.now - self._rt.last[self.index] + STALENESS_EPS

    @property
    def recomputes(self) -> int:
        return self._rt.recomputes[self.index]

    @property
    def pinned(self) -> bool:
        """An input or output of the op being run (or about to be): must not be evicted."""
        return self._rt.pins[self.index] > 0

    @property
    def neighbour_cost(self) -> float:
        return self._rt.neighbour_cost(self.index)

    @property
    def live_neighbour_cost(self) -> float:
        return self._rt.live_neighbour_cost(self.index)

    @property
    def evicted_neighbours(self) -> int:
        return self._rt.evicted_neighbours(self.index)

    @property
    def eqclass_cost(self) -> float:
        return self._rt.eqclass_cost(self.index)

    @property
    def megengine_cost(self) -> float:
        return self._rt.megengine_cost(self.index)

    @property
    def ancestor_cost(self) -> float:
        return self._rt.ancestor_cost(self.index)

    @property
    def address(self) -> int | None:
        return self._rt.addr[self.index] if self._rt.arena.tracks_addresses else None

    @property
    def free_left(self) -> int:
        return self._rt.arena.free_around(self._rt.addr[self.index])[0]

    @property
    def free_right(self) -> int:
        return self._rt.arena.free_around(self._rt.addr[self.index])[1]

    def __repr__(self) -> str:
        return (f"TensorView({self.name}: {self.size} B, cost {self.cost:g}, "
                f"staleness {self.staleness:g}, recomputed {self.recomputes}x)")


Score = Callable[[TensorView, float], float]


@dataclass(frozen=True)
class Heuristic:
    """A named eviction rule: a per-tensor `score` (lower = evict first), or a `window`
    rule (Coop) whose `score` is the per-tensor cost summed over a window."""
    name: str
    score: Score
    window: bool = False
    params: dict = field(default_factory=dict)
    # an adaptive rule: `pick(program, budget, options)` returns the Heuristic a run uses
    # (`auto`); the runtime calls it once, before the run
    pick: Callable[[Any, int, Any], Heuristic] | None = None

    def __call__(self, t: TensorView, now: float) -> float:
        return self.score(t, now)


# --- the heuristics ----------------------------------------------------------------------------

def dtr(t: TensorView, now: float) -> float:
    """DTR's h_DTR: (c0 + e*(t)) / (memory * staleness): own cost plus the evicted
    neighbourhood's (e*), over bytes and staleness."""
    return (t.cost + t.neighbour_cost) / (t.size * t.staleness)


def dtr_live(t: TensorView, now: float) -> float:
    """h_DTR charging only the evicted neighbours that may still be recomputed: a dead
    evicted descendant counts only when a live evicted tensor lies beyond it."""
    return (t.cost + t.live_neighbour_cost) / (t.size * t.staleness)


def dtr_eqclass(t: TensorView, now: float) -> float:
    """h_DTR-eq [Kirisame 2021]: e* approximated by union-find classes of evicted tensors
    joined across inputs and readers. MegEngine's union-find is another one (`megengine`)."""
    return (t.cost + t.eqclass_cost) / (t.size * t.staleness)


def dtr_local(t: TensorView, now: float) -> float:
    """h_DTR-local: only the tensor's own cost, no neighbourhood."""
    return t.cost / (t.size * t.staleness)


def msps(t: TensorView, now: float) -> float:
    """Capuchin's memory saving per second, inverted: recompute cost (with the evicted
    ancestors it would drag in) per byte freed. No staleness."""
    return t.ancestor_cost / t.size


def msps_stale(t: TensorView, now: float) -> tuple[float, float]:
    """MSPS with ties to the stalest: (c_anc / memory, -staleness), compared in order. On a
    model whose ops cost the same per byte (every elementwise op), MSPS ties among many
    tensors; staleness, not the scan order, then decides."""
    return (t.ancestor_cost / t.size, -t.staleness)


# `auto`: how the default picks its score, once per run, from what is known before it
AUTO_CV = 3.0      # cost-per-byte dispersion (std / mean) below which MSPS barely ranks
AUTO_RATIO = 0.6   # budget / no-eviction peak at or above which h_DTR is used there


def cost_per_byte_cv(program: Any) -> float:
    """std / mean of c0 / bytes over the tensors that may be evicted (0 if none)."""
    cpb = [program.cost_t[k] / program.tensors[k].size
           for k in range(len(program.tensors))
           if program.replayable[k] and program.tensors[k].size > 0]
    if not cpb:
        return 0.0
    mean = sum(cpb) / len(cpb)
    if mean <= 0:
        return 0.0
    return (sum((x - mean) ** 2 for x in cpb) / len(cpb)) ** 0.5 / mean


def auto_choice(program: Any, budget: int, options: Any = None) -> str:
    """The score `auto` runs `program` with at `budget` bytes.

    Where the cost per byte barely varies (CV < AUTO_CV), MSPS's key ties and staleness
    must rank: h_DTR ("dtr") at a generous budget (>= AUTO_RATIO x the peak of a run that
    never evicts), and below it `dtr-live`, which does not charge the dead evicted
    tensors nothing will recompute (at a tight budget there are many). Elsewhere MSPS
    with ties to the stalest ("msps-stale"). With the runtime's extras off
    (`dead_first`, `protect` and `relief` all False: the textbook loop of minimal.py)
    it is the textbook's h_DTR."""
    if options is not None and not (options.dead_first or options.protect or options.relief):
        return "dtr"
    if cost_per_byte_cv(program) >= AUTO_CV:
        return "msps-stale"
    peak = program.bounds().peak
    return "dtr" if peak > 0 and budget >= AUTO_RATIO * peak else "dtr-live"


def _auto_pick(program: Any, budget: int, options: Any = None) -> Heuristic:
    base = get_heuristic(auto_choice(program, budget, options))
    return Heuristic(f"auto:{base.name}", base.score, base.window)


def lru(t: TensorView, now: float) -> float:
    """Least recently used first."""
    return -t.staleness


def size(t: TensorView, now: float) -> float:
    """Largest first."""
    return -float(t.size)


def megengine(t: TensorView, now: float, a: float = 1.0, b: float = 1.0, c: float = 1.0,
              r: float = 1.0001, own_cost: bool = False) -> float:
    """MegEngine 1.4's eval_func [MegEngine 2021]:

        (cost + 1e-3)^a * r^recompute_times / ((memory + free_mem)^b * (staleness + 1e-3)^c)

    with memory and free_mem (free bytes left and right of the block) in MiB, and cost =
    estimate_neighbor_cost (evicted inputs and sibling outputs through the DSU). MegEngine
    does not add the tensor's own compute time; `own_cost=True` adds it (as h_DTR adds c0
    to e*).
    """
    cost = t.megengine_cost + (t.cost if own_cost else 0.0)
    left, right = (t.free_left, t.free_right) if t.address is not None else (0, 0)
    mem = (t.size + left + right) / (1024.0 * 1024.0)
    stale = now - t.last_access + 1e-3
    return (cost + 1e-3) ** a * r ** t.recomputes / (mem ** b * stale ** c)


def coop_cost(t: TensorView, now: float) -> float:
    """The per-tensor cost Coop's window sums: (c0 + e*(t)) / staleness (h_DTR times bytes:
    the window already fixes how many bytes are freed, so bytes do not divide here)."""
    return (t.cost + t.neighbour_cost) / t.staleness


HEURISTICS: dict[str, Heuristic] = {}


def register_heuristic(name: str, score: Score, *, window: bool = False) -> Heuristic:
    """Add a heuristic under `name` (replaces one of the same name)."""
    HEURISTICS[name] = Heuristic(name, score, window)
    return HEURISTICS[name]


for _name, _fn in [("dtr", dtr), ("dtr-live", dtr_live), ("dtr-eqclass", dtr_eqclass),
                   ("dtr-local", dtr_local),
                   ("msps", msps), ("lru", lru), ("size", size), ("megengine", megengine)]:
    register_heuristic(_name, _fn)
register_heuristic("coop", coop_cost, window=True)

# Known by name but not in HEURISTICS (which a sweep runs one by one): the default `auto`
# (a choice among dtr, dtr-live and msps-stale, not a score of its own) and its MSPS
# variant.
DEFAULT_RULES: dict[str, Heuristic] = {
    "auto": Heuristic("auto", msps_stale, pick=_auto_pick),   # msps-stale until picked
    "msps-stale": Heuristic("msps-stale", msps_stale),
}


def get_heuristic(h: str | Heuristic | Score, **params: Any) -> Heuristic:
    """A `Heuristic` from a name, a Heuristic, or a plain `score(t, now)` function;
    `params` are bound as keyword arguments (megengine's a, b, c, r; coop's `cost`)."""
    if isinstance(h, Heuristic):
        base = h
    elif isinstance(h, str):
        if h not in HEURISTICS and h not in DEFAULT_RULES:
            raise DTROptionError(f"unknown heuristic {h!r}; known: "
                                 f"{', '.join([*DEFAULT_RULES, *HEURISTICS])}")
        base = HEURISTICS[h] if h in HEURISTICS else DEFAULT_RULES[h]
    elif callable(h):
        base = Heuristic(getattr(h, "__name__", "custom"), h)
    else:
        raise DTROptionError(f"a heuristic is a name or a function score(t, now), not {h!r}")
    if not params:
        return base
    if base.pick is not None:
        raise DTROptionError(f"heuristic {base.name!r} picks its score itself and takes no "
                             f"arguments, not {', '.join(params)}")
    if base.window and "cost" in params:
        extra = {k: v for k, v in params.items() if k != "cost"}
        fn = functools.partial(params["cost"], **extra) if extra else params["cost"]
        return Heuristic(base.name, fn, True, dict(params))
    return Heuristic(base.name, functools.partial(base.score, **params), base.window,
                     dict(params))
