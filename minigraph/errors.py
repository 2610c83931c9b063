"""Typed errors. Each one names the tensor, node, shape or rule at fault, because errors teach."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class MinigraphError(Exception):
    """Base class of every error minigraph raises on purpose."""


class ShapeError(MinigraphError, ValueError):
    """Operand shapes do not fit the op's shape rule."""


class DTypeError(MinigraphError, TypeError):
    """Operand dtypes do not fit the op's dtype rule."""


class ArgumentError(MinigraphError, ValueError):
    """An argument of the wrong type or range (dropout's p, a learning rate); names the
    argument, the function and the value."""


class GraphError(MinigraphError, ValueError):
    """The graph is malformed: duplicate names, dangling tensors, unknown nodes."""


class CycleError(GraphError):
    """An edit would make the graph cyclic; the message lists the cycle."""


class UnknownOpError(MinigraphError, KeyError):
    """An op name that is not in the registry."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0])


class GradError(MinigraphError, ValueError):
    """The gradient pass cannot run: non-scalar loss, integer input, op without a rule."""


class FeedError(MinigraphError, ValueError):
    """A feed to the executor is missing, unknown, or of the wrong shape or dtype."""


class PlanError(MinigraphError, ValueError):
    """A memory plan breaks a rule: overlap of live tensors, misalignment, out of arena."""


class ScheduleError(PlanError, GraphError):
    """A schedule that is not a topological order of this graph's nodes (a plan's schedule
    made for another graph, a node listed twice or missing); a PlanError and a GraphError."""


class BudgetError(MinigraphError, ValueError):
    """A DTR budget below what the graph needs; carries the smallest feasible budget."""

    def __init__(self, message: str, minimum: int | None = None):
        super().__init__(message)
        self.minimum = minimum


class ThrashError(MinigraphError, RuntimeError):
    """DTR recomputation exceeded its limit (it would thrash rather than finish)."""


class TimeLimitError(MinigraphError, TimeoutError):
    """A search ran out of its time limit before it had any answer; names the limit."""


class DeviceError(MinigraphError, RuntimeError):
    """The requested device (GPU) is not available, or the plan does not suit it."""


class AllocationError(DeviceError, MemoryError):
    """A run's tensors do not fit in the device's memory; names the tensor and the bytes."""


class PlanTypeError(PlanError, TypeError):
    """Something that is not a plan was given where a plan is expected."""


class GradingError(MinigraphError, ValueError):
    """A grader's setting is unusable (e.g. MINIGRAPH_TIME_SCALE); names the value."""


class ArgumentTypeError(ArgumentError, TypeError):
    """An argument of the wrong type (a number where a graph is expected); names the
    argument, the function and what was given. A TypeError too."""


def did_you_mean(value: object, names: Iterable[object]) -> str:
    """" (did you mean 'x'?)" for the name closest to `value` among `names` (difflib), or
    "" when none is close: appended to a message about an unknown name."""
    close = difflib.get_close_matches(str(value), [str(n) for n in names], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
