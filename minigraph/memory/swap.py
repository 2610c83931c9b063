"""Memory swap: a tensor that waits a long time between two uses waits in host memory.

The idea [Rhu 2016] (vDNN): a forward activation is read by its forward consumer, then
not again until the backward pass, many steps later. Copy it to host memory after the
forward read (the *offload*) and back before the backward read (the *prefetch*); in
between its device bytes are free for other tensors. Its lifetime splits in two:

    front  from its producer until its offload has finished
    back   from the start of its prefetch until its last reader

Two intervals are two buffers, so every static planner packs them unchanged. The copies
run on a copy stream beside the compute stream; one that finishes while ops compute is
*hidden*, one that does not makes an op wait [Huang 2020], [Peng 2020].

The steps, in the order of this file:
1. `Machine`: what a transfer costs (latency + bytes / bandwidth) and an op (its FLOPs at
   a compute rate, plus a launch).
2. `uses`: the steps that touch each tensor; the gaps between consecutive uses.
3. `window`: where in one gap the tensor is off the device, after the ops that hide the
   offload and before the ops that hide the prefetch.
4. `choose_swaps`: while the bytes alive at the peak step exceed the budget, swap the
   largest tensor idle at that step (vDNN's "offload what waits longest", greedily).
5. `split`: the planner's buffers, each swapped one as its two halves.
6. `copy_stream`: replay the schedule on two streams; the step time it predicts and the
   transfers an op waited for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import SwapError
from ..graph import Graph
from ..ops.registry import flops_of
from .buffers import Buffer, live_bytes_per_step


# 1. What things cost ------------------------------------------------------------------------
@dataclass(frozen=True)
class Machine:
    """`bandwidth` host<->device bytes per second each way, `latency` seconds per copy,
    `compute` FLOP per second, `launch` seconds per op (docs/glossary.md "swap")."""
    bandwidth: float = 25e9
    latency: float = 10e-6
    compute: float = 50e12
    launch: float = 5e-6

    def __post_init__(self) -> None:
        for name, rule in (("bandwidth", "> 0"), ("compute", "> 0"), ("latency", ">= 0"),
                           ("launch", ">= 0")):
            v = getattr(self, name)
            if not (v > 0 if rule == "> 0" else v >= 0):        # NaN fails both
                raise SwapError(f"Machine: {name} must be {rule}, not {v!r}")

    def transfer(self, nbytes: int) -> float:
        return self.latency + nbytes / self.bandwidth


def op_seconds(graph: Graph, schedule: Sequence[str], machine: Machine) -> list[float]:
    """Each step's compute time: its op's FLOP count at `machine.compute`, plus a launch."""
    return [machine.launch + flops_of(graph, graph.node(n)) / machine.compute
            for n in schedule]


# 2. Uses --------------------------------------------------------------------------------------
def uses(graph: Graph, schedule: Sequence[str]) -> dict[str, list[int]]:
    """Tensor -> the sorted steps that write or read it (its producer, then its readers)."""
    pos = {n: k for k, n in enumerate(schedule)}
    out: dict[str, set[int]] = {}
    for n in schedule:
        node = graph.node(n)
        for t in (*node.inputs, *node.outputs):
            out.setdefault(t, set()).add(pos[n])
    return {t: sorted(s) for t, s in out.items()}


# 3. The window of one gap ----------------------------------------------------------------------
@dataclass(frozen=True)
class Swap:
    """`tensor` (`bytes`) offloaded after step `after`, its last use before the gap; its
    front lives until step `until`; its prefetch starts at step `back`, for its first
    reader after the gap at step `reader`."""
    tensor: str
    bytes: int
    after: int
    until: int
    back: int
    reader: int

    @property
    def back_id(self) -> str:
        return f"{self.tensor}@back"


def window(u: int, v: int, seconds: Sequence[float], cost: float) -> tuple[int, int] | None:
    """Steps (until, back) for the gap between uses at steps u < v: the front stays while
    the ops after u have not yet covered the offload's `cost`; the prefetch starts early
    enough for the ops before v to cover it. If hiding both leaves no step off the device,
    offload at once and prefetch just before v (ops will wait). None: no step to free."""
    until, acc = u + 1, seconds[u + 1] if u + 1 < v else 0.0
    while acc < cost and until + 1 < v:
        until += 1
        acc += seconds[until]
    back, acc = v - 1, seconds[v - 1]
    while acc < cost and back - 1 > u:
        back -= 1
        acc += seconds[back]
    if until + 1 <= back - 1:
        return until, back
    return (u + 1, v - 1) if u + 2 <= v - 2 else None


# 4. Choose what to swap ------------------------------------------------------------------------
def candidates(b: Buffer, steps: Sequence[int], seconds: Sequence[float],
               machine: Machine) -> list[Swap]:
    """Every gap of buffer `b` (uses at `steps`) that frees at least one step."""
    cost = machine.transfer(b.size)
    gaps = [(u, v, window(u, v, seconds, cost)) for u, v in zip(steps, steps[1:])]
    return [Swap(str(b.id), b.size, u, w[0], w[1], v) for u, v, w in gaps if w is not None]


def choose_swaps(buffers: Sequence[Buffer], use_steps: Mapping[str, Sequence[int]],
                 seconds: Sequence[float], machine: Machine, target: int,
                 swappable: set[str]) -> list[Swap]:
    """Swaps that bring the bytes alive at every step down to `target`. Greedy: at the
    first step where the most bytes are alive, swap the largest tensor (of `swappable`)
    that is off the device there in one of its gaps; repeat. SwapError when the peak
    step has nothing left to swap (the message names the lowest peak reached)."""
    chosen: dict[str, Swap] = {}
    while True:
        live = live_bytes_per_step(split(buffers, chosen.values()), len(seconds))
        peak = max(live, default=0)
        if peak <= target:
            return sorted(chosen.values(), key=lambda s: (s.after, s.tensor))
        step = live.index(peak)
        idle = [s for b in buffers if str(b.id) in swappable and str(b.id) not in chosen
                for s in candidates(b, use_steps[str(b.id)], seconds, machine)
                if s.until < step < s.back]
        if not idle:
            raise SwapError(f"swap cannot bring the bytes alive at step {step} below "
                            f"{peak} B: budget {target} B is below what swapping reaches "
                            "(every tensor alive there is in use or already swapped)", peak)
        best = max(idle, key=lambda s: (s.bytes, s.back - s.until, s.tensor))
        chosen[best.tensor] = best


# 5. Split intervals ----------------------------------------------------------------------------
def split(buffers: Sequence[Buffer], swaps: Sequence[Swap] | object) -> list[Buffer]:
    """The buffers with each swapped tensor as two: front [start, until], back [back, end]."""
    by = {s.tensor: s for s in swaps}
    out = []
    for b in buffers:
        s = by.get(str(b.id))
        out += [b] if s is None else [Buffer(b.id, b.start, s.until, b.size, b.color),
                                      Buffer(s.back_id, s.back, b.end, b.size, b.color)]
    return out


# 6. The copy stream ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Timing:
    """What two streams predict: `seconds` for the step with swapping, `baseline` without;
    `waits` tensor -> how long after its op was ready its copy finished (absent: the copy
    was hidden)."""
    seconds: float
    baseline: float
    waits: dict[str, float]

    @property
    def overhead(self) -> float:
        return self.seconds / self.baseline - 1.0 if self.baseline else 0.0


def copy_stream(seconds: Sequence[float], swaps: Sequence[Swap], machine: Machine) -> Timing:
    """Replay the steps on a compute stream and one copy stream (first in, first out).
    Before op k the prefetches that start at k are queued (once op k-1, which may still
    use their bytes, is done); op k waits for the prefetches of tensors it reads back and
    the offloads of fronts that ended at k-1. After op k the offloads of k are queued."""
    compute = copy = 0.0
    done: dict[tuple[str, str], float] = {}     # (tensor, "out" or "in") -> copy's end
    waits: dict[str, float] = {}
    for k, t in enumerate(seconds):
        for s in (s for s in swaps if s.back == k):         # prefetches queued
            copy = max(copy, compute) + machine.transfer(s.bytes)
            done[s.tensor, "in"] = copy
        start = compute
        for s in swaps:
            if s.until + 1 == k:                             # op k may reuse the front
                start = _wait(compute, start, done[s.tensor, "out"], s.tensor, waits)
            if s.reader == k:                                # op k reads the back
                start = _wait(compute, start, done[s.tensor, "in"], s.tensor, waits)
        compute = start + t
        for s in (s for s in swaps if s.after == k):        # offloads queued
            copy = max(copy, compute) + machine.transfer(s.bytes)
            done[s.tensor, "out"] = copy
    return Timing(max(compute, copy), sum(seconds), waits)


def _wait(ready: float, start: float, done: float, tensor: str,
          waits: dict[str, float]) -> float:
    """An op ready at `ready` (its start so far `start`) needs a copy done at `done`; the
    copy is late by `done - ready` if positive, whatever else the op waits for."""
    if done > ready:
        waits[tensor] = waits.get(tensor, 0.0) + done - ready
    return max(start, done)
