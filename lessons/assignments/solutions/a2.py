"""Reference solution of assignment 2 (an offset planner). For instructors: keep it out
of the students' repository. `MINIGRAPH_SOLUTION=<this file>` makes the notebook use it.

The notebook's hint - greedy by size, each buffer at the lowest fitting gap (the best-fit
offset heuristic of Chainer-Opt [Sekiyama 2018], TFLite's greedy by size [Pisarchyk
2020]) - is one *order* decoded by one rule. This solution keeps the rule and searches
the orders, as annealing does [Sekiyama 2018], but deterministically and in a bounded
number of tries:

1. five starting orders: by size, by size times lifetime, by lifetime, by start, by end;
2. from each, a local search (`local_search`): take each buffer of the order in turn and
   move it to the front, to half its position, or one place earlier; decode the new order
   and keep it when it is better - a smaller arena, or the same arena with fewer buffers
   touching its top (a plateau step: one more move may then lower the top) - and go on
   until a whole pass finds nothing or the budget of decodings is spent;
3. the smallest arena of the five searches wins.

Deterministic (no randomness, ties broken by the buffers' positions) and bounded: each
search decodes at most `budget(n)` orders of O(n^2) work each, fewer the more buffers.
"""

WORK = 2_000_000     # a search's decodings x n^2: bounds the time on large lists
MOST = 400           # and at most this many decodings per starting order


def budget(n):
    """Decodings per starting order for n buffers."""
    return min(MOST, WORK // max(n * n, 1) + 20)


def place(buffers, order):
    """Offsets (a list, by position in `buffers`) and the arena when the buffers are
    placed in `order` (positions), each at the lowest offset where it overlaps, in bytes,
    no already placed buffer alive at a common step (ends are inclusive)."""
    offsets = [0] * len(buffers)
    placed = []                       # (start, end, lo, hi)
    arena = 0
    for i in order:
        b = buffers[i]
        if not b.size:
            continue                  # 0 bytes: offset 0, in nobody's way
        busy = sorted((lo, hi) for s, e, lo, hi in placed if s <= b.end and b.start <= e)
        offset = 0
        for lo, hi in busy:
            if offset + b.size <= lo:
                break                 # b fits in the gap below this range
            offset = max(offset, hi)
        offsets[i] = offset
        placed.append((b.start, b.end, offset, offset + b.size))
        arena = max(arena, offset + b.size)
    return offsets, arena


def orders(buffers):
    """The starting orders: each a list of positions, ties by position."""
    n = range(len(buffers))
    life = [b.end - b.start + 1 for b in buffers]
    keys = [lambda i: (-buffers[i].size, -life[i], i),
            lambda i: (-buffers[i].size * life[i], i),
            lambda i: (-life[i], -buffers[i].size, i),
            lambda i: (buffers[i].start, -buffers[i].size, i),
            lambda i: (-buffers[i].end, -buffers[i].size, i)]
    return [sorted(n, key=k) for k in keys]


def quality(buffers, offsets, arena):
    """(arena, buffers touching the top): smaller is better."""
    return arena, sum(1 for i, b in enumerate(buffers) if b.size and offsets[i] + b.size == arena)


def local_search(buffers, order, offsets, arena, tries):
    """Move single buffers earlier in the order while that improves `quality`; at most
    `tries` decodings."""
    best = quality(buffers, offsets, arena)
    improved = True
    while improved and tries > 0:
        improved = False
        for pos in range(1, len(order)):
            for new_pos in (0, pos // 2, pos - 1):
                if tries <= 0:
                    return order, offsets, arena
                tries -= 1
                new_order = order[:pos] + order[pos + 1:]
                new_order.insert(new_pos, order[pos])
                new_offsets, new_arena = place(buffers, new_order)
                q = quality(buffers, new_offsets, new_arena)
                if q < best:
                    order, offsets, arena, best, improved = (new_order, new_offsets,
                                                             new_arena, q, True)
                    break
    return order, offsets, arena


def my_planner(buffers):
    """A dict {buffer id: offset} in which no two buffers alive at one step overlap."""
    buffers = list(buffers)
    best = None
    for order in orders(buffers):
        offsets, arena = place(buffers, order)
        _, offsets, arena = local_search(buffers, order, offsets, arena,
                                         budget(len(buffers)))
        if best is None or arena < best[1]:
            best = (offsets, arena)
    offsets = best[0] if best else []
    return {b.id: off for b, off in zip(buffers, offsets)}
