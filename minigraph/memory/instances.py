"""Buffer problems to test and compare planners on.

- `ge_worked_example()`: the five tensors of the worked example [Huawei GE] (sizes and
  lifetimes read off its figures 2-8).
- `hard_instance(n, capacity, steps, seed)`: a capacity x time rectangle cut into n
  boxes by random guillotine cuts. The boxes tile the rectangle, so at every step exactly
  `capacity` bytes are alive: the theoretical minimum and the optimum are both
  `capacity`, and a planner's excess over it is pure fragmentation.
- `random_buffers(n, seed)`: lifetimes and sizes with the spread of real graphs, the
  number alive at a step bounded (steps grow with n), for scaling measurements; with
  `family=` the grader's families of random lists ("mixed", "nested", "short", "equal").
- `blog_cnn_layout(graph)`: the layout the GE blog [Huawei GE] claims for its CNN block
  (`minigraph.examples.cnn_block`), which the validator rejects.
"""

from __future__ import annotations

import heapq
import math
import random

from ..graph import Graph
from .buffers import Buffer
from .liveness import liveness


def ge_worked_example() -> list[Buffer]:
    """The worked example of [Huawei GE]: A, C 1024 B; B 2048 B; D 512 B; E 4096 B (steps 1..6).

    Level 1 of GE's reuse gives blocks AC [1,4], B [2,4], D [4,5], E [5,6]. No reuse:
    8704 B; Max block: 6656 B; GE two-level: 4608 B = the theoretical minimum.
    """
    return [Buffer("A", 1, 2, 1024), Buffer("B", 2, 4, 2048), Buffer("C", 3, 4, 1024),
            Buffer("D", 4, 5, 512), Buffer("E", 5, 6, 4096)]


def guillotine_tiling(n: int, capacity: int = 1 << 16, steps: int | None = None,
                      seed: int = 0, granule: int = 1) -> tuple[list[Buffer], dict]:
    """n boxes tiling [0, steps) x [0, capacity), and the offsets that tile it.

    Repeatedly the box of largest area is cut in two, across time or across bytes
    (chosen at random, weighted by the box's relative extent), at a random point in its
    middle half; byte cuts fall on multiples of `granule`. Buffer ids are "b0", "b1", ...
    """
    if steps is None:
        steps = max(4, int(2 * math.sqrt(n)))
    if capacity % granule:
        raise ValueError(f"capacity {capacity} is not a multiple of granule {granule}")
    cells = steps * (capacity // granule)
    if n > cells:
        raise ValueError(f"cannot cut {steps} steps x {capacity // granule} granules "
                         f"into {n} boxes")
    rng = random.Random(seed)
    heap = [(-steps * capacity, 0, (0, steps, 0, capacity))]   # (-area, tiebreak, box)
    done: list[tuple[int, int, int, int]] = []
    tick = 1
    while heap and len(heap) + len(done) < n:
        _, _, (t0, t1, y0, y1) = heapq.heappop(heap)
        w, h = t1 - t0, (y1 - y0) // granule
        if w < 2 and h < 2:
            done.append((t0, t1, y0, y1))
            continue
        across_time = h < 2 or (w >= 2 and rng.random() < (w / steps) /
                                (w / steps + h * granule / capacity))
        if across_time:
            cut = t0 + rng.randint(max(1, w // 4), max(1, (3 * w) // 4))
            parts = [(t0, cut, y0, y1), (cut, t1, y0, y1)]
        else:
            cut = y0 + granule * rng.randint(max(1, h // 4), max(1, (3 * h) // 4))
            parts = [(t0, t1, y0, cut), (t0, t1, cut, y1)]
        for p in parts:
            heapq.heappush(heap, (-(p[1] - p[0]) * (p[3] - p[2]), tick, p))
            tick += 1
    boxes = sorted(done + [e[2] for e in heap], key=lambda b: (b[0], b[2]))
    buffers = [Buffer(f"b{k}", t0, t1 - 1, y1 - y0) for k, (t0, t1, y0, y1) in
               enumerate(boxes)]
    return buffers, {f"b{k}": box[2] for k, box in enumerate(boxes)}


def hard_instance(n: int, capacity: int = 1 << 16, steps: int | None = None, seed: int = 0,
                  granule: int = 1) -> list[Buffer]:
    """n buffers that tile a `capacity` x `steps` rectangle exactly (see
    `guillotine_tiling`): optimum = theoretical minimum = `capacity`."""
    return guillotine_tiling(n, capacity, steps, seed, granule)[0]


def random_buffers(n: int, seed: int = 0, steps: int | None = None, max_life: int = 64,
                   min_size: int = 256, max_size: int = 4 << 20,
                   family: str = "log-uniform") -> list[Buffer]:
    """n random buffers, fixed by `seed`.

    "log-uniform": log-uniform lifetimes (1..max_life steps) and sizes (multiples of
    256 B between min_size and max_size), starting uniformly over `steps` (default
    n // 2, so about 30 buffers are alive at a step whatever n is); ids 0..n-1.
    The grader's families over `steps` (default 20), ids "b0", "b1", ...: "mixed" (any
    interval, sizes 1..2048 B with some 0 and odd sizes), "nested" (intervals around the
    middle), "short" (1 to 3 steps), "equal" (mixed intervals, all 512 B).
    """
    rng = random.Random(seed)
    if family in GRADER_FAMILIES:
        return [_grader_buffer(rng, f"b{k}", 20 if steps is None else steps, family)
                for k in range(n)]
    if family != "log-uniform":
        raise ValueError(f"unknown family {family!r}; known: log-uniform, "
                         f"{', '.join(GRADER_FAMILIES)}")
    steps = steps if steps is not None else max(n // 2, 8)
    out = []
    for k in range(n):
        life = int(math.exp(rng.uniform(0, math.log(max_life + 1))))
        start = rng.randrange(steps)
        size = int(math.exp(rng.uniform(math.log(min_size), math.log(max_size))))
        size = max(256, size // 256 * 256)
        out.append(Buffer(k, start, start + max(life, 1) - 1, size))
    return out


GRADER_FAMILIES = ("mixed", "nested", "short", "equal")


def _grader_buffer(rng: random.Random, name: str, steps: int, family: str) -> Buffer:
    """One buffer of a grader family (the draws, in this order, fix the grading cases)."""
    if family == "short":
        s = rng.randrange(steps)
        e = min(steps - 1, s + rng.randint(0, 2))
    elif family == "nested":
        s = rng.randint(0, steps // 2)
        e = max(s, steps - 1 - rng.randint(0, steps // 2))
    else:
        s, e = sorted((rng.randrange(steps), rng.randrange(steps)))
    if family == "equal":
        size = 512
    elif rng.random() < 0.2:
        size = rng.choice((0, 1, 7, 64, 100, 512, 4096))
    else:
        size = rng.randint(1, 2048)
    return Buffer(name, s, e, size)


def blog_cnn_layout(graph: Graph, alignment: int = 1
                    ) -> tuple[list[Buffer], dict[str, int], list[tuple[str, str]]]:
    """The GE blog's layout of `examples.cnn_block()` as buffers and offsets: every
    activation at offset 0 (relu1_out in place of conv1_out, pool1_out "reusing"
    conv1_out's memory).

    The pool output is a graph output and so not planned here; to test the blog's claim
    it is put in the arena anyway, with its true lifetime. Check it with
    `validate_offsets(buffers, offsets, handovers=pairs)`.
    """
    live = liveness(graph, alignment=alignment)
    names = ("conv1_out", "relu1_out", "pool1_out")
    buffers = [Buffer(n, live.intervals[n].start, live.intervals[n].end,
                      live.intervals[n].bytes) for n in names]
    return buffers, dict.fromkeys(names, 0), [("conv1_out", "relu1_out")]
