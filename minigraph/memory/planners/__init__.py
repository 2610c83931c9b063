"""Every planner has one signature: `planner(buffers, *, options...) -> Placement`.

A planner sees only a list of `Buffer`s (no graph), so the same code plans a training
graph, a CSV problem from a DSA benchmark, or a student's test case. Three levels, each
calling the next: `plan_memory` turns a graph into buffers, `plan_buffers` does what every
planner shares (alignment of sizes, one planner call per colour, stacking of the colour
regions, validation), and a planner places the buffers of one colour.

`PLANNERS` is a plain dict, name -> function; each planner module fills it with
`@register(name)` and is imported at the bottom of this file.

The modules here are the textbook, one technique each, and import nothing of `engine/`,
the engine room (the same loops with fast indexes and time limits; it registers itself
when `memory.api` imports it). "greedy-size", "bestfit", "ge", "anneal" and "ilp" run the
engine's; "<name>:textbook" (in `TEXTBOOK`) the plain one: the same plans
(tests/test_planner_tiers.py).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from numbers import Real
from typing import Any

from ...errors import PlanError, did_you_mean
from ..buffers import Buffer, Placement, align_up, arena_size, validate_offsets
from ..clock import now

Planner = Callable[..., Placement]
PLANNERS: dict[str, Planner] = {}
TEXTBOOK: dict[str, Planner] = {}         # "bestfit:textbook" -> the plain bestfit, ...
# Planners that choose the schedule too (MODeL [Steiner 2023], joint.py): they take the
# graph, not buffers, so they have a registry of their own, which `plan_memory` asks first.
JOINT_PLANNERS: dict[str, Callable[..., Any]] = {}


def register(name: str) -> Callable[[Planner], Planner]:
    """Decorator: add a planner to `PLANNERS` under `name` (to `TEXTBOOK`, for a name that
    ends in ":textbook")."""
    def deco(fn: Planner) -> Planner:
        (TEXTBOOK if name.endswith(":textbook") else PLANNERS)[name] = fn
        return fn
    return deco


def get_planner(name: str) -> Planner:
    """The planner registered as `name` (or "<name>:textbook"); a PlanError lists the
    known names."""
    try:
        return PLANNERS[name] if name in PLANNERS else TEXTBOOK[name]
    except KeyError:
        if name in JOINT_PLANNERS:
            raise PlanError(f"planner {name!r} chooses the schedule too: it plans a graph "
                            "(plan_memory), not a list of buffers") from None
        raise PlanError(f"unknown planner {name!r}"
                        f"{did_you_mean(name, [*PLANNERS, *TEXTBOOK, *JOINT_PLANNERS])}; "
                        f"known: {', '.join(sorted(PLANNERS))} "
                        f"(and {', '.join(sorted(TEXTBOOK))})") from None


def planner_options(name: str) -> tuple[str, ...]:
    """The options planner `name` accepts: its parameters after `buffers`. `alignment`,
    where a planner has it, is not among them: `plan_buffers` passes its own."""
    params = list(inspect.signature(get_planner(name)).parameters)[1:]
    return tuple(p for p in params if p != "alignment")


def check_options(name: str, options: Mapping[str, Any]) -> None:
    """Refuse an option the planner does not take (a typo would otherwise run the planner
    with its defaults and look like a result)."""
    accepted = planner_options(name)
    unknown = sorted(k for k in options if k not in accepted)
    if unknown:
        takes = f"its options are {', '.join(accepted)}" if accepted else "it takes no options"
        raise PlanError(f"planner {name!r} has no option {', '.join(map(repr, unknown))}; "
                        f"{takes}")


def options_for(name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The part of `options` that planner `name` accepts: for a caller that gives one budget
    (say `time_limit` and `seed`) to every planner in turn."""
    accepted = planner_options(name)
    return {k: v for k, v in options.items() if k in accepted}


def blocks_to_offsets(blocks: Sequence[Sequence[Buffer]], alignment: int = 1
                      ) -> dict[Hashable, int]:
    """Storage blocks laid end to end; each block as large as its largest member."""
    offsets, top = {}, 0
    for block in blocks:
        for b in block:
            offsets[b.id] = top
        top += align_up(max((b.size for b in block), default=0), alignment)
    return offsets


def aligned_buffers(buffers: Sequence[Buffer], alignment: int) -> list[Buffer]:
    """The buffers with their sizes rounded up to `alignment` (the others kept as they are)."""
    return [b if align_up(b.size, alignment) == b.size else
            Buffer(b.id, b.start, b.end, align_up(b.size, alignment), b.color)
            for b in buffers]


def plan_buffers(buffers: Sequence[Buffer], planner: str = "greedy-size", alignment: int = 1,
                 **options: Any) -> tuple[list[Buffer], Placement]:
    """Align sizes, plan each colour separately, stack the colours, validate. `options`
    go to the planner (one it does not take: PlanError). Returns the aligned buffers and
    a placement whose offsets pass `validate_offsets`."""
    fn = get_planner(planner)
    check_options(planner, options)
    if "alignment" in inspect.signature(fn).parameters:
        options = {**options, "alignment": alignment}
    end = _planning_ends(options.get("time_limit"), len(buffers))
    seen: set[Hashable] = set()
    for b in buffers:
        if b.id in seen:
            raise PlanError(f"two buffers share the id {b.id!r}")
        seen.add(b.id)
    aligned = aligned_buffers(buffers, alignment)
    offsets: dict[Hashable, int] = {}
    notes, blocks, base = [], [], 0
    colours = sorted({b.color for b in aligned})
    if len(colours) == 1 and end is not None and \
            options["time_limit"] - (end - now()) < 0.01 * options["time_limit"]:
        end = None                    # one colour and little to keep: the limit as given
    for k, colour in enumerate(colours):
        part = [b for b in aligned if b.color == colour]
        start = base                  # this colour's region begins above the ones before
        if end is not None:           # the colours left share the time left
            share = (end - now()) / (len(colours) - k)
            options = {**options, "time_limit": max(share, MIN_SHARE)}
        placed = fn(part, **options)
        if set(placed.offsets) != {b.id for b in part}:
            missing = {b.id for b in part} - set(placed.offsets)
            raise PlanError(f"planner {planner} left buffers without offsets: "
                            f"{sorted(map(str, missing))[:5]}")
        for i, off in placed.offsets.items():
            offsets[i] = start + int(off)
        # measured, not the planner's word: a planner may be a student's
        base = align_up(start + arena_size(part, placed.offsets), alignment)
        if placed.note:
            notes.append(placed.note)
        if placed.blocks:
            blocks.extend(placed.blocks)
    try:
        validate_offsets(aligned, offsets, alignment=alignment)
    except PlanError as e:        # the buffers were aligned here: the planner is at fault
        raise PlanError(f"planner {planner} returned an invalid plan (at alignment "
                        f"{alignment}): {e}") from None
    return aligned, Placement.of(aligned, offsets, "; ".join(notes), blocks or None)


# Seconds kept per buffer, out of a time limit, for what follows the planner (stacking
# the colours, validation): a limit covers the whole call. At most half the limit.
CHECK_SECONDS_PER_BUFFER = 1e-5
MIN_SHARE = 1e-3                # the least time a colour's planner is given


def positive_finite(x: object) -> bool:
    """A real number (not a bool) above 0 and below infinity."""
    return isinstance(x, Real) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def _planning_ends(time_limit: Any, n: int) -> float | None:
    """When the planners must be done (a `planning clock's `now()` value), for a usable
    `time_limit`; None without one (or for a bad one, which the planner refuses)."""
    if not positive_finite(time_limit):
        return None
    keep = min(CHECK_SECONDS_PER_BUFFER * n, time_limit / 2)
    return now() + time_limit - keep


# The textbook's planner modules; importing each one registers its planners. The engine
# room's registers itself (`engine/__init__.py`), imported by `memory.api`.
from . import anneal, basic, bestfit, ge, greedy, ilp  # noqa: E402,F401,I001
