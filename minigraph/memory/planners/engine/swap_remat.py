"""Swap and recomputation together on a chain, at one budget: a dynamic program after POFO
[Beaumont 2021], beside swap alone and recomputation alone (the same program, one choice
taken away), as Capuchin compares them [Peng 2020].

The chain model, which `best_schedule` optimises and `evaluate` replays step by step:

- stages 1..n; forward i (`forward[i-1]` seconds) reads a[i-1] and writes a[i] of `sizes[i]`
  bytes (a[0], the input, lives outside: `sizes[0]` is 0); backward i (`backward[i-1]`
  seconds) reads a[i-1] and the gradient of a[i] (`sizes[i]` bytes) and writes the
  gradient of a[i-1] (`sizes[i-1]` bytes).
- each of a[1..n-1] is kept ("K"), swapped ("S") or dropped ("D"); a stored point is K or S.
  The forward pass holds the kept activations, its input and its output.
- the backward pass runs the segments between stored points p < q from the last: it
  recomputes a[p+1..q-1] from a[p] (their forward time again), then runs backward q down to
  p+1, each activation and gradient freed after its last reader.
- the offload of a[p] runs under forward p+1; its prefetch under the last backward stage of
  the segment after p's (stage q+1), which then also holds a[p]. A copy longer than the op
  it runs under makes the step wait for the rest (copies are assumed not to queue).

The program walks the stored points left to right; a state is (point p, bytes kept before
p, p's kind, bytes of a prefetch still owed to the segment before p); each transition p -> q
checks every forward and backward peak of the stages between them against the budget and
adds their time. The answer is the fastest string of K, S, D whose peak fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ....errors import SwapError
from ...swap import Machine

KINDS = {"both": "KSD", "swap": "KS", "recompute": "KD"}


@dataclass(frozen=True)
class Chain:
    """`sizes` a[0..n] in bytes (a[0] outside: 0), `forward` and `backward` seconds of 1..n."""
    sizes: tuple[int, ...]
    forward: tuple[float, ...]
    backward: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.forward)


@dataclass(frozen=True)
class ChainPlan:
    """A string of K, S, D for a[1..n-1], its `peak` bytes and `seconds`, and the chain's
    `baseline` (everything kept, nothing recomputed or moved)."""
    decisions: str
    peak: int
    seconds: float
    baseline: float

    @property
    def overhead(self) -> float:
        return self.seconds / self.baseline - 1.0


def evaluate(chain: Chain, decisions: str, machine: Machine) -> tuple[int, float]:
    """Replay the chain's step under `decisions`: (peak bytes, seconds)."""
    s, f, b, n = chain.sizes, chain.forward, chain.backward, chain.n
    d = "K" + decisions + "K"                   # a[0] and a[n] stand as stored points
    peak, t = 0, 0.0
    for i in range(1, n + 1):                   # forward
        below = sum(s[j] for j in range(1, i - 1) if d[j] == "K")
        peak = max(peak, below + s[i - 1] + s[i])
        t += f[i - 1]
        if d[i - 1] == "S":
            t += max(0.0, machine.transfer(s[i - 1]) - f[i - 1])
    stored = [j for j in range(n + 1) if d[j] != "D"]
    for k in range(len(stored) - 1, 0, -1):     # backward, segment by segment
        p, q = stored[k - 1], stored[k]
        kept = sum(s[j] for j in range(1, p) if d[j] == "K")
        o = stored[k - 2] if k >= 2 else None
        owed = s[o] if o is not None and d[o] == "S" else 0
        t += sum(f[j - 1] for j in range(p + 1, q))         # recompute a[p+1..q-1]
        for j in range(q, p, -1):
            held = kept + sum(s[i] for i in range(p, j)) + s[j] + s[j - 1]
            peak = max(peak, held + (owed if j == p + 1 else 0))
            t += b[j - 1]
        if owed:
            t += max(0.0, machine.transfer(owed) - b[p])
    return peak, t


def best_schedule(chain: Chain, budget: int, machine: Machine, allow: str = "both"
                  ) -> ChainPlan:
    """The fastest decisions whose peak fits `budget` bytes, using the kinds `allow` names
    ("both", "swap": keep or swap, "recompute": keep or drop). SwapError when none fits."""
    kinds = KINDS.get(allow)
    if kinds is None:
        raise SwapError(f"best_schedule: allow must be one of {', '.join(KINDS)}, not {allow!r}")
    s, f, b, n = chain.sizes, chain.forward, chain.backward, chain.n
    stored_kinds = [k for k in kinds if k != "D"]
    # state (p, kept before p, kind of p, owed prefetch) -> (seconds, previous state, kind)
    start = (0, 0, "K", 0)
    table: dict[tuple, tuple] = {start: (0.0, None, None)}
    for p in range(n):
        for state in [st for st in table if st[0] == p]:
            seconds, _, _ = table[state]
            _, kept, kind, owed = state
            for q in range(p + 1, n + 1):
                if q > p + 1 and "D" not in kinds:
                    break
                cost = _segment(s, f, b, p, q, kept, kind, owed, budget, machine)
                if cost is None:
                    continue
                nxt_kept = kept + (s[p] if kind == "K" and p else 0)
                nxt_owed = s[p] if kind == "S" else 0
                for k in (stored_kinds if q < n else ["K"]):
                    new = (q, nxt_kept, k, nxt_owed)
                    if new not in table or seconds + cost < table[new][0]:
                        table[new] = (seconds + cost, state, k)
    ends = [st for st in table if st[0] == n]
    if not ends:
        raise SwapError(f"best_schedule ({allow}): no schedule of this chain fits budget "
                        f"{budget} B")
    end = min(ends, key=lambda st: table[st][0])
    decisions = ["D"] * (n - 1)
    st = end
    while table[st][1] is not None:
        prev = table[st][1]
        if st[0] < n:
            decisions[st[0] - 1] = st[2]
        st = prev
    text = "".join(decisions)
    peak, seconds = evaluate(chain, text, machine)
    return ChainPlan(text, peak, seconds, sum(f) + sum(b))


def _segment(s: Sequence[int], f: Sequence[float], b: Sequence[float], p: int, q: int,
             kept: int, kind: str, owed: int, budget: int, machine: Machine) -> float | None:
    """Seconds of the stages p+1..q, forward and backward, with a[p] stored as `kind` and
    a[p+1..q-1] dropped; None if a peak among them is above `budget`."""
    if kept + s[p] + s[p + 1] > budget:                    # forward p+1
        return None
    below = kept + (s[p] if kind == "K" else 0)
    for i in range(p + 2, q + 1):                           # forward p+2..q
        if below + s[i - 1] + s[i] > budget:
            return None
    held = kept
    for i in range(p, q):
        held += s[i]
    for j in range(q, p, -1):                               # backward q..p+1
        if held + s[j] + s[j - 1] + (owed if j == p + 1 else 0) > budget:
            return None
        held -= s[j - 1]
    t = sum(f[p:q]) + sum(f[p:q - 1]) + sum(b[p:q])        # forward, recompute, backward
    if kind == "S" and p:
        t += max(0.0, machine.transfer(s[p]) - f[p])
    if owed:
        t += max(0.0, machine.transfer(owed) - b[p])
    return t
