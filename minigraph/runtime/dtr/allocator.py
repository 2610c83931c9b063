"""The offset allocator DTR runs in: first-fit with coalescing over ONE arena of fixed size.

This is the allocator Coop describes (seed 002, Coop): a freed block is merged with free
neighbours; a request of S bytes takes the lowest-addressed free block of at least S bytes.
When no single free block is large enough the request fails, *even if the free bytes add up
to S*: those scattered free bytes are fragmentation, and DTR must evict a tensor whose bytes
(together with the free bytes around it) form one contiguous range.

`IdealArena` is the allocator the DTR paper's simulator assumes: memory is a counter, any
S <= free bytes fits. Comparing the two shows what fragmentation costs.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Iterator


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


class IdealArena:
    """Memory as a counter, the DTR paper's simulator assumption: no addresses, no
    fragmentation. Offsets returned are all 0 and mean nothing (simulated mode only)."""

    tracks_addresses = False

    def __init__(self, capacity: int):
        self.capacity = int(capacity)
        self.free_bytes = self.capacity
        self._used: dict[Hashable, int] = {}
        self._next = 0
        self.high_water = 0        # the most bytes in use at once

    @property
    def used_bytes(self) -> int:
        return self.capacity - self.free_bytes

    def largest_free(self) -> int:
        return self.free_bytes

    def can_fit(self, size: int) -> bool:
        return size <= self.free_bytes

    def free_around(self, offset: int) -> tuple[int, int]:
        return 0, 0

    def blocks(self) -> Iterator[tuple[int, int, Hashable | None]]:
        return iter(())

    def alloc(self, size: int, owner: Hashable) -> int | None:
        if size > self.free_bytes:
            return None
        self._next += 1
        self._used[self._next] = size
        self.free_bytes -= size
        self.high_water = max(self.high_water, self.capacity - self.free_bytes)
        return self._next          # a handle, not an address

    def free(self, offset: int) -> None:
        self.free_bytes += self._used.pop(offset)

    def compact(self) -> list:
        return []

    def __repr__(self) -> str:
        return f"IdealArena({self.capacity} B, {self.free_bytes} free)"


ALLOCATORS = {"first-fit": FirstFitArena, "ideal": IdealArena}
