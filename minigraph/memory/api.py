"""`MemoryOptions` -> `plan_memory(graph, options)` -> `MemoryReport`: the one entry point.

The steps, each in its own module: schedule (orders.py), liveness (liveness.py), in-place
pairs (inplace.py), colours (coloring.py), the planner (planners/), validation
(buffers.py). Three levels, each calling the next: `plan_memory` turns a graph into
buffers and a `MemoryPlan`, `plan_buffers` aligns, splits by colour, stacks and validates,
and the planner named by `options.planner` places one colour's buffers.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from ..errors import ArgumentTypeError, PlanError, did_you_mean
from ..graph import Graph, as_graph, fmt_bytes
from .buffers import Buffer, Placement, arena_size, theoretical_minimum
from .coloring import check_coloring, tensor_colors
from .footprint import Footprint, outside_bytes, step_workspace, working_minimum
from .inplace import INPLACE_RULES, inplace_pairs, merge_inplace
from .liveness import Liveness, liveness
from .orders import ORDERS, schedule
from .plan import MemoryPlan, offset_alignment
from .planners import JOINT_PLANNERS, engine, plan_buffers  # noqa: F401  (engine: registers

# the engine room's planners, "greedy-size", "anneal", "search"...)
from .planners.joint import plan_jointly
from .safe_sharing import safe_pairs, safe_placement


@dataclass(frozen=True)
class MemoryOptions:
    """The switches a notebook flips. `inplace` is False, True (nnvm's rule: the op is the
    input's last reader; "last-reader" means the same and is stored as True) or "strict"
    (the op is the input's only reader [Chen 2016], [Huawei GE]; see `inplace.py`).
    `planner` names a planner of `PLANNERS`; `colors=k` keeps k colour classes apart
    (parallel-safe sharing), their paths found by `coloring` ("bytes" or "nnvm", see
    `coloring.py`); `safe=True` shares bytes only when the graph's edges order every use
    of the first tensor before the second's producer (zero parallel hazards);
    `planner_args` are the planner's options (e.g. match_range, time_limit, seed): one it
    does not take raises PlanError. A value of the wrong type or range (alignment or
    colors < 1, an unknown order, in-place rule or coloring) raises PlanError when the
    options are made, and so does a name that is not an option (`in_place=True`: "did you
    mean 'inplace'?"). `alignment` is at most `MAX_ALIGNMENT` (1 GiB) and `colors` at most
    `MAX_COLORS` (64): a bigger one is a typo, not a device."""
    inplace: bool | str = False
    planner: str = "none"
    colors: int = 1
    order: str = "program"
    alignment: int = 512
    planner_args: dict = field(default_factory=dict)
    coloring: str = "bytes"
    safe: bool = False

    def __post_init__(self) -> None:
        # Checked here, when the options are made, so the widget, the CLI and a lesson all
        # get the same message before any planning (a bad alignment used to become 1).
        for name in ("alignment", "colors"):
            object.__setattr__(self, name, _count(name, getattr(self, name), MAXIMUM[name]))
        object.__setattr__(self, "inplace", _inplace_value(self.inplace))
        check_coloring(self.coloring)
        if not isinstance(self.safe, (bool, np.bool_)):
            raise PlanError(f"MemoryOptions: safe must be True or False, not {self.safe!r}")
        object.__setattr__(self, "safe", bool(self.safe))
        if not isinstance(self.planner, str):
            raise PlanError(f"MemoryOptions: planner must be a name (str), not {self.planner!r}")
        if not isinstance(self.order, str) or self.order not in ORDERS:
            raise PlanError(f"MemoryOptions: unknown order {self.order!r}; known: "
                            f"{', '.join(sorted(ORDERS))}")
        if not isinstance(self.planner_args, Mapping) or \
                not all(isinstance(k, str) for k in self.planner_args):
            raise PlanError("MemoryOptions: planner_args must be a dict of option name -> "
                            f"value, not {self.planner_args!r}")

    @property
    def inplace_rule(self) -> str | None:
        """The in-place rule these options plan with: "last-reader", "strict" or None (off)."""
        if self.inplace is False:
            return None
        return "last-reader" if self.inplace is True else self.inplace

    def replace(self, **kw: Any) -> MemoryOptions:
        """A copy with the named options changed (`plan_memory(g, opts, colors=2)`)."""
        d = asdict(self)
        check_option_names(kw)
        d.update(kw)
        return MemoryOptions(**d)


def chosen(options: MemoryOptions) -> str:
    """The fields of `options` that differ from `MemoryOptions()`, each with its default
    ("planner ge (the default is none), inplace True (the default is False)"), or "the
    defaults": how a tool that switches a technique on says so in its first line."""
    default = MemoryOptions()
    return ", ".join(f"{f.name} {_plain(getattr(options, f.name))} (the default is "
                     f"{_plain(getattr(default, f.name))})" for f in fields(MemoryOptions)
                     if getattr(options, f.name) != getattr(default, f.name)) or "the defaults"


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


MAX_ALIGNMENT = 2**30       # 1 GiB: no device aligns to more; a bigger one is a typo
MAX_COLORS = 64             # colour classes kept apart (the widget offers 1-4)
MAXIMUM = {"alignment": MAX_ALIGNMENT, "colors": MAX_COLORS}


def check_option_names(kw: Mapping[str, Any]) -> None:
    """PlanError for the first name in `kw` that is not a field of MemoryOptions, with the
    closest field ("in_place" -> "inplace") and the list of them."""
    names = [f.name for f in fields(MemoryOptions)]
    for name in kw:
        if name not in names:
            raise PlanError(f"MemoryOptions: no option {name!r}{did_you_mean(name, names)}; "
                            f"its options are {', '.join(names)}")


def _checked_init(init: Any) -> Any:
    """The dataclass's __init__, with an unknown keyword refused by `check_option_names`
    (a PlanError with a suggestion) instead of Python's bare TypeError."""
    @functools.wraps(init)
    def __init__(self: MemoryOptions, *args: Any, **kw: Any) -> None:
        check_option_names(kw)
        init(self, *args, **kw)
    return __init__


MemoryOptions.__init__ = _checked_init(MemoryOptions.__init__)   # type: ignore[method-assign]


def _inplace_value(value: Any) -> bool | str:
    """True, False or "strict" ("last-reader" is True, np.bool_ a bool); else PlanError."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, str) and value in INPLACE_RULES:
        return True if value == "last-reader" else value
    raise PlanError(f"MemoryOptions: inplace must be True, False or a rule "
                    f"({', '.join(map(repr, INPLACE_RULES))}), not {value!r}")


def _count(name: str, value: Any, maximum: int) -> int:
    """`value` as a plain int 1 .. maximum (np.int64(512) -> 512); a float, a bool, 0 or
    one above the maximum is refused."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise PlanError(f"MemoryOptions: {name} must be an integer, not {value!r}")
    if value < 1:
        raise PlanError(f"MemoryOptions: {name} must be >= 1, not {value}")
    if value > maximum:
        raise PlanError(f"MemoryOptions: {name} {int(value):,} is above the maximum "
                        f"{maximum:,}")
    return int(value)


@dataclass
class MemoryReport:
    """A plan with the numbers a student compares: no reuse, this plan, the minimum.

    In the one counting of every technique (`footprint.py`): `arena_bytes` (the planned
    tensors), `workspace_bytes` (the largest op's scratch, which the executor takes beside
    the arena), `outside_bytes` (inputs, parameters, constants, outputs, exact bytes;
    `unplanned` gives them by kind, rounded to the alignment), `working_bytes` (arena +
    workspace) against `working_minimum`, the floor of every run of this schedule that
    recomputes nothing; `footprint` holds them together."""
    plan: MemoryPlan
    options: MemoryOptions
    theoretical_minimum: int
    no_reuse_bytes: int
    seconds: float
    unplanned: dict[str, int]
    workspace_bytes: int = 0
    working_minimum: int = 0
    outside_bytes: int = 0

    @property
    def arena_bytes(self) -> int:
        return self.plan.arena_bytes

    @property
    def saved_bytes(self) -> int:
        return self.no_reuse_bytes - self.arena_bytes

    @property
    def working_bytes(self) -> int:
        """The arena plus the largest workspace beside it: what this plan holds at worst."""
        return self.arena_bytes + self.workspace_bytes

    @property
    def footprint(self) -> Footprint:
        return Footprint(self.arena_bytes, self.workspace_bytes, self.outside_bytes)

    @property
    def saved_percent(self) -> float:
        return 100.0 * self.saved_bytes / self.no_reuse_bytes if self.no_reuse_bytes else 0.0

    @property
    def ratio_to_minimum(self) -> float:
        m = self.theoretical_minimum
        return self.arena_bytes / m if m else 1.0

    def summary(self) -> str:
        o = self.options
        rule = {None: "", "last-reader": " + in-place", "strict": " + strict in-place"}
        return (f"{o.planner}{rule[o.inplace_rule]}"
                f"{f', {o.colors} colours' if o.colors > 1 else ''}"
                f"{f' ({o.coloring})' if o.colors > 1 and o.coloring != 'bytes' else ''}"
                f"{', safe' if o.safe else ''}, order "
                f"{'chosen with the offsets' if o.planner in JOINT_PLANNERS else o.order}: "
                f"no reuse {fmt_bytes(self.no_reuse_bytes)} -> arena "
                f"{fmt_bytes(self.arena_bytes)}, saved {fmt_bytes(self.saved_bytes)} "
                f"({self.saved_percent:.1f}%); theoretical minimum "
                f"{fmt_bytes(self.theoretical_minimum)} (x{self.ratio_to_minimum:.3f}); "
                f"planned in {self.seconds * 1000:.1f} ms"
                + (f"; {self.plan.note}" if self.plan.note else ""))

    def table(self, limit: int | None = 60) -> str:
        return self.plan.table(limit)

    def __repr__(self) -> str:
        return f"MemoryReport({self.summary()})"

    def _repr_html_(self) -> str:
        return f"<pre>{self.summary()}</pre>"


def planning_buffers(graph: Graph, live: Liveness, options: MemoryOptions
                     ) -> tuple[list[Buffer], dict[str, str], list[tuple[str, str]],
                                dict[str, int]]:
    """The buffer problem a planner sees: in-place chains fused, colours attached.
    Returns (buffers, tensor -> buffer id, in-place pairs, tensor colours)."""
    colors = tensor_colors(graph, live, options.colors, options.coloring) \
        if options.colors > 1 else {}
    rule = options.inplace_rule
    pairs = inplace_pairs(graph, live, colors, rule) if rule else []     # within a colour
    pairs = safe_pairs(graph, live, pairs) if options.safe else pairs
    base = [Buffer(iv.name, iv.start, iv.end, iv.bytes, colors.get(iv.name, 0))
            for iv in live.planned()] if colors else live.buffers()
    merged, group = merge_inplace(base, pairs)
    return merged, group, pairs, colors


def plan_memory(graph: Graph, options: MemoryOptions | None = None, **kw: Any) -> MemoryReport:
    """Plan the graph's memory and validate the plan: schedule, liveness, in-place
    hand-overs, colours, the planner, the one validator.

    `options` is a `MemoryOptions`; keyword arguments override its fields
    (`plan_memory(g, planner="ge", inplace=True)`). The fields, with their defaults (the
    one set of defaults, docs/glossary.md "Defaults"):

    - `inplace` (False): an op's output may take its input's bytes - True (nnvm's rule:
      the op is the input's last reader), "strict" (its only reader) or False.
    - `planner` ('none'): the planner of `PLANNERS` ("none", "refcount", "ge",
      "greedy-size", "bestfit", "anneal", "ilp", "search", their ":textbook" twins) or
      of `JOINT_PLANNERS` ("model-ilp": it chooses the schedule too).
    - `colors` (1): k > 1 keeps k colour classes of tensors apart (parallel-safe sharing).
    - `order` ('program'): the schedule, a name of `ORDERS` ("program", "ge", "best", ...).
    - `alignment` (512): sizes are rounded up to it; offsets are placed at
      `offset_alignment` (also a multiple of every planned tensor's itemsize).
    - `planner_args` ({}): the planner's own options (time_limit, seed, iterations,
      match_range...); one it does not take raises PlanError.
    - `coloring` ('bytes'): how colour paths are found with `colors` > 1 ("bytes" or
      "nnvm").
    - `safe` (False): share bytes only where the graph's edges order every use of the
      first tensor before the second's producer (no parallel hazard).

    Which way the buffers are placed is `strategy(options)`: "joint", "safe" or "plain".
    """
    graph = as_graph(graph)                  # a model (zoo Model, TorchModel): its graph
    if not isinstance(graph, Graph):
        raise ArgumentTypeError(f"plan_memory: graph must be a Graph or a Model (with "
                                f".graph), not {type(graph).__name__} {_short(graph)}")
    if options is not None and not isinstance(options, MemoryOptions):
        raise ArgumentTypeError(f"plan_memory: options must be a MemoryOptions, not "
                                f"{type(options).__name__} {_short(options)}")
    options = (options or MemoryOptions()).replace(**kw) if kw else (options or MemoryOptions())
    t0 = time.perf_counter()
    how = strategy(options)
    at = offset_alignment(graph, options.alignment)     # a multiple of every itemsize
    joint = plan_jointly(graph, options.replace(alignment=at)) if how == "joint" else None
    live = liveness(graph, joint.schedule if joint else schedule(graph, options.order),
                    options.alignment)       # a joint planner chose the schedule [Steiner 2023]
    merged, group, pairs, colors = planning_buffers(graph, live, options)
    placement = PLACE[how](_Step(graph, live, merged, group, pairs, options, at, joint))
    offsets = {name: placement.offsets[gid] for name, gid in group.items()}
    arena = arena_size(live.buffers(), offsets)      # per tensor: what the validator checks
    plan = MemoryPlan(live, offsets, arena, pairs, options.planner, placement.note, colors,
                      graph, options.inplace_rule)
    seconds = time.perf_counter() - t0
    plan.prove(graph)       # bound by construction: its liveness was made from graph
    workspace = step_workspace(graph, live.schedule, options.alignment)
    return MemoryReport(plan, options, theoretical_minimum(merged), live.no_reuse_bytes(),
                        seconds, live.unplanned_bytes(), max(workspace, default=0),
                        working_minimum(merged, workspace), outside_bytes(graph))


def _short(value: object, width: int = 40) -> str:
    """repr(value), cut to `width` characters: a message stays one line."""
    text = repr(value)
    return text if len(text) <= width else f"{text[:width]}..."


def strategy(options: MemoryOptions) -> str:
    """How `plan_memory` places the buffers: "joint" when the planner chooses the schedule
    as well (`JOINT_PLANNERS`, MODeL [Steiner 2023]), "safe" when `safe=True` (only pairs
    the graph orders share bytes), else "plain" (`plan_buffers`). A joint planner places
    by its own rules, so `safe` with it is refused."""
    if options.planner in JOINT_PLANNERS:
        if options.safe:
            raise PlanError(f"safe=True cannot be combined with joint planner "
                            f"{options.planner!r}: choose a planner of PLANNERS")
        return "joint"
    return "safe" if options.safe else "plain"


@dataclass
class _Step:
    """What the placing step of `plan_memory` is given."""
    graph: Graph
    live: Liveness
    buffers: list[Buffer]
    group: dict[str, str]
    pairs: list[tuple[str, str]]
    options: MemoryOptions
    alignment: int                  # the offsets' alignment (`offset_alignment`)
    joint: Any = None               # the joint planner's problem (its schedule chosen)


def _place_plain(s: _Step) -> Placement:
    """The named planner, colour by colour (`plan_buffers`)."""
    return plan_buffers(s.buffers, s.options.planner, s.alignment,
                        **s.options.planner_args)[1]


def _place_safe(s: _Step) -> Placement:
    """The named planner, sharing only between tensors the graph orders (safe_sharing.py)."""
    return safe_placement(s.graph, s.live, s.buffers, s.group, s.pairs, s.options.planner,
                          s.alignment, **s.options.planner_args)[1]


def _place_joint(s: _Step) -> Placement:
    """The joint planner's offsets for the schedule it chose (joint.py)."""
    return s.joint.place(s.buffers, s.alignment)[1]


# strategy -> how its buffers are placed.
PLACE = {"plain": _place_plain, "safe": _place_safe, "joint": _place_joint}
