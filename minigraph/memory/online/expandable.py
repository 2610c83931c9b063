"""PyTorch's expandable segments [PyTorch CUDA]: one segment per pool that grows page by
page, instead of one `cudaMalloc` per cache miss.

`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` makes the caching allocator reserve one
huge *virtual* range per pool (and stream) and back it with physical pages only as the
program needs them (CUDA's `cuMemAddressReserve`, `cuMemCreate`, `cuMemMap`). What changes
against `CachingAllocator` (`caching.py`), rule by rule, following `ExpandableSegment` and
its callers in `c10/cuda/CUDACachingAllocator.cpp`:

- a cache miss does not make a new segment: it *maps* pages (`map_pages`) - 2 MiB pages in
  the small pool, 20 MiB pages in the large pool, so each map call stays cheap - at the
  lowest address where free plus unmapped bytes together hold the request, normally the
  end of the segment, where the free block there is extended (`find_expandable`): a
  large block never needs a free segment of its own;
- only the shortfall is mapped, rounded up to pages (the request rounded to 512 bytes,
  not to the 2 MiB / 20 MiB segment sizes of `allocation_size`);
- any block is split when 512 bytes or more are left, in both pools (`should_split`), and
  freed blocks coalesce across the pages of one segment;
- best fit counts the free block at the end of the mapped bytes as big as it could grow,
  so it is taken last (`get_free_block`);
- freed blocks stay mapped (cached), as in the caching allocator; when the device is full,
  or on `empty_cache()`, every whole free page is *unmapped* (`unmap_free_pages`) - from
  the middle of the segment too, leaving a hole the next mapping fills first.

The segment is modelled as its mapped *runs*: each maximal run of mapped pages is one
`Segment` of the base frame, so the books and invariants of `base.py` hold unchanged;
mapping pages next to a run extends it, filling a hole joins two runs, unmapping pages
cuts one. `device_mallocs` counts map calls (PyTorch's `num_device_alloc` counts the same),
`device_frees` unmap calls, `pages_mapped` physical pages created (what a map costs).

Simplified: one stream; the virtual reservation never runs out (PyTorch reserves 9/8 of
the device memory and opens another segment when no range is left); `max_split_size` only
steers best fit (PyTorch's release of oversize blocks does not apply to expandable
segments); the mapping is free of time, where the real one synchronises with the device.
The closest relative is GMLake [Guo 2024] (`stitching.py`): the same virtual memory API,
used to stitch scattered free blocks instead of growing one range.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable

from ...errors import MinigraphError
from ..buffers import align_up
from .base import Block, InvariantError, MiB, OutOfMemoryError, Rect, Segment
from .caching import CachingAllocator

#: Bytes of virtual address space reserved per pool (1 TiB: never the limit here).
RESERVE = 1 << 40


class PageSizeError(MinigraphError, ValueError):
    """A page size that is not a positive number of bytes."""


class ExpandableAllocator(CachingAllocator):
    """The caching allocator with `expandable_segments:True`: one growing segment per
    pool, mapped in pages of `small_page` / `large_page` bytes (PyTorch: 2 MiB and 20 MiB)."""
    name = "expandable"

    def __init__(self, capacity: int | None = None, *, small_page: int = 2 * MiB,
                 large_page: int = 20 * MiB, **kw):
        super().__init__(capacity, **kw)
        for label, page in (("small_page", small_page), ("large_page", large_page)):
            if not isinstance(page, int) or isinstance(page, bool) or page <= 0:
                raise PageSizeError(f"{label}={page!r}: a page is a positive number of bytes")
        self.page = {"large": large_page, "small": small_page}
        # each pool's virtual range: [base, base + reserve), a whole number of pages
        self.reserve = {p: align_up(RESERVE, self.page[p]) for p in self.page}
        self.base = {"large": 0, "small": self.reserve["large"]}
        self.runs: dict[str, list[Segment]] = {"large": [], "small": []}
        self.pages_mapped = self.pages_unmapped = 0

    # The rules that differ from the caching allocator --------------------------------------
    def should_split(self, b: Block, rsize: int, pool: str) -> bool:
        return b.size - rsize >= self.min_block

    def expandable_size(self, b: Block) -> int:
        """`b`'s size, plus the unmapped bytes right after it if it ends its run."""
        seg = self.segments[b.segment]
        end = seg.addr + seg.size
        return b.size + (self._gap_after(seg.pool, end) if b.end == end else 0)

    def get_free_block(self, rsize: int, pool: str) -> Block | None:
        """Best fit, where a block that could grow counts as big as it could grow: walk up
        the size order while the next block would grow less (PyTorch's `get_free_block`)."""
        fp = self.pool[pool]
        i = bisect.bisect_left(fp.keys, (rsize, -1))
        if i >= len(fp.keys):
            return None
        b = fp.blocks[fp.keys[i][1]]
        while i + 1 < len(fp.keys):
            nxt = fp.blocks[fp.keys[i + 1][1]]
            if self.expandable_size(nxt) >= self.expandable_size(b):
                break
            b, i = nxt, i + 1
        m = self.max_split_size
        if m is not None and ((rsize < m <= b.size) or
                              (rsize >= m and b.size >= rsize + self.large_buffer)):
            return None
        return b

    def release_available_cached_blocks(self, rsize: int) -> bool:
        return False            # releases whole oversize segments: none here

    def release_cached_blocks(self) -> bool:
        """`torch.cuda.empty_cache()`: unmap every whole free page of both pools."""
        self.unmap_free_pages()
        return True

    def empty_cache(self) -> int:
        """Unmap every whole free page; returns the bytes given back to the device."""
        before = self.reserved
        self.unmap_free_pages()
        return before - self.reserved

    # Allocation ---------------------------------------------------------------------------
    def _malloc(self, tid: Hashable, size: int) -> list[Block]:
        rsize = self.round_size(size)
        pool = self.pool_of(rsize)
        b = self.get_free_block(rsize, pool)
        if b is None:
            b = self.grow(tid, rsize, pool)
        self.pool[pool].remove(b)
        if self.should_split(b, rsize, pool):
            self.pool[pool].add(self.split(b, rsize))
        return [b]

    def grow(self, tid: Hashable, rsize: int, pool: str) -> Block:
        """Map pages so that a free block of `rsize` bytes exists; when the device is full,
        unmap every free page and try again (`cudaMalloc` retry, expandable style)."""
        b = self.try_map(rsize, pool)
        if b is None:
            self.unmap_free_pages()
            b = self.try_map(rsize, pool)
            if b is None:
                raise OutOfMemoryError(
                    f"{self.name}: {tid!r} needs {rsize} bytes in the {pool} pool; "
                    f"{self.reserved} of {self.capacity} bytes are mapped "
                    f"({self.allocated} allocated, the largest free block "
                    f"{self.largest_free()})")
            self.ooms_recovered += 1
        return b

    def find_expandable(self, rsize: int, pool: str) -> int:
        """The lowest address from which free and unmapped bytes, contiguous, hold `rsize`:
        the start of an unmapped gap, or of the free block just before it."""
        for g0, g1 in self._gaps(pool):
            start = g0
            left = self._run_ending_at(pool, g0)
            if left is not None and left.blocks[-1].owner is None:
                start = left.blocks[-1].addr
            avail, at = g1 - start, g1
            while avail < rsize:
                run = self._run_starting_at(pool, at)
                if run is None or run.blocks[0].owner is not None:
                    break
                avail += run.blocks[0].size
                if len(run.blocks) > 1:
                    break
                gap = self._gap_after(pool, run.addr + run.size)
                avail += gap
                at = run.addr + run.size + gap
            if avail >= rsize:
                return start
        raise InvariantError(f"{self.name}: no room for {rsize} bytes in the {pool} pool's "
                             "reservation")

    def try_map(self, rsize: int, pool: str) -> Block | None:
        """Map the pages missing from the range `find_expandable` chose, one map call per
        unmapped gap it crosses; the free block at its start then holds `rsize` bytes.
        None when the device cannot give the pages."""
        start = self.find_expandable(rsize, pool)
        while True:
            b = self._free_block_at(pool, start)
            have = b.size if b is not None else 0
            if have >= rsize:
                return b
            at = start + have                       # an unmapped gap starts here
            need = min(self._gap_after(pool, at), rsize - have)
            if not self.map_pages(pool, at, align_up(need, self.page[pool])):
                return None

    # Mapping and unmapping pages ----------------------------------------------------------
    def map_pages(self, pool: str, addr: int, nbytes: int) -> bool:
        """Back `[addr, addr + nbytes)` with physical pages: a new free block, joined to the
        runs on either side. False past the capacity (nothing is mapped then)."""
        if self.capacity is not None and self.reserved + nbytes > self.capacity:
            return False
        seg = self._new_run(pool, addr, [Block(addr, nbytes, -1)])
        left = self._run_ending_at(pool, addr)
        right = self._run_starting_at(pool, addr + nbytes)
        if left is not None:
            seg = self._join(left, seg)
        if right is not None:
            seg = self._join(seg, right)
        b = self._block_at(seg, addr)
        self.pool[pool].add(self.merge_free(b, self.pool[pool]))
        self.reserved += nbytes
        self.device_mallocs += 1
        self.pages_mapped += nbytes // self.page[pool]
        return True

    def unmap_free_pages(self) -> None:
        """Unmap the whole pages inside every free block (PyTorch's `release_blocks` on an
        expandable segment): a free block keeps only its bytes on partial pages."""
        for pool, fp in self.pool.items():
            page, base = self.page[pool], self.base[pool]
            for b in list(fp):
                p0 = base + align_up(b.addr - base, page)
                p1 = base + (b.end - base) // page * page
                if p1 > p0:
                    self._unmap(pool, b, p0, p1)

    def _unmap(self, pool: str, b: Block, p0: int, p1: int) -> None:
        """Unmap `[p0, p1)`, whole pages inside free block `b`: its run is cut in two."""
        fp = self.pool[pool]
        seg = self.segments[b.segment]
        i = seg.index(b)
        fp.remove(b)
        head = [Block(b.addr, p0 - b.addr, -1)] if p0 > b.addr else []   # partial pages
        tail = [Block(p1, b.end - p1, -1)] if b.end > p1 else []
        before, after = seg.blocks[:i] + head, tail + seg.blocks[i + 1:]
        self._drop_run(seg)
        for blocks in (before, after):
            if blocks:
                self._new_run(pool, blocks[0].addr, blocks)
        for piece in head + tail:
            fp.add(piece)
        self.reserved -= p1 - p0
        self.device_frees += 1
        self.pages_unmapped += (p1 - p0) // self.page[pool]

    # Runs: the mapped pieces of one pool's virtual range ----------------------------------
    def _new_run(self, pool: str, addr: int, blocks: list[Block]) -> Segment:
        seg = Segment(self._next_seg, addr, sum(b.size for b in blocks), pool, blocks)
        self._next_seg += 1
        for b in blocks:
            b.segment = seg.id
        seg.rect = len(self.segment_rects)
        self.segment_rects.append(Rect(f"segment {seg.id}", addr, seg.size, self._event))
        self.segments[seg.id] = seg
        bisect.insort(self.runs[pool], seg, key=lambda s: s.addr)
        return seg

    def _drop_run(self, seg: Segment) -> None:
        del self.segments[seg.id]
        self.runs[seg.pool].remove(seg)
        self.segment_rects[seg.rect].t1 = self._event

    def _join(self, a: Segment, b: Segment) -> Segment:
        """Runs `a` and `b`, `b` right after `a`, as one run (blocks not yet coalesced)."""
        blocks = a.blocks + b.blocks
        self._drop_run(a)
        self._drop_run(b)
        return self._new_run(a.pool, a.addr, blocks)

    def _gaps(self, pool: str) -> list[tuple[int, int]]:
        """The unmapped ranges of `pool`'s reservation, lowest address first."""
        out, at = [], self.base[pool]
        for s in self.runs[pool]:
            if s.addr > at:
                out.append((at, s.addr))
            at = s.addr + s.size
        out.append((at, self.base[pool] + self.reserve[pool]))
        return out

    def _gap_after(self, pool: str, end: int) -> int:
        nxt = self._run_starting_after(pool, end)
        return (nxt.addr if nxt is not None else self.base[pool] + self.reserve[pool]) - end

    def _run_starting_after(self, pool: str, addr: int) -> Segment | None:
        runs = self.runs[pool]
        i = bisect.bisect_left(runs, addr, key=lambda s: s.addr)
        return runs[i] if i < len(runs) else None

    def _run_starting_at(self, pool: str, addr: int) -> Segment | None:
        s = self._run_starting_after(pool, addr)
        return s if s is not None and s.addr == addr else None

    def _run_ending_at(self, pool: str, addr: int) -> Segment | None:
        runs = self.runs[pool]
        i = bisect.bisect_left(runs, addr, key=lambda s: s.addr)
        return runs[i - 1] if i and runs[i - 1].addr + runs[i - 1].size == addr else None

    def _block_at(self, seg: Segment, addr: int) -> Block:
        return seg.blocks[bisect.bisect_left(seg.blocks, addr, key=lambda b: b.addr)]

    def _free_block_at(self, pool: str, addr: int) -> Block | None:
        """The free block starting at `addr`, if `addr` is mapped and one starts there."""
        runs = self.runs[pool]
        i = bisect.bisect_right(runs, addr, key=lambda s: s.addr) - 1
        if i < 0 or addr >= runs[i].addr + runs[i].size:
            return None
        b = self._block_at(runs[i], addr)
        return b if b.addr == addr and b.owner is None else None

    def mapped_bytes(self, pool: str) -> int:
        return sum(s.size for s in self.runs[pool])



class FinePageExpandableAllocator(ExpandableAllocator):
    """Expandable segments with 2 MiB pages in the large pool too: the GPU's own page size
    (PyTorch's note [PyTorch CUDA] chose 20 MiB to keep map calls few). Less rounding, more
    map calls; the same granularity as `StitchingAllocator`'s, for a like-for-like row."""
    name = "expandable-2m"

    def __init__(self, capacity: int | None = None, *, large_page: int = 2 * MiB, **kw):
        super().__init__(capacity, large_page=large_page, **kw)
