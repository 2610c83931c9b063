"""Checks for lesson 07c's exercise (Coop's layout: which tensors the window evicts when
cheap tensors lie from the bottom of the arena and dear ones from the top) [Zhang 2023].

`hand_program` and `layout` are the lesson's own tools (a program written by hand, the
blocks of an arena in address order). The expected answer is computed here, by running
the runtime, when the check runs; a wrong answer gets a hint at the rule, not the names.
"""

from __future__ import annotations

from typing import Any

from ..runtime.dtr import DTRRuntime, OpSpec, Program, TensorSpec

#: Coop's window ranks a run of neighbours by the sum of each tensor's own cost.
OWN_COST = {"cost": lambda t, now: t.cost}

#: Exercise 1: six tensors of 100 bytes fill a 600-byte arena; `g` then needs 200.
EXERCISE_1_SIZES = dict(x=0, a=100, b=100, c=100, d=100, e=100, f=100, g=200)
EXERCISE_1_COSTS = dict(a=30.0, b=1000.0, c=10.0, d=2000.0, e=20.0, f=3000.0, g=1.0)
EXERCISE_1_ARENA = 600


def hand_program(sizes: dict[str, int], ops: list, steps: list) -> Program:
    """A program by hand: `sizes` tensor -> bytes (0: outside the arena), `ops` as
    (name, inputs, outputs, cost, in-place pairs (output, input)), `steps` in order."""
    names = list(sizes)
    ix = {n: k for k, n in enumerate(names)}
    made_by = {o: k for k, (_, _, outs, _, _) in enumerate(ops) for o in outs}
    tensors = [TensorSpec(n, sizes[n], sizes[n] == 0, made_by.get(n, -1)) for n in names]
    specs = [OpSpec(name, tuple(ix[i] for i in ins), tuple(ix[o] for o in outs), cost,
                    inplace=tuple((ix[y], ix[x]) for y, x in pairs))
             for name, ins, outs, cost, pairs in ops]
    return Program(tensors, specs, [(s, ix[t] if s == "release" else t) for s, t in steps])


def chain_ops(costs: dict[str, float], first: str = "x") -> list:
    """A chain of ops, one per tensor of `costs` in order, each reading the one before."""
    ops, prev = [], first
    for t, c in costs.items():
        ops.append((t.upper(), [prev], [t], c, []))
        prev = t
    return ops


def layout(rt: DTRRuntime) -> list[tuple[int, int, str]]:
    """(offset, bytes, tensor) of every block in use, in address order."""
    return [(at, n, rt.program.tensors[o].name) for at, n, o in rt.arena.blocks()
            if o is not None]


def exercise_1_program() -> Program:
    """Exercise 1's program: the chain x -> a -> ... -> g, each op run once."""
    ops = chain_ops(EXERCISE_1_COSTS)
    return hand_program(EXERCISE_1_SIZES, ops, [("call", k) for k in range(len(ops))])


def _evicted(partition: bool) -> list[str]:
    rt = DTRRuntime(exercise_1_program(), EXERCISE_1_ARENA, "coop", heuristic_args=OWN_COST,
                    defrag="last-resort", partition=partition)
    return list(rt.run().evicted)


def exercise_1(answer: Any) -> tuple[bool, str]:
    """Which tensors does Coop's window evict to make room for `g`, with the arena
    partitioned (`partition=True`)? A list of tensor names."""
    if isinstance(answer, str) or not hasattr(answer, "__iter__"):
        return False, "give a list of tensor names, e.g. ['a', 'b']"
    names = list(answer)
    known = [t for t in EXERCISE_1_SIZES if EXERCISE_1_SIZES[t] and t != "g"]
    unknown = [n for n in names if n not in known]
    if unknown:
        return False, f"{unknown[0]!r} is not a tensor `g` could displace; they are {known}"
    right = _evicted(True)
    if sorted(names) == sorted(right):
        cost = sum(EXERCISE_1_COSTS[t] for t in right)
        return True, f"a window of cheap neighbours, {cost:g} units of compute to lose"
    if sorted(names) == sorted(_evicted(False)):
        return False, ("that is first fit's layout (every tensor in the order it was made); "
                       "with the partition, cheap tensors fill the arena from the bottom and "
                       "dear ones from the top: lay them out first")
    if "f" in names:
        return False, "f is g's input: it must stay resident while G runs"
    return False, ("lay the tensors out as the partitioned arena does, then find the "
                   "cheapest run of neighbours that frees 200 bytes")
