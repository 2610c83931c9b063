"""Synthetic training traces in the DTR simulator's format (simrd_log.py), written to exercise
every instruction simrd replays [Kirisame 2021]: views (ALIAS), multi-output ops, MUTATE
(gradient accumulation, and an optimizer's in-place update of a CONSTANT as `addcdiv_`),
constants (parameters at the start, optimizer state appearing mid-run), COPY, COPY_FROM
and RELEASE.

    lines = generated_trace("unet", 3)        # JSON lines; replay_trace(lines, ratio=0.5)
    GENERATED                                  # the (family, size) pairs of the benchmark

A model is written forward op by op on a tape; the backward pass is derived from the tape
(one `<op>_backward` per forward op, multi-output when several inputs need a gradient;
a second gradient of one tensor is added in place with MUTATE `add_`), then an optimizer
step updates every parameter in place. Each name is RELEASEd right after its last use.
Sizes and costs are drawn from a seeded generator, so a (family, size, seed) is one trace.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

from ..errors import GraphError

FAMILIES = ("chain", "unet", "resnet", "lstm")
GENERATED = (("chain", 12), ("chain", 40), ("unet", 2), ("unet", 4), ("resnet", 3),
             ("resnet", 8), ("lstm", 6), ("lstm", 24))


class _Tape:
    """Forward ops with the names they read, write and save; writes the whole trace."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.ops: list[tuple] = []      # (kind, name, args, results, time, extra)
        self.params: list[str] = []
        self.sizes: dict[str, int] = {}
        self.n = 0

    def fresh(self, base: str) -> str:
        self.n += 1
        return f"{base}{self.n}"

    def size(self, lo: int = 64, hi: int = 512) -> int:
        return 4 * self.rng.randint(lo, hi)

    def cost(self, lo: int = 1000, hi: int = 20000) -> int:
        return self.rng.randint(lo, hi)

    def param(self, size: int | None = None) -> str:
        w = self.fresh("w")
        self.sizes[w] = size or self.size(16, 128)
        self.params.append(w)
        self.ops.append(("const", w, (), (w,), 0, None))
        return w

    def op(self, name: str, args: tuple[str, ...], sizes: tuple[int, ...],
           aliases: tuple[int, ...] | None = None, time: int | None = None) -> list[str]:
        """A forward CALL; `aliases[i]` is the argument output i views, or -1."""
        aliases = aliases or (-1,) * len(sizes)
        outs = [self.fresh("t") for _ in sizes]
        for o, s, a in zip(outs, sizes, aliases):
            self.sizes[o] = self.sizes[args[a]] if a >= 0 else s
        self.ops.append(("call", name, tuple(args), tuple(outs),
                         self.cost() if time is None else time, tuple(aliases)))
        return outs

    def copy(self, src: str) -> str:
        dst = self.fresh("c")
        self.sizes[dst] = self.sizes[src]
        self.ops.append(("copy", "", (src,), (dst,), 0, None))
        return dst

    def copy_from(self, dst: str, src: str) -> None:
        """`dst` (an existing name) now refers to `src`'s tensor (COPY_FROM)."""
        self.ops.append(("copy_from", "", (src,), (dst,), 0, None))

    # The backward pass and the optimizer step, derived from the tape ---------------------
    def backward(self, loss: str) -> None:
        grads: dict[str, str] = {loss: self.op("ones_like", (loss,), (self.sizes[loss],))[0]}
        self.ops.append(("annotate", "BACKWARD", (), (), 0, None))
        for kind, name, args, outs, time, aliases in list(reversed(self.ops)):
            if kind != "call" or not any(o in grads for o in outs) or name == "ones_like":
                continue
            need = [a for a in dict.fromkeys(args) if a in self.sizes and
                    (a in self.params or not a.startswith("x"))]
            if not need:
                continue
            gin = tuple(grads[o] for o in outs if o in grads)
            if aliases and all(x >= 0 for x in aliases) and len(need) == 1:
                g = self.op(f"{name}_backward", gin[:1], (0,), (0,), time // 4)[0]
            else:
                g_outs = self.op(f"{name}_backward", gin + args,
                                 tuple(self.sizes[a] for a in need), None, 2 * time)
                g = None
            for k, a in enumerate(need):
                ga = g if g is not None else g_outs[k]
                if a in grads:
                    self.ops.append(("mutate", "add_", (grads[a], ga), (), self.cost(50, 200),
                                     (0,)))
                else:
                    grads[a] = ga
        for w in self.params:
            if w not in grads:
                continue
            m = self.fresh("m")          # optimizer state, a constant appearing mid-run
            self.sizes[m] = self.sizes[w]
            self.ops.append(("const", m, (), (m,), 0, None))
            self.ops.append(("mutate", "mul_", (m, grads[w]), (), self.cost(50, 200), (0,)))
            self.ops.append(("mutate", "addcdiv_", (w, m, grads[w]), (), self.cost(50, 200),
                             (0,)))

    def lines(self, keep: tuple[str, ...] = ()) -> list[str]:
        """The trace: each name RELEASEd after its last use (parameters, optimizer state
        and `keep` stay referenced to the end, as simrd's outputs)."""
        last: dict[str, int] = {}
        for k, (_, _, args, outs, _, _) in enumerate(self.ops):
            for x in args + outs:
                last[x] = k
        stay = set(self.params) | {n for kind, n, *_ in self.ops if kind == "const"} | set(keep)
        out = [_j(INSTRUCTION="ANNOTATE", ANNOTATION="START")]
        for k, (kind, name, args, outs, time, extra) in enumerate(self.ops):
            if kind == "const":
                out += [_j(INSTRUCTION="CONSTANT", NAME=name),
                        _j(INSTRUCTION="MEMORY", NAME=name, MEMORY=str(self.sizes[name]))]
            elif kind == "annotate":
                out.append(_j(INSTRUCTION="ANNOTATE", ANNOTATION=name))
            elif kind == "copy":
                out.append(_j(INSTRUCTION="COPY", DST=outs[0], SRC=args[0]))
            elif kind == "copy_from":
                out.append(_j(INSTRUCTION="COPY_FROM", DST=outs[0], SRC=args[0]))
            elif kind == "mutate":
                out.append(_j(INSTRUCTION="MUTATE", NAME=name, ARGS=list(args),
                              MUTATE=list(extra), TIME=str(time)))
            else:
                out.append(_j(INSTRUCTION="CALL", NAME=name, ARGS=list(args),
                              RESULT=list(outs), TIME=str(time)))
                for o, a in zip(outs, extra):
                    out += [_j(INSTRUCTION="MEMORY", NAME=o,
                               MEMORY=str(0 if a >= 0 else self.sizes[o])),
                            _j(INSTRUCTION="ALIAS", NAME=o, ALIAS=str(a))]
            for x in dict.fromkeys(args + outs):
                if last.get(x) == k and x not in stay:
                    out.append(_j(INSTRUCTION="RELEASE", NAME=x))
        return out


def _j(**kw: str | list) -> str:
    return json.dumps(kw)


def _chain(t: _Tape, n: int) -> str:
    """An MLP: linear + relu per layer, a reshape view every third layer, a kept COPY."""
    x = t.op("input", (), (t.size(),), None, 1)[0]
    h = x
    kept = None
    for i in range(n):
        w = t.param()
        h = t.op("linear", (h, w), (t.size(),))[0]
        h = t.op("relu", (h,), (t.sizes[h],), None, t.cost(100, 500))[0]
        if i % 3 == 2:
            h = t.op("view", (h,), (0,), (0,), 10)[0]
        if i == n // 2:
            kept = t.copy(h)
    h = t.op("sum", (h,) + ((kept,) if kept else ()), (4,))[0]
    return h


def _unet(t: _Tape, depth: int) -> str:
    """Down: conv + batch norm (three outputs) + max pool with indices (two outputs); up:
    transposed conv, concat with the skip, conv."""
    h = t.op("input", (), (t.size(256, 1024),), None, 1)[0]
    skips = []
    for _ in range(depth):
        h = t.op("conv", (h, t.param()), (t.size(256, 1024),))[0]
        h, _mean, _var = t.op("batch_norm", (h, t.param(64)), (t.sizes[h], 64, 64))
        skips.append(h)
        h, _idx = t.op("max_pool_with_indices", (h,), (t.sizes[h] // 4, t.sizes[h] // 8))
    h = t.op("conv", (h, t.param()), (t.size(64, 256),))[0]
    for s in reversed(skips):
        h = t.op("conv_transpose", (h, t.param()), (t.sizes[s],))[0]
        h = t.op("cat", (h, s), (t.sizes[h] + t.sizes[s],), None, t.cost(200, 800))[0]
        h = t.op("conv", (h, t.param()), (t.size(256, 1024),))[0]
    return t.op("mse", (h,), (4,))[0]


def _resnet(t: _Tape, blocks: int) -> str:
    """Residual blocks y = relu(x + conv(relu(conv(x)))), a transposed view in the middle."""
    h = t.op("input", (), (t.size(256, 768),), None, 1)[0]
    h = t.op("conv", (h, t.param()), (t.sizes[h],))[0]
    for b in range(blocks):
        y = t.op("conv", (h, t.param()), (t.sizes[h],))[0]
        y = t.op("relu", (y,), (t.sizes[y],), None, t.cost(100, 400))[0]
        if b % 2:
            y = t.op("transpose", (y,), (0,), (0,), 5)[0]
        y = t.op("conv", (y, t.param()), (t.sizes[h],))[0]
        h = t.op("add", (h, y), (t.sizes[h],), None, t.cost(100, 400))[0]
    return t.op("cross_entropy", (h, t.param(64)), (4,))[0]


def _lstm(t: _Tape, steps: int) -> str:
    """An LSTM over `steps` time steps: gates = linear(x_t, h, W) chunked into four views
    (one op, four ALIAS outputs), c = f*c + i*g, h = o*tanh(c); a state name follows the
    latest h (COPY_FROM); the loss reads every h and the state."""
    w, u = t.param(), t.param()
    n = t.size(64, 256)
    h = t.op("zeros", (), (n,), None, 1)[0]
    c = t.op("zeros", (), (n,), None, 1)[0]
    state = t.copy(h)
    hs = []
    for _ in range(steps):
        x = t.op("embed", (w,), (n,), None, t.cost(100, 300))[0]
        g = t.op("linear", (x, h, u), (4 * n,))[0]
        i, f, gg, o = t.op("chunk", (g,), (0, 0, 0, 0), (0, 0, 0, 0), 20)
        c = t.op("lstm_c", (f, c, i, gg), (n,), None, t.cost(300, 900))[0]
        h = t.op("lstm_h", (o, c), (n,), None, t.cost(300, 900))[0]
        hs.append(h)
        t.copy_from(state, h)
    return t.op("loss", (*hs, state), (4,))[0]


BUILDERS: dict[str, Callable[[_Tape, int], str]] = {
    "chain": _chain, "unet": _unet, "resnet": _resnet, "lstm": _lstm}


def generated_trace(family: str, size: int, seed: int = 0) -> list[str]:
    """The training trace of `family` ("chain" layers, "unet" depth, "resnet" blocks,
    "lstm" time steps) at `size`, as JSON lines (seeded: the same arguments, the same
    trace)."""
    if family not in BUILDERS:
        raise GraphError(f"unknown trace family {family!r}; known: {', '.join(FAMILIES)}")
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise GraphError(f"trace size must be an integer >= 1, not {size!r}")
    t = _Tape(seed)
    loss = BUILDERS[family](t, size)
    t.backward(loss)
    return t.lines(keep=(loss,))
