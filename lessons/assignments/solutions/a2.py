"""Reference solution of assignment 2 (an offset planner). For instructors: keep it out
of the students' repository. `MINIGRAPH_SOLUTION=<this file>` makes the notebook use it.

Greedy by size with the lowest fitting gap (the best-fit offset heuristic of Chainer-Opt
[Sekiyama 2018]): place the largest buffers first; each goes at the lowest offset where it does
not overlap, in bytes, any already placed buffer alive at the same time. Two orders are
tried (by size, and by size times lifetime) and the smaller arena is kept.
"""


def place(buffers, order):
    placed = []                       # (buffer, offset)
    offsets = {}
    for b in order:
        # Byte ranges of placed buffers whose lifetime overlaps b's (ends are inclusive).
        busy = sorted((off, off + p.size) for p, off in placed
                      if p.start <= b.end and b.start <= p.end and p.size)
        offset = 0
        for lo, hi in busy:
            if offset + b.size <= lo:
                break                 # b fits in the gap below this range
            offset = max(offset, hi)
        offsets[b.id] = offset
        placed.append((b, offset))
    arena = max((offsets[b.id] + b.size for b in buffers if b.size), default=0)
    return offsets, arena


def my_planner(buffers):
    """A dict {buffer id: offset} in which no two buffers alive at one step overlap."""
    by_size = sorted(buffers, key=lambda b: (-b.size, b.start, str(b.id)))
    by_area = sorted(buffers, key=lambda b: (-b.size * (b.end - b.start + 1), b.start,
                                             str(b.id)))
    best = min((place(buffers, order) for order in (by_size, by_area)), key=lambda r: r[1])
    return best[0]
