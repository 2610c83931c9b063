"""The arenas DTR runs in: first fit (addresses, fragmentation), Coop's partitioned first
fit, or an ideal counter.

`FirstFitArena` is the package's one first-fit allocator (`minigraph.memory.online.arena`):
one range of exactly `budget` bytes; a request takes the lowest-addressed free block that
fits, and fails when no single free block is large enough *even if the free bytes add up*:
those scattered free bytes are fragmentation, and DTR must evict a tensor whose bytes
(together with the free bytes around it) form one contiguous range [Zhang 2023].
`DTRArena` is that allocator plus `give` (a block changes owner: an in-place op's output
takes its input's bytes). `PartitionedArena` is Coop's cheap-tensor partitioning
[Zhang 2023]: cheap tensors are placed from the bottom, expensive ones from the top, so
cheap ones lie side by side and a sliding window finds runs of them.

`IdealArena` is the allocator the DTR paper's simulator assumes [Kirisame 2021]: memory is
a counter, any S <= free bytes fits. Comparing the two shows what fragmentation costs.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Hashable, Iterator
from typing import Any

from ...memory.online.arena import FirstFitArena
from .heuristics import DTROptionError

#: With `DTROptions(partition=True)`: a tensor is cheap when its producer's cost per byte
#: written is below this. With the default FLOP costs that is < 8 FLOPs per float32
#: element: element-wise ops (about 1 per element); a matmul or a convolution writes K/2
#: FLOPs per byte for a reduction of length K. Coop's split: super-linear ops are an
#: order of magnitude denser than the rest [Zhang 2023].
CHEAP_DENSITY = 2.0


class DTRArena(FirstFitArena):
    """First fit with `give(offset, owner)`: the block at `offset` changes owner (its bytes
    stay), which is how an in-place op's output takes over its input's block.
    `physical(offset)`: where a real run's backend puts the block (here: at `offset`)."""

    staged_moves = False     # compact()'s moves are safe to copy one by one, in order

    def give(self, offset: int, owner: Hashable) -> None:
        size, _ = self._used[offset]
        self._used[offset] = (size, owner)

    def physical(self, offset: int) -> int:
        return offset


class PartitionedArena(DTRArena):
    """Coop's cheap-tensor partitioning [Zhang 2023]: a request whose owner is
    `expensive(owner)` takes the *highest* free block that fits, at that block's top end;
    the others take the lowest, at its bottom (first fit). Compaction slides the bottom
    blocks down and the top blocks up, so the two regions stay apart."""

    staged_moves = True      # blocks may swap places: copy every source before writing

    def __init__(self, capacity: int, expensive: Callable[[Hashable], bool], unit: int = 1):
        super().__init__(capacity)
        self.expensive = expensive
        self.unit = max(int(unit), 1)        # divides every request (the alignment, at least)
        self.high: set[int] = set()          # starts of the blocks placed from the top

    def physical(self, offset: int) -> int:
        """Where a real run puts the block at `offset`: rounded down to `unit`. A block
        placed from the top at budget - size is unaligned when the budget is not a
        multiple of the unit (a float32 view would read unaligned, other bits). Every
        block starts at a multiple of the unit, or one plus r = budget % unit (those
        placed from the top end), and the gap from a block ending at a multiple up to a
        block starting at one plus r holds r bytes at least: moving the second kind down
        by r collides with nothing. The decisions, made on these offsets, stay the same."""
        return offset - offset % self.unit

    def alloc(self, size: int, owner: Hashable) -> int | None:
        if not self.expensive(owner):
            return super().alloc(size, owner)
        size = int(size)
        if size <= 0:
            raise ValueError(f"allocation of {size} bytes for {owner}")
        for s in reversed(self._free_starts):
            have = self._free_size[s]
            if have >= size:
                at = s + have - size
                if have == size:
                    del self._free_size[s]
                    del self._free_starts[bisect.bisect_left(self._free_starts, s)]
                else:
                    self._free_size[s] = have - size
                bisect.insort(self._used_starts, at)
                self._used[at] = (size, owner)
                self.free_bytes -= size
                self.high_water = max(self.high_water, at + size)
                self.high.add(at)
                return at
        return None

    def free(self, offset: int) -> None:
        self.high.discard(offset)
        super().free(offset)

    def side(self, offset: int) -> str:
        """"top" or "bottom": where the block at `offset` was placed from."""
        return "top" if offset in self.high else "bottom"

    def compact(self) -> list[tuple[Hashable, int, int, int]]:
        """Bottom blocks packed from address 0 up, top blocks packed from the end down,
        each in address order. Returns the moves `(owner, old, new, size)`; a block may
        move over one that has not moved yet, so a backend copies every source before it
        writes any destination (`staged_moves`)."""
        low = [s for s in self._used_starts if s not in self.high]
        top = [s for s in self._used_starts if s in self.high]
        placed: list[tuple[int, int, int, Hashable, bool]] = []
        at = 0
        for s in low:
            size, owner = self._used[s]
            placed.append((s, at, size, owner, False))
            at += size
        end = self.capacity
        for s in reversed(top):
            size, owner = self._used[s]
            end -= size
            placed.append((s, end, size, owner, True))
        self._used = {new: (size, owner) for _, new, size, owner, _ in placed}
        self._used_starts = sorted(self._used)
        self.high = {new for _, new, _, _, hi in placed if hi}
        self._free_starts = [at] if at < end else []
        self._free_size = {at: end - at} if at < end else {}
        return [(owner, old, new, size) for old, new, size, owner, _ in placed if old != new]


class IdealArena:
    """Memory as a counter, the DTR paper's simulator assumption: no addresses, no
    fragmentation. Offsets returned are all 0 and mean nothing (simulated mode only)."""

    tracks_addresses = False
    staged_moves = False

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

    def give(self, offset: int, owner: Hashable) -> None:
        """Owners are not recorded: nothing to change."""

    def free(self, offset: int) -> None:
        self.free_bytes += self._used.pop(offset)

    def compact(self) -> list:
        return []

    def __repr__(self) -> str:
        return f"IdealArena({self.capacity} B, {self.free_bytes} free)"


ALLOCATORS = {"first-fit": DTRArena, "ideal": IdealArena}


def partition_threshold(partition: bool | float) -> float | None:
    """The cost per byte below which a tensor is cheap: None when `partition` is False,
    `CHEAP_DENSITY` when True, else the number given (> 0)."""
    if partition is False:
        return None
    if partition is True:
        return CHEAP_DENSITY
    if isinstance(partition, (int, float)) and partition > 0:
        return float(partition)
    raise DTROptionError(f"partition must be False, True or a cost per byte > 0, "
                         f"not {partition!r}")


def make_arena(allocator: str, partition: bool | float, budget: int, program: Any) -> Any:
    """The arena of one run: `ALLOCATORS[allocator]`, or with `partition` a
    `PartitionedArena` whose expensive owners are the tensors that are not cheap
    (`cheap_tensors`); workspace blocks are placed with the cheap ones."""
    threshold = partition_threshold(partition)
    if threshold is None:
        return ALLOCATORS[allocator](budget)
    cheap = cheap_tensors(program, threshold)
    sizes = [t.size for t in program.tensors] + [op.workspace for op in program.ops]
    return PartitionedArena(budget, lambda owner: isinstance(owner, int) and not cheap[owner],
                            math.gcd(*sizes))


def cheap_tensors(program: Any, threshold: float) -> list[bool]:
    """Per tensor: may be recomputed and its producer's cost per byte is below
    `threshold` (Coop's cost density [Zhang 2023]). Tensors that can never be evicted
    count as expensive: they go to the top, out of the cheap tensors' way."""
    p = program
    return [bool(p.replayable[t]) and p.cost_t[t] < threshold * t_spec.size
            for t, t_spec in enumerate(p.tensors)]
