"""A caching allocator modelled on PyTorch's [PyTorch CUDA] and [Imanishi 2024].

The rules, each one a method below so a student can change one and re-run:
- sizes are rounded up to 512 bytes (`round_size`), or, with `roundup_power2_divisions=d`,
  to the next of `d` equal steps between two powers of two (less fragmentation from odd
  sizes, more rounding waste);
- two pools: requests of at most 1 MiB are "small", the rest "large" (`pool_of`), so a
  small tensor never splits a large block;
- a request that no cached block serves asks the device for a new segment
  (`allocation_size`): 2 MiB for a small request, 20 MiB for a request under 10 MiB,
  else the request rounded up to 2 MiB;
- the cached block taken is the best fit (`get_free_block`); with `max_split_size` set,
  a small request will not take an "oversize" block (>= max_split_size) and an oversize
  request will not take a block 20 MiB bigger than itself;
- a block is split (`should_split`) when what is left is at least 512 bytes (small pool)
  or more than 1 MiB and the request is below `max_split_size` (large pool);
- a freed block is cached, never given back: it coalesces with free neighbours of the same
  segment and goes back to its pool;
- when the device is full (`capacity`), cached oversize segments are released first,
  then every wholly free segment (`cudaFree`), and the request is retried; only then is
  it out of memory.
Unused split blocks are the fragmentation [Imanishi 2024] describes: free bytes in the cache that
no request of the next size can use, so the allocator asks the device for more.
`CupyPoolAllocator` is the same frame with CuPy's simpler rules (one pool, exact segments).
"""

from __future__ import annotations

from collections.abc import Hashable

from ..buffers import align_up
from .base import Block, FreePool, MiB, OnlineAllocator, OutOfMemoryError, Segment


def roundup_power2_next_division(size: int, divisions: int) -> int:
    """Round `size` up to the next of `divisions` equal steps between two powers of two
    (PyTorch's `roundup_power2_divisions`: 1200 with 4 divisions -> 1280)."""
    if size & (size - 1) == 0:
        return size
    floor = 1 << (size.bit_length() - 1)
    step = floor >> (divisions.bit_length() - 1)
    if step == 0:
        return floor << 1
    low = size & ~(step - 1)
    return size if low == size else low + step


class CachingAllocator(OnlineAllocator):
    """PyTorch-style caching: two pools, rounded segments, split blocks, no device frees
    until the device is full. The constants default to PyTorch's."""
    name = "caching"

    def __init__(self, capacity: int | None = None, *, max_split_size: int | None = None,
                 roundup_power2_divisions: int | None = None, min_block: int = 512,
                 small_size: int = MiB, small_buffer: int = 2 * MiB,
                 large_buffer: int = 20 * MiB, min_large_alloc: int = 10 * MiB,
                 round_large: int = 2 * MiB):
        super().__init__(capacity)
        self.max_split_size = max_split_size
        self.divisions = roundup_power2_divisions
        self.min_block, self.small_size, self.small_buffer = min_block, small_size, small_buffer
        self.large_buffer, self.min_large_alloc = large_buffer, min_large_alloc
        self.round_large = round_large
        self.pool = {"small": FreePool(), "large": FreePool()}

    def pools(self):
        return self.pool.values()

    # The rules ----------------------------------------------------------------------------
    def round_size(self, size: int) -> int:
        if size < self.min_block:
            return self.min_block
        d = self.divisions
        if d and d > 1 and size > self.min_block * d:
            return roundup_power2_next_division(size, d)
        return align_up(size, self.min_block)

    def pool_of(self, rsize: int) -> str:
        return "small" if rsize <= self.small_size else "large"

    def allocation_size(self, rsize: int) -> int:
        if rsize <= self.small_size:
            return self.small_buffer
        if rsize < self.min_large_alloc:
            return self.large_buffer
        return align_up(rsize, self.round_large)

    def get_free_block(self, rsize: int, pool: str) -> Block | None:
        b = self.pool[pool].best_fit(rsize)
        m = self.max_split_size
        if b is None or m is None:
            return b
        if rsize < m and b.size >= m:            # do not split an oversize block
            return None
        if rsize >= m and b.size >= rsize + self.large_buffer:   # nor waste one
            return None
        return b

    def should_split(self, b: Block, rsize: int, pool: str) -> bool:
        rest = b.size - rsize
        if pool == "small":
            return rest >= self.min_block
        return (self.max_split_size is None or rsize < self.max_split_size) and \
            rest > self.small_size

    # Allocation ---------------------------------------------------------------------------
    def _malloc(self, tid: Hashable, size: int) -> list[Block]:
        rsize = self.round_size(size)
        pool = self.pool_of(rsize)
        b = self.get_free_block(rsize, pool)
        if b is None:
            b = self.alloc_segment(tid, self.allocation_size(rsize), pool, rsize).blocks[0]
        else:
            self.pool[pool].remove(b)
        if self.should_split(b, rsize, pool):
            self.pool[pool].add(self.split(b, rsize))
        return [b]

    def alloc_segment(self, tid: Hashable, nbytes: int, pool: str, rsize: int) -> Segment:
        """A new segment from the device; when the device is full, empty the cache and
        retry (oversize segments first, then every wholly free segment)."""
        seg = self.device_malloc(nbytes, pool)
        if seg is not None:
            return seg
        if self.release_available_cached_blocks(rsize):
            seg = self.device_malloc(nbytes, pool)
        if seg is None and self.release_cached_blocks():
            seg = self.device_malloc(nbytes, pool)
        if seg is None:
            raise OutOfMemoryError(
                f"{self.name}: {tid!r} needs a segment of {nbytes} bytes; {self.reserved} of "
                f"{self.capacity} bytes are reserved ({self.allocated} allocated, "
                f"{self.free_bytes()} cached in blocks, the largest {self.largest_free()})")
        self.ooms_recovered += 1
        return seg

    def _release(self, b: Block) -> None:
        self.pool[self.segments[b.segment].pool].remove(b)
        self.device_free(self.segments[b.segment])

    def _whole_free_segments(self, pool: str) -> list[Block]:
        return [b for b in self.pool[pool]
                if len(self.segments[b.segment].blocks) == 1]

    def release_available_cached_blocks(self, rsize: int) -> bool:
        """Only with `max_split_size`: release cached oversize segments, the smallest one
        that is big enough, else the largest ones until enough bytes are released."""
        m = self.max_split_size
        if m is None:
            return False
        target = max(rsize, m)
        oversize = sorted((b for b in self._whole_free_segments("large") if b.size >= m),
                          key=lambda b: (b.size, b.addr))
        for b in oversize:
            if b.size >= target:
                self._release(b)
                return True
        released = 0
        for b in reversed(oversize):
            self._release(b)
            released += b.size
            if released >= target:
                return True
        return False

    def release_cached_blocks(self) -> bool:
        """`torch.cuda.empty_cache()`: give every wholly free segment back to the device."""
        for pool in self.pool:
            for b in self._whole_free_segments(pool):
                self._release(b)
        return True

    def _free(self, tid: Hashable, blocks: list[Block]) -> None:
        for b in blocks:
            b.owner = None
            pool = self.pool[self.segments[b.segment].pool]
            pool.add(self.merge_free(b, pool))


class CupyPoolAllocator(CachingAllocator):
    """CuPy's default memory pool: 512-byte rounding, one pool, a segment of exactly the
    rounded request, best fit, split whatever is left, coalesce on free, and on
    out-of-memory free every cached block and retry. What `measure_cupy_pool` measures."""
    name = "cupy-pool"

    def __init__(self, capacity: int | None = None):
        super().__init__(capacity, small_size=0)

    def round_size(self, size: int) -> int:
        return align_up(max(size, 1), self.min_block)

    def pool_of(self, rsize: int) -> str:
        return "large"

    def allocation_size(self, rsize: int) -> int:
        return rsize

    def should_split(self, b: Block, rsize: int, pool: str) -> bool:
        return b.size > rsize
