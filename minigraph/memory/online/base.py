"""The frame every online allocator shares: segments, blocks, a free pool, the replay loop,
the invariants, and the numbers a run reports.

The device hands out *segments* (one `cudaMalloc` each). Each segment is tiled by
*blocks*, allocated or free, in address order, with no gap and no overlap. An allocator
decides which free block a request takes, when to split a block and when to ask the
device for a new segment; that choice is the whole difference between the allocators.
Everything else - bookkeeping, accounting, the history for the pictures - lives here, once.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ...errors import MinigraphError
from ...graph import fmt_bytes
from .trace import Event, TraceError, as_trace

KiB = 1024
MiB = 1024 * 1024


class OutOfMemoryError(MinigraphError, MemoryError):
    """The device cannot give a segment even after the allocator emptied its cache."""


class InvariantError(MinigraphError, AssertionError):
    """An allocator's bookkeeping is inconsistent (a bug in the allocator, not the trace)."""


@dataclass(eq=False)
class Block:
    """`size` bytes at `addr` inside segment `segment`; `owner` is the tensor, None if free."""
    addr: int
    size: int
    segment: int
    owner: Hashable | None = None
    rect: int = -1          # index of its rectangle in the history while allocated

    @property
    def end(self) -> int:
        return self.addr + self.size


@dataclass(eq=False)
class Segment:
    """One device allocation: bytes `[addr, addr + size)`, tiled by `blocks` in address order."""
    id: int
    addr: int
    size: int
    pool: str
    blocks: list[Block] = field(default_factory=list)
    rect: int = -1

    def index(self, block: Block) -> int:
        i = bisect.bisect_left(self.blocks, block.addr, key=lambda b: b.addr)
        if i >= len(self.blocks) or self.blocks[i] is not block:
            raise InvariantError(f"block at {block.addr} is not in segment {self.id}")
        return i


class FreePool:
    """Free blocks sorted by (size, address): best fit is one binary search (PyTorch keeps
    its pools as `std::set` ordered the same way)."""

    def __init__(self) -> None:
        self.keys: list[tuple[int, int]] = []
        self.blocks: dict[int, Block] = {}
        self.total = 0

    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self):
        return (self.blocks[a] for _, a in self.keys)

    def add(self, b: Block) -> None:
        bisect.insort(self.keys, (b.size, b.addr))
        self.blocks[b.addr] = b
        self.total += b.size

    def remove(self, b: Block) -> None:
        i = bisect.bisect_left(self.keys, (b.size, b.addr))
        if i >= len(self.keys) or self.keys[i] != (b.size, b.addr):
            raise InvariantError(f"free block [{b.addr}, {b.end}) is not in the pool")
        del self.keys[i]
        del self.blocks[b.addr]
        self.total -= b.size

    def best_fit(self, size: int) -> Block | None:
        """The smallest free block of at least `size` bytes (lowest address on ties)."""
        i = bisect.bisect_left(self.keys, (size, -1))
        return self.blocks[self.keys[i][1]] if i < len(self.keys) else None

    def largest(self) -> int:
        return self.keys[-1][0] if self.keys else 0


@dataclass
class Rect:
    """A block's rectangle in the arena picture: bytes [addr, addr+size) over events [t0, t1)."""
    owner: Hashable
    addr: int
    size: int
    t0: int
    t1: int | None = None


@dataclass
class HistoryRow:
    """The allocator's state just after one event."""
    event: int
    kind: str
    id: Hashable
    size: int
    reserved: int
    allocated: int
    requested: int
    free: int
    largest_free: int


@dataclass
class AllocatorResult:
    """What replaying a trace cost one allocator.

    `peak_reserved`: the most bytes held from the device at once (what `nvidia-smi` sees);
    `peak_allocated`: the most bytes in handed-out blocks (after rounding);
    `peak_requested`: the most bytes the program asked for at once (the trace's minimum).
    `fragmentation = peak_reserved - peak_allocated`: bytes reserved that were never needed
    at the worst moment. At the peak of allocated bytes, `free_at_peak` bytes were free,
    the largest free block being `largest_free_ratio` of them (1.0: all in one piece).
    """
    name: str
    events: int
    peak_reserved: int
    peak_allocated: int
    peak_requested: int
    reserved_at_peak: int
    free_at_peak: int
    largest_free_at_peak: int
    device_mallocs: int
    device_frees: int
    stitches: int
    ooms_recovered: int
    history: list[HistoryRow] = field(repr=False)
    rects: list[Rect] = field(repr=False)
    segment_rects: list[Rect] = field(repr=False)

    @property
    def fragmentation(self) -> int:
        return self.peak_reserved - self.peak_allocated

    @property
    def rounding(self) -> int:
        return self.peak_allocated - self.peak_requested

    @property
    def frag_at_peak(self) -> int:
        """Reserved minus allocated at the moment of peak allocated bytes."""
        return self.reserved_at_peak - self.peak_allocated

    @property
    def largest_free_ratio(self) -> float:
        return self.largest_free_at_peak / self.free_at_peak if self.free_at_peak else 1.0

    @property
    def ratio(self) -> float:
        """Reserved over the trace's peak of requested bytes (1.0 is perfect)."""
        return self.peak_reserved / self.peak_requested if self.peak_requested else 1.0

    def summary(self) -> str:
        return (f"{self.name}: reserved {fmt_bytes(self.peak_reserved)} for a peak of "
                f"{fmt_bytes(self.peak_requested)} requested (x{self.ratio:.3f}); "
                f"fragmentation {fmt_bytes(self.fragmentation)}, largest free block "
                f"{self.largest_free_ratio:.0%} of the free bytes at the peak; "
                f"{self.device_mallocs} device mallocs, {self.device_frees} device frees"
                + (f", {self.stitches} stitches" if self.stitches else ""))

    def __repr__(self) -> str:
        return f"AllocatorResult({self.summary()})"

    def _repr_html_(self) -> str:
        return f"<pre>{self.summary()}</pre>"


class OnlineAllocator:
    """Base of the simulators: `malloc(id, size)`, `free(id)`, `replay(trace)`, `check()`.

    A subclass implements `_malloc(id, size) -> list[Block]` (one block, or several
    pieces for a stitched allocation) and may override `_free`. The device is a byte
    budget (`capacity`, None = unlimited) with a bump pointer for virtual addresses: a
    segment given back leaves a hole in the address space, not in the budget.
    """
    name = "online"

    def __init__(self, capacity: int | None = None):
        self.capacity = capacity
        self.segments: dict[int, Segment] = {}
        self.live: dict[Hashable, list[Block]] = {}
        self.requested_of: dict[Hashable, int] = {}
        self.reserved = self.allocated = self.requested = 0
        self.device_mallocs = self.device_frees = self.stitches = self.ooms_recovered = 0
        self.history: list[HistoryRow] = []
        self.rects: list[Rect] = []
        self.segment_rects: list[Rect] = []
        self._next_addr = 0
        self._next_seg = 0
        self._event = 0

    # The device ---------------------------------------------------------------------------
    def device_malloc(self, size: int, pool: str = "") -> Segment | None:
        """A new segment of `size` bytes with one free block, or None past the capacity
        (the caller adds the block to its pool)."""
        if self.capacity is not None and self.reserved + size > self.capacity:
            return None
        seg = Segment(self._next_seg, self._next_addr, size, pool)
        seg.blocks.append(Block(seg.addr, size, seg.id))
        seg.rect = len(self.segment_rects)
        self.segment_rects.append(Rect(f"segment {seg.id}", seg.addr, size, self._event))
        self.segments[seg.id] = seg
        self._next_seg += 1
        self._next_addr += size
        self.reserved += size
        self.device_mallocs += 1
        return seg

    def device_free(self, seg: Segment) -> None:
        """Give a wholly free segment back (a `cudaFree`)."""
        if len(seg.blocks) != 1 or seg.blocks[0].owner is not None:
            raise InvariantError(f"segment {seg.id} is not wholly free")
        del self.segments[seg.id]
        self.segment_rects[seg.rect].t1 = self._event
        self.reserved -= seg.size
        self.device_frees += 1

    # Blocks -------------------------------------------------------------------------------
    def split(self, b: Block, size: int) -> Block:
        """Cut free block `b` to `size` bytes; returns the free remainder (not pooled)."""
        seg = self.segments[b.segment]
        i = seg.index(b)
        rest = Block(b.addr + size, b.size - size, b.segment)
        b.size = size
        seg.blocks.insert(i + 1, rest)
        return rest

    def merge_free(self, b: Block, pool: FreePool) -> Block:
        """Coalesce free block `b` with its free neighbours in the same segment; the
        neighbours leave `pool`. Returns the merged block (not pooled)."""
        seg = self.segments[b.segment]
        i = seg.index(b)
        if i + 1 < len(seg.blocks) and seg.blocks[i + 1].owner is None:
            nxt = seg.blocks.pop(i + 1)
            pool.remove(nxt)
            b.size += nxt.size
        if i > 0 and seg.blocks[i - 1].owner is None:
            prev = seg.blocks[i - 1]
            pool.remove(prev)
            prev.size += b.size
            seg.blocks.pop(i)
            b = prev
        return b

    # What a subclass decides --------------------------------------------------------------
    def _malloc(self, tid: Hashable, size: int) -> list[Block]:
        raise NotImplementedError

    def _free(self, tid: Hashable, blocks: list[Block]) -> None:
        raise NotImplementedError

    def pools(self) -> Iterable[FreePool]:
        raise NotImplementedError

    # The public interface -----------------------------------------------------------------
    def malloc(self, tid: Hashable, size: int) -> list[Block]:
        if tid in self.live:
            raise TraceError(f"alloc of {tid!r}, which is already alive")
        blocks = self._malloc(tid, size) if size else []
        for b in blocks:
            b.owner = tid
            b.rect = len(self.rects)
            self.rects.append(Rect(tid, b.addr, b.size, self._event))
            self.allocated += b.size
        self.live[tid] = blocks
        self.requested_of[tid] = size
        self.requested += size
        return blocks

    def free(self, tid: Hashable) -> None:
        if tid not in self.live:
            raise TraceError(f"free of {tid!r}, which is not alive")
        blocks = self.live.pop(tid)
        self.requested -= self.requested_of.pop(tid)
        for b in blocks:
            self.rects[b.rect].t1 = self._event
            self.allocated -= b.size
        if blocks:
            self._free(tid, blocks)

    def free_bytes(self) -> int:
        return sum(p.total for p in self.pools())

    def largest_free(self) -> int:
        return max((p.largest() for p in self.pools()), default=0)

    def step(self, event: Event) -> None:
        """Apply one event and record the state after it."""
        kind, tid, size = event
        if kind == "alloc":
            self.malloc(tid, size)
        elif kind == "free":
            self.free(tid)
        else:
            raise TraceError(f"unknown event kind {kind!r}")
        self.history.append(HistoryRow(self._event, kind, tid, size, self.reserved,
                                       self.allocated, self.requested, self.free_bytes(),
                                       self.largest_free()))
        self._event += 1

    def replay(self, trace: Any, check: bool = False) -> AllocatorResult:
        """Run every event of `trace` (a list of tuples or a DTR run); `check=True`
        verifies the invariants after each event (slow; for tests)."""
        for ev in as_trace(trace):
            self.step(ev)
            if check:
                self.check()
        return self.result()

    def result(self) -> AllocatorResult:
        h = self.history
        peak = max(h, key=lambda r: r.allocated, default=None)
        return AllocatorResult(
            self.name, len(h),
            peak_reserved=max((r.reserved for r in h), default=0),
            peak_allocated=peak.allocated if peak else 0,
            peak_requested=max((r.requested for r in h), default=0),
            reserved_at_peak=peak.reserved if peak else 0,
            free_at_peak=peak.free if peak else 0,
            largest_free_at_peak=peak.largest_free if peak else 0,
            device_mallocs=self.device_mallocs, device_frees=self.device_frees,
            stitches=self.stitches, ooms_recovered=self.ooms_recovered,
            history=h, rects=self.rects, segment_rects=self.segment_rects)

    # Invariants ---------------------------------------------------------------------------
    def check(self) -> None:
        """Raise InvariantError unless the books balance.

        - segments are disjoint; blocks tile each segment, without gap or overlap, so no
          two live blocks overlap;
        - no two free neighbours are left uncoalesced;
        - the free pools hold exactly the free blocks;
        - allocated + free == reserved, byte for byte; each live tensor holds at least the
          bytes it asked for.
        """
        segs = sorted(self.segments.values(), key=lambda s: s.addr)
        for a, b in zip(segs, segs[1:]):
            if a.addr + a.size > b.addr:
                raise InvariantError(f"segments {a.id} and {b.id} overlap")
        allocated = free = reserved = 0
        free_blocks: set[int] = set()
        for s in segs:
            reserved += s.size
            at = s.addr
            for k, b in enumerate(s.blocks):
                if b.addr != at or b.size <= 0 or b.segment != s.id:
                    raise InvariantError(f"segment {s.id}: block at {b.addr} size {b.size} "
                                         f"breaks the tiling at address {at}")
                if b.owner is None:
                    free += b.size
                    free_blocks.add(id(b))
                    if k and s.blocks[k - 1].owner is None:
                        raise InvariantError(f"segment {s.id}: free blocks at "
                                             f"{s.blocks[k - 1].addr} and {b.addr} not merged")
                else:
                    allocated += b.size
                    if b not in self.live.get(b.owner, ()):
                        raise InvariantError(f"block at {b.addr} owned by {b.owner!r}, "
                                             "which does not hold it")
                at = b.end
            if at != s.addr + s.size:
                raise InvariantError(f"segment {s.id}: blocks end at {at}, not at "
                                     f"{s.addr + s.size}")
        pooled = [b for p in self.pools() for b in p]
        if {id(b) for b in pooled} != free_blocks or len(pooled) != len(free_blocks):
            raise InvariantError("the free pools do not hold exactly the free blocks")
        if sum(p.total for p in self.pools()) != free:
            raise InvariantError("a pool's byte count disagrees with its blocks")
        if reserved != self.reserved or allocated != self.allocated:
            raise InvariantError(f"counters say reserved {self.reserved}, allocated "
                                 f"{self.allocated}; blocks say {reserved}, {allocated}")
        if allocated + free != reserved:
            raise InvariantError(f"allocated {allocated} + free {free} != reserved {reserved}")
        for tid, blocks in self.live.items():
            if sum(b.size for b in blocks) < self.requested_of[tid]:
                raise InvariantError(f"{tid!r} holds fewer bytes than it asked for")
            for b in blocks:
                if b.owner != tid or self.segments.get(b.segment) is None:
                    raise InvariantError(f"{tid!r} holds a block it does not own")

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(reserved {fmt_bytes(self.reserved)}, allocated "
                f"{fmt_bytes(self.allocated)}, {len(self.segments)} segments)")
