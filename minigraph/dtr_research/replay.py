"""Replaying a DTR simulator log (simrd_log.py) in simulated mode, by either rules: the
runtime's own (`DTROptions`, `minigraph.runtime.dtr.simulate`) or the DTR authors'
simulator's (`SimrdOptions`, simrd.py). The runtime never imports this wing: this is where
the choice between the two is made.
"""

from __future__ import annotations

from typing import Any

from ..runtime.dtr.modes import simulate
from ..runtime.dtr.options import DTROptions
from ..runtime.dtr.program import Program, resolve_budget
from ..runtime.dtr.record import DTRTrace
from .simrd import SimrdOptions, SimrdRuntime
from .simrd_log import parse_trace


def replay_trace(source: Any, budget: int | None = None, *, ratio: float | None = None,
                 ratio_of: str = "baseline", alignment: int = 1, constants: str = "inside",
                 options: DTROptions | SimrdOptions | None = None,
                 **keywords: Any) -> DTRTrace:
    """Replay a DTR simulator trace in simulated mode; returns the `DTRTrace`.

    By default the budget is the DTR authors' [Kirisame 2021]: the constants are in the
    arena (pinned from their line on) and `ratio` is of the baseline peak, the live bytes
    of a run without eviction, constants included (`ratio_of="baseline"`); a `budget` in
    bytes includes the constants too. The old reading: `constants="outside"` (0-byte
    constants outside the arena) with `ratio_of="total"` (of the first-fit arena peak)
    or "arena". `alignment` rounds the trace's sizes; `options` (or their fields as
    keywords) as for `simulate`; `SimrdOptions(h)` replays it with simrd's rules."""
    program = source if isinstance(source, Program) else \
        parse_trace(source, alignment, constants=constants)
    if isinstance(options, SimrdOptions):
        b = resolve_budget(program, budget, ratio, ratio_of)
        return run_replay(program, b, options.replace(**keywords))
    return simulate(program, budget, ratio=ratio, ratio_of=ratio_of, options=options,
                    **keywords)


def run_replay(program: Program, budget: int, options: DTROptions | SimrdOptions
               ) -> DTRTrace:
    """One simulated run of `program` at `budget` arena bytes by the rules `options`
    name: simrd's (`SimrdOptions`, simrd.py) or the runtime's own (`DTROptions`,
    `minigraph.runtime.dtr.simulate`)."""
    if isinstance(options, SimrdOptions):
        return SimrdRuntime(program, budget, options).run()
    return simulate(program, budget, options=options)
