"""The DTR authors' simulator's rules [Kirisame 2021], over storages: `SimrdOptions`.

simrd (uwsampl/dtr-prototype) replays a trace with `RuntimeV2EagerOptimized`. Its rules,
where they differ from `DTRRuntime`'s (runtime.py, eviction.py):

* **storages**: a view (ALIAS) belongs to its base's storage; the storage is what is
  evicted, and its cost is the sum of the distinct ops of its tensors (base op + views).
  When the storage is evicted its views are undefined too, and a view read later re-runs
  its (view) op, counted as rematerialisation.
* **locks**: an op locks its resident inputs first, then rematerialises the evicted ones
  left to right, locking each (ours: inputs in `Program.order`, pinned as they come, and
  the inputs of waiting ops protected).
* **room for every output**: a multi-output op needs the bytes of all its outputs, even
  the resident ones (whose copy is then dropped).
* **eager eviction, nothing freed**: a released storage is evicted at once and stays in
  the graph: evicted neighbourhoods and classes keep counting it; a dead storage brought
  back is scored like any other (ours: really freed when nothing recomputable needs it,
  kept dead ones evicted first, `dead_first`).
* **clock and staleness**: the clock starts at 1 and adds each op's cost; an op's
  inputs get "last access" = the clock when it starts (before its inputs are
  rematerialised), its outputs the clock after it ran, a recomputed tensor keeps its old
  one; staleness = clock - last access, no epsilon (a score with 0 below is infinite).
* **choice**: the pool of evictable storages in the order they became evictable; the
  lowest score, the LAST of equal ones, stopping at the first score of 0.
* **constants** are ops of cost 0 at their line, pinned in the budget; outputs are
  rematerialised and pinned at the end in the order their names were first bound.
* **scores** (`h`): dtr (c + e*)/(size x staleness) with e* the evicted regions both
  ways; dtr-eqclass with union-find classes merged at eviction, and split at a
  rematerialisation only by subtracting its cost; dtr-local; msps (c + evicted
  ancestors)/size; lru (last access); size.

Regions and classes are maintained incrementally as simrd does (absorb at eviction,
rebuild at rematerialisation); recursion is an explicit stack. `replay_trace` (replay.py)
runs `SimrdRuntime` when its options are `SimrdOptions`, the runtime's `simulate` when
they are `DTROptions`: the runtime itself knows nothing of these rules.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from dataclasses import replace as _replace
from typing import Any

from ..errors import BudgetError, ThrashError
from ..runtime.dtr.bounds import budget_bytes
from ..runtime.dtr.heuristics import DTROptionError
from ..runtime.dtr.options import checked_names, checked_thrash_limit
from ..runtime.dtr.program import Program
from ..runtime.dtr.record import DTRTrace

SIMRD_SCORES = ("dtr", "dtr-eqclass", "dtr-local", "lru", "msps", "size")


@dataclass(frozen=True)
class SimrdOptions:
    """The option set that replays a trace as the DTR authors' simulator does (simrd's
    RuntimeV2EagerOptimized [Kirisame 2021]; the module doc lists its rules): `heuristic`
    one of `SIMRD_SCORES`, scored as simrd scores them; `thrash_limit` as
    `DTROptions.thrash_limit`. No memory addresses, no dead-first rule: the runtime's
    other options have no counterpart here."""
    heuristic: str = "dtr"
    thrash_limit: float = 10.0

    def __post_init__(self) -> None:
        h = self.heuristic
        if not isinstance(h, str) or h not in SIMRD_SCORES:
            raise DTROptionError(f"simrd's rules score with one of simrd's heuristics "
                                 f"{', '.join(SIMRD_SCORES)}, not {h!r}")
        checked_thrash_limit(self.thrash_limit)

    def replace(self, **changes: Any) -> SimrdOptions:
        """A copy with `changes`: `heuristic` and `thrash_limit` replaced; any other
        `DTROptions` name is accepted and has no effect (simrd has no counterpart; a
        portfolio replaces its keywords in every candidate), an unknown name is refused."""
        own = {k: v for k, v in checked_names(changes).items()
               if k in ("heuristic", "thrash_limit")}
        return _replace(self, **own)


class _Region:
    """Evicted storages reachable one way from a base storage (`interior`), the resident
    ones where the search stopped (`frontier`), and the interior's summed cost."""
    __slots__ = ("interior", "frontier", "compute")

    def __init__(self) -> None:
        self.interior: set[int] = set()
        self.frontier: set[int] = set()
        self.compute = 0.0


class _Node:
    """A union-find node of DTR-eq's classes: `value` is the class's cost at its root."""
    __slots__ = ("value", "parent")

    def __init__(self, value: float):
        self.value, self.parent = value, None


def _find(n: _Node) -> _Node:
    path = []
    while n.parent is not None:
        path.append(n)
        n = n.parent
    for x in path:
        x.parent = n
    return n


class SimrdRuntime:
    """Replays a trace's `Program` (from `parse_trace`) with simrd's rules (module doc)
    under `budget` bytes (constants included); `options.heuristic` is one of
    `SIMRD_SCORES`; stops with ThrashError when rematerialisation costs more than
    `thrash_limit` x the base cost, BudgetError when nothing is left to evict."""

    def __init__(self, program: Program, budget: int, options: SimrdOptions | None = None):
        p = program
        options = SimrdOptions() if options is None else options
        if not isinstance(options, SimrdOptions):
            raise DTROptionError(f"SimrdRuntime takes SimrdOptions, not "
                                 f"{type(options).__name__}")
        if p.storage is None:
            raise DTROptionError("simrd's rules replay a trace's program (parse_trace; "
                                 "write_trace writes a graph as one), not a graph's")
        h = options.heuristic
        self.p, self.budget, self.h, self.options = p, budget_bytes(budget), h, options
        n = len(p.tensors)
        self.root = p.storage
        self.size = [t.size for t in p.tensors]
        self.total = [sum(self.size[o] for o in op.outputs) for op in p.ops]
        self.parents = [p.ops[t.producer].args if t.producer >= 0 else () for t in p.tensors]
        self.children: list[list[int]] = [[] for _ in range(n)]
        self.members: list[list[int]] = [[t] if t.producer < 0 else [] for t in p.tensors]
        self.ccost = [0.0] * n                 # a storage's cost: its distinct ops'
        self.defined = [t.producer < 0 for t in p.tensors]
        self.material = list(self.defined)     # per storage (indexed by its root)
        self.locks = [int(d) for d in self.defined]
        self.pinned = list(self.defined)       # given from outside: never evicted
        self.last = [-math.inf] * n
        self.pool: dict[int, None] = {}        # evictable storages, in order
        self.clock, self.usage = 1.0, 0
        self.regions = h in ("dtr", "msps")
        self.fwd: list[Any] = [_Region() for _ in range(n)] if self.regions else []
        self.rev: list[Any] = [_Region() for _ in range(n)] if self.regions else []
        self.ecn: list[_Node | None] = [None] * n
        b = p.bounds()
        self.trace = DTRTrace(p.name, f"simrd {h}", "sim", self.budget, b.live, b.lower,
                              b.safe, p.base_cost, b.external)
        self.limit = options.thrash_limit * p.base_cost

    def run(self) -> DTRTrace:
        t0 = time.perf_counter()
        for kind, x in self.p.steps:
            if kind == "call":
                self._call(x)
            elif kind == "release":
                s = self.root[x]
                if s == x and self.material[s] and not self.pinned[s]:
                    self._evict(s)                       # eager eviction
                    self.trace.fake_deletes += 1
        for t in self.p.pin_order:                       # outputs, as simrd's REMATERIALIZE
            if not self.defined[t]:
                self._materialize(t, True)
            self._pin(t)
        self.trace.seconds = time.perf_counter() - t0
        return self.trace

    # Ops, materialisation (simrd's recursion as an explicit stack) ---------------------------
    def _call(self, k: int) -> None:
        p = self.p
        op = p.ops[k]
        for o in op.outputs:
            s = self.root[o]
            self.members[s].append(o)
            self.ccost[s] = float(sum(p.ops[q].cost for q in
                                      dict.fromkeys(p.tensors[u].producer
                                                    for u in self.members[s])))
            if s == o and self.h == "dtr-eqclass":
                self.ecn[s] = _Node(0.0)
        for a in op.args:
            self.children[a].extend(op.outputs)
        self._materialize(op.outputs[0], False)
        for o in op.outputs:
            self.last[self.root[o]] = self.clock
        if not op.replayable:                            # a constant: pinned
            self._pin(op.outputs[0])

    def _materialize(self, t: int, remat: bool) -> None:
        root, defined = self.root, self.defined
        stack = [self._enter(t, remat)]
        while stack:
            f = stack[-1]
            undef, pos = f[1], f[2]
            while pos < len(undef) and defined[undef[pos]]:
                self._lock(root[undef[pos]])
                pos += 1
            f[2] = pos
            if pos < len(undef):
                stack.append(self._enter(undef[pos], True))
                continue
            self._finish(f[0], f[3])
            stack.pop()
            if stack:
                g = stack[-1]
                self._lock(root[g[1][g[2]]])
                g[2] += 1

    def _enter(self, t: int, remat: bool) -> list[Any]:
        """Inputs' last access = now; lock the defined ones; the others, in order, wait."""
        ps, root = self.parents[t], self.root
        for q in ps:
            self.last[root[q]] = self.clock
        for q in ps:
            if self.defined[q]:
                self._lock(root[q])
        return [t, [q for q in ps if not self.defined[q]], 0, remat]

    def _finish(self, t: int, remat: bool) -> None:
        k = self.p.tensors[t].producer
        need = self.total[k]
        while self.usage + need > self.budget:
            if not self.pool:
                raise BudgetError(f"simrd rules on {self.p.name}: nothing left to evict for "
                                  f"{need:,} B at budget {self.budget:,} B (out of memory)")
            s = self._choose()
            self._evict(s)
            self.trace.evictions += 1
            self.trace.evicted.append(self.p.tensors[s].name)
        self._compute(t, k, remat)
        for q in self.parents[t]:
            self._unlock(self.root[q])
        tr = self.trace
        if tr.extra_cost > self.limit:
            raise ThrashError(f"simrd rules, {self.h} on {self.p.name}: rematerialisation "
                              f"cost {tr.extra_cost:g} exceeds {self.options.thrash_limit:g}"
                              f" x the base cost {self.p.base_cost:g} at budget "
                              f"{self.budget:,} B")

    def _compute(self, t: int, k: int, remat: bool) -> None:
        op, root, defined, material = self.p.ops[k], self.root, self.defined, self.material
        sibs = [u for u in op.outputs if u != t]
        dup = [u for u in sibs if defined[u]]
        back = [u for u in sibs if not defined[u]]
        new = [root[u] for u in sibs + [t] if not material[root[u]]]
        self.clock += op.cost
        self.usage += self.total[k]
        tr = self.trace
        tr.max_used = max(tr.max_used, self.usage)
        if remat:
            tr.extra_cost += op.cost
            tr.rematerializations += 1
        for u in [t] + back:
            material[root[u]] = defined[u] = True
        for u in dup:
            self.usage -= self.size[u]
        for s in new:
            self.pool.setdefault(s, None)
        tr.remat_tensors += len(new) if remat else 0
        if self.regions:
            self._rebuild_around(new)
        if self.ecn and self.h == "dtr-eqclass":
            for s in new:
                r = _find(self.ecn[s])
                r.value = r.value - self.ccost[s]
                self.ecn[s] = None

    # Locks, eviction, choice -------------------------------------------------------------
    def _lock(self, s: int) -> None:
        if self.locks[s] == 0:
            self.pool.pop(s, None)
        self.locks[s] += 1

    def _unlock(self, s: int) -> None:
        self.locks[s] -= 1
        if self.locks[s] == 0:
            self.pool[s] = None

    def _pin(self, t: int) -> None:
        s = self.root[t]
        if not self.pinned[s]:
            self._lock(s)
            self.pinned[s] = True

    def _evict(self, s: int) -> None:
        self.material[s] = False
        self.usage -= self.size[s]
        self.pool.pop(s, None)
        for t in self.members[s]:
            self.defined[t] = False
        if self.regions:
            for ps in self.rev[s].frontier:
                self._absorb(self.fwd[ps], s, False)
            for cs in self.fwd[s].frontier:
                self._absorb(self.rev[cs], s, True)
            self.fwd[s], self.rev[s] = _Region(), _Region()
        if self.h == "dtr-eqclass":
            node = self.ecn[s] = _Node(self.ccost[s])
            for nb in self._evicted_neighbours(s):
                a, r = _find(self.ecn[nb]), _find(node)
                if a is not r:
                    a.parent = r
                    r.value = a.value + r.value

    def _choose(self) -> int:
        """simrd's choice: the lowest score, the last of equal ones, the first 0."""
        best, best_s = -1, math.inf
        score = self._score
        for s in self.pool:
            c = score(s)
            if c <= best_s:
                best, best_s = s, c
            if c == 0:
                break
        return best

    def _score(self, s: int) -> float:
        h, size = self.h, self.size[s]
        if h == "lru":
            return self.last[s]
        if h == "msps":
            c = self.ccost[s] + self.rev[s].compute
            return c / size if size > 0 else math.inf
        if h == "size":
            return 1 / size if size > 0 else math.inf
        den = size * (self.clock - self.last[s])
        c = self.ccost[s]
        if h == "dtr":
            c += self.fwd[s].compute + self.rev[s].compute
        elif h == "dtr-eqclass":
            for r in {id(n): n for n in (_find(self.ecn[x]) for x in
                                         self._evicted_neighbours(s))}.values():
                c = c + r.value
        return c / den if den > 0 else math.inf

    def _evicted_neighbours(self, s: int) -> set[int]:
        root, material, out = self.root, self.material, set()
        for t in self.members[s]:
            for u in self.parents[t]:
                if not material[root[u]] and root[u] != s:
                    out.add(root[u])
            for u in self.children[t]:
                if not material[root[u]] and root[u] != s:
                    out.add(root[u])
        return out

    # Regions (simrd's optimization/region.py) -----------------------------------------------
    def _absorb(self, reg: _Region, fs: int, reverse: bool) -> None:
        other = self.rev[fs] if reverse else self.fwd[fs]
        reg.frontier.discard(fs)
        reg.frontier.update(other.frontier)
        diff = other.interior - reg.interior
        diff.add(fs)
        for x in diff:
            reg.compute += self.ccost[x]
        reg.interior.update(diff)

    def _rebuild(self, base: int, reverse: bool) -> _Region:
        reg = _Region()
        nxt, root, material = (self.parents if reverse else self.children), self.root, \
            self.material
        stack = [base]
        while stack:
            s = stack.pop()
            for t in self.members[s]:
                for u in nxt[t]:
                    us = root[u]
                    if material[us]:
                        if us != base:
                            reg.frontier.add(us)
                        continue
                    if us not in reg.interior:
                        reg.compute += self.ccost[us]
                        reg.interior.add(us)
                        stack.append(us)
        return reg

    def _rebuild_around(self, new: list[int]) -> None:
        """Storages just made resident: their regions, then those that reached them."""
        up, down = set(), set()
        for s in new:
            self.fwd[s] = self._rebuild(s, False)
            self.rev[s] = self._rebuild(s, True)
            up.update(self.rev[s].frontier)
            down.update(self.fwd[s].frontier)
        for s in up:
            self.fwd[s] = self._rebuild(s, False)
        for s in down:
            self.rev[s] = self._rebuild(s, True)
