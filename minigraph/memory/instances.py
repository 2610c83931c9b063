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
- `realistic_buffers(n, seed)`: the liveness of a training step at the scale of real
  graphs (20,000-60,000 buffers): activations held from their forward step to their
  gradient step, short workspaces and gradients, sizes over six orders of magnitude.
- `blog_cnn_layout(graph)`: the layout the GE blog [Huawei GE] claims for its CNN block
  (`minigraph.examples.cnn_block`), which the validator rejects; `cnn_block_buffers(graph,
  hold_input)`: the same block's tensors with their real lives, to plan it right.
"""

from __future__ import annotations

import heapq
import math
import random

from ..errors import PlanError
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


CNN_TENSORS = ("input_0", "conv1_out", "relu1_out", "pool1_out")


def cnn_block_buffers(graph: Graph, hold_input: bool = True, alignment: int = 1
                      ) -> tuple[list[Buffer], list[tuple[str, str]]]:
    """Every tensor of `examples.cnn_block()` but the weights, as a buffer with its real
    life, and the ReLU's in-place hand-over (conv1_out -> relu1_out), to plan the whole
    block in one arena as the GE blog [Huawei GE] does.

    The input lives for the whole run when `hold_input` (minigraph keeps a graph input, as
    frameworks keep what the caller fed), else only until its one reader, the convolution,
    has run (a runtime that frees a fed input after use). The pool output is the graph
    output: born at the pooling step, alive at the last step.
    """
    live = liveness(graph, alignment=alignment)
    missing = [n for n in CNN_TENSORS if n not in live.intervals]
    if missing:
        raise PlanError(f"graph {graph.name!r} has no tensor {missing[0]!r}: "
                        "cnn_block_buffers wants examples.cnn_block()")
    ivs = live.intervals
    conv_step = ivs["conv1_out"].start
    buffers = [Buffer(n, ivs[n].start, ivs[n].end if hold_input or n != "input_0"
                      else conv_step, ivs[n].bytes) for n in CNN_TENSORS]
    return buffers, [("conv1_out", "relu1_out")]


def realistic_buffers(n: int, seed: int = 0) -> list[Buffer]:
    """n buffers with the liveness of a training step, fixed by `seed`; ids 0..n-1.

    It models what `liveness` gives on a real training graph of some thousand layers:
    forward step i of layer i, backward step 2L-1-i mirrored, the optimizer at step 2L.
    Each layer outputs an activation that, when the backward pass needs it (3 in 4), is
    held until the layer's gradient step (the long lives that peak at the forward/backward
    turn [Chen 2016]), else read by the next layer only; short workspaces around forward
    and backward steps; the input gradient, read by the next backward step; and a weight
    gradient, usually consumed at once by a fused update, held to the optimizer step 1 in
    10 times. Sizes span six orders of magnitude (256 B to 256 MiB, multiples of 256 B):
    activations and gradients log-uniform from 4 KiB to 64 MiB with 3% huge (up to 256
    MiB), workspaces and weight gradients from 256 B; half of the draws come from a
    palette of 64 shapes, as repeated blocks repeat them (so equal sizes recur, as GE's
    level-1 reuse expects).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise PlanError(f"realistic_buffers: n must be an integer >= 1, not {n!r}")
    rng = random.Random(seed)
    palette = [_log_size(rng, 12, 26) for _ in range(64)]

    def size(lo: int, hi: int) -> int:
        if rng.random() < 0.5:
            return rng.choice([s for s in palette if 1 << lo <= s <= 1 << hi] or palette)
        return _log_size(rng, 26, 28) if rng.random() < 0.03 else _log_size(rng, lo, hi)

    layers: list[list[tuple[str, int]]] = []        # per layer: (kind, size)
    count = 0
    while count < n:
        kinds = ["saved" if rng.random() < 0.75 else "act", "grad", "wgrad"]
        kinds += ["fwork"] * rng.choice((0, 0, 1, 2)) + ["bwork"] * rng.choice((0, 1, 1, 2))
        layer = [(k, size(8 if k.endswith("work") or k == "wgrad" else 12, 26))
                 for k in kinds]
        layers.append(layer[:n - count])
        count += len(layers[-1])
    return _layer_lives(layers, rng)


def _log_size(rng: random.Random, lo: int, hi: int) -> int:
    """A size log-uniform in [2**lo, 2**hi] bytes, a multiple of 256."""
    return max(256, int(2 ** rng.uniform(lo, hi)) // 256 * 256)


def _layer_lives(layers: list[list[tuple[str, int]]], rng: random.Random) -> list[Buffer]:
    """The buffers of `realistic_buffers`' layers, with the lives a training step gives."""
    top = 2 * len(layers)                             # the optimizer step
    out: list[Buffer] = []
    for i, layer in enumerate(layers):
        back = top - 1 - i
        for kind, size in layer:
            if kind == "saved":
                start, end = i, back
            elif kind == "act":
                start, end = i, i + 1
            elif kind == "grad":
                start, end = back, min(back + 1, top)
            elif kind == "wgrad":
                start = back
                end = top if rng.random() < 0.1 else back + rng.randint(0, 1)
            elif kind == "fwork":
                start = i
                end = i + rng.randint(0, 1)
            else:
                start = back
                end = back + rng.randint(0, 1)
            out.append(Buffer(len(out), start, end, size))
    return out
