"""First fit and best fit over one arena: the textbook online allocators.

`FirstFitArena` is the one first-fit of this package: byte offsets [0, capacity), a
request of S bytes takes the lowest-addressed free block of at least S bytes (Coop's
description [Zhang 2023]: "the leftmost free block of at least S"), the rest stays free,
and a freed block is merged with its free neighbours. When no single free block is large
enough the request fails, *even if the free bytes add up to S*: those scattered free
bytes are fragmentation. The DTR runtime runs in one of fixed size (`minigraph.runtime.dtr`:
a failed request means evict); the online simulator `FirstFitAllocator` below asks one
where to place each block and grows it when nothing fits.

The online simulators (`ArenaAllocator`) keep one segment `[0, top)`. When nothing fits,
the arena grows at the top like a heap's `sbrk`: if the topmost block is free it is
extended by the shortfall, else a new block is added above. Each growth is one device
call. The arena never shrinks, so its top is the reserved memory: whatever holes are left
below it when the top moves is fragmentation. Best fit takes the smallest free block that
fits instead.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Iterator

from ..buffers import align_up
from .base import (
    Block,
    FreePool,
    InvariantError,
    OnlineAllocator,
    OutOfMemoryError,
    Rect,
    Segment,
)


class FirstFitArena:
    """First-fit, coalescing allocator over byte offsets [0, capacity).

    `alloc(size, owner)` returns an offset or None; `free(offset)` gives the block back and
    merges it with free neighbours. Blocks are kept in address order, so `blocks()` walks
    the arena left to right (what Coop's sliding window looks at).
    """

    tracks_addresses = True

    def __init__(self, capacity: int):
        if capacity < 0:
            raise ValueError(f"arena capacity must be >= 0, not {capacity}")
        self.capacity = int(capacity)
        self._free_starts: list[int] = [0] if capacity else []   # sorted
        self._free_size: dict[int, int] = {0: capacity} if capacity else {}
        self._used_starts: list[int] = []                        # sorted
        self._used: dict[int, tuple[int, Hashable]] = {}         # start -> (size, owner)
        self.free_bytes = self.capacity
        self.high_water = 0        # the highest address any block has ended at

    # Queries -----------------------------------------------------------------------------
    @property
    def used_bytes(self) -> int:
        return self.capacity - self.free_bytes

    def largest_free(self) -> int:
        return max(self._free_size.values(), default=0)

    def can_fit(self, size: int) -> bool:
        if size <= 0:
            return True
        if size > self.free_bytes:
            return False
        return any(s >= size for s in self._free_size.values())

    def free_around(self, offset: int) -> tuple[int, int]:
        """Free bytes directly left and right of the block at `offset` (MegEngine's
        `get_free_left_and_right`)."""
        size = self._used[offset][0]
        left = right = 0
        k = bisect.bisect_left(self._free_starts, offset) - 1
        if k >= 0:
            s = self._free_starts[k]
            if s + self._free_size[s] == offset:
                left = self._free_size[s]
        right = self._free_size.get(offset + size, 0)
        return left, right

    def owner(self, offset: int) -> Hashable:
        return self._used[offset][1]

    def blocks(self) -> Iterator[tuple[int, int, Hashable | None]]:
        """(start, size, owner) for every block left to right; owner None for free ones."""
        i = j = 0
        fs, us = self._free_starts, self._used_starts
        while i < len(fs) or j < len(us):
            if j >= len(us) or (i < len(fs) and fs[i] < us[j]):
                yield fs[i], self._free_size[fs[i]], None
                i += 1
            else:
                size, owner = self._used[us[j]]
                yield us[j], size, owner
                j += 1

    # Changes -----------------------------------------------------------------------------
    def alloc(self, size: int, owner: Hashable) -> int | None:
        """Lowest-addressed free block of at least `size` bytes, or None (first fit)."""
        size = int(size)
        if size <= 0:
            raise ValueError(f"allocation of {size} bytes for {owner}")
        for s in self._free_starts:
            have = self._free_size[s]
            if have >= size:
                del self._free_size[s]
                k = bisect.bisect_left(self._free_starts, s)
                if have == size:
                    del self._free_starts[k]
                else:
                    self._free_starts[k] = s + size
                    self._free_size[s + size] = have - size
                bisect.insort(self._used_starts, s)
                self._used[s] = (size, owner)
                self.free_bytes -= size
                if s + size > self.high_water:
                    self.high_water = s + size
                return s
        return None

    def free(self, offset: int) -> None:
        """Give the block at `offset` back, merging it with free neighbours."""
        size, _ = self._used.pop(offset)
        del self._used_starts[bisect.bisect_left(self._used_starts, offset)]
        self.free_bytes += size
        start, end = offset, offset + size
        k = bisect.bisect_left(self._free_starts, offset)
        if k > 0:   # merge with the free block on the left
            ls = self._free_starts[k - 1]
            if ls + self._free_size[ls] == offset:
                start = ls
                del self._free_size[ls]
                del self._free_starts[k - 1]
                k -= 1
        if end in self._free_size:   # merge with the free block on the right
            end += self._free_size.pop(end)
            del self._free_starts[k]
        self._free_starts.insert(k, start)
        self._free_size[start] = end - start

    def grow(self, nbytes: int) -> None:
        """Add `nbytes` at the top: they extend the topmost free block, or make a new one."""
        if nbytes <= 0:
            return
        top = self.capacity
        self.capacity += nbytes
        self.free_bytes += nbytes
        last = self._free_starts[-1] if self._free_starts else -1
        if last >= 0 and last + self._free_size[last] == top:
            self._free_size[last] += nbytes
        else:
            self._free_starts.append(top)
            self._free_size[top] = nbytes

    def compact(self) -> list[tuple[Hashable, int, int, int]]:
        """Slide every block to the left, in address order (defragmentation).

        Returns the moves `(owner, old offset, new offset, size)`, left to right, so a
        backend can copy the bytes (each move is to a lower or equal address, so copying in
        this order never overwrites a block that has not moved yet)."""
        moves = []
        at = 0
        new_used: dict[int, tuple[int, Hashable]] = {}
        for s in self._used_starts:
            size, owner = self._used[s]
            if s != at:
                moves.append((owner, s, at, size))
            new_used[at] = (size, owner)
            at += size
        self._used = new_used
        self._used_starts = sorted(new_used)
        self._free_starts = [at] if at < self.capacity else []
        self._free_size = {at: self.capacity - at} if at < self.capacity else {}
        return moves

    def __repr__(self) -> str:
        return (f"FirstFitArena({self.capacity} B: {self.used_bytes} used in "
                f"{len(self._used)} blocks, {self.free_bytes} free in {len(self._free_size)} "
                f"blocks, largest {self.largest_free()})")


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
    """The lowest-addressed free block that fits. The choice is `FirstFitArena`'s (sized
    like the arena, grown with it); the blocks here follow it for the books and pictures."""
    name = "first-fit"

    def __init__(self, alignment: int = 512, capacity: int | None = None):
        super().__init__(alignment, capacity)
        self.fit = FirstFitArena(0)

    def _find(self, size: int) -> Block | None:
        at = self.fit.alloc(size, size)
        return None if at is None else self.pool.blocks[self.arena.addr + at]

    def _grow(self, tid: Hashable, size: int) -> Block:
        b = super()._grow(tid, size)
        self.fit.grow(self.arena.size - self.fit.capacity)
        at = self.fit.alloc(size, size)
        if at is None or self.arena.addr + at != b.addr:   # pragma: no cover  (an invariant)
            raise InvariantError(f"first fit placed {tid!r} at {at}, the arena grew at {b.addr}")
        return b

    def _free(self, tid: Hashable, blocks: list[Block]) -> None:
        for b in blocks:
            self.fit.free(b.addr - self.arena.addr)
        super()._free(tid, blocks)

    def check(self) -> None:
        super().check()
        base = self.arena.addr if self.arena is not None else 0
        mine = sorted((b.addr - base, b.size) for b in self.pool)
        theirs = [(s, n) for s, n, owner in self.fit.blocks() if owner is None]
        if mine != theirs:
            raise InvariantError(f"first fit's free blocks {theirs} differ from the pool's {mine}")


class BestFitAllocator(ArenaAllocator):
    """The smallest free block that fits (lowest address on ties)."""
    name = "best-fit"

    def _find(self, size: int) -> Block | None:
        return self.pool.best_fit(size)
