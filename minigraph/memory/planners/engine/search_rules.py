"""The moves and the pruning rules of the exact search (`search.py`, read it first).

A node's moves are the next level, the section branched on and its candidates. Each
pruning rule is a named function with the rule and why it is safe in its docstring.
"""

from __future__ import annotations

from .search_state import Node, Problem, Split, State

# ---------------------------------------------------------------------------------------
# The moves of a node: the next level, the section branched on, its candidates.
# ---------------------------------------------------------------------------------------

def open_part(st: State, split: Split) -> Node:
    """The node for the split's current part (the sections closed inside it stay so)."""
    a, b, members = split.parts[split.j]
    return open_node(st, a, b, members, split.level,
                     frozenset(s for s in split.closed if a <= s < b))


def open_node(st: State, lo: int, hi: int, members: list[int], level: int,
              closed: frozenset[int]) -> Node:
    """The node for `members` (unplaced, in sections [lo, hi)) when the last buffer went
    at `level` and the sections `closed` hold nothing more there.

    The level rises to the lowest minimum offset of a buffer that may go next. Of the
    sections whose floor is at or below it, one is branched on (`pick_section`): each
    buffer that can sit there, then a gap. Open sections that no buffer can cover get a
    gap at once. A node that a rule cuts gets no moves."""
    node = Node(lo, hi, members, level, closed)
    shut = closed_prefix(lo, hi, closed)
    nxt, lowest_top = next_level(st, node, shut)
    if fits_below_level(nxt, lowest_top):
        return node
    if nxt > level:                     # a new level: no section is closed there yet
        node.level, node.closed, shut = nxt, frozenset(), None
    if level_overflows(st, node):
        return node
    need = tight_sections(st, node)
    row = tight_row(st, node, candidates(st, node, shut), need)
    if row is None:
        return node
    viable, cover = row
    picked = pick_section(st, node, cover)
    if picked is None:
        return node
    x, gaps = picked
    if gaps:
        node.closed = node.closed.union(gaps)
    s = lo + x
    moves = order_moves(st, node, [j for j in viable if st.lo[j] <= s < st.hi[j]])
    if not need[x]:
        moves.append(-1 - s)
    node.moves = moves
    return node


def closed_prefix(lo: int, hi: int, closed: frozenset[int]) -> list[int] | None:
    """shut[x]: how many of the sections lo .. lo + x - 1 are closed (None: none is)."""
    if not closed:
        return None
    shut = [0] * (hi - lo + 1)
    for x in range(hi - lo):
        shut[x + 1] = shut[x] + ((lo + x) in closed)
    return shut


def blocked(st: State, j: int, lo: int, shut: list[int] | None) -> bool:
    """Does buffer j span a closed section (so it cannot go at this level)?"""
    return shut is not None and shut[st.hi[j] - lo] > shut[st.lo[j] - lo]


def next_level(st: State, node: Node, shut: list[int] | None) -> tuple[int, int]:
    """The next level (lowest minimum offset, at or above the node's, of a buffer that
    may go next) and the lowest top of any unplaced buffer at its minimum offset."""
    minoff, size, level = st.minoff, st.size, node.level
    lowest_top = nxt = st.capacity + 1
    for j in node.members:
        m = minoff[j]
        if m + size[j] < lowest_top:
            lowest_top = m + size[j]
        if m < level or m >= nxt or waits_for_twin(st, j):
            continue
        if m == level and blocked(st, j, node.lo, shut):
            continue
        nxt = m
    return nxt, lowest_top


def candidates(st: State, node: Node, shut: list[int] | None) -> list[int]:
    """The buffers that may go at the node's level: at their minimum offset there, not
    waiting for a twin, spanning no closed section."""
    minoff, level = st.minoff, node.level
    return [j for j in node.members if minoff[j] == level and not waits_for_twin(st, j)
            and not blocked(st, j, node.lo, shut)]


def tight_sections(st: State, node: Node) -> list[bool]:
    """need[x]: section lo + x is open at this level and has no grain to spare above it,
    so a buffer must sit on it now."""
    limit = st.capacity - st.grain - node.level
    total, floor, level = st.total, st.floor, node.level
    need = [total[s] > limit and floor[s] <= level for s in range(node.lo, node.hi)]
    for s in node.closed:
        need[s - node.lo] = False
    return need


def pick_section(st: State, node: Node, cover: list[int]) -> tuple[int, list[int]] | None:
    """The section to branch on (as `x` from lo, chosen by the strategy's `pick` among
    those some candidate covers) and the open sections that no candidate covers (they
    get a gap). None if no section can be branched on, or a tight one gets a gap."""
    pick, total, floor = st.strategy.pick, st.total, st.floor
    lo, level, closed = node.lo, node.level, node.closed
    limit = st.capacity - st.grain - level
    gaps = []
    best_x, best_c, c = -1, 0, 0
    for x in range(node.hi - lo):
        c += cover[x]
        s = lo + x
        if c:
            if best_x < 0 or pick == "right" or (pick == "fewest" and c < best_c) \
                    or (pick == "fewest-right" and c <= best_c):
                best_x, best_c = x, c
        elif total[s] and floor[s] <= level and s not in closed:
            if total[s] > limit:
                return None
            gaps.append(s)
    if best_x < 0:
        return None
    return best_x, gaps


def order_moves(st: State, node: Node, moves: list[int]) -> list[int]:
    """The buffers to try on the chosen section, in the strategy's `fit` order."""
    rank = st.rank
    if st.strategy.fit == "rank":
        return sorted(moves, key=rank.__getitem__)
    heights = set(st.floor[node.lo:node.hi])
    keyed = sorted((fit_key(st, node, heights, j), j) for j in moves)
    return [j for _, j in keyed]


def fit_key(st: State, node: Node, heights: set[int], j: int) -> tuple[int, int, int, int]:
    """Sort key of candidate j: flush with a neighbour's floor first, then a top that meets
    some floor, then ("pair") partners at this level, then the static rank."""
    floor, off, level = st.floor, st.off, node.level
    t = level + st.size[j]
    a, b = st.lo[j], st.hi[j]
    flush = (a > node.lo and floor[a - 1] == t) + (b < node.hi and floor[b] == t)
    pair = 0
    if st.strategy.fit == "pair":
        for k in st.partners[j]:
            if off[k] == level or (off[k] < 0 and st.minoff[k] == level):
                pair += 1
            elif off[k] >= 0:
                pair -= 1
    return -flush, -(t in heights), -pair, st.rank[j]


def independent_parts(st: State, i: int, lo: int, hi: int, rest: list[int]
                      ) -> list[tuple[int, int, list[int]]] | None:
    """The section ranges of [lo, hi) that placing i made independent (no unplaced buffer
    crosses between them), each with its unplaced buffers; None if there are none."""
    cuts = [s for s in range(max(st.lo[i], lo), min(st.hi[i] - 1, hi - 1))
            if st.crossing[s] == 0]
    if not cuts:
        return None
    bounds = [lo] + [s + 1 for s in cuts] + [hi]
    parts = []
    for a, b in zip(bounds, bounds[1:]):
        mem = [j for j in rest if a <= st.lo[j] and st.hi[j] <= b]
        if mem:
            parts.append((a, b, mem))
    return parts


def initial_parts(p: Problem) -> list[tuple[int, int, list[int]]]:
    """Section ranges that no buffer crosses, each with its buffers."""
    by_lo: dict[int, list[int]] = {}
    for i in range(len(p.items)):
        by_lo.setdefault(p.lo[i], []).append(i)
    parts, start, mem = [], 0, []
    for s in range(p.n_sections):
        mem += by_lo.get(s, [])
        if s == p.n_sections - 1 or p.crossing[s] == 0:
            if mem:
                parts.append((start, s + 1, mem))
            start, mem = s + 1, []
    return parts


# ---------------------------------------------------------------------------------------
# Pruning rules. Each one only cuts branches that hold no plan, or whose plans another
# branch also finds, so an exhausted search is still a proof.
# ---------------------------------------------------------------------------------------

def fits_below_level(nxt: int, lowest_top: int) -> bool:
    """Dominance: an unplaced buffer fits entirely below the next level; lowering it gives
    a plan at least as good, found in another branch."""
    return nxt >= lowest_top


def waits_for_twin(st: State, j: int) -> bool:
    """Symmetry: of identical buffers (same steps, same size) only the first unplaced one,
    by index, may go next; swapping twins gives the same plan."""
    twin = st.twin_before[j]
    return twin >= 0 and st.off[twin] < 0


def level_overflows(st: State, node: Node) -> bool:
    """Every later buffer goes at or above the level: a section whose unplaced bytes do
    not fit above it has no plan."""
    return node.level + max(st.total[node.lo:node.hi]) > st.capacity


def tight_row(st: State, node: Node, cands: list[int], need: list[bool]
              ) -> tuple[list[int], list[int]] | None:
    """Exact cover: the buffers at one level sit side by side in time, so they must cover
    every tight section (`need`) without overlapping. Returns the candidates that lie on
    such a row and, as a difference array, how many cover each section; None if no row.

    back[x]: a row can cover [lo + x, hi) with every tight section in it covered;
    reach[x]: the same for [lo, lo + x)."""
    lo, width, lo_s, hi_s = node.lo, node.hi - node.lo, st.lo, st.hi
    starts: dict[int, list[int]] = {}
    for j in cands:
        starts.setdefault(lo_s[j] - lo, []).append(j)
    back = [False] * (width + 1)
    back[width] = True
    for x in range(width - 1, -1, -1):
        ok = not need[x] and back[x + 1]
        if not ok:
            for j in starts.get(x, ()):
                if back[hi_s[j] - lo]:
                    ok = True
                    break
        back[x] = ok
    if not back[0]:
        return None
    reach = [True] + [False] * width
    cover = [0] * (width + 1)
    viable = []
    for x in range(width):
        if not reach[x]:
            continue
        if not need[x]:
            reach[x + 1] = True
        for j in starts.get(x, ()):
            e = hi_s[j] - lo
            if back[e]:
                reach[e] = True
                viable.append(j)
                cover[x] += 1
                cover[e] -= 1
    return viable, cover


def fits(st: State, rec: tuple) -> bool:
    """After placing a buffer: may this branch still hold a plan? (The rules below.)"""
    return not (section_overflows(st, rec) or step_overflows(st, rec)
                or raised_too_high(st, rec) or floor_unreachable(st, rec))


def section_overflows(st: State, rec: tuple) -> bool:
    """The bytes left in the placed buffer's sections all go above its top: they must
    fit below the capacity."""
    i = rec[0]
    top = st.off[i] + st.size[i]
    return top + max(st.total[st.lo[i]:st.hi[i]]) > st.capacity


def step_overflows(st: State, rec: tuple) -> bool:
    """The unplaced buffers alive on both sides of a step in the floors (at either end of
    the placed buffer) lie above the higher floor: they must fit below the capacity."""
    i = rec[0]
    a, b, top, cap, shared, floor = st.lo[i], st.hi[i], st.off[i] + st.size[i], \
        st.capacity, st.shared, st.floor
    if a > 0 and shared[a - 1] + max(top, floor[a - 1]) > cap:
        return True
    return b <= st.last and shared[b - 1] + max(top, floor[b]) > cap


def raised_too_high(st: State, rec: tuple) -> bool:
    """A section's unplaced buffers go no lower than their minimum offsets: if placing
    the buffer raised all of them above capacity - bytes left, the bytes do not fit."""
    raised = rec[2]
    if not raised:
        return False
    off, minoff, total, low, cap = st.off, st.minoff, st.total, st.low, st.capacity
    a = min(st.lo[j] for j, _ in raised)
    b = max(st.hi[j] for j, _ in raised)
    for s in range(a, b):
        room = cap - total[s]
        k = low[s]                      # a buffer low enough last time
        if not total[s] or off[k] < 0 and minoff[k] <= room:
            continue
        for k in st.members[s]:
            if off[k] < 0 and minoff[k] <= room:
                low[s] = k
                break
        else:
            return True
    return False


def floor_unreachable(st: State, rec: tuple) -> bool:
    """A tight section near the placed buffer needs some buffer to sit right on its
    floor (a gap there would waste a byte it does not have)."""
    i, off = rec[0], st.off
    near = [j for j in st.overlaps[i] if off[j] < 0]
    if not near:
        return False
    a = min(st.lo[j] for j in near)
    b = max(st.hi[j] for j in near)
    st.memo.clear()
    floor, total, cap, grain = st.floor, st.total, st.capacity, st.grain
    for s in range(a, b):
        if total[s] and floor[s] + grain + total[s] > cap and not has_bottom(st, s):
            return True
    return False


def has_bottom(st: State, s: int) -> bool:
    """Can some unplaced buffer of section s sit right on its floor? (The one found last
    time is tried first.)"""
    f = st.floor[s]
    j = st.witness[s]
    if j >= 0 and can_sit(st, j, f):
        return True
    for j in st.members[s]:
        if can_sit(st, j, f):
            st.witness[s] = j
            return True
    return False


def can_sit(st: State, j: int, f: int) -> bool:
    """Can unplaced buffer j go at offset f? Where it spans a lower tight section, the
    step between must be filled exactly by buffers that fit under it (`exact_fill`)."""
    if st.off[j] >= 0 or st.minoff[j] > f:
        return False
    floor, total, spare = st.floor, st.total, st.capacity - st.grain
    for t in range(st.lo[j], st.hi[j]):
        g = f - floor[t]
        if g and floor[t] + total[t] > spare and not exact_fill(st, t, g, j, f):
            return False
    return True


def exact_fill(st: State, t: int, g: int, j: int, f: int) -> bool:
    """Subset sum: do some unplaced buffers of section t (not j), each fitting below f,
    sum to exactly g bytes? (Says yes when the sums get too many to follow.)"""
    off, minoff, size, memo = st.off, st.minoff, st.size, st.memo
    key = (t, g, f)
    alone = minoff[j] + size[j] > f     # j could not be one of them anyway
    if alone and key in memo:
        return memo[key]
    parts = [size[k] for k in st.members[t]
             if k != j and off[k] < 0 and minoff[k] + size[k] <= f]
    ok = False
    if sum(parts) >= g:
        sums = {0}
        for z in parts:
            sums |= {x + z for x in sums if x + z <= g}
            if g in sums or len(sums) > 64:
                ok = True
                break
    if alone:
        memo[key] = ok
    return ok
