"""The executor's swap step: offloads after an op, prefetches before one (`SwapPlan`).

Each swapped tensor has a host buffer of its own and two views into the one arena: its
front (at its offset, where its producer writes) and its back (where the prefetch writes
it, for its readers after the gap). Between the offload and the prefetch other tensors
really use the front's bytes, so a wrong plan gives wrong numbers.

On NumPy the copies are plain `copyto`s, in order. On CuPy [Rhu 2016] the host buffers
are pinned and the copies run on a second stream: an offload waits for the op it follows
(an event on the compute stream), the op that may reuse the front's bytes waits for the
offload (an event on the copy stream), and a prefetch waits for the op before it and is
waited for by its first reader: the step makes no host round trip.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..memory.swap_plan import SwapPlan


class SwapSteps:
    """The swap actions of `plan` by step, and the host buffers, on array module `xp`."""

    def __init__(self, plan: SwapPlan, graph: Any, xp: Any, gpu: bool):
        self.plan, self.xp, self.gpu = plan, xp, gpu
        self.offload_after: dict[int, list] = {}
        self.prefetch_at: dict[int, list] = {}
        self.free_at: dict[int, list] = {}
        self.read_at: dict[int, list] = {}
        for s in plan.swaps:
            self.offload_after.setdefault(s.after, []).append(s)
            self.prefetch_at.setdefault(s.back, []).append(s)
            self.free_at.setdefault(s.until + 1, []).append(s)
            self.read_at.setdefault(s.reader, []).append(s)
        self.host = {}
        for s in plan.swaps:
            t = graph.tensors[s.tensor]
            self.host[s.tensor] = _pinned(xp, t.shape, t.dtype) if gpu else \
                np.empty(t.shape, t.dtype)
        self.front: dict[str, Any] = {}
        self.back: dict[str, Any] = {}
        if gpu:
            self.stream = xp.cuda.Stream(non_blocking=True)
            self.events: dict[str, Any] = {}

    def storage(self, arena: Any, arrays: dict[str, Any]) -> None:
        """The back view of every swapped tensor, beside the front view `arrays` holds."""
        for s in self.plan.swaps:
            front = arrays[s.tensor]
            off = self.plan.back_offsets[s.tensor]
            self.front[s.tensor] = front
            self.back[s.tensor] = arena[off:off + front.nbytes].view(front.dtype) \
                .reshape(front.shape)

    def start(self, arrays: dict[str, Any]) -> None:
        """A step begins: every swapped tensor is written at its front again."""
        arrays.update(self.front)

    def before(self, k: int, arrays: dict[str, Any]) -> None:
        """Before op k: wait for the offloads whose bytes op k may reuse, queue the
        prefetches that start at k, wait for those op k reads."""
        for s in self.free_at.get(k, ()):
            self._wait(s.tensor)
        for s in self.prefetch_at.get(k, ()):
            if self.gpu:
                self._copy(_ptr(self.back[s.tensor]), self.host[s.tensor].ctypes.data,
                           self.host[s.tensor].nbytes, 1, s.tensor)      # host to device
            else:
                np.copyto(self.back[s.tensor], self.host[s.tensor])
            arrays[s.tensor] = self.back[s.tensor]
        for s in self.read_at.get(k, ()):
            self._wait(s.tensor)

    def after(self, k: int, arrays: dict[str, Any]) -> None:
        """After op k: queue the offloads of the tensors last used before their gap."""
        for s in self.offload_after.get(k, ()):
            if self.gpu:
                self._copy(self.host[s.tensor].ctypes.data, _ptr(self.front[s.tensor]),
                           self.host[s.tensor].nbytes, 2, s.tensor)      # device to host
            else:
                np.copyto(self.host[s.tensor], self.front[s.tensor])

    def finish(self) -> None:
        """The step ends when the copy stream has drained too: on CuPy the compute stream
        waits for its last copy (an event, no host wait)."""
        if self.gpu and self.plan.swaps:
            cuda = self.xp.cuda
            done = cuda.Event(disable_timing=True)
            done.record(self.stream)
            cuda.get_current_stream().wait_event(done)

    # CuPy: events between the two streams ------------------------------------------------
    def _copy(self, dst: int, src: int, nbytes: int, kind: int, tensor: str) -> None:
        """One asynchronous copy on the copy stream (kind 1: host to device, 2: device to
        host), after what the compute stream has queued so far; an event marks its end."""
        cuda = self.xp.cuda
        done = cuda.Event(disable_timing=True)
        done.record(cuda.get_current_stream())
        self.stream.wait_event(done)
        cuda.runtime.memcpyAsync(dst, src, nbytes, kind, self.stream.ptr)
        ev = cuda.Event(disable_timing=True)
        ev.record(self.stream)
        self.events[tensor] = ev

    def _wait(self, tensor: str) -> None:
        if self.gpu:
            self.xp.cuda.get_current_stream().wait_event(self.events[tensor])


def _ptr(a: Any) -> int:
    """The device address of CuPy array `a`'s first element."""
    return a.data.ptr


def _pinned(xp: Any, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """A NumPy array in pinned (page-locked) host memory: what an asynchronous copy needs."""
    n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    mem = xp.cuda.alloc_pinned_memory(max(n, 1))
    return np.frombuffer(mem, dtype, int(np.prod(shape, dtype=np.int64))).reshape(shape)
