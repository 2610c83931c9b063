"""First fit and best fit over one growing arena: the textbook online allocators.

The arena is one segment `[0, top)`. A request (rounded up to `alignment`) takes a free
block - the lowest-addressed one that fits (first fit: seed 002's Coop description, "the
leftmost free block of at least S") or the smallest one that fits (best fit) - and the
block is split, the rest staying free. A freed block coalesces with free neighbours.
When nothing fits, the arena grows at the top like a heap's `sbrk`: if the topmost block
is free it is extended by the shortfall, else a new block is added above. Each growth is
one device call. The arena never shrinks, so its top is the reserved memory: whatever
holes are left below it when the top moves is fragmentation.
"""

from __future__ import annotations

from collections.abc import Hashable

from ..buffers import align_up
from .base import Block, FreePool, OnlineAllocator, OutOfMemoryError, Rect, Segment


class ArenaAllocator(OnlineAllocator):
    """Base of first fit and best fit: one arena grown at the top; `_find` picks the block."""
    name = "arena"

    def __init__(self, alignment: int = 512, capacity: int | None = None):
        super().__init__(capacity)
        self.alignment = alignment
        self.pool = FreePool()
        self.arena: Segment | None = None

    def pools(self):
        return (self.pool,)

    def _find(self, size: int) -> Block | None:
        raise NotImplementedError

    def _grow(self, tid: Hashable, size: int) -> Block:
        """Make a free block of `size` bytes at the top of the arena (one device call)."""
        a = self.arena
        top = a.blocks[-1] if a is not None else None
        need = size - top.size if top is not None and top.owner is None else size
        if self.capacity is not None and self.reserved + need > self.capacity:
            raise OutOfMemoryError(f"{self.name}: {tid!r} needs {size} bytes; the arena of "
                                   f"{self.reserved} bytes cannot grow by {need} within the "
                                   f"capacity of {self.capacity} bytes")
        if a is None:
            self.arena = self.device_malloc(size, "arena")
            return self.arena.blocks[0]
        self.device_mallocs += 1
        self.reserved += need
        a.size += need
        self.segment_rects[a.rect].t1 = self._event     # the outline steps up here
        a.rect = len(self.segment_rects)
        self.segment_rects.append(Rect("arena", a.addr, a.size, self._event))
        self._next_addr += need
        if top.owner is None:
            self.pool.remove(top)
            top.size += need
            return top
        b = Block(top.end, need, a.id)
        a.blocks.append(b)
        return b

    def _malloc(self, tid: Hashable, size: int) -> list[Block]:
        size = align_up(size, self.alignment)
        b = self._find(size)
        if b is None:
            b = self._grow(tid, size)
        else:
            self.pool.remove(b)
        if b.size > size:
            self.pool.add(self.split(b, size))
        return [b]

    def _free(self, tid: Hashable, blocks: list[Block]) -> None:
        for b in blocks:
            b.owner = None
            self.pool.add(self.merge_free(b, self.pool))


class FirstFitAllocator(ArenaAllocator):
    """The lowest-addressed free block that fits."""
    name = "first-fit"

    def _find(self, size: int) -> Block | None:
        if self.arena is None:
            return None
        return next((b for b in self.arena.blocks if b.owner is None and b.size >= size), None)


class BestFitAllocator(ArenaAllocator):
    """The smallest free block that fits (lowest address on ties)."""
    name = "best-fit"

    def _find(self, size: int) -> Block | None:
        return self.pool.best_fit(size)
