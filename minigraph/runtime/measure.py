"""What the executor measures, and with what: `RunStats`, the bytes of one run; tracemalloc
behind the same small interface as CuPy's pool meter (`backend.PoolMeter`: now, peak,
reset); timestamps on the device's own clock (`Executor.profile`)."""

from __future__ import annotations

import time
import tracemalloc
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class RunStats:
    """Bytes of one run. `measured_peak`: the most bytes of arrays alive at once, from
    tracemalloc (NumPy) or a memory hook on CuPy's pool (GPU: the bytes asked for;
    `pool_peak` is what the pool reserved for them, each block rounded up to 512 bytes).

    `undeclared` (runs with `measure=True`): per node, the bytes its kernel allocated
    beyond its declared workspace while it ran - hidden temporaries such as `1 - y`, a
    boolean mask, NumPy's own iterator buffers (at most 8192 elements per operand, for
    broadcasting or casting; about 1 KiB of it is Python objects) or a copy CuPy makes.
    """
    arena_bytes: int
    unplanned_bytes: int
    workspace_bytes: int
    measured_peak: int | None
    seconds: float
    undeclared: dict[str, int] = field(default_factory=dict)
    measured_workspace: int = 0
    pool_peak: int | None = None

    @property
    def op_temporaries(self) -> int:
        """The workspace of the hungriest op: declared, or measured when larger."""
        return max(self.workspace_bytes, self.measured_workspace)

    @property
    def expected_peak(self) -> int:
        """Arena + inputs, parameters and outputs + the largest op's temporaries."""
        return self.arena_bytes + self.unplanned_bytes + self.op_temporaries


class DeviceClock:
    """Timestamps on the device's clock: CUDA events on a GPU (read after one synchronise
    at the end), `perf_counter` on the host."""

    def __init__(self, xp: Any):
        self.xp = xp

    def mark(self) -> Any:
        if self.xp is np:
            return time.perf_counter()
        e = self.xp.cuda.Event()
        e.record()
        return e

    def elapsed(self, marks: list[Any]) -> list[float]:
        if self.xp is np:
            return [1000 * (b - a) for a, b in zip(marks, marks[1:])]
        marks[-1].synchronize()
        return [self.xp.cuda.get_elapsed_time(a, b) for a, b in zip(marks, marks[1:])]


class Tracemalloc:
    """tracemalloc behind the meter interface that `PoolMeter` has (now, peak, reset)."""

    def __enter__(self) -> Tracemalloc:
        tracemalloc.start()
        tracemalloc.reset_peak()
        return self

    def __exit__(self, *exc: Any) -> None:
        tracemalloc.stop()

    def now(self) -> int:
        return tracemalloc.get_traced_memory()[0]

    def peak(self) -> int:
        return tracemalloc.get_traced_memory()[1]

    def reset_peak(self) -> None:
        tracemalloc.reset_peak()


def numpy_traced_bytes() -> int:
    """Bytes of NumPy array data tracemalloc holds now (NumPy traces them in its domain)."""
    snap = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.DomainFilter(True, np.lib.tracemalloc_domain)])
    return sum(t.size for t in snap.traces)
