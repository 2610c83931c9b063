"""GMLake-style virtual memory stitching [Guo 2024].

With CUDA's virtual memory API a tensor's virtual range can be backed by physical chunks
that are *not* contiguous: free blocks scattered over several segments can be mapped side
by side into one new virtual range ("stitched") instead of asking the device for more.
This simulator keeps the caching allocator for everything small (<= 1 MiB, same pool,
same 2 MiB segments) and serves a large request in GMLake's four states:

- S1 exact / S2 split: the best-fitting free block, cut to the request;
- S3 stitch: no single block fits but the free blocks together do: take them, largest
  first (fewest pieces), the last one cut to what is missing;
- S4 grow: not enough free bytes at all: ask the device for the shortfall only, rounded
  up to the physical granularity (2 MiB), and stitch it to every free block.

So the large pool grows only when its free bytes *together* cannot serve a request, and
then only to `ceil(live large bytes / granularity) * granularity`. The caching allocator
also holds every live large byte, and all its large segments are multiples of 2 MiB, so
at every event `gmlake.reserved <= caching.reserved` on the same trace (no capacity
limit, same options, a granularity that divides the caching allocator's 2 MiB and 20 MiB
segment sizes): stitching never needs more memory, by construction. The price is
the stitch count (virtual-memory mapping calls) and the model's optimism: pieces here are
any free block (multiples of 512 bytes), where real VMM maps whole 2 MiB chunks.
Real GMLake also caches stitched ranges for reuse; here each stitch is counted anew.
"""

from __future__ import annotations

from collections.abc import Hashable

from ..buffers import align_up
from .base import Block, MiB, OutOfMemoryError
from .caching import CachingAllocator


class StitchingAllocator(CachingAllocator):
    """Caching for small requests; best fit, then stitching, then growth by the shortfall
    for large ones. `stitches` counts allocations served by more than one piece."""
    name = "gmlake"

    def __init__(self, capacity: int | None = None, *, granularity: int = 2 * MiB, **kw):
        super().__init__(capacity, **kw)
        self.granularity = granularity
        self.stitched_pieces = 0
        self.states = {"S1 exact": 0, "S2 split": 0, "S3 stitch": 0, "S4 grow": 0}

    def _malloc(self, tid: Hashable, size: int) -> list[Block]:
        rsize = self.round_size(size)
        if self.pool_of(rsize) == "small":
            return super()._malloc(tid, size)
        large = self.pool["large"]
        b = large.best_fit(rsize)
        if b is not None:
            large.remove(b)
            exact = b.size == rsize
            if not exact:
                large.add(self.split(b, rsize))
            self.states["S1 exact" if exact else "S2 split"] += 1
            return [b]
        if large.total < rsize:
            self.grow(tid, rsize)
            self.states["S4 grow"] += 1
        else:
            self.states["S3 stitch"] += 1
        return self.stitch(rsize)

    def grow(self, tid: Hashable, rsize: int) -> None:
        """Ask the device for the large pool's shortfall, rounded up to the granularity;
        if the device is full, give back cached small segments and retry."""
        large = self.pool["large"]
        need = align_up(rsize - large.total, self.granularity)
        seg = self.device_malloc(need, "large")
        if seg is None:
            for b in self._whole_free_segments("small"):
                self._release(b)
            seg = self.device_malloc(need, "large")
            if seg is None:
                raise OutOfMemoryError(
                    f"{self.name}: {tid!r} needs {rsize} bytes; {large.total} are free in "
                    f"the large pool and {need} more do not fit: {self.reserved} of "
                    f"{self.capacity} bytes are reserved ({self.allocated} allocated)")
            self.ooms_recovered += 1
        large.add(seg.blocks[0])

    def stitch(self, rsize: int) -> list[Block]:
        """Free large blocks, largest first, until they hold `rsize` bytes; the last one is
        cut so that exactly `rsize` bytes are taken. One virtual range maps them all."""
        large = self.pool["large"]
        chosen: list[Block] = []
        got = 0
        for b in sorted(large, key=lambda b: (-b.size, b.addr)):
            chosen.append(b)
            got += b.size
            if got >= rsize:
                break
        for b in chosen:
            large.remove(b)
        last = chosen[-1]
        if got > rsize:
            large.add(self.split(last, last.size - (got - rsize)))
        if len(chosen) > 1:
            self.stitches += 1
            self.stitched_pieces += len(chosen)
        return chosen
