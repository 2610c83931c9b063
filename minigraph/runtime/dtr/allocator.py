"""The arenas DTR runs in: first fit (addresses, fragmentation) or an ideal counter.

`FirstFitArena` is the package's one first-fit allocator (`minigraph.memory.online.arena`):
one range of exactly `budget` bytes; a request takes the lowest-addressed free block that
fits, and fails when no single free block is large enough *even if the free bytes add up*:
those scattered free bytes are fragmentation, and DTR must evict a tensor whose bytes
(together with the free bytes around it) form one contiguous range [Zhang 2023].

`IdealArena` is the allocator the DTR paper's simulator assumes [Kirisame 2021]: memory is
a counter, any S <= free bytes fits. Comparing the two shows what fragmentation costs.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator

from ...memory.online.arena import FirstFitArena


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
