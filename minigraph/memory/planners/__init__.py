"""Every planner has one signature: `planner(buffers, **options) -> Placement`.

A planner sees only a list of `Buffer`s (no graph), so the same code plans a training
graph, a CSV problem from a DSA benchmark, or a student's test case. What is shared is
done once, here: alignment of sizes, partition by colour (buffers of different colours
never share bytes), stacking of the colour regions, and validation.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable, Sequence

from ...errors import PlanError
from ..buffers import Buffer, Placement, align_up, arena_size, validate_offsets

Planner = Callable[..., Placement]
PLANNERS: dict[str, Planner] = {}


def register(name: str) -> Callable[[Planner], Planner]:
    def deco(fn: Planner) -> Planner:
        PLANNERS[name] = fn
        return fn
    return deco


def get_planner(name: str) -> Planner:
    try:
        return PLANNERS[name]
    except KeyError:
        raise PlanError(f"unknown planner {name!r}; known: {', '.join(sorted(PLANNERS))}") \
            from None


def blocks_to_offsets(blocks: Sequence[Sequence[Buffer]], alignment: int = 1
                      ) -> dict[Hashable, int]:
    """Storage blocks laid end to end; each block as large as its largest member."""
    offsets, top = {}, 0
    for block in blocks:
        for b in block:
            offsets[b.id] = top
        top += align_up(max((b.size for b in block), default=0), alignment)
    return offsets


def plan_buffers(buffers: Sequence[Buffer], planner: str = "greedy-size", alignment: int = 1,
                 **options) -> tuple[list[Buffer], Placement]:
    """Align sizes, plan each colour separately, stack the colours, validate.

    Returns the aligned buffers and a placement whose offsets pass `validate_offsets`.
    """
    fn = get_planner(planner)
    accepted = inspect.signature(fn).parameters
    kw = {k: v for k, v in options.items() if k in accepted}
    if "alignment" in accepted:
        kw["alignment"] = alignment
    aligned = [b if align_up(b.size, alignment) == b.size else
               Buffer(b.id, b.start, b.end, align_up(b.size, alignment), b.color)
               for b in buffers]
    offsets: dict[Hashable, int] = {}
    notes, blocks, base = [], [], 0
    for colour in sorted({b.color for b in aligned}):
        part = [b for b in aligned if b.color == colour]
        placed = fn(part, **kw)
        if set(placed.offsets) != {b.id for b in part}:
            missing = {b.id for b in part} - set(placed.offsets)
            raise PlanError(f"planner {planner} left buffers without offsets: "
                            f"{sorted(map(str, missing))[:5]}")
        for i, off in placed.offsets.items():
            offsets[i] = base + int(off)
        base = align_up(max(base, arena_size(aligned, offsets)), alignment)
        if placed.note:
            notes.append(placed.note)
        if placed.blocks:
            blocks.extend(placed.blocks)
    validate_offsets(aligned, offsets, alignment=alignment)
    return aligned, Placement(offsets, "; ".join(notes), blocks or None)


def _load_all() -> None:
    """Import the planner modules (each registers itself); minigraph.memory calls this
    once on import, so PLANNERS is complete wherever it is read."""
    import importlib
    import pkgutil
    for m in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{m.name}")
